//! Batch model tests: internal consistency, bad input, and agreement with
//! the simulator on the same inputs (loss within 0.2 percentage points, mean
//! batch size within 2 %).
//!
//! With geometric inter-arrival times the embedded chain is exact, so the
//! only difference is the simulator's sampling error. Its size: with 10⁶
//! packets the loss and the mean batch size have standard errors of about
//! 0.02 pp and 0.1 % (batch means, measured over seeds), ten times below the
//! tolerances; a wrong transition law (off by one arrival per cycle, a lost
//! tail) moves them by more than the tolerances, see
//! `an_off_by_one_convention_is_detected`.
use super::*;
use crate::sim::{self, Arrivals, Service, SimConfig};

const DT: u64 = 10;

fn service() -> ServiceMean {
    ServiceMean::Linear {
        fixed_ns: 100.0,
        per_packet_ns: 40.0,
    }
}

fn inputs(arrivals: SlotDist, batch: usize, cap: usize) -> BatchInputs {
    let (svc, fam) = service_slots(
        &service(),
        ServiceDist::PoissonSlots { dt_ns: DT },
        batch,
        DT as f64,
    )
    .unwrap();
    BatchInputs {
        arrivals,
        service: svc,
        service_family: fam,
        queue_capacity: cap,
        batch,
        dt_ns: DT as f64,
        tolerance: 1e-12,
        max_iterations: 200_000,
    }
}

fn simulate_same(inp: &BatchInputs, packets: u64, seed: u64) -> sim::SimStats {
    sim::simulate(&SimConfig {
        arrivals: Arrivals::Slots {
            dist: inp.arrivals.clone(),
            dt_ns: DT,
        },
        packets,
        warmup_packets: packets / 100,
        queue_capacity: inp.queue_capacity,
        batch: inp.batch,
        service: Service {
            mean: service(),
            dist: ServiceDist::PoissonSlots { dt_ns: DT },
        },
        seed,
        ..SimConfig::default()
    })
    .unwrap()
    .stats
}

#[test]
fn distributions_are_normalised_and_consistent() {
    let s = solve(&inputs(SlotDist::geometric(5.0).unwrap(), 16, 64)).unwrap();
    let d = &s.dists;
    for (name, v) in [
        ("q", &d.queue_at_polls),
        ("q_A", &d.queue_seen_by_arrivals),
        ("q̄", &d.queue_random_time),
        ("w", &d.wait_slots),
        ("d", &d.sojourn_slots),
    ] {
        let sum: f64 = v.iter().sum();
        // q̄ sums to 1 only if the time at every level, the full level
        // included, adds up to the cycle length: a check of the derivation.
        let tol = if name == "w" || name == "d" {
            1e-6
        } else {
            1e-9
        };
        assert!((sum - 1.0).abs() < tol, "{name}: {sum}");
    }
    assert!((s.batch_size_pmf.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    // An arrival that finds the queue full is lost: q_A(L) = p_loss.
    assert!((d.queue_seen_by_arrivals[64] - s.loss_probability).abs() < 1e-12);
    // Flow balance: packets taken per cycle = packets accepted per cycle,
    // E[V] = (1 − p) · E[arrivals per cycle] = (1 − p) · E[S] / E[A].
    let per_cycle = s.mean_batch_service_ns / (5.0 * DT as f64);
    assert!(
        (s.mean_batch_size - (1.0 - s.loss_probability) * per_cycle).abs() < 1e-6,
        "{} vs {}",
        s.mean_batch_size,
        (1.0 - s.loss_probability) * per_cycle
    );
    assert!(s.loss_probability > 0.0 && s.loss_probability < 0.2);
}

#[test]
fn agrees_with_the_simulator_geometric_arrivals() {
    // Light, near saturation and overloaded: 10, 20 and 25 Mpps against a
    // capacity of 16 / 740 ns = 21.6 Mpps at full batches.
    for (mean_slots, seed) in [(10.0, 31), (5.0, 32), (4.0, 33)] {
        let inp = inputs(SlotDist::geometric(mean_slots).unwrap(), 16, 64);
        let m = solve(&inp).unwrap();
        let s = simulate_same(&inp, 1_000_000, seed);
        let dl = (m.loss_probability - s.loss_probability).abs();
        assert!(
            dl < 0.002,
            "E[A]={mean_slots}: loss model {} sim {}",
            m.loss_probability,
            s.loss_probability
        );
        let db = (m.mean_batch_size - s.mean_batch_size).abs() / s.mean_batch_size;
        assert!(
            db < 0.02,
            "E[A]={mean_slots}: batch model {} sim {}",
            m.mean_batch_size,
            s.mean_batch_size
        );
        let dn = (m.mean_nonempty_batch_size - s.mean_nonempty_batch_size).abs()
            / s.mean_nonempty_batch_size;
        assert!(
            dn < 0.02,
            "E[A]={mean_slots}: nonempty {} sim {}",
            m.mean_nonempty_batch_size,
            s.mean_nonempty_batch_size
        );
        // The sojourn time rests on the approximation W = R_S + ⌊Q_A/β⌋ B_β
        // with R_S independent of Q_A; it is checked to 10 %.
        let dd = (m.mean_sojourn_ns - s.mean_sojourn_ns).abs() / s.mean_sojourn_ns;
        assert!(
            dd < 0.10,
            "E[A]={mean_slots}: sojourn model {} sim {}",
            m.mean_sojourn_ns,
            s.mean_sojourn_ns
        );
    }
}

#[test]
fn agrees_with_the_simulator_poisson_arrivals() {
    // Seed 003's choice: discrete Poisson inter-arrival times (c_v ≈ 0.39),
    // for which the chain is an approximation.
    for (mean_slots, seed) in [(10.0, 41), (5.0, 42), (4.0, 43)] {
        let inp = inputs(SlotDist::poisson(mean_slots).unwrap(), 16, 64);
        let m = solve(&inp).unwrap();
        let s = simulate_same(&inp, 1_000_000, seed);
        let dl = (m.loss_probability - s.loss_probability).abs();
        assert!(
            dl < 0.002,
            "E[A]={mean_slots}: loss model {} sim {}",
            m.loss_probability,
            s.loss_probability
        );
        let db = (m.mean_batch_size - s.mean_batch_size).abs() / s.mean_batch_size;
        assert!(
            db < 0.02,
            "E[A]={mean_slots}: batch model {} sim {}",
            m.mean_batch_size,
            s.mean_batch_size
        );
    }
}

#[test]
fn an_off_by_one_convention_is_detected() {
    // The same system with one slot more per inter-arrival time is a
    // different system; the tolerances tell it apart, so the agreement above
    // is not vacuous.
    let inp = inputs(SlotDist::geometric(5.0).unwrap(), 16, 64);
    let shifted = inputs(SlotDist::geometric(6.0).unwrap(), 16, 64);
    let s = simulate_same(&inp, 1_000_000, 32);
    let wrong = solve(&shifted).unwrap();
    let dl = (wrong.loss_probability - s.loss_probability).abs();
    let db = (wrong.mean_batch_size - s.mean_batch_size).abs() / s.mean_batch_size;
    assert!(dl > 0.002 || db > 0.02, "{dl} {db}");
}

#[test]
fn empirical_arrivals_from_samples() {
    // CBR every 7 slots as an empirical distribution equals deterministic.
    let e = SlotDist::empirical(&[7; 100]).unwrap();
    let a = solve(&inputs(e, 16, 64)).unwrap();
    let b = solve(&inputs(SlotDist::deterministic(7), 16, 64)).unwrap();
    assert!((a.mean_batch_size - b.mean_batch_size).abs() < 1e-12);
    assert!(a.loss_probability < 1e-12);
}

#[test]
fn bad_input_is_a_sentence() {
    let mut inp = inputs(SlotDist::geometric(5.0).unwrap(), 16, 64);
    inp.queue_capacity = 8;
    let e = solve(&inp).unwrap_err().to_string();
    assert!(e.contains("--batch") && e.contains("capacity"), "{e}");
    let (svc, fam) = service_slots(
        &ServiceMean::Linear {
            fixed_ns: 0.0,
            per_packet_ns: 40.0,
        },
        ServiceDist::Deterministic,
        16,
        10.0,
    )
    .unwrap();
    let inp = BatchInputs {
        service: svc,
        service_family: fam,
        ..inputs(SlotDist::geometric(5.0).unwrap(), 16, 64)
    };
    let e = solve(&inp).unwrap_err().to_string();
    assert!(e.contains("--fixed-ns"), "{e}");
    let e = solve(&inputs(
        SlotDist::empirical(&[]).unwrap_or(SlotDist::deterministic(0)),
        16,
        64,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("mean is 0"), "{e}");
}

#[test]
fn direct_solver_equals_the_fixed_point() {
    // Two iterations are not enough: the GTH elimination takes over and
    // must land on the same fixed point the iteration reaches.
    for mean in [4.0, 4.6, 10.0] {
        let mut fast = inputs(SlotDist::geometric(mean).unwrap(), 16, 64);
        fast.max_iterations = 2;
        let a = solve(&fast).unwrap();
        assert_eq!(a.solver, "gth");
        // A fixed point of (2.1): one step maps q onto itself.
        let t_max = fast.service.iter().map(SlotDist::max).max().unwrap() as usize;
        let c = counting_cdf(&fast.arrivals, t_max).unwrap();
        let (g, x) = arrival_tables(&fast, &c);
        let q = &a.dists.queue_at_polls;
        let mut next = vec![0.0; q.len()];
        step(16, 64, &x, &g, q, &mut next);
        let d: f64 = q.iter().zip(&next).map(|(a, b)| (a - b).abs()).sum();
        assert!(d < 1e-12, "E[A]={mean}: {d}");
        // And the same as the iteration's answer.
        let b = solve(&inputs(SlotDist::geometric(mean).unwrap(), 16, 64)).unwrap();
        assert!((a.loss_probability - b.loss_probability).abs() < 1e-10);
        assert!((a.mean_batch_size - b.mean_batch_size).abs() < 1e-9);
    }
}
