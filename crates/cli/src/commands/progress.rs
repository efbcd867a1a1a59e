//! How `nflab run` shows a study's events: a progress bar on a terminal
//! (indicatif) and JSON lines for `--events FILE|-` (schema in
//! docs/experiments.md, "Events").

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nflab_lab::artifacts::events::{Event, Observer};

/// Short figure of a rate ("12.3 kpps").
fn pps(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} Mpps", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} kpps", v / 1e3)
    } else {
        format!("{v:.0} pps")
    }
}

/// The progress bar of a study on stderr: run i of N, ETA, and the current
/// run's offered/received rate and loss.
pub struct Bar {
    bar: ProgressBar,
    /// What each run in progress last said, by run name: with host pairs
    /// several runs go at once, and each keeps its place on the line.
    /// The value is (" on PAIR" or "", the run's latest figures).
    active: Mutex<std::collections::BTreeMap<String, (String, String)>>,
}

impl Bar {
    /// A bar drawn on stderr (which must be a terminal: the caller checks).
    pub fn new() -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(8));
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} run {pos}/{len} [{bar:20}] {elapsed_precise} ETA {eta}  {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Bar {
            bar,
            active: Mutex::default(),
        }
    }

    /// Set (or with `None` drop) what `run` says, and show every active run.
    fn say(&self, run: &str, what: Option<String>) {
        let Ok(mut active) = self.active.lock() else {
            return;
        };
        match what {
            Some(w) => active.entry(run.to_string()).or_default().1 = w,
            None => drop(active.remove(run)),
        };
        let line: Vec<String> = active
            .iter()
            .map(|(run, (on, what))| format!("run {run}{on}: {what}"))
            .collect();
        self.bar.set_message(line.join(" | "));
    }

    /// Remember which pair runs `run`, for its later progress lines.
    fn on_pair(&self, run: &str, pair: &Option<String>) {
        if let Ok(mut active) = self.active.lock() {
            active.entry(run.to_string()).or_default().0 = pair
                .as_ref()
                .map(|p| format!(" on {p}"))
                .unwrap_or_default();
        }
    }
}

impl Observer for Bar {
    fn on(&self, event: &Event) {
        match event {
            Event::StudyStart { runs, pairs, .. } => {
                if let Some(n) = runs {
                    self.bar.set_length(*n as u64);
                }
                if *pairs > 1 {
                    self.bar.println(format!("{pairs} host pairs"));
                }
            }
            Event::RunStart {
                run,
                dut,
                offered_pps,
                pair,
                ..
            } => {
                self.on_pair(run, pair);
                self.say(run, Some(format!("{dut}, offered {}", pps(*offered_pps))));
            }
            Event::Progress {
                run,
                offered_pps,
                rx_pps,
                loss_ratio,
                ..
            } => {
                self.say(
                    run,
                    Some(format!(
                        "offered {}, received {}, loss {:.2} %",
                        pps(*offered_pps),
                        pps(*rx_pps),
                        loss_ratio * 100.0
                    )),
                );
            }
            Event::RunEnd {
                run,
                status,
                sent,
                received,
                loss_ratio,
                latency_p50_ns,
                pair,
                error,
                ..
            } => {
                self.bar.inc(1);
                self.say(run, None);
                if status == "resumed" {
                    // Kept runs took no time: the ETA counts the runs done now.
                    self.bar.reset_eta();
                    return;
                }
                let on = pair.as_ref().map(|p| format!(" ({p})")).unwrap_or_default();
                let line = match error {
                    Some(e) => format!("run {run}{on}: failed: {e}"),
                    None => format!(
                        "run {run}{on}: {status}, {received}/{sent} received, loss {:.3} %, p50 {}",
                        loss_ratio * 100.0,
                        latency_p50_ns
                            .map(|n| nflab_lab::study::results::short_ns(n.max(0) as u64))
                            .unwrap_or_else(|| "-".into())
                    ),
                };
                self.bar.println(line);
            }
            Event::StudyEnd { .. } => self.bar.finish_and_clear(),
        }
    }
}

/// `--events`: one JSON object per line, flushed as it happens.
pub struct JsonLines {
    out: Mutex<Box<dyn Write + Send>>,
}

impl JsonLines {
    /// To a file, or stdout for "-".
    pub fn open(dest: &Path) -> anyhow::Result<JsonLines> {
        let out: Box<dyn Write + Send> = if events_to_stdout(dest) {
            Box::new(std::io::stdout())
        } else {
            Box::new(std::fs::File::create(dest).with_context(|| {
                format!(
                    "--events {}: cannot create the file; give a writable path or - for stdout",
                    dest.display()
                )
            })?)
        };
        Ok(JsonLines {
            out: Mutex::new(out),
        })
    }
}

impl Observer for JsonLines {
    fn on(&self, event: &Event) {
        let Ok(line) = serde_json::to_string(event) else {
            return;
        };
        if let Ok(mut out) = self.out.lock() {
            // A reader that went away (a closed pipe) must not stop the study.
            let _ = writeln!(out, "{line}").and_then(|_| out.flush());
        }
    }
}

/// The observers of `nflab run`: the bar when stderr is a terminal, and the
/// Whether `--events DEST` means standard output: `jsonl` (the format's name,
/// as issue #21 spells the flag) or `-`.
pub fn events_to_stdout(dest: &Path) -> bool {
    dest.as_os_str() == "-" || dest.as_os_str() == "jsonl"
}

/// JSON lines when asked for.
pub fn observers(
    terminal: bool,
    events: Option<&Path>,
) -> anyhow::Result<nflab_lab::artifacts::events::Observers> {
    let mut v: Vec<Arc<dyn Observer>> = Vec::new();
    if terminal {
        v.push(Arc::new(Bar::new()));
    }
    if let Some(dest) = events {
        v.push(Arc::new(JsonLines::open(dest)?));
    }
    Ok(nflab_lab::artifacts::events::Observers(v))
}
