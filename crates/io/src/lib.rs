//! nflab-io: move frames.
//!
//! One batch trait, [`PacketIo`], and its backends:
//!
//! - [`AfPacket`]: raw Ethernet frames on a Linux interface through `AF_PACKET`
//!   memory-mapped rings. RX uses a `TPACKET_V3` block ring with kernel software RX
//!   timestamps taken when the frame enters the receive path (`skb->tstamp`), which is
//!   where the precision of every nflab latency figure comes from. TX uses a
//!   `TPACKET_V2` frame ring on a second socket that receives nothing.
//! - [`AfXdp`]: raw Ethernet frames through an AF_XDP socket: a UMEM and four rings,
//!   batched TX and RX, a raw-eBPF redirect program for RX, zero-copy where the driver
//!   offers it and copy mode (veth) otherwise, one socket per queue.
//! - [`UdpIo`]: a plain UDP socket (frames are UDP payloads), batched with
//!   `sendmmsg`/`recvmmsg`, kernel RX timestamps from `SO_TIMESTAMPNS`.
//! - [`MemIo`]: an in-memory pair for unit tests of logic above this crate.
//! - [`FileWindow`]: a read-only mapping of part of a file (record files read once,
//!   without the copy `pread` makes).
//!
//! Small helpers sit beside them: [`clock`] (the clocks the lab stamps with),
//! [`iface`] (index, MAC, MTU of an interface in the current thread's network
//! namespace), [`probe_caps`] (what this host and privilege level can do) and
//! [`safe_fs`] (fresh private directories, exclusive files and files replaced whole,
//! for a process that runs as root).
//!
//! # The batch contract
//!
//! Every call moves a batch (ixy's `rx_batch`/`tx_batch` shape) through caller-supplied
//! closures, so no backend allocates per packet on the hot path. A short count is
//! normal, not an error: a full TX ring queues fewer frames than asked, a receive
//! timeout delivers zero. The caller decides whether to retry or to drop and count.
//!
//! # Timestamps
//!
//! All timestamps are `CLOCK_REALTIME` nanoseconds, the clock the kernel stamps packets
//! with, so a generator's application TX stamp and a recorder's kernel RX stamp on the
//! same host are directly comparable. [`RxMeta::ts_source`] says who took each stamp.
//! AF_PACKET and UDP also report the kernel's TX timestamp of every sent frame
//! ([`PacketIo::enable_tx_timestamps`], [`timestamping`]); NIC hardware stamps, where an
//! interface has them, are the NIC clock's time instead.
//!
//! # Limitations and caveats
//!
//! - AF_PACKET RX hands frames over in blocks: at low rates a frame waits up to
//!   `rx_block_timeout_ms` before user space sees it. Its timestamp is unaffected.
//! - Timestamps are per thread network namespace only in the sense that sockets are:
//!   open a backend from a thread that has entered the namespace of its interface.
//! - `unsafe` lives only in this crate (ring memory shared with the kernel, syscalls);
//!   each block carries a `// SAFETY:` comment.

#![deny(missing_docs)]

use std::time::Duration;

mod af_packet;
mod af_xdp;
mod bpf_asm;
pub mod clock;
mod file_window;
pub mod iface;
mod mem;
pub mod probe_caps;
pub mod process;
pub mod safe_fs;
mod sys;
pub mod timestamping;
mod udp;
pub mod xdp_live;

pub use af_packet::{AfPacket, AfPacketConfig, Fanout, FanoutMode, RxRingKind};

/// Send a UDP socket's IPv4 datagrams without a UDP checksum (`SO_NO_CHECK`; 0
/// means "none" in IPv4). For interfaces that leave the checksum to an offload
/// no hardware will do, when a user-space data plane re-sends the frames as it
/// read them (a macvlan, whose offload cannot be turned off, across the link DuT).
pub fn udp_without_checksum(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    sys::setsockopt(
        &fd,
        libc::SOL_SOCKET,
        libc::SO_NO_CHECK,
        &(1 as libc::c_int),
    )
}

/// Wait up to `timeout` for `fd` to become readable; true when it is (false on
/// timeout or a signal). `ppoll`, so the timeout is kept to the ns, where a
/// socket's `SO_RCVTIMEO` is rounded up to the kernel's tick (4 ms at 250 Hz).
pub fn wait_readable(
    fd: std::os::fd::BorrowedFd<'_>,
    timeout: std::time::Duration,
) -> std::io::Result<bool> {
    sys::poll_one(&fd, libc::POLLIN, timeout).map(|revents| revents != 0)
}
pub use af_xdp::{AfXdp, AfXdpConfig, Steer, ZeroCopy};
pub use file_window::FileWindow;
pub use mem::MemIo;
pub use timestamping::{TxStamp, TxStampOptions, TxStampStatus};
pub use udp::UdpIo;

/// Who took a receive timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsSource {
    /// No timestamp.
    None,
    /// User space read the clock after the frame was handed over.
    Application,
    /// The kernel stamped the frame in software on its receive path.
    KernelSoftware,
    /// The NIC stamped the frame (raw hardware clock).
    Hardware,
}

impl TsSource {
    /// The stable name used in records and reports.
    pub fn as_str(&self) -> &'static str {
        match self {
            TsSource::None => "none",
            TsSource::Application => "application",
            TsSource::KernelSoftware => "kernel-software",
            TsSource::Hardware => "hardware",
        }
    }
}

/// What a backend knows about one received frame besides its bytes.
#[derive(Debug, Clone, Copy)]
pub struct RxMeta {
    /// Receive time, `CLOCK_REALTIME` nanoseconds.
    pub ts_ns: Option<u64>,
    /// Who took `ts_ns`.
    pub ts_source: TsSource,
    /// Original length on the wire (the delivered slice may be shorter if truncated).
    pub wire_len: usize,
}

/// Counters of a backend since it was opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoStats {
    /// Frames accepted for transmission.
    pub tx_packets: u64,
    /// Frames delivered to an `rx_batch` sink.
    pub rx_packets: u64,
    /// Frames the kernel dropped before user space saw them (RX ring or socket queue full).
    pub rx_kernel_drops: u64,
    /// `tx_batch` calls that queued fewer frames than asked because the TX ring was full.
    pub tx_ring_full: u64,
}

/// What a backend's frames are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// Whole Ethernet frames from the destination MAC on, without FCS.
    Ethernet,
    /// UDP payloads; the kernel adds the headers.
    UdpPayload,
}

/// A way to send and receive frames in batches.
pub trait PacketIo: Send {
    /// Short backend name: "af_packet", "udp", "mem".
    fn name(&self) -> &'static str;
    /// The mode the backend runs in where it has several, e.g. AF_XDP's "zero-copy" or
    /// "copy"; `None` for backends with one.
    fn mode(&self) -> Option<&'static str> {
        None
    }
    /// What the frames passed to and from this backend are.
    fn layer(&self) -> Layer;
    /// Longest frame `tx_batch` accepts, in bytes.
    fn max_frame_len(&self) -> usize;
    /// Queue up to `n` frames: `fill(i, buf)` writes frame i into `buf` (len >= max_frame_len)
    /// and returns its length. Returns how many were queued (fewer when the TX ring is full;
    /// a short count is normal). Frames leave on `flush_tx` (backends without a ring send at once).
    fn tx_batch(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
    ) -> Result<usize, IoError>;
    /// Hand queued frames to the kernel. Never blocks; frames the kernel cannot take yet
    /// stay queued and leave on the next call.
    fn flush_tx(&mut self) -> Result<(), IoError>;
    /// Deliver up to `max` received frames to `sink`, waiting at most `timeout` for the first;
    /// Ok(0) on timeout.
    fn rx_batch(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, IoError>;
    /// Counters since open.
    fn stats(&self) -> IoStats;
    /// Frames queued by `tx_batch` that have not left yet (0 for backends
    /// that send at once). A sender calls `flush_tx` until this is 0.
    fn tx_outstanding(&mut self) -> usize {
        0
    }
    /// Ask the kernel for a timestamp of every frame sent from now on, read back with
    /// [`drain_tx_stamps`](Self::drain_tx_stamps) (see [`timestamping`]). Calling it again
    /// changes nothing and returns the same status. Backends without kernel TX timestamps
    /// return [`IoError::NoTxTimestamps`].
    fn enable_tx_timestamps(&mut self, _opts: &TxStampOptions) -> Result<TxStampStatus, IoError> {
        Err(IoError::NoTxTimestamps {
            backend: self.name(),
        })
    }
    /// The id the kernel's TX timestamp of the next frame handed to it will carry: frames
    /// are numbered from 0 in the order `tx_batch` queued them since
    /// [`enable_tx_timestamps`](Self::enable_tx_timestamps). None while TX timestamps are off.
    fn tx_stamp_next_id(&self) -> Option<u64> {
        None
    }
    /// Hand up to `max` TX timestamps waiting in the socket's error queue to `sink`, with
    /// the frame copy the kernel attached (empty with `OPT_TSONLY`), without blocking; one
    /// `recvmmsg` per 64 messages. Returns how many stamps were delivered.
    fn drain_tx_stamps(
        &mut self,
        _max: usize,
        _sink: &mut dyn FnMut(TxStamp, &[u8]),
    ) -> Result<usize, IoError> {
        Ok(0)
    }
    /// Wait up to `timeout` until a TX timestamp is waiting; false on timeout or when TX
    /// timestamps are off.
    fn wait_tx_stamps(&mut self, _timeout: Duration) -> Result<bool, IoError> {
        Ok(false)
    }
}

/// Everything that can go wrong in this crate. Each message is one sentence that names
/// the interface or syscall and says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The interface name is unknown in the current thread's network namespace.
    #[error("interface '{ifname}' does not exist in this network namespace: check the name with `ip link` and the namespace the thread runs in")]
    NoSuchInterface {
        /// The name asked for.
        ifname: String,
    },
    /// The interface name cannot be a Linux interface name.
    #[error("'{ifname}' is not a valid interface name: use 1 to 15 bytes without '/', ':', NUL or whitespace")]
    BadInterfaceName {
        /// The name given.
        ifname: String,
    },
    /// A raw socket was refused for lack of privilege.
    #[error("{what} needs CAP_NET_RAW: run as root")]
    NeedCapNetRaw {
        /// What was attempted, e.g. "AF_PACKET".
        what: &'static str,
    },
    /// A bpf() or XDP operation was refused for lack of privilege.
    #[error("{what} needs CAP_BPF and CAP_NET_ADMIN (or CAP_SYS_ADMIN): run as root")]
    NeedCapBpf {
        /// What was attempted.
        what: &'static str,
    },
    /// The kernel lacks a feature.
    #[error("{what} is not supported by this kernel: {hint}")]
    Unsupported {
        /// The feature.
        what: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// A system call failed for a reason not covered by a more specific variant.
    #[error("{call} failed on '{target}' ({source}): check that it exists and is up and that the settings are within the kernel's limits")]
    Syscall {
        /// The call, with its option where it matters, e.g. "setsockopt(PACKET_RX_RING)".
        call: &'static str,
        /// The interface, address or object the call was about.
        target: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The interface is down.
    #[error("interface '{ifname}' is down: bring it up with `ip link set dev {ifname} up`")]
    InterfaceDown {
        /// The interface.
        ifname: String,
    },
    /// A `fill` closure returned a frame longer than the backend can send.
    #[error("frame of {len} bytes is longer than the {max} bytes '{ifname}' can send: lower the frame size or raise the interface MTU")]
    FrameTooLong {
        /// The interface or socket.
        ifname: String,
        /// The frame length returned by `fill`.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A `fill` closure returned a frame shorter than an Ethernet header.
    #[error("frame of {len} bytes is shorter than the {min}-byte Ethernet header '{ifname}' needs: build a complete frame")]
    FrameTooShort {
        /// The interface.
        ifname: String,
        /// The frame length returned by `fill`.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// A configuration value is out of range.
    #[error("{backend} setting '{field}' {reason}")]
    Config {
        /// The backend, e.g. "AF_PACKET".
        backend: &'static str,
        /// The field of the config struct.
        field: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// A direction was used that the backend was opened without.
    #[error("{backend} on '{ifname}' was opened without {direction}: set `{direction}: true` in its config")]
    DirectionDisabled {
        /// The backend.
        backend: &'static str,
        /// The interface.
        ifname: String,
        /// "rx" or "tx".
        direction: &'static str,
    },
    /// A UDP socket without a peer was asked to send.
    #[error("UDP socket bound to {bind} has no peer to send to: open it with a peer address")]
    NoPeer {
        /// The local address.
        bind: std::net::SocketAddr,
    },
    /// The backend cannot report kernel TX timestamps.
    #[error("kernel TX timestamps are not available on the {backend} backend: use the af_packet or udp backend, or application TX timestamps")]
    NoTxTimestamps {
        /// The backend's name.
        backend: &'static str,
    },
    /// An XDP program is already attached.
    #[error("interface '{ifname}' already has an XDP program attached: detach it with `ip link set dev {ifname} xdp off` if it is not in use")]
    XdpBusy {
        /// The interface.
        ifname: String,
    },
}
