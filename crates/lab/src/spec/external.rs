//! `[dut.external]` of the spec: a device nflab does not set up — a hardware switch
//! or router, a P4 target, a VM or a namespace running someone else's network
//! function. nflab only cables (netns topology) or names (hosts topology) the
//! LoadGen's two ports, addresses them for an L3 box, and runs the user's hooks.
//! Checked here without touching the host; run by `dut::external`.

use std::net::Ipv4Addr;
use std::time::Duration;

use nflab_wire::MacAddr;
use serde::{Deserialize, Serialize};

use crate::addresses::{DUT0_IP, DUT1_IP, LG0_IP, LG1_IP};

/// Longest time a hook may take unless it says otherwise.
pub const DEFAULT_HOOK_TIMEOUT_S: f64 = 60.0;
/// How long the gateway has to answer ARP unless the spec says otherwise.
pub const DEFAULT_ARP_TIMEOUT_S: f64 = 3.0;

/// `[dut.external]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExternalSection {
    /// "l3" (default): the box routes between two subnets, nflab's ports carry
    /// addresses and find the box's MAC by ARP; "l2": the box bridges or switches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// netns topology: an existing namespace holding the box; nflab cables its veth
    /// pairs into it and leaves it otherwise alone. Absent: nflab makes the DuT
    /// namespace (`nflab-<id>-dut`) for the hooks to fill, and removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// netns topology: the name of the box's port facing the generator (default dut0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<String>,
    /// netns topology: the name of the box's port facing the recorder (default dut1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<String>,
    /// l3: address of the generator's port, `A.B.C.D/LEN` (default 198.18.0.1/24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_address: Option<String>,
    /// l3: address of the recorder's port (default 198.19.0.1/24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_address: Option<String>,
    /// l3: the box's address on the generator's side, whose MAC the probes go to
    /// (default 198.18.0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// l3: the box's address on the recorder's side, whose MAC the reverse direction's
    /// probes go to (`traffic.direction` = "reverse" or "both"; default 198.19.0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse_gateway: Option<String>,
    /// l2: where the probes go (default: the recorder's port's own MAC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_mac: Option<String>,
    /// l3: how long the gateway has to answer ARP, s (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arp_timeout_s: Option<f64>,
    /// Sets the box up before the run's traffic (after the ports are cabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<HookSpec>,
    /// Says whether the box is ready; a non-zero exit fails the run before traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HookSpec>,
    /// Takes the box down again, on every way out of the run (and after `kill -9`,
    /// from `nflab topo gc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown: Option<HookSpec>,
}

/// A hook: an argument vector, run without a shell, or one with its own timeout.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum HookSpec {
    /// `["cmd", "arg", …]`, with the default timeout.
    Argv(Vec<String>),
    /// `{ argv = ["cmd", …], timeout_s = 10 }`.
    Timed {
        /// The command and its arguments.
        argv: Vec<String>,
        /// Longest time it may take, s.
        timeout_s: f64,
    },
}

/// How the box forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// It routes: nflab's ports are addressed, the probes go to the gateway's MAC.
    L3,
    /// It bridges: no addresses, the probes go to the recorder's port's MAC.
    L2,
}

/// A hook, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hook {
    /// `setup`, `health` or `teardown`.
    pub name: &'static str,
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// Longest time it may take.
    #[serde(serialize_with = "seconds")]
    pub timeout: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// `[dut.external]`, checked, with its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct External {
    /// How the box forwards.
    pub mode: Mode,
    /// The user's namespace holding the box (netns topology), if any.
    pub netns: Option<String>,
    /// The box's ports on the netns topology: (facing the generator, facing the recorder).
    pub ports: (String, String),
    /// l3: the generator's port's address and prefix length.
    pub tx_address: (Ipv4Addr, u8),
    /// l3: the recorder's port's address and prefix length.
    pub rx_address: (Ipv4Addr, u8),
    /// l3: the box's address on the generator's side.
    pub gateway: Ipv4Addr,
    /// l3: the box's address on the recorder's side (the reverse direction's gateway).
    pub reverse_gateway: Ipv4Addr,
    /// l2: where the probes go, when not the recorder's port.
    pub dst_mac: Option<MacAddr>,
    /// l3: how long the gateway has to answer ARP.
    pub arp_timeout: Duration,
    /// The hooks, in the order they run.
    pub setup: Option<Hook>,
    /// See [`ExternalSection::health`].
    pub health: Option<Hook>,
    /// See [`ExternalSection::teardown`].
    pub teardown: Option<Hook>,
}

impl ExternalSection {
    /// Check every key; the error names the key and what would be valid.
    pub fn resolve(&self) -> Result<External, String> {
        let mode = match self.mode.as_deref() {
            None | Some("l3") => Mode::L3,
            Some("l2") => Mode::L2,
            Some(m) => {
                return Err(format!(
                    "dut.external.mode = \"{m}\" is not known: use \"l3\" (the box routes) or \"l2\" (it bridges)"
                ))
            }
        };
        let iface = |key: &str, v: &Option<String>, default: &str| -> Result<String, String> {
            let name = v.clone().unwrap_or_else(|| default.to_string());
            check_iface_name(&name)
                .map_err(|why| format!("dut.external.{key} = {name:?} {why}"))?;
            Ok(name)
        };
        let ports = (
            iface("ingress", &self.ingress, "dut0")?,
            iface("egress", &self.egress, "dut1")?,
        );
        if ports.0 == ports.1 {
            return Err(format!(
                "dut.external.ingress and dut.external.egress are both {:?}: the box needs two ports",
                ports.0
            ));
        }
        if let Some(ns) = &self.netns {
            if ns.is_empty()
                || ns.contains('/')
                || ns.starts_with('.')
                || ns.len() > 200
                || ns.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(format!(
                    "dut.external.netns = {ns:?} is not a namespace name: give the name `ip netns list` shows"
                ));
            }
        }
        let l3_only = [
            ("tx_address", self.tx_address.is_some()),
            ("rx_address", self.rx_address.is_some()),
            ("gateway", self.gateway.is_some()),
            ("reverse_gateway", self.reverse_gateway.is_some()),
            ("arp_timeout_s", self.arp_timeout_s.is_some()),
        ];
        if mode == Mode::L2 {
            if let Some((key, _)) = l3_only.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "dut.external.{key} applies to mode = \"l3\": a bridging box has no addresses to reach"
                ));
            }
        } else if self.dst_mac.is_some() {
            return Err(
                "dut.external.dst_mac applies to mode = \"l2\": with \"l3\" the probes go to the gateway's MAC, found by ARP".into(),
            );
        }
        let arp_timeout_s = self.arp_timeout_s.unwrap_or(DEFAULT_ARP_TIMEOUT_S);
        if !(arp_timeout_s > 0.0 && arp_timeout_s <= 60.0) {
            return Err(format!(
                "dut.external.arp_timeout_s = {arp_timeout_s} is out of range: use more than 0 and at most 60"
            ));
        }
        Ok(External {
            mode,
            netns: self.netns.clone(),
            ports,
            tx_address: prefix("tx_address", &self.tx_address, (LG0_IP, 24))?,
            rx_address: prefix("rx_address", &self.rx_address, (LG1_IP, 24))?,
            gateway: address("gateway", &self.gateway, DUT0_IP)?,
            reverse_gateway: address("reverse_gateway", &self.reverse_gateway, DUT1_IP)?,
            dst_mac: self
                .dst_mac
                .as_deref()
                .map(|m| {
                    m.parse().map_err(|_| {
                        format!("dut.external.dst_mac = {m:?} is not a MAC address, e.g. \"02:00:00:00:00:01\"")
                    })
                })
                .transpose()?,
            arp_timeout: Duration::from_secs_f64(arp_timeout_s),
            setup: hook("setup", &self.setup)?,
            health: hook("health", &self.health)?,
            teardown: hook("teardown", &self.teardown)?,
        })
    }
}

/// An interface name as the kernel takes it (`spec::knobs::is_interface_name`), or
/// what it must be.
pub fn check_iface_name(name: &str) -> Result<(), &'static str> {
    if super::knobs::is_interface_name(name) {
        Ok(())
    } else {
        Err("is not an interface name: 1 to 15 characters, no '/', ':' or spaces")
    }
}

fn address(key: &str, v: &Option<String>, default: Ipv4Addr) -> Result<Ipv4Addr, String> {
    match v {
        None => Ok(default),
        Some(g) => g.parse().map_err(|_| {
            format!("dut.external.{key} = {g:?} is not an IPv4 address, e.g. \"{default}\"")
        }),
    }
}

fn prefix(
    key: &str,
    v: &Option<String>,
    default: (Ipv4Addr, u8),
) -> Result<(Ipv4Addr, u8), String> {
    let Some(s) = v else { return Ok(default) };
    let bad = || {
        format!(
            "dut.external.{key} = {s:?} is not an address with its prefix, e.g. \"198.18.0.1/24\""
        )
    };
    let (a, l) = s.split_once('/').ok_or_else(bad)?;
    let addr: Ipv4Addr = a.parse().map_err(|_| bad())?;
    let len: u8 = l.parse().map_err(|_| bad())?;
    if !(1..=32).contains(&len) {
        return Err(bad());
    }
    Ok((addr, len))
}

fn hook(name: &'static str, spec: &Option<HookSpec>) -> Result<Option<Hook>, String> {
    let Some(spec) = spec else { return Ok(None) };
    let (argv, timeout_s) = match spec {
        HookSpec::Argv(a) => (a.clone(), DEFAULT_HOOK_TIMEOUT_S),
        HookSpec::Timed { argv, timeout_s } => (argv.clone(), *timeout_s),
    };
    if argv.first().is_none_or(|c| c.is_empty()) {
        return Err(format!(
            "dut.external.{name} is empty: give the command and its arguments, e.g. [\"sh\", \"setup.sh\"]"
        ));
    }
    if !(timeout_s > 0.0 && timeout_s <= 3600.0) {
        return Err(format!(
            "dut.external.{name}.timeout_s = {timeout_s} is out of range: use more than 0 and at most 3600"
        ));
    }
    Ok(Some(Hook {
        name,
        argv,
        timeout: Duration::from_secs_f64(timeout_s),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> ExternalSection {
        toml::from_str(text).expect("section")
    }

    #[test]
    fn defaults_are_the_lab_addresses_and_dut_ports() {
        let e = section("").resolve().expect("defaults");
        assert_eq!(e.mode, Mode::L3);
        assert_eq!(e.ports, ("dut0".into(), "dut1".into()));
        assert_eq!(e.tx_address, (LG0_IP, 24));
        assert_eq!(e.rx_address, (LG1_IP, 24));
        assert_eq!(e.gateway, DUT0_IP);
        assert!(e.setup.is_none());
        let e = section(
            "setup = [\"sh\", \"-c\", \"true\"]\nteardown = { argv = [\"true\"], timeout_s = 5 }",
        )
        .resolve()
        .expect("hooks");
        assert_eq!(e.setup.expect("setup").timeout, Duration::from_secs(60));
        assert_eq!(
            e.teardown.expect("teardown").timeout,
            Duration::from_secs(5)
        );
    }

    #[test]
    fn bad_values_are_one_sentence_naming_the_key() {
        for (text, key) in [
            ("mode = \"l4\"", "dut.external.mode"),
            ("ingress = \"a/b\"", "dut.external.ingress"),
            ("egress = \"averyveryverylongname\"", "dut.external.egress"),
            ("ingress = \"x\"\negress = \"x\"", "both \"x\""),
            ("netns = \"../etc\"", "dut.external.netns"),
            ("tx_address = \"198.18.0.1\"", "dut.external.tx_address"),
            ("gateway = \"gw\"", "dut.external.gateway"),
            (
                "mode = \"l2\"\ngateway = \"198.18.0.2\"",
                "dut.external.gateway applies",
            ),
            (
                "dst_mac = \"02:00:00:00:00:01\"",
                "dut.external.dst_mac applies",
            ),
            ("mode = \"l2\"\ndst_mac = \"zz\"", "dut.external.dst_mac"),
            ("arp_timeout_s = 0", "dut.external.arp_timeout_s"),
            ("setup = []", "dut.external.setup is empty"),
            (
                "health = { argv = [\"true\"], timeout_s = -1 }",
                "dut.external.health.timeout_s",
            ),
        ] {
            let e = section(text).resolve().expect_err(text);
            assert!(e.contains(key), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn interface_names_follow_the_kernel() {
        for ok in ["eth0", "dut0", "a", "enp0s31f6.100", "x-y_z"] {
            assert!(check_iface_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a b",
            "a/b",
            "a:b",
            "sixteen_chars_xx",
            "a\nb",
        ] {
            assert!(check_iface_name(bad).is_err(), "{bad:?}");
        }
    }
}
