//! The transport's parameters and their checks. Every bound named here is what keeps a
//! queue finite; what overflows one is dropped and counted (see the stats).

use crate::{coding::RECORD_OVERHEAD, wire, MAX_BLOCK};

/// IPv4 + UDP header bytes below the transport's datagram.
pub const IP_UDP_OVERHEAD_BYTES: usize = 28;

/// Parameters of one direction of a connection (the sender's and the receiver's side use
/// the same struct; each reads what concerns it).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Target delay: a message must reach the receiving application within this time of
    /// its `send()` (m1), or it is discarded and counted.
    pub target_delay_ns: u64,
    /// Messages per coding block (`k`, 1..=64).
    pub block_size: u8,
    /// Recovery shards sent as soon as a block closes (proactive redundancy).
    pub proactive_parity: u8,
    /// Recovery shards a block is encoded with in all (`r`, ≥ proactive_parity, ≤ 64); the
    /// ones beyond the proactive ones are the budget for reactive redundancy.
    pub max_parity: u8,
    /// A block not yet full closes when its first message is this old, so a slow or
    /// stopping application still gets its messages protected.
    pub block_timeout_ns: u64,
    /// Reactive redundancy goes out when a block has no complete ack this long after its
    /// last recovery shard, on top of the smoothed RTT and the feedback interval.
    pub reactive_margin_ns: u64,
    /// RTT assumed before the first sample.
    pub initial_rtt_ns: u64,
    /// With no feedback for this long the sender stops and reports the peer lost.
    pub peer_timeout_ns: u64,
    /// A heartbeat goes out after this long without any other datagram.
    pub heartbeat_interval_ns: u64,
    /// The receiver sends feedback at least this often while datagrams arrive.
    pub feedback_interval_ns: u64,
    /// Messages waiting in the sender for the pacer (full: `send()` refuses, counted).
    pub send_queue_cap: usize,
    /// Messages held by the receiver for the application (full: the newest is dropped, counted).
    pub recv_buffer_cap: usize,
    /// Blocks kept for coding on each side (full: the oldest is given up, counted).
    pub max_open_blocks: usize,
    /// Pacing never goes below this rate, whatever the delivery-rate estimate says.
    pub min_pacing_bps: u64,
    /// Bytes the pacer may send back to back.
    pub pacing_burst_bytes: u64,
    /// IP MTU of the path; bounds the payload.
    pub mtu_bytes: usize,
    /// Both ends read the same clock (one host, or PTP): deadlines need no offset. Off, the
    /// sender adds its NTP-style offset estimate to every deadline.
    pub shared_clock: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            target_delay_ns: 10_000_000,
            block_size: 16,
            proactive_parity: 2,
            max_parity: 16,
            block_timeout_ns: 5_000_000,
            reactive_margin_ns: 1_000_000,
            initial_rtt_ns: 10_000_000,
            peer_timeout_ns: 5_000_000_000,
            heartbeat_interval_ns: 50_000_000,
            feedback_interval_ns: 2_000_000,
            send_queue_cap: 1024,
            recv_buffer_cap: 4096,
            max_open_blocks: 64,
            min_pacing_bps: 10_000_000,
            pacing_burst_bytes: 3000,
            mtu_bytes: 1500,
            shared_clock: true,
        }
    }
}

/// A parameter out of range; the message names it and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value}: {allowed}")]
pub struct ConfigError {
    /// The parameter.
    pub key: &'static str,
    /// Its value as given.
    pub value: String,
    /// What is valid.
    pub allowed: String,
}

fn bad(key: &'static str, value: impl ToString, allowed: impl Into<String>) -> ConfigError {
    ConfigError {
        key,
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

impl Config {
    /// The largest message payload the MTU allows (a recovery shard of it must fit too).
    pub fn max_payload_bytes(&self) -> usize {
        let datagram = self.mtu_bytes.saturating_sub(IP_UDP_OVERHEAD_BYTES);
        let shard = datagram.saturating_sub(wire::PARITY_HEADER_LEN) & !1;
        shard.saturating_sub(RECORD_OVERHEAD)
    }

    /// Check every parameter; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("target_delay_ns", self.target_delay_ns),
            ("block_timeout_ns", self.block_timeout_ns),
            ("initial_rtt_ns", self.initial_rtt_ns),
            ("peer_timeout_ns", self.peer_timeout_ns),
            ("heartbeat_interval_ns", self.heartbeat_interval_ns),
            ("feedback_interval_ns", self.feedback_interval_ns),
            ("min_pacing_bps", self.min_pacing_bps),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(bad(key, value, "must be above zero"));
            }
        }
        if self.block_size == 0 || usize::from(self.block_size) > MAX_BLOCK {
            return Err(bad(
                "block_size",
                self.block_size,
                format!("must be 1..={MAX_BLOCK}"),
            ));
        }
        if usize::from(self.max_parity) > MAX_BLOCK || self.max_parity == 0 {
            return Err(bad(
                "max_parity",
                self.max_parity,
                format!("must be 1..={MAX_BLOCK}"),
            ));
        }
        if self.proactive_parity > self.max_parity {
            return Err(bad(
                "proactive_parity",
                self.proactive_parity,
                format!("must be at most max_parity ({})", self.max_parity),
            ));
        }
        for (key, cap) in [
            ("send_queue_cap", self.send_queue_cap),
            ("recv_buffer_cap", self.recv_buffer_cap),
            ("max_open_blocks", self.max_open_blocks),
        ] {
            if cap == 0 {
                return Err(bad(key, cap, "must be above zero"));
            }
        }
        let min_mtu = IP_UDP_OVERHEAD_BYTES + wire::PARITY_HEADER_LEN + RECORD_OVERHEAD + 2;
        if self.mtu_bytes < min_mtu || self.mtu_bytes > 65_535 {
            return Err(bad(
                "mtu_bytes",
                self.mtu_bytes,
                format!("must be {min_mtu}..=65535"),
            ));
        }
        if self.pacing_burst_bytes < self.mtu_bytes as u64 {
            return Err(bad(
                "pacing_burst_bytes",
                self.pacing_burst_bytes,
                format!("must be at least mtu_bytes ({})", self.mtu_bytes),
            ));
        }
        Ok(())
    }

    /// Check a receive window against the target delay: a window wider than the target
    /// would hand out messages before they could possibly have been sent.
    pub fn check_window(&self, window_ns: u64) -> Result<(), ConfigError> {
        if window_ns > self.target_delay_ns {
            return Err(bad(
                "window",
                format!("{window_ns} ns"),
                format!(
                    "must not exceed the target delay ({} ns)",
                    self.target_delay_ns
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn default_is_valid_and_fits_the_seed_payloads() {
        let c = Config::default();
        assert_eq!(c.validate(), Ok(()));
        // 1500 − 28 (IP, UDP) − 32 (parity header) − 18 (record) = 1422.
        assert_eq!(c.max_payload_bytes(), 1422);
        assert!(c.max_payload_bytes() >= 1400);
    }

    #[test]
    fn errors_name_the_key() {
        let c = Config {
            proactive_parity: 9,
            max_parity: 4,
            ..Config::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "proactive_parity");
        assert!(e
            .to_string()
            .starts_with("proactive_parity = 9: must be at most max_parity (4)"));
        let c = Config {
            block_size: 65,
            ..Config::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "block_size");
        let c = Config {
            target_delay_ns: 0,
            ..Config::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "target_delay_ns");
        assert_eq!(
            Config::default().check_window(20_000_000).unwrap_err().key,
            "window"
        );
        assert_eq!(Config::default().check_window(2_000_000), Ok(()));
    }
}
