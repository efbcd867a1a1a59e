//! The two sides of a run: the plant's period loop and the controller's
//! answer loop, over UDP sockets (or, for tests, called directly).
//!
//! Per period k the plant (1) advances the simulation to t_k = k·T, reads
//! its sensors and sends them; (2) waits until t_k + D, the deadline,
//! keeping the actuation for period k if it comes in time; (3) at the
//! deadline applies it, or, when it did not come, the next predicted backup
//! of the last actuation that did, for at most `max_consecutive_losses`
//! periods in a row, and 0 V after that. A pitch beyond [`FALL_PITCH_RAD`]
//! is a fall: the run ends and says so.
//!
//! With `time_scale` s > 1 the loops run s times faster than real time: a
//! period takes T/s of wall-clock time, and the delays are wall-clock delays.

use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::time::Duration;

use nflab_io::clock::monotonic_ns;

use super::control::{Controller, Design, Weights};
use super::plant::{Noise, Params, Plant, Reading};
use super::proto::{Message, MAX_BACKUPS};

/// Pitch at which the robot has fallen, rad (45°).
pub const FALL_PITCH_RAD: f64 = std::f64::consts::FRAC_PI_4;

/// `[app]` of `kind = "ncsbench"`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NcsConfig {
    /// Sampling period, ms (seed: 35).
    #[serde(default = "default_period")]
    pub period_ms: f64,
    /// Actuation deadline after the period's start, ms (seed: 29).
    #[serde(default = "default_deadline")]
    pub deadline_ms: f64,
    /// Periods in a run (seed: 1400, 49 s).
    #[serde(default = "default_periods")]
    pub periods: u32,
    /// Predicted backup voltages per actuation (seed: 10).
    #[serde(default = "default_backups")]
    pub backups: u32,
    /// Backups used in a row at most before the plant applies 0 V (seed: 3).
    #[serde(default = "default_max_losses")]
    pub max_consecutive_losses: u32,
    /// Run this many times faster than real time (tests; default 1).
    #[serde(default = "default_time_scale")]
    pub time_scale: f64,
    /// Seed of the sensor noise.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The controller's gain K (u = −K·z) instead of the LQR design: a 1×5
    /// matrix, `[[k_θ, k_ψ, k_θ̇, k_ψ̇, k_u]]` over the design state
    /// [θ, ψ, θ̇, ψ̇, u_{k−1}] of [`super::control`].
    /// Read as any value, so a wrong shape is reported by [`Self::validate`]
    /// with the key instead of a type error without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain: Option<serde_json::Value>,
    /// Run the plant and controller threads under SCHED_FIFO (as a robot's
    /// control loop owns its CPU), so a busy host delays the network path,
    /// not the benchmark's own loops. Default true; ignored without the privilege.
    #[serde(default = "default_realtime")]
    pub realtime: bool,
}

fn default_period() -> f64 {
    35.0
}
fn default_deadline() -> f64 {
    29.0
}
fn default_periods() -> u32 {
    1400
}
fn default_backups() -> u32 {
    10
}
fn default_max_losses() -> u32 {
    3
}
fn default_time_scale() -> f64 {
    1.0
}
fn default_seed() -> u64 {
    1
}
fn default_realtime() -> bool {
    true
}

impl Default for NcsConfig {
    fn default() -> Self {
        NcsConfig {
            period_ms: default_period(),
            deadline_ms: default_deadline(),
            periods: default_periods(),
            backups: default_backups(),
            max_consecutive_losses: default_max_losses(),
            time_scale: default_time_scale(),
            seed: default_seed(),
            gain: None,
            realtime: default_realtime(),
        }
    }
}

/// A config that cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct NcsError(pub String);

impl NcsConfig {
    /// One sentence naming the first bad key.
    pub fn validate(&self) -> Result<(), NcsError> {
        let bad = |m: String| Err(NcsError(m));
        if !(self.period_ms.is_finite() && self.period_ms > 0.0) {
            return bad(format!(
                "app.period_ms = {} is not valid: use a period of more than 0 ms (the seed's is 35)",
                self.period_ms
            ));
        }
        if !(self.deadline_ms.is_finite() && self.deadline_ms > 0.0) {
            return bad(format!(
                "app.deadline_ms = {} is not valid: use more than 0 ms (the seed's is 29)",
                self.deadline_ms
            ));
        }
        if self.period_ms < self.deadline_ms {
            return bad(format!(
                "app.period_ms = {} is shorter than app.deadline_ms = {}: the actuation must come within its period",
                self.period_ms, self.deadline_ms
            ));
        }
        if self.periods == 0 {
            return bad("app.periods = 0: run at least one period".into());
        }
        if self.backups as usize > MAX_BACKUPS {
            return bad(format!(
                "app.backups = {} is more than a message carries: use 0 to {MAX_BACKUPS}",
                self.backups
            ));
        }
        if let Some(g) = &self.gain {
            let n = super::control::N;
            let rows: Vec<Vec<Option<f64>>> = match g.as_array() {
                Some(rows) => rows
                    .iter()
                    .map(|r| match r.as_array() {
                        Some(r) => r
                            .iter()
                            .map(|v| v.as_f64().filter(|x| x.is_finite()))
                            .collect(),
                        None => vec![None],
                    })
                    .collect(),
                None => Vec::new(),
            };
            let ok = matches!(rows.as_slice(), [row] if row.len() == n && row.iter().all(Option::is_some));
            if !ok {
                let shape = if !g.is_array() || rows.iter().flatten().any(Option::is_none) {
                    "is not a matrix of numbers".to_string()
                } else if rows.is_empty() {
                    "has no rows".to_string()
                } else {
                    format!(
                        "has {} row(s) of {} value(s)",
                        rows.len(),
                        rows.iter()
                            .map(|r| r.len().to_string())
                            .collect::<Vec<_>>()
                            .join("/")
                    )
                };
                return bad(format!(
                    "app.gain = {g} {shape}: it must be one row of {n} numbers, [[k_theta, k_psi, k_theta_rate, k_psi_rate, k_u_prev]] (u = -K z over [wheel angle, pitch, their rates, last voltage])"
                ));
            }
        }
        if !(self.time_scale.is_finite() && (1.0..=1000.0).contains(&self.time_scale)) {
            return bad(format!(
                "app.time_scale = {} is out of range: use 1 (real time) to 1000",
                self.time_scale
            ));
        }
        Ok(())
    }

    fn period_s(&self) -> f64 {
        self.period_ms / 1e3
    }

    fn deadline_s(&self) -> f64 {
        self.deadline_ms / 1e3
    }
}

/// What happened in one period (times in `CLOCK_MONOTONIC` ns).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct PeriodRecord {
    /// Period number.
    pub seq: u32,
    /// Sensors read (t_S,R).
    pub t_read_ns: u64,
    /// Sensor message sent (t_S,STX).
    pub t_sensor_send_ns: u64,
    /// Controller received it (t_S,SRX), if an actuation came back in time.
    pub t_ctrl_recv_ns: Option<u64>,
    /// Controller sent the actuation (t_A,STX).
    pub t_ctrl_send_ns: Option<u64>,
    /// Plant received the actuation (t_A,SRX).
    pub t_act_recv_ns: Option<u64>,
    /// Motors written, at the deadline (t_A,W).
    pub t_write_ns: u64,
    /// Pitch Θ at t_k, rad.
    pub pitch_rad: f64,
    /// Mean wheel angle Φ at t_k, rad.
    pub wheel_rad: f64,
    /// Voltage in effect at t_k, V.
    pub voltage_at_sample_v: f64,
    /// Voltage applied at the deadline, V.
    pub voltage_v: f64,
    /// No actuation in time: a backup (or 0 V) was applied.
    pub lost: bool,
}

/// The plant's side, without I/O.
#[derive(Debug, Clone)]
pub struct PlantSide {
    plant: Plant,
    cfg: NcsConfig,
    /// The last actuation's backups and how many periods ago it came.
    backups: Vec<f64>,
    since_actuation: usize,
    consecutive_losses: u32,
    /// One record per period run.
    pub records: Vec<PeriodRecord>,
    /// The pitch went beyond [`FALL_PITCH_RAD`].
    pub fell: bool,
    /// How long the controller took to answer the first ping, ns (`None`:
    /// it never did, or no handshake ran).
    pub handshake_ns: Option<u64>,
}

impl PlantSide {
    /// A plant side for `cfg`.
    pub fn new(plant: Plant, cfg: NcsConfig) -> PlantSide {
        PlantSide {
            plant,
            cfg,
            backups: Vec::new(),
            since_actuation: 0,
            consecutive_losses: 0,
            records: Vec::new(),
            fell: false,
            handshake_ns: None,
        }
    }

    /// Start of period `k`: simulate up to t_k and read the sensors; `None`
    /// when the robot has fallen.
    pub fn begin(&mut self, k: u32, now_ns: u64) -> Option<Reading> {
        self.plant.advance_to(k as f64 * self.cfg.period_s());
        if self.plant.x[1].abs() > FALL_PITCH_RAD {
            self.fell = true;
            return None;
        }
        self.records.push(PeriodRecord {
            seq: k,
            t_read_ns: now_ns,
            pitch_rad: self.plant.x[1],
            wheel_rad: self.plant.x[0],
            voltage_at_sample_v: self.plant.voltage,
            ..PeriodRecord::default()
        });
        Some(self.plant.read())
    }

    /// The sensor message of period `k` left at `t_ns`.
    pub fn sent(&mut self, t_ns: u64) {
        if let Some(r) = self.records.last_mut() {
            r.t_sensor_send_ns = t_ns;
        }
    }

    /// The deadline of period `k`: apply the actuation that came in time
    /// (voltage, backups, controller receive and send times, plant receive
    /// time), or a backup.
    pub fn deadline(&mut self, k: u32, act: Option<Actuated>, now_ns: u64) {
        self.plant
            .advance_to(k as f64 * self.cfg.period_s() + self.cfg.deadline_s());
        let v = match &act {
            Some(a) => {
                self.backups.clone_from(&a.backups);
                self.since_actuation = 0;
                self.consecutive_losses = 0;
                a.voltage
            }
            None => {
                self.since_actuation += 1;
                self.consecutive_losses += 1;
                let j = self.since_actuation - 1;
                match self.backups.get(j) {
                    Some(&b) if self.consecutive_losses <= self.cfg.max_consecutive_losses => b,
                    _ => 0.0,
                }
            }
        };
        self.plant.voltage = v;
        if let Some(r) = self.records.last_mut() {
            r.t_write_ns = now_ns;
            r.voltage_v = v;
            r.lost = act.is_none();
            if let Some(a) = act {
                r.t_ctrl_recv_ns = Some(a.t_ctrl_recv_ns);
                r.t_ctrl_send_ns = Some(a.t_ctrl_send_ns);
                r.t_act_recv_ns = Some(a.t_recv_ns);
            }
        }
    }
}

/// An actuation that came in time.
#[derive(Debug, Clone, PartialEq)]
pub struct Actuated {
    /// Voltage.
    pub voltage: f64,
    /// Its backups.
    pub backups: Vec<f64>,
    /// When the controller received the sensor message.
    pub t_ctrl_recv_ns: u64,
    /// When the controller sent the actuation.
    pub t_ctrl_send_ns: u64,
    /// When the plant received it.
    pub t_recv_ns: u64,
}

/// Pitch rate the robot has at t = 0, rad/s: it has just been set upright.
pub const INITIAL_PITCH_RATE: f64 = 0.1;

/// The plant side and the controller of a run of `cfg`, with the default
/// robot and the gain designed for `cfg`'s period and deadline.
pub fn setup(cfg: &NcsConfig) -> (PlantSide, Controller) {
    let p = Params::default();
    let plant = Plant::new(
        p,
        Noise::default(),
        [0.0, 0.0, 0.0, INITIAL_PITCH_RATE],
        cfg.seed,
    );
    let mut design = Design::new(&p, cfg.period_s(), cfg.deadline_s(), &Weights::default());
    // A given gain replaces the LQR's; the model and predictions stay.
    let row = cfg
        .gain
        .as_ref()
        .and_then(|g| g.get(0)?.as_array().cloned());
    for (k, v) in design.k.iter_mut().zip(row.iter().flatten()) {
        if let Some(v) = v.as_f64() {
            *k = v;
        }
    }
    (PlantSide::new(plant, cfg.clone()), Controller::new(design))
}

fn sleep_until(t_ns: u64) {
    let now = monotonic_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

/// The plant's loop over `sock` (connected to the controller). Returns the
/// side with its records; an I/O error is one sentence.
pub fn run_plant(sock: &UdpSocket, mut side: PlantSide) -> Result<PlantSide, NcsError> {
    let io = |what: &str, e: std::io::Error| NcsError(format!("the plant cannot {what}: {e}"));
    let _ = nflab_io::clock::set_timer_slack_ns(1);
    let cfg = side.cfg.clone();
    let period_ns = (cfg.period_ms * 1e6 / cfg.time_scale) as u64;
    let deadline_ns = (cfg.deadline_ms * 1e6 / cfg.time_scale) as u64;
    sock.set_nonblocking(true)
        .map_err(|e| io("make its socket non-blocking", e))?;
    let mut buf = [0u8; 2048];
    side.handshake_ns = handshake(sock, &mut buf, Duration::from_secs(5))?;
    let t0 = monotonic_ns() + 10_000_000;
    for k in 0..cfg.periods {
        let start = t0 + k as u64 * period_ns;
        sleep_until(start);
        let Some(reading) = side.begin(k, monotonic_ns()) else {
            break;
        };
        let t_send_ns = monotonic_ns();
        let msg = Message::Sensor {
            seq: k,
            t_read_ns: side.records.last().map_or(0, |r| r.t_read_ns),
            t_send_ns,
            reading,
        };
        // A send that fails (no route, buffer full) is a lost message, not the end.
        let _ = sock.send(&msg.encode());
        side.sent(t_send_ns);
        let deadline = start + deadline_ns;
        let mut act = None;
        loop {
            let now = monotonic_ns();
            if now >= deadline {
                break;
            }
            // ppoll, not SO_RCVTIMEO, which would wake up to a tick after the deadline.
            let readable =
                nflab_io::wait_readable(sock.as_fd(), Duration::from_nanos(deadline - now))
                    .map_err(|e| io("wait for an actuation", e))?;
            if !readable {
                continue;
            }
            match sock.recv(&mut buf) {
                Ok(n) => {
                    let t_recv_ns = monotonic_ns();
                    if let Some(Message::Actuation {
                        seq,
                        t_recv_ns: t_ctrl_recv_ns,
                        t_send_ns: t_ctrl_send_ns,
                        voltage,
                        backups,
                        ..
                    }) = Message::decode(&buf[..n])
                    {
                        // An answer to an earlier period is late: ignored.
                        if seq == k && t_recv_ns < deadline {
                            act = Some(Actuated {
                                voltage,
                                backups,
                                t_ctrl_recv_ns,
                                t_ctrl_send_ns,
                                t_recv_ns,
                            });
                        }
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::ConnectionRefused
                    ) => {}
                Err(e) => return Err(io("receive", e)),
            }
        }
        side.deadline(k, act, monotonic_ns());
    }
    let n = side.records.len() as u32;
    for _ in 0..3 {
        let _ = sock.send(&Message::Stop { seq: n }.encode());
    }
    Ok(side)
}

/// Ping the controller every 20 ms until it answers, at most `limit`: the
/// time it took, or `None` when no answer came (the periods run anyway, and
/// their losses show it).
fn handshake(sock: &UdpSocket, buf: &mut [u8], limit: Duration) -> Result<Option<u64>, NcsError> {
    let io = |what: &str, e: std::io::Error| NcsError(format!("the plant cannot {what}: {e}"));
    let start = monotonic_ns();
    let end = start + limit.as_nanos() as u64;
    let mut attempt = 0u32;
    while monotonic_ns() < end {
        let _ = sock.send(&Message::Ping { seq: attempt }.encode());
        let next = (monotonic_ns() + 20_000_000).min(end);
        loop {
            let now = monotonic_ns();
            if now >= next {
                break;
            }
            if !nflab_io::wait_readable(sock.as_fd(), Duration::from_nanos(next - now))
                .map_err(|e| io("wait for the controller", e))?
            {
                continue;
            }
            match sock.recv(buf) {
                Ok(n) => {
                    if let Some(Message::Pong { .. }) = Message::decode(&buf[..n]) {
                        return Ok(Some(monotonic_ns() - start));
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::ConnectionRefused
                    ) => {}
                Err(e) => return Err(io("receive", e)),
            }
        }
        attempt += 1;
    }
    Ok(None)
}

/// The controller's loop: answer every sensor message on `sock` until a
/// stop message, or `idle` without any message. Returns the sensor messages
/// answered.
pub fn run_controller(
    sock: &UdpSocket,
    mut controller: Controller,
    backups: usize,
    idle: Duration,
) -> Result<u64, NcsError> {
    let io = |what: &str, e: std::io::Error| NcsError(format!("the controller cannot {what}: {e}"));
    sock.set_read_timeout(Some(idle))
        .map_err(|e| io("set a receive timeout", e))?;
    let mut buf = [0u8; 2048];
    let mut answered = 0;
    loop {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(answered)
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(io("receive", e)),
        };
        let t_recv_ns = monotonic_ns();
        match Message::decode(&buf[..n]) {
            Some(Message::Sensor {
                seq,
                t_send_ns,
                reading,
                ..
            }) => {
                let (voltage, predicted) = controller.actuate(&reading, backups);
                let reply = Message::Actuation {
                    seq,
                    t_sensor_send_ns: t_send_ns,
                    t_recv_ns,
                    t_send_ns: monotonic_ns(),
                    voltage,
                    backups: predicted,
                };
                let _ = sock.send_to(&reply.encode(), from);
                answered += 1;
            }
            Some(Message::Ping { seq }) => {
                let _ = sock.send_to(&Message::Pong { seq }.encode(), from);
            }
            Some(Message::Stop { .. }) => return Ok(answered),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `periods` without a network: `lose(k)` says whether period k's
    /// actuation is lost.
    fn closed_loop(cfg: &NcsConfig, x0: [f64; 4], lose: impl Fn(u32) -> bool) -> PlantSide {
        let p = Params::default();
        let plant = Plant::new(p, Noise::default(), x0, 5);
        let design = Design::new(&p, cfg.period_s(), cfg.deadline_s(), &Weights::default());
        let mut ctrl = Controller::new(design);
        let mut side = PlantSide::new(plant, cfg.clone());
        for k in 0..cfg.periods {
            let Some(r) = side.begin(k, 0) else { break };
            let (voltage, backups) = ctrl.actuate(&r, cfg.backups as usize);
            let act = (!lose(k)).then_some(Actuated {
                voltage,
                backups,
                t_ctrl_recv_ns: 0,
                t_ctrl_send_ns: 0,
                t_recv_ns: 0,
            });
            side.deadline(k, act, 0);
        }
        side
    }

    #[test]
    fn the_controller_keeps_the_plant_up_and_losses_are_survived_with_backups() {
        let cfg = NcsConfig::default();
        let x0 = [0.0, 0.0, 0.0, 0.2];
        let side = closed_loop(&cfg, x0, |_| false);
        assert!(!side.fell);
        assert_eq!(side.records.len(), 1400);
        let max_pitch = side
            .records
            .iter()
            .map(|r| r.pitch_rad.abs())
            .fold(0.0, f64::max);
        assert!(max_pitch < 0.1, "{max_pitch}");
        // Bursts of 3 lost actuations every 20 periods: the backups carry it.
        let side = closed_loop(&cfg, x0, |k| k % 20 < 3 && k > 10);
        assert!(!side.fell, "fell after {} periods", side.records.len());
        assert_eq!(side.records.iter().filter(|r| r.lost).count(), 69 * 3);
        // Three actuations lost while the plant recovers from its push: the
        // backups do better than 0 V (the seed's reason for sending them).
        let early = |k: u32| (1..=3).contains(&k);
        let no_backups = NcsConfig {
            max_consecutive_losses: 0,
            ..cfg.clone()
        };
        let iae = |s: &PlantSide| {
            s.records[..40]
                .iter()
                .map(|r| r.pitch_rad.abs())
                .sum::<f64>()
        };
        let with = closed_loop(&cfg, [0.0, 0.0, 0.0, 0.5], early);
        let without = closed_loop(&no_backups, [0.0, 0.0, 0.0, 0.5], early);
        assert!(
            without.fell || iae(&without) > 1.2 * iae(&with),
            "backups {} vs 0 V {}",
            iae(&with),
            iae(&without)
        );
        // Every actuation lost from period 10 on: it falls.
        let side = closed_loop(&cfg, x0, |k| k >= 10);
        assert!(side.fell);
        assert!(side.records.len() < 100);
    }

    #[test]
    fn a_given_gain_replaces_the_designed_one() {
        // The plant as `setup` builds it, closed over the controller it returns.
        let run = |gain: Option<serde_json::Value>| {
            let cfg = NcsConfig {
                periods: 300,
                gain,
                ..NcsConfig::default()
            };
            let (mut side, mut ctrl) = setup(&cfg);
            for k in 0..cfg.periods {
                let Some(r) = side.begin(k, 0) else { break };
                let (voltage, backups) = ctrl.actuate(&r, 10);
                let act = Actuated {
                    voltage,
                    backups,
                    t_ctrl_recv_ns: 0,
                    t_ctrl_send_ns: 0,
                    t_recv_ns: 0,
                };
                side.deadline(k, Some(act), 0);
            }
            side
        };
        let p = Params::default();
        let lqr = Design::new(&p, 0.035, 0.029, &Weights::default()).k;
        println!("the LQR gain for T = 35 ms, D = 29 ms: {lqr:?}");
        let same = run(Some(serde_json::json!([lqr.to_vec()])));
        let designed = run(None);
        assert!(!designed.fell && !same.fell);
        assert_eq!(same.records, designed.records);
        // No feedback at all: the pendulum falls.
        assert!(run(Some(serde_json::json!([vec![0.0; 5]]))).fell);
    }

    #[test]
    fn bad_configs_name_the_key() {
        let e = NcsConfig {
            period_ms: 20.0,
            ..NcsConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(
            e.0.contains("app.period_ms = 20 is shorter than app.deadline_ms = 29"),
            "{e}"
        );
        let e = NcsConfig {
            backups: 500,
            ..NcsConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.0.contains("app.backups = 500"), "{e}");
        for (gain, shape) in [
            (
                serde_json::json!([vec![1.0; 4]]),
                "app.gain = [[1.0,1.0,1.0,1.0]] has 1 row(s) of 4 value(s)",
            ),
            (
                serde_json::json!([vec![1.0; 5], vec![1.0; 5]]),
                "has 2 row(s) of 5/5 value(s)",
            ),
            (serde_json::json!([]), "app.gain = [] has no rows"),
            (
                serde_json::json!([1, 2, 3, 4, 5]),
                "app.gain = [1,2,3,4,5] is not a matrix of numbers",
            ),
            (
                serde_json::json!([[1, 2, "x", 4, 5]]),
                "is not a matrix of numbers",
            ),
        ] {
            let e = NcsConfig {
                gain: Some(gain),
                ..NcsConfig::default()
            }
            .validate()
            .unwrap_err();
            assert!(e.0.contains(shape) && e.0.contains("one row of 5"), "{e}");
        }
        NcsConfig::default().validate().unwrap();
    }
}
