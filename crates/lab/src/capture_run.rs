//! `[capture]`: a FlowScope-style capture during each run, on the recorder's
//! interface unless `iface` names another in the LoadGen namespace. Output in
//! `runs/NNN/capture/` (`capture.json`, `dump-NNN.pcapng`).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

use nflab_capture::{CaptureConfig, CaptureReport, Control, TriggerSpec};

use crate::error::LabError;
use crate::topology::Topology;

/// `[capture]`: the keys of `nflab capture`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CaptureSection {
    /// Interface in the LoadGen namespace (default: the recorder's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<String>,
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

/// A capture running beside a run's traffic.
pub struct RunningCapture {
    ctl: Control,
    thread: JoinHandle<Result<CaptureReport, String>>,
}

/// Open the capture in the LoadGen namespace (every socket ready when this
/// returns) and let it run until [`RunningCapture::stop`].
pub fn start(
    section: &CaptureSection,
    topo: &Topology,
    out_dir: &Path,
) -> Result<RunningCapture, LabError> {
    let iface = section
        .iface
        .clone()
        .unwrap_or_else(|| topo.rec_iface.clone());
    let cfg = section
        .config(&iface, out_dir)
        .map_err(|e| LabError::Other(e.message))?;
    let ns = topo.lg_ns.clone();
    let ctl = Control::default();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let thread = {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            let opened = crate::netns::NetnsGuard::enter(&ns)
                .map_err(|e| e.to_string())
                .and_then(|guard| {
                    nflab_capture::Capture::open(&cfg)
                        .map(|c| (guard, c))
                        .map_err(|e| e.to_string())
                });
            match opened {
                Ok((_guard, capture)) => {
                    let _ = ready_tx.send(Ok(()));
                    capture.run(&ctl, None).map_err(|e| e.to_string())
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.clone()));
                    Err(e)
                }
            }
        })
    };
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(RunningCapture { ctl, thread }),
        Ok(Err(e)) => Err(LabError::Other(format!("capture on {iface}: {e}"))),
        Err(_) => Err(LabError::Other(format!(
            "capture on {iface}: its thread ended before it was ready"
        ))),
    }
}

impl RunningCapture {
    /// End the capture; its dumps and `capture.json` are written when this returns.
    pub fn stop(self) -> Result<CaptureReport, LabError> {
        self.ctl.stop.store(true, Ordering::Relaxed);
        match self.thread.join() {
            Ok(r) => r.map_err(LabError::Other),
            Err(_) => Err(LabError::Other("the capture thread panicked".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(toml_text: &str) -> CaptureSection {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn keys_map_onto_the_capture_config() {
        let s = section(
            "ring = \"64MiB\"\ntrigger = [\"udp port 7\"]\nanomaly = \"2:250us\"\nloss_burst = 3\npre = 0.5\npost = 0.25\n",
        );
        let c = s.config("lg1", Path::new("/tmp/x")).unwrap();
        assert_eq!(c.ring_bytes, 64 << 20);
        assert_eq!((c.pre_ns, c.post_ns), (500_000_000, 250_000_000));
        assert_eq!(c.triggers.len(), 3);
    }

    #[test]
    fn bad_values_are_one_sentence_naming_the_key() {
        for (text, key, said) in [
            ("ring = \"big\"", "ring", "capture.ring"),
            ("pre = -1.0", "pre", "capture.pre"),
            ("anomaly = \"2\"", "anomaly", "capture.anomaly"),
            ("loss_burst = 0", "loss_burst", "capture.loss_burst"),
            ("trigger = [\"udp port x\"]", "trigger", "udp port x"),
            (
                "dump_filter = \"udp port x\"",
                "dump_filter",
                "capture.dump_filter",
            ),
        ] {
            let e = section(text)
                .config("lg1", Path::new("/tmp/x"))
                .unwrap_err();
            assert_eq!(e.key, key, "{text}");
            let e = e.message;
            assert!(e.contains(said) && !e.contains('\n'), "{text}: {e}");
        }
        assert!(toml::from_str::<CaptureSection>("rings = \"1GiB\"").is_err());
    }
}
