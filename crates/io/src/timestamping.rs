//! Kernel and NIC timestamps of sent frames (`SO_TIMESTAMPING`), and what an interface
//! can stamp (`ETHTOOL_GET_TS_INFO`, `SIOCSHWTSTAMP`).
//!
//! # TX timestamps
//!
//! [`PacketIo::enable_tx_timestamps`](crate::PacketIo::enable_tx_timestamps) sets
//! `SO_TIMESTAMPING` on a backend's TX socket with `TX_SOFTWARE | SOFTWARE | OPT_ID |
//! OPT_TSONLY` (plus `TX_HARDWARE | RAW_HARDWARE` where the interface stamps in hardware
//! and that was asked for). From then on, for every frame the driver hands to the device,
//! the kernel queues a message on the socket's *error queue*: an empty packet (`OPT_TSONLY`)
//! with two control messages,
//!
//! - `SCM_TIMESTAMPING`: three timespecs, `[0]` software (`CLOCK_REALTIME`, taken by
//!   `skb_tx_timestamp()` in the driver's xmit routine), `[2]` raw hardware (the NIC's PHC);
//! - the protocol's error cmsg (`PACKET_TX_TIMESTAMP`, `IP_RECVERR`, `IPV6_RECVERR`) with a
//!   `sock_extended_err`: `ee_errno = ENOMSG`, `ee_origin = SO_EE_ORIGIN_TIMESTAMPING`,
//!   `ee_info = SCM_TSTAMP_SND`, `ee_data` = the `OPT_ID` counter: 0 for the first frame
//!   sent after timestamping was switched on, one more for every frame after it.
//!
//! Backends count the frames they hand to the kernel in the order the kernel numbers them,
//! so a caller maps a stamp's id back to the frame it sent as the id-th
//! ([`tx_stamp_next_id`](crate::PacketIo::tx_stamp_next_id) says which id the next frame
//! gets). `drain_tx_stamps` reads the error queue with `recvmmsg(MSG_ERRQUEUE |
//! MSG_DONTWAIT)` in batches and never blocks.
//!
//! The error queue counts against the socket's receive buffer; when it is full the kernel
//! drops new stamps (the frames still leave). Backends raise the buffer, and callers should
//! drain between TX batches. A frame the driver drops after `skb_tx_timestamp()` (e.g. a
//! veth peer whose backlog is full) still gets its stamp and its id.
//!
//! # Hardware
//!
//! [`ts_info`] asks the driver what it can stamp, like `ethtool -T`. [`enable_hardware`]
//! switches the NIC's stamping on with `SIOCSHWTSTAMP` when it can, keeping the direction
//! not asked for as it was, and otherwise returns a one-line notice naming the interface.
//! Hardware stamps are the NIC's PHC time, not `CLOCK_REALTIME`: subtracting them from
//! another clock's stamps is only meaningful when the PHC is synchronised to it
//! (`phc2sys`). nflab leaves the NIC's stamping on when it is done, as `ptp4l` does;
//! switching it off could break another user of the PHC.

use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::sys;
use crate::{IoError, TsSource};

/// `SCM_TSTAMP_SND` from <linux/errqueue.h>: the driver handed the frame to the device.
pub const SCM_TSTAMP_SND: u32 = 0;
/// `PACKET_TX_TIMESTAMP` from <linux/if_packet.h>: the cmsg type of a packet socket's
/// error-queue messages.
pub const PACKET_TX_TIMESTAMP: i32 = 16;
/// `SO_TIMESTAMPING_NEW` from <asm-generic/socket.h>: the y2038-safe cmsg type (64-bit
/// seconds on every architecture).
const SO_TIMESTAMPING_NEW: i32 = 65;
/// `ETHTOOL_GET_TS_INFO` from <linux/ethtool.h>.
const ETHTOOL_GET_TS_INFO: u32 = 0x41;

/// What an interface's driver says it can timestamp (`ETHTOOL_GET_TS_INFO`, the data of
/// `ethtool -T`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsInfo {
    /// `SOF_TIMESTAMPING_*` capabilities.
    pub so_timestamping: u32,
    /// Index of the PTP hardware clock (`/dev/ptpN`), -1 for none.
    pub phc_index: i32,
    /// Bit `1 << HWTSTAMP_TX_*` for each supported TX mode.
    pub tx_types: u32,
    /// Bit `1 << HWTSTAMP_FILTER_*` for each supported RX filter.
    pub rx_filters: u32,
}

impl TsInfo {
    /// The driver stamps sent frames in software (calls `skb_tx_timestamp`).
    pub fn software_tx(&self) -> bool {
        self.so_timestamping & libc::SOF_TIMESTAMPING_TX_SOFTWARE != 0
    }

    /// The NIC can stamp every sent frame and report its raw PHC time.
    pub fn hardware_tx(&self) -> bool {
        self.so_timestamping & libc::SOF_TIMESTAMPING_TX_HARDWARE != 0
            && self.so_timestamping & libc::SOF_TIMESTAMPING_RAW_HARDWARE != 0
            && self.tx_types & (1 << libc::HWTSTAMP_TX_ON) != 0
    }

    /// The NIC can stamp *every* received frame (filter `HWTSTAMP_FILTER_ALL`); NICs that
    /// stamp PTP frames only cannot stamp probes.
    pub fn hardware_rx(&self) -> bool {
        self.so_timestamping & libc::SOF_TIMESTAMPING_RX_HARDWARE != 0
            && self.so_timestamping & libc::SOF_TIMESTAMPING_RAW_HARDWARE != 0
            && self.rx_filters & (1 << libc::HWTSTAMP_FILTER_ALL) != 0
    }

    /// A few words for notices: "software tx+rx, no hardware" and the like.
    pub fn describe(&self) -> String {
        let sw: Vec<&str> = [
            (self.software_tx(), "tx"),
            (
                self.so_timestamping & libc::SOF_TIMESTAMPING_RX_SOFTWARE != 0,
                "rx",
            ),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, s)| *s)
        .collect();
        let hw: Vec<&str> = [(self.hardware_tx(), "tx"), (self.hardware_rx(), "rx")]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, s)| *s)
            .collect();
        let sw = if sw.is_empty() {
            "no software".to_string()
        } else {
            format!("software {}", sw.join("+"))
        };
        if hw.is_empty() {
            format!("{sw}, no hardware")
        } else {
            format!("{sw}, hardware {} (PHC {})", hw.join("+"), self.phc_index)
        }
    }
}

/// `struct ethtool_ts_info` from <linux/ethtool.h>.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// `struct ifreq` with the `ifr_data` member of its union, padded to the kernel's 40 bytes.
#[repr(C)]
struct IfreqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Run an `ifr_data` ioctl (`SIOCETHTOOL`, `SIOC[GS]HWTSTAMP`) on `fd`, or on a throwaway
/// datagram socket of the current thread's namespace; `data` is the structure the request
/// reads and writes. The kernel resolves `ifname` in the namespace of the socket, not of
/// the calling thread, so a backend can do this from any thread on its own socket.
fn ifr_data_ioctl<T>(
    fd: Option<&OwnedFd>,
    ifname: &str,
    req: libc::c_ulong,
    data: &mut T,
    call: &'static str,
) -> Result<(), IoError> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ || ifname.contains('\0') {
        return Err(IoError::BadInterfaceName {
            ifname: ifname.to_string(),
        });
    }
    let own;
    let fd = match fd {
        Some(f) => f,
        None => {
            own = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
                .map_err(|e| sys::err_from("socket(AF_INET)", ifname, e))?;
            &own
        }
    };
    let mut ifr = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data: data as *mut T as *mut libc::c_void,
        _pad: [0; 16],
    };
    // Checked shorter than IFNAMSIZ above, so it stays NUL-terminated.
    ifr.name[..ifname.len()].copy_from_slice(ifname.as_bytes());
    // SAFETY: `ifr` is a 40-byte ifreq whose ifr_data points to `data`, a live T of the
    // layout the request expects; the kernel reads and writes only inside both.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, &mut ifr) };
    if rc < 0 {
        return Err(crate::iface::ioctl_error(call, ifname));
    }
    Ok(())
}

/// What `ifname` (in the current thread's namespace) can timestamp, as `ethtool -T` says.
/// Needs no privilege.
pub fn ts_info(ifname: &str) -> Result<TsInfo, IoError> {
    ts_info_on(None, ifname)
}

/// [`ts_info`] through `fd`'s namespace.
pub(crate) fn ts_info_on(fd: Option<&OwnedFd>, ifname: &str) -> Result<TsInfo, IoError> {
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..EthtoolTsInfo::default()
    };
    ifr_data_ioctl(
        fd,
        ifname,
        libc::SIOCETHTOOL,
        &mut info,
        "ioctl(SIOCETHTOOL, ETHTOOL_GET_TS_INFO)",
    )?;
    Ok(TsInfo {
        so_timestamping: info.so_timestamping,
        phc_index: info.phc_index,
        tx_types: info.tx_types,
        rx_filters: info.rx_filters,
    })
}

/// What [`enable_hardware`] achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwStatus {
    /// The interface.
    pub ifname: String,
    /// The NIC stamps sent frames.
    pub tx: bool,
    /// The NIC stamps every received frame.
    pub rx: bool,
    /// Its PTP hardware clock, -1 for none.
    pub phc_index: i32,
    /// One line saying what was asked for and not done, naming the interface; None when
    /// everything asked for is on.
    pub notice: Option<String>,
}

/// Switch on the NIC's hardware stamping of sent (`tx`) and/or received (`rx`) frames on
/// `ifname` with `SIOCSHWTSTAMP`, if [`ts_info`] says it can; the direction not asked for
/// keeps its current setting. Needs CAP_NET_ADMIN. Never fails: what could not be done is
/// in [`HwStatus::notice`], and the caller goes on with software stamps.
pub fn enable_hardware(ifname: &str, tx: bool, rx: bool) -> HwStatus {
    enable_hardware_on(None, ifname, tx, rx)
}

/// [`enable_hardware`] through `fd`'s namespace.
pub(crate) fn enable_hardware_on(
    fd: Option<&OwnedFd>,
    ifname: &str,
    tx: bool,
    rx: bool,
) -> HwStatus {
    let mut st = HwStatus {
        ifname: ifname.to_string(),
        tx: false,
        rx: false,
        phc_index: -1,
        notice: None,
    };
    if !tx && !rx {
        return st;
    }
    let info = match ts_info_on(fd, ifname) {
        Ok(i) => i,
        Err(e) => {
            st.notice = Some(format!(
                "cannot ask {ifname} what it can timestamp ({e}); using kernel software timestamps"
            ));
            return st;
        }
    };
    st.phc_index = info.phc_index;
    let want_tx = tx && info.hardware_tx();
    let want_rx = rx && info.hardware_rx();
    let missing: Vec<&str> = [(tx && !want_tx, "tx"), (rx && !want_rx, "rx")]
        .iter()
        .filter(|(m, _)| *m)
        .map(|(_, s)| *s)
        .collect();
    if !want_tx && !want_rx {
        st.notice = Some(format!(
            "{ifname} has no hardware {} timestamping (ETHTOOL_GET_TS_INFO: {}); using kernel software timestamps",
            missing.join("/"),
            info.describe()
        ));
        return st;
    }
    // Keep what another user (ptp4l) set for the direction we do not touch.
    let mut cfg = libc::hwtstamp_config {
        flags: 0,
        tx_type: libc::HWTSTAMP_TX_OFF as libc::c_int,
        rx_filter: libc::HWTSTAMP_FILTER_NONE as libc::c_int,
    };
    let _ = ifr_data_ioctl(
        fd,
        ifname,
        libc::SIOCGHWTSTAMP,
        &mut cfg,
        "ioctl(SIOCGHWTSTAMP)",
    );
    if want_tx {
        cfg.tx_type = libc::HWTSTAMP_TX_ON as libc::c_int;
    }
    if want_rx {
        cfg.rx_filter = libc::HWTSTAMP_FILTER_ALL as libc::c_int;
    }
    cfg.flags = 0;
    if let Err(e) = ifr_data_ioctl(
        fd,
        ifname,
        libc::SIOCSHWTSTAMP,
        &mut cfg,
        "ioctl(SIOCSHWTSTAMP)",
    ) {
        st.notice = Some(format!(
            "{ifname} refused hardware timestamping ({e}); using kernel software timestamps"
        ));
        return st;
    }
    // The driver may widen the RX filter or refuse a mode without an error: read back.
    st.tx = want_tx && cfg.tx_type == libc::HWTSTAMP_TX_ON as libc::c_int;
    st.rx = want_rx && cfg.rx_filter == libc::HWTSTAMP_FILTER_ALL as libc::c_int;
    if !missing.is_empty() || (want_tx && !st.tx) || (want_rx && !st.rx) {
        st.notice = Some(format!(
            "{ifname} stamps in hardware only for {} (ETHTOOL_GET_TS_INFO: {}); the rest uses kernel software timestamps",
            match (st.tx, st.rx) {
                (true, true) => "tx and rx",
                (true, false) => "tx",
                (false, true) => "rx",
                (false, false) => "nothing",
            },
            info.describe()
        ));
    }
    st
}

/// What to ask of [`PacketIo::enable_tx_timestamps`](crate::PacketIo::enable_tx_timestamps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStampOptions {
    /// Let the NIC stamp in hardware where [`ts_info`] says it can (AF_PACKET only: it knows
    /// its interface); software otherwise, with a notice.
    pub hardware: bool,
    /// `SOF_TIMESTAMPING_OPT_TSONLY`: error-queue messages carry no copy of the frame.
    /// Default true; tests switch it off to check ids against the frames' contents.
    pub tsonly: bool,
}

impl Default for TxStampOptions {
    fn default() -> Self {
        TxStampOptions {
            hardware: true,
            tsonly: true,
        }
    }
}

/// What [`PacketIo::enable_tx_timestamps`](crate::PacketIo::enable_tx_timestamps) switched on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxStampStatus {
    /// Who takes the stamps: [`TsSource::KernelSoftware`] or [`TsSource::Hardware`].
    pub source: TsSource,
    /// PTP hardware clock of hardware stamps, -1 for none.
    pub phc_index: i32,
    /// One line for the user when hardware was asked for and is not used, naming the
    /// interface (without a "notice:" prefix).
    pub notice: Option<String>,
}

/// One TX timestamp read from a socket's error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStamp {
    /// Which frame: 0 for the first frame handed to the kernel after timestamping was
    /// switched on (the 32-bit `OPT_ID` counter, widened by the backend's frame count).
    pub id: u64,
    /// The stamp, ns: `CLOCK_REALTIME` for software stamps, the PHC's time for hardware.
    pub ns: u64,
    /// Who took it.
    pub source: TsSource,
}

/// The timestamp part of one error-queue message, as [`parse_errqueue_control`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrQueueStamp {
    /// `ee_data`: the `OPT_ID` counter of the frame.
    pub id: u32,
    /// `ee_info`: `SCM_TSTAMP_SND` (0), `SCM_TSTAMP_SCHED` (1) or `SCM_TSTAMP_ACK` (2).
    pub kind: u32,
    /// `ts[0]` of `SCM_TIMESTAMPING`, ns, when not zero.
    pub software_ns: Option<u64>,
    /// `ts[2]` of `SCM_TIMESTAMPING`, ns, when not zero.
    pub hardware_ns: Option<u64>,
}

impl ErrQueueStamp {
    /// The stamp to use: hardware when the NIC gave one, else software.
    pub fn best(&self) -> Option<(u64, TsSource)> {
        match (self.hardware_ns, self.software_ns) {
            (Some(h), _) => Some((h, TsSource::Hardware)),
            (None, Some(s)) => Some((s, TsSource::KernelSoftware)),
            (None, None) => None,
        }
    }
}

fn ne_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn ne_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_ne_bytes(a)
}

/// A timespec of `ts_bytes` bytes (two longs) at `at`, as ns; None when zero or invalid.
fn timespec_ns(b: &[u8], at: usize, ts_bytes: usize) -> Option<u64> {
    let half = ts_bytes / 2;
    let (sec, nsec) = if half == 8 {
        (ne_i64(b, at), ne_i64(b, at + 8))
    } else {
        (ne_u32(b, at) as i32 as i64, ne_u32(b, at + 4) as i32 as i64)
    };
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) || (sec == 0 && nsec == 0) {
        return None;
    }
    (sec as u64)
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(nsec as u64))
}

/// Find the TX timestamp in the control data of one error-queue message (`msg_control`
/// up to `msg_controllen`). Returns None unless the data holds both an `SCM_TIMESTAMPING`
/// cmsg and a timestamping `sock_extended_err` (from a packet, IPv4 or IPv6 socket); a
/// cmsg whose length runs past the buffer ends the walk. Pure: the unit tests feed it
/// hand-built buffers.
pub fn parse_errqueue_control(control: &[u8]) -> Option<ErrQueueStamp> {
    // CMSG_ALIGN: cmsg headers and data are aligned to sizeof(long).
    const ALIGN: usize = size_of::<libc::c_long>();
    let align = |n: usize| (n + ALIGN - 1) & !(ALIGN - 1);
    let hdr = size_of::<libc::cmsghdr>();
    let data_at = align(hdr);
    let mut stamps: Option<(Option<u64>, Option<u64>)> = None;
    let mut ee: Option<(u32, u32)> = None;
    let mut off = 0;
    while off + hdr <= control.len() {
        let len = match size_of::<libc::size_t>() {
            8 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(&control[off..off + 8]);
                u64::from_ne_bytes(a) as usize
            }
            _ => ne_u32(control, off) as usize,
        };
        let lsz = size_of::<libc::size_t>();
        let level = ne_u32(control, off + lsz) as i32;
        let ty = ne_u32(control, off + lsz + 4) as i32;
        if len < data_at || off + len > control.len() {
            break;
        }
        let data = &control[off + data_at..off + len];
        match (level, ty) {
            (libc::SOL_SOCKET, libc::SO_TIMESTAMPING) | (libc::SOL_SOCKET, SO_TIMESTAMPING_NEW) => {
                let ts = if ty == SO_TIMESTAMPING_NEW {
                    16
                } else {
                    size_of::<libc::timespec>()
                };
                if data.len() >= 3 * ts {
                    stamps = Some((timespec_ns(data, 0, ts), timespec_ns(data, 2 * ts, ts)));
                }
            }
            // struct sock_extended_err: errno u32, origin u8, type u8, code u8, pad u8,
            // info u32, data u32.
            (libc::SOL_PACKET, PACKET_TX_TIMESTAMP)
            | (libc::SOL_IP, libc::IP_RECVERR)
            | (libc::SOL_IPV6, libc::IPV6_RECVERR)
                if data.len() >= 16
                    && ne_u32(data, 0) == libc::ENOMSG as u32
                    && data[4] == libc::SO_EE_ORIGIN_TIMESTAMPING =>
            {
                ee = Some((ne_u32(data, 8), ne_u32(data, 12)));
            }
            _ => {}
        }
        off += align(len);
    }
    let ((software_ns, hardware_ns), (kind, id)) = (stamps?, ee?);
    Some(ErrQueueStamp {
        id,
        kind,
        software_ns,
        hardware_ns,
    })
}

/// Messages read per `recvmmsg` call.
const ERRQ_BATCH: usize = 64;
/// Control bytes per message: SCM_TIMESTAMPING (16 + 48), the error cmsg with an
/// offender address (16 + 16 + 28) and an SCM_TIMESTAMPNS a UDP socket may add (16 + 16).
const ERRQ_CTRL_BYTES: usize = 256;
/// Frame bytes per message: nothing with OPT_TSONLY; without it, enough for the
/// headers and probe of a test frame (longer copies are truncated).
const ERRQ_DATA_BYTES: usize = 256;
/// Socket receive buffer asked for, which bounds the error queue: room for tens of
/// thousands of stamps between two drains.
pub(crate) const ERRQ_RCVBUF_BYTES: libc::c_int = 16 << 20;

/// A TX socket's timestamp state: the frame counter and the buffers `recvmmsg` fills.
pub(crate) struct TxStamper {
    /// Frames handed to the kernel since timestamping was switched on: the id of the next.
    pub(crate) next_id: u64,
    pub(crate) status: TxStampStatus,
    /// The interface or address, for error messages.
    target: String,
    ctrl: Vec<u8>,
    data: Vec<u8>,
}

impl TxStamper {
    /// Switch on TX timestamps on `fd` (hardware generation when `hardware`), reporting
    /// in software and/or raw hardware time, with `OPT_ID` (the counter starts at 0 here)
    /// and `OPT_TSONLY` as `opts` says.
    pub(crate) fn enable(
        fd: &OwnedFd,
        target: &str,
        hardware: bool,
        opts: &TxStampOptions,
        status: TxStampStatus,
    ) -> Result<TxStamper, IoError> {
        let mut flags = libc::SOF_TIMESTAMPING_TX_SOFTWARE
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_ID;
        if opts.tsonly {
            flags |= libc::SOF_TIMESTAMPING_OPT_TSONLY;
        }
        if hardware {
            flags |= libc::SOF_TIMESTAMPING_TX_HARDWARE | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
        }
        sys::setsockopt_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            flags as libc::c_int,
        )
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::EINVAL) || e.raw_os_error() == Some(libc::EOPNOTSUPP)
            {
                IoError::Unsupported {
                    what: "SO_TIMESTAMPING with OPT_ID and OPT_TSONLY",
                    hint: "use Linux 4.1 or later, or application TX timestamps",
                }
            } else {
                sys::err_from("setsockopt(SO_TIMESTAMPING)", target, e)
            }
        })?;
        // Best effort: FORCE works with CAP_NET_ADMIN, the plain one up to rmem_max.
        if sys::setsockopt_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            ERRQ_RCVBUF_BYTES,
        )
        .is_err()
        {
            let _ = sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, ERRQ_RCVBUF_BYTES);
        }
        Ok(TxStamper {
            next_id: 0,
            status,
            target: target.to_string(),
            ctrl: vec![0; ERRQ_BATCH * ERRQ_CTRL_BYTES],
            data: vec![0; ERRQ_BATCH * ERRQ_DATA_BYTES],
        })
    }

    /// The 64-bit id of a stamp whose 32-bit counter is `id`: the latest frame handed to
    /// the kernel with those low bits.
    fn widen(&self, id: u32) -> u64 {
        let back = (self.next_id as u32).wrapping_sub(id) as u64;
        self.next_id.wrapping_sub(back)
    }

    /// Read up to `max` messages from `fd`'s error queue without blocking and hand each
    /// `SCM_TSTAMP_SND` stamp to `sink` with the bytes of the frame copy (empty with
    /// `OPT_TSONLY`). Returns how many stamps were delivered.
    pub(crate) fn drain(
        &mut self,
        fd: &OwnedFd,
        max: usize,
        sink: &mut dyn FnMut(TxStamp, &[u8]),
    ) -> Result<usize, IoError> {
        let mut read = 0;
        let mut delivered = 0;
        while read < max {
            let want = (max - read).min(ERRQ_BATCH);
            // SAFETY: iovec and mmsghdr are plain data; all-zero is valid.
            let mut iov: [libc::iovec; ERRQ_BATCH] = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut msgs: [libc::mmsghdr; ERRQ_BATCH] = unsafe { std::mem::zeroed() };
            sys::point_recv_msgs(
                &mut iov[..want],
                &mut msgs,
                &mut self.data,
                ERRQ_DATA_BYTES,
                &mut self.ctrl,
                ERRQ_CTRL_BYTES,
            );
            // SAFETY: `msgs[..want]` point to live iovecs over `data` and to control
            // buffers in `ctrl` of the sizes given, valid for the call.
            let rc = unsafe {
                libc::recvmmsg(
                    fd.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    want as _,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => break,
                    _ => return Err(sys::err_from("recvmmsg(MSG_ERRQUEUE)", &self.target, e)),
                }
            }
            let got = rc as usize;
            for (i, m) in msgs.iter().take(got).enumerate() {
                // msg_controllen is size_t on glibc, socklen_t on musl.
                #[allow(clippy::unnecessary_cast)]
                let clen = (m.msg_hdr.msg_controllen as usize).min(ERRQ_CTRL_BYTES);
                let ctrl = &self.ctrl[i * ERRQ_CTRL_BYTES..i * ERRQ_CTRL_BYTES + clen];
                let Some(p) = parse_errqueue_control(ctrl) else {
                    continue;
                };
                if p.kind != SCM_TSTAMP_SND {
                    continue;
                }
                let Some((ns, source)) = p.best() else {
                    continue;
                };
                let dlen = (m.msg_len as usize).min(ERRQ_DATA_BYTES);
                let frame = &self.data[i * ERRQ_DATA_BYTES..i * ERRQ_DATA_BYTES + dlen];
                sink(
                    TxStamp {
                        id: self.widen(p.id),
                        ns,
                        source,
                    },
                    frame,
                );
                delivered += 1;
            }
            read += got;
            if got < want {
                break;
            }
        }
        Ok(delivered)
    }
}

/// Wait up to `timeout` for `fd`'s error queue to hold a message (`POLLERR`, which poll
/// reports without being asked). Returns true when it does.
pub(crate) fn wait_errqueue(
    fd: &OwnedFd,
    target: &str,
    timeout: std::time::Duration,
) -> Result<bool, IoError> {
    let revents = sys::poll_one(fd, 0, timeout)
        .map_err(|e| sys::err_from("poll(MSG_ERRQUEUE)", target, e))?;
    Ok(revents & libc::POLLERR != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Append one cmsg (header, data, padding) as the kernel lays it out.
    fn cmsg(buf: &mut Vec<u8>, level: i32, ty: i32, data: &[u8]) {
        let align = size_of::<libc::c_long>();
        let hdr = size_of::<libc::cmsghdr>();
        let len = hdr + data.len();
        buf.extend_from_slice(&(len as libc::size_t).to_ne_bytes());
        buf.extend_from_slice(&level.to_ne_bytes());
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(data);
        while buf.len() % align != 0 {
            buf.push(0);
        }
    }

    fn timestamping(sw: (i64, i64), hw: (i64, i64)) -> Vec<u8> {
        let mut d = Vec::new();
        for (s, n) in [sw, (0, 0), hw] {
            d.extend_from_slice(&(s as libc::time_t).to_ne_bytes());
            d.extend_from_slice(&(n as libc::c_long).to_ne_bytes());
        }
        d
    }

    fn ext_err(errno: i32, origin: u8, info: u32, id: u32, offender: usize) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&(errno as u32).to_ne_bytes());
        d.extend_from_slice(&[origin, 0, 0, 0]);
        d.extend_from_slice(&info.to_ne_bytes());
        d.extend_from_slice(&id.to_ne_bytes());
        d.extend(std::iter::repeat_n(0xEE, offender));
        d
    }

    const T: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    #[test]
    fn packet_socket_software_stamp() {
        let mut b = Vec::new();
        cmsg(
            &mut b,
            libc::SOL_PACKET,
            PACKET_TX_TIMESTAMP,
            &ext_err(libc::ENOMSG, libc::SO_EE_ORIGIN_TIMESTAMPING, 0, 41, 0),
        );
        cmsg(
            &mut b,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            &timestamping((T, 123_456_789), (0, 0)),
        );
        let p = parse_errqueue_control(&b).expect("a stamp");
        assert_eq!(
            p,
            ErrQueueStamp {
                id: 41,
                kind: SCM_TSTAMP_SND,
                software_ns: Some(T as u64 * 1_000_000_000 + 123_456_789),
                hardware_ns: None,
            }
        );
        assert_eq!(
            p.best(),
            Some((
                T as u64 * 1_000_000_000 + 123_456_789,
                TsSource::KernelSoftware
            ))
        );
    }

    #[test]
    fn ipv4_and_ipv6_errors_with_offender_addresses_and_cmsgs_in_any_order() {
        for (level, ty, offender) in [
            (libc::SOL_IP, libc::IP_RECVERR, 16),
            (libc::SOL_IPV6, libc::IPV6_RECVERR, 28),
        ] {
            let mut b = Vec::new();
            // An SCM_TIMESTAMPNS a socket with SO_TIMESTAMPNS adds first: ignored.
            cmsg(&mut b, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &[7u8; 16]);
            cmsg(
                &mut b,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPING,
                &timestamping((T, 5), (0, 0)),
            );
            cmsg(
                &mut b,
                level,
                ty,
                &ext_err(
                    libc::ENOMSG,
                    libc::SO_EE_ORIGIN_TIMESTAMPING,
                    0,
                    u32::MAX,
                    offender,
                ),
            );
            let p = parse_errqueue_control(&b).expect("a stamp");
            assert_eq!(p.id, u32::MAX);
            assert_eq!(p.software_ns, Some(T as u64 * 1_000_000_000 + 5));
        }
    }

    #[test]
    fn hardware_stamp_wins_over_software() {
        let mut b = Vec::new();
        cmsg(
            &mut b,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            &timestamping((T, 10), (37, 999_999_999)),
        );
        cmsg(
            &mut b,
            libc::SOL_PACKET,
            PACKET_TX_TIMESTAMP,
            &ext_err(libc::ENOMSG, libc::SO_EE_ORIGIN_TIMESTAMPING, 0, 3, 0),
        );
        let p = parse_errqueue_control(&b).expect("a stamp");
        assert_eq!(p.hardware_ns, Some(37_999_999_999));
        assert_eq!(p.best(), Some((37_999_999_999, TsSource::Hardware)));
    }

    #[test]
    fn not_a_tx_timestamp() {
        let ts = timestamping((T, 1), (0, 0));
        let mut only_ts = Vec::new();
        cmsg(&mut only_ts, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &ts);
        assert_eq!(parse_errqueue_control(&only_ts), None, "no extended error");

        // An ICMP error (origin 2) on a UDP socket is not a timestamp.
        let mut icmp = only_ts.clone();
        cmsg(
            &mut icmp,
            libc::SOL_IP,
            libc::IP_RECVERR,
            &ext_err(libc::ECONNREFUSED, 2, 0, 0, 16),
        );
        assert_eq!(parse_errqueue_control(&icmp), None);

        let mut no_ts = Vec::new();
        cmsg(
            &mut no_ts,
            libc::SOL_PACKET,
            PACKET_TX_TIMESTAMP,
            &ext_err(libc::ENOMSG, libc::SO_EE_ORIGIN_TIMESTAMPING, 0, 1, 0),
        );
        assert_eq!(parse_errqueue_control(&no_ts), None, "no SCM_TIMESTAMPING");
        assert_eq!(parse_errqueue_control(&[]), None);
    }

    #[test]
    fn sched_stamps_are_reported_with_their_kind() {
        let mut b = Vec::new();
        cmsg(
            &mut b,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            &timestamping((T, 1), (0, 0)),
        );
        cmsg(
            &mut b,
            libc::SOL_PACKET,
            PACKET_TX_TIMESTAMP,
            &ext_err(libc::ENOMSG, libc::SO_EE_ORIGIN_TIMESTAMPING, 1, 9, 0),
        );
        assert_eq!(parse_errqueue_control(&b).map(|p| p.kind), Some(1));
    }

    #[test]
    fn truncated_or_lying_lengths_do_not_panic() {
        let mut b = Vec::new();
        cmsg(
            &mut b,
            libc::SOL_PACKET,
            PACKET_TX_TIMESTAMP,
            &ext_err(libc::ENOMSG, libc::SO_EE_ORIGIN_TIMESTAMPING, 0, 1, 0),
        );
        cmsg(
            &mut b,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            &timestamping((T, 1), (0, 0)),
        );
        for cut in 0..b.len() {
            let p = parse_errqueue_control(&b[..cut]);
            assert!(p.is_none(), "cut at {cut}: {p:?}");
        }
        // A cmsg_len larger than the buffer ends the walk.
        let mut lie = b.clone();
        lie[..size_of::<libc::size_t>()].copy_from_slice(&(4096 as libc::size_t).to_ne_bytes());
        assert_eq!(parse_errqueue_control(&lie), None);
        // A cmsg_len smaller than a header ends the walk instead of looping.
        let mut zero = b.clone();
        zero[..size_of::<libc::size_t>()].copy_from_slice(&(0 as libc::size_t).to_ne_bytes());
        assert_eq!(parse_errqueue_control(&zero), None);
    }

    #[test]
    fn ids_widen_past_the_32_bit_counter() {
        let mut s = TxStamper {
            next_id: 0,
            status: TxStampStatus {
                source: TsSource::KernelSoftware,
                phc_index: -1,
                notice: None,
            },
            target: String::new(),
            ctrl: Vec::new(),
            data: Vec::new(),
        };
        s.next_id = 10;
        assert_eq!(s.widen(9), 9);
        assert_eq!(s.widen(0), 0);
        s.next_id = (1 << 32) + 5;
        assert_eq!(s.widen(4), (1 << 32) + 4);
        assert_eq!(s.widen(u32::MAX), (1 << 32) - 1);
    }

    #[test]
    fn ts_info_describes_software_only_and_hardware() {
        let sw = TsInfo {
            so_timestamping: libc::SOF_TIMESTAMPING_TX_SOFTWARE
                | libc::SOF_TIMESTAMPING_RX_SOFTWARE
                | libc::SOF_TIMESTAMPING_SOFTWARE,
            phc_index: -1,
            tx_types: 0,
            rx_filters: 0,
        };
        assert!(sw.software_tx() && !sw.hardware_tx() && !sw.hardware_rx());
        assert_eq!(sw.describe(), "software tx+rx, no hardware");
        let hw = TsInfo {
            so_timestamping: sw.so_timestamping
                | libc::SOF_TIMESTAMPING_TX_HARDWARE
                | libc::SOF_TIMESTAMPING_RX_HARDWARE
                | libc::SOF_TIMESTAMPING_RAW_HARDWARE,
            phc_index: 2,
            tx_types: (1 << libc::HWTSTAMP_TX_OFF) | (1 << libc::HWTSTAMP_TX_ON),
            // PTP-only filters: cannot stamp probes.
            rx_filters: 1 << libc::HWTSTAMP_FILTER_PTP_V2_EVENT,
        };
        assert!(hw.hardware_tx() && !hw.hardware_rx());
        assert_eq!(hw.describe(), "software tx+rx, hardware tx (PHC 2)");
    }

    #[test]
    fn ts_info_of_loopback_is_software_only_and_hardware_falls_back() {
        // lo exists in every namespace and has no PHC; ETHTOOL_GET_TS_INFO needs no privilege.
        let i = ts_info("lo").expect("ETHTOOL_GET_TS_INFO on lo");
        assert!(!i.hardware_tx() && !i.hardware_rx(), "{i:?}");
        assert_eq!(i.phc_index, -1);
        let st = enable_hardware("lo", true, true);
        assert!(!st.tx && !st.rx);
        let n = st.notice.expect("a notice");
        assert!(
            n.starts_with("lo has no hardware tx/rx timestamping"),
            "{n}"
        );
        assert!(!n.contains('\n'));
        assert!(matches!(
            ts_info("nflabnope2"),
            Err(IoError::NoSuchInterface { .. })
        ));
    }
}
