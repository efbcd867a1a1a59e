//! The report as a person sees it: opened in headless Chromium (Debian's
//! `chromium`), with no console errors, every figure rendered with data, and
//! a screenshot saved into the test's artifact tree.
//!
//! Without Chromium the test fails naming the package (`scripts/deps.sh test`
//! installs it); `NFLAB_CHROMIUM` names another binary.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("NFLAB_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for d in std::env::split_paths(&path) {
            let p = d.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

fn headless(bin: &Path, profile: &Path) -> Command {
    let mut c = Command::new(bin);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn report_renders_in_chromium_without_errors() {
    let Some(bin) = chromium() else {
        // Fails naming the package, or is a counted skip when opted out.
        nflab_testkit::require_tool("chromium", "chromium");
        return;
    };
    let base = common::tmpdir("browser");
    let exp = common::experiment(&base);
    // A model prediction file, so the overlay figure is exercised too.
    std::fs::write(
        exp.join("model.json"),
        r#"{"predictions":[{"run":"004","p50_ns":4000,"p99_ns":12000},{"run":"006","p50_ns":4100,"p99_ns":13000}]}"#,
    )
    .unwrap();
    let report = nflab_report::write_report_with(
        &exp,
        &nflab_report::Options {
            only_figure: None,
            no_png: true,
            ..Default::default()
        },
    )
    .unwrap()
    .report
    .unwrap();
    let url = format!("file://{}", report.display());
    let profile = base.join("chromium-profile");

    let out = headless(&bin, &profile)
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("{url}#selftest"))
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {stderr}");
    let console_errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains("Error")))
        .collect();
    assert!(
        console_errors.is_empty(),
        "console errors: {console_errors:#?}"
    );

    // The page's own check: figures, how many drew marks with data, which
    // were empty, script errors.
    let key = "data-nflab-check=\"";
    let start = dom.find(key).unwrap_or_else(|| {
        panic!(
            "the page's check did not run; DOM head: {}",
            &dom[..dom.len().min(2000)]
        )
    }) + key.len();
    let end = start + dom[start..].find('"').unwrap();
    let raw = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    let check: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let want = [
        "hdr",
        "cdf",
        "ccdf",
        "histogram",
        "timeseries",
        "windows",
        "anomalies",
        "sweep",
        "throughput",
        "model",
        "ipg",
    ];
    assert_eq!(check["figures"], want.len(), "{check}");
    assert_eq!(check["rendered"], want.len(), "{check}");
    assert_eq!(check["empty"], serde_json::json!([]), "{check}");
    assert_eq!(check["errors"], serde_json::json!([]), "{check}");
    // Interaction: hover shows values, legend entries toggle, time axes zoom.
    let it = &check["interaction"];
    assert_eq!(it["failures"], serde_json::json!([]), "{check}");
    assert!(
        it["hover"].as_u64().unwrap() >= want.len() as u64,
        "{check}"
    );
    assert!(
        it["toggle"].as_u64().unwrap() >= want.len() as u64,
        "{check}"
    );
    // Time series panels (8 runs), the window plot and the anomaly panels zoom.
    assert!(it["zoom"].as_u64().unwrap() >= 8 + 1 + 2, "{check}");
    for id in want {
        assert!(
            dom.contains(&format!("data-fig=\"{id}\"")),
            "figure {id} missing"
        );
    }

    // The screenshot, kept with the tree it shows.
    let shot = exp.join("screenshot.png");
    let out = headless(&bin, &profile)
        .args(["--window-size=1200,3000", "--virtual-time-budget=5000"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 50_000,
        "screenshot too small: {} bytes",
        png.len()
    );
    println!("screenshot: {}", shot.display());
}
