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
use crate::emulator::{LinkEmulator, LinkParams, LossModel};
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
    "link",
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

/// `[dut.link]`: one direction of an emulated link (see [`crate::emulator`]).
/// Every key is optional so that `[dut.link.reverse]` can override some of
/// them for the other direction.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// Mean delay in µs (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_us: Option<f64>,
    /// Standard deviation of the delay in µs (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_us: Option<f64>,
    /// uniform (default), normal, exponential or trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// Delays for `trace`, one per line in µs, replayed in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_file: Option<String>,
    /// Loss model (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossConfig>,
    /// Rate limit in Mbit/s (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbps: Option<f64>,
    /// Packets the rate limiter queues at most, including the one being sent (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<usize>,
    /// Bytes added to every packet for the rate limit (netem's packet overhead; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_bytes: Option<i64>,
    /// Probability that a packet is duplicated (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<f64>,
    /// Probability that a packet skips the delay and overtakes others (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<f64>,
    /// Packets the delay line holds at most (default 16384).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<usize>,
    /// RNG seed (default 1; the reverse direction's default differs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// `[dut.link.reverse]`: what differs in the other direction (dut1 → dut0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<Box<LinkConfig>>,
}

/// `loss = { model = "bernoulli", p = 0.05 }` or `loss = { model =
/// "gilbert-elliott", p = 0.01, r = 0.3, "1-h" = 1.0, "1-k" = 0.0 }` (netem's
/// `gemodel p r 1-h 1-k`, as fractions), or `{ model = "none" }`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LossConfig {
    /// none, bernoulli or gilbert-elliott.
    pub model: String,
    /// Bernoulli: loss probability; Gilbert–Elliott: P(good → bad).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// Gilbert–Elliott: P(bad → good) (default 1, as netem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r: Option<f64>,
    /// Gilbert–Elliott: loss probability in the bad state (default 1, as netem).
    #[serde(rename = "1-h", default, skip_serializing_if = "Option::is_none")]
    pub one_minus_h: Option<f64>,
    /// Gilbert–Elliott: loss probability in the good state (default 0, as netem).
    #[serde(rename = "1-k", default, skip_serializing_if = "Option::is_none")]
    pub one_minus_k: Option<f64>,
}

impl LinkConfig {
    /// The other direction: these settings with `reverse`'s keys over them
    /// (the seed, unless given, differs so that both directions do not lose
    /// the same packets).
    pub fn reversed(&self) -> LinkConfig {
        let r = self.reverse.as_deref().cloned().unwrap_or_default();
        LinkConfig {
            delay_us: r.delay_us.or(self.delay_us),
            jitter_us: r.jitter_us.or(self.jitter_us),
            distribution: r.distribution.or_else(|| self.distribution.clone()),
            trace_file: r.trace_file.or_else(|| self.trace_file.clone()),
            loss: r.loss.or_else(|| self.loss.clone()),
            rate_mbps: r.rate_mbps.or(self.rate_mbps),
            queue_packets: r.queue_packets.or(self.queue_packets),
            overhead_bytes: r.overhead_bytes.or(self.overhead_bytes),
            duplicate: r.duplicate.or(self.duplicate),
            reorder: r.reorder.or(self.reorder),
            capacity: r.capacity.or(self.capacity),
            seed: r
                .seed
                .or_else(|| Some(self.seed.unwrap_or(1).wrapping_add(0x5eed))),
            reverse: None,
        }
    }
}

/// Default number of packets the link's delay line holds.
pub const LINK_DEFAULT_CAPACITY: usize = 1 << 14;

fn probability(key: &str, v: Option<f64>, default: f64) -> Result<f64, ConfigError> {
    match v {
        None => Ok(default),
        Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
        Some(x) => err(format!(
            "{key} = {x} is not a probability: use a fraction from 0 to 1 (0.05 for 5 %)"
        )),
    }
}

fn loss_model(key: &str, c: Option<&LossConfig>) -> Result<LossModel, ConfigError> {
    let Some(c) = c else {
        return Ok(LossModel::None);
    };
    let unused = |names: &[(&str, bool)]| -> Result<(), ConfigError> {
        match names.iter().find(|(_, set)| *set) {
            Some((n, _)) => err(format!(
                "{key}.{n} does not apply to loss model \"{}\"",
                c.model
            )),
            None => Ok(()),
        }
    };
    match c.model.as_str() {
        "none" => {
            unused(&[
                ("p", c.p.is_some()),
                ("r", c.r.is_some()),
                ("1-h", c.one_minus_h.is_some()),
                ("1-k", c.one_minus_k.is_some()),
            ])?;
            Ok(LossModel::None)
        }
        "bernoulli" => {
            unused(&[
                ("r", c.r.is_some()),
                ("1-h", c.one_minus_h.is_some()),
                ("1-k", c.one_minus_k.is_some()),
            ])?;
            let Some(p) = c.p else {
                return err(format!(
                    "{key} = {{ model = \"bernoulli\" }} needs p, the loss probability, e.g. p = 0.05"
                ));
            };
            Ok(LossModel::Bernoulli {
                p: probability(&format!("{key}.p"), Some(p), 0.0)?,
            })
        }
        "gilbert-elliott" => {
            let Some(p) = c.p else {
                return err(format!(
                    "{key} = {{ model = \"gilbert-elliott\" }} needs p, the probability of going from the good to the bad state"
                ));
            };
            Ok(LossModel::GilbertElliott {
                p: probability(&format!("{key}.p"), Some(p), 0.0)?,
                r: probability(&format!("{key}.r"), c.r, 1.0)?,
                loss_bad: probability(&format!("{key}.\"1-h\""), c.one_minus_h, 1.0)?,
                loss_good: probability(&format!("{key}.\"1-k\""), c.one_minus_k, 0.0)?,
            })
        }
        other => err(format!(
            "{key}.model = \"{other}\" is not known: use none, bernoulli or gilbert-elliott"
        )),
    }
}

/// Check one direction of `[dut.link]` (`key` is "dut.link" or
/// "dut.link.reverse") and make its parameters.
pub fn link_params(c: &LinkConfig, key: &str, base_dir: &Path) -> Result<LinkParams, ConfigError> {
    let dist = delay_distribution(
        key,
        c.distribution.as_deref(),
        c.trace_file.as_deref(),
        base_dir,
    )?;
    let delay = DelaySampler::new(
        dist,
        c.delay_us.unwrap_or(0.0),
        c.jitter_us.unwrap_or(0.0),
        c.seed.unwrap_or(1),
    )
    .map_err(|e| ConfigError(format!("{key}: {}", e.0)))?;
    let rate = match c.rate_mbps {
        None => {
            if let Some(q) = c.queue_packets {
                return err(format!(
                    "{key}.queue_packets = {q} needs {key}.rate_mbps: the queue is the rate limiter's"
                ));
            }
            None
        }
        Some(r) if r.is_finite() && r > 0.0 && r <= 1e6 => {
            let q = c.queue_packets.unwrap_or(1000);
            if !(1..=1 << 20).contains(&q) {
                return err(format!(
                    "{key}.queue_packets = {q} is out of range: use 1 to 1048576"
                ));
            }
            Some((r * 1e6, q))
        }
        Some(r) => {
            return err(format!(
                "{key}.rate_mbps = {r} is not valid: use more than 0 and at most 1000000 Mbit/s"
            ))
        }
    };
    let overhead_bytes = c.overhead_bytes.unwrap_or(0);
    if overhead_bytes != 0 && rate.is_none() {
        return err(format!(
            "{key}.overhead_bytes = {overhead_bytes} needs {key}.rate_mbps: it counts toward the rate limit"
        ));
    }
    if !(-1500..=1_000_000).contains(&overhead_bytes) {
        return err(format!(
            "{key}.overhead_bytes = {overhead_bytes} is out of range: use -1500 to 1000000"
        ));
    }
    let capacity = c.capacity.unwrap_or(LINK_DEFAULT_CAPACITY);
    if capacity == 0 || capacity > 1 << 24 {
        return err(format!(
            "{key}.capacity = {capacity} is out of range: use 1 to 16777216"
        ));
    }
    Ok(LinkParams {
        delay,
        loss: loss_model(&format!("{key}.loss"), c.loss.as_ref())?,
        rate,
        overhead_bytes,
        duplicate: probability(&format!("{key}.duplicate"), c.duplicate, 0.0)?,
        reorder: probability(&format!("{key}.reorder"), c.reorder, 0.0)?,
        capacity,
        seed: c.seed.unwrap_or(1),
    })
}

/// The delay distribution named by `{key}.distribution` (default uniform).
fn delay_distribution(
    key: &str,
    name: Option<&str>,
    trace_file: Option<&str>,
    base_dir: &Path,
) -> Result<Distribution, ConfigError> {
    Ok(match name.unwrap_or("uniform") {
        "uniform" => Distribution::Uniform,
        "normal" => Distribution::Normal,
        "exponential" => Distribution::Exponential,
        "trace" => {
            let Some(file) = trace_file else {
                return err(format!(
                    "{key}.distribution = \"trace\" needs {key}.trace_file"
                ));
            };
            let (text, path) = read(base_dir, &format!("{key}.trace_file"), file)?;
            Distribution::Trace(
                DelaySampler::parse_trace(&text, &path).map_err(|e| ConfigError(e.0))?,
            )
        }
        other => {
            return err(format!(
                "{key}.distribution = \"{other}\" is not known: use uniform, normal, exponential or trace"
            ))
        }
    })
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
    /// `[dut.link]`.
    pub link: Option<LinkConfig>,
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
            let dist = delay_distribution(
                "dut.delayer",
                c.distribution.as_deref(),
                c.trace_file.as_deref(),
                &ctx.base_dir,
            )?;
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
        "link" => {
            let c = f.link.clone().unwrap_or_default();
            if c.reverse.is_some() {
                return err("dut.link.reverse applies to dut.kind = \"link\" only: a pipeline's link function carries one direction");
            }
            Box::new(LinkEmulator::new(link_params(
                &c,
                "dut.link",
                &ctx.base_dir,
            )?))
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

    /// `nflab run` checks a link DuT's config on its main thread three times
    /// per run; each check built a delay line that filled that thread's packet
    /// pool by 16,384 buffers (32 MiB) which nothing ever freed, so a sweep
    /// grew by about 100 MB a run. Checking and building must leave this
    /// thread's pool as it was.
    #[test]
    fn checking_and_building_a_delay_function_leaves_no_buffers_behind() {
        let mut c = f();
        c.link = Some(LinkConfig {
            delay_us: Some(7610.0),
            jitter_us: Some(1050.0),
            distribution: Some("normal".into()),
            rate_mbps: Some(53.3),
            queue_packets: Some(100),
            ..Default::default()
        });
        c.delayer = Some(DelayerConfig {
            delay_us: 100.0,
            ..Default::default()
        });
        let ctx = BuildContext {
            in_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            out_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            next_hop_mac: MacAddr([2, 0, 0, 0, 0, 3]),
            icmp_source: Ipv4Addr::new(198, 18, 0, 2),
            default_routes: vec![],
            base_dir: ".".into(),
            instance: 0,
        };
        let pipeline: Vec<String> = vec!["link".into(), "delayer".into()];
        let (free0, fresh0) = (
            crate::packet::pool_free(),
            crate::packet::pool_allocations(),
        );
        for run in 0..12 {
            validate(&pipeline, &c, Path::new("."), &[]).unwrap();
            let apps = build_chain(&pipeline, &c, &ctx).unwrap();
            // The apps still ask for their buffers, from the worker that runs them.
            let reserve: usize = apps.iter().map(|a| a.pool_reserve()).sum();
            assert_eq!(reserve, LINK_DEFAULT_CAPACITY + (1 << 16), "run {run}");
            drop(apps);
            assert_eq!(crate::packet::pool_free(), free0, "run {run}");
            assert_eq!(crate::packet::pool_allocations(), fresh0, "run {run}");
        }
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
    fn bad_link_keys_are_named_in_one_sentence() {
        let bad = |toml_text: &str, want: &str| {
            let c: LinkConfig = toml::from_str(toml_text).unwrap();
            let fc = FunctionConfigs {
                link: Some(c),
                ..f()
            };
            let e = validate(&["link".into()], &fc, Path::new("."), &[]).unwrap_err();
            assert!(e.0.contains(want), "{toml_text}: {e}");
            assert_eq!(e.0.lines().count(), 1, "{e}");
        };
        bad(
            "loss = { model = \"bernoulli\", p = 1.5 }",
            "dut.link.loss.p = 1.5 is not a probability",
        );
        bad("loss = { model = \"bernoulli\" }", "needs p");
        bad(
            "loss = { model = \"bernoulli\", p = 0.1, r = 0.2 }",
            "dut.link.loss.r does not apply",
        );
        bad(
            "loss = { model = \"markov\", p = 0.1 }",
            "dut.link.loss.model = \"markov\" is not known",
        );
        bad(
            "loss = { model = \"gilbert-elliott\", p = 0.1, \"1-h\" = -0.1 }",
            "dut.link.loss.\"1-h\" = -0.1",
        );
        bad("rate_mbps = 0", "dut.link.rate_mbps = 0 is not valid");
        bad(
            "queue_packets = 10",
            "dut.link.queue_packets = 10 needs dut.link.rate_mbps",
        );
        bad(
            "rate_mbps = 10\nqueue_packets = 0",
            "dut.link.queue_packets = 0 is out of range",
        );
        bad("duplicate = 2", "dut.link.duplicate = 2");
        bad(
            "overhead_bytes = 24",
            "dut.link.overhead_bytes = 24 needs dut.link.rate_mbps",
        );
        bad("reorder = -1", "dut.link.reorder = -1");
        bad("delay_us = 10\njitter_us = 10", "jitter_us may be at most");
        bad(
            "distribution = \"pareto\"",
            "dut.link.distribution = \"pareto\" is not known",
        );
        bad("distribution = \"trace\"", "needs dut.link.trace_file");
        bad(
            "[reverse]\ndelay_us = 5",
            "dut.link.reverse applies to dut.kind = \"link\" only",
        );
        let e = toml::from_str::<LinkConfig>("delay_ms = 5").unwrap_err();
        assert!(e.to_string().contains("delay_ms"), "{e}");
    }

    #[test]
    fn the_reverse_direction_overrides_key_by_key() {
        let c: LinkConfig = toml::from_str(
            "delay_us = 100\nrate_mbps = 10\nloss = { model = \"bernoulli\", p = 0.1 }\n[reverse]\ndelay_us = 7\nloss = { model = \"none\" }\n",
        )
        .unwrap();
        let r = c.reversed();
        assert_eq!((r.delay_us, r.rate_mbps), (Some(7.0), Some(10.0)));
        assert_eq!(r.loss.unwrap().model, "none");
        assert_ne!(r.seed, c.seed.or(Some(1)), "directions draw differently");
        assert!(r.reverse.is_none());
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
            link: Option<LinkConfig>,
        }
        let d: Dut = toml::from_str(
            r#"
pipeline = ["extern-dispatch", "l2fwd", "router", "sheep", "delayer", "reorder", "link"]
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
[link]
delay_us = 100
jitter_us = 10
distribution = "normal"
loss = { model = "gilbert-elliott", p = 0.01, r = 0.3, "1-h" = 0.9, "1-k" = 0.001 }
rate_mbps = 54
queue_packets = 50
duplicate = 0.01
reorder = 0.02
"#,
        )
        .unwrap();
        let fc = FunctionConfigs {
            router: d.router,
            delayer: d.delayer,
            reorder: d.reorder,
            sheep: d.sheep,
            extern_dispatch: d.extern_dispatch,
            link: d.link,
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
