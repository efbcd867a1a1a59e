//! An AF_PACKET port for the data plane: `recvmmsg`/`sendmmsg` on a raw
//! socket bound to one interface.
//!
//! Why not the `TPACKET_V3` ring of `nflab-io`: a V3 ring hands frames to
//! user space a block at a time, when the block is full or its retire timer
//! (≥ 1 ms) fires. That is right for a recorder, whose timestamps are taken
//! by the kernel anyway, and wrong for a DuT, whose forwarding latency would
//! then be the block timer. A plain socket makes each frame readable as soon
//! as the kernel queued it, and one `recvmmsg` still moves a whole batch, so
//! the per-packet syscall cost is divided by the batch size (ixy's point).
//!
//! Blocking receive sleeps in `ppoll(2)`, which takes a nanosecond timeout,
//! so a 100 µs drain timer is not rounded to a millisecond.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use nflab_io::{IoError, IoStats, Layer, PacketIo, RxMeta, TsSource};

/// Size of one receive or transmit buffer.
const BUF_BYTES: usize = 2048;
/// `PACKET_QDISC_BYPASS` from <linux/if_packet.h>.
const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// `PACKET_IGNORE_OUTGOING` from <linux/if_packet.h>.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Receive buffer of the socket: room for ~30 ms at 1 Mpps of 64 B frames.
const RCVBUF_BYTES: libc::c_int = 16 << 20;
const ETH_HLEN: usize = 14;

/// A raw AF_PACKET socket on one interface.
pub struct RawSocket {
    fd: OwnedFd,
    ifname: String,
    max_frame: usize,
    rx_enabled: bool,
    rx_bufs: Vec<Vec<u8>>,
    tx_bufs: Vec<Vec<u8>>,
    tx_lens: Vec<usize>,
    tx_pending: usize,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    stats: IoStats,
}

// SAFETY: the raw pointers inside `iov`/`hdr` point only into buffers owned
// by the same struct and are rewritten before every syscall that reads them;
// nothing is shared with another thread.
unsafe impl Send for RawSocket {}

fn syscall_err(call: &'static str, ifname: &str) -> IoError {
    let source = std::io::Error::last_os_error();
    if source.raw_os_error() == Some(libc::EPERM) {
        return IoError::NeedCapNetRaw { what: "AF_PACKET" };
    }
    IoError::Syscall {
        call,
        target: ifname.to_string(),
        source,
    }
}

fn setsockopt_int(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> bool {
    // SAFETY: passes a pointer to a live c_int and its exact size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

impl RawSocket {
    /// Open a socket on `ifname` (in the calling thread's network namespace).
    /// With `rx` false it receives nothing (protocol 0) and only sends.
    /// `batch` sizes the buffer arrays.
    pub fn open(ifname: &str, rx: bool, batch: usize) -> Result<RawSocket, IoError> {
        let ifindex = nflab_io::iface::index(ifname)?;
        let mtu = nflab_io::iface::mtu(ifname).unwrap_or(1500);
        // SAFETY: plain syscall; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(syscall_err("socket(AF_PACKET)", ifname));
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Frames this socket sends must not come back to it; sending straight
        // to the driver skips the qdisc, as DPDK and the generator do.
        setsockopt_int(&fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        setsockopt_int(&fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1);
        if rx && !setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF_BYTES) {
            setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF_BYTES);
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = if rx {
            (libc::ETH_P_ALL as u16).to_be()
        } else {
            0
        };
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: passes a pointer to a live sockaddr_ll and its exact size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(syscall_err("bind(AF_PACKET)", ifname));
        }
        let batch = batch.clamp(1, 1024);
        Ok(RawSocket {
            fd,
            ifname: ifname.to_string(),
            max_frame: (mtu + ETH_HLEN + 4).min(BUF_BYTES),
            rx_enabled: rx,
            rx_bufs: (0..if rx { batch } else { 0 })
                .map(|_| vec![0u8; BUF_BYTES])
                .collect(),
            tx_bufs: (0..batch.max(64)).map(|_| vec![0u8; BUF_BYTES]).collect(),
            tx_lens: vec![0; batch.max(64)],
            tx_pending: 0,
            // SAFETY (zeroed): iovec and mmsghdr are plain data; null pointers
            // and zero lengths are valid values, overwritten before use.
            iov: vec![unsafe { std::mem::zeroed() }; batch.max(64)],
            hdr: vec![unsafe { std::mem::zeroed() }; batch.max(64)],
            stats: IoStats::default(),
        })
    }

    /// Point `hdr[i]` at `iov[i]` at `bufs[i][..len]` for i < n.
    fn prepare(&mut self, rx: bool, n: usize) {
        for i in 0..n {
            let (ptr, len) = if rx {
                (self.rx_bufs[i].as_mut_ptr(), BUF_BYTES)
            } else {
                (self.tx_bufs[i].as_mut_ptr(), self.tx_lens[i])
            };
            self.iov[i] = libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: len,
            };
            // SAFETY: msghdr is plain data; all-zero is valid (no name, no control).
            let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
            m.msg_iov = &mut self.iov[i];
            m.msg_iovlen = 1;
            self.hdr[i] = libc::mmsghdr {
                msg_hdr: m,
                msg_len: 0,
            };
        }
    }

    fn wait_readable(&self, timeout: Duration) -> Result<(), IoError> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd and a valid timespec; no signal mask.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(syscall_err("ppoll(AF_PACKET)", &self.ifname));
        }
        Ok(())
    }
}

impl PacketIo for RawSocket {
    fn name(&self) -> &'static str {
        "af_packet"
    }

    fn layer(&self) -> Layer {
        Layer::Ethernet
    }

    fn max_frame_len(&self) -> usize {
        self.max_frame
    }

    fn tx_batch(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
    ) -> Result<usize, IoError> {
        let mut queued = 0;
        while queued < n && self.tx_pending < self.tx_bufs.len() {
            let len = fill(queued, &mut self.tx_bufs[self.tx_pending][..self.max_frame]);
            if len < ETH_HLEN {
                return Err(IoError::FrameTooShort {
                    ifname: self.ifname.clone(),
                    len,
                    min: ETH_HLEN,
                });
            }
            self.tx_lens[self.tx_pending] = len;
            self.tx_pending += 1;
            queued += 1;
        }
        if queued < n {
            self.stats.tx_ring_full += 1;
        }
        Ok(queued)
    }

    fn flush_tx(&mut self) -> Result<(), IoError> {
        while self.tx_pending > 0 {
            let n = self.tx_pending;
            self.prepare(false, n);
            // SAFETY: hdr[..n] point at iov[..n], which point at tx_bufs[..n]
            // with their lengths; all live in self for the duration of the call.
            let rc = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    self.hdr.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(()),
                    _ => Err(IoError::Syscall {
                        call: "sendmmsg(AF_PACKET)",
                        target: self.ifname.clone(),
                        source: e,
                    }),
                };
            }
            let k = rc as usize;
            self.stats.tx_packets += k as u64;
            self.tx_bufs[..n].rotate_left(k);
            self.tx_lens[..n].rotate_left(k);
            self.tx_pending -= k;
            if k == 0 {
                break;
            }
        }
        Ok(())
    }

    fn rx_batch(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, IoError> {
        if !self.rx_enabled {
            return Err(IoError::DirectionDisabled {
                backend: "AF_PACKET",
                ifname: self.ifname.clone(),
                direction: "rx",
            });
        }
        let max = max.min(self.rx_bufs.len());
        let mut waited = false;
        loop {
            self.prepare(true, max);
            // SAFETY: hdr[..max] point at iov[..max], which point at rx_bufs[..max]
            // of BUF_BYTES each; all live in self for the duration of the call.
            let rc = unsafe {
                libc::recvmmsg(
                    self.fd.as_raw_fd(),
                    self.hdr.as_mut_ptr(),
                    max as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if rc > 0 {
                let n = rc as usize;
                for i in 0..n {
                    let len = (self.hdr[i].msg_len as usize).min(BUF_BYTES);
                    sink(
                        &self.rx_bufs[i][..len],
                        RxMeta {
                            ts_ns: None,
                            ts_source: TsSource::None,
                            wire_len: len,
                        },
                    );
                }
                self.stats.rx_packets += n as u64;
                return Ok(n);
            }
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if !matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                    return Err(IoError::Syscall {
                        call: "recvmmsg(AF_PACKET)",
                        target: self.ifname.clone(),
                        source: e,
                    });
                }
            }
            // Nothing queued: wait once, or report an empty poll.
            if waited || timeout.is_zero() {
                return Ok(0);
            }
            self.wait_readable(timeout)?;
            waited = true;
        }
    }

    fn stats(&self) -> IoStats {
        self.stats
    }

    fn tx_outstanding(&mut self) -> usize {
        self.tx_pending
    }
}

/// A port that receives through one backend and sends through another: on veth,
/// AF_PACKET receives cheapest through a `TPACKET_V2` ring (no syscall per batch) and
/// sends cheapest through `sendmmsg`, which copies small frames into one linear skb,
/// where the TX ring's page fragments must be copied again (`skb_copy_ubufs`, a page
/// allocation per frame) when veth moves them into another namespace.
pub struct SplitPort {
    rx: Box<dyn PacketIo>,
    tx: Box<dyn PacketIo>,
}

impl SplitPort {
    /// Receive on `rx`, send on `tx` (both on the same interface).
    pub fn new(rx: Box<dyn PacketIo>, tx: Box<dyn PacketIo>) -> SplitPort {
        SplitPort { rx, tx }
    }
}

impl PacketIo for SplitPort {
    fn name(&self) -> &'static str {
        "af_packet"
    }

    fn layer(&self) -> Layer {
        self.tx.layer()
    }

    fn max_frame_len(&self) -> usize {
        self.tx.max_frame_len()
    }

    fn tx_batch(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
    ) -> Result<usize, IoError> {
        self.tx.tx_batch(n, fill)
    }

    fn flush_tx(&mut self) -> Result<(), IoError> {
        self.tx.flush_tx()
    }

    fn rx_batch(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, IoError> {
        self.rx.rx_batch(max, timeout, sink)
    }

    fn stats(&self) -> IoStats {
        let (r, t) = (self.rx.stats(), self.tx.stats());
        IoStats {
            rx_packets: r.rx_packets,
            rx_kernel_drops: r.rx_kernel_drops,
            tx_packets: t.tx_packets,
            tx_ring_full: t.tx_ring_full,
        }
    }

    fn tx_outstanding(&mut self) -> usize {
        self.tx.tx_outstanding()
    }
}
