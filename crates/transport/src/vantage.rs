//! The kernel's vantage points for the study (seed 000 §6.3, m2..m5), Linux only:
//!
//! - m2 / m5: an AF_PACKET tap on the namespace's link sees a DATA datagram leave (m2, at
//!   `dev_queue_xmit_nit`) or arrive (m5), stamped by the kernel (SO_TIMESTAMPNS);
//! - m3 / m4: software TX and RX timestamps of the transport's own socket
//!   (SO_TIMESTAMPING): m3 when the driver (veth) takes the frame, m4 when the stack
//!   receives it. TX stamps come back on the error queue keyed by SOF_TIMESTAMPING_OPT_ID.
//!
//! All are CLOCK_REALTIME, the clock of [`crate::udp::now_ns`], so m1..m6 are on one clock
//! on one host. Each map holds one stamp per message (the first seen) up to a cap; stamps
//! beyond it are counted, not kept.

use std::collections::HashMap;
use std::io;
use std::io::IoSliceMut;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::socket::{
    recvmsg, setsockopt, socket, sockopt, AddressFamily, ControlMessageOwned, LinkAddr, MsgFlags,
    SockFlag, SockProtocol, SockType, TimestampingFlag,
};
use nix::sys::time::{TimeSpec, TimeValLike};

use crate::wire::{Kind, Packet};

/// Stamps kept per map; a run of 10 minutes at 1 kHz fits.
pub const STAMP_CAP: usize = 1 << 20;

/// One kind of stamp by message sequence number.
#[derive(Debug, Clone, Default)]
pub struct Stamps {
    by_seq: HashMap<u32, u64>,
    /// Stamps not kept because the map was full.
    pub overflow: u64,
}

impl Stamps {
    /// Keep the first stamp of `seq`.
    pub fn record(&mut self, seq: u32, ns: u64) {
        if self.by_seq.len() >= STAMP_CAP && !self.by_seq.contains_key(&seq) {
            self.overflow += 1;
            return;
        }
        self.by_seq.entry(seq).or_insert(ns);
    }
    /// The stamp of `seq`.
    pub fn get(&self, seq: u32) -> Option<u64> {
        self.by_seq.get(&seq).copied()
    }
    /// Stamps kept.
    pub fn len(&self) -> usize {
        self.by_seq.len()
    }
    /// No stamp kept.
    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }
}

fn timespec_ns(ts: &TimeSpec) -> u64 {
    u64::try_from(ts.num_nanoseconds()).unwrap_or(0)
}

/// The sequence number of a DATA datagram.
pub fn data_seq(datagram: &[u8]) -> Option<u32> {
    let p = Packet::new_checked(datagram).ok()?;
    (p.kind() == Some(Kind::Data)).then(|| p.seq())
}

/// Ask for software TX and RX timestamps on `socket`, TX ones keyed by a per-send counter
/// and without the packet (OPT_ID, OPT_TSONLY).
pub fn enable_socket_timestamps(socket: &impl AsFd) -> io::Result<()> {
    let flags = TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE
        | TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
        | TimestampingFlag::SOF_TIMESTAMPING_TX_SOFTWARE
        | TimestampingFlag::SOF_TIMESTAMPING_OPT_ID
        | TimestampingFlag::SOF_TIMESTAMPING_OPT_TSONLY;
    setsockopt(socket, sockopt::Timestamping, &flags).map_err(io::Error::from)
}

/// Receive one datagram from a nonblocking socket with its software RX stamp.
/// `Ok(None)` when nothing is waiting.
pub fn recv_stamped(
    socket: &impl AsRawFd,
    buf: &mut [u8],
) -> io::Result<Option<(usize, Option<u64>)>> {
    let mut cmsg = nix::cmsg_space!(nix::sys::socket::Timestamps);
    let mut iov = [IoSliceMut::new(buf)];
    match recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(msg) => {
            let mut stamp = None;
            if let Ok(cmsgs) = msg.cmsgs() {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmTimestampsns(ts) = c {
                        stamp = Some(timespec_ns(&ts.system));
                    }
                }
            }
            Ok(Some((msg.bytes, stamp)))
        }
        Err(nix::errno::Errno::EAGAIN) => Ok(None),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Drain the socket's error queue of TX stamps: `(OPT_ID key, stamp)` pairs.
pub fn drain_tx_stamps(socket: &impl AsRawFd, out: &mut Vec<(u32, u64)>) {
    let mut buf = [0u8; 64];
    loop {
        let mut cmsg = nix::cmsg_space!(
            nix::sys::socket::Timestamps,
            nix::libc::sock_extended_err,
            nix::libc::sockaddr_in
        );
        let mut iov = [IoSliceMut::new(&mut buf)];
        let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
        let Ok(msg) = recvmsg::<()>(socket.as_raw_fd(), &mut iov, Some(&mut cmsg), flags) else {
            return;
        };
        let (mut stamp, mut key) = (None, None);
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                match c {
                    ControlMessageOwned::ScmTimestampsns(ts) => {
                        stamp = Some(timespec_ns(&ts.system))
                    }
                    // SO_EE_ORIGIN_TIMESTAMPING: ee_data is the OPT_ID key.
                    ControlMessageOwned::Ipv4RecvErr(err, _)
                        if err.ee_origin == nix::libc::SO_EE_ORIGIN_TIMESTAMPING =>
                    {
                        key = Some(err.ee_data);
                    }
                    _ => {}
                }
            }
        }
        if let (Some(key), Some(stamp)) = (key, stamp) {
            out.push((key, stamp));
        }
    }
}

/// A UDP datagram seen in an IPv4 frame: source address and payload.
fn udp_in_frame(frame: &[u8], port: u16) -> Option<(Ipv4Addr, &[u8])> {
    const ETH: usize = 14;
    if frame.len() < ETH + 20 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[ETH..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip[9] != 17 || ip.len() < ihl + 8 {
        return None;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let udp = &ip[ihl..];
    let (sport, dport) = (
        u16::from_be_bytes([udp[0], udp[1]]),
        u16::from_be_bytes([udp[2], udp[3]]),
    );
    if sport != port && dport != port {
        return None;
    }
    Some((src, &udp[8..]))
}

/// An AF_PACKET tap on every interface of the namespace it was opened in.
#[derive(Debug)]
pub struct Tap {
    fd: OwnedFd,
    /// DATA leaving this namespace: m2.
    pub sent: Stamps,
    /// DATA arriving: m5.
    pub received: Stamps,
    /// Only frames on this interface index count (None: every interface).
    ifindex: Option<u32>,
}

impl Tap {
    /// Open a tap in the calling thread's network namespace.
    pub fn open() -> io::Result<Tap> {
        let fd = socket(
            AddressFamily::Packet,
            SockType::Raw,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            SockProtocol::EthAll,
        )?;
        setsockopt(&fd, sockopt::ReceiveTimestampns, &true)?;
        Ok(Tap {
            fd,
            sent: Stamps::default(),
            received: Stamps::default(),
            ifindex: None,
        })
    }

    /// Open a tap that counts the frames of one interface only (`None`: all). A namespace
    /// whose frames pass two interfaces (a macvlan over its lower device, a bridge) would
    /// otherwise see a datagram twice, and the first sighting may be on the wrong side.
    pub fn open_on(iface: Option<&str>) -> io::Result<Tap> {
        let mut tap = Tap::open()?;
        if let Some(name) = iface {
            tap.ifindex = Some(nix::net::if_::if_nametoindex(name).map_err(|e| {
                io::Error::new(io::ErrorKind::NotFound, format!("interface {name}: {e}"))
            })?);
        }
        Ok(tap)
    }

    /// Wait up to `wait` for frames and take all that are there: DATA from `local` to UDP
    /// `port` count as sent, other DATA as received.
    pub fn poll(&mut self, local: Ipv4Addr, port: u16, wait: Duration) -> io::Result<()> {
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        match ppoll(&mut fds, Some(TimeSpec::from_duration(wait)), None) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let mut frame = [0u8; 2048];
        loop {
            let mut cmsg = nix::cmsg_space!(TimeSpec);
            let mut iov = [IoSliceMut::new(&mut frame)];
            let (len, stamp, ifindex) = match recvmsg::<LinkAddr>(
                self.fd.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(msg) => {
                    let mut stamp = None;
                    if let Ok(cmsgs) = msg.cmsgs() {
                        for c in cmsgs {
                            if let ControlMessageOwned::ScmTimestampns(ts) = c {
                                stamp = Some(timespec_ns(&ts));
                            }
                        }
                    }
                    let ifindex = msg.address.map(|a| a.ifindex() as u32);
                    (msg.bytes, stamp, ifindex)
                }
                Err(nix::errno::Errno::EAGAIN) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let Some(stamp) = stamp else { continue };
            if self.ifindex.is_some() && ifindex != self.ifindex {
                continue;
            }
            let Some((src, payload)) = udp_in_frame(&frame[..len.min(frame.len())], port) else {
                continue;
            };
            if let Some(seq) = data_seq(payload) {
                if src == local {
                    self.sent.record(seq, stamp);
                } else {
                    self.received.record(seq, stamp);
                }
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_data_datagram_is_found_in_its_frame() {
        let repr = crate::wire::Repr {
            tx_id: 1,
            tx_ns: 2,
            body: crate::wire::Body::Data {
                seq: 77,
                block: 4,
                index: 13,
                deadline_ns: 5,
                app_send_ns: 3,
                payload: b"hi",
            },
        };
        let mut dgram = vec![0u8; repr.buffer_len()];
        repr.emit(&mut dgram);
        let mut frame = vec![0u8; 14 + 20 + 8];
        frame[12] = 0x08;
        frame[14] = 0x45;
        frame[14 + 9] = 17;
        frame[14 + 12..14 + 16].copy_from_slice(&[198, 18, 0, 1]);
        frame[34..36].copy_from_slice(&47000u16.to_be_bytes());
        frame[36..38].copy_from_slice(&47000u16.to_be_bytes());
        frame.extend_from_slice(&dgram);
        let (src, payload) = udp_in_frame(&frame, 47000).expect("udp");
        assert_eq!(src, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(data_seq(payload), Some(77));
        assert_eq!(udp_in_frame(&frame, 9), None);
        assert_eq!(udp_in_frame(&frame[..30], 47000), None);
        frame[12] = 0x86; // not IPv4
        assert_eq!(udp_in_frame(&frame, 47000), None);
    }
}
