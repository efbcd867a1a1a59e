//! AF_XDP backend: raw Ethernet frames through an XDP socket and its UMEM.
//!
//! # Layout (Documentation/networking/af_xdp.rst)
//!
//! The UMEM is one anonymous mapping cut into `frames` chunks of `frame_bytes`. Four
//! single-producer/single-consumer rings, each mapped from the socket, pass chunk
//! addresses between us and the kernel:
//!
//! - **fill** (we produce): empty chunks the kernel may receive into;
//! - **RX** (kernel produces): `xdp_desc { addr, len }` of received frames;
//! - **TX** (we produce): descriptors of frames to send;
//! - **completion** (kernel produces): chunks whose frames have been sent.
//!
//! With RX on, the lower half of the chunks starts in the fill ring and the upper half
//! is the TX free list; without RX all of them are for TX. A received chunk goes back to
//! the fill ring as soon as the sink has seen it, so RX never allocates.
//!
//! Receiving needs an XDP program on the interface that redirects frames into the
//! socket: [`AfXdp::open`] loads one, written here as raw eBPF with a ten-line assembler
//! (in the spirit of ixy: no toolchain, nothing hidden). With [`Steer::All`] (a data
//! plane) it is `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`: every
//! frame arriving on a queue with a socket goes to it. With [`Steer::UdpFirstByte`] (a
//! recorder) it first parses Ethernet, one optional VLAN tag, IPv4 or IPv6 and UDP and
//! redirects only frames whose UDP payload starts with the probe magic; ARP, neighbour
//! discovery and all other traffic pass to the stack. Frames on queues without a socket
//! pass too. The program is attached with a BPF link and detached when the socket is
//! dropped.
//!
//! # Copy and zero-copy
//!
//! `bind` first asks for zero-copy (`XDP_ZEROCOPY`), which drivers with AF_XDP support
//! (i40e, ice, mlx5, ...) give; veth and most others refuse it, and the socket falls
//! back to copy mode (`XDP_COPY`), where the kernel copies each frame between the UMEM
//! and an skb. [`AfXdp::zero_copy`] says which one was bound.
//!
//! # TX kicks
//!
//! In copy mode the kernel sends at most 32 descriptors per `sendto` kick
//! (`TX_BATCH_SIZE` in net/xdp/xsk.c) and answers `EAGAIN` when more remain, so
//! `flush_tx` kicks until the TX ring is drained or the device pushes back.
//!
//! # Memory ordering
//!
//! Ring indices are shared with the kernel (`smp_load_acquire`/`smp_store_release` on
//! its side): our loads of the other side's index are `Acquire` (the descriptors it
//! published are visible after), our stores of our index are `Release` (our descriptors
//! and frame bytes are visible before).
//!
//! # Timestamps
//!
//! AF_XDP carries no kernel timestamp: RX frames get an application `CLOCK_REALTIME`
//! stamp when the batch is read ([`TsSource::Application`]).

use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::bpf_asm::{insn, op, Asm};
use crate::sys::{self, Mmap};
use crate::{clock, iface, probe_caps, IoError, IoStats, Layer, PacketIo, RxMeta, TsSource};

const BACKEND: &str = "AF_XDP";
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;
/// Ethernet header without tag.
const ETH_HLEN: usize = 14;
/// Room for one 802.1Q tag above MTU + 14.
const VLAN_HLEN: usize = 4;

/// `struct xdp_umem_reg` (<linux/if_xdp.h>, with `flags` and `tx_metadata_len`).
#[repr(C)]
#[derive(Clone, Copy)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct xdp_desc`.
#[repr(C)]
#[derive(Clone, Copy)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// `struct xdp_statistics` (first six counters).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

/// Whether to ask for zero-copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroCopy {
    /// Zero-copy where the driver offers it, copy mode otherwise.
    #[default]
    Auto,
    /// Zero-copy or an error.
    Require,
    /// Always copy mode.
    Off,
}

/// Settings of [`AfXdp::open`].
#[derive(Debug, Clone)]
pub struct AfXdpConfig {
    /// Queue of the interface to bind to.
    pub queue: u32,
    /// Receive (loads and attaches the redirect program).
    pub rx: bool,
    /// Transmit.
    pub tx: bool,
    /// UMEM chunks; a power of two. Default 4096.
    pub frames: u32,
    /// Bytes per chunk: 2048 or 4096. Default 2048.
    pub frame_bytes: u32,
    /// Entries of each ring; a power of two. Default 2048.
    pub ring_size: u32,
    /// Zero-copy choice. Default Auto.
    pub zero_copy: ZeroCopy,
    /// Which received frames the XDP program hands to the socket. Default All.
    pub steer: Steer,
    /// Stamp each received batch with `CLOCK_REALTIME` (one clock read per batch).
    /// Default true; a data plane that keeps its own clock turns it off.
    pub rx_timestamps: bool,
}

/// Which frames arriving on the socket's queue go to the socket (the rest
/// pass to the kernel stack).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Steer {
    /// Every frame (a data plane forwards whatever arrives).
    #[default]
    All,
    /// UDP over IPv4 (no options, first fragment) or IPv6 (no extension
    /// headers), with at most one 802.1Q/802.1ad tag, whose payload starts
    /// with this byte — nflab's probe magic for a recorder. ARP, neighbour
    /// discovery and other traffic still reach the stack, so a recorder
    /// does not cut the host off its link.
    UdpFirstByte(u8),
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig {
            queue: 0,
            rx: true,
            tx: true,
            frames: 4096,
            frame_bytes: 2048,
            ring_size: 2048,
            zero_copy: ZeroCopy::Auto,
            steer: Steer::All,
            rx_timestamps: true,
        }
    }
}

/// One mapped ring. `T` is the descriptor type (u64 for fill/completion, XdpDesc for RX/TX).
struct Ring<T> {
    /// Keeps the ring mapped; everything below points into it.
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    size: u32,
    /// Our copy of our own index (producer for fill/TX, consumer for RX/completion).
    local: u32,
}

// SAFETY: the ring's pointers all point into `map`, which moves with it; the kernel side
// is synchronised through the atomics, not through thread identity.
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    fn map(
        fd: &OwnedFd,
        off: &RingOffset,
        size: u32,
        pgoff: i64,
        ifname: &str,
    ) -> Result<Ring<T>, IoError> {
        let len = off.desc as usize + size as usize * size_of::<T>();
        let map = Mmap::ring_at(fd, len, pgoff)
            .map_err(|e| sys::err_from("mmap(AF_XDP ring)", ifname, e))?;
        // SAFETY: the kernel reported these offsets for this mapping; each lies inside it
        // (desc + size * entries = len) and the index words are u32-aligned.
        unsafe {
            Ok(Ring {
                producer: map.ptr.add(off.producer as usize) as *const AtomicU32,
                consumer: map.ptr.add(off.consumer as usize) as *const AtomicU32,
                flags: map.ptr.add(off.flags as usize) as *const AtomicU32,
                desc: map.ptr.add(off.desc as usize) as *mut T,
                mask: size - 1,
                size,
                local: 0,
                _map: map,
            })
        }
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into `self.map`, alive as long as `self`.
        unsafe { &*self.producer }
    }
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer side: free entries.
    fn free(&self) -> u32 {
        self.size - self.local.wrapping_sub(self.cons().load(Ordering::Acquire))
    }

    /// Producer side: write entry `local + i`.
    fn put(&mut self, i: u32, v: T) {
        let idx = (self.local.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx <= mask < size, inside the descriptor array; the entry is ours
        // (counted in `free`), the kernel reads it only after `publish`.
        unsafe { self.desc.add(idx).write(v) }
    }

    fn publish(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.prod().store(self.local, Ordering::Release);
    }

    /// Consumer side: entries available.
    fn available(&self) -> u32 {
        self.prod().load(Ordering::Acquire).wrapping_sub(self.local)
    }

    /// Consumer side: read entry `local + i`.
    fn get(&self, i: u32) -> T {
        let idx = (self.local.wrapping_add(i) & self.mask) as usize;
        // SAFETY: inside the array; published by the kernel (available() was Acquire).
        unsafe { self.desc.add(idx).read() }
    }

    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.cons().store(self.local, Ordering::Release);
    }
}

/// An AF_XDP socket on one queue of one interface (see the module docs).
pub struct AfXdp {
    // Drop order: rings and the program link before the socket, the UMEM last.
    rx: Option<Ring<XdpDesc>>,
    tx: Option<Ring<XdpDesc>>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    _xdp: Option<std::sync::Arc<Redirect>>,
    fd: OwnedFd,
    umem: Mmap,
    frame_bytes: usize,
    tx_free: Vec<u64>,
    tx_total: usize,
    ifname: String,
    mtu: usize,
    zero_copy: bool,
    rx_timestamps: bool,
    tx_packets: u64,
    rx_packets: u64,
    tx_ring_full: u64,
}

fn cfg_err(field: &'static str, reason: String) -> IoError {
    IoError::Config {
        backend: BACKEND,
        field,
        reason,
    }
}

impl AfXdp {
    /// Open an AF_XDP socket on `cfg.queue` of `ifname` in the current network namespace.
    pub fn open(ifname: &str, cfg: &AfXdpConfig) -> Result<AfXdp, IoError> {
        if !cfg.frames.is_power_of_two() || cfg.frames < 64 {
            return Err(cfg_err(
                "frames",
                format!(
                    "is {} but must be a power of two of at least 64",
                    cfg.frames
                ),
            ));
        }
        if cfg.frame_bytes != 2048 && cfg.frame_bytes != 4096 {
            return Err(cfg_err(
                "frame_bytes",
                format!("is {} but must be 2048 or 4096", cfg.frame_bytes),
            ));
        }
        if !cfg.ring_size.is_power_of_two() || cfg.ring_size < 64 {
            return Err(cfg_err(
                "ring_size",
                format!(
                    "is {} but must be a power of two of at least 64",
                    cfg.ring_size
                ),
            ));
        }
        if !cfg.rx && !cfg.tx {
            return Err(cfg_err(
                "rx",
                "and tx are both off: open at least one direction".into(),
            ));
        }
        let ifindex = iface::index(ifname)?;
        let mtu = iface::mtu(ifname)?;
        let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0).map_err(|e| {
            if sys::is_perm(&e) {
                IoError::NeedCapNetRaw { what: BACKEND }
            } else if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
                IoError::Unsupported {
                    what: BACKEND,
                    hint: "use a kernel built with CONFIG_XDP_SOCKETS, or the af_packet backend",
                }
            } else {
                sys::err_from("socket(AF_XDP)", ifname, e)
            }
        })?;
        let umem_len = cfg.frames as usize * cfg.frame_bytes as usize;
        let umem = Mmap::anonymous(umem_len).map_err(|e| sys::err_from("mmap(UMEM)", ifname, e))?;
        let reg = UmemReg {
            addr: umem.ptr as u64,
            len: umem_len as u64,
            chunk_size: cfg.frame_bytes,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        sys::setsockopt(&fd, SOL_XDP, XDP_UMEM_REG, &reg)
            .map_err(|e| sys::err_from("setsockopt(XDP_UMEM_REG)", ifname, e))?;
        let rs = cfg.ring_size as libc::c_int;
        for (opt, name) in [
            (XDP_UMEM_FILL_RING, "setsockopt(XDP_UMEM_FILL_RING)"),
            (
                XDP_UMEM_COMPLETION_RING,
                "setsockopt(XDP_UMEM_COMPLETION_RING)",
            ),
        ] {
            sys::setsockopt_int(&fd, SOL_XDP, opt, rs)
                .map_err(|e| sys::err_from(name, ifname, e))?;
        }
        if cfg.rx {
            sys::setsockopt_int(&fd, SOL_XDP, XDP_RX_RING, rs)
                .map_err(|e| sys::err_from("setsockopt(XDP_RX_RING)", ifname, e))?;
        }
        if cfg.tx {
            sys::setsockopt_int(&fd, SOL_XDP, XDP_TX_RING, rs)
                .map_err(|e| sys::err_from("setsockopt(XDP_TX_RING)", ifname, e))?;
        }
        let mut off = MmapOffsets::default();
        sys::getsockopt(&fd, SOL_XDP, XDP_MMAP_OFFSETS, &mut off)
            .map_err(|e| sys::err_from("getsockopt(XDP_MMAP_OFFSETS)", ifname, e))?;
        let mut fill: Ring<u64> = Ring::map(
            &fd,
            &off.fr,
            cfg.ring_size,
            XDP_UMEM_PGOFF_FILL_RING,
            ifname,
        )?;
        let comp: Ring<u64> = Ring::map(
            &fd,
            &off.cr,
            cfg.ring_size,
            XDP_UMEM_PGOFF_COMPLETION_RING,
            ifname,
        )?;
        let rx = if cfg.rx {
            Some(Ring::map(
                &fd,
                &off.rx,
                cfg.ring_size,
                XDP_PGOFF_RX_RING,
                ifname,
            )?)
        } else {
            None
        };
        let tx = if cfg.tx {
            Some(Ring::map(
                &fd,
                &off.tx,
                cfg.ring_size,
                XDP_PGOFF_TX_RING,
                ifname,
            )?)
        } else {
            None
        };

        // Chunks: RX gets the lower half (at most a fill ring's worth), TX the rest.
        let fb = cfg.frame_bytes as u64;
        let rx_chunks = if cfg.rx {
            (cfg.frames / 2).min(cfg.ring_size)
        } else {
            0
        };
        for i in 0..rx_chunks {
            fill.put(i, i as u64 * fb);
        }
        fill.publish(rx_chunks);
        let tx_free: Vec<u64> = if cfg.tx {
            (rx_chunks as u64..cfg.frames as u64)
                .rev()
                .map(|i| i * fb)
                .collect()
        } else {
            Vec::new()
        };

        let bind = |flags: u16| -> std::io::Result<()> {
            let sa = SockaddrXdp {
                family: libc::AF_XDP as u16,
                flags,
                ifindex,
                queue_id: cfg.queue,
                shared_umem_fd: 0,
            };
            // SAFETY: `sa` is a valid sockaddr_xdp and its size is passed.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    &sa as *const SockaddrXdp as *const libc::sockaddr,
                    size_of::<SockaddrXdp>() as libc::socklen_t,
                )
            };
            if rc < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let bind_err = |e: std::io::Error| {
            match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => IoError::NeedCapNetRaw { what: BACKEND },
            Some(libc::EBUSY) => cfg_err(
                "queue",
                format!("{} of '{ifname}' already has an AF_XDP socket: use another queue or close the other socket", cfg.queue),
            ),
            Some(libc::EINVAL) => cfg_err(
                "queue",
                format!("{} does not exist on '{ifname}' (or the driver refuses AF_XDP there): check `ethtool -l {ifname}`", cfg.queue),
            ),
            _ => sys::err_from("bind(AF_XDP)", ifname, e),
        }
        };
        let zero_copy = match cfg.zero_copy {
            ZeroCopy::Off => {
                bind(XDP_COPY | XDP_USE_NEED_WAKEUP).map_err(bind_err)?;
                false
            }
            ZeroCopy::Require => {
                bind(XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP).map_err(bind_err)?;
                true
            }
            ZeroCopy::Auto => match bind(XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP) {
                Ok(()) => true,
                Err(_) => {
                    bind(XDP_COPY | XDP_USE_NEED_WAKEUP).map_err(bind_err)?;
                    false
                }
            },
        };
        let xdp = if cfg.rx {
            Some(attach_redirect(ifname, ifindex, cfg.queue, &fd, cfg.steer)?)
        } else {
            None
        };
        Ok(AfXdp {
            rx,
            tx,
            fill,
            comp,
            _xdp: xdp,
            fd,
            umem,
            frame_bytes: cfg.frame_bytes as usize,
            tx_total: tx_free.len(),
            tx_free,
            ifname: ifname.to_string(),
            mtu,
            zero_copy,
            rx_timestamps: cfg.rx_timestamps,
            tx_packets: 0,
            rx_packets: 0,
            tx_ring_full: 0,
        })
    }

    /// True when the socket is bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Return completed TX chunks to the free list.
    fn reclaim(&mut self) {
        let n = self.comp.available();
        for i in 0..n {
            let a = self.comp.get(i);
            self.tx_free.push(a);
        }
        if n > 0 {
            self.comp.release(n);
        }
    }

    fn chunk(&mut self, addr: u64) -> &mut [u8] {
        let start = addr as usize;
        debug_assert!(start + self.frame_bytes <= self.umem.len);
        // SAFETY: addr is a chunk start we handed out (a multiple of frame_bytes below
        // frames * frame_bytes), so the slice lies in the UMEM; the chunk is ours (on the
        // free list or just received), so the kernel does not touch it meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.add(start), self.frame_bytes) }
    }

    fn kick_tx(&mut self) -> Result<(), IoError> {
        // SAFETY: sendto with no buffer and no address is the documented TX kick.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                Ok(())
            }
            Some(libc::ENETDOWN) | Some(libc::ENXIO) => Err(IoError::InterfaceDown {
                ifname: self.ifname.clone(),
            }),
            _ => Err(sys::err_from("sendto(AF_XDP kick)", &self.ifname, e)),
        }
    }
}

impl PacketIo for AfXdp {
    fn name(&self) -> &'static str {
        "af_xdp"
    }

    fn mode(&self) -> Option<&'static str> {
        Some(if self.zero_copy { "zero-copy" } else { "copy" })
    }

    fn layer(&self) -> Layer {
        Layer::Ethernet
    }

    fn max_frame_len(&self) -> usize {
        (self.mtu + ETH_HLEN + VLAN_HLEN).min(self.frame_bytes)
    }

    fn tx_batch(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
    ) -> Result<usize, IoError> {
        if self.tx.is_none() {
            return Err(IoError::DirectionDisabled {
                backend: BACKEND,
                ifname: self.ifname.clone(),
                direction: "tx",
            });
        }
        self.reclaim();
        let room = self.tx.as_ref().map_or(0, |t| t.free()) as usize;
        let k = n.min(room).min(self.tx_free.len());
        if k < n {
            self.tx_ring_full += 1;
        }
        let max = self.max_frame_len();
        let mut done = 0;
        let mut result = Ok(());
        while done < k {
            let addr = self.tx_free[self.tx_free.len() - 1];
            let len = fill(done, self.chunk(addr));
            if len < ETH_HLEN {
                result = Err(IoError::FrameTooShort {
                    ifname: self.ifname.clone(),
                    len,
                    min: ETH_HLEN,
                });
                break;
            }
            if len > max {
                result = Err(IoError::FrameTooLong {
                    ifname: self.ifname.clone(),
                    len,
                    max,
                });
                break;
            }
            self.tx_free.pop();
            if let Some(t) = self.tx.as_mut() {
                t.put(
                    done as u32,
                    XdpDesc {
                        addr,
                        len: len as u32,
                        options: 0,
                    },
                );
            }
            done += 1;
        }
        if let Some(t) = self.tx.as_mut() {
            t.publish(done as u32);
        }
        self.tx_packets += done as u64;
        result.map(|()| done)
    }

    fn flush_tx(&mut self) -> Result<(), IoError> {
        // Copy mode sends at most 32 frames per kick; kick until the ring is drained or
        // the device pushes back (bounded, so this never blocks).
        for _ in 0..64 {
            let Some(t) = self.tx.as_ref() else {
                return Ok(());
            };
            let drained = t.cons().load(Ordering::Acquire) == t.local;
            let wake = !self.zero_copy || t.needs_wakeup();
            if drained {
                break;
            }
            if wake {
                self.kick_tx()?;
            }
            if self.zero_copy {
                break;
            }
        }
        self.reclaim();
        Ok(())
    }

    fn rx_batch(
        &mut self,
        max: usize,
        timeout: Duration,
        sink: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, IoError> {
        if self.rx.is_none() {
            return Err(IoError::DirectionDisabled {
                backend: BACKEND,
                ifname: self.ifname.clone(),
                direction: "rx",
            });
        }
        let mut deadline: Option<Instant> = None;
        loop {
            let avail = self.rx.as_ref().map_or(0, |r| r.available());
            if avail > 0 {
                let n = (avail as usize).min(max) as u32;
                // One clock read per batch: the frames arrived before it.
                let (ts_ns, ts_source) = if self.rx_timestamps {
                    (Some(clock::realtime_ns()), TsSource::Application)
                } else {
                    (None, TsSource::None)
                };
                for i in 0..n {
                    let d = self.rx.as_ref().map(|r| r.get(i)).unwrap_or(XdpDesc {
                        addr: 0,
                        len: 0,
                        options: 0,
                    });
                    let len = (d.len as usize).min(self.frame_bytes);
                    let start = d.addr as usize;
                    // SAFETY: the kernel handed us this descriptor; its frame lies in
                    // the UMEM (addr + len within a chunk, clamped above), and the chunk
                    // is not reused before we put it back on the fill ring below.
                    let data = unsafe {
                        std::slice::from_raw_parts(
                            self.umem.ptr.add(start.min(self.umem.len - len)),
                            len,
                        )
                    };
                    sink(
                        data,
                        RxMeta {
                            ts_ns,
                            ts_source,
                            wire_len: len,
                        },
                    );
                    // Chunk addresses are chunk-aligned in aligned mode.
                    let chunk = d.addr - d.addr % self.frame_bytes as u64;
                    // Never more RX chunks exist than the fill ring holds, so the
                    // entry is free.
                    self.fill.put(i, chunk);
                }
                if let Some(r) = self.rx.as_mut() {
                    r.release(n);
                }
                self.fill.publish(n);
                self.rx_packets += n as u64;
                return Ok(n as usize);
            }
            let Some(left) = sys::wait_left(&mut deadline, timeout) else {
                return Ok(0);
            };
            sys::poll_in(&self.fd, left)
                .map_err(|e| sys::err_from("poll(AF_XDP RX)", &self.ifname, e))?;
        }
    }

    fn stats(&self) -> IoStats {
        let mut st = XdpStatistics::default();
        let drops = match sys::getsockopt(&self.fd, SOL_XDP, XDP_STATISTICS, &mut st) {
            Ok(()) => st.rx_dropped + st.rx_ring_full + st.rx_fill_ring_empty_descs,
            Err(_) => 0,
        };
        IoStats {
            tx_packets: self.tx_packets,
            rx_packets: self.rx_packets,
            rx_kernel_drops: drops,
            tx_ring_full: self.tx_ring_full,
        }
    }

    fn tx_outstanding(&mut self) -> usize {
        self.reclaim();
        self.tx_total - self.tx_free.len()
    }
}

/// `BPF_MAP_TYPE_XSKMAP` from `enum bpf_map_type`.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_FUNC_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;

/// The redirect program: `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`
/// (the flags argument's low bits are the action when the queue has no socket, 5.3+).
fn redirect_program(map_fd: i32) -> Vec<u64> {
    let mut a = Asm::default();
    a.op(insn(op::MOV_REG, 6, 1, 0, 0)); // r6 = ctx, as the probe filter has it
    redirect_tail(&mut a, map_fd);
    a.finish()
}

/// Redirect to the socket of `ctx->rx_queue_index` (ctx in r6), else pass.
fn redirect_tail(a: &mut Asm, map_fd: i32) {
    // r2 = *(u32 *)(ctx + offsetof(struct xdp_md, rx_queue_index) = 16)
    a.op(insn(op::LDX_W, 2, 6, 16, 0));
    a.ld_map(1, 1, map_fd, 0); // r1 = map
    a.op(insn(op::MOV_IMM, 3, 0, 0, XDP_PASS));
    a.op(insn(op::CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP));
    a.op(insn(op::EXIT, 0, 0, 0, 0));
}

/// `XDP_PASS` from `enum xdp_action`.
const XDP_PASS: i32 = 2;

/// The probe filter ([`Steer::UdpFirstByte`]): redirect IPv4/IPv6 UDP frames whose
/// payload starts with `magic`, pass everything else. Ethertypes are loaded
/// as little-endian u16, so 0x0800 reads 0x0008. r2 walks the packet (moved
/// by 4 past a VLAN tag), r3 is data_end, r6 the context.
fn probe_filter_program(map_fd: i32, magic: u8) -> Vec<u64> {
    const PASS: &str = "pass";
    let mut a = Asm::default();
    a.op(insn(op::MOV_REG, 6, 1, 0, 0)); // r6 = ctx
    a.op(insn(op::LDX_W, 2, 6, 0, 0)); // r2 = ctx->data
    a.op(insn(op::LDX_W, 3, 6, 4, 0)); // r3 = ctx->data_end
    a.need(14, PASS);
    a.op(insn(op::LDX_H, 5, 2, 12, 0)); // r5 = ethertype
    a.jump(op::JEQ_IMM, 5, 0, 0x0081, "vlan"); // 802.1Q
    a.jump(op::JEQ_IMM, 5, 0, 0xa888, "vlan"); // 802.1ad
    a.jump(op::JA, 0, 0, 0, "l3");
    a.label("vlan");
    a.op(insn(op::ADD_IMM, 2, 0, 0, 4)); // skip the tag: the inner ethertype is at 12 again
    a.need(14, PASS);
    a.op(insn(op::LDX_H, 5, 2, 12, 0));
    a.label("l3");
    a.jump(op::JEQ_IMM, 5, 0, 0x0008, "v4");
    a.jump(op::JEQ_IMM, 5, 0, 0xdd86, "v6");
    a.jump(op::JA, 0, 0, 0, PASS);
    a.label("v4");
    a.need(14 + 20 + 8 + 1, PASS);
    a.byte_is(14, 0x45, PASS); // version 4, no options
    a.byte_is(14 + 9, 17, PASS); // UDP
    a.op(insn(op::LDX_H, 5, 2, 14 + 6, 0)); // flags + fragment offset
    a.op(insn(op::AND_IMM, 5, 0, 0, 0xff1f)); // the offset bits, loaded little-endian
    a.jump(op::JNE_IMM, 5, 0, 0, PASS); // not the first fragment
    a.byte_is(14 + 20 + 8, magic, PASS);
    a.jump(op::JA, 0, 0, 0, "redirect");
    a.label("v6");
    a.need(14 + 40 + 8 + 1, PASS);
    a.byte_is(14 + 6, 17, PASS); // next header UDP (no extension headers)
    a.byte_is(14 + 40 + 8, magic, PASS);
    a.label("redirect");
    redirect_tail(&mut a, map_fd);
    a.label(PASS);
    a.op(insn(op::MOV_IMM, 0, 0, 0, XDP_PASS));
    a.op(insn(op::EXIT, 0, 0, 0, 0));
    a.finish()
}

/// The redirect program on one interface and its XSKMAP (queue → socket), shared by
/// the sockets of all its queues: an interface takes one XDP program, so the socket of
/// a second queue adds itself to the first one's map. Detached when the last socket
/// goes; the kernel removes a closed socket from the map itself.
struct Redirect {
    // Field order matters for Drop: the link (which detaches) before the program.
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
}

/// Which program: the namespace (inode of its file), the interface and the steering.
type RedirectKey = (u64, u32, Steer);

/// Redirects in use in this process.
static REDIRECTS: std::sync::Mutex<Vec<(RedirectKey, std::sync::Weak<Redirect>)>> =
    std::sync::Mutex::new(Vec::new());

/// Queues an XSKMAP has room for: more than any worker count nflab allows.
const XSKMAP_QUEUES: u32 = 64;

/// Put the socket at `queue` of the redirect already attached to this interface (same
/// namespace and steering) or, for the first queue, create the XSKMAP, load the program
/// and attach it. Dropping the last `Arc` detaches and frees everything.
fn attach_redirect(
    ifname: &str,
    ifindex: u32,
    queue: u32,
    sock: &OwnedFd,
    steer: Steer,
) -> Result<std::sync::Arc<Redirect>, IoError> {
    let key = (crate::iface::this_netns_inode(), ifindex, steer);
    let mut reg = REDIRECTS.lock().unwrap_or_else(|p| p.into_inner());
    reg.retain(|(_, r)| r.strong_count() > 0);
    let shared = reg
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, r)| r.upgrade());
    if let Some(r) = shared {
        probe_caps::map_update(&r.map, &queue, &(sock.as_raw_fd() as u32), ifname)?;
        return Ok(r);
    }
    let map = probe_caps::map_create::<u32, u32>(
        BPF_MAP_TYPE_XSKMAP,
        (queue + 1).max(XSKMAP_QUEUES),
        "bpf(BPF_MAP_CREATE, XSKMAP)",
        ifname,
    )?;
    probe_caps::map_update(&map, &queue, &(sock.as_raw_fd() as u32), ifname)?;
    let program = match steer {
        Steer::All => redirect_program(map.as_raw_fd()),
        Steer::UdpFirstByte(b) => probe_filter_program(map.as_raw_fd(), b),
    };
    let prog = probe_caps::load_xdp(&program, ifname)?;
    let link = probe_caps::link_create(&prog, ifindex, ifname)?;
    let r = std::sync::Arc::new(Redirect {
        _link: link,
        _prog: prog,
        map,
    });
    reg.push((key, std::sync::Arc::downgrade(&r)));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_if_xdp_h() {
        assert_eq!(size_of::<UmemReg>(), 32);
        assert_eq!(size_of::<MmapOffsets>(), 128);
        assert_eq!(size_of::<XdpDesc>(), 16);
        assert_eq!(size_of::<SockaddrXdp>(), 16);
        assert_eq!(size_of::<XdpStatistics>(), 48);
    }

    #[test]
    fn instructions_encode_as_the_kernel_expects() {
        // r2 = *(u32 *)(r1 + 16): 61 12 10 00 00 00 00 00
        assert_eq!(
            insn(0x61, 2, 1, 16, 0).to_le_bytes(),
            [0x61, 0x12, 0x10, 0, 0, 0, 0, 0]
        );
        let p = redirect_program(7);
        assert_eq!(p[1].to_le_bytes(), [0x61, 0x62, 0x10, 0, 0, 0, 0, 0]);
        assert_eq!(p[2].to_le_bytes(), [0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(p[5].to_le_bytes(), [0x85, 0, 0, 0, 51, 0, 0, 0]);
    }

    #[test]
    fn probe_filter_jumps_land_inside_the_program_and_on_their_labels() {
        let p = probe_filter_program(7, 0xa7);
        let n = p.len() as i64;
        let mut exits = 0;
        for (pc, i) in p.iter().enumerate() {
            let b = i.to_le_bytes();
            let class_jmp = b[0] & 0x07 == 0x05;
            if b[0] == 0x95 {
                exits += 1;
            } else if class_jmp && b[0] != 0x85 {
                let off = i16::from_le_bytes([b[2], b[3]]);
                let to = pc as i64 + 1 + i64::from(off);
                assert!(off >= 0 && to < n, "jump at {pc} to {to} of {n}");
            }
        }
        assert_eq!(exits, 2, "redirect and pass");
        // The last two instructions are `r0 = XDP_PASS; exit`.
        assert_eq!(p[p.len() - 2].to_le_bytes(), [0xb7, 0, 0, 0, 2, 0, 0, 0]);
    }

    #[test]
    fn bad_configs_are_config_errors() {
        let e = AfXdp::open(
            "lo",
            &AfXdpConfig {
                frames: 1000,
                ..AfXdpConfig::default()
            },
        )
        .err()
        .expect("must fail");
        assert!(
            matches!(
                e,
                IoError::Config {
                    field: "frames",
                    ..
                }
            ),
            "{e:?}"
        );
        let e = AfXdp::open("nflabnope3", &AfXdpConfig::default())
            .err()
            .expect("must fail");
        assert!(matches!(e, IoError::NoSuchInterface { .. }), "{e:?}");
    }
}
