//! A study's progress as events (docs/experiments.md "Events"): the CLI draws
//! them as a progress bar on a terminal and streams them as JSON lines
//! (`nflab run --events FILE|-`) for notebooks and CI.
//!
//! The JSON form of [`Event`] is a contract: one object per line, with an
//! `"event"` field naming the kind.

use std::sync::Arc;

use nflab_analyze::Summary;
use serde::{Deserialize, Serialize};

/// One thing that happened in a study.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The study begins: its directory and how many runs it plans.
    StudyStart {
        /// Experiment name.
        name: String,
        /// Experiment directory.
        dir: String,
        /// Runs planned; absent for an RFC 2544 search, which plans as it goes.
        runs: Option<usize>,
        /// Host pairs the runs are spread over (1 without `[[pair]]`).
        pairs: usize,
        /// Unix time in seconds.
        unix_s: f64,
    },
    /// A run begins.
    RunStart {
        /// Run directory name (`000`).
        run: String,
        /// Swept values of this run, as written.
        params: std::collections::BTreeMap<String, String>,
        /// Repetition of its combination (0-based).
        repetition: u32,
        /// DuT kind.
        dut: String,
        /// Offered probe rate, packets per second (`traffic.rate_pps`; 0 for "max").
        offered_pps: f64,
        /// Host pair that runs it (`[[pair]]` name), when the spec has pairs.
        #[serde(skip_serializing_if = "Option::is_none")]
        pair: Option<String>,
        /// Unix time in seconds.
        unix_s: f64,
    },
    /// A sample of the run in progress, from the LoadGen's interface counters
    /// (readiness probes and background traffic included).
    Progress {
        /// Run directory name.
        run: String,
        /// Seconds since the run's traffic began.
        elapsed_s: f64,
        /// Offered probe rate.
        offered_pps: f64,
        /// Frames the generator's interface sent since the run's traffic began.
        tx_packets: u64,
        /// Frames the recorder's interface received since then.
        rx_packets: u64,
        /// Send rate over the last sample interval.
        tx_pps: f64,
        /// Receive rate over the last sample interval.
        rx_pps: f64,
        /// 1 − rx_packets / tx_packets (0 before anything was sent); in-flight
        /// frames count as lost until they arrive.
        loss_ratio: f64,
    },
    /// A run ended; its summary's key figures.
    RunEnd {
        /// Run directory name.
        run: String,
        /// "complete", "resumed" (kept from an earlier invocation),
        /// "interrupted" or "failed".
        status: String,
        /// Probe packets sent.
        sent: u64,
        /// Probe packets received.
        received: u64,
        /// Probe packets lost.
        lost: u64,
        /// Loss ratio of the summary.
        loss_ratio: f64,
        /// Offered rate of the summary.
        offered_pps: Option<f64>,
        /// Receive rate of the summary.
        rx_pps: Option<f64>,
        /// Median one-way latency.
        latency_p50_ns: Option<i64>,
        /// 99th percentile of the one-way latency.
        latency_p99_ns: Option<i64>,
        /// Host pair that ran it.
        #[serde(skip_serializing_if = "Option::is_none")]
        pair: Option<String>,
        /// Why it failed (status "failed").
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Unix time in seconds.
        unix_s: f64,
    },
    /// The study ended, in any way.
    StudyEnd {
        /// Runs with results (complete or resumed).
        completed: usize,
        /// Of those, runs kept from an earlier invocation.
        resumed: usize,
        /// A signal stopped it.
        interrupted: bool,
        /// The error that ended it, if one did.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Seconds since the study started.
        elapsed_s: f64,
        /// Unix time in seconds.
        unix_s: f64,
    },
}

impl Event {
    /// `run_end` from a finished run's summary.
    pub fn run_end(run: &str, status: &str, summary: &Summary, pair: Option<String>) -> Event {
        Event::RunEnd {
            run: run.to_string(),
            status: status.to_string(),
            sent: summary.packets.sent,
            received: summary.packets.received,
            lost: summary.packets.lost,
            loss_ratio: summary.loss_ratio,
            offered_pps: summary.rate.offered_pps,
            rx_pps: summary.rate.rx_pps,
            latency_p50_ns: summary.latency_ns.p50,
            latency_p99_ns: summary.latency_ns.p99,
            pair,
            error: None,
            unix_s: unix_s(),
        }
    }

    /// `run_end` of a run that failed before it had a summary.
    pub fn run_failed(run: &str, error: &str, pair: Option<String>) -> Event {
        Event::RunEnd {
            run: run.to_string(),
            status: "failed".into(),
            sent: 0,
            received: 0,
            lost: 0,
            loss_ratio: 0.0,
            offered_pps: None,
            rx_pps: None,
            latency_p50_ns: None,
            latency_p99_ns: None,
            pair,
            error: Some(error.to_string()),
            unix_s: unix_s(),
        }
    }
}

/// Now, as Unix seconds.
pub fn unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Receives a study's events; called from the study's threads.
pub trait Observer: Send + Sync {
    /// One event.
    fn on(&self, event: &Event);
}

/// The observers of a study (none: no events are made).
#[derive(Clone, Default)]
pub struct Observers(pub Vec<Arc<dyn Observer>>);

impl Observers {
    /// Hand `event` to every observer.
    pub fn emit(&self, event: &Event) {
        for o in &self.0 {
            o.on(event);
        }
    }

    /// True when nobody listens.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Observers({})", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_tagged_json_objects() {
        let e = Event::StudyStart {
            name: "q".into(),
            dir: "/x".into(),
            runs: Some(3),
            pairs: 1,
            unix_s: 1.0,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["event"], "study_start");
        assert_eq!(v["runs"], 3);
        let mut s = Summary::default();
        s.packets.sent = 10;
        s.packets.received = 7;
        s.packets.lost = 3;
        let v = serde_json::to_value(Event::run_end("001", "complete", &s, None)).unwrap();
        assert_eq!(v["event"], "run_end");
        assert_eq!(
            (v["sent"].as_u64(), v["lost"].as_u64()),
            (Some(10), Some(3))
        );
        assert!(v.get("pair").is_none());
    }
}
