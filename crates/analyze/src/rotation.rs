//! A monitor's cost in one run: its modes take turns in blocks of time
//! (`[monitor] rotate`, randomised complete blocks: every round of as many blocks
//! as modes has each mode once), and the relay's throughput is counted per block
//! from the recorder's receive stamps. While the relay is saturated — its socket
//! drops datagrams in every block of a round — its throughput is its capacity, so
//! the ratio of two modes' throughputs within a round is the ratio of their
//! lossless rates, measured under the same host state: a drift of the host over
//! seconds (on the reference VM the relay's capacity moves by up to 2×) hits both
//! sides of every ratio alike, where three separate searches minutes apart scatter
//! by ±30 %.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

/// The start of every block left out of its count: the relay's output settles
/// after a mode switch within one datagram's time (µs); 5 ms leaves room for the
/// recorder's stamps.
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
}

/// What a block carried.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BlockRate {
    /// Datagrams received by the recorder in the block, after its first [`SETTLE_NS`].
    pub received: u64,
    /// `received` per second of the counted span.
    pub rx_pps: f64,
    /// Datagrams the relay's socket dropped during the block (its drop counter).
    pub socket_drops: u64,
}

/// Count each block: `rx_ns` sorted, `drops` the socket's (time, drop counter)
/// samples in time order.
pub fn block_rates(blocks: &[Block], rx_ns: &[u64], drops: &[(u64, u64)]) -> Vec<BlockRate> {
    let drops_at = |t: u64| {
        let i = drops.partition_point(|&(ts, _)| ts <= t);
        drops.get(i.saturating_sub(1)).map_or(0, |&(_, d)| d)
    };
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
            rate(
                b,
                received,
                drops_at(b.t_end_ns).saturating_sub(drops_at(b.t_start_ns)),
            )
        })
        .collect()
}

/// A block's rate: `received` over its span after [`SETTLE_NS`].
fn rate(b: &Block, received: u64, socket_drops: u64) -> BlockRate {
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
        socket_drops,
    }
}

/// The name of a `monitor_modes.parquet` mode value (the monitor's `config` map).
pub fn mode_name(value: i64) -> &'static str {
    match value {
        0 => "off",
        1 => "sampling",
        2 => "all",
        _ => "unknown",
    }
}

/// The blocks of a `monitor_modes.parquet` with their rates; `mode` is the file's
/// value (0 off, 1 sampling, 2 all: see [`mode_name`]).
pub fn read_blocks(path: &Path) -> Result<Vec<(Block, BlockRate)>, crate::AnalyzeError> {
    let names = ["t_start_ns", "t_end_ns", "mode", "received", "socket_drops"];
    let cols = crate::komon::read_i64_columns(path, &names)?;
    let at = |c: usize, i: usize| cols[c][i].unwrap_or(0).max(0) as u64;
    Ok((0..cols[0].len())
        .map(|i| {
            let b = Block {
                t_start_ns: at(0, i),
                t_end_ns: at(1, i),
                mode: at(2, i) as usize,
            };
            (b, rate(&b, at(3, i), at(4, i)))
        })
        .collect())
}

/// One mode's throughput over the saturated rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeThroughput {
    /// The mode's name.
    pub mode: String,
    /// Its blocks in the saturated rounds (one per round).
    pub blocks: usize,
    /// Mean of its blocks' rx_pps.
    pub mean_pps: f64,
    /// Σ its rx_pps / Σ the reference's, over the saturated rounds (1 for the
    /// reference itself).
    pub ratio: f64,
    /// Percentile-bootstrap 95 % interval of `ratio`, rounds resampled.
    pub ratio_ci: [f64; 2],
    /// 1 − ratio: the share of the reference's throughput the mode costs.
    pub cost: f64,
}

/// The rotation's figures (`monitor.json`'s `rotation`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RotationFigures {
    /// Mean length of a block, s.
    pub block_s: f64,
    /// Left out at each block's start, ns.
    pub settle_ns: u64,
    /// The mode the others are divided by.
    pub reference: String,
    /// Complete rounds in the run.
    pub rounds: usize,
    /// Of those, the rounds whose every block had socket drops: the relay was
    /// saturated, its throughput its capacity. Only these are counted.
    pub saturated_rounds: usize,
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

/// The figures of `blocks` (in time order, in complete rounds of `names.len()`
/// blocks from the first) with their `rates`, against the mode `reference`.
pub fn figures(
    blocks: &[Block],
    rates: &[BlockRate],
    names: &[String],
    reference: usize,
) -> RotationFigures {
    let k = names.len().max(1);
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
    // Per saturated round: each mode's rx_pps, by mode index.
    let saturated = in_saturated_rounds(rates, k);
    let rounds: Vec<Vec<f64>> = blocks
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
        .collect();
    let ratio_of = |idx: &mut dyn Iterator<Item = usize>, m: usize| {
        let (mut num, mut den) = (0.0, 0.0);
        for i in idx {
            num += rounds[i][m];
            den += rounds[i][reference];
        }
        if den > 0.0 {
            num / den
        } else {
            f64::NAN
        }
    };
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let modes = names
        .iter()
        .enumerate()
        .map(|(m, name)| {
            let n = rounds.len();
            let ratio = ratio_of(&mut (0..n), m);
            let mut boot: Vec<f64> = if n == 0 {
                Vec::new()
            } else {
                (0..RESAMPLES)
                    .map(|_| ratio_of(&mut (0..n).map(|_| rng.gen_range(0..n)), m))
                    .collect()
            };
            boot.sort_by(f64::total_cmp);
            let q = |p: f64| {
                if boot.is_empty() {
                    f64::NAN
                } else {
                    boot[((p * boot.len() as f64).ceil() as usize).clamp(1, boot.len()) - 1]
                }
            };
            ModeThroughput {
                mode: name.clone(),
                blocks: n,
                mean_pps: if n == 0 {
                    f64::NAN
                } else {
                    rounds.iter().map(|r| r[m]).sum::<f64>() / n as f64
                },
                ratio,
                ratio_ci: [q(0.025), q(0.975)],
                cost: 1.0 - ratio,
            }
        })
        .collect();
    RotationFigures {
        block_s,
        settle_ns: SETTLE_NS,
        reference: names.get(reference).cloned().unwrap_or_default(),
        rounds: blocks.len() / k,
        saturated_rounds: rounds.len(),
        modes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn block(start_ms: u64, mode: usize) -> Block {
        Block {
            t_start_ns: start_ms * MS,
            t_end_ns: (start_ms + 100) * MS,
            mode,
        }
    }

    #[test]
    fn blocks_count_what_arrived_after_settling_and_the_drops() {
        let blocks = [block(0, 0), block(100, 1)];
        // Block 0 counts [5 ms, 100 ms): the stamps at 1 ms and 100 ms are out.
        let rx: Vec<u64> = [1, 5, 50, 99, 100, 106, 150]
            .iter()
            .map(|t| t * MS)
            .collect();
        let drops = [(0, 10), (60 * MS, 12), (100 * MS, 15), (190 * MS, 15)];
        let r = block_rates(&blocks, &rx, &drops);
        assert_eq!(r[0].received, 3);
        assert!((r[0].rx_pps - 3.0 / 0.095).abs() < 1e-9);
        assert_eq!(r[0].socket_drops, 5);
        assert_eq!(r[1].received, 2);
        assert_eq!(r[1].socket_drops, 0);
    }

    #[test]
    fn ratios_pair_the_modes_within_saturated_rounds() {
        // Three rounds of (off, all) in shuffled order; the host halves its speed
        // in round 2; "all" costs 20 % throughout. Round 3 is not saturated.
        let blocks = [
            block(0, 0),
            block(100, 1),
            block(200, 1),
            block(300, 0),
            block(400, 0),
            block(500, 1),
        ];
        let rate = |pps: f64, drops: u64| BlockRate {
            received: pps as u64,
            rx_pps: pps,
            socket_drops: drops,
        };
        let rates = [
            rate(100_000.0, 9),
            rate(80_000.0, 9),
            rate(40_000.0, 9),
            rate(50_000.0, 9),
            rate(100_000.0, 9),
            rate(100_000.0, 0),
        ];
        let names = ["off".to_string(), "all".to_string()];
        let f = figures(&blocks, &rates, &names, 0);
        assert_eq!((f.rounds, f.saturated_rounds), (3, 2));
        assert_eq!(f.reference, "off");
        assert!((f.block_s - 0.1).abs() < 1e-12);
        let all = &f.modes[1];
        // (80 000 + 40 000) / (100 000 + 50 000)
        assert!((all.ratio - 0.8).abs() < 1e-12);
        assert!((all.cost - 0.2).abs() < 1e-12);
        // Both rounds have ratio 0.8, and so has every resample.
        assert!((all.ratio_ci[0] - 0.8).abs() < 1e-12 && (all.ratio_ci[1] - 0.8).abs() < 1e-12);
        assert!((all.mean_pps - 60_000.0).abs() < 1e-9);
        assert_eq!(f.modes[0].ratio, 1.0);
        assert_eq!(all.blocks, 2);
    }

    #[test]
    fn the_file_reads_back_with_the_same_rates_and_rounds() {
        use crate::export::{write_parquet, Column, Table};
        let blocks = [
            block(0, 2),
            block(100, 0),
            block(200, 0),
            block(300, 2),
            block(400, 0),
        ];
        let rx: Vec<u64> = (0..500).map(|t| t * MS).collect();
        let drops = [
            (0, 0),
            (150 * MS, 4),
            (250 * MS, 4),
            (350 * MS, 9),
            (450 * MS, 12),
        ];
        let rates = block_rates(&blocks, &rx, &drops);
        let col = |f: &dyn Fn(usize) -> i64| Column::I64((0..5).map(|i| Some(f(i))).collect());
        let dir = std::env::temp_dir().join(format!("nflab-rotation-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("monitor_modes.parquet");
        let table = Table {
            name: "monitor_modes".into(),
            columns: vec![
                ("t_start_ns".into(), col(&|i| blocks[i].t_start_ns as i64)),
                ("t_end_ns".into(), col(&|i| blocks[i].t_end_ns as i64)),
                ("mode".into(), col(&|i| blocks[i].mode as i64)),
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
        assert_eq!(back.iter().map(|(b, _)| *b).collect::<Vec<_>>(), blocks);
        assert_eq!(back.iter().map(|(_, r)| *r).collect::<Vec<_>>(), rates);
        assert_eq!(mode_name(back[0].0.mode as i64), "all");
        // Drops per block: the counter's last sample at or before each end, less
        // the one at or before each start. Rounds (0, 1) and (2, 3) each have a
        // block without drops; block 4 is a partial round.
        assert_eq!(
            rates.iter().map(|r| r.socket_drops).collect::<Vec<_>>(),
            vec![0, 4, 0, 5, 3]
        );
        assert_eq!(in_saturated_rounds(&rates, 2), vec![false; 5]);
        assert_eq!(
            in_saturated_rounds(&rates[3..5], 2),
            vec![true, true],
            "blocks 3 and 4 as a round of their own"
        );
    }

    #[test]
    fn no_saturated_round_gives_no_ratio() {
        let blocks = [block(0, 0), block(100, 1)];
        let rates = [BlockRate {
            received: 10,
            rx_pps: 100.0,
            socket_drops: 0,
        }; 2];
        let f = figures(&blocks, &rates, &["off".into(), "all".into()], 0);
        assert_eq!(f.saturated_rounds, 0);
        assert!(f.modes[1].ratio.is_nan() && f.modes[1].ratio_ci[0].is_nan());
    }
}
