//! UDP backend: frames are UDP payloads on one datagram socket.
//!
//! The socket stays unconnected and names the peer in every message, so an ICMP
//! "port unreachable" from a receiver that is not listening yet never turns into an error
//! on a later send. Batches go through `sendmmsg`/`recvmmsg` (up to [`UDP_BATCH`] per call)
//! from buffers allocated once at open. Receive timestamps come from `SO_TIMESTAMPNS`: the
//! kernel's `CLOCK_REALTIME` stamp of when the datagram entered the stack. Kernel drops
//! (socket buffer full) come from `SO_RXQ_OVFL`, which reports the socket's running drop
//! count with every datagram.
//!
//! Kernel TX timestamps ([`PacketIo::enable_tx_timestamps`]) are numbered per datagram in
//! the order `sendmmsg` sent them; the backend counts sent datagrams, so the n-th datagram
//! sent after enabling carries id n. (A datagram `sendmmsg` reports as unsent is taken to
//! have used no id; the end-to-end tests check ids against the datagrams' contents.) The
//! stamp is taken by `skb_tx_timestamp()` in
//! the driver of the interface the route picks. A UDP socket does not know that
//! interface, so it never asks for hardware stamps (a notice says so when asked).

use std::mem::size_of;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::sys;
use crate::timestamping::{self, TxStamp, TxStampOptions, TxStampStatus, TxStamper};
use crate::{clock, IoError, IoStats, Layer, PacketIo, RxMeta, TsSource};

/// Datagrams per `sendmmsg`/`recvmmsg` call.
pub const UDP_BATCH: usize = 32;
/// Receive buffer per datagram: the largest UDP payload over IPv6 without jumbograms.
/// Longer datagrams cannot exist; `RxMeta::wire_len` is the real length regardless.
const RX_BUF_BYTES: usize = 65_536;
/// Control buffer per datagram, in u64 words (8-byte aligned as `cmsghdr` needs):
/// CMSG_SPACE(16-byte timespec) + CMSG_SPACE(4-byte drop count) = 32 + 24 bytes, plus
/// the 64-byte SCM_TIMESTAMPING the kernel adds once TX timestamping (whose reporting
/// flag also covers received datagrams) is on.
const CTRL_WORDS: usize = 16;
/// Socket receive buffer asked for: a burst of small datagrams should not overflow the
/// default (about 200 KiB). The kernel caps it at `net.core.rmem_max` unless we may force it.
const RCVBUF_BYTES: libc::c_int = 8 << 20;

/// A plain UDP socket as a [`PacketIo`]; frames are UDP payloads.
pub struct UdpIo {
    fd: OwnedFd,
    local: SocketAddr,
    peer: Option<(libc::sockaddr_storage, libc::socklen_t)>,
    max_len: usize,
    tx_bufs: Vec<u8>,
    tx_lens: [usize; UDP_BATCH],
    rx_bufs: Vec<u8>,
    rx_ctrl: Vec<u64>,
    stats: IoStats,
    stamper: Option<TxStamper>,
}

fn to_raw(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn from_raw(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                sin.sin_addr.s_addr.to_ne_bytes().into(),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                sin6.sin6_addr.s6_addr.into(),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

impl UdpIo {
    /// Bind a UDP socket to `bind` (port 0 picks one) and, with `peer`, send to it.
    pub fn open(bind: SocketAddr, peer: Option<SocketAddr>) -> Result<Self, IoError> {
        let target = bind.to_string();
        let domain = if bind.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        let fd = sys::socket(domain, libc::SOCK_DGRAM, 0)
            .map_err(|e| sys::err_from("socket(SOCK_DGRAM)", &target, e))?;
        sys::setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
            .map_err(|e| sys::err_from("setsockopt(SO_TIMESTAMPNS)", &target, e))?;
        sys::setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)
            .map_err(|e| sys::err_from("setsockopt(SO_RXQ_OVFL)", &target, e))?;
        // Best effort: FORCE works with CAP_NET_ADMIN, the plain one up to rmem_max.
        if sys::setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF_BYTES).is_err() {
            let _ = sys::setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF_BYTES);
        }
        let (ss, len) = to_raw(&bind);
        // SAFETY: `ss` holds a valid sockaddr of length `len`.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &ss as *const _ as *const libc::sockaddr,
                len,
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return Err(sys::err_from("bind", &target, e));
        }
        // SAFETY: sockaddr_storage is plain data; all-zero is valid.
        let mut local_ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut local_len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `local_ss` has room for any address; `local_len` says how much.
        let rc = unsafe {
            libc::getsockname(
                fd.as_raw_fd(),
                &mut local_ss as *mut _ as *mut libc::sockaddr,
                &mut local_len,
            )
        };
        if rc < 0 {
            return Err(sys::syscall_err("getsockname", &target));
        }
        let local = from_raw(&local_ss).unwrap_or(bind);
        let max_len = if bind.is_ipv4() { 65_507 } else { 65_527 };
        Ok(UdpIo {
            fd,
            local,
            peer: peer.as_ref().map(to_raw),
            max_len,
            tx_bufs: if peer.is_some() {
                vec![0; UDP_BATCH * max_len]
            } else {
                Vec::new()
            },
            tx_lens: [0; UDP_BATCH],
            rx_bufs: vec![0; UDP_BATCH * RX_BUF_BYTES],
            rx_ctrl: vec![0; UDP_BATCH * CTRL_WORDS],
            stats: IoStats::default(),
            stamper: None,
        })
    }

    /// The address the socket is bound to (with the port the kernel picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Fill and send up to `cnt` datagrams (cnt <= UDP_BATCH) starting at frame index `first`.
    fn send_chunk(
        &mut self,
        first: usize,
        cnt: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
    ) -> Result<usize, IoError> {
        let Some((mut peer, peer_len)) = self.peer else {
            return Err(IoError::NoPeer { bind: self.local });
        };
        for i in 0..cnt {
            let buf = &mut self.tx_bufs[i * self.max_len..(i + 1) * self.max_len];
            let len = fill(first + i, buf);
            if len > self.max_len {
                return Err(IoError::FrameTooLong {
                    ifname: self.local.to_string(),
                    len,
                    max: self.max_len,
                });
            }
            self.tx_lens[i] = len;
        }
        // SAFETY: iovec and mmsghdr are plain data; all-zero is valid.
        let mut iov: [libc::iovec; UDP_BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; UDP_BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..cnt {
            iov[i].iov_base = self.tx_bufs[i * self.max_len..].as_mut_ptr() as *mut libc::c_void;
            iov[i].iov_len = self.tx_lens[i];
            msgs[i].msg_hdr.msg_name = &mut peer as *mut _ as *mut libc::c_void;
            msgs[i].msg_hdr.msg_namelen = peer_len;
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        loop {
            // SAFETY: `msgs[..cnt]` point to live iovecs over `tx_bufs` and to `peer`, all
            // valid for the duration of the call.
            let rc = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), cnt as _, 0) };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => return Ok(0),
                _ => return Err(sys::err_from("sendmmsg", &self.local.to_string(), e)),
            }
        }
    }
}

impl PacketIo for UdpIo {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn layer(&self) -> Layer {
        Layer::UdpPayload
    }

    fn max_frame_len(&self) -> usize {
        self.max_len
    }

    fn tx_batch(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
    ) -> Result<usize, IoError> {
        let mut sent = 0;
        while sent < n {
            let cnt = (n - sent).min(UDP_BATCH);
            let done = self.send_chunk(sent, cnt, fill)?;
            sent += done;
            if done < cnt {
                // The socket buffer or device queue is full: a short count, like a full ring.
                self.stats.tx_ring_full += 1;
                break;
            }
        }
        self.stats.tx_packets += sent as u64;
        if let Some(st) = self.stamper.as_mut() {
            st.next_id += sent as u64;
        }
        Ok(sent)
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
        let mut n = 0;
        let mut deadline: Option<Instant> = None;
        while n < max {
            let want = (max - n).min(UDP_BATCH);
            // SAFETY: iovec and mmsghdr are plain data; all-zero is valid.
            let mut iov: [libc::iovec; UDP_BATCH] = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut msgs: [libc::mmsghdr; UDP_BATCH] = unsafe { std::mem::zeroed() };
            sys::point_recv_msgs(
                &mut iov[..want],
                &mut msgs,
                &mut self.rx_bufs,
                RX_BUF_BYTES,
                &mut self.rx_ctrl,
                CTRL_WORDS,
            );
            // MSG_TRUNC makes msg_len the datagram's real length even if it did not fit.
            // SAFETY: `msgs[..want]` point to live iovecs over `rx_bufs` and control
            // buffers in `rx_ctrl` with the sizes given, valid for the call.
            let rc = unsafe {
                libc::recvmmsg(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    want as _,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    std::ptr::null_mut(),
                )
            };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => {
                        if n > 0 {
                            break;
                        }
                        let Some(left) = sys::wait_left(&mut deadline, timeout) else {
                            break;
                        };
                        sys::poll_in(&self.fd, left)
                            .map_err(|e| sys::err_from("poll(UDP)", &self.local.to_string(), e))?;
                        continue;
                    }
                    _ => return Err(sys::err_from("recvmmsg", &self.local.to_string(), e)),
                }
            }
            let got = rc as usize;
            let mut app_ts: Option<u64> = None;
            for (i, m) in msgs.iter().take(got).enumerate() {
                let wire_len = m.msg_len as usize;
                let mut ts: Option<u64> = None;
                let hdr = &m.msg_hdr;
                // SAFETY: the kernel filled `msg_control`/`msg_controllen` of this message;
                // CMSG_* walk only inside that buffer and return null at its end.
                unsafe {
                    let mut c = libc::CMSG_FIRSTHDR(hdr);
                    while !c.is_null() {
                        let cm = &*c;
                        if cm.cmsg_level == libc::SOL_SOCKET
                            && cm.cmsg_type == libc::SCM_TIMESTAMPNS
                        {
                            let t: libc::timespec = std::ptr::read_unaligned(
                                libc::CMSG_DATA(c) as *const libc::timespec
                            );
                            ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                        } else if cm.cmsg_level == libc::SOL_SOCKET
                            && cm.cmsg_type == libc::SO_RXQ_OVFL
                        {
                            let d: u32 = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32);
                            self.stats.rx_kernel_drops = d as u64;
                        }
                        c = libc::CMSG_NXTHDR(hdr, c);
                    }
                }
                let (ts_ns, ts_source) = match ts {
                    Some(t) => (Some(t), TsSource::KernelSoftware),
                    None => (
                        Some(*app_ts.get_or_insert_with(clock::realtime_ns)),
                        TsSource::Application,
                    ),
                };
                let off = i * RX_BUF_BYTES;
                let data = &self.rx_bufs[off..off + wire_len.min(RX_BUF_BYTES)];
                sink(
                    data,
                    RxMeta {
                        ts_ns,
                        ts_source,
                        wire_len,
                    },
                );
                n += 1;
            }
        }
        self.stats.rx_packets += n as u64;
        Ok(n)
    }

    fn stats(&self) -> IoStats {
        self.stats
    }

    fn enable_tx_timestamps(&mut self, opts: &TxStampOptions) -> Result<TxStampStatus, IoError> {
        if let Some(st) = &self.stamper {
            return Ok(st.status.clone());
        }
        let status = TxStampStatus {
            source: TsSource::KernelSoftware,
            phc_index: -1,
            notice: opts.hardware.then(|| {
                format!(
                    "the UDP socket bound to {} does not know its interface, so it asks for no hardware timestamps; using kernel software TX timestamps",
                    self.local
                )
            }),
        };
        self.stamper = Some(TxStamper::enable(
            &self.fd,
            &self.local.to_string(),
            false,
            opts,
            status.clone(),
        )?);
        Ok(status)
    }

    fn tx_stamp_next_id(&self) -> Option<u64> {
        self.stamper.as_ref().map(|s| s.next_id)
    }

    fn drain_tx_stamps(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(TxStamp, &[u8]),
    ) -> Result<usize, IoError> {
        match self.stamper.as_mut() {
            Some(st) => st.drain(&self.fd, max, sink),
            None => Ok(0),
        }
    }

    fn wait_tx_stamps(&mut self, timeout: Duration) -> Result<bool, IoError> {
        if self.stamper.is_none() {
            return Ok(false);
        }
        timestamping::wait_errqueue(&self.fd, &self.local.to_string(), timeout)
    }
}
