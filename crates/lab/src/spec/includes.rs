//! `[experiment] include = [...]`: fragments merged under the file's own values.

use std::path::Path;

use crate::error::LabError;

use super::{one_line, where_is};

/// How deep includes may nest (a cycle ends here with a clear error).
const MAX_INCLUDE_DEPTH: usize = 8;

/// Merge `[experiment] include = [...]` fragments under the file's own
/// values and return the resolved TOML text (unchanged when nothing is
/// included, so error lines still point into the user's file).
pub(super) fn resolve_includes(path: &Path, text: &str, depth: usize) -> Result<String, LabError> {
    let spec_err = |file: &Path, message: String| LabError::Spec {
        file: file.display().to_string(),
        message,
    };
    let own: toml::Table =
        toml::from_str(text).map_err(|e| spec_err(path, one_line(&e.to_string())))?;
    let includes: Vec<String> = match own.get("experiment").and_then(|e| e.get("include")) {
        None => return Ok(text.to_string()),
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str().map(String::from).ok_or_else(|| {
                    spec_err(
                        path,
                        format!(
                            "{}experiment.include must list file names as strings",
                            where_is(text, "experiment", "include")
                        ),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(spec_err(
                path,
                format!(
                    "{}experiment.include must be a list of file names, e.g. [\"common.toml\"]",
                    where_is(text, "experiment", "include")
                ),
            ))
        }
    };
    if depth >= MAX_INCLUDE_DEPTH {
        return Err(spec_err(
            path,
            format!("includes nest deeper than {MAX_INCLUDE_DEPTH} levels: is there a cycle?"),
        ));
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let mut merged = toml::Table::new();
    for inc in &includes {
        let p = base.join(inc);
        let t = std::fs::read_to_string(&p).map_err(|e| {
            spec_err(
                path,
                format!(
                    "{}experiment.include names {inc}, which cannot be read: {e}",
                    where_is(text, "experiment", "include")
                ),
            )
        })?;
        let resolved = resolve_includes(&p, &t, depth + 1)?;
        let table: toml::Table =
            toml::from_str(&resolved).map_err(|e| spec_err(&p, one_line(&e.to_string())))?;
        deep_merge(&mut merged, table);
    }
    let mut own = own;
    if let Some(toml::Value::Table(e)) = own.get_mut("experiment") {
        e.remove("include");
    }
    deep_merge(&mut merged, own);
    toml::to_string(&merged).map_err(|e| spec_err(path, format!("cannot merge the includes: {e}")))
}

/// `over` wins; tables merge key by key, everything else is replaced.
fn deep_merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => deep_merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}
