//! The CSV importer (`read_csv`, and `analyze_file_with` on CSV): any text
//! either is refused with an error or gives records that `write_csv` writes
//! and `read_csv` reads back unchanged; the analysis never counts more
//! packets received than there were rows.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nflab_analyze::{analyze_file_with, read_csv, AnalysisConfig, Format, Options};

fuzz_target!(|data: &[u8]| {
    let path = nflab_fuzz::scratch_file("csv", data);
    let analysed = analyze_file_with(
        &path,
        &AnalysisConfig::default(),
        &Options::default(),
        Some(Format::Csv),
    );
    let Ok((records, sent)) = read_csv(&path) else {
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
    let again = nflab_fuzz::scratch_file("csv", &text);
    let (back, sent_back) = read_csv(&again).expect("reading what write_csv wrote");
    assert_eq!(
        back, records,
        "records changed in a CSV write/read round trip"
    );
    assert_eq!(sent_back, sent);
});
