//! The UDP relay VNF of seed 003 (KOMon's validation function): it receives a UDP
//! datagram, holds it for an artificial processing time drawn from a distribution,
//! sends it on unchanged, and measures its own processing time per packet — the
//! ground truth the in-stack monitor is checked against.
//!
//! The processing time is measured from the moment `recv` returned to the moment
//! just before `send` is called (CLOCK_MONOTONIC); the delay is a busy wait, so a
//! 2 µs delay is 2 µs and not a scheduler tick.
//!
//! With `interleave`, one run holds several distributions ("arms"), datagram by
//! datagram in randomised complete blocks: every block of as many datagrams as there
//! are arms takes each arm once, in a shuffled order. On a host whose stack overhead
//! drifts over seconds (a shared VM: 10 µs for a while, then 19 µs), separate runs
//! per distribution each catch a different mix of that drift, and a calibration run's
//! offset does not fit the run it is subtracted from; arms of one run share it.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nflab_analyze::design::BlockOrder;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Names of the delay distributions, as written in the spec.
pub const DISTRIBUTIONS: [&str; 4] = ["constant", "exponential", "uniform", "normal"];

/// `[dut.relay]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RelayConfig {
    /// constant | exponential | uniform | normal (default constant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// Mean artificial processing time in µs (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_us: Option<f64>,
    /// Coefficient of variation of `normal` (its standard deviation / mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Relay as fast as possible: no artificial delay at all.
    #[serde(default)]
    pub flood: bool,
    /// Spin on a non-blocking socket instead of sleeping in `recv`: no wake-up
    /// latency in the monitored interval (it costs a core).
    #[serde(default)]
    pub busy_poll: bool,
    /// Several distributions in one run, interleaved in randomised blocks (module
    /// doc); replaces `distribution`, `mean_us` and `cv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleave: Option<Vec<RelayArm>>,
}

/// One arm of `dut.relay.interleave`: a distribution with its parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RelayArm {
    /// constant | exponential | uniform | normal.
    pub distribution: String,
    /// Mean artificial processing time in µs.
    pub mean_us: f64,
    /// Coefficient of variation of `normal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
}

/// At most this many arms: a block is this many datagrams.
pub const MAX_ARMS: usize = 64;

/// A delay distribution, parsed and checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delay {
    /// No delay (flood mode).
    None,
    /// Always the mean.
    Constant(f64),
    /// Negative-exponential with this mean.
    Exponential(f64),
    /// Uniform on [0, 2·mean].
    Uniform(f64),
    /// Normal (mean, standard deviation), left-truncated: negative draws are 0.
    Normal(f64, f64),
}

impl RelayConfig {
    /// The arms' distributions in ns (one without `interleave`), or one sentence
    /// naming the bad key.
    pub fn delays(&self) -> Result<Vec<Delay>, String> {
        let Some(arms) = &self.interleave else {
            let (distribution, mean_us) = (
                self.distribution.as_deref().unwrap_or("constant"),
                self.mean_us.unwrap_or(0.0),
            );
            if self.flood {
                check_keys("dut.relay", distribution, mean_us, self.cv)?;
                return Ok(vec![Delay::None]);
            }
            return Ok(vec![arm_delay(
                "dut.relay",
                distribution,
                mean_us,
                self.cv,
            )?]);
        };
        let own = [
            (
                "distribution",
                self.distribution.as_ref().map(|d| format!("\"{d}\"")),
            ),
            ("mean_us", self.mean_us.map(|m| m.to_string())),
            ("cv", self.cv.map(|c| c.to_string())),
        ];
        if let Some((key, value)) = own.iter().find_map(|(k, v)| Some((k, v.as_ref()?))) {
            return Err(format!(
                "dut.relay.{key} = {value} cannot go with dut.relay.interleave: give each arm its own {key}"
            ));
        }
        if self.flood {
            return Err(
                "dut.relay.flood = true has no delay to interleave: drop dut.relay.interleave"
                    .into(),
            );
        }
        if arms.is_empty() || arms.len() > MAX_ARMS {
            return Err(format!(
                "dut.relay.interleave has {} arms: give 1 to {MAX_ARMS}",
                arms.len()
            ));
        }
        arms.iter()
            .enumerate()
            .map(|(i, a)| {
                arm_delay(
                    &format!("dut.relay.interleave[{i}]"),
                    &a.distribution,
                    a.mean_us,
                    a.cv,
                )
            })
            .collect()
    }
}

/// The checks that hold with or without a delay (flood mode too).
fn check_keys(key: &str, distribution: &str, mean_us: f64, cv: Option<f64>) -> Result<(), String> {
    if !(mean_us.is_finite() && (0.0..=1e6).contains(&mean_us)) {
        return Err(format!(
            "{key}.mean_us = {mean_us} is out of range: use 0 to 1000000 (µs)"
        ));
    }
    if cv.is_some() && distribution != "normal" {
        return Err(format!(
            "{key}.cv applies to distribution = \"normal\" only, not \"{distribution}\""
        ));
    }
    Ok(())
}

/// One distribution of `key` (`dut.relay` or an arm) in ns.
fn arm_delay(
    key: &str,
    distribution: &str,
    mean_us: f64,
    cv: Option<f64>,
) -> Result<Delay, String> {
    check_keys(key, distribution, mean_us, cv)?;
    let mean_ns = mean_us * 1e3;
    match distribution {
        "constant" => Ok(Delay::Constant(mean_ns)),
        "exponential" => Ok(Delay::Exponential(mean_ns)),
        "uniform" => Ok(Delay::Uniform(mean_ns)),
        "normal" => {
            let cv = cv.ok_or_else(|| {
                format!("{key}.distribution = \"normal\" needs {key}.cv (seed 003: 1 or 0.2)")
            })?;
            if !(cv.is_finite() && cv >= 0.0) {
                return Err(format!("{key}.cv = {cv} must be a number >= 0"));
            }
            Ok(Delay::Normal(mean_ns, cv * mean_ns))
        }
        other => Err(format!(
            "{key}.distribution = \"{other}\" is unknown: use one of {}",
            DISTRIBUTIONS.join(", ")
        )),
    }
}

impl Delay {
    /// One draw in ns.
    pub fn draw(&self, rng: &mut impl Rng) -> u64 {
        let ns = match *self {
            Delay::None => 0.0,
            Delay::Constant(m) => m,
            // 1 - U is in (0, 1]: ln never sees 0.
            Delay::Exponential(m) => -m * (1.0 - rng.gen::<f64>()).ln(),
            Delay::Uniform(m) => rng.gen::<f64>() * 2.0 * m,
            Delay::Normal(m, sd) => {
                // Box–Muller; the negative mass goes to 0 (seed 003's π0 truncation).
                let (u1, u2) = (1.0 - rng.gen::<f64>(), rng.gen::<f64>());
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (m + sd * z).max(0.0)
            }
        };
        ns.round() as u64
    }
}

/// One relayed packet: its probe sequence number (when it carries an nflab probe) and
/// the relay's own processing time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TruthRow {
    /// Probe sequence number, `None` for a datagram that is not a probe.
    pub seq: Option<u64>,
    /// recv returned → send called, in ns.
    pub processing_ns: u64,
    /// Index of the arm in `dut.relay.interleave` whose delay it got (0 without).
    pub arm: u16,
}

/// What the relay did, for `dut.json`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RelayStats {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams sent on.
    pub sent: u64,
    /// Sends that failed (the datagram is lost).
    pub send_errors: u64,
}

/// Relay every datagram arriving on `sock` to `to` until `stop` is set, and return the
/// truth of each. `sock` needs a read timeout (or to be non-blocking, for busy
/// polling) so that `stop` is seen.
pub fn serve(
    sock: &UdpSocket,
    to: SocketAddr,
    arms: &[Delay],
    seed: u64,
    stop: &AtomicBool,
) -> std::io::Result<(Vec<TruthRow>, RelayStats)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut buf = vec![0u8; 65_536];
    let mut truth = Vec::new();
    let mut stats = RelayStats::default();
    // Randomised complete blocks: every block of as many datagrams as arms
    // takes each arm once, shuffled.
    let mut order = BlockOrder::new(arms.len());
    while !stop.load(Ordering::Relaxed) {
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            // An ICMP error from an earlier send (IP_RECVERR is off, but be safe).
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        };
        let received = Instant::now();
        stats.received += 1;
        let arm = order.next(&mut rng);
        let due = received + Duration::from_nanos(arms[arm].draw(&mut rng));
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        let seq = probe_seq(&buf[..n]);
        let processing_ns = received.elapsed().as_nanos() as u64;
        match sock.send_to(&buf[..n], to) {
            Ok(_) => stats.sent += 1,
            Err(_) => stats.send_errors += 1,
        }
        truth.push(TruthRow {
            seq,
            processing_ns,
            arm: arm as u16,
        });
    }
    Ok((truth, stats))
}

/// The sequence number of an nflab probe at the start of a UDP payload.
pub fn probe_seq(payload: &[u8]) -> Option<u64> {
    let p = nflab_wire::probe::Packet::new_checked(payload).ok()?;
    nflab_wire::probe::Repr::parse(&p).ok().map(|r| r.seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(d: Delay, n: usize) -> (f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let v: Vec<f64> = (0..n).map(|_| d.draw(&mut rng) as f64).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn draws_have_the_distributions_mean_and_cv() {
        let n = 200_000;
        let (m, cv) = moments(Delay::Constant(50_000.0), n);
        assert_eq!((m, cv), (50_000.0, 0.0));
        let (m, cv) = moments(Delay::Exponential(50_000.0), n);
        assert!(
            (m / 50_000.0 - 1.0).abs() < 0.01 && (cv - 1.0).abs() < 0.01,
            "{m} {cv}"
        );
        // Uniform on [0, 2μ]: cv = 1/√3.
        let (m, cv) = moments(Delay::Uniform(50_000.0), n);
        assert!((m / 50_000.0 - 1.0).abs() < 0.01, "{m}");
        assert!((cv - 1.0 / 3f64.sqrt()).abs() < 0.01, "{cv}");
        let (m, cv) = moments(Delay::Normal(50_000.0, 10_000.0), n);
        assert!(
            (m / 50_000.0 - 1.0).abs() < 0.01 && (cv - 0.2).abs() < 0.01,
            "{m} {cv}"
        );
        // cv = 1, truncated at 0: E[max(0, μ + μZ)] = μ(Φ(1) + φ(1)) = 1.0833 μ.
        let (m, _) = moments(Delay::Normal(50_000.0, 50_000.0), n);
        assert!((m / 50_000.0 - 1.0833).abs() < 0.01, "{m}");
    }

    #[test]
    fn bad_keys_are_one_sentence_naming_them() {
        let c = |d: &str, cv: Option<f64>| RelayConfig {
            distribution: Some(d.into()),
            mean_us: Some(10.0),
            cv,
            flood: false,
            busy_poll: false,
            interleave: None,
        };
        assert!(c("gamma", None)
            .delays()
            .unwrap_err()
            .contains("dut.relay.distribution"));
        assert!(c("normal", None)
            .delays()
            .unwrap_err()
            .contains("dut.relay.cv"));
        assert!(c("uniform", Some(1.0))
            .delays()
            .unwrap_err()
            .contains("dut.relay.cv"));
        let mut neg = c("constant", None);
        neg.mean_us = Some(-1.0);
        assert!(neg.delays().unwrap_err().contains("dut.relay.mean_us"));
        assert_eq!(
            c("normal", Some(0.2)).delays(),
            Ok(vec![Delay::Normal(10_000.0, 2_000.0)])
        );
    }

    #[test]
    fn interleaved_arms_are_checked_one_by_one() {
        let arm = |d: &str, cv: Option<f64>| RelayArm {
            distribution: d.into(),
            mean_us: 50.0,
            cv,
        };
        let mut c = RelayConfig {
            interleave: Some(vec![arm("constant", None), arm("normal", Some(0.2))]),
            ..RelayConfig::default()
        };
        assert_eq!(
            c.delays(),
            Ok(vec![
                Delay::Constant(50_000.0),
                Delay::Normal(50_000.0, 10_000.0)
            ])
        );
        c.interleave = Some(vec![arm("constant", None), arm("normal", None)]);
        let e = c.delays().unwrap_err();
        assert!(e.contains("dut.relay.interleave[1].cv"), "{e}");
        c.interleave = Some(vec![arm("constant", None)]);
        c.mean_us = Some(50.0);
        let e = c.delays().unwrap_err();
        assert!(
            e.contains("dut.relay.mean_us = 50 cannot go with dut.relay.interleave"),
            "{e}"
        );
        c.mean_us = None;
        c.distribution = Some("constant".into());
        let e = c.delays().unwrap_err();
        assert!(
            e.contains("dut.relay.distribution = \"constant\" cannot go"),
            "{e}"
        );
        c.distribution = None;
        c.interleave = Some(Vec::new());
        assert!(c.delays().unwrap_err().contains("0 arms"));
        let parsed: RelayConfig = serde_json::from_str(
            r#"{ "interleave": [{ "distribution": "uniform", "mean_us": 2 }] }"#,
        )
        .unwrap();
        assert_eq!(parsed.delays(), Ok(vec![Delay::Uniform(2_000.0)]));
    }

    #[test]
    fn relays_unchanged_and_measures_its_delay() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        sink.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let to = sink.local_addr().unwrap();
        let relay_addr = rx.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let h = s.spawn(|| serve(&rx, to, &[Delay::Constant(200_000.0)], 1, &stop));
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut probe = [0u8; 32];
            let mut p = nflab_wire::probe::Packet::new_unchecked(&mut probe[..]);
            nflab_wire::probe::Repr {
                flow: 1,
                seq: 42,
                tx_ns: 7,
            }
            .emit(&mut p);
            tx.send_to(&probe, relay_addr).unwrap();
            tx.send_to(b"not a probe", relay_addr).unwrap();
            let mut buf = [0u8; 64];
            let n = sink.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &probe);
            let n = sink.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"not a probe");
            stop.store(true, Ordering::Relaxed);
            let (truth, stats) = h.join().unwrap().unwrap();
            assert_eq!((stats.received, stats.sent), (2, 2));
            assert_eq!(truth[0].seq, Some(42));
            assert_eq!(truth[1].seq, None);
            // At least the 200 µs it waited, and not a scheduler's worth more on average.
            assert!(
                truth.iter().all(|t| t.processing_ns >= 200_000),
                "{truth:?}"
            );
        });
    }
}
