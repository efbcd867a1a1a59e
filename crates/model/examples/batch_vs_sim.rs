//! The batch model against the simulator on identical inputs: the table in
//! `docs/models.md` §2.
//!
//! `cargo run --release -p nflab-model --example batch_vs_sim`
use nflab_model::batch::{self, BatchInputs};
use nflab_model::dist::SlotDist;
use nflab_model::sim::{self, Arrivals, Service, ServiceDist, ServiceMean, SimConfig};

fn main() {
    let dt = 10u64;
    let mean = ServiceMean::Linear {
        fixed_ns: 100.0,
        per_packet_ns: 40.0,
    };
    let dist = ServiceDist::PoissonSlots { dt_ns: dt };
    println!("| arrivals | E[A] slots | loss model | loss sim | E[V] model | E[V] sim | E[D] model ns | E[D] sim ns |");
    println!("|---|---|---|---|---|---|---|---|");
    for kind in ["geometric", "poisson", "negbin c_v=2"] {
        for m in [10.0, 5.0, 4.6, 4.0] {
            let a = match kind {
                "geometric" => SlotDist::geometric(m),
                "poisson" => SlotDist::poisson(m),
                _ => SlotDist::negative_binomial(m, 2.0),
            }
            .expect("valid");
            let (svc, fam) = batch::service_slots(&mean, dist, 16, dt as f64).expect("valid");
            let b = batch::solve(&BatchInputs {
                arrivals: a.clone(),
                service: svc,
                service_family: fam,
                queue_capacity: 64,
                batch: 16,
                dt_ns: dt as f64,
                tolerance: 1e-12,
                max_iterations: 100_000,
            })
            .expect("solves");
            let s = sim::simulate(&SimConfig {
                arrivals: Arrivals::Slots { dist: a, dt_ns: dt },
                packets: 4_000_000,
                warmup_packets: 40_000,
                queue_capacity: 64,
                batch: 16,
                service: Service {
                    mean: mean.clone(),
                    dist,
                },
                seed: 7,
                ..SimConfig::default()
            })
            .expect("simulates")
            .stats;
            println!(
                "| {kind} | {m} | {:.4} | {:.4} | {:.3} | {:.3} | {:.1} | {:.1} |",
                b.loss_probability,
                s.loss_probability,
                b.mean_batch_size,
                s.mean_batch_size,
                b.mean_sojourn_ns,
                s.mean_sojourn_ns
            );
        }
    }
}
