//! The figures and the page of an MVNOCoreSim run (`nflab model mvno --out
//! DIR`, seed 003 ch. 4.4), and its series as Parquet:
//!
//! ```text
//! DIR/report.html            self-contained: the run's numbers and the figures
//! DIR/figures/ID.svg, ID.csv each figure and exactly the data it draws
//! DIR/series.parquet         per second (the columns of series.csv)
//! DIR/retries.parquet        per device: device, retries
//! ```
//!
//! Figures: arrivals, attachments and retries per second; open dialogs;
//! queue length and utilisation per component; retries per device. Every
//! value is the model's per-second monitor; the retry percentiles come from
//! `nflab_analyze`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use nflab_analyze::dist::{Distribution, DEFAULT_HDR_DIGITS};
use nflab_analyze::export::{write_parquet, Column, Table as ParquetTable};
use nflab_model::mvno::{MvnoResult, MvnoSeries};

use crate::figures::{Figure, Table};
use crate::svg::{self, esc, Axis, Fmt, Plot, Style};
use crate::ReportError;

const W: f64 = 900.0;
const H: f64 = 300.0;
/// Components with a queue and a processor count (ISD is infinite-server).
const QUEUED: [&str; 4] = ["cmap", "hlr", "auc", "backend"];

/// A time-series figure: one line per `(name, values)`, second `i` drawn at
/// x = i, a mark at the end of the warm-up.
fn over_time(
    id: &str,
    title: &str,
    caption: String,
    y_label: &str,
    y_fmt: Fmt,
    series: &[(&str, Vec<f64>)],
    warmup_s: f64,
) -> Figure {
    let n = series.iter().map(|s| s.1.len()).max().unwrap_or(0);
    let y_max = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(0.0_f64, f64::max);
    let x = Axis::lin_nice("time (s)", 0.0, (n.max(1)) as f64, Fmt::Secs, true);
    let y = Axis::lin_nice(
        y_label,
        0.0,
        if y_max > 0.0 { y_max } else { 1.0 },
        y_fmt,
        true,
    );
    let mut p = Plot::new(W, H, x, y);
    p.zoomable();
    for (i, (name, v)) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = v.iter().enumerate().map(|(t, y)| (t as f64, *y)).collect();
        p.line(i, name, &pts, Style::solid(i), false);
        p.legend(i, name, Style::solid(i));
    }
    if warmup_s > 0.0 && (warmup_s as usize) < n {
        p.vline(warmup_s, "end of warm-up", "#888");
    }
    let mut header = vec!["second"];
    header.extend(series.iter().map(|s| s.0));
    let mut data = Table::new(&header);
    for t in 0..n {
        let mut row = vec![t.to_string()];
        row.extend(
            series
                .iter()
                .map(|s| s.1.get(t).map_or(String::new(), |v| format!("{v}"))),
        );
        data.push(row);
    }
    Figure {
        id: id.into(),
        title: title.into(),
        caption,
        svg: p.finish(),
        data,
        notes: Vec::new(),
    }
}

fn as_f64(v: &[u64]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Devices per retry count: `(retries, devices)` for every count that
/// occurs, ascending — the engine's count per distinct value
/// (`Distribution::value_counts`, exact: every count is held).
pub fn retry_histogram(retries: &[u32]) -> Vec<(u32, u64)> {
    let mut d = Distribution::new(u64::MAX, DEFAULT_HDR_DIGITS);
    for &r in retries {
        d.record(i64::from(r));
    }
    d.value_counts()
        .into_iter()
        .map(|(r, c)| (r as u32, c))
        .collect()
}

fn retries_figure(retries: &[u32], p99: i64) -> Figure {
    let h = retry_histogram(retries);
    let max_r = h.last().map_or(0, |x| x.0) as f64;
    let max_n = h.iter().map(|x| x.1).max().unwrap_or(1) as f64;
    let x = Axis::lin_nice(
        "retries of a device",
        0.0,
        max_r.max(1.0) + 0.5,
        Fmt::Num,
        true,
    );
    let y = Axis::log_decades("devices", 1.0, max_n.max(10.0), Fmt::Num);
    let mut p = Plot::new(W, H, x, y);
    let bars: Vec<(f64, f64, f64, f64, String)> = h
        .iter()
        .map(|&(r, c)| {
            let r = f64::from(r);
            (
                r - 0.4,
                r + 0.4,
                1.0,
                c as f64,
                format!("{r} retries: {c} devices"),
            )
        })
        .collect();
    p.rects(0, &bars, svg::color(0), 2.0);
    let mut data = Table::new(&["retries", "devices"]);
    for (r, c) in &h {
        data.push(vec![r.to_string(), c.to_string()]);
    }
    Figure {
        id: "mvno_retries".into(),
        title: "Retries per device".into(),
        caption: format!(
            "Devices by how often they restarted the attach (a timeout, a refusal with a retry hint), over all {} devices that arrived; log scale. Maximum {}, 99th percentile {p99} (nearest rank, nflab_analyze).",
            retries.len(),
            max_r
        ),
        svg: p.finish(),
        data,
        notes: Vec::new(),
    }
}

/// The figures of a run. `p99_retries` is the value the CLI printed.
pub fn figures(r: &MvnoResult, warmup_s: f64, p99_retries: i64) -> Vec<Figure> {
    let s: &MvnoSeries = &r.series;
    let mut figs = vec![
        over_time(
            "mvno_arrivals",
            "Arrivals and attachments per second",
            format!("New devices (Poisson, {} /s offered), devices that completed SAI_VLR → UL → SAI_SGSN → UL_GPRS, and restarts (timeouts, refusals), per simulated second. After the warm-up: {:.1} attached/s on average.", svg::fmt_num(r.offered_rate_per_s), r.attach_rate_per_s),
            "devices per second",
            Fmt::Num,
            &[
                ("arrivals", as_f64(&s.arrivals)),
                ("attachments", as_f64(&s.attachments)),
                ("retries", as_f64(&s.retries)),
            ],
            warmup_s,
        ),
        over_time(
            "mvno_open_dialogs",
            "Open dialogs",
            "Messages in the core (waiting for or in service at any component), time-weighted mean over each second.".into(),
            "open dialogs",
            Fmt::Num,
            &[("open dialogs", s.open_dialogs.clone())],
            warmup_s,
        ),
    ];
    let queues: Vec<(&str, Vec<f64>)> = QUEUED
        .iter()
        .filter_map(|c| s.queue.get(*c).map(|v| (*c, v.clone())))
        .collect();
    figs.push(over_time(
        "mvno_queues",
        "Queue length per component",
        "Messages waiting (not in service) at each component, time-weighted mean over each second; ISD is an infinite-server station and never queues.".into(),
        "messages waiting",
        Fmt::Num,
        &queues,
        warmup_s,
    ));
    let util: Vec<(&str, Vec<f64>)> = QUEUED
        .iter()
        .filter_map(|c| s.utilisation.get(*c).map(|v| (*c, v.clone())))
        .collect();
    figs.push(over_time(
        "mvno_utilisation",
        "Utilisation per component",
        "Busy processors over processors of each component, time-weighted mean over each second. An SAI holds its AUC processor as `auc_hold` says (docs/models.md §7).".into(),
        "utilisation",
        Fmt::Percent,
        &util,
        warmup_s,
    ));
    figs.push(retries_figure(&r.retries_per_device, p99_retries));
    figs
}

/// The per-second series and the retries per device as Parquet tables.
pub fn tables(r: &MvnoResult) -> Vec<ParquetTable> {
    let s = &r.series;
    let ints = |v: &[u64]| Column::I64(v.iter().map(|&x| Some(x as i64)).collect());
    let floats = |v: &[f64]| Column::F64(v.iter().map(|&x| Some(x)).collect());
    let mut cols = vec![
        (
            "second".to_string(),
            Column::I64((0..s.arrivals.len() as i64).map(Some).collect()),
        ),
        ("arrivals".into(), ints(&s.arrivals)),
        ("attachments".into(), ints(&s.attachments)),
        ("retries".into(), ints(&s.retries)),
        ("refused".into(), ints(&s.refused)),
        ("dropped".into(), ints(&s.dropped)),
        ("open_dialogs".into(), floats(&s.open_dialogs)),
    ];
    for (c, v) in &s.queue {
        cols.push((format!("queue_{c}"), floats(v)));
    }
    for (c, v) in &s.utilisation {
        cols.push((format!("utilisation_{c}"), floats(v)));
    }
    let retries = ParquetTable {
        name: "retries".into(),
        columns: vec![
            (
                "device".into(),
                Column::I64((0..r.retries_per_device.len() as i64).map(Some).collect()),
            ),
            (
                "retries".into(),
                Column::I64(
                    r.retries_per_device
                        .iter()
                        .map(|&x| Some(i64::from(x)))
                        .collect(),
                ),
            ),
        ],
    };
    vec![
        ParquetTable {
            name: "series".into(),
            columns: cols,
        },
        retries,
    ]
}

fn write(path: &Path, data: &[u8]) -> Result<(), ReportError> {
    nflab_io::safe_fs::replace_file(path, data).map_err(|source| ReportError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// Writes `series.parquet`, `retries.parquet`, `figures/` and `report.html`
/// into `dir`; `summary` is the JSON object `nflab model mvno --json` prints.
pub fn write_run(
    dir: &Path,
    r: &MvnoResult,
    warmup_s: f64,
    p99_retries: i64,
    summary: &serde_json::Value,
) -> Result<PathBuf, ReportError> {
    let figdir = dir.join("figures");
    std::fs::create_dir_all(&figdir).map_err(|source| ReportError::Write {
        path: figdir.display().to_string(),
        source,
    })?;
    for t in tables(r) {
        let path = dir.join(format!("{}.parquet", t.name));
        write_parquet(&t, &path).map_err(|e| ReportError::Write {
            path: path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
    }
    let figs = figures(r, warmup_s, p99_retries);
    for f in &figs {
        write(&figdir.join(format!("{}.svg", f.id)), f.svg.as_bytes())?;
        write(
            &figdir.join(format!("{}.csv", f.id)),
            f.data.to_csv().as_bytes(),
        )?;
    }
    let path = dir.join("report.html");
    write(&path, page(&figs, summary).as_bytes())?;
    Ok(path)
}

fn page(figs: &[Figure], summary: &serde_json::Value) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>nflab · MVNOCoreSim</title><style>{}</style></head><body><header><h1>MVNOCoreSim run</h1><p class=\"lead\">IoT attach signaling through CMAP, HLR, AUC and Backend (seed 003 ch. 4.4), simulated by <code>nflab model mvno</code>.</p></header><section><h2>Numbers</h2><table>",
        crate::html::CSS
    );
    if let Some(obj) = summary.as_object() {
        for (k, v) in obj {
            let cell = match v {
                serde_json::Value::Object(m) => m
                    .iter()
                    .map(|(a, b)| format!("{a} {b}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                other => other.to_string(),
            };
            let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&cell));
        }
    }
    h.push_str("</table></section>");
    for f in figs {
        let _ = write!(
            h,
            "<section class=\"fig\" id=\"{}\"><h2>{}</h2>{}<p class=\"cap\">{} Data: <code>figures/{}.csv</code>.</p></section>",
            esc(&f.id),
            esc(&f.title),
            f.svg,
            esc(&f.caption),
            esc(&f.id)
        );
    }
    let _ = write!(h, "<script>{}</script></body></html>", crate::html::JS);
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use nflab_model::mvno::MvnoSpec;

    fn small_run() -> MvnoResult {
        let spec = MvnoSpec {
            rate_per_s: 150.0,
            duration_s: 20.0,
            warmup_s: 5.0,
            ..MvnoSpec::default()
        };
        nflab_model::mvno::run(&spec.check().unwrap())
    }

    fn column(f: &Figure, name: &str) -> Vec<f64> {
        let i = f.data.header.iter().position(|h| h == name).unwrap();
        f.data.rows.iter().map(|r| r[i].parse().unwrap()).collect()
    }

    #[test]
    fn figures_draw_the_model_counts() {
        let r = small_run();
        let figs = figures(&r, 5.0, 0);
        let ids: Vec<&str> = figs.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "mvno_arrivals",
                "mvno_open_dialogs",
                "mvno_queues",
                "mvno_utilisation",
                "mvno_retries"
            ]
        );
        // Per-second arrivals and attachments add up to the run's device counts.
        let a = &figs[0];
        assert_eq!(column(a, "arrivals").iter().sum::<f64>() as u64, r.devices);
        assert_eq!(
            column(a, "attachments").iter().sum::<f64>() as u64,
            r.attached
        );
        // Mean utilisation after the warm-up equals the model's own summary.
        let u = column(&figs[3], "auc");
        let mean = u[5..].iter().sum::<f64>() / (u.len() - 5) as f64;
        assert!(
            (mean - r.utilisation["auc"]).abs() < 1e-9,
            "{mean} vs {}",
            r.utilisation["auc"]
        );
        // The retry histogram covers every device and every retry.
        let h = retry_histogram(&r.retries_per_device);
        assert_eq!(
            h.iter().map(|x| x.1).sum::<u64>(),
            r.retries_per_device.len() as u64
        );
        let total: u64 = r.retries_per_device.iter().map(|&x| u64::from(x)).sum();
        assert_eq!(h.iter().map(|x| u64::from(x.0) * x.1).sum::<u64>(), total);
        for f in &figs {
            assert!(
                f.svg.starts_with("<svg") && f.svg.ends_with("</svg>"),
                "{}",
                f.id
            );
        }
    }

    #[test]
    fn retry_histogram_known_answer() {
        assert_eq!(
            retry_histogram(&[0, 0, 3, 1, 0, 3]),
            vec![(0, 3), (1, 1), (3, 2)]
        );
        assert!(retry_histogram(&[]).is_empty());
    }

    #[test]
    fn run_directory_has_parquet_figures_and_page() {
        let r = small_run();
        let dir = std::env::temp_dir().join(format!("nflab-mvno-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let summary = serde_json::json!({"attach_rate_per_s": r.attach_rate_per_s, "utilisation": {"auc": 0.5}});
        let page = write_run(&dir, &r, 5.0, 0, &summary).unwrap();
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(html.contains("id=\"mvno_queues\"") && html.contains("attach_rate_per_s"));
        assert!(!html.contains("http://") || html.contains("xmlns=\"http://www.w3.org/2000/svg\""));
        for f in [
            "series.parquet",
            "retries.parquet",
            "figures/mvno_retries.csv",
            "figures/mvno_arrivals.svg",
        ] {
            assert!(dir.join(f).metadata().unwrap().len() > 0, "{f}");
        }
        let parquet = std::fs::read(dir.join("series.parquet")).unwrap();
        assert_eq!(&parquet[..4], b"PAR1");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
