//! XDP live-frames transmit: the kernel sends the frames, no socket involved.
//!
//! `BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` (Linux 5.18+, the technique
//! of xdp-tools' `xdp-trafficgen`) runs an XDP program `repeat` times over a template
//! frame held in a kernel page pool and transmits every frame the program returns
//! `XDP_TX` for out of the interface named in the context — through the driver's
//! `ndo_xdp_xmit`, in batches of 64, with no skb, no qdisc and no copy from user
//! space. On veth the frames land in the peer's XDP receive ring, which exists only
//! while the peer has an XDP program or GRO enabled; without either they are dropped
//! silently (`tx_queue_0_xdp_xmit` in `ethtool -S` does not grow).
//!
//! Our program (below, raw eBPF) stamps each frame as the generator would: it takes
//! the next sequence number from a one-entry array map, reads `bpf_ktime_get_ns()`
//! (CLOCK_MONOTONIC) plus the CLOCK_REALTIME − CLOCK_MONOTONIC offset that
//! [`XdpLive::send`] refreshes in the same map before every call, and writes both
//! big-endian into the probe's seq (48 bit) and tx_ns fields, after rewriting the
//! frame's head from the map (see [`stamp_program`]). So the tx timestamp is
//! taken in the kernel a few hundred ns before the frame leaves, on the realtime
//! clock like every other nflab tx stamp. Fixed-content frames only: one flow, and
//! the IPv4 UDP checksum must be 0 (the program does not update it).

use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::bpf_asm::{insn, op, Asm};
use crate::{iface, probe_caps, IoError};

/// `BPF_MAP_TYPE_ARRAY`.
const BPF_MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_PROG_TEST_RUN` from `enum bpf_cmd`.
const BPF_PROG_TEST_RUN: libc::c_int = 10;
/// `BPF_F_TEST_XDP_LIVE_FRAMES`.
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// `BPF_FUNC_ktime_get_ns`.
const BPF_FUNC_KTIME_GET_NS: i32 = 5;
/// `XDP_DROP`, `XDP_TX`.
const XDP_DROP: i32 = 1;
const XDP_TX: i32 = 3;
/// Largest `repeat` per call: the kernel checks for signals between batches,
/// but a bounded call keeps the clock offset fresh and Ctrl-C prompt.
pub const MAX_BURST: u32 = 1 << 20;

/// The `test` member of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `struct xdp_md` as the test run's input context.
#[repr(C)]
#[derive(Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// Bytes of the frame's head the program rewrites into every frame.
const HEAD_BYTES: usize = 128;

/// The map value: next sequence number, the realtime − monotonic offset, and
/// the frame's head up to the probe's seq field.
#[repr(C)]
#[derive(Clone, Copy)]
struct State {
    next_seq: u64,
    realtime_offset_ns: i64,
    head: [u8; HEAD_BYTES],
}

impl Default for State {
    fn default() -> Self {
        State {
            next_seq: 0,
            realtime_offset_ns: 0,
            head: [0; HEAD_BYTES],
        }
    }
}

/// A live-frames transmitter on one interface.
pub struct XdpLive {
    ifname: String,
    ifindex: u32,
    frame: Vec<u8>,
    prog: OwnedFd,
    map: OwnedFd,
}

impl XdpLive {
    /// Load the stamping program for `frame` (the template, whose probe header's seq
    /// field starts at `seq_offset` and is followed by the 8-byte tx_ns field) on
    /// `ifname`. Sequence numbers start at `first_seq`.
    pub fn open(
        ifname: &str,
        frame: &[u8],
        seq_offset: usize,
        first_seq: u64,
    ) -> Result<XdpLive, IoError> {
        let ifindex = iface::index(ifname)?;
        if seq_offset + 14 > frame.len() || seq_offset > HEAD_BYTES - 8 {
            return Err(IoError::Config {
                backend: "XDP live frames",
                field: "frame",
                reason: format!(
                    "the probe's seq/tx fields at byte {seq_offset} do not fit the {}-byte frame",
                    frame.len()
                ),
            });
        }
        let map = probe_caps::map_create::<u32, State>(
            BPF_MAP_TYPE_ARRAY,
            1,
            "bpf(BPF_MAP_CREATE, ARRAY)",
            ifname,
        )?;
        let program = stamp_program(map.as_raw_fd(), seq_offset as i16);
        let prog = probe_caps::load_xdp(&program, ifname)?;
        let live = XdpLive {
            ifname: ifname.to_string(),
            ifindex,
            frame: frame.to_vec(),
            prog,
            map,
        };
        let mut head = [0u8; HEAD_BYTES];
        let n = frame.len().min(HEAD_BYTES);
        head[..n].copy_from_slice(&frame[..n]);
        live.write_state(State {
            next_seq: first_seq,
            realtime_offset_ns: crate::clock::realtime_minus_monotonic_ns(),
            head,
        })?;
        Ok(live)
    }

    fn write_state(&self, st: State) -> Result<(), IoError> {
        probe_caps::map_update(&self.map, &0u32, &st, &self.ifname)
    }

    fn read_state(&self) -> Result<State, IoError> {
        let mut st = State::default();
        probe_caps::map_lookup(&self.map, &0u32, &mut st, &self.ifname)?;
        Ok(st)
    }

    /// The sequence number the next frame will carry.
    pub fn next_seq(&self) -> Result<u64, IoError> {
        Ok(self.read_state()?.next_seq)
    }

    /// Send `n` frames (at most [`MAX_BURST`]) back to back; returns how many
    /// the program stamped and handed to the driver: all `n`, or fewer when a
    /// signal cut the call short (the kernel stops a test run with EINTR when
    /// a signal is pending; the caller's stop flag decides what follows).
    pub fn send(&mut self, n: u32) -> Result<u32, IoError> {
        let n = n.min(MAX_BURST);
        if n == 0 {
            return Ok(0);
        }
        // Refresh the clock offset (NTP may slew realtime); the seq stays.
        let mut st = self.read_state()?;
        let first = st.next_seq;
        st.realtime_offset_ns = crate::clock::realtime_minus_monotonic_ns();
        self.write_state(st)?;
        let mut ctx = XdpMd {
            data_end: self.frame.len() as u32,
            ingress_ifindex: self.ifindex,
            ..XdpMd::default()
        };
        let mut attr = TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: self.frame.len() as u32,
            data_in: self.frame.as_ptr() as u64,
            repeat: n,
            ctx_size_in: size_of::<XdpMd>() as u32,
            ctx_in: &mut ctx as *mut XdpMd as u64,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            ..TestRunAttr::default()
        };
        match probe_caps::bpf_noreturn(BPF_PROG_TEST_RUN, &mut attr) {
            Ok(_) => Ok(n),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                let stamped = self.read_state()?.next_seq.saturating_sub(first);
                Ok(stamped.min(u64::from(n)) as u32)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(IoError::Unsupported {
                what: "XDP live frames (BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES)",
                hint: "it needs Linux 5.18+; use backend af_xdp or af_packet",
            }),
            Err(e) => Err(probe_caps::bpf_err(
                "bpf(BPF_PROG_TEST_RUN)",
                &self.ifname,
                e,
            )),
        }
    }
}

/// The stamping program: r7 → map value {next_seq, offset}; seq = next_seq++;
/// tx = ktime_get_ns() + offset; both big-endian into the frame; `XDP_TX`.
fn stamp_program(map_fd: i32, seq_offset: i16) -> Vec<u64> {
    const DROP: &str = "drop";
    let mut a = Asm::default();
    a.op(insn(op::MOV_REG, 6, 1, 0, 0)); // r6 = ctx
    a.ld_map(7, 2, map_fd, 0); // r7 = &value (BPF_PSEUDO_MAP_VALUE)
    a.op(insn(op::LDX_DW, 8, 7, 0, 0)); // r8 = next_seq
    a.op(insn(op::MOV_REG, 1, 8, 0, 0));
    a.op(insn(op::ADD_IMM, 1, 0, 0, 1));
    a.op(insn(op::STX_DW, 7, 1, 0, 0)); // next_seq = r8 + 1 (one test run, one CPU)
    a.op(insn(op::CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS));
    a.op(insn(op::LDX_DW, 9, 7, 8, 0)); // r9 = offset
    a.op(insn(op::ADD_REG, 9, 0, 0, 0)); // r9 = realtime now
    a.op(insn(op::LDX_W, 2, 6, 0, 0)); // r2 = ctx->data (after the call: r1-r5 are clobbered)
    a.op(insn(op::LDX_W, 3, 6, 4, 0)); // r3 = ctx->data_end
                                       // The head up to the seq field, in 8-byte words, from the map: the frames
                                       // come from a page pool that recycles pages the stack may have rewritten
                                       // (a router puts new MACs and a lower TTL into the same bytes), and the
                                       // kernel initialises a page from the template only when it is new.
    let words = (seq_offset as i32 + 7) / 8;
    a.need((words * 8).max(i32::from(seq_offset) + 14), DROP);
    for w in 0..words as i16 {
        a.op(insn(op::LDX_DW, 1, 7, 16 + 8 * w, 0));
        a.op(insn(op::STX_DW, 2, 1, 8 * w, 0));
    }
    a.op(insn(op::LSH_IMM, 8, 0, 0, 16)); // seq's 6 bytes first when big-endian
    a.op(insn(op::TO_BE, 8, 0, 0, 64));
    a.op(insn(op::TO_BE, 9, 0, 0, 64));
    // 8 bytes at the seq field (its 2 spill bytes are overwritten by tx_ns next).
    a.op(insn(op::STX_DW, 2, 8, seq_offset, 0));
    a.op(insn(op::STX_DW, 2, 9, seq_offset + 6, 0));
    a.op(insn(op::MOV_IMM, 0, 0, 0, XDP_TX));
    a.op(insn(op::EXIT, 0, 0, 0, 0));
    a.label(DROP);
    a.op(insn(op::MOV_IMM, 0, 0, 0, XDP_DROP));
    a.op(insn(op::EXIT, 0, 0, 0, 0));
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_linux_bpf_h() {
        // union bpf_attr's test member ends with batch_size at offset 76.
        assert_eq!(size_of::<TestRunAttr>(), 80);
        assert_eq!(size_of::<XdpMd>(), 24);
        assert_eq!(size_of::<State>(), 16 + HEAD_BYTES);
    }

    #[test]
    fn stamp_program_stores_at_the_probe_fields() {
        let p = stamp_program(9, 44);
        let stores: Vec<i16> = p
            .iter()
            .map(|i| i.to_le_bytes())
            .filter(|b| b[0] == op::STX_DW && b[1] & 0x0f == 2)
            .map(|b| i16::from_le_bytes([b[2], b[3]]))
            .collect();
        // The head's six words (0..48), then seq and tx_ns.
        assert_eq!(stores, vec![0, 8, 16, 24, 32, 40, 44, 50]);
        // BPF_PSEUDO_MAP_VALUE: src register 2 in the ld_imm64.
        assert_eq!(p[1].to_le_bytes()[..2], [op::LD_IMM64, 0x27]);
    }
}
