//! The CSV importer (`read_csv_from` and `analyze_csv_bytes`: what
//! `read_csv` and `analyze_file_with` on CSV run, over bytes): any text
//! either is refused with an error or gives records that `write_csv` writes
//! and `read_csv` reads back unchanged; the analysis never counts more
//! packets received than there were rows.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

use nflab_analyze::{analyze_csv_bytes, read_csv_from, AnalysisConfig, Options};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.csv");
    let analysed = analyze_csv_bytes(path, data, &AnalysisConfig::default(), &Options::default());
    let Ok((records, sent)) = read_csv_from(path, data) else {
        return;
    };
    let fa = analysed.expect("read_csv accepted the file but analyze_file_with refused it");
    let p = fa.analysis.summary.packets;
    assert!(
        p.received <= records.len() as u64,
        "received more than the rows"
    );
    assert!(sent.iter().all(|s| s.sent > 0));

    let mut text = Vec::new();
    nflab_record::write_csv(&records, &mut text).expect("writing to memory");
    let (back, sent_back) =
        read_csv_from(path, text.as_slice()).expect("reading what write_csv wrote");
    assert_eq!(
        back, records,
        "records changed in a CSV write/read round trip"
    );
    assert_eq!(sent_back, sent);
});
