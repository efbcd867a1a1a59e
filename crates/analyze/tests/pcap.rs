//! pcap/pcapng pair importer: captures written byte by byte with known
//! timestamps, a lost and a reordered probe; truncation; non-captures; and a
//! capture written by the real tcpdump when it is installed.

use std::path::PathBuf;

use nflab_analyze::*;
use nflab_wire::{ProbeSpec, ProbeTemplate};

fn tmp(name: &str) -> PathBuf {
    let d = nflab_testkit::scratch_dir("analyze-pcap");
    d.join(name)
}

fn probe(flow: u16, seq: u64) -> Vec<u8> {
    let t = ProbeTemplate::new(&ProbeSpec {
        flow,
        frame_bytes: 80,
        ..ProbeSpec::default()
    })
    .unwrap();
    let mut f = vec![0u8; t.len()];
    t.write(&mut f, seq, 42);
    f
}

/// An IPv4/UDP frame whose payload is not a probe.
fn plain_udp(payload: &[u8]) -> Vec<u8> {
    let mut f = probe(0, 0);
    let at = 14 + 20 + 8;
    f.truncate(at);
    f.extend_from_slice(payload);
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    let udp_len = (f.len() - 34) as u16;
    f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    f[40..42].copy_from_slice(&[0, 0]); // no UDP checksum
    f
}

struct W {
    big: bool,
    b: Vec<u8>,
}

impl W {
    fn new(big: bool) -> W {
        W { big, b: Vec::new() }
    }
    fn u16(&mut self, v: u16) {
        let x = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.b.extend_from_slice(&x);
    }
    fn u32(&mut self, v: u32) {
        let x = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.b.extend_from_slice(&x);
    }
    fn pad(&mut self) {
        while !self.b.len().is_multiple_of(4) {
            self.b.push(0);
        }
    }
}

/// Classic pcap, µs or ns magic, either byte order.
fn pcap(big: bool, nanos: bool, linktype: u32, pkts: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = W::new(big);
    w.u32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
    w.u16(2);
    w.u16(4);
    w.u32(0);
    w.u32(0);
    w.u32(65535);
    w.u32(linktype);
    for (ts, d) in pkts {
        w.u32((ts / 1_000_000_000) as u32);
        let frac = ts % 1_000_000_000;
        w.u32(if nanos { frac } else { frac / 1000 } as u32);
        w.u32(d.len() as u32);
        w.u32(d.len() as u32);
        w.b.extend_from_slice(d);
    }
    w.b
}

/// pcapng: SHB, IDB with `if_tsresol` = 10^-`resol` s and `if_tsoffset`,
/// an SPB and an unknown block (both skipped), EPBs.
fn pcapng(big: bool, resol: u8, offset_s: u64, pkts: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = W::new(big);
    // SHB with no options.
    w.u32(0x0a0d_0d0a);
    w.u32(28);
    w.u32(0x1a2b_3c4d);
    w.u16(1);
    w.u16(0);
    w.u32(u32::MAX);
    w.u32(u32::MAX);
    w.u32(28);
    // IDB: Ethernet, if_tsresol, if_tsoffset, opt_endofopt.
    let mut body = W::new(big);
    body.u16(1);
    body.u16(0);
    body.u32(0);
    body.u16(9);
    body.u16(1);
    body.b.extend_from_slice(&[resol, 0, 0, 0]);
    body.u16(14);
    body.u16(8);
    body.b.extend_from_slice(&if big {
        offset_s.to_be_bytes()
    } else {
        offset_s.to_le_bytes()
    });
    body.u16(0);
    body.u16(0);
    let len = 12 + body.b.len() as u32;
    w.u32(1);
    w.u32(len);
    w.b.extend_from_slice(&body.b);
    w.u32(len);
    // SPB (no timestamp) and a custom block type.
    let spb = probe(9, 9);
    w.u32(3);
    let len = 16 + spb.len().div_ceil(4) * 4;
    w.u32(len as u32);
    w.u32(spb.len() as u32);
    w.b.extend_from_slice(&spb);
    w.pad();
    w.u32(len as u32);
    w.u32(0x0bad);
    w.u32(16);
    w.u32(0xdead_beef);
    w.u32(16);
    let unit = 10u64.pow(9 - u32::from(resol));
    for (ts, d) in pkts {
        let t = (ts - offset_s * 1_000_000_000) / unit;
        let len = 32 + d.len().div_ceil(4) * 4;
        w.u32(6);
        w.u32(len as u32);
        w.u32(0);
        w.u32((t >> 32) as u32);
        w.u32(t as u32);
        w.u32(d.len() as u32);
        w.u32(d.len() as u32);
        w.b.extend_from_slice(d);
        w.pad();
        w.u32(len as u32);
    }
    w.b
}

const T0: u64 = 1_700_000_000_000_000_000;

/// Flow 1: probes seq 100..106 (position 0..5) sent every 10 µs; flow 2: seq
/// 7, 8. In POST, flow 1 seq 104 is lost and 102 arrives after 103; a
/// non-probe packet is there too. `q` is the timestamp quantum.
struct Scenario {
    pre: Vec<(u64, Vec<u8>)>,
    post: Vec<(u64, Vec<u8>)>,
    /// (flow, position in PRE, latency) in POST order.
    expect: Vec<(u16, u64, i64)>,
}

fn scenario(q: u64) -> Scenario {
    let mut pre = Vec::new();
    let mut tx = std::collections::HashMap::new();
    for (i, (flow, seq)) in [
        (1, 100),
        (1, 101),
        (2, 7),
        (1, 102),
        (1, 103),
        (1, 104),
        (2, 8),
        (1, 105),
    ]
    .into_iter()
    .enumerate()
    {
        let t = T0 + i as u64 * 10_000;
        tx.insert((flow, seq), t);
        pre.push((t, probe(flow, seq)));
    }
    // (flow, seq, position, latency in quanta)
    let arrivals: [(u16, u64, u64, u64); 7] = [
        (1, 100, 0, 5_003),
        (1, 101, 1, 5_010),
        (2, 7, 0, 7_000),
        (1, 103, 3, 5_001),
        (1, 102, 2, 30_017),
        (2, 8, 1, 6_999),
        (1, 105, 5, 5_000),
    ];
    let mut post = Vec::new();
    let mut expect = Vec::new();
    for (flow, seq, pos, l) in arrivals {
        let lat = l * q; // a whole number of timestamp quanta
        let rx = tx[&(flow, seq)] + lat;
        post.push((rx, probe(flow, seq)));
        expect.push((flow, pos, lat as i64));
    }
    post.sort_by_key(|p| p.0);
    // POST order is rx order; recompute expectations in that order.
    let mut order: Vec<usize> = (0..expect.len()).collect();
    let rxs: Vec<u64> = arrivals
        .iter()
        .zip(&expect)
        .map(|(a, e)| tx[&(a.0, a.1)] + e.2 as u64)
        .collect();
    order.sort_by_key(|&i| rxs[i]);
    let expect = order.iter().map(|&i| expect[i]).collect();
    post.insert(2, (T0 + 12_345_000, plain_udp(b"not a probe")));
    Scenario { pre, post, expect }
}

fn check(pre_bytes: Vec<u8>, post_bytes: Vec<u8>, name: &str, sc: &Scenario) {
    let expect = &sc.expect;
    let pre = tmp(&format!("{name}-pre"));
    let post = tmp(&format!("{name}-post"));
    std::fs::write(&pre, pre_bytes).unwrap();
    std::fs::write(&post, post_bytes).unwrap();
    let pair = read_pcap_pair(&pre, &post).unwrap();
    assert!(!pair.by_hash);
    assert!(pair.problem.is_none(), "{:?}", pair.problem);
    let got: Vec<(u16, u64, i64)> = pair
        .records
        .iter()
        .map(|r| (r.flow, r.seq, r.rx_ns as i64 - r.tx_ns as i64))
        .collect();
    assert_eq!(&got, expect, "{name}");
    let sent: Vec<(u16, u64)> = pair.sent.iter().map(|f| (f.flow, f.sent)).collect();
    assert_eq!(sent, vec![(1, 6), (2, 2)]);
    let fa =
        analyze_pcap_pair(&pre, &post, &AnalysisConfig::default(), &Options::default()).unwrap();
    let p = fa.analysis.summary.packets;
    assert_eq!(
        (p.sent, p.received, p.lost, p.reordered, p.duplicated),
        (8, 7, 1, 1, 0),
        "{name}"
    );
    assert!(fa.problem.is_none());
    let s = &fa.analysis.summary;
    assert!(
        s.notes.iter().any(|n| n.contains("without an nflab probe")),
        "{:?}",
        s.notes
    );
    let max = expect.iter().map(|e| e.2).max();
    assert_eq!(s.latency_ns.max, max);
}

#[test]
fn classic_pcap_micro_and_nano_both_byte_orders() {
    let s = scenario(1000);
    check(
        pcap(false, false, 1, &s.pre),
        pcap(false, false, 1, &s.post),
        "us-le",
        &s,
    );
    check(
        pcap(true, false, 1, &s.pre),
        pcap(true, false, 1, &s.post),
        "us-be",
        &s,
    );
    let s = scenario(1);
    check(
        pcap(false, true, 1, &s.pre),
        pcap(false, true, 1, &s.post),
        "ns-le",
        &s,
    );
    check(
        pcap(true, true, 1, &s.pre),
        pcap(true, true, 1, &s.post),
        "ns-be",
        &s,
    );
    // Latencies of the ns scenario are not whole µs.
    assert!(s.expect.iter().any(|e| e.2 % 1000 != 0));
    assert_eq!(s.expect[0], (1, 0, 5_003));
}

#[test]
fn pcapng_with_tsresol_and_offset_both_byte_orders() {
    let s = scenario(1);
    check(
        pcapng(false, 9, 0, &s.pre),
        pcapng(false, 9, 0, &s.post),
        "ng-le",
        &s,
    );
    let s = scenario(100);
    check(
        pcapng(true, 7, 1_000_000_000, &s.pre),
        pcapng(true, 7, 1_000_000_000, &s.post),
        "ng-be",
        &s,
    );
    // Mixed: PRE classic, POST pcapng.
    let s = scenario(1000);
    check(
        pcap(false, false, 1, &s.pre),
        pcapng(true, 6, 5, &s.post),
        "mixed",
        &s,
    );
}

#[test]
fn raw_ip_link_type() {
    let s = scenario(1);
    let strip = |v: &[(u64, Vec<u8>)]| -> Vec<(u64, Vec<u8>)> {
        v.iter().map(|(t, d)| (*t, d[14..].to_vec())).collect()
    };
    check(
        pcap(false, true, 101, &strip(&s.pre)),
        pcap(true, true, 228, &strip(&s.post)),
        "raw",
        &s,
    );
}

#[test]
fn truncated_post_keeps_records_before_the_cut() {
    let s = scenario(1);
    let pre = tmp("trunc-pre.pcap");
    let post = tmp("trunc-post.pcap");
    std::fs::write(&pre, pcap(false, true, 1, &s.pre)).unwrap();
    let full = pcap(false, true, 1, &s.post);
    // Cut in the middle of the 6th packet (the junk packet is the 3rd).
    let rec = 16 + s.post[0].1.len();
    let junk = 16 + s.post[2].1.len();
    let cut = 24 + 4 * rec + junk + 20;
    std::fs::write(&post, &full[..cut]).unwrap();
    let pair = read_pcap_pair(&pre, &post).unwrap();
    let got: Vec<(u16, u64, i64)> = pair
        .records
        .iter()
        .map(|r| (r.flow, r.seq, r.rx_ns as i64 - r.tx_ns as i64))
        .collect();
    assert_eq!(got, s.expect[..4].to_vec());
    let p = pair.problem.expect("truncation reported");
    assert!(p.contains(&post.display().to_string()), "{p}");
    assert!(p.contains(&format!("byte {}", 24 + 4 * rec + junk)), "{p}");
    let fa =
        analyze_pcap_pair(&pre, &post, &AnalysisConfig::default(), &Options::default()).unwrap();
    assert!(fa.problem.is_some());
    assert_eq!(fa.analysis.summary.packets.received, 4);
    assert!(matches!(fa.tail, TailState::Truncated { .. }));

    // Truncated pcapng: cut inside the last EPB.
    let ng = pcapng(false, 9, 0, &s.post);
    std::fs::write(&post, &ng[..ng.len() - 10]).unwrap();
    let pair = read_pcap_pair(&pre, &post).unwrap();
    assert_eq!(pair.records.len(), 6);
    assert!(pair.problem.unwrap().contains("truncated at byte"));

    // Every prefix of both formats: never a panic.
    for bytes in [full, ng] {
        for n in 0..bytes.len() {
            std::fs::write(&post, &bytes[..n]).unwrap();
            let _ = read_pcap_pair(&pre, &post);
        }
    }
}

#[test]
fn non_capture_and_probe_less_captures_are_errors() {
    let s = scenario(1);
    let pre = tmp("err-pre.pcap");
    std::fs::write(&pre, pcap(false, true, 1, &s.pre)).unwrap();
    let junk = tmp("not-a-capture.txt");
    std::fs::write(&junk, b"seq,tx_ns,rx_ns\n1,2,3\n").unwrap();
    let e = read_pcap_pair(&pre, &junk).unwrap_err().to_string();
    assert!(
        e.contains("not-a-capture.txt") && e.contains("byte 0"),
        "{e}"
    );
    let e = read_pcap_pair(&junk, &pre).unwrap_err().to_string();
    assert!(e.contains("not-a-capture.txt"), "{e}");
    let empty = tmp("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let e = read_pcap_pair(&pre, &empty).unwrap_err().to_string();
    assert!(e.contains("empty.pcap") && e.contains("byte 0"), "{e}");

    let noprobe = tmp("noprobe.pcap");
    let pkts: Vec<(u64, Vec<u8>)> = (0..3)
        .map(|i| (T0 + i * 1000, plain_udp(format!("x{i}").as_bytes())))
        .collect();
    std::fs::write(&noprobe, pcap(false, true, 1, &pkts)).unwrap();
    let e = read_pcap_pair(&pre, &noprobe).unwrap_err().to_string();
    assert!(
        e.contains("noprobe.pcap") && e.contains("no nflab probe"),
        "{e}"
    );
    // A header-only capture as POST.
    let hdr = tmp("header-only.pcap");
    std::fs::write(&hdr, pcap(true, false, 1, &[])).unwrap();
    let e = read_pcap_pair(&pre, &hdr).unwrap_err().to_string();
    assert!(e.contains("header-only.pcap"), "{e}");
}

#[test]
fn payload_hash_matching_without_probes() {
    let pre_pkts: Vec<(u64, Vec<u8>)> = (0..5u64)
        .map(|i| (T0 + i * 1000, plain_udp(format!("payload {i}").as_bytes())))
        .collect();
    // POST: 0, 2, 1, 4 (3 lost), latencies 100 + i ns; TTL changed by the DUT.
    let post_pkts: Vec<(u64, Vec<u8>)> = [0u64, 2, 1, 4]
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let mut d = pre_pkts[i as usize].1.clone();
            d[22] -= 1;
            (T0 + 5000 + k as u64 * 1000, d)
        })
        .collect();
    let pre = tmp("hash-pre.pcap");
    let post = tmp("hash-post.pcapng");
    std::fs::write(&pre, pcap(false, true, 1, &pre_pkts)).unwrap();
    std::fs::write(&post, pcapng(false, 9, 0, &post_pkts)).unwrap();
    let pair = read_pcap_pair(&pre, &post).unwrap();
    assert!(pair.by_hash);
    let got: Vec<(u64, i64)> = pair
        .records
        .iter()
        .map(|r| (r.seq, r.rx_ns as i64 - r.tx_ns as i64))
        .collect();
    assert_eq!(got, vec![(0, 5000), (2, 4000), (1, 6000), (4, 4000)]);
    let fa =
        analyze_pcap_pair(&pre, &post, &AnalysisConfig::default(), &Options::default()).unwrap();
    let p = fa.analysis.summary.packets;
    assert_eq!((p.sent, p.received, p.lost, p.reordered), (5, 4, 1, 1));
}

/// Kills and reaps the tcpdump child on every exit path.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A capture written by the real tcpdump on the loopback interface: the
/// same file as PRE and POST gives N probes with latency 0.
#[test]
fn capture_written_by_tcpdump() {
    // Capturing needs root (a counted skip otherwise) and tcpdump (a failure
    // naming the package otherwise).
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("tcpdump", "tcpdump") {
        return;
    }
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    for nano in [false, true] {
        let file = tmp(&format!("tcpdump-{nano}.pcap"));
        let mut cmd = std::process::Command::new("tcpdump");
        cmd.args(["-i", "lo", "-U", "-n", "-c", "5", "-w"])
            .arg(&file)
            .args(["udp", "and", "dst", "port", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if nano {
            cmd.arg("--time-stamp-precision=nano");
        }
        let child = Child(cmd.spawn().expect("start tcpdump"));
        let mut child = child;
        // Wait for "listening on" on stderr.
        let mut err = child.0.stderr.take().unwrap();
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while std::io::Read::read(&mut err, &mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        let line = String::from_utf8_lossy(&line).to_string();
        assert!(
            line.contains("listening"),
            "tcpdump cannot capture here: {line}"
        );
        let payload = |seq: u64| {
            let f = probe(3, seq);
            f[42..].to_vec()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            for seq in 0..5 {
                sock.send_to(&payload(seq), ("127.0.0.1", port)).unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            if child.0.try_wait().unwrap().is_some() || std::time::Instant::now() > deadline {
                break;
            }
        }
        drop(child);
        let pair = read_pcap_pair(&file, &file).unwrap();
        assert!(!pair.records.is_empty(), "{:?}", pair.notes);
        assert!(pair
            .records
            .iter()
            .all(|r| r.flow == 3 && r.rx_ns == r.tx_ns));
        assert!(pair
            .records
            .iter()
            .all(|r| r.tx_ns > 1_600_000_000_000_000_000));
        let magic = std::fs::read(&file).unwrap()[..4].to_vec();
        let want: u32 = if nano { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        assert!(magic == want.to_le_bytes() || magic == want.to_be_bytes());
    }
}
