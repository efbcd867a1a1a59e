//! The importers over bytes in memory (`analyze_trex_bytes`,
//! `analyze_csv_bytes`, `read_csv_from`, `CaptureReader::from_reader`) give
//! exactly what the same importers give for the file holding those bytes.

use std::path::{Path, PathBuf};

use nflab_analyze::*;

fn tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let d = nflab_testkit::scratch_dir("analyze-bytes");
    let p = d.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn json(fa: &FileAnalysis) -> String {
    format!(
        "{}\n{:?}\n{:?}",
        fa.analysis.summary.to_json_pretty(),
        fa.tail,
        fa.problem
    )
}

/// A TRex-fork trace: 5 µs spacing, latency 20 µs with a spike, and
/// `junk` trailing bytes.
fn trex(n: usize, junk: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for i in 0..n {
        let tx = 3.0 + i as f64 * 5e-6;
        let lat = if i % 97 == 5 {
            400e-6
        } else {
            20e-6 + (i % 7) as f64 * 1e-7
        };
        b.extend_from_slice(&tx.to_le_bytes());
        b.extend_from_slice(&(tx + lat).to_le_bytes());
    }
    b.extend(std::iter::repeat_n(0xab, junk));
    b
}

#[test]
fn trex_bytes_analyse_as_the_file() {
    let cfg = AnalysisConfig {
        anomalies: vec!["2:250us".parse().unwrap(), "1:p50*3".parse().unwrap()],
        ..AnalysisConfig::default()
    };
    // The split pass (default options) and the engine's pass (windows).
    let windows = Options {
        window_ns: Some(100_000),
        ..Options::default()
    };
    for (n, junk) in [(1, 0), (3, 5), (1000, 0), (70_000, 9)] {
        let bytes = trex(n, junk);
        let path = tmp(&format!("t{n}.data"), &bytes);
        for opts in [Options::default(), windows.clone()] {
            let file = analyze_file_with(&path, &cfg, &opts, Some(Format::Trex)).unwrap();
            let mem = analyze_trex_bytes(&path, &bytes, &cfg, &opts).unwrap();
            assert_eq!(json(&mem), json(&file), "{n} records");
            assert_eq!(file.analysis.summary.packets.received, n as u64);
        }
    }
    // Less than one record: the same error.
    let path = tmp("short.data", &[1; 15]);
    let file = analyze_file_with(&path, &cfg, &Options::default(), Some(Format::Trex));
    let mem = analyze_trex_bytes(&path, &[1; 15], &cfg, &Options::default());
    assert_eq!(
        mem.err().map(|e| e.to_string()),
        file.err().map(|e| e.to_string())
    );
}

#[test]
fn csv_bytes_analyse_and_read_as_the_file() {
    let good = "seq,tx_ns,rx_ns,flow\n0,100,150,1\n2,200,260,1\n\n1,300,330,2\n";
    let bad_row = "seq,tx_ns,rx_ns\n0,100,150\n1,x,3\n2,300,330\n";
    let bad_header = "seq,tx\n0,1\n";
    let trim = Options {
        trim_start_ns: 50,
        ..Options::default()
    };
    for (k, text) in [good, bad_row, bad_header, ""].into_iter().enumerate() {
        let path = tmp(&format!("c{k}.csv"), text.as_bytes());
        let cfg = AnalysisConfig::default();
        for opts in [Options::default(), trim.clone()] {
            let file = analyze_file_with(&path, &cfg, &opts, Some(Format::Csv));
            let mem = analyze_csv_bytes(&path, text.as_bytes(), &cfg, &opts);
            match (file, mem) {
                (Ok(f), Ok(m)) => assert_eq!(json(&m), json(&f), "{text:?}"),
                (Err(f), Err(m)) => assert_eq!(m.to_string(), f.to_string()),
                (f, m) => panic!("{text:?}: file {:?} vs bytes {:?}", f.is_ok(), m.is_ok()),
            }
        }
        let file = read_csv(&path).map_err(|e| e.to_string());
        let mem = read_csv_from(&path, text.as_bytes()).map_err(|e| e.to_string());
        assert_eq!(mem, file, "{text:?}");
    }
}

type Seen = (u64, u32, u32, Vec<u8>);

#[test]
fn capture_from_a_slice_reads_as_the_file() {
    // A little-endian microsecond pcap: two Ethernet frames, then a
    // truncated third record.
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&65_535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (sec, usec, len) in [(10u32, 5u32, 60u32), (11, 999_999, 64)] {
        for v in [sec, usec, len, len] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend((0..len).map(|i| i as u8));
    }
    b.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100, 0, 0, 0, 7]);
    let path = tmp("p.pcap", &b);
    fn read<R: std::io::Read>(mut r: CaptureReader<R>) -> (Vec<Seen>, Option<String>) {
        let mut seen = Vec::new();
        r.for_each(|p| seen.push((p.ts_ns, p.linktype, p.orig_len, p.data.to_vec())))
            .unwrap();
        (seen, r.problem.take())
    }
    let file = read(CaptureReader::open(&path).unwrap());
    let mem = read(CaptureReader::from_reader(b.as_slice(), &path).unwrap());
    assert_eq!(mem, file);
    assert_eq!(mem.0.len(), 2);
    assert_eq!(mem.0[1].0, 11_999_999_000);
    let problem = mem.1.expect("the truncated record is named");
    assert!(
        problem.starts_with(&format!("{}: truncated at byte 180", path.display())),
        "{problem}"
    );
    // Not a capture: the same error, naming the path given.
    let e = CaptureReader::from_reader(&b"hello"[..], Path::new("x.pcap"))
        .err()
        .unwrap();
    assert!(e.to_string().contains("x.pcap"), "{e}");
}
