//! The run in progress, as seen from its LoadGen interfaces' counters, for the
//! live progress of a study ([`crate::artifacts::events::Event::Progress`]).
//!
//! The generator and the recorder keep no shared counters in their hot loops,
//! and need none: the kernel counts every frame of the generator's and the
//! recorder's interfaces. A sampler thread enters the LoadGen namespace and
//! reads `/proc/thread-self/net/dev`, which shows the calling thread's
//! namespace. The runner announces the run in progress with [`watch`].

use std::sync::Mutex;
use std::time::Instant;

use crate::artifacts::events::Event;

/// What the runner announces: where the run's traffic goes through.
#[derive(Debug, Clone, PartialEq)]
pub struct Watched {
    /// Run directory name (`000`).
    pub run: String,
    /// LoadGen namespace ("" for this one).
    pub lg_ns: String,
    /// Generator interface.
    pub gen_iface: String,
    /// Recorder interface.
    pub rec_iface: String,
    /// Offered probe rate.
    pub offered_pps: f64,
}

static CURRENT: Mutex<Option<Watched>> = Mutex::new(None);

/// While alive, [`current`] names this run; cleared on drop.
pub struct WatchGuard(());

impl Drop for WatchGuard {
    fn drop(&mut self) {
        if let Ok(mut c) = CURRENT.lock() {
            *c = None;
        }
    }
}

/// Announce the run whose traffic is about to start, sent from `tx_iface` and
/// recorded on `rx_iface` of the topology's LoadGen.
pub fn watch(
    topo: &crate::topo::Topology,
    (tx_iface, rx_iface): (&str, &str),
    run: usize,
    offered_pps: f64,
) -> WatchGuard {
    if let Ok(mut c) = CURRENT.lock() {
        *c = Some(Watched {
            run: format!("{run:03}"),
            lg_ns: topo.lg_ns.clone(),
            gen_iface: tx_iface.to_string(),
            rec_iface: rx_iface.to_string(),
            offered_pps,
        });
    }
    WatchGuard(())
}

/// The run in progress, if one is announced.
pub fn current() -> Option<Watched> {
    CURRENT.lock().ok().and_then(|c| c.clone())
}

/// `(tx_packets of tx_iface, rx_packets of rx_iface)` from a `/proc/net/dev` text.
pub fn parse_net_dev(text: &str, tx_iface: &str, rx_iface: &str) -> Option<(u64, u64)> {
    let mut tx = None;
    let mut rx = None;
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        // Receive: bytes packets errs drop fifo frame compressed multicast;
        // transmit: bytes packets ...
        let f: Vec<u64> = rest
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if f.len() < 16 {
            continue;
        }
        let name = name.trim();
        if name == rx_iface {
            rx = Some(f[1]);
        }
        if name == tx_iface {
            tx = Some(f[9]);
        }
    }
    Some((tx?, rx?))
}

/// Samples the announced run; one per sampler thread (it moves that thread
/// into the run's namespace).
pub struct Sampler {
    run: Option<Watched>,
    in_ns: Option<crate::net::netns::NetnsGuard>,
    start: Option<Instant>,
    base: (u64, u64),
    last: (Instant, u64, u64),
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::new()
    }
}

impl Sampler {
    /// A new sampler (in this thread's namespace).
    pub fn new() -> Sampler {
        Sampler {
            run: None,
            in_ns: None,
            start: None,
            base: (0, 0),
            last: (Instant::now(), 0, 0),
        }
    }

    /// A progress event of the run in progress, or None when no run is
    /// announced or its counters cannot be read (yet).
    pub fn sample(&mut self) -> Option<Event> {
        let Some(w) = current() else {
            self.reset();
            return None;
        };
        if self.run.as_ref() != Some(&w) {
            self.reset();
            if !w.lg_ns.is_empty() {
                self.in_ns = Some(crate::net::netns::NetnsGuard::enter(&w.lg_ns).ok()?);
            }
            self.run = Some(w.clone());
        }
        let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
        let (tx, rx) = parse_net_dev(&text, &w.gen_iface, &w.rec_iface)?;
        let now = Instant::now();
        let Some(start) = self.start else {
            self.start = Some(now);
            self.base = (tx, rx);
            self.last = (now, tx, rx);
            return None;
        };
        let (tx_n, rx_n) = (
            tx.saturating_sub(self.base.0),
            rx.saturating_sub(self.base.1),
        );
        let dt = now.duration_since(self.last.0).as_secs_f64().max(1e-6);
        let tx_pps = tx.saturating_sub(self.last.1) as f64 / dt;
        let rx_pps = rx.saturating_sub(self.last.2) as f64 / dt;
        self.last = (now, tx, rx);
        let loss_ratio = if tx_n == 0 {
            0.0
        } else {
            (1.0 - rx_n as f64 / tx_n as f64).max(0.0)
        };
        Some(Event::Progress {
            run: w.run,
            elapsed_s: now.duration_since(start).as_secs_f64(),
            offered_pps: w.offered_pps,
            tx_packets: tx_n,
            rx_packets: rx_n,
            tx_pps,
            rx_pps,
            loss_ratio,
        })
    }

    fn reset(&mut self) {
        // Back to the thread's own namespace before the next run's.
        self.in_ns = None;
        self.run = None;
        self.start = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
   lg0:    1200      17    0    0    0     0          0         0   640000   10000    0    0    0     0       0          0
   lg1:  633600    9900    0    0    0     0          0         0      128       2    0    0    0     0       0          0
";

    #[test]
    fn net_dev_gives_tx_of_one_and_rx_of_the_other() {
        assert_eq!(parse_net_dev(NET_DEV, "lg0", "lg1"), Some((10000, 9900)));
        assert_eq!(parse_net_dev(NET_DEV, "lg0", "nope"), None);
    }

    #[test]
    fn counters_of_this_thread_namespace_are_readable() {
        // Loopback of the test's own namespace: what lo sent it received.
        let text = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
        let (tx, rx) = parse_net_dev(&text, "lo", "lo").unwrap();
        assert_eq!(tx, rx);
    }
}
