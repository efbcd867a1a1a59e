//! The resource model of seed 000 (Gallenmüller 2021, ch. 4–6).
//!
//! ```text
//! T_max = min( T_interconnect, f · n / c )                         (4.6)
//! T_interconnect = min( Ethernet, PCIe, memory, QPI/UPI )          (4.3)
//! Ethernet  = B / ((L_frame + 20 B) · 8)                           [pps]
//! c = c_IO + (e − 1)·c_chain + c_task-calc + c_task-access         (5.6, 5.7)
//! ```
//!
//! `c_task-access` is either `accesses · cycles(working set)` from the
//! cache-level costs (§4.1.3, scales with the clock) or `accesses · t_access
//! · f` for lookups that go to RAM and do not scale with the clock (the
//! router model, §5.3.3). `c_busy` is zero at saturation (5.3–5.5), so the
//! model predicts the saturation rate. The URLLC bound (5.10) and the WLAN
//! bound (6.5–6.7) are separate functions.
use serde::Serialize;

use crate::{non_negative, positive, ModelError};

/// Preamble (7 B), SFD (1 B) and the minimum inter-frame gap (12 B).
pub const ETHERNET_L1_OVERHEAD_BYTES: f64 = 20.0;

/// Packets per second of a link at a frame size: B / ((L + 20) · 8).
pub fn ethernet_pps(link_bps: f64, frame_bytes: f64) -> f64 {
    link_bps / ((frame_bytes + ETHERNET_L1_OVERHEAD_BYTES) * 8.0)
}

// ****************************************************************************
// Interconnects (Table 4.1)
// ****************************************************************************

/// The kind of an internal bus, which decides the bound it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BusKind {
    /// PCI Express between NIC and CPU.
    Pcie,
    /// A memory channel (or several).
    Memory,
    /// The inter-socket link (QPI, UPI).
    Qpi,
}

/// One internal bus a packet crosses.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bus {
    /// Name, as in Table 4.1 (`pcie3x8`, `ddr4-3200`, `upi`, ...).
    pub name: String,
    /// Kind of the bus.
    pub kind: BusKind,
    /// Usable bandwidth per direction (full duplex) or in total (half duplex), bit/s.
    pub bandwidth_bps: f64,
    /// Times each forwarded packet crosses the bus in the limiting direction:
    /// 1 for full-duplex links (in and out use separate lanes), 2 for a
    /// half-duplex memory channel (the NIC writes the packet, then reads it).
    pub crossings: f64,
}

/// Table 4.1 of seed 000: maximum unidirectional bandwidths, Gbit/s.
pub const BUS_TABLE: &[(&str, BusKind, f64, bool)] = &[
    ("pcie2x8", BusKind::Pcie, 32.0, true),
    ("pcie3x8", BusKind::Pcie, 63.0, true),
    ("pcie4x8", BusKind::Pcie, 125.0, true),
    ("ddr3-800", BusKind::Memory, 51.0, false),
    ("ddr3-1600", BusKind::Memory, 102.0, false),
    ("ddr4-1600", BusKind::Memory, 102.0, false),
    ("ddr4-3200", BusKind::Memory, 205.0, false),
    ("qpi", BusKind::Qpi, 77.0, true),
    ("upi", BusKind::Qpi, 166.0, true),
];

impl Bus {
    /// A bus of Table 4.1 by name, optionally `NAME*K` for K channels/lanes
    /// in parallel (`ddr4-3200*6` for six memory channels).
    pub fn from_table(spec: &str) -> Result<Bus, ModelError> {
        let (name, mult) = match spec.split_once('*') {
            Some((n, k)) => {
                let k: f64 = k.trim().parse().map_err(|_| ModelError::Input {
                    name: "--bus",
                    reason: format!("{spec:?}: the factor after * must be a number"),
                })?;
                positive("--bus factor", k)?;
                (n.trim(), k)
            }
            None => (spec.trim(), 1.0),
        };
        let lower = name.to_ascii_lowercase();
        let (n, kind, gbps, full) =
            BUS_TABLE
                .iter()
                .find(|(n, ..)| *n == lower)
                .ok_or_else(|| ModelError::Input {
                    name: "--bus",
                    reason: format!(
                        "unknown bus {name:?}; use one of {} (optionally NAME*K for K in parallel)",
                        BUS_TABLE.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
                    ),
                })?;
        Ok(Bus {
            name: if mult == 1.0 {
                n.to_string()
            } else {
                format!("{n}*{mult}")
            },
            kind: *kind,
            bandwidth_bps: gbps * 1e9 * mult,
            crossings: if *full { 1.0 } else { 2.0 },
        })
    }

    /// Packets per second the bus carries at a frame size (no L1 overhead
    /// on internal buses; descriptors and TLP headers are not modelled).
    pub fn pps(&self, frame_bytes: f64) -> f64 {
        self.bandwidth_bps / (frame_bytes * 8.0 * self.crossings)
    }
}

// ****************************************************************************
// Data-access costs (§4.1.3, Table 4.2)
// ****************************************************************************

/// Cache hierarchy with the access cost of each level, cycles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CacheLevels {
    /// Sizes of L1d, L2, L3 in bytes.
    pub size_bytes: [f64; 3],
    /// Cost of an access served by L1, L2, L3, RAM, cycles.
    pub cycles: [f64; 4],
    /// Fraction of L2 and L3 usable for data (instructions share them): 0.85.
    pub usable_fraction: f64,
}

impl CacheLevels {
    /// The CacheLoader measurements of seed 000 on Sandy/Ivy Bridge:
    /// 10 / 20 / 60 / 250 cycles for 32 KiB / 256 KiB / 8 MiB / RAM, 85 %
    /// of L2 and L3 usable.
    pub const SANDY_BRIDGE: CacheLevels = CacheLevels {
        size_bytes: [32.0 * 1024.0, 256.0 * 1024.0, 8.0 * 1024.0 * 1024.0],
        cycles: [10.0, 20.0, 60.0, 250.0],
        usable_fraction: 0.85,
    };

    /// Mean cost of one uniformly random access into a structure of
    /// `working_set_bytes`: the ideal model of Fig. 4.4, in which a share
    /// `min(1, C_j/S)` of the structure is resident in level j and below, so
    /// the stepwise curve is smoothed beyond each level's size.
    pub fn access_cycles(&self, working_set_bytes: f64) -> f64 {
        let s = working_set_bytes.max(1.0);
        let cap = [
            self.size_bytes[0],
            self.size_bytes[1] * self.usable_fraction,
            self.size_bytes[2] * self.usable_fraction,
        ];
        let mut prev = 0.0;
        let mut cost = 0.0;
        for (j, c) in cap.iter().enumerate() {
            let resident = (c / s).min(1.0);
            cost += (resident - prev).max(0.0) * self.cycles[j];
            prev = prev.max(resident);
        }
        cost + (1.0 - prev) * self.cycles[3]
    }
}

// ****************************************************************************
// The model
// ****************************************************************************

/// Inputs of the resource model.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInputs {
    /// Core clock, Hz.
    pub cpu_hz: f64,
    /// Cores processing packets.
    pub cores: f64,
    /// CPU cycles per packet, all costs included. When zero, `c` is the sum
    /// of the components below.
    pub cycles_per_packet: f64,
    /// Link rate, bit/s.
    pub link_bps: f64,
    /// Frame size including FCS, bytes.
    pub frame_bytes: f64,
    /// Components of `c`, used when `cycles_per_packet` is zero.
    pub costs: CostComponents,
    /// Internal buses the packet crosses besides the Ethernet link.
    pub buses: Vec<Bus>,
}

impl Default for ResourceInputs {
    fn default() -> Self {
        ResourceInputs {
            cpu_hz: 3.3e9,
            cores: 1.0,
            cycles_per_packet: 0.0,
            link_bps: 10e9,
            frame_bytes: 64.0,
            costs: CostComponents::default(),
            buses: Vec::new(),
        }
    }
}

/// The per-packet cost split of (5.7) and the router model (5.8).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostComponents {
    /// Framework receive + send cost, cycles (DPDK ≈ 100).
    pub c_io: f64,
    /// Task calculation cost, cycles (scales with the clock).
    pub c_task_calc: f64,
    /// Data accesses per packet into the working set.
    pub accesses_per_packet: f64,
    /// Size of the structure accessed, bytes (cost from [`CacheLevels`]).
    pub working_set_bytes: f64,
    /// Time per access that does not scale with the clock (RAM-bound
    /// lookups of the router model), ns. When positive it replaces the
    /// cache-level cost.
    pub access_ns: f64,
    /// Network functions in the chain, e ≥ 1.
    pub nfs: f64,
    /// Cost of passing a packet from one NF to the next, cycles.
    pub c_chain: f64,
    /// Cache hierarchy for the access cost.
    pub caches: CacheLevels,
}

impl Default for CostComponents {
    fn default() -> Self {
        CostComponents {
            c_io: 0.0,
            c_task_calc: 0.0,
            accesses_per_packet: 0.0,
            working_set_bytes: 0.0,
            access_ns: 0.0,
            nfs: 1.0,
            c_chain: 0.0,
            caches: CacheLevels::SANDY_BRIDGE,
        }
    }
}

/// The cycles per packet a cost split amounts to at a clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostBreakdown {
    /// c_IO.
    pub c_io: f64,
    /// (e − 1) · c_chain-element.
    pub c_chain: f64,
    /// c_task-calc.
    pub c_task_calc: f64,
    /// c_task-access at this clock.
    pub c_task_access: f64,
    /// The sum c.
    pub total: f64,
}

impl CostComponents {
    /// Cycles per packet at clock `cpu_hz` (5.7 with c_busy = 0).
    pub fn cycles(&self, cpu_hz: f64) -> Result<CostBreakdown, ModelError> {
        non_negative("--c-io", self.c_io)?;
        non_negative("--c-task-calc", self.c_task_calc)?;
        non_negative("--accesses-per-packet", self.accesses_per_packet)?;
        non_negative("--working-set-bytes", self.working_set_bytes)?;
        non_negative("--access-ns", self.access_ns)?;
        non_negative("--c-chain", self.c_chain)?;
        if !(self.nfs.is_finite() && self.nfs >= 1.0) {
            return Err(ModelError::Invalid {
                name: "--nfs",
                value: self.nfs,
                valid: "use the number of network functions in the chain, at least 1",
            });
        }
        let per_access = if self.access_ns > 0.0 {
            self.access_ns * 1e-9 * cpu_hz
        } else if self.accesses_per_packet > 0.0 {
            self.caches.access_cycles(self.working_set_bytes)
        } else {
            0.0
        };
        let access = self.accesses_per_packet * per_access;
        let chain = (self.nfs - 1.0) * self.c_chain;
        Ok(CostBreakdown {
            c_io: self.c_io,
            c_chain: chain,
            c_task_calc: self.c_task_calc,
            c_task_access: access,
            total: self.c_io + chain + self.c_task_calc + access,
        })
    }
}

/// Which resource limits the throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// The CPU cycles per packet.
    Cpu,
    /// The Ethernet link.
    Ethernet,
    /// A PCIe link.
    Pcie,
    /// A memory channel.
    Memory,
    /// The inter-socket link.
    Qpi,
}

/// One interconnect's packet rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusRate {
    /// Bus name.
    pub name: String,
    /// Packets per second it carries.
    pub pps: f64,
}

/// Prediction of the resource model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourcePrediction {
    /// min(interconnect, cpu), packets/s.
    pub t_max_pps: f64,
    /// T_max in bit/s on the wire (L1 overhead included).
    pub t_max_bps: f64,
    /// Packets/s the Ethernet link carries.
    pub ethernet_pps: f64,
    /// Packets/s of the slowest interconnect (Ethernet included).
    pub interconnect_pps: f64,
    /// Packets/s of each internal bus.
    pub buses: Vec<BusRate>,
    /// Packets/s the cores process.
    pub cpu_pps: f64,
    /// Cycles per packet used.
    pub cycles_per_packet: f64,
    /// The split of `cycles_per_packet`, when given as components.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub costs: Option<CostBreakdown>,
    /// The limiting resource.
    pub bound: Bound,
    /// Cycles per packet at which CPU and interconnect limits are equal.
    pub crossover_cycles: f64,
    /// Idle-polling cycles per packet below the crossover, c_busy of (5.5),
    /// when the core busy-polls at the interconnect's rate.
    pub c_busy_cycles: f64,
}

/// Evaluate the resource model.
pub fn resource(i: &ResourceInputs) -> Result<ResourcePrediction, ModelError> {
    positive("--cpu-hz", i.cpu_hz)?;
    positive("--cores", i.cores)?;
    positive("--link-bps", i.link_bps)?;
    if !(i.frame_bytes.is_finite() && i.frame_bytes >= 64.0) {
        return Err(ModelError::Invalid {
            name: "--frame-bytes",
            value: i.frame_bytes,
            valid: "use an Ethernet frame size of at least 64 bytes (FCS included)",
        });
    }
    non_negative("--cycles-per-packet", i.cycles_per_packet)?;
    let (c, costs) = if i.cycles_per_packet > 0.0 {
        (i.cycles_per_packet, None)
    } else {
        let b = i.costs.cycles(i.cpu_hz)?;
        (b.total, Some(b))
    };
    if c <= 0.0 {
        return Err(ModelError::Input {
            name: "--cycles-per-packet",
            reason: "give the cycles per packet, or its components (--c-io, --c-task-calc, \
                     --accesses-per-packet with --working-set-bytes or --access-ns)"
                .into(),
        });
    }
    let eth = ethernet_pps(i.link_bps, i.frame_bytes);
    let mut inter = eth;
    let mut inter_bound = Bound::Ethernet;
    let mut buses = Vec::new();
    for b in &i.buses {
        positive("--bus bandwidth", b.bandwidth_bps)?;
        let pps = b.pps(i.frame_bytes);
        if pps < inter {
            inter = pps;
            inter_bound = match b.kind {
                BusKind::Pcie => Bound::Pcie,
                BusKind::Memory => Bound::Memory,
                BusKind::Qpi => Bound::Qpi,
            };
        }
        buses.push(BusRate {
            name: b.name.clone(),
            pps,
        });
    }
    let cpu = i.cpu_hz * i.cores / c;
    let t_max = inter.min(cpu);
    Ok(ResourcePrediction {
        t_max_pps: t_max,
        t_max_bps: t_max * (i.frame_bytes + ETHERNET_L1_OVERHEAD_BYTES) * 8.0,
        ethernet_pps: eth,
        interconnect_pps: inter,
        buses,
        cpu_pps: cpu,
        cycles_per_packet: c,
        costs,
        bound: if cpu < inter { Bound::Cpu } else { inter_bound },
        crossover_cycles: i.cpu_hz * i.cores / inter,
        c_busy_cycles: (i.cpu_hz * i.cores / inter - c).max(0.0),
    })
}

// ****************************************************************************
// Fits (the inverse direction)
// ****************************************************************************

/// Cycles per packet implied by a measured saturation rate, c = f · n / T
/// (5.3 with c_busy = 0: a busy-polling core at saturation spends every
/// cycle on packets).
pub fn fit_cycles_per_packet(
    saturation_pps: f64,
    cpu_hz: f64,
    cores: f64,
) -> Result<f64, ModelError> {
    positive("measured saturation rate (pps)", saturation_pps)?;
    positive("--cpu-hz", cpu_hz)?;
    positive("--cores", cores)?;
    Ok(cpu_hz * cores / saturation_pps)
}

/// Processing time per packet from medians, t_CPU ≈ median(app) −
/// median(baseline forwarder) (seed 000 §5.4.4: the baseline's median
/// approximates 2·t_transfer).
pub fn fit_t_cpu_ns(median_app_ns: f64, median_baseline_ns: f64) -> Result<f64, ModelError> {
    non_negative("median latency of the application (ns)", median_app_ns)?;
    non_negative("median latency of the baseline (ns)", median_baseline_ns)?;
    let t = median_app_ns - median_baseline_ns;
    if t <= 0.0 {
        return Err(ModelError::Input {
            name: "--baseline-median-ns",
            reason: format!(
                "the application's median ({median_app_ns} ns) is not above the baseline's \
                 ({median_baseline_ns} ns), so t_CPU cannot be derived; use a baseline that \
                 forwards without processing (l2fwd or loopback)"
            ),
        });
    }
    Ok(t)
}

// ****************************************************************************
// URLLC overload bound (5.10)
// ****************************************************************************

/// A periodic interruption of the packet-processing core.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct InterruptLoad {
    /// Trigger rate r_k, Hz.
    pub rate_hz: f64,
    /// CPU time per interruption d_k, ns.
    pub duration_ns: f64,
}

/// Prediction of the URLLC overload model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UrllcPrediction {
    /// R_max = (1 s − d_Σ) / t_CPU, packets/s.
    pub r_max_pps: f64,
    /// d_Σ = Σ r_k · d_k, CPU time lost to interrupts per second, ns/s.
    pub interrupt_ns_per_s: f64,
    /// t_CPU used, ns.
    pub t_cpu_ns: f64,
}

/// The URLLC overload bound of seed 000 (5.10): R_max = (1 s − Σ r_k·d_k) / t_CPU.
pub fn urllc_r_max(
    t_cpu_ns: f64,
    interrupts: &[InterruptLoad],
) -> Result<UrllcPrediction, ModelError> {
    positive("--t-cpu-ns", t_cpu_ns)?;
    let mut d_sum = 0.0;
    for irq in interrupts {
        non_negative("--interrupt rate (Hz)", irq.rate_hz)?;
        non_negative("--interrupt duration (ns)", irq.duration_ns)?;
        d_sum += irq.rate_hz * irq.duration_ns;
    }
    if d_sum >= 1e9 {
        return Err(ModelError::Input {
            name: "--interrupt",
            reason: format!(
                "the interrupts take {:.0} ns of every second, nothing is left for packets; \
                 check the rates (Hz) and durations (ns)",
                d_sum
            ),
        });
    }
    Ok(UrllcPrediction {
        r_max_pps: (1e9 - d_sum) / t_cpu_ns,
        interrupt_ns_per_s: d_sum,
        t_cpu_ns,
    })
}

// ****************************************************************************
// WLAN bound (6.5–6.7)
// ****************************************************************************

/// Bordim et al.'s 802.11g ad-hoc per-frame time at 54 Mbit/s: 0.15 µs/B.
pub const WLAN_US_PER_BYTE: f64 = 0.15;
/// Bordim et al.'s 802.11g per-frame constant, µs.
pub const WLAN_US_PER_FRAME: f64 = 162.43;

/// Prediction of the WLAN model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WlanPrediction {
    /// t*_avg = 0.15·x + 162.43 + t_impl, µs.
    pub t_avg_us: f64,
    /// T_max = 1 / t*_avg, packets/s.
    pub t_max_pps: f64,
    /// Payload throughput x · 8 · T_max, bit/s.
    pub payload_bps: f64,
}

/// The WLAN resource model of seed 000 (6.6, 6.7) for a packet of `bytes`.
pub fn wlan(bytes: f64, t_impl_us: f64) -> Result<WlanPrediction, ModelError> {
    positive("--frame-bytes", bytes)?;
    non_negative("--t-impl-us", t_impl_us)?;
    let t = WLAN_US_PER_BYTE * bytes + WLAN_US_PER_FRAME + t_impl_us;
    let pps = 1e6 / t;
    Ok(WlanPrediction {
        t_avg_us: t,
        t_max_pps: pps,
        payload_bps: pps * bytes * 8.0,
    })
}

/// t_impl from one measured saturation rate: 1/T − (0.15·x + 162.43) µs.
pub fn wlan_fit_t_impl_us(bytes: f64, saturation_pps: f64) -> Result<f64, ModelError> {
    positive("--frame-bytes", bytes)?;
    positive("measured saturation rate (pps)", saturation_pps)?;
    let t = 1e6 / saturation_pps - (WLAN_US_PER_BYTE * bytes + WLAN_US_PER_FRAME);
    if t < 0.0 {
        return Err(ModelError::Input {
            name: "measured saturation rate",
            reason: format!(
                "{saturation_pps} pps at {bytes} B is faster than 802.11g at 54 Mbit/s allows; \
                 check the rate and the packet size"
            ),
        });
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        ((a - b) / b).abs() <= rel
    }

    fn cpu_only(cpu_hz: f64, c: f64) -> ResourceInputs {
        ResourceInputs {
            cpu_hz,
            cycles_per_packet: c,
            ..ResourceInputs::default()
        }
    }

    #[test]
    fn ethernet_line_rates_of_seed_000() {
        // Table 4.1: 14.88 / 59.52 / 148.81 Mpps at 64 B.
        assert!(close(ethernet_pps(10e9, 64.0), 14.88e6, 5e-4));
        assert!(close(ethernet_pps(40e9, 64.0), 59.52e6, 5e-4));
        assert!(close(ethernet_pps(100e9, 64.0), 148.81e6, 5e-4));
        // 1518 B at 10G: 812,743 pps.
        assert!(close(ethernet_pps(10e9, 1518.0), 812_743.0, 1e-5));
        // XL710: 40G needs ≥ 128 B frames to stay below its 33.7 Mpps.
        assert!(close(ethernet_pps(40e9, 128.0), 33.78e6, 1e-3));
    }

    #[test]
    fn cpu_bound_of_seed_000_from_components() {
        // §5.1.5: c_task = 250 (one RAM access) + 100, c_IO = 100 at 3.3 GHz
        // → 7.3 Mpps (7.1 measured).
        let p = resource(&ResourceInputs {
            costs: CostComponents {
                c_io: 100.0,
                c_task_calc: 100.0,
                accesses_per_packet: 1.0,
                working_set_bytes: 1e12, // far beyond L3: every access goes to RAM
                ..CostComponents::default()
            },
            ..ResourceInputs::default()
        })
        .unwrap();
        assert!(
            (p.cycles_per_packet - 450.0).abs() < 0.5,
            "{}",
            p.cycles_per_packet
        );
        assert!(close(p.t_max_pps, 7.33e6, 1e-3), "{}", p.t_max_pps);
        assert_eq!(p.bound, Bound::Cpu);
        // Line-rate crossover ≈ 222 cycles at 3.3 GHz and 10G.
        assert!(
            (p.crossover_cycles - 221.76).abs() < 0.5,
            "{}",
            p.crossover_cycles
        );
        // The total form gives the same.
        let q = resource(&cpu_only(3.3e9, 450.0)).unwrap();
        assert!(close(q.t_max_pps, p.t_max_pps, 1e-3));
    }

    #[test]
    fn link_bound_below_crossover_and_c_busy() {
        let p = resource(&cpu_only(3.3e9, 200.0)).unwrap();
        assert_eq!(p.bound, Bound::Ethernet);
        assert_eq!(p.t_max_pps, p.ethernet_pps);
        // (5.5): below the crossover the idle polling fills the cycles.
        assert!((p.c_busy_cycles - 21.76).abs() < 0.5, "{}", p.c_busy_cycles);
        // 3 cores at 3.3 GHz move the crossover to ≈ 665 cycles (Fig. 4.5).
        let q = resource(&ResourceInputs {
            cores: 3.0,
            ..cpu_only(3.3e9, 450.0)
        })
        .unwrap();
        assert_eq!(q.bound, Bound::Ethernet);
        assert!((q.crossover_cycles - 665.3).abs() < 0.5);
    }

    #[test]
    fn cache_levels_step_and_smooth() {
        let c = CacheLevels::SANDY_BRIDGE;
        assert_eq!(c.access_cycles(16.0 * 1024.0), 10.0);
        // 200 KiB: 32/200 of the accesses hit L1, the rest L2.
        let v = c.access_cycles(200.0 * 1024.0);
        assert!((v - (0.16 * 10.0 + 0.84 * 20.0)).abs() < 1e-9, "{v}");
        // 4 MiB: L1 and (85 % of) L2 hold small shares, the rest is L3.
        let (s1, s2) = (32.0 / 4096.0, 0.85 * 256.0 / 4096.0);
        let want = s1 * 10.0 + (s2 - s1) * 20.0 + (1.0 - s2) * 60.0;
        assert!((c.access_cycles(4.0 * 1024.0 * 1024.0) - want).abs() < 1e-9);
        // Far beyond L3 → RAM.
        assert!((c.access_cycles(1e12) - 250.0).abs() < 0.01);
        // Twice L3's usable size: half the accesses hit L3 or better.
        let s = 2.0 * 0.85 * 8.0 * 1024.0 * 1024.0;
        let v = c.access_cycles(s);
        assert!(v > 150.0 && v < 160.0, "{v}");
        // Monotone in the working set.
        let mut last = 0.0;
        for k in 10..40 {
            let v = c.access_cycles(2f64.powi(k));
            assert!(v >= last);
            last = v;
        }
    }

    #[test]
    fn chain_cost_adds_per_extra_nf() {
        let costs = CostComponents {
            c_io: 100.0,
            c_task_calc: 50.0,
            nfs: 4.0,
            c_chain: 30.0,
            ..CostComponents::default()
        };
        let b = costs.cycles(3.3e9).unwrap();
        assert_eq!(b.c_chain, 90.0);
        assert_eq!(b.total, 240.0);
        let one = CostComponents { nfs: 1.0, ..costs };
        assert_eq!(one.cycles(3.3e9).unwrap().c_chain, 0.0);
    }

    #[test]
    fn router_access_does_not_scale_with_clock() {
        // (5.8): c = c_IO + c_calc + accesses · t_RAM · f; doubling f less
        // than doubles the rate.
        let at = |hz: f64| {
            resource(&ResourceInputs {
                cpu_hz: hz,
                costs: CostComponents {
                    c_io: 100.0,
                    c_task_calc: 100.0,
                    accesses_per_packet: 2.0,
                    access_ns: 80.0,
                    ..CostComponents::default()
                },
                ..ResourceInputs::default()
            })
            .unwrap()
        };
        let lo = at(1.6e9);
        let hi = at(3.2e9);
        assert!((lo.cycles_per_packet - 456.0).abs() < 1e-9);
        assert!((hi.cycles_per_packet - 712.0).abs() < 1e-9);
        let speedup = hi.cpu_pps / lo.cpu_pps;
        assert!(speedup > 1.2 && speedup < 1.3, "{speedup}");
    }

    #[test]
    fn buses_of_table_4_1() {
        // PCIe 3.0 x8 (63 Gbit/s) cannot carry two 40G ports at 64 B:
        // 63e9 / 512 = 123 Mpps < 2 · 59.52.
        let pcie = Bus::from_table("pcie3x8").unwrap();
        assert!(close(pcie.pps(64.0), 123.05e6, 1e-3));
        let p = resource(&ResourceInputs {
            link_bps: 200e9,
            buses: vec![pcie],
            ..cpu_only(3.3e9, 10.0)
        })
        .unwrap();
        assert_eq!(p.bound, Bound::Pcie);
        // A half-duplex DDR3-800 channel carries each packet twice.
        let ddr = Bus::from_table("DDR3-800").unwrap();
        assert!(close(ddr.pps(64.0), 51e9 / 1024.0, 1e-12));
        let six = Bus::from_table("ddr4-3200*6").unwrap();
        assert_eq!(six.bandwidth_bps, 6.0 * 205e9);
        let e = Bus::from_table("pcie9x1").unwrap_err().to_string();
        assert!(e.contains("pcie3x8") && e.contains("--bus"), "{e}");
    }

    #[test]
    fn urllc_r_max_tables_5_5_and_5_6() {
        let hw = [
            InterruptLoad {
                rate_hz: 166.7,
                duration_ns: 10_900.0,
            },
            InterruptLoad {
                rate_hz: 83.3,
                duration_ns: 13_600.0,
            },
        ];
        let mut vm = hw.to_vec();
        vm[0].duration_ns = 17_500.0;
        vm[1].duration_ns = 19_200.0;
        vm.push(InterruptLoad {
            rate_hz: 250.0,
            duration_ns: 17_500.0,
        });
        let p = urllc_r_max(11_400.0, &hw).unwrap();
        assert!((p.interrupt_ns_per_s - 2_949_910.0).abs() < 1.0);
        // Table 5.5 prints 87.4 (truncated from 87.46), 78.7, 69.7, 65.6 kpps.
        assert!((p.r_max_pps / 1e3 - 87.4).abs() < 0.1, "{}", p.r_max_pps);
        let v = urllc_r_max(12_600.0, &vm).unwrap();
        assert!((v.interrupt_ns_per_s - 8_891_610.0).abs() < 1.0);
        assert!((v.r_max_pps / 1e3 - 78.7).abs() < 0.05);
        assert!((urllc_r_max(14_300.0, &hw).unwrap().r_max_pps / 1e3 - 69.7).abs() < 0.05);
        assert!((urllc_r_max(15_100.0, &vm).unwrap().r_max_pps / 1e3 - 65.6).abs() < 0.05);
        // Interrupts eating the whole second: an error, not a negative rate.
        let e = urllc_r_max(
            1000.0,
            &[InterruptLoad {
                rate_hz: 1e6,
                duration_ns: 1000.0,
            }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("--interrupt"));
    }

    #[test]
    fn wlan_examples_of_seed_000() {
        for (x, t_us, kpps) in [
            (20.0, 285.4, 3.5),
            (365.0, 337.2, 2.97),
            (1400.0, 492.4, 2.03),
            (1500.0, 507.4, 1.97),
        ] {
            let p = wlan(x, 120.0).unwrap();
            assert!((p.t_avg_us - t_us).abs() < 0.1, "{x}: {}", p.t_avg_us);
            assert!(
                (p.t_max_pps / 1e3 - kpps).abs() < 0.01,
                "{x}: {}",
                p.t_max_pps
            );
        }
        assert!((wlan(1500.0, 120.0).unwrap().payload_bps / 1e6 - 23.65).abs() < 0.1);
        // Fit: t_impl back from the predicted rate.
        let r = wlan(1400.0, 120.0).unwrap().t_max_pps;
        assert!((wlan_fit_t_impl_us(1400.0, r).unwrap() - 120.0).abs() < 1e-9);
        assert!(wlan_fit_t_impl_us(1400.0, 1e6).is_err());
    }

    #[test]
    fn fits_invert_the_model() {
        // 7.1 Mpps measured at 3.3 GHz → 464.8 cycles per packet.
        let c = fit_cycles_per_packet(7.1e6, 3.3e9, 1.0).unwrap();
        assert!((c - 464.79).abs() < 0.01);
        let p = resource(&cpu_only(3.3e9, c)).unwrap();
        assert!(close(p.t_max_pps, 7.1e6, 1e-12));
        // An application median of 14.5 µs over the l2fwd median of 3.1 µs
        // (§5.4.4) gives t_CPU = 11.4 µs, Snort-fwd HW of Table 5.5.
        assert!((fit_t_cpu_ns(14_500.0, 3_100.0).unwrap() - 11_400.0).abs() < 1e-9);
        assert!(fit_t_cpu_ns(3_000.0, 3_100.0).is_err());
    }

    #[test]
    fn bad_inputs_name_the_flag() {
        let e = resource(&ResourceInputs {
            cores: 0.0,
            ..cpu_only(3.3e9, 450.0)
        })
        .unwrap_err();
        assert!(e.to_string().contains("--cores = 0"), "{e}");
        let e = resource(&cpu_only(-1.0, 450.0)).unwrap_err();
        assert!(e.to_string().contains("--cpu-hz = -1"), "{e}");
        let e = resource(&cpu_only(3.3e9, 0.0)).unwrap_err();
        assert!(e.to_string().contains("--cycles-per-packet"), "{e}");
        let e = resource(&ResourceInputs {
            frame_bytes: 40.0,
            ..cpu_only(3.3e9, 450.0)
        })
        .unwrap_err();
        assert!(e.to_string().contains("--frame-bytes"), "{e}");
        let json = serde_json::to_string(&Bound::Cpu).unwrap();
        assert_eq!(json, "\"cpu\"");
    }
}
