//! `[capture]` of the spec: its keys and their check (what runs is in
//! `run::capture`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use nflab_capture::{CaptureConfig, TriggerSpec};

/// `[capture]`: the keys of `nflab capture`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CaptureSection {
    /// Interface in the LoadGen namespace (default: the recorder's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<String>,
    /// Where frames come from: "xdp" or "af_packet" (default: the capture's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<String>,
    /// Memory budget of the ring, e.g. "256MiB".
    #[serde(default = "default_ring")]
    pub ring: String,
    /// libpcap filter expressions, each a trigger.
    #[serde(default)]
    pub trigger: Vec<String>,
    /// The latency anomaly trigger "n:t", e.g. "2:250us".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anomaly: Option<String>,
    /// The loss-burst trigger: a gap of at least this many sequence numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_burst: Option<u64>,
    /// Only packets matching this filter go into the dumps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump_filter: Option<String>,
    /// Seconds kept before a trigger.
    #[serde(default = "default_window_s")]
    pub pre: f64,
    /// Seconds kept after a trigger.
    #[serde(default = "default_window_s")]
    pub post: f64,
}

fn default_ring() -> String {
    "256MiB".into()
}

fn default_window_s() -> f64 {
    1.0
}

/// A bad `[capture]` value: the key (for the spec's line number) and one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadKey {
    /// The key under `[capture]`.
    pub key: &'static str,
    /// What is wrong and what is valid.
    pub message: String,
}

impl std::fmt::Display for BadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn bad(key: &'static str, message: String) -> BadKey {
    BadKey { key, message }
}

impl CaptureSection {
    /// The capture's configuration for `iface`, writing into `out_dir`; a bad
    /// key is one sentence naming it.
    pub fn config(&self, iface: &str, out_dir: &Path) -> Result<CaptureConfig, BadKey> {
        let mut c = CaptureConfig::new(iface, out_dir);
        c.ring_bytes = nflab_capture::parse_size_bytes(&self.ring).ok_or_else(|| {
            bad(
                "ring",
                format!(
                    "capture.ring = {:?} is not a size: use bytes with an optional unit, e.g. \"256MiB\" or \"1GiB\"",
                    self.ring
                ),
            )
        })?;
        for (key, v) in [("pre", self.pre), ("post", self.post)] {
            if !(v.is_finite() && (0.0..=3600.0).contains(&v)) {
                return Err(bad(
                    key,
                    format!("capture.{key} = {v} is not valid: use 0 to 3600 seconds"),
                ));
            }
        }
        c.pre_ns = (self.pre * 1e9) as u64;
        c.post_ns = (self.post * 1e9) as u64;
        if let Some(p) = &self.producer {
            c.producer = p
                .parse()
                .map_err(|e: String| bad("producer", format!("capture.{e}")))?;
        }
        c.dump_filter = self.dump_filter.clone();
        c.triggers = self
            .trigger
            .iter()
            .map(|f| TriggerSpec::Filter(f.clone()))
            .collect();
        if let Some(a) = &self.anomaly {
            let spec = a.parse().map_err(|e| {
                bad(
                    "anomaly",
                    format!(
                        "capture.anomaly = {a:?} is not valid: {e} (use \"n:t\", e.g. \"2:250us\")"
                    ),
                )
            })?;
            c.triggers.push(TriggerSpec::Anomaly(spec));
        }
        match self.loss_burst {
            Some(0) => {
                return Err(bad(
                    "loss_burst",
                    "capture.loss_burst = 0 is not valid: use 1 or more missing packets".into(),
                ))
            }
            Some(k) => c.triggers.push(TriggerSpec::LossBurst(k)),
            None => {}
        }
        // Filters compile now, so a bad one stops the study before its first run.
        let filters = self.trigger.iter().map(|f| ("trigger", f));
        for (key, f) in filters.chain(self.dump_filter.iter().map(|f| ("dump_filter", f))) {
            nflab_capture::trigger::Filter::compile(f)
                .map_err(|e| bad(key, format!("capture.{key}: {e}")))?;
        }
        Ok(c)
    }
}
