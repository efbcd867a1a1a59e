//! The `nflab._engine` extension module: thin PyO3 wrappers, no statistic
//! of their own. `python/nflab/engine.py` is the public face.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use nflab_analyze::{curves, Distribution, TailState};

use crate::cli_json;
use crate::request::Request;

fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

/// A latency (or tx-gap) distribution of the engine.
#[pyclass(name = "Distribution", module = "nflab._engine")]
#[derive(Clone)]
pub struct PyDistribution {
    d: Distribution,
}

#[pymethods]
impl PyDistribution {
    /// Values recorded.
    fn count(&self) -> u64 {
        self.d.count()
    }
    fn min(&self) -> Option<i64> {
        self.d.min()
    }
    fn max(&self) -> Option<i64> {
        self.d.max()
    }
    fn mean(&self) -> Option<f64> {
        self.d.mean()
    }
    /// "exact" or "hdr".
    fn method(&self) -> String {
        match self.d.method() {
            nflab_analyze::Method::Exact => "exact".into(),
            nflab_analyze::Method::Hdr => "hdr".into(),
        }
    }
    /// Add every value of `other` (runs of one configuration pooled).
    fn merge(&mut self, other: &PyDistribution) {
        self.d.merge(&other.d);
    }
    /// Copy.
    fn copy(&self) -> PyDistribution {
        self.clone()
    }
    /// Nearest-rank value at each of `ranks` (1-based).
    fn values_at_ranks(&mut self, ranks: Vec<u64>) -> Vec<i64> {
        self.d
            .values_at_ranks(&ranks)
            .into_iter()
            .map(|q| q.value)
            .collect()
    }
    /// `(1/(1−p), latency)` of the HDR percentile plot (curves::percentile_curve).
    #[pyo3(signature = (per_decade = 40))]
    fn percentile_curve(&mut self, per_decade: u32) -> (Vec<f64>, Vec<i64>) {
        curves::percentile_curve(&mut self.d, per_decade)
            .into_iter()
            .unzip()
    }
    /// `(latency, P(L ≤ latency))` of the empirical CDF (curves::cdf_points).
    #[pyo3(signature = (max_points = 600))]
    fn cdf_points(&mut self, max_points: usize) -> (Vec<i64>, Vec<f64>) {
        curves::cdf_points(&mut self.d, max_points)
            .into_iter()
            .unzip()
    }
    /// Values per bin `[edges[i], edges[i+1])` (curves::bin_counts).
    fn bin_counts(&mut self, edges: Vec<f64>) -> Vec<u64> {
        curves::bin_counts(&mut self.d, &edges)
    }
    /// `(value, count)` ascending.
    fn value_counts(&mut self) -> (Vec<i64>, Vec<u64>) {
        self.d.value_counts().into_iter().unzip()
    }
    /// Mean squared difference from `target`.
    fn mse_about(&self, target: f64) -> Option<f64> {
        self.d.mse_about(target)
    }
    /// Record one value.
    fn record(&mut self, value: i64) {
        self.d.record(value);
    }
    /// Record every value of `values`, in order.
    fn record_many(&mut self, values: Vec<i64>) {
        for v in values {
            self.d.record(v);
        }
    }
    /// The engine's percentile `p` (in (0, 100], nearest rank: the value a
    /// summary reports for it), None when empty. A bad `p` raises ValueError.
    fn percentile(&mut self, p: f64) -> PyResult<Option<i64>> {
        let pct = nflab_analyze::Pct::parse(&p.to_string())
            .ok_or_else(|| err(format!("percentile {p} is outside (0, 100]")))?;
        Ok(self.d.quantiles(&[pct])[0].map(|q| q.value))
    }
}

/// The engine's analysis of one input.
#[pyclass(name = "Analysis", module = "nflab._engine")]
pub struct PyAnalysis {
    label: String,
    file: nflab_analyze::FileAnalysis,
}

#[pymethods]
impl PyAnalysis {
    /// The input (path, or `PRE -> POST`).
    #[getter]
    fn label(&self) -> String {
        self.label.clone()
    }
    /// summary.json of this input, as JSON text.
    fn summary_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.file.analysis.summary).map_err(|e| err(e.to_string()))
    }
    /// A problem that ended reading early, one sentence.
    #[getter]
    fn problem(&self) -> Option<String> {
        self.file.problem.clone()
    }
    /// "complete", "no-trailer" or "truncated: <reason>".
    #[getter]
    fn tail(&self) -> String {
        match &self.file.tail {
            TailState::Complete => "complete".into(),
            TailState::NoTrailer => "no-trailer".into(),
            TailState::Truncated { reason, .. } => format!("truncated: {reason}"),
        }
    }
    /// Start of window 0 (tx clock), ns.
    #[getter]
    fn origin_ns(&self) -> Option<u64> {
        self.file.analysis.origin_ns
    }
    /// The latency distribution of the measured packets.
    fn latency(&self) -> PyDistribution {
        PyDistribution {
            d: self.file.analysis.latency.clone(),
        }
    }
    /// Tx gaps of consecutive sequence numbers (with `tx_gaps=True`).
    fn tx_gaps(&self) -> Option<PyDistribution> {
        self.file
            .analysis
            .tx_gap
            .clone()
            .map(|d| PyDistribution { d })
    }
    /// `(start_ns, min_ns, max_ns)` per slice of `series_ns` (with `series_ns`).
    fn series(&self) -> (Vec<u64>, Vec<i64>, Vec<i64>) {
        let s = &self.file.analysis.series;
        (
            s.iter().map(|x| x.start_ns).collect(),
            s.iter().map(|x| x.min_ns).collect(),
            s.iter().map(|x| x.max_ns).collect(),
        )
    }
}

/// `(json, analyses, sla_failed)`: the text `nflab analyze --json FILES`
/// prints with these options (a JSON object of keyword arguments), the
/// analyses behind it, and whether an SLA clause failed.
#[pyfunction]
fn analyze(
    py: Python<'_>,
    files: Vec<String>,
    options: &str,
) -> PyResult<(String, Vec<PyAnalysis>, bool)> {
    let req = Request::from_json(options).map_err(err)?;
    let (json, analysed, failed) = py
        .detach(|| -> Result<_, String> {
            let a = cli_json::analyse(&files, &req)?;
            let json = serde_json::to_string_pretty(&cli_json::to_json(&a, &req)?)
                .map_err(|e| e.to_string())?;
            let failed = cli_json::sla_failed(&a, &req)?;
            Ok((json, a, failed))
        })
        .map_err(err)?;
    let out = analysed
        .into_iter()
        .map(|a| PyAnalysis {
            label: a.label,
            file: a.file,
        })
        .collect();
    Ok((json, out, failed))
}

/// An empty distribution (exact up to `exact_limit` values).
#[pyfunction]
#[pyo3(signature = (exact_limit = nflab_analyze::dist::DEFAULT_EXACT_LIMIT, hdr_digits = 3))]
fn distribution(exact_limit: u64, hdr_digits: u8) -> PyDistribution {
    PyDistribution {
        d: Distribution::new(exact_limit, hdr_digits),
    }
}

/// Log-spaced bin edges (curves::log_edges).
#[pyfunction]
fn log_edges(lo: f64, hi: f64, per_decade: usize) -> Vec<f64> {
    curves::log_edges(lo, hi, per_decade)
}

/// `(lo, hi, count)` of counts at values re-binned into log bins (curves::log_bins).
#[pyfunction]
fn log_bins(values: Vec<f64>, counts: Vec<u64>, per_decade: u32) -> Vec<(f64, f64, u64)> {
    let raw: Vec<(f64, u64)> = values.into_iter().zip(counts).collect();
    curves::log_bins(&raw, per_decade)
}

/// `(mean, lo, hi)` of the Student-t interval of the mean, None below 2 values.
#[pyfunction]
#[pyo3(signature = (values, level = 0.95))]
fn mean_t_ci(values: Vec<f64>, level: f64) -> Option<(f64, f64, f64)> {
    nflab_analyze::crossrun::mean_t_ci(&values, level).map(|i| (i.mean, i.lo, i.hi))
}

/// `(D, p)` of the two-sample KS test of two histograms, each `(values, counts)`
/// with values in increasing order (ks::ks_statistic_counts, ks::ks_p_value).
#[pyfunction]
fn ks_two_sample(
    a_values: Vec<i64>,
    a_counts: Vec<u64>,
    b_values: Vec<i64>,
    b_counts: Vec<u64>,
) -> PyResult<(f64, f64)> {
    let pairs = |v: Vec<i64>, c: Vec<u64>, side: &str| -> PyResult<Vec<(i64, u64)>> {
        if v.len() != c.len() || v.windows(2).any(|w| w[0] >= w[1]) {
            return Err(err(format!(
                "{side}: values must increase strictly and match the counts one for one"
            )));
        }
        Ok(v.into_iter().zip(c).collect())
    };
    let (a, b) = (
        pairs(a_values, a_counts, "a")?,
        pairs(b_values, b_counts, "b")?,
    );
    let n = |s: &[(i64, u64)]| s.iter().map(|&(_, c)| c as usize).sum::<usize>();
    let d = nflab_analyze::ks::ks_statistic_counts(&a, &b);
    Ok((d, nflab_analyze::ks::ks_p_value(d, n(&a), n(&b))))
}

/// `(D, p)` of the one-sample KS test against the exponential with `mean`
/// (ks::ks_exponential).
#[pyfunction]
fn ks_exponential(py: Python<'_>, mut samples: Vec<f64>, mean: f64) -> (f64, f64) {
    py.detach(|| nflab_analyze::ks::ks_exponential(&mut samples, mean))
}

/// The largest |r_k| over lags 1..max_lag (acf::max_abs_autocorrelation).
#[pyfunction]
fn max_abs_autocorrelation(py: Python<'_>, values: Vec<f64>, max_lag: usize) -> f64 {
    py.detach(|| nflab_analyze::acf::max_abs_autocorrelation(&values, max_lag))
}

/// r_1..r_L (acf::autocorrelation).
#[pyfunction]
fn autocorrelation(values: Vec<f64>, max_lag: usize) -> Vec<f64> {
    nflab_analyze::acf::autocorrelation(&values, max_lag)
}

/// Seed 003's periodicity metric of each device (acf::periodicity): the
/// active minutes of device i are `minutes[offsets[i]..offsets[i + 1]]`.
#[pyfunction]
fn periodicity(
    py: Python<'_>,
    minutes: Vec<i64>,
    offsets: Vec<usize>,
    horizon: usize,
    max_lag: usize,
    top: usize,
) -> PyResult<Vec<f64>> {
    if offsets.windows(2).any(|w| w[0] > w[1]) || offsets.last().is_some_and(|&e| e > minutes.len())
    {
        return Err(err(
            "offsets must not decrease and must end within minutes".into()
        ));
    }
    py.detach(|| {
        offsets
            .windows(2)
            .map(|w| nflab_analyze::acf::periodicity(&minutes[w[0]..w[1]], horizon, max_lag, top))
            .collect::<Option<Vec<f64>>>()
    })
    .ok_or_else(|| err(format!("a minute lies outside [0, {horizon})")))
}

/// `(spec, n, t_ns)` of an anomaly definition such as `2:250us`, normalised
/// as the engine prints it; `t_ns` is None for a relative threshold (p50*3).
#[pyfunction]
fn parse_anomaly(spec: &str) -> PyResult<(String, u32, Option<u64>)> {
    let s: nflab_analyze::AnomalySpec = spec.parse().map_err(|e| err(format!("{e}")))?;
    Ok(crate::anomaly_parts(&s))
}

/// `(first, last)` tx time of a record file from its block headers alone
/// (`nflab_record::prescan`, as the report sizes its windows), None if unreadable.
#[pyfunction]
fn prescan_span(path: &str) -> Option<(u64, u64)> {
    nflab_record::prescan(std::path::Path::new(path)).and_then(|p| p.span)
}

/// `(meta_json, trailer_json, tail, discarded_bytes, columns)`: every record
/// of an `.nfr` file as the engine reads it (record_table), `columns` a list
/// of `(name, little-endian bytes)`: seq u64, flow u16, tx_ns u64, rx_ns u64,
/// wire_len u16, flags u16, and measured (one byte, 1: the engine measures
/// the record: not warm-up, not a duplicate copy, not beyond the reorder
/// window). An unreadable file raises OSError, one that is not a record file
/// ValueError.
#[pyfunction]
#[pyo3(signature = (path, reorder_window = 65_536))]
#[allow(clippy::type_complexity)]
fn read_records<'py>(
    py: Python<'py>,
    path: &str,
    reorder_window: u64,
) -> PyResult<(
    String,
    Option<String>,
    String,
    u64,
    Vec<(&'static str, Bound<'py, pyo3::types::PyBytes>)>,
)> {
    use nflab_analyze::record_table::read_record_table;
    use nflab_analyze::AnalyzeError;
    use nflab_record::RecordError;
    let t = py
        .detach(|| read_record_table(std::path::Path::new(path), reorder_window))
        .map_err(|e| match e {
            AnalyzeError::Record(RecordError::Open { .. }) | AnalyzeError::Io { .. } => {
                pyo3::exceptions::PyOSError::new_err(e.to_string())
            }
            other => err(other.to_string()),
        })?;
    let meta = serde_json::to_string(&t.meta).map_err(|e| err(e.to_string()))?;
    let trailer = t
        .trailer
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| err(e.to_string()))?;
    let (tail, discarded) = match &t.tail {
        TailState::Complete => ("complete".to_string(), 0),
        TailState::NoTrailer => ("no-trailer".to_string(), 0),
        TailState::Truncated {
            reason,
            discarded_bytes,
        } => (format!("truncated: {reason}"), *discarded_bytes),
    };
    let r = &t.records;
    let col = |b: Vec<u8>| pyo3::types::PyBytes::new(py, &b);
    let u64s = |f: fn(&nflab_record::Record) -> u64| -> Vec<u8> {
        r.iter().flat_map(|x| f(x).to_le_bytes()).collect()
    };
    let u16s = |f: fn(&nflab_record::Record) -> u16| -> Vec<u8> {
        r.iter().flat_map(|x| f(x).to_le_bytes()).collect()
    };
    let columns = vec![
        ("seq", col(u64s(|x| x.seq))),
        ("flow", col(u16s(|x| x.flow))),
        ("tx_ns", col(u64s(|x| x.tx_ns))),
        ("rx_ns", col(u64s(|x| x.rx_ns))),
        ("wire_len", col(u16s(|x| x.wire_len))),
        ("flags", col(u16s(|x| x.flags))),
        (
            "measured",
            col(t.measured.iter().map(|&m| u8::from(m)).collect()),
        ),
    ];
    Ok((meta, trailer, tail, discarded, columns))
}

/// The module.
#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAnalysis>()?;
    m.add_class::<PyDistribution>()?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(distribution, m)?)?;
    m.add_function(wrap_pyfunction!(log_edges, m)?)?;
    m.add_function(wrap_pyfunction!(log_bins, m)?)?;
    m.add_function(wrap_pyfunction!(mean_t_ci, m)?)?;
    m.add_function(wrap_pyfunction!(ks_two_sample, m)?)?;
    m.add_function(wrap_pyfunction!(ks_exponential, m)?)?;
    m.add_function(wrap_pyfunction!(max_abs_autocorrelation, m)?)?;
    m.add_function(wrap_pyfunction!(autocorrelation, m)?)?;
    m.add_function(wrap_pyfunction!(periodicity, m)?)?;
    m.add_function(wrap_pyfunction!(parse_anomaly, m)?)?;
    m.add_function(wrap_pyfunction!(prescan_span, m)?)?;
    m.add_function(wrap_pyfunction!(read_records, m)?)?;
    Ok(())
}
