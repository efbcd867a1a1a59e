//! System knobs: settings an experiment changes on the host, each applied,
//! read back, recorded and reverted.
//!
//! Seeds 001 and 002 change kernel and CPU settings (busy polling, governor,
//! isolation) and need each one recorded. A knob the host does not have is
//! recorded as unsupported and the run goes on, unless the spec lists it in
//! `required`. Every knob is put back to its old value when the run ends —
//! on success, error or signal — by [`AppliedKnobs`]'s `Drop`.
//!
//! ```toml
//! [knobs]
//! sysctl = { "net.core.busy_poll" = 50, "net.core.busy_read" = 50 }
//! cpu_governor = "performance"
//! required = ["net.core.busy_poll"]
//!
//! [sweep]
//! "knobs.sysctl.net.core.busy_poll" = [0, 50]
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// `[knobs]` of the spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KnobsSection {
    /// Host sysctls by dotted name (`net.core.busy_poll`), set for the run.
    #[serde(default)]
    pub sysctl: BTreeMap<String, toml::Value>,
    /// cpufreq governor for every CPU (`performance`, `powersave`, ...).
    #[serde(default)]
    pub cpu_governor: Option<String>,
    /// Knob names (sysctl names, "cpu_governor", or interface knob names
    /// like "dut:dut0.offloads.gro") that must apply, or the run stops.
    #[serde(default)]
    pub required: Vec<String>,
    /// Interface knobs by "<lg|dut>:<interface>" (see `iface_knobs`).
    #[serde(default)]
    pub iface: BTreeMap<String, crate::iface_knobs::IfaceKnob>,
}

impl KnobsSection {
    /// True when the section sets nothing.
    pub fn is_empty(&self) -> bool {
        self.sysctl.is_empty() && self.cpu_governor.is_none() && self.iface.is_empty()
    }

    /// Check names and values without touching the host.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in &self.sysctl {
            if name.is_empty() || name.contains("..") || name.contains('/') || name.starts_with('.')
            {
                return Err(format!(
                    "knobs.sysctl: \"{name}\" is not a sysctl name: use the dotted form, e.g. net.core.busy_poll"
                ));
            }
            if value_text(v).is_none() {
                return Err(format!(
                    "knobs.sysctl.{name} = {v} is not valid: use a number or a string"
                ));
            }
        }
        crate::iface_knobs::validate(&self.iface)?;
        for r in &self.required {
            let iface = self.iface.keys().any(|k| r.starts_with(&format!("{k}.")));
            if r != "cpu_governor" && !self.sysctl.contains_key(r) && !iface {
                return Err(format!(
                    "knobs.required names \"{r}\", which this [knobs] section does not set"
                ));
            }
        }
        Ok(())
    }
}

fn value_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Boolean(b) => Some((*b as u8).to_string()),
        _ => None,
    }
}

/// What happened to one knob.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KnobRecord {
    /// Knob name.
    pub name: String,
    /// Where it lives.
    pub path: String,
    /// Value asked for.
    pub requested: String,
    /// Value before the run (None if the knob does not exist).
    pub before: Option<String>,
    /// Value read back after applying it.
    pub applied: Option<String>,
    /// "applied", "unsupported" or "refused: <reason>".
    pub status: String,
    /// Value after reverting.
    pub reverted: Option<String>,
}

/// Knobs in force; reverted on drop.
#[derive(Debug, Default)]
pub struct AppliedKnobs {
    records: Vec<KnobRecord>,
    undo: Vec<(PathBuf, String)>,
    reverted: bool,
}

/// Where knobs live; the tests point this at a temporary tree.
#[derive(Debug, Clone)]
pub struct KnobRoots {
    /// `/proc/sys`.
    pub proc_sys: PathBuf,
    /// `/sys/devices/system/cpu`.
    pub cpu: PathBuf,
}

impl Default for KnobRoots {
    fn default() -> Self {
        KnobRoots {
            proc_sys: "/proc/sys".into(),
            cpu: "/sys/devices/system/cpu".into(),
        }
    }
}

fn read_trim(p: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

impl AppliedKnobs {
    /// Apply every knob of `section` under `roots`.
    pub fn apply(section: &KnobsSection, roots: &KnobRoots) -> Result<AppliedKnobs, LabError> {
        let mut applied = AppliedKnobs::default();
        let mut targets: Vec<(String, PathBuf, String)> = section
            .sysctl
            .iter()
            .map(|(name, v)| {
                (
                    name.clone(),
                    roots.proc_sys.join(name.replace('.', "/")),
                    value_text(v).unwrap_or_default(),
                )
            })
            .collect();
        if let Some(g) = &section.cpu_governor {
            let cpus: Vec<PathBuf> = std::fs::read_dir(&roots.cpu)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.path())
                        .filter(|p| {
                            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                                n.starts_with("cpu") && n[3..].parse::<u32>().is_ok()
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            if cpus.is_empty() {
                targets.push((
                    "cpu_governor".into(),
                    roots.cpu.join("cpu0/cpufreq/scaling_governor"),
                    g.clone(),
                ));
            }
            for c in cpus {
                targets.push((
                    "cpu_governor".into(),
                    c.join("cpufreq/scaling_governor"),
                    g.clone(),
                ));
            }
        }
        for (name, path, value) in targets {
            let before = read_trim(&path);
            let mut rec = KnobRecord {
                name: name.clone(),
                path: path.display().to_string(),
                requested: value.clone(),
                before: before.clone(),
                applied: None,
                status: String::new(),
                reverted: None,
            };
            match before {
                None => rec.status = "unsupported".into(),
                Some(old) => match std::fs::write(&path, &value) {
                    Ok(()) => {
                        applied.undo.push((path.clone(), old));
                        rec.applied = read_trim(&path);
                        rec.status = if rec.applied.as_deref() == Some(value.as_str()) {
                            "applied".into()
                        } else {
                            format!(
                                "refused: reads back {:?}",
                                rec.applied.as_deref().unwrap_or("")
                            )
                        };
                    }
                    Err(e) => rec.status = format!("refused: {e}"),
                },
            }
            let failed = rec.status != "applied";
            let required = section.required.contains(&name);
            applied.records.push(rec);
            if failed && required {
                let last = applied.records.last().cloned();
                applied.revert();
                let r = last.unwrap_or_else(|| unreachable!());
                return Err(LabError::Host(format!(
                    "required knob {name} = {value} could not be applied ({}; {}): drop it from knobs.required or use a host that supports it",
                    r.status, r.path
                )));
            }
        }
        Ok(applied)
    }

    /// Put every changed knob back, newest first.
    pub fn revert(&mut self) {
        if self.reverted {
            return;
        }
        self.reverted = true;
        while let Some((path, old)) = self.undo.pop() {
            if let Err(e) = std::fs::write(&path, &old) {
                eprintln!(
                    "warning: could not restore {} to {old}: {e}",
                    path.display()
                );
            }
        }
        for r in &mut self.records {
            r.reverted = read_trim(std::path::Path::new(&r.path));
        }
    }

    /// What happened to each knob (after `revert`, with the restored values).
    pub fn records(&self) -> &[KnobRecord] {
        &self.records
    }
}

impl Drop for AppliedKnobs {
    fn drop(&mut self) {
        self.revert();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(tag: &str) -> (KnobRoots, PathBuf) {
        let base = std::env::temp_dir().join(format!("nflab-knobs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("sys/net/core")).unwrap();
        std::fs::write(base.join("sys/net/core/busy_poll"), "0\n").unwrap();
        for c in 0..2 {
            std::fs::create_dir_all(base.join(format!("cpu/cpu{c}/cpufreq"))).unwrap();
            std::fs::write(
                base.join(format!("cpu/cpu{c}/cpufreq/scaling_governor")),
                "powersave\n",
            )
            .unwrap();
        }
        std::fs::create_dir_all(base.join("cpu/cpufreq")).unwrap();
        (
            KnobRoots {
                proc_sys: base.join("sys"),
                cpu: base.join("cpu"),
            },
            base,
        )
    }

    fn section(text: &str) -> KnobsSection {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn apply_records_and_reverts() {
        let (r, base) = roots("ok");
        let s = section("sysctl = { \"net.core.busy_poll\" = 50, \"net.core.nonexistent\" = 1 }\ncpu_governor = \"performance\"\n");
        s.validate().unwrap();
        let mut k = AppliedKnobs::apply(&s, &r).unwrap();
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "50"
        );
        assert_eq!(
            std::fs::read_to_string(base.join("cpu/cpu1/cpufreq/scaling_governor")).unwrap(),
            "performance"
        );
        let by = |n: &str| {
            k.records()
                .iter()
                .filter(|x| x.name == n)
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(by("net.core.busy_poll")[0].status, "applied");
        assert_eq!(by("net.core.busy_poll")[0].before.as_deref(), Some("0"));
        assert_eq!(by("net.core.nonexistent")[0].status, "unsupported");
        assert_eq!(by("cpu_governor").len(), 2);
        k.revert();
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "0"
        );
        assert_eq!(by_rev(&k, "cpu_governor"), Some("powersave".into()));
        std::fs::remove_dir_all(base).unwrap();
    }

    fn by_rev(k: &AppliedKnobs, n: &str) -> Option<String> {
        k.records()
            .iter()
            .find(|x| x.name == n)
            .and_then(|x| x.reverted.clone())
    }

    #[test]
    fn drop_reverts_and_required_missing_knob_stops() {
        let (r, base) = roots("req");
        {
            let _k = AppliedKnobs::apply(&section("sysctl = { \"net.core.busy_poll\" = 7 }"), &r)
                .unwrap();
            assert_eq!(
                std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
                "7"
            );
        }
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "0"
        );
        let s = section("sysctl = { \"net.core.busy_poll\" = 9, \"net.core.missing\" = 1 }\nrequired = [\"net.core.missing\"]\n");
        let e = AppliedKnobs::apply(&s, &r).unwrap_err().to_string();
        assert!(
            e.contains("net.core.missing") && e.contains("unsupported"),
            "{e}"
        );
        // The knob applied before the failure was put back.
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "0"
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn validation_names_the_knob() {
        let e = section("sysctl = { \"net/core\" = 1 }")
            .validate()
            .unwrap_err();
        assert!(e.contains("net/core"), "{e}");
        let e = section("required = [\"net.core.x\"]")
            .validate()
            .unwrap_err();
        assert!(e.contains("net.core.x"), "{e}");
    }
}
