//! The same M/M/1 as `sim_bench` (10⁶ customers, E[S] = 1 µs, ρ = 0.8) on
//! the general DES engine, to compare the two engines' speed.
//!
//! `cargo run --release -p nflab-model --example des_mm1_bench -- [CUSTOMERS] [RHO]`
//! prints one JSON line: customers, mean sojourn (µs), events, wall seconds, events/s.
use std::time::Instant;

use nflab_model::des::service::Service;
use nflab_model::des::{Core, EntityId, Model, PathId, Sim, Station, Step};

struct Mm1 {
    left: u64,
    rate_per_us: f64,
    path: PathId,
    sum_sojourn_us: f64,
    done: u64,
}

impl Model for Mm1 {
    type Tag = f64;
    type Event = ();
    fn on_event(&mut self, core: &mut Core<f64, ()>, _: ()) {
        if self.left == 0 {
            return;
        }
        self.left -= 1;
        let now = core.now();
        core.spawn(self.path, now);
        let gap = core.rng.exp(1.0 / self.rate_per_us);
        core.schedule(gap, ());
    }
    fn on_exit(&mut self, core: &mut Core<f64, ()>, e: EntityId) {
        self.sum_sojourn_us += core.now() - core.tag(e);
        self.done += 1;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let rho: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.8);
    // Time unit µs here: E[S] = 1.
    let mut core = Core::new(1);
    let s = core.add_station(Station::new("q", 1, None));
    let svc = core.add_service(Service::Exponential(1.0));
    let path = core.add_path(vec![Step::Seize(s), Step::Hold(svc), Step::Release(s)]);
    core.schedule(0.0, ());
    let model = Mm1 {
        left: n,
        rate_per_us: rho,
        path,
        sum_sojourn_us: 0.0,
        done: 0,
    };
    let mut sim = Sim { core, model };
    let t0 = Instant::now();
    sim.run_until(f64::MAX);
    let wall = t0.elapsed().as_secs_f64();
    let events = sim.core.events();
    println!(
        "{{\"customers\": {}, \"mean_sojourn_us\": {:.4}, \"events\": {events}, \"wall_s\": {wall:.4}, \"events_per_s\": {:.0}}}",
        sim.model.done,
        sim.model.sum_sojourn_us / sim.model.done as f64,
        events as f64 / wall
    );
}
