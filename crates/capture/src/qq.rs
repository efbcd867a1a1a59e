//! QQ, FlowScope's queue of queues: an outer ring of inner queues.
//!
//! Each producer fills an [`InnerQueue`] of its own with no synchronisation at
//! all, and hands the whole queue to the [`OuterRing`] when it reaches a size
//! or an age. The ring is bounded by a memory budget: a queue that does not fit
//! pushes the oldest queues out (counted), so a producer never waits for a
//! reader. Readers (the analyzer, the dumper) share queues through `Arc`s and
//! never remove a packet: they peek.
//!
//! The lock is taken once per handed-over queue (thousands of packets), not
//! per packet, which is what makes the structure cheap: the per-packet work is
//! one copy into the producer's own buffer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Where one frame sits in its queue's buffer.
#[derive(Debug, Clone, Copy)]
struct Entry {
    offset: u32,
    captured_len: u32,
    wire_len: u32,
    ts_ns: u64,
}

/// One captured frame, borrowed from its queue.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Kernel receive time, `CLOCK_REALTIME` ns.
    pub ts_ns: u64,
    /// Length on the wire (the bytes may be fewer if the snap length cut them).
    pub wire_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}

/// A producer's batch of frames, copied back to back into one buffer.
#[derive(Debug)]
pub struct InnerQueue {
    /// Index of the producer that filled it.
    pub producer: usize,
    data: Vec<u8>,
    index: Vec<Entry>,
    /// Earliest and latest stamp, kept as frames come (two compares a
    /// frame, so finding a window's queues stays O(1) per queue): the XDP
    /// tap's ring takes frames from every CPU that runs XDP on the interface,
    /// in the order they reserve room, so the first and last frame need not
    /// be the extremes.
    span: Option<(u64, u64)>,
}

impl InnerQueue {
    /// An empty queue for `producer`, with room for about `bytes` of frames.
    pub fn with_capacity(producer: usize, bytes: usize) -> InnerQueue {
        InnerQueue {
            producer,
            data: Vec::with_capacity(bytes),
            // 64-byte frames are the densest case worth reserving for.
            index: Vec::with_capacity(bytes / 64),
            span: None,
        }
    }

    /// Append one frame.
    pub fn push(&mut self, ts_ns: u64, wire_len: u32, frame: &[u8]) {
        self.span = Some(match self.span {
            None => (ts_ns, ts_ns),
            Some((lo, hi)) => (lo.min(ts_ns), hi.max(ts_ns)),
        });
        let offset = self.data.len() as u32;
        self.data.extend_from_slice(frame);
        self.index.push(Entry {
            offset,
            captured_len: frame.len() as u32,
            wire_len,
            ts_ns,
        });
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether it holds no frame.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Bytes of frame data (what the size hand-over compares).
    pub fn data_bytes(&self) -> usize {
        self.data.len()
    }

    /// Memory the queue holds, counted against the ring's budget.
    pub fn footprint_bytes(&self) -> usize {
        self.data.capacity() + self.index.capacity() * std::mem::size_of::<Entry>()
    }

    /// Time of the first frame.
    pub fn first_ns(&self) -> Option<u64> {
        self.index.first().map(|e| e.ts_ns)
    }

    /// Time of the last frame.
    pub fn last_ns(&self) -> Option<u64> {
        self.index.last().map(|e| e.ts_ns)
    }

    /// The earliest and the latest stamp.
    pub fn span_ns(&self) -> Option<(u64, u64)> {
        self.span
    }

    /// The frames in arrival order.
    pub fn frames(&self) -> impl Iterator<Item = Frame<'_>> + '_ {
        self.index.iter().map(|e| Frame {
            ts_ns: e.ts_ns,
            wire_len: e.wire_len,
            data: &self.data[e.offset as usize..(e.offset + e.captured_len) as usize],
        })
    }

    /// Give back the unused capacity, so the footprint is what the frames take.
    pub fn shrink(&mut self) {
        self.data.shrink_to_fit();
        self.index.shrink_to_fit();
    }
}

/// Counters of the ring, per producer where they belong to one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Frames in queues handed over, per producer.
    pub handed_over: Vec<u64>,
    /// Frames discarded because the ring was full, per producer of their queue.
    pub discarded: Vec<u64>,
    /// Queues discarded because the ring was full.
    pub discarded_queues: u64,
    /// Memory held now and at most, bytes.
    pub held_bytes: usize,
    pub peak_bytes: usize,
}

struct RingState {
    queues: VecDeque<Arc<InnerQueue>>,
    stats: RingStats,
}

/// The outer ring: the last queues handed over, within a memory budget.
pub struct OuterRing {
    budget_bytes: usize,
    state: Mutex<RingState>,
}

impl OuterRing {
    /// A ring for `producers` producers holding at most `budget_bytes`.
    pub fn new(budget_bytes: usize, producers: usize) -> OuterRing {
        OuterRing {
            budget_bytes,
            state: Mutex::new(RingState {
                queues: VecDeque::new(),
                stats: RingStats {
                    handed_over: vec![0; producers],
                    discarded: vec![0; producers],
                    ..RingStats::default()
                },
            }),
        }
    }

    /// The memory budget, bytes.
    pub fn budget_bytes(&self) -> usize {
        self.budget_bytes
    }

    /// Take a full queue; the oldest queues make room for it. Returns the shared
    /// queue for readers, or None when it alone exceeds the budget (discarded).
    pub fn hand_over(&self, mut queue: InnerQueue) -> Option<Arc<InnerQueue>> {
        queue.shrink();
        let size = queue.footprint_bytes();
        let producer = queue.producer;
        let frames = queue.len() as u64;
        let mut s = self.lock();
        s.stats.handed_over[producer] += frames;
        if size > self.budget_bytes {
            s.stats.discarded[producer] += frames;
            s.stats.discarded_queues += 1;
            return None;
        }
        while s.stats.held_bytes + size > self.budget_bytes {
            let Some(old) = s.queues.pop_front() else {
                break;
            };
            s.stats.held_bytes -= old.footprint_bytes();
            s.stats.discarded[old.producer] += old.len() as u64;
            s.stats.discarded_queues += 1;
        }
        let shared = Arc::new(queue);
        s.queues.push_back(Arc::clone(&shared));
        s.stats.held_bytes += size;
        s.stats.peak_bytes = s.stats.peak_bytes.max(s.stats.held_bytes);
        Some(shared)
    }

    /// The queues that may hold frames in `[from_ns, to_ns]`, oldest first.
    pub fn overlapping(&self, from_ns: u64, to_ns: u64) -> Vec<Arc<InnerQueue>> {
        let s = self.lock();
        s.queues
            .iter()
            .filter(|q| q.span_ns().is_some_and(|(a, b)| a <= to_ns && b >= from_ns))
            .cloned()
            .collect()
    }

    /// The counters now.
    pub fn stats(&self) -> RingStats {
        self.lock().stats.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RingState> {
        // A panicking reader leaves the counters consistent: every update is one step.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(producer: usize, from_ns: u64, n: u64) -> InnerQueue {
        let mut q = InnerQueue::with_capacity(producer, 0);
        for i in 0..n {
            q.push(from_ns + i, 64, &[i as u8; 60]);
        }
        q
    }

    #[test]
    fn frames_come_back_as_pushed() {
        let mut q = InnerQueue::with_capacity(3, 1024);
        q.push(10, 64, &[1, 2, 3]);
        q.push(20, 1500, &[4; 100]);
        let f: Vec<_> = q.frames().collect();
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[0].ts_ns, f[0].wire_len, f[0].data),
            (10, 64, &[1u8, 2, 3][..])
        );
        assert_eq!(
            (f[1].ts_ns, f[1].wire_len, f[1].data.len()),
            (20, 1500, 100)
        );
        assert_eq!((q.first_ns(), q.last_ns()), (Some(10), Some(20)));
    }

    /// Frames of several CPUs interleave in one queue: a window that only
    /// its middle frame falls into still finds the queue.
    #[test]
    fn a_queue_out_of_time_order_is_found_by_its_earliest_and_latest_frame() {
        let ring = OuterRing::new(1 << 20, 1);
        let mut q = InnerQueue::with_capacity(0, 1024);
        for ts in [500, 100, 900, 300] {
            q.push(ts, 64, &[0; 60]);
        }
        assert_eq!(q.span_ns(), Some((100, 900)));
        ring.hand_over(q);
        assert_eq!(ring.overlapping(850, 860).len(), 1);
        assert_eq!(ring.overlapping(50, 99).len(), 0);
        assert_eq!(ring.overlapping(901, 1000).len(), 0);
    }

    #[test]
    fn a_full_ring_discards_the_oldest_queues_and_counts_their_frames() {
        let one = {
            let mut q = queue(0, 0, 10);
            q.shrink();
            q.footprint_bytes()
        };
        // Room for three queues of this size.
        let ring = OuterRing::new(3 * one + one / 2, 2);
        for i in 0..5u64 {
            assert!(ring
                .hand_over(queue((i % 2) as usize, i * 100, 10))
                .is_some());
        }
        let s = ring.stats();
        assert_eq!(s.handed_over, vec![30, 20]);
        // Queues 0 (producer 0) and 1 (producer 1) went.
        assert_eq!(s.discarded, vec![10, 10]);
        assert_eq!(s.discarded_queues, 2);
        assert!(s.held_bytes <= ring.budget_bytes() && s.peak_bytes <= ring.budget_bytes());
        // What is left is the last three, by time.
        let left = ring.overlapping(0, u64::MAX);
        let starts: Vec<_> = left.iter().map(|q| q.first_ns().unwrap()).collect();
        assert_eq!(starts, vec![200, 300, 400]);
    }

    #[test]
    fn a_queue_larger_than_the_budget_is_discarded_alone() {
        let ring = OuterRing::new(16, 1);
        assert!(ring.hand_over(queue(0, 0, 10)).is_none());
        let s = ring.stats();
        assert_eq!(
            (s.handed_over[0], s.discarded[0], s.held_bytes),
            (10, 10, 0)
        );
    }

    #[test]
    fn overlapping_selects_by_time_span() {
        let ring = OuterRing::new(1 << 20, 1);
        ring.hand_over(queue(0, 0, 10)); // 0..=9
        ring.hand_over(queue(0, 100, 10)); // 100..=109
        ring.hand_over(queue(0, 200, 10)); // 200..=209
        let spans = |a, b| -> Vec<u64> {
            ring.overlapping(a, b)
                .iter()
                .map(|q| q.first_ns().unwrap())
                .collect()
        };
        assert_eq!(spans(5, 100), vec![0, 100]);
        assert_eq!(spans(10, 99), Vec::<u64>::new());
        assert_eq!(spans(109, 109), vec![100]);
    }
}
