//! The engine against closed forms. Each estimate is a mean over batches of
//! customers; the tolerance is 5 standard errors of the batch means, so it
//! shrinks with the run length instead of being a fixed percentage.

use super::service::{Family, Service};
use super::*;

#[derive(Clone, Copy)]
struct Cust {
    arrived: f64,
    started: f64,
}

/// Poisson arrivals to one station: [Seize, Hook(started), Hold, Release].
struct Queue {
    rate: f64,
    path: PathId,
    patience_s: Option<f64>,
    customers: u64,
    waits: Vec<f64>,
    sojourns: Vec<f64>,
    abandoned: u64,
    blocked: u64,
    departed: u64,
}

const STARTED: u16 = 0;

#[derive(Clone, Copy)]
enum Ev {
    Arrive,
}

impl Model for Queue {
    type Tag = Cust;
    type Event = Ev;
    fn on_event(&mut self, core: &mut Core<Cust, Ev>, _ev: Ev) {
        if self.customers == 0 {
            return;
        }
        self.customers -= 1;
        let now = core.now();
        let e = core.spawn(
            self.path,
            Cust {
                arrived: now,
                started: f64::NAN,
            },
        );
        if let Some(p) = self.patience_s {
            let d = core.rng.exp(p);
            core.set_timer(e, d, 0);
        }
        let gap = core.rng.exp(1.0 / self.rate);
        core.schedule(gap, Ev::Arrive);
    }
    fn hook(&mut self, core: &mut Core<Cust, Ev>, e: EntityId, _h: u16) -> Flow {
        core.cancel_timer(e);
        let now = core.now();
        let t = core.tag_mut(e);
        t.started = now;
        self.waits.push(now - t.arrived);
        Flow::Next
    }
    fn on_timer(&mut self, core: &mut Core<Cust, Ev>, e: EntityId, _tag: u16) {
        if core.renege(e) {
            self.abandoned += 1;
        }
    }
    fn on_blocked(&mut self, _core: &mut Core<Cust, Ev>, _e: EntityId, _s: StationId) {
        self.blocked += 1;
    }
    fn on_exit(&mut self, core: &mut Core<Cust, Ev>, e: EntityId) {
        let t = core.tag(e);
        if t.started.is_finite() {
            self.departed += 1;
            self.sojourns.push(core.now() - t.arrived);
        }
    }
}

fn queue_sim(
    rate: f64,
    servers: u32,
    queue_limit: Option<usize>,
    service: Service,
    patience_s: Option<f64>,
    customers: u64,
    seed: u64,
) -> Sim<Queue> {
    let mut core = Core::new(seed);
    let s = core.add_station(Station::new("q", servers, queue_limit));
    let svc = core.add_service(service);
    let path = core.add_path(vec![
        Step::Seize(s),
        Step::Hook(STARTED),
        Step::Hold(svc),
        Step::Release(s),
    ]);
    core.schedule(0.0, Ev::Arrive);
    let model = Queue {
        rate,
        path,
        patience_s,
        customers,
        waits: Vec::new(),
        sojourns: Vec::new(),
        abandoned: 0,
        blocked: 0,
        departed: 0,
    };
    let mut sim = Sim { core, model };
    // Long enough for the last customers to leave a stable queue.
    sim.run_until(customers as f64 / rate * 1.5 + 100.0);
    sim
}

/// Mean and standard error by batch means (first batch dropped as warm-up).
fn batch_mean(xs: &[f64], batches: usize) -> (f64, f64) {
    let size = xs.len() / (batches + 1);
    let means: Vec<f64> = (1..=batches)
        .map(|b| xs[b * size..(b + 1) * size].iter().sum::<f64>() / size as f64)
        .collect();
    let m = means.iter().sum::<f64>() / batches as f64;
    let v = means.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (batches - 1) as f64;
    (m, (v / batches as f64).sqrt())
}

fn close(name: &str, (m, se): (f64, f64), exact: f64) {
    assert!(
        (m - exact).abs() < 5.0 * se + 1e-9,
        "{name}: simulated {m} ± {se}, closed form {exact}"
    );
    // A tolerance that is itself too wide would make the test unable to fail.
    assert!(
        se < 0.05 * exact.abs().max(1e-3),
        "{name}: se {se} too wide"
    );
}

fn erlang_c(c: u32, a: f64) -> f64 {
    // Probability of waiting in M/M/c with offered load a = λ/μ.
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..c {
        term *= a / f64::from(k);
        sum += term;
    }
    let last = term * a / f64::from(c) * f64::from(c) / (f64::from(c) - a);
    last / (sum + last)
}

#[test]
fn mm1_wait_and_sojourn() {
    let (lambda, mu) = (0.7, 1.0);
    let sim = queue_sim(
        lambda,
        1,
        None,
        Service::Exponential(1.0 / mu),
        None,
        300_000,
        1,
    );
    let m = &sim.model;
    close(
        "M/M/1 W",
        batch_mean(&m.waits, 20),
        lambda / (mu * (mu - lambda)),
    );
    close("M/M/1 T", batch_mean(&m.sojourns, 20), 1.0 / (mu - lambda));
}

#[test]
fn mmc_erlang_c_and_littles_law() {
    let (lambda, mu, c) = (3.2, 1.0, 4);
    let sim = queue_sim(
        lambda,
        c,
        None,
        Service::Exponential(1.0 / mu),
        None,
        300_000,
        2,
    );
    let a = lambda / mu;
    let wq = erlang_c(c, a) / (f64::from(c) * mu - lambda);
    close("M/M/c W", batch_mean(&sim.model.waits, 20), wq);
    // Little's law over the whole run, every customer gone: the monitors'
    // time integral of the number in system equals the sum of sojourns.
    let st = &sim.core.stations[0];
    assert_eq!(st.queue_len() + st.busy() as usize, 0);
    let secs = sim.core.now().ceil() as usize;
    let area =
        (st.queue_level.mean_between(0, secs) + st.busy_level.mean_between(0, secs)) * secs as f64;
    let total: f64 = sim.model.sojourns.iter().sum();
    assert!(
        (area - total).abs() < 1e-6 * total,
        "Little: ∫N dt {area} vs Σ T {total}"
    );
    // Utilisation over the busy part of the run: ρ = λ / (c μ).
    let busy_until = (300_000.0 / lambda) as usize;
    let rho = st.utilisation_between(busy_until / 10, busy_until);
    assert!((rho - a / f64::from(c)).abs() < 0.01, "utilisation {rho}");
}

#[test]
fn mmck_blocking() {
    // M/M/2/5: 2 servers, 3 waiting places.
    let (lambda, mu, c, k) = (2.5, 1.0, 2u32, 5u32);
    let n = 300_000;
    let sim = queue_sim(
        lambda,
        c,
        Some((k - c) as usize),
        Service::Exponential(1.0 / mu),
        None,
        n,
        3,
    );
    let a = lambda / mu;
    let p: Vec<f64> = (0..=k)
        .map(|j| {
            if j <= c {
                a.powi(j as i32) / (1..=j).map(f64::from).product::<f64>()
            } else {
                a.powi(j as i32)
                    / (1..=c).map(f64::from).product::<f64>()
                    / f64::from(c).powi((j - c) as i32)
            }
        })
        .collect();
    let pk = p[k as usize] / p.iter().sum::<f64>();
    let got = sim.model.blocked as f64 / n as f64;
    // Binomial-like tolerance from the number of arrivals, widened ×2 for
    // the correlation of successive blocking events.
    let se = (pk * (1.0 - pk) / n as f64).sqrt() * 2.0;
    assert!((got - pk).abs() < 5.0 * se, "blocking {got} vs {pk}");
}

#[test]
fn mm_infinity_mean_number() {
    let (lambda, mu) = (50.0, 0.5);
    let sim = queue_sim(
        lambda,
        u32::MAX,
        None,
        Service::Exponential(1.0 / mu),
        None,
        200_000,
        4,
    );
    let st = &sim.core.stations[0];
    let end = (200_000.0 / lambda) as usize;
    let means: Vec<f64> = (1..=20)
        .map(|b| st.busy_level.mean_between(b * end / 21, (b + 1) * end / 21))
        .collect();
    let m = means.iter().sum::<f64>() / 20.0;
    let se = (means.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 19.0 / 20.0).sqrt();
    close("M/M/∞ N", (m, se), lambda / mu);
    assert_eq!(st.utilisation_between(0, end), 0.0);
}

#[test]
fn mg1_pollaczek_khinchine_gamma() {
    for (family, cv) in [
        (Family::Gamma, 0.5),
        (Family::Gamma, 2.0),
        (Family::Lognormal, 0.5),
    ] {
        let (lambda, es) = (0.6, 1.0);
        let svc = Service::from_mean_cv(family, es, cv).expect("valid");
        let sim = queue_sim(lambda, 1, None, svc, None, 300_000, 5);
        let wq = lambda * (1.0 + cv * cv) * es * es / (2.0 * (1.0 - lambda * es));
        close(
            &format!("M/G/1 {family:?} cv {cv}"),
            batch_mean(&sim.model.waits, 20),
            wq,
        );
    }
}

#[test]
fn mm1_plus_m_abandonment() {
    // M/M/1+M: birth-death with death rate μ + (n−1)θ in state n ≥ 1.
    let (lambda, mu, theta) = (1.2, 1.0, 0.5);
    let mut p = vec![1.0f64];
    for n in 1..400 {
        let death = mu + f64::from(n - 1) * theta;
        p.push(p[n as usize - 1] * lambda / death);
    }
    let z: f64 = p.iter().sum();
    let lq: f64 = p
        .iter()
        .enumerate()
        .skip(1)
        .map(|(n, x)| (n - 1) as f64 * x / z)
        .sum();
    let p_abandon = theta * lq / lambda;
    let n = 200_000;
    let sim = queue_sim(
        lambda,
        1,
        None,
        Service::Exponential(1.0 / mu),
        Some(1.0 / theta),
        n,
        6,
    );
    let got = sim.model.abandoned as f64 / n as f64;
    let se = (p_abandon * (1.0 - p_abandon) / n as f64).sqrt() * 3.0;
    assert!(
        (got - p_abandon).abs() < 5.0 * se,
        "abandon {got} vs {p_abandon}"
    );
    assert_eq!(sim.model.abandoned + sim.model.departed, n);
}

#[derive(Clone, Copy)]
struct Job {
    arrived: f64,
}

/// Fork into two exponential branches on infinite-server stations, join.
struct ForkJoin {
    left: u64,
    path: PathId,
    times: Vec<f64>,
}

impl Model for ForkJoin {
    type Tag = Job;
    type Event = ();
    fn on_event(&mut self, core: &mut Core<Job, ()>, _: ()) {
        if self.left == 0 {
            return;
        }
        self.left -= 1;
        let now = core.now();
        core.spawn(self.path, Job { arrived: now });
        core.schedule(0.1, ());
    }
    fn on_exit(&mut self, core: &mut Core<Job, ()>, e: EntityId) {
        if !core.is_child(e) {
            self.times.push(core.now() - core.tag(e).arrived);
        }
    }
}

#[test]
fn fork_join_waits_for_the_slower_branch() {
    let (a, b) = (1.0, 0.25);
    let mut core = Core::new(7);
    let inf = core.add_station(Station::new("inf", u32::MAX, None));
    let sa = core.add_service(Service::Exponential(1.0 / a));
    let sb = core.add_service(Service::Exponential(1.0 / b));
    let left = core.add_path(vec![Step::Seize(inf), Step::Hold(sa), Step::Release(inf)]);
    let right = core.add_path(vec![Step::Seize(inf), Step::Hold(sb), Step::Release(inf)]);
    let fork = core.add_fork(vec![left, right]);
    let path = core.add_path(vec![Step::Fork(fork)]);
    core.schedule(0.0, ());
    let mut sim = Sim {
        core,
        model: ForkJoin {
            left: 100_000,
            path,
            times: Vec::new(),
        },
    };
    sim.run_until(1e12);
    let exact = 1.0 / a + 1.0 / b - 1.0 / (a + b);
    close("E[max]", batch_mean(&sim.model.times, 20), exact);
}

#[test]
fn equal_seeds_equal_runs() {
    let run = |seed| {
        let s = queue_sim(
            0.9,
            2,
            Some(3),
            Service::Exponential(2.0),
            None,
            5_000,
            seed,
        );
        (s.model.waits.clone(), s.core.events())
    };
    assert_eq!(run(9), run(9));
    assert_ne!(run(9).0, run(10).0);
}
