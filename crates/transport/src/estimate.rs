//! What the sender learns from feedback: the RTT and clock offset from four timestamps
//! (NTP style, RFC 5905 §8), the delivery rate (draft-cheng-iccrg-delivery-rate-estimation),
//! and a BBR-style pacing rate from it.

/// Smoothing weight of the RTT (RFC 6298's 1/8).
const SRTT_SHIFT: u32 = 3;
/// How long a minimum RTT stays valid (BBR's min_rtt filter window).
const MIN_RTT_WINDOW_NS: u64 = 10_000_000_000;
/// Delivery-rate samples kept for the windowed maximum.
const RATE_SAMPLES: usize = 16;
/// BBR's ProbeBW gain cycle, one phase per min RTT, in eighths.
const GAIN_CYCLE_EIGHTHS: [u64; 8] = [10, 6, 8, 8, 8, 8, 8, 8];
/// BBR's startup gain 2/ln 2 ≈ 2.89, in eighths, until the first rate sample.
const STARTUP_GAIN_EIGHTHS: u64 = 23;
/// Sent-datagram snapshots kept for rate samples (a ring; older ones are overwritten).
pub const SNAPSHOTS: usize = 1024;

/// One RTT measurement from the four timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttSample {
    /// (T4 − T1) − (T3 − T2): the round trip without the receiver's processing time.
    pub rtt_ns: u64,
    /// ((T2 − T1) + (T3 − T4)) / 2: receiver clock minus sender clock, exact when both
    /// directions take equally long.
    pub offset_ns: i64,
}

/// Compute RTT and offset from T1 (sent, sender clock), T2 (received, receiver clock),
/// T3 (feedback sent, receiver clock), T4 (feedback received, sender clock).
pub fn ntp_sample(t1: u64, t2: u64, t3: u64, t4: u64) -> RttSample {
    let (t1, t2, t3, t4) = (t1 as i128, t2 as i128, t3 as i128, t4 as i128);
    let rtt = ((t4 - t1) - (t3 - t2)).max(0);
    let offset = ((t2 - t1) + (t3 - t4)) / 2;
    RttSample {
        rtt_ns: u64::try_from(rtt).unwrap_or(u64::MAX),
        offset_ns: i64::try_from(offset).unwrap_or(0),
    }
}

/// Smoothed, minimum and latest RTT and the latest clock offset.
#[derive(Debug, Clone, Default)]
pub struct RttEstimator {
    srtt_ns: Option<u64>,
    latest_ns: Option<u64>,
    min_ns: Option<(u64, u64)>,
    offset_ns: i64,
    samples: u64,
}

impl RttEstimator {
    /// Take a sample observed at `now_ns`.
    pub fn update(&mut self, sample: RttSample, now_ns: u64) {
        let rtt = sample.rtt_ns;
        self.srtt_ns = Some(match self.srtt_ns {
            None => rtt,
            Some(s) => {
                let s = s as i128 + ((rtt as i128 - s as i128) >> SRTT_SHIFT);
                s.max(0) as u64
            }
        });
        self.latest_ns = Some(rtt);
        let expired = match self.min_ns {
            None => true,
            Some((min, at)) => rtt <= min || now_ns.saturating_sub(at) > MIN_RTT_WINDOW_NS,
        };
        if expired {
            self.min_ns = Some((rtt, now_ns));
        }
        self.offset_ns = sample.offset_ns;
        self.samples += 1;
    }

    /// Smoothed RTT, `None` before the first sample.
    pub fn srtt_ns(&self) -> Option<u64> {
        self.srtt_ns
    }
    /// Minimum RTT over the last 10 s.
    pub fn min_rtt_ns(&self) -> Option<u64> {
        self.min_ns.map(|(m, _)| m)
    }
    /// The latest sample.
    pub fn latest_ns(&self) -> Option<u64> {
        self.latest_ns
    }
    /// Receiver clock minus sender clock, from the latest sample (0 before one).
    pub fn offset_ns(&self) -> i64 {
        self.offset_ns
    }
    /// Samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Snapshot {
    tx_id: u32,
    valid: bool,
    sent_ns: u64,
    delivered_bytes: u64,
    delivered_ns: u64,
    first_sent_ns: u64,
}

/// Delivery-rate estimation after the IETF draft: each datagram remembers how much had
/// been delivered when it left; its feedback turns the difference into a rate sample over
/// the longer of its send and ack intervals.
#[derive(Debug, Clone)]
pub struct DeliveryRate {
    ring: Vec<Snapshot>,
    delivered_bytes: u64,
    delivered_ns: u64,
    first_sent_ns: u64,
    samples: std::collections::VecDeque<(u64, u64)>,
}

impl DeliveryRate {
    /// An estimator with no samples; `now_ns` starts the first interval.
    pub fn new(now_ns: u64) -> Self {
        DeliveryRate {
            ring: vec![Snapshot::default(); SNAPSHOTS],
            delivered_bytes: 0,
            delivered_ns: now_ns,
            first_sent_ns: now_ns,
            samples: std::collections::VecDeque::with_capacity(RATE_SAMPLES),
        }
    }

    /// Remember datagram `tx_id` leaving at `now_ns`.
    pub fn on_sent(&mut self, tx_id: u32, now_ns: u64) {
        self.ring[tx_id as usize % SNAPSHOTS] = Snapshot {
            tx_id,
            valid: true,
            sent_ns: now_ns,
            delivered_bytes: self.delivered_bytes,
            delivered_ns: self.delivered_ns,
            first_sent_ns: self.first_sent_ns,
        };
    }

    /// Feedback for datagram `echo_tx_id` says `received_bytes` arrived so far. Returns the
    /// rate sample in bit/s when one could be taken.
    pub fn on_feedback(
        &mut self,
        echo_tx_id: u32,
        received_bytes: u64,
        now_ns: u64,
        min_rtt_ns: u64,
    ) -> Option<u64> {
        if received_bytes > self.delivered_bytes {
            self.delivered_bytes = received_bytes;
            self.delivered_ns = now_ns;
        }
        let slot = &mut self.ring[echo_tx_id as usize % SNAPSHOTS];
        if !slot.valid || slot.tx_id != echo_tx_id {
            return None;
        }
        let p = *slot;
        slot.valid = false;
        self.first_sent_ns = p.sent_ns;
        let send_elapsed = p.sent_ns.saturating_sub(p.first_sent_ns);
        let ack_elapsed = self.delivered_ns.saturating_sub(p.delivered_ns);
        let interval = send_elapsed.max(ack_elapsed);
        // The draft drops samples over intervals shorter than min_rtt: too noisy.
        if interval == 0 || interval < min_rtt_ns {
            return None;
        }
        let bytes = self.delivered_bytes.saturating_sub(p.delivered_bytes);
        let bps = (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(interval)) as u64;
        if self.samples.len() == RATE_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back((bps, now_ns));
        Some(bps)
    }

    /// Bottleneck bandwidth: the largest of the recent samples (BBR's max filter).
    pub fn max_bps(&self) -> Option<u64> {
        self.samples.iter().map(|&(bps, _)| bps).max()
    }
}

/// A token-bucket pacer at a BBR-style rate: the gain cycle over the bottleneck estimate,
/// never below a floor.
#[derive(Debug, Clone)]
pub struct Pacer {
    tokens_bytes: i64,
    burst_bytes: i64,
    updated_ns: u64,
    rate_bps: u64,
    phase: usize,
    phase_start_ns: u64,
}

impl Pacer {
    /// A full bucket of `burst_bytes` at `rate_bps`.
    pub fn new(rate_bps: u64, burst_bytes: u64, now_ns: u64) -> Self {
        let burst = burst_bytes.min(i64::MAX as u64) as i64;
        Pacer {
            tokens_bytes: burst,
            burst_bytes: burst,
            updated_ns: now_ns,
            rate_bps: rate_bps.max(1),
            phase: 0,
            phase_start_ns: now_ns,
        }
    }

    fn refill(&mut self, now_ns: u64) {
        let dt = now_ns.saturating_sub(self.updated_ns);
        let add = u128::from(dt) * u128::from(self.rate_bps) / 8 / 1_000_000_000;
        self.tokens_bytes =
            (self.tokens_bytes as i128 + add as i128).min(self.burst_bytes as i128) as i64;
        self.updated_ns = now_ns;
    }

    /// Set the rate from the bottleneck estimate (`None` before the first sample), the
    /// minimum RTT (which times the gain cycle) and the floor.
    pub fn set_rate(
        &mut self,
        btl_bw_bps: Option<u64>,
        min_rtt_ns: u64,
        floor_bps: u64,
        now_ns: u64,
    ) {
        self.refill(now_ns);
        let rate = match btl_bw_bps {
            None => floor_bps.saturating_mul(STARTUP_GAIN_EIGHTHS) / 8,
            Some(bw) => {
                if now_ns.saturating_sub(self.phase_start_ns) >= min_rtt_ns.max(1) {
                    self.phase = (self.phase + 1) % GAIN_CYCLE_EIGHTHS.len();
                    self.phase_start_ns = now_ns;
                }
                bw.saturating_mul(GAIN_CYCLE_EIGHTHS[self.phase]) / 8
            }
        };
        self.rate_bps = rate.max(floor_bps).max(1);
    }

    /// The current pacing rate.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// When a datagram may go: `now_ns` if the bucket is not in debt, else when it will be.
    pub fn next_send_ns(&mut self, now_ns: u64) -> u64 {
        self.refill(now_ns);
        if self.tokens_bytes >= 0 {
            return now_ns;
        }
        let debt = (-self.tokens_bytes) as u128;
        let wait = (debt * 8 * 1_000_000_000).div_ceil(u128::from(self.rate_bps));
        now_ns.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }

    /// Charge a datagram of `bytes` sent at `now_ns`.
    pub fn on_sent(&mut self, bytes: usize, now_ns: u64) {
        self.refill(now_ns);
        self.tokens_bytes -= bytes as i64;
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn ntp_sample_removes_processing_time_and_finds_the_offset() {
        // One-way 3 ms each way, receiver clock 1 s ahead, 0.5 ms held at the receiver.
        let t1 = 10_000_000;
        let t2 = t1 + 3_000_000 + 1_000_000_000;
        let t3 = t2 + 500_000;
        let t4 = t3 - 1_000_000_000 + 3_000_000;
        let s = ntp_sample(t1, t2, t3, t4);
        assert_eq!(s.rtt_ns, 6_000_000);
        assert_eq!(s.offset_ns, 1_000_000_000);
    }

    #[test]
    fn srtt_converges_and_min_is_kept() {
        let mut e = RttEstimator::default();
        e.update(
            RttSample {
                rtt_ns: 800,
                offset_ns: 0,
            },
            0,
        );
        assert_eq!(e.srtt_ns(), Some(800));
        e.update(
            RttSample {
                rtt_ns: 1600,
                offset_ns: 0,
            },
            1,
        );
        assert_eq!(e.srtt_ns(), Some(900));
        assert_eq!(e.min_rtt_ns(), Some(800));
        assert_eq!(e.latest_ns(), Some(1600));
    }

    #[test]
    fn delivery_rate_of_a_steady_flow_is_its_rate() {
        // 1000-byte datagrams every 1 ms, each acked 2 ms later: 8 Mbit/s.
        let mut d = DeliveryRate::new(0);
        let mut last = None;
        for i in 0..100u32 {
            let t = u64::from(i) * 1_000_000;
            d.on_sent(i, t);
            if i >= 2 {
                let acked = i - 2;
                last = d
                    .on_feedback(acked, u64::from(acked + 1) * 1000, t, 2_000_000)
                    .or(last);
            }
        }
        let bps = last.expect("a sample");
        assert!((7_900_000..=8_100_000).contains(&bps), "{bps}");
    }

    #[test]
    fn pacer_spaces_datagrams_at_its_rate() {
        // 8 Mbit/s = 1 byte/µs; no burst beyond one datagram.
        let mut p = Pacer::new(8_000_000, 1000, 0);
        p.on_sent(1000, 0);
        assert_eq!(p.next_send_ns(0), 0);
        p.on_sent(1000, 0);
        assert_eq!(p.next_send_ns(0), 1_000_000);
        assert_eq!(p.next_send_ns(1_000_000), 1_000_000);
    }
}
