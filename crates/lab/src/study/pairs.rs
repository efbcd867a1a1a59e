//! A study's runs spread over the `[[pair]]`s of the spec, pos-style: one
//! worker per pair takes the next run not yet done, sets the pair's DuT up
//! over SSH, has the pair's LoadGen host send and record it (`nflab remote
//! loadgen`, [`crate::run::loadgen`]), fetches the run's files into
//! `runs/NNN/`, removes the DuT set-up and the LoadGen's scratch copy, and
//! records the pair in `runs/NNN/pair.json`. Runs complete from an earlier
//! invocation are kept (`--resume`), whichever pair ran them.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nflab_analyze::Summary;
use nflab_wire::MacAddr;

use crate::artifacts::events::{Event, Observers};
use crate::artifacts::files::{write_file, write_json};
use crate::error::LabError;
use crate::hosts::remote_dut::RemoteDut;
use crate::spec::hosts::HostEntry;
use crate::spec::pairs::PairEntry;
use crate::spec::{DutKind, RunPlan, Spec};
use crate::study::events::run_start;
use crate::study::results::RunRow;
use crate::study::tree::{completed_summary, params_json, run_dir, same_params, COMPLETE_MARKER};

/// File of a run naming the pair that ran it.
pub const PAIR_FILE: &str = "pair.json";

/// What the pairs did.
#[derive(Debug, Default)]
pub struct PairsOutcome {
    /// One row per completed run, in run order.
    pub rows: Vec<RunRow>,
    /// Runs kept from an earlier invocation.
    pub resumed: usize,
    /// A signal stopped the study.
    pub interrupted: bool,
    /// The first run that failed, which stopped the study.
    pub error: Option<LabError>,
}

/// The pair recorded in a run directory.
pub fn recorded_pair(run_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(run_dir.join(PAIR_FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["pair"].as_str().map(str::to_string)
}

/// Every run of `plans` on the pairs of `spec`, in parallel.
pub fn run_on_pairs(
    spec: &Spec,
    plans: &[RunPlan],
    dir: &Path,
    events: &Observers,
    stop: &Arc<AtomicBool>,
) -> PairsOutcome {
    let mut out = PairsOutcome::default();
    let mut todo = VecDeque::new();
    for plan in plans {
        let rd = run_dir(dir, plan.index);
        match completed_summary(&rd).filter(|_| same_params(&rd, plan)) {
            Some(summary) => {
                let pair = recorded_pair(&rd);
                events.emit(&run_start(plan, pair.clone()));
                events.emit(&Event::run_end(
                    &format!("{:03}", plan.index),
                    "resumed",
                    &summary,
                    pair.clone(),
                ));
                out.resumed += 1;
                out.rows.push(RunRow::new(plan, &summary).with_pair(pair));
            }
            None => todo.push_back(plan),
        }
    }
    let todo = Mutex::new(todo);
    let rows = Mutex::new(Vec::new());
    let first_error: Mutex<Option<LabError>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let interrupted = AtomicBool::new(false);
    std::thread::scope(|s| {
        for pair in &spec.pair {
            let (todo, rows, first_error, failed, interrupted) =
                (&todo, &rows, &first_error, &failed, &interrupted);
            s.spawn(move || {
                let fail = |e: LabError| {
                    failed.store(true, Ordering::Relaxed);
                    if let Ok(mut f) = first_error.lock() {
                        f.get_or_insert(e);
                    }
                };
                let macs = match loadgen_macs(&pair.loadgen) {
                    Ok(m) => m,
                    Err(e) => return fail(e),
                };
                // The pair's DuT between runs (topology.keep); taken down on drop.
                let mut kept = None;
                loop {
                    if stop.load(Ordering::Relaxed) {
                        interrupted.store(true, Ordering::Relaxed);
                        return;
                    }
                    if failed.load(Ordering::Relaxed) {
                        return;
                    }
                    let Some(plan) = todo.lock().ok().and_then(|mut q| q.pop_front()) else {
                        return;
                    };
                    match run_on_pair(&mut kept, plan, pair, macs, dir, events, stop) {
                        Ok(row) => {
                            if row.summary.interrupted {
                                interrupted.store(true, Ordering::Relaxed);
                            }
                            if let Ok(mut r) = rows.lock() {
                                r.push(row);
                            }
                        }
                        Err(e) => return fail(e),
                    }
                }
            });
        }
    });
    out.rows.extend(rows.into_inner().unwrap_or_default());
    out.rows.sort_by(|a, b| a.run.cmp(&b.run));
    out.interrupted = interrupted.load(Ordering::Relaxed);
    out.error = first_error.into_inner().unwrap_or_default();
    out
}

/// `nflab remote info` of every host of `pairs`, asked in parallel, keyed
/// `<pair>.loadgen` and `<pair>.dut`.
pub fn host_infos(pairs: &[PairEntry]) -> Result<Vec<(String, serde_json::Value)>, LabError> {
    std::thread::scope(|s| {
        let asks: Vec<_> = pairs
            .iter()
            .flat_map(|p| [(p, "loadgen", &p.loadgen), (p, "dut", &p.dut)])
            .map(|(p, role, host)| {
                let key = format!("{}.{role}", p.name);
                (key, p, s.spawn(move || host.remote(&["info"])))
            })
            .collect();
        asks.into_iter()
            .map(|(key, p, h)| {
                let info = h
                    .join()
                    .unwrap_or_else(|_| Err(LabError::Other("a host query panicked".into())));
                info.map(|v| (key, v)).map_err(|e| match e {
                    LabError::Host(m) => LabError::Host(format!("pair {:?}: {m}", p.name)),
                    other => other,
                })
            })
            .collect()
    })
}

/// MACs of the LoadGen's interfaces, asked on its host.
fn loadgen_macs(lg: &HostEntry) -> Result<(MacAddr, MacAddr), LabError> {
    let mut args = vec![
        "lg-macs",
        "--tx",
        lg.tx_iface.as_deref().unwrap_or(""),
        "--rx",
        lg.rx_iface.as_deref().unwrap_or(""),
    ];
    if let Some(ns) = &lg.netns {
        args.extend(["--netns", ns.as_str()]);
    }
    let v = lg.remote(&args)?;
    let mac = |k: &str| -> Result<MacAddr, LabError> {
        v[k].as_str().and_then(|s| s.parse().ok()).ok_or_else(|| {
            LabError::Host(format!(
                "host {} answered lg-macs without a valid {k}",
                lg.address
            ))
        })
    };
    Ok((mac("tx_mac")?, mac("rx_mac")?))
}

/// One run on one pair, into `runs/NNN/`.
fn run_on_pair(
    kept: &mut Option<(DutKind, RemoteDut)>,
    plan: &RunPlan,
    pair: &PairEntry,
    (tx_mac, rx_mac): (MacAddr, MacAddr),
    dir: &Path,
    events: &Observers,
    stop: &AtomicBool,
) -> Result<RunRow, LabError> {
    let rd = run_dir(dir, plan.index);
    if rd.exists() {
        std::fs::remove_dir_all(&rd).map_err(|e| LabError::artifact(&rd, e))?;
    }
    std::fs::create_dir_all(&rd).map_err(|e| LabError::artifact(&rd, e))?;
    write_json(&rd.join("params.json"), &params_json(plan))?;
    write_json(
        &rd.join(PAIR_FILE),
        &serde_json::json!({
            "pair": pair.name,
            "loadgen": pair.loadgen.address,
            "dut": pair.dut.address,
        }),
    )?;
    let name = Some(pair.name.clone());
    events.emit(&run_start(plan, name.clone()));
    let result = (|| -> Result<Summary, LabError> {
        if stop.load(Ordering::Relaxed) {
            return Err(LabError::Other("stopped before the run began".into()));
        }
        let kind = plan.spec.dut.kind;
        // topology.keep: the pair's DuT stays set up while its kind stays the same.
        if kept.as_ref().is_none_or(|(k, _)| *k != kind) || !plan.spec.topology.keep {
            *kept = None;
            let setup = crate::dut::driver(kind).remote_setup().ok_or_else(|| {
                LabError::Unsupported(format!(
                    "dut.kind = \"{}\" cannot be set up on a remote host yet",
                    kind.as_str()
                ))
            })?;
            let up = RemoteDut::up(&pair.dut, setup, &tx_mac.to_string(), &rx_mac.to_string())?;
            *kept = Some((kind, up));
        }
        let Some((_, dut)) = kept.as_mut() else {
            unreachable!("a DuT was just set up")
        };
        let dst = dut.probe_dst(rx_mac)?;
        let spec_json = serde_json::to_string(&plan.spec)
            .map_err(|e| LabError::Other(format!("the run's spec as JSON: {e}")))?;
        let run = plan.index.to_string();
        let dst = dst.to_string();
        // One SSH call: the LoadGen sends, records, analyses and streams the files back.
        let mut journal = crate::hosts::owner::journal_host(&pair.loadgen)?;
        let taken = take(
            &pair.loadgen,
            &[
                "--owner",
                crate::hosts::owner::owner_tag(),
                "loadgen",
                "--spec-json",
                &spec_json,
                "--pair",
                &pair.name,
                "--run",
                &run,
                "--dst-mac",
                &dst,
                "--take",
            ],
            &rd,
            events,
        );
        // The call ended (the LoadGen cleaned up after itself, whatever its
        // outcome): only a controller killed during it leaves the entry.
        journal.finish();
        if !plan.spec.topology.keep {
            if let Some((_, mut d)) = kept.take() {
                d.down()?;
            }
        }
        taken?;
        let path = rd.join("summary.json");
        let text = std::fs::read_to_string(&path).map_err(|e| LabError::artifact(&path, e))?;
        serde_json::from_str(&text).map_err(|e| {
            LabError::Other(format!(
                "{}: the LoadGen's summary does not parse: {e}",
                path.display()
            ))
        })
    })();
    let ev = match &result {
        Ok(s) => Event::run_end(
            &format!("{:03}", plan.index),
            if s.interrupted {
                "interrupted"
            } else {
                "complete"
            },
            s,
            name.clone(),
        ),
        Err(e) => Event::run_failed(&format!("{:03}", plan.index), &e.to_string(), name.clone()),
    };
    events.emit(&ev);
    let summary = result.map_err(|e| match e {
        LabError::Host(m) => LabError::Host(format!("pair {:?}: {m}", pair.name)),
        other => other,
    })?;
    if !summary.interrupted {
        write_file(&rd.join(COMPLETE_MARKER), b"")?;
    }
    Ok(RunRow::new(plan, &summary).with_pair(name))
}

/// Run `nflab remote ARGS` on the LoadGen, which streams a run's files
/// ([`crate::run::loadgen::take`]) into `dest`, over one SSH connection; its
/// progress lines on stderr become `progress` events.
fn take(lg: &HostEntry, args: &[&str], dest: &Path, events: &Observers) -> Result<(), LabError> {
    let (mut cmd, _pinned) = lg.remote_command(args)?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::Host(format!("cannot run ssh for host {}: {e}", lg.address)))?;
    let stderr = child.stderr.take();
    let (received, stderr) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            stderr
                .map(|e| relay_progress(e, events))
                .unwrap_or_default()
        });
        let received = match child.stdout.take() {
            Some(out) => crate::run::loadgen::receive(&mut std::io::BufReader::new(out), dest),
            None => Err(LabError::Other("no output pipe".into())),
        };
        (received, reader.join().unwrap_or_default())
    });
    let status = child
        .wait()
        .map_err(|e| LabError::Host(format!("host {}: {e}", lg.address)))?;
    let out = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr: stderr.into_bytes(),
    };
    // The remote's own error says more than a damaged stream.
    lg.check_status(args, &out)?;
    received.map(|_| ())
}

/// Emit the progress lines of a LoadGen's stderr as events; the other lines
/// are returned (the remote's messages).
fn relay_progress(stderr: impl std::io::Read, events: &Observers) -> String {
    use crate::hosts::ssh::{read_line_bounded, Tail, STDERR_TAIL_BYTES};
    use std::io::Write;
    // Lines and what is kept of them are bounded: a remote that writes without
    // end costs this host no more than that.
    let mut input = std::io::BufReader::new(stderr);
    let mut rest = Tail::new(STDERR_TAIL_BYTES);
    while let Ok(Some(line)) = read_line_bounded(&mut input, STDERR_TAIL_BYTES) {
        let line = String::from_utf8_lossy(&line);
        let event = line
            .strip_prefix(crate::run::loadgen::PROGRESS_PREFIX)
            .and_then(|json| serde_json::from_str::<Event>(json).ok());
        match event {
            Some(e @ Event::Progress { .. }) => events.emit(&e),
            _ => {
                let _ = rest.write_all(line.as_bytes());
                let _ = rest.write_all(b"\n");
            }
        }
    }
    String::from_utf8_lossy(&rest.into_bytes()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loadgens_stderr_is_kept_to_its_tail() {
        let mut stderr = vec![b'x'; 10 << 20];
        stderr.extend(b"\nerror: the last line\n");
        let rest = relay_progress(stderr.as_slice(), &Observers::default());
        assert!(
            rest.len() <= crate::hosts::ssh::STDERR_TAIL_BYTES,
            "{}",
            rest.len()
        );
        assert!(
            rest.ends_with("error: the last line\n"),
            "{}",
            &rest[rest.len() - 40..]
        );
    }
}
