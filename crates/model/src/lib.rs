//! Models that predict what the lab measures.
//!
//! This first version holds the resource model of seed 000 (ch. 4–5): the
//! throughput bound of a software data plane is the smaller of what the
//! interconnect carries and what the CPU cores process,
//!
//! ```text
//! T_max = min( B / ((L_frame + 20 B) · 8),  f · n / c )      [packets/s]
//! ```
//!
//! with B the link rate in bit/s, L_frame the frame size including the FCS,
//! 20 B of preamble, SFD and inter-frame gap, f the core clock in Hz, n the
//! cores, and c the CPU cycles per packet (c_IO + c_task + chain cost).
//! The batch-polling queue model and the simulator come with issue 6.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use serde::Serialize;

/// Preamble (7 B), SFD (1 B) and the minimum inter-frame gap (12 B).
pub const ETHERNET_L1_OVERHEAD_BYTES: f64 = 20.0;

/// Invalid model inputs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// A parameter is outside its domain.
    #[error("{name} = {value} is not valid: {valid}")]
    Invalid {
        /// Parameter name as on the command line.
        name: &'static str,
        /// Given value.
        value: f64,
        /// What would be valid.
        valid: &'static str,
    },
}

/// Inputs of the resource model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResourceInputs {
    /// Core clock, Hz.
    pub cpu_hz: f64,
    /// Cores processing packets.
    pub cores: f64,
    /// CPU cycles per packet, all costs included.
    pub cycles_per_packet: f64,
    /// Link rate, bit/s.
    pub link_bps: f64,
    /// Frame size including FCS, bytes.
    pub frame_bytes: f64,
}

/// Which resource limits the throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// The CPU cycles per packet.
    Cpu,
    /// The Ethernet link.
    Ethernet,
}

/// Prediction of the resource model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ResourcePrediction {
    /// min(ethernet, cpu), packets/s.
    pub t_max_pps: f64,
    /// Packets/s the link carries.
    pub ethernet_pps: f64,
    /// Packets/s the cores process.
    pub cpu_pps: f64,
    /// The limiting resource.
    pub bound: Bound,
    /// Cycles per packet at which CPU and link limits are equal.
    pub crossover_cycles: f64,
}

/// Packets per second of a link at a frame size: B / ((L + 20) · 8).
pub fn ethernet_pps(link_bps: f64, frame_bytes: f64) -> f64 {
    link_bps / ((frame_bytes + ETHERNET_L1_OVERHEAD_BYTES) * 8.0)
}

fn positive(name: &'static str, value: f64) -> Result<(), ModelError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(ModelError::Invalid {
            name,
            value,
            valid: "use a positive, finite number",
        })
    }
}

/// Evaluate the resource model.
pub fn resource(i: &ResourceInputs) -> Result<ResourcePrediction, ModelError> {
    positive("--cpu-hz", i.cpu_hz)?;
    positive("--cores", i.cores)?;
    positive("--cycles-per-packet", i.cycles_per_packet)?;
    positive("--link-bps", i.link_bps)?;
    if !(i.frame_bytes.is_finite() && i.frame_bytes >= 64.0) {
        return Err(ModelError::Invalid {
            name: "--frame-bytes",
            value: i.frame_bytes,
            valid: "use an Ethernet frame size of at least 64 bytes (FCS included)",
        });
    }
    let eth = ethernet_pps(i.link_bps, i.frame_bytes);
    let cpu = i.cpu_hz * i.cores / i.cycles_per_packet;
    Ok(ResourcePrediction {
        t_max_pps: eth.min(cpu),
        ethernet_pps: eth,
        cpu_pps: cpu,
        bound: if cpu < eth {
            Bound::Cpu
        } else {
            Bound::Ethernet
        },
        crossover_cycles: i.cpu_hz * i.cores / eth,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        ((a - b) / b).abs() <= rel
    }

    #[test]
    fn ethernet_line_rates_of_seed_000() {
        // Seed 000 table: 14.88 / 59.52 / 148.81 Mpps at 64 B.
        assert!(close(ethernet_pps(10e9, 64.0), 14.88e6, 5e-4));
        assert!(close(ethernet_pps(40e9, 64.0), 59.52e6, 5e-4));
        assert!(close(ethernet_pps(100e9, 64.0), 148.81e6, 5e-4));
        // 1518 B at 10G: 812,743 pps.
        assert!(close(ethernet_pps(10e9, 1518.0), 812_743.0, 1e-5));
    }

    #[test]
    fn cpu_bound_router_of_seed_000() {
        // c_task 350 + c_IO 100 at 3.3 GHz: 7.3 Mpps predicted (7.1 measured).
        let p = resource(&ResourceInputs {
            cpu_hz: 3.3e9,
            cores: 1.0,
            cycles_per_packet: 450.0,
            link_bps: 10e9,
            frame_bytes: 64.0,
        })
        .unwrap();
        assert!(close(p.t_max_pps, 7.33e6, 1e-3), "{}", p.t_max_pps);
        assert_eq!(p.bound, Bound::Cpu);
        // Line-rate crossover ≈ 222 cycles at 3.3 GHz and 10G.
        assert!(
            (p.crossover_cycles - 221.76).abs() < 0.5,
            "{}",
            p.crossover_cycles
        );
    }

    #[test]
    fn link_bound_below_crossover() {
        let p = resource(&ResourceInputs {
            cpu_hz: 3.3e9,
            cores: 1.0,
            cycles_per_packet: 200.0,
            link_bps: 10e9,
            frame_bytes: 64.0,
        })
        .unwrap();
        assert_eq!(p.bound, Bound::Ethernet);
        assert_eq!(p.t_max_pps, p.ethernet_pps);
    }

    #[test]
    fn bad_inputs_name_the_flag() {
        let e = resource(&ResourceInputs {
            cpu_hz: 3.3e9,
            cores: 0.0,
            cycles_per_packet: 450.0,
            link_bps: 10e9,
            frame_bytes: 64.0,
        })
        .unwrap_err();
        assert!(e.to_string().contains("--cores = 0"), "{e}");
        let json = serde_json::to_string(&Bound::Cpu).unwrap();
        assert_eq!(json, "\"cpu\"");
    }
}
