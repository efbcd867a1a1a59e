//! The pure parts of the seed's wireless study (§6.3): outages, the per-layer delays from
//! the six vantage points, and the per-run `prrt.json`.

use std::io;
use std::path::Path;

use serde::Serialize;

use crate::receiver::ReceiverStats;
use crate::sender::SenderStats;

/// An interval with no on-time delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Outage {
    /// Where the interval begins: the last on-time message before it (or the run's start).
    pub start_ns: u64,
    /// How long it lasts: to the next on-time message (or the run's end).
    pub length_ns: u64,
    /// The other direction has an outage overlapping this one.
    pub both_directions: bool,
}

impl Outage {
    fn end_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.length_ns)
    }
}

/// Find the outages of one direction: the gaps longer than `threshold_ns` between
/// consecutive on-time messages, `on_time_ns` being their times (send time m1 in the
/// study, any order), within the run `[start_ns, end_ns]`. The run's start and end bound
/// the first and last gap, so a direction that stops delivering (a lost peer) ends in an
/// outage. `threshold_ns` should exceed the sending gap, or every gap is one.
pub fn detect_outages(
    on_time_ns: &[u64],
    start_ns: u64,
    end_ns: u64,
    threshold_ns: u64,
) -> Vec<Outage> {
    let mut times: Vec<u64> = on_time_ns
        .iter()
        .copied()
        .filter(|t| (start_ns..=end_ns).contains(t))
        .collect();
    times.sort_unstable();
    let mut outages = Vec::new();
    let mut prev = start_ns;
    for t in times.into_iter().chain(std::iter::once(end_ns)) {
        if t - prev > threshold_ns {
            outages.push(Outage {
                start_ns: prev,
                length_ns: t - prev,
                both_directions: false,
            });
        }
        prev = t;
    }
    outages
}

/// Mark each outage that overlaps one of the other direction's.
pub fn mark_overlaps(pc: &mut [Outage], cp: &mut [Outage]) {
    let overlaps = |a: &Outage, b: &Outage| a.start_ns < b.end_ns() && b.start_ns < a.end_ns();
    for a in pc.iter_mut() {
        a.both_directions = cp.iter().any(|b| overlaps(a, b));
    }
    for b in cp.iter_mut() {
        b.both_directions = pc.iter().any(|a| overlaps(a, b));
    }
}

/// The delays between consecutive vantage points of one message, and its one-way delay.
/// Signed, so a clock inconsistency shows as a negative value instead of wrapping; `None`
/// where a vantage point is missing (m6 is missing when the message was discarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct LayerDelays {
    /// m2 − m1: application to the sender's capture point (L7 → L2, sender processing).
    pub l7_l2_ns: Option<i64>,
    /// m3 − m2: capture to transmit confirmation (L2 → L1, queueing and medium access).
    pub l2_l1_ns: Option<i64>,
    /// m4 − m3: transmit to receive (L1 → L1, the medium).
    pub l1_l1_ns: Option<i64>,
    /// m5 − m4: receive to the receiver's capture point (L1 → L2, receiver driver).
    pub l1_l2_ns: Option<i64>,
    /// m6 − m5: capture to the receiving application (L2 → L7, transport hold).
    pub l2_l7_ns: Option<i64>,
    /// m6 − m1: the one-way delay.
    pub one_way_ns: Option<i64>,
}

/// Derive the layer delays from the vantage points m1..m6 (ns, one clock).
pub fn layer_delays(m: [Option<u64>; 6]) -> LayerDelays {
    let diff = |later: Option<u64>, earlier: Option<u64>| -> Option<i64> {
        Some(
            (i128::from(later?) - i128::from(earlier?)).clamp(i64::MIN.into(), i64::MAX.into())
                as i64,
        )
    };
    LayerDelays {
        l7_l2_ns: diff(m[1], m[0]),
        l2_l1_ns: diff(m[2], m[1]),
        l1_l1_ns: diff(m[3], m[2]),
        l1_l2_ns: diff(m[4], m[3]),
        l2_l7_ns: diff(m[5], m[4]),
        one_way_ns: diff(m[5], m[0]),
    }
}

/// One direction's line in `prrt.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionSummary {
    /// Messages the sending application handed to the transport.
    pub sent: u64,
    /// Messages handed to the receiving application within their window.
    pub delivered: u64,
    /// Messages discarded for their deadline, at the sender or the receiver.
    pub late_discarded: u64,
    /// 1 − delivered / sent: late counts as lost (0 when nothing was sent).
    pub loss_ratio: f64,
    /// Recovery-shard bytes over payload bytes sent.
    pub redundancy_ratio: f64,
    /// Intervals with no on-time delivery.
    pub outages: Vec<Outage>,
    /// When the sender gave up on a silent peer (ns since the run's start; absent while it
    /// ran to the end). The silence itself is in `outages`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_lost_ns: Option<u64>,
    /// When this direction's sending end vanished (ns since the run's start; absent when
    /// it did not): it stopped sending and receiving and closed its socket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_vanished_ns: Option<u64>,
}

impl DirectionSummary {
    /// Summarise one direction from its sender's and its receiver's counters.
    pub fn new(sender: &SenderStats, receiver: &ReceiverStats, outages: Vec<Outage>) -> Self {
        let sent = sender.submitted;
        let delivered = receiver.delivered.min(sent);
        let ratio = |num: u64, den: u64| {
            if den == 0 {
                0.0
            } else {
                num as f64 / den as f64
            }
        };
        DirectionSummary {
            sent,
            delivered,
            late_discarded: sender.late_discarded + receiver.late_discarded,
            loss_ratio: ratio(sent - delivered, sent),
            redundancy_ratio: ratio(sender.parity_bytes, sender.data_payload_bytes),
            outages,
            peer_lost_ns: None,
            sender_vanished_ns: None,
        }
    }
}

/// A direction of the study's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TrafficDirection {
    /// Plant to controller (sensor values).
    Pc,
    /// Controller to plant (actuation).
    Cp,
}

impl TrafficDirection {
    /// `"pc"` or `"cp"`, as in `prrt.json` and the per-packet files.
    pub fn as_str(self) -> &'static str {
        match self {
            TrafficDirection::Pc => "pc",
            TrafficDirection::Cp => "cp",
        }
    }
}

/// `runs/NNN/prrt.json`: both directions of one run, plant→controller and back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrrtRun {
    /// Plant to controller.
    pub pc: DirectionSummary,
    /// Controller to plant.
    pub cp: DirectionSummary,
}

/// Write `prrt.json` (pretty, with a trailing newline).
pub fn write_prrt_json(path: &Path, run: &PrrtRun) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(run).map_err(io::Error::other)?;
    text.push('\n');
    // Whole or not at all: `--resume` and the report trust it.
    nflab_io::safe_fs::replace_file(path, text.as_bytes())
}

#[cfg(test)]
mod test {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn outages_on_a_hand_built_trace() {
        // PC: on time every 1 ms from 0 to 100 ms, except nothing in (20, 300) ms, then
        // nothing after 900 ms of a 1000 ms run.
        let pc: Vec<u64> = (0..=1000u64)
            .map(|i| i * MS)
            .filter(|&t| !(t > 20 * MS && t < 300 * MS) && t <= 900 * MS)
            .collect();
        // CP: one gap (250, 400) ms only.
        let cp: Vec<u64> = (0..=1000u64)
            .map(|i| i * MS)
            .filter(|&t| !(t > 250 * MS && t < 400 * MS))
            .collect();
        let mut pc_out = detect_outages(&pc, 0, 1000 * MS, 50 * MS);
        let mut cp_out = detect_outages(&cp, 0, 1000 * MS, 50 * MS);
        mark_overlaps(&mut pc_out, &mut cp_out);
        assert_eq!(
            pc_out,
            vec![
                Outage {
                    start_ns: 20 * MS,
                    length_ns: 280 * MS,
                    both_directions: true
                },
                Outage {
                    start_ns: 900 * MS,
                    length_ns: 100 * MS,
                    both_directions: false
                },
            ]
        );
        assert_eq!(
            cp_out,
            vec![Outage {
                start_ns: 250 * MS,
                length_ns: 150 * MS,
                both_directions: true
            }]
        );
        // A gap of exactly the threshold is not an outage; nothing delivered is one outage.
        assert!(detect_outages(&[0, 50 * MS, 100 * MS], 0, 100 * MS, 50 * MS).is_empty());
        assert_eq!(
            detect_outages(&[], 0, 100 * MS, 50 * MS),
            vec![Outage {
                start_ns: 0,
                length_ns: 100 * MS,
                both_directions: false
            }]
        );
    }

    #[test]
    fn layer_delays_are_consecutive_differences() {
        let d = layer_delays([
            Some(100),
            Some(150),
            Some(400),
            Some(410),
            Some(412),
            Some(900),
        ]);
        assert_eq!(d.l7_l2_ns, Some(50));
        assert_eq!(d.l2_l1_ns, Some(250));
        assert_eq!(d.l1_l1_ns, Some(10));
        assert_eq!(d.l1_l2_ns, Some(2));
        assert_eq!(d.l2_l7_ns, Some(488));
        assert_eq!(d.one_way_ns, Some(800));
        // The layers add up to the one-way delay.
        let sum: i64 = [d.l7_l2_ns, d.l2_l1_ns, d.l1_l1_ns, d.l1_l2_ns, d.l2_l7_ns]
            .iter()
            .map(|x| x.unwrap_or(0))
            .sum();
        assert_eq!(Some(sum), d.one_way_ns);
        // A discarded message has no m6; a clock step shows as a negative delay.
        let d = layer_delays([Some(100), Some(90), None, Some(10), Some(20), None]);
        assert_eq!(d.l7_l2_ns, Some(-10));
        assert_eq!((d.l2_l1_ns, d.l1_l1_ns), (None, None));
        assert_eq!(d.l1_l2_ns, Some(10));
        assert_eq!((d.l2_l7_ns, d.one_way_ns), (None, None));
    }

    #[test]
    fn prrt_json_has_the_contract_keys_and_counts_late_as_lost() {
        let sender = SenderStats {
            submitted: 1000,
            late_discarded: 10,
            data_payload_bytes: 990 * 100,
            parity_bytes: 990 * 100 / 8,
            ..SenderStats::default()
        };
        let receiver = ReceiverStats {
            delivered: 950,
            late_discarded: 30,
            ..ReceiverStats::default()
        };
        let dir = DirectionSummary::new(&sender, &receiver, vec![]);
        assert_eq!(dir.late_discarded, 40);
        assert!((dir.loss_ratio - 0.05).abs() < 1e-12);
        assert!((dir.redundancy_ratio - 0.125).abs() < 1e-12);
        let run = PrrtRun {
            pc: dir.clone(),
            cp: dir,
        };
        let dir = std::env::temp_dir().join(format!("nflab-prrt-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("prrt.json");
        write_prrt_json(&path, &run).expect("write");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        for side in ["pc", "cp"] {
            for key in [
                "sent",
                "delivered",
                "late_discarded",
                "loss_ratio",
                "redundancy_ratio",
                "outages",
            ] {
                assert!(v[side].get(key).is_some(), "{side}.{key} missing");
            }
        }
        assert_eq!(v["pc"]["sent"], 1000);
    }
}
