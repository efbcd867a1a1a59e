//! The `.nfr` reader (`nflab-record`): any byte string either fails at the
//! header or reads to an end state without panicking; every record read back
//! survives a write with `RecordWriter` and a second read unchanged, and the
//! reader never claims more bytes than it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nflab_record::{RecordReader, RecordWriter, TailState, Trailer};

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = RecordReader::new(data) else {
        return;
    };
    let meta = reader.metadata().clone();
    let mut records = Vec::new();
    let mut block = Vec::new();
    while reader
        .next_block(&mut block)
        .expect("a byte slice never fails to read")
    {
        assert!(!block.is_empty(), "next_block returned true with no record");
        records.extend_from_slice(&block);
    }
    assert!(reader.is_finished());
    // 40 bytes a record: the records read cannot hold more bytes than the input.
    assert!(records.len() * 40 <= data.len(), "more records than bytes");
    if let TailState::Truncated {
        discarded_bytes, ..
    } = reader.tail()
    {
        assert!(
            *discarded_bytes as usize <= data.len(),
            "discarded more than the input"
        );
    }
    if reader.tail().is_complete() {
        assert!(reader.trailer().is_some(), "complete without a trailer");
    }

    // Round trip: the same metadata and records, written and read again.
    let mut w = RecordWriter::new(Vec::new(), &meta).expect("writing to memory");
    for r in &records {
        w.push(r).expect("writing to memory");
    }
    let trailer = reader.trailer().cloned().unwrap_or_else(Trailer::default);
    let bytes = w.finish(&trailer).expect("writing to memory");
    let again = RecordReader::new(bytes.as_slice())
        .and_then(|r| r.into_record_file())
        .expect("reading what the writer wrote");
    assert_eq!(
        again.records, records,
        "records changed in a write/read round trip"
    );
    assert!(
        again.tail.is_complete(),
        "a finished file reads as {}",
        again.tail
    );
    assert_eq!(again.meta.run_id, meta.run_id);
    assert_eq!(again.meta.flows, meta.flows);
});
