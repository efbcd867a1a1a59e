//! The `[app] kind = "prrt"` section of an experiment spec: the seed's study parameters,
//! checked, and turned into a transport [`Config`].
//!
//! ```toml
//! [app]
//! kind = "prrt"
//! gap_ms = 1                 # time between two messages of each direction
//! payload_bytes = 20
//! target_delay_ms = 10
//! window_ms = 2              # receive window, at most target_delay_ms
//! duration_s = 3             # sending time per run (a drain follows)
//! outage_threshold_ms = 100  # optional: a longer gap in on-time delivery is an outage
//! peer_timeout_ms = 5000     # optional: no feedback this long and a sender stops (PeerLost)
//! redundancy = { block_size = 16, proactive_share = 0.125 }
//! ```

use crate::config::Config;

/// The parameters of one PRRT run.
#[derive(Debug, Clone, PartialEq)]
pub struct AppSpec {
    /// Time between two messages, ms.
    pub gap_ms: f64,
    /// Message payload, bytes.
    pub payload_bytes: usize,
    /// Target delay, ms.
    pub target_delay_ms: f64,
    /// Receive window, ms.
    pub window_ms: f64,
    /// Sending time, s.
    pub duration_s: f64,
    /// Outage threshold, ms.
    pub outage_threshold_ms: f64,
    /// No feedback this long and a sender stops (PeerLost), ms.
    pub peer_timeout_ms: f64,
    /// Messages per block.
    pub block_size: u8,
    /// Proactive recovery shards per message of a block.
    pub proactive_share: f64,
}

/// A bad `[app]` value; the message is one sentence naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AppError(pub String);

fn err(msg: String) -> AppError {
    AppError(msg)
}

const KEYS: [&str; 10] = [
    "kind",
    "gap_ms",
    "payload_bytes",
    "target_delay_ms",
    "window_ms",
    "duration_s",
    "outage_threshold_ms",
    "peer_timeout_ms",
    "redundancy",
    "seed",
];

fn number(table: &toml::Table, key: &str, default: Option<f64>) -> Result<f64, AppError> {
    match table.get(key) {
        None => default.ok_or_else(|| err(format!("[app] needs {key} (a number)"))),
        Some(toml::Value::Integer(i)) => Ok(*i as f64),
        Some(toml::Value::Float(f)) if f.is_finite() => Ok(*f),
        Some(v) => Err(err(format!("app.{key} = {v}: must be a number"))),
    }
}

impl AppSpec {
    /// Read and check the `[app]` section of a spec.
    pub fn from_spec(spec: &toml::Table) -> Result<AppSpec, AppError> {
        let Some(toml::Value::Table(app)) = spec.get("app") else {
            return Err(err("the spec has no [app] section (kind = \"prrt\")".into()));
        };
        Self::from_table(app)
    }

    /// Read and check an `[app]` table.
    pub fn from_table(app: &toml::Table) -> Result<AppSpec, AppError> {
        if let Some(key) = app.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(err(format!(
                "app.{key} is not a key of [app]; valid: {}",
                KEYS.join(", ")
            )));
        }
        match app.get("kind").and_then(toml::Value::as_str) {
            Some("prrt") => {}
            Some(other) => {
                return Err(err(format!(
                    "app.kind = \"{other}\": only \"prrt\" is known"
                )))
            }
            None => return Err(err("[app] needs kind = \"prrt\"".into())),
        }
        let (block_size, proactive_share) = match app.get("redundancy") {
            None => (16.0, 0.125),
            Some(toml::Value::Table(r)) => {
                if let Some(key) = r
                    .keys()
                    .find(|k| *k != "block_size" && *k != "proactive_share")
                {
                    return Err(err(format!(
                        "app.redundancy.{key} is not a key; valid: block_size, proactive_share"
                    )));
                }
                (
                    number(r, "block_size", Some(16.0))?,
                    number(r, "proactive_share", Some(0.125))?,
                )
            }
            Some(v) => {
                return Err(err(format!(
                "app.redundancy = {v}: must be a table {{ block_size = N, proactive_share = S }}"
            )))
            }
        };
        let payload = number(app, "payload_bytes", None)?;
        let spec = AppSpec {
            gap_ms: number(app, "gap_ms", None)?,
            payload_bytes: if payload >= 0.0 && payload.fract() == 0.0 {
                payload as usize
            } else {
                return Err(err(format!(
                    "app.payload_bytes = {payload}: must be a whole number of bytes"
                )));
            },
            target_delay_ms: number(app, "target_delay_ms", None)?,
            window_ms: number(app, "window_ms", None)?,
            duration_s: number(app, "duration_s", None)?,
            outage_threshold_ms: number(app, "outage_threshold_ms", Some(100.0))?,
            peer_timeout_ms: number(
                app,
                "peer_timeout_ms",
                Some(Config::default().peer_timeout_ns as f64 / 1e6),
            )?,
            block_size: if (1.0..=crate::MAX_BLOCK as f64).contains(&block_size)
                && block_size.fract() == 0.0
            {
                block_size as u8
            } else {
                return Err(err(format!(
                    "app.redundancy.block_size = {block_size}: must be a whole number 1..={}",
                    crate::MAX_BLOCK
                )));
            },
            proactive_share,
        };
        spec.check()?;
        Ok(spec)
    }

    fn check(&self) -> Result<(), AppError> {
        for (key, value) in [
            ("gap_ms", self.gap_ms),
            ("target_delay_ms", self.target_delay_ms),
            ("window_ms", self.window_ms),
            ("duration_s", self.duration_s),
            ("outage_threshold_ms", self.outage_threshold_ms),
            ("peer_timeout_ms", self.peer_timeout_ms),
        ] {
            if value <= 0.0 {
                return Err(err(format!("app.{key} = {value}: must be above zero")));
            }
        }
        if self.window_ms > self.target_delay_ms {
            return Err(err(format!(
                "app.window_ms = {}: must not exceed app.target_delay_ms ({})",
                self.window_ms, self.target_delay_ms
            )));
        }
        if !(0.0..=1.0).contains(&self.proactive_share) {
            return Err(err(format!(
                "app.redundancy.proactive_share = {}: must be 0..=1",
                self.proactive_share
            )));
        }
        let max = self.config().max_payload_bytes();
        if self.payload_bytes > max {
            return Err(err(format!(
                "app.payload_bytes = {}: must be at most {max} (MTU 1500)",
                self.payload_bytes
            )));
        }
        Ok(())
    }

    /// The transport parameters of this run.
    pub fn config(&self) -> Config {
        let ms = |v: f64| (v * 1e6).round() as u64;
        let k = self.block_size;
        let proactive = (f64::from(k) * self.proactive_share).round() as u8;
        Config {
            target_delay_ns: ms(self.target_delay_ms),
            block_size: k,
            proactive_parity: proactive,
            max_parity: k.max(proactive).max(1),
            // A block waits at most half the target for messages, so its redundancy can
            // still help the first of them.
            block_timeout_ns: (ms(self.target_delay_ms) / 2).max(1),
            peer_timeout_ns: ms(self.peer_timeout_ms).max(1),
            ..Config::default()
        }
    }

    /// The receive window, ns.
    pub fn window_ns(&self) -> u64 {
        (self.window_ms * 1e6).round() as u64
    }
    /// The sending time, ns.
    pub fn duration_ns(&self) -> u64 {
        (self.duration_s * 1e9).round() as u64
    }
    /// The gap, ns.
    pub fn gap_ns(&self) -> u64 {
        (self.gap_ms * 1e6).round() as u64
    }
}

/// The points of the spec's `[sweep]` (every key must be `app.*`): the cross product of
/// the value lists, the first key varying slowest, each point as `(key, value)` pairs to
/// set in `[app]`.
pub fn sweep_points(spec: &toml::Table) -> Result<Vec<Vec<(String, toml::Value)>>, AppError> {
    let mut points = vec![Vec::new()];
    let Some(toml::Value::Table(sweep)) = spec.get("sweep") else {
        return Ok(points);
    };
    for (key, values) in sweep {
        let Some(name) = key.strip_prefix("app.") else {
            return Err(err(format!(
                "[sweep] \"{key}\": nflab-prrt grid sweeps app.* keys only (the rest is nflab run's)"
            )));
        };
        let toml::Value::Array(values) = values else {
            return Err(err(format!("[sweep] \"{key}\" must be an array of values")));
        };
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push((name.to_string(), v.clone()));
                    p
                })
            })
            .collect();
    }
    Ok(points)
}

#[cfg(test)]
mod test {
    use super::*;

    fn parse(text: &str) -> Result<AppSpec, AppError> {
        AppSpec::from_spec(&text.parse::<toml::Table>().expect("toml"))
    }

    const GOOD: &str = r#"
        [app]
        kind = "prrt"
        gap_ms = 3.25
        payload_bytes = 365
        target_delay_ms = 5.5
        window_ms = 0.48
        duration_s = 3
        redundancy = { block_size = 8, proactive_share = 0.25 }
    "#;

    #[test]
    fn a_good_section_becomes_a_config() {
        let spec = parse(GOOD).expect("valid");
        assert_eq!(spec.gap_ns(), 3_250_000);
        assert_eq!(spec.window_ns(), 480_000);
        let c = spec.config();
        assert_eq!(c.target_delay_ns, 5_500_000);
        assert_eq!((c.block_size, c.proactive_parity, c.max_parity), (8, 2, 8));
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn bad_input_is_one_sentence_naming_the_key() {
        let cases = [
            (
                "window_ms = 0.48",
                "window_ms = 7",
                "app.window_ms = 7: must not exceed app.target_delay_ms (5.5)",
            ),
            (
                "payload_bytes = 365",
                "payload_bytes = 1500",
                "app.payload_bytes = 1500: must be at most 1422 (MTU 1500)",
            ),
            (
                "target_delay_ms = 5.5",
                "target_delay_ms = -1",
                "app.target_delay_ms = -1: must be above zero",
            ),
            (
                "gap_ms = 3.25",
                "gap_ms = \"fast\"",
                "app.gap_ms = \"fast\": must be a number",
            ),
            (
                "duration_s = 3",
                "duraton_s = 3",
                "app.duraton_s is not a key of [app]",
            ),
        ];
        for (from, to, want) in cases {
            let e = parse(&GOOD.replace(from, to)).expect_err(to).to_string();
            assert!(e.starts_with(want), "{to}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn the_example_declares_the_seeds_grid() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/prrt-grid.toml");
        let spec: toml::Table = std::fs::read_to_string(path)
            .expect("example")
            .parse()
            .expect("toml");
        let toml::Value::Table(app) = &spec["app"] else {
            panic!("no [app]");
        };
        AppSpec::from_table(app).expect("the base [app] is valid");
        let points = sweep_points(&spec).expect("sweep");
        assert_eq!(points.len(), 5 * 5 * 5 * 6);
        // Linear steps between the seed's bounds (Table 6.5).
        let linspace = |lo: f64, hi: f64, n: usize| -> Vec<f64> {
            (0..n)
                .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
                .collect()
        };
        let values = |key: &str| -> Vec<f64> {
            let mut v: Vec<f64> = points
                .iter()
                .flat_map(|p| {
                    p.iter().filter(|(k, _)| k == key).map(|(_, v)| {
                        v.as_float()
                            .or(v.as_integer().map(|i| i as f64))
                            .expect("number")
                    })
                })
                .collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        };
        let close = |a: &[f64], b: &[f64]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
        };
        assert!(close(&values("gap_ms"), &linspace(1.0, 10.0, 5)));
        assert!(close(&values("payload_bytes"), &linspace(20.0, 1400.0, 5)));
        assert!(close(&values("target_delay_ms"), &linspace(1.0, 10.0, 5)));
        assert!(close(&values("window_ms"), &linspace(0.1, 2.0, 6)));
        // The seed's windows wider than its 1 ms target are refused, naming the key.
        let refused: Vec<AppError> = points
            .iter()
            .filter_map(|p| {
                let mut t = app.clone();
                for (k, v) in p {
                    t.insert(k.clone(), v.clone());
                }
                AppSpec::from_table(&t).err()
            })
            .collect();
        assert_eq!(refused.len(), 5 * 5 * 3);
        assert!(refused.iter().all(|e| e.0.starts_with("app.window_ms = ")));
    }
}
