//! `[monitor]`: an eBPF monitor inside the DuT during each run
//! ([`nflab_monitor`]), its files in `runs/NNN/`, and the calibration of the UDP
//! monitor against the relay's own times. docs/monitor.md has the keys.

use std::path::Path;

use nflab_analyze::export::{write_parquet, Column, Table};
use nflab_monitor::stages::{StagesConfig, StagesMonitor, StagesResult};
use nflab_monitor::udp::{RotationMode, UdpMonitor, UdpMonitorConfig, UdpMonitorResult};
use serde::Serialize;

use crate::dut::registry::quoted_kinds_where;
use crate::error::LabError;
pub use crate::spec::monitor::{MonitorSection, SampleSpec};
use crate::spec::DutKind;
use crate::topo::Topology;

fn bad(m: String) -> LabError {
    LabError::Unsupported(m)
}

/// Check `[monitor]` against the DuT and this host, before anything starts.
pub fn check(m: &MonitorSection, dut: DutKind) -> Result<(), LabError> {
    match m.kind.as_str() {
        "udp" => {
            m.sample()?;
            m.matching()?;
            m.rotation(0)?;
            if !crate::dut::driver(dut).udp_monitor() {
                return Err(bad(format!(
                    "monitor.kind = \"udp\" watches a UDP VNF in the DuT namespace: it needs dut.kind = {}, not \"{}\"",
                    quoted_kinds_where(|d| d.udp_monitor(), "or"),
                    dut.as_str()
                )));
            }
        }
        "stages" => {
            if m.sample.is_some()
                || m.matching.is_some()
                || m.subtract_offset.is_some()
                || m.rotate.is_some()
                || m.rotate_block_s.is_some()
            {
                return Err(bad(
                    "monitor.sample, monitor.match, monitor.subtract_offset, monitor.rotate and monitor.rotate_block_s apply to monitor.kind = \"udp\" only".into(),
                ));
            }
            if crate::dut::driver(dut).stages().is_none() {
                return Err(bad(format!(
                    "monitor.kind = \"stages\" has stages for dut.kind = {}, not \"{}\"",
                    quoted_kinds_where(|d| d.stages().is_some(), "or"),
                    dut.as_str()
                )));
            }
        }
        o => {
            return Err(bad(format!(
                "monitor.kind = \"{o}\" is unknown: use \"udp\" or \"stages\""
            )))
        }
    }
    nflab_monitor::caps::require().map_err(|e| bad(e.to_string()))
}

/// A monitor running during one run.
pub enum RunningMonitor {
    /// `kind = "udp"`.
    Udp(UdpMonitor),
    /// `kind = "stages"`.
    Stages(StagesMonitor),
}

/// Start the monitor before the traffic.
pub fn start(
    m: &MonitorSection,
    topo: &Topology,
    dut: DutKind,
    seed: u64,
) -> Result<RunningMonitor, LabError> {
    let netns = topo
        .dut_ns
        .clone()
        .ok_or_else(|| bad("[monitor] needs a DuT namespace (topology.kind = \"netns\")".into()))?;
    let err = |e: nflab_monitor::MonitorError| LabError::Host(e.to_string());
    match m.kind.as_str() {
        "udp" => UdpMonitor::start(UdpMonitorConfig {
            netns,
            port: crate::run::PROBE_DST_PORT,
            egress_dev: "dut1".into(),
            sample: m.sample()?,
            matching: m.matching()?,
            seed,
            rotation: m.rotation(seed)?,
        })
        .map(RunningMonitor::Udp)
        .map_err(err),
        _ => StagesMonitor::start(StagesConfig {
            netns,
            ingress_dev: "dut0".into(),
            egress_dev: "dut1".into(),
            stages: crate::dut::driver(dut)
                .stages()
                .unwrap_or_default()
                .to_vec(),
        })
        .map(RunningMonitor::Stages)
        .map_err(err),
    }
}

fn table(name: &str, columns: Vec<(&str, Column)>) -> Table {
    Table {
        name: name.into(),
        columns: columns
            .into_iter()
            .map(|(n, c)| (n.to_string(), c))
            .collect(),
    }
}

fn write(t: &Table, path: &Path) -> Result<(), LabError> {
    write_parquet(t, path).map_err(|e| LabError::Other(e.to_string()))
}

/// What `monitor.json` holds next to the parquet files.
#[derive(Debug, Serialize)]
pub struct MonitorReport {
    /// "udp" or "stages".
    pub kind: String,
    /// udp: counters, matching, unmatched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpMonitorResult>,
    /// stages: stage names and counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<StagesResult>,
    /// stages: per-segment distributions joined with the records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<crate::run::stage_breakdown::Breakdown>,
    /// udp: the sojourn times (t_out − t_in) of the pairs and the buffer fill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sojourn: Option<Sojourn>,
    /// udp over a udp-relay: mean(monitor) − mean(relay truth), bootstrapped 95 % CI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<nflab_analyze::bootstrap::Difference>,
    /// udp with `rotate`: each mode's throughput against "off" (or the first mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotation: Option<nflab_analyze::rotation::RotationFigures>,
}

/// The UDP monitor's sojourn times next to the socket's buffer fill (seed 003's
/// load experiment: the monitor's tail follows the fill).
#[derive(Debug, Serialize)]
pub struct Sojourn {
    /// Pairs.
    pub n: u64,
    /// Mean sojourn, ns.
    pub mean_ns: f64,
    /// 95th percentile, ns.
    pub p95_ns: i64,
    /// Mean receive-queue fill over the run, bytes.
    pub buffer_mean_bytes: f64,
    /// Pearson's r between each pair's sojourn and the last buffer sample before
    /// its ingress.
    pub buffer_r: Option<f64>,
}

fn sojourn(r: &UdpMonitorResult) -> Sojourn {
    let mut d = nflab_analyze::Distribution::new(10_000_000, 3);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for p in &r.matching.pairs {
        let s = p.t_out_ns as i64 - p.t_in_ns as i64;
        d.record(s);
        let i = r.buffer.partition_point(|b| b.t_ns <= p.t_in_ns);
        if i > 0 {
            x.push(s as f64);
            y.push(r.buffer[i - 1].rx_queue_bytes as f64);
        }
    }
    let p95 = nflab_analyze::Pct::parse("95").expect("p95");
    let fill: Vec<f64> = r.buffer.iter().map(|b| b.rx_queue_bytes as f64).collect();
    Sojourn {
        n: d.count(),
        mean_ns: d.mean().unwrap_or(0.0),
        p95_ns: d.quantiles(&[p95])[0].map_or(0, |q| q.value),
        buffer_mean_bytes: nflab_analyze::crossrun::mean(&fill).unwrap_or(0.0),
        buffer_r: nflab_analyze::correlation::pearson(&x, &y),
    }
}

/// A monitor's result right after it stopped.
pub enum Stopped {
    /// `kind = "udp"`.
    Udp(Result<UdpMonitorResult, nflab_monitor::MonitorError>),
    /// `kind = "stages"`.
    Stages(Result<StagesResult, nflab_monitor::MonitorError>),
}

/// Write a stopped monitor's files into `dir`; the calibration against the relay's
/// `truth` when there is one.
pub fn finish_stopped(
    stopped: Stopped,
    dir: &Path,
    truth: Option<&[nflab_apps::relay::TruthRow]>,
) -> Result<MonitorReport, LabError> {
    let err = |e: nflab_monitor::MonitorError| LabError::Other(e.to_string());
    match stopped {
        Stopped::Udp(r) => {
            let r = r.map_err(err)?;
            let p = &r.matching.pairs;
            write(
                &table(
                    "monitor",
                    vec![
                        (
                            "seq",
                            Column::I64(p.iter().map(|m| m.seq.map(|s| s as i64)).collect()),
                        ),
                        (
                            "hash",
                            Column::I64(p.iter().map(|m| Some(m.hash as i64)).collect()),
                        ),
                        (
                            "t_in_ns",
                            Column::I64(p.iter().map(|m| Some(m.t_in_ns as i64)).collect()),
                        ),
                        (
                            "t_out_ns",
                            Column::I64(p.iter().map(|m| Some(m.t_out_ns as i64)).collect()),
                        ),
                    ],
                ),
                &dir.join("monitor.parquet"),
            )?;
            let b = &r.buffer;
            write(
                &table(
                    "monitor_buffer",
                    vec![
                        (
                            "t_ns",
                            Column::I64(b.iter().map(|s| Some(s.t_ns as i64)).collect()),
                        ),
                        (
                            "rx_queue_bytes",
                            Column::I64(b.iter().map(|s| Some(s.rx_queue_bytes as i64)).collect()),
                        ),
                        (
                            "drops",
                            Column::I64(b.iter().map(|s| Some(s.drops as i64)).collect()),
                        ),
                    ],
                ),
                &dir.join("monitor_buffer.parquet"),
            )?;
            let calibration = truth.and_then(|t| {
                let mon: Vec<f64> = p.iter().map(|m| (m.t_out_ns - m.t_in_ns) as f64).collect();
                let tr: Vec<f64> = t.iter().map(|r| r.processing_ns as f64).collect();
                // 1000 resamples; 200 beyond 100 000 values, where a resample pass
                // costs more than the run's own analysis.
                let resamples = if mon.len() + tr.len() > 100_000 {
                    200
                } else {
                    1000
                };
                nflab_analyze::bootstrap::mean_difference_ci(&mon, &tr, 0.95, resamples, 1)
            });
            let sojourn_of_r = sojourn(&r);
            let rotation = rotation(&r, dir)?;
            Ok(MonitorReport {
                kind: "udp".into(),
                udp: Some(r),
                stages: None,
                breakdown: None,
                sojourn: Some(sojourn_of_r),
                calibration,
                rotation,
            })
        }
        Stopped::Stages(r) => {
            let r = r.map_err(err)?;
            let mut cols = vec![(
                "seq".to_string(),
                Column::I64(r.rows.iter().map(|x| Some(x.seq as i64)).collect()),
            )];
            for (i, s) in r.stages.iter().enumerate() {
                cols.push((
                    format!("t_{s}_ns"),
                    Column::I64(r.rows.iter().map(|x| x.t_ns[i].map(|t| t as i64)).collect()),
                ));
            }
            write(
                &Table {
                    name: "stages".into(),
                    columns: cols,
                },
                &dir.join("stages.parquet"),
            )?;
            let breakdown = crate::run::stage_breakdown::breakdown(&r, &dir.join("records.nfr"))?;
            Ok(MonitorReport {
                kind: "stages".into(),
                udp: None,
                breakdown: Some(breakdown),
                sojourn: None,
                stages: Some(r),
                calibration: None,
                rotation: None,
            })
        }
    }
}

/// A rotation's blocks counted against the run's records: `monitor_modes.parquet`
/// and the figures. `None` without a rotation.
fn rotation(
    r: &UdpMonitorResult,
    dir: &Path,
) -> Result<Option<nflab_analyze::rotation::RotationFigures>, LabError> {
    use nflab_analyze::rotation::{block_rates, figures, Block};
    if r.blocks.is_empty() {
        return Ok(None);
    }
    let blocks: Vec<Block> = r
        .blocks
        .iter()
        .map(|b| Block {
            t_start_ns: b.t_start_ns,
            t_end_ns: b.t_end_ns,
            mode: b.mode,
            socket_drops: b
                .drops_end
                .zip(b.drops_start)
                .map(|(e, s)| e.saturating_sub(s)),
        })
        .collect();
    let rates = block_rates(&blocks, &receive_stamps(&dir.join("records.nfr"))?);
    let i64s =
        |f: &dyn Fn(usize) -> i64| Column::I64((0..blocks.len()).map(|i| Some(f(i))).collect());
    write(
        &table(
            "monitor_modes",
            vec![
                ("t_start_ns", i64s(&|i| blocks[i].t_start_ns as i64)),
                ("t_end_ns", i64s(&|i| blocks[i].t_end_ns as i64)),
                (
                    "mode",
                    i64s(&|i| {
                        r.rotation_modes
                            .get(blocks[i].mode)
                            .map_or(-2, RotationMode::value)
                    }),
                ),
                ("received", i64s(&|i| rates[i].received as i64)),
                ("socket_drops", i64s(&|i| rates[i].socket_drops as i64)),
            ],
        ),
        &dir.join("monitor_modes.parquet"),
    )?;
    let names: Vec<String> = r
        .rotation_modes
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    Ok(Some(figures(&blocks, &rates, &names)))
}

/// The receive stamps of a record file, sorted; read block by block (a saturated
/// minute is ~10⁷ records: 8 bytes each here instead of the whole records).
fn receive_stamps(path: &Path) -> Result<Vec<u64>, LabError> {
    let mut reader = nflab_record::RecordReader::open(path)?;
    let (mut rx, mut block) = (Vec::new(), Vec::new());
    while reader.next_block(&mut block)? {
        rx.extend(block.iter().map(|x| x.rx_ns));
    }
    rx.sort_unstable();
    Ok(rx)
}

impl RunningMonitor {
    /// Stop the monitor's hooks. Before the DuT: the relay's truth then covers every
    /// datagram the monitor saw leave.
    pub fn stop(self) -> Stopped {
        match self {
            RunningMonitor::Udp(u) => Stopped::Udp(u.stop()),
            RunningMonitor::Stages(s) => Stopped::Stages(s.stop()),
        }
    }
}

/// Write a stopped monitor's files and `monitor.json` into `dir`, calibrated
/// against the relay's `truth` when there is one.
pub fn finish(
    stopped: Stopped,
    dir: &Path,
    truth: Option<&[nflab_apps::relay::TruthRow]>,
) -> Result<(), LabError> {
    let report = finish_stopped(stopped, dir, truth)?;
    // Whole or not at all (`--resume` and the report trust it).
    crate::artifacts::files::write_json(&dir.join("monitor.json"), &report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nflab_monitor::udp::Sample;

    fn section(text: &str) -> MonitorSection {
        toml::from_str(text).expect("monitor section")
    }

    #[test]
    fn bad_monitor_keys_are_one_sentence_naming_them() {
        let e = |m: &str, dut| check(&section(m), dut).unwrap_err().to_string();
        assert!(e("kind = \"kprobe\"", DutKind::UdpRelay)
            .contains("monitor.kind = \"kprobe\" is unknown"));
        assert_eq!(
            e("kind = \"udp\"", DutKind::LinuxRouter),
            "monitor.kind = \"udp\" watches a UDP VNF in the DuT namespace: it needs dut.kind = \"udp-relay\", not \"linux-router\""
        );
        assert_eq!(
            e("kind = \"stages\"", DutKind::Nflab),
            "monitor.kind = \"stages\" has stages for dut.kind = \"linux-router\", \"linux-bridge\" or \"udp-relay\", not \"nflab\""
        );
        assert!(e("kind = \"udp\"\nsample = \"some\"", DutKind::UdpRelay)
            .contains("monitor.sample = \"some\""));
        assert!(e(
            "kind = \"udp\"\nsample = { packets = 0, mean_interval_s = 0.2 }",
            DutKind::UdpRelay
        )
        .contains("packets >= 1"));
        assert!(e("kind = \"udp\"\nmatch = \"lifo\"", DutKind::UdpRelay).contains("monitor.match"));
        assert!(
            e("kind = \"stages\"\nsample = \"all\"", DutKind::LinuxRouter).contains("udp\" only")
        );
    }

    #[test]
    fn bad_rotations_are_one_sentence_naming_the_key() {
        let e = |m: &str| {
            check(&section(&format!("kind = \"udp\"\n{m}")), DutKind::UdpRelay)
                .unwrap_err()
                .to_string()
        };
        assert!(
            e("rotate = [\"off\", \"most\"]").contains("monitor.rotate[1] = \"most\" is unknown")
        );
        assert!(e("rotate = [\"all\", \"all\"]").contains("names \"all\" twice"));
        assert!(e("rotate = [\"all\"]").contains("at least two modes"));
        assert!(e("rotate = [\"off\", \"all\"]\nsample = \"all\"")
            .contains("monitor.sample = \"all\" cannot go with monitor.rotate"));
        assert!(e("rotate = [\"off\", \"all\"]\nrotate_block_s = 0.01")
            .contains("monitor.rotate_block_s = 0.01 is out of range"));
        assert!(e("rotate_block_s = 1.0").contains("needs monitor.rotate"));
        assert!(check(
            &section("kind = \"stages\"\nrotate = [\"off\", \"all\"]"),
            DutKind::LinuxRouter
        )
        .unwrap_err()
        .to_string()
        .contains("udp\" only"));
    }

    #[test]
    fn a_rotation_takes_the_sample_windows_and_orders_in_complete_rounds() {
        let m = section(
            "kind = \"udp\"\nsample = { packets = 4, mean_interval_s = 0.1 }\nrotate = [\"all\", \"sampling\", \"off\"]",
        );
        let r = m.rotation(7).unwrap().expect("a rotation");
        assert_eq!(
            r.modes,
            vec![
                RotationMode::Attached(Sample::All),
                RotationMode::Attached(Sample::Windows {
                    packets: 4,
                    mean_interval_s: 0.1
                }),
                RotationMode::Attached(Sample::Off)
            ]
        );
        let d = section("kind = \"udp\"\nrotate = [\"detached\", \"all\"]");
        assert_eq!(
            d.rotation(7).unwrap().unwrap().modes[0],
            RotationMode::Detached
        );
        assert_eq!(r.block, std::time::Duration::from_millis(250));
        assert_eq!(r.order.len() % 3, 0);
        for round in r.order.chunks(3).take(1000) {
            let mut x = round.to_vec();
            x.sort_unstable();
            assert_eq!(x, vec![0, 1, 2]);
        }
        // The same seed, the same order: a re-run rotates alike.
        assert_eq!(m.rotation(7).unwrap().unwrap().order[..30], r.order[..30]);
        assert!(section("kind = \"udp\"").rotation(7).unwrap().is_none());
    }

    #[test]
    fn sample_defaults_to_the_seeds_windows() {
        assert_eq!(
            section("kind = \"udp\"").sample().unwrap(),
            Sample::Windows {
                packets: 10,
                mean_interval_s: 0.2
            }
        );
        assert_eq!(
            section("kind = \"udp\"\nsample = \"all\"")
                .sample()
                .unwrap(),
            Sample::All
        );
    }
}
