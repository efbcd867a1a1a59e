//! A monitor's cost in one run: its modes take turns in blocks of time
//! (`[monitor] rotate`, randomised complete blocks: every round of as many blocks
//! as modes has each mode once), and the relay's throughput is counted per block
//! from the recorder's receive stamps. While the relay is saturated — its socket
//! drops datagrams in every block of a round — its throughput is its capacity (the
//! forwarding rate at an offered load above it, RFC 2285's maximum forwarding rate;
//! not RFC 2544's lossless rate, which a host's jitter puts below it), so the ratio
//! of two modes' throughputs within a round is the ratio of their capacities under
//! the same host state, and 1/rate − 1/rate of the reference is what the mode adds
//! per datagram on the relay's critical path. A drift of the host over seconds (on
//! the reference VM the relay's capacity moves by up to 2×) hits both sides of every
//! round alike, where separate zero-loss searches minutes apart scatter by ±30 %.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

use crate::bootstrap::percentile_interval;

/// The start of every block left out of its count: after a switch the relay
/// finishes the datagram in hand and the monitor thread its drain; 5 ms is a few
/// hundred datagrams' time at the relay's rate.
pub const SETTLE_NS: u64 = 5_000_000;

/// One block as the monitor recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Start (the mode in effect from here), ns.
    pub t_start_ns: u64,
    /// End, ns.
    pub t_end_ns: u64,
    /// Index of the mode.
    pub mode: usize,
    /// The relay socket's drops between the switches that opened and closed the
    /// block (`None`: not known).
    pub socket_drops: Option<u64>,
}

/// What a block carried.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BlockRate {
    /// Datagrams received by the recorder in the block, after its first [`SETTLE_NS`].
    pub received: u64,
    /// `received` per second of the counted span.
    pub rx_pps: f64,
    /// Datagrams the relay's socket dropped during the block (0 when not known).
    pub socket_drops: u64,
}

/// Count each block: `rx_ns` sorted.
pub fn block_rates(blocks: &[Block], rx_ns: &[u64]) -> Vec<BlockRate> {
    blocks
        .iter()
        .map(|b| {
            let from = b.t_start_ns.saturating_add(SETTLE_NS);
            let received = if from >= b.t_end_ns {
                0
            } else {
                (rx_ns.partition_point(|&t| t < b.t_end_ns) - rx_ns.partition_point(|&t| t < from))
                    as u64
            };
            rate(b, received)
        })
        .collect()
}

/// A block's rate: `received` over its span after [`SETTLE_NS`].
fn rate(b: &Block, received: u64) -> BlockRate {
    let span = b
        .t_end_ns
        .saturating_sub(b.t_start_ns.saturating_add(SETTLE_NS));
    BlockRate {
        received,
        rx_pps: if span == 0 {
            0.0
        } else {
            received as f64 * 1e9 / span as f64
        },
        socket_drops: b.socket_drops.unwrap_or(0),
    }
}

/// The name of a `monitor_modes.parquet` mode value: −1 detached, else the
/// monitor's `config` map (0 off, 1 sampling, 2 all).
pub fn mode_name(value: i64) -> &'static str {
    match value {
        -1 => "detached",
        0 => "off",
        1 => "sampling",
        2 => "all",
        _ => "unknown",
    }
}

/// A row of `monitor_modes.parquet`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockRow {
    /// The block; its `mode` is `mode_value + 1` (an index over detached, off,
    /// sampling, all).
    pub block: Block,
    /// Its rate.
    pub rate: BlockRate,
    /// The file's `mode`: see [`mode_name`].
    pub mode_value: i64,
}

/// The rows of a `monitor_modes.parquet` with their rates.
pub fn read_blocks(path: &Path) -> Result<Vec<BlockRow>, crate::AnalyzeError> {
    let names = ["t_start_ns", "t_end_ns", "mode", "received", "socket_drops"];
    let cols = crate::komon::read_i64_columns(path, &names)?;
    let at = |c: usize, i: usize| cols[c][i].unwrap_or(0).max(0) as u64;
    Ok((0..cols[0].len())
        .map(|i| {
            let mode_value = cols[2][i].unwrap_or(-2);
            let block = Block {
                t_start_ns: at(0, i),
                t_end_ns: at(1, i),
                mode: (mode_value + 1).max(0) as usize,
                socket_drops: cols[4][i].map(|d| d.max(0) as u64),
            };
            BlockRow {
                block,
                rate: rate(&block, at(3, i)),
                mode_value,
            }
        })
        .collect())
}

/// One mode's throughput over the saturated rounds; `None` without any.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeThroughput {
    /// The mode's name.
    pub mode: String,
    /// Its blocks in the saturated rounds (one per round).
    pub blocks: usize,
    /// Mean of its blocks' rx_pps.
    pub mean_pps: Option<f64>,
    /// mean_pps / the reference's (1 for the reference itself).
    pub ratio: Option<f64>,
    /// 95 % interval of `ratio`: circular moving-block bootstrap over rounds.
    pub ratio_ci: Option<[f64; 2]>,
    /// 1 − ratio: the share of the reference's capacity the mode costs.
    pub cost: Option<f64>,
    /// 1e9 / mean_pps − 1e9 / the reference's: what the mode adds per datagram
    /// on the relay's critical path, ns.
    pub extra_ns_per_datagram: Option<f64>,
    /// 95 % interval of `extra_ns_per_datagram`, same resamples.
    pub extra_ns_ci: Option<[f64; 2]>,
}

/// The rotation's figures (`monitor.json`'s `rotation`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RotationFigures {
    /// Mean length of a block, s.
    pub block_s: f64,
    /// Left out at each block's start, ns.
    pub settle_ns: u64,
    /// The mode the others are divided by: "detached" (no monitor) when `rotate`
    /// names it, else "off", else the first.
    pub reference: String,
    /// Complete rounds in the run.
    pub rounds: usize,
    /// Of those, the rounds whose every block had socket drops: the relay was
    /// saturated, its throughput its capacity. Only these are counted.
    pub saturated_rounds: usize,
    /// Rounds per resampled stretch of the bootstrap (⌈√saturated_rounds⌉):
    /// consecutive rounds share the host's state, so they are resampled together.
    pub bootstrap_block_rounds: usize,
    /// Per mode, in the order of `[monitor] rotate`.
    pub modes: Vec<ModeThroughput>,
}

const RESAMPLES: usize = 2000;

/// Per block: whether it belongs to a saturated round (rounds of `k` blocks from
/// the first; every block of the round dropped and received). A trailing partial
/// round is not.
pub fn in_saturated_rounds(rates: &[BlockRate], k: usize) -> Vec<bool> {
    let k = k.max(1);
    let mut out = vec![false; rates.len()];
    for (round, flags) in rates.chunks_exact(k).zip(out.chunks_exact_mut(k)) {
        let saturated = round.iter().all(|x| x.socket_drops > 0 && x.received > 0);
        flags.iter_mut().for_each(|f| *f = saturated);
    }
    out
}

/// The reference of `names`: "detached", else "off", else the first.
pub fn reference_of(names: &[String]) -> usize {
    ["detached", "off"]
        .iter()
        .find_map(|r| names.iter().position(|n| n == r))
        .unwrap_or(0)
}

/// Per saturated round, each mode's rx_pps by mode index.
fn saturated_rounds(blocks: &[Block], rates: &[BlockRate], k: usize) -> Vec<Vec<f64>> {
    let saturated = in_saturated_rounds(rates, k);
    blocks
        .chunks_exact(k)
        .zip(rates.chunks_exact(k))
        .zip(saturated.chunks_exact(k))
        .filter(|(_, s)| s[0])
        .filter_map(|((b, r), _)| {
            let mut pps = vec![f64::NAN; k];
            for (block, rate) in b.iter().zip(r) {
                *pps.get_mut(block.mode)? = rate.rx_pps;
            }
            pps.iter().all(|p| !p.is_nan()).then_some(pps)
        })
        .collect()
}

/// Circular moving-block bootstrap indices: `n` rounds as stretches of `len`
/// consecutive ones (wrapping), each from a random start.
fn stretch_resample(rng: &mut ChaCha20Rng, n: usize, len: usize) -> Vec<usize> {
    let mut idx = Vec::with_capacity(n + len);
    while idx.len() < n {
        let start = rng.gen_range(0..n);
        idx.extend((0..len).map(|j| (start + j) % n));
    }
    idx.truncate(n);
    idx
}

/// The figures of `blocks` (in time order, in complete rounds of `names.len()`
/// blocks from the first) with their `rates`.
pub fn figures(blocks: &[Block], rates: &[BlockRate], names: &[String]) -> RotationFigures {
    let k = names.len().max(1);
    let reference = reference_of(names);
    let block_s = if blocks.is_empty() {
        0.0
    } else {
        blocks
            .iter()
            .map(|b| b.t_end_ns.saturating_sub(b.t_start_ns) as f64)
            .sum::<f64>()
            / blocks.len() as f64
            / 1e9
    };
    let rounds = saturated_rounds(blocks, rates, k);
    let n = rounds.len();
    let stretch = (n as f64).sqrt().ceil().max(1.0) as usize;
    let mean_of =
        |idx: &[usize], m: usize| idx.iter().map(|&i| rounds[i][m]).sum::<f64>() / idx.len() as f64;
    let all: Vec<usize> = (0..n).collect();
    // One set of resamples for every mode: their intervals are joint.
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let resamples: Vec<Vec<usize>> = if n == 0 {
        Vec::new()
    } else {
        (0..RESAMPLES)
            .map(|_| stretch_resample(&mut rng, n, stretch))
            .collect()
    };
    let modes = names
        .iter()
        .enumerate()
        .map(|(m, name)| {
            let (mode_mean, ref_mean) = if n == 0 {
                (None, None)
            } else {
                (Some(mean_of(&all, m)), Some(mean_of(&all, reference)))
            };
            let ratio = mode_mean.zip(ref_mean).map(|(a, r)| a / r);
            let extra = mode_mean.zip(ref_mean).map(|(a, r)| 1e9 / a - 1e9 / r);
            let (mut ratios, mut extras): (Vec<f64>, Vec<f64>) = resamples
                .iter()
                .map(|idx| {
                    let (a, r) = (mean_of(idx, m), mean_of(idx, reference));
                    (a / r, 1e9 / a - 1e9 / r)
                })
                .unzip();
            ModeThroughput {
                mode: name.clone(),
                blocks: n,
                mean_pps: mode_mean,
                ratio,
                ratio_ci: percentile_interval(&mut ratios, 0.95),
                cost: ratio.map(|r| 1.0 - r),
                extra_ns_per_datagram: extra,
                extra_ns_ci: percentile_interval(&mut extras, 0.95),
            }
        })
        .collect();
    RotationFigures {
        block_s,
        settle_ns: SETTLE_NS,
        reference: names.get(reference).cloned().unwrap_or_default(),
        rounds: blocks.len() / k,
        saturated_rounds: n,
        bootstrap_block_rounds: stretch,
        modes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn block(start_ms: u64, mode: usize, drops: u64) -> Block {
        Block {
            t_start_ns: start_ms * MS,
            t_end_ns: (start_ms + 100) * MS,
            mode,
            socket_drops: Some(drops),
        }
    }

    #[test]
    fn blocks_count_what_arrived_after_settling() {
        let mut blocks = [block(0, 0, 5), block(100, 1, 0)];
        // Block 0 counts [5 ms, 100 ms): the stamps at 1 ms and 100 ms are out.
        let rx: Vec<u64> = [1, 5, 50, 99, 100, 106, 150]
            .iter()
            .map(|t| t * MS)
            .collect();
        let r = block_rates(&blocks, &rx);
        assert_eq!(r[0].received, 3);
        assert!((r[0].rx_pps - 3.0 / 0.095).abs() < 1e-9);
        assert_eq!((r[0].socket_drops, r[1].socket_drops), (5, 0));
        assert_eq!(r[1].received, 2);
        // Unknown drops count as none: such a block is never saturated.
        blocks[0].socket_drops = None;
        assert_eq!(block_rates(&blocks, &rx)[0].socket_drops, 0);
    }

    fn rate(pps: f64, drops: u64) -> BlockRate {
        BlockRate {
            received: pps as u64,
            rx_pps: pps,
            socket_drops: drops,
        }
    }

    #[test]
    fn ratios_pair_the_modes_within_saturated_rounds() {
        // Three rounds of (off, all) in shuffled order; the host halves its speed
        // in round 2; "all" costs 20 % throughout. Round 3 is not saturated.
        let blocks = [
            block(0, 0, 9),
            block(100, 1, 9),
            block(200, 1, 9),
            block(300, 0, 9),
            block(400, 0, 9),
            block(500, 1, 0),
        ];
        let rates = [
            rate(100_000.0, 9),
            rate(80_000.0, 9),
            rate(40_000.0, 9),
            rate(50_000.0, 9),
            rate(100_000.0, 9),
            rate(100_000.0, 0),
        ];
        let names = ["off".to_string(), "all".to_string()];
        let f = figures(&blocks, &rates, &names);
        assert_eq!((f.rounds, f.saturated_rounds), (3, 2));
        assert_eq!(f.reference, "off");
        assert_eq!(f.bootstrap_block_rounds, 2);
        assert!((f.block_s - 0.1).abs() < 1e-12);
        let all = &f.modes[1];
        // Means 60 000 and 75 000 over the two saturated rounds.
        assert!((all.ratio.unwrap() - 0.8).abs() < 1e-12);
        assert!((all.cost.unwrap() - 0.2).abs() < 1e-12);
        assert!((all.mean_pps.unwrap() - 60_000.0).abs() < 1e-9);
        let extra = 1e9 / 60_000.0 - 1e9 / 75_000.0;
        assert!((all.extra_ns_per_datagram.unwrap() - extra).abs() < 1e-6);
        // Every resample holds both rounds or one twice: the ratio is 0.8 in each.
        let ci = all.ratio_ci.unwrap();
        assert!((ci[0] - 0.8).abs() < 1e-12 && (ci[1] - 0.8).abs() < 1e-12);
        let eci = all.extra_ns_ci.unwrap();
        assert!(eci[0] <= extra + 1e-6 && extra - 1e-6 <= eci[1], "{eci:?}");
        assert_eq!(f.modes[0].ratio, Some(1.0));
        assert_eq!(all.blocks, 2);
    }

    #[test]
    fn detached_is_the_reference_when_rotated() {
        let names: Vec<String> = ["all", "off", "detached"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(reference_of(&names), 2);
        assert_eq!(reference_of(&names[..2]), 1);
        assert_eq!(reference_of(&names[..1]), 0);
    }

    #[test]
    fn stretches_wrap_and_fill_exactly() {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        for _ in 0..100 {
            let idx = stretch_resample(&mut rng, 10, 4);
            assert_eq!(idx.len(), 10);
            // Consecutive within a stretch, wrapping at 10.
            for s in idx.chunks(4) {
                for w in s.windows(2) {
                    assert_eq!(w[1], (w[0] + 1) % 10);
                }
            }
        }
    }

    #[test]
    fn the_file_reads_back_with_the_same_rates_and_rounds() {
        use crate::export::{write_parquet, Column, Table};
        let blocks = [
            block(0, 0, 0),
            block(100, 3, 4),
            block(200, 3, 0),
            block(300, 0, 5),
            block(400, 3, 3),
        ];
        let rx: Vec<u64> = (0..500).map(|t| t * MS).collect();
        let rates = block_rates(&blocks, &rx);
        let col = |f: &dyn Fn(usize) -> i64| Column::I64((0..5).map(|i| Some(f(i))).collect());
        let dir = std::env::temp_dir().join(format!("nflab-rotation-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("monitor_modes.parquet");
        // The file's mode values: index 0 is detached (−1), index 3 all (2).
        let table = Table {
            name: "monitor_modes".into(),
            columns: vec![
                ("t_start_ns".into(), col(&|i| blocks[i].t_start_ns as i64)),
                ("t_end_ns".into(), col(&|i| blocks[i].t_end_ns as i64)),
                ("mode".into(), col(&|i| blocks[i].mode as i64 - 1)),
                ("received".into(), col(&|i| rates[i].received as i64)),
                (
                    "socket_drops".into(),
                    col(&|i| rates[i].socket_drops as i64),
                ),
            ],
        };
        write_parquet(&table, &path).unwrap();
        let back = read_blocks(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.iter().map(|r| r.block).collect::<Vec<_>>(), blocks);
        assert_eq!(back.iter().map(|r| r.rate).collect::<Vec<_>>(), rates);
        assert_eq!(mode_name(back[0].mode_value), "detached");
        assert_eq!(mode_name(back[1].mode_value), "all");
        // Rounds (0, 1) and (2, 3) each have a block without drops; block 4 is a
        // partial round.
        assert_eq!(in_saturated_rounds(&rates, 2), vec![false; 5]);
        assert_eq!(in_saturated_rounds(&rates[3..5], 2), vec![true, true]);
    }

    #[test]
    fn no_saturated_round_gives_no_figures() {
        let blocks = [block(0, 0, 0), block(100, 1, 0)];
        let f = figures(&blocks, &[rate(100.0, 0); 2], &["off".into(), "all".into()]);
        assert_eq!(f.saturated_rounds, 0);
        assert!(f.modes[1].ratio.is_none() && f.modes[1].ratio_ci.is_none());
        // null in monitor.json, not NaN.
        let json = serde_json::to_value(&f).unwrap();
        assert!(json["modes"][1]["mean_pps"].is_null());
    }
}
