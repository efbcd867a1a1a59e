//! `nflab model mvno`: the JSON contract, the per-second series, and bad
//! input as one sentence naming the key. In-memory model, no namespaces.

mod common;

use common::{nflab, TempDir};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn mvno_json_contract_and_series() {
    let tmp = TempDir::new("mvno");
    let out = nflab()
        .args([
            "model",
            "mvno",
            "--rate",
            "200",
            "--duration-s",
            "30",
            "--warmup-s",
            "10",
        ])
        .args([
            "--processors",
            "auc=8",
            "--policy",
            "baseline",
            "--json",
            "--out",
        ])
        .arg(&tmp.0)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for c in ["cmap", "hlr", "auc", "backend"] {
        assert!(v["utilisation"][c].is_f64(), "utilisation.{c} missing: {v}");
    }
    for k in [
        "attach_rate_per_s",
        "max_retries",
        "p99_retries",
        "events",
        "wall_s",
    ] {
        assert!(!v[k].is_null(), "{k} missing: {v}");
    }
    // Offered AUC work: 200 devices/s × 2 SAIs × (2886 + 749 + 4960) µs on 8.
    let auc = v["utilisation"]["auc"].as_f64().unwrap();
    let expected = 200.0 * 2.0 * (2886.0 + 749.0 + 4960.0) * 1e-6 / 8.0;
    assert!((auc - expected).abs() < 0.03, "AUC {auc} vs {expected}");
    assert_eq!(v["p99_retries"], 0, "no retries below saturation");
    let series = std::fs::read_to_string(tmp.0.join("series.csv")).unwrap();
    let mut lines = series.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("second,arrivals,attachments,retries"),
        "{header}"
    );
    assert!(
        header.contains("queue_auc") && header.contains("utilisation_cmap"),
        "{header}"
    );
    assert_eq!(lines.count(), 30);
    let retries = std::fs::read_to_string(tmp.0.join("retries.csv")).unwrap();
    let devices = v["devices"].as_u64().unwrap() as usize;
    assert_eq!(retries.lines().count(), devices + 1);
    // The same series as Parquet, read back with the parquet crate: its rows
    // and its arrivals column agree with the CSV.
    let arrivals_csv: i64 = series
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse::<i64>().unwrap())
        .sum();
    let (rows, arrivals) = parquet_column_sum(&tmp.0.join("series.parquet"), "arrivals");
    assert_eq!((rows, arrivals), (30, arrivals_csv));
    let (rows, _) = parquet_column_sum(&tmp.0.join("retries.parquet"), "retries");
    assert_eq!(rows, devices);
    let html = std::fs::read_to_string(tmp.0.join("report.html")).unwrap();
    for id in [
        "mvno_arrivals",
        "mvno_open_dialogs",
        "mvno_queues",
        "mvno_utilisation",
        "mvno_retries",
    ] {
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "{id} missing from report.html"
        );
        assert!(tmp.0.join(format!("figures/{id}.csv")).exists(), "{id}.csv");
    }
}

/// Rows of a Parquet file and the sum of one INT64 column.
fn parquet_column_sum(path: &std::path::Path, column: &str) -> (usize, i64) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let (mut rows, mut sum) = (0, 0);
    for row in reader.get_row_iter(None).unwrap() {
        let row = row.unwrap();
        rows += 1;
        for (name, field) in row.get_column_iter() {
            if name == column {
                if let Field::Long(v) = field {
                    sum += v;
                }
            }
        }
    }
    (rows, sum)
}

#[test]
fn mvno_bad_input_names_the_key() {
    let out = nflab()
        .args([
            "model",
            "mvno",
            "--processors",
            "auc=0",
            "--duration-s",
            "5",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("processors.auc = 0") && e.trim().lines().count() == 1,
        "{e}"
    );

    let tmp = TempDir::new("mvno-bad");
    let spec = tmp.0.join("mvno.toml");
    std::fs::write(
        &spec,
        "family = \"lognormal\"\n[service]\nisd = { mean_us = 5998, cv = -1 }\n",
    )
    .unwrap();
    let out = nflab().args(["model", "mvno"]).arg(&spec).output().unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("service.isd.cv") && e.contains("lognormal"),
        "{e}"
    );
}
