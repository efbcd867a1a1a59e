//! From a DuT config to a chain of apps.
//!
//! The lab's `[dut]` section (DESIGN §3.5) names the functions in
//! `pipeline` and configures each in a sub-table named after it:
//!
//! ```toml
//! [dut]
//! kind = "nflab"
//! pipeline = ["router", "delayer"]
//! batch = 32
//! rx_mode = "busy-poll"
//! drain_us = 100
//! [dut.router]
//! routes = ["198.19.0.0/24 out 02:4e:46:00:00:02"]   # or routes_file = "routes.txt"
//! [dut.delayer]
//! delay_us = 500
//! jitter_us = 50
//! distribution = "uniform"
//! ```
//!
//! [`validate`] checks a config without touching the host; [`build_chain`]
//! makes the apps (on the worker thread, so their buffers come from its
//! pool). Every error is one sentence naming the key and what is valid.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use nflab_wire::MacAddr;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::delayer::{DelaySampler, Delayer, Distribution};
use crate::dispatch::{ExternDispatch, Mode};
use crate::l2fwd::L2Fwd;
use crate::reorder::{Late, Reorder};
use crate::router::{RouteTable, Router};
use crate::sheep::Sheep;

/// The functions a pipeline may name.
pub const FUNCTIONS: &[&str] = &[
    "l2fwd",
    "router",
    "sheep",
    "delayer",
    "reorder",
    "extern-dispatch",
];

/// `[dut.l2fwd]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct L2fwdConfig {
    /// New destination MAC (default: the lab's recorder interface, lg1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_mac: Option<String>,
    /// New source MAC (default: the output port's MAC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_mac: Option<String>,
}

/// `[dut.router]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// Inline routes, `PREFIX/LEN PORT MAC`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<String>,
    /// A route-table file (relative paths from the current directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes_file: Option<String>,
    /// Source address of ICMP errors (default: dut0's 198.18.0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_source: Option<String>,
    /// ICMP errors per second at most (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_rate_pps: Option<f64>,
}

/// `[dut.sheep]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SheepConfig {
    /// TSC cycles to burn per packet.
    #[serde(default)]
    pub cycles: u64,
    /// Random pointer-chasing accesses per packet.
    #[serde(default)]
    pub accesses: u32,
    /// Size of the table in bytes (default 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_bytes: Option<u64>,
    /// Seed of the random cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// `[dut.delayer]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DelayerConfig {
    /// Mean delay in µs.
    #[serde(default)]
    pub delay_us: f64,
    /// Standard deviation of the delay in µs.
    #[serde(default)]
    pub jitter_us: f64,
    /// uniform (default), normal, exponential or trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// Delays for `trace`, one per line in µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_file: Option<String>,
    /// Buffer capacity in packets (default 262144).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<usize>,
    /// Drop packets that are due while the output is full (seed 004's TimeDrop).
    #[serde(default)]
    pub time_drop: bool,
    /// RNG seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// `[dut.reorder]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReorderConfig {
    /// Sequence window in packets (power of two; default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// Loss timeout: longest a packet waits for a predecessor, µs (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delay_us: Option<f64>,
    /// Width of the sequence numbers (default 48, the probe header's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_bits: Option<u8>,
    /// "drop" (default) or "forward" packets that arrive after their turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late: Option<String>,
}

/// `[dut.extern_dispatch]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DispatchConfig {
    /// encap, decap or roundtrip (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Base VID, 1..4094.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_vid: Option<u16>,
    /// Extern mask, 12 bits (default 0xFFF: static assignment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u16>,
    /// Snabb-header data as hex, 1..127 bytes (none: no header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_hex: Option<String>,
}

/// The per-function sub-tables of a DuT config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FunctionConfigs {
    /// `[dut.l2fwd]`.
    pub l2fwd: Option<L2fwdConfig>,
    /// `[dut.router]`.
    pub router: Option<RouterConfig>,
    /// `[dut.sheep]`.
    pub sheep: Option<SheepConfig>,
    /// `[dut.delayer]`.
    pub delayer: Option<DelayerConfig>,
    /// `[dut.reorder]`.
    pub reorder: Option<ReorderConfig>,
    /// `[dut.extern_dispatch]`.
    pub extern_dispatch: Option<DispatchConfig>,
}

/// What the host around the chain provides.
#[derive(Debug, Clone)]
pub struct BuildContext {
    /// MAC of the input port.
    pub in_mac: MacAddr,
    /// MAC of the output port.
    pub out_mac: MacAddr,
    /// Default next hop behind the output port (l2fwd's destination).
    pub next_hop_mac: MacAddr,
    /// Default router address for ICMP errors.
    pub icmp_source: Ipv4Addr,
    /// Default routes when `[dut.router]` gives none.
    pub default_routes: Vec<String>,
    /// Where relative file names are resolved.
    pub base_dir: PathBuf,
    /// This worker's instance id.
    pub instance: u16,
}

/// A DuT config that cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn err<T>(s: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(s.into()))
}

fn mac(key: &str, v: &Option<String>, default: MacAddr) -> Result<MacAddr, ConfigError> {
    match v {
        None => Ok(default),
        Some(s) => s.parse().map_err(|_| {
            ConfigError(format!(
                "{key} = \"{s}\" is not a MAC address: write six hex pairs, e.g. 02:4e:46:00:00:02"
            ))
        }),
    }
}

fn read(base: &Path, key: &str, file: &str) -> Result<(String, String), ConfigError> {
    let path = base.join(file);
    std::fs::read_to_string(&path)
        .map(|t| (t, path.display().to_string()))
        .map_err(|e| {
            ConfigError(format!(
                "{key} = \"{file}\" cannot be read ({e}): give an existing file"
            ))
        })
}

/// Check the pipeline and every sub-table it uses, without the host.
/// `default_routes` are those the host supplies when `[dut.router]` has none.
pub fn validate(
    pipeline: &[String],
    f: &FunctionConfigs,
    base_dir: &Path,
    default_routes: &[String],
) -> Result<(), ConfigError> {
    let ctx = BuildContext {
        in_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        out_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        next_hop_mac: MacAddr([2, 0, 0, 0, 0, 3]),
        icmp_source: Ipv4Addr::new(198, 18, 0, 2),
        default_routes: default_routes.to_vec(),
        base_dir: base_dir.to_path_buf(),
        instance: 0,
    };
    for name in pipeline {
        check_name(name)?;
        // Building the router would allocate its 32 MiB table; check its text only.
        if name == "router" {
            router_table(f.router.as_ref(), &ctx)?;
        } else if name == "sheep" {
            sheep_params(f.sheep.as_ref())?;
        } else {
            build_one(name, f, &ctx)?;
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), ConfigError> {
    if FUNCTIONS.contains(&name) {
        Ok(())
    } else {
        err(format!(
            "dut.pipeline names the unknown function \"{name}\": use {}",
            FUNCTIONS.join(", ")
        ))
    }
}

fn router_table(c: Option<&RouterConfig>, ctx: &BuildContext) -> Result<RouteTable, ConfigError> {
    let c = c.cloned().unwrap_or_default();
    let mut text = String::new();
    let mut origin = "dut.router.routes".to_string();
    if let Some(file) = &c.routes_file {
        let (t, path) = read(&ctx.base_dir, "dut.router.routes_file", file)?;
        text = t;
        origin = path;
    }
    if !c.routes.is_empty() {
        if c.routes_file.is_some() {
            return err("dut.router has both routes and routes_file: give one of them");
        }
        text = c.routes.join("\n");
    }
    if text.trim().is_empty() {
        text = ctx.default_routes.join("\n");
    }
    let t =
        RouteTable::parse(&text, &origin).map_err(|e| ConfigError(format!("route table {e}")))?;
    if t.routes.is_empty() {
        return err("the router has no routes: give dut.router.routes or dut.router.routes_file");
    }
    Ok(t)
}

fn sheep_params(c: Option<&SheepConfig>) -> Result<(u64, u32, u64, u64), ConfigError> {
    let c = c.cloned().unwrap_or_default();
    let bytes = c.table_bytes.unwrap_or(1 << 20);
    if !(64..=crate::sheep::MAX_TABLE_BYTES).contains(&bytes) {
        return err(format!(
            "dut.sheep.table_bytes = {bytes} is out of range: use 64 to 8589934592"
        ));
    }
    if c.cycles > 100_000_000 {
        return err(format!(
            "dut.sheep.cycles = {} is more than 0.1 s per packet: use at most 100000000",
            c.cycles
        ));
    }
    Ok((c.cycles, c.accesses, bytes, c.seed.unwrap_or(1)))
}

fn build_one(
    name: &str,
    f: &FunctionConfigs,
    ctx: &BuildContext,
) -> Result<Box<dyn App>, ConfigError> {
    Ok(match name {
        "l2fwd" => {
            let c = f.l2fwd.clone().unwrap_or_default();
            Box::new(L2Fwd::new(
                mac("dut.l2fwd.src_mac", &c.src_mac, ctx.out_mac)?,
                mac("dut.l2fwd.dst_mac", &c.dst_mac, ctx.next_hop_mac)?,
            ))
        }
        "router" => {
            let c = f.router.clone().unwrap_or_default();
            let table = router_table(Some(&c), ctx)?;
            let icmp_source = match &c.icmp_source {
                None => ctx.icmp_source,
                Some(s) => s.parse().map_err(|_| {
                    ConfigError(format!(
                        "dut.router.icmp_source = \"{s}\" is not an IPv4 address"
                    ))
                })?,
            };
            let rate = c.icmp_rate_pps.unwrap_or(1000.0);
            if !(rate.is_finite() && rate >= 0.0) {
                return err(format!(
                    "dut.router.icmp_rate_pps = {rate} is not valid: use 0 or more"
                ));
            }
            Box::new(
                Router::new(&table, ctx.out_mac, ctx.in_mac, icmp_source, rate)
                    .map_err(|e| ConfigError(format!("route table: {e}")))?,
            )
        }
        "sheep" => {
            let (cycles, accesses, bytes, seed) = sheep_params(f.sheep.as_ref())?;
            Box::new(Sheep::new(cycles, accesses, bytes, seed))
        }
        "delayer" => {
            let c = f.delayer.clone().unwrap_or_default();
            let dist = match c.distribution.as_deref().unwrap_or("uniform") {
                "uniform" => Distribution::Uniform,
                "normal" => Distribution::Normal,
                "exponential" => Distribution::Exponential,
                "trace" => {
                    let Some(file) = &c.trace_file else {
                        return err("dut.delayer.distribution = \"trace\" needs dut.delayer.trace_file");
                    };
                    let (text, path) = read(&ctx.base_dir, "dut.delayer.trace_file", file)?;
                    Distribution::Trace(
                        DelaySampler::parse_trace(&text, &path).map_err(|e| ConfigError(e.0))?,
                    )
                }
                other => {
                    return err(format!(
                        "dut.delayer.distribution = \"{other}\" is not known: use uniform, normal, exponential or trace"
                    ))
                }
            };
            let s = DelaySampler::new(dist, c.delay_us, c.jitter_us, c.seed.unwrap_or(1))
                .map_err(|e| ConfigError(format!("dut.delayer: {}", e.0)))?;
            let cap = c.capacity.unwrap_or(crate::delayer::DEFAULT_CAPACITY);
            if cap == 0 || cap > 1 << 24 {
                return err(format!(
                    "dut.delayer.capacity = {cap} is out of range: use 1 to 16777216"
                ));
            }
            Box::new(Delayer::new(s, cap, c.time_drop))
        }
        "reorder" => {
            let c = f.reorder.clone().unwrap_or_default();
            let window = c.window.unwrap_or(1024);
            if window == 0 || window > 1 << 20 {
                return err(format!(
                    "dut.reorder.window = {window} is out of range: use 1 to 1048576"
                ));
            }
            let md = c.max_delay_us.unwrap_or(1000.0);
            if !(md.is_finite() && md >= 0.0) {
                return err(format!(
                    "dut.reorder.max_delay_us = {md} is not valid: use 0 µs or more"
                ));
            }
            let bits = c.seq_bits.unwrap_or(48);
            if !(2..=64).contains(&bits) {
                return err(format!(
                    "dut.reorder.seq_bits = {bits} is out of range: use 2 to 64"
                ));
            }
            let late = match c.late.as_deref().unwrap_or("drop") {
                "drop" => Late::Drop,
                "forward" => Late::Forward,
                other => {
                    return err(format!(
                        "dut.reorder.late = \"{other}\" is not known: use drop or forward"
                    ))
                }
            };
            Box::new(Reorder::new(window, (md * 1e3) as u64, bits, late))
        }
        "extern-dispatch" => {
            let c = f.extern_dispatch.clone().unwrap_or_default();
            let mode = match c.mode.as_deref().unwrap_or("roundtrip") {
                "encap" => Mode::Encap,
                "decap" => Mode::Decap,
                "roundtrip" => Mode::Roundtrip,
                other => {
                    return err(format!(
                        "dut.extern_dispatch.mode = \"{other}\" is not known: use encap, decap or roundtrip"
                    ))
                }
            };
            let base = c.base_vid.unwrap_or(0x014);
            if !(1..=4094).contains(&base) {
                return err(format!(
                    "dut.extern_dispatch.base_vid = {base} is out of range: use 1 to 4094"
                ));
            }
            let mask = c.mask.unwrap_or(0xfff);
            if mask > 0xfff {
                return err(format!(
                    "dut.extern_dispatch.mask = {mask:#x} has more than 12 bits: use 0 to 0xFFF"
                ));
            }
            let data = match &c.data_hex {
                None => Vec::new(),
                Some(h) => {
                    let h = h.trim_start_matches("0x");
                    let bytes: Option<Vec<u8>> = (0..h.len())
                        .step_by(2)
                        .map(|i| h.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
                        .collect();
                    match bytes {
                        Some(b) if (1..=127).contains(&b.len()) && h.len() % 2 == 0 => b,
                        _ => {
                            return err(format!(
                                "dut.extern_dispatch.data_hex = \"{h}\" is not valid: give 1 to 127 bytes as hex digits"
                            ))
                        }
                    }
                }
            };
            Box::new(ExternDispatch::new(mode, base, mask, data, ctx.instance))
        }
        other => {
            check_name(other)?;
            unreachable!()
        }
    })
}

/// Make the apps of `pipeline`, in order.
pub fn build_chain(
    pipeline: &[String],
    f: &FunctionConfigs,
    ctx: &BuildContext,
) -> Result<Vec<Box<dyn App>>, ConfigError> {
    if pipeline.is_empty() {
        return err(format!(
            "dut.pipeline is empty: name at least one of {}",
            FUNCTIONS.join(", ")
        ));
    }
    pipeline.iter().map(|n| build_one(n, f, ctx)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f() -> FunctionConfigs {
        FunctionConfigs::default()
    }

    #[test]
    fn unknown_function_names_it_and_lists_the_valid_ones() {
        let e = validate(&["l2fwd".into(), "nat".into()], &f(), Path::new("."), &[]).unwrap_err();
        assert!(
            e.0.contains("\"nat\"") && e.0.contains("extern-dispatch"),
            "{e}"
        );
    }

    #[test]
    fn negative_delay_parameters_and_bad_routes_are_refused() {
        let mut c = f();
        c.delayer = Some(DelayerConfig {
            delay_us: 100.0,
            jitter_us: -1.0,
            distribution: Some("normal".into()),
            ..Default::default()
        });
        let e = validate(&["delayer".into()], &c, Path::new("."), &[]).unwrap_err();
        assert!(e.0.contains("jitter_us = -1"), "{e}");
        c.router = Some(RouterConfig {
            routes: vec![
                "198.19.0.0/24 out 02:4e:46:00:00:02".into(),
                "198.19.0.0/40 out 02:4e:46:00:00:02".into(),
            ],
            ..Default::default()
        });
        let e = validate(&["router".into()], &c, Path::new("."), &[]).unwrap_err();
        assert!(
            e.0.contains("line 2") && e.0.contains("198.19.0.0/40"),
            "{e}"
        );
        let e = validate(&["router".into()], &f(), Path::new("."), &[]).unwrap_err();
        assert!(e.0.contains("no routes"), "{e}");
    }

    #[test]
    fn every_function_builds_from_a_toml_section() {
        #[derive(Deserialize)]
        struct Dut {
            pipeline: Vec<String>,
            router: Option<RouterConfig>,
            delayer: Option<DelayerConfig>,
            reorder: Option<ReorderConfig>,
            sheep: Option<SheepConfig>,
            extern_dispatch: Option<DispatchConfig>,
        }
        let d: Dut = toml::from_str(
            r#"
pipeline = ["extern-dispatch", "l2fwd", "router", "sheep", "delayer", "reorder"]
[router]
routes = ["0.0.0.0/0 out 02:4e:46:00:00:02"]
[delayer]
delay_us = 10
jitter_us = 1
distribution = "exponential"
[reorder]
window = 64
[sheep]
cycles = 100
accesses = 2
table_bytes = 4096
[extern_dispatch]
mode = "roundtrip"
base_vid = 20
mask = 0xffc
data_hex = "c0ffee"
"#,
        )
        .unwrap();
        let fc = FunctionConfigs {
            router: d.router,
            delayer: d.delayer,
            reorder: d.reorder,
            sheep: d.sheep,
            extern_dispatch: d.extern_dispatch,
            l2fwd: None,
        };
        validate(&d.pipeline, &fc, Path::new("."), &[]).unwrap();
        let ctx = BuildContext {
            in_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            out_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            next_hop_mac: MacAddr([2, 0, 0, 0, 0, 3]),
            icmp_source: Ipv4Addr::new(198, 18, 0, 2),
            default_routes: vec![],
            base_dir: ".".into(),
            instance: 0,
        };
        let apps = build_chain(&d.pipeline, &fc, &ctx).unwrap();
        let names: Vec<_> = apps.iter().map(|a| a.name()).collect();
        assert_eq!(names, d.pipeline);
    }
}
