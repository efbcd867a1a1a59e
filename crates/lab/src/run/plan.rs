//! From the spec's `[traffic]` to the generator's plan: the probe frame's
//! fixed fields and addresses, each stream's pattern, rate, sizes and flow
//! variation, checked with messages that name the key.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use nflab_gen::{
    Accounting, FlowVary, GenPlan, Pattern as GenPattern, Rate as GenRate, Role, Sizes, StreamPlan,
    StreamSpec,
};
use nflab_wire::ProbeSpec;

use crate::error::LabError;
use crate::run::recorder::{BACKGROUND_FLOW_BASE, BACKGROUND_FLOW_SPAN};
use crate::spec::{
    Pattern as SpecPattern, Rate as SpecRate, RateAccounting, StreamKeys, TrafficSection,
};
use crate::topo::{Topology, LG0_IP, LG0_MAC, LG1_IP};

pub use crate::net::addresses::{PROBE_DST_PORT, PROBE_FLOW, PROBE_SRC_PORT};
/// The probe frame's fixed fields in the built-in topology (flow, size, DSCP and VLAN
/// are set per stream).
pub fn probe_base(topo: &Topology) -> ProbeSpec {
    ProbeSpec {
        dst_mac: topo.probe_dst_mac(),
        ..default_probe_base()
    }
}

/// First flow id of the reverse way's probe stream (`traffic.direction`): the forward
/// way's probe flows lie below it, background streams from `BACKGROUND_FLOW_BASE` up.
pub const REVERSE_PROBE_FLOW: u16 = 0x4000;

/// Mixed into the run's seed for the reverse way's stream, so a random pattern does
/// not send the same gaps both ways.
pub const REVERSE_SEED: u64 = 0x5245_5645_5253_4520;

/// The reverse way's probe frame: from the recorder's port (lg1, 198.19.0.1) to the
/// generator's (lg0, 198.18.0.1), addressed where the DuT's reverse path takes it;
/// `None` where the DuT has none.
pub fn reverse_probe_base(topo: &Topology) -> Option<ProbeSpec> {
    Some(ProbeSpec {
        src_mac: crate::topo::LG1_MAC,
        dst_mac: topo.reverse_dst?,
        src_ip: LG1_IP.into(),
        dst_ip: LG0_IP.into(),
        flow: REVERSE_PROBE_FLOW,
        ..default_probe_base()
    })
}

/// [`probe_base`] without a topology (destination MAC of the loopback cable).
pub fn default_probe_base() -> ProbeSpec {
    ProbeSpec {
        src_mac: LG0_MAC,
        dst_mac: crate::topo::LG1_MAC,
        vlan: None,
        src_ip: LG0_IP.into(),
        dst_ip: LG1_IP.into(),
        src_port: PROBE_SRC_PORT,
        dst_port: PROBE_DST_PORT,
        dscp: 0,
        ttl: 64,
        flow: PROBE_FLOW,
        frame_bytes: 64,
        mtu: 1500,
    }
}

/// The IPv6 twin of a benchmarking IPv4 address: `2001:2::` + its 32 bits (RFC 5180).
pub fn ipv6_twin(v4: std::net::Ipv4Addr) -> std::net::Ipv6Addr {
    let o = v4.octets();
    std::net::Ipv6Addr::new(
        0x2001,
        2,
        0,
        0,
        0,
        0,
        u16::from_be_bytes([o[0], o[1]]),
        u16::from_be_bytes([o[2], o[3]]),
    )
}

fn traffic_err(message: String) -> LabError {
    LabError::Spec {
        file: "spec".into(),
        message,
    }
}

/// One stream of the spec as the generator's [`StreamSpec`] and flow variation.
/// `what` names the table in messages ("traffic", "traffic.background[0]").
#[allow(clippy::too_many_arguments)]
pub fn stream_spec(
    what: &str,
    pattern: SpecPattern,
    rate: SpecRate,
    rate_bps: Option<f64>,
    accounting: RateAccounting,
    frame_bytes: u64,
    k: &StreamKeys,
    seed: u64,
) -> Result<(StreamSpec, FlowVary), LabError> {
    let rate = match rate_bps {
        Some(b) if b.is_finite() && b > 0.0 => GenRate::Bps {
            bps: b,
            accounting: match accounting {
                RateAccounting::L1 => Accounting::L1,
                RateAccounting::L2 => Accounting::L2,
            },
        },
        Some(b) => {
            return Err(traffic_err(format!(
                "{what}.rate_bps = {b} is not valid: use a positive number of bits per second"
            )))
        }
        None => match rate {
            SpecRate::Pps(p) => GenRate::Pps(p),
            SpecRate::Max => GenRate::Max,
        },
    };
    let ms = |key: &str, v: f64, zero_ok: bool| -> Result<u64, LabError> {
        if v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && v <= 3.6e6 {
            Ok((v * 1e6).round() as u64)
        } else {
            Err(traffic_err(format!(
                "{what}.{key} = {v} is not valid: use a number of milliseconds {} and at most 3600000",
                if zero_ok { "of 0 or more" } else { "above 0" }
            )))
        }
    };
    let pattern = match pattern {
        SpecPattern::Cbr => GenPattern::Cbr,
        SpecPattern::Poisson => GenPattern::Poisson,
        SpecPattern::Burst => GenPattern::Burst { size: k.burst },
        SpecPattern::Onoff => GenPattern::OnOff {
            on_ns: ms("on_ms", k.on_ms, false)?,
            off_ns: ms("off_ms", k.off_ms, true)?,
        },
        SpecPattern::Periodic => GenPattern::Periodic {
            frequency_hz: k.frequency_hz.ok_or_else(|| {
                traffic_err(format!(
                    "{what}: pattern \"periodic\" needs frequency_hz, e.g. frequency_hz = 1000"
                ))
            })?,
            per_cycle: k.per_cycle,
        },
        SpecPattern::Replay => {
            let path = k.trace.as_deref().ok_or_else(|| {
                traffic_err(format!(
                    "{what}: pattern \"replay\" needs trace = \"FILE.pcap\""
                ))
            })?;
            let trace = nflab_gen::trace::load(Path::new(path))
                .map_err(|e| traffic_err(format!("{what}.trace: {e}")))?;
            GenPattern::Replay {
                trace: Arc::new(trace),
                speed: k.speed,
            }
        }
    };
    let given = [
        k.size_mix.is_some(),
        k.size_sweep.is_some(),
        k.sizes.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if given > 1 {
        return Err(traffic_err(format!(
            "{what}: give only one of sizes, size_mix and size_sweep"
        )));
    }
    let sizes = if let Some(m) = &k.size_mix {
        match m.as_str() {
            "imix" => Sizes::imix(),
            other => {
                return Err(traffic_err(format!(
                    "{what}.size_mix = \"{other}\" is not known: use \"imix\" (64/594/1518 B, 7:4:1) or sizes with size_weights"
                )))
            }
        }
    } else if let Some([from, to, step]) = k.size_sweep {
        Sizes::sweep(from, to, step).map_err(|e| traffic_err(format!("{what}.{e}")))?
    } else if let Some(v) = &k.sizes {
        match &k.size_weights {
            Some(w) if w.len() != v.len() => {
                return Err(traffic_err(format!(
                    "{what}.size_weights has {} entries for {} sizes: give one weight per size",
                    w.len(),
                    v.len()
                )))
            }
            Some(w) => Sizes::Weighted(v.iter().copied().zip(w.iter().copied()).collect()),
            None => Sizes::Cycle(v.clone()),
        }
    } else {
        if k.size_weights.is_some() {
            return Err(traffic_err(format!(
                "{what}.size_weights needs sizes = [...] to weigh"
            )));
        }
        Sizes::Fixed(frame_bytes)
    };
    let mut vary = FlowVary::default();
    for v in &k.vary {
        match v.as_str() {
            "src_ip" => vary.src_ip = true,
            "dst_ip" => vary.dst_ip = true,
            "src_port" => vary.src_port = true,
            "dst_port" => vary.dst_port = true,
            other => {
                return Err(traffic_err(format!(
                "{what}.vary: \"{other}\" is not a field: use src_ip, dst_ip, src_port or dst_port"
            )))
            }
        }
    }
    let spec = StreamSpec {
        pattern,
        rate,
        sizes,
        flows: k.flows,
        seed,
    };
    spec.check()
        .map_err(|e| traffic_err(format!("{what}: {e}")))?;
    Ok((spec, vary))
}

/// The generator plan of a `[traffic]` section: the probe stream (flows from
/// [`PROBE_FLOW`]) and each background stream (flows from [`BACKGROUND_FLOW_BASE`]).
pub fn build_plan(t: &TrafficSection, seed: u64, base: &ProbeSpec) -> Result<GenPlan, LabError> {
    build_plan_from(t, seed, base, PROBE_FLOW)
}

/// [`build_plan`] with the probe stream's flows from `probe_flow` (the reverse way's
/// from [`REVERSE_PROBE_FLOW`]).
pub fn build_plan_from(
    t: &TrafficSection,
    seed: u64,
    base: &ProbeSpec,
    probe_flow: u16,
) -> Result<GenPlan, LabError> {
    if t.ip_version != 4 && t.ip_version != 6 {
        return Err(traffic_err(format!(
            "traffic.ip_version = {} is not valid: use 4 or 6",
            t.ip_version
        )));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if t.tx_threads == 0 || t.tx_threads > cpus.max(64) {
        return Err(traffic_err(format!(
            "traffic.tx_threads = {} is not valid: use 1 to {}",
            t.tx_threads,
            cpus.max(64)
        )));
    }
    if !(1..=1024).contains(&t.batch) {
        return Err(traffic_err(format!(
            "traffic.batch = {} is not valid: use 1 to 1024",
            t.batch
        )));
    }
    let mut base = *base;
    if t.ip_version == 6 {
        if let (IpAddr::V4(s), IpAddr::V4(d)) = (base.src_ip, base.dst_ip) {
            base.src_ip = ipv6_twin(s).into();
            base.dst_ip = ipv6_twin(d).into();
        }
    }
    let stream_base = |k: &StreamKeys| ProbeSpec {
        dscp: k.dscp,
        vlan: t.vlan.map(|vid| nflab_wire::VlanTag { vid, pcp: k.pcp }),
        ..base
    };
    let mut streams = Vec::new();
    let k = t.keys();
    let (spec, vary) = stream_spec(
        "traffic",
        t.pattern,
        t.rate_pps,
        t.rate_bps,
        t.rate_accounting,
        t.frame_bytes,
        &k,
        seed,
    )?;
    // Both ways' probe flows must stay apart, and below the background streams'.
    let most = if t.direction.has_reverse() {
        REVERSE_PROBE_FLOW
    } else {
        BACKGROUND_FLOW_BASE
    };
    if k.flows as u64 > most as u64 {
        let why = if t.direction.has_reverse() {
            format!(" with traffic.direction = \"{}\"", t.direction.as_str())
        } else {
            String::new()
        };
        return Err(traffic_err(format!(
            "traffic.flows = {} is too many: the probe stream has at most {most} flows{why}",
            k.flows
        )));
    }
    streams.push(
        StreamPlan::new(spec, Role::Probe, probe_flow, &stream_base(&k), vary)
            .map_err(|e| traffic_err(format!("traffic: {}", strip_gen(&e))))?,
    );
    for (i, b) in t.background.iter().enumerate() {
        let what = format!("traffic.background[{i}]");
        let k = b.keys();
        let (spec, vary) = stream_spec(
            &what,
            b.pattern,
            b.rate_pps,
            b.rate_bps,
            b.rate_accounting,
            b.frame_bytes,
            &k,
            seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1)),
        )?;
        let flow_base = (i as u64 * BACKGROUND_FLOW_SPAN as u64 + BACKGROUND_FLOW_BASE as u64)
            .try_into()
            .ok()
            .filter(|f: &u16| *f < u16::MAX - BACKGROUND_FLOW_SPAN)
            .ok_or_else(|| {
                traffic_err("traffic.background: at most 15 background streams".into())
            })?;
        if k.flows > BACKGROUND_FLOW_SPAN as u32 {
            return Err(traffic_err(format!(
                "{what}.flows = {} is too many: a background stream has at most {BACKGROUND_FLOW_SPAN} flows",
                k.flows
            )));
        }
        streams.push(
            StreamPlan::new(spec, Role::Background, flow_base, &stream_base(&k), vary)
                .map_err(|e| traffic_err(format!("{what}: {}", strip_gen(&e))))?,
        );
    }
    Ok(GenPlan {
        streams,
        warmup_ns: (t.warmup_s * 1e9) as u64,
        duration_ns: Some((t.duration_s * 1e9) as u64),
        count: None,
        batch: t.batch,
        tx_timestamp: match t.tx_timestamp {
            crate::spec::TxTimestampMode::App => nflab_gen::TxTimestamp::App,
            crate::spec::TxTimestampMode::Kernel => nflab_gen::TxTimestamp::Kernel,
        },
    })
}

fn strip_gen(e: &nflab_gen::GenError) -> String {
    let s = e.to_string();
    s.strip_prefix("generator: ").unwrap_or(&s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn traffic(extra: &str) -> Result<GenPlan, LabError> {
        let text = format!("[experiment]\nname = \"x\"\n[traffic]\n{extra}\n");
        let spec = Spec::parse(&text, "t.toml")?;
        build_plan(&spec.traffic, 1, &default_probe_base())
    }

    #[test]
    fn bad_pattern_parameters_are_one_sentence_each() {
        let e = traffic("pattern = \"burst\"\nburst = 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("burst = 0 is not valid"), "{e}");
        let e = traffic("pattern = \"periodic\"").unwrap_err().to_string();
        assert!(e.contains("needs frequency_hz"), "{e}");
        let e = traffic("pattern = \"replay\"\ntrace = \"/nonexistent.pcap\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read trace"), "{e}");
        let e = traffic("frame_bytes = 64\nip_version = 6")
            .unwrap_err()
            .to_string();
        assert!(e.contains("below the minimum of 84 B"), "{e}");
        let e = traffic("rate_bps = -1.0").unwrap_err().to_string();
        assert!(e.contains("rate_bps = -1"), "{e}");
        let e = traffic("pattern = \"poisson\"\nrate_pps = \"max\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cbr pattern only"), "{e}");
        let e = traffic("vary = [\"ttl\"]").unwrap_err().to_string();
        assert!(e.contains("not a field"), "{e}");
        // A file that is not a capture, and a truncated one.
        let dir = std::env::temp_dir().join(format!("nflab-gen-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let bad = dir.join("bad.pcap");
        std::fs::write(&bad, b"not a capture at all").expect("write");
        let e = traffic(&format!(
            "pattern = \"replay\"\ntrace = \"{}\"",
            bad.display()
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("is not a pcap or pcapng file"), "{e}");
        let good = nflab_gen::trace::write_pcap_ns(&[
            nflab_gen::trace::TracePacket { t_ns: 0, len: 64 },
            nflab_gen::trace::TracePacket {
                t_ns: 1000,
                len: 64,
            },
        ]);
        let cut = dir.join("cut.pcap");
        std::fs::write(&cut, &good[..good.len() - 3]).expect("write");
        let e = traffic(&format!(
            "pattern = \"replay\"\ntrace = \"{}\"",
            cut.display()
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("truncated"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn background_streams_get_their_own_flow_ids() {
        let p = traffic(
            "rate_pps = 1000\nflows = 4\n[[traffic.background]]\npattern = \"poisson\"\nrate_pps = 5000\nflows = 3\n[[traffic.background]]\nrate_bps = 1e8\nsize_mix = \"imix\"",
        )
        .expect("plan");
        assert_eq!(p.streams.len(), 3);
        assert_eq!(p.streams[0].flow_ids().collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(p.streams[1].flow_base, BACKGROUND_FLOW_BASE);
        assert_eq!(
            p.streams[2].flow_base,
            BACKGROUND_FLOW_BASE + BACKGROUND_FLOW_SPAN
        );
        assert_eq!(p.streams[1].role, Role::Background);
        // 100 Mbit/s L1 of IMIX (361.8 B + 20 B) = 32 745 pps.
        let pps = p.streams[2].spec.mean_pps().unwrap();
        assert!((pps - 1e8 / (381.833_333 * 8.0)).abs() < 1.0, "{pps}");
    }
}
