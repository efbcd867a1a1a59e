//! `[app] kind = "prrt"` specs through the `nflab` binary, no root needed: bad input is one
//! sentence naming the key (exit 2), and the example grid expands to the seed's 750
//! combinations of which 675 run (`experiment.skip_refused`).

use std::path::PathBuf;
use std::process::Command;

fn nflab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nflab"))
        .args(args)
        .output()
        .expect("run nflab")
}

fn spec_file(tag: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("nflab-prrt-cli-{}-{tag}.toml", std::process::id()));
    std::fs::write(&p, text).expect("write spec");
    p
}

const BASE: &str = "[experiment]\nname = \"p\"\n[dut]\nkind = \"link\"\n[app]\nkind = \"prrt\"\ngap_ms = 1\npayload_bytes = 20\ntarget_delay_ms = 10\nwindow_ms = 2\nduration_s = 1\n";

#[test]
fn bad_prrt_input_is_one_sentence_naming_the_key() {
    let cases = [
        (
            "window_ms = 2",
            "window_ms = 20",
            "app.window_ms = 20: must not exceed app.target_delay_ms (10)",
        ),
        (
            "payload_bytes = 20",
            "payload_bytes = 1500",
            "app.payload_bytes = 1500: must be at most 1422 (MTU 1500)",
        ),
        (
            "target_delay_ms = 10",
            "target_delay_ms = -1",
            "app.target_delay_ms = -1: must be above zero",
        ),
        ("gap_ms = 1", "gap_ms = 1\ngap = 2", "unknown field `gap`"),
        (
            "kind = \"link\"",
            "kind = \"linux-router\"",
            "app.kind = \"prrt\" cannot cross dut.kind = \"linux-router\"",
        ),
    ];
    for (i, (from, to, want)) in cases.iter().enumerate() {
        let path = spec_file(&format!("bad{i}"), &BASE.replace(from, to));
        let out = nflab(&[
            "run",
            path.to_str().unwrap_or(""),
            "--out",
            "/nonexistent-nflab-out",
        ]);
        let _ = std::fs::remove_file(&path);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{to}: {err}");
        assert!(err.contains(want), "{to}: {err}");
    }
    // The line of the key is named where it is in the file.
    let path = spec_file("line", &BASE.replace("window_ms = 2", "window_ms = 20"));
    let out = nflab(&["run", path.to_str().unwrap_or("")]);
    let _ = std::fs::remove_file(&path);
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 10"));
}

#[test]
fn the_example_grid_is_the_seeds_750_combinations_675_of_them_run() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/prrt-grid.toml");
    let out = nflab(&["run", "--dry-run", example]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 675);
    // No run has a window wider than its target.
    for l in &lines {
        let get = |k: &str| -> f64 {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("app.{k}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{k} in {l}"))
        };
        assert!(get("window_ms") <= get("target_delay_ms"), "{l}");
    }
    assert!(lines.iter().all(|l| l.contains(" link ")));
}
