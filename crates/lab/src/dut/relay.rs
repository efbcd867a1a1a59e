//! DuT kind `udp-relay`: seed 003's UDP relay VNF ([`nflab_apps::relay`]) in the DuT
//! namespace, between the generator and the recorder.
//!
//! The probes stay addressed to lg1 (198.19.0.1, port 9): a policy rule delivers
//! everything arriving on dut0 locally (`ip rule iif dut0 lookup 100` and a
//! `local 0.0.0.0/0` route in table 100 — the AnyIP trick, no proxy), where the relay's
//! socket, bound to the wildcard address and the probe port, takes it; the relay
//! sends the payload unchanged to lg1 from 198.19.0.2. Its truth (probe seq,
//! processing time) goes to `runs/NNN/relay_truth.parquet`.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use nflab_analyze::export::{write_parquet, Column, Table};
use nflab_apps::relay::{self, RelayStats, TruthRow};

use crate::dut::{DutDriver, RunningDut, Stopped};
use crate::error::LabError;
use crate::net::netns::NetnsGuard;
use crate::spec::DutKind;
use crate::spec::DutSection;
use crate::topo::Plumbing;
use crate::topo::{Topology, LG1_IP};

/// The routing table that delivers dut0's traffic to local sockets.
const LOCAL_TABLE: &str = "100";

/// Check `[dut.relay]`.
pub fn check(dut: &DutSection) -> Result<(), LabError> {
    let relay = dut.relay.clone().unwrap_or_default();
    if relay.busy_poll && dut.realtime == Some(true) {
        // Measured: a spinning SCHED_FIFO relay is throttled by the kernel (RT
        // bandwidth, sched_rt_runtime_us) and its datagrams wait up to 50 ms.
        return Err(LabError::Unsupported(
            "dut.relay.busy_poll = true with dut.realtime = true spins under SCHED_FIFO, which the kernel throttles for 50 ms of every second: use one of them".into(),
        ));
    }
    relay.delays().map(drop).map_err(LabError::Unsupported)
}

/// In namespace `ns`: deliver whatever arrives on dut0 to local sockets.
pub fn deliver_locally(
    ns: &str,
    ip: &dyn Fn(&[&str]) -> Result<(), LabError>,
) -> Result<(), LabError> {
    ip(&[
        "-n",
        ns,
        "rule",
        "add",
        "iif",
        "dut0",
        "lookup",
        LOCAL_TABLE,
    ])?;
    ip(&[
        "-n",
        ns,
        "route",
        "add",
        "local",
        "0.0.0.0/0",
        "dev",
        "lo",
        "table",
        LOCAL_TABLE,
    ])
}

/// The relay's thread: its truth rows and counters when it ends.
type RelayThread = JoinHandle<std::io::Result<(Vec<TruthRow>, RelayStats)>>;

/// A running relay.
pub struct RelayDut {
    /// `dut.realtime`: the relay's thread runs under SCHED_FIFO (false when it was not
    /// asked for, or the host refused it with a warning).
    pub realtime: bool,
    stop: Arc<AtomicBool>,
    thread: Option<RelayThread>,
}

/// Start the relay in the DuT namespace of `topo`, on the probe port.
pub fn start(topo: &Topology, dut: &DutSection, seed: u64) -> Result<RelayDut, LabError> {
    let ns = crate::dut::dut_namespace(topo, "udp-relay")?;
    let cfg = dut.relay.clone().unwrap_or_default();
    let arms = cfg.delays().map_err(LabError::Unsupported)?;
    let port = crate::addresses::PROBE_DST_PORT;
    let to = SocketAddr::from((LG1_IP, port));
    let stop = Arc::new(AtomicBool::new(false));
    let stop_t = Arc::clone(&stop);
    let (tx, rx) = mpsc::channel::<Result<bool, LabError>>();
    let cpu = dut.cpu;
    let want_realtime = dut.realtime == Some(true);
    // The thread lives in the DuT's namespace, as a VNF process there would (the
    // stages monitor recognises the relay's recv by its task's namespace).
    let thread = std::thread::Builder::new()
        .name("nflab-relay".into())
        .spawn(move || {
            if let Some(c) = cpu {
                crate::sys::cpu::pin_thread(c);
            }
            // dut.realtime: above the generator and the recorder (50), as the nflab
            // data plane's workers, so a busy host does not hold datagrams up.
            let realtime = want_realtime
                && match nflab_io::clock::set_realtime(crate::sys::cpu::DUT_PRIORITY) {
                    Ok(()) => true,
                    Err(e) => {
                        eprintln!(
                            "warning: dut.realtime: cannot run the udp relay under SCHED_FIFO: {e}"
                        );
                        false
                    }
                };
            let open = || -> Result<(NetnsGuard, UdpSocket), LabError> {
                let guard = NetnsGuard::enter(&ns)?;
                let bind = || -> std::io::Result<UdpSocket> {
                    let s = UdpSocket::bind(("0.0.0.0", port))?;
                    s.set_read_timeout(Some(Duration::from_millis(20)))?;
                    s.set_nonblocking(cfg.busy_poll)?;
                    Ok(s)
                };
                let s = bind().map_err(|e| {
                    LabError::Host(format!(
                        "the udp relay cannot bind port {port} in {ns}: {e}"
                    ))
                })?;
                Ok((guard, s))
            };
            match open() {
                Ok((_guard, sock)) => {
                    let _ = tx.send(Ok(realtime));
                    relay::serve(&sock, to, &arms, seed, &stop_t)
                }
                Err(e) => {
                    let msg = e.to_string();
                    let _ = tx.send(Err(e));
                    Err(std::io::Error::other(msg))
                }
            }
        })
        .map_err(|e| LabError::Host(format!("cannot start the udp relay: {e}")))?;
    match rx.recv() {
        Ok(Ok(realtime)) => Ok(RelayDut {
            realtime,
            stop,
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => Err(LabError::Other(
            "the udp relay ended before it started".into(),
        )),
    }
}

impl RelayDut {
    /// Stop; returns the truth rows and the counters.
    pub fn stop(mut self) -> Result<(Vec<TruthRow>, RelayStats), LabError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .ok_or_else(|| LabError::Other("the udp relay was stopped twice".into()))?
            .join()
            .map_err(|_| LabError::Other("the udp relay panicked".into()))?
            .map_err(|e| LabError::Other(format!("the udp relay failed: {e}")))
    }
}

impl Drop for RelayDut {
    /// A run that ends early (an error elsewhere) still stops the relay's thread.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `udp-relay`: seed 003's UDP relay VNF in the DuT namespace.
pub struct RelayDriver;

impl Plumbing for RelayDriver {
    /// Addresses and neighbours as a router's, without forwarding: whatever arrives
    /// on dut0 is delivered to the relay's socket.
    fn plumb(&self, ns: &str) -> Result<(), LabError> {
        crate::dut::kernel::plumb_router(ns, false)?;
        deliver_locally(ns, &|a| crate::net::cmd::ip(a))?;
        // The relay's datagrams must reach the recorder with their UDP checksum
        // filled in, not left to veth "hardware".
        let who = format!("dut.kind = \"{}\"", DutKind::UdpRelay.as_str());
        crate::net::cmd::checksums_in_software(ns, &["dut1"], &who)
    }

    fn probe_dst_mac(&self) -> nflab_wire::MacAddr {
        crate::addresses::DUT0_MAC
    }
}

impl DutDriver for RelayDriver {
    fn kind(&self) -> DutKind {
        DutKind::UdpRelay
    }

    fn check(&self, spec: &crate::spec::Spec) -> Result<(), LabError> {
        check(&spec.dut)
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        None
    }

    fn reverse_path(&self, _: &DutSection) -> Result<nflab_wire::MacAddr, &'static str> {
        Err("relays datagrams from dut0 to dut1 only")
    }

    /// The relay's socket, bound to the probe port in the DuT namespace.
    fn udp_monitor(&self) -> bool {
        true
    }

    fn stages(&self) -> Option<&'static [nflab_monitor::stages::Stage]> {
        Some(nflab_monitor::stages::UDP_RELAY)
    }

    fn start(
        &self,
        topo: &Topology,
        dut: &DutSection,
        seed: u64,
        _dir: &std::path::Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        Ok(Box::new(start(topo, dut, seed)?))
    }
}

impl RunningDut for RelayDut {
    /// `relay_truth.parquet`, and `dut.json`: the relay's counters and whether it ran
    /// under SCHED_FIFO (`dut.realtime`). The truth goes on to the monitor. A relay
    /// that failed leaves `dut.json` with `realtime` and its `error` (its counters
    /// and truth went with it), then the run gets the error.
    fn stop(self: Box<Self>, dir: &Path) -> Result<Stopped, LabError> {
        let realtime = self.realtime;
        let (truth, stats) = match RelayDut::stop(*self) {
            Ok(ran) => ran,
            Err(e) => {
                let dut = serde_json::json!({ "realtime": realtime, "error": e.to_string() });
                return crate::dut::write_dut_json(dir, &dut, Some(e.to_string()));
            }
        };
        write_truth(&truth, &dir.join("relay_truth.parquet"))?;
        let mut dut = serde_json::to_value(&stats).map_err(|e| LabError::Other(e.to_string()))?;
        if let Some(o) = dut.as_object_mut() {
            o.insert("realtime".into(), realtime.into());
        }
        crate::artifacts::files::write_json(&dir.join("dut.json"), &dut)?;
        Ok(Stopped { truth: Some(truth) })
    }
}

/// `relay_truth.parquet`: `seq` (null for a datagram without a probe), `processing_ns`,
/// `arm` (the index in `dut.relay.interleave`, 0 without).
pub fn write_truth(rows: &[TruthRow], path: &Path) -> Result<(), LabError> {
    let t = Table {
        name: "relay_truth".into(),
        columns: vec![
            (
                "seq".into(),
                Column::I64(rows.iter().map(|r| r.seq.map(|s| s as i64)).collect()),
            ),
            (
                "processing_ns".into(),
                Column::I64(rows.iter().map(|r| Some(r.processing_ns as i64)).collect()),
            ),
            (
                "arm".into(),
                Column::I64(rows.iter().map(|r| Some(i64::from(r.arm))).collect()),
            ),
        ],
    };
    write_parquet(&t, path).map_err(|e| LabError::Other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_relay_writes_dut_json_before_its_error() {
        let dir = nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-relay")
            .expect("dir");
        let relay = RelayDut {
            realtime: false,
            stop: Arc::new(AtomicBool::new(false)),
            thread: Some(std::thread::spawn(|| {
                Err(std::io::Error::other("recv: network is down"))
            })),
        };
        let e = RunningDut::stop(Box::new(relay), &dir)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the udp relay failed: recv: network is down"),
            "{e}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("dut.json")).expect("dut.json"))
                .expect("json");
        assert_eq!(json["realtime"], false);
        assert_eq!(json["error"].as_str(), Some(e.as_str()));
        assert!(!dir.join("relay_truth.parquet").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
