//! Size-bounded record segments: the recorder's stream cut into complete
//! `.nfr` files of at most `segment_records` records each, of which only the
//! newest `keep` stay on disk.
//!
//! For runs whose records do not fit on the disk (a soak of 10⁹ packets is
//! 40 GB of records): every packet is still parsed, turned into a record and
//! written to a file with its block CRC, exactly as in a normal run; older
//! segments are deleted once `keep` newer ones are complete. Each segment is
//! a valid `.nfr` file on its own (header, blocks, trailer), and its trailer
//! says where it sits in the stream (`segment`, `first_record`), so what was
//! kept can be checked against the generator's sequence numbers.

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use nflab_record::{Metadata, Record, RecordError, RecordWriter, Trailer};
use serde::Serialize;

use crate::run::recorder::RecordSink;

/// One finished (or the current) segment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Segment {
    /// Its file.
    pub path: PathBuf,
    /// Position of its first record in the whole stream (0-based).
    pub first_record: u64,
    /// Records in it.
    pub records: u64,
}

/// What the segments hold at the end: `records_kept + records_deleted` is
/// every record the recorder wrote.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SegmentsReport {
    /// Records per segment (the last one may hold fewer).
    pub segment_records: u64,
    /// Newest segments kept on disk.
    pub keep: usize,
    /// Segments written in all.
    pub segments_written: u64,
    /// Records written in all.
    pub records_written: u64,
    /// Records in the segments still on disk.
    pub records_kept: u64,
    /// Records in deleted segments.
    pub records_deleted: u64,
    /// The segments still on disk, oldest first.
    pub kept: Vec<Segment>,
}

/// The path of segment `index` of `base`: `records.nfr` → `records.000007.nfr`.
pub fn segment_path(base: &Path, index: u64) -> PathBuf {
    let stem = base
        .file_stem()
        .map_or_else(|| "records".into(), |s| s.to_string_lossy().into_owned());
    base.with_file_name(format!("{stem}.{index:06}.nfr"))
}

/// A [`RecordSink`] writing size-bounded segments (module docs).
pub struct RecordSegments {
    base: PathBuf,
    meta: Metadata,
    segment_records: u64,
    keep: usize,
    current: Option<(RecordWriter<BufWriter<File>>, Segment)>,
    finished: VecDeque<Segment>,
    written: u64,
    deleted: u64,
    segments: u64,
}

impl RecordSegments {
    /// Segments of at most `segment_records` records next to `base`, the newest
    /// `keep` (≥ 1) kept. The first segment is created at once.
    pub fn create(
        base: &Path,
        meta: &Metadata,
        segment_records: u64,
        keep: usize,
    ) -> Result<Self, RecordError> {
        let mut s = Self {
            base: base.to_path_buf(),
            meta: meta.clone(),
            segment_records: segment_records.max(1),
            keep: keep.max(1),
            current: None,
            finished: VecDeque::new(),
            written: 0,
            deleted: 0,
            segments: 0,
        };
        s.open_next()?;
        Ok(s)
    }

    fn open_next(&mut self) -> Result<(), RecordError> {
        let path = segment_path(&self.base, self.segments);
        let w = RecordWriter::create(&path, &self.meta)?;
        self.current = Some((
            w,
            Segment {
                path,
                first_record: self.written,
                records: 0,
            },
        ));
        self.segments += 1;
        Ok(())
    }

    /// Finish the current segment with `trailer` (plus its place in the
    /// stream) and delete the oldest finished ones beyond `keep`.
    fn close_current(&mut self, trailer: &Trailer) -> Result<(), RecordError> {
        let Some((w, seg)) = self.current.take() else {
            return Ok(());
        };
        let mut t = trailer.clone();
        t.extra.insert("segment".into(), (self.segments - 1).into());
        t.extra
            .insert("first_record".into(), seg.first_record.into());
        w.finish(&t)?;
        self.finished.push_back(seg);
        while self.finished.len() > self.keep {
            let old = self.finished.pop_front().expect("len > keep ≥ 1");
            // A segment already gone is not an error: its records are counted as deleted either way.
            let _ = std::fs::remove_file(&old.path);
            self.deleted += old.records;
        }
        Ok(())
    }

    /// Finish the last segment with `trailer`; what is on disk afterwards.
    pub fn finish(mut self, trailer: &Trailer) -> Result<SegmentsReport, RecordError> {
        self.close_current(trailer)?;
        Ok(SegmentsReport {
            segment_records: self.segment_records,
            keep: self.keep,
            segments_written: self.segments,
            records_written: self.written,
            records_kept: self.finished.iter().map(|s| s.records).sum(),
            records_deleted: self.deleted,
            kept: self.finished.iter().cloned().collect(),
        })
    }
}

impl RecordSink for RecordSegments {
    fn push(&mut self, r: &Record) -> Result<(), RecordError> {
        let full = self
            .current
            .as_ref()
            .is_none_or(|(_, s)| s.records >= self.segment_records);
        if full {
            self.close_current(&Trailer::default())?;
            self.open_next()?;
        }
        let (w, seg) = self.current.as_mut().expect("a segment is open");
        w.push(r)?;
        seg.records += 1;
        self.written += 1;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), RecordError> {
        match self.current.as_mut() {
            Some((w, _)) => w.flush_block(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> Record {
        Record {
            seq,
            flow: 0,
            tx_ns: 1_000 + seq,
            rx_ns: 2_000 + seq,
            wire_len: 64,
            flags: 0,
        }
    }

    #[test]
    fn keeps_the_newest_segments_whole_and_counts_the_rest() {
        let dir = std::env::temp_dir().join(format!("nflab-segments-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("records.nfr");
        let mut s = RecordSegments::create(&base, &Metadata::default(), 1000, 2).unwrap();
        for i in 0..4_500 {
            s.push(&rec(i)).unwrap();
            if i % 700 == 0 {
                s.flush_block().unwrap();
            }
        }
        let r = s.finish(&Trailer::default()).unwrap();
        assert_eq!(r.segments_written, 5);
        assert_eq!(r.records_written, 4_500);
        // Kept: segment 3 (3000..4000) and segment 4 (4000..4500).
        assert_eq!(r.records_kept, 1_500);
        assert_eq!(r.records_deleted, 3_000);
        assert_eq!(r.kept.len(), 2);
        for (k, first, n) in [(0usize, 3_000u64, 1_000u64), (1, 4_000, 500)] {
            let seg = &r.kept[k];
            assert_eq!((seg.first_record, seg.records), (first, n));
            let f = nflab_record::read_all(&seg.path).unwrap();
            let seqs: Vec<u64> = f.records.iter().map(|x| x.seq).collect();
            assert_eq!(seqs, (first..first + n).collect::<Vec<_>>());
            let t = f.trailer.expect("every segment has a trailer");
            assert_eq!(t.extra["first_record"], first);
            assert_eq!(t.extra["segment"], 3 + k as u64);
        }
        let on_disk = std::fs::read_dir(&dir).unwrap().count();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(on_disk, 2, "older segments deleted");
        assert_eq!(
            segment_path(&base, 3).file_name().unwrap(),
            "records.000003.nfr"
        );
    }
}
