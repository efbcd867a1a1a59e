//! In-memory backend: two connected ends for unit tests of the logic above this crate.
//!
//! Each direction is a bounded queue; a full queue makes `tx_batch` return a short count
//! (and counts `tx_ring_full`) exactly like a full TX ring. Frames carry the
//! `CLOCK_REALTIME` time of their send as an application RX timestamp. Frame buffers are
//! recycled through a free list, so a steady exchange does not allocate.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{clock, IoError, IoStats, Layer, PacketIo, RxMeta, TsSource};

/// Longest frame a [`MemIo`] carries: a jumbo frame with a VLAN tag.
pub const MEM_MAX_FRAME_BYTES: usize = 9_022;

#[derive(Default)]
struct Queue {
    frames: VecDeque<(Vec<u8>, u64)>,
    /// Buffers given back by the receiver, reused by the sender.
    free: Vec<Vec<u8>>,
}

struct Channel {
    q: Mutex<Queue>,
    ready: Condvar,
    capacity: usize,
}

impl Channel {
    fn new(capacity: usize) -> Arc<Channel> {
        Arc::new(Channel {
            q: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            capacity,
        })
    }

    /// Lock, ignoring poisoning: a panicking test thread must not cascade into the other end.
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One end of an in-memory link; see [`MemIo::pair`].
pub struct MemIo {
    tx: Arc<Channel>,
    rx: Arc<Channel>,
    scratch: Vec<u8>,
    taken: Vec<(Vec<u8>, u64)>,
    stats: IoStats,
}

impl MemIo {
    /// Two connected ends; each direction holds at most `capacity` frames.
    pub fn pair(capacity: usize) -> (MemIo, MemIo) {
        let a_to_b = Channel::new(capacity);
        let b_to_a = Channel::new(capacity);
        let end = |tx: &Arc<Channel>, rx: &Arc<Channel>| MemIo {
            tx: Arc::clone(tx),
            rx: Arc::clone(rx),
            scratch: vec![0; MEM_MAX_FRAME_BYTES],
            taken: Vec::new(),
            stats: IoStats::default(),
        };
        (end(&a_to_b, &b_to_a), end(&b_to_a, &a_to_b))
    }
}

impl PacketIo for MemIo {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn layer(&self) -> Layer {
        Layer::Ethernet
    }

    fn max_frame_len(&self) -> usize {
        MEM_MAX_FRAME_BYTES
    }

    fn tx_batch(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
    ) -> Result<usize, IoError> {
        let mut queued = 0;
        while queued < n {
            // Fill outside the lock: `fill` is caller code of unknown cost.
            if self.tx.lock().frames.len() >= self.tx.capacity {
                self.stats.tx_ring_full += 1;
                break;
            }
            let len = fill(queued, &mut self.scratch);
            if len > MEM_MAX_FRAME_BYTES {
                return Err(IoError::FrameTooLong {
                    ifname: "mem".into(),
                    len,
                    max: MEM_MAX_FRAME_BYTES,
                });
            }
            let ts = clock::realtime_ns();
            let mut q = self.tx.lock();
            let mut buf = q.free.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(&self.scratch[..len]);
            q.frames.push_back((buf, ts));
            drop(q);
            self.tx.ready.notify_one();
            queued += 1;
        }
        self.stats.tx_packets += queued as u64;
        Ok(queued)
    }

    fn flush_tx(&mut self) -> Result<(), IoError> {
        Ok(())
    }

    fn rx_batch(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, IoError> {
        if max == 0 {
            return Ok(0);
        }
        let deadline = Instant::now() + timeout;
        {
            let mut q = self.rx.lock();
            while q.frames.is_empty() {
                let now = Instant::now();
                if now >= deadline {
                    return Ok(0);
                }
                q = self
                    .rx
                    .ready
                    .wait_timeout(q, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            let k = q.frames.len().min(max);
            self.taken.extend(q.frames.drain(..k));
        }
        // Deliver outside the lock, so a sink that sends on the other end cannot deadlock.
        let n = self.taken.len();
        for (buf, ts) in &self.taken {
            sink(
                buf,
                RxMeta {
                    ts_ns: Some(*ts),
                    ts_source: TsSource::Application,
                    wire_len: buf.len(),
                },
            );
        }
        let mut q = self.rx.lock();
        q.free.extend(self.taken.drain(..).map(|(b, _)| b));
        drop(q);
        self.stats.rx_packets += n as u64;
        Ok(n)
    }

    fn stats(&self) -> IoStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_counters(io: &mut MemIo, from: u32, n: usize) -> usize {
        io.tx_batch(n, &mut |i, buf| {
            buf[..4].copy_from_slice(&(from + i as u32).to_be_bytes());
            4 + (i % 3)
        })
        .unwrap()
    }

    #[test]
    fn frames_arrive_in_order_with_their_lengths_on_the_other_end() {
        let (mut a, mut b) = MemIo::pair(16);
        assert_eq!(send_counters(&mut a, 100, 5), 5);
        let mut got = Vec::new();
        let n = b
            .rx_batch(10, Duration::ZERO, &mut |f, m| {
                got.push((
                    u32::from_be_bytes(f[..4].try_into().unwrap()),
                    f.len(),
                    m.wire_len,
                ))
            })
            .unwrap();
        assert_eq!(n, 5);
        assert_eq!(
            got,
            vec![
                (100, 4, 4),
                (101, 5, 5),
                (102, 6, 6),
                (103, 4, 4),
                (104, 5, 5)
            ]
        );
        // Nothing went the other way.
        assert_eq!(a.rx_batch(10, Duration::ZERO, &mut |_, _| {}).unwrap(), 0);
    }

    #[test]
    fn a_full_queue_gives_a_short_count_and_counts_ring_full() {
        let (mut a, mut b) = MemIo::pair(3);
        assert_eq!(send_counters(&mut a, 0, 5), 3);
        assert_eq!(send_counters(&mut a, 3, 1), 0);
        let s = a.stats();
        assert_eq!((s.tx_packets, s.tx_ring_full), (3, 2));
        // Draining two frees two slots.
        assert_eq!(b.rx_batch(2, Duration::ZERO, &mut |_, _| {}).unwrap(), 2);
        assert_eq!(send_counters(&mut a, 3, 5), 2);
        let mut seqs = Vec::new();
        b.rx_batch(10, Duration::ZERO, &mut |f, _| {
            seqs.push(u32::from_be_bytes(f[..4].try_into().unwrap()))
        })
        .unwrap();
        assert_eq!(seqs, vec![2, 3, 4]);
        assert_eq!(b.stats().rx_packets, 5);
    }

    #[test]
    fn rx_times_out_with_zero_after_waiting_about_the_timeout() {
        let (_a, mut b) = MemIo::pair(4);
        let t0 = Instant::now();
        assert_eq!(
            b.rx_batch(1, Duration::from_millis(20), &mut |_, _| {})
                .unwrap(),
            0
        );
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
    }

    #[test]
    fn timestamps_are_application_realtime_at_send() {
        let (mut a, mut b) = MemIo::pair(4);
        let before = clock::realtime_ns();
        send_counters(&mut a, 0, 2);
        let after = clock::realtime_ns();
        let mut ts = Vec::new();
        b.rx_batch(4, Duration::ZERO, &mut |_, m| {
            assert_eq!(m.ts_source, TsSource::Application);
            ts.push(m.ts_ns.unwrap());
        })
        .unwrap();
        assert_eq!(ts.len(), 2);
        assert!(ts[0] >= before && ts[0] <= ts[1] && ts[1] <= after);
    }

    #[test]
    fn a_waiting_receiver_wakes_when_the_other_thread_sends() {
        let (mut a, mut b) = MemIo::pair(4);
        let h = std::thread::spawn(move || {
            let mut got = 0;
            while got == 0 {
                got = b
                    .rx_batch(4, Duration::from_secs(5), &mut |f, _| assert_eq!(f, [9, 9]))
                    .unwrap();
            }
            got
        });
        std::thread::sleep(Duration::from_millis(10));
        a.tx_batch(1, &mut |_, buf| {
            buf[..2].copy_from_slice(&[9, 9]);
            2
        })
        .unwrap();
        assert_eq!(h.join().unwrap(), 1);
    }

    #[test]
    fn too_long_frames_are_an_error() {
        let (mut a, _b) = MemIo::pair(4);
        let e = a
            .tx_batch(1, &mut |_, _| MEM_MAX_FRAME_BYTES + 1)
            .unwrap_err();
        assert!(matches!(e, IoError::FrameTooLong { .. }), "{e:?}");
    }

    #[test]
    fn names_and_layers() {
        let (a, _b) = MemIo::pair(1);
        assert_eq!((a.name(), a.layer()), ("mem", Layer::Ethernet));
        assert_eq!(TsSource::KernelSoftware.as_str(), "kernel-software");
        assert_eq!(TsSource::None.as_str(), "none");
        assert_eq!(TsSource::Application.as_str(), "application");
        assert_eq!(TsSource::Hardware.as_str(), "hardware");
    }
}
