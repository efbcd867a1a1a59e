//! The page: header, problems, noise floor, results table with confidence
//! intervals, figures, spec and provenance, plus the inline style and script.

use std::fmt::Write as _;

use serde_json::Value;

use crate::figures::Figure;
use crate::load::{Experiment, Run};
use crate::svg::{esc, fmt_ns, fmt_pps, fmt_value, Fmt};

/// Figures that were not drawn, with the reason: (id, title, reason).
pub type Skipped = Vec<(&'static str, &'static str, String)>;

fn s<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// `mean ± h` of a per-run metric over a configuration's runs.
fn cell(e: &Experiment, runs: &[usize], metric: &dyn Fn(&Run) -> Option<f64>, fmt: Fmt) -> String {
    let vals: Vec<f64> = runs.iter().filter_map(|&r| metric(&e.runs[r])).collect();
    match crate::figures::mean_ci(&vals) {
        None => "—".into(),
        Some((m, None)) => fmt_value(m, fmt),
        Some((m, Some(0.0))) => fmt_value(m, fmt),
        Some((m, Some(h))) => format!(
            "{}<span class=\"ci\"> ± {}</span>",
            fmt_value(m, fmt),
            fmt_value(h, fmt)
        ),
    }
}

/// The whole HTML document.
pub fn page(e: &Experiment, figs: &[Figure], skipped: &Skipped, notes: &[String]) -> String {
    let mut h = String::with_capacity(1 << 20);
    let title = format!("nflab · {}", e.name);
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{CSS}</style></head><body>",
        esc(&title)
    );
    let exp = e.spec.as_ref().and_then(|s| s.get("experiment"));
    let exp_name = exp
        .and_then(|x| x.get("name"))
        .and_then(|v| v.as_str())
        .unwrap_or(&e.name);
    let _ = write!(h, "<header><h1>{}</h1>", esc(exp_name));
    if let Some(d) = exp
        .and_then(|x| x.get("description"))
        .and_then(|v| v.as_str())
    {
        let _ = write!(h, "<p class=\"lead\">{}</p>", esc(d));
    }
    let env = &e.env;
    let _ = write!(
        h,
        "<p class=\"meta\"><code>{}</code> · started {} · host {} · {} · {} CPUs · kernel {} · nflab {} ({})</p>",
        esc(&e.dir.display().to_string()),
        esc(s(env, "/started_utc").unwrap_or("?")),
        esc(s(env, "/hostname").unwrap_or("?")),
        esc(s(env, "/cpu_model").unwrap_or("?")),
        env.get("cpus").and_then(Value::as_u64).map_or("?".into(), |c| c.to_string()),
        esc(s(env, "/kernel").unwrap_or("?")),
        esc(s(env, "/nflab_version").unwrap_or("?")),
        esc(s(env, "/nflab_commit").unwrap_or("?")),
    );
    let (clock, res) = e.clock();
    let (tx, rx) = e.timestamping();
    let _ = write!(
        h,
        "<p>Latency is one-way: the receive timestamp ({}) minus the transmit timestamp ({}) written into each probe, both from <code>{}</code> (resolution {} ns, kernel clocksource {}) on one host, so no clock synchronisation is involved. {} runs in {} configuration(s).</p>",
        esc(&rx),
        esc(&tx),
        esc(&clock),
        res,
        esc(s(env, "/kernel_clocksource").unwrap_or("?")),
        e.runs.len(),
        e.configs.len()
    );
    // Table of contents.
    h.push_str("<nav><b>Contents</b> · <a href=\"#noise\">noise floor</a> · <a href=\"#results\">results</a>");
    if has_directions(e) {
        h.push_str(" · <a href=\"#directions\">each way</a>");
    }
    if crate::ncs::applies(e) {
        h.push_str(" · <a href=\"#ncs\">NCSbench</a>");
    }
    for f in figs {
        let _ = write!(
            h,
            " · <a href=\"#fig-{}\">{}</a>",
            f.id,
            esc(&short(&f.title))
        );
    }
    h.push_str(
        " · <a href=\"#spec\">spec</a> · <a href=\"#provenance\">provenance</a></nav></header>",
    );

    // What is missing, up front.
    let mut probs: Vec<String> = e.problems.clone();
    probs.extend(notes.iter().cloned());
    for r in &e.runs {
        for p in &r.problems {
            probs.push(format!("run {}: {p}", r.name));
        }
    }
    if !probs.is_empty() {
        h.push_str("<section class=\"problems\" id=\"problems\"><h2>What is missing</h2><ul>");
        for p in &probs {
            let _ = write!(h, "<li>{}</li>", esc(p));
        }
        h.push_str("</ul><p>The report shows everything that exists; figures leave out what is listed here.</p></section>");
    }

    noise_floor(&mut h, e);
    results(&mut h, e);
    directions(&mut h, e);
    crate::ncs::section(&mut h, e);

    let _ = write!(h, "<h2 id=\"figures\">Figures</h2><p class=\"hint\">Hover a line for its values, click a legend entry to hide or show a series, drag across a time axis to zoom (double-click resets). Each figure is also in <code>figures/</code> as SVG{}, with the CSV of exactly what it draws and the command that redraws it.</p>", if cfg!(feature = "png") { " and PNG" } else { "" });
    for f in figs {
        let _ = write!(
            h,
            "<section class=\"fig\" id=\"fig-{id}\" data-fig=\"{id}\"><h3>{}</h3><div class=\"svgwrap\">{}</div><figcaption>{}</figcaption>",
            esc(&f.title),
            f.svg,
            esc(&f.caption),
            id = f.id
        );
        for n in &f.notes {
            let _ = write!(h, "<p class=\"warn\">{}</p>", esc(n));
        }
        let _ = write!(
            h,
            "<p class=\"files\">files: <a href=\"figures/{id}.svg\">{id}.svg</a> · {png}<a href=\"figures/{id}.csv\">{id}.csv</a> · redraw: <code>nflab report {} --figure {id}</code></p></section>",
            esc(&e.dir.display().to_string()),
            id = f.id,
            png = if cfg!(feature = "png") {
                format!("<a href=\"figures/{id}.png\">{id}.png</a> · ", id = f.id)
            } else {
                String::new()
            }
        );
    }
    capture_links(&mut h, e);
    if !skipped.is_empty() {
        h.push_str("<h3>Figures that do not apply here</h3><ul class=\"skipped\">");
        for (id, t, why) in skipped {
            let _ = write!(
                h,
                "<li data-skip=\"{id}\"><b>{}</b>: {}</li>",
                esc(t),
                esc(why)
            );
        }
        h.push_str("</ul>");
    }

    let _ = write!(
        h,
        "<h2 id=\"spec\">Spec</h2><pre>{}</pre>",
        esc(e.spec_text.as_deref().unwrap_or("(spec.toml missing)"))
    );
    let _ = write!(
        h,
        "<h2 id=\"provenance\">Provenance</h2><pre>{}</pre>",
        esc(&serde_json::to_string_pretty(&e.env).unwrap_or_default())
    );
    let _ = write!(h, "<footer>Written by nflab-report {}. This file is self-contained: no network access is needed to open it.</footer>", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(
        h,
        "<div id=\"tip\" hidden></div><script>{JS}</script></body></html>"
    );
    h
}

fn short(t: &str) -> String {
    t.split(':')
        .next()
        .unwrap_or(t)
        .replace("Latency ", "")
        .to_string()
}

fn noise_floor(h: &mut String, e: &Experiment) {
    h.push_str("<h2 id=\"noise\">Noise floor of this host</h2>");
    let floor: Vec<usize> = (0..e.configs.len())
        .filter(|&ci| {
            e.configs[ci]
                .runs
                .iter()
                .any(|&r| e.runs[r].dut() == "loopback")
        })
        .collect();
    if floor.is_empty() {
        h.push_str("<p class=\"warn\">This experiment has no <code>loopback</code> run, so its own measurement noise is not shown: run <code>nflab doctor</code>, or add <code>\"dut.kind\" = [\"loopback\", …]</code> to the sweep, before trusting differences of a few microseconds.</p>");
        return;
    }
    h.push_str("<p>The <code>loopback</code> runs cable the generator straight to the recorder (lg0 ↔ lg1, no DuT): every microsecond they show is the measurement's own — generator, kernel, veth and recorder. A DuT's latency is only meaningful well above this floor, and its difference to the loopback run at the same rate is the DuT's own share.</p><table class=\"small\"><tr><th>configuration</th><th>runs</th><th>p50</th><th>p99</th><th>p99.9</th><th>max</th><th>RFC 3550 jitter</th></tr>");
    for ci in floor {
        let c = &e.configs[ci];
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.label),
            c.runs.len(),
            cell(e, &c.runs, &|r| r.num("/latency_ns/p50"), Fmt::Ns),
            cell(e, &c.runs, &|r| r.num("/latency_ns/p99"), Fmt::Ns),
            cell(e, &c.runs, &|r| r.num("/latency_ns/p99.9"), Fmt::Ns),
            cell(e, &c.runs, &|r| r.num("/latency_ns/max"), Fmt::Ns),
            cell(e, &c.runs, &|r| r.num("/jitter_ns/rfc3550"), Fmt::Ns),
        );
    }
    h.push_str("</table>");
}

fn results(h: &mut String, e: &Experiment) {
    h.push_str("<h2 id=\"results\">Results</h2>");
    let reps = e.configs.iter().map(|c| c.runs.len()).max().unwrap_or(0);
    let _ = write!(
        h,
        "<p>One row per run configuration: the mean over its repetitions{}. Latency percentiles are nearest-rank over all packets of a run (summary.json; computed from the records where a run has no summary).</p>",
        if reps > 1 {
            " ± the half-width of the 95 % confidence interval of that mean (Student t)"
        } else {
            " (one repetition: no confidence interval; set <code>[experiment] repetitions</code> ≥ 3 for one)"
        }
    );
    let specs: Vec<String> = e
        .runs
        .iter()
        .find_map(|r| r.params.pointer("/analysis/anomalies")?.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    h.push_str("<div class=\"scroll\"><table><tr><th>configuration</th><th>runs</th><th>offered</th><th>rx rate</th><th>loss</th><th>p50</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>RFC 3550 jitter</th>");
    if !specs.is_empty() {
        let _ = write!(h, "<th>anomalies<br>{}</th>", esc(&specs.join(" · ")));
    }
    h.push_str("</tr>");
    for c in &e.configs {
        let lat = |ptr: &'static str| move |r: &Run| r.num(ptr);
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(&c.label),
            c.runs.len(),
            cell(e, &c.runs, &|r| r.offered_pps(), Fmt::Pps),
            cell(e, &c.runs, &|r| r.num("/rate/rx_pps"), Fmt::Pps),
            cell(e, &c.runs, &|r| r.num("/loss_ratio"), Fmt::Percent),
            cell(e, &c.runs, &lat("/latency_ns/p50"), Fmt::Ns),
            cell(e, &c.runs, &lat("/latency_ns/p99"), Fmt::Ns),
            cell(e, &c.runs, &lat("/latency_ns/p99.9"), Fmt::Ns),
            cell(e, &c.runs, &lat("/latency_ns/p99.99"), Fmt::Ns),
            cell(e, &c.runs, &lat("/latency_ns/max"), Fmt::Ns),
            cell(e, &c.runs, &|r| r.num("/jitter_ns/rfc3550"), Fmt::Ns),
        );
        if !specs.is_empty() {
            let cells: Vec<String> = (0..specs.len())
                .map(|i| {
                    let ptr = format!("/anomalies/{i}/count");
                    cell(e, &c.runs, &|r| r.num(&ptr), Fmt::Num)
                })
                .collect();
            let _ = write!(h, "<td>{}</td>", cells.join(" · "));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></div>");

    // Per run, folded.
    h.push_str("<details><summary>Every run</summary><table class=\"small\"><tr><th>run</th><th>configuration</th><th>rep.</th><th>sent</th><th>received</th><th>loss</th><th>rx rate</th><th>p50</th><th>p99</th><th>max</th><th>notes</th></tr>");
    for r in &e.runs {
        let mut notes: Vec<String> = r
            .summary
            .as_ref()
            .and_then(|s| s.get("notes"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if r.summary
            .as_ref()
            .and_then(|s| s.get("interrupted"))
            .and_then(Value::as_bool)
            == Some(true)
        {
            notes.insert(0, "interrupted".into());
        }
        notes.extend(r.problems.iter().cloned());
        let g = |v: Option<f64>, f: Fmt| v.map_or("—".to_string(), |x| fmt_value(x, f));
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"notes\">{}</td></tr>",
            esc(&r.name),
            esc(&e.configs[r.config].label),
            r.params.get("repetition").and_then(Value::as_u64).map_or("—".into(), |v| v.to_string()),
            g(r.num("/packets/sent"), Fmt::Num),
            g(r.received(), Fmt::Num),
            g(r.num("/loss_ratio"), Fmt::Percent),
            r.num("/rate/rx_pps").map_or("—".into(), fmt_pps),
            g(r.num("/latency_ns/p50"), Fmt::Ns),
            g(r.num("/latency_ns/p99"), Fmt::Ns),
            r.num("/latency_ns/max").map_or("—".into(), fmt_ns),
            esc(&notes.join("; "))
        );
    }
    h.push_str("</table></details>");
}

/// Whether any run sent the reverse way (`traffic.direction`).
fn has_directions(e: &Experiment) -> bool {
    e.runs.iter().any(|r| {
        r.summary
            .as_ref()
            .and_then(|s| s.get("directions"))
            .and_then(Value::as_object)
            .is_some_and(|d| !d.is_empty())
    })
}

/// Each way of the runs that sent the reverse way or both (`summary.json` →
/// `directions`): a row per configuration and way.
fn directions(h: &mut String, e: &Experiment) {
    if !has_directions(e) {
        return;
    }
    h.push_str("<h2 id=\"directions\">Each way</h2><p>Runs with <code>traffic.direction</code> = \"reverse\" or \"both\": forward is the generator's port to the recorder's (lg0 → DuT → lg1), reverse the other way, each with its own probe stream and records (summary.json → <code>directions</code>). Means over the repetitions, as above.</p>");
    h.push_str("<div class=\"scroll\"><table><tr><th>configuration</th><th>way</th><th>runs</th><th>offered</th><th>rx rate</th><th>loss</th><th>p50</th><th>p99</th><th>p99.9</th><th>max</th><th>RFC 3550 jitter</th></tr>");
    for c in &e.configs {
        for way in ["forward", "reverse"] {
            let at = |ptr: &str| format!("/directions/{way}{ptr}");
            let runs: Vec<usize> = c
                .runs
                .iter()
                .copied()
                .filter(|&i| e.runs[i].num(&at("/packets/sent")).is_some())
                .collect();
            if runs.is_empty() {
                continue;
            }
            let num = |ptr: String| move |r: &Run| r.num(&ptr);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&c.label),
                if way == "forward" { "→ forward" } else { "← reverse" },
                runs.len(),
                cell(e, &runs, &num(at("/rate/offered_pps")), Fmt::Pps),
                cell(e, &runs, &num(at("/rate/rx_pps")), Fmt::Pps),
                cell(e, &runs, &num(at("/loss_ratio")), Fmt::Percent),
                cell(e, &runs, &num(at("/latency_ns/p50")), Fmt::Ns),
                cell(e, &runs, &num(at("/latency_ns/p99")), Fmt::Ns),
                cell(e, &runs, &num(at("/latency_ns/p99.9")), Fmt::Ns),
                cell(e, &runs, &num(at("/latency_ns/max")), Fmt::Ns),
                cell(e, &runs, &num(at("/jitter_ns/rfc3550")), Fmt::Ns),
            );
        }
    }
    h.push_str("</table></div>");
}

pub(crate) const CSS: &str = r#"
:root{--fg:#1d1d1f;--muted:#5f6368;--line:#d9d9de;--warn:#a8321e}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);max-width:1180px;margin:0 auto;padding:1.2em 1.5em 3em}
h1{font-size:1.7em;margin:.2em 0}h2{font-size:1.3em;margin-top:1.8em;border-bottom:1px solid var(--line);padding-bottom:.2em}h3{font-size:1.08em;margin:1.4em 0 .4em}
.lead{font-size:1.1em;margin:.2em 0}.meta,.hint,.files,footer{color:var(--muted);font-size:.85em}
nav{font-size:.88em;margin:.8em 0;padding:.5em .8em;background:#f6f6f8;border-radius:6px}nav a{color:#0b57d0;text-decoration:none}
table{border-collapse:collapse;font-size:12.5px;margin:.6em 0;font-variant-numeric:tabular-nums}td,th{border:1px solid var(--line);padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f3f3f6;font-weight:600}td:first-child,th:first-child{text-align:left}td.notes{white-space:normal;text-align:left;max-width:420px;font-size:12px;color:var(--muted)}
.ci{color:var(--muted);font-size:.9em}.scroll{overflow-x:auto}
pre{background:#f7f7f9;padding:1em;overflow:auto;font-size:12px;border-radius:6px}
.warn{color:var(--warn)}.problems{border-left:4px solid var(--warn);background:#fdf3f1;padding:.3em 1em;margin:1em 0}.problems h2{border:0;margin-top:.4em;color:var(--warn)}
section.fig{margin:1.5em 0 2.2em}.svgwrap{overflow-x:auto}svg.plot text{fill:#333}
figcaption{font-size:13px;color:#333;max-width:860px;margin-top:.3em}
svg .lg{cursor:pointer}svg .lg.off{opacity:.3}svg .off{display:none}
svg[data-zoom]{cursor:crosshair}
#tip{position:fixed;pointer-events:none;background:rgba(30,30,30,.92);color:#fff;font:12px/1.35 system-ui,sans-serif;padding:4px 7px;border-radius:4px;z-index:10;white-space:pre}
details summary{cursor:pointer;color:#0b57d0;font-size:.9em}
"#;

pub(crate) const JS: &str = include_str!("report.js");

/// The packets around each anomaly: a link to the capture dump that covers
/// it (runs with a `[capture]` section), with its packet count.
fn capture_links(h: &mut String, e: &Experiment) {
    let links = crate::figures::anomaly::dump_links(e);
    let dumps: usize = e.runs.iter().map(|r| r.dumps.len()).sum();
    if dumps == 0 {
        return;
    }
    let _ = write!(
        h,
        "<section id=\"captures\"><h3>Packets around the anomalies</h3><p>{dumps} capture dump(s) in this experiment (pcapng, nanosecond timestamps; open them in Wireshark). Each anomaly of the timeline whose packets fall into a dump's window:</p><ul class=\"captures\">"
    );
    for l in &links {
        let _ = write!(
            h,
            "<li>run {} · anomaly {} at {:.4} s ({} packets) → <a href=\"{f}\">{f}</a> ({} packets)</li>",
            esc(&l.run),
            esc(&l.spec),
            l.start_s,
            l.packets,
            l.dump.packets,
            f = esc(&l.dump.file)
        );
    }
    if links.is_empty() {
        h.push_str("<li>no anomaly falls into a dump's window</li>");
    }
    h.push_str("</ul></section>");
}
