//! Reading an artifact tree (DESIGN §3.2) into what the figures need.
//!
//! Nothing here fails on a damaged tree: every missing or unreadable file
//! becomes a sentence in `problems`, and the figures draw what exists. The
//! summary files are read as plain JSON, so a summary written by an older or
//! newer nflab still shows whatever keys it has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nflab_analyze::{Analysis, AnomalyDetail, AnomalySpec, Distribution, Format, Options};
use serde_json::Value;

/// Latencies held one by one per run before its distribution becomes an
/// HDR histogram: `nflab analyze`'s default, so the report's numbers are
/// the command's.
pub const EXACT_PACKETS: u64 = nflab_analyze::dist::DEFAULT_EXACT_LIMIT;

/// Packets marked as the worst of each run.
pub const WORST_N: usize = 500;

/// Anomalies listed per run and definition (all are counted).
pub const MAX_ANOMALIES: usize = 100_000;

/// Time slices per run of the latency-over-time series (min and max each).
pub const TIME_SLICES: u64 = 16_384;

/// One packet as the figures see it.
#[derive(Debug, Clone, Copy)]
pub struct Pkt {
    /// Transmit time, ns since the first measured transmit of the run.
    pub t_ns: u64,
    /// One-way latency, ns (`rx_ns - tx_ns`).
    pub lat_ns: i64,
    /// Sequence number.
    pub seq: u64,
    /// Flow.
    pub flow: u16,
}

/// One anomaly as the timeline draws it (times since the run's first
/// measured transmit).
#[derive(Debug, Clone, PartialEq)]
pub struct Anomaly {
    /// Flow.
    pub flow: u16,
    /// Transmit time of its first packet, ns.
    pub t0_ns: u64,
    /// Transmit time of its last received packet, ns.
    pub t1_ns: u64,
    /// Packets in it.
    pub packets: u64,
    /// Highest latency in it, ns.
    pub max_ns: Option<i64>,
}

/// One time window: `(t0_ns, p50, p99, max, packets)`, `t0` since the
/// run's first measured transmit.
pub type Window = (u64, f64, f64, f64, u64);

/// The engine's analysis of one run's records (warm-up excluded, first
/// copies only), and the file's provenance.
#[derive(Debug)]
pub struct RunData {
    /// Measured packets: received after warm-up, first copies.
    pub n: u64,
    /// Transmit time of the last measured packet, ns after the first.
    pub span_ns: u64,
    /// Transmit time of the first measured packet (engine clock), ns.
    pub t0_ns: u64,
    /// Everything `nflab analyze` computes of the records.
    pub analysis: Analysis,
    /// Width of a series slice, ns.
    pub slice_ns: u64,
    /// Clock source of the timestamps.
    pub clock: String,
    /// Clock resolution, ns.
    pub resolution_ns: u64,
    /// How tx timestamps were taken.
    pub tx_ts: String,
    /// How rx timestamps were taken.
    pub rx_ts: String,
    /// Packets sent per flow after warm-up, when the trailer has them.
    pub sent: Option<u64>,
    /// `analysis.summary` as JSON, for reading numbers by pointer.
    pub summary_json: Value,
}

impl RunData {
    /// The latency distribution (exact, or HDR beyond [`EXACT_PACKETS`]).
    pub fn lat(&self) -> &Distribution {
        &self.analysis.latency
    }

    /// Min/max latency per column of `span_ns / cols` transmit time:
    /// `(t0_ns, t1_ns, min, max)` per non-empty column, assembled from the
    /// engine's time slices (each placed by its midpoint).
    pub fn columns(&self, span_ns: u64, cols: usize) -> Vec<(f64, f64, f64, f64)> {
        let cols = cols.max(1);
        let w = (span_ns as f64 / cols as f64).max(1.0);
        let mut mm: Vec<(i64, i64)> = vec![(i64::MAX, i64::MIN); cols];
        for s in &self.analysis.series {
            let mid = s.start_ns.saturating_sub(self.t0_ns) as f64 + self.slice_ns as f64 / 2.0;
            let c = ((mid / w) as usize).min(cols - 1);
            mm[c] = (mm[c].0.min(s.min_ns), mm[c].1.max(s.max_ns));
        }
        mm.iter()
            .enumerate()
            .filter(|(_, e)| e.0 <= e.1)
            .map(|(i, e)| (i as f64 * w, (i + 1) as f64 * w, e.0 as f64, e.1 as f64))
            .collect()
    }

    /// The `n` (at most [`WORST_N`]) packets of highest latency, in time order.
    pub fn worst(&self, n: usize) -> Vec<Pkt> {
        let mut w = self.analysis.summary.worst.clone();
        w.sort_by_key(|p| std::cmp::Reverse(p.latency_ns));
        w.truncate(n);
        let mut v: Vec<Pkt> = w
            .iter()
            .map(|p| Pkt {
                t_ns: p.tx_ns.saturating_sub(self.t0_ns),
                lat_ns: p.latency_ns,
                seq: p.seq,
                flow: p.flow,
            })
            .collect();
        v.sort_by_key(|p| (p.t_ns, p.flow, p.seq));
        v
    }

    /// The engine's windows with packets, as `(t0_ns, p50, p99, max, packets)`.
    pub fn windows(&self) -> Vec<Window> {
        self.analysis
            .summary
            .windows
            .iter()
            .filter_map(|w| {
                Some((
                    w.start_ns.saturating_sub(self.t0_ns),
                    w.p50_ns? as f64,
                    w.p99_ns? as f64,
                    w.max_ns? as f64,
                    w.packets,
                ))
            })
            .collect()
    }

    /// The engine's result for anomaly definition `k` of the experiment.
    pub fn anomaly_detail(&self, k: usize) -> Option<&AnomalyDetail> {
        self.analysis.summary.anomaly_details.get(k)
    }

    /// Anomalies of definition `k` in start order, and how many more were
    /// counted than listed.
    pub fn anomalies(&self, k: usize) -> (Vec<Anomaly>, u64) {
        let Some(d) = self.anomaly_detail(k) else {
            return (Vec::new(), 0);
        };
        let mut v: Vec<Anomaly> = d
            .events
            .iter()
            .map(|a| {
                let t0 = a
                    .start_tx_ns
                    .unwrap_or(self.t0_ns)
                    .saturating_sub(self.t0_ns);
                Anomaly {
                    flow: a.flow,
                    t0_ns: t0,
                    t1_ns: t0 + a.duration_ns,
                    packets: a.packets,
                    max_ns: a.peak_ns,
                }
            })
            .collect();
        v.sort_by_key(|a| (a.t0_ns, a.flow));
        (v, d.count.saturating_sub(d.events.len() as u64))
    }
}

/// One run directory.
#[derive(Debug)]
pub struct Run {
    /// Directory name (`000`, `001`, ...).
    pub name: String,
    /// `params.json`.
    pub params: Value,
    /// `summary.json`, if present and valid JSON.
    pub summary: Option<Value>,
    /// `gen.json`, if present.
    pub gen: Option<Value>,
    /// Records, if any could be read.
    pub data: Option<RunData>,
    /// What is missing or wrong, one sentence each.
    pub problems: Vec<String>,
    /// Index of the run configuration in [`Experiment::configs`].
    pub config: usize,
    /// The dumps of the run's `[capture]` (`capture/capture.json`), if any.
    pub dumps: Vec<DumpRef>,
}

/// One pcapng dump of a run's capture: the packets received in a window.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpRef {
    /// Path relative to the experiment directory.
    pub file: String,
    /// Start of the receive-time window, ns (the recorder's clock).
    pub from_ns: u64,
    /// End of the window, ns.
    pub to_ns: u64,
    /// Packets in the file.
    pub packets: u64,
}

/// The dumps listed in `run/capture/capture.json` (none when there is no capture).
fn load_dumps(dir: &Path, name: &str, problems: &mut Vec<String>) -> Vec<DumpRef> {
    let v = match read_json(&dir.join("capture").join("capture.json")) {
        Ok(Some(v)) => v,
        Ok(None) => return Vec::new(),
        Err(e) => {
            problems.push(e);
            return Vec::new();
        }
    };
    let dumps = v.get("dumps").and_then(Value::as_array);
    dumps
        .into_iter()
        .flatten()
        .filter_map(|d| {
            Some(DumpRef {
                file: format!("runs/{name}/capture/{}", d.get("file")?.as_str()?),
                from_ns: d.get("from_ns")?.as_u64()?,
                to_ns: d.get("to_ns")?.as_u64()?,
                packets: d.get("packets")?.as_u64()?,
            })
        })
        .collect()
}

/// Runs that share all parameters except the repetition.
#[derive(Debug, Clone)]
pub struct Config {
    /// Short label, e.g. `loopback · 10 kpps`.
    pub label: String,
    /// The swept values, `key → value`.
    pub sweep: BTreeMap<String, Value>,
    /// Indices into [`Experiment::runs`].
    pub runs: Vec<usize>,
}

/// A whole artifact tree.
#[derive(Debug)]
pub struct Experiment {
    /// The directory.
    pub dir: PathBuf,
    /// Directory name.
    pub name: String,
    /// `spec.toml` as run.
    pub spec_text: Option<String>,
    /// `spec.toml` parsed.
    pub spec: Option<toml::Table>,
    /// `env.json`.
    pub env: Value,
    /// Runs in name order.
    pub runs: Vec<Run>,
    /// Run configurations in order of first appearance.
    pub configs: Vec<Config>,
    /// Experiment-level problems.
    pub problems: Vec<String>,
    /// Length of the time windows every run was analysed with, ns.
    pub window_ns: u64,
}

impl Experiment {
    /// Clock source and resolution, from env.json or the first run's records.
    pub fn clock(&self) -> (String, u64) {
        let mut src = self
            .env
            .get("clock_source")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut res = self.env.get("clock_resolution_ns").and_then(Value::as_u64);
        if let Some(d) = self.runs.iter().find_map(|r| r.data.as_ref()) {
            if src.is_none() && !d.clock.is_empty() {
                src = Some(d.clock.clone());
            }
            if res.is_none() && d.resolution_ns > 0 {
                res = Some(d.resolution_ns);
            }
        }
        (
            src.unwrap_or_else(|| "an unrecorded clock".into()),
            res.unwrap_or(0),
        )
    }

    /// How the timestamps were taken, e.g. `kernel-software` rx, `application` tx.
    pub fn timestamping(&self) -> (String, String) {
        self.runs
            .iter()
            .find_map(|r| r.data.as_ref())
            .map(|d| (d.tx_ts.clone(), d.rx_ts.clone()))
            .unwrap_or_else(|| ("?".into(), "?".into()))
    }

    /// The sweep keys (in spec order when known).
    pub fn sweep_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        if let Some(sw) = self
            .spec
            .as_ref()
            .and_then(|s| s.get("sweep"))
            .and_then(|v| v.as_table())
        {
            keys.extend(sw.keys().cloned());
        }
        for c in &self.configs {
            for k in c.sweep.keys() {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        keys
    }
}

fn read_json(path: &Path) -> Result<Option<Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(s) => serde_json::from_str(&s)
            .map(Some)
            .map_err(|e| format!("{} is not valid JSON ({e})", file_name(path))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{} cannot be read ({e})", file_name(path))),
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The anomaly definitions of the first run that names any
/// (`analysis.anomalies` of its parameters); one a definition cannot parse is skipped.
fn anomaly_specs<'a>(params: impl Iterator<Item = &'a Value>) -> Vec<AnomalySpec> {
    params
        .filter_map(|p| p.pointer("/analysis/anomalies")?.as_array().cloned())
        .next()
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str()?.parse().ok())
        .collect()
}

impl Experiment {
    /// The experiment's anomaly definitions, as the records are analysed with.
    pub fn anomaly_specs(&self) -> Vec<AnomalySpec> {
        anomaly_specs(self.runs.iter().map(|r| &r.params))
    }
}

/// Does `dir` look like an artifact tree?
pub fn is_experiment(dir: &Path) -> bool {
    dir.join("spec.toml").is_file() || dir.join("runs").is_dir()
}

/// Read the tree. Never fails: problems are collected.
pub fn load(dir: &Path) -> Experiment {
    load_with(dir, EXACT_PACKETS)
}

/// [`load`], with distributions exact up to `exact_packets` latencies per
/// run and HDR histograms beyond.
pub fn load_with(dir: &Path, exact_packets: u64) -> Experiment {
    let mut problems = Vec::new();
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_else(|| dir.display().to_string());
    let spec_text = std::fs::read_to_string(dir.join("spec.toml")).ok();
    if spec_text.is_none() {
        problems.push("spec.toml is missing: the experiment's declaration is not shown".into());
    }
    let spec = spec_text
        .as_deref()
        .and_then(|s| match s.parse::<toml::Table>() {
            Ok(t) => Some(t),
            Err(e) => {
                problems.push(format!("spec.toml does not parse ({e})"));
                None
            }
        });
    let env = match read_json(&dir.join("env.json")) {
        Ok(Some(v)) => v,
        Ok(None) => {
            problems.push("env.json is missing: host and provenance are unknown".into());
            Value::Null
        }
        Err(e) => {
            problems.push(e);
            Value::Null
        }
    };
    let mut run_dirs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    run_dirs.sort();
    if run_dirs.is_empty() {
        problems.push("runs/ is missing or empty: the experiment produced no run".into());
    }
    let planned = read_json(&dir.join("plan.json"))
        .ok()
        .flatten()
        .and_then(|p| p.get("runs").and_then(Value::as_u64));
    if let Some(n) = planned.filter(|n| *n > run_dirs.len() as u64) {
        problems.push(format!(
            "the spec plans {n} runs and {} are here: the experiment stopped before run {:03} (`nflab run --resume {}` finishes it)",
            run_dirs.len(),
            run_dirs.len(),
            dir.display()
        ));
    }
    let mut runs: Vec<(Run, bool)> = run_dirs.iter().map(|d| load_run(d)).collect();

    // Group runs into configurations by their swept values (or, without a
    // sweep, by everything except repetition, run name and seed).
    let mut configs: Vec<Config> = Vec::new();
    for (i, (r, _)) in runs.iter_mut().enumerate() {
        let sweep: BTreeMap<String, Value> = match r.params.get("sweep").and_then(Value::as_object)
        {
            Some(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            None => BTreeMap::new(),
        };
        let idx = match configs.iter().position(|c| c.sweep == sweep) {
            Some(p) => p,
            None => {
                configs.push(Config {
                    label: String::new(),
                    sweep: sweep.clone(),
                    runs: Vec::new(),
                });
                configs.len() - 1
            }
        };
        configs[idx].runs.push(i);
        r.config = idx;
    }
    // Records last, each in one pass of the engine with the experiment's
    // anomaly definitions and one window length for all runs.
    let specs = anomaly_specs(runs.iter().map(|(r, _)| &r.params));
    let spans: Vec<u64> = run_dirs
        .iter()
        .map(|d| {
            nflab_record::prescan(&d.join("records.nfr"))
                .and_then(|p| p.span)
                .map_or(0, |(a, b)| b.saturating_sub(a))
        })
        .collect();
    let window_ns = window_for(spans.iter().copied().max().unwrap_or(0));
    for (((r, has_files), d), span) in runs.iter_mut().zip(&run_dirs).zip(&spans) {
        if !*has_files {
            continue;
        }
        let opts = engine_options(exact_packets, window_ns, *span);
        r.data = load_records(&d.join("records.nfr"), &mut r.problems, &specs, &opts);
    }
    let mut e = Experiment {
        dir: dir.to_path_buf(),
        name,
        spec_text,
        spec,
        env,
        runs: runs.into_iter().map(|(r, _)| r).collect(),
        configs,
        problems,
        window_ns,
    };
    let keys = e.sweep_keys();
    let dut_default = e
        .spec
        .as_ref()
        .and_then(|s| s.get("dut"))
        .and_then(|d| d.get("kind"))
        .and_then(|k| k.as_str())
        .map(str::to_string);
    for c in &mut e.configs {
        let parts: Vec<String> = keys
            .iter()
            .filter_map(|k| c.sweep.get(k).map(|v| fmt_param(k, v)))
            .collect();
        c.label = if parts.is_empty() {
            dut_default.clone().unwrap_or_else(|| "all runs".into())
        } else {
            parts.join(" · ")
        };
    }
    e
}

/// A swept value, short: rates as kpps, strings as they are.
pub fn fmt_param(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            if key.ends_with("_pps") {
                crate::svg::fmt_pps(f)
            } else if key.ends_with("_bytes") {
                format!("{} B", crate::svg::fmt_num(f))
            } else if key.ends_with("_us") {
                format!("{} µs", crate::svg::fmt_num(f))
            } else {
                let short = key.rsplit('.').next().unwrap_or(key);
                format!("{short}={}", crate::svg::fmt_num(f))
            }
        }
        other => {
            let short = key.rsplit('.').next().unwrap_or(key);
            format!("{short}={other}")
        }
    }
}

/// A run directory without its records; `false` when it is empty.
fn load_run(dir: &Path) -> (Run, bool) {
    let name = file_name(dir);
    let mut problems = Vec::new();
    let params = match read_json(&dir.join("params.json")) {
        Ok(Some(v)) => v,
        Ok(None) => {
            problems.push("params.json is missing, so its parameters are unknown".into());
            Value::Null
        }
        Err(e) => {
            problems.push(e);
            Value::Null
        }
    };
    let summary = match read_json(&dir.join("summary.json")) {
        Ok(Some(v)) => {
            if v.get("interrupted").and_then(Value::as_bool) == Some(true) {
                problems.push(
                    "the run was interrupted (Ctrl-C or a signal): its row and figures hold \
                     the packets recorded before the stop"
                        .into(),
                );
            }
            Some(v)
        }
        Ok(None) => {
            problems.push(
                "summary.json is missing: the run did not finish (interrupted or failed); \
                 its figures are drawn from the records that were written"
                    .into(),
            );
            None
        }
        Err(e) => {
            problems.push(e);
            None
        }
    };
    let gen = read_json(&dir.join("gen.json")).ok().flatten();
    let empty = std::fs::read_dir(dir)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false);
    if empty {
        let r = Run {
            name,
            params,
            summary: None,
            gen: None,
            data: None,
            problems: vec!["the run directory is empty: the run never started".into()],
            config: 0,
            dumps: Vec::new(),
        };
        return (r, false);
    }
    let dumps = load_dumps(dir, &name, &mut problems);
    let r = Run {
        name,
        params,
        summary,
        gen,
        data: None,
        problems,
        config: 0,
        dumps,
    };
    (r, true)
}

/// About 60 windows over a run of `span_ns`, a 1-2-5 number of milliseconds
/// (at least 1 µs).
pub fn window_for(span_ns: u64) -> u64 {
    (crate::svg::nice_step(span_ns.max(1) as f64 / 60.0 / 1e6) * 1e6).max(1e3) as u64
}

/// What the report asks of the engine for one run of `span_ns` (prescan):
/// the options of [`analyze_command`] plus the drawing-only series and
/// tx gaps, which do not change the summary.
pub fn engine_options(exact_limit: u64, window_ns: u64, span_ns: u64) -> Options {
    Options {
        exact_limit,
        worst_n: WORST_N,
        window_ns: Some(window_ns),
        anomaly_events: MAX_ANOMALIES,
        series_ns: Some(span_ns.div_ceil(TIME_SLICES).max(1)),
        tx_gaps: true,
        ..Options::default()
    }
}

/// The `nflab analyze` command whose `--json` output is, field by field,
/// the summary the report drew a run from (append the run's records.nfr).
pub fn analyze_command(e: &Experiment) -> String {
    let mut c = format!(
        "nflab analyze --json --worst {WORST_N} --window {}ns --anomaly-events {MAX_ANOMALIES}",
        e.window_ns
    );
    let specs = e.anomaly_specs();
    if specs.is_empty() {
        // Without it the CLI would add its default definitions.
        c.push_str(" --no-anomalies");
    }
    for a in specs {
        c.push_str(&format!(" --anomaly {a}"));
    }
    c
}

fn load_records(
    path: &Path,
    problems: &mut Vec<String>,
    specs: &[AnomalySpec],
    opts: &Options,
) -> Option<RunData> {
    if !path.exists() {
        problems.push("records.nfr is missing: no per-packet figure for this run".into());
        return None;
    }
    let meta = match nflab_record::RecordReader::open(path) {
        Ok(r) => r.metadata().clone(),
        Err(e) => {
            problems.push(format!("records.nfr is unreadable ({e})"));
            return None;
        }
    };
    let cfg = nflab_analyze::AnalysisConfig {
        anomalies: specs.to_vec(),
        ..Default::default()
    };
    let fa = match nflab_analyze::analyze_file_with(path, &cfg, opts, Some(Format::Nfr)) {
        Ok(fa) => fa,
        Err(e) => {
            problems.push(format!("records.nfr could not be analysed ({e})"));
            return None;
        }
    };
    let read = fa.analysis.summary.packets.received;
    match &fa.tail {
        nflab_record::TailState::Complete => {}
        nflab_record::TailState::NoTrailer => problems.push(format!(
            "records.nfr has no trailer: the recorder stopped between blocks, so sent counts and warm-up are unknown; the {read} records written are shown"
        )),
        nflab_record::TailState::Truncated {
            discarded_bytes,
            reason,
        } => problems.push(format!(
            "records.nfr is cut off ({reason}; {discarded_bytes} bytes ignored): the {read} packets before the cut are shown"
        )),
    }
    let s = &fa.analysis.summary;
    if let Some(r) = s.reorder.as_ref().filter(|r| r.beyond_window > 0) {
        problems.push(format!(
            "{} packets arrived more than the reorder window late: they count as lost (docs/metrics.md § Reordering)",
            r.beyond_window
        ));
    }
    let sent = matches!(fa.tail, nflab_record::TailState::Complete).then_some(s.packets.sent);
    let span = s.span.unwrap_or_default();
    let t0_ns = span.first_tx_ns.unwrap_or(0);
    let n = s.packets.received;
    if n == 0 {
        problems.push("no packet was received (100 % loss or an empty record file): nothing to draw for this run".into());
    }
    Some(RunData {
        n,
        span_ns: span.last_tx_ns.unwrap_or(t0_ns).saturating_sub(t0_ns),
        t0_ns,
        slice_ns: opts.series_ns.unwrap_or(1),
        summary_json: serde_json::to_value(&fa.analysis.summary).unwrap_or(Value::Null),
        analysis: fa.analysis,
        clock: meta.clock.source.clone(),
        resolution_ns: meta.clock.resolution_ns,
        tx_ts: meta.tx_timestamp.clone(),
        rx_ts: meta.rx_timestamp.clone(),
        sent,
    })
}

/// A number at a JSON pointer.
pub fn f(v: &Value, ptr: &str) -> Option<f64> {
    v.pointer(ptr).and_then(Value::as_f64)
}

impl Run {
    /// A summary number, e.g. `num("/latency_ns/p99")`: the engine's
    /// analysis of the records, else the run's summary.json (for what the
    /// records do not hold, such as the offered rate).
    pub fn num(&self, ptr: &str) -> Option<f64> {
        self.data
            .as_ref()
            .and_then(|d| f(&d.summary_json, ptr))
            .or_else(|| self.summary.as_ref().and_then(|s| f(s, ptr)))
    }

    /// Offered rate: summary, else params.
    pub fn offered_pps(&self) -> Option<f64> {
        self.num("/rate/offered_pps")
            .or_else(|| f(&self.params, "/traffic/rate_pps"))
    }

    /// DuT kind from params.
    pub fn dut(&self) -> String {
        self.params
            .pointer("/dut/kind")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    }

    /// Received packets, from records when there is no summary.
    pub fn received(&self) -> Option<f64> {
        self.num("/packets/received")
            .or_else(|| self.data.as_ref().map(|d| d.n as f64))
    }
}
