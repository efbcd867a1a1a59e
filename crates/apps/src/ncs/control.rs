//! The controller: discrete LQR state feedback designed for the benchmark's
//! timing, and the predicted backup voltages.
//!
//! The plant samples at t_k = k·T and applies the actuation computed from
//! that sample at t_k + D (the deadline), so over one period the input is
//! u_{k−1} for D and u_k for T − D. With Φ(t) = e^{A t} and
//! Γ(t) = ∫₀ᵗ e^{A s} B ds of the linearized plant,
//!
//! ```text
//! x_{k+1} = Φ(T) x_k + Φ(T − D) Γ(D) u_{k−1} + Γ(T − D) u_k
//! ```
//!
//! and the design state is z_k = [x_k; u_{k−1}]. The gain K minimizes
//! Σ zᵀQz + R u² (the discrete Riccati equation, iterated to a fixed
//! point); u_k = −K z_k, clamped to ±8 V. The backups are the voltages the
//! same law gives along the model's prediction z_{k+1}, z_{k+2}, …

// Matrix arithmetic reads as the formulas with explicit indices.
#![allow(clippy::needless_range_loop)]

use super::plant::{Params, Reading, State, VOLTAGE_LIMIT_V};

/// Size of the design state.
pub const N: usize = 5;
type Mat = [[f64; N]; N];
type Vector = [f64; N];

/// Weights of the design: state [θ, ψ, θ̇, ψ̇, u_prev] and input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Diagonal of Q.
    pub q: [f64; N],
    /// R.
    pub r: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            q: [1.0, 300.0, 0.5, 2.0, 0.0],
            r: 20.0,
        }
    }
}

/// The discrete model of one period and its gain.
#[derive(Debug, Clone)]
pub struct Design {
    /// z_{k+1} = a z_k + b u_k.
    pub a: Mat,
    /// Input column.
    pub b: Vector,
    /// u = −k·z.
    pub k: Vector,
}

fn mat_mul(a: &Mat, b: &Mat) -> Mat {
    let mut c = [[0.0; N]; N];
    for i in 0..N {
        for j in 0..N {
            c[i][j] = (0..N).map(|l| a[i][l] * b[l][j]).sum();
        }
    }
    c
}

fn mat_vec(a: &Mat, v: &Vector) -> Vector {
    let mut out = [0.0; N];
    for i in 0..N {
        out[i] = (0..N).map(|j| a[i][j] * v[j]).sum();
    }
    out
}

fn transpose(a: &Mat) -> Mat {
    let mut t = [[0.0; N]; N];
    for i in 0..N {
        for j in 0..N {
            t[i][j] = a[j][i];
        }
    }
    t
}

fn dot(a: &Vector, b: &Vector) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The continuous linearization at upright, by central differences:
/// 4×4 `A` and `B` embedded in 5×5 (the last row and column unused).
fn linearize(p: &Params) -> (Mat, Vector) {
    let mut a = [[0.0; N]; N];
    let mut b = [0.0; N];
    let h = 1e-6;
    for j in 0..4 {
        let mut xp: State = [0.0; 4];
        let mut xm: State = [0.0; 4];
        xp[j] = h;
        xm[j] = -h;
        let (fp, fm) = (p.derivative(&xp, 0.0), p.derivative(&xm, 0.0));
        for i in 0..4 {
            a[i][j] = (fp[i] - fm[i]) / (2.0 * h);
        }
    }
    let (fp, fm) = (p.derivative(&[0.0; 4], h), p.derivative(&[0.0; 4], -h));
    for i in 0..4 {
        b[i] = (fp[i] - fm[i]) / (2.0 * h);
    }
    (a, b)
}

/// (Φ(t), Γ(t)) by the exponential of [[A, B], [0, 0]]·t (scaling and
/// squaring of a Taylor series): the top-right column of the result is Γ.
fn discretize(a: &Mat, b: &Vector, t: f64) -> (Mat, Vector) {
    // The 4 plant states plus the input as a 5th state of derivative 0.
    let mut m = [[0.0; N]; N];
    for i in 0..4 {
        for j in 0..4 {
            m[i][j] = a[i][j] * t;
        }
        m[i][4] = b[i] * t;
    }
    let norm: f64 = m.iter().flatten().map(|x| x.abs()).sum();
    let squarings = (norm.max(1.0).log2().ceil() as i32 + 4).max(0);
    let scale = 0.5f64.powi(squarings);
    let ms: Mat = m.map(|row| row.map(|x| x * scale));
    let mut e = [[0.0; N]; N];
    let mut term = [[0.0; N]; N];
    for i in 0..N {
        e[i][i] = 1.0;
        term[i][i] = 1.0;
    }
    for k in 1..20 {
        term = mat_mul(&term, &ms).map(|row| row.map(|x| x / k as f64));
        for i in 0..N {
            for j in 0..N {
                e[i][j] += term[i][j];
            }
        }
    }
    for _ in 0..squarings {
        e = mat_mul(&e, &e);
    }
    let mut phi = [[0.0; N]; N];
    let mut gamma = [0.0; N];
    for i in 0..4 {
        for j in 0..4 {
            phi[i][j] = e[i][j];
        }
        gamma[i] = e[i][4];
    }
    (phi, gamma)
}

impl Design {
    /// The model of one period `period_s` with the input applied at
    /// `deadline_s`, and its LQR gain.
    pub fn new(p: &Params, period_s: f64, deadline_s: f64, w: &Weights) -> Design {
        let (ac, bc) = linearize(p);
        let (phi_t, _) = discretize(&ac, &bc, period_s);
        let (phi_rest, gamma_rest) = discretize(&ac, &bc, period_s - deadline_s);
        let (_, gamma_d) = discretize(&ac, &bc, deadline_s);
        let carried = mat_vec(&phi_rest, &gamma_d);
        let mut a = [[0.0; N]; N];
        let mut b = [0.0; N];
        for i in 0..4 {
            for j in 0..4 {
                a[i][j] = phi_t[i][j];
            }
            a[i][4] = carried[i];
            b[i] = gamma_rest[i];
        }
        b[4] = 1.0;
        let k = lqr(&a, &b, w);
        Design { a, b, k }
    }

    /// u = −K z, clamped to the voltage limit.
    pub fn law(&self, z: &Vector) -> f64 {
        (-dot(&self.k, z)).clamp(-VOLTAGE_LIMIT_V, VOLTAGE_LIMIT_V)
    }

    /// The model's next design state.
    pub fn predict(&self, z: &Vector, u: f64) -> Vector {
        let mut next = mat_vec(&self.a, z);
        for (n, b) in next.iter_mut().zip(&self.b) {
            *n += b * u;
        }
        next
    }

    /// Spectral radius of the closed loop a − b k (mean growth per step of a
    /// power iteration, which also holds for a complex dominant pair): below 1
    /// means stable.
    pub fn closed_loop_radius(&self) -> f64 {
        let mut c = self.a;
        for i in 0..N {
            for j in 0..N {
                c[i][j] -= self.b[i] * self.k[j];
            }
        }
        // ρ ≈ (‖Cⁿv‖ / ‖v‖)^{1/n}, accumulated in logs with a normalization per
        // step; the first 100 steps let the dominant mode take over.
        let mut v = [1.0, 0.5, 0.25, 0.125, 0.0625];
        let mut log_growth = 0.0;
        let (warm, steps) = (100, 2000);
        for i in 0..warm + steps {
            let next = mat_vec(&c, &v);
            let n = dot(&next, &next).sqrt();
            if i >= warm {
                log_growth += n.ln();
            }
            v = next.map(|x| x / n);
        }
        (log_growth / steps as f64).exp()
    }
}

/// The stationary gain of the discrete LQR for (a, b) with weights `w`.
fn lqr(a: &Mat, b: &Vector, w: &Weights) -> Vector {
    let mut p = [[0.0; N]; N];
    for i in 0..N {
        p[i][i] = w.q[i];
    }
    let at = transpose(a);
    let mut k = [0.0; N];
    for _ in 0..20_000 {
        // K = (R + bᵀPb)⁻¹ bᵀ P a
        let pb = mat_vec(&p, b);
        let denom = w.r + dot(b, &pb);
        let pa = mat_mul(&p, a);
        for j in 0..N {
            k[j] = (0..N).map(|i| b[i] * pa[i][j]).sum::<f64>() / denom;
        }
        // P = Q + aᵀ P a − aᵀ P b K
        let atpa = mat_mul(&at, &pa);
        let atpb = mat_vec(&at, &pb);
        let mut next = [[0.0; N]; N];
        let mut change: f64 = 0.0;
        for i in 0..N {
            for j in 0..N {
                next[i][j] = atpa[i][j] - atpb[i] * k[j] + if i == j { w.q[i] } else { 0.0 };
                change = change.max((next[i][j] - p[i][j]).abs() / (1.0 + p[i][j].abs()));
            }
        }
        p = next;
        if change < 1e-12 {
            break;
        }
    }
    k
}

/// The controller's side: estimate the state from a reading, compute the
/// actuation and its backups.
#[derive(Debug, Clone)]
pub struct Controller {
    design: Design,
    last_u: f64,
}

impl Controller {
    /// A controller for `design`.
    pub fn new(design: Design) -> Controller {
        Controller {
            design,
            last_u: 0.0,
        }
    }

    /// The state [θ, ψ, θ̇, ψ̇] a reading stands for.
    pub fn estimate(r: &Reading) -> State {
        [
            r.motor_angle + r.gyro_angle,
            r.gyro_angle,
            r.motor_speed + r.gyro_rate,
            r.gyro_rate,
        ]
    }

    /// The actuation for this reading and `backups` predicted voltages for
    /// the periods after it.
    pub fn actuate(&mut self, r: &Reading, backups: usize) -> (f64, Vec<f64>) {
        let x = Controller::estimate(r);
        let mut z = [x[0], x[1], x[2], x[3], self.last_u];
        let u = self.design.law(&z);
        self.last_u = u;
        let mut out = Vec::with_capacity(backups);
        let mut prev = u;
        for _ in 0..backups {
            z = self.design.predict(&z, prev);
            prev = self.design.law(&z);
            out.push(prev);
        }
        (u, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discretization_matches_integration_and_the_loop_is_stable() {
        let p = Params::default();
        let (ac, bc) = linearize(&p);
        let (phi, gamma) = discretize(&ac, &bc, 0.035);
        // Against 35,000 small Euler steps of the linear model with u = 1 V.
        let mut x = [0.0, 0.01, 0.0, 0.0, 0.0];
        let dt = 1e-6;
        for _ in 0..35_000 {
            let mut dx = mat_vec(&ac, &x);
            for i in 0..4 {
                dx[i] += bc[i];
            }
            for i in 0..4 {
                x[i] += dt * dx[i];
            }
        }
        let want = mat_vec(&phi, &[0.0, 0.01, 0.0, 0.0, 0.0]);
        for i in 0..4 {
            let got = want[i] + gamma[i];
            assert!(
                (got - x[i]).abs() < 1e-3 * (1.0 + x[i].abs()),
                "{i}: {got} vs {}",
                x[i]
            );
        }
        let d = Design::new(&p, 0.035, 0.029, &Weights::default());
        let rho = d.closed_loop_radius();
        assert!(rho < 1.0, "closed loop spectral radius {rho}");
        // Without control the model is unstable.
        let open = Design {
            k: [0.0; N],
            ..d.clone()
        };
        assert!(open.closed_loop_radius() > 1.0);
    }
}
