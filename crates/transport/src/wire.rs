//! The transport's datagram formats, in the smoltcp style: [`Packet`] is a zero-copy view
//! with byte ranges in a private `mod field`, [`Repr`] the checked high-level form with
//! `parse`, `emit` and `buffer_len`.
//!
//! Every datagram starts with the same 16-byte header; the kind decides what follows.
//! All integers are big-endian.
//!
//! ```text
//!  0       1       2               4                               8
//! +-------+-------+---------------+-------------------------------+
//! |version| kind  |   reserved    |            tx_id              |
//! +-------+-------+---------------+-------------------------------+
//! |                     tx_ns (sender clock, T1/T3)               |
//! +---------------------------------------------------------------+
//! DATA (kind 1), 28 bytes then the payload:
//! |     seq (u32)     |    block (u32)    |index|rsvd| payload_len|
//! |              deadline_ns (receiver clock, u64)                |
//! |              app_send_ns (sender clock, m1, u64)              |
//! PARITY (kind 2), 16 bytes then the shard:
//! |    block (u32)    |  first_seq (u32)  |  k  |  r  |idx| rsvd | shard_len (u16) | rsvd(2)
//! HEARTBEAT (kind 3): the common header only.
//! FEEDBACK (kind 4), 32 bytes then n_acks × 8 bytes:
//! | echo_tx_id (u32)  | echo_tx_ns (T1, u64) | echo_rx_ns (T2, u64) |
//! | received_bytes (u64) | n_acks | rsvd(3) |
//! ack: | block (u32) | have (u8) | need (u8) | flags (u8) | rsvd (u8) |
//! ```
//!
//! After [`Packet::check_len`] returns `Ok`, no getter or setter panics; [`Repr::parse`]
//! never panics on any input.

use core::ops::Range;

/// Format version carried in byte 0.
pub const VERSION: u8 = 1;
/// Length of the header every datagram starts with.
pub const COMMON_LEN: usize = 16;
/// Length of the DATA header (common header included), before the payload.
pub const DATA_HEADER_LEN: usize = COMMON_LEN + 28;
/// Length of the PARITY header (common header included), before the shard.
pub const PARITY_HEADER_LEN: usize = COMMON_LEN + 16;
/// Length of the FEEDBACK header (common header included), before the acks.
pub const FEEDBACK_HEADER_LEN: usize = COMMON_LEN + 32;
/// Length of one block acknowledgement in a FEEDBACK datagram.
pub const ACK_LEN: usize = 8;
/// Most block acknowledgements one FEEDBACK datagram carries.
pub const MAX_ACKS: usize = 32;
/// Ack flag: the receiver holds every message of the block (received or recovered).
pub const ACK_COMPLETE: u8 = 1;

/// Why a datagram was refused. Small and `Copy`: the caller drops the datagram and counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Shorter than its header or than the lengths its header claims.
    #[error("datagram truncated")]
    Truncated,
    /// An unknown version or kind, or a field out of its range.
    #[error("datagram malformed")]
    Malformed,
}

/// The kind of a datagram (byte 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An application message.
    Data,
    /// A Reed-Solomon recovery shard of a block.
    Parity,
    /// A keep-alive that asks for feedback when there is nothing to send.
    Heartbeat,
    /// Receiver to sender: timestamps for the RTT, bytes received, block acks.
    Feedback,
}

impl Kind {
    fn from_u8(value: u8) -> Option<Kind> {
        match value {
            1 => Some(Kind::Data),
            2 => Some(Kind::Parity),
            3 => Some(Kind::Heartbeat),
            4 => Some(Kind::Feedback),
            _ => None,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            Kind::Data => 1,
            Kind::Parity => 2,
            Kind::Heartbeat => 3,
            Kind::Feedback => 4,
        }
    }
}

#[rustfmt::skip]
mod field {
    use core::ops::Range;
    pub const VERSION: usize = 0;
    pub const KIND: usize = 1;
    pub const TX_ID: Range<usize> = 4..8;
    pub const TX_NS: Range<usize> = 8..16;

    pub const DATA_SEQ: Range<usize> = 16..20;
    pub const DATA_BLOCK: Range<usize> = 20..24;
    pub const DATA_INDEX: usize = 24;
    pub const DATA_PAYLOAD_LEN: Range<usize> = 26..28;
    pub const DATA_DEADLINE_NS: Range<usize> = 28..36;
    pub const DATA_APP_SEND_NS: Range<usize> = 36..44;

    pub const PAR_BLOCK: Range<usize> = 16..20;
    pub const PAR_FIRST_SEQ: Range<usize> = 20..24;
    pub const PAR_K: usize = 24;
    pub const PAR_R: usize = 25;
    pub const PAR_INDEX: usize = 26;
    pub const PAR_SHARD_LEN: Range<usize> = 28..30;

    pub const FB_ECHO_TX_ID: Range<usize> = 16..20;
    pub const FB_ECHO_TX_NS: Range<usize> = 20..28;
    pub const FB_ECHO_RX_NS: Range<usize> = 28..36;
    pub const FB_RECEIVED_BYTES: Range<usize> = 36..44;
    pub const FB_N_ACKS: usize = 44;
}

fn read_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn read_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// A zero-copy view of a transport datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and run [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check version, kind and every length the header claims; afterwards no accessor of
    /// this kind panics.
    pub fn check_len(&self) -> Result<(), WireError> {
        let buf = self.buffer.as_ref();
        if buf.len() < COMMON_LEN {
            return Err(WireError::Truncated);
        }
        if buf[field::VERSION] != VERSION {
            return Err(WireError::Malformed);
        }
        let kind = Kind::from_u8(buf[field::KIND]).ok_or(WireError::Malformed)?;
        let need = match kind {
            Kind::Heartbeat => COMMON_LEN,
            Kind::Data => {
                if buf.len() < DATA_HEADER_LEN {
                    return Err(WireError::Truncated);
                }
                DATA_HEADER_LEN + usize::from(self.payload_len())
            }
            Kind::Parity => {
                if buf.len() < PARITY_HEADER_LEN {
                    return Err(WireError::Truncated);
                }
                PARITY_HEADER_LEN + usize::from(self.shard_len())
            }
            Kind::Feedback => {
                if buf.len() < FEEDBACK_HEADER_LEN {
                    return Err(WireError::Truncated);
                }
                let n = usize::from(self.n_acks());
                if n > MAX_ACKS {
                    return Err(WireError::Malformed);
                }
                FEEDBACK_HEADER_LEN + n * ACK_LEN
            }
        };
        if buf.len() < need {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn get(&self, range: Range<usize>) -> &[u8] {
        &self.buffer.as_ref()[range]
    }

    /// Return the version field.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// Return the kind, `None` when unknown.
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_u8(self.buffer.as_ref()[field::KIND])
    }
    /// Return the per-sender transmit counter.
    pub fn tx_id(&self) -> u32 {
        read_u32(self.get(field::TX_ID))
    }
    /// Return the sender's clock when the datagram was handed to the network.
    pub fn tx_ns(&self) -> u64 {
        read_u64(self.get(field::TX_NS))
    }

    /// DATA: return the message sequence number.
    pub fn seq(&self) -> u32 {
        read_u32(self.get(field::DATA_SEQ))
    }
    /// DATA: return the block number.
    pub fn data_block(&self) -> u32 {
        read_u32(self.get(field::DATA_BLOCK))
    }
    /// DATA: return the index of the message in its block.
    pub fn data_index(&self) -> u8 {
        self.buffer.as_ref()[field::DATA_INDEX]
    }
    /// DATA: return the payload length.
    pub fn payload_len(&self) -> u16 {
        read_u16(self.get(field::DATA_PAYLOAD_LEN))
    }
    /// DATA: return the deadline in the receiver's clock.
    pub fn deadline_ns(&self) -> u64 {
        read_u64(self.get(field::DATA_DEADLINE_NS))
    }
    /// DATA: return the application's send time (m1) in the sender's clock.
    pub fn app_send_ns(&self) -> u64 {
        read_u64(self.get(field::DATA_APP_SEND_NS))
    }
    /// DATA: return the payload.
    pub fn payload(&self) -> &[u8] {
        let len = usize::from(self.payload_len());
        self.get(DATA_HEADER_LEN..DATA_HEADER_LEN + len)
    }

    /// PARITY: return the block number.
    pub fn parity_block(&self) -> u32 {
        read_u32(self.get(field::PAR_BLOCK))
    }
    /// PARITY: return the sequence number of the block's first message.
    pub fn first_seq(&self) -> u32 {
        read_u32(self.get(field::PAR_FIRST_SEQ))
    }
    /// PARITY: return the number of messages in the block.
    pub fn k(&self) -> u8 {
        self.buffer.as_ref()[field::PAR_K]
    }
    /// PARITY: return the number of recovery shards the block was encoded with.
    pub fn r(&self) -> u8 {
        self.buffer.as_ref()[field::PAR_R]
    }
    /// PARITY: return the index of this recovery shard.
    pub fn parity_index(&self) -> u8 {
        self.buffer.as_ref()[field::PAR_INDEX]
    }
    /// PARITY: return the shard length.
    pub fn shard_len(&self) -> u16 {
        read_u16(self.get(field::PAR_SHARD_LEN))
    }
    /// PARITY: return the shard.
    pub fn shard(&self) -> &[u8] {
        let len = usize::from(self.shard_len());
        self.get(PARITY_HEADER_LEN..PARITY_HEADER_LEN + len)
    }

    /// FEEDBACK: return the tx_id of the datagram whose timestamps are echoed.
    pub fn echo_tx_id(&self) -> u32 {
        read_u32(self.get(field::FB_ECHO_TX_ID))
    }
    /// FEEDBACK: return T1, the echoed datagram's send time (sender clock).
    pub fn echo_tx_ns(&self) -> u64 {
        read_u64(self.get(field::FB_ECHO_TX_NS))
    }
    /// FEEDBACK: return T2, when the echoed datagram arrived (receiver clock).
    pub fn echo_rx_ns(&self) -> u64 {
        read_u64(self.get(field::FB_ECHO_RX_NS))
    }
    /// FEEDBACK: return the bytes the receiver has received from this sender so far.
    pub fn received_bytes(&self) -> u64 {
        read_u64(self.get(field::FB_RECEIVED_BYTES))
    }
    /// FEEDBACK: return the number of block acks.
    pub fn n_acks(&self) -> u8 {
        self.buffer.as_ref()[field::FB_N_ACKS]
    }
    /// FEEDBACK: return ack `i` (`i < n_acks`).
    pub fn ack(&self, i: usize) -> BlockAck {
        let at = FEEDBACK_HEADER_LEN + i * ACK_LEN;
        let b = self.get(at..at + ACK_LEN);
        BlockAck {
            block: read_u32(&b[0..4]),
            have: b[4],
            need: b[5],
            complete: b[6] & ACK_COMPLETE != 0,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put(&mut self, range: Range<usize>, bytes: &[u8]) {
        self.buffer.as_mut()[range].copy_from_slice(bytes);
    }
    /// Set version and kind, and clear the reserved bytes.
    pub fn set_header(&mut self, kind: Kind) {
        let buf = self.buffer.as_mut();
        buf[field::VERSION] = VERSION;
        buf[field::KIND] = kind.to_u8();
        buf[2] = 0;
        buf[3] = 0;
    }
    /// Set the transmit counter.
    pub fn set_tx_id(&mut self, value: u32) {
        self.put(field::TX_ID, &value.to_be_bytes());
    }
    /// Set the send timestamp.
    pub fn set_tx_ns(&mut self, value: u64) {
        self.put(field::TX_NS, &value.to_be_bytes());
    }
}

/// One block acknowledgement in a FEEDBACK datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockAck {
    /// Block number.
    pub block: u32,
    /// Distinct shards (messages and recovery shards) the receiver holds, saturating at 255.
    pub have: u8,
    /// Messages in the block when known (a recovery shard arrived), else 0.
    pub need: u8,
    /// Every message of the block is held (received or recovered).
    pub complete: bool,
}

/// The checked, high-level form of a datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr<'a> {
    /// Per-sender transmit counter.
    pub tx_id: u32,
    /// Sender's clock at transmission.
    pub tx_ns: u64,
    /// What the datagram carries.
    pub body: Body<'a>,
}

/// The kind-specific part of a [`Repr`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body<'a> {
    /// An application message.
    Data {
        /// Message sequence number.
        seq: u32,
        /// Block number.
        block: u32,
        /// Index of the message in its block.
        index: u8,
        /// Deadline in the receiver's clock.
        deadline_ns: u64,
        /// Application send time (m1), sender's clock.
        app_send_ns: u64,
        /// The message.
        payload: &'a [u8],
    },
    /// A recovery shard.
    Parity {
        /// Block number.
        block: u32,
        /// Sequence number of the block's first message.
        first_seq: u32,
        /// Messages in the block.
        k: u8,
        /// Recovery shards the block was encoded with.
        r: u8,
        /// This shard's index (`< r`).
        index: u8,
        /// The shard.
        shard: &'a [u8],
    },
    /// A keep-alive.
    Heartbeat,
    /// Receiver feedback.
    Feedback {
        /// tx_id of the echoed datagram.
        echo_tx_id: u32,
        /// T1: the echoed datagram's send time, sender clock.
        echo_tx_ns: u64,
        /// T2: its arrival time, receiver clock.
        echo_rx_ns: u64,
        /// Bytes received from the sender so far.
        received_bytes: u64,
        /// Block acknowledgements (at most [`MAX_ACKS`]).
        acks: Vec<BlockAck>,
    },
}

impl<'a> Repr<'a> {
    /// Parse a datagram. Never panics; refuses what [`Packet::check_len`] refuses and
    /// fields out of range (a message index ≥ 64, a parity index ≥ r, k or r zero).
    pub fn parse(bytes: &'a [u8]) -> Result<Repr<'a>, WireError> {
        let p = Packet::new_checked(bytes)?;
        let body = match p.kind().ok_or(WireError::Malformed)? {
            Kind::Data => {
                if usize::from(p.data_index()) >= crate::MAX_BLOCK {
                    return Err(WireError::Malformed);
                }
                let len = usize::from(p.payload_len());
                Body::Data {
                    seq: p.seq(),
                    block: p.data_block(),
                    index: p.data_index(),
                    deadline_ns: p.deadline_ns(),
                    app_send_ns: p.app_send_ns(),
                    payload: &bytes[DATA_HEADER_LEN..DATA_HEADER_LEN + len],
                }
            }
            Kind::Parity => {
                let (k, r, index) = (p.k(), p.r(), p.parity_index());
                if k == 0
                    || r == 0
                    || index >= r
                    || usize::from(k) > crate::MAX_BLOCK
                    || usize::from(r) > crate::MAX_BLOCK
                    || p.shard_len() == 0
                    || p.shard_len() % 2 != 0
                {
                    return Err(WireError::Malformed);
                }
                let len = usize::from(p.shard_len());
                Body::Parity {
                    block: p.parity_block(),
                    first_seq: p.first_seq(),
                    k,
                    r,
                    index,
                    shard: &bytes[PARITY_HEADER_LEN..PARITY_HEADER_LEN + len],
                }
            }
            Kind::Heartbeat => Body::Heartbeat,
            Kind::Feedback => Body::Feedback {
                echo_tx_id: p.echo_tx_id(),
                echo_tx_ns: p.echo_tx_ns(),
                echo_rx_ns: p.echo_rx_ns(),
                received_bytes: p.received_bytes(),
                acks: (0..usize::from(p.n_acks())).map(|i| p.ack(i)).collect(),
            },
        };
        Ok(Repr {
            tx_id: p.tx_id(),
            tx_ns: p.tx_ns(),
            body,
        })
    }

    /// Length of the datagram [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match &self.body {
            Body::Data { payload, .. } => DATA_HEADER_LEN + payload.len(),
            Body::Parity { shard, .. } => PARITY_HEADER_LEN + shard.len(),
            Body::Heartbeat => COMMON_LEN,
            Body::Feedback { acks, .. } => FEEDBACK_HEADER_LEN + acks.len().min(MAX_ACKS) * ACK_LEN,
        }
    }

    /// Write the datagram into `buf[..buffer_len()]` and return that length.
    ///
    /// # Panics
    /// When `buf` is shorter than [`buffer_len`](Self::buffer_len), or a payload or shard
    /// is longer than 65535 bytes (the sender never builds one).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        buf.fill(0);
        let mut p = Packet::new_unchecked(&mut *buf);
        let kind = match self.body {
            Body::Data { .. } => Kind::Data,
            Body::Parity { .. } => Kind::Parity,
            Body::Heartbeat => Kind::Heartbeat,
            Body::Feedback { .. } => Kind::Feedback,
        };
        p.set_header(kind);
        p.set_tx_id(self.tx_id);
        p.set_tx_ns(self.tx_ns);
        match &self.body {
            Body::Data {
                seq,
                block,
                index,
                deadline_ns,
                app_send_ns,
                payload,
            } => {
                let plen = u16::try_from(payload.len()).expect("payload fits a u16");
                buf[field::DATA_SEQ].copy_from_slice(&seq.to_be_bytes());
                buf[field::DATA_BLOCK].copy_from_slice(&block.to_be_bytes());
                buf[field::DATA_INDEX] = *index;
                buf[field::DATA_PAYLOAD_LEN].copy_from_slice(&plen.to_be_bytes());
                buf[field::DATA_DEADLINE_NS].copy_from_slice(&deadline_ns.to_be_bytes());
                buf[field::DATA_APP_SEND_NS].copy_from_slice(&app_send_ns.to_be_bytes());
                buf[DATA_HEADER_LEN..].copy_from_slice(payload);
            }
            Body::Parity {
                block,
                first_seq,
                k,
                r,
                index,
                shard,
            } => {
                let slen = u16::try_from(shard.len()).expect("shard fits a u16");
                buf[field::PAR_BLOCK].copy_from_slice(&block.to_be_bytes());
                buf[field::PAR_FIRST_SEQ].copy_from_slice(&first_seq.to_be_bytes());
                buf[field::PAR_K] = *k;
                buf[field::PAR_R] = *r;
                buf[field::PAR_INDEX] = *index;
                buf[field::PAR_SHARD_LEN].copy_from_slice(&slen.to_be_bytes());
                buf[PARITY_HEADER_LEN..].copy_from_slice(shard);
            }
            Body::Heartbeat => {}
            Body::Feedback {
                echo_tx_id,
                echo_tx_ns,
                echo_rx_ns,
                received_bytes,
                acks,
            } => {
                let acks = &acks[..acks.len().min(MAX_ACKS)];
                buf[field::FB_ECHO_TX_ID].copy_from_slice(&echo_tx_id.to_be_bytes());
                buf[field::FB_ECHO_TX_NS].copy_from_slice(&echo_tx_ns.to_be_bytes());
                buf[field::FB_ECHO_RX_NS].copy_from_slice(&echo_rx_ns.to_be_bytes());
                buf[field::FB_RECEIVED_BYTES].copy_from_slice(&received_bytes.to_be_bytes());
                buf[field::FB_N_ACKS] = acks.len() as u8;
                for (i, ack) in acks.iter().enumerate() {
                    let at = FEEDBACK_HEADER_LEN + i * ACK_LEN;
                    buf[at..at + 4].copy_from_slice(&ack.block.to_be_bytes());
                    buf[at + 4] = ack.have;
                    buf[at + 5] = ack.need;
                    buf[at + 6] = if ack.complete { ACK_COMPLETE } else { 0 };
                }
            }
        }
        len
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    static DATA_BYTES: [u8; 47] = [
        0x01, 0x01, 0x00, 0x00, // version, kind DATA, reserved
        0x00, 0x00, 0x00, 0x07, // tx_id 7
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, // tx_ns 1000
        0x00, 0x00, 0x00, 0x2a, // seq 42
        0x00, 0x00, 0x00, 0x02, // block 2
        0x0a, 0x00, 0x00, 0x03, // index 10, reserved, payload_len 3
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x27, 0x10, // deadline 10000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x84, // app_send 900
        0xaa, 0xbb, 0xcc,
    ];

    fn data_repr() -> Repr<'static> {
        Repr {
            tx_id: 7,
            tx_ns: 1000,
            body: Body::Data {
                seq: 42,
                block: 2,
                index: 10,
                deadline_ns: 10_000,
                app_send_ns: 900,
                payload: &[0xaa, 0xbb, 0xcc],
            },
        }
    }

    static PARITY_BYTES: [u8; 36] = [
        0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, // version, PARITY, tx_id 8
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0xd0, // tx_ns 2000
        0x00, 0x00, 0x00, 0x05, // block 5
        0x00, 0x00, 0x00, 0x50, // first_seq 80
        0x10, 0x04, 0x01, 0x00, // k 16, r 4, index 1, reserved
        0x00, 0x04, 0x00, 0x00, // shard_len 4, reserved
        0x01, 0x02, 0x03, 0x04,
    ];

    static FEEDBACK_BYTES: [u8; 56] = [
        0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // version, FEEDBACK, tx_id 1
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0xb8, // tx_ns (T3) 3000
        0x00, 0x00, 0x00, 0x07, // echo tx_id 7
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, // T1 1000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0xd0, // T2 2000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, // received 65536
        0x01, 0x00, 0x00, 0x00, // one ack
        0x00, 0x00, 0x00, 0x05, 0x11, 0x10, 0x01, 0x00, // block 5 have 17 need 16 complete
    ];

    fn feedback_repr() -> Repr<'static> {
        Repr {
            tx_id: 1,
            tx_ns: 3000,
            body: Body::Feedback {
                echo_tx_id: 7,
                echo_tx_ns: 1000,
                echo_rx_ns: 2000,
                received_bytes: 65536,
                acks: vec![BlockAck {
                    block: 5,
                    have: 17,
                    need: 16,
                    complete: true,
                }],
            },
        }
    }

    #[test]
    fn data_parse_and_emit_match_golden_bytes() {
        assert_eq!(Repr::parse(&DATA_BYTES), Ok(data_repr()));
        let mut buf = [0xffu8; 64];
        let n = data_repr().emit(&mut buf);
        assert_eq!(&buf[..n], &DATA_BYTES[..]);
    }

    #[test]
    fn parity_parse_and_emit_match_golden_bytes() {
        let repr = Repr {
            tx_id: 8,
            tx_ns: 2000,
            body: Body::Parity {
                block: 5,
                first_seq: 80,
                k: 16,
                r: 4,
                index: 1,
                shard: &[1, 2, 3, 4],
            },
        };
        assert_eq!(Repr::parse(&PARITY_BYTES), Ok(repr.clone()));
        let mut buf = [0xffu8; 64];
        let n = repr.emit(&mut buf);
        assert_eq!(&buf[..n], &PARITY_BYTES[..]);
    }

    #[test]
    fn feedback_parse_and_emit_match_golden_bytes() {
        assert_eq!(Repr::parse(&FEEDBACK_BYTES), Ok(feedback_repr()));
        let mut buf = [0xffu8; 64];
        let n = feedback_repr().emit(&mut buf);
        assert_eq!(&buf[..n], &FEEDBACK_BYTES[..]);
    }

    #[test]
    fn heartbeat_round_trips() {
        let repr = Repr {
            tx_id: u32::MAX,
            tx_ns: u64::MAX,
            body: Body::Heartbeat,
        };
        let mut buf = [0u8; COMMON_LEN];
        assert_eq!(repr.emit(&mut buf), COMMON_LEN);
        assert_eq!(Repr::parse(&buf), Ok(repr));
    }

    #[test]
    fn malformed_input_is_refused() {
        assert_eq!(Repr::parse(&DATA_BYTES[..46]), Err(WireError::Truncated));
        assert_eq!(Repr::parse(&DATA_BYTES[..10]), Err(WireError::Truncated));
        let mut bad = DATA_BYTES;
        bad[0] = 2;
        assert_eq!(Repr::parse(&bad), Err(WireError::Malformed));
        bad = DATA_BYTES;
        bad[1] = 9;
        assert_eq!(Repr::parse(&bad), Err(WireError::Malformed));
        bad = DATA_BYTES;
        bad[24] = 64; // index beyond the largest block
        assert_eq!(Repr::parse(&bad), Err(WireError::Malformed));
        let mut par = PARITY_BYTES;
        par[26] = 4; // parity index == r
        assert_eq!(Repr::parse(&par), Err(WireError::Malformed));
        par = PARITY_BYTES;
        par[29] = 3; // odd shard length
        assert_eq!(Repr::parse(&par), Err(WireError::Malformed));
        let mut fb = FEEDBACK_BYTES;
        fb[44] = 2; // claims two acks, carries one
        assert_eq!(Repr::parse(&fb), Err(WireError::Truncated));
        fb[44] = 33;
        assert_eq!(Repr::parse(&fb), Err(WireError::Malformed));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = Repr::parse(&bytes);
        }

        #[test]
        fn parse_never_panics_on_plausible_headers(
            kind in 0u8..6, mut bytes in proptest::collection::vec(any::<u8>(), 16..400)
        ) {
            bytes[0] = VERSION;
            bytes[1] = kind;
            if let Ok(repr) = Repr::parse(&bytes) {
                // What parses re-emits to a datagram that parses to the same thing.
                let mut out = vec![0u8; repr.buffer_len()];
                repr.emit(&mut out);
                prop_assert_eq!(Repr::parse(&out), Ok(repr));
            }
        }

        #[test]
        fn data_round_trips(seq: u32, block: u32, index in 0u8..64, deadline_ns: u64,
                            app_send_ns: u64, tx_id: u32, tx_ns: u64,
                            payload in proptest::collection::vec(any::<u8>(), 0..1500)) {
            let repr = Repr { tx_id, tx_ns, body: Body::Data {
                seq, block, index, deadline_ns, app_send_ns, payload: &payload } };
            let mut out = vec![0u8; repr.buffer_len()];
            repr.emit(&mut out);
            prop_assert_eq!(Repr::parse(&out), Ok(repr));
        }
    }
}
