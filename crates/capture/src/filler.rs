//! A producer's side of QQ, whatever feeds it (an AF_PACKET ring or the XDP
//! tap's ring buffer): frames go into the producer's own inner queue, and the
//! queue is handed to the outer ring when it holds `inner_bytes` of frames or
//! its first frame is `timeout` old.

use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::qq::{InnerQueue, OuterRing};
use crate::CaptureConfig;

pub struct Filler {
    id: usize,
    queue: InnerQueue,
    opened: Instant,
    inner_bytes: usize,
    timeout: Duration,
    snaplen: usize,
    ring: Arc<OuterRing>,
    to_analyzer: Sender<Arc<InnerQueue>>,
    /// Frames pushed so far.
    pub captured: u64,
}

impl Filler {
    pub fn new(
        id: usize,
        cfg: &CaptureConfig,
        ring: Arc<OuterRing>,
        to_analyzer: Sender<Arc<InnerQueue>>,
    ) -> Filler {
        Filler {
            id,
            queue: InnerQueue::with_capacity(id, cfg.inner_bytes),
            opened: Instant::now(),
            inner_bytes: cfg.inner_bytes,
            timeout: Duration::from_nanos(cfg.handover_timeout_ns),
            snaplen: cfg.snaplen as usize,
            ring,
            to_analyzer,
            captured: 0,
        }
    }

    /// Copy one frame (cut to the snap length) into the inner queue.
    pub fn push(&mut self, ts_ns: u64, wire_len: u32, frame: &[u8]) {
        if self.queue.is_empty() {
            self.opened = Instant::now();
        }
        let kept = &frame[..frame.len().min(self.snaplen)];
        self.queue.push(ts_ns, wire_len, kept);
        self.captured += 1;
        if self.queue.data_bytes() >= self.inner_bytes {
            self.hand_over();
        }
    }

    /// Hand the queue over if its first frame is older than the timeout.
    pub fn tick(&mut self) {
        if !self.queue.is_empty() && self.opened.elapsed() >= self.timeout {
            self.hand_over();
        }
    }

    /// Hand over what is left; the frames pushed in all.
    pub fn finish(mut self) -> u64 {
        if !self.queue.is_empty() {
            self.hand_over();
        }
        self.captured
    }

    fn hand_over(&mut self) {
        let full = std::mem::replace(
            &mut self.queue,
            InnerQueue::with_capacity(self.id, self.inner_bytes),
        );
        if let Some(shared) = self.ring.hand_over(full) {
            // The analyzer is gone only when the capture is ending.
            let _ = self.to_analyzer.send(shared);
        }
        self.opened = Instant::now();
    }
}
