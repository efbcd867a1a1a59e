//! The thin socket driver: one [`Endpoint`] on one connected UDP socket, time from the
//! host's realtime clock (one clock for both ends on one host, as the study assumes).

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;

use crate::config::Config;
use crate::endpoint::Endpoint;
use crate::receiver::Delivery;
use crate::vantage::{
    data_seq, drain_tx_stamps, enable_socket_timestamps, recv_stamped, Stamps, STAMP_CAP,
};
use crate::ConfigError;

/// Shortest socket wait: below this the driver spins through another loop instead.
const MIN_WAIT: Duration = Duration::from_micros(20);
/// Longest socket wait, so a stopped peer or a passed deadline is noticed promptly.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Datagrams taken from the socket per wake-up before timers are looked at again.
const RX_BATCH: usize = 64;

/// Nanoseconds since the Unix epoch on the realtime clock.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Why the driver could not start.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A transport parameter is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The socket refused.
    #[error("UDP socket: {0}")]
    Io(#[from] io::Error),
}

/// A delivered message and when the application got it (m6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The message.
    pub delivery: Delivery,
    /// m6, realtime clock.
    pub app_recv_ns: u64,
}

/// A deterministic Bernoulli dropper for outgoing datagrams (splitmix64), the test and
/// emulation hook for kernels without netem.
#[derive(Debug, Clone)]
struct TxLoss {
    threshold: u64,
    state: u64,
}

impl TxLoss {
    fn drop_next(&mut self) -> bool {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) < self.threshold
    }
}

/// One end of a connection on a UDP socket.
#[derive(Debug)]
pub struct UdpDriver {
    socket: UdpSocket,
    /// The transport state.
    pub endpoint: Endpoint,
    window_ns: u64,
    buf: Vec<u8>,
    tx_loss: Option<TxLoss>,
    /// Datagrams the loss hook dropped.
    pub tx_hook_dropped: u64,
    /// Datagrams the socket refused to send (counted, not retried).
    pub tx_errors: u64,
    vantage: Option<SocketVantage>,
    vanish_ns: Option<u64>,
}

/// m3 and m4 of the messages this end sent and received, when asked for.
#[derive(Debug, Default)]
pub struct SocketVantage {
    /// m3: software TX stamp of each DATA sent, by seq.
    pub m3: Stamps,
    /// m4: software RX stamp of each DATA received, by seq.
    pub m4: Stamps,
    next_key: u32,
    pending: HashMap<u32, u32>,
    drained: Vec<(u32, u64)>,
}

impl UdpDriver {
    /// Connect `socket` to `peer` and start an endpoint with `config`; `recv` hands out
    /// messages within `window_ns` of their deadline.
    pub fn new(
        socket: UdpSocket,
        peer: SocketAddr,
        config: Config,
        window_ns: u64,
    ) -> Result<Self, DriverError> {
        config.check_window(window_ns)?;
        socket.connect(peer)?;
        socket.set_nonblocking(true)?;
        let buf = vec![0u8; config.mtu_bytes];
        Ok(UdpDriver {
            socket,
            endpoint: Endpoint::new(config, now_ns())?,
            window_ns,
            buf,
            tx_loss: None,
            tx_hook_dropped: 0,
            tx_errors: 0,
            vantage: None,
            vanish_ns: None,
        })
    }

    /// End this side at `at_ns`, as a crashed process: from then on [`Self::run_until`]
    /// returns at once, before it sends, takes or hands over anything — also when the
    /// thread wakes up late, which would otherwise deliver messages after the instant.
    pub fn vanish_at(&mut self, at_ns: u64) {
        self.vanish_ns = Some(at_ns);
    }

    /// Whether the side has vanished by `now_ns`.
    pub fn vanished(&self, now_ns: u64) -> bool {
        self.vanish_ns.is_some_and(|v| now_ns >= v)
    }

    /// Drop each outgoing datagram with `probability`, drawn from a generator seeded with
    /// `seed`. For tests and loss emulation where netem is missing.
    pub fn set_tx_loss(&mut self, probability: f64, seed: u64) {
        let threshold = (probability.clamp(0.0, 1.0) * u64::MAX as f64) as u64;
        self.tx_loss = Some(TxLoss {
            threshold,
            state: seed,
        });
    }

    /// Record software TX/RX stamps (m3, m4) of DATA datagrams from now on.
    pub fn enable_vantage(&mut self) -> io::Result<()> {
        enable_socket_timestamps(&self.socket)?;
        self.vantage = Some(SocketVantage::default());
        Ok(())
    }

    /// The m3/m4 stamps, when enabled.
    pub fn vantage(&self) -> Option<&SocketVantage> {
        self.vantage.as_ref()
    }

    fn take_tx_stamps(&mut self) {
        let Some(v) = self.vantage.as_mut() else {
            return;
        };
        drain_tx_stamps(&self.socket, &mut v.drained);
        for (key, stamp) in v.drained.drain(..) {
            if let Some(seq) = v.pending.remove(&key) {
                v.m3.record(seq, stamp);
            }
        }
    }

    fn flush(&mut self) {
        loop {
            let now = now_ns();
            let Some(len) = self.endpoint.poll_transmit(now, &mut self.buf) else {
                return;
            };
            if self.tx_loss.as_mut().is_some_and(TxLoss::drop_next) {
                self.tx_hook_dropped += 1;
                continue;
            }
            if self.socket.send(&self.buf[..len]).is_err() {
                self.tx_errors += 1;
            } else if let Some(v) = self.vantage.as_mut() {
                // The kernel keys TX stamps by a per-send counter (SOF_TIMESTAMPING_OPT_ID).
                let key = v.next_key;
                v.next_key = v.next_key.wrapping_add(1);
                if let Some(seq) = data_seq(&self.buf[..len]) {
                    if v.pending.len() < STAMP_CAP {
                        v.pending.insert(key, seq);
                    }
                }
            }
        }
    }

    /// Run the connection until `until_ns`: send what is due, take what arrives, and push
    /// the messages the window releases into `out`.
    pub fn run_until(&mut self, until_ns: u64, out: &mut Vec<Received>) -> io::Result<()> {
        let mut rx = vec![0u8; 65_536];
        loop {
            if self.vanished(now_ns()) {
                return Ok(());
            }
            self.flush();
            let now = now_ns();
            if self.vanished(now) {
                return Ok(());
            }
            while let Some(delivery) = self.endpoint.receiver.recv(now, self.window_ns) {
                // m6 is the instant the window released it: the loop hands it over at once.
                out.push(Received {
                    delivery,
                    app_recv_ns: now,
                });
            }
            if now >= until_ns {
                return Ok(());
            }
            let mut wake = until_ns;
            if let Some(t) = self.endpoint.next_timeout(now) {
                wake = wake.min(t);
            }
            if let Some(t) = self.endpoint.receiver.next_release(self.window_ns) {
                wake = wake.min(t);
            }
            let wait = Duration::from_nanos(wake.saturating_sub(now)).clamp(MIN_WAIT, MAX_WAIT);
            self.wait_readable(wait)?;
            // Take what has arrived, a bounded batch so timers are served in between.
            for _ in 0..RX_BATCH {
                let got = match self.vantage.as_mut() {
                    Some(v) => recv_stamped(&self.socket, &mut rx).map(|r| {
                        r.map(|(n, stamp)| {
                            if let (Some(ts), Some(seq)) = (stamp, data_seq(&rx[..n])) {
                                v.m4.record(seq, ts);
                            }
                            n
                        })
                    }),
                    None => match self.socket.recv(&mut rx) {
                        Ok(n) => Ok(Some(n)),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                        Err(e) => Err(e),
                    },
                };
                match got {
                    Ok(Some(n)) => self.endpoint.handle(&rx[..n], now_ns()),
                    Ok(None) => break,
                    // An ICMP port unreachable from a peer not yet (or no longer) there.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) => return Err(e),
                }
            }
            self.take_tx_stamps();
        }
    }

    /// Sleep until the socket is readable or `wait` has passed. ppoll sleeps on an hrtimer
    /// (50 µs slack); SO_RCVTIMEO would round up to the next jiffy (4 ms at HZ=250), longer
    /// than the narrowest receive windows of the study.
    fn wait_readable(&self, wait: Duration) -> io::Result<()> {
        let mut fds = [PollFd::new(self.socket.as_fd(), PollFlags::POLLIN)];
        let timeout = TimeSpec::from_duration(wait);
        match ppoll(&mut fds, Some(timeout), None) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(io::Error::from(e)),
        }
    }

    /// The receive window.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }
}
