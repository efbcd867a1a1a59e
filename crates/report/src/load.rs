//! Reading an artifact tree (DESIGN §3.2) into what the figures need.
//!
//! Nothing here fails on a damaged tree: every missing or unreadable file
//! becomes a sentence in `problems`, and the figures draw what exists. The
//! summary files are read as plain JSON, so a summary written by an older or
//! newer nflab still shows whatever keys it has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::lat::Lat;
use crate::stats::Anomaly;
use crate::stream::{Acc, Plan, Streamed};

/// Packets held per packet (about 40 bytes each) across all runs of an
/// experiment; runs beyond it are streamed into bounded reductions.
pub const EXACT_PACKETS: u64 = 1 << 21;

/// Packets marked as the worst of each run.
pub const WORST_N: usize = 500;

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

/// Records of one run, warm-up excluded, first copies only.
#[derive(Debug)]
pub struct RunData {
    /// Measured packets: received after warm-up, first copies.
    pub n: u64,
    /// Transmit time of the last measured packet, ns after the first.
    pub span_ns: u64,
    /// Latencies: every value, or an HDR histogram for a streamed run.
    pub lat: Lat,
    /// Every packet, or the bounded reductions of a run too long to hold.
    pub detail: Detail,
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
}

/// Per-packet data of a run, or what a single bounded pass kept of it.
#[derive(Debug)]
pub enum Detail {
    /// Packets in transmit-time order (runs within the exact budget).
    Exact(Vec<Pkt>),
    /// Reductions of a run over the budget (see [`crate::stream`]).
    Streamed(Box<Streamed>),
}

impl RunData {
    /// The packets, when every one is held.
    pub fn pkts(&self) -> Option<&[Pkt]> {
        match &self.detail {
            Detail::Exact(p) => Some(p),
            Detail::Streamed(_) => None,
        }
    }

    /// The reductions, when the run was streamed.
    pub fn streamed(&self) -> Option<&Streamed> {
        match &self.detail {
            Detail::Exact(_) => None,
            Detail::Streamed(s) => Some(s),
        }
    }

    /// Min/max latency per column of `span_ns / cols` transmit time:
    /// `(t0_ns, t1_ns, min, max)` per non-empty column.
    pub fn columns(&self, span_ns: u64, cols: usize) -> Vec<(f64, f64, f64, f64)> {
        match &self.detail {
            Detail::Exact(p) => {
                crate::stats::decimate(p.iter().map(|q| (q.t_ns, q.lat_ns)), span_ns, cols)
            }
            Detail::Streamed(s) => s.columns(span_ns, cols),
        }
    }

    /// The `n` (at most [`WORST_N`]) packets of highest latency, in time order.
    pub fn worst(&self, n: usize) -> Vec<Pkt> {
        match &self.detail {
            Detail::Exact(p) => crate::stats::worst(p, n),
            Detail::Streamed(s) => {
                let mut v = s.worst.clone();
                if v.len() > n {
                    v.sort_by_key(|p| std::cmp::Reverse(p.lat_ns));
                    v.truncate(n);
                    v.sort_by_key(|p| (p.t_ns, p.flow, p.seq));
                }
                v
            }
        }
    }

    /// Per-window `(t0_ns, p50, p99, max, count)`; `None` for a streamed
    /// run that kept no window histograms (not its configuration's first).
    pub fn windows(&self, win_ns: u64) -> Option<Vec<crate::stats::Window>> {
        match &self.detail {
            Detail::Exact(p) => Some(crate::stats::windows(p, win_ns)),
            Detail::Streamed(s) => s.windows(win_ns),
        }
    }

    /// Anomalies of definition `(n, t_ns)` in start order, and how many more
    /// a streamed run found than it kept.
    pub fn anomalies(&self, n: u32, t_ns: u64) -> (Vec<Anomaly>, u64) {
        match &self.detail {
            Detail::Exact(p) => (crate::stats::anomalies(p, n, t_ns), 0),
            Detail::Streamed(s) => s
                .anomalies(n, t_ns)
                .map(|(v, d)| (v.to_vec(), d))
                .unwrap_or_default(),
        }
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

/// The anomaly definitions `(n, t_ns)` of the first run that names any
/// (`analysis.anomalies` of its parameters).
fn anomaly_specs<'a>(params: impl Iterator<Item = &'a Value>) -> Vec<(u32, u64)> {
    params
        .filter_map(|p| p.pointer("/analysis/anomalies")?.as_array().cloned())
        .next()
        .unwrap_or_default()
        .iter()
        .filter_map(|v| crate::stats::parse_anomaly(v.as_str()?))
        .collect()
}

impl Experiment {
    /// The experiment's anomaly definitions `(n, t_ns)`, as the records were reduced with.
    pub fn anomaly_specs(&self) -> Vec<(u32, u64)> {
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

/// [`load`], holding at most `exact_packets` packets (over all runs) one by
/// one; the runs beyond are streamed ([`Detail::Streamed`]).
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
    // Records last: the streaming pass needs the experiment's anomaly
    // definitions and which run is the first of its configuration.
    let specs = anomaly_specs(runs.iter().map(|(r, _)| &r.params));
    let mut budget = exact_packets;
    let mut has_windows = vec![false; configs.len()];
    for ((r, has_files), d) in runs.iter_mut().zip(&run_dirs) {
        if !*has_files {
            continue;
        }
        let cbr = r.params.pointer("/traffic/pattern").and_then(Value::as_str) == Some("cbr");
        let plan = Plan {
            specs: specs.clone(),
            target_gap_ns: r.offered_pps().filter(|&p| cbr && p > 0.0).map(|p| 1e9 / p),
            windows: !has_windows[r.config],
            worst_n: WORST_N,
            ..Plan::default()
        };
        r.data = load_records(&d.join("records.nfr"), &mut r.problems, &mut budget, plan);
        if r.data.as_ref().is_some_and(|d| d.n > 1) {
            has_windows[r.config] = true;
        }
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
        };
        return (r, false);
    }
    let r = Run {
        name,
        params,
        summary,
        gen,
        data: None,
        problems,
        config: 0,
    };
    (r, true)
}

fn load_records(
    path: &Path,
    problems: &mut Vec<String>,
    budget: &mut u64,
    mut plan: Plan,
) -> Option<RunData> {
    if !path.exists() {
        problems.push("records.nfr is missing: no per-packet figure for this run".into());
        return None;
    }
    let mut rd = match nflab_record::RecordReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            problems.push(format!("records.nfr is unreadable ({e})"));
            return None;
        }
    };
    let pre = nflab_record::prescan(path).unwrap_or_default();
    let exact = pre.records <= *budget;
    // Streamed block by block: into the compact form the figures use (32
    // bytes per packet) while the budget allows, else into `Acc`'s bounded
    // reductions. Warm-up is known up front only from a trailer.
    let mut pkts: Vec<Pkt> = Vec::new();
    let mut acc = None;
    if exact {
        *budget -= pre.records;
        pkts.reserve_exact(pre.records as usize);
    } else {
        if let Some(t) = &pre.trailer {
            plan.first_seq = t.sent.iter().map(|s| (s.flow, s.warmup)).collect();
        }
        plan.span_hint = pre.span;
        acc = Some(Acc::new(plan));
    }
    let mut buf = Vec::new();
    let mut read = 0u64;
    loop {
        match rd.next_block(&mut buf) {
            Ok(true) => {
                read += buf.len() as u64;
                match &mut acc {
                    Some(a) => buf.iter().for_each(|r| a.push(r)),
                    None => pkts.extend(buf.iter().map(|r| Pkt {
                        t_ns: r.tx_ns,
                        lat_ns: r.rx_ns as i64 - r.tx_ns as i64,
                        seq: r.seq,
                        flow: r.flow,
                    })),
                }
            }
            Ok(false) => break,
            Err(e) => {
                problems.push(format!(
                    "records.nfr could not be read to the end ({e}); the {read} records before are shown"
                ));
                break;
            }
        }
    }
    if rd.is_finished() {
        match rd.tail() {
            nflab_record::TailState::Complete => {}
            nflab_record::TailState::NoTrailer => problems.push(format!(
                "records.nfr has no trailer: the recorder stopped between blocks, so sent counts and warm-up are unknown; the {read} records written are shown"
            )),
            nflab_record::TailState::Truncated {
                discarded_bytes,
                reason,
            } => problems.push(format!(
                "records.nfr is cut off ({reason}; {discarded_bytes} bytes ignored): the {read} records before the cut are shown"
            )),
        }
    }
    let trailer = rd.trailer().or(pre.trailer.as_ref());
    let sent = trailer.map(|t| {
        t.sent
            .iter()
            .map(|s| s.sent.saturating_sub(s.warmup))
            .sum::<u64>()
    });
    let (n, span_ns, lat, detail) = match acc {
        Some(a) => {
            let (s, h) = a.finish();
            if s.late > 0 {
                problems.push(format!(
                    "{} packets arrived more than {} sequence numbers late: they are drawn, but could not be checked for duplicates and count as missing for anomalies and gaps",
                    s.late,
                    crate::stream::REORDER_WINDOW
                ));
            }
            (
                h.len(),
                s.span_ns,
                Lat::Hdr(Box::new(h)),
                Detail::Streamed(Box::new(s)),
            )
        }
        None => {
            let warm: BTreeMap<u16, u64> = trailer
                .map(|t| t.sent.iter().map(|s| (s.flow, s.warmup)).collect())
                .unwrap_or_default();
            pkts.retain(|p| p.seq >= warm.get(&p.flow).copied().unwrap_or(0));
            // Only the first copy of a (flow, seq) counts: a stable sort keeps
            // arrival order among copies, and dedup keeps the first.
            pkts.sort_by_key(|p| (p.flow, p.seq));
            pkts.dedup_by_key(|p| (p.flow, p.seq));
            pkts.sort_unstable_by_key(|p| (p.t_ns, p.flow, p.seq));
            let t0 = pkts.first().map(|p| p.t_ns).unwrap_or(0);
            for p in &mut pkts {
                p.t_ns -= t0;
            }
            let mut sorted: Vec<i64> = pkts.iter().map(|p| p.lat_ns).collect();
            sorted.sort_unstable();
            let span = pkts.last().map_or(0, |p| p.t_ns);
            (
                pkts.len() as u64,
                span,
                Lat::Exact(sorted),
                Detail::Exact(pkts),
            )
        }
    };
    if n == 0 {
        problems.push("no packet was received (100 % loss or an empty record file): nothing to draw for this run".into());
    }
    Some(RunData {
        n,
        span_ns,
        lat,
        detail,
        clock: rd.metadata().clock.source.clone(),
        resolution_ns: rd.metadata().clock.resolution_ns,
        tx_ts: rd.metadata().tx_timestamp.clone(),
        rx_ts: rd.metadata().rx_timestamp.clone(),
        sent,
    })
}

/// A number at a JSON pointer.
pub fn f(v: &Value, ptr: &str) -> Option<f64> {
    v.pointer(ptr).and_then(Value::as_f64)
}

impl Run {
    /// A summary number, e.g. `num("/latency_ns/p99")`.
    pub fn num(&self, ptr: &str) -> Option<f64> {
        self.summary.as_ref().and_then(|s| f(s, ptr))
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

    /// Latency percentile `q` in [0,1], nearest rank, from the records (HDR
    /// for a streamed run).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.data.as_ref().and_then(|d| d.lat.quantile(q))
    }
}
