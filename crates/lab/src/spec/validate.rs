//! The checks serde cannot express: value ranges and keys that go together, each
//! refusal one sentence naming the key (with its line where it can be found).

use crate::error::LabError;

use super::*;

impl Spec {
    /// Check value ranges that serde cannot express.
    pub(super) fn validate(&self, text: &str, origin: &str) -> Result<(), LabError> {
        let err = |section: &str, key: &str, message: String| LabError::Spec {
            file: origin.to_string(),
            message: format!("{}{message}", where_is(text, section, key)),
        };
        if self.experiment.name.trim().is_empty()
            || self
                .experiment
                .name
                .chars()
                .any(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        {
            return Err(err(
                "experiment",
                "name",
                format!(
                    "experiment.name = {:?} is not valid: use letters, digits, '-', '_' or '.'",
                    self.experiment.name
                ),
            ));
        }
        if let Some(c) = &self.capture {
            if let Err(e) = c.config("lg1", std::path::Path::new(".")) {
                return Err(err("capture", e.key, e.message));
            }
        }
        if self.experiment.repetitions == 0 {
            return Err(err(
                "experiment",
                "repetitions",
                "experiment.repetitions = 0 is not valid: use 1 or more".into(),
            ));
        }
        // Every run's plan holds its resolved spec: a study of millions of runs would
        // exhaust memory before the first one starts (found by the spec_parse fuzzer).
        let combinations = self.sweep.values().fold(1u64, |n, v| match v {
            toml::Value::Array(a) => n.saturating_mul(a.len().max(1) as u64),
            _ => n,
        });
        let runs = combinations.saturating_mul(u64::from(self.experiment.repetitions));
        if runs > MAX_RUNS {
            return Err(err(
                "experiment",
                "repetitions",
                format!(
                    "the study has {runs} runs ({combinations} sweep combinations × experiment.repetitions = {}): \
                     more than {MAX_RUNS}; split it into several specs (nflab run DIR --resume continues one)",
                    self.experiment.repetitions
                ),
            ));
        }
        let t = &self.traffic;
        if !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&t.frame_bytes) {
            return Err(err(
                "traffic",
                "frame_bytes",
                format!(
                    "traffic.frame_bytes = {} is out of range: use {MIN_FRAME_BYTES} to {MAX_FRAME_BYTES} \
                     (an IPv4/UDP probe frame including FCS, at MTU 1500)",
                    t.frame_bytes
                ),
            ));
        }
        if !(t.duration_s.is_finite() && t.duration_s > 0.0 && t.duration_s <= 86_400.0) {
            return Err(err(
                "traffic",
                "duration_s",
                format!(
                    "traffic.duration_s = {} is not valid: use a number of seconds above 0 and at most 86400",
                    t.duration_s
                ),
            ));
        }
        if !(t.warmup_s.is_finite() && t.warmup_s >= 0.0 && t.warmup_s <= 3_600.0) {
            return Err(err(
                "traffic",
                "warmup_s",
                format!(
                    "traffic.warmup_s = {} is not valid: use 0 to 3600 seconds",
                    t.warmup_s
                ),
            ));
        }
        if t.tx_timestamp == TxTimestampMode::Kernel {
            if let Some(why) = t.backend.no_kernel_tx_stamps() {
                return Err(err(
                    "traffic",
                    "tx_timestamp",
                    format!(
                        "traffic.tx_timestamp = \"kernel\" needs traffic.backend = \"af_packet\": {why}"
                    ),
                ));
            }
        }
        if let Rate::Pps(p) = t.rate_pps {
            if p > 100.0e6 {
                return Err(err(
                    "traffic",
                    "rate_pps",
                    format!("traffic.rate_pps = {p} is above 100 Mpps, which no backend here reaches: use a lower rate or \"max\""),
                ));
            }
        }
        for a in &self.analysis.anomalies {
            if let Err(e) = a.parse::<nflab_analyze::AnomalySpec>() {
                return Err(err(
                    "analysis",
                    "anomalies",
                    format!("analysis.anomalies: {e}"),
                ));
            }
        }
        self.knobs
            .validate()
            .map_err(|m| err("knobs", "sysctl", m))?;
        if let Some(r) = &self.rfc2544 {
            r.validate().map_err(|m| err("rfc2544", "procedure", m))?;
        }
        crate::spec::pairs::validate(self).map_err(|(key, m)| err("pair", key, m))?;
        if let Some(m) = &self.model {
            m.validate().map_err(|(key, m)| err("model", key, m))?;
        }
        if let Some(cpu) = self.topology.gen_cpu.or(self.topology.rec_cpu) {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            if cpu >= n {
                return Err(err(
                    "topology",
                    if self.topology.gen_cpu == Some(cpu) {
                        "gen_cpu"
                    } else {
                        "rec_cpu"
                    },
                    format!("CPU {cpu} does not exist on this host: use 0 to {}", n - 1),
                ));
            }
        }
        if let Some(AppSection::Prrt(prrt)) = &self.app {
            if let Err(message) = prrt.app_spec() {
                let key = message.split([' ', ':']).next().unwrap_or("app");
                let key = key.strip_prefix("app.").unwrap_or("kind").to_string();
                return Err(err("app", &key, message));
            }
        }
        Ok(())
    }

    /// A priority without the 802.1Q tag that carries it would be lost: refuse it
    /// before the run (what a DuT kind cannot forward, its driver refuses).
    pub(crate) fn check_dut_carries_traffic(&self) -> Result<(), LabError> {
        let t = &self.traffic;
        let pcps = std::iter::once(("traffic.pcp".to_string(), t.pcp)).chain(
            t.background
                .iter()
                .enumerate()
                .map(|(i, b)| (format!("traffic.background[{i}].pcp"), b.pcp)),
        );
        for (key, pcp) in pcps.filter(|(_, p)| *p != 0) {
            if t.vlan.is_none() {
                return Err(LabError::Unsupported(format!(
                    "{key} = {pcp} needs traffic.vlan: the priority travels in the 802.1Q tag"
                )));
            }
        }
        Ok(())
    }
}

/// "line N: " of `key` inside `[section]`, or "" if it cannot be found.
pub(crate) fn where_is(text: &str, section: &str, key: &str) -> String {
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.starts_with('[') {
            current = l.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            continue;
        }
        if current == section {
            let k = l.split('=').next().unwrap_or("").trim().trim_matches('"');
            if k == key {
                return format!("line {}: ", i + 1);
            }
        }
    }
    String::new()
}
