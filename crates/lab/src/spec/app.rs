//! `[app]` of the spec: an application that runs across the DuT beside the probes,
//! by `kind`. Running it is the `app` module's job.

use nflab_transport::app::AppSpec;
use serde::{Deserialize, Serialize};

/// `[app]`: an application over the topology, by `kind`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AppSection {
    /// Seed 000's NCSbench: a simulated inverted pendulum and its controller
    /// (`period_ms`, `deadline_ms`, `periods`, `backups`,
    /// `max_consecutive_losses`, `time_scale`, `seed`).
    Ncsbench(nflab_apps::ncs::session::NcsConfig),
    /// Seed 000's wireless PRRT study over the deadline-aware transport
    /// (`gap_ms`, `payload_bytes`, `target_delay_ms`, `window_ms`, `duration_s`,
    /// `outage_threshold_ms`, `redundancy`; `app::prrt`).
    Prrt(PrrtSection),
}

fn default_outage_ms() -> f64 {
    100.0
}

/// `[app]` of `kind = "prrt"` (docs/transport.md): the keys of `nflab-prrt`'s `[app]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrrtSection {
    /// Time between two messages of each direction, ms.
    pub gap_ms: f64,
    /// Message payload, bytes.
    pub payload_bytes: u64,
    /// Target delay, ms.
    pub target_delay_ms: f64,
    /// Receive window, ms (at most the target).
    pub window_ms: f64,
    /// Sending time per run, s.
    pub duration_s: f64,
    /// A longer gap in on-time delivery is an outage, ms.
    #[serde(default = "default_outage_ms")]
    pub outage_threshold_ms: f64,
    /// Block size and proactive share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redundancy: Option<Redundancy>,
    /// No feedback this long and a sender stops (PeerLost), ms (the transport's 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_timeout_ms: Option<f64>,
    /// The plant end vanishes this long after the run's start, s: it stops and closes its
    /// socket mid-run, as a crashed peer would (the controller's sender then stops after
    /// `peer_timeout_ms`; `prrt.json` records the outage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plant_vanishes_s: Option<f64>,
}

/// `app.redundancy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redundancy {
    /// Messages per block (1..=64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
    /// Proactive recovery shards per message of a full block (0..=1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proactive_share: Option<f64>,
}

impl PrrtSection {
    /// The transport's reading of this section: the same checks and sentences as
    /// `nflab-prrt` (`app.window_ms = 20: must not exceed app.target_delay_ms (10)`).
    pub fn app_spec(&self) -> Result<AppSpec, String> {
        let mut t = toml::Table::new();
        t.insert("kind".into(), "prrt".into());
        let float = |v: f64| toml::Value::Float(v);
        t.insert("gap_ms".into(), float(self.gap_ms));
        t.insert(
            "payload_bytes".into(),
            toml::Value::Integer(i64::try_from(self.payload_bytes).unwrap_or(i64::MAX)),
        );
        t.insert("target_delay_ms".into(), float(self.target_delay_ms));
        t.insert("window_ms".into(), float(self.window_ms));
        t.insert("duration_s".into(), float(self.duration_s));
        t.insert(
            "outage_threshold_ms".into(),
            float(self.outage_threshold_ms),
        );
        if let Some(v) = self.peer_timeout_ms {
            t.insert("peer_timeout_ms".into(), float(v));
        }
        if let Some(v) = self.plant_vanishes_s {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!(
                    "app.plant_vanishes_s = {v}: must be above zero (seconds after the run's start)"
                ));
            }
        }
        if let Some(r) = &self.redundancy {
            let mut rt = toml::Table::new();
            if let Some(k) = r.block_size {
                rt.insert(
                    "block_size".into(),
                    toml::Value::Integer(i64::try_from(k).unwrap_or(i64::MAX)),
                );
            }
            if let Some(s) = r.proactive_share {
                rt.insert("proactive_share".into(), float(s));
            }
            t.insert("redundancy".into(), toml::Value::Table(rt));
        }
        AppSpec::from_table(&t).map_err(|e| e.0)
    }
}
