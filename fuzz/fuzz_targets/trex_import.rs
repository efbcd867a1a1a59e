//! The TRex-fork importer (`analyze_trex_bytes`: the passes
//! `analyze_file_with` runs on a file, format trex, over bytes): 16-byte
//! records of two little-endian f64. Any file analyses without panicking;
//! every whole record is a distinct received packet (seq = its index), and a
//! partial record at the end is reported as a problem, never silently.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

use nflab_analyze::{analyze_trex_bytes, AnalysisConfig, Options};

fuzz_target!(|data: &[u8]| {
    let result = analyze_trex_bytes(
        Path::new("fuzz.data"),
        data,
        &AnalysisConfig::default(),
        &Options::default(),
    );
    let whole = (data.len() / 16) as u64;
    let fa = match result {
        Ok(fa) => fa,
        Err(e) => {
            // Only a file without one whole record is refused.
            assert_eq!(whole, 0, "refused a file with {whole} records: {e}");
            return;
        }
    };
    let p = fa.analysis.summary.packets;
    assert_eq!(p.received, whole, "received != whole records");
    assert_eq!(
        p.sent, whole,
        "sent != whole records (seq = index, no warm-up)"
    );
    assert_eq!(p.lost, 0);
    assert_eq!(
        fa.problem.is_some(),
        data.len() % 16 != 0,
        "problem: {:?}",
        fa.problem
    );
    let lat = &fa.analysis.summary.latency_ns;
    if let (Some(min), Some(max)) = (lat.min, lat.max) {
        assert!(min <= max, "latency min {min} > max {max}");
        if let Some(p50) = lat.p50 {
            assert!(min <= p50 && p50 <= max, "p50 {p50} outside [{min}, {max}]");
        }
    }
});
