//! Reproduces seed 003's MVNOCoreSim results (ch. 4.4) and prints a
//! Markdown table for docs/models.md.
//!
//! cargo run --release -p nflab-model --example mvno_reproduce -- [RUNS] [DURATION_S] [WARMUP_S] [ONLY]
//!
//! `ONLY` keeps the rows whose case starts with it, optionally at one rate:
//! `bottleneck`, `doubled`, `overload`, `bottleneck:460`.
//!
//! Defaults are the thesis's protocol: 10 runs of 5 min, first 60 s trimmed.
//! Each row is the mean over the runs (seeds 1..=RUNS) and the spread
//! (min–max) of the attach rate.

use nflab_model::mvno::{run, MvnoSpec, Policy};

fn row(label: &str, rate: f64, auc: i64, policy: Policy, runs: u64, dur: f64, warm: f64) {
    if !selected(label, rate) {
        return;
    }
    let mut att = Vec::new();
    let (mut u_auc, mut u_cmap) = (Vec::new(), Vec::new());
    let (mut max_r, mut ev, mut wall) = (0u32, 0u64, 0.0);
    for seed in 1..=runs {
        let spec = MvnoSpec {
            rate_per_s: rate,
            duration_s: dur,
            warmup_s: warm,
            seed,
            policy,
            processors: nflab_model::mvno::spec::Processors {
                auc,
                ..Default::default()
            },
            ..MvnoSpec::default()
        };
        let cfg = match spec.check() {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let r = run(&cfg);
        att.push(r.attach_rate_per_s);
        u_auc.push(r.utilisation["auc"]);
        u_cmap.push(r.utilisation["cmap"]);
        max_r = max_r.max(r.max_retries);
        ev += r.events;
        wall += r.wall_s;
    }
    // Means across the seeds: the engine's.
    let mean_of = |v: &[f64]| nflab_analyze::crossrun::mean(v).unwrap_or(f64::NAN);
    let (mean, u_auc, u_cmap) = (mean_of(&att), mean_of(&u_auc), mean_of(&u_cmap));
    let lo = att.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = att.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    println!(
        "| {label} | {rate} | {auc} | {policy:?} | {mean:.1} ({lo:.1}–{hi:.1}) | {u_auc:.3} | {u_cmap:.3} | {max_r} | {:.2} |",
        ev as f64 / wall / 1e6
    );
}

/// The 4th argument, `CASE[:RATE]`, if any.
fn selected(label: &str, rate: f64) -> bool {
    let Some(only) = std::env::args().nth(4) else {
        return true;
    };
    let (case, r) = only.split_once(':').unwrap_or((only.as_str(), ""));
    label.starts_with(case) && (r.is_empty() || r.parse::<f64>().ok() == Some(rate))
}

fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .take(3)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs = args.first().copied().unwrap_or(10.0) as u64;
    let dur = args.get(1).copied().unwrap_or(300.0);
    let warm = args.get(2).copied().unwrap_or(60.0);
    println!("{runs} runs × {dur} s, first {warm} s trimmed\n");
    println!("| case | offered /s | AUC procs | policy | attach /s mean (min–max) | AUC util | CMAP util | max retries | M events/s |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for rate in [300.0, 400.0, 440.0, 460.0, 480.0, 500.0] {
        row(
            "bottleneck search",
            rate,
            8,
            Policy::Baseline,
            runs,
            dur,
            warm,
        );
    }
    for rate in [600.0, 800.0, 820.0, 840.0, 850.0, 900.0] {
        row("doubled AUC", rate, 16, Policy::Baseline, runs, dur, warm);
    }
    for policy in [
        Policy::Baseline,
        Policy::Dropping,
        Policy::Msu,
        Policy::Device,
    ] {
        for rate in [850.0, 1700.0, 3400.0] {
            row("overload", rate, 16, policy, runs, dur, warm);
        }
    }
}
