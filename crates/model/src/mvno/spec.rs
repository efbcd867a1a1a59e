//! The MVNO spec file (TOML): the seed's Table 4.6 and timers as defaults,
//! every key optional. Checked into a [`MvnoConfig`]; a bad value is one
//! sentence naming its key (or the sample file's row).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::des::service::{Family, Service};

/// Overload policy (seed 003, Table 4.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Unbounded queues, no dropping.
    Baseline,
    /// Every component's queue holds at most `policing.queue_limit`.
    Dropping,
    /// At most `policing.msu_quota` messages of each type in the system.
    Msu,
    /// At most `policing.device_quota` devices with messages in the system;
    /// a refused device is told to retry after ⌈n_u / hint_rate⌉ s.
    Device,
}

impl Policy {
    /// Parses a CLI value.
    pub fn parse(s: &str) -> Option<Policy> {
        match s {
            "baseline" => Some(Policy::Baseline),
            "dropping" => Some(Policy::Dropping),
            "msu" => Some(Policy::Msu),
            "device" => Some(Policy::Device),
            _ => None,
        }
    }
}

/// How long an SAI holds its AUC processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AucHold {
    /// Seized at key generation, held through CMAP out (incl. its queue)
    /// and the data update: MVNOCoreSim's trajectories; 460/s on 8.
    KeysOutUpdate,
    /// Key generation, then the update on the AUC in parallel with CMAP
    /// out (the thesis's text); ≈ 510/s on 8.
    Parallel,
}

/// The components' processor counts (ISD is infinite-server).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Processors {
    /// CMAP (CAP-MAP router).
    pub cmap: i64,
    /// HLR.
    pub hlr: i64,
    /// AUC.
    pub auc: i64,
    /// Backend (persistent DB).
    pub backend: i64,
}

impl Default for Processors {
    fn default() -> Self {
        Processors {
            cmap: 8,
            hlr: 64,
            auc: 8,
            backend: 128,
        }
    }
}

/// One service step: mean and cv, or a file of measured samples (µs).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// Mean, µs.
    #[serde(default)]
    pub mean_us: Option<f64>,
    /// Coefficient of variation.
    #[serde(default)]
    pub cv: Option<f64>,
    /// A file with one sample (µs) per line; replaces mean and cv.
    #[serde(default)]
    pub samples: Option<PathBuf>,
}

fn step(mean_us: f64, cv: f64) -> StepSpec {
    StepSpec {
        mean_us: Some(mean_us),
        cv: Some(cv),
        samples: None,
    }
}

/// The service steps of Table 4.6.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Steps {
    /// CMAP message in (1).
    pub cmap_in: StepSpec,
    /// HLR profile query (2).
    pub hlr_query: StepSpec,
    /// Backend DB query, Backend cache hit (3).
    pub backend_query_hit: StepSpec,
    /// Backend DB query, Backend cache miss (3).
    pub backend_query_miss: StepSpec,
    /// Insert subscriber data in the visited network (4).
    pub isd: StepSpec,
    /// Backend DB update (5).
    pub backend_update: StepSpec,
    /// AUC key generation (4).
    pub auc_keys: StepSpec,
    /// AUC data update (5.1).
    pub auc_update: StepSpec,
    /// CMAP message out (6 / 5.2).
    pub cmap_out: StepSpec,
}

impl Default for Steps {
    fn default() -> Self {
        Steps {
            cmap_in: step(1659.0, 0.07),
            hlr_query: step(1739.0, 0.06),
            backend_query_hit: step(1877.0, 0.06),
            backend_query_miss: step(70482.0, 0.68),
            isd: step(5998.0, 1.43),
            backend_update: step(13115.0, 0.25),
            auc_keys: step(2886.0, 0.04),
            auc_update: step(4960.0, 0.03),
            cmap_out: step(749.0, 0.14),
        }
    }
}

/// Device timers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// After an SAI, seconds.
    pub sai_s: f64,
    /// After a UL or UL_GPRS, seconds.
    pub ul_s: f64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            sai_s: 6.0,
            ul_s: 15.0,
        }
    }
}

/// Profile caches.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Caches {
    /// HLR profile TTL, seconds (20 min).
    pub hlr_ttl_s: f64,
    /// Backend profile TTL, seconds (24 h).
    pub backend_ttl_s: f64,
}

impl Default for Caches {
    fn default() -> Self {
        Caches {
            hlr_ttl_s: 1200.0,
            backend_ttl_s: 86400.0,
        }
    }
}

/// Parameters of the overload policies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policing {
    /// `dropping`: places in each component's queue.
    pub queue_limit: i64,
    /// `msu`: Q_m, messages of one type in the system.
    pub msu_quota: i64,
    /// `device`: Q_D, devices with a message in the system.
    pub device_quota: i64,
    /// `device`: the retry hint spreads retries to this rate (t_r = ⌈n_u / rate⌉ s).
    pub hint_rate_per_s: f64,
}

impl Default for Policing {
    fn default() -> Self {
        Policing {
            queue_limit: 1000,
            msu_quota: 5000,
            device_quota: 5000,
            hint_rate_per_s: 840.0,
        }
    }
}

/// The spec file; every key has the seed's value as default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MvnoSpec {
    /// New devices per second (Poisson).
    pub rate_per_s: f64,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Seconds trimmed before the means.
    pub warmup_s: f64,
    /// Random seed.
    pub seed: u64,
    /// Overload policy.
    pub policy: Policy,
    /// Family of the mean/cv service times.
    pub family: Family,
    /// AUC hold.
    pub auc_hold: AucHold,
    /// Processors per component.
    pub processors: Processors,
    /// Service steps.
    pub service: Steps,
    /// Device timers.
    pub timeouts: Timeouts,
    /// Caches.
    pub caches: Caches,
    /// Overload policies.
    pub policing: Policing,
}

impl Default for MvnoSpec {
    fn default() -> Self {
        MvnoSpec {
            rate_per_s: 460.0,
            duration_s: 300.0,
            warmup_s: 60.0,
            seed: 1,
            policy: Policy::Baseline,
            family: Family::Gamma,
            auc_hold: AucHold::KeysOutUpdate,
            processors: Processors::default(),
            service: Steps::default(),
            timeouts: Timeouts::default(),
            caches: Caches::default(),
            policing: Policing::default(),
        }
    }
}

/// A spec that cannot be used; the message names the key or row.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// The checked parameters the simulation runs on (times in seconds).
#[derive(Debug, Clone)]
pub struct MvnoConfig {
    /// New devices per second.
    pub rate_per_s: f64,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Seconds trimmed before the means.
    pub warmup_s: f64,
    /// Random seed.
    pub seed: u64,
    /// Overload policy.
    pub policy: Policy,
    /// AUC hold.
    pub auc_hold: AucHold,
    /// Processors: cmap, hlr, auc, backend.
    pub processors: [u32; 4],
    /// Services in [`Steps`] field order.
    pub services: Vec<Service>,
    /// SAI timeout, s.
    pub sai_timeout_s: f64,
    /// UL timeout, s.
    pub ul_timeout_s: f64,
    /// HLR cache TTL, s.
    pub hlr_ttl_s: f64,
    /// Backend cache TTL, s.
    pub backend_ttl_s: f64,
    /// Dropping: queue places per component.
    pub queue_limit: usize,
    /// MSU quota per message type.
    pub msu_quota: u32,
    /// Device quota.
    pub device_quota: u32,
    /// Retry-hint rate.
    pub hint_rate_per_s: f64,
}

fn positive(key: &str, v: f64) -> Result<f64, SpecError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(SpecError(format!(
            "{key} = {v} is not valid: use a positive number"
        )))
    }
}

fn count(key: &str, v: i64, what: &str) -> Result<u32, SpecError> {
    u32::try_from(v)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| SpecError(format!("{key} = {v} is not valid: use at least 1 {what}")))
}

/// Reads a sample file: one duration in µs per line; blank lines and `#`
/// comments skipped. Returns seconds.
pub fn read_samples(key: &str, path: &Path) -> Result<Vec<f64>, SpecError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SpecError(format!("{key}: cannot read {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let row = line.split('#').next().unwrap_or("").trim();
        if row.is_empty() {
            continue;
        }
        match row.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => out.push(v * 1e-6),
            _ => {
                return Err(SpecError(format!(
                    "{key}: {} row {}: {row:?} is not a duration in µs (use a number ≥ 0)",
                    path.display(),
                    i + 1
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(SpecError(format!(
            "{key}: {} holds no samples: give one duration in µs per line",
            path.display()
        )));
    }
    Ok(out)
}

impl MvnoSpec {
    /// Parses TOML; relative sample paths are taken from `base`.
    pub fn from_toml(text: &str, base: &Path) -> Result<MvnoSpec, SpecError> {
        let mut spec: MvnoSpec = toml::from_str(text).map_err(|e| {
            // The message alone does not name the key; the line holding it does.
            let at = e.span().map(|sp| {
                let line = text[..sp.start.min(text.len())].matches('\n').count();
                let row = text.lines().nth(line).unwrap_or("").trim();
                format!(" at line {} ({row:?})", line + 1)
            });
            SpecError(format!(
                "spec{}: {}",
                at.unwrap_or_default(),
                e.message().trim()
            ))
        })?;
        for s in spec.steps_mut() {
            if let Some(p) = s.samples.as_mut() {
                if p.is_relative() {
                    *p = base.join(&*p);
                }
            }
        }
        Ok(spec)
    }

    fn steps_mut(&mut self) -> [&mut StepSpec; 9] {
        let s = &mut self.service;
        [
            &mut s.cmap_in,
            &mut s.hlr_query,
            &mut s.backend_query_hit,
            &mut s.backend_query_miss,
            &mut s.isd,
            &mut s.backend_update,
            &mut s.auc_keys,
            &mut s.auc_update,
            &mut s.cmap_out,
        ]
    }

    /// Sets `processors.<name>` from a `name=count` CLI override.
    pub fn set_processors(&mut self, arg: &str) -> Result<(), SpecError> {
        let bad = || {
            SpecError(format!(
                "--processors {arg:?} is not valid: use NAME=COUNT with NAME one of cmap, hlr, auc, backend"
            ))
        };
        let (name, n) = arg.split_once('=').ok_or_else(bad)?;
        let n: i64 = n.trim().parse().map_err(|_| bad())?;
        let p = &mut self.processors;
        match name.trim() {
            "cmap" => p.cmap = n,
            "hlr" => p.hlr = n,
            "auc" => p.auc = n,
            "backend" => p.backend = n,
            _ => return Err(bad()),
        }
        Ok(())
    }

    /// Checks every value and builds the distributions.
    pub fn check(&self) -> Result<MvnoConfig, SpecError> {
        let p = &self.processors;
        let processors = [
            count("processors.cmap", p.cmap, "processor")?,
            count("processors.hlr", p.hlr, "processor")?,
            count("processors.auc", p.auc, "processor")?,
            count("processors.backend", p.backend, "processor")?,
        ];
        let names = [
            "cmap_in",
            "hlr_query",
            "backend_query_hit",
            "backend_query_miss",
            "isd",
            "backend_update",
            "auc_keys",
            "auc_update",
            "cmap_out",
        ];
        let mut spec = self.clone();
        let mut services = Vec::new();
        for (name, s) in names.iter().zip(spec.steps_mut()) {
            let key = format!("service.{name}");
            let svc = match &s.samples {
                Some(path) => Service::empirical(read_samples(&key, path)?)
                    .map_err(|e| SpecError(format!("{key} {e}")))?,
                None => {
                    let mean = s.mean_us.ok_or_else(|| {
                        SpecError(format!(
                            "{key}.mean_us is missing: give the mean in µs or a samples file"
                        ))
                    })?;
                    let cv = s.cv.ok_or_else(|| {
                        SpecError(format!(
                            "{key}.cv is missing: give the coefficient of variation"
                        ))
                    })?;
                    Service::from_mean_cv(self.family, mean * 1e-6, cv).map_err(|e| {
                        let field = match e {
                            crate::des::service::ServiceError::Mean(_) => "mean_us",
                            _ => "cv",
                        };
                        let e = e
                            .to_string()
                            .replace(&format!("{}", mean * 1e-6), &format!("{mean}"));
                        SpecError(format!("{key}.{field}: {e}"))
                    })?
                }
            };
            services.push(svc);
        }
        let duration_s = positive("duration_s", self.duration_s)?;
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0 && self.warmup_s < duration_s) {
            return Err(SpecError(format!(
                "warmup_s = {} is not valid: use a number ≥ 0 below duration_s = {duration_s}",
                self.warmup_s
            )));
        }
        Ok(MvnoConfig {
            rate_per_s: positive("rate_per_s", self.rate_per_s)?,
            duration_s,
            warmup_s: self.warmup_s,
            seed: self.seed,
            policy: self.policy,
            auc_hold: self.auc_hold,
            processors,
            services,
            sai_timeout_s: positive("timeouts.sai_s", self.timeouts.sai_s)?,
            ul_timeout_s: positive("timeouts.ul_s", self.timeouts.ul_s)?,
            hlr_ttl_s: positive("caches.hlr_ttl_s", self.caches.hlr_ttl_s)?,
            backend_ttl_s: positive("caches.backend_ttl_s", self.caches.backend_ttl_s)?,
            queue_limit: count("policing.queue_limit", self.policing.queue_limit, "place")?
                as usize,
            msu_quota: count("policing.msu_quota", self.policing.msu_quota, "message")?,
            device_quota: count(
                "policing.device_quota",
                self.policing.device_quota,
                "device",
            )?,
            hint_rate_per_s: positive("policing.hint_rate_per_s", self.policing.hint_rate_per_s)?,
        })
    }
}
