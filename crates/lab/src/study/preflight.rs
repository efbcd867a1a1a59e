//! The check before a run: that a (resolved) spec can run in this version
//! of nflab on this host. It asks each DuT kind, app and the traffic plan,
//! so it sits above them (the spec itself only parses and checks its keys).

use crate::error::LabError;
use crate::spec::{AppSection, Backend, Spec, TopologyKind};

impl Spec {
    /// Check that this (resolved) spec can run in this version of nflab.
    pub fn check_supported(&self) -> Result<(), LabError> {
        let unsupported = |key: &str, value: &str, valid: &str| {
            Err(LabError::Unsupported(format!(
                "{key} = \"{value}\" is not available in this version of nflab yet; valid now: {valid}"
            )))
        };
        let d = &self.dut;
        let ovs_keys = [
            d.hops.is_some()
                || d.hop_cables.is_some()
                || d.hop_order.is_some()
                || d.port_type.is_some(),
            d.bridges.is_some(),
            d.shape.is_some(),
        ];
        let qos_keys = [d.egress_rate_bps.is_some(), d.priority_dscp.is_some()];
        if (ovs_keys.contains(&true)
            || qos_keys.contains(&true)
            || d.depth.is_some()
            || d.controller.is_some())
            && !crate::dut::driver(d.kind).takes_ovs_keys()
        {
            return Err(LabError::Unsupported(format!(
                "dut.hops, dut.hop_cables, dut.hop_order, dut.port_type, dut.bridges, dut.shape, dut.depth, dut.controller, dut.egress_rate_bps and dut.priority_dscp apply to dut.kind = {} only",
                crate::dut::registry::quoted_kinds_where(|d| d.takes_ovs_keys(), "or")
            )));
        }
        if self.dut.realtime == Some(true) {
            crate::dut::registry::check_realtime(self.dut.kind)?;
        }
        let dut = crate::dut::driver(self.dut.kind);
        if !dut.available() {
            let valid = crate::dut::registry::names_where(|d| d.available()).join(", ");
            return unsupported("dut.kind", self.dut.kind.as_str(), &valid);
        }
        dut.check(self)?;
        if let Some((no_ipv6, no_vlan)) = dut.refuses_ipv6_and_vlan() {
            let t = &self.traffic;
            let kind = self.dut.kind.as_str();
            let others = crate::dut::registry::kinds_where(|d| d.carries_ipv6_and_vlan(), "or");
            if t.ip_version == 6 {
                return Err(LabError::Unsupported(format!(
                    "traffic.ip_version = 6 cannot cross dut.kind = \"{kind}\", which {no_ipv6}: use dut.kind = {others}"
                )));
            }
            if let Some(v) = t.vlan {
                return Err(LabError::Unsupported(format!(
                    "traffic.vlan = {v} cannot cross dut.kind = \"{kind}\", which {no_vlan}: use dut.kind = {others}"
                )));
            }
        }
        // [[pair]] is checked with the spec (crate::spec::pairs), but for what its DuT
        // host can be set up as.
        if !self.pair.is_empty() && dut.remote_setup().is_none() {
            let valid = crate::dut::registry::names_where(|d| d.remote_setup().is_some());
            return Err(LabError::Unsupported(format!(
                "dut.kind = \"{}\" on a host pair is not available yet; valid with [[pair]]: {}",
                self.dut.kind.as_str(),
                valid.join(", ")
            )));
        }
        if self.topology.kind == TopologyKind::Hosts && self.pair.is_empty() {
            dut.check_hosts(&self.hosts)
                .map_err(LabError::Unsupported)?;
        }
        if let Some(AppSection::Ncsbench(ncs)) = &self.app {
            ncs.validate().map_err(|e| LabError::Unsupported(e.0))?;
            crate::app::check_dut("ncsbench", self.dut.kind)?;
            if self.topology.kind == TopologyKind::Hosts {
                return unsupported(
                    "app.kind",
                    "ncsbench",
                    "the netns topology (topology.kind = \"netns\")",
                );
            }
        }
        if let Some(AppSection::Prrt(_)) = &self.app {
            crate::app::check_dut("prrt", self.dut.kind)?;
            if self.topology.kind == TopologyKind::Hosts {
                return unsupported(
                    "app.kind",
                    "prrt",
                    "the netns topology (topology.kind = \"netns\")",
                );
            }
        }
        if let Some(m) = &self.monitor {
            crate::run::monitor::check(m, self.dut.kind)?;
        }
        if self.traffic.backend == Backend::Udp {
            return unsupported(
                "traffic.backend",
                self.traffic.backend.as_str(),
                "af_packet, af_xdp, xdp_live",
            );
        }
        self.check_dut_carries_traffic()?;
        self.check_direction()?;
        // Every pattern, size and flow parameter (and a replayed trace file) is checked
        // here, before any topology exists or anything is recorded.
        crate::run::plan::build_plan(
            &self.traffic,
            self.experiment.seed,
            &crate::run::plan::default_probe_base(),
        )?;
        Ok(())
    }
}

impl Spec {
    /// `traffic.direction` = "reverse" or "both" needs a DuT that carries probes back
    /// from the recorder's port, on a topology whose both ports nflab drives.
    fn check_direction(&self) -> Result<(), LabError> {
        let t = &self.traffic;
        if !t.direction.has_reverse() {
            return Ok(());
        }
        let key = format!("traffic.direction = \"{}\"", t.direction.as_str());
        let refuse = |why: String| Err(LabError::Unsupported(format!("{key} {why}")));
        if let Err(why) = crate::dut::driver(self.dut.kind).reverse_path(&self.dut) {
            let valid = crate::dut::registry::kinds_where(
                |d| {
                    d.reverse_path(&crate::spec::DutSection {
                        kind: d.kind(),
                        ..Default::default()
                    })
                    .is_ok()
                },
                "or",
            );
            return refuse(format!(
                "needs a DuT with a reverse path, and dut.kind = \"{}\" {why}; use dut.kind = {valid}, or direction = \"forward\"",
                self.dut.kind.as_str()
            ));
        }
        if !self.pair.is_empty()
            || (self.topology.kind == TopologyKind::Hosts
                && !crate::dut::driver(self.dut.kind).reverse_on_hosts())
        {
            return refuse(format!(
                "is not available on a remote DuT host yet: with topology.kind = \"hosts\" it needs dut.kind = {} (the box behind [hosts.loadgen]'s two ports)",
                crate::dut::registry::quoted_kinds_where(|d| d.reverse_on_hosts(), "or")
            ));
        }
        if t.backend == Backend::XdpLive {
            return refuse(
                "sends from the recorder's port, where traffic.backend = \"xdp_live\" cannot: use af_packet or af_xdp".into(),
            );
        }
        if t.direction == crate::spec::Direction::Both
            && t.tx_timestamp == crate::spec::TxTimestampMode::Kernel
        {
            return refuse(
                "cannot take kernel TX timestamps on both ports yet: use tx_timestamp = \"app\", or one direction".into(),
            );
        }
        for (section, set) in [
            ("[capture]", self.capture.is_some()),
            ("[monitor]", self.monitor.is_some()),
        ] {
            if set {
                return refuse(format!(
                    "cannot go with {section}, which watches the forward way only: leave one of them out"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every experiment in `examples/` (and `examples/sdn/`) passes the check a
    /// user's `nflab run` makes first, for every run of its sweep: an example that
    /// `nflab run` refuses is a broken promise of the docs.
    #[test]
    fn every_example_passes_the_check_before_a_run() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut checked = 0;
        for dir in [root.clone(), root.join("sdn")] {
            for e in std::fs::read_dir(&dir).expect("examples") {
                let p = e.expect("entry").path();
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                if p.extension().is_none_or(|x| x != "toml")
                    || !text.lines().any(|l| l.trim() == "[experiment]")
                {
                    continue;
                }
                let (spec, text) =
                    Spec::from_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                for plan in spec.expand(&text).expect("expand") {
                    plan.spec
                        .check_supported()
                        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                }
                checked += 1;
            }
        }
        assert!(checked >= 30, "{checked} examples");
    }

    #[test]
    fn a_pair_whose_dut_host_cannot_be_set_up_is_refused_naming_the_kinds_that_can() {
        let text = "[experiment]\nname = \"p\"\n[topology]\nkind = \"hosts\"\n[dut]\nkind = \"nflab\"\npipeline = [\"l2fwd\"]\n\
                    [[pair]]\nname = \"a\"\n[pair.loadgen]\naddress = \"root@198.18.254.11\"\ntx_iface = \"eth1\"\nrx_iface = \"eth2\"\n\
                    [pair.dut]\naddress = \"root@198.18.254.12\"\ningress_iface = \"p1\"\negress_iface = \"p2\"\n";
        let e = Spec::parse(text, "t")
            .and_then(|s| s.check_supported())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("dut.kind = \"nflab\" on a host pair is not available yet; valid with [[pair]]: linux-router, linux-bridge"),
            "{e}"
        );
    }

    #[test]
    fn both_ways_need_a_dut_with_a_reverse_path_and_say_which_have_one() {
        let check = |extra: &str| {
            Spec::parse(
                &format!("[experiment]\nname = \"d\"\n[traffic]\ndirection = \"both\"\n{extra}"),
                "t",
            )
            .and_then(|s| s.check_supported())
        };
        check("[dut]\nkind = \"linux-router\"").expect("a router routes both ways");
        let e = check("[dut]\nkind = \"udp-relay\"")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "traffic.direction = \"both\" needs a DuT with a reverse path, and dut.kind = \"udp-relay\" relays datagrams from dut0 to dut1 only; use dut.kind = loopback, linux-router, linux-bridge, nflab, link, testpmd, ovs or external, or direction = \"forward\""
        );
        let e = check("[dut]\nkind = \"ovs\"\nshape = \"unidirectional\"\nbridges = 2")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("forwards dut0 → dut1 only with dut.shape"),
            "{e}"
        );
        let e = check("[dut]\nkind = \"nflab\"\npipeline = [\"router\"]\n[dut.router]\nroutes = [\"198.19.0.0/24 out 02:4e:46:00:00:02\"]")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("has routes of the spec's own in [dut.router]"),
            "{e}"
        );
        check("[dut]\nkind = \"nflab\"\npipeline = [\"router\"]").expect("default routes");
        let e = check("backend = \"xdp_live\"").unwrap_err().to_string();
        assert!(e.contains("traffic.backend = \"xdp_live\" cannot"), "{e}");
        let e = check("tx_timestamp = \"kernel\"").unwrap_err().to_string();
        assert!(e.contains("kernel TX timestamps on both ports"), "{e}");
        let e = check("flows = 20000").unwrap_err().to_string();
        assert!(
            e.contains("traffic.flows = 20000 is too many: the probe stream has at most 16384 flows with traffic.direction = \"both\""),
            "{e}"
        );
        let e = Spec::parse(
            "[experiment]\nname = \"d\"\n[traffic]\ndirection = \"sideways\"\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("sideways") && e.contains("forward"), "{e}");
    }
}
