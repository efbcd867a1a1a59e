//! `nflab analyze --json FILES...` as a library call: the same inputs
//! (record files, experiment directories, capture pairs), the same engine
//! calls and the same JSON text, so the Python API and the CLI agree byte
//! for byte.

use std::path::{Path, PathBuf};

use nflab_analyze::crossrun::evaluate_sla;
use nflab_analyze::{FileAnalysis, Format, Summary};

use crate::request::{Input, Request, Resolved};

/// One analysed input: its label (the path, or `PRE -> POST`), the engine's
/// result and the problem that ended reading early, if any.
pub struct Analysed {
    /// The key of this input in the multi-file JSON.
    pub label: String,
    /// The engine's result.
    pub file: FileAnalysis,
}

/// Experiment directories become their runs' `records.nfr` files, as in the CLI.
pub fn expand(files: &[String]) -> Result<Vec<PathBuf>, String> {
    let paths: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
    nflab_analyze::expand_inputs(&paths)
}

/// Analyse every input of `files` with `req`, in order.
pub fn analyse(files: &[String], req: &Request) -> Result<Vec<Analysed>, String> {
    if files.is_empty() {
        return Err("no input: give record files or experiment directories".into());
    }
    let Resolved {
        cfg, opts, export, ..
    } = req.resolve()?;
    let input = req.input(files)?;
    let mut out = Vec::new();
    match input {
        Input::PcapPairs => {
            if !files.len().is_multiple_of(2) {
                return Err(format!(
                    "pcap input takes pairs PRE POST (capture before and after the device under \
                     test); {} files were given",
                    files.len()
                ));
            }
            for c in files.chunks_exact(2) {
                let label = format!("{} -> {}", c[0], c[1]);
                let file = nflab_analyze::analyze_pcap_pair(
                    Path::new(&c[0]),
                    Path::new(&c[1]),
                    &cfg,
                    &opts,
                )
                .map_err(|e| format!("analysing {label}: {e}"))?;
                out.push(Analysed { label, file });
            }
        }
        Input::Files(format) => {
            for path in expand(files)? {
                let label = path.display().to_string();
                let file = if req.anomalies_only {
                    let f = format.unwrap_or_else(|| Format::guess(&path));
                    if f != Format::Trex {
                        return Err(format!(
                            "anomalies_only reads TRex-fork files (.data or format=\"trex\"); {label} \
                             is read as {f:?}: drop anomalies_only for it"
                        ));
                    }
                    nflab_analyze::analyze_trex_anomalies_only(&path, &cfg, &opts, req.threads)
                } else {
                    nflab_analyze::analyze_file_with(&path, &cfg, &opts, format)
                }
                .map_err(|e| format!("analysing {label}: {e}"))?;
                out.push(Analysed { label, file });
            }
        }
    }
    if let Some((dir, fmt, bins)) = export {
        // As the CLI: one directory per input when there are several.
        let several = out.len() > 1;
        for (i, a) in out.iter_mut().enumerate() {
            let d = if several {
                dir.join(format!("{i:03}"))
            } else {
                dir.clone()
            };
            nflab_analyze::export::write_exports(&d, &mut a.file.analysis, fmt, bins)
                .map_err(|e| format!("export of {}: {e}", a.label))?;
        }
    }
    Ok(out)
}

/// The JSON value `nflab analyze --json` prints for these analyses: one
/// summary (with `sla` verdicts when asked), or an object keyed by input
/// with `_across_runs`.
pub fn to_json(analysed: &[Analysed], req: &Request) -> Result<serde_json::Value, String> {
    let Resolved { sla, .. } = req.resolve()?;
    let summaries: Vec<&Summary> = analysed.iter().map(|a| &a.file.analysis.summary).collect();
    let mut values = Vec::new();
    for s in &summaries {
        let mut v = serde_json::to_value(s).map_err(|e| e.to_string())?;
        if let (Some(clauses), serde_json::Value::Object(m)) = (&sla, &mut v) {
            let verdicts = evaluate_sla(clauses, s);
            m.insert(
                "sla".into(),
                serde_json::to_value(verdicts).map_err(|e| e.to_string())?,
            );
        }
        values.push(v);
    }
    if values.len() == 1 {
        return Ok(values.remove(0));
    }
    let mut m: serde_json::Map<String, serde_json::Value> = analysed
        .iter()
        .zip(values)
        .map(|(a, v)| (a.label.clone(), v))
        .collect();
    m.insert(
        "_across_runs".into(),
        nflab_analyze::across::across_runs(summaries.iter().copied(), req.confidence),
    );
    Ok(serde_json::Value::Object(m))
}

/// The text `nflab analyze --json` prints (without the final newline).
pub fn analyze_json(files: &[String], req: &Request) -> Result<String, String> {
    let a = analyse(files, req)?;
    serde_json::to_string_pretty(&to_json(&a, req)?).map_err(|e| e.to_string())
}

/// Whether any SLA clause failed (the CLI's exit code 3).
pub fn sla_failed(analysed: &[Analysed], req: &Request) -> Result<bool, String> {
    let Resolved { sla, .. } = req.resolve()?;
    Ok(sla.is_some_and(|c| {
        analysed.iter().any(|a| {
            evaluate_sla(&c, &a.file.analysis.summary)
                .iter()
                .any(|v| !v.pass)
        })
    }))
}
