//! DuT kind `testpmd`: DPDK's `dpdk-testpmd` (Debian package `dpdk-dev`)
//! forwarding between dut0 and dut1 inside the DuT namespace, as the
//! reference the nflab data plane is compared with.
//!
//! The two ports are `net_af_xdp` vdevs (default) or `net_af_packet` vdevs;
//! EAL runs without huge pages (`--no-huge`) and PCI. One forwarding lcore
//! is pinned to `dut.cpu` (default: the last CPU, the nflab worker's
//! default), the idle main lcore to another CPU. testpmd runs
//! non-interactively: it forwards until its stdin closes, then prints
//! its forward statistics (with `--record-core-cycles`, busy cycles per
//! packet) and exits. Those figures are what [`TestpmdDut::stop`] returns
//! and the runner stores as `dut.json`, with testpmd's output as
//! `testpmd.log`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::dut::{write_dut_json, DutDriver, RunningDut, Stopped};
use crate::error::LabError;
use crate::spec::{DutKind, DutSection};
use crate::topo::Plumbing;
use crate::topo::{Topology, LG0_MAC, LG1_MAC};

/// Name of the binary in the system's directories.
pub const BINARY: &str = "dpdk-testpmd";
/// Environment variable naming another testpmd binary (a DPDK build of one's own).
pub const BINARY_ENV: &str = "NFLAB_TESTPMD";
/// The interfaces testpmd's ports 0 and 1 sit on.
pub const IFACES: [&str; 2] = ["dut0", "dut1"];
/// Packet buffers: testpmd's default (~155k × 2 KiB) does not fit `-m 512`.
const MBUFS: u32 = 16384;
/// How long EAL set-up and the first burst may take on a loaded host.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long testpmd may take to print its statistics and exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// testpmd prints this once forwarding has started (non-interactive mode).
const READY_LINE: &str = "Press enter to exit";

/// The testpmd binary: `$NFLAB_TESTPMD`, else `dpdk-testpmd` in the system's
/// directories (`nflab_io::process::SYSTEM_DIRS`), never one found on `PATH`.
pub fn find_binary() -> Result<PathBuf, LabError> {
    find_binary_in(
        std::env::var_os(BINARY_ENV),
        nflab_io::process::system_path().into(),
    )
}

/// [`find_binary`] with `$NFLAB_TESTPMD` and the directories to search given
/// (a `PATH`-like list; testable).
pub fn find_binary_in(
    env: Option<std::ffi::OsString>,
    path: std::ffi::OsString,
) -> Result<PathBuf, LabError> {
    let executable = |p: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if let Some(p) = env.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if executable(&p) {
            Ok(p)
        } else {
            Err(LabError::Host(format!(
                "{BINARY_ENV} = {} is not an executable file: point it at a dpdk-testpmd binary or unset it",
                p.display()
            )))
        };
    }
    std::env::split_paths(&path)
        .map(|d| d.join(BINARY))
        .find(|p| executable(p))
        .ok_or_else(|| {
            LabError::Host(format!(
                "dut.kind = \"testpmd\" needs {BINARY}, which is not installed: install Debian's dpdk-dev package (apt-get install dpdk-dev)"
            ))
        })
}

/// testpmd's settings from a `[dut]` section, with their defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestpmdSettings {
    /// CPU of the forwarding lcore.
    pub cpu: usize,
    /// CPU of the (idle) main lcore.
    pub main_cpu: usize,
    /// `af_xdp` or `af_packet`.
    pub io: String,
    /// `io` (frames unchanged) or `mac` (MACs rewritten towards the LoadGen).
    pub forward_mode: String,
    /// Packets per burst.
    pub burst: u32,
}

impl TestpmdSettings {
    /// Resolve `dut` on a host with `cpus` CPUs (the spec was checked before).
    pub fn from_dut(dut: &DutSection, cpus: usize) -> TestpmdSettings {
        let cpu = dut.cpu.unwrap_or(cpus - 1);
        TestpmdSettings {
            cpu,
            // The main lcore only waits on stdin; keep it off the forwarding core.
            main_cpu: if cpus > 1 { (cpu + 1) % cpus } else { cpu },
            io: match dut.io.as_deref() {
                None | Some("auto") => "af_xdp".into(),
                Some(o) => o.into(),
            },
            forward_mode: dut.forward_mode.clone().unwrap_or_else(|| "io".into()),
            burst: dut.batch.unwrap_or(32),
        }
    }

    /// testpmd's command line after the binary: EAL options, `--`, application options.
    pub fn args(&self, file_prefix: &str) -> Vec<String> {
        let mut a: Vec<String> = [
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--no-telemetry",
            "--file-prefix",
            file_prefix,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (i, iface) in IFACES.iter().enumerate() {
            a.push("--vdev".into());
            a.push(match self.io.as_str() {
                "af_packet" => format!("net_af_packet{i},iface={iface},qpairs=1"),
                _ => format!("net_af_xdp{i},iface={iface},start_queue=0,queue_count=1"),
            });
        }
        a.push("--lcores".into());
        a.push(format!("0@{},1@{}", self.main_cpu, self.cpu));
        a.push("--".into());
        a.extend([
            format!("--forward-mode={}", self.forward_mode),
            "--nb-cores=1".into(),
            format!("--burst={}", self.burst),
            format!("--total-num-mbufs={MBUFS}"),
            "--record-core-cycles".into(),
        ]);
        if self.forward_mode == "mac" {
            // Port 0 faces lg0, port 1 faces lg1.
            a.push(format!("--eth-peer=0,{LG0_MAC}"));
            a.push(format!("--eth-peer=1,{LG1_MAC}"));
        }
        a
    }
}

/// One port's forward statistics (testpmd's "Forward statistics for port N").
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PortStats {
    /// testpmd's port id.
    pub port: u16,
    /// Interface of the vdev.
    pub iface: String,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets the port dropped on receive (`imissed`; for AF_XDP the socket's full ring).
    pub rx_dropped: u64,
    /// Received + dropped.
    pub rx_total: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets the transmit burst did not take (freed).
    pub tx_dropped: u64,
    /// Sent + dropped.
    pub tx_total: u64,
    /// Receives that found no free buffer.
    pub rx_nombufs: u64,
}

/// Busy cycles of the forwarding lcore (`--record-core-cycles`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CycleStats {
    /// Busy cycles / packets received: testpmd counts TSC cycles of bursts that
    /// received something, as the nflab worker's `cycles_busy` counts breaths that
    /// moved packets.
    pub cycles_per_packet: Option<f64>,
    /// TSC cycles of the bursts that received packets.
    pub cycles_busy: Option<u64>,
    /// Packets the cycles are divided by.
    pub packets: Option<u64>,
    /// TSC frequency testpmd measured.
    pub tsc_mhz: Option<u64>,
}

/// `dut.json` of a testpmd run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestpmdStats {
    /// Always "testpmd".
    pub kind: String,
    /// The command that ran.
    pub command: Vec<String>,
    /// Its settings.
    pub settings: TestpmdSettings,
    /// Per port.
    pub ports: Vec<PortStats>,
    /// All ports ("Accumulated forward statistics").
    pub total: Option<PortStats>,
    /// Cycles, under the key the nflab DuT uses for its own.
    pub worker: CycleStats,
    /// Why the figures are missing or incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Parse testpmd's forward statistics from its output.
pub fn parse_stats(text: &str) -> (Vec<PortStats>, Option<PortStats>, CycleStats) {
    let mut ports: Vec<PortStats> = Vec::new();
    let mut total: Option<PortStats> = None;
    let mut cycles = CycleStats::default();
    // Which block the counter lines belong to: a port, or the accumulated one.
    enum At {
        None,
        Port,
        Total,
    }
    let mut at = At::None;
    for line in text.lines() {
        if let Some(rest) = line.split("Forward statistics for port ").nth(1) {
            let port: u16 = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(ports.len() as u16);
            ports.push(PortStats {
                port,
                iface: IFACES.get(port as usize).unwrap_or(&"").to_string(),
                ..PortStats::default()
            });
            at = At::Port;
            continue;
        }
        if line.contains("Accumulated forward statistics") {
            total = Some(PortStats {
                port: u16::MAX,
                iface: "all".into(),
                ..PortStats::default()
            });
            at = At::Total;
            continue;
        }
        if let Some(rest) = line.split("CPU cycles/packet=").nth(1) {
            cycles.cycles_per_packet = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            cycles.cycles_busy = number_after(rest, "total cycles=");
            cycles.packets = number_after(rest, "packets=");
            cycles.tsc_mhz = rest
                .split(" at ")
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|v| v.parse().ok());
            continue;
        }
        let target = match at {
            At::Port => ports.last_mut(),
            At::Total => total.as_mut(),
            At::None => None,
        };
        let Some(p) = target else { continue };
        // "  RX-packets: 417544   RX-dropped: 69529   RX-total: 487073"
        let toks: Vec<&str> = line.split_whitespace().collect();
        for w in toks.windows(2) {
            let Ok(v) = w[1].parse::<u64>() else { continue };
            match w[0] {
                "RX-packets:" => p.rx_packets = v,
                "RX-dropped:" => p.rx_dropped = v,
                "RX-total:" => p.rx_total = v,
                "TX-packets:" => p.tx_packets = v,
                "TX-dropped:" => p.tx_dropped = v,
                "TX-total:" => p.tx_total = v,
                "RX-nombufs:" | "RX-nombuf:" => p.rx_nombufs = v,
                _ => {}
            }
        }
    }
    (ports, total, cycles)
}

fn number_after(s: &str, key: &str) -> Option<u64> {
    s.split(key)
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// A running testpmd.
pub struct TestpmdDut {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
    command: Vec<String>,
    settings: TestpmdSettings,
    file_prefix: String,
}

/// Start testpmd in the DuT namespace of `topo`; returns once it forwards,
/// or with the reason why not (its last lines of output).
pub fn start(topo: &Topology, dut: &DutSection) -> Result<TestpmdDut, LabError> {
    let ns = crate::dut::dut_namespace(topo, "testpmd")?;
    let bin = find_binary()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let settings = TestpmdSettings::from_dut(dut, cpus);
    // EAL keeps its run-time files under /var/run/dpdk/<prefix>: one per topology.
    let file_prefix = format!("nflab-{}", topo.id);
    let (ip, stdbuf) = (
        nflab_io::process::system_tool("ip"),
        nflab_io::process::system_tool("stdbuf"),
    );
    let mut command: Vec<String> = [
        &ip.to_string_lossy(),
        "netns",
        "exec",
        &ns,
        &stdbuf.to_string_lossy(),
        "-oL",
        "-eL",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // stdbuf: testpmd's stdout is a pipe here; line buffering lets us see
    // "Press enter to exit" when it is printed, not at exit.
    command.push(bin.display().to_string());
    command.extend(settings.args(&file_prefix));
    let (reader_end, writer_end) = std::io::pipe()
        .map_err(|e| LabError::Host(format!("cannot make a pipe for {BINARY}: {e}")))?;
    let writer2 = writer_end
        .try_clone()
        .map_err(|e| LabError::Host(format!("cannot make a pipe for {BINARY}: {e}")))?;
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(writer_end)
        .stderr(writer2);
    let mut child = cmd
        .spawn()
        .map_err(|e| LabError::Host(format!("cannot run {}: {e}", command.join(" "))))?;
    // The write ends now live only in the child: EOF when it exits.
    drop(cmd);
    let log = Arc::new(Mutex::new(String::new()));
    let log2 = Arc::clone(&log);
    let reader = std::thread::Builder::new()
        .name("testpmd-out".into())
        .spawn(move || {
            for line in BufReader::new(reader_end).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut l) = log2.lock() {
                    l.push_str(&line);
                    l.push('\n');
                }
            }
        })
        .map_err(|e| LabError::Host(format!("cannot start a thread: {e}")))?;
    let stdin = child.stdin.take();
    let mut t = TestpmdDut {
        child: Some(child),
        stdin,
        log,
        reader: Some(reader),
        command,
        settings,
        file_prefix,
    };
    let t0 = Instant::now();
    loop {
        if t.log_text().contains(READY_LINE) {
            return Ok(t);
        }
        let exited = t
            .child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_some());
        if exited || t0.elapsed() > START_TIMEOUT {
            // Let the reader take the last lines before quoting them.
            t.finish_process();
            let why = if exited {
                "exited"
            } else {
                "did not start forwarding within 30 s"
            };
            return Err(LabError::Other(format!(
                "{BINARY} {why}; its last lines: {}",
                last_lines(&t.log_text(), 4)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last `n` non-empty lines of `text`, joined with " | ".
fn last_lines(text: &str, n: usize) -> String {
    let v: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if v.is_empty() {
        return "(it printed nothing)".into();
    }
    v[v.len().saturating_sub(n)..].join(" | ")
}

impl TestpmdDut {
    fn log_text(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Ask testpmd to stop (EOF on stdin), then SIGINT, then SIGKILL;
    /// wait for it and its output; remove EAL's run-time files.
    fn finish_process(&mut self) -> bool {
        let mut clean = false;
        // EOF on stdin ends testpmd like a newline does; writing instead could
        // raise SIGPIPE (the CLI does not ignore it) when testpmd has died.
        drop(self.stdin.take());
        if let Some(mut c) = self.child.take() {
            let wait = |c: &mut Child, d: Duration| {
                let t0 = Instant::now();
                while t0.elapsed() < d {
                    if let Ok(Some(_)) = c.try_wait() {
                        return true;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                false
            };
            clean = wait(&mut c, STOP_TIMEOUT);
            if !clean {
                let pid = nix::unistd::Pid::from_raw(c.id() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
                if !wait(&mut c, Duration::from_secs(5)) {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let _ = std::fs::remove_dir_all(PathBuf::from("/var/run/dpdk").join(&self.file_prefix));
        clean
    }

    /// Stop testpmd; its figures and its whole output. `error` says why
    /// figures are missing (testpmd died or printed none).
    pub fn stop(mut self) -> (TestpmdStats, String) {
        let died = self
            .child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_some());
        let clean = self.finish_process();
        let log = self.log_text();
        let (ports, total, worker) = parse_stats(&log);
        let error = if died {
            Some(format!(
                "{BINARY} exited during the run; its last lines: {}",
                last_lines(&log, 4)
            ))
        } else if total.is_none() {
            Some(format!(
                "{BINARY} printed no forward statistics{}; its last lines: {}",
                if clean { "" } else { " and had to be killed" },
                last_lines(&log, 4)
            ))
        } else {
            None
        };
        (
            TestpmdStats {
                kind: "testpmd".into(),
                command: self.command.clone(),
                settings: self.settings.clone(),
                ports,
                total,
                worker,
                error,
            },
            log,
        )
    }
}

impl Drop for TestpmdDut {
    /// A run that ends early still stops testpmd before its namespace goes.
    fn drop(&mut self) {
        if self.child.is_some() {
            self.finish_process();
        }
    }
}

/// `testpmd`: DPDK's dpdk-testpmd between two vdevs.
pub struct TestpmdDriver;

impl Plumbing for TestpmdDriver {
    fn plumb(&self, ns: &str) -> Result<(), LabError> {
        crate::dut::kernel_forwarding_off(ns)
    }
}

impl DutSection {
    /// Check a testpmd DuT section: its keys and their ranges.
    pub fn check_testpmd(&self) -> Result<(), LabError> {
        let bad = |m: String| Err(LabError::Unsupported(m));
        for (key, set) in [
            ("pipeline", self.pipeline.is_some()),
            ("rx_mode", self.rx_mode.is_some()),
            ("drain_us", self.drain_us.is_some()),
            ("wake_early_us", self.wake_early_us.is_some()),
            ("link_capacity", self.link_capacity.is_some()),
            ("workers", self.workers.is_some()),
            ("command", self.command.is_some()),
        ] {
            if set {
                return bad(format!(
                    "dut.{key} does not apply to dut.kind = \"testpmd\": it takes cpu, io, batch and forward_mode"
                ));
            }
        }
        if let Some(b) = self.batch {
            // testpmd's MAX_PKT_BURST.
            if !(1..=512).contains(&b) {
                return bad(format!(
                    "dut.batch = {b} is out of range for testpmd: use 1 to 512"
                ));
            }
        }
        self.dut_cpu()?;
        self.check_io("use af_xdp (default) or af_packet")?;
        match self.forward_mode.as_deref() {
            None | Some("io") | Some("mac") => Ok(()),
            Some(m) => bad(format!(
                "dut.forward_mode = \"{m}\" is not known: use io (default) or mac"
            )),
        }
    }
}

impl DutDriver for TestpmdDriver {
    fn kind(&self) -> DutKind {
        DutKind::Testpmd
    }

    fn check(&self, spec: &crate::spec::Spec) -> Result<(), LabError> {
        spec.dut.check_testpmd()?;
        // Before any namespace exists: one sentence naming the package.
        find_binary().map(drop)
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        Some("testpmd's forwarding lcore busy-polls all the time, so SCHED_FIFO would only starve the other threads of its CPU")
    }

    fn carries_ipv6_and_vlan(&self) -> bool {
        true
    }

    /// testpmd forwards its two ports to each other, both ways.
    fn reverse_path(&self, _: &DutSection) -> Result<nflab_wire::MacAddr, &'static str> {
        Ok(LG0_MAC)
    }

    fn start(
        &self,
        topo: &Topology,
        dut: &DutSection,
        _seed: u64,
        _dir: &std::path::Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        Ok(Box::new(start(topo, dut)?))
    }
}

impl RunningDut for TestpmdDut {
    /// `testpmd.log` (its whole output) beside `dut.json`.
    fn stop(self: Box<Self>, dir: &Path) -> Result<Stopped, LabError> {
        let (stats, log) = TestpmdDut::stop(*self);
        crate::artifacts::files::write_file(&dir.join("testpmd.log"), log.as_bytes())?;
        let error = stats.error.clone();
        write_dut_json(dir, &stats, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output of Debian's dpdk-testpmd 22.11 after a run (shortened).
    const OUTPUT: &str = "\
Press enter to exit
Telling cores to stop...
Waiting for lcores to finish...

  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 417544         RX-dropped: 69529         RX-total: 487073
  TX-packets: 0              TX-dropped: 0             TX-total: 0
  ----------------------------------------------------------------------------

  ---------------------- Forward statistics for port 1  ----------------------
  RX-packets: 0              RX-dropped: 0             RX-total: 0
  TX-packets: 417544         TX-dropped: 0             TX-total: 417544
  ----------------------------------------------------------------------------

  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 417544         RX-dropped: 69529         RX-total: 487073
  TX-packets: 417544         TX-dropped: 0             TX-total: 417544
  RX-nombufs: 3
  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++

  CPU cycles/packet=8039.55 (total cycles=3356864732 / total io packets=417544) at 2600 MHz Clock

Done.
";

    #[test]
    fn parses_forward_statistics_and_cycles() {
        let (ports, total, c) = parse_stats(OUTPUT);
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].iface, "dut0");
        assert_eq!(
            (ports[0].rx_packets, ports[0].rx_dropped, ports[0].rx_total),
            (417544, 69529, 487073)
        );
        assert_eq!((ports[1].tx_packets, ports[1].tx_total), (417544, 417544));
        let t = total.expect("total");
        assert_eq!(
            (t.rx_packets, t.tx_packets, t.rx_nombufs),
            (417544, 417544, 3)
        );
        assert_eq!(c.cycles_per_packet, Some(8039.55));
        assert_eq!(c.cycles_busy, Some(3356864732));
        assert_eq!(c.packets, Some(417544));
        assert_eq!(c.tsc_mhz, Some(2600));
        // Nothing printed: nothing made up.
        let (p, t, c) = parse_stats("EAL: Error - exiting with code: 1\n");
        assert!(p.is_empty() && t.is_none() && c.cycles_per_packet.is_none());
    }

    #[test]
    fn command_pins_the_forwarding_lcore_and_picks_the_vdevs() {
        let dut = DutSection {
            kind: crate::spec::DutKind::Testpmd,
            ..DutSection::default()
        };
        let s = TestpmdSettings::from_dut(&dut, 2);
        assert_eq!(
            (s.cpu, s.main_cpu, s.io.as_str(), s.burst),
            (1, 0, "af_xdp", 32)
        );
        let a = s.args("nflab-1-0").join(" ");
        assert!(a.contains("--lcores 0@0,1@1"), "{a}");
        assert!(a.contains("net_af_xdp0,iface=dut0"), "{a}");
        assert!(a.contains("net_af_xdp1,iface=dut1"), "{a}");
        assert!(a.contains("--forward-mode=io"), "{a}");
        assert!(a.contains("--record-core-cycles"), "{a}");
        assert!(!a.contains("--eth-peer"), "{a}");
        let dut = DutSection {
            cpu: Some(0),
            io: Some("af_packet".into()),
            forward_mode: Some("mac".into()),
            batch: Some(64),
            ..dut
        };
        let a = TestpmdSettings::from_dut(&dut, 2).args("p").join(" ");
        assert!(a.contains("--lcores 0@1,1@0"), "{a}");
        assert!(a.contains("net_af_packet1,iface=dut1,qpairs=1"), "{a}");
        assert!(a.contains("--burst=64"), "{a}");
        assert!(a.contains(&format!("--eth-peer=1,{LG1_MAC}")), "{a}");
    }

    #[test]
    fn spec_keys_of_other_kinds_and_bad_values_are_one_sentence() {
        let base = DutSection {
            kind: crate::spec::DutKind::Testpmd,
            ..DutSection::default()
        };
        base.check_testpmd().expect("defaults");
        for (dut, want) in [
            (
                DutSection {
                    pipeline: Some(vec!["l2fwd".into()]),
                    ..base.clone()
                },
                "dut.pipeline does not apply",
            ),
            (
                DutSection {
                    io: Some("dpdk".into()),
                    ..base.clone()
                },
                "use af_xdp (default) or af_packet",
            ),
            (
                DutSection {
                    forward_mode: Some("macswap".into()),
                    ..base.clone()
                },
                "use io (default) or mac",
            ),
            (
                DutSection {
                    batch: Some(1000),
                    ..base.clone()
                },
                "use 1 to 512",
            ),
            (
                DutSection {
                    cpu: Some(4096),
                    ..base.clone()
                },
                "does not exist on this host",
            ),
            (
                DutSection {
                    workers: Some(2),
                    ..base.clone()
                },
                "dut.workers does not apply",
            ),
        ] {
            let e = dut.check_testpmd().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_missing_binary_names_the_package() {
        let e = find_binary_in(None, "/nonexistent:/also-not".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("dpdk-dev"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = find_binary_in(Some("/nonexistent/testpmd".into()), "".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains(BINARY_ENV), "{e}");
        // A directory on PATH that has it.
        let dir = std::env::temp_dir().join(format!("nflab-testpmd-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let bin = dir.join(BINARY);
        std::fs::write(&bin, "#!/bin/sh\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let found = find_binary_in(None, format!("/nonexistent:{}", dir.display()).into());
        assert_eq!(found.expect("found"), bin);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
