//! An application's figures as columns of `results.parquet` (and of `nflab compare`):
//! each run's `prrt.json` or `ncs.json`, flattened to one value per column, read back
//! from the run's directory so a resumed run gets the same columns as a fresh one.
//! The column names are documented in docs/formats.md.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

/// One cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AppValue {
    /// A count.
    Int(i64),
    /// A ratio or a time.
    Float(f64),
    /// A yes/no outcome.
    Bool(bool),
}

impl AppValue {
    /// As a number (true = 1), for means across runs.
    pub fn as_f64(self) -> f64 {
        match self {
            AppValue::Int(v) => v as f64,
            AppValue::Float(v) => v,
            AppValue::Bool(v) => f64::from(u8::from(v)),
        }
    }
}

/// A run's application columns, in a fixed order; empty when the run had no application.
pub type AppColumns = Vec<(String, Option<AppValue>)>;

/// Serialize columns as one JSON object, `{"ncs_losses": 3, …}` (`nflab run --json`).
pub fn serialize_columns<S: serde::Serializer>(cols: &AppColumns, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(cols.iter().map(|(k, v)| (k, v)))
}

/// The directions of `prrt.json`.
pub const PRRT_DIRECTIONS: [&str; 2] = ["pc", "cp"];

fn read(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn int(v: Option<&Value>) -> Option<AppValue> {
    v?.as_i64().map(AppValue::Int)
}

fn float(v: Option<&Value>) -> Option<AppValue> {
    v?.as_f64().map(AppValue::Float)
}

/// `prrt.json` → `prrt_<pc|cp>_{sent, delivered, late_discarded, loss_ratio,
/// redundancy_ratio, outages, outage_longest_ns}`.
pub fn prrt_columns(prrt: &Value) -> AppColumns {
    let mut out = Vec::new();
    for d in PRRT_DIRECTIONS {
        let v = &prrt[d];
        let col = |k: &str| format!("prrt_{d}_{k}");
        for k in ["sent", "delivered", "late_discarded"] {
            out.push((col(k), int(v.get(k))));
        }
        for k in ["loss_ratio", "redundancy_ratio"] {
            out.push((col(k), float(v.get(k))));
        }
        let outages = v.get("outages").and_then(Value::as_array);
        out.push((
            col("outages"),
            outages.map(|o| AppValue::Int(o.len() as i64)),
        ));
        // No outage: the longest lasted 0 ns.
        out.push((
            col("outage_longest_ns"),
            outages.map(|o| {
                AppValue::Int(
                    o.iter()
                        .filter_map(|x| x.get("length_ns").and_then(Value::as_i64))
                        .max()
                        .unwrap_or(0),
                )
            }),
        ));
    }
    out
}

/// `ncs.json` → `ncs_{losses, fell, periods_completed, d_N_median_ms, d_N_p99.9_ms,
/// iae_theta, iae_phi, iae_nu}`.
pub fn ncs_columns(ncs: &Value) -> AppColumns {
    let d_n = ncs.pointer("/delays_ms/d_N");
    vec![
        ("ncs_losses".into(), int(ncs.get("losses"))),
        (
            "ncs_fell".into(),
            ncs.get("fell").and_then(Value::as_bool).map(AppValue::Bool),
        ),
        (
            "ncs_periods_completed".into(),
            int(ncs.get("periods_completed")),
        ),
        (
            "ncs_d_N_median_ms".into(),
            float(d_n.and_then(|d| d.get("median"))),
        ),
        (
            "ncs_d_N_p99.9_ms".into(),
            float(d_n.and_then(|d| d.get("p99_9"))),
        ),
        ("ncs_iae_theta".into(), float(ncs.pointer("/iae/theta"))),
        ("ncs_iae_phi".into(), float(ncs.pointer("/iae/phi"))),
        ("ncs_iae_nu".into(), float(ncs.pointer("/iae/nu"))),
    ]
}

/// The application columns of the run in `run_dir`: PRRT's, then NCSbench's, for the
/// files that are there.
pub fn read_app_columns(run_dir: &Path) -> AppColumns {
    let mut out = Vec::new();
    if let Some(v) = read(&run_dir.join("prrt.json")) {
        out.extend(prrt_columns(&v));
    }
    if let Some(v) = read(&run_dir.join("ncs.json")) {
        out.extend(ncs_columns(&v));
    }
    out
}

/// The union of several runs' column names, in order of first appearance.
pub fn column_names<'a>(runs: impl IntoIterator<Item = &'a AppColumns>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for cols in runs {
        for (k, _) in cols {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names
}

/// The value of column `name` in `cols`.
pub fn get(cols: &AppColumns, name: &str) -> Option<AppValue> {
    cols.iter().find(|(k, _)| k == name).and_then(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prrt_json_flattens_to_the_documented_columns() {
        let prrt = serde_json::json!({
            "pc": {"sent": 200, "delivered": 150, "late_discarded": 10, "loss_ratio": 0.25,
                   "redundancy_ratio": 0.125,
                   "outages": [{"start_ns": 5, "length_ns": 300, "both_directions": true},
                               {"start_ns": 900, "length_ns": 2000, "both_directions": true}]},
            "cp": {"sent": 4, "delivered": 4, "late_discarded": 0, "loss_ratio": 0.0,
                   "redundancy_ratio": 0.5, "outages": []}
        });
        let cols = prrt_columns(&prrt);
        assert_eq!(cols.len(), 14);
        assert_eq!(get(&cols, "prrt_pc_sent"), Some(AppValue::Int(200)));
        assert_eq!(get(&cols, "prrt_pc_delivered"), Some(AppValue::Int(150)));
        assert_eq!(
            get(&cols, "prrt_pc_late_discarded"),
            Some(AppValue::Int(10))
        );
        assert_eq!(
            get(&cols, "prrt_pc_loss_ratio"),
            Some(AppValue::Float(0.25))
        );
        assert_eq!(get(&cols, "prrt_pc_outages"), Some(AppValue::Int(2)));
        assert_eq!(
            get(&cols, "prrt_pc_outage_longest_ns"),
            Some(AppValue::Int(2000))
        );
        assert_eq!(get(&cols, "prrt_cp_outages"), Some(AppValue::Int(0)));
        assert_eq!(
            get(&cols, "prrt_cp_outage_longest_ns"),
            Some(AppValue::Int(0))
        );
        assert_eq!(
            get(&cols, "prrt_cp_redundancy_ratio"),
            Some(AppValue::Float(0.5))
        );
    }

    #[test]
    fn ncs_json_flattens_and_missing_values_stay_empty() {
        let ncs = serde_json::json!({
            "delays_ms": {"d_N": {"median": 4.1, "ci95": 0.01, "q1": 4.0, "q3": 4.2, "p99_9": 9.5}},
            "iae": {"theta": 12.5, "phi": 300.0, "nu": 7.25},
            "losses": 3, "fell": true, "periods_completed": 120, "periods": 150, "time_scale": 5.0
        });
        let cols = ncs_columns(&ncs);
        assert_eq!(get(&cols, "ncs_losses"), Some(AppValue::Int(3)));
        assert_eq!(get(&cols, "ncs_fell"), Some(AppValue::Bool(true)));
        assert_eq!(
            get(&cols, "ncs_periods_completed"),
            Some(AppValue::Int(120))
        );
        assert_eq!(get(&cols, "ncs_d_N_median_ms"), Some(AppValue::Float(4.1)));
        assert_eq!(get(&cols, "ncs_d_N_p99.9_ms"), Some(AppValue::Float(9.5)));
        assert_eq!(get(&cols, "ncs_iae_theta"), Some(AppValue::Float(12.5)));
        assert_eq!(get(&cols, "ncs_iae_nu"), Some(AppValue::Float(7.25)));
        // A run that fell before any actuation has no d_N: the cell is empty, not 0.
        let cols = ncs_columns(&serde_json::json!({"delays_ms": {}, "losses": 0, "fell": true}));
        assert_eq!(get(&cols, "ncs_d_N_median_ms"), None);
        assert_eq!(cols.len(), 8);
    }

    #[test]
    fn names_are_the_union_in_order_of_first_appearance() {
        let a: AppColumns = vec![("x".into(), None), ("y".into(), None)];
        let b: AppColumns = vec![("y".into(), None), ("z".into(), None)];
        assert_eq!(column_names([&a, &b]), ["x", "y", "z"]);
    }
}
