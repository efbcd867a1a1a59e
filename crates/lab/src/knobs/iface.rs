//! Interface knobs: receive/transmit steering, threaded NAPI, qdisc,
//! offloads and channels of one interface of the topology, applied after the
//! topology exists and inside its namespace, read back, recorded, reverted.
//!
//! ```toml
//! [knobs.iface."dut:dut0"]        # <lg|dut>:<interface>
//! rps_cpus = "2"                  # hex CPU mask of receive packet steering, all rx queues
//! xps_cpus = "2"                  # hex CPU mask of transmit packet steering, all tx queues
//! threaded_napi = true
//! qdisc = "fq_codel"              # root qdisc; "noqueue" removes it
//! offloads = { gro = "on", tso = "off" }
//! channels = { rx = 1, tx = 1 }
//! ```
//!
//! What an interface or kernel lacks (veth has no rings; a qdisc module may
//! be missing) is recorded as unsupported, like every knob.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::error::LabError;
use crate::knobs::journal::{ns_run, KnobJournal, Restore};
use crate::spec::knobs::is_interface_name;
use crate::spec::knobs::offload_long_name;
pub use crate::spec::knobs::IfaceKnob;

fn sys_read(ns: &str, path: &str) -> Option<String> {
    ns_run(ns, &["cat", path])
        .ok()
        .map(|s| s.trim().to_string())
}

fn sys_write(ns: &str, path: &str, value: &str) -> Result<(), String> {
    if ns.is_empty() {
        return std::fs::write(path, format!("{value}\n")).map_err(|e| e.to_string());
    }
    crate::knobs::journal::ns_write(ns, path, value)
}

/// Masks compare by value ("00000002" == "2").
fn same_mask(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.replace(',', "").trim_start_matches('0').to_lowercase();
    norm(a) == norm(b)
}

fn queues(ns: &str, dev: &str, prefix: &str) -> Vec<String> {
    ns_run(ns, &["ls", &format!("/sys/class/net/{dev}/queues")])
        .map(|s| {
            s.split_whitespace()
                .filter(|q| q.starts_with(prefix))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn current_qdisc(ns: &str, dev: &str) -> Option<String> {
    let out = ns_run(ns, &["tc", "qdisc", "show", "dev", dev, "root"]).ok()?;
    out.split_whitespace().nth(1).map(String::from)
}

/// Current value of one ethtool field: `show` is -k, -l, -g or -c; for
/// -l and -g only the "Current hardware settings" part counts.
fn ethtool_get(ns: &str, dev: &str, show: &str, field: &str) -> Option<String> {
    let out = ns_run(ns, &["ethtool", show, dev]).ok()?;
    let part = out
        .split("Current hardware settings:")
        .nth(1)
        .unwrap_or(&out);
    part.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(field))
        .and_then(|(_, v)| v.split_whitespace().next())
        .map(String::from)
}

/// The ethtool field that shows what `-L/-G` parameter `param` set.
fn shown_as(set: &str, param: &str) -> String {
    match (set, param) {
        ("-L" | "-G", "rx") => "RX".into(),
        ("-L" | "-G", "tx") => "TX".into(),
        ("-L", "other") => "Other".into(),
        ("-L", "combined") => "Combined".into(),
        ("-G", "rx-mini") => "RX Mini".into(),
        ("-G", "rx-jumbo") => "RX Jumbo".into(),
        (_, p) => p.into(),
    }
}

/// How to read a knob's value again after reverting it.
enum ReRead {
    Sys(String, String),
    Qdisc(String, String),
    Ethtool {
        ns: String,
        dev: String,
        show: String,
        field: String,
    },
}

impl ReRead {
    fn read(&self) -> Option<String> {
        match self {
            ReRead::Sys(ns, path) => sys_read(ns, path),
            ReRead::Qdisc(ns, dev) => current_qdisc(ns, dev),
            ReRead::Ethtool {
                ns,
                dev,
                show,
                field,
            } => ethtool_get(ns, dev, show, field),
        }
    }
}

enum Undo {
    Sys(String, String, String),
    Cmd(String, Vec<String>),
}

/// Interface knobs in force; reverted on drop.
#[derive(Default)]
pub struct AppliedIfaceKnobs {
    records: Vec<KnobRecord>,
    rereads: Vec<(usize, ReRead)>,
    undo: Vec<Undo>,
    reverted: bool,
    /// Originals of knobs outside nflab's own namespaces (a hosts topology's
    /// interfaces), for `nflab topo gc` after a crash.
    journal: Option<KnobJournal>,
}

impl AppliedIfaceKnobs {
    /// Apply every interface knob; `ns_of(role)` names the namespace of
    /// "lg" or "dut" ("" for the current one, None if the role is absent).
    pub fn apply(
        section: &BTreeMap<String, IfaceKnob>,
        required: &[String],
        ns_of: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AppliedIfaceKnobs, LabError> {
        let mut a = AppliedIfaceKnobs {
            records: Vec::new(),
            rereads: Vec::new(),
            undo: Vec::new(),
            reverted: false,
            journal: Some(KnobJournal::new(Path::new(
                crate::knobs::journal::JOURNAL_DIR,
            ))),
        };
        for (key, k) in section {
            let (role, dev) = key.split_once(':').unwrap_or(("", ""));
            if !is_interface_name(dev) {
                a.records.push(record(
                    key,
                    "",
                    "-",
                    None,
                    None,
                    "refused: not an interface name".into(),
                ));
                continue;
            }
            let Some(ns) = ns_of(role) else {
                a.records.push(record(
                    key,
                    "",
                    "-",
                    None,
                    None,
                    "unsupported: this topology has no such side".into(),
                ));
                continue;
            };
            a.apply_one(key, &ns, dev, k);
            if let Some(bad) = a
                .records
                .iter()
                .find(|r| required.contains(&r.name) && r.status != "applied")
            {
                let msg = format!(
                    "required knob {} = {} could not be applied ({}): drop it from knobs.required or use a host that supports it",
                    bad.name, bad.requested, bad.status
                );
                a.revert();
                return Err(LabError::Host(msg));
            }
        }
        Ok(a)
    }

    fn apply_one(&mut self, key: &str, ns: &str, dev: &str, k: &IfaceKnob) {
        for (prefix, name, mask) in [
            ("rx-", "rps_cpus", &k.rps_cpus),
            ("tx-", "xps_cpus", &k.xps_cpus),
        ] {
            let Some(mask) = mask else { continue };
            let qs = queues(ns, dev, prefix);
            if qs.is_empty() {
                self.records.push(record(
                    &format!("{key}.{name}"),
                    ns,
                    mask,
                    None,
                    None,
                    "unsupported: no such interface or queues".into(),
                ));
            }
            for q in qs {
                let path = format!("/sys/class/net/{dev}/queues/{q}/{name}");
                self.sys(&format!("{key}.{q}.{name}"), ns, &path, mask, same_mask);
            }
        }
        if let Some(t) = k.threaded_napi {
            let path = format!("/sys/class/net/{dev}/threaded");
            self.sys(
                &format!("{key}.threaded_napi"),
                ns,
                &path,
                if t { "1" } else { "0" },
                |a, b| a == b,
            );
        }
        if let Some(q) = &k.qdisc {
            let name = format!("{key}.qdisc");
            let before = current_qdisc(ns, dev);
            let args: Vec<&str> = if q == "noqueue" {
                vec!["tc", "qdisc", "del", "dev", dev, "root"]
            } else {
                vec!["tc", "qdisc", "replace", "dev", dev, "root", q]
            };
            let undo: Vec<String> = match before.as_deref() {
                None | Some("noqueue") => vec!["tc", "qdisc", "del", "dev", dev, "root"],
                Some(b) => vec!["tc", "qdisc", "replace", "dev", dev, "root", b],
            }
            .iter()
            .map(|s| s.to_string())
            .collect();
            let journaled = self.journal(&Restore::Command {
                ns: ns.into(),
                argv: undo.clone(),
            });
            match journaled.and_then(|()| ns_run(ns, &args)) {
                Ok(_) => {
                    let after = current_qdisc(ns, dev);
                    let ok = after.as_deref() == Some(q.as_str());
                    self.rereads
                        .push((self.records.len(), ReRead::Qdisc(ns.into(), dev.into())));
                    self.undo.push(Undo::Cmd(ns.into(), undo));
                    self.records.push(record(
                        &name,
                        ns,
                        q,
                        before,
                        after.clone(),
                        if ok {
                            "applied".into()
                        } else {
                            format!("refused: reads back {after:?}")
                        },
                    ));
                }
                Err(e) => {
                    self.cancel_journal_entry();
                    self.records.push(record(
                        &name,
                        ns,
                        q,
                        before,
                        None,
                        format!("unsupported: {e}"),
                    ))
                }
            }
        }
        // (show flag, set flag, parameter, shown field, value) for every ethtool knob.
        let mut ethtool: Vec<(&str, &str, String, String, String)> = Vec::new();
        for (short, v) in &k.offloads {
            let long = offload_long_name(short).unwrap_or(short);
            ethtool.push(("-k", "-K", short.clone(), long.to_string(), v.clone()));
        }
        for (set, show, table) in [("-L", "-l", &k.channels), ("-G", "-g", &k.rings)] {
            for (p, n) in table {
                ethtool.push((show, set, p.clone(), shown_as(set, p), n.to_string()));
            }
        }
        for (p, v) in &k.coalesce {
            ethtool.push(("-c", "-C", p.clone(), p.clone(), v.clone()));
        }
        for (show, set, param, field, value) in ethtool {
            self.ethtool(key, ns, dev, show, set, &param, &field, &value);
        }
    }

    /// Set one ethtool parameter, read it back through `show`, and plan its undo.
    #[allow(clippy::too_many_arguments)]
    fn ethtool(
        &mut self,
        key: &str,
        ns: &str,
        dev: &str,
        show: &str,
        set: &str,
        param: &str,
        field: &str,
        value: &str,
    ) {
        let group = match set {
            "-K" => "offloads",
            "-L" => "channels",
            "-G" => "rings",
            _ => "coalesce",
        };
        let name = format!("{key}.{group}.{param}");
        let before = ethtool_get(ns, dev, show, field);
        // Only a value the interface reported can be put back.
        let undo: Option<Vec<String>> = before.as_ref().filter(|b| *b != "n/a").map(|b| {
            ["ethtool", set, dev, param, b]
                .iter()
                .map(|s| s.to_string())
                .collect()
        });
        let journaled = match &undo {
            Some(argv) => self.journal(&Restore::Command {
                ns: ns.into(),
                argv: argv.clone(),
            }),
            None => Ok(()),
        };
        let status = match journaled.and_then(|()| ns_run(ns, &["ethtool", set, dev, param, value]))
        {
            Err(e) => {
                if undo.is_some() {
                    self.cancel_journal_entry();
                }
                self.records.push(record(
                    &name,
                    ns,
                    value,
                    before,
                    None,
                    format!("unsupported: {e}"),
                ));
                return;
            }
            Ok(_) => ethtool_get(ns, dev, show, field),
        };
        if let Some(argv) = undo {
            self.undo.push(Undo::Cmd(ns.into(), argv));
        }
        self.rereads.push((
            self.records.len(),
            ReRead::Ethtool {
                ns: ns.into(),
                dev: dev.into(),
                show: show.into(),
                field: field.into(),
            },
        ));
        let ok = status.as_deref() == Some(value);
        let verdict = if ok {
            "applied".into()
        } else {
            format!("refused: reads back {status:?}")
        };
        self.records
            .push(record(&name, ns, value, before, status, verdict));
    }

    fn sys(&mut self, name: &str, ns: &str, path: &str, value: &str, same: fn(&str, &str) -> bool) {
        let before = sys_read(ns, path);
        let Some(old) = before.clone() else {
            self.records
                .push(record(name, ns, value, None, None, "unsupported".into()));
            return;
        };
        let journaled = self.journal(&Restore::File {
            ns: ns.into(),
            path: path.into(),
            value: old.clone(),
        });
        match journaled.and_then(|()| sys_write(ns, path, value)) {
            Ok(()) => {
                self.undo.push(Undo::Sys(ns.into(), path.into(), old));
                self.rereads
                    .push((self.records.len(), ReRead::Sys(ns.into(), path.into())));
                let after = sys_read(ns, path);
                let ok = after.as_deref().is_some_and(|a| same(a, value));
                self.records.push(record(
                    name,
                    ns,
                    value,
                    before,
                    after.clone(),
                    if ok {
                        "applied".into()
                    } else {
                        format!("refused: reads back {after:?}")
                    },
                ));
            }
            Err(e) => {
                self.cancel_journal_entry();
                self.records.push(record(
                    name,
                    ns,
                    value,
                    before,
                    None,
                    format!("refused: {e}"),
                ))
            }
        }
    }

    /// Journal how to restore a knob, unless it lives in a namespace of
    /// nflab's own topology, which goes with its knobs.
    fn journal(&mut self, entry: &Restore) -> Result<(), String> {
        let ns = entry.ns();
        if crate::knobs::journal::deleted_with_topology(ns) {
            if let Some(j) = self.journal.as_mut() {
                j.skip_next();
            }
            return Ok(());
        }
        match self.journal.as_mut() {
            Some(j) => j.record(entry).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// The newest journaled change did not happen.
    fn cancel_journal_entry(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            j.cancel_last();
        }
    }

    /// Put everything back, newest first.
    pub fn revert(&mut self) {
        if self.reverted {
            return;
        }
        self.reverted = true;
        while let Some(u) = self.undo.pop() {
            let r = match &u {
                Undo::Sys(ns, path, old) => sys_write(ns, path, old),
                Undo::Cmd(ns, args) => {
                    let a: Vec<&str> = args.iter().map(String::as_str).collect();
                    ns_run(ns, &a).map(|_| ())
                }
            };
            if let Err(e) = r {
                eprintln!("warning: could not revert an interface knob: {e}");
            }
        }
        if let Some(j) = self.journal.as_mut() {
            j.finish();
        }
        for (i, how) in &self.rereads {
            self.records[*i].reverted = how.read();
        }
    }

    /// What happened to each knob.
    pub fn records(&self) -> &[KnobRecord] {
        &self.records
    }
}

impl Drop for AppliedIfaceKnobs {
    fn drop(&mut self) {
        self.revert();
    }
}

fn record(
    name: &str,
    ns: &str,
    requested: &str,
    before: Option<String>,
    applied: Option<String>,
    status: String,
) -> KnobRecord {
    KnobRecord {
        name: name.to_string(),
        path: if ns.is_empty() {
            "this namespace".into()
        } else {
            format!("netns {ns}")
        },
        requested: requested.to_string(),
        before,
        applied,
        status,
        reverted: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::knobs::validate_iface as validate;
    use std::process::Command;

    fn section(text: &str) -> BTreeMap<String, IfaceKnob> {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn validation_names_key_and_valid_values() {
        let e = validate(&section("[\"router:eth0\"]\nqdisc = \"fq\"\n")).unwrap_err();
        assert!(e.contains("router:eth0") && e.contains("dut:dut0"), "{e}");
        let e = validate(&section("[\"dut:dut0\"]\noffloads = { gr = \"on\" }\n")).unwrap_err();
        assert!(e.contains("offloads.gr") && e.contains("gro"), "{e}");
        let e = validate(&section("[\"dut:dut0\"]\nrps_cpus = \"xyz\"\n")).unwrap_err();
        assert!(e.contains("xyz"), "{e}");
        validate(&section("[\"dut:dut0\"]\nrps_cpus = \"3\"\noffloads = { gro = \"on\" }\nchannels = { rx = 1 }\n")).unwrap();
    }

    #[test]
    fn interface_names_are_the_kernels() {
        for bad in [
            "dut:lg0/../../../../etc",
            "dut:x y",
            "dut:..",
            "dut:a:b",
            "dut:0123456789abcdef",
            "lg:kv0\tx",
        ] {
            let key = toml::Value::String(bad.into()).to_string();
            let e = validate(&section(&format!("[{key}]\nqdisc = \"fq\"\n"))).unwrap_err();
            assert!(
                e.contains("not an interface name") && !e.contains('\n'),
                "{bad}: {e}"
            );
        }
        assert!(is_interface_name("0123456789abcde"));
        assert!(is_interface_name("eth0.100"));
    }

    #[test]
    fn a_value_written_in_a_namespace_is_data_never_a_command() {
        if !nflab_testkit::require_root() {
            return;
        }
        let ns = format!("nflabtest-knobw-{}", std::process::id());
        struct Guard(String, std::path::PathBuf);
        impl Drop for Guard {
            fn drop(&mut self) {
                let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
                let _ = std::fs::remove_dir_all(&self.1);
            }
        }
        let dir =
            nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-knobw").unwrap();
        let g = Guard(ns.clone(), dir.clone());
        assert!(Command::new("ip")
            .args(["netns", "add", &ns])
            .status()
            .unwrap()
            .success());
        let file = g.1.join("target");
        let marker = g.1.join("marker");
        let value = format!("1; touch {}", marker.display());
        sys_write(&ns, file.to_str().unwrap(), &value).unwrap();
        assert!(!marker.exists(), "the value ran as a shell command");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("{value}\n")
        );
        // A journal's entry is restored the same way.
        let r = Restore::File {
            ns: ns.clone(),
            path: file.display().to_string(),
            value: format!("2; touch {}", marker.display()),
        };
        r.apply().unwrap();
        assert!(
            !marker.exists(),
            "the restored value ran as a shell command"
        );
        assert!(std::fs::read_to_string(&file)
            .unwrap()
            .starts_with("2; touch"));
    }

    #[test]
    fn masks_compare_by_value() {
        assert!(same_mask("00000002", "2"));
        assert!(same_mask("00000000,00000003", "3"));
        assert!(!same_mask("1", "2"));
    }

    #[test]
    fn real_veth_knobs_apply_read_back_and_revert() {
        if !nflab_testkit::require_root() || !nflab_testkit::require_tool("ethtool", "ethtool") {
            return;
        }
        let ns = format!("nflabtest-knob-{}", std::process::id());
        struct Guard(String);
        impl Drop for Guard {
            fn drop(&mut self) {
                let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
            }
        }
        assert!(Command::new("ip")
            .args(["netns", "add", &ns])
            .status()
            .unwrap()
            .success());
        let _g = Guard(ns.clone());
        assert!(Command::new("ip")
            .args(["-n", &ns, "link", "add", "kv0", "type", "veth", "peer", "name", "kv1"])
            .status()
            .unwrap()
            .success());
        let gro_before = ethtool_get(&ns, "kv0", "-k", "generic-receive-offload").unwrap();
        let flip = if gro_before == "on" { "off" } else { "on" };
        let s = section(&format!(
            "[\"dut:kv0\"]\nrps_cpus = \"1\"\noffloads = {{ gro = \"{flip}\" }}\nqdisc = \"nflab-no-such-qdisc\"\nrings = {{ rx = 256 }}\ncoalesce = {{ rx-usecs = \"0\" }}\n"
        ));
        validate(&s).unwrap();
        let nsc = ns.clone();
        let mut a =
            AppliedIfaceKnobs::apply(&s, &[], &move |role| (role == "dut").then(|| nsc.clone()))
                .unwrap();
        let by = |n: &str| {
            a.records()
                .iter()
                .find(|r| r.name.ends_with(n))
                .cloned()
                .unwrap()
        };
        assert_eq!(by("offloads.gro").status, "applied");
        assert_eq!(
            by("rx-0.rps_cpus").status,
            "applied",
            "{:?}",
            by("rx-0.rps_cpus")
        );
        assert!(
            by("qdisc").status.starts_with("unsupported"),
            "{:?}",
            by("qdisc")
        );
        assert_eq!(
            ethtool_get(&ns, "kv0", "-k", "generic-receive-offload").unwrap(),
            flip
        );
        // Not an nflab topology's namespace: every change is journaled first, and
        // replaying the journal (what gc does for a dead owner) puts gro back.
        let journal = a
            .journal
            .as_ref()
            .and_then(|j| j.path())
            .unwrap()
            .to_path_buf();
        let (_, entries) = crate::knobs::journal::read_journal(&journal).unwrap();
        assert!(
            entries.contains(&Restore::Command {
                ns: ns.clone(),
                argv: ["ethtool", "-K", "kv0", "gro", gro_before.as_str()]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            }),
            "{entries:?}"
        );
        for e in entries.iter().rev() {
            e.apply().unwrap();
        }
        assert_eq!(
            ethtool_get(&ns, "kv0", "-k", "generic-receive-offload").unwrap(),
            gro_before
        );
        a.revert();
        assert!(!journal.exists());
        assert_eq!(
            ethtool_get(&ns, "kv0", "-k", "generic-receive-offload").unwrap(),
            gro_before
        );
        let by = |n: &str| {
            a.records()
                .iter()
                .find(|r| r.name.ends_with(n))
                .cloned()
                .unwrap()
        };
        assert_eq!(
            by("offloads.gro").reverted.as_deref(),
            Some(gro_before.as_str())
        );
        assert_eq!(
            by("rx-0.rps_cpus")
                .reverted
                .as_deref()
                .map(|m| same_mask(m, "0")),
            Some(true)
        );
        assert!(same_mask(
            &sys_read(&ns, "/sys/class/net/kv0/queues/rx-0/rps_cpus").unwrap(),
            "0"
        ));
    }
}
