//! A ten-line eBPF assembler for the few XDP programs nflab loads (the AF_XDP
//! steering program, the XDP live-frames generator): instructions as `u64`
//! in the kernel's encoding, jumps to named labels resolved at the end. No
//! toolchain, no ELF, nothing hidden — each program reads top to bottom next
//! to the C it stands for.

/// One eBPF instruction: opcode, dst/src registers, offset, immediate.
pub(crate) fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | (dst & 0x0f);
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    u64::from_le_bytes(b)
}

/// Opcodes used here (`BPF_CLASS | BPF_OP/SIZE | BPF_SRC` of <linux/bpf.h>).
pub(crate) mod op {
    /// `dst = src` (64 bit).
    pub const MOV_REG: u8 = 0xbf;
    /// `dst = imm` (64 bit).
    pub const MOV_IMM: u8 = 0xb7;
    /// `dst += imm`.
    pub const ADD_IMM: u8 = 0x07;
    /// `dst += src`.
    pub const ADD_REG: u8 = 0x0f;
    /// `dst &= imm`.
    pub const AND_IMM: u8 = 0x57;
    /// `dst <<= imm`.
    pub const LSH_IMM: u8 = 0x67;
    /// `dst = htobe(dst)`, imm = width in bits.
    pub const TO_BE: u8 = 0xdc;
    /// `dst = *(u8 *)(src + off)`.
    pub const LDX_B: u8 = 0x71;
    /// `dst = *(u16 *)(src + off)`.
    pub const LDX_H: u8 = 0x69;
    /// `dst = *(u32 *)(src + off)`.
    pub const LDX_W: u8 = 0x61;
    /// `dst = *(u64 *)(src + off)`.
    pub const LDX_DW: u8 = 0x79;
    /// `*(u64 *)(dst + off) = src`.
    pub const STX_DW: u8 = 0x7b;
    /// 64-bit immediate load (two slots).
    pub const LD_IMM64: u8 = 0x18;
    /// `goto +off`.
    pub const JA: u8 = 0x05;
    /// `if dst == imm goto +off`.
    pub const JEQ_IMM: u8 = 0x15;
    /// `if dst != imm goto +off`.
    pub const JNE_IMM: u8 = 0x55;
    /// `if dst > src goto +off` (unsigned).
    pub const JGT_REG: u8 = 0x2d;
    /// Call helper `imm`.
    pub const CALL: u8 = 0x85;
    /// Return r0.
    pub const EXIT: u8 = 0x95;
}

/// Instructions plus jumps to labels, resolved by [`Asm::finish`].
#[derive(Default)]
pub(crate) struct Asm {
    code: Vec<u64>,
    jumps: Vec<(usize, &'static str)>,
    labels: Vec<(&'static str, usize)>,
}

impl Asm {
    /// Append one instruction.
    pub(crate) fn op(&mut self, i: u64) {
        self.code.push(i);
    }

    /// A jump (`code` = BPF_JMP | op | BPF_K or BPF_X) to label `to`.
    pub(crate) fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: &'static str) {
        self.jumps.push((self.code.len(), to));
        self.code.push(insn(code, dst, src, 0, imm));
    }

    /// Place label `l` at the next instruction.
    pub(crate) fn label(&mut self, l: &'static str) {
        self.labels.push((l, self.code.len()));
    }

    /// `if (r2 + len > r3) goto fail`: with r2 a packet pointer and r3 data_end,
    /// the bounds check the verifier wants before any access below r2 + len.
    pub(crate) fn need(&mut self, len: i32, fail: &'static str) {
        self.op(insn(op::MOV_REG, 4, 2, 0, 0));
        self.op(insn(op::ADD_IMM, 4, 0, 0, len));
        self.jump(op::JGT_REG, 4, 3, 0, fail);
    }

    /// `r5 = *(u8 *)(r2 + off); if r5 != want goto fail`.
    pub(crate) fn byte_is(&mut self, off: i16, want: u8, fail: &'static str) {
        self.op(insn(op::LDX_B, 5, 2, off, 0));
        self.jump(op::JNE_IMM, 5, 0, i32::from(want), fail);
    }

    /// `dst = map` (`src` = 1, BPF_PSEUDO_MAP_FD) or `dst = &map's value[0] + off`
    /// (`src` = 2, BPF_PSEUDO_MAP_VALUE).
    pub(crate) fn ld_map(&mut self, dst: u8, src: u8, map_fd: i32, off: i32) {
        self.op(insn(op::LD_IMM64, dst, src, 0, map_fd));
        self.op(insn(0, 0, 0, 0, off));
    }

    /// The program with every jump offset filled in.
    pub(crate) fn finish(mut self) -> Vec<u64> {
        for &(at, to) in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == to)
                .map(|&(_, pc)| pc)
                .unwrap_or_else(|| unreachable!("label {to} is placed"));
            let off = (target as i64 - at as i64 - 1) as i16;
            let mut b = self.code[at].to_le_bytes();
            b[2..4].copy_from_slice(&off.to_le_bytes());
            self.code[at] = u64::from_le_bytes(b);
        }
        self.code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_resolve_forward_and_backward_labels() {
        let mut a = Asm::default();
        a.label("top");
        a.jump(op::JA, 0, 0, 0, "end");
        a.op(insn(op::MOV_IMM, 0, 0, 0, 1));
        a.jump(op::JA, 0, 0, 0, "top");
        a.label("end");
        a.op(insn(op::EXIT, 0, 0, 0, 0));
        let p = a.finish();
        let off = |i: usize| i16::from_le_bytes([p[i].to_le_bytes()[2], p[i].to_le_bytes()[3]]);
        assert_eq!((off(0), off(2)), (2, -3));
    }
}
