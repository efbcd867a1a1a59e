//! Provenance of a run (`env.json`): what the host was when it ran.
//!
//! Each value is read from the kernel's own files; a value that cannot be
//! read is recorded as "unavailable" rather than guessed.

use std::process::Command;

use serde::Serialize;

/// Host facts that can change a latency figure.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// nflab's version.
    pub nflab_version: String,
    /// git commit nflab was built from.
    pub nflab_commit: String,
    /// UTC time the experiment started (RFC 3339).
    pub started_utc: String,
    /// Host name.
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// `/proc/cmdline`.
    pub kernel_cmdline: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// cpufreq governor of each CPU ("unavailable" in many VMs).
    pub cpu_governor: Vec<String>,
    /// SMT control state.
    pub smt: String,
    /// Virtualization as seen by the kernel (hypervisor flag).
    pub hypervisor: bool,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// Clock used for timestamps and its resolution.
    pub clock_source: String,
    /// Kernel clocksource (tsc, kvm-clock, ...).
    pub kernel_clocksource: String,
    /// `clock_getres(CLOCK_REALTIME)` in ns.
    pub clock_resolution_ns: u64,
    /// Versions of the external tools used.
    pub tools: std::collections::BTreeMap<String, String>,
    /// The command line that ran the experiment.
    pub command_line: Vec<String>,
    /// Clock and sync state of each host of a hosts topology, by role.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub hosts: std::collections::BTreeMap<String, serde_json::Value>,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unavailable".into())
}

/// The output of the system tool `prog` (never one found on PATH).
fn command_output(prog: &str, args: &[&str]) -> String {
    Command::new(nflab_io::process::system_tool(prog))
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unavailable".into())
}

impl Environment {
    /// Capture the environment now.
    pub fn capture(version: &str, commit: &str) -> Environment {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| "unavailable".into());
        let hypervisor = cpuinfo
            .lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu_governor = (0..cpus)
            .map(|c| {
                read(&format!(
                    "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
                ))
            })
            .collect();
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        let mut tools = std::collections::BTreeMap::new();
        tools.insert("iproute2".into(), command_output("ip", &["-V"]));
        Environment {
            nflab_version: version.into(),
            nflab_commit: commit.into(),
            started_utc: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            kernel_cmdline: read("/proc/cmdline"),
            cpu_model,
            cpus,
            cpu_governor,
            smt: read("/sys/devices/system/cpu/smt/control"),
            hypervisor,
            memory_bytes,
            clock_source: "CLOCK_REALTIME".into(),
            kernel_clocksource: read(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ),
            clock_resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
            tools,
            command_line: std::env::args().collect(),
            hosts: Default::default(),
        }
    }

    /// One line naming the machine, for benchmark and doctor output.
    pub fn machine_line(&self) -> String {
        format!(
            "{} · {} CPUs · {} GiB · kernel {} · clocksource {}{}",
            self.cpu_model,
            self.cpus,
            self.memory_bytes / (1 << 30),
            self.kernel,
            self.kernel_clocksource,
            if self.hypervisor {
                " · virtual machine"
            } else {
                ""
            }
        )
    }
}
