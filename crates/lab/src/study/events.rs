//! Making a study's events ([`crate::artifacts::events`]) from its plans and outcomes,
//! and the sampler thread that turns the run in progress into `progress`
//! events a few times a second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::artifacts::events::{unix_s, Event, Observers};
use crate::error::LabError;
use crate::run::RunOutcome;
use crate::spec::{Rate, RunPlan};
use crate::study::tree::ExperimentResult;

/// How often the run in progress is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// `run_start` of `plan`.
pub fn run_start(plan: &RunPlan, pair: Option<String>) -> Event {
    Event::RunStart {
        run: format!("{:03}", plan.index),
        params: plan
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string().trim_matches('"').to_string()))
            .collect(),
        repetition: plan.repetition,
        dut: plan.spec.dut.kind.as_str().to_string(),
        offered_pps: match plan.spec.traffic.rate_pps {
            Rate::Pps(p) => p,
            Rate::Max => 0.0,
        },
        pair,
        unix_s: unix_s(),
    }
}

/// `run_end` of `plan` from what its run returned.
pub fn run_end(
    plan: &RunPlan,
    outcome: &Result<RunOutcome, LabError>,
    pair: Option<String>,
) -> Event {
    let run = format!("{:03}", plan.index);
    match outcome {
        Ok(o) => {
            let status = if o.summary.interrupted {
                "interrupted"
            } else {
                "complete"
            };
            Event::run_end(&run, status, &o.summary, pair)
        }
        Err(e) => Event::run_failed(&run, &e.to_string(), pair),
    }
}

/// `study_end` from the study's result.
pub fn study_end(result: &Result<ExperimentResult, LabError>, started: Instant) -> Event {
    let (completed, resumed, interrupted, error) = match result {
        Ok(r) => (r.runs.len(), r.resumed_runs, r.interrupted, None),
        Err(e) => (0, 0, false, Some(e.to_string())),
    };
    Event::StudyEnd {
        completed,
        resumed,
        interrupted,
        error,
        elapsed_s: started.elapsed().as_secs_f64(),
        unix_s: unix_s(),
    }
}

/// Run `study` while a sampler thread emits `progress` events of the run in
/// progress (only when someone listens).
pub fn with_sampler<T>(events: &Observers, study: impl FnOnce() -> T) -> T {
    if events.is_empty() {
        return study();
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut sampler = crate::run::live::Sampler::new();
            while !done.load(Ordering::Relaxed) {
                if let Some(e) = sampler.sample() {
                    events.emit(&e);
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        let out = study();
        done.store(true, Ordering::Relaxed);
        out
    })
}
