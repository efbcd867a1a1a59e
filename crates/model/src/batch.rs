//! The discrete-time `Gi/Gi^[X]/1−L` batch-polling model of seed 003
//! (Geißler 2021, §2.4.2).
//!
//! Time runs in slots of `Δt`. Packets arrive as a renewal process with
//! inter-arrival pmf `a(k)`; they wait in a FIFO queue of capacity `L`; a
//! single busy-polling core takes `min(Q, β)` packets at each poll and works
//! `B_i` slots on a batch of `i` (an empty poll `B_0`), then polls again.
//! The state is the queue size `Q_n` immediately before the n-th poll; with
//! `X_j` the arrivals during `B_j`,
//!
//! ```text
//! Q_{n+1} = min( Q_n − min(Q_n, β) + X_{min(Q_n, β)}, L )          (2.1)
//! ```
//!
//! whose stationary pmf `q` is found by fixed-point iteration. From it:
//! batch sizes (2.2), loss (2.3), the queue seen by arrivals (2.4), the
//! service time of a random batch (2.5), waiting time `W = R_S + ⌊Q_A/β⌋·B_β`
//! (2.6), sojourn `D = W + S*` (2.7, with `S*` the size-biased service
//! time of the packet's own batch), and the queue at random times, which
//! replaces the garbled (2.9)/(2.10) by a renewal-reward derivation (see
//! `docs/models.md`).
//!
//! Counting convention: a poll at slot `t` takes every packet that arrived at
//! or before `t`; `N(u)` counts arrivals in `(t, t+u]`. For a renewal process
//! observed at an arbitrary slot, the first arrival comes after `R ≥ 1` with
//! `P(R = r) = P(A ≥ r)/E[A]` (2.8 in this convention), and
//! `P(N(u) ≥ k) = P(R + A^{*(k−1)} ≤ u)`. This is exact when arrivals are
//! memoryless (geometric inter-arrival times) and an approximation otherwise.
use nflab_analyze::dist::pmf_quantile;
use serde::Serialize;

use crate::dist::SlotDist;
use crate::sim::{ServiceDist, ServiceMean};
use crate::{positive, ModelError};

/// Inputs of the batch model.
#[derive(Debug, Clone)]
pub struct BatchInputs {
    /// Inter-arrival time, slots.
    pub arrivals: SlotDist,
    /// Service time of a batch of size i = 0..=β, slots.
    pub service: Vec<SlotDist>,
    /// How `service[i]` convolves with itself: `Some(true)` Poisson,
    /// `Some(false)` deterministic, `None` general (slow path).
    pub service_family: Option<bool>,
    /// Queue capacity L.
    pub queue_capacity: usize,
    /// Maximum batch size β.
    pub batch: usize,
    /// Slot length Δt, ns.
    pub dt_ns: f64,
    /// Stop when an iteration changes q by less than this (L1).
    pub tolerance: f64,
    /// Give up after this many iterations.
    pub max_iterations: usize,
}

/// Service-time pmfs on the slot grid from a mean per batch size and a
/// distribution (deterministic or Poisson, as in seed 003).
pub fn service_slots(
    mean: &ServiceMean,
    dist: ServiceDist,
    batch: usize,
    dt_ns: f64,
) -> Result<(Vec<SlotDist>, Option<bool>), ModelError> {
    positive("--dt-ns", dt_ns)?;
    let mut v = Vec::with_capacity(batch + 1);
    for i in 0..=batch {
        let m = mean.mean_ns(i);
        if !(m.is_finite() && m >= 0.0) {
            return Err(ModelError::Input {
                name: "service time",
                reason: format!(
                    "the mean service time of a batch of {i} is {m} ns; give non-negative times"
                ),
            });
        }
        v.push(match dist {
            ServiceDist::Deterministic => SlotDist::deterministic((m / dt_ns).round() as u64),
            ServiceDist::PoissonSlots { .. } => SlotDist::poisson(m / dt_ns)?,
            ServiceDist::Exponential => {
                return Err(ModelError::Input {
                    name: "--service-dist",
                    reason: "the batch model works on a time grid; use deterministic or poisson"
                        .into(),
                })
            }
        });
    }
    let family = match dist {
        ServiceDist::Deterministic => Some(false),
        _ => Some(true),
    };
    Ok((v, family))
}

/// Stationary figures of the batch model.
#[derive(Debug, Clone, Serialize)]
pub struct BatchSolution {
    /// Packet loss probability (2.3).
    pub loss_probability: f64,
    /// Mean batch size at the polls, empty polls included: E[V] (2.2).
    pub mean_batch_size: f64,
    /// Mean size of the non-empty batches.
    pub mean_nonempty_batch_size: f64,
    /// Mean queue size before a poll, E[Q].
    pub mean_queue_at_polls: f64,
    /// Mean queue size an arrival sees, E[Q_A] (2.4).
    pub mean_queue_seen_by_arrivals: f64,
    /// Mean queue size at a random time, E[Q̄].
    pub mean_queue_random_time: f64,
    /// Mean service time of a batch, E[S] (2.5), ns.
    pub mean_batch_service_ns: f64,
    /// Mean waiting time of accepted packets, E[W] (2.6), ns.
    pub mean_wait_ns: f64,
    /// Mean sojourn time of accepted packets, E[D] = E[W] + E[S*] (2.7 with
    /// the size-biased service time of the packet's own batch), ns.
    pub mean_sojourn_ns: f64,
    /// Sojourn quantiles p50, p90, p99, p99.9 (to the slot), ns.
    pub sojourn_quantiles_ns: [f64; 4],
    /// Offered rate 1/E[A], packets/s.
    pub offered_pps: f64,
    /// Carried rate (1 − p_loss)/E[A], packets/s.
    pub throughput_pps: f64,
    /// Batch-size pmf v(0..=β).
    pub batch_size_pmf: Vec<f64>,
    /// Fixed-point iterations done.
    pub iterations: usize,
    /// L1 change of the last iteration (0 for the direct solver).
    pub residual: f64,
    /// How q was found: `power-iteration` (the fixed point of 2.1) or `gth`
    /// (Grassmann–Taksar–Heyman elimination on the banded chain, used when
    /// the iteration converges slowly; same fixed point, no tolerance).
    pub solver: &'static str,
    /// The full distributions.
    #[serde(skip)]
    pub dists: BatchDistributions,
}

/// Distributions of the batch model (index = queue size or slot).
#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchDistributions {
    /// q(k): queue before a poll, k = 0..=L.
    pub queue_at_polls: Vec<f64>,
    /// q_A(k): queue seen by arrivals, k = 0..=L (q_A(L) = p_loss).
    pub queue_seen_by_arrivals: Vec<f64>,
    /// q̄(k): queue at a random time, k = 0..=L.
    pub queue_random_time: Vec<f64>,
    /// w(t): waiting time of accepted packets, slots.
    pub wait_slots: Vec<f64>,
    /// d(t): sojourn time of accepted packets, slots.
    pub sojourn_slots: Vec<f64>,
}

/// Largest table (counting-process CDF) the model builds: 400 M entries.
const MAX_TABLE: usize = 400_000_000;
/// Masses below this are treated as zero in sparse loops (far below any
/// reported digit, and it keeps the iteration sparse).
const TINY: f64 = 1e-30;
/// A probability this small of one more arrival ends the count tables.
const COUNT_EPS: f64 = 1e-15;

fn check(i: &BatchInputs) -> Result<(), ModelError> {
    positive("--batch", i.batch as f64)?;
    positive("--queue", i.queue_capacity as f64)?;
    positive("--dt-ns", i.dt_ns)?;
    if i.batch > i.queue_capacity {
        return Err(ModelError::Input {
            name: "--batch",
            reason: format!(
                "a batch of {} is above the queue capacity --queue {}; use a batch ≤ the capacity",
                i.batch, i.queue_capacity
            ),
        });
    }
    if i.service.len() != i.batch + 1 {
        return Err(ModelError::Input {
            name: "service time",
            reason: format!(
                "give one service time per batch size 0..={} ({} given)",
                i.batch,
                i.service.len()
            ),
        });
    }
    if i.arrivals.mean() <= 0.0 {
        return Err(ModelError::Input {
            name: "inter-arrival distribution",
            reason: "its mean is 0 slots; give a positive mean (or a smaller --dt-ns)".into(),
        });
    }
    if i.service[0].mean() < 1.0 && i.service[0].p(0) > 0.0 {
        return Err(ModelError::Input {
            name: "--fixed-ns",
            reason: "an empty poll takes no time (B_0 = 0 slots with positive probability), so \
                     the chain would stay empty forever; give the empty poll a cost of at least \
                     one slot (--fixed-ns ≥ --dt-ns)"
                .into(),
        });
    }
    if !(i.tolerance > 0.0 && i.tolerance.is_finite()) {
        return Err(ModelError::Invalid {
            name: "--tolerance",
            value: i.tolerance,
            valid: "use a small positive number such as 1e-12",
        });
    }
    Ok(())
}

/// The counting process: c[k−1][u] = P(N(u) ≥ k) for k = 1..=K, u = 0..=T.
fn counting_cdf(a: &SlotDist, t_max: usize) -> Result<Vec<Vec<f64>>, ModelError> {
    let ea = a.mean();
    let dense_a = a.dense();
    // r(j) = P(A ≥ j) / E[A], j ≥ 1.
    let mut f = vec![0.0; t_max + 1];
    let mut tail = 1.0; // P(A ≥ j)
    for (j, slot) in f.iter_mut().enumerate().skip(1) {
        tail -= dense_a.get(j - 1).copied().unwrap_or(0.0);
        if tail <= 0.0 {
            break;
        }
        *slot = tail / ea;
    }
    let mut out = Vec::new();
    loop {
        let mut c = Vec::with_capacity(t_max + 1);
        let mut acc = 0.0;
        for v in &f {
            acc += v;
            c.push(acc.min(1.0));
        }
        let last = c[t_max];
        out.push(c);
        if last < COUNT_EPS {
            break;
        }
        if out.len() * (t_max + 1) > MAX_TABLE {
            return Err(ModelError::Input {
                name: "--dt-ns",
                reason: format!(
                    "the arrival-count table grows beyond {MAX_TABLE} entries; use a coarser \
                     --dt-ns or fewer packets per batch service"
                ),
            });
        }
        // f ← f * a, truncated at t_max.
        let mut g = vec![0.0; t_max + 1];
        let first = f.iter().position(|v| *v > TINY).unwrap_or(t_max + 1);
        for u in first..=t_max {
            let fu = f[u];
            if fu <= TINY {
                continue;
            }
            let lim = (t_max - u).min(dense_a.len().saturating_sub(1));
            for (k, ak) in dense_a[..=lim].iter().enumerate() {
                g[u + k] += fu * ak;
            }
        }
        f = g;
    }
    Ok(out)
}

/// g[j][m] = P(X_j ≥ m) and x[j][m] = P(X_j = m) for each batch size j.
pub(crate) fn arrival_tables(inp: &BatchInputs, c: &[Vec<f64>]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let kmax = c.len();
    // g[j][m] = P(X_j ≥ m), m = 0..=kmax+1 (g[j][0] = 1).
    let g: Vec<Vec<f64>> = inp
        .service
        .iter()
        .map(|b| {
            let mut v = vec![0.0; kmax + 2];
            v[0] = 1.0;
            for (m, cm) in c.iter().enumerate() {
                v[m + 1] = b
                    .pmf
                    .iter()
                    .enumerate()
                    .map(|(o, p)| p * cm[b.offset as usize + o])
                    .sum::<f64>()
                    .min(v[m]);
            }
            v
        })
        .collect();
    // x[j][m] = P(X_j = m); mean[j] = E[X_j]; excess[j][c] = E[(X_j − c)^+].
    let x: Vec<Vec<f64>> = g
        .iter()
        .map(|gj| gj.windows(2).map(|w| (w[0] - w[1]).max(0.0)).collect())
        .collect();
    (g, x)
}

/// Solve the model.
pub fn solve(inp: &BatchInputs) -> Result<BatchSolution, ModelError> {
    check(inp)?;
    let beta = inp.batch;
    let cap = inp.queue_capacity;
    let ea = inp.arrivals.mean();
    let t_max = inp.service.iter().map(SlotDist::max).max().unwrap_or(0) as usize;
    let c = counting_cdf(&inp.arrivals, t_max)?;
    let kmax = c.len(); // P(N ≥ kmax+1) < eps for every service length

    let (g, x) = arrival_tables(inp, &c);
    let ex: Vec<Vec<f64>> = g
        .iter()
        .map(|gj| {
            // excess(c) = Σ_{m > c} P(X ≥ m)
            let mut e = vec![0.0; gj.len() + 1];
            for m in (0..gj.len()).rev() {
                e[m] = e[m + 1] + if m + 1 < gj.len() { gj[m + 1] } else { 0.0 };
            }
            e
        })
        .collect();
    let excess = |j: usize, c: usize| ex[j].get(c).copied().unwrap_or(0.0);
    let tail = |j: usize, m: usize| g[j].get(m).copied().unwrap_or(0.0);

    // Fixed-point iteration of (2.1); where it mixes slowly (near the
    // saturation point) the exact banded GTH elimination takes over.
    let (q, iterations, residual, solver) = stationary(inp, &x, &g)?;

    // (2.2) batch sizes.
    let mut v = vec![0.0; beta + 1];
    for (i, qi) in q.iter().enumerate() {
        v[i.min(beta)] += qi;
    }
    let mean_batch: f64 = v.iter().enumerate().map(|(k, p)| k as f64 * p).sum();
    let mean_nonempty = if v[0] < 1.0 {
        mean_batch / (1.0 - v[0])
    } else {
        0.0
    };

    // (2.3) loss, and (2.4) queue seen by arrivals.
    let mut lost = 0.0;
    let mut arrivals = 0.0;
    let mut qa = vec![0.0; cap + 1];
    for (i, &qi) in q.iter().enumerate() {
        if qi <= TINY {
            continue;
        }
        let j = i.min(beta);
        let after = i - j;
        arrivals += qi * excess(j, 0);
        let l = qi * excess(j, cap - after);
        lost += l;
        qa[cap] += l;
        // The m-th arrival of the cycle (m = 0, 1, …) sees after + m; it
        // exists when X ≥ m + 1.
        for (k, slot) in qa.iter_mut().enumerate().take(cap).skip(after) {
            let p = tail(j, k - after + 1);
            if p <= TINY {
                break;
            }
            *slot += qi * p;
        }
    }
    if arrivals <= 0.0 {
        return Err(ModelError::Input {
            name: "inter-arrival distribution",
            reason: "no packet arrives during any batch service; check the rate and --dt-ns".into(),
        });
    }
    let loss = lost / arrivals;
    qa.iter_mut().for_each(|p| *p /= arrivals);

    // (2.5) service time of a random batch, s(t) = Σ v(i) b_i(t).
    let mut s = vec![0.0; t_max + 1];
    for (i, b) in inp.service.iter().enumerate() {
        for (o, p) in b.pmf.iter().enumerate() {
            s[b.offset as usize + o] += v[i] * p;
        }
    }
    let es: f64 = s.iter().enumerate().map(|(t, p)| t as f64 * p).sum();
    if es <= 0.0 {
        return Err(ModelError::Input {
            name: "service time",
            reason: "every batch takes zero time; give positive service times".into(),
        });
    }
    // R_S: r_S(t) = P(S > t)/E[S], t ≥ 0 (2.8).
    let mut rs = Vec::with_capacity(t_max + 1);
    let mut sc = 0.0;
    for p in &s {
        sc += p;
        rs.push(((1.0 - sc) / es).max(0.0));
    }

    // (2.6) W = R_S + M·B_β with M = ⌊Q_A/β⌋ for accepted packets.
    let accepted: f64 = qa[..cap].iter().sum();
    let mut pm = vec![0.0; cap / beta + 1];
    for (k, p) in qa[..cap].iter().enumerate() {
        pm[k / beta] += p / accepted;
    }
    let bb = &inp.service[beta];
    let mut w: Vec<f64> = Vec::new();
    let mut power = SlotDist::deterministic(0); // B_β^{*m}
    for (m, &p) in pm.iter().enumerate() {
        if m > 0 {
            power = match inp.service_family {
                Some(false) => SlotDist::deterministic(bb.offset * m as u64),
                Some(true) => SlotDist::poisson(bb.mean() * m as f64)?,
                None => convolve_dist(&power, bb)?,
            };
        }
        if p <= 1e-16 {
            continue;
        }
        let need = power.max() as usize + rs.len();
        if w.len() < need {
            w.resize(need, 0.0);
        }
        for (o, pp) in power.pmf.iter().enumerate() {
            let base = power.offset as usize + o;
            let f = p * pp;
            if f <= 1e-18 {
                continue;
            }
            for (t, r) in rs.iter().enumerate() {
                w[base + t] += f * r;
            }
        }
    }
    // (2.7) D = W + S*. A packet leaves in a non-empty batch, picked with
    // probability proportional to its size, so its own service time is the
    // size-biased s*(t) = Σ i·v(i)·b_i(t) / E[V]; the unconditional S of the
    // source (empty polls included) would underestimate D.
    let mut s_own = vec![0.0; t_max + 1];
    if mean_batch > 0.0 {
        for (i, b) in inp.service.iter().enumerate().skip(1) {
            let wgt = i as f64 * v[i] / mean_batch;
            for (o, p) in b.pmf.iter().enumerate() {
                s_own[b.offset as usize + o] += wgt * p;
            }
        }
    }
    let d = convolve(&w, &s_own);
    let mean_of = |x: &[f64]| x.iter().enumerate().map(|(t, p)| t as f64 * p).sum::<f64>();
    // The engine's nearest-rank rule on the sojourn pmf (slots).
    let quant = |x: &[f64], q: f64| pmf_quantile(x, q).unwrap_or(0) as f64;

    // Queue at random times: renewal-reward over one poll cycle.
    let qbar = random_time_queue(&q, &c, inp, kmax)?;

    let dt = inp.dt_ns;
    let mean_q = |x: &[f64]| x.iter().enumerate().map(|(k, p)| k as f64 * p).sum::<f64>();
    Ok(BatchSolution {
        loss_probability: loss.clamp(0.0, 1.0),
        mean_batch_size: mean_batch,
        mean_nonempty_batch_size: mean_nonempty,
        mean_queue_at_polls: mean_q(&q),
        mean_queue_seen_by_arrivals: mean_q(&qa),
        mean_queue_random_time: mean_q(&qbar),
        mean_batch_service_ns: es * dt,
        mean_wait_ns: mean_of(&w) * dt,
        mean_sojourn_ns: mean_of(&d) * dt,
        sojourn_quantiles_ns: [
            quant(&d, 0.5) * dt,
            quant(&d, 0.9) * dt,
            quant(&d, 0.99) * dt,
            quant(&d, 0.999) * dt,
        ],
        offered_pps: 1e9 / (ea * dt),
        throughput_pps: (1.0 - loss.clamp(0.0, 1.0)) * 1e9 / (ea * dt),
        batch_size_pmf: v,
        iterations,
        residual,
        solver,
        dists: BatchDistributions {
            queue_at_polls: q,
            queue_seen_by_arrivals: qa,
            queue_random_time: qbar,
            wait_slots: w,
            sojourn_slots: d,
        },
    })
}

/// One application of (2.1): `next` = distribution before the next poll.
pub(crate) fn step(
    beta: usize,
    cap: usize,
    x: &[Vec<f64>],
    g: &[Vec<f64>],
    q: &[f64],
    next: &mut [f64],
) {
    next.iter_mut().for_each(|v| *v = 0.0);
    for (i, &qi) in q.iter().enumerate() {
        if qi <= TINY {
            continue;
        }
        let j = i.min(beta);
        let after = i - j;
        let room = cap - after;
        for (m, p) in x[j].iter().enumerate().take(room) {
            next[after + m] += qi * p;
        }
        next[cap] += qi * g[j].get(room).copied().unwrap_or(0.0);
    }
}

/// The stationary pmf of the chain (2.1): power iteration while it is
/// cheaper than the direct method, else GTH on the banded matrix.
fn stationary(
    inp: &BatchInputs,
    x: &[Vec<f64>],
    g: &[Vec<f64>],
) -> Result<(Vec<f64>, usize, f64, &'static str), ModelError> {
    let beta = inp.batch;
    let cap = inp.queue_capacity;
    let step = |q: &[f64], next: &mut [f64]| step(beta, cap, x, g, q, next);
    // The direct method costs about β iterations; try the iteration first.
    let budget = inp.max_iterations.min(2 * beta + 50);
    let mut q = vec![0.0; cap + 1];
    q[0] = 1.0;
    let mut next = vec![0.0; cap + 1];
    let mut residual = f64::INFINITY;
    let mut it = 0;
    let mut run = |q: &mut Vec<f64>, limit: usize, it: &mut usize, residual: &mut f64| {
        while *it < limit {
            step(q, &mut next);
            let s: f64 = next.iter().sum();
            *residual = 0.0;
            for (a, b) in q.iter_mut().zip(next.iter()) {
                let v = b / s;
                *residual += (*a - v).abs();
                *a = v;
            }
            *it += 1;
            if *residual < inp.tolerance {
                return true;
            }
        }
        false
    };
    if run(&mut q, budget, &mut it, &mut residual) {
        return Ok((q, it, residual, "power-iteration"));
    }
    if let Some(direct) = gth(inp, x, g) {
        return Ok((direct, it, 0.0, "gth"));
    }
    if run(&mut q, inp.max_iterations, &mut it, &mut residual) {
        return Ok((q, it, residual, "power-iteration"));
    }
    Err(ModelError::NotConverged {
        iterations: it,
        residual,
    })
}

/// Grassmann–Taksar–Heyman state reduction on the banded transition matrix:
/// from state i the chain moves to j ∈ [i − β, i + K], a band that the
/// elimination keeps. Subtraction-free, so stable at any load. None when a
/// state cannot move down (then the iteration decides).
fn gth(inp: &BatchInputs, x: &[Vec<f64>], g: &[Vec<f64>]) -> Option<Vec<f64>> {
    let beta = inp.batch;
    let cap = inp.queue_capacity;
    let kmax = x.iter().map(Vec::len).max().unwrap_or(1);
    // Row i holds p(i, j) for j in lo(i) ..= hi(i).
    let lo = |i: usize| i.saturating_sub(beta);
    let hi = |i: usize| (i + kmax).min(cap);
    let mut rows: Vec<Vec<f64>> = (0..=cap).map(|i| vec![0.0; hi(i) - lo(i) + 1]).collect();
    for (i, row) in rows.iter_mut().enumerate() {
        let j = i.min(beta);
        let after = i - j;
        let room = cap - after;
        for (m, p) in x[j].iter().enumerate().take(room) {
            row[after + m - lo(i)] += p;
        }
        if cap <= hi(i) {
            row[cap - lo(i)] += g[j].get(room).copied().unwrap_or(0.0);
        }
    }
    let mut down = vec![0.0; cap + 1];
    for n in (1..=cap).rev() {
        let (ln, s): (usize, f64) = (lo(n), rows[n][..n - lo(n)].iter().sum());
        if s <= 0.0 {
            return None;
        }
        down[n] = s;
        let (before, rest) = rows.split_at_mut(n);
        let rn = &rest[0][..n - ln];
        for (i, ri) in before.iter_mut().enumerate().skip(n.saturating_sub(kmax)) {
            let li = lo(i);
            if n > hi(i) {
                continue;
            }
            let pin = ri[n - li];
            if pin <= 0.0 {
                continue;
            }
            let f = pin / s;
            for (k, p) in rn.iter().enumerate() {
                ri[ln + k - li] += f * p;
            }
        }
    }
    let mut pi = vec![0.0; cap + 1];
    pi[0] = 1.0;
    for n in 1..=cap {
        let mut acc = 0.0;
        for (i, p) in pi.iter().enumerate().take(n).skip(n.saturating_sub(kmax)) {
            if n <= hi(i) {
                acc += p * rows[i][n - lo(i)];
            }
        }
        pi[n] = acc / down[n];
    }
    let total: f64 = pi.iter().sum();
    if !(total.is_finite() && total > 0.0) {
        return None;
    }
    pi.iter_mut().for_each(|p| *p /= total);
    Some(pi)
}

/// q̄(k) = E[time at level k in a cycle] / E[cycle length] (renewal reward).
/// In a cycle that starts with `i'` packets after the pick-up and lasts `n`
/// slots, the level during slot u ∈ [0, n) is min(i' + N(u), L).
fn random_time_queue(
    q: &[f64],
    c: &[Vec<f64>],
    inp: &BatchInputs,
    kmax: usize,
) -> Result<Vec<f64>, ModelError> {
    let cap = inp.queue_capacity;
    let beta = inp.batch;
    let t_max = c[0].len() - 1;
    // P(N(u) ≥ m), m = 0..=kmax.
    let ge = |m: usize, u: usize| {
        if m == 0 {
            1.0
        } else {
            c.get(m - 1).map_or(0.0, |cm| cm[u])
        }
    };
    // h[j][m] = Σ_n b_j(n) Σ_{u<n} P(N(u) = m); ht[j][m] same with N(u) ≥ m.
    let mut h = vec![vec![0.0; kmax + 1]; beta + 1];
    let mut ht = vec![vec![0.0; kmax + 2]; beta + 1];
    let mut pre_eq = vec![0.0; t_max + 2];
    let mut pre_ge = vec![0.0; t_max + 2];
    for m in 0..=kmax {
        for u in 0..=t_max {
            let gm = ge(m, u);
            pre_eq[u + 1] = pre_eq[u] + (gm - ge(m + 1, u)).max(0.0);
            pre_ge[u + 1] = pre_ge[u] + gm;
        }
        for (j, b) in inp.service.iter().enumerate() {
            let (mut se, mut sg) = (0.0, 0.0);
            for (o, p) in b.pmf.iter().enumerate() {
                let n = b.offset as usize + o;
                se += p * pre_eq[n];
                sg += p * pre_ge[n];
            }
            h[j][m] = se;
            ht[j][m] = sg;
        }
    }
    let mut qbar = vec![0.0; cap + 1];
    let mut cycle = 0.0;
    for (i, &qi) in q.iter().enumerate() {
        if qi <= TINY {
            continue;
        }
        let j = i.min(beta);
        let after = i - j;
        cycle += qi * inp.service[j].mean();
        for m in 0..=kmax.min(cap - after - 1) {
            qbar[after + m] += qi * h[j][m];
        }
        let room = cap - after;
        if room <= kmax {
            qbar[cap] += qi * ht[j][room];
        }
    }
    if cycle <= 0.0 {
        return Err(ModelError::Input {
            name: "service time",
            reason: "the poll cycles take no time; give positive service times".into(),
        });
    }
    qbar.iter_mut().for_each(|p| *p /= cycle);
    Ok(qbar)
}

fn convolve(a: &[f64], b: &[f64]) -> Vec<f64> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut out = vec![0.0; a.len() + b.len() - 1];
    for (i, x) in a.iter().enumerate() {
        if *x <= 1e-18 {
            continue;
        }
        for (j, y) in b.iter().enumerate() {
            out[i + j] += x * y;
        }
    }
    out
}

fn convolve_dist(a: &SlotDist, b: &SlotDist) -> Result<SlotDist, ModelError> {
    SlotDist::from_pmf(a.offset + b.offset, convolve(&a.pmf, &b.pmf))
}

#[cfg(test)]
mod tests;
