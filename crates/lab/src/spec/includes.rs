//! `[experiment] include = [...]`: fragments merged under the file's own values.

use std::path::Path;

use crate::error::LabError;

use super::{one_line, one_line_unquoted, where_is};

/// How deep includes may nest (a cycle ends here with a clear error).
const MAX_INCLUDE_DEPTH: usize = 8;

/// Merge `[experiment] include = [...]` fragments under the file's own
/// values and return the resolved TOML text (unchanged when nothing is
/// included, so error lines still point into the user's file).
///
/// With `confine` (the spec's own directory, canonical), every included file
/// must lie under it: a relative path without `..` whose real path (symlinks
/// followed) stays inside. A spec is run as root, and an include outside
/// would let it read any file of the host.
pub(super) fn resolve_includes(
    path: &Path,
    text: &str,
    depth: usize,
    confine: Option<&Path>,
) -> Result<String, LabError> {
    let spec_err = |file: &Path, message: String| LabError::Spec {
        file: file.display().to_string(),
        message,
    };
    // An included file that is not TOML is not a spec: its lines are never echoed.
    let own: toml::Table = toml::from_str(text).map_err(|e| {
        let message = if depth == 0 {
            one_line(&e.to_string())
        } else {
            one_line_unquoted(&e.to_string())
        };
        spec_err(path, message)
    })?;
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
        if let Some(root) = confine {
            let plain = Path::new(inc).components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
            let inside = plain
                && std::fs::canonicalize(&p)
                    .map(|real| real.starts_with(root))
                    .unwrap_or(true); // a missing file is reported below as unreadable
            if !inside {
                return Err(spec_err(
                    path,
                    format!(
                        "{}experiment.include names {inc:?}, which is outside {} (the spec's directory): name a file under it without '..', or pass --allow-include-outside",
                        where_is(text, "experiment", "include"),
                        root.display()
                    ),
                ));
            }
        }
        let t = std::fs::read_to_string(&p).map_err(|e| {
            spec_err(
                path,
                format!(
                    "{}experiment.include names {inc}, which cannot be read: {e}",
                    where_is(text, "experiment", "include")
                ),
            )
        })?;
        let resolved = resolve_includes(&p, &t, depth + 1, confine)?;
        let table: toml::Table = toml::from_str(&resolved)
            .map_err(|e| spec_err(&p, one_line_unquoted(&e.to_string())))?;
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
