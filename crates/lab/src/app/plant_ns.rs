//! The namespace of an application's far end (NCSbench's plant, PRRT's
//! plant): a macvlan on lg1, so its traffic crosses the DuT to reach the
//! LoadGen namespace on lg0, with static neighbours on both sides (no ARP
//! crosses the DuT). It has an owner file like the topology's namespaces, so
//! `nflab topo gc` removes it when its run was killed. Deleted on drop.

use std::net::Ipv4Addr;
use std::process::Command;

use nflab_wire::MacAddr;

use crate::error::LabError;
use crate::net::cmd::ip;
use crate::net::namespaces::{remove_namespace, write_owner, NS_PREFIX};
use crate::topo::{Topology, LG0_IP, LG0_MAC};

/// A plant namespace, deleted on drop.
pub struct PlantNs {
    /// The namespace's name (`nflab-<id>-<suffix>`).
    pub name: String,
    /// Its macvlan.
    iface: String,
}

impl Drop for PlantNs {
    fn drop(&mut self) {
        // The macvlan goes first, synchronously: `ip netns del` only unmounts, the
        // kernel frees the namespace (and its devices) later, and until then the
        // next run's macvlan with the same address on lg1 cannot come up ("Address
        // already in use": a 675-run grid stopped at run 159 that way).
        let _ = Command::new(nflab_io::process::system_tool("ip"))
            .args(["-n", &self.name, "link", "del", &self.iface])
            .status();
        if let Err(e) = remove_namespace(&self.name) {
            eprintln!("warning: {e}");
        }
    }
}

impl PlantNs {
    /// Create `nflab-<id>-<suffix>` with `iface` (a macvlan on the LoadGen's lg1,
    /// `mac`, `addr`/24), up and transmitting, and the neighbours to and from lg0.
    pub fn create(
        topo: &Topology,
        suffix: &str,
        iface: &str,
        addr: Ipv4Addr,
        mac: MacAddr,
    ) -> Result<PlantNs, LabError> {
        let ns = PlantNs {
            name: format!("{NS_PREFIX}{}-{suffix}", topo.id),
            iface: iface.to_string(),
        };
        let (lg, name, mac) = (topo.lg_ns.as_str(), ns.name.as_str(), mac.to_string());
        // An owner file like the topology's, before the namespace: `nflab topo gc`
        // finds both, and the helpers of either, after a kill -9.
        write_owner(name)?;
        ip(&["netns", "add", name])?;
        ip(&[
            "-n", lg, "link", "add", iface, "link", "lg1", "address", &mac, "type", "macvlan",
            "mode", "bridge",
        ])?;
        ip(&["-n", lg, "link", "set", iface, "netns", name])?;
        ip(&[
            "-n",
            name,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            iface,
        ])?;
        for dev in ["lo", iface] {
            ip(&["-n", name, "link", "set", dev, "up"])?;
        }
        crate::net::link_ready::wait_until_transmitting(name, Some(iface))?;
        let (lg0_ip, lg0_mac, addr) = (LG0_IP.to_string(), LG0_MAC.to_string(), addr.to_string());
        ip(&[
            "-n",
            name,
            "neigh",
            "replace",
            &lg0_ip,
            "lladdr",
            &lg0_mac,
            "dev",
            iface,
            "nud",
            "permanent",
        ])?;
        ip(&[
            "-n",
            lg,
            "neigh",
            "replace",
            &addr,
            "lladdr",
            &mac,
            "dev",
            "lg0",
            "nud",
            "permanent",
        ])?;
        Ok(ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::DutKind;

    /// The next run's plant namespace comes up while the previous one is
    /// still alive in the kernel (a process inside keeps it, as the kernel's
    /// deferred clean-up does under load): same name, same macvlan address.
    #[test]
    fn a_plant_namespace_is_made_again_while_the_old_one_still_lives() {
        if !nflab_testkit::require_root() {
            return;
        }
        let topo = crate::dut::topology(DutKind::LinuxRouter, 1).expect("topology");
        let (addr, mac) = (
            Ipv4Addr::new(198, 18, 0, 9),
            MacAddr([0x02, 0x4e, 0x46, 0x00, 0x09, 0x09]),
        );
        let first = PlantNs::create(&topo, "plant-test", "pl0", addr, mac).expect("first");
        let mut keeper = Command::new(nflab_io::process::system_tool("ip"))
            .args(["netns", "exec", &first.name, "sleep", "30"])
            .spawn()
            .expect("ip netns exec");
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(first);
        let second = PlantNs::create(&topo, "plant-test", "pl0", addr, mac);
        let _ = keeper.kill();
        let _ = keeper.wait();
        let second = second.expect("the second plant namespace");
        drop(second);
    }
}
