//! `[monitor]`: an eBPF monitor inside the DuT during each run
//! ([`nflab_monitor`]), its files in `runs/NNN/`, and the calibration of the UDP
//! monitor against the relay's own times. docs/monitor.md has the keys.

use std::path::Path;

use nflab_analyze::export::{write_parquet, Column, Table};
use nflab_monitor::matcher::MatchMode;
use nflab_monitor::stages::{stages_of, StagesConfig, StagesMonitor, StagesResult};
use nflab_monitor::udp::{Sample, UdpMonitor, UdpMonitorConfig, UdpMonitorResult};
use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::spec::DutKind;
use crate::topology::Topology;

/// `[monitor]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MonitorSection {
    /// "udp" (seed 003's KOMon) or "stages".
    pub kind: String,
    /// udp: "all", "off" or `{ packets = 10, mean_interval_s = 0.2 }` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<SampleSpec>,
    /// udp: "fifo" (default) or "any".
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matching: Option<String>,
    /// udp over a udp-relay: subtract the calibration offset (the constant-delay
    /// run's of the same mean) from every run's sojourn times at the end of the
    /// experiment (`monitor_corrected.parquet`, `monitor.json`'s `offset_subtracted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtract_offset: Option<bool>,
}

/// `monitor.sample`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum SampleSpec {
    /// "all" or "off".
    Word(String),
    /// N packets at exponential intervals.
    Windows {
        /// Packets per sample.
        packets: u32,
        /// Mean interval in s.
        mean_interval_s: f64,
    },
}

fn bad(m: String) -> LabError {
    LabError::Unsupported(m)
}

impl MonitorSection {
    fn sample(&self) -> Result<Sample, LabError> {
        match &self.sample {
            None => Ok(Sample::Windows {
                packets: 10,
                mean_interval_s: 0.2,
            }),
            Some(SampleSpec::Word(w)) if w == "all" => Ok(Sample::All),
            Some(SampleSpec::Word(w)) if w == "off" => Ok(Sample::Off),
            Some(SampleSpec::Word(w)) => Err(bad(format!(
                "monitor.sample = \"{w}\" is unknown: use \"all\", \"off\" or {{ packets = 10, mean_interval_s = 0.2 }}"
            ))),
            Some(SampleSpec::Windows {
                packets,
                mean_interval_s,
            }) => {
                if *packets == 0 || !(mean_interval_s.is_finite() && *mean_interval_s > 0.0) {
                    return Err(bad(format!(
                        "monitor.sample = {{ packets = {packets}, mean_interval_s = {mean_interval_s} }} needs packets >= 1 and mean_interval_s > 0"
                    )));
                }
                Ok(Sample::Windows {
                    packets: *packets,
                    mean_interval_s: *mean_interval_s,
                })
            }
        }
    }

    fn matching(&self) -> Result<MatchMode, LabError> {
        match self.matching.as_deref() {
            None | Some("fifo") => Ok(MatchMode::Fifo),
            Some("any") => Ok(MatchMode::Any),
            Some(o) => Err(bad(format!(
                "monitor.match = \"{o}\" is unknown: use \"fifo\" or \"any\""
            ))),
        }
    }
}

/// Check `[monitor]` against the DuT and this host, before anything starts.
pub fn check(m: &MonitorSection, dut: DutKind) -> Result<(), LabError> {
    match m.kind.as_str() {
        "udp" => {
            m.sample()?;
            m.matching()?;
            if dut != DutKind::UdpRelay {
                return Err(bad(format!(
                    "monitor.kind = \"udp\" watches a UDP VNF in the DuT namespace: it needs dut.kind = \"udp-relay\", not \"{}\"",
                    dut.as_str()
                )));
            }
        }
        "stages" => {
            if m.sample.is_some() || m.matching.is_some() || m.subtract_offset.is_some() {
                return Err(bad(
                    "monitor.sample, monitor.match and monitor.subtract_offset apply to monitor.kind = \"udp\" only".into(),
                ));
            }
            if stages_of(dut.as_str()).is_none() {
                return Err(bad(format!(
                    "monitor.kind = \"stages\" has stages for dut.kind = \"linux-router\", \"linux-bridge\" or \"udp-relay\", not \"{}\"",
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
            port: crate::runner::PROBE_DST_PORT,
            egress_dev: "dut1".into(),
            sample: m.sample()?,
            matching: m.matching()?,
            seed,
        })
        .map(RunningMonitor::Udp)
        .map_err(err),
        _ => StagesMonitor::start(StagesConfig {
            netns,
            ingress_dev: "dut0".into(),
            egress_dev: "dut1".into(),
            stages: stages_of(dut.as_str()).unwrap_or_default().to_vec(),
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
    pub breakdown: Option<crate::stage_breakdown::Breakdown>,
    /// udp: the sojourn times (t_out − t_in) of the pairs and the buffer fill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sojourn: Option<Sojourn>,
    /// udp over a udp-relay: mean(monitor) − mean(relay truth), bootstrapped 95 % CI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<nflab_analyze::bootstrap::Difference>,
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
            Ok(MonitorReport {
                kind: "udp".into(),
                udp: Some(r),
                stages: None,
                breakdown: None,
                sojourn: Some(sojourn_of_r),
                calibration,
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
            let breakdown = crate::stage_breakdown::breakdown(&r, &dir.join("records.nfr"))?;
            Ok(MonitorReport {
                kind: "stages".into(),
                udp: None,
                breakdown: Some(breakdown),
                sojourn: None,
                stages: Some(r),
                calibration: None,
            })
        }
    }
}

/// After the traffic: stop the monitor, then the relay, and write their files
/// (`monitor.json`, `*.parquet`, the relay's `dut.json` and `relay_truth.parquet`).
pub fn stop_relay_and_monitor(
    relay: Option<crate::dut_relay::RelayDut>,
    monitor: Option<RunningMonitor>,
    dir: &Path,
) -> Result<(), LabError> {
    // The monitor stops first: the relay's truth then covers every datagram the
    // monitor saw leave.
    let stopped = monitor.map(|m| match m {
        RunningMonitor::Udp(u) => Stopped::Udp(u.stop()),
        RunningMonitor::Stages(s) => Stopped::Stages(s.stop()),
    });
    let truth = match relay {
        Some(r) => {
            let realtime = r.realtime;
            let (truth, stats) = r.stop()?;
            crate::dut_relay::write_truth(&truth, &dir.join("relay_truth.parquet"))?;
            // The relay's counters, and whether it ran under SCHED_FIFO (dut.realtime).
            let mut dut =
                serde_json::to_value(&stats).map_err(|e| LabError::Other(e.to_string()))?;
            if let Some(o) = dut.as_object_mut() {
                o.insert("realtime".into(), realtime.into());
            }
            write_json(&dir.join("dut.json"), &dut)?;
            Some(truth)
        }
        None => None,
    };
    if let Some(s) = stopped {
        let report = finish_stopped(s, dir, truth.as_deref())?;
        write_json(&dir.join("monitor.json"), &report)?;
    }
    Ok(())
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), LabError> {
    let s = serde_json::to_string_pretty(v).map_err(|e| LabError::Other(e.to_string()))?;
    std::fs::write(path, s + "\n")
        .map_err(|e| LabError::Other(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> MonitorSection {
        toml::from_str(text).expect("monitor section")
    }

    #[test]
    fn bad_monitor_keys_are_one_sentence_naming_them() {
        let e = |m: &str, dut| check(&section(m), dut).unwrap_err().to_string();
        assert!(e("kind = \"kprobe\"", DutKind::UdpRelay)
            .contains("monitor.kind = \"kprobe\" is unknown"));
        assert!(
            e("kind = \"udp\"", DutKind::LinuxRouter).contains("needs dut.kind = \"udp-relay\"")
        );
        assert!(e("kind = \"stages\"", DutKind::Nflab).contains("not \"nflab\""));
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
