//! The PRRT study's figures (seed 000 §6.3–6.4, issue 18), for an experiment whose runs
//! have `prrt.json` (`[app] kind = "prrt"`):
//!
//! - `prrt-delay`: one-way delay over time of one run, both directions, with the target
//!   delay and the receive window drawn and the outages shaded;
//! - `prrt-layers`: the per-layer delays (m2−m1 … m6−m5) of the same run;
//! - `prrt-loss-target-window`: loss ratio against target delay × receive window, quartiles
//!   over the runs of each cell (all gaps and payloads);
//! - `prrt-loss-payload`: loss ratio against payload, quartiles over the runs;
//! - `prrt-wlan-model`: the 802.11g per-frame time and throughput, Bordim's model and the
//!   seed's corrected one, against the link emulator's profile (configured) and what it
//!   yields (median L1→L1 delay minus the configured delay, per payload).
//!
//! Every quantile comes from `nflab_analyze` ([`nflab_analyze::prrt::quartiles`]).

use std::collections::BTreeMap;
use std::path::Path;

use nflab_analyze::prrt::{quartiles, read_packets, PrrtPacket};
use serde_json::Value;

use crate::figures::{stack, Figure, Table};
use crate::load::Experiment;
use crate::svg::{self, num, Axis, Fmt, Plot, Style};

/// Bordim's 802.11g frame time (seed 000 eq. 6.5): µs per byte and fixed part, µs.
pub const BORDIM_US_PER_BYTE: f64 = 0.15;
/// The fixed part of Bordim's model, µs.
pub const BORDIM_FIXED_US: f64 = 162.43;
/// The seed's correction: t_impl of ≈ 120 µs measured instead of ≈ 60 µs (§6.4).
pub const CORRECTION_US: f64 = 60.0;
/// Bytes of a DATA frame besides the payload: Ethernet 14, IPv4 20, UDP 8, DATA header 44.
pub const DATA_FRAME_OVERHEAD: f64 = 86.0;
/// Points drawn per direction in a time series or scatter (evenly thinned beyond).
const MAX_POINTS: usize = 4000;

const DIRS: [&str; 2] = ["pc", "cp"];

/// One run of the study.
#[derive(Debug, Clone)]
pub struct StudyRun {
    /// Run directory name (`000`).
    pub name: String,
    /// `prrt.json`.
    pub prrt: Value,
    /// `app` of `prrt-stats.json`: the resolved parameters.
    pub app: Value,
}

impl StudyRun {
    /// A resolved `[app]` number.
    pub fn param(&self, key: &str) -> Option<f64> {
        self.app.get(key).and_then(Value::as_f64)
    }
    /// `prrt.json`'s `<dir>.loss_ratio`.
    pub fn loss(&self, dir: &str) -> Option<f64> {
        self.prrt.get(dir)?.get("loss_ratio")?.as_f64()
    }
    fn outage_ns(&self, dir: &str) -> f64 {
        outages(&self.prrt, dir).iter().map(|o| o.1).sum()
    }
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The runs of `dir` that have `prrt.json` and `prrt-stats.json`, in name order.
pub fn study_runs(dir: &Path) -> Vec<StudyRun> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("runs"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let rd = dir.join("runs").join(&name);
            let prrt = read_json(&rd.join("prrt.json"))?;
            let app = read_json(&rd.join("prrt-stats.json"))?.get("app")?.clone();
            Some(StudyRun { name, prrt, app })
        })
        .collect()
}

/// `(start_ns, length_ns)` of a direction's outages.
fn outages(prrt: &Value, dir: &str) -> Vec<(f64, f64)> {
    prrt.get(dir)
        .and_then(|d| d.get("outages"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|o| Some((o.get("start_ns")?.as_f64()?, o.get("length_ns")?.as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The run the time series shows: the most outage time among runs that delivered at least
/// half their messages both ways (outages inside a working run, as in the seed's figure);
/// else the first run.
pub fn pick_run(runs: &[StudyRun]) -> Option<&StudyRun> {
    let working = |r: &&StudyRun| DIRS.iter().all(|d| r.loss(d).is_some_and(|l| l <= 0.5));
    runs.iter()
        .filter(working)
        .max_by(|a, b| {
            let t = |r: &StudyRun| r.outage_ns("pc") + r.outage_ns("cp");
            t(a).total_cmp(&t(b)).then(b.name.cmp(&a.name))
        })
        .or_else(|| runs.first())
}

fn thin<T: Copy>(v: &[T]) -> Vec<T> {
    if v.len() <= MAX_POINTS {
        return v.to_vec();
    }
    let step = v.len() as f64 / MAX_POINTS as f64;
    (0..MAX_POINTS)
        .map(|i| v[(i as f64 * step) as usize])
        .collect()
}

fn run_label(r: &StudyRun) -> String {
    format!(
        "run {}: gap {} ms, payload {} B, target {} ms, window {} ms",
        r.name,
        num(r.param("gap_ms").unwrap_or(f64::NAN)),
        num(r.param("payload_bytes").unwrap_or(f64::NAN)),
        num(r.param("target_delay_ms").unwrap_or(f64::NAN)),
        num(r.param("window_ms").unwrap_or(f64::NAN)),
    )
}

/// All PRRT figures that apply to the experiment.
pub fn figures(e: &Experiment) -> Vec<Figure> {
    let runs = study_runs(&e.dir);
    if runs.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(r) = pick_run(&runs) {
        let path = e
            .dir
            .join("runs")
            .join(&r.name)
            .join("prrt-packets.parquet");
        if let Ok(packets) = read_packets(&path) {
            out.extend(delay_series(r, &packets));
            out.extend(layer_scatter(r, &packets));
        }
    }
    out.extend(loss_target_window(&runs));
    out.extend(loss_payload(&runs));
    out.extend(wlan_model(e, &runs));
    out
}

const MS: f64 = 1e6;

/// `prrt-delay`.
fn delay_series(r: &StudyRun, packets: &[PrrtPacket]) -> Option<Figure> {
    let target = r.param("target_delay_ms")?;
    let window = r.param("window_ms")?;
    let end_s = r.param("duration_s")?;
    let mut t = Table::new(&["dir", "seq", "m1_s", "one_way_ms", "delivered"]);
    let mut panels = Vec::new();
    for (i, dir) in DIRS.iter().enumerate() {
        let rows: Vec<&PrrtPacket> = packets.iter().filter(|p| p.dir == *dir).collect();
        let delivered: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|p| Some((p.m[0]? as f64 / 1e9, p.layers[5]? as f64 / MS)))
            .collect();
        let lost: Vec<(f64, f64)> = rows
            .iter()
            .filter(|p| p.layers[5].is_none())
            .filter_map(|p| Some((p.m[0]? as f64 / 1e9, target * 1.08)))
            .collect();
        for p in &rows {
            t.push(vec![
                dir.to_string(),
                p.seq.to_string(),
                p.m[0].map(|v| num(v as f64 / 1e9)).unwrap_or_default(),
                p.layers[5].map(|v| num(v as f64 / MS)).unwrap_or_default(),
                p.layers[5].is_some().to_string(),
            ]);
        }
        let ymax = delivered.iter().map(|p| p.1).fold(target * 1.12, f64::max);
        let mut p = Plot::new(
            860.0,
            240.0,
            Axis::lin_nice(
                "m1, time since the run's start (s)",
                0.0,
                end_s,
                Fmt::Num,
                true,
            ),
            Axis::lin_nice("one-way delay m6 − m1 (ms)", 0.0, ymax, Fmt::Num, true),
        );
        p.title(&format!(
            "{} ({})",
            if *dir == "pc" {
                "plant → controller"
            } else {
                "controller → plant"
            },
            dir
        ));
        p.zoomable();
        let shade: Vec<(f64, f64, f64, f64, String)> = outages(&r.prrt, dir)
            .iter()
            .map(|(s, l)| {
                (
                    s / 1e9,
                    (s + l) / 1e9,
                    p.y.min,
                    p.y.max,
                    format!("outage: {} ms from {} s", num(l / MS), num(s / 1e9)),
                )
            })
            .collect();
        p.rects(90, &shade, "#f3c6c6", 2.0);
        p.legend(
            90,
            "outage (no on-time delivery)",
            Style {
                color: "#f3c6c6",
                width: 6.0,
                dash: "",
            },
        );
        p.hline_at(
            target,
            &format!("target {} ms", num(target)),
            "#c0392b",
            false,
        );
        p.hline_at(
            target - window,
            &format!("target − window {} ms", num(target - window)),
            "#7f8c8d",
            true,
        );
        p.dots(i, "delivered", &thin(&delivered), svg::color(i), 1.6);
        p.legend_dot(i, "delivered (one-way delay)", Style::solid(i));
        p.dots(9, "lost or late", &thin(&lost), "#c0392b", 1.6);
        p.legend_dot(
            9,
            "not delivered in its window",
            Style {
                color: "#c0392b",
                width: 1.0,
                dash: "",
            },
        );
        panels.push((p.finish(), 240.0));
    }
    Some(Figure {
        id: "prrt-delay".into(),
        title: "PRRT one-way delay over time".into(),
        caption: format!(
            "{}. Each dot is a message delivered to the receiving application: its one-way delay m6 − m1 (application send to application receive, one clock) at its send time m1. A message is handed out only when its deadline (m1 + target) is at most one window away, so delivered delays lie between target − window and target (dotted lines); red marks above the target are messages not delivered in their window (lost or late, counted as lost). Shaded: outages, intervals longer than {} ms with no on-time delivery. The run shown is the one with the most outage time among runs that delivered at least half their messages both ways.",
            run_label(r),
            num(r.param("outage_threshold_ms").unwrap_or(f64::NAN))
        ),
        svg: stack(&panels, 860.0),
        data: t,
        notes: Vec::new(),
    })
}

const LAYERS: [&str; 5] = [
    "L7→L2 (m2 − m1): sender application to sender capture",
    "L2→L1 (m3 − m2): capture to transmit stamp",
    "L1→L1 (m4 − m3): the link",
    "L1→L2 (m5 − m4): receive stamp to receiver capture",
    "L2→L7 (m6 − m5): capture to the receiving application (hold until the window)",
];

/// `prrt-layers`.
fn layer_scatter(r: &StudyRun, packets: &[PrrtPacket]) -> Option<Figure> {
    let end_s = r.param("duration_s")?;
    let mut t = Table::new(&["dir", "seq", "m1_s", "layer", "delay_ms"]);
    let mut panels = Vec::new();
    for (li, name) in LAYERS.iter().enumerate() {
        let with_seq: Vec<Vec<(u32, f64, f64)>> = DIRS
            .iter()
            .map(|dir| {
                packets
                    .iter()
                    .filter(|p| p.dir == *dir)
                    .filter_map(|p| Some((p.seq, p.m[0]? as f64 / 1e9, p.layers[li]? as f64 / MS)))
                    .collect()
            })
            .collect();
        let series: Vec<Vec<(f64, f64)>> = with_seq
            .iter()
            .map(|v| v.iter().map(|q| (q.1, q.2)).collect())
            .collect();
        let all = series.iter().flatten();
        let lo = all.clone().map(|p| p.1).fold(0.0, f64::min);
        let hi = all.map(|p| p.1).fold(0.0, f64::max);
        let mut p = Plot::new(
            860.0,
            200.0,
            Axis::lin_nice("m1 (s)", 0.0, end_s, Fmt::Num, true),
            Axis::lin_nice("delay (ms)", lo, hi.max(lo + 1e-3), Fmt::Num, true),
        );
        p.title(name);
        p.zoomable();
        for (di, pts) in series.iter().enumerate() {
            p.dots(di, DIRS[di], &thin(pts), svg::color(di), 1.4);
            p.legend_dot(di, DIRS[di], Style::solid(di));
            for (seq, x, y) in &with_seq[di] {
                t.push(vec![
                    DIRS[di].into(),
                    seq.to_string(),
                    num(*x),
                    LAYER_KEYS[li].into(),
                    num(*y),
                ]);
            }
        }
        panels.push((p.finish(), 200.0));
    }
    Some(Figure {
        id: "prrt-layers".into(),
        title: "PRRT delay per layer".into(),
        caption: format!(
            "{}. The six vantage points split each message's one-way delay: m1 the sending application, m2 an AF_PACKET tap on the sender's interface, m3 the kernel's software transmit stamp of the transport's socket, m4 the receiving socket's software receive stamp, m5 the tap on the receiver's interface, m6 the receiving application; all CLOCK_REALTIME on one host. Messages without the two points of a layer are not drawn there.",
            run_label(r)
        ),
        svg: stack(&panels, 860.0),
        data: t,
        notes: Vec::new(),
    })
}

const LAYER_KEYS: [&str; 5] = ["l7_l2_ns", "l2_l1_ns", "l1_l1_ns", "l1_l2_ns", "l2_l7_ns"];

/// Quartiles of the loss ratio per group, per direction.
type Groups = BTreeMap<(u64, u64), [Vec<f64>; 2]>;

fn key(v: f64) -> u64 {
    (v * 1000.0).round() as u64
}

/// `prrt-loss-target-window`.
pub fn loss_target_window(runs: &[StudyRun]) -> Option<Figure> {
    let mut g: Groups = BTreeMap::new();
    for r in runs {
        let (Some(target), Some(window)) = (r.param("target_delay_ms"), r.param("window_ms"))
        else {
            continue;
        };
        let cell = g.entry((key(target), key(window))).or_default();
        for (i, d) in DIRS.iter().enumerate() {
            if let Some(l) = r.loss(d) {
                cell[i].push(l);
            }
        }
    }
    let targets: Vec<u64> = {
        let mut v: Vec<u64> = g.keys().map(|k| k.0).collect();
        v.dedup();
        v
    };
    if g.len() < 2 {
        return None;
    }
    let windows: Vec<f64> = g.keys().map(|k| k.1 as f64 / 1000.0).collect();
    let (wlo, whi) = windows
        .iter()
        .fold((f64::MAX, f64::MIN), |a, w| (a.0.min(*w), a.1.max(*w)));
    let mut t = Table::new(&[
        "dir",
        "target_ms",
        "window_ms",
        "runs",
        "loss_q1",
        "loss_median",
        "loss_q3",
    ]);
    let mut panels = Vec::new();
    for (di, dir) in DIRS.iter().enumerate() {
        let mut p = Plot::new(
            860.0,
            280.0,
            Axis::lin_nice("receive window (ms)", wlo, whi, Fmt::Num, true),
            Axis::new(
                "loss ratio (late counts as lost)",
                svg::Scale::Lin,
                0.0,
                1.0,
                Fmt::Percent,
            ),
        );
        p.title(&format!(
            "{dir}: median and quartiles over the runs of each cell"
        ));
        for (ti, &tk) in targets.iter().enumerate() {
            let pts: Vec<(f64, f64, f64, f64)> = g
                .iter()
                .filter(|(k, _)| k.0 == tk)
                .filter_map(|(k, v)| {
                    let q = quartiles(&v[di])?;
                    t.push(vec![
                        dir.to_string(),
                        num(tk as f64 / 1000.0),
                        num(k.1 as f64 / 1000.0),
                        v[di].len().to_string(),
                        num(q[0]),
                        num(q[1]),
                        num(q[2]),
                    ]);
                    Some((k.1 as f64 / 1000.0, q[1], q[0], q[2]))
                })
                .collect();
            let name = format!("target {} ms", num(tk as f64 / 1000.0));
            let line: Vec<(f64, f64)> = pts.iter().map(|q| (q.0, q.1)).collect();
            p.line(ti, &name, &line, Style::solid(ti), false);
            p.errorbars(ti, &name, &pts, Style::solid(ti));
            p.legend(ti, &name, Style::solid(ti));
        }
        panels.push((p.finish(), 280.0));
    }
    Some(Figure {
        id: "prrt-loss-target-window".into(),
        title: "PRRT loss against target delay and receive window".into(),
        caption: "Loss ratio per direction (prrt.json: 1 − delivered/sent; a message discarded for its deadline counts as lost) against the receive window, one line per target delay; each point is the median over the runs of that target × window cell (all gaps and payloads), the bars the first and third quartiles (nearest rank, nflab-analyze). Combinations with a window wider than the target are refused and absent (refused.json).".into(),
        svg: stack(&panels, 860.0),
        data: t,
        notes: Vec::new(),
    })
}

/// `prrt-loss-payload`.
pub fn loss_payload(runs: &[StudyRun]) -> Option<Figure> {
    let mut g: BTreeMap<u64, [Vec<f64>; 2]> = BTreeMap::new();
    for r in runs {
        let Some(payload) = r.param("payload_bytes") else {
            continue;
        };
        let cell = g.entry(payload as u64).or_default();
        for (i, d) in DIRS.iter().enumerate() {
            if let Some(l) = r.loss(d) {
                cell[i].push(l);
            }
        }
    }
    if g.len() < 2 {
        return None;
    }
    let (lo, hi) = (*g.keys().next()? as f64, *g.keys().last()? as f64);
    let mut p = Plot::new(
        860.0,
        320.0,
        Axis::lin_nice("payload (bytes)", lo, hi, Fmt::Num, true),
        Axis::new(
            "loss ratio (late counts as lost)",
            svg::Scale::Lin,
            0.0,
            1.0,
            Fmt::Percent,
        ),
    );
    let mut t = Table::new(&[
        "dir",
        "payload_bytes",
        "runs",
        "loss_q1",
        "loss_median",
        "loss_q3",
    ]);
    for (di, dir) in DIRS.iter().enumerate() {
        let pts: Vec<(f64, f64, f64, f64)> = g
            .iter()
            .filter_map(|(k, v)| {
                let q = quartiles(&v[di])?;
                t.push(vec![
                    dir.to_string(),
                    k.to_string(),
                    v[di].len().to_string(),
                    num(q[0]),
                    num(q[1]),
                    num(q[2]),
                ]);
                Some((*k as f64, q[1], q[0], q[2]))
            })
            .collect();
        let line: Vec<(f64, f64)> = pts.iter().map(|q| (q.0, q.1)).collect();
        p.line(di, dir, &line, Style::solid(di), false);
        p.errorbars(di, dir, &pts, Style::solid(di));
        p.legend(di, dir, Style::solid(di));
    }
    Some(Figure {
        id: "prrt-loss-payload".into(),
        title: "PRRT loss against payload".into(),
        caption: "Loss ratio per direction against the message payload: median over the runs with that payload (all gaps, targets and windows), bars at the first and third quartiles (nearest rank, nflab-analyze).".into(),
        svg: p.finish(),
        data: t,
        notes: Vec::new(),
    })
}

/// `[dut.link]` of the stored spec, for one direction (`reverse` overrides for PC).
fn link_param(e: &Experiment, key: &str, reverse: bool) -> Option<f64> {
    let link = e.spec.as_ref()?.get("dut")?.get("link")?;
    let num = |v: &toml::Value| v.as_float().or(v.as_integer().map(|i| i as f64));
    if reverse {
        if let Some(v) = link.get("reverse").and_then(|r| r.get(key)).and_then(num) {
            return Some(v);
        }
    }
    link.get(key).and_then(num)
}

/// Per-frame time of the models, µs, for a frame of `x` bytes.
pub fn bordim_us(x: f64) -> f64 {
    BORDIM_US_PER_BYTE * x + BORDIM_FIXED_US
}

/// `prrt-wlan-model`.
fn wlan_model(e: &Experiment, runs: &[StudyRun]) -> Option<Figure> {
    let is_link = e
        .spec
        .as_ref()
        .and_then(|s| s.get("dut")?.get("kind")?.as_str().map(|k| k == "link"))
        .unwrap_or(false);
    // Measured: per payload, the median L1→L1 delay minus the configured delay, over the
    // runs with the largest gap (the least queueing behind earlier frames).
    let mut measured: BTreeMap<u64, [Vec<f64>; 2]> = BTreeMap::new();
    let mut notes = Vec::new();
    if is_link {
        let max_gap = runs
            .iter()
            .filter_map(|r| r.param("gap_ms"))
            .fold(0.0, f64::max);
        for r in runs.iter().filter(|r| r.param("gap_ms") == Some(max_gap)) {
            let Some(payload) = r.param("payload_bytes") else {
                continue;
            };
            let path = e
                .dir
                .join("runs")
                .join(&r.name)
                .join("prrt-packets.parquet");
            let Ok(packets) = read_packets(&path) else {
                notes.push(format!("run {}: prrt-packets.parquet unreadable", r.name));
                continue;
            };
            let cell = measured.entry(payload as u64).or_default();
            for (di, dir) in DIRS.iter().enumerate() {
                let delay_us = link_param(e, "delay_us", di == 0).unwrap_or(0.0);
                cell[di].extend(
                    packets
                        .iter()
                        .filter(|p| p.dir == *dir)
                        .filter_map(|p| Some(p.layers[2]? as f64 / 1e3 - delay_us)),
                );
            }
        }
    }
    let rate = link_param(e, "rate_mbps", false);
    let overhead = link_param(e, "overhead_bytes", false).unwrap_or(0.0);
    let xs: Vec<f64> = (0..=30).map(|i| f64::from(i) * 50.0).collect();
    let mut t = Table::new(&[
        "curve",
        "frame_bytes",
        "frame_time_us",
        "throughput_mbps",
        "n",
        "q1_us",
        "q3_us",
    ]);
    let top_us = measured
        .values()
        .flat_map(|v| v.iter().filter_map(|d| quartiles(d).map(|q| q[1])))
        .fold(bordim_us(1500.0) + CORRECTION_US + 100.0, f64::max);
    let mut time = Plot::new(
        860.0,
        300.0,
        Axis::lin_nice("frame (bytes, without FCS)", 0.0, 1500.0, Fmt::Num, true),
        Axis::lin_nice("per-frame time (µs)", 0.0, top_us * 1.05, Fmt::Num, true),
    );
    let mut tput = Plot::new(
        860.0,
        300.0,
        Axis::lin_nice("frame (bytes, without FCS)", 0.0, 1500.0, Fmt::Num, true),
        Axis::lin_nice("throughput (Mbit/s)", 0.0, 60.0, Fmt::Num, true),
    );
    time.title("802.11g per-frame time");
    tput.title("802.11g throughput, one frame at a time");
    let curve = |p: &mut Plot,
                 q: &mut Plot,
                 s: usize,
                 name: &str,
                 f: &dyn Fn(f64) -> f64,
                 st: Style,
                 t: &mut Table| {
        let pts: Vec<(f64, f64)> = xs.iter().map(|&x| (x, f(x))).collect();
        let tp: Vec<(f64, f64)> = pts.iter().map(|&(x, us)| (x, x * 8.0 / us)).collect();
        for ((x, us), (_, mb)) in pts.iter().zip(&tp) {
            t.push(vec![
                name.into(),
                num(*x),
                num(*us),
                num(*mb),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        p.line(s, name, &pts, st, false);
        p.legend(s, name, st);
        q.line(s, name, &tp, st, false);
        q.legend(s, name, st);
    };
    curve(
        &mut time,
        &mut tput,
        0,
        "Bordim's model",
        &bordim_us,
        Style::solid(0),
        &mut t,
    );
    curve(
        &mut time,
        &mut tput,
        1,
        "corrected model (+60 µs)",
        &|x| bordim_us(x) + CORRECTION_US,
        Style::solid(1),
        &mut t,
    );
    if let Some(rate) = rate.filter(|r| *r > 0.0) {
        curve(
            &mut time,
            &mut tput,
            2,
            "link profile (configured)",
            &|x| (x + overhead) * 8.0 / rate,
            Style::dashed(2),
            &mut t,
        );
    } else {
        notes.push("the spec's link has no rate_mbps: no profile line".into());
    }
    for (di, dir) in DIRS.iter().enumerate() {
        let pts: Vec<(f64, f64, f64, f64)> = measured
            .iter()
            .filter_map(|(payload, v)| {
                let q = quartiles(&v[di])?;
                let x = *payload as f64 + DATA_FRAME_OVERHEAD;
                t.push(vec![
                    format!("measured {dir}"),
                    num(x),
                    num(q[1]),
                    num(x * 8.0 / q[1]),
                    v[di].len().to_string(),
                    num(q[0]),
                    num(q[2]),
                ]);
                Some((x, q[1], q[0], q[2]))
            })
            .collect();
        if pts.is_empty() {
            continue;
        }
        let name = format!("emulator yields, {dir}");
        let med: Vec<(f64, f64)> = pts.iter().map(|q| (q.0, q.1)).collect();
        time.dots(3 + di, &name, &med, svg::color(3 + di), 3.2);
        time.legend_dot(3 + di, &name, Style::solid(3 + di));
        let tp: Vec<(f64, f64)> = pts
            .iter()
            .filter(|q| q.1 > 0.0)
            .map(|q| (q.0, q.0 * 8.0 / q.1))
            .collect();
        tput.dots(3 + di, &name, &tp, svg::color(3 + di), 3.2);
        tput.legend_dot(3 + di, &name, Style::solid(3 + di));
    }
    if measured.is_empty() {
        notes.push(if is_link {
            "no run has per-message records to measure the emulator with".into()
        } else {
            "the DuT is not an emulated link: the models only".into()
        });
    }
    Some(Figure {
        id: "prrt-wlan-model".into(),
        title: "802.11g resource model against the link emulator".into(),
        caption: format!(
            "Per-frame time and throughput of an 802.11g frame of x bytes: Bordim's model (seed 000 eq. 6.5, t = 0.15 µs/B · x + 162.43 µs), the seed's corrected model (its measured t_impl of ≈ 120 µs instead of ≈ 60 µs), the link profile's configured rate and per-frame overhead, and what the emulator yields: per payload, the median over the runs with the largest gap of the L1→L1 delay (m4 − m3) minus the configured delay_us, at x = payload + {} bytes (Ethernet, IPv4, UDP and the DATA header); the CSV has its quartiles, which mostly show the link's configured jitter. The link profile line is (x + overhead_bytes) · 8 / rate_mbps of the spec's [dut.link]. The measured time includes the emulator's own forwarding (AF_PACKET in and out) and the median of its jitter. {}",
            num(DATA_FRAME_OVERHEAD),
            notes.join("; ")
        ),
        svg: stack(&[(time.finish(), 300.0), (tput.finish(), 300.0)], 860.0),
        data: t,
        notes,
    })
}
