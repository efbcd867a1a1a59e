//! `[knobs]` and `[knobs.iface]` of the spec: what a run changes on the host and on
//! the topology's interfaces, checked without touching either. Applying them is
//! the `knobs` module's job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `[knobs]` of the spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KnobsSection {
    /// Host sysctls by dotted name (`net.core.busy_poll`), set for the run.
    #[serde(default)]
    pub sysctl: BTreeMap<String, toml::Value>,
    /// cpufreq governor for every CPU (`performance`, `powersave`, ...).
    #[serde(default)]
    pub cpu_governor: Option<String>,
    /// Knob names (sysctl names, "cpu_governor", or interface knob names
    /// like "dut:dut0.offloads.gro") that must apply, or the run stops.
    #[serde(default)]
    pub required: Vec<String>,
    /// IRQ affinity: IRQs whose /proc/interrupts name contains the key get
    /// this CPU list (`smp_affinity_list`, e.g. "1" or "0-1").
    #[serde(default)]
    pub irq_affinity: BTreeMap<String, String>,
    /// Hold a PM QoS CPU latency request (µs) for the run: keeps CPUs out of
    /// deep C-states (`/dev/cpu_dma_latency`).
    #[serde(default)]
    pub pm_qos_latency_us: Option<u32>,
    /// Scheduling policy of generator and recorder threads ("fifo:50", "rr:10", "other").
    #[serde(default)]
    pub sched: Option<String>,
    /// Background CPU load during the run, to measure under interference.
    #[serde(default)]
    pub background_load: Option<BackgroundLoad>,
    /// Interface knobs by "<lg|dut>:<interface>" (see `iface_knobs`).
    #[serde(default)]
    pub iface: BTreeMap<String, IfaceKnob>,
}

impl KnobsSection {
    /// True when the section sets nothing.
    pub fn is_empty(&self) -> bool {
        self.sysctl.is_empty()
            && self.cpu_governor.is_none()
            && self.iface.is_empty()
            && self.irq_affinity.is_empty()
            && self.pm_qos_latency_us.is_none()
            && self.sched.is_none()
            && self.background_load.is_none()
    }

    /// Check names and values without touching the host.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in &self.sysctl {
            if name.is_empty() || name.contains("..") || name.contains('/') || name.starts_with('.')
            {
                return Err(format!(
                    "knobs.sysctl: \"{name}\" is not a sysctl name: use the dotted form, e.g. net.core.busy_poll"
                ));
            }
            if value_text(v).is_none() {
                return Err(format!(
                    "knobs.sysctl.{name} = {v} is not valid: use a number or a string"
                ));
            }
        }
        validate_iface(&self.iface)?;
        if let Some(s) = &self.sched {
            nflab_io::process::parse_sched(s).map_err(|e| format!("knobs.sched: {e}"))?;
        }
        if let Some(b) = &self.background_load {
            if !(b.duty > 0.0 && b.duty <= 1.0) || b.period_ms == 0 || b.cpus.is_empty() {
                return Err(format!(
                    "knobs.background_load = {{ cpus = {:?}, duty = {}, period_ms = {} }} is not valid: give CPUs, a duty above 0 and at most 1, and a period of 1 ms or more",
                    b.cpus, b.duty, b.period_ms
                ));
            }
            if let Some(p) = &b.policy {
                nflab_io::process::parse_sched(p)
                    .map_err(|e| format!("knobs.background_load.policy: {e}"))?;
            }
        }
        for (pat, cpus) in &self.irq_affinity {
            if pat.is_empty()
                || cpus.is_empty()
                || !cpus
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == ',' || c == '-')
            {
                return Err(format!(
                    "knobs.irq_affinity.\"{pat}\" = \"{cpus}\" is not valid: give part of an IRQ name and a CPU list like \"1\" or \"0-1\""
                ));
            }
        }
        for r in &self.required {
            let iface = self.iface.keys().any(|k| r.starts_with(&format!("{k}.")));
            let other = [
                "cpu_governor",
                "pm_qos_latency_us",
                "sched",
                "background_load",
            ]
            .contains(&r.as_str())
                || self
                    .irq_affinity
                    .keys()
                    .any(|k| r == &format!("irq_affinity.{k}"));
            if !other && !self.sysctl.contains_key(r) && !iface {
                return Err(format!(
                    "knobs.required names \"{r}\", which this [knobs] section does not set"
                ));
            }
        }
        Ok(())
    }
}

/// A CPU burner: on each CPU, busy for `duty` of every period.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackgroundLoad {
    /// CPUs to load.
    pub cpus: Vec<usize>,
    /// Busy fraction of each period, (0, 1].
    pub duty: f64,
    /// Period in ms.
    #[serde(default = "ten")]
    pub period_ms: u64,
    /// Scheduling policy of the burning threads ("other" by default; see
    /// `knobs.sched`). With "idle" and duty 1 a thread takes only time no
    /// other thread wants: it keeps its CPU from halting (on a VM a halted
    /// vCPU wakes tens of µs late) without delaying anything, as the
    /// kernel's idle=poll would for that CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

fn ten() -> u64 {
    10
}

pub(crate) fn value_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Boolean(b) => Some((*b as u8).to_string()),
        _ => None,
    }
}

/// Knobs of one interface.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IfaceKnob {
    /// RPS CPU mask (hex) for every rx queue.
    #[serde(default)]
    pub rps_cpus: Option<String>,
    /// XPS CPU mask (hex) for every tx queue.
    #[serde(default)]
    pub xps_cpus: Option<String>,
    /// NAPI in kernel threads.
    #[serde(default)]
    pub threaded_napi: Option<bool>,
    /// Root qdisc kind.
    #[serde(default)]
    pub qdisc: Option<String>,
    /// ethtool -K features by short name (gro, gso, tso, lro, rx, tx, sg).
    #[serde(default)]
    pub offloads: BTreeMap<String, String>,
    /// ethtool -L channel counts (rx, tx, other, combined).
    #[serde(default)]
    pub channels: BTreeMap<String, u32>,
    /// ethtool -G ring sizes (rx, tx, rx-mini, rx-jumbo).
    #[serde(default)]
    pub rings: BTreeMap<String, u32>,
    /// ethtool -C interrupt coalescing (rx-usecs, rx-frames, adaptive-rx, ...).
    #[serde(default)]
    pub coalesce: BTreeMap<String, String>,
}

/// ethtool -k prints long names; -K takes short ones.
pub(crate) fn offload_long_name(short: &str) -> Option<&'static str> {
    Some(match short {
        "gro" => "generic-receive-offload",
        "gso" => "generic-segmentation-offload",
        "tso" => "tcp-segmentation-offload",
        "lro" => "large-receive-offload",
        "rx" => "rx-checksumming",
        "tx" => "tx-checksumming",
        "sg" => "scatter-gather",
        "rxvlan" => "rx-vlan-offload",
        "txvlan" => "tx-vlan-offload",
        _ => return None,
    })
}

/// Whether the kernel would take `name` as an interface name (`dev_valid_name`):
/// 1 to 15 bytes, not "." or "..", no '/', ':' or white space. It becomes part
/// of a /sys path, so nothing else may pass.
pub fn is_interface_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0x0b || b == 0)
}

/// Check a `[knobs.iface]` table.
pub fn validate_iface(section: &BTreeMap<String, IfaceKnob>) -> Result<(), String> {
    for (key, k) in section {
        let (role, dev) = key.split_once(':').unwrap_or(("", ""));
        if !matches!(role, "lg" | "dut") || dev.is_empty() {
            return Err(format!(
                "knobs.iface.\"{key}\" is not valid: name an interface as \"lg:lg0\" or \"dut:dut0\""
            ));
        }
        if !is_interface_name(dev) {
            return Err(format!(
                "knobs.iface.\"{key}\": {dev:?} is not an interface name: 1 to 15 bytes without '/', ':' or spaces, as the kernel takes them"
            ));
        }
        for (name, v) in &k.offloads {
            if offload_long_name(name).is_none() {
                return Err(format!(
                    "knobs.iface.\"{key}\".offloads.{name} is not known: use gro, gso, tso, lro, rx, tx, sg, rxvlan or txvlan"
                ));
            }
            if v != "on" && v != "off" {
                return Err(format!(
                    "knobs.iface.\"{key}\".offloads.{name} = \"{v}\": use \"on\" or \"off\""
                ));
            }
        }
        for mask in [&k.rps_cpus, &k.xps_cpus].into_iter().flatten() {
            if mask.is_empty() || !mask.chars().all(|c| c.is_ascii_hexdigit() || c == ',') {
                return Err(format!("knobs.iface.\"{key}\": CPU mask \"{mask}\" is not hex (e.g. \"3\" for CPUs 0 and 1)"));
            }
        }
        for r in k.rings.keys() {
            if !matches!(r.as_str(), "rx" | "tx" | "rx-mini" | "rx-jumbo") {
                return Err(format!(
                    "knobs.iface.\"{key}\".rings.{r}: use rx, tx, rx-mini or rx-jumbo"
                ));
            }
        }
        for (c, v) in &k.coalesce {
            if c.is_empty()
                || v.is_empty()
                || c.contains(char::is_whitespace)
                || v.contains(char::is_whitespace)
            {
                return Err(format!("knobs.iface.\"{key}\".coalesce.{c} = \"{v}\": use an ethtool -C parameter and value, e.g. rx-usecs = \"0\""));
            }
        }
        for c in k.channels.keys() {
            if !matches!(c.as_str(), "rx" | "tx" | "other" | "combined") {
                return Err(format!(
                    "knobs.iface.\"{key}\".channels.{c}: use rx, tx, other or combined"
                ));
            }
        }
    }
    Ok(())
}
