//! M/M/1 with 10⁶ customers through the nflab simulator, for `bench/model/`.
//!
//! `cargo run --release -p nflab-model --example sim_bench -- [CUSTOMERS] [RHO] [SEED]`
//! prints one JSON line: customers, mean sojourn (µs, E[S] = 1 µs), events,
//! wall seconds, events/s, customers/s.
use nflab_model::sim::{simulate, Arrivals, Service, ServiceDist, ServiceMean, SimConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let rho: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.8);
    let seed: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let cfg = SimConfig {
        arrivals: Arrivals::Poisson {
            rate_pps: rho * 1e6,
        },
        packets: n,
        queue_capacity: usize::MAX / 2,
        batch: 1,
        service: Service {
            mean: ServiceMean::Linear {
                fixed_ns: 0.0,
                per_packet_ns: 1000.0,
            },
            dist: ServiceDist::Exponential,
        },
        seed,
        ..SimConfig::default()
    };
    // Best of three, as the Python peers.
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let o = simulate(&cfg).expect("valid configuration");
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(o);
    }
    let s = out.expect("ran").stats;
    println!(
        "{{\"tool\": \"nflab\", \"customers\": {n}, \"rho\": {rho}, \"mean_sojourn_us\": {}, \"events\": {}, \"wall_s\": {best}, \"events_per_s\": {}, \"customers_per_s\": {}}}",
        s.mean_sojourn_ns / 1e3,
        s.events,
        s.events as f64 / best,
        n as f64 / best
    );
}
