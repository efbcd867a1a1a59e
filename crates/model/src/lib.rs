//! Models that predict what the lab measures.
//!
//! Three models, from the coarsest to the most detailed, each validated
//! against the numbers of its source and against the others:
//!
//! - [`resource`]: the resource model of seed 000 (Gallenmüller, ch. 4–6).
//!   The throughput bound of a software data plane is the smaller of what the
//!   interconnect carries and what the cores process,
//!   `T_max = min(interconnect, f · n / c)`, with `c = c_IO + c_task (+ chain)`;
//!   plus the router variant (data access that does not scale with the
//!   clock), the URLLC overload bound `R_max = (1 s − Σ r_k·d_k) / t_CPU` and
//!   the 802.11g WLAN bound. Fits derive `c` from a measured saturation rate
//!   and `t_CPU` from measured medians.
//! - [`batch`]: the discrete-time `Gi/Gi^[X]/1−L` batch-polling queue of
//!   seed 003 (Geißler, ch. 2.4), an embedded Markov chain at the poll
//!   instants solved by fixed-point iteration: queue size, batch size, loss,
//!   queue seen by arrivals, waiting and sojourn time, queue at random times.
//! - [`sim`]: a discrete-event simulator of a packet-processing pipeline
//!   (arrivals, RSS to several cores, a poller with batch size, drain timer,
//!   busy-poll or interrupt mode with moderation, queue capacity, batch
//!   service times, periodic OS interruptions). It writes `.nfr` records, so
//!   a simulated run is analysed like a measured one.
//!
//! [`closed`] holds the textbook closed forms (M/M/1, M/D/1) the simulator is
//! checked against, [`dist`] the discrete distributions shared by the batch
//! model and the simulator. Statistics of samples — the simulator's sojourn
//! percentiles, mean and stdev, the fit's medians and seed 003's error metrics
//! (relative error, Jensen–Shannon divergence) — are the metrics engine's
//! (`nflab_analyze`), as for a measured run; `docs/metrics.md` lists them.
//!
//! # Units
//!
//! Times are nanoseconds (`_ns`), rates packets per second (`_pps`) or bits
//! per second (`_bps`); the batch model works on a grid of `Δt` (`dt_ns`).
//!
//! # Errors
//!
//! Every function that takes user input returns [`ModelError`], whose message
//! names the parameter as spelled on the command line and says what is
//! valid. No function returns NaN or an infinity for valid input; invalid
//! input (ρ ≥ 1 where a closed form needs ρ < 1, a batch above the queue
//! capacity, a negative rate, an empty empirical distribution) is an error.
//!
//! # Limitations and caveats
//!
//! - The batch model is exact only for memoryless (geometric) arrivals and
//!   batch service times independent of everything but the batch size; for
//!   other arrivals it assumes each poll sees the arrival process in its
//!   stationary phase (seed 003's stated limitation). `docs/models.md`
//!   quantifies this against the simulator.
//! - The simulator keeps one queue per core and no shared state between
//!   cores; RSS is `flow mod cores` (a perfect hash).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod batch;
pub mod closed;
pub mod des;
pub mod dist;
pub mod fit;
pub mod mvno;
pub mod resource;
pub mod rng;
pub mod sim;

pub use resource::{
    ethernet_pps, resource, Bound, ResourceInputs, ResourcePrediction, ETHERNET_L1_OVERHEAD_BYTES,
};

/// Invalid model inputs, or a model that cannot answer for these inputs.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A parameter is outside its domain. Change it to a valid value.
    #[error("{name} = {value} is not valid: {valid}")]
    Invalid {
        /// Parameter name as on the command line.
        name: &'static str,
        /// Given value.
        value: f64,
        /// What would be valid.
        valid: &'static str,
    },
    /// A parameter or input is not usable; the reason says what to change.
    #[error("{name}: {reason}")]
    Input {
        /// Parameter name as on the command line.
        name: &'static str,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A closed form needs a stable queue (ρ < 1). Lower the arrival rate or
    /// raise the service rate, or use the simulator, which handles overload.
    #[error(
        "utilisation ρ = {rho:.4} ≥ 1: the {model} closed form needs an arrival rate below the \
         service rate; lower --rate-pps or the service time, or simulate with `nflab model sim`"
    )]
    Unstable {
        /// The utilisation.
        rho: f64,
        /// The closed form.
        model: &'static str,
    },
    /// The fixed-point iteration of the batch model did not converge.
    /// Raise `--max-iterations` or loosen `--tolerance`.
    #[error(
        "the batch model did not converge after {iterations} iterations (change per \
         iteration {residual:.3e}); raise --max-iterations, or move the rate away from the \
         saturation point where the chain mixes slowly"
    )]
    NotConverged {
        /// Iterations done.
        iterations: usize,
        /// L1 change of the last iteration.
        residual: f64,
    },
    /// Reading or writing a record file failed.
    #[error(transparent)]
    Record(#[from] nflab_record::RecordError),
}

/// Check that a value is positive and finite.
pub(crate) fn positive(name: &'static str, value: f64) -> Result<(), ModelError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(ModelError::Invalid {
            name,
            value,
            valid: "use a positive, finite number",
        })
    }
}

/// Check that a value is zero or positive and finite.
pub(crate) fn non_negative(name: &'static str, value: f64) -> Result<(), ModelError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(ModelError::Invalid {
            name,
            value,
            valid: "use a finite number ≥ 0",
        })
    }
}
