//! NCSbench through `nflab run` (root, real namespaces): a short challenge
//! search over the link DuT — 1 ms, where the plant stays up, and 9 ms, where
//! the round trip misses the (5× time-scaled) deadline and it falls — with two
//! repetitions each. Checks the runs' files, `ncs-challenge.json`'s
//! fractions and bracket, and the report's NCSbench section.

use std::path::PathBuf;
use std::sync::Mutex;

#[macro_use]
mod common;
use common::{namespaces_of, nflab, read_json, run_ok, stderr, write_spec, TempDir};

static SERIAL: Mutex<()> = Mutex::new(());

const SPEC: &str = r#"
[experiment]
name = "ncs-e2e"
repetitions = 2

[dut]
kind = "link"
realtime = true

[dut.link]
delay_us = 1000

[app]
kind = "ncsbench"
periods = 150
# Deadline 29 ms / 5 = 5.8 ms: a 1 ms link makes it, a 9 ms one cannot.
time_scale = 5

[traffic]
backend = "af_packet"
rate_pps = 100
frame_bytes = 128
duration_s = 1
warmup_s = 0.1

[sweep]
"dut.link.delay_us" = [1000, 9000]
"#;

#[test]
fn a_short_challenge_search_brackets_the_failure_and_lands_in_the_report() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("ncs");
    let spec = write_spec(&tmp.0, "ncs", SPEC);
    let (_, result, _) = run_ok(&spec, &tmp.0);
    let dir = PathBuf::from(result["dir"].as_str().unwrap());
    let mut fell = Vec::new();
    for i in 0..4 {
        let rd = dir.join(format!("runs/{i:03}"));
        let ncs = read_json(rd.join("ncs.json"));
        let delay = read_json(rd.join("params.json"))["sweep"]["dut.link.delay_us"]
            .as_u64()
            .unwrap();
        fell.push((delay, ncs["fell"].as_bool().unwrap()));
        let csv = std::fs::read_to_string(rd.join("ncs-periods.csv")).unwrap();
        assert!(csv
            .lines()
            .next()
            .unwrap()
            .ends_with(",d_PC_ns,d_PS_ns,d_N_ns,d_PA_ns,period_ns"));
        if delay == 1000 {
            assert_eq!(ncs["periods_completed"], 150, "{ncs}");
            // The first sensor message is no longer dropped by the plant
            // interface's not yet activated qdisc. Period 0 may still be
            // lost when the plant's thread itself starts it late (the suite
            // saw a 5.4 ms late wake-up on a quiet host): then the time left
            // from its read to its deadline is under one round trip of the
            // link; a drop leaves the whole deadline.
            let first = csv.lines().nth(1).unwrap();
            println!("run {i:03} first period: {first}");
            let f: Vec<&str> = first.split(',').collect();
            assert_eq!(f[0], "0", "{first}");
            let (t_read, t_write): (u64, u64) = (f[1].parse().unwrap(), f[6].parse().unwrap());
            let round_trip_ns = 2 * delay * 1000;
            // A late answer (the controller or the way back stalled on a
            // loaded host: the CI saw 9.65 ms once) is not a dropped sensor
            // message: then the controller answered every period.
            let answered_all = ncs["controller_answered"] == ncs["periods_completed"];
            assert!(
                f[11] == "false" || t_write - t_read < round_trip_ns || answered_all,
                "period 0 lost with {} µs between its read and its deadline and the controller answered {} of {} sensor messages: {first}",
                (t_write - t_read) / 1000,
                ncs["controller_answered"],
                ncs["periods_completed"]
            );
        }
    }
    println!("(delay, fell): {fell:?}");
    assert!(fell.iter().all(|&(d, f)| f == (d == 9000)), "{fell:?}");

    let ch = read_json(dir.join("ncs-challenge.json"));
    println!("{}", serde_json::to_string_pretty(&ch).unwrap());
    assert_eq!(
        (ch["runs"].as_u64(), ch["stayed_up"].as_u64()),
        (Some(4), Some(2))
    );
    assert_eq!(ch["bracket"]["key"], "dut.link.delay_us");
    assert_eq!(ch["bracket"]["largest_all_up"], 1000.0);
    assert_eq!(ch["bracket"]["smallest_any_down"], 9000.0);
    let c0 = &ch["configurations"][0]["stayed_up"];
    assert_eq!(
        (c0["successes"].as_u64(), c0["n"].as_u64()),
        (Some(2), Some(2))
    );
    // 2 of 2: the lower bound is 0.025^(1/2).
    assert!((c0["lo"].as_f64().unwrap() - 0.025f64.sqrt()).abs() < 1e-9);
    // d_N pooled over the configuration's periods: as many as its runs'
    // periods.csv files have d_N values, its median between theirs.
    let c = &ch["configurations"][0];
    let mut periods = 0;
    let mut medians = Vec::new();
    for run in c["runs"].as_array().unwrap() {
        let rd = dir.join("runs").join(run.as_str().unwrap());
        let csv = std::fs::read_to_string(rd.join("ncs-periods.csv")).unwrap();
        let col = csv
            .lines()
            .next()
            .unwrap()
            .split(',')
            .position(|h| h == "d_N_ns")
            .unwrap();
        periods += csv
            .lines()
            .skip(1)
            .filter(|l| !l.split(',').nth(col).unwrap_or("").is_empty())
            .count();
        medians.push(
            read_json(rd.join("ncs.json"))["delays_ms"]["d_N"]["median"]
                .as_f64()
                .unwrap(),
        );
    }
    assert_eq!(
        c["d_n_pooled_periods"].as_u64(),
        Some(periods as u64),
        "{c}"
    );
    let pooled = c["d_n_pooled_ms"]["median"].as_f64().unwrap();
    let (lo, hi) = (medians[0].min(medians[1]), medians[0].max(medians[1]));
    assert!(
        pooled >= lo - 0.01 && pooled <= hi + 0.01,
        "{pooled} vs {medians:?}"
    );

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<h2 id=\"ncs\">"));
    assert!(html.contains("<b>2 of 4 runs</b>"));
    for id in [
        "ncs-delays",
        "ncs-delay-histograms",
        "ncs-plant",
        "ncs-survival",
    ] {
        assert!(dir.join(format!("figures/{id}.svg")).is_file(), "{id}");
    }
}

/// `nflab run` killed with SIGKILL during an NCSbench run leaves its namespaces, the
/// plant's included; each has an owner file naming the dead process, so `nflab topo gc`
/// (limited to that run's topology id, to leave other runs' leftovers alone) removes them
/// all and nothing of the run is left.
#[test]
fn kill_9_during_an_ncs_run_then_gc_removes_the_plant_namespace_too() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("ncs-kill");
    let spec = write_spec(
        &tmp.0,
        "ncs-kill",
        &SPEC
            .replace("repetitions = 2", "repetitions = 1")
            .replace("periods = 150", "periods = 2000")
            .replace("duration_s = 1\n", "duration_s = 20\n")
            .replace(
                "\"dut.link.delay_us\" = [1000, 9000]",
                "\"dut.link.delay_us\" = [1000]",
            ),
    );
    let mut child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the plant is running: its namespace (`nflab-<id>-plant`) and owner file
    // exist.
    let owner_of = |ns: &str| std::path::Path::new("/run/nflab").join(format!("{ns}.owner"));
    let start = std::time::Instant::now();
    let plant = loop {
        let found = namespaces_of(pid)
            .into_iter()
            .find(|n| n.ends_with("-plant") && owner_of(n).exists());
        if let Some(p) = found {
            break p;
        }
        if start.elapsed() > std::time::Duration::from_secs(60)
            || child.try_wait().unwrap().is_some()
        {
            let _ = child.kill();
            let _ = child.wait();
            remove_namespaces_of(pid);
            panic!("no plant namespace with an owner file appeared");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let id = plant
        .trim_start_matches("nflab-")
        .trim_end_matches("-plant")
        .to_string();
    let owner = owner_of(&plant);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let owner_text = std::fs::read_to_string(&owner).unwrap_or_default();
    child.kill().unwrap();
    child.wait().unwrap();
    let left = namespaces_of(pid);
    let status = nflab().args(["topo", "status", "--json"]).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
    let gc = nflab().args(["topo", "gc", &id]).output().unwrap();
    let gc_out = String::from_utf8_lossy(&gc.stdout).to_string();
    let after = namespaces_of(pid);
    // Clean up before asserting, so a failure leaves nothing behind.
    remove_namespaces_of(pid);
    assert_eq!(
        owner_text.split_whitespace().next(),
        Some(pid.to_string().as_str()),
        "the plant's owner file: {owner_text:?}"
    );
    assert!(left.contains(&plant), "the killed run left {left:?}");
    let entry = status
        .as_array()
        .and_then(|a| a.iter().find(|n| n["name"] == plant.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(entry["owner_pid"], pid, "{entry}");
    assert_eq!(entry["owner_alive"], false, "{entry}");
    assert!(gc.status.success(), "{}", stderr(&gc));
    for ns in &left {
        assert!(gc_out.contains(&format!("removed {ns}")), "gc: {gc_out}");
    }
    assert_eq!(
        gc_out.lines().count(),
        left.len(),
        "gc touched only this run's: {gc_out}"
    );
    assert!(after.is_empty(), "left after gc: {after:?}");
    assert!(!owner.exists());
}

/// Remove whatever namespaces (and owner files) process `pid` left.
fn remove_namespaces_of(pid: u32) {
    for ns in namespaces_of(pid) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &ns])
            .status();
        let _ = std::fs::remove_file(format!("/run/nflab/{ns}.owner"));
    }
}

/// The loss-rate challenge (`examples/ncsbench-challenge-loss.toml`, shortened and 5×
/// time-scaled): no loss keeps the plant up, 80 % Bernoulli loss both ways (a period
/// lost with probability 0.96) brings it down; `ncs-challenge.json` brackets the failure
/// point along `dut.link.loss.p`. The runs' NCS figures are columns of `results.parquet`
/// equal to their `ncs.json`, and `nflab compare` shows them per configuration.
#[test]
fn a_loss_rate_challenge_brackets_the_failure_and_its_figures_are_results_columns() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("ncs-loss");
    // The example itself parses and sweeps the loss rate.
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/ncsbench-challenge-loss.toml");
    let text = std::fs::read_to_string(&example).unwrap();
    assert!(text.contains("\"dut.link.loss.p\" = [0.0,"));
    let spec = write_spec(
        &tmp.0,
        "ncs-loss",
        &SPEC
            .replace("repetitions = 2", "repetitions = 1")
            .replace(
                "delay_us = 1000\n",
                "delay_us = 1000\nloss = { model = \"bernoulli\", p = 0.0 }\n",
            )
            .replace(
                "\"dut.link.delay_us\" = [1000, 9000]",
                "\"dut.link.loss.p\" = [0.0, 0.8]",
            ),
    );
    let (_, result, _) = run_ok(&spec, &tmp.0);
    let dir = PathBuf::from(result["dir"].as_str().unwrap());
    let ch = read_json(dir.join("ncs-challenge.json"));
    println!("{}", serde_json::to_string_pretty(&ch["bracket"]).unwrap());
    assert_eq!(ch["bracket"]["key"], "dut.link.loss.p");
    assert_eq!(ch["bracket"]["largest_all_up"], 0.0);
    assert_eq!(ch["bracket"]["smallest_any_down"], 0.8);
    // The link did lose about 80 % of the actuations' direction.
    let dut = read_json(dir.join("runs/001/dut.json"));
    let fwd = &dut["forward"]["apps"][0]["detail"];
    let (lost, seen) = (
        fwd["lost"].as_u64().unwrap(),
        fwd["packets_in"].as_u64().unwrap(),
    );
    println!("forward: lost {lost} of {seen}");
    // Binomial(n ≈ 100+, 0.8): 0.65..0.95 is beyond 4 standard deviations either way.
    let share = lost as f64 / seen as f64;
    assert!((0.65..0.95).contains(&share), "lost {lost} of {seen}");

    // results.parquet: one row per run, the NCS columns equal to each run's ncs.json.
    let rows = parquet_rows(&dir.join("results.parquet"));
    assert_eq!(rows.len(), 2);
    for (i, row) in rows.iter().enumerate() {
        let ncs = read_json(dir.join(format!("runs/{i:03}/ncs.json")));
        assert_eq!(row["ncs_fell"], ncs["fell"], "run {i}");
        assert_eq!(row["ncs_losses"], ncs["losses"], "run {i}");
        assert_eq!(
            row["ncs_periods_completed"], ncs["periods_completed"],
            "run {i}"
        );
        for (col, ptr) in [
            ("ncs_d_N_median_ms", "/delays_ms/d_N/median"),
            ("ncs_d_N_p99.9_ms", "/delays_ms/d_N/p99_9"),
            ("ncs_iae_theta", "/iae/theta"),
            ("ncs_iae_phi", "/iae/phi"),
            ("ncs_iae_nu", "/iae/nu"),
        ] {
            let want = ncs.pointer(ptr).cloned().unwrap_or(serde_json::Value::Null);
            assert_eq!(row[col], want, "run {i} {col}");
        }
    }
    assert_eq!(rows[0]["ncs_fell"], false);
    assert_eq!(rows[1]["ncs_fell"], true);

    // nflab compare of the experiment with itself: per configuration, the NCS columns.
    let cmp = nflab()
        .args([
            "compare",
            dir.to_str().unwrap(),
            dir.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(cmp.status.success(), "{}", stderr(&cmp));
    let v: serde_json::Value = serde_json::from_slice(&cmp.stdout).unwrap();
    let configs = v.as_array().unwrap();
    assert_eq!(configs.len(), 2);
    for c in configs {
        let app = c["a"]["app"].as_array().unwrap();
        let fell = app.iter().find(|s| s["column"] == "ncs_fell").unwrap();
        let want = if c["config"].as_str().unwrap().contains("0.8") {
            1.0
        } else {
            0.0
        };
        assert_eq!(fell["mean"], want, "{c}");
        assert_eq!(fell["n"], 1);
    }
    let text = nflab()
        .args(["compare", dir.to_str().unwrap(), dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("ncs_losses: A "), "{text}");
}

/// The rows of a Parquet file as JSON objects.
fn parquet_rows(path: &std::path::Path) -> Vec<serde_json::Value> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            let mut o = serde_json::Map::new();
            for (name, field) in r.get_column_iter() {
                let v = match field {
                    Field::Long(v) => serde_json::Value::from(*v),
                    Field::Double(v) => serde_json::Value::from(*v),
                    Field::Bool(v) => serde_json::Value::from(*v),
                    Field::Str(v) => serde_json::Value::from(v.clone()),
                    _ => serde_json::Value::Null,
                };
                o.insert(name.clone(), v);
            }
            serde_json::Value::Object(o)
        })
        .collect()
}
