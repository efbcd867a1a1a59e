//! [`analyze`]: the metrics of `docs/metrics.md`.

use std::collections::{BTreeMap, HashSet};

use nflab_record::{FlowSent, Record};

use crate::{
    AnalysisConfig, AnomalySpec, AnomalyStats, JitterStats, LatencyStats, PacketCounts,
    PercentileMethod, RateStats, Summary,
};

/// A measured (post-warm-up) first copy of a received packet.
#[derive(Debug, Clone, Copy)]
struct Pkt {
    flow: u16,
    seq: u64,
    rx_ns: u64,
    lat_ns: i64,
}

/// Per-flow state of the arrival-order pass.
#[derive(Debug, Default)]
struct Flow {
    /// Sent count from the caller; `None` if the flow had no entry.
    sent: Option<u64>,
    warmup: u64,
    seen: HashSet<u64>,
    highest: Option<u64>,
    /// Highest seq of any record of the flow (warm-up included).
    max_seq_any: Option<u64>,
}

/// Compute the [`Summary`] of one run.
///
/// `records` are in arrival order (as the recorder wrote them); `sent` gives
/// the generator's counts per flow. Records of a flow without a `sent` entry
/// are analysed with `sent = highest seq + 1` and a note. Records with
/// `seq < warmup` of their flow are ignored. `interrupted` is left `false`.
///
/// Never panics, whatever the input; problems with the data are reported in
/// `notes`.
pub fn analyze(records: &[Record], sent: &[FlowSent], cfg: &AnalysisConfig) -> Summary {
    let mut notes = Vec::new();
    let mut flows: BTreeMap<u16, Flow> = BTreeMap::new();
    for fs in sent {
        let entry = flows.entry(fs.flow).or_default();
        if entry.sent.is_some() {
            notes.push(format!(
                "flow {} has more than one sent count; the first one is used",
                fs.flow
            ));
            continue;
        }
        entry.sent = Some(fs.sent);
        entry.warmup = fs.warmup;
        if fs.warmup > fs.sent {
            notes.push(format!(
                "flow {}: warm-up {} is larger than the sent count {}; no packet of it is measured",
                fs.flow, fs.warmup, fs.sent
            ));
        }
    }

    // ---- Pass 1, arrival order: duplicates, reordering, first copies ----
    let mut counts = PacketCounts::default();
    let mut pkts: Vec<Pkt> = Vec::with_capacity(records.len());
    let mut clamped = 0u64;
    for r in records {
        let f = flows.entry(r.flow).or_default();
        f.max_seq_any = Some(f.max_seq_any.map_or(r.seq, |m| m.max(r.seq)));
        if r.seq < f.warmup {
            continue;
        }
        if !f.seen.insert(r.seq) {
            counts.duplicated += 1;
            continue;
        }
        match f.highest {
            // Next expected = highest + 1; seq == highest is a duplicate, handled above.
            Some(h) if r.seq <= h => counts.reordered += 1,
            _ => f.highest = Some(r.seq),
        }
        let lat = i128::from(r.rx_ns) - i128::from(r.tx_ns);
        let lat_ns = i64::try_from(lat).unwrap_or_else(|_| {
            clamped += 1;
            if lat < 0 {
                i64::MIN
            } else {
                i64::MAX
            }
        });
        pkts.push(Pkt {
            flow: r.flow,
            seq: r.seq,
            rx_ns: r.rx_ns,
            lat_ns,
        });
    }
    if clamped > 0 {
        notes.push(format!(
            "{clamped} packets have a latency outside the i64 range and were clamped; the timestamps are garbage"
        ));
    }

    // ---- Counts per flow ----
    for (id, f) in &flows {
        let received = f.seen.len() as u64;
        let sent_total = match f.sent {
            Some(s) => s,
            None => {
                let s = f.max_seq_any.map_or(0, |m| m.saturating_add(1));
                notes.push(format!(
                    "flow {id} has records but no sent count; sent is taken as highest seq + 1 = {s}"
                ));
                s
            }
        };
        let measured = sent_total.saturating_sub(f.warmup);
        let beyond = f.seen.iter().filter(|&&s| s >= sent_total).count();
        if beyond > 0 {
            notes.push(format!(
                "flow {id}: {beyond} received packets have seq >= the sent count {sent_total}; \
                 the sent count does not match these records"
            ));
        }
        // Saturating: sent counts derived from garbage seqs can be near u64::MAX.
        counts.sent = counts.sent.saturating_add(measured);
        counts.received = counts.received.saturating_add(received);
        counts.lost = counts
            .lost
            .saturating_add(measured.saturating_sub(received));
    }
    let loss_ratio = if counts.sent == 0 {
        0.0
    } else {
        counts.lost as f64 / counts.sent as f64
    };

    // ---- Latency ----
    let mut lats: Vec<i64> = pkts.iter().map(|p| p.lat_ns).collect();
    lats.sort_unstable();
    let latency_ns = latency_stats(&lats);
    let negative = lats.iter().take_while(|&&l| l < 0).count();
    if negative > 0 {
        notes.push(format!(
            "{negative} packets have a negative latency (min {} ns): the tx and rx clocks disagree, \
             so latency figures are unreliable",
            lats[0]
        ));
    }

    // ---- RFC 3550 jitter, arrival order ----
    let rfc3550 = if pkts.len() < 2 {
        None
    } else {
        let mut j = 0.0f64;
        for w in pkts.windows(2) {
            // D = (R_j - R_i) - (S_j - S_i) = L_j - L_i
            let d = i128::from(w[1].lat_ns) - i128::from(w[0].lat_ns);
            j += ((d.unsigned_abs() as f64) - j) / 16.0;
        }
        Some(j)
    };

    // ---- Rate ----
    let rx_pps = match (
        pkts.iter().map(|p| p.rx_ns).min(),
        pkts.iter().map(|p| p.rx_ns).max(),
    ) {
        (Some(first), Some(last)) if pkts.len() >= 2 && last > first => {
            Some((pkts.len() - 1) as f64 / ((last - first) as f64 / 1e9))
        }
        _ => None,
    };

    // ---- Sequence order: IPDV and anomalies ----
    pkts.sort_unstable_by_key(|p| (p.flow, p.seq));
    let mut ipdv: Vec<u64> = pkts
        .windows(2)
        .filter(|w| w[0].flow == w[1].flow && w[0].seq.checked_add(1) == Some(w[1].seq))
        .map(|w| {
            let d = i128::from(w[1].lat_ns) - i128::from(w[0].lat_ns);
            u64::try_from(d.unsigned_abs()).unwrap_or(u64::MAX)
        })
        .collect();
    ipdv.sort_unstable();
    let jitter_ns = JitterStats {
        rfc3550,
        ipdv_p50: nearest_rank(&ipdv, 50, 100),
        ipdv_p99: nearest_rank(&ipdv, 99, 100),
    };

    let anomalies = cfg
        .anomalies
        .iter()
        .map(|spec| anomaly_stats(&pkts, spec))
        .collect();

    Summary {
        packets: counts,
        loss_ratio,
        rate: RateStats {
            offered_pps: cfg.offered_pps,
            tx_pps: cfg.tx_pps,
            rx_pps,
        },
        latency_ns,
        jitter_ns,
        anomalies,
        clock: cfg.clock.clone(),
        percentiles: PercentileMethod::default(),
        interrupted: false,
        notes,
    }
}

/// Value at 1-based rank `ceil(num/den * N)`, clamped to `1..=N`, of sorted
/// `values`; exact integer arithmetic. `None` for no values.
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], num: u64, den: u64) -> Option<T> {
    let n = sorted.len() as u128;
    if n == 0 || den == 0 {
        return None;
    }
    let rank = (u128::from(num) * n).div_ceil(u128::from(den)).clamp(1, n);
    // rank is in 1..=len, so the index is in bounds.
    sorted.get(rank as usize - 1).copied()
}

fn latency_stats(sorted: &[i64]) -> LatencyStats {
    if sorted.is_empty() {
        return LatencyStats::default();
    }
    let n = sorted.len() as f64;
    let sum: i128 = sorted.iter().map(|&v| i128::from(v)).sum();
    let mean = sum as f64 / n;
    let var = sorted
        .iter()
        .map(|&v| {
            let d = v as f64 - mean;
            d * d
        })
        .sum::<f64>()
        / n;
    LatencyStats {
        min: sorted.first().copied(),
        mean: Some(mean),
        stdev: Some(var.sqrt()),
        p50: nearest_rank(sorted, 50, 100),
        p90: nearest_rank(sorted, 90, 100),
        p99: nearest_rank(sorted, 99, 100),
        p99_9: nearest_rank(sorted, 999, 1_000),
        p99_99: nearest_rank(sorted, 9_999, 10_000),
        p99_999: nearest_rank(sorted, 99_999, 100_000),
        max: sorted.last().copied(),
    }
}

/// Runs of consecutive sequence numbers (same flow, no gap) with latency
/// `>= t_ns`; those of length `>= n` are anomalies. `pkts` is sorted by
/// `(flow, seq)`. `n = 0` behaves like `n = 1`.
fn anomaly_stats(pkts: &[Pkt], spec: &AnomalySpec) -> AnomalyStats {
    let n = u64::from(spec.n.max(1));
    let t = i128::from(spec.t_ns);
    let mut out = AnomalyStats {
        n: spec.n,
        t_ns: spec.t_ns,
        ..AnomalyStats::default()
    };
    let mut close = |run: u64| {
        if run >= n {
            out.count += 1;
            out.packets += run;
            out.longest = out.longest.max(run);
        }
    };
    let mut run = 0u64;
    let mut prev: Option<(u16, u64)> = None;
    for p in pkts {
        let contiguous = prev.is_some_and(|(f, s)| f == p.flow && s.checked_add(1) == Some(p.seq));
        if !contiguous {
            close(run);
            run = 0;
        }
        if i128::from(p.lat_ns) >= t {
            run += 1;
        } else {
            close(run);
            run = 0;
        }
        prev = Some((p.flow, p.seq));
    }
    close(run);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_small() {
        let v = [10, 20, 30, 40];
        assert_eq!(nearest_rank(&v, 50, 100), Some(20)); // ceil(2.0) = 2
        assert_eq!(nearest_rank(&v, 51, 100), Some(30)); // ceil(2.04) = 3
        assert_eq!(nearest_rank(&v, 0, 100), Some(10)); // clamped to rank 1
        assert_eq!(nearest_rank(&v, 100, 100), Some(40));
        assert_eq!(nearest_rank::<i64>(&[], 50, 100), None);
    }
}
