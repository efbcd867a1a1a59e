//! What the system did during a run: snapshots of kernel counters before and
//! after, and their difference, so a latency spike can be laid against
//! interrupts, softirq drops, steal time or a frequency change.

use std::collections::BTreeMap;

use serde::Serialize;

/// Counters read at one moment.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Snapshot {
    /// CLOCK_REALTIME ns when it was taken.
    pub time_ns: u64,
    /// Interrupt totals (all CPUs) by IRQ name, from /proc/interrupts.
    pub interrupts: BTreeMap<String, u64>,
    /// Per CPU: packets dropped by the backlog (softnet_stat column 2).
    pub softnet_dropped: Vec<u64>,
    /// Per CPU: times net_rx_action ran out of budget (column 3).
    pub softnet_time_squeeze: Vec<u64>,
    /// Aggregate CPU times from /proc/stat in clock ticks.
    pub cpu_ticks: BTreeMap<String, u64>,
    /// 1-minute load average.
    pub load_1m: Option<f64>,
    /// Current frequency of each CPU in kHz, where the kernel exposes it.
    pub cpu_khz: Vec<Option<u64>>,
}

/// Differences between two snapshots.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SnapshotDelta {
    /// Seconds between the snapshots.
    pub seconds: f64,
    /// Interrupts that fired, by name, largest first (zero omitted).
    pub interrupts: Vec<(String, u64)>,
    /// Backlog drops during the run, all CPUs.
    pub softnet_dropped: u64,
    /// Budget exhaustion events during the run, all CPUs.
    pub softnet_time_squeeze: u64,
    /// Share of CPU time stolen by the hypervisor during the run.
    pub steal_ratio: Option<f64>,
    /// Ticks per CPU-time category during the run.
    pub cpu_ticks: BTreeMap<String, u64>,
}

fn hex_or_dec(s: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap_or(0)
}

/// Parse /proc/interrupts text: per IRQ, the sum over CPUs, named by its
/// number and description ("24: virtio0-input.0").
pub fn parse_interrupts(text: &str) -> BTreeMap<String, u64> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    let mut out = BTreeMap::new();
    for line in lines {
        let Some((irq, rest)) = line.split_once(':') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = fields
            .iter()
            .take(cpus)
            .map_while(|f| f.parse().ok())
            .collect();
        if counts.is_empty() {
            continue;
        }
        let desc = fields[counts.len()..].join(" ");
        let name = if desc.is_empty() {
            irq.trim().to_string()
        } else {
            format!("{}: {}", irq.trim(), desc)
        };
        out.insert(name, counts.iter().sum());
    }
    out
}

/// Parse /proc/net/softnet_stat: (dropped, time_squeeze) per CPU.
pub fn parse_softnet(text: &str) -> (Vec<u64>, Vec<u64>) {
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f.get(1).map_or(0, |s| hex_or_dec(s)),
                f.get(2).map_or(0, |s| hex_or_dec(s)),
            )
        })
        .unzip()
}

/// Parse the aggregate "cpu" line of /proc/stat.
pub fn parse_cpu_ticks(text: &str) -> BTreeMap<String, u64> {
    const NAMES: [&str; 10] = [
        "user",
        "nice",
        "system",
        "idle",
        "iowait",
        "irq",
        "softirq",
        "steal",
        "guest",
        "guest_nice",
    ];
    text.lines()
        .find(|l| l.starts_with("cpu "))
        .map(|l| {
            NAMES
                .iter()
                .zip(l.split_whitespace().skip(1))
                .filter_map(|(n, v)| v.parse().ok().map(|v| (n.to_string(), v)))
                .collect()
        })
        .unwrap_or_default()
}

impl Snapshot {
    /// Read the host's counters now. Missing files leave fields empty.
    pub fn take() -> Snapshot {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let (softnet_dropped, softnet_time_squeeze) =
            parse_softnet(&read("/proc/net/softnet_stat"));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Snapshot {
            time_ns: nflab_io::clock::realtime_ns(),
            interrupts: parse_interrupts(&read("/proc/interrupts")),
            softnet_dropped,
            softnet_time_squeeze,
            cpu_ticks: parse_cpu_ticks(&read("/proc/stat")),
            load_1m: read("/proc/loadavg")
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok()),
            cpu_khz: (0..cpus)
                .map(|c| {
                    read(&format!(
                        "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq"
                    ))
                    .trim()
                    .parse()
                    .ok()
                })
                .collect(),
        }
    }

    /// What changed from `self` to `after`.
    pub fn delta(&self, after: &Snapshot) -> SnapshotDelta {
        let mut interrupts: Vec<(String, u64)> = after
            .interrupts
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.saturating_sub(*self.interrupts.get(k).unwrap_or(&0)),
                )
            })
            .filter(|(_, d)| *d > 0)
            .collect();
        interrupts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let sum_diff = |a: &[u64], b: &[u64]| -> u64 {
            b.iter()
                .zip(a.iter().chain(std::iter::repeat(&0)))
                .map(|(x, y)| x.saturating_sub(*y))
                .sum()
        };
        let cpu_ticks: BTreeMap<String, u64> = after
            .cpu_ticks
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.saturating_sub(*self.cpu_ticks.get(k).unwrap_or(&0)),
                )
            })
            .collect();
        let total: u64 = cpu_ticks
            .iter()
            .filter(|(k, _)| !k.starts_with("guest"))
            .map(|(_, v)| v)
            .sum();
        SnapshotDelta {
            seconds: after.time_ns.saturating_sub(self.time_ns) as f64 / 1e9,
            interrupts,
            softnet_dropped: sum_diff(&self.softnet_dropped, &after.softnet_dropped),
            softnet_time_squeeze: sum_diff(&self.softnet_time_squeeze, &after.softnet_time_squeeze),
            steal_ratio: (total > 0)
                .then(|| *cpu_ticks.get("steal").unwrap_or(&0) as f64 / total as f64),
            cpu_ticks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IRQ_A: &str = "           CPU0       CPU1\n  1:          9          0   IO-APIC   1-edge      i8042\n 24:        100         50   PCI-MSI 49152-edge      virtio0-input.0\nLOC:       1000       2000   Local timer interrupts\nERR:          0\n";
    const IRQ_B: &str = "           CPU0       CPU1\n  1:          9          0   IO-APIC   1-edge      i8042\n 24:        130         70   PCI-MSI 49152-edge      virtio0-input.0\nLOC:       1500       2600   Local timer interrupts\nERR:          0\n";

    #[test]
    fn interrupts_are_summed_over_cpus_and_differenced() {
        let a = parse_interrupts(IRQ_A);
        assert_eq!(a["24: PCI-MSI 49152-edge virtio0-input.0"], 150);
        assert_eq!(a["LOC: Local timer interrupts"], 3000);
        assert_eq!(a["ERR"], 0);
        let before = Snapshot {
            interrupts: a,
            time_ns: 0,
            ..Default::default()
        };
        let after = Snapshot {
            interrupts: parse_interrupts(IRQ_B),
            time_ns: 2_000_000_000,
            ..Default::default()
        };
        let d = before.delta(&after);
        assert_eq!(d.seconds, 2.0);
        assert_eq!(
            d.interrupts,
            vec![
                ("LOC: Local timer interrupts".to_string(), 1100),
                ("24: PCI-MSI 49152-edge virtio0-input.0".to_string(), 50)
            ]
        );
    }

    #[test]
    fn softnet_is_hex_and_steal_is_a_ratio() {
        let (d, s) = parse_softnet("0000a000 00000002 00000010 0\n00000001 0000000f 00000000 0\n");
        assert_eq!((d, s), (vec![2, 15], vec![16, 0]));
        let a = parse_cpu_ticks("cpu  100 0 50 800 0 0 10 40 0 0\ncpu0 1 2 3\n");
        let b = parse_cpu_ticks("cpu  200 0 100 1500 0 0 20 130 0 0\n");
        let before = Snapshot {
            cpu_ticks: a,
            ..Default::default()
        };
        let after = Snapshot {
            cpu_ticks: b,
            ..Default::default()
        };
        // Deltas: user 100, system 50, idle 700, softirq 10, steal 90 -> 90/950.
        let r = before.delta(&after).steal_ratio.unwrap();
        assert!((r - 90.0 / 950.0).abs() < 1e-12, "{r}");
    }

    #[test]
    fn take_reads_this_host() {
        let s = Snapshot::take();
        assert!(!s.interrupts.is_empty());
        assert!(s.cpu_ticks.contains_key("idle"));
        assert!(!s.softnet_dropped.is_empty());
    }
}
