//! `[sweep]` expanded into runs: applied to the TOML document before it is
//! deserialized, so a swept key is checked by exactly the rules of a key written
//! by hand.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use crate::error::LabError;

use super::*;

impl Spec {
    /// The runs of this experiment, in execution order.
    pub fn expand(&self, text: &str) -> Result<Vec<RunPlan>, LabError> {
        self.expand_with_text(text, "spec").map(|(plans, _)| plans)
    }

    /// The runs, and the sweep's combinations left out because a rule refused them
    /// (only with `experiment.skip_refused`; otherwise the first refusal is the error).
    pub fn expand_all(&self, text: &str) -> Result<(Vec<RunPlan>, Vec<Refused>), LabError> {
        self.expand_with_text(text, "spec")
    }

    pub(super) fn expand_with_text(
        &self,
        text: &str,
        origin: &str,
    ) -> Result<(Vec<RunPlan>, Vec<Refused>), LabError> {
        let base: toml::Table = toml::from_str(text).map_err(|e| LabError::Spec {
            file: origin.to_string(),
            message: one_line(&e.to_string()),
        })?;
        let mut axes: Vec<(String, Vec<toml::Value>)> = Vec::new();
        for (key, values) in &self.sweep {
            let here = where_is(text, "sweep", key);
            let list = match values {
                toml::Value::Array(a) if !a.is_empty() => a.clone(),
                toml::Value::Array(_) => {
                    return Err(LabError::Spec {
                        file: origin.to_string(),
                        message: format!("{here}sweep key \"{key}\" has an empty list of values: give at least one value"),
                    })
                }
                other => vec![other.clone()],
            };
            let parts: Vec<&str> = key.split('.').collect();
            let knob = parts.len() > 2 && parts[0] == "knobs" && parts[1] == "sysctl";
            // "dut.link.delay_us", "dut.link.reverse.delay_us": a link's own keys;
            // "dut.link.loss.p", "dut.link.reverse.loss.p": its loss model's.
            let link = parts.len() >= 3
                && parts[0] == "dut"
                && parts[1] == "link"
                && matches!(
                    &parts[2..],
                    [_] | ["reverse" | "loss", _] | ["reverse", "loss", _]
                );
            if !knob
                && !link
                && (parts.len() != 2
                    || !["topology", "dut", "traffic", "analysis", "knobs", "app"]
                        .contains(&parts[0]))
            {
                return Err(LabError::Spec {
                    file: origin.to_string(),
                    message: format!(
                        "{here}sweep key \"{key}\" is not valid: use \"section.key\" with section topology, dut, traffic, analysis, knobs or app, \"dut.link.<key>\", \"dut.link.reverse.<key>\", \"dut.link[.reverse].loss.<key>\" or \"knobs.sysctl.<name>\""
                    ),
                });
            }
            axes.push((key.clone(), list));
        }

        // Cross product, first key outermost (pos loop variables).
        let mut combos: Vec<BTreeMap<String, toml::Value>> = vec![BTreeMap::new()];
        for (key, values) in &axes {
            let mut next = Vec::with_capacity(combos.len() * values.len());
            for c in &combos {
                for v in values {
                    let mut c = c.clone();
                    c.insert(key.clone(), v.clone());
                    next.push(c);
                }
            }
            combos = next;
        }

        let mut plans = Vec::new();
        let mut refused = Vec::new();
        for (ci, combo) in combos.iter().enumerate() {
            let mut doc = base.clone();
            doc.remove("sweep");
            for (key, value) in combo {
                let (section, field) = key.split_once('.').unwrap_or((key, ""));
                let entry = doc
                    .entry(section.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let toml::Value::Table(t) = entry {
                    match field.strip_prefix("sysctl.").filter(|_| section == "knobs") {
                        // "knobs.sysctl.net.core.busy_poll": the sysctl name keeps its dots.
                        Some(name) => {
                            let sys = t
                                .entry("sysctl".to_string())
                                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                            if let toml::Value::Table(sys) = sys {
                                sys.insert(name.to_string(), value.clone());
                            }
                        }
                        // "link.delay_us" under dut: tables down to the key.
                        None => set_nested(t, &field.split('.').collect::<Vec<_>>(), value),
                    }
                }
            }
            let resolved: Spec =
                toml::Value::Table(doc.clone())
                    .try_into()
                    .map_err(|e: toml::de::Error| LabError::Spec {
                        file: origin.to_string(),
                        message: format!(
                            "{}the sweep value {} is not valid: {}",
                            combo
                                .keys()
                                .next()
                                .map(|k| where_is(text, "sweep", k))
                                .unwrap_or_default(),
                            describe_combo(combo),
                            one_line(&e.to_string())
                        ),
                    })?;
            let resolved_text = toml::to_string(&doc).unwrap_or_default();
            match resolved.validate(&resolved_text, origin) {
                Ok(()) => {}
                Err(LabError::Spec { message, .. })
                    if self.experiment.skip_refused && !combo.is_empty() =>
                {
                    refused.push(Refused {
                        combination: ci,
                        params: combo.clone(),
                        reason: message,
                    });
                    continue;
                }
                Err(LabError::Spec { file, message }) => {
                    return Err(LabError::Spec {
                        file,
                        message: format!("with {}: {message}", describe_combo(combo)),
                    })
                }
                Err(other) => return Err(other),
            }
            for rep in 0..self.experiment.repetitions {
                plans.push(RunPlan {
                    index: 0,
                    repetition: rep,
                    combination: ci,
                    params: combo.clone(),
                    spec: resolved.clone(),
                });
            }
        }
        if let (true, Some(first)) = (plans.is_empty(), refused.first()) {
            // Found by fuzzing: a study that would run nothing and say nothing.
            return Err(LabError::Spec {
                file: origin.to_string(),
                message: format!(
                    "experiment.skip_refused = true, but all {} combinations of the sweep are refused, so nothing would run; the first, with {}: {}",
                    refused.len(),
                    describe_combo(&first.params),
                    first.reason
                ),
            });
        }
        if self.experiment.order == Order::Random {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.experiment.seed);
            plans.shuffle(&mut rng);
        }
        for (i, p) in plans.iter_mut().enumerate() {
            p.index = i;
        }
        Ok((plans, refused))
    }
}

/// A combination of the sweep that a rule refused (`experiment.skip_refused`).
#[derive(Debug, Clone, Serialize)]
pub struct Refused {
    /// Its index in the cross product (first key outermost).
    pub combination: usize,
    /// The swept values.
    pub params: BTreeMap<String, toml::Value>,
    /// The rule's sentence.
    pub reason: String,
}

/// Set `path` (table names, then the key) in `t` to `value`, making the tables on the way.
fn set_nested(t: &mut toml::Table, path: &[&str], value: &toml::Value) {
    match path {
        [] => {}
        [key] => {
            t.insert(key.to_string(), value.clone());
        }
        [name, rest @ ..] => {
            let e = t
                .entry(name.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(inner) = e {
                set_nested(inner, rest, value);
            }
        }
    }
}

fn describe_combo(combo: &BTreeMap<String, toml::Value>) -> String {
    combo
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
