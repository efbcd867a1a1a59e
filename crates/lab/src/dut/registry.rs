//! The registry: every DuT kind's driver, and the sentences that list kinds by
//! what their drivers say.

use super::DutDriver;
use crate::error::LabError;
use crate::spec::{DutKind, DutSection};
use crate::topo::Topology;

/// Every kind, in the order the docs list them.
pub const KINDS: [DutKind; 9] = [
    DutKind::Loopback,
    DutKind::LinuxRouter,
    DutKind::LinuxBridge,
    DutKind::Nflab,
    DutKind::Link,
    DutKind::Testpmd,
    DutKind::Ovs,
    DutKind::UdpRelay,
    DutKind::External,
];

/// The driver of `kind`: the one match on the kind.
pub fn driver(kind: DutKind) -> &'static dyn DutDriver {
    match kind {
        DutKind::LinuxRouter => &super::kernel::LinuxRouter,
        DutKind::LinuxBridge => &super::kernel::LinuxBridge,
        DutKind::Loopback => &super::kernel::Loopback,
        DutKind::Nflab => &super::nflab::NflabDriver,
        DutKind::Link => &super::link::LinkDriver,
        DutKind::Testpmd => &super::testpmd::TestpmdDriver,
        DutKind::Ovs => &super::ovs::OvsDriver,
        DutKind::UdpRelay => &super::relay::RelayDriver,
        DutKind::External => &super::external::ExternalDriver,
    }
}

/// The names of the kinds whose driver says `yes`, as "a, b or c" (`word` = "or")
/// or "a, b and c".
pub fn kinds_where(yes: impl Fn(&dyn DutDriver) -> bool, word: &str) -> String {
    as_sentence(&names_where(yes), word)
}

/// As [`kinds_where`], each name in quotes as the spec writes it: "\"a\" or \"b\"".
pub fn quoted_kinds_where(yes: impl Fn(&dyn DutDriver) -> bool, word: &str) -> String {
    let quoted: Vec<String> = names_where(yes)
        .into_iter()
        .map(|n| format!("\"{n}\""))
        .collect();
    as_sentence(&quoted, word)
}

/// `names` as "a, b {word} c".
fn as_sentence(names: &[impl AsRef<str>], word: &str) -> String {
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.as_ref().to_string(),
        Some((last, rest)) => {
            let rest: Vec<&str> = rest.iter().map(|n| n.as_ref()).collect();
            format!("{} {word} {}", rest.join(", "), last.as_ref())
        }
    }
}

/// The kind the spec spells `name`.
pub fn kind_named(name: &str) -> Option<DutKind> {
    KINDS.into_iter().find(|k| k.as_str() == name)
}

/// The names of the kinds whose driver says `yes`, in [`KINDS`]' order.
pub fn names_where(yes: impl Fn(&dyn DutDriver) -> bool) -> Vec<&'static str> {
    KINDS
        .into_iter()
        .filter(|k| yes(driver(*k)))
        .map(|k| k.as_str())
        .collect()
}

/// Refuse `dut.realtime = true` for `kind` where it cannot apply. It puts the threads
/// nflab runs as the DuT under SCHED_FIFO (the data plane's and the link's workers,
/// the udp relay's thread, every thread of the ovs-vswitchd nflab starts); elsewhere
/// nflab starts no thread of the DuT's own that it could raise, so the key is
/// refused in one sentence rather than ignored.
pub fn check_realtime(kind: DutKind) -> Result<(), LabError> {
    match driver(kind).why_not_realtime() {
        None => Ok(()),
        Some(why) => Err(LabError::Unsupported(format!(
            "dut.realtime = true does not apply to dut.kind = \"{}\": {why}; it applies to {}",
            kind.as_str(),
            kinds_where(|d| d.why_not_realtime().is_none(), "and")
        ))),
    }
}

/// The netns topology for a DuT of `kind` with its default keys on this host, with
/// `queues` queues per veth (one per AF_XDP TX thread or data-plane worker).
pub fn topology(kind: DutKind, queues: u32) -> Result<Topology, LabError> {
    topology_for(
        &DutSection {
            kind,
            ..DutSection::default()
        },
        queues,
    )
}

/// The netns topology for the DuT of `section`, plumbed by its driver.
pub fn topology_for(section: &DutSection, queues: u32) -> Result<Topology, LabError> {
    let d = driver(section.kind);
    if !d.available() {
        return Err(LabError::Unsupported(format!(
            "dut.kind = \"{}\" cannot be built by the netns topology of this version",
            section.kind.as_str()
        )));
    }
    let mut topo = Topology::create(section, d, queues)?;
    topo.reverse_dst = d.reverse_path(section).ok();
    Ok(topo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_driver_and_spec_name() {
        for kind in KINDS {
            assert_eq!(driver(kind).kind(), kind);
            let parsed: DutKind = toml::Value::String(kind.as_str().into())
                .try_into()
                .expect("name");
            assert_eq!(parsed, kind);
            assert_eq!(kind_named(kind.as_str()), Some(kind));
        }
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KINDS.len());
    }

    /// The kind after `k` in `DutKind`'s declaration, `None` after the last. No `_`
    /// arm: a new variant does not compile here until it has its place in the chain.
    fn declared_after(k: Option<DutKind>) -> Option<DutKind> {
        match k {
            None => Some(DutKind::LinuxRouter),
            Some(DutKind::LinuxRouter) => Some(DutKind::LinuxBridge),
            Some(DutKind::LinuxBridge) => Some(DutKind::Loopback),
            Some(DutKind::Loopback) => Some(DutKind::Nflab),
            Some(DutKind::Nflab) => Some(DutKind::Link),
            Some(DutKind::Link) => Some(DutKind::Testpmd),
            Some(DutKind::Testpmd) => Some(DutKind::Ovs),
            Some(DutKind::Ovs) => Some(DutKind::UdpRelay),
            Some(DutKind::UdpRelay) => Some(DutKind::External),
            Some(DutKind::External) => None,
        }
    }

    #[test]
    fn kinds_lists_every_kind() {
        let mut every = Vec::new();
        let mut k = declared_after(None);
        while let Some(kind) = k {
            assert!(KINDS.contains(&kind), "KINDS lacks {}", kind.as_str());
            every.push(kind);
            k = declared_after(k);
        }
        assert_eq!(every.len(), KINDS.len());
        // And every name the spec accepts (serde's list of variants) is in the chain.
        let e = toml::Value::String("no-such-kind".into())
            .try_into::<DutKind>()
            .unwrap_err()
            .to_string();
        let accepted: Vec<&str> = e.split('`').skip(3).step_by(2).collect();
        assert_eq!(accepted.len(), KINDS.len(), "{e}");
        for name in accepted {
            assert!(every.iter().any(|k| k.as_str() == name), "{name}: {e}");
        }
    }

    #[test]
    fn kinds_are_listed_as_a_sentence() {
        assert_eq!(
            kinds_where(|d| d.why_not_realtime().is_none(), "and"),
            "nflab, link, ovs and udp-relay"
        );
        assert_eq!(
            kinds_where(|d| d.joins_one_subnet(), "or"),
            "loopback, linux-bridge or link"
        );
        assert_eq!(
            kinds_where(|d| d.carries_ipv6_and_vlan(), "or"),
            "loopback, linux-bridge, nflab or testpmd"
        );
        assert_eq!(
            kinds_where(|d| d.remote_setup().is_some(), "or"),
            "linux-router or linux-bridge"
        );
        assert_eq!(
            names_where(|d| d.plumbing_alone()),
            ["loopback", "linux-router", "linux-bridge"]
        );
        assert_eq!(
            quoted_kinds_where(|d| d.standalone().is_some(), "or"),
            "\"nflab\" or \"link\""
        );
        assert_eq!(quoted_kinds_where(|d| d.takes_ovs_keys(), "or"), "\"ovs\"");
        assert_eq!(
            quoted_kinds_where(|d| d.reverse_on_hosts(), "or"),
            "\"external\""
        );
        assert_eq!(
            quoted_kinds_where(|d| d.joins_one_subnet(), "and"),
            "\"loopback\", \"linux-bridge\" and \"link\""
        );
    }

    #[test]
    fn realtime_is_refused_in_one_sentence_where_it_cannot_apply() {
        for kind in [
            DutKind::Nflab,
            DutKind::Link,
            DutKind::UdpRelay,
            DutKind::Ovs,
        ] {
            assert!(check_realtime(kind).is_ok(), "{}", kind.as_str());
        }
        for kind in [
            DutKind::LinuxRouter,
            DutKind::LinuxBridge,
            DutKind::Loopback,
            DutKind::Testpmd,
            DutKind::External,
        ] {
            let e = check_realtime(kind).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "dut.realtime = true does not apply to dut.kind = \"{}\"",
                    kind.as_str()
                )) && e.ends_with("it applies to nflab, link, ovs and udp-relay"),
                "{e}"
            );
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn a_spec_with_realtime_on_a_kernel_dut_is_refused_before_anything_runs() {
        let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"linux-router\"\nrealtime = true\n";
        let e = crate::spec::Spec::parse(text, "t")
            .and_then(|s| s.check_supported())
            .unwrap_err()
            .to_string();
        assert!(e.contains("dut.kind = \"linux-router\""), "{e}");
        // Off is fine anywhere.
        let off = text.replace("true", "false");
        assert!(crate::spec::Spec::parse(&off, "t")
            .and_then(|s| s.check_supported())
            .is_ok());
    }
}
