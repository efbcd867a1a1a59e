//! The sending half: target delay, blocks, proactive and reactive redundancy, pacing, and
//! the peer's liveness. Sans-IO: the caller hands in the time and the feedback datagrams
//! and sends what [`Sender::poll_transmit`] writes.
//!
//! ```text
//!  send() ─► queue (cap) ─► pacer ─► DATA ─► open block ──full/timeout──► closed block
//!              │ late at dequeue:                                 │ proactive PARITY
//!              └─ discarded, counted                              │ no complete ack within
//!                                                                 │ SRTT + margin: reactive
//!                                                                 └ PARITY (k − have, ≥ 1)
//! ```

use std::collections::VecDeque;

use serde::Serialize;

use crate::coding::{encode_block, encode_record, shard_len};
use crate::config::{Config, ConfigError};
use crate::estimate::{ntp_sample, DeliveryRate, Pacer, RttEstimator};
use crate::wire::{BlockAck, Body, Repr};

/// What the sender has done, in counts. `submitted` = `queue_dropped` + what entered the
/// queue; of the latter each message is sent once as DATA, or `late_discarded`, or still
/// queued.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SenderStats {
    /// Messages the application handed to `send()` (those within the size limit).
    pub submitted: u64,
    /// Refused because the send queue was full.
    pub queue_dropped: u64,
    /// Discarded before sending: at dequeue they could no longer make the deadline.
    pub late_discarded: u64,
    /// DATA datagrams sent.
    pub data_packets: u64,
    /// Payload bytes in them.
    pub data_payload_bytes: u64,
    /// Proactive recovery shards sent.
    pub proactive_parity_packets: u64,
    /// Reactive recovery shards sent.
    pub reactive_parity_packets: u64,
    /// Bytes of recovery shards sent (both kinds).
    pub parity_bytes: u64,
    /// Heartbeats sent.
    pub heartbeats: u64,
    /// Feedback datagrams taken.
    pub feedback_received: u64,
    /// Datagrams refused (malformed, or not feedback).
    pub malformed: u64,
    /// Blocks closed (coded).
    pub blocks_closed: u64,
    /// Blocks acknowledged complete.
    pub blocks_acked: u64,
    /// Blocks given up unacknowledged: their deadlines passed, their shards ran out, or
    /// the block store was full.
    pub blocks_given_up: u64,
    /// Blocks the coder refused (a bug if ever non-zero).
    pub coding_errors: u64,
}

/// Whether the sender still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SenderState {
    /// Sending.
    Running,
    /// No feedback for `peer_timeout_ns`: the sender stopped. The outage began at the last
    /// feedback and was detected at `detected_ns`.
    PeerLost {
        /// When the last feedback arrived (or the sender started).
        last_feedback_ns: u64,
        /// When the timeout fired.
        detected_ns: u64,
    },
}

/// Why `send()` refused a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Larger than the MTU allows.
    #[error("payload of {len} bytes exceeds the {max} bytes the MTU allows")]
    TooLarge {
        /// Payload length given.
        len: usize,
        /// Largest allowed.
        max: usize,
    },
    /// The send queue is full; the message was dropped and counted.
    #[error("send queue full (send_queue_cap); message dropped")]
    QueueFull,
    /// The peer is gone; the sender has stopped.
    #[error("peer lost: no feedback within peer_timeout_ns")]
    PeerLost,
}

#[derive(Debug)]
struct Pending {
    seq: u32,
    app_send_ns: u64,
    deadline_ns: u64,
    payload: Vec<u8>,
}

#[derive(Debug, Default)]
struct OpenBlock {
    first_seq: u32,
    opened_ns: u64,
    records: Vec<Vec<u8>>,
    last_deadline_ns: u64,
}

#[derive(Debug)]
struct TxBlock {
    id: u32,
    first_seq: u32,
    k: u8,
    recovery: Vec<Vec<u8>>,
    next_parity: u8,
    proactive_pending: u8,
    reactive_pending: u8,
    last_parity_ns: u64,
    last_deadline_ns: u64,
    acked_have: u8,
    /// An ack for this block has arrived (so `acked_have` means something).
    ack_seen: bool,
}

impl TxBlock {
    fn pending(&self) -> bool {
        self.proactive_pending + self.reactive_pending > 0
    }
}

/// The sending half of a connection.
#[derive(Debug)]
pub struct Sender {
    config: Config,
    queue: VecDeque<Pending>,
    open: OpenBlock,
    closed: VecDeque<TxBlock>,
    next_seq: u32,
    next_block: u32,
    next_tx_id: u32,
    rtt: RttEstimator,
    rate: DeliveryRate,
    pacer: Pacer,
    last_tx_ns: u64,
    last_feedback_ns: u64,
    state: SenderState,
    stats: SenderStats,
}

impl Sender {
    /// A sender started at `now_ns`.
    pub fn new(config: Config, now_ns: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut pacer = Pacer::new(config.min_pacing_bps, config.pacing_burst_bytes, now_ns);
        // Startup: the floor times BBR's startup gain until the first rate sample.
        pacer.set_rate(None, config.initial_rtt_ns, config.min_pacing_bps, now_ns);
        Ok(Sender {
            queue: VecDeque::with_capacity(config.send_queue_cap.min(4096)),
            open: OpenBlock::default(),
            closed: VecDeque::new(),
            next_seq: 0,
            next_block: 0,
            next_tx_id: 0,
            rtt: RttEstimator::default(),
            rate: DeliveryRate::new(now_ns),
            pacer,
            last_tx_ns: now_ns,
            last_feedback_ns: now_ns,
            state: SenderState::Running,
            stats: SenderStats::default(),
            config,
        })
    }

    /// Hand a message to the transport at `now_ns` (its m1). Returns its sequence number.
    pub fn send(&mut self, payload: &[u8], now_ns: u64) -> Result<u32, SendError> {
        if let SenderState::PeerLost { .. } = self.state {
            return Err(SendError::PeerLost);
        }
        let max = self.config.max_payload_bytes();
        if payload.len() > max {
            return Err(SendError::TooLarge {
                len: payload.len(),
                max,
            });
        }
        self.stats.submitted += 1;
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        if self.queue.len() >= self.config.send_queue_cap {
            self.stats.queue_dropped += 1;
            return Err(SendError::QueueFull);
        }
        self.queue.push_back(Pending {
            seq,
            app_send_ns: now_ns,
            deadline_ns: now_ns.saturating_add(self.config.target_delay_ns),
            payload: payload.to_vec(),
        });
        Ok(seq)
    }

    /// Take a datagram from the peer (feedback; anything else is counted as malformed).
    pub fn handle(&mut self, datagram: &[u8], now_ns: u64) {
        match Repr::parse(datagram) {
            Ok(Repr {
                tx_ns,
                body:
                    Body::Feedback {
                        echo_tx_id,
                        echo_tx_ns,
                        echo_rx_ns,
                        received_bytes,
                        acks,
                    },
                ..
            }) => self.on_feedback(
                echo_tx_id,
                [echo_tx_ns, echo_rx_ns, tx_ns, now_ns],
                received_bytes,
                &acks,
            ),
            _ => self.stats.malformed += 1,
        }
    }

    fn on_feedback(
        &mut self,
        echo_tx_id: u32,
        t: [u64; 4],
        received_bytes: u64,
        acks: &[BlockAck],
    ) {
        let now_ns = t[3];
        self.stats.feedback_received += 1;
        self.last_feedback_ns = now_ns;
        if t[0] <= now_ns {
            self.rtt.update(ntp_sample(t[0], t[1], t[2], t[3]), now_ns);
        }
        let min_rtt = self.rtt.min_rtt_ns().unwrap_or(self.config.initial_rtt_ns);
        self.rate
            .on_feedback(echo_tx_id, received_bytes, now_ns, min_rtt);
        self.pacer.set_rate(
            self.rate.max_bps(),
            min_rtt,
            self.config.min_pacing_bps,
            now_ns,
        );
        for ack in acks {
            let Some(pos) = self.closed.iter().position(|b| b.id == ack.block) else {
                continue;
            };
            let block = &mut self.closed[pos];
            block.acked_have = block.acked_have.max(ack.have);
            block.ack_seen = true;
            if ack.complete || block.acked_have >= block.k {
                self.closed.remove(pos);
                self.stats.blocks_acked += 1;
            }
        }
    }

    /// Write the next datagram to send at `now_ns` into `buf` (at least `mtu_bytes` − 28
    /// long) and return its length; `None` when nothing may go now (ask
    /// [`next_timeout`](Self::next_timeout) when to call again).
    pub fn poll_transmit(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<usize> {
        self.run_timers(now_ns);
        if self.state != SenderState::Running || self.pacer.next_send_ns(now_ns) > now_ns {
            return None;
        }
        let tx_id = self.next_tx_id;
        let len = if let Some(len) = self.emit_parity(tx_id, now_ns, buf) {
            len
        } else if let Some(len) = self.emit_data(tx_id, now_ns, buf) {
            len
        } else if now_ns.saturating_sub(self.last_tx_ns) >= self.config.heartbeat_interval_ns {
            self.stats.heartbeats += 1;
            let repr = Repr {
                tx_id,
                tx_ns: now_ns,
                body: Body::Heartbeat,
            };
            repr.emit(buf)
        } else {
            return None;
        };
        self.next_tx_id = self.next_tx_id.wrapping_add(1);
        self.pacer.on_sent(len, now_ns);
        self.rate.on_sent(tx_id, now_ns);
        self.last_tx_ns = now_ns;
        Some(len)
    }

    fn emit_parity(&mut self, tx_id: u32, now_ns: u64, buf: &mut [u8]) -> Option<usize> {
        let block = self.closed.iter_mut().find(|b| b.pending())?;
        let index = block.next_parity;
        block.next_parity += 1;
        if block.proactive_pending > 0 {
            block.proactive_pending -= 1;
            self.stats.proactive_parity_packets += 1;
        } else {
            block.reactive_pending -= 1;
            self.stats.reactive_parity_packets += 1;
        }
        block.last_parity_ns = now_ns;
        let shard = &block.recovery[usize::from(index)];
        self.stats.parity_bytes += shard.len() as u64;
        let repr = Repr {
            tx_id,
            tx_ns: now_ns,
            body: Body::Parity {
                block: block.id,
                first_seq: block.first_seq,
                k: block.k,
                r: block.recovery.len() as u8,
                index,
                shard,
            },
        };
        Some(repr.emit(buf))
    }

    fn emit_data(&mut self, tx_id: u32, now_ns: u64, buf: &mut [u8]) -> Option<usize> {
        // A message that cannot arrive before its deadline any more is not sent at all.
        let one_way_ns = self.rtt.min_rtt_ns().unwrap_or(0) / 2;
        let msg = loop {
            let msg = self.queue.pop_front()?;
            if now_ns.saturating_add(one_way_ns) <= msg.deadline_ns {
                break msg;
            }
            self.stats.late_discarded += 1;
        };
        let deadline_rx_ns = if self.config.shared_clock {
            msg.deadline_ns
        } else {
            msg.deadline_ns.saturating_add_signed(self.rtt.offset_ns())
        };
        if self.open.records.is_empty() {
            self.open.first_seq = msg.seq;
            self.open.opened_ns = now_ns;
        }
        let index = self.open.records.len() as u8;
        let repr = Repr {
            tx_id,
            tx_ns: now_ns,
            body: Body::Data {
                seq: msg.seq,
                block: self.next_block,
                index,
                deadline_ns: deadline_rx_ns,
                app_send_ns: msg.app_send_ns,
                payload: &msg.payload,
            },
        };
        let len = repr.emit(buf);
        self.stats.data_packets += 1;
        self.stats.data_payload_bytes += msg.payload.len() as u64;
        self.open
            .records
            .push(encode_record(deadline_rx_ns, msg.app_send_ns, &msg.payload));
        self.open.last_deadline_ns = msg.deadline_ns;
        if self.open.records.len() >= usize::from(self.config.block_size) {
            self.close_block(now_ns);
        }
        Some(len)
    }

    fn close_block(&mut self, now_ns: u64) {
        let open = std::mem::take(&mut self.open);
        if open.records.is_empty() {
            return;
        }
        let id = self.next_block;
        self.next_block = self.next_block.wrapping_add(1);
        self.stats.blocks_closed += 1;
        let r = usize::from(self.config.max_parity);
        let len = shard_len(open.records.iter().map(Vec::len).max().unwrap_or(0));
        let recovery = match encode_block(&open.records, r, len) {
            Ok(recovery) => recovery,
            Err(_) => {
                self.stats.coding_errors += 1;
                return;
            }
        };
        // A block closed early by its timeout gets the same share of redundancy, rounded up.
        let k = open.records.len();
        let (p, full) = (
            usize::from(self.config.proactive_parity),
            usize::from(self.config.block_size),
        );
        let proactive = (k * p).div_ceil(full) as u8;
        if self.closed.len() >= self.config.max_open_blocks {
            self.closed.pop_front();
            self.stats.blocks_given_up += 1;
        }
        self.closed.push_back(TxBlock {
            id,
            first_seq: open.first_seq,
            k: open.records.len() as u8,
            recovery,
            next_parity: 0,
            proactive_pending: proactive,
            reactive_pending: 0,
            last_parity_ns: now_ns,
            last_deadline_ns: open.last_deadline_ns,
            acked_have: 0,
            ack_seen: false,
        });
    }

    /// How long a block waits for its complete ack: the RTT, the receiver's feedback
    /// interval (a lost ack is only repeated by the next periodic feedback) and the margin.
    fn ack_wait_ns(&self) -> u64 {
        self.rtt
            .srtt_ns()
            .unwrap_or(self.config.initial_rtt_ns)
            .saturating_add(self.config.feedback_interval_ns)
            .saturating_add(self.config.reactive_margin_ns)
    }

    fn run_timers(&mut self, now_ns: u64) {
        if self.state != SenderState::Running {
            return;
        }
        if now_ns.saturating_sub(self.last_feedback_ns) > self.config.peer_timeout_ns {
            self.state = SenderState::PeerLost {
                last_feedback_ns: self.last_feedback_ns,
                detected_ns: now_ns,
            };
            return;
        }
        if !self.open.records.is_empty()
            && now_ns.saturating_sub(self.open.opened_ns) >= self.config.block_timeout_ns
        {
            self.close_block(now_ns);
        }
        let wait = self.ack_wait_ns();
        let one_way_ns = self.rtt.min_rtt_ns().unwrap_or(0) / 2;
        let before = self.closed.len();
        self.closed.retain_mut(|b| {
            if b.pending() || now_ns < b.last_parity_ns.saturating_add(wait) {
                return true;
            }
            // Redundancy now would arrive after the block's last deadline: give up.
            if now_ns.saturating_add(one_way_ns) > b.last_deadline_ns {
                return false;
            }
            let left = b.recovery.len() as u8 - b.next_parity;
            // Without any ack (the feedback was lost) one shard probes; with one, send
            // what the receiver still lacks.
            let missing = if b.ack_seen {
                b.k.saturating_sub(b.acked_have).max(1)
            } else {
                1
            };
            b.reactive_pending = missing.min(left);
            b.pending()
        });
        self.stats.blocks_given_up += (before - self.closed.len()) as u64;
    }

    /// The earliest time at which [`poll_transmit`](Self::poll_transmit) may have
    /// something to do; `None` once the sender has stopped.
    pub fn next_timeout(&mut self, now_ns: u64) -> Option<u64> {
        if self.state != SenderState::Running {
            return None;
        }
        // Only times at which poll_transmit will act: what waits for the pacer is due when
        // the pacer allows, timers that already fired are not reported again.
        let pacer_next = self.pacer.next_send_ns(now_ns);
        let heartbeat = self
            .last_tx_ns
            .saturating_add(self.config.heartbeat_interval_ns);
        let mut next = self
            .last_feedback_ns
            .saturating_add(self.config.peer_timeout_ns)
            .saturating_add(1)
            .min(heartbeat.max(pacer_next));
        if !self.queue.is_empty() || self.closed.iter().any(TxBlock::pending) {
            next = next.min(pacer_next);
        }
        if !self.open.records.is_empty() {
            next = next.min(
                self.open
                    .opened_ns
                    .saturating_add(self.config.block_timeout_ns),
            );
        }
        let wait = self.ack_wait_ns();
        for b in self.closed.iter().filter(|b| !b.pending()) {
            next = next.min(b.last_parity_ns.saturating_add(wait));
        }
        Some(next.max(now_ns))
    }

    /// Whether the sender runs or has stopped for a lost peer.
    pub fn state(&self) -> SenderState {
        self.state
    }
    /// Counters so far.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }
    /// The RTT estimator (smoothed, minimum, latest, clock offset).
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }
    /// The bottleneck-bandwidth estimate, bit/s.
    pub fn delivery_rate_bps(&self) -> Option<u64> {
        self.rate.max_bps()
    }
    /// The current pacing rate, bit/s.
    pub fn pacing_rate_bps(&self) -> u64 {
        self.pacer.rate_bps()
    }
    /// Messages waiting to be sent.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }
}
