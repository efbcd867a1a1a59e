//! `[traffic]` of the spec: the probe stream and its background streams, their
//! patterns, rates and backends.

use serde::{Deserialize, Serialize};

use super::defaults::*;

/// `[traffic]`: the probe stream (recorded per packet) and its background streams
/// (`[[traffic.background]]`, counted only). Pattern parameters are documented in
/// `docs/generator.md`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrafficSection {
    /// I/O backend of the generator (the recorder always reads an AF_PACKET ring, for
    /// kernel RX timestamps).
    #[serde(default)]
    pub backend: Backend,
    /// Traffic pattern.
    #[serde(default)]
    pub pattern: Pattern,
    /// Packets per second, or "max".
    #[serde(default)]
    pub rate_pps: Rate,
    /// Bits per second instead of `rate_pps`, counted as `rate_accounting` says.
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// "l1" (frame + 20 B preamble/SFD/IFG, the default) or "l2" (frame with FCS).
    #[serde(default)]
    pub rate_accounting: RateAccounting,
    /// Ethernet frame size including the 4-byte FCS (RFC 2544 convention).
    #[serde(default = "default_frame_bytes")]
    pub frame_bytes: u64,
    /// Measured duration in seconds (after warm-up).
    #[serde(default = "default_duration_s")]
    pub duration_s: f64,
    /// Warm-up in seconds: sent, but excluded from the analysis.
    #[serde(default = "default_warmup_s")]
    pub warmup_s: f64,
    /// How long the recorder keeps listening after the last packet, in ms.
    #[serde(default = "default_drain_ms")]
    pub drain_ms: u64,
    /// burst: packets back to back per burst.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// onoff: length of an on period, ms.
    #[serde(default = "default_on_off_ms")]
    pub on_ms: f64,
    /// onoff: length of an off period, ms.
    #[serde(default = "default_on_off_ms")]
    pub off_ms: f64,
    /// periodic: cycles per second.
    #[serde(default)]
    pub frequency_hz: Option<f64>,
    /// periodic: packets per cycle.
    #[serde(default = "default_one_u32")]
    pub per_cycle: u32,
    /// replay: pcap or pcapng file (relative to the working directory).
    #[serde(default)]
    pub trace: Option<String>,
    /// replay: speed-up factor (2 = twice as fast).
    #[serde(default = "default_speed")]
    pub speed: f64,
    /// Frame sizes sent in turn (a sweep within the run), instead of `frame_bytes`.
    #[serde(default)]
    pub sizes: Option<Vec<u64>>,
    /// Weights for `sizes`: sizes are then drawn at random with these weights.
    #[serde(default)]
    pub size_weights: Option<Vec<f64>>,
    /// "imix": 64, 594 and 1518 B in the ratio 7:4:1.
    #[serde(default)]
    pub size_mix: Option<String>,
    /// A sweep `[from, to, step]`, sent in turn.
    #[serde(default)]
    pub size_sweep: Option<[u64; 3]>,
    /// Number of flows, taken round robin.
    #[serde(default = "default_one_u32")]
    pub flows: u32,
    /// Fields that differ per flow: any of src_ip, dst_ip, src_port, dst_port.
    #[serde(default = "default_vary")]
    pub vary: Vec<String>,
    /// DSCP (0..63).
    #[serde(default)]
    pub dscp: u8,
    /// 802.1Q priority code point (0..7), with `traffic.vlan`.
    #[serde(default)]
    pub pcp: u8,
    /// IP version of every stream: 4 or 6.
    #[serde(default = "default_ip_version")]
    pub ip_version: u8,
    /// 802.1Q VLAN ID of every stream (none: untagged).
    #[serde(default)]
    pub vlan: Option<u16>,
    /// TX threads, each with its own socket (or AF_XDP queue) and pacer.
    #[serde(default = "default_one_usize")]
    pub tx_threads: usize,
    /// Largest number of frames handed to the backend at once.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Run the TX threads under SCHED_FIFO, so a busy host cannot preempt the pacer.
    #[serde(default)]
    pub tx_realtime: bool,
    /// Which TX timestamp the records carry: "app" (the generator's, in the probe) or
    /// "kernel" (the kernel's stamp of the hand-over to the device, or the NIC's where it
    /// stamps in hardware; see docs/generator.md).
    #[serde(default)]
    pub tx_timestamp: TxTimestampMode,
    /// Background streams sent with the probe stream, counted but not recorded.
    #[serde(default)]
    pub background: Vec<BackgroundStream>,
    /// Which way the probes cross the DuT: "forward" (the generator's port to the
    /// recorder's, the default), "reverse" (the recorder's port to the generator's) or
    /// "both" (each port sends its own probe stream and records the other's).
    #[serde(default, skip_serializing_if = "Direction::is_forward")]
    pub direction: Direction,
}

impl Default for TrafficSection {
    fn default() -> Self {
        let k = StreamKeys::default();
        TrafficSection {
            backend: Backend::default(),
            pattern: Pattern::default(),
            rate_pps: Rate::default(),
            rate_bps: None,
            rate_accounting: RateAccounting::default(),
            frame_bytes: default_frame_bytes(),
            duration_s: default_duration_s(),
            warmup_s: default_warmup_s(),
            drain_ms: default_drain_ms(),
            burst: k.burst,
            on_ms: k.on_ms,
            off_ms: k.off_ms,
            frequency_hz: k.frequency_hz,
            per_cycle: k.per_cycle,
            trace: k.trace,
            speed: k.speed,
            sizes: k.sizes,
            size_weights: k.size_weights,
            size_mix: k.size_mix,
            size_sweep: k.size_sweep,
            flows: k.flows,
            vary: k.vary,
            dscp: k.dscp,
            pcp: k.pcp,
            ip_version: default_ip_version(),
            vlan: None,
            tx_threads: 1,
            batch: default_batch(),
            tx_realtime: false,
            tx_timestamp: TxTimestampMode::default(),
            background: Vec::new(),
            direction: Direction::default(),
        }
    }
}

/// How bits per second are counted.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum RateAccounting {
    /// Frame + 20 B of preamble, SFD and inter-frame gap.
    #[default]
    L1,
    /// Frame with FCS only.
    L2,
}

/// Pattern parameters, sizes and flows of one stream: the keys `[traffic]` and every
/// `[[traffic.background]]` share (kept in sync by hand: serde's `flatten` would lose
/// the line numbers of unknown-key errors).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamKeys {
    /// burst: packets back to back per burst.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// onoff: length of an on period, ms.
    #[serde(default = "default_on_off_ms")]
    pub on_ms: f64,
    /// onoff: length of an off period, ms.
    #[serde(default = "default_on_off_ms")]
    pub off_ms: f64,
    /// periodic: cycles per second.
    #[serde(default)]
    pub frequency_hz: Option<f64>,
    /// periodic: packets per cycle.
    #[serde(default = "default_one_u32")]
    pub per_cycle: u32,
    /// replay: pcap or pcapng file (relative to the working directory).
    #[serde(default)]
    pub trace: Option<String>,
    /// replay: speed-up factor (2 = twice as fast).
    #[serde(default = "default_speed")]
    pub speed: f64,
    /// Frame sizes sent in turn (a sweep within the run), instead of `frame_bytes`.
    #[serde(default)]
    pub sizes: Option<Vec<u64>>,
    /// Weights for `sizes`: sizes are then drawn at random with these weights.
    #[serde(default)]
    pub size_weights: Option<Vec<f64>>,
    /// "imix": 64, 594 and 1518 B in the ratio 7:4:1.
    #[serde(default)]
    pub size_mix: Option<String>,
    /// A sweep `[from, to, step]`, sent in turn.
    #[serde(default)]
    pub size_sweep: Option<[u64; 3]>,
    /// Number of flows, taken round robin.
    #[serde(default = "default_one_u32")]
    pub flows: u32,
    /// Fields that differ per flow: any of src_ip, dst_ip, src_port, dst_port.
    #[serde(default = "default_vary")]
    pub vary: Vec<String>,
    /// DSCP (0..63).
    #[serde(default)]
    pub dscp: u8,
    /// 802.1Q priority code point (0..7), with `traffic.vlan`.
    #[serde(default)]
    pub pcp: u8,
}

impl Default for StreamKeys {
    fn default() -> Self {
        StreamKeys {
            burst: default_burst(),
            on_ms: default_on_off_ms(),
            off_ms: default_on_off_ms(),
            frequency_hz: None,
            per_cycle: 1,
            trace: None,
            speed: default_speed(),
            sizes: None,
            size_weights: None,
            size_mix: None,
            size_sweep: None,
            flows: 1,
            vary: default_vary(),
            dscp: 0,
            pcp: 0,
        }
    }
}

/// `[[traffic.background]]`: a stream that is sent with the probe stream and counted,
/// not recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackgroundStream {
    /// Traffic pattern.
    #[serde(default)]
    pub pattern: Pattern,
    /// Packets per second.
    #[serde(default)]
    pub rate_pps: Rate,
    /// Bits per second instead of `rate_pps`.
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// "l1" or "l2".
    #[serde(default)]
    pub rate_accounting: RateAccounting,
    /// Frame size including FCS.
    #[serde(default = "default_frame_bytes")]
    pub frame_bytes: u64,
    /// burst: packets back to back per burst.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// onoff: length of an on period, ms.
    #[serde(default = "default_on_off_ms")]
    pub on_ms: f64,
    /// onoff: length of an off period, ms.
    #[serde(default = "default_on_off_ms")]
    pub off_ms: f64,
    /// periodic: cycles per second.
    #[serde(default)]
    pub frequency_hz: Option<f64>,
    /// periodic: packets per cycle.
    #[serde(default = "default_one_u32")]
    pub per_cycle: u32,
    /// replay: pcap or pcapng file (relative to the working directory).
    #[serde(default)]
    pub trace: Option<String>,
    /// replay: speed-up factor (2 = twice as fast).
    #[serde(default = "default_speed")]
    pub speed: f64,
    /// Frame sizes sent in turn (a sweep within the run), instead of `frame_bytes`.
    #[serde(default)]
    pub sizes: Option<Vec<u64>>,
    /// Weights for `sizes`: sizes are then drawn at random with these weights.
    #[serde(default)]
    pub size_weights: Option<Vec<f64>>,
    /// "imix": 64, 594 and 1518 B in the ratio 7:4:1.
    #[serde(default)]
    pub size_mix: Option<String>,
    /// A sweep `[from, to, step]`, sent in turn.
    #[serde(default)]
    pub size_sweep: Option<[u64; 3]>,
    /// Number of flows, taken round robin.
    #[serde(default = "default_one_u32")]
    pub flows: u32,
    /// Fields that differ per flow: any of src_ip, dst_ip, src_port, dst_port.
    #[serde(default = "default_vary")]
    pub vary: Vec<String>,
    /// DSCP (0..63).
    #[serde(default)]
    pub dscp: u8,
    /// 802.1Q priority code point (0..7), with `traffic.vlan`.
    #[serde(default)]
    pub pcp: u8,
}

impl TrafficSection {
    /// The probe stream's pattern parameters, sizes and flows.
    pub fn keys(&self) -> StreamKeys {
        StreamKeys {
            burst: self.burst,
            on_ms: self.on_ms,
            off_ms: self.off_ms,
            frequency_hz: self.frequency_hz,
            per_cycle: self.per_cycle,
            trace: self.trace.clone(),
            speed: self.speed,
            sizes: self.sizes.clone(),
            size_weights: self.size_weights.clone(),
            size_mix: self.size_mix.clone(),
            size_sweep: self.size_sweep,
            flows: self.flows,
            vary: self.vary.clone(),
            dscp: self.dscp,
            pcp: self.pcp,
        }
    }
}

impl BackgroundStream {
    /// This stream's pattern parameters, sizes and flows.
    pub fn keys(&self) -> StreamKeys {
        StreamKeys {
            burst: self.burst,
            on_ms: self.on_ms,
            off_ms: self.off_ms,
            frequency_hz: self.frequency_hz,
            per_cycle: self.per_cycle,
            trace: self.trace.clone(),
            speed: self.speed,
            sizes: self.sizes.clone(),
            size_weights: self.size_weights.clone(),
            size_mix: self.size_mix.clone(),
            size_sweep: self.size_sweep,
            flows: self.flows,
            vary: self.vary.clone(),
            dscp: self.dscp,
            pcp: self.pcp,
        }
    }
}

pub(crate) fn default_ip_version() -> u8 {
    4
}
pub(crate) fn default_one_usize() -> usize {
    1
}
pub(crate) fn default_one_u32() -> u32 {
    1
}
pub(crate) fn default_batch() -> usize {
    32
}
pub(crate) fn default_burst() -> u32 {
    8
}
pub(crate) fn default_on_off_ms() -> f64 {
    10.0
}
pub(crate) fn default_speed() -> f64 {
    1.0
}
pub(crate) fn default_vary() -> Vec<String> {
    vec!["src_port".into()]
}

/// I/O backend.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// AF_XDP sockets.
    AfXdp,
    /// XDP live frames: the kernel stamps and sends every frame
    /// (`nflab_gen::live`); one flow of one size, IPv4.
    XdpLive,
    /// AF_PACKET with TPACKET_V3 rings.
    #[default]
    AfPacket,
    /// Plain UDP sockets.
    Udp,
}

impl Backend {
    /// Name as written in the spec.
    pub fn as_str(&self) -> &'static str {
        match self {
            Backend::AfXdp => "af_xdp",
            Backend::XdpLive => "xdp_live",
            Backend::AfPacket => "af_packet",
            Backend::Udp => "udp",
        }
    }

    /// Why this backend cannot give kernel TX timestamps (`SO_TIMESTAMPING`); `None` for
    /// the socket backends that can (af_packet, udp). The spec and `nflab gen` both ask.
    pub fn no_kernel_tx_stamps(&self) -> Option<&'static str> {
        match self {
            Backend::AfXdp => {
                Some("AF_XDP frames bypass the kernel's TX path and get no kernel TX timestamp")
            }
            Backend::XdpLive => Some(
                "xdp_live frames get no SO_TIMESTAMPING stamp; their tx stamp is already \
                 taken in the kernel, by the XDP program (\"kernel-xdp\")",
            ),
            Backend::AfPacket | Backend::Udp => None,
        }
    }
}

/// `traffic.tx_timestamp`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum TxTimestampMode {
    /// The generator's `CLOCK_REALTIME` stamp, written into the probe.
    #[default]
    App,
    /// The kernel's TX timestamp, matched to the probe after the send.
    Kernel,
}

impl TxTimestampMode {
    /// Name as written in the spec.
    pub fn as_str(&self) -> &'static str {
        match self {
            TxTimestampMode::App => "app",
            TxTimestampMode::Kernel => "kernel",
        }
    }
}

/// `traffic.direction`: which way the probes cross the DuT.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the generator's port (lg0, `tx_iface`) to the recorder's (lg1, `rx_iface`).
    #[default]
    Forward,
    /// From the recorder's port to the generator's.
    Reverse,
    /// Both at once, each with its own probe stream.
    Both,
}

impl Direction {
    /// Name as written in the spec.
    pub fn as_str(&self) -> &'static str {
        match self {
            Direction::Forward => "forward",
            Direction::Reverse => "reverse",
            Direction::Both => "both",
        }
    }

    /// The default, left out of a written spec.
    pub fn is_forward(&self) -> bool {
        *self == Direction::Forward
    }

    /// Whether probes go the reverse way at all.
    pub fn has_reverse(&self) -> bool {
        *self != Direction::Forward
    }
}

/// Traffic pattern.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Constant bit rate.
    #[default]
    Cbr,
    /// Poisson arrivals.
    Poisson,
    /// Back-to-back bursts.
    Burst,
    /// On/off.
    Onoff,
    /// Periodic real-time flow.
    Periodic,
    /// Trace replay.
    Replay,
}

impl Pattern {
    /// Name as written in the spec.
    pub fn as_str(&self) -> &'static str {
        match self {
            Pattern::Cbr => "cbr",
            Pattern::Poisson => "poisson",
            Pattern::Burst => "burst",
            Pattern::Onoff => "onoff",
            Pattern::Periodic => "periodic",
            Pattern::Replay => "replay",
        }
    }
}

/// A packet rate: a number of packets per second, or "max".
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Exactly this many packets per second.
    Pps(f64),
    /// As fast as the backend sends.
    Max,
}

impl Default for Rate {
    fn default() -> Self {
        Rate::Pps(10_000.0)
    }
}

impl Rate {
    /// Packets per second, or None for "max".
    pub fn pps(&self) -> Option<f64> {
        match self {
            Rate::Pps(p) => Some(*p),
            Rate::Max => None,
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rate::Pps(p) => write!(f, "{p}"),
            Rate::Max => f.write_str("max"),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rate::Pps(p) if p.fract() == 0.0 && *p < 9.0e15 => s.serialize_i64(*p as i64),
            Rate::Pps(p) => s.serialize_f64(*p),
            Rate::Max => s.serialize_str("max"),
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a positive number of packets per second or \"max\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Rate, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Rate, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Rate, E> {
                if v.is_finite() && v > 0.0 {
                    Ok(Rate::Pps(v))
                } else {
                    Err(E::custom(format!(
                        "rate {v} is not valid: use a positive number of packets per second or \"max\""
                    )))
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Rate, E> {
                if v == "max" {
                    Ok(Rate::Max)
                } else {
                    Err(E::custom(format!(
                        "rate \"{v}\" is not valid: use a positive number of packets per second or \"max\""
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Smallest frame that holds Ethernet + IPv4 + UDP + the 18-byte probe + FCS.
pub const MIN_FRAME_BYTES: u64 = 64;
/// Largest untagged frame at the default MTU of 1500 (1500 + 14 + 4).
pub const MAX_FRAME_BYTES: u64 = 1518;
