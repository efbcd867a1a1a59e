//! The transport over a deterministic in-memory channel: fixed one-way delays, seeded
//! Bernoulli loss, an optional filter that drops chosen datagrams, and event-driven time.

use std::collections::VecDeque;

use nflab_transport::study::detect_outages;
use nflab_transport::wire::{Body, Repr};
use nflab_transport::{Config, Delivery, Endpoint, SendError, SenderState};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const MS: u64 = 1_000_000;
const START_NS: u64 = 1_000 * MS;

type Filter = Box<dyn FnMut(&Repr<'_>, u64) -> bool>;

/// One direction of the channel.
struct Link {
    delay_ns: u64,
    loss: f64,
    rng: ChaCha20Rng,
    in_flight: VecDeque<(u64, Vec<u8>)>,
    /// Return true to drop the datagram (seen at send time).
    filter: Option<Filter>,
    /// From this time on, everything is dropped (a peer that vanished).
    cut_at_ns: Option<u64>,
}

impl Link {
    fn new(delay_ns: u64, loss: f64, seed: u64) -> Self {
        Link {
            delay_ns,
            loss,
            rng: ChaCha20Rng::seed_from_u64(seed),
            in_flight: VecDeque::new(),
            filter: None,
            cut_at_ns: None,
        }
    }

    fn send(&mut self, datagram: &[u8], now_ns: u64) {
        if self.cut_at_ns.is_some_and(|t| now_ns >= t) {
            return;
        }
        if let (Some(filter), Ok(repr)) = (self.filter.as_mut(), Repr::parse(datagram)) {
            if filter(&repr, now_ns) {
                return;
            }
        }
        if self.loss > 0.0 && self.rng.gen_bool(self.loss) {
            return;
        }
        self.in_flight
            .push_back((now_ns + self.delay_ns, datagram.to_vec()));
    }

    fn next_arrival(&self) -> Option<u64> {
        self.in_flight.front().map(|(t, _)| *t)
    }
}

/// What a run gives back.
struct Outcome {
    a: Endpoint,
    b: Endpoint,
    /// Messages b's application got, with the time it got them.
    delivered: Vec<(Delivery, u64)>,
}

struct Sim {
    a: Endpoint,
    b: Endpoint,
    ab: Link,
    ba: Link,
    gap_ns: u64,
    payload_bytes: usize,
    window_ns: u64,
    send_until_ns: u64,
    end_ns: u64,
    b_clock_ahead_ns: u64,
}

impl Sim {
    fn new(config: Config, delay_ns: u64, loss: f64, seed: u64) -> Self {
        Sim {
            a: Endpoint::new(config.clone(), START_NS).expect("config"),
            b: Endpoint::new(config, START_NS).expect("config"),
            ab: Link::new(delay_ns, loss, seed),
            ba: Link::new(delay_ns, loss, seed ^ 0x5555),
            gap_ns: MS,
            payload_bytes: 200,
            window_ns: MS,
            send_until_ns: START_NS + 10_000 * MS,
            end_ns: START_NS + 11_000 * MS,
            b_clock_ahead_ns: 0,
        }
    }

    /// Run: a's application sends every gap until `send_until_ns`; b's application calls
    /// `recv` whenever the window releases something.
    fn run(mut self) -> Outcome {
        let mut buf = vec![0u8; 1500];
        let mut delivered = Vec::new();
        let mut next_send = START_NS;
        let mut t = START_NS;
        let mut payload = vec![0u8; self.payload_bytes];
        while t <= self.end_ns {
            // b reads its own clock, `b_clock_ahead_ns` ahead of a's.
            let tb = t + self.b_clock_ahead_ns;
            for (link, to, now) in [
                (&mut self.ab, &mut self.b, tb),
                (&mut self.ba, &mut self.a, t),
            ] {
                while link.next_arrival().is_some_and(|at| at <= t) {
                    let (_, d) = link.in_flight.pop_front().expect("arrival");
                    to.handle(&d, now);
                }
            }
            if t >= next_send && next_send < self.send_until_ns {
                let n = payload.len().min(8);
                payload[..n].copy_from_slice(&t.to_be_bytes()[..n]);
                match self.a.sender.send(&payload, t) {
                    Ok(_) | Err(SendError::QueueFull) | Err(SendError::PeerLost) => {}
                    Err(e) => panic!("send: {e}"),
                }
                next_send += self.gap_ns;
            }
            while let Some(len) = self.a.poll_transmit(t, &mut buf) {
                self.ab.send(&buf[..len], t);
            }
            while let Some(len) = self.b.poll_transmit(tb, &mut buf) {
                self.ba.send(&buf[..len], t);
            }
            while let Some(d) = self.b.receiver.recv(tb, self.window_ns) {
                delivered.push((d, tb));
            }
            let mut next = self.end_ns + 1;
            if next_send < self.send_until_ns {
                next = next.min(next_send);
            }
            for x in [
                self.ab.next_arrival(),
                self.ba.next_arrival(),
                self.a.next_timeout(t),
                self.b.next_timeout(tb).map(|x| x - self.b_clock_ahead_ns),
                self.b
                    .receiver
                    .next_release(self.window_ns)
                    .map(|x| x.saturating_sub(self.b_clock_ahead_ns)),
            ]
            .into_iter()
            .flatten()
            {
                next = next.min(x);
            }
            t = next.max(t + 1);
        }
        Outcome {
            a: self.a,
            b: self.b,
            delivered,
        }
    }
}

/// Every delivery happened inside its window and before its deadline.
fn assert_deliveries_in_window(delivered: &[(Delivery, u64)], window_ns: u64) {
    for (d, at) in delivered {
        assert!(
            *at <= d.deadline_ns,
            "seq {} delivered {} ns late",
            d.seq,
            at - d.deadline_ns
        );
        assert!(
            d.deadline_ns - at <= window_ns,
            "seq {} delivered {} ns before its window",
            d.seq,
            d.deadline_ns - at - window_ns
        );
    }
}

#[test]
fn five_percent_loss_leaves_at_most_a_thousandth_with_at_most_a_quarter_redundancy() {
    let config = Config {
        target_delay_ns: 60 * MS,
        block_size: 16,
        proactive_parity: 2,
        max_parity: 16,
        block_timeout_ns: 20 * MS,
        ..Config::default()
    };
    let mut sim = Sim::new(config, 2 * MS, 0.05, 7);
    sim.send_until_ns = START_NS + 60_000 * MS;
    sim.end_ns = sim.send_until_ns + 1_000 * MS;
    let out = sim.run();
    let s = out.a.sender.stats().clone();
    let r = out.b.receiver.stats().clone();
    assert_eq!(s.submitted, 60_000);
    assert_eq!(r.delivered as usize, out.delivered.len());
    assert_deliveries_in_window(&out.delivered, MS);
    let residual = 1.0 - r.delivered as f64 / s.submitted as f64;
    let redundancy = s.parity_bytes as f64 / s.data_payload_bytes as f64;
    eprintln!(
        "residual loss {residual:.5}, redundancy {redundancy:.4}, sender {s:?}, receiver {r:?}"
    );
    assert!(residual <= 0.001, "residual loss {residual}");
    assert!(redundancy <= 0.25, "redundancy {redundancy}");
    // The code did the work: the channel lost about 5 % of the DATA.
    let lost_data = s.data_packets - r.data_packets;
    assert!(
        lost_data as f64 > 0.04 * s.data_packets as f64,
        "lost {lost_data}"
    );
    assert!(
        r.recovered as f64 >= 0.999 * lost_data as f64 - 60.0,
        "recovered {}",
        r.recovered
    );
    assert!(s.reactive_parity_packets > 0);
    // The receiver's block store never had to give up a block, and no shard came too late.
    assert_eq!((r.blocks_evicted, r.stale), (0, 0));
    // No message is counted twice, and none is left held after the drain.
    assert!(r.delivered + s.late_discarded + r.late_discarded + r.overflow_dropped <= s.submitted);
    assert_eq!(out.b.receiver.held(), 0);
    // The payloads are the ones sent (each carries its m1 in its first 8 bytes).
    for (d, _) in &out.delivered {
        assert_eq!(d.payload.len(), 200);
        assert_eq!(
            u64::from_be_bytes(d.payload[..8].try_into().unwrap()),
            d.app_send_ns
        );
    }
}

#[test]
fn target_below_the_link_delay_discards_and_counts_every_message() {
    let config = Config {
        target_delay_ns: MS,
        block_timeout_ns: MS / 2,
        ..Config::default()
    };
    let mut sim = Sim::new(config, 5 * MS, 0.0, 1);
    sim.send_until_ns = START_NS + 2_000 * MS;
    sim.end_ns = sim.send_until_ns + 500 * MS;
    let out = sim.run();
    let s = out.a.sender.stats();
    let r = out.b.receiver.stats();
    assert_eq!(s.submitted, 2000);
    assert_eq!(r.delivered, 0);
    assert!(out.delivered.is_empty());
    assert_eq!(s.late_discarded + r.late_discarded, s.submitted);
    // Once the RTT is known the sender stops wasting the link on them.
    assert!(s.late_discarded > 1900, "{s:?}");
    assert_eq!(out.a.sender.state(), SenderState::Running);
}

#[test]
fn reactive_redundancy_recovers_a_block_whose_proactive_parity_was_lost() {
    let config = Config {
        target_delay_ns: 100 * MS,
        block_size: 8,
        proactive_parity: 2,
        max_parity: 8,
        block_timeout_ns: 50 * MS,
        ..Config::default()
    };
    let mut sim = Sim::new(config, 3 * MS, 0.0, 1);
    sim.send_until_ns = START_NS + 8 * MS;
    sim.end_ns = START_NS + 300 * MS;
    // Lose message 3 and both proactive recovery shards of block 0.
    sim.ab.filter = Some(Box::new(|repr, _| match repr.body {
        Body::Data { seq, .. } => seq == 3,
        Body::Parity { block, index, .. } => block == 0 && index < 2,
        _ => false,
    }));
    let out = sim.run();
    let s = out.a.sender.stats();
    assert_eq!(s.proactive_parity_packets, 2);
    assert!(s.reactive_parity_packets >= 1, "{s:?}");
    let seqs: Vec<u32> = out.delivered.iter().map(|(d, _)| d.seq).collect();
    assert_eq!(seqs, (0..8).collect::<Vec<u32>>());
    let recovered: Vec<u32> = out
        .delivered
        .iter()
        .filter(|(d, _)| d.recovered)
        .map(|(d, _)| d.seq)
        .collect();
    assert_eq!(recovered, vec![3]);
    assert_eq!(s.blocks_acked, 1);
}

#[test]
fn rtt_estimate_equals_the_channel_rtt() {
    for one_way_ms in [1, 3, 7] {
        let config = Config {
            target_delay_ns: 50 * MS,
            ..Config::default()
        };
        let mut sim = Sim::new(config, one_way_ms * MS, 0.0, 3);
        sim.send_until_ns = START_NS + 500 * MS;
        sim.end_ns = START_NS + 600 * MS;
        let out = sim.run();
        let rtt = out.a.sender.rtt();
        assert!(rtt.samples() > 10);
        assert_eq!(rtt.srtt_ns(), Some(2 * one_way_ms * MS));
        assert_eq!(rtt.min_rtt_ns(), Some(2 * one_way_ms * MS));
        assert_eq!(rtt.offset_ns(), 0);
        // The delivery rate is what the receiver takes in: per ms one DATA datagram (44 B
        // header + 200 B) and, per 16 of them, 2 PARITY datagrams (32 B header + a shard of
        // the 218-byte record): 275.25 B/ms = 2.202 Mbit/s on average. The estimate is BBR's
        // windowed maximum over samples at least one min RTT long, so it sits at or a little
        // above the average (parity comes in bursts).
        let average_bps = (44.0 + 200.0 + 2.0 * (32.0 + 218.0) / 16.0) * 8.0 * 1000.0;
        let bps = out.a.sender.delivery_rate_bps().expect("a rate sample") as f64;
        assert!(
            bps >= 0.95 * average_bps && bps <= 1.25 * average_bps,
            "{bps} vs {average_bps}"
        );
    }
}

#[test]
fn a_vanished_peer_stops_the_sender_and_shows_as_an_outage() {
    let config = Config {
        target_delay_ns: 20 * MS,
        peer_timeout_ns: 500 * MS,
        ..Config::default()
    };
    let mut sim = Sim::new(config, 2 * MS, 0.0, 1);
    let cut = START_NS + 1_000 * MS;
    sim.send_until_ns = START_NS + 3_000 * MS;
    sim.end_ns = START_NS + 3_000 * MS;
    sim.ab.cut_at_ns = Some(cut);
    sim.ba.cut_at_ns = Some(cut);
    let out = sim.run();
    let SenderState::PeerLost {
        last_feedback_ns,
        detected_ns,
    } = out.a.sender.state()
    else {
        panic!("sender still running: {:?}", out.a.sender.state());
    };
    assert!(last_feedback_ns <= cut + 2 * MS && last_feedback_ns >= cut - 10 * MS);
    assert!(
        detected_ns > last_feedback_ns + 500 * MS && detected_ns <= last_feedback_ns + 501 * MS
    );
    let mut a = out.a;
    let mut buf = [0u8; 1500];
    assert_eq!(a.sender.poll_transmit(sim_end(), &mut buf), None);
    assert_eq!(a.sender.send(b"x", sim_end()), Err(SendError::PeerLost));
    assert_eq!(a.sender.next_timeout(sim_end()), None);
    let on_time: Vec<u64> = out.delivered.iter().map(|(d, _)| d.app_send_ns).collect();
    let outages = detect_outages(&on_time, START_NS, START_NS + 3_000 * MS, 100 * MS);
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert!(outages[0].start_ns < cut && outages[0].start_ns >= cut - 30 * MS);
    assert_eq!(
        outages[0].start_ns + outages[0].length_ns,
        START_NS + 3_000 * MS
    );
    drop(out.b);
}

#[test]
fn deadlines_follow_the_ntp_offset_when_the_clocks_differ() {
    // b's clock runs 1 s ahead; the path is symmetric, so the NTP offset is exact.
    for shared_clock in [false, true] {
        let config = Config {
            target_delay_ns: 30 * MS,
            shared_clock,
            ..Config::default()
        };
        let mut sim = Sim::new(config, 4 * MS, 0.0, 5);
        sim.b_clock_ahead_ns = 1_000 * MS;
        sim.send_until_ns = START_NS + 1_000 * MS;
        sim.end_ns = START_NS + 1_200 * MS;
        let out = sim.run();
        let (s, r) = (out.a.sender.stats(), out.b.receiver.stats());
        assert_eq!(out.a.sender.rtt().offset_ns(), 1_000 * MS as i64);
        assert_eq!(out.a.sender.rtt().srtt_ns(), Some(8 * MS));
        if shared_clock {
            // Deadlines taken at face value are 1 s in b's past: everything is late.
            assert_eq!(r.delivered, 0);
            assert_eq!(r.late_discarded + s.late_discarded, s.submitted);
        } else {
            // Only the messages sent before the first feedback (one RTT) carry a deadline
            // without the offset, and those are late; all others arrive in their window.
            assert_deliveries_in_window(&out.delivered, MS);
            assert!(r.late_discarded <= 10, "{r:?}");
            assert_eq!(r.delivered + r.late_discarded, s.submitted);
        }
    }
}

fn sim_end() -> u64 {
    START_NS + 4_000 * MS
}

mod hostile {
    use super::*;
    use nflab_transport::wire::BlockAck;
    use proptest::prelude::*;

    /// Valid datagrams with fields drawn freely (k, r, index, lengths, blocks), so the
    /// processing behind the codec sees what a confused or hostile peer could send.
    fn datagram() -> impl Strategy<Value = Vec<u8>> {
        let data = (
            any::<u32>(),
            0u32..4,
            0u8..64,
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(seq, block, index, deadline_ns, payload)| {
                emit(Body::Data {
                    seq,
                    block,
                    index,
                    deadline_ns,
                    app_send_ns: 0,
                    payload: &payload,
                })
            });
        let parity = (
            0u32..4,
            any::<u32>(),
            1u8..64,
            1u8..64,
            any::<u8>(),
            1usize..40,
        )
            .prop_map(|(block, first_seq, k, r, index, half)| {
                let shard = vec![0x33u8; half * 2];
                emit(Body::Parity {
                    block,
                    first_seq,
                    k,
                    r,
                    index: index % r,
                    shard: &shard,
                })
            });
        let feedback = (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec((0u32..4, any::<u8>(), any::<u8>(), any::<bool>()), 0..32),
        )
            .prop_map(|(echo_tx_id, echo_tx_ns, echo_rx_ns, acks)| {
                let acks = acks
                    .into_iter()
                    .map(|(block, have, need, complete)| BlockAck {
                        block,
                        have,
                        need,
                        complete,
                    })
                    .collect();
                emit(Body::Feedback {
                    echo_tx_id,
                    echo_tx_ns,
                    echo_rx_ns,
                    received_bytes: echo_rx_ns,
                    acks,
                })
            });
        prop_oneof![
            data,
            parity,
            feedback,
            proptest::collection::vec(any::<u8>(), 0..80)
        ]
    }

    fn emit(body: Body<'_>) -> Vec<u8> {
        let repr = Repr {
            tx_id: 1,
            tx_ns: START_NS,
            body,
        };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut out);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn an_endpoint_survives_any_sequence_of_datagrams(
            datagrams in proptest::collection::vec(datagram(), 1..200)
        ) {
            let mut ep = Endpoint::new(Config::default(), START_NS).expect("config");
            let mut buf = vec![0u8; 1500];
            let mut t = START_NS;
            for (i, d) in datagrams.iter().enumerate() {
                if i % 3 == 0 {
                    let _ = ep.sender.send(&[7u8; 100], t);
                }
                ep.handle(d, t);
                while ep.poll_transmit(t, &mut buf).is_some() {}
                while ep.receiver.recv(t, MS).is_some() {}
                let _ = ep.next_timeout(t);
                t += 100_000;
            }
            let r = ep.receiver.stats();
            prop_assert!(r.delivered + r.late_discarded + r.overflow_dropped <= r.data_packets + r.recovered);
        }
    }
}

#[test]
fn a_burst_leaves_at_the_startup_pacing_rate() {
    // Before any feedback the pacer runs at the floor times BBR's startup gain (23/8):
    // 1 Mbit/s → 2.875 Mbit/s. 50 messages handed over at once, 1000 B each (1044 B on the
    // wire): after the 3000-byte burst allowance they leave 1044 · 8 / 2.875e6 s apart.
    let config = Config {
        target_delay_ns: 1_000 * MS,
        proactive_parity: 0,
        max_parity: 4,
        block_timeout_ns: 1_000 * MS,
        min_pacing_bps: 1_000_000,
        pacing_burst_bytes: 3000,
        // No reactive probe shard during the 145 ms this takes.
        initial_rtt_ns: 10_000 * MS,
        ..Config::default()
    };
    let mut sender = nflab_transport::Sender::new(config, START_NS).expect("config");
    for _ in 0..50 {
        sender.send(&[9u8; 1000], START_NS).expect("queued");
    }
    let mut buf = vec![0u8; 1500];
    let mut departures = Vec::new();
    let mut t = START_NS;
    let mut wakeups = 0;
    while departures.len() < 50 {
        while let Some(len) = sender.poll_transmit(t, &mut buf) {
            assert_eq!(len, 1044);
            departures.push(t);
        }
        // next_timeout names only times at which something happens: no busy stepping.
        let next = sender.next_timeout(t).expect("running");
        assert!(next > t, "next_timeout {next} not after {t}");
        t = next;
        wakeups += 1;
        assert!(
            wakeups < 200,
            "{wakeups} wake-ups for {} departures",
            departures.len()
        );
    }
    // 3000 B of tokens: three datagrams at once (the third takes the bucket into debt).
    assert_eq!(&departures[..3], &[START_NS; 3]);
    let gap_ns = (1044u128 * 8 * 1_000_000_000).div_ceil(2_875_000) as u64;
    for w in departures[3..].windows(2) {
        let d = w[1] - w[0];
        assert!(d.abs_diff(gap_ns) <= 1, "{d} vs {gap_ns}");
    }
    assert_eq!(sender.pacing_rate_bps(), 2_875_000);
}
