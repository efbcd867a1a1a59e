//! Open vSwitch started by nflab itself: `ovsdb-server` and `ovs-vswitchd`
//! in a run directory of their own (`/run/nflab/ovs-<pid>-<n>/`: database,
//! unix sockets, pid files, logs), inside one of nflab's namespaces, with
//! bridges on the userspace datapath (`datapath_type=netdev`: no kernel
//! module needed).
//!
//! Nothing outlives the owner: both daemons run as children under
//! `setpriv --pdeathsig KILL` (the kernel kills them when the thread that
//! started them dies, `kill -9` of nflab included), and the run directory has
//! an owner file, so [`gc`] (called by `nflab topo gc`) kills what is left of
//! a dead owner and removes the directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nflab_io::process::system_tool;

use crate::error::SdnError;
use crate::netns::{owner_alive, owner_line, OWNER_DIR};

/// Prefix of OvS run directories in [`OWNER_DIR`].
pub const RUN_DIR_PREFIX: &str = "ovs-";
/// The database schema of the Debian package.
pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
const DAEMONS: [&str; 2] = ["ovs-vswitchd", "ovsdb-server"];

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// A running Open vSwitch; stopped (and its directory removed) on drop.
pub struct Ovs {
    dir: PathBuf,
    ns: Option<String>,
    children: Vec<Child>,
}

/// How a bridge is set up.
#[derive(Debug, Clone, Default)]
pub struct BridgeOptions {
    /// Controller target, e.g. `tcp:127.0.0.1:6653`; none: flows by `ovs-ofctl` only.
    pub controller: Option<String>,
    /// OpenFlow datapath id (16 hex digits); OvS picks one when absent.
    pub datapath_id: Option<u64>,
    /// OpenFlow version it speaks, e.g. "OpenFlow10" (default "OpenFlow13").
    pub protocols: Option<String>,
}

impl Ovs {
    /// Start `ovsdb-server` and `ovs-vswitchd` in namespace `ns` (or here).
    pub fn start(ns: Option<&str>) -> Result<Ovs, SdnError> {
        for bin in [
            "ovsdb-tool",
            "ovsdb-server",
            "ovs-vswitchd",
            "ovs-vsctl",
            "setpriv",
        ] {
            which(bin)?;
        }
        if !Path::new(SCHEMA).exists() {
            return Err(SdnError::Host(format!(
                "{SCHEMA} is missing: apt-get install openvswitch-switch"
            )));
        }
        let dir = PathBuf::from(OWNER_DIR).join(format!(
            "{RUN_DIR_PREFIX}{}-{}",
            std::process::id(),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        ));
        crate::netns::ensure_owner_dir()?;
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| SdnError::io(format!("cannot create {}", dir.display()), e))?;
        std::fs::write(dir.join("owner"), owner_line())
            .map_err(|e| SdnError::io("cannot write the OvS owner file", e))?;
        let mut ovs = Ovs {
            dir,
            ns: ns.map(str::to_string),
            children: Vec::new(),
        };
        let db = ovs.path("conf.db");
        let out = Command::new(system_tool("ovsdb-tool"))
            .args(["create", &db, SCHEMA])
            .output()
            .map_err(|e| SdnError::Host(format!("cannot run ovsdb-tool: {e}")))?;
        if !out.status.success() {
            return Err(SdnError::Ovs(format!(
                "ovsdb-tool create failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let remote = format!("--remote=punix:{}", ovs.path("db.sock"));
        ovs.spawn("ovsdb-server", &[&db, &remote])?;
        ovs.wait_for_socket("db.sock", "ovsdb-server")?;
        ovs.vsctl_no_wait(&["init"])?;
        let db_target = ovs.db_target();
        ovs.spawn("ovs-vswitchd", &[&db_target])?;
        ovs.wait_for_socket("ovs-vswitchd.ctl", "ovs-vswitchd")?;
        Ok(ovs)
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The namespace the daemons run in.
    pub fn namespace(&self) -> Option<&str> {
        self.ns.as_deref()
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn db_target(&self) -> String {
        format!("unix:{}", self.path("db.sock"))
    }

    fn spawn(&mut self, daemon: &str, args: &[&str]) -> Result<(), SdnError> {
        let mut cmd = match &self.ns {
            Some(ns) => {
                let mut c = Command::new(system_tool("ip"));
                c.args(["netns", "exec", ns]).arg(system_tool("setpriv"));
                c
            }
            None => Command::new(system_tool("setpriv")),
        };
        // setpriv would search PATH for a bare name.
        cmd.args(["--pdeathsig", "KILL"])
            .arg(system_tool(daemon))
            .args(args)
            .arg(format!("--pidfile={}", self.path(&format!("{daemon}.pid"))))
            .arg(format!("--unixctl={}", self.path(&format!("{daemon}.ctl"))))
            .arg(format!(
                "--log-file={}",
                self.path(&format!("{daemon}.log"))
            ))
            .arg("-vconsole:off")
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| SdnError::Host(format!("cannot start {daemon}: {e}")))?;
        self.children.push(child);
        Ok(())
    }

    /// Environment for the OvS tools: everything in the run directory.
    fn env(&self) -> Vec<(&'static str, String)> {
        let d = self.dir.display().to_string();
        vec![
            ("OVS_RUNDIR", d.clone()),
            ("OVS_LOGDIR", d.clone()),
            ("OVS_DBDIR", d),
        ]
    }

    fn wait_for_socket(&mut self, name: &str, daemon: &str) -> Result<(), SdnError> {
        let path = self.dir.join(name);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !path.exists() {
            let exited = self
                .children
                .last_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                return Err(SdnError::Ovs(format!(
                    "{daemon} did not start; its log ({}) ends: {}",
                    self.path(&format!("{daemon}.log")),
                    self.log_tail(daemon, 3)
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Last `n` lines of a daemon's log.
    pub fn log_tail(&self, daemon: &str, n: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("{daemon}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join(" | ")
    }

    fn vsctl_no_wait(&self, args: &[&str]) -> Result<String, SdnError> {
        let mut all = vec!["--no-wait"];
        all.extend_from_slice(args);
        self.vsctl(&all)
    }

    /// `ovs-vsctl` against this instance's database.
    pub fn vsctl(&self, args: &[&str]) -> Result<String, SdnError> {
        let db = format!("--db={}", self.db_target());
        let mut all = vec![db.as_str(), "--timeout=20"];
        all.extend_from_slice(args);
        self.tool("ovs-vsctl", &all)
    }

    /// `ovs-ofctl -O OpenFlow13` against a bridge of this instance.
    pub fn ofctl(&self, args: &[&str]) -> Result<String, SdnError> {
        self.ofctl_as("OpenFlow13", args)
    }

    /// `ovs-ofctl -O PROTOCOLS` (e.g. `OpenFlow10` for a bridge that speaks
    /// only 1.0) against a bridge of this instance.
    pub fn ofctl_as(&self, protocols: &str, args: &[&str]) -> Result<String, SdnError> {
        let mut all = vec!["-O", protocols];
        all.extend_from_slice(args);
        self.tool("ovs-ofctl", &all)
    }

    fn tool(&self, prog: &str, args: &[&str]) -> Result<String, SdnError> {
        let out = Command::new(system_tool(prog))
            .args(args)
            .envs(self.env())
            .output()
            .map_err(|e| {
                SdnError::Host(format!(
                    "cannot run {prog}: {e}; apt-get install openvswitch-switch"
                ))
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(SdnError::Ovs(format!(
                "'{prog} {}' failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Add a bridge on the userspace datapath, speaking OpenFlow 1.3, with
    /// no flows of its own when it has a controller (fail mode secure).
    pub fn add_bridge(&self, name: &str, opts: &BridgeOptions) -> Result<(), SdnError> {
        let mut args: Vec<String> = vec![
            "add-br".into(),
            name.into(),
            "--".into(),
            "set".into(),
            "bridge".into(),
            name.into(),
            "datapath_type=netdev".into(),
            format!(
                "protocols={}",
                opts.protocols.as_deref().unwrap_or("OpenFlow13")
            ),
            "fail_mode=secure".into(),
            // No hidden in-band flows in the tables the benchmark counts.
            "other-config:disable-in-band=true".into(),
        ];
        if let Some(id) = opts.datapath_id {
            args.push(format!("other-config:datapath-id={id:016x}"));
        }
        if let Some(target) = &opts.controller {
            args.extend(
                ["--", "set-controller", name, target]
                    .iter()
                    .map(|s| s.to_string()),
            );
            // Reconnect within a second (the default backs off to 8 s), and
            // no inactivity probes in the middle of a measurement.
            args.extend(
                [
                    "--",
                    "set",
                    "controller",
                    name,
                    "max_backoff=1000",
                    "inactivity_probe=0",
                ]
                .iter()
                .map(|s| s.to_string()),
            );
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.vsctl(&refs)?;
        Ok(())
    }

    /// Attach interface `iface` (in the daemons' namespace) as OpenFlow port `ofport`.
    pub fn add_port(&self, bridge: &str, iface: &str, ofport: u16) -> Result<(), SdnError> {
        self.add_port_of_type(bridge, iface, ofport, None)
    }

    /// [`Ovs::add_port`] with an OvS interface type: `None` is the default
    /// (`system`: a packet socket the main thread polls on the userspace
    /// datapath), `Some("afxdp")` an AF_XDP socket a PMD thread busy-polls
    /// (OvS loads its XDP program on the interface; copy mode on veth).
    pub fn add_port_of_type(
        &self,
        bridge: &str,
        iface: &str,
        ofport: u16,
        kind: Option<&str>,
    ) -> Result<(), SdnError> {
        let req = format!("ofport_request={ofport}");
        let mut args = vec![
            "add-port",
            bridge,
            iface,
            "--",
            "set",
            "interface",
            iface,
            &req,
        ];
        let ty = kind.map(|k| format!("type={k}"));
        args.extend(ty.as_deref());
        self.vsctl(&args)?;
        // add-port succeeds even when the datapath cannot open the port (an
        // AF_XDP socket the kernel refuses): the interface's error says so.
        let error = self.vsctl(&["get", "interface", iface, "error"])?;
        let error = error.trim().trim_matches('"');
        if !error.is_empty() && error != "[]" {
            return Err(SdnError::Ovs(format!("port {iface}: {error}")));
        }
        Ok(())
    }

    /// Cable `bridge` to another bridge of this instance by a patch port
    /// `name` (OpenFlow port `ofport`) whose peer is the patch port `peer`.
    pub fn add_patch(
        &self,
        bridge: &str,
        name: &str,
        peer: &str,
        ofport: u16,
    ) -> Result<(), SdnError> {
        let req = format!("ofport_request={ofport}");
        let opt = format!("options:peer={peer}");
        self.vsctl(&[
            "add-port",
            bridge,
            name,
            "--",
            "set",
            "interface",
            name,
            "type=patch",
            &opt,
            &req,
        ])?;
        Ok(())
    }

    /// Flows of a bridge as `ovs-ofctl dump-flows` prints them (one per line,
    /// header removed).
    pub fn dump_flows(&self, bridge: &str) -> Result<Vec<String>, SdnError> {
        let out = self.ofctl(&["--no-stats", "dump-flows", bridge])?;
        Ok(out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("OFPST_FLOW"))
            .map(str::to_string)
            .collect())
    }

    /// The userspace datapath's ports, `(port number, name)` in port-number
    /// order (`ovs-appctl dpctl/show`), including its own tap ports.
    pub fn datapath_ports(&self) -> Result<Vec<(u32, String)>, SdnError> {
        let ctl = self.path("ovs-vswitchd.ctl");
        let out = self.tool("ovs-appctl", &["-t", &ctl, "dpctl/show"])?;
        Ok(parse_dpctl_ports(&out))
    }

    /// Pids of the running daemons, from their pid files.
    pub fn pids(&self) -> Vec<u32> {
        DAEMONS
            .iter()
            .filter_map(|d| read_pid(&self.dir.join(format!("{d}.pid"))))
            .collect()
    }

    /// Run every thread of ovs-vswitchd under SCHED_FIFO at `priority`
    /// (`chrt`), so a busy host does not hold frames up while the main
    /// thread, which forwards for the userspace datapath's non-PMD ports,
    /// waits to be scheduled. The threads it starts later inherit the policy.
    pub fn vswitchd_realtime(&self, priority: u8) -> Result<(), SdnError> {
        self.on_every_vswitchd_thread("chrt", &["-f", "-a", "-p", &priority.to_string()])
    }

    /// Pin every thread of ovs-vswitchd to `cpu` (`taskset -a`); threads it
    /// starts later (PMD, handlers) inherit the mask.
    pub fn vswitchd_affinity(&self, cpu: usize) -> Result<(), SdnError> {
        self.on_every_vswitchd_thread("taskset", &["-a", "-p", "-c", &cpu.to_string()])
    }

    /// Run `tool OPTIONS PID` on ovs-vswitchd's pid (the `-a` of chrt and
    /// taskset reaches every thread).
    fn on_every_vswitchd_thread(&self, tool: &str, options: &[&str]) -> Result<(), SdnError> {
        let pid = read_pid(&self.dir.join("ovs-vswitchd.pid"))
            .ok_or_else(|| SdnError::Ovs("ovs-vswitchd has no pid file".into()))?
            .to_string();
        let mut args = options.to_vec();
        args.push(&pid);
        crate::netns::run(tool, &args)?;
        Ok(())
    }

    /// Stop both daemons (ovs-vswitchd first) and remove the run directory.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // Children were pushed ovsdb-server first: stop the switch first.
        while let Some(mut child) = self.children.pop() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + Duration::from_secs(3);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        // NFLAB_KEEP_OVS_LOGS=1 keeps the run directory (logs, database) to look at.
        if std::env::var_os("NFLAB_KEEP_OVS_LOGS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// `bin` is installed in the system's directories (never looked up on PATH).
fn which(bin: &str) -> Result<(), SdnError> {
    if nflab_io::process::find_system_tool(bin).is_some() {
        Ok(())
    } else {
        let pkg = if bin == "setpriv" {
            "util-linux"
        } else {
            "openvswitch-switch"
        };
        Err(SdnError::Host(format!(
            "{bin} is not installed: apt-get install {pkg}"
        )))
    }
}

/// `port N: NAME` lines of `dpctl/show` (a tap port's name is followed by
/// its type in parentheses).
fn parse_dpctl_ports(out: &str) -> Vec<(u32, String)> {
    out.lines()
        .filter_map(|l| {
            let (no, rest) = l.trim().strip_prefix("port ")?.split_once(": ")?;
            let name = rest.split_whitespace().next()?;
            Some((no.parse().ok()?, name.to_string()))
        })
        .collect()
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Whether `pid` is one of the OvS daemons (a recycled pid is left alone).
fn is_ovs_daemon(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| !c.trim().is_empty() && DAEMONS.iter().any(|d| d.starts_with(c.trim())))
}

/// OvS run directories whose owner is gone: kill their daemons, remove them.
/// Returns the directories removed.
pub fn gc() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(OWNER_DIR) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(RUN_DIR_PREFIX) || !entry.path().is_dir() {
            continue;
        }
        let owner = std::fs::read_to_string(entry.path().join("owner")).unwrap_or_default();
        if owner_alive(&owner) {
            continue;
        }
        for d in DAEMONS {
            if let Some(pid) = read_pid(&entry.path().join(format!("{d}.pid"))) {
                if is_ovs_daemon(pid) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
        let _ = std::fs::remove_dir_all(entry.path());
        removed.push(entry.path().display().to_string());
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::parse_dpctl_ports;

    #[test]
    fn datapath_ports_are_read_from_dpctl_show() {
        let out = "netdev@ovs-netdev:\n  lookups: hit:40001 missed:17 lost:0\n  flows: 17\n  port 0: ovs-netdev (tap)\n  port 1: br0 (tap)\n  port 2: dut0\n  port 35: h15b\n";
        assert_eq!(
            parse_dpctl_ports(out),
            vec![
                (0, "ovs-netdev".to_string()),
                (1, "br0".to_string()),
                (2, "dut0".to_string()),
                (35, "h15b".to_string())
            ]
        );
    }
}
