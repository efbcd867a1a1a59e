//! pcap and pcapng import (`nflab_analyze::CaptureReader`): any file either
//! is refused at its header or reads to its end or to a stated problem,
//! without panicking. The packets handed out fit in the file, and a pcap's
//! packets written again as a pcap read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

use nflab_analyze::{AnalyzeError, CaptureReader};

/// A packet as the reader reported it.
#[derive(Debug, PartialEq)]
struct Seen {
    ts_ns: u64,
    linktype: u32,
    orig_len: u32,
    data: Vec<u8>,
}

fn read(data: &[u8]) -> Option<(Vec<Seen>, Option<String>)> {
    // The same reader `CaptureReader::open` makes for a file, over the bytes.
    let mut reader = CaptureReader::from_reader(data, Path::new("fuzz.pcap")).ok()?;
    let mut seen = Vec::new();
    let read = reader.for_each(|p| {
        seen.push(Seen {
            ts_ns: p.ts_ns,
            linktype: p.linktype,
            orig_len: p.orig_len,
            data: p.data.to_vec(),
        })
    });
    match read {
        Ok(()) => Some((seen, reader.problem.take())),
        // A pcapng whose first section header is unusable is refused here,
        // not by `open`, which reads only the magic.
        Err(AnalyzeError::Input { .. }) if seen.is_empty() => None,
        Err(e) => panic!("reading a byte slice failed: {e}"),
    }
}

/// A little-endian pcap with nanosecond timestamps holding `packets`.
fn pcap_ns(linktype: u32, packets: &[Seen]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65_535u32.to_le_bytes());
    out.extend_from_slice(&linktype.to_le_bytes());
    for p in packets {
        let sec = p.ts_ns / 1_000_000_000;
        out.extend_from_slice(&(sec as u32).to_le_bytes());
        out.extend_from_slice(&((p.ts_ns % 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(p.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&p.orig_len.to_le_bytes());
        out.extend_from_slice(&p.data);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((seen, problem)) = read(data) else {
        return;
    };
    let captured: usize = seen.iter().map(|p| p.data.len()).sum();
    assert!(
        captured <= data.len(),
        "packets hold more bytes than the file"
    );
    if let Some(p) = &problem {
        assert!(
            !p.is_empty() && !p.contains('\n'),
            "problem is not one sentence: {p:?}"
        );
    }
    let is_pcap = data.len() >= 4 && {
        let m = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        matches!(m, 0xa1b2_c3d4 | 0xa1b2_3c4d | 0xd4c3_b2a1 | 0x4d3c_b2a1)
    };
    if is_pcap {
        // Each packet costs a 16-byte record header on top of the 24-byte file header.
        assert!(24 + 16 * seen.len() + captured <= data.len());
        // Written again (nanosecond pcap), read back the same. Only when every
        // timestamp fits pcap's 32-bit seconds.
        if let Some(first) = seen.first() {
            if seen
                .iter()
                .all(|p| p.ts_ns / 1_000_000_000 <= u64::from(u32::MAX))
            {
                let again = read(&pcap_ns(first.linktype, &seen)).expect("a pcap we wrote opens");
                assert_eq!(
                    again.0, seen,
                    "pcap packets changed in a write/read round trip"
                );
                assert_eq!(again.1, None, "a pcap we wrote has a problem");
            }
        }
    }
});
