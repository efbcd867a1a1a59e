//! `external`: a device nflab does not set up — a hardware switch or router, a P4
//! target, a VM or a namespace running someone else's network function
//! (`[dut.external]`, docs/experiments.md "Testing a device you bring").
//!
//! On the netns topology nflab cables its two veth pairs into the box's namespace
//! (one it makes, `nflab-<id>-dut`, or the user's `netns`, left otherwise alone),
//! naming the box's ports `ingress` and `egress`; on the hosts topology it uses the
//! LoadGen's `tx_iface` and `rx_iface` as they are. Per run, in this order: the
//! `teardown` hook is journalled (so `nflab topo gc` runs it after a `kill -9`),
//! `setup` runs, an L3 box's addresses go onto the LoadGen's ports (journalled and
//! removed afterwards), `health` runs, and the probes' destination is found: the
//! gateway's MAC by ARP (l3), or the recorder's port with RFC 2544 §23 learning
//! frames sent from it first (l2). `stop` — or a drop on any other way out — runs
//! `teardown`, removes the addresses, and writes `runs/NNN/external.json`.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use nflab_io::PacketIo;
use nflab_wire::MacAddr;
use nflab_wire::ProbeSpec;
use serde::Serialize;

use super::{DutDriver, RunningDut, Stopped};
use crate::error::LabError;
use crate::knobs::journal::{KnobJournal, Restore, JOURNAL_DIR};
use crate::net::netns::NetnsGuard;
use crate::spec::external::{External, Hook, Mode};
use crate::spec::hosts::Inventory;
use crate::spec::{DutKind, DutSection, Spec, TopologyKind};
use crate::sys::command::CommandRun;
use crate::topo::{Plumbing, Topology};

/// `external`.
pub struct ExternalDriver;

/// Frames sent from the recorder's port before an l2 run (RFC 2544 §23).
const LEARNING_FRAMES: usize = 3;
/// IEEE 802 local experimental EtherType: a learning frame carries nothing else.
const LEARNING_ETHERTYPE: [u8; 2] = [0x88, 0xb5];

/// `[dut.external]` of `dut`, checked; its defaults without one.
fn config(dut: &DutSection) -> Result<External, LabError> {
    dut.external
        .clone()
        .unwrap_or_default()
        .resolve()
        .map_err(LabError::Unsupported)
}

impl Plumbing for ExternalDriver {
    fn foreign_namespace(&self, dut: &DutSection) -> Option<String> {
        dut.external.as_ref().and_then(|e| e.netns.clone())
    }

    fn port_names(&self, dut: &DutSection) -> (String, String) {
        config(dut).map_or_else(|_| ("dut0".into(), "dut1".into()), |c| c.ports)
    }
}

impl DutDriver for ExternalDriver {
    fn kind(&self) -> DutKind {
        DutKind::External
    }

    fn check(&self, spec: &Spec) -> Result<(), LabError> {
        if spec.dut.command.is_some() {
            return Err(LabError::Unsupported(
                "dut.command does not apply to dut.kind = \"external\": give the commands that set the box up as [dut.external] setup, health and teardown".into(),
            ));
        }
        let c = config(&spec.dut)?;
        if c.mode == Mode::L3 && spec.traffic.ip_version == 6 {
            return Err(LabError::Unsupported(
                "traffic.ip_version = 6 cannot cross dut.external.mode = \"l3\", whose addresses, gateway and ARP are IPv4: use mode = \"l2\" or IPv4".into(),
            ));
        }
        if spec.topology.kind == TopologyKind::Hosts {
            for (key, set) in [
                ("netns", c.netns.is_some()),
                (
                    "ingress",
                    spec.dut
                        .external
                        .as_ref()
                        .is_some_and(|e| e.ingress.is_some()),
                ),
                (
                    "egress",
                    spec.dut
                        .external
                        .as_ref()
                        .is_some_and(|e| e.egress.is_some()),
                ),
            ] {
                if set {
                    return Err(LabError::Unsupported(format!(
                        "dut.external.{key} applies to topology.kind = \"netns\": on real hosts the box sits behind [hosts.loadgen] tx_iface and rx_iface"
                    )));
                }
            }
        }
        Ok(())
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        Some("nflab does not run an external DuT")
    }

    /// Whatever the box does the other way: an l3 box's reverse gateway is found by
    /// ARP from the recorder's port when the run starts; an l2 box's probes go to the
    /// generator's port.
    fn reverse_path(&self, _: &DutSection) -> Result<MacAddr, &'static str> {
        Ok(crate::net::addresses::LG0_MAC)
    }

    /// With `topology.keep = true` the box is set up once per study: its hooks run
    /// around the runs that share the topology, not around each.
    fn lives_with_kept_topology(&self) -> bool {
        true
    }

    /// The box behind [hosts.loadgen]'s two ports carries what it carries both ways.
    fn reverse_on_hosts(&self) -> bool {
        true
    }

    fn check_hosts(&self, hosts: &Inventory) -> Result<(), String> {
        let lg = hosts.get("loadgen").ok_or(
            "topology.kind = \"hosts\" with dut.kind = \"external\" needs a [hosts.loadgen] section: the LoadGen's tx_iface and rx_iface",
        )?;
        if let Some(role) = hosts.keys().find(|r| r.as_str() != "loadgen") {
            return Err(format!(
                "[hosts.{role}] does not apply to dut.kind = \"external\": nflab sets nothing up on the box, so give only [hosts.loadgen]"
            ));
        }
        if !lg.is_local() {
            return Err(format!(
                "hosts.loadgen.address = \"{}\": with dut.kind = \"external\" the LoadGen is this machine; use \"local\"",
                lg.address
            ));
        }
        for (key, v) in [
            ("hosts.loadgen.tx_iface", &lg.tx_iface),
            ("hosts.loadgen.rx_iface", &lg.rx_iface),
        ] {
            let name = v.as_deref().unwrap_or("");
            crate::spec::external::check_iface_name(name).map_err(|why| {
                if name.is_empty() {
                    format!("{key} is missing: name the interface on this machine")
                } else {
                    format!("{key} = {name:?} {why}")
                }
            })?;
        }
        Ok(())
    }

    fn hosts_topology(&self, spec: &Spec) -> Result<Topology, LabError> {
        let lg = &spec.hosts["loadgen"];
        let (tx, rx) = (
            lg.tx_iface.clone().unwrap_or_default(),
            lg.rx_iface.clone().unwrap_or_default(),
        );
        let in_lg = |f: &dyn Fn() -> Result<MacAddr, LabError>| match &lg.netns {
            Some(ns) => NetnsGuard::run(ns, f)?,
            None => f(),
        };
        for dev in [&tx, &rx] {
            in_lg(&|| iface_mac(dev))?;
        }
        // Until the run's DuT finds the box's MAC: the other port (each way).
        let rx_mac = in_lg(&|| iface_mac(&rx))?;
        let tx_mac = in_lg(&|| iface_mac(&tx))?;
        let mut topo =
            Topology::for_loadgen_host(lg.netns.clone(), tx, rx, DutKind::External, rx_mac);
        topo.reverse_dst = Some(tx_mac);
        Ok(topo)
    }

    fn start(
        &self,
        topo: &Topology,
        dut: &DutSection,
        _seed: u64,
        dir: &Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        let mut running = RunningExternal::new(topo, config(dut)?, dir);
        match running.bring_up() {
            Ok(()) => Ok(Box::new(running)),
            // The drop takes the box down and leaves external.json, the hooks that ran
            // (teardown included) being the run's record of why; the error is the one
            // that stopped the run.
            Err(e) => Err(e),
        }
    }
}

/// The MAC of interface `dev` of this thread's namespace; a missing one in a sentence.
fn iface_mac(dev: &str) -> Result<MacAddr, LabError> {
    nflab_io::iface::mac(dev).map(MacAddr).map_err(|e| {
        LabError::Topology(format!(
            "interface {dev} cannot carry the probes: {e}; name an interface that exists and is up"
        ))
    })
}

/// An external DuT during one run.
struct RunningExternal {
    config: External,
    /// The LoadGen's namespace ("" = this one) and its two ports.
    lg_ns: String,
    ports: (String, String),
    /// The hooks' environment.
    env: Vec<(&'static str, String)>,
    journal: KnobJournal,
    /// Addresses this run put on the LoadGen's ports: (address/len, port).
    added: Vec<(String, String)>,
    hooks: Vec<(&'static str, CommandRun)>,
    probe_dst: Option<MacAddr>,
    /// Where the reverse direction's probes go, once asked for.
    reverse_dst: Option<MacAddr>,
    torn_down: bool,
    /// The run's directory, for `external.json` on every way out.
    dir: std::path::PathBuf,
    /// What the run put on the LoadGen's ports, for `external.json`.
    added_report: Vec<String>,
    reported: bool,
}

/// `runs/NNN/external.json`.
#[derive(Serialize)]
struct ExternalReport<'a> {
    kind: &'static str,
    mode: Mode,
    netns: Option<&'a str>,
    ports: Option<(&'a str, &'a str)>,
    /// With `topology.keep`: the run whose `external.json` holds the hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    set_up_in_run: Option<String>,
    probe_dst_mac: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reverse_probe_dst_mac: Option<String>,
    addresses_added: Vec<String>,
    hooks: Vec<HookReport<'a>>,
}

#[derive(Serialize)]
struct HookReport<'a> {
    name: &'static str,
    #[serde(flatten)]
    run: &'a CommandRun,
}

impl RunningExternal {
    fn new(topo: &Topology, config: External, dir: &Path) -> RunningExternal {
        let mut env = vec![
            ("NFLAB_LG_NETNS", topo.lg_ns.clone()),
            ("NFLAB_TX_IFACE", topo.gen_iface.clone()),
            ("NFLAB_RX_IFACE", topo.rec_iface.clone()),
        ];
        if let Some(ns) = &topo.dut_ns {
            env.push(("NFLAB_DUT_NETNS", ns.clone()));
            env.push(("NFLAB_INGRESS", topo.dut_ports.0.clone()));
            env.push(("NFLAB_EGRESS", topo.dut_ports.1.clone()));
        }
        RunningExternal {
            config,
            lg_ns: topo.lg_ns.clone(),
            ports: (topo.gen_iface.clone(), topo.rec_iface.clone()),
            env,
            journal: KnobJournal::new(Path::new(JOURNAL_DIR)),
            added: Vec::new(),
            hooks: Vec::new(),
            probe_dst: None,
            reverse_dst: None,
            torn_down: false,
            dir: dir.to_path_buf(),
            added_report: Vec::new(),
            reported: false,
        }
    }

    /// Everything before the run's traffic; on an error the drop takes down what
    /// was brought up.
    fn bring_up(&mut self) -> Result<(), LabError> {
        if let Some(t) = &self.config.teardown {
            // Before setup changes anything: a kill -9 from here on is undone by gc.
            self.journal.record(&Restore::Hook {
                argv: t.argv.clone(),
                env: self
                    .env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
                timeout_s: t.timeout.as_secs_f64(),
            })?;
        }
        if let Some(h) = self.config.setup.clone() {
            self.hook(&h)?;
        }
        if self.config.mode == Mode::L3 {
            let (tx, rx) = self.ports.clone();
            self.address(&tx, self.config.tx_address)?;
            self.address(&rx, self.config.rx_address)?;
        }
        if let Some(h) = self.config.health.clone() {
            self.hook(&h)?;
        }
        self.probe_dst = Some(match self.config.mode {
            Mode::L3 => self.resolve_gateway(
                "gateway",
                self.config.gateway,
                &self.ports.0,
                self.config.tx_address.0,
            )?,
            Mode::L2 => {
                let rx = self.ports.1.clone();
                self.learn(&rx)?;
                match self.config.dst_mac {
                    Some(m) => m,
                    None => self.in_lg(|| iface_mac(&rx))?,
                }
            }
        });
        Ok(())
    }

    /// Run hook `h`; one that fails or outlives its timeout fails the run.
    fn hook(&mut self, h: &Hook) -> Result<(), LabError> {
        let run = crate::sys::command::run(&h.argv, &self.env, h.timeout);
        let verdict = if let Some(e) = &run.spawn_error {
            Some(format!("dut.external.{}: {e}", h.name))
        } else if run.timed_out {
            Some(format!(
                "dut.external.{} ({}) did not end within {} s and was killed",
                h.name,
                crate::sys::command::one_line(&h.argv),
                h.timeout.as_secs_f64()
            ))
        } else if !run.succeeded() {
            Some(format!(
                "dut.external.{} ({}) exited with {}: {}",
                h.name,
                crate::sys::command::one_line(&h.argv),
                run.exit_code.map_or("a signal".into(), |c| c.to_string()),
                run.last_line()
            ))
        } else {
            None
        };
        self.hooks.push((h.name, run));
        match verdict {
            Some(v) => Err(LabError::Other(v)),
            None => Ok(()),
        }
    }

    /// `f` in the LoadGen's namespace.
    fn in_lg<T>(&self, f: impl FnOnce() -> Result<T, LabError>) -> Result<T, LabError> {
        if self.lg_ns.is_empty() {
            f()
        } else {
            NetnsGuard::run(&self.lg_ns, f)?
        }
    }

    /// `ip` in the LoadGen's namespace.
    fn ip(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["ip"];
        all.extend_from_slice(args);
        crate::knobs::journal::ns_run(&self.lg_ns, &all)
    }

    /// Put `addr` on `port` unless it is there, journalled so gc takes it off again.
    fn address(&mut self, port: &str, (addr, len): (Ipv4Addr, u8)) -> Result<(), LabError> {
        let cidr = format!("{addr}/{len}");
        let shown = self
            .ip(&["-o", "-4", "addr", "show", "dev", port])
            .map_err(|e| LabError::Topology(format!("interface {port}: {e}")))?;
        if shown.split_whitespace().any(|w| w == cidr) {
            return Ok(());
        }
        self.journal.record(&Restore::Command {
            ns: self.lg_ns.clone(),
            argv: ["ip", "addr", "del", &cidr, "dev", port]
                .map(String::from)
                .to_vec(),
        })?;
        self.ip(&["addr", "add", &cidr, "dev", port])
            .map_err(|e| LabError::Topology(format!("cannot put {cidr} on {port}: {e}")))?;
        self.added_report.push(format!("{cidr} on {port}"));
        self.added.push((cidr, port.to_string()));
        Ok(())
    }

    /// The MAC of the box's address `gw`, asked by ARP from `port`.
    fn resolve_gateway(
        &self,
        key: &str,
        gw: Ipv4Addr,
        port: &str,
        own: Ipv4Addr,
    ) -> Result<MacAddr, LabError> {
        let deadline = Instant::now() + self.config.arp_timeout;
        // Asked on the port itself, with its own address as the sender: the LoadGen's
        // routes play no part (the box may sit in another subnet than the port, as a
        // route of its own reaches the port's).
        let answer = self.in_lg(|| {
            let mac = iface_mac(port)?;
            let mut sock = nflab_dataplane::sock::RawSocket::open(port, true, 4)
                .map_err(|e| LabError::Topology(format!("cannot ask ARP on {port}: {e}")))?;
            while Instant::now() < deadline {
                sock.tx_batch(1, &mut |_, buf| {
                    nflab_wire::arp::write_request(buf, mac, own, gw)
                })
                .and_then(|_| sock.flush_tx())
                .map_err(|e| LabError::Topology(format!("cannot ask ARP on {port}: {e}")))?;
                let asked = Instant::now();
                let mut found = None;
                while found.is_none() && asked.elapsed() < Duration::from_millis(100) {
                    sock.rx_batch(16, Duration::from_millis(10), &mut |f, _| {
                        if let Some((ip, m)) = nflab_wire::arp::reply_sender(f) {
                            if ip == gw {
                                found = Some(m);
                            }
                        }
                    })
                    .map_err(|e| LabError::Topology(format!("cannot hear ARP on {port}: {e}")))?;
                }
                if found.is_some() {
                    return Ok(found);
                }
            }
            Ok(None)
        })?;
        answer.ok_or_else(|| {
            LabError::Topology(format!(
                "the gateway {gw} did not answer ARP on {port} within {} s: is the box up, and is dut.external.{key} its address on that side?",
                self.config.arp_timeout.as_secs_f64()
            ))
        })
    }

    /// l2: RFC 2544 §23 learning frames from `rx` (the port that receives the probes),
    /// so a learning switch knows where its MAC lives.
    fn learn(&self, rx: &str) -> Result<(), LabError> {
        self.in_lg(|| Self::send_learning_frames(rx))
    }

    fn send_learning_frames(rx: &str) -> Result<(), LabError> {
        let mac = iface_mac(rx)?;
        let mut sock = nflab_dataplane::sock::RawSocket::open(rx, false, LEARNING_FRAMES)
            .map_err(|e| LabError::Topology(format!("cannot send learning frames on {rx}: {e}")))?;
        let sent = sock
            .tx_batch(LEARNING_FRAMES, &mut |_, buf| {
                buf[..60].fill(0);
                buf[0..6].copy_from_slice(&[0xff; 6]);
                buf[6..12].copy_from_slice(&mac.0);
                buf[12..14].copy_from_slice(&LEARNING_ETHERTYPE);
                60
            })
            .and_then(|n| sock.flush_tx().map(|()| n))
            .map_err(|e| LabError::Topology(format!("cannot send learning frames on {rx}: {e}")))?;
        if sent == 0 {
            return Err(LabError::Topology(format!(
                "{rx} took no learning frame: is it up?"
            )));
        }
        Ok(())
    }

    /// `teardown` and the addresses, once; what failed in a sentence.
    fn take_down(&mut self) -> Option<String> {
        if std::mem::replace(&mut self.torn_down, true) {
            return None;
        }
        let mut problems = Vec::new();
        if let Some(h) = self.config.teardown.clone() {
            if let Err(e) = self.hook(&h) {
                problems.push(e.to_string());
            }
        }
        for (cidr, port) in std::mem::take(&mut self.added).into_iter().rev() {
            if let Err(e) = self.ip(&["addr", "del", &cidr, "dev", &port]) {
                problems.push(format!("cannot take {cidr} off {port}: {e}"));
            }
        }
        // The run did what it could: a teardown that failed here would fail for gc too,
        // and an entry left would keep the journal (and a warning) for good.
        self.journal.finish();
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// Write `external.json` once.
    fn write_report(&mut self) -> Result<(), LabError> {
        if std::mem::replace(&mut self.reported, true) {
            return Ok(());
        }
        let path = self.dir.join("external.json");
        crate::artifacts::files::write_json(&path, &self.report(self.added_report.clone()))
    }

    fn report(&self, added: Vec<String>) -> ExternalReport<'_> {
        ExternalReport {
            kind: "external",
            mode: self.config.mode,
            netns: self
                .env
                .iter()
                .find(|(k, _)| *k == "NFLAB_DUT_NETNS")
                .map(|(_, v)| v.as_str()),
            ports: self
                .env
                .iter()
                .find(|(k, _)| *k == "NFLAB_INGRESS")
                .map(|_| (self.config.ports.0.as_str(), self.config.ports.1.as_str())),
            set_up_in_run: None,
            probe_dst_mac: self.probe_dst.map(|m| m.to_string()),
            reverse_probe_dst_mac: self.reverse_dst.map(|m| m.to_string()),
            addresses_added: added,
            hooks: self
                .hooks
                .iter()
                .map(|(name, run)| HookReport { name, run })
                .collect(),
        }
    }
}

impl RunningDut for RunningExternal {
    fn probe(&self, base: ProbeSpec) -> ProbeSpec {
        let (tx, rx) = (self.config.tx_address.0, self.config.rx_address.0);
        ProbeSpec {
            dst_mac: self.probe_dst.unwrap_or(base.dst_mac),
            src_ip: if self.config.mode == Mode::L3 {
                tx.into()
            } else {
                base.src_ip
            },
            dst_ip: if self.config.mode == Mode::L3 {
                rx.into()
            } else {
                base.dst_ip
            },
            ..base
        }
    }

    /// l3: from the recorder's port's address to the generator's, through the box's
    /// `reverse_gateway` (found by ARP now); l2: to the generator's port, learnt first.
    fn reverse_probe(&mut self, base: ProbeSpec) -> Result<ProbeSpec, LabError> {
        let (tx, rx) = self.ports.clone();
        let dst = match self.config.mode {
            Mode::L3 => self.resolve_gateway(
                "reverse_gateway",
                self.config.reverse_gateway,
                &rx,
                self.config.rx_address.0,
            )?,
            Mode::L2 => {
                self.learn(&tx)?;
                self.in_lg(|| iface_mac(&tx))?
            }
        };
        self.reverse_dst = Some(dst);
        let l3 = self.config.mode == Mode::L3;
        Ok(ProbeSpec {
            dst_mac: dst,
            src_ip: if l3 {
                self.config.rx_address.0.into()
            } else {
                base.src_ip
            },
            dst_ip: if l3 {
                self.config.tx_address.0.into()
            } else {
                base.dst_ip
            },
            ..base
        })
    }

    /// A later run of a kept topology: its `external.json` names the run that set the
    /// box up (where the hooks' record is, teardown included once the study ends).
    fn note_kept_run(&mut self, dir: &Path, started_in: usize) -> Result<Stopped, LabError> {
        let mut report = self.report(self.added_report.clone());
        // The run that set it up has the hooks so far; the drop adds the teardown.
        if dir != self.dir {
            report.set_up_in_run = Some(format!("{started_in:03}"));
            report.hooks.clear();
        }
        crate::artifacts::files::write_json(&dir.join("external.json"), &report)?;
        Ok(Stopped::default())
    }

    fn stop(mut self: Box<Self>, dir: &Path) -> Result<Stopped, LabError> {
        let added: Vec<String> = self
            .added
            .iter()
            .map(|(c, p)| format!("{c} on {p}"))
            .collect();
        let problem = self.take_down();
        crate::artifacts::files::write_json(&dir.join("external.json"), &self.report(added))?;
        match problem {
            Some(p) => Err(LabError::Other(p)),
            None => Ok(Stopped::default()),
        }
    }
}

impl Drop for RunningExternal {
    /// Any other way out of the run (an error, Ctrl-C) takes the box down too.
    fn drop(&mut self) {
        if let Some(p) = self.take_down() {
            eprintln!("warning: {p}");
        }
        if let Err(e) = self.write_report() {
            eprintln!("warning: {e}");
        }
    }
}
