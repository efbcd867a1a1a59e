//! Kernel TX timestamps matched to the probes they belong to.
//!
//! With `tx_timestamp = kernel` the backend numbers every frame it hands to the kernel
//! (`PacketIo::tx_stamp_next_id`) and the kernel returns one stamp per frame with that
//! number. The pacer pushes one entry per queued frame, in queue order, into a
//! [`StampWindow`]; a stamp with id *n* fills entry *n*. Probe entries that got their stamp
//! are handed to the caller's sink as [`ProbeTxStamp`]s; entries still without one when
//! the window is full (65 536 frames behind the newest) or the run ends are reported as
//! missing (`kernel_tx_ns = 0`), so every probe appears exactly once.
//!
//! The error queue is drained between TX batches once at least [`DRAIN_AT`] frames wait
//! for their stamp, and, so that most drains fall into slack time, while the pacer idles
//! before a deadline at least [`IDLE_DRAIN_NS`] away once [`IDLE_DRAIN_AT`] frames wait;
//! never per packet.

use std::collections::VecDeque;

use nflab_io::{IoError, PacketIo, TsSource, TxStamp, TxStampStatus};
use serde::Serialize;

/// Drain after a TX batch once this many frames wait for their stamp.
pub const DRAIN_AT: usize = 32;
/// Most error-queue messages read per drain (4 `recvmmsg` calls).
pub const DRAIN_MAX: usize = 256;
/// Drain while idle only when the next deadline is at least this far away, ns.
pub const IDLE_DRAIN_NS: u64 = 20_000;
/// ... and at least this many frames wait for their stamp.
pub const IDLE_DRAIN_AT: usize = 8;
/// ... and at most this often, ns.
const IDLE_DRAIN_EVERY_NS: u64 = 50_000;
/// Frames a stamp may lag behind the newest before its frame counts as missing.
pub const MAX_WINDOW: usize = 1 << 16;
/// Matched stamps handed to the sink at a time.
const SINK_BATCH: usize = 1024;

/// Receives matched stamps (from any TX thread; each call is one thread's batch).
pub type StampSink<'a> = &'a (dyn Fn(&[ProbeTxStamp]) + Sync);

/// The kernel TX timestamp of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTxStamp {
    /// Flow id.
    pub flow: u16,
    /// Sequence number in the flow.
    pub seq: u64,
    /// The application stamp written into the probe (`CLOCK_REALTIME` ns).
    pub app_tx_ns: u64,
    /// The kernel's stamp, ns (`CLOCK_REALTIME` in software, PHC time in hardware); 0 when
    /// none arrived.
    pub kernel_tx_ns: u64,
    /// Who took `kernel_tx_ns` ([`TsSource::None`] when missing).
    pub source: TsSource,
}

/// Spread of a per-probe difference, ns (nearest-rank percentiles).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Spread {
    /// Smallest value.
    pub min: i64,
    /// Median.
    pub p50: i64,
    /// 99th percentile.
    pub p99: i64,
    /// Largest value.
    pub max: i64,
}

/// What the kernel TX timestamping of a run did (`gen.json` → `tx_stamps`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TxStampReport {
    /// "kernel-software" or "hardware": what the sockets were asked to use.
    pub source: String,
    /// Why hardware stamps are not used, naming the interface (one line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// Probe frames sent with timestamping on.
    pub probes: u64,
    /// Probes that got their kernel stamp.
    pub matched: u64,
    /// Of those, stamped by the NIC.
    pub hardware: u64,
    /// Probes that got none by the end (the error queue overflowed, or the driver does not
    /// stamp): their records keep the application stamp.
    pub missing: u64,
    /// Stamps that arrived after their frame had been counted missing.
    pub late: u64,
    /// Stamps with an id no frame of this run had (should be 0).
    pub unmatched: u64,
    /// Second stamps for one frame (should be 0).
    pub duplicates: u64,
    /// Matched software stamps earlier than the probe's application stamp (should be 0:
    /// both are `CLOCK_REALTIME` and the application stamp is taken first).
    pub kernel_before_app: u64,
    /// Error-queue drains.
    pub drain_calls: u64,
    /// kernel − application stamp per matched probe (filled in by the caller that reads
    /// the stamps back, e.g. `nflab run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_minus_app_ns: Option<Spread>,
}

impl TxStampReport {
    /// Add another thread's counts.
    pub fn add(&mut self, o: &TxStampReport) {
        self.probes += o.probes;
        self.matched += o.matched;
        self.hardware += o.hardware;
        self.missing += o.missing;
        self.late += o.late;
        self.unmatched += o.unmatched;
        self.duplicates += o.duplicates;
        self.kernel_before_app += o.kernel_before_app;
        self.drain_calls += o.drain_calls;
        if self.notice.is_none() {
            self.notice.clone_from(&o.notice);
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Entry {
    Probe { flow: u16, seq: u64, app_ns: u64 },
    Other,
    Done,
}

/// One TX thread's frames waiting for their stamps (see the module docs).
pub(crate) struct StampWindow<'a> {
    /// Id of the first frame of the run; stamps below it belong to frames sent before.
    first: u64,
    /// Id of `slots[0]`.
    base: u64,
    slots: VecDeque<Entry>,
    /// Entries not yet Done.
    waiting: usize,
    out: Vec<ProbeTxStamp>,
    sink: Option<StampSink<'a>>,
    pub(crate) report: TxStampReport,
    last_drain_ns: u64,
}

impl<'a> StampWindow<'a> {
    pub(crate) fn new(
        first_id: u64,
        status: &TxStampStatus,
        sink: Option<StampSink<'a>>,
    ) -> StampWindow<'a> {
        StampWindow {
            first: first_id,
            base: first_id,
            slots: VecDeque::with_capacity(4096),
            waiting: 0,
            out: Vec::with_capacity(SINK_BATCH),
            sink,
            report: TxStampReport {
                source: status.source.as_str().to_string(),
                notice: status.notice.clone(),
                ..TxStampReport::default()
            },
            last_drain_ns: 0,
        }
    }

    /// Frames queued whose stamp has not arrived.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// The next frame handed to the backend is a probe.
    pub(crate) fn push_probe(&mut self, flow: u16, seq: u64, app_ns: u64) {
        self.report.probes += 1;
        self.push(Entry::Probe { flow, seq, app_ns });
    }

    /// The next frame is not recorded (background).
    pub(crate) fn push_other(&mut self) {
        self.push(Entry::Other);
    }

    fn push(&mut self, e: Entry) {
        self.slots.push_back(e);
        self.waiting += 1;
        if self.slots.len() > MAX_WINDOW {
            self.retire_front();
        }
    }

    fn emit(&mut self, p: ProbeTxStamp) {
        self.out.push(p);
        if self.out.len() >= SINK_BATCH {
            self.flush_out();
        }
    }

    fn flush_out(&mut self) {
        if let Some(sink) = self.sink {
            if !self.out.is_empty() {
                sink(&self.out);
            }
        }
        self.out.clear();
    }

    /// Drop the oldest entry; a probe without a stamp is missing.
    fn retire_front(&mut self) {
        let Some(e) = self.slots.pop_front() else {
            return;
        };
        self.base += 1;
        match e {
            Entry::Probe { flow, seq, app_ns } => {
                self.waiting -= 1;
                self.report.missing += 1;
                self.emit(ProbeTxStamp {
                    flow,
                    seq,
                    app_tx_ns: app_ns,
                    kernel_tx_ns: 0,
                    source: TsSource::None,
                });
            }
            Entry::Other => self.waiting -= 1,
            Entry::Done => {}
        }
    }

    /// Match one stamp to its frame.
    pub(crate) fn stamp(&mut self, s: TxStamp) {
        if s.id < self.base {
            if s.id >= self.first {
                self.report.late += 1;
            }
            return;
        }
        let off = s.id - self.base;
        if off >= self.slots.len() as u64 {
            self.report.unmatched += 1;
            return;
        }
        let off = off as usize;
        match self.slots[off] {
            Entry::Probe { flow, seq, app_ns } => {
                self.slots[off] = Entry::Done;
                self.waiting -= 1;
                self.report.matched += 1;
                if s.source == TsSource::Hardware {
                    self.report.hardware += 1;
                } else if s.ns < app_ns {
                    self.report.kernel_before_app += 1;
                }
                self.emit(ProbeTxStamp {
                    flow,
                    seq,
                    app_tx_ns: app_ns,
                    kernel_tx_ns: s.ns,
                    source: s.source,
                });
            }
            Entry::Other => {
                self.slots[off] = Entry::Done;
                self.waiting -= 1;
            }
            Entry::Done => self.report.duplicates += 1,
        }
        while matches!(self.slots.front(), Some(Entry::Done)) {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// Read what the error queue holds now (non-blocking).
    pub(crate) fn drain(&mut self, io: &mut dyn PacketIo, now_ns: u64) -> Result<(), IoError> {
        self.report.drain_calls += 1;
        self.last_drain_ns = now_ns;
        // No more can be waiting than frames without a stamp (bar strays from before the
        // run): asking for exactly that many spares the call that would return EAGAIN.
        let max = self.waiting.clamp(1, DRAIN_MAX);
        io.drain_tx_stamps(max, &mut |s, _| self.stamp(s))?;
        Ok(())
    }

    /// Whether an idle pacer whose next deadline is `due_in_ns` away should drain now.
    pub(crate) fn idle_drain_due(&self, now_ns: u64, due_in_ns: u64) -> bool {
        self.waiting >= IDLE_DRAIN_AT
            && due_in_ns >= IDLE_DRAIN_NS
            && now_ns.saturating_sub(self.last_drain_ns) >= IDLE_DRAIN_EVERY_NS
    }

    /// After the last send: wait up to `wait_ns` for the remaining stamps, then count what
    /// is still missing and hand everything to the sink.
    pub(crate) fn finish(
        mut self,
        io: &mut dyn PacketIo,
        wait_ns: u64,
    ) -> Result<TxStampReport, IoError> {
        let end = nflab_io::clock::monotonic_ns() + wait_ns;
        loop {
            let now = nflab_io::clock::monotonic_ns();
            self.drain(io, now)?;
            if self.waiting == 0 || now >= end {
                break;
            }
            io.wait_tx_stamps(std::time::Duration::from_millis(5))?;
        }
        while !self.slots.is_empty() {
            self.retire_front();
        }
        self.flush_out();
        Ok(self.report)
    }
}

/// Nearest-rank spread of `v` (the metrics engine's percentiles); None when empty.
pub fn spread(v: &mut [i64]) -> Option<Spread> {
    let mut d = nflab_analyze::Distribution::new(u64::MAX, 3);
    v.iter().for_each(|&x| d.record(x));
    let (min, max) = (d.min()?, d.max()?);
    let q = d.quantiles(&[
        nflab_analyze::Pct { num: 1, den: 2 },
        nflab_analyze::Pct { num: 99, den: 100 },
    ]);
    Some(Spread {
        min,
        p50: q[0]?.value,
        p99: q[1]?.value,
        max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn status() -> TxStampStatus {
        TxStampStatus {
            source: TsSource::KernelSoftware,
            phc_index: -1,
            notice: None,
        }
    }

    fn st(id: u64, ns: u64) -> TxStamp {
        TxStamp {
            id,
            ns,
            source: TsSource::KernelSoftware,
        }
    }

    #[test]
    fn stamps_match_by_id_out_of_order_with_background_in_between() {
        let got = Mutex::new(Vec::new());
        let sink = |b: &[ProbeTxStamp]| got.lock().unwrap().extend_from_slice(b);
        // Ids 100.. belong to this run; 99 was a frame sent before it.
        let mut w = StampWindow::new(100, &status(), Some(&sink));
        w.push_probe(0, 0, 1000); // id 100
        w.push_other(); // id 101
        w.push_probe(1, 0, 1100); // id 102
        w.push_probe(0, 1, 1200); // id 103
        assert_eq!(w.waiting(), 4);
        w.stamp(st(99, 5)); // before the run: ignored
        w.stamp(st(102, 1150));
        w.stamp(st(100, 1050));
        w.stamp(st(101, 1070));
        assert_eq!(w.waiting(), 1);
        w.stamp(st(100, 1060)); // already matched and retired: late, not a duplicate
        w.stamp(st(102, 1160)); // retired as well
        w.stamp(st(200, 1)); // never sent
        assert_eq!(w.base, 103, "matched entries at the front are retired");
        let mut io = nflab_io::MemIo::pair(4).0;
        let r = {
            // MemIo has no stamps: finish waits 0 ns and counts id 103 missing.
            w.finish(&mut io, 0).expect("finish")
        };
        assert_eq!(
            (
                r.probes,
                r.matched,
                r.missing,
                r.unmatched,
                r.late,
                r.duplicates
            ),
            (3, 2, 1, 1, 2, 0)
        );
        let mut v = got.into_inner().unwrap();
        v.sort_by_key(|p| (p.flow, p.seq));
        assert_eq!(
            v.iter()
                .map(|p| (p.flow, p.seq, p.app_tx_ns, p.kernel_tx_ns))
                .collect::<Vec<_>>(),
            [(0, 0, 1000, 1050), (0, 1, 1200, 0), (1, 0, 1100, 1150)]
        );
    }

    #[test]
    fn a_stamp_for_a_waiting_frame_twice_is_a_duplicate_and_early_kernel_stamps_are_counted() {
        let mut w = StampWindow::new(0, &status(), None);
        w.push_probe(0, 0, 1000);
        w.push_probe(0, 1, 2000);
        w.stamp(st(1, 1999)); // before its application stamp: the matching is wrong
        w.stamp(st(1, 2001));
        assert_eq!(w.report.duplicates, 1);
        assert_eq!(w.report.kernel_before_app, 1);
        assert_eq!(w.waiting(), 1);
    }

    #[test]
    fn a_full_window_counts_the_oldest_frame_missing() {
        let mut w = StampWindow::new(0, &status(), None);
        for i in 0..(MAX_WINDOW as u64 + 3) {
            w.push_probe(0, i, i);
        }
        assert_eq!(w.report.missing, 3);
        assert_eq!(w.waiting(), MAX_WINDOW);
        w.stamp(st(1, 10)); // its frame was given up: late
        assert_eq!(w.report.late, 1);
        w.stamp(st(3, 10));
        assert_eq!(w.report.matched, 1);
    }

    #[test]
    fn spread_is_nearest_rank() {
        let mut v: Vec<i64> = (1..=200).rev().collect();
        assert_eq!(
            spread(&mut v),
            Some(Spread {
                min: 1,
                p50: 100,
                p99: 198,
                max: 200
            })
        );
        assert_eq!(spread(&mut []), None);
        assert_eq!(spread(&mut [7]).map(|s| (s.p50, s.p99)), Some((7, 7)));
    }
}
