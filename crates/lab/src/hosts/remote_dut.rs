//! Real testbeds (DESIGN §5): the LoadGen and the DuT on different hosts.
//!
//! nflab drives the DuT host over plain SSH with the same binary
//! (`nflab remote …`), records each host's clock source and PTP/NTP sync
//! state, and keeps the artifact tree of a namespace run. The generator and
//! recorder run on the LoadGen host, which is this machine (`address =
//! "local"`), optionally inside a network namespace.
//!
//! ```toml
//! [topology]
//! kind = "hosts"
//!
//! [hosts.loadgen]
//! address = "local"
//! tx_iface = "eth1"
//! rx_iface = "eth2"
//!
//! [hosts.dut]
//! address = "root@dut.example"
//! ssh_options = ["-i", "/root/.ssh/lab"]
//! ingress_iface = "eth1"
//! egress_iface = "eth2"
//! ```
//!
//! On the DuT host nflab configures only what the DuT kind needs, on the
//! named interfaces, with addresses from the benchmarking ranges, and
//! reverts it afterwards: the prior `ip_forward`, the added addresses,
//! neighbours and bridge.

use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::addresses::{DUT0_IP, DUT1_IP, LG0_IP, LG1_IP};
use crate::error::LabError;
pub use crate::spec::hosts::{HostEntry, Inventory};

/// How `nflab remote dut-up` sets a DuT host up: the kinds a remote host can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteSetup {
    /// Kernel IPv4 forwarding between the two interfaces, static neighbours.
    Router,
    /// A kernel bridge of the two interfaces.
    Bridge,
}

impl RemoteSetup {
    /// The `dut.kind` it stands for, as `dut-up --kind` takes it.
    pub fn kind_name(self) -> &'static str {
        match self {
            RemoteSetup::Router => "linux-router",
            RemoteSetup::Bridge => "linux-bridge",
        }
    }

    /// The set-up of `dut-up --kind NAME`.
    pub fn from_kind_name(name: &str) -> Option<RemoteSetup> {
        [RemoteSetup::Router, RemoteSetup::Bridge]
            .into_iter()
            .find(|s| s.kind_name() == name)
    }
}

/// Check an inventory for `topology.kind = "hosts"` with a DuT host nflab sets up:
/// the LoadGen here, the DuT host's address and every interface named. (Whether the
/// kind can be set up on a host at all its driver says: `DutDriver::check_hosts`.)
pub fn validate(hosts: &Inventory) -> Result<(), String> {
    let lg = hosts
        .get("loadgen")
        .ok_or("topology.kind = \"hosts\" needs a [hosts.loadgen] section")?;
    let d = hosts
        .get("dut")
        .ok_or("topology.kind = \"hosts\" needs a [hosts.dut] section")?;
    if !lg.is_local() {
        return Err(format!(
            "hosts.loadgen.address = \"{}\": with [hosts] the generator runs on this machine; use \"local\", or declare the hosts as a [[pair]], whose LoadGen may be remote",
            lg.address
        ));
    }
    d.check_address("hosts.dut")?;
    for (key, v) in [
        ("hosts.loadgen.tx_iface", &lg.tx_iface),
        ("hosts.loadgen.rx_iface", &lg.rx_iface),
        ("hosts.dut.ingress_iface", &d.ingress_iface),
        ("hosts.dut.egress_iface", &d.egress_iface),
    ] {
        if v.as_deref().is_none_or(str::is_empty) {
            return Err(format!("{key} is missing: name the interface on that host"));
        }
    }
    Ok(())
}

/// What `nflab remote dut-up` changed, so `dut-down` can undo exactly that.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DutState {
    /// DuT kind set up.
    pub kind: String,
    /// Ingress interface.
    pub ingress: String,
    /// Egress interface.
    pub egress: String,
    /// MAC of the ingress interface (where the generator sends).
    pub ingress_mac: String,
    /// ip_forward before, to restore.
    pub prior_ip_forward: Option<String>,
    /// Addresses added ("198.18.0.2/24 dev eth1").
    pub added_addresses: Vec<(String, String)>,
    /// Neighbours added (address, device).
    pub added_neighbours: Vec<(String, String)>,
    /// Bridge created.
    pub bridge: Option<String>,
    /// The controller's owner tag; the state is then also on the DuT host
    /// (`crate::hosts::remote_gc`), and `dut_down` removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

fn ip(args: &[&str]) -> Result<(), LabError> {
    let out = Command::new(nflab_io::process::system_tool("ip"))
        .args(args)
        .output()
        .map_err(|e| LabError::Host(format!("cannot run 'ip': {e}; install iproute2")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::Topology(format!(
            "'ip {}' failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";
/// Bridge nflab creates on a DuT host.
pub const BRIDGE: &str = "nflabbr0";

/// Set up the DuT on this host (runs on the DuT host, via `nflab remote`).
/// With the controller's `owner` tag the state is kept on this host after
/// every change, for `nflab remote gc` ([`crate::hosts::remote_gc`]).
pub fn dut_up(
    setup: RemoteSetup,
    ingress: &str,
    egress: &str,
    (lg_tx_mac, lg_rx_mac): (&str, &str),
    owner: Option<&str>,
) -> Result<DutState, LabError> {
    crate::net::netns::check_root()?;
    if let Some(tag) = owner {
        crate::hosts::owner::check_tag(tag)?;
    }
    let ingress_mac = nflab_io::iface::mac(ingress).map(|m| nflab_wire::MacAddr(m).to_string())?;
    nflab_io::iface::index(egress)?;
    let mut st = DutState {
        kind: setup.kind_name().into(),
        ingress: ingress.into(),
        egress: egress.into(),
        ingress_mac,
        prior_ip_forward: None,
        added_addresses: Vec::new(),
        added_neighbours: Vec::new(),
        bridge: None,
        owner: owner.map(str::to_string),
    };
    let saved = |st: &DutState| match &st.owner {
        Some(tag) => crate::hosts::owner::save_dut_state(
            &crate::hosts::owner::dut_state_path(tag, &st.ingress),
            st,
        ),
        None => Ok(()),
    };
    let result = (|| -> Result<(), LabError> {
        for dev in [ingress, egress] {
            ip(&["link", "set", dev, "up"])?;
        }
        match setup {
            RemoteSetup::Router => {
                st.prior_ip_forward = std::fs::read_to_string(IP_FORWARD)
                    .ok()
                    .map(|s| s.trim().to_string());
                saved(&st)?;
                std::fs::write(IP_FORWARD, "1")
                    .map_err(|e| LabError::Host(format!("cannot enable {IP_FORWARD}: {e}")))?;
                for (addr, dev) in [
                    (format!("{DUT0_IP}/24"), ingress),
                    (format!("{DUT1_IP}/24"), egress),
                ] {
                    ip(&["addr", "add", &addr, "dev", dev])?;
                    st.added_addresses.push((addr, dev.to_string()));
                    saved(&st)?;
                }
                for (addr, mac, dev) in [
                    (LG1_IP.to_string(), lg_rx_mac, egress),
                    (LG0_IP.to_string(), lg_tx_mac, ingress),
                ] {
                    ip(&[
                        "neigh",
                        "replace",
                        &addr,
                        "lladdr",
                        mac,
                        "dev",
                        dev,
                        "nud",
                        "permanent",
                    ])?;
                    st.added_neighbours.push((addr, dev.to_string()));
                    saved(&st)?;
                }
            }
            RemoteSetup::Bridge => {
                ip(&["link", "add", BRIDGE, "type", "bridge", "stp_state", "0"])?;
                st.bridge = Some(BRIDGE.into());
                saved(&st)?;
                for dev in [ingress, egress] {
                    ip(&["link", "set", dev, "master", BRIDGE])?;
                }
                ip(&["link", "set", BRIDGE, "up"])?;
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        dut_down(&st);
        return Err(e);
    }
    Ok(st)
}

/// Undo what `dut_up` did; best effort, every step tried.
pub fn dut_down(st: &DutState) -> Vec<String> {
    let mut problems = Vec::new();
    for (addr, dev) in &st.added_neighbours {
        if let Err(e) = ip(&["neigh", "del", addr, "dev", dev]) {
            problems.push(e.to_string());
        }
    }
    for (addr, dev) in &st.added_addresses {
        if let Err(e) = ip(&["addr", "del", addr, "dev", dev]) {
            problems.push(e.to_string());
        }
    }
    if let Some(b) = &st.bridge {
        if let Err(e) = ip(&["link", "del", b]) {
            problems.push(e.to_string());
        }
    }
    if let Some(v) = &st.prior_ip_forward {
        if let Err(e) = std::fs::write(IP_FORWARD, v) {
            problems.push(format!("cannot restore {IP_FORWARD} to {v}: {e}"));
        }
    }
    if let (Some(tag), true) = (&st.owner, problems.is_empty()) {
        let _ = std::fs::remove_file(crate::hosts::owner::dut_state_path(tag, &st.ingress));
    }
    problems
}

/// Clock and sync facts of this host (runs on each host, via `nflab remote info`).
pub fn host_info() -> serde_json::Value {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .ok()
    };
    let running = |name: &str| {
        Command::new(nflab_io::process::system_tool("pgrep"))
            .args(["-x", name])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    let ptp_devices: Vec<String> = std::fs::read_dir("/sys/class/ptp")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    let chrony = Command::new(nflab_io::process::system_tool("chronyc"))
        .arg("tracking")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string());
    let sync = if running("ptp4l") {
        "ptp4l running"
    } else if running("chronyd") {
        "chronyd running"
    } else if running("ntpd") || running("systemd-timesyncd") {
        "ntp running"
    } else {
        "no sync daemon found"
    };
    serde_json::json!({
        "hostname": read("/proc/sys/kernel/hostname"),
        "kernel": read("/proc/sys/kernel/osrelease"),
        "clock_source": "CLOCK_REALTIME",
        "clock_resolution_ns": nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
        "kernel_clocksource": read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "ptp_devices": ptp_devices,
        "ptp4l_running": running("ptp4l"),
        "phc2sys_running": running("phc2sys"),
        "sync": sync,
        "chrony_tracking": chrony,
        "realtime_ns": nflab_io::clock::realtime_ns(),
        "nflab_version": env!("CARGO_PKG_VERSION"),
    })
}

/// The DuT of a hosts topology while it is set up; torn down on drop.
#[derive(Debug)]
pub struct RemoteDut {
    host: HostEntry,
    setup: RemoteSetup,
    state: DutState,
    down: bool,
    /// Names the host until it is clean again, for `topo gc` after a kill.
    journal: crate::knobs::journal::KnobJournal,
}

impl RemoteDut {
    /// Set the DuT up over SSH.
    pub fn up(
        host: &HostEntry,
        setup: RemoteSetup,
        lg_tx_mac: &str,
        lg_rx_mac: &str,
    ) -> Result<RemoteDut, LabError> {
        let mut journal = crate::hosts::owner::journal_host(host)?;
        let v = host.remote(&[
            "--owner",
            crate::hosts::owner::owner_tag(),
            "dut-up",
            "--kind",
            setup.kind_name(),
            "--ingress",
            host.ingress_iface.as_deref().unwrap_or(""),
            "--egress",
            host.egress_iface.as_deref().unwrap_or(""),
            "--lg-tx-mac",
            lg_tx_mac,
            "--lg-rx-mac",
            lg_rx_mac,
        ]);
        // A failed dut-up undid its own changes on the host.
        let v = v.inspect_err(|_| journal.finish())?;
        let state: DutState = serde_json::from_value(v).map_err(|e| {
            LabError::Host(format!(
                "host {}: unexpected dut-up answer: {e}",
                host.address
            ))
        })?;
        Ok(RemoteDut {
            host: host.clone(),
            setup,
            state,
            down: false,
            journal,
        })
    }

    /// MAC of the DuT's ingress interface.
    pub fn ingress_mac(&self) -> &str {
        &self.state.ingress_mac
    }

    /// Where the generator addresses its frames: the router's ingress, or through
    /// the bridge to the recorder's interface (`rx_mac`).
    pub fn probe_dst(&self, rx_mac: nflab_wire::MacAddr) -> Result<nflab_wire::MacAddr, LabError> {
        match self.setup {
            RemoteSetup::Router => self.ingress_mac().parse().map_err(|_| {
                LabError::Host(format!(
                    "host {} reported a bad MAC {}",
                    self.host.address,
                    self.ingress_mac()
                ))
            }),
            RemoteSetup::Bridge => Ok(rx_mac),
        }
    }

    /// Undo the set-up.
    pub fn down(&mut self) -> Result<(), LabError> {
        if self.down {
            return Ok(());
        }
        self.down = true;
        let state = serde_json::to_string(&self.state).unwrap_or_default();
        self.host.remote(&["dut-down", "--state", &state])?;
        self.journal.finish();
        Ok(())
    }
}

impl Drop for RemoteDut {
    fn drop(&mut self) {
        if let Err(e) = self.down() {
            eprintln!("warning: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts::ssh::shell_quote;

    fn inv(text: &str) -> Inventory {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn inventory_checks_name_the_missing_key() {
        let good = "[loadgen]\naddress = \"local\"\ntx_iface = \"a\"\nrx_iface = \"b\"\n[dut]\naddress = \"root@h\"\ningress_iface = \"c\"\negress_iface = \"d\"\n";
        validate(&inv(good)).unwrap();
        let e = validate(&inv(&good.replace("rx_iface = \"b\"\n", ""))).unwrap_err();
        assert!(e.contains("hosts.loadgen.rx_iface"), "{e}");
        let e = validate(&inv(
            &good.replace("address = \"local\"", "address = \"x@y\"")
        ))
        .unwrap_err();
        assert!(e.contains("hosts.loadgen.address"), "{e}");
        let e = validate(&Inventory::new()).unwrap_err();
        assert!(e.contains("[hosts.loadgen]"), "{e}");
    }

    #[test]
    fn unreachable_host_is_one_sentence() {
        // Loopback port 1: refused at once, and no packet leaves the host.
        let h = HostEntry {
            address: "root@127.0.0.1".into(),
            port: Some(1),
            ..Default::default()
        };
        if !nflab_testkit::require_tool("ssh", "openssh-client") {
            return;
        }
        let e = h.remote(&["info"]).unwrap_err().to_string();
        assert!(e.contains("root@127.0.0.1") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn shell_quoting_survives_json_and_quotes() {
        let json = r#"{"kind":"linux-router","ingress":"it's"}"#;
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", shell_quote(json)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), json);
    }

    #[test]
    fn host_info_has_clock_facts() {
        let v = host_info();
        assert_eq!(v["clock_source"], "CLOCK_REALTIME");
        assert!(v["sync"].is_string() && v["realtime_ns"].as_u64().unwrap() > 0);
    }
}
