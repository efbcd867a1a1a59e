//! The plant: a two-wheeled inverted pendulum robot (TWIPR) in the plane,
//! after the NXTway-GS model (Yamamoto, "NXTway-GS Model-Based Design", 2008)
//! with EV3 "Gyro Boy"-like dimensions: both wheels get the same voltage, so
//! the state is the mean wheel angle θ (seed 000: Φ), the body pitch ψ
//! (seed 000: Θ) and their rates.
//!
//! ```text
//! a11 θ̈ + a12(ψ) ψ̈ = M L R ψ̇² sin ψ + 2α v − 2(β + f_w) θ̇ + 2β ψ̇
//! a12(ψ) θ̈ + a22 ψ̈ = M g L sin ψ + 2β θ̇ − 2β ψ̇ − 2α v
//! a11 = (2m + M) R² + 2 J_w + 2 n² J_m,  a12 = M L R cos ψ − 2 n² J_m,
//! a22 = M L² + J_ψ + 2 n² J_m,  α = n K_t / R_m,  β = n K_t K_b / R_m + f_m
//! ```
//!
//! Integrated with fourth-order Runge–Kutta at 1 kHz. The motor voltage is
//! clamped to ±8 V. Sensors as on the robot: a gyro (pitch rate, 1 °/s
//! quantization plus Gaussian noise) whose readings the robot integrates at
//! the simulation rate into a pitch angle, and wheel encoders (motor angle
//! θ − ψ, 1° quantization) and the motor speed as the motor controller
//! reports it (Gaussian noise, 2 °/s sd, 1 °/s steps). A speed taken as the
//! encoder difference over a window lags the wheels, which react within
//! milliseconds to the voltage; with the 29 ms actuation delay that lag alone
//! made the loop oscillate.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Motor voltage limit, V.
pub const VOLTAGE_LIMIT_V: f64 = 8.0;
/// Integration step, s (1 kHz).
pub const STEP_S: f64 = 1e-3;

/// Physical parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Gravity, m/s².
    pub g: f64,
    /// Mass of one wheel, kg.
    pub m: f64,
    /// Wheel radius, m.
    pub r: f64,
    /// Body mass, kg.
    pub body_m: f64,
    /// Axle to the body's centre of mass, m.
    pub l: f64,
    /// Motor inertia, kg m².
    pub jm: f64,
    /// Motor resistance, Ω.
    pub rm: f64,
    /// Back-EMF constant, V s/rad.
    pub kb: f64,
    /// Torque constant, N m/A.
    pub kt: f64,
    /// Gear ratio.
    pub n: f64,
    /// Friction body–motor.
    pub fm: f64,
    /// Friction wheel–floor.
    pub fw: f64,
}

impl Default for Params {
    /// NXTway-GS motor constants, EV3 Gyro Boy-like body.
    fn default() -> Self {
        Params {
            g: 9.81,
            m: 0.03,
            r: 0.0275,
            body_m: 0.65,
            l: 0.09,
            jm: 1e-5,
            rm: 6.69,
            kb: 0.468,
            kt: 0.317,
            n: 1.0,
            fm: 0.0022,
            fw: 0.0,
        }
    }
}

/// [θ, ψ, θ̇, ψ̇]: wheel angle, pitch (rad), and their rates (rad/s).
pub type State = [f64; 4];

impl Params {
    /// The state's time derivative under voltage `v` (clamped to ±8 V).
    pub fn derivative(&self, x: &State, v: f64) -> State {
        let p = self;
        let v = v.clamp(-VOLTAGE_LIMIT_V, VOLTAGE_LIMIT_V);
        let (th_d, psi, psi_d) = (x[2], x[1], x[3]);
        let alpha = p.n * p.kt / p.rm;
        let beta = p.n * p.kt * p.kb / p.rm + p.fm;
        let jw = p.m * p.r * p.r / 2.0;
        let jpsi = p.body_m * p.l * p.l / 3.0;
        let a11 = (2.0 * p.m + p.body_m) * p.r * p.r + 2.0 * jw + 2.0 * p.n * p.n * p.jm;
        let a12 = p.body_m * p.l * p.r * psi.cos() - 2.0 * p.n * p.n * p.jm;
        let a22 = p.body_m * p.l * p.l + jpsi + 2.0 * p.n * p.n * p.jm;
        let f1 = p.body_m * p.l * p.r * psi_d * psi_d * psi.sin() + 2.0 * alpha * v
            - 2.0 * (beta + p.fw) * th_d
            + 2.0 * beta * psi_d;
        let f2 = p.body_m * p.g * p.l * psi.sin() + 2.0 * beta * th_d
            - 2.0 * beta * psi_d
            - 2.0 * alpha * v;
        let det = a11 * a22 - a12 * a12;
        let th_dd = (a22 * f1 - a12 * f2) / det;
        let psi_dd = (a11 * f2 - a12 * f1) / det;
        [th_d, psi_d, th_dd, psi_dd]
    }

    /// One Runge–Kutta step of `dt` seconds.
    pub fn rk4(&self, x: &State, v: f64, dt: f64) -> State {
        let add = |a: &State, k: &State, h: f64| -> State {
            [
                a[0] + h * k[0],
                a[1] + h * k[1],
                a[2] + h * k[2],
                a[3] + h * k[3],
            ]
        };
        let k1 = self.derivative(x, v);
        let k2 = self.derivative(&add(x, &k1, dt / 2.0), v);
        let k3 = self.derivative(&add(x, &k2, dt / 2.0), v);
        let k4 = self.derivative(&add(x, &k3, dt), v);
        let mut out = *x;
        for i in 0..4 {
            out[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
        }
        out
    }
}

/// What the robot reports in a sensor message.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reading {
    /// Gyro pitch rate, rad/s.
    pub gyro_rate: f64,
    /// Pitch integrated from the gyro on the robot, rad.
    pub gyro_angle: f64,
    /// Motor angle θ − ψ from the encoders, rad.
    pub motor_angle: f64,
    /// Motor speed as the motor's controller reports it (tacho pulse timing), rad/s.
    pub motor_speed: f64,
}

/// Sensor noise and quantization.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    /// Gyro noise standard deviation, rad/s.
    pub gyro_sd: f64,
    /// Gyro quantization step, rad/s (EV3: 1 °/s).
    pub gyro_step: f64,
    /// Encoder step, rad (EV3: 1°).
    pub encoder_step: f64,
    /// Motor speed noise standard deviation, rad/s.
    pub speed_sd: f64,
    /// Motor speed step, rad/s.
    pub speed_step: f64,
}

impl Default for Noise {
    fn default() -> Self {
        Noise {
            gyro_sd: 0.2f64.to_radians(),
            gyro_step: 1f64.to_radians(),
            encoder_step: 1f64.to_radians(),
            speed_sd: 2f64.to_radians(),
            speed_step: 1f64.to_radians(),
        }
    }
}

/// The simulated robot: dynamics, the voltage it applies, its sensors.
#[derive(Debug, Clone)]
pub struct Plant {
    /// Physical parameters.
    pub params: Params,
    /// Sensor noise.
    pub noise: Noise,
    /// True state.
    pub x: State,
    /// Simulated time, s.
    pub t_s: f64,
    /// Voltage applied now (both motors).
    pub voltage: f64,
    gyro_angle: f64,
    rng: ChaCha8Rng,
}

impl Plant {
    /// Upright and still at t = 0, except for `x0`.
    pub fn new(params: Params, noise: Noise, x0: State, seed: u64) -> Plant {
        Plant {
            params,
            noise,
            x: x0,
            t_s: 0.0,
            voltage: 0.0,
            gyro_angle: x0[1],
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    fn gyro(&mut self) -> f64 {
        let z = gaussian(&mut self.rng);
        let raw = self.x[3] + self.noise.gyro_sd * z;
        quantize(raw, self.noise.gyro_step)
    }

    /// Advance to simulated time `t_s` at 1 kHz with the current voltage; the
    /// robot integrates its gyro at every step.
    pub fn advance_to(&mut self, t_s: f64) {
        while self.t_s + STEP_S / 2.0 < t_s {
            let dt = STEP_S.min(t_s - self.t_s);
            let rate = self.gyro();
            self.x = self.params.rk4(&self.x, self.voltage, dt);
            self.gyro_angle += rate * dt;
            self.t_s += dt;
        }
    }

    /// Read the sensors now.
    pub fn read(&mut self) -> Reading {
        let motor = quantize(self.x[0] - self.x[1], self.noise.encoder_step);
        let z = gaussian(&mut self.rng);
        let speed = quantize(
            self.x[2] - self.x[3] + self.noise.speed_sd * z,
            self.noise.speed_step,
        );
        Reading {
            gyro_rate: self.gyro(),
            gyro_angle: self.gyro_angle,
            motor_angle: motor,
            motor_speed: speed,
        }
    }
}

fn quantize(x: f64, step: f64) -> f64 {
    if step > 0.0 {
        (x / step).round() * step
    } else {
        x
    }
}

/// A standard normal draw (Box–Muller).
fn gaussian(rng: &mut ChaCha8Rng) -> f64 {
    use rand::Rng;
    let u1 = 1.0 - rng.gen::<f64>();
    let u2 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncontrolled_it_falls_at_the_rate_of_the_linear_models_unstable_pole() {
        // Small angles: ψ grows as e^{λt} with λ the unstable eigenvalue of the
        // linearization; λ from the 2×2 mass matrix with friction left out.
        let p = Params {
            fm: 0.0,
            kb: 0.0,
            ..Params::default()
        };
        let jw = p.m * p.r * p.r / 2.0;
        let a11 = (2.0 * p.m + p.body_m) * p.r * p.r + 2.0 * jw + 2.0 * p.jm;
        let a12 = p.body_m * p.l * p.r - 2.0 * p.jm;
        let a22 = p.body_m * p.l * p.l + p.body_m * p.l * p.l / 3.0 + 2.0 * p.jm;
        let lambda = (a11 * p.body_m * p.g * p.l / (a11 * a22 - a12 * a12)).sqrt();
        let mut x = [0.0, 1e-6, 0.0, 1e-6 * lambda];
        // 0.5 s: ψ grows about 1500-fold and stays below 0.01 rad (sin ψ ≈ ψ).
        let steps = 500;
        for _ in 0..steps {
            x = p.rk4(&x, 0.0, STEP_S);
        }
        let want = 1e-6 * (lambda * steps as f64 * STEP_S).exp();
        assert!((x[1] - want).abs() / want < 1e-3, "{} vs {want}", x[1]);
        // Upright and still is an equilibrium.
        assert_eq!(p.rk4(&[0.0; 4], 0.0, STEP_S), [0.0; 4]);
    }

    #[test]
    fn voltage_is_clamped_and_sensors_quantize() {
        let p = Params::default();
        assert_eq!(p.derivative(&[0.0; 4], 100.0), p.derivative(&[0.0; 4], 8.0));
        assert_ne!(p.derivative(&[0.0; 4], 7.0), p.derivative(&[0.0; 4], 8.0));
        let mut plant = Plant::new(p, Noise::default(), [0.3, 0.0, 0.0, 0.0], 1);
        let r = plant.read();
        let step = 1f64.to_radians();
        assert!((r.motor_angle / step - (r.motor_angle / step).round()).abs() < 1e-9);
        assert!((r.motor_angle - 0.3).abs() <= step / 2.0);
    }
}
