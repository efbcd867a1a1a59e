//! The registry: every DuT kind's driver, and the sentences that list kinds by
//! what their drivers say.

use super::DutDriver;
use crate::error::LabError;
use crate::spec::DutKind;
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
    let names = names_where(yes);
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} {word} {last}", rest.join(", ")),
    }
}

/// The names of the kinds whose driver says `yes`, in [`KINDS`]' order.
pub fn names_where(yes: impl Fn(&dyn DutDriver) -> bool) -> Vec<&'static str> {
    KINDS
        .into_iter()
        .filter(|k| yes(driver(*k)))
        .map(|k| k.as_str())
        .collect()
}

/// The netns topology for `kind` on this host, with `queues` queues per veth (one
/// per AF_XDP TX thread or data-plane worker).
pub fn topology(kind: DutKind, queues: u32) -> Result<Topology, LabError> {
    let d = driver(kind);
    if !d.available() {
        return Err(LabError::Unsupported(format!(
            "dut.kind = \"{}\" cannot be built by the netns topology of this version",
            kind.as_str()
        )));
    }
    Topology::create(kind, d, queues)
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
        }
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KINDS.len());
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
    }
}
