//! The XDP producer: `nflab-monitor`'s tap (an XDP program on the interface)
//! copies each received frame into a BPF ring buffer and passes it on, and one
//! thread here drains the ring into the capture's inner queues.
//!
//! Unlike a packet socket, nothing is cloned into a socket queue: the copy is a
//! `memcpy` of the snap length into the ring, done where the driver runs XDP
//! (on veth, the sender's core), and the rest of the work — the copy into the
//! inner queue, the triggers — runs on the consumer's and analyzer's threads.
//! The program sees the frames the interface *receives* (XDP is ingress only).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use nflab_monitor::tap::{self, TapConfig, TapFrame, TapSink};

use crate::filler::Filler;
use crate::{CaptureConfig, CaptureError, ProducerCounters};

/// How the capture's clock note names the stamps of this producer.
pub const CLOCK_SOURCE: &str =
    "CLOCK_REALTIME (the XDP tap's bpf_ktime_get_tai_ns, shifted by the whole-second TAI offset)";

struct Sink(Filler);

impl TapSink for Sink {
    fn frame(&mut self, f: TapFrame<'_>) {
        self.0.push(f.ts_ns, f.wire_len, f.data);
    }

    fn idle(&mut self) {
        self.0.tick();
    }
}

/// The running tap and its consumer thread.
pub struct XdpProducer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<ProducerCounters, CaptureError>>>,
}

impl XdpProducer {
    /// Attach the tap to `cfg.iface` in the calling thread's network namespace
    /// (the consumer thread inherits it) and start draining into `filler`;
    /// returns once the program is attached.
    pub fn start(cfg: &CaptureConfig, filler: Filler) -> Result<XdpProducer, CaptureError> {
        let tap_cfg = TapConfig {
            snaplen: cfg.snaplen,
            ..TapConfig::default()
        };
        let iface = cfg.iface.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("nflab-cap-xdp".into())
                .spawn(move || {
                    let (sink, counters) = tap::run(&iface, &tap_cfg, &stop, |r| {
                        let ok = r.is_ok();
                        let _ = ready_tx.send(r);
                        ok.then_some(Sink(filler))
                    })
                    .map_err(|e| CaptureError::Config(e.to_string()))?;
                    Ok(ProducerCounters {
                        id: 0,
                        captured: sink.0.finish(),
                        kernel_drops: counters.ring_full + counters.copy_failed,
                        ..ProducerCounters::default()
                    })
                })
                .map_err(|e| {
                    CaptureError::Config(format!("cannot start the XDP producer's thread: {e}"))
                })?
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(XdpProducer {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(CaptureError::Config(e))
            }
            Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                _ => CaptureError::Config("the XDP producer's thread ended early".into()),
            }),
        }
    }

    /// Detach the program, drain the ring, hand the last queue over.
    pub fn stop(mut self) -> Result<ProducerCounters, CaptureError> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("stopped once");
        thread
            .join()
            .map_err(|_| CaptureError::Config("the XDP producer's thread panicked".into()))?
    }
}

impl Drop for XdpProducer {
    /// A capture opened but never run still detaches its program.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
