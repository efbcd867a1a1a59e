//! The receiving half: blocks and their decoding, the hold queue ordered by deadline, the
//! receive window, late discards, and feedback. Sans-IO like the sender.
//!
//! A message (received, or restored from a block) is late when its deadline has passed:
//! it is discarded and counted once. Otherwise it waits in the hold queue until
//! [`Receiver::recv`] is called with a window that reaches its deadline: PRRT's "deliver
//! the packets that expire between now and now + receive_window".

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::coding::{decode_block, decode_record, Record};
use crate::config::{Config, ConfigError};
use crate::wire::{BlockAck, Body, Repr, MAX_ACKS};
use crate::MAX_BLOCK;

/// A block's state is kept this long after the last deadline known in it (or after it was
/// created, when no deadline is known yet), so late shards are recognised as stale rather
/// than as a new block. Short, so the store stays far below `max_open_blocks` in steady
/// state and the capacity rule (which gives up the oldest block) does not fire.
const BLOCK_LINGER_NS: u64 = 100_000_000;

/// What the receiver has seen, in counts. Every message the receiver learns about (by
/// DATA or by decoding) is counted once as `delivered`, `late_discarded` or
/// `overflow_dropped`, or is still held.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReceiverStats {
    /// Datagrams taken (any kind, well-formed).
    pub datagrams: u64,
    /// Bytes of them.
    pub bytes: u64,
    /// Datagrams refused as malformed, or feedback (not for the receiver).
    pub malformed: u64,
    /// DATA datagrams.
    pub data_packets: u64,
    /// DATA datagrams of a message already known.
    pub duplicates: u64,
    /// PARITY datagrams.
    pub parity_packets: u64,
    /// HEARTBEAT datagrams.
    pub heartbeats: u64,
    /// Messages restored by decoding a block.
    pub recovered: u64,
    /// Blocks decoded.
    pub blocks_decoded: u64,
    /// Decoding attempts the coder refused.
    pub coding_errors: u64,
    /// Messages handed to the application within their window.
    pub delivered: u64,
    /// Messages discarded because their deadline had passed.
    pub late_discarded: u64,
    /// Messages dropped because the hold queue was full.
    pub overflow_dropped: u64,
    /// Shards of blocks already forgotten.
    pub stale: u64,
    /// Blocks given up because `max_open_blocks` were kept (their missing messages are lost).
    pub blocks_evicted: u64,
    /// Feedback datagrams sent.
    pub feedback_sent: u64,
}

/// A message handed to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Sequence number.
    pub seq: u32,
    /// m1: when the sending application sent it (sender clock).
    pub app_send_ns: u64,
    /// Its deadline (receiver clock).
    pub deadline_ns: u64,
    /// Restored from redundancy rather than received.
    pub recovered: bool,
    /// The message.
    pub payload: Vec<u8>,
}

#[derive(Debug, Default)]
struct RxBlock {
    /// Records by index (received or restored).
    records: BTreeMap<u8, Vec<u8>>,
    /// Recovery shards by index.
    recovery: BTreeMap<u8, Vec<u8>>,
    /// From a PARITY: messages, recovery shards, shard length, first seq.
    coding: Option<(u8, u8, u16, u32)>,
    complete: bool,
    last_deadline_ns: u64,
}

impl RxBlock {
    fn have(&self) -> usize {
        self.records.len() + self.recovery.len()
    }
}

/// The receiving half of a connection.
#[derive(Debug)]
pub struct Receiver {
    config: Config,
    blocks: BTreeMap<u32, RxBlock>,
    /// Blocks below this number are forgotten.
    forgotten_below: u32,
    /// Held messages by (deadline, seq).
    hold: BTreeMap<(u64, u32), Delivery>,
    /// Sequence numbers already accounted for, in blocks still kept.
    seen: BTreeSet<u32>,
    echo: Option<(u32, u64, u64)>,
    feedback_urgent: bool,
    unacked_datagrams: bool,
    last_feedback_ns: u64,
    next_tx_id: u32,
    stats: ReceiverStats,
}

impl Receiver {
    /// A receiver started at `now_ns`.
    pub fn new(config: Config, now_ns: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Receiver {
            config,
            blocks: BTreeMap::new(),
            forgotten_below: 0,
            hold: BTreeMap::new(),
            seen: BTreeSet::new(),
            echo: None,
            feedback_urgent: false,
            unacked_datagrams: false,
            last_feedback_ns: now_ns,
            next_tx_id: 0,
            stats: ReceiverStats::default(),
        })
    }

    /// Take a datagram from the peer's sender at `now_ns`.
    pub fn handle(&mut self, datagram: &[u8], now_ns: u64) {
        let Ok(repr) = Repr::parse(datagram) else {
            self.stats.malformed += 1;
            return;
        };
        if let Body::Feedback { .. } = repr.body {
            self.stats.malformed += 1;
            return;
        }
        self.stats.datagrams += 1;
        self.stats.bytes += datagram.len() as u64;
        self.echo = Some((repr.tx_id, repr.tx_ns, now_ns));
        self.unacked_datagrams = true;
        match repr.body {
            Body::Data {
                seq,
                block,
                index,
                deadline_ns,
                app_send_ns,
                payload,
            } => {
                self.stats.data_packets += 1;
                let record = crate::coding::encode_record(deadline_ns, app_send_ns, payload);
                let rec = Record {
                    deadline_ns,
                    app_send_ns,
                    payload: payload.to_vec(),
                };
                self.on_message(block, index, seq, record, rec, false, now_ns);
            }
            Body::Parity {
                block,
                first_seq,
                k,
                r,
                index,
                shard,
            } => {
                self.stats.parity_packets += 1;
                self.feedback_urgent = true;
                let Some(b) = self.block(block, now_ns) else {
                    return;
                };
                if b.coding.is_none() {
                    b.coding = Some((k, r, shard.len() as u16, first_seq));
                }
                b.recovery.entry(index).or_insert_with(|| shard.to_vec());
                self.try_decode(block, now_ns);
            }
            Body::Heartbeat => {
                self.stats.heartbeats += 1;
                self.feedback_urgent = true;
            }
            Body::Feedback { .. } => {}
        }
    }

    /// The state of `block`, created if new; `None` (counted stale) if forgotten.
    fn block(&mut self, block: u32, now_ns: u64) -> Option<&mut RxBlock> {
        self.forget(now_ns);
        if block < self.forgotten_below {
            self.stats.stale += 1;
            return None;
        }
        if !self.blocks.contains_key(&block) && self.blocks.len() >= self.config.max_open_blocks {
            // Full: give up the oldest block to make room.
            if let Some((&oldest, _)) = self.blocks.iter().next() {
                self.drop_block(oldest);
                self.stats.blocks_evicted += 1;
            }
        }
        Some(self.blocks.entry(block).or_insert_with(|| RxBlock {
            last_deadline_ns: now_ns,
            ..RxBlock::default()
        }))
    }

    fn drop_block(&mut self, id: u32) {
        if let Some(b) = self.blocks.remove(&id) {
            if let Some((k, _, _, first)) = b.coding {
                for i in 0..u32::from(k) {
                    self.seen.remove(&first.wrapping_add(i));
                }
            }
            self.forgotten_below = self.forgotten_below.max(id.wrapping_add(1));
        }
    }

    /// Forget blocks whose last known deadline is long past.
    fn forget(&mut self, now_ns: u64) {
        while let Some((&id, b)) = self.blocks.iter().next() {
            if now_ns <= b.last_deadline_ns.saturating_add(BLOCK_LINGER_NS) {
                break;
            }
            self.drop_block(id);
        }
        // Bound the seen-set with the blocks: seqs more than the kept blocks can hold
        // behind the newest are forgotten too.
        let span = (self.config.max_open_blocks * MAX_BLOCK + MAX_BLOCK) as u32;
        while self.seen.len() > span as usize {
            self.seen.pop_first();
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_message(
        &mut self,
        block: u32,
        index: u8,
        seq: u32,
        record_bytes: Vec<u8>,
        rec: Record,
        recovered: bool,
        now_ns: u64,
    ) {
        let Some(b) = self.block(block, now_ns) else {
            return;
        };
        b.last_deadline_ns = b.last_deadline_ns.max(rec.deadline_ns);
        if b.records.contains_key(&index) {
            self.stats.duplicates += 1;
            return;
        }
        b.records.insert(index, record_bytes);
        if !self.seen.insert(seq) {
            self.stats.duplicates += 1;
            return;
        }
        if recovered {
            self.stats.recovered += 1;
        }
        if rec.deadline_ns < now_ns {
            self.stats.late_discarded += 1;
        } else if self.hold.len() >= self.config.recv_buffer_cap {
            self.stats.overflow_dropped += 1;
        } else {
            self.hold.insert(
                (rec.deadline_ns, seq),
                Delivery {
                    seq,
                    app_send_ns: rec.app_send_ns,
                    deadline_ns: rec.deadline_ns,
                    recovered,
                    payload: rec.payload,
                },
            );
        }
        if !recovered {
            self.try_decode(block, now_ns);
        }
    }

    fn try_decode(&mut self, id: u32, now_ns: u64) {
        let Some(b) = self.blocks.get_mut(&id) else {
            return;
        };
        let Some((k, r, shard_len, first_seq)) = b.coding else {
            return;
        };
        if b.complete || b.records.len() >= usize::from(k) {
            b.complete = true;
            return;
        }
        if b.have() < usize::from(k) {
            return;
        }
        let result = decode_block(
            usize::from(k),
            usize::from(r),
            usize::from(shard_len),
            b.records
                .iter()
                .filter(|(&i, _)| i < k)
                .map(|(&i, rec)| (usize::from(i), rec.as_slice())),
            b.recovery
                .iter()
                .filter(|(&i, _)| i < r)
                .map(|(&i, s)| (usize::from(i), s.as_slice())),
        );
        b.complete = true;
        let restored = match result {
            Ok(restored) => restored,
            Err(_) => {
                self.stats.coding_errors += 1;
                return;
            }
        };
        self.stats.blocks_decoded += 1;
        for (index, shard) in restored {
            let Some(rec) = decode_record(&shard) else {
                self.stats.coding_errors += 1;
                continue;
            };
            let record_bytes = shard[..crate::coding::RECORD_OVERHEAD + rec.payload.len()].to_vec();
            let seq = first_seq.wrapping_add(index as u32);
            self.on_message(id, index as u8, seq, record_bytes, rec, true, now_ns);
        }
    }

    /// Hand out the next message whose deadline lies in `[now, now + window]`, in deadline
    /// order; messages whose deadline has passed are discarded and counted on the way.
    pub fn recv(&mut self, now_ns: u64, window_ns: u64) -> Option<Delivery> {
        while let Some(entry) = self.hold.first_entry() {
            let deadline = entry.key().0;
            if deadline < now_ns {
                entry.remove();
                self.stats.late_discarded += 1;
                continue;
            }
            if deadline > now_ns.saturating_add(window_ns) {
                return None;
            }
            self.stats.delivered += 1;
            return Some(entry.remove());
        }
        None
    }

    /// When `recv` with this window will next have a message; `None` when nothing is held.
    pub fn next_release(&self, window_ns: u64) -> Option<u64> {
        self.hold
            .first_key_value()
            .map(|(&(deadline, _), _)| deadline.saturating_sub(window_ns))
    }

    /// Write feedback into `buf` when one is due at `now_ns` and return its length.
    pub fn poll_transmit(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<usize> {
        let (echo_tx_id, echo_tx_ns, echo_rx_ns) = self.echo?;
        let periodic =
            now_ns.saturating_sub(self.last_feedback_ns) >= self.config.feedback_interval_ns;
        if !self.unacked_datagrams || !(self.feedback_urgent || periodic) {
            return None;
        }
        let acks: Vec<BlockAck> = self
            .blocks
            .iter()
            .rev()
            .take(MAX_ACKS)
            .map(|(&block, b)| BlockAck {
                block,
                have: b.have().min(255) as u8,
                need: b.coding.map_or(0, |c| c.0),
                complete: b.complete,
            })
            .collect();
        let repr = Repr {
            tx_id: self.next_tx_id,
            tx_ns: now_ns,
            body: Body::Feedback {
                echo_tx_id,
                echo_tx_ns,
                echo_rx_ns,
                received_bytes: self.stats.bytes,
                acks,
            },
        };
        self.next_tx_id = self.next_tx_id.wrapping_add(1);
        self.feedback_urgent = false;
        self.unacked_datagrams = false;
        self.last_feedback_ns = now_ns;
        self.stats.feedback_sent += 1;
        Some(repr.emit(buf))
    }

    /// When feedback may next be due (`None`: only when a datagram arrives).
    pub fn next_timeout(&self, now_ns: u64) -> Option<u64> {
        if !self.unacked_datagrams {
            return None;
        }
        if self.feedback_urgent {
            return Some(now_ns);
        }
        Some(
            self.last_feedback_ns
                .saturating_add(self.config.feedback_interval_ns)
                .max(now_ns),
        )
    }

    /// Counters so far.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }
    /// Messages held for the application.
    pub fn held(&self) -> usize {
        self.hold.len()
    }
}
