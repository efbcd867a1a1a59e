//! AF_PACKET backend: raw Ethernet frames through memory-mapped rings.
//!
//! # RX: one `TPACKET_V3` block ring
//!
//! The kernel fills fixed-size blocks with variable-size frames and hands a whole block to
//! user space when it is full or `rx_block_timeout_ms` has passed since its first frame
//! (`tp_retire_blk_tov`). Each frame carries the kernel's receive timestamp: with net
//! timestamping switched on (`SO_TIMESTAMPNS`), `skb->tstamp` is taken from
//! `CLOCK_REALTIME` when the frame enters the stack (`netif_rx`/`netif_receive_skb`), and
//! the ring reports it with `TP_STATUS_TS_SOFTWARE`. That stamp is independent of when
//! user space gets around to the block, which is why the recorder uses it.
//!
//! The socket is created with protocol 0 and bound to `ETH_P_ALL` on one interface only
//! after the ring exists, so no frame of another interface ever lands in its queue.
//!
//! # TX: one `TPACKET_V2` frame ring on a second socket
//!
//! A separate socket with protocol 0 receives nothing, so the TX path never competes with
//! RX. V2 is used for TX because every slot has the same fixed size, which makes the ring a
//! plain array of slots (V3 TX is V2 with `tp_next_offset = 0` and adds nothing).
//! `tx_batch` writes frames into free slots and marks them `TP_STATUS_SEND_REQUEST`;
//! `flush_tx` does one `send(fd, NULL, 0, MSG_DONTWAIT)`, on which the kernel transmits
//! every marked slot and marks each `TP_STATUS_AVAILABLE` again once the device is done
//! with it (the frame is sent from the ring pages without a copy). `PACKET_LOSS` is on so a
//! malformed frame is skipped rather than jamming the ring; lengths are checked here first.
//!
//! # TX timestamps
//!
//! With [`PacketIo::enable_tx_timestamps`] the TX socket asks for `SO_TIMESTAMPING` stamps
//! (see [`crate::timestamping`]). The kernel numbers the frames of the ring in the order it
//! sends them, which is slot order, which is the order `tx_batch` filled them: the backend
//! counts filled slots, so the n-th frame queued after enabling carries id n. Frames leave
//! through `dev_direct_xmit` (`PACKET_QDISC_BYPASS`) straight into the driver's xmit
//! routine, where `skb_tx_timestamp()` takes the software stamp (veth does so before
//! handing the frame to its peer).
//!
//! # Memory ordering
//!
//! The status words are shared with the kernel, which runs on other CPUs. The kernel writes
//! a frame, issues `smp_wmb()`, then sets the status; so our status *loads* are `Acquire`,
//! making the frame bytes read after them the bytes the kernel wrote. Our status *stores*
//! are `Release`: on RX, our reads of a block finish before the kernel may refill it; on
//! TX, the frame and its length are visible before the kernel can see `SEND_REQUEST`.

use std::cell::Cell;
use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::sys::{self, Mmap};
use crate::timestamping::{self, HwStatus, TxStamp, TxStampOptions, TxStampStatus, TxStamper};
use crate::{iface, IoError, IoStats, Layer, PacketIo, RxMeta, TsSource};

const BACKEND: &str = "AF_PACKET";
/// Ethernet header without tag.
const ETH_HLEN: usize = 14;
/// One 802.1Q tag: the kernel allows MTU + 14 + 4 only for frames with ethertype 0x8100.
const VLAN_HLEN: usize = 4;
const ETH_P_8021Q: u16 = 0x8100;
/// `TPACKET_ALIGNMENT` from <linux/if_packet.h>.
const TPACKET_ALIGNMENT: usize = 16;
/// Where frame data starts in a V2 TX slot: `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`
/// = `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))` (see `tpacket_fill_skb`).
const TX_DATA_OFFSET: usize =
    (size_of::<libc::tpacket2_hdr>() + TPACKET_ALIGNMENT - 1) & !(TPACKET_ALIGNMENT - 1);
/// V3 RX frame size: only used by the kernel's sanity checks on `tpacket_req3`.
const RX_FRAME_BYTES: usize = 2048;
/// Target size of one TX ring block: big enough that the kernel's block vector stays short.
const TX_BLOCK_TARGET_BYTES: usize = 64 * 1024;

/// Settings of [`AfPacket::open`].
#[derive(Debug, Clone)]
pub struct AfPacketConfig {
    /// Open the RX ring.
    pub rx: bool,
    /// Open the TX ring.
    pub tx: bool,
    /// Send straight to the driver, skipping the qdisc (`PACKET_QDISC_BYPASS`). Default true.
    pub qdisc_bypass: bool,
    /// How the RX ring hands frames over. Default [`RxRingKind::Blocks`].
    pub rx_ring: RxRingKind,
    /// Size of one RX block in bytes, a multiple of the page size. Default 1 MiB.
    pub rx_block_bytes: usize,
    /// Number of RX blocks. Default 64.
    pub rx_blocks: usize,
    /// Hand a partly filled RX block to user space after this many ms (0: the kernel derives
    /// it from the link speed). Frame timestamps do not depend on it. Default 1.
    pub rx_block_timeout_ms: u32,
    /// Number of TX slots (rounded up to fill whole blocks). Default 4096.
    pub tx_frames: usize,
    /// Size of one TX slot in bytes, a multiple of 16; holds a 32-byte header and the frame. Default 2048.
    pub tx_frame_bytes: usize,
    /// Turn on kernel RX timestamps and report them; when false, `RxMeta::ts_ns` is None. Default true.
    pub kernel_timestamps: bool,
    /// Do not receive frames this host sends on the interface (`PACKET_IGNORE_OUTGOING`). Default true.
    pub ignore_outgoing: bool,
    /// Switch on the NIC's hardware stamping (`SIOCSHWTSTAMP`) for the directions opened,
    /// where `ETHTOOL_GET_TS_INFO` says it has it; see [`AfPacket::hardware`] for the
    /// outcome. RX then reports the NIC's stamps ([`TsSource::Hardware`], PHC time).
    /// Default false.
    pub hardware_timestamps: bool,
    /// Join the RX socket to a `PACKET_FANOUT` group, so several sockets (one per thread)
    /// share the interface's frames between them instead of each getting every frame.
    /// A tap that joins no group still sees every frame, as every other socket does.
    /// Default None.
    pub fanout: Option<Fanout>,
}

/// A `PACKET_FANOUT` group: sockets of one process with the same `group_id` on one
/// interface split its frames by `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fanout {
    /// Group id, unique per network namespace while the group exists.
    pub group_id: u16,
    /// How frames are split.
    pub mode: FanoutMode,
}

/// `PACKET_FANOUT_*` modes nflab uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanoutMode {
    /// By flow hash: a flow's frames stay in order on one socket.
    Hash,
    /// By the RX queue the frame arrived on (`PACKET_FANOUT_QM`): one socket per queue.
    QueueMapping,
    /// By the CPU that received the frame.
    Cpu,
}

impl FanoutMode {
    fn raw(self) -> i32 {
        match self {
            FanoutMode::Hash => libc::PACKET_FANOUT_HASH as i32,
            FanoutMode::QueueMapping => libc::PACKET_FANOUT_QM as i32,
            FanoutMode::Cpu => libc::PACKET_FANOUT_CPU as i32,
        }
    }
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            rx: true,
            tx: true,
            qdisc_bypass: true,
            rx_ring: RxRingKind::Blocks,
            rx_block_bytes: 1 << 20,
            rx_blocks: 64,
            rx_block_timeout_ms: 1,
            tx_frames: 4096,
            tx_frame_bytes: 2048,
            kernel_timestamps: true,
            ignore_outgoing: true,
            hardware_timestamps: false,
            fanout: None,
        }
    }
}

/// How the kernel hands received frames to user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxRingKind {
    /// `TPACKET_V3`: variable-size frames packed into blocks; a block is handed over
    /// when full or when its retire timer (`rx_block_timeout_ms`) fires. Dense and
    /// cheap per frame, right for a recorder, whose stamps the kernel takes anyway.
    #[default]
    Blocks,
    /// `TPACKET_V2`: one fixed 2 KiB slot per frame, readable as soon as the kernel
    /// wrote it, with no timer between arrival and user space: right for a device
    /// under test, whose forwarding latency would otherwise include the block timer
    /// (what DPDK's af_packet PMD uses too). `rx_block_bytes * rx_blocks` is the ring.
    Frames,
}

/// Raw Ethernet frames on one interface through AF_PACKET rings (see the module docs).
pub struct AfPacket {
    ifname: String,
    mtu: usize,
    max_frame_len: usize,
    rx: Option<RxRing>,
    tx: Option<TxRing>,
    tx_packets: u64,
    rx_packets: u64,
    tx_ring_full: u64,
    /// `PACKET_STATISTICS` resets the kernel's counters on every read, so they are summed here.
    rx_drops: Cell<u64>,
    /// Outcome of the hardware timestamping request, when one was made.
    hw: Option<HwStatus>,
}

struct RxRing {
    // Field order matters for Drop: unmap before the socket closes.
    map: Mmap,
    fd: OwnedFd,
    kind: RxRingKind,
    block_bytes: usize,
    blocks: usize,
    /// Frame slots in all ([`RxRingKind::Frames`] only).
    frames: usize,
    timestamps: bool,
    /// Block (or, for frame rings, slot) the next frame comes from.
    cur: usize,
    /// Frames of `cur` not yet delivered; meaningful while `open` is true.
    left: u32,
    /// Offset in `cur` of the next frame's `tpacket3_hdr`.
    next_off: usize,
    /// True between taking `cur` from the kernel and giving it back.
    open: bool,
    /// Scratch for frames whose VLAN tag is re-inserted; grows to the largest such frame.
    vlan_buf: Vec<u8>,
    /// Empty polls since the last [`RxRing::check_alive`].
    empty_polls: u32,
}

/// Empty ring polls between two checks that the interface still exists. Reading the
/// ring takes no syscall, so a vanished interface would otherwise go unnoticed by a
/// busy-polling reader; one `ppoll` every 4096 empty polls costs nothing measurable.
const LIVENESS_EVERY: u32 = 4096;

struct TxRing {
    map: Mmap,
    fd: OwnedFd,
    block_bytes: usize,
    frames_per_block: usize,
    frame_bytes: usize,
    frames: usize,
    /// Next slot to fill.
    head: usize,
    /// Slots filled and not yet seen back as AVAILABLE, ending just before `head`.
    pending: usize,
    /// TX timestamps, once switched on.
    stamper: Option<TxStamper>,
}

fn cfg_err(field: &'static str, reason: String) -> IoError {
    IoError::Config {
        backend: BACKEND,
        field,
        reason,
    }
}

fn open_socket(ifname: &str) -> Result<OwnedFd, IoError> {
    // Protocol 0: nothing is received until bind() names a protocol.
    sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| {
        if sys::is_perm(&e) {
            IoError::NeedCapNetRaw { what: BACKEND }
        } else if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
            IoError::Unsupported {
                what: BACKEND,
                hint: "load the af_packet module or use a kernel with CONFIG_PACKET",
            }
        } else {
            sys::err_from("socket(AF_PACKET)", ifname, e)
        }
    })
}

fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

/// What a ring slot's header says about one received frame (the fields
/// `tpacket2_hdr` and `tpacket3_hdr` share).
struct FrameHdr {
    status: u32,
    len: u32,
    sec: u32,
    nsec: u32,
    vlan_tci: u16,
    vlan_tpid: u16,
}

/// Hand one received frame to `sink` with its kernel stamp, the 802.1Q tag put back
/// where it was on the wire (through `vlan_buf`).
fn deliver(
    data: &[u8],
    h: &FrameHdr,
    timestamps: bool,
    vlan_buf: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8], RxMeta),
) {
    let (ts_ns, ts_source) = if timestamps {
        let ts = h.sec as u64 * 1_000_000_000 + h.nsec as u64;
        // Without either flag the kernel read CLOCK_REALTIME itself in
        // tpacket_rcv: still a kernel software stamp, only taken a little later.
        let src = if h.status & libc::TP_STATUS_TS_RAW_HARDWARE != 0 {
            TsSource::Hardware
        } else {
            TsSource::KernelSoftware
        };
        (Some(ts), src)
    } else {
        (None, TsSource::None)
    };
    let meta = RxMeta {
        ts_ns,
        ts_source,
        wire_len: h.len as usize,
    };
    if h.status & libc::TP_STATUS_VLAN_VALID != 0 && data.len() >= 2 * 6 {
        // The stack moved the 802.1Q tag into metadata (skb_vlan_untag) before
        // the packet socket saw the frame; put it back where it was on the
        // wire, as libpcap does, so tagged traffic reads as sent.
        let tpid = if h.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 && h.vlan_tpid != 0 {
            h.vlan_tpid
        } else {
            ETH_P_8021Q
        };
        vlan_buf.clear();
        vlan_buf.extend_from_slice(&data[..12]);
        vlan_buf.extend_from_slice(&tpid.to_be_bytes());
        vlan_buf.extend_from_slice(&h.vlan_tci.to_be_bytes());
        vlan_buf.extend_from_slice(&data[12..]);
        sink(
            vlan_buf,
            RxMeta {
                wire_len: meta.wire_len + VLAN_HLEN,
                ..meta
            },
        );
    } else {
        sink(data, meta);
    }
}

impl RxRing {
    fn open(
        ifname: &str,
        ifindex: u32,
        cfg: &AfPacketConfig,
        hw_rx: bool,
    ) -> Result<RxRing, IoError> {
        let page = sys::page_size();
        if cfg.rx_block_bytes < RX_FRAME_BYTES || cfg.rx_block_bytes % page != 0 {
            return Err(cfg_err(
                "rx_block_bytes",
                format!(
                    "is {} but must be a multiple of the {page}-byte page size and at least {RX_FRAME_BYTES}",
                    cfg.rx_block_bytes
                ),
            ));
        }
        if cfg.rx_blocks == 0
            || (cfg.rx_block_bytes as u64) * (cfg.rx_blocks as u64) > u32::MAX as u64
        {
            return Err(cfg_err(
                "rx_blocks",
                format!(
                    "is {} but must be at least 1 with rx_block_bytes * rx_blocks below 4 GiB",
                    cfg.rx_blocks
                ),
            ));
        }
        let fd = open_socket(ifname)?;
        let (version, vname) = match cfg.rx_ring {
            RxRingKind::Blocks => (sys::TPACKET_V3, "setsockopt(PACKET_VERSION, TPACKET_V3)"),
            RxRingKind::Frames => (sys::TPACKET_V2, "setsockopt(PACKET_VERSION, TPACKET_V2)"),
        };
        sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, version)
            .map_err(|e| sys::err_from(vname, ifname, e))?;
        if cfg.kernel_timestamps {
            // Switches on net timestamping (the `netstamp_needed` key), so skb->tstamp is
            // taken at receive and the ring reports it with TP_STATUS_TS_SOFTWARE.
            sys::setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
                .map_err(|e| sys::err_from("setsockopt(SO_TIMESTAMPNS)", ifname, e))?;
            // Best effort: also ask for software RX stamps through SO_TIMESTAMPING, and let
            // the ring prefer a NIC hardware stamp where the driver provides one (it only
            // does after SIOCSHWTSTAMP, which is the caller's choice of NIC setup).
            let mut flags = libc::SOF_TIMESTAMPING_RX_SOFTWARE
                | libc::SOF_TIMESTAMPING_SOFTWARE
                | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
            if hw_rx {
                flags |= libc::SOF_TIMESTAMPING_RX_HARDWARE;
            }
            let flags = flags as libc::c_int;
            let _ = sys::setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, flags);
            let ring_flags = (libc::SOF_TIMESTAMPING_SOFTWARE | libc::SOF_TIMESTAMPING_RAW_HARDWARE)
                as libc::c_int;
            let _ = sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_TIMESTAMP, ring_flags);
        }
        let frames_per_block = cfg.rx_block_bytes / RX_FRAME_BYTES;
        let frames = frames_per_block * cfg.rx_blocks;
        let requested = match cfg.rx_ring {
            RxRingKind::Blocks => sys::setsockopt(
                &fd,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                &libc::tpacket_req3 {
                    tp_block_size: cfg.rx_block_bytes as u32,
                    tp_block_nr: cfg.rx_blocks as u32,
                    tp_frame_size: RX_FRAME_BYTES as u32,
                    tp_frame_nr: frames as u32,
                    tp_retire_blk_tov: cfg.rx_block_timeout_ms,
                    tp_sizeof_priv: 0,
                    tp_feature_req_word: 0,
                },
            ),
            RxRingKind::Frames => sys::setsockopt(
                &fd,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                &libc::tpacket_req {
                    tp_block_size: cfg.rx_block_bytes as u32,
                    tp_block_nr: cfg.rx_blocks as u32,
                    tp_frame_size: RX_FRAME_BYTES as u32,
                    tp_frame_nr: frames as u32,
                },
            ),
        };
        requested.map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOMEM) {
                cfg_err(
                    "rx_blocks",
                    format!(
                        "asks for {} MiB of RX ring the kernel could not allocate: use fewer or smaller blocks",
                        (cfg.rx_block_bytes * cfg.rx_blocks) >> 20
                    ),
                )
            } else {
                sys::err_from("setsockopt(PACKET_RX_RING)", ifname, e)
            }
        })?;
        let map = Mmap::ring(&fd, cfg.rx_block_bytes * cfg.rx_blocks)
            .map_err(|e| sys::err_from("mmap(PACKET_RX_RING)", ifname, e))?;
        if cfg.ignore_outgoing {
            sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)
                .map_err(|e| sys::err_from("setsockopt(PACKET_IGNORE_OUTGOING)", ifname, e))?;
        }
        sys::bind_ll(&fd, ifindex, (libc::ETH_P_ALL as u16).to_be())
            .map_err(|e| sys::err_from("bind(AF_PACKET, ETH_P_ALL)", ifname, e))?;
        // A group can only be joined by a bound socket.
        if let Some(f) = cfg.fanout {
            let arg = i32::from(f.group_id) | (f.mode.raw() << 16);
            sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_FANOUT, arg)
                .map_err(|e| sys::err_from("setsockopt(PACKET_FANOUT)", ifname, e))?;
        }
        Ok(RxRing {
            map,
            fd,
            kind: cfg.rx_ring,
            block_bytes: cfg.rx_block_bytes,
            blocks: cfg.rx_blocks,
            frames,
            timestamps: cfg.kernel_timestamps,
            cur: 0,
            left: 0,
            next_off: 0,
            open: false,
            vlan_buf: Vec::new(),
            empty_polls: 0,
        })
    }

    fn block_ptr(&self, b: usize) -> *mut u8 {
        debug_assert!(b < self.blocks);
        // SAFETY: b < blocks, so the offset stays inside the mapping of blocks * block_bytes.
        unsafe { self.map.ptr.add(b * self.block_bytes) }
    }

    /// `hdr.bh1.block_status` of block `b`.
    fn block_status(&self, b: usize) -> &AtomicU32 {
        let p = self.block_ptr(b);
        // SAFETY: a block starts with `struct tpacket_block_desc` { u32 version; u32
        // offset_to_priv; struct tpacket_hdr_v1 { u32 block_status; ... } }, so the status
        // is the u32 at offset 8, 4-byte aligned (blocks are page aligned). It lives as long
        // as the mapping, which `&self` keeps alive, and the kernel only accesses it
        // atomically-or-ordered as described in the module docs.
        unsafe { AtomicU32::from_ptr(p.add(8) as *mut u32) }
    }

    fn rx_batch(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
        ifname: &str,
    ) -> Result<usize, IoError> {
        match self.kind {
            RxRingKind::Blocks => self.rx_blocks(max, timeout, sink, ifname),
            RxRingKind::Frames => self.rx_frames(max, timeout, sink, ifname),
        }
    }

    /// Nothing to read: every [`LIVENESS_EVERY`] empty polls, and whenever a wait would
    /// follow, fail if the kernel flagged the socket (it sets `ENETDOWN` when the
    /// interface goes down or away); otherwise wait out what is left of `timeout`.
    /// Returns false when the wait is over.
    fn wait_or_fail(
        &mut self,
        deadline: &mut Option<Instant>,
        timeout: Duration,
        ifname: &str,
    ) -> Result<bool, IoError> {
        let left = sys::wait_left(deadline, timeout);
        self.empty_polls += 1;
        if left.is_none() && self.empty_polls < LIVENESS_EVERY {
            return Ok(false);
        }
        self.empty_polls = 0;
        let revents = sys::poll_one(&self.fd, libc::POLLIN, left.unwrap_or_default())
            .map_err(|e| sys::err_from("poll(AF_PACKET RX)", ifname, e))?;
        if revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            let err = sys::take_socket_error(&self.fd);
            return Err(match err {
                Some(libc::ENETDOWN) | Some(libc::ENODEV) | Some(libc::ENXIO) | None => {
                    IoError::InterfaceDown {
                        ifname: ifname.to_string(),
                    }
                }
                Some(code) => sys::err_from(
                    "AF_PACKET RX",
                    ifname,
                    std::io::Error::from_raw_os_error(code),
                ),
            });
        }
        Ok(left.is_some())
    }

    /// Start of frame slot `i` of a [`RxRingKind::Frames`] ring. Blocks are whole
    /// pages, so 2 KiB slots fill them without gaps: slot `i` is at `i` slots.
    fn slot_ptr(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.frames);
        // SAFETY: i < frames, so the slot lies inside the blocks * block_bytes mapping.
        unsafe { self.map.ptr.add(i * RX_FRAME_BYTES) }
    }

    /// `tp_status` of frame slot `i`, the first u32 of its `tpacket2_hdr`.
    fn slot_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: slots are TPACKET_ALIGNMENT aligned inside the mapping `&self` keeps
        // alive; the kernel accesses the status word as described in the module docs.
        unsafe { AtomicU32::from_ptr(self.slot_ptr(i) as *mut u32) }
    }

    /// [`RxRingKind::Frames`]: take slots in order while the kernel has marked them ours.
    fn rx_frames(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
        ifname: &str,
    ) -> Result<usize, IoError> {
        let mut n = 0;
        let mut deadline: Option<Instant> = None;
        while n < max {
            if self.slot_status(self.cur).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                if n > 0 || !self.wait_or_fail(&mut deadline, timeout, ifname)? {
                    break;
                }
                continue;
            }
            let slot = self.slot_ptr(self.cur);
            // SAFETY: the slot is ours (TP_STATUS_USER, loaded with Acquire above), so its
            // header is fully written and the kernel leaves it alone until we hand it back.
            let h = unsafe { std::ptr::read_unaligned(slot as *const libc::tpacket2_hdr) };
            let start = (h.tp_mac as usize).min(RX_FRAME_BYTES);
            let snap = (h.tp_snaplen as usize).min(RX_FRAME_BYTES - start);
            // SAFETY: [start, start + snap) lies inside the slot (clamped above), which
            // stays ours until the status store below, after the sink returned.
            let data = unsafe { std::slice::from_raw_parts(slot.add(start), snap) };
            let hdr = FrameHdr {
                status: h.tp_status,
                len: h.tp_len,
                sec: h.tp_sec,
                nsec: h.tp_nsec,
                vlan_tci: h.tp_vlan_tci,
                vlan_tpid: h.tp_vlan_tpid,
            };
            deliver(data, &hdr, self.timestamps, &mut self.vlan_buf, sink);
            // Release: our reads of the slot finish before the kernel may refill it.
            self.slot_status(self.cur)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.cur += 1;
            if self.cur == self.frames {
                self.cur = 0;
            }
            n += 1;
        }
        Ok(n)
    }

    /// [`RxRingKind::Blocks`]: frames of the current block, then the next blocks.
    fn rx_blocks(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
        ifname: &str,
    ) -> Result<usize, IoError> {
        let mut n = 0;
        let mut deadline: Option<Instant> = None;
        while n < max {
            if !self.open {
                let st = self.block_status(self.cur).load(Ordering::Acquire);
                if st & libc::TP_STATUS_USER == 0 {
                    if n > 0 || !self.wait_or_fail(&mut deadline, timeout, ifname)? {
                        break;
                    }
                    continue;
                }
                let bd = self.block_ptr(self.cur) as *const libc::tpacket_block_desc;
                // SAFETY: the block is ours (TP_STATUS_USER, loaded with Acquire above), so
                // its descriptor is fully written and the kernel will not touch it until we
                // hand it back; the descriptor lies at the start of the block.
                let h1 = unsafe { std::ptr::read(bd).hdr.bh1 };
                self.left = h1.num_pkts;
                self.next_off = h1.offset_to_first_pkt as usize;
                self.open = true;
            }
            while self.left > 0 && n < max {
                let off = self.next_off;
                if off + size_of::<libc::tpacket3_hdr>() > self.block_bytes {
                    // A corrupt offset cannot come from the kernel; stop reading this block.
                    self.left = 0;
                    break;
                }
                // SAFETY: `off` plus a header lies inside the block (checked above); the
                // frame belongs to a block we own; frame headers are TPACKET_ALIGNMENT
                // aligned, read_unaligned makes no assumption anyway.
                let h = unsafe {
                    std::ptr::read_unaligned(
                        self.block_ptr(self.cur).add(off) as *const libc::tpacket3_hdr
                    )
                };
                let start = off + h.tp_mac as usize;
                let snap = (h.tp_snaplen as usize).min(self.block_bytes.saturating_sub(start));
                // SAFETY: [start, start + snap) lies inside the block we own (clamped above);
                // the slice lives only for the sink call, before the block is handed back.
                let data = unsafe {
                    std::slice::from_raw_parts(self.block_ptr(self.cur).add(start), snap)
                };
                let hdr = FrameHdr {
                    status: h.tp_status,
                    len: h.tp_len,
                    sec: h.tp_sec,
                    nsec: h.tp_nsec,
                    vlan_tci: h.hv1.tp_vlan_tci as u16,
                    vlan_tpid: h.hv1.tp_vlan_tpid,
                };
                deliver(data, &hdr, self.timestamps, &mut self.vlan_buf, sink);
                n += 1;
                self.left -= 1;
                self.next_off = off + h.tp_next_offset as usize;
            }
            if self.left == 0 {
                // Hand the block back; Release orders our reads of it before the kernel's refill.
                self.block_status(self.cur)
                    .store(libc::TP_STATUS_KERNEL, Ordering::Release);
                self.cur = (self.cur + 1) % self.blocks;
                self.open = false;
            }
        }
        Ok(n)
    }

    fn drops(&self) -> u64 {
        // TPACKET_V3 answers with `tpacket_stats_v3`, V2 with the shorter `tpacket_stats`
        // (the kernel copies only as many bytes as its own struct has); both begin with
        // tp_packets and tp_drops, so one read of the longer struct serves both rings.
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        sys::getsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_STATISTICS, &mut st)
            .map_or(0, |()| u64::from(st.tp_drops))
    }
}

impl TxRing {
    fn open(ifname: &str, ifindex: u32, cfg: &AfPacketConfig) -> Result<TxRing, IoError> {
        let page = sys::page_size();
        let fb = cfg.tx_frame_bytes;
        if fb % TPACKET_ALIGNMENT != 0 || !(TX_DATA_OFFSET + 64..=1 << 20).contains(&fb) {
            return Err(cfg_err(
                "tx_frame_bytes",
                format!(
                    "is {fb} but must be a multiple of {TPACKET_ALIGNMENT} between {} and 1 MiB",
                    round_up(TX_DATA_OFFSET + 64, TPACKET_ALIGNMENT)
                ),
            ));
        }
        if cfg.tx_frames == 0 || cfg.tx_frames > 1 << 20 {
            return Err(cfg_err(
                "tx_frames",
                format!("is {} but must be between 1 and 1048576", cfg.tx_frames),
            ));
        }
        // Slots never straddle blocks: a block is a whole number of pages holding
        // `frames_per_block` slots, like the kernel's own `packet_lookup_frame`.
        let min_block = round_up(fb, page);
        let block_bytes = min_block * (TX_BLOCK_TARGET_BYTES / min_block).max(1);
        let frames_per_block = block_bytes / fb;
        let blocks = cfg.tx_frames.div_ceil(frames_per_block);
        let frames = blocks * frames_per_block;

        let fd = open_socket(ifname)?;
        sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, sys::TPACKET_V2)
            .map_err(|e| sys::err_from("setsockopt(PACKET_VERSION, TPACKET_V2)", ifname, e))?;
        if cfg.qdisc_bypass {
            sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)
                .map_err(|e| sys::err_from("setsockopt(PACKET_QDISC_BYPASS)", ifname, e))?;
        }
        sys::setsockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_LOSS, 1)
            .map_err(|e| sys::err_from("setsockopt(PACKET_LOSS)", ifname, e))?;
        let req = libc::tpacket_req {
            tp_block_size: block_bytes as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: fb as u32,
            tp_frame_nr: frames as u32,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_TX_RING, &req)
            .map_err(|e| sys::err_from("setsockopt(PACKET_TX_RING)", ifname, e))?;
        let map = Mmap::ring(&fd, block_bytes * blocks)
            .map_err(|e| sys::err_from("mmap(PACKET_TX_RING)", ifname, e))?;
        sys::bind_ll(&fd, ifindex, 0).map_err(|e| sys::err_from("bind(AF_PACKET)", ifname, e))?;
        Ok(TxRing {
            map,
            fd,
            block_bytes,
            frames_per_block,
            frame_bytes: fb,
            frames,
            head: 0,
            pending: 0,
            stamper: None,
        })
    }

    fn slot_ptr(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.frames);
        let off = (i / self.frames_per_block) * self.block_bytes
            + (i % self.frames_per_block) * self.frame_bytes;
        // SAFETY: i < frames, so `off + frame_bytes` is within blocks * block_bytes.
        unsafe { self.map.ptr.add(off) }
    }

    /// `tp_status` of slot `i`, the first u32 of its `tpacket2_hdr`.
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: slots are 16-byte aligned inside the mapping that `&self` keeps alive, and
        // `tp_status` is the u32 at offset 0 of the slot's header.
        unsafe { AtomicU32::from_ptr(self.slot_ptr(i) as *mut u32) }
    }

    /// Count slots the kernel has finished with, oldest first.
    fn reclaim(&mut self) {
        while self.pending > 0 {
            let tail = (self.head + self.frames - self.pending) % self.frames;
            // Acquire: the kernel's last read of the slot happens before we reuse it.
            if self.status(tail).load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
                break;
            }
            self.pending -= 1;
        }
    }
}

impl AfPacket {
    /// Open RX and/or TX rings on `ifname` in the current thread's network namespace.
    pub fn open(ifname: &str, cfg: &AfPacketConfig) -> Result<Self, IoError> {
        let ifindex = iface::index(ifname)?;
        let mtu = iface::mtu(ifname)?;
        if !cfg.rx && !cfg.tx {
            return Err(cfg_err(
                "rx",
                "and 'tx' are both false: open at least one direction".into(),
            ));
        }
        let hw = cfg
            .hardware_timestamps
            .then(|| timestamping::enable_hardware(ifname, cfg.tx, cfg.rx));
        let rx = if cfg.rx {
            Some(RxRing::open(
                ifname,
                ifindex,
                cfg,
                hw.as_ref().is_some_and(|h| h.rx),
            )?)
        } else {
            None
        };
        let tx = if cfg.tx {
            Some(TxRing::open(ifname, ifindex, cfg)?)
        } else {
            None
        };
        let mut max_frame_len = mtu + ETH_HLEN + VLAN_HLEN;
        if let Some(t) = &tx {
            max_frame_len = max_frame_len.min(t.frame_bytes - TX_DATA_OFFSET);
        }
        Ok(AfPacket {
            ifname: ifname.to_string(),
            mtu,
            max_frame_len,
            rx,
            tx,
            tx_packets: 0,
            rx_packets: 0,
            tx_ring_full: 0,
            rx_drops: Cell::new(0),
            hw,
        })
    }

    /// What the hardware timestamping request achieved (None when none was made): the
    /// caller shows its notice, which names the interface.
    pub fn hardware(&self) -> Option<&HwStatus> {
        self.hw.as_ref()
    }

    /// The interface this socket is bound to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// TX slots queued or still in the kernel's hands; 0 once every frame has left.
    pub fn tx_outstanding(&mut self) -> usize {
        match self.tx.as_mut() {
            Some(t) => {
                t.reclaim();
                t.pending
            }
            None => 0,
        }
    }

    /// The (RX, TX) socket descriptors, for callers that poll several backends.
    pub fn raw_fds(&self) -> (Option<i32>, Option<i32>) {
        (
            self.rx.as_ref().map(|r| r.fd.as_raw_fd()),
            self.tx.as_ref().map(|t| t.fd.as_raw_fd()),
        )
    }
}

impl Drop for AfPacket {
    /// Gives frames still queued in the TX ring a short, bounded chance to leave (about
    /// 10 ms), so a generator that drops its backend right after its last `flush_tx` does
    /// not lose the tail; then the rings are unmapped and the sockets closed.
    fn drop(&mut self) {
        const DRAIN_TRIES: usize = 100;
        if self.tx.is_none() {
            return;
        }
        for _ in 0..DRAIN_TRIES {
            if self.tx_outstanding() == 0 || self.flush_tx().is_err() {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// Refuse a frame the kernel would reject (`tpacket_snd`: shorter than the link header,
/// or longer than MTU + 14, where only 802.1Q-tagged frames may use 4 bytes more).
fn check_frame_len(
    ifname: &str,
    mtu: usize,
    max_frame_len: usize,
    buf: &[u8],
    len: usize,
) -> Result<(), IoError> {
    if len < ETH_HLEN {
        return Err(IoError::FrameTooShort {
            ifname: ifname.to_string(),
            len,
            min: ETH_HLEN,
        });
    }
    let untagged_max = (mtu + ETH_HLEN).min(max_frame_len);
    if len > untagged_max {
        let tagged = u16::from_be_bytes([buf[12], buf[13]]) == ETH_P_8021Q;
        if !tagged || len > max_frame_len {
            return Err(IoError::FrameTooLong {
                ifname: ifname.to_string(),
                len,
                max: if tagged { max_frame_len } else { untagged_max },
            });
        }
    }
    Ok(())
}

impl PacketIo for AfPacket {
    fn name(&self) -> &'static str {
        "af_packet"
    }

    fn layer(&self) -> Layer {
        Layer::Ethernet
    }

    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    fn tx_batch(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
    ) -> Result<usize, IoError> {
        let AfPacket {
            ifname,
            mtu,
            max_frame_len,
            tx,
            tx_packets,
            tx_ring_full,
            ..
        } = self;
        let Some(tx) = tx.as_mut() else {
            return Err(IoError::DirectionDisabled {
                backend: BACKEND,
                ifname: ifname.clone(),
                direction: "tx",
            });
        };
        tx.reclaim();
        let mut queued = 0;
        let mut result = Ok(());
        while queued < n {
            if tx.pending == tx.frames {
                tx.reclaim();
                if tx.pending == tx.frames {
                    *tx_ring_full += 1;
                    break;
                }
            }
            let slot = tx.head;
            let base = tx.slot_ptr(slot);
            // SAFETY: the slot is free (counted out of `pending`, so the kernel set it
            // AVAILABLE and is done with it); its data area [TX_DATA_OFFSET, frame_bytes)
            // lies in the mapping, and nothing else references it while `buf` lives.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(
                    base.add(TX_DATA_OFFSET),
                    tx.frame_bytes - TX_DATA_OFFSET,
                )
            };
            let len = fill(queued, buf);
            if let Err(e) = check_frame_len(ifname, *mtu, *max_frame_len, buf, len) {
                // The slot stays free; frames queued before this one stay queued.
                result = Err(e);
                break;
            }
            let hdr = base as *mut libc::tpacket2_hdr;
            // SAFETY: `hdr` is the slot's header, in the mapping and 16-byte aligned; the
            // kernel does not read it until it sees SEND_REQUEST below.
            unsafe {
                std::ptr::addr_of_mut!((*hdr).tp_len).write(len as u32);
                std::ptr::addr_of_mut!((*hdr).tp_snaplen).write(len as u32);
            }
            // Release: frame bytes and tp_len become visible before SEND_REQUEST.
            tx.status(slot)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            tx.head = (tx.head + 1) % tx.frames;
            tx.pending += 1;
            queued += 1;
        }
        if let Some(st) = tx.stamper.as_mut() {
            // The kernel numbers frames in slot order, which is fill order.
            st.next_id += queued as u64;
        }
        *tx_packets += queued as u64;
        result.map(|()| queued)
    }

    fn flush_tx(&mut self) -> Result<(), IoError> {
        let Some(tx) = self.tx.as_mut() else {
            return Ok(());
        };
        loop {
            // SAFETY: send with a NULL buffer of length 0 is the documented way to kick a
            // PACKET_TX_RING; the kernel reads frames only from the ring.
            let rc =
                unsafe { libc::send(tx.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            if rc >= 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                // Socket send buffer or device queue full: the remaining SEND_REQUEST
                // slots stay marked and leave on the next flush.
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => break,
                Some(libc::ENETDOWN) | Some(libc::ENXIO) => {
                    return Err(IoError::InterfaceDown {
                        ifname: self.ifname.clone(),
                    })
                }
                _ => return Err(sys::err_from("send(PACKET_TX_RING)", &self.ifname, e)),
            }
        }
        tx.reclaim();
        Ok(())
    }

    fn rx_batch(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, IoError> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(IoError::DirectionDisabled {
                backend: BACKEND,
                ifname: self.ifname.clone(),
                direction: "rx",
            });
        };
        let n = rx.rx_batch(max, timeout, sink, &self.ifname)?;
        self.rx_packets += n as u64;
        Ok(n)
    }

    fn tx_outstanding(&mut self) -> usize {
        AfPacket::tx_outstanding(self)
    }

    fn enable_tx_timestamps(&mut self, opts: &TxStampOptions) -> Result<TxStampStatus, IoError> {
        let Some(tx) = self.tx.as_mut() else {
            return Err(IoError::DirectionDisabled {
                backend: BACKEND,
                ifname: self.ifname.clone(),
                direction: "tx",
            });
        };
        if let Some(st) = &tx.stamper {
            return Ok(st.status.clone());
        }
        if opts.hardware && !self.hw.as_ref().is_some_and(|h| h.tx) {
            let rx = self.hw.as_ref().is_some_and(|h| h.rx);
            // Through the TX socket: the caller's thread may be outside its namespace.
            self.hw = Some(timestamping::enable_hardware_on(
                Some(&tx.fd),
                &self.ifname,
                true,
                rx,
            ));
        }
        let hw_tx = opts.hardware && self.hw.as_ref().is_some_and(|h| h.tx);
        let status = TxStampStatus {
            source: if hw_tx {
                TsSource::Hardware
            } else {
                TsSource::KernelSoftware
            },
            phc_index: self.hw.as_ref().map_or(-1, |h| h.phc_index),
            notice: if opts.hardware && !hw_tx {
                self.hw.as_ref().and_then(|h| h.notice.clone())
            } else {
                None
            },
        };
        tx.stamper = Some(TxStamper::enable(
            &tx.fd,
            &self.ifname,
            hw_tx,
            opts,
            status.clone(),
        )?);
        Ok(status)
    }

    fn tx_stamp_next_id(&self) -> Option<u64> {
        self.tx.as_ref()?.stamper.as_ref().map(|s| s.next_id)
    }

    fn drain_tx_stamps(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(TxStamp, &[u8]),
    ) -> Result<usize, IoError> {
        match self.tx.as_mut() {
            Some(TxRing {
                fd,
                stamper: Some(st),
                ..
            }) => st.drain(fd, max, sink),
            _ => Ok(0),
        }
    }

    fn wait_tx_stamps(&mut self, timeout: Duration) -> Result<bool, IoError> {
        match self.tx.as_ref() {
            Some(TxRing {
                fd,
                stamper: Some(_),
                ..
            }) => timestamping::wait_errqueue(fd, &self.ifname, timeout),
            _ => Ok(false),
        }
    }

    fn stats(&self) -> IoStats {
        if let Some(rx) = &self.rx {
            self.rx_drops.set(self.rx_drops.get() + rx.drops());
        }
        IoStats {
            tx_packets: self.tx_packets,
            rx_packets: self.rx_packets,
            rx_kernel_drops: self.rx_drops.get(),
            tx_ring_full: self.tx_ring_full,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_data_offset_matches_the_kernel() {
        // TPACKET2_HDRLEN (52) - sizeof(struct sockaddr_ll) (20) = 32.
        assert_eq!(TX_DATA_OFFSET, 32);
        assert_eq!(libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>(), 32);
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = AfPacketConfig::default();
        assert!(c.rx && c.tx && c.qdisc_bypass && c.kernel_timestamps && c.ignore_outgoing);
        assert_eq!(c.rx_block_bytes, 1 << 20);
        assert_eq!(c.rx_blocks, 64);
        assert_eq!(c.rx_block_timeout_ms, 1);
        assert_eq!(c.tx_frames, 4096);
        assert_eq!(c.tx_frame_bytes, 2048);
    }

    #[test]
    fn open_on_a_missing_interface_names_it() {
        let e = AfPacket::open("nflabnope1", &AfPacketConfig::default())
            .err()
            .expect("must fail");
        assert!(e.to_string().contains("'nflabnope1' does not exist"), "{e}");
    }

    #[test]
    fn bad_ring_sizes_are_config_errors() {
        // lo exists in every namespace; the config is checked before any socket is opened
        // for RX, so this needs no privilege.
        let cfg = AfPacketConfig {
            rx_block_bytes: 5000,
            ..AfPacketConfig::default()
        };
        let e = AfPacket::open("lo", &cfg).err().expect("must fail");
        assert!(
            matches!(
                e,
                IoError::Config {
                    field: "rx_block_bytes",
                    ..
                }
            ),
            "{e:?}"
        );
        let cfg = AfPacketConfig {
            rx: false,
            tx: false,
            ..AfPacketConfig::default()
        };
        assert!(matches!(
            AfPacket::open("lo", &cfg),
            Err(IoError::Config { .. })
        ));
    }
}
