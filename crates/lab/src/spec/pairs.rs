//! `[[pair]]` of the spec: LoadGen/DuT host pairs of a testbed, pos-style.
//! A study's runs go to whichever pair is free, in parallel; each run's pair
//! is recorded (`runs/NNN/pair.json`, the `pair` column of results.parquet).
//! What runs is in `study::pairs`.
//!
//! ```toml
//! [topology]
//! kind = "hosts"
//!
//! [[pair]]
//! name = "a"
//! [pair.loadgen]
//! address = "root@192.0.2.10"
//! host_key = "ssh-ed25519 AAAAC3Nza..."
//! tx_iface = "eth1"
//! rx_iface = "eth2"
//! [pair.dut]
//! address = "root@192.0.2.11"
//! host_key = "ssh-ed25519 AAAAC3Nza..."
//! ingress_iface = "eth1"
//! egress_iface = "eth2"
//! ```

use serde::{Deserialize, Serialize};

use crate::spec::hosts::HostEntry;
use crate::spec::{Spec, TopologyKind};

/// One `[[pair]]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PairEntry {
    /// Name recorded with each run (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// The host that runs the generator and the recorder (`address = "local"`
    /// for this machine).
    pub loadgen: HostEntry,
    /// The host of the DuT.
    pub dut: HostEntry,
}

/// Check the pairs of `spec`: `Err((key, one sentence))`.
pub fn validate(spec: &Spec) -> Result<(), (&'static str, String)> {
    if spec.pair.is_empty() {
        return Ok(());
    }
    if spec.topology.kind != TopologyKind::Hosts {
        return Err((
            "name",
            "[[pair]] needs topology.kind = \"hosts\": the pairs are real hosts".into(),
        ));
    }
    if !spec.hosts.is_empty() {
        return Err((
            "name",
            "[[pair]] and [hosts] exclude each other: declare a single pair as one [[pair]]".into(),
        ));
    }
    if spec.rfc2544.is_some() {
        return Err((
            "name",
            "[[pair]] cannot run an [rfc2544] search (its trials depend on each other): drop one of them".into(),
        ));
    }
    // These need the namespace topology or this host's kernel.
    for (on, section) in [
        (!spec.knobs.is_empty(), "[knobs]"),
        (spec.app.is_some(), "[app]"),
        (spec.capture.is_some(), "[capture]"),
        (spec.monitor.is_some(), "[monitor]"),
    ] {
        if on {
            return Err((
                "name",
                format!("{section} with [[pair]] is not available yet: drop one of them"),
            ));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, p) in spec.pair.iter().enumerate() {
        if p.name.is_empty()
            || !p
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err((
                "name",
                format!(
                    "pair[{i}].name = {:?}: use letters, digits, '-', '_' or '.'",
                    p.name
                ),
            ));
        }
        if !seen.insert(p.name.as_str()) {
            return Err((
                "name",
                format!(
                    "pair name {:?} is used twice: give each pair its own",
                    p.name
                ),
            ));
        }
        for (role, h, keys) in [
            (
                "loadgen",
                &p.loadgen,
                [
                    ("tx_iface", &p.loadgen.tx_iface),
                    ("rx_iface", &p.loadgen.rx_iface),
                ],
            ),
            (
                "dut",
                &p.dut,
                [
                    ("ingress_iface", &p.dut.ingress_iface),
                    ("egress_iface", &p.dut.egress_iface),
                ],
            ),
        ] {
            let at = format!("pair {:?} {role}", p.name);
            h.check_address(&at).map_err(|m| ("address", m))?;
            for (key, v) in keys {
                if v.as_deref().is_none_or(str::is_empty) {
                    return Err((
                        key,
                        format!("{at}: {key} is missing: name the interface on that host"),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Spec;

    const BASE: &str = "[experiment]\nname = \"p\"\n[topology]\nkind = \"hosts\"\n[dut]\nkind = \"linux-router\"\n";
    const PAIR: &str = "[[pair]]\nname = \"a\"\n[pair.loadgen]\naddress = \"root@198.18.254.11\"\ntx_iface = \"eth1\"\nrx_iface = \"eth2\"\n[pair.dut]\naddress = \"root@198.18.254.12\"\ningress_iface = \"p1\"\negress_iface = \"p2\"\n";

    #[test]
    fn two_pairs_parse_and_keep_their_order() {
        let text = format!("{BASE}{PAIR}{}", PAIR.replace("\"a\"", "\"b\""));
        let s = Spec::parse(&text, "t").unwrap();
        let names: Vec<&str> = s.pair.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn bad_pairs_are_one_sentence_naming_the_key() {
        for (text, want) in [
            (format!("{BASE}{PAIR}{PAIR}"), "used twice"),
            (
                format!("{BASE}{}", PAIR.replace("tx_iface = \"eth1\"\n", "")),
                "tx_iface is missing",
            ),
            (
                format!(
                    "{BASE}{}",
                    PAIR.replace("root@198.18.254.12", "-oProxyCommand=touch /tmp/x")
                ),
                "address",
            ),
            (
                format!("{}{PAIR}", BASE.replace("hosts", "netns")),
                "needs topology.kind",
            ),
        ] {
            let e = Spec::parse(&text, "t").unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
