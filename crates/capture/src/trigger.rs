//! Triggers: what makes the dumper write the packets around a moment.
//!
//! - a libpcap filter expression, compiled by libpcap itself (`pcap_compile`)
//!   and run on each frame (`pcap_offline_filter`): the first frame it matches
//!   fires;
//! - nflab's latency anomaly (n, t): n consecutive probes of a flow with
//!   latency at or above t, latency being the capture's kernel receive stamp
//!   minus the probe's transmit stamp (the rule is `nflab-analyze`'s
//!   [`AnomalySpec`], so it means what it means in every report);
//! - a loss burst: a gap of at least k sequence numbers in a probe flow;
//! - a manual trigger (SIGUSR1 to the capture, or [`Analyzer::fire_manual`]).
//!
//! A source that fired stays quiet until its window has passed (`hold_ns`):
//! the dumper would only extend the same window anyway.

use nflab_analyze::{AnomalySpec, LiveRun};
use nflab_wire::parse_probe;

use crate::qq::Frame;
use crate::CaptureError;

/// What may fire.
#[derive(Debug, Clone, PartialEq)]
pub enum TriggerSpec {
    /// A libpcap filter expression.
    Filter(String),
    /// n consecutive probes of a flow at or above t.
    Anomaly(AnomalySpec),
    /// A gap of at least this many sequence numbers in a probe flow.
    LossBurst(u64),
}

impl TriggerSpec {
    /// How the trigger is named in `capture.json` and in the dump's comments.
    pub fn describe(&self) -> String {
        match self {
            TriggerSpec::Filter(f) => format!("filter \"{f}\""),
            TriggerSpec::Anomaly(a) => format!("anomaly {}:{}ns", a.n, a.t_ns),
            TriggerSpec::LossBurst(k) => format!("loss burst of at least {k} packets"),
        }
    }
}

/// A trigger that fired.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fired {
    /// The moment: the receive stamp of the frame that fired, or the clock for a manual one.
    pub at_ns: u64,
    /// What fired, and on what.
    pub reason: String,
}

/// A compiled libpcap filter. `BpfProgram` is not `Send`, so each thread
/// compiles its own from the expression.
pub struct Filter {
    expression: String,
    program: pcap::BpfProgram,
}

impl Filter {
    /// Compile `expression` for Ethernet frames; libpcap's own message when it
    /// does not compile.
    pub fn compile(expression: &str) -> Result<Filter, CaptureError> {
        let bad = |e: pcap::Error| CaptureError::Filter {
            expression: expression.to_string(),
            message: e.to_string(),
        };
        let dead = pcap::Capture::dead(pcap::Linktype::ETHERNET).map_err(bad)?;
        let program = dead.compile(expression, true).map_err(bad)?;
        Ok(Filter {
            expression: expression.to_string(),
            program,
        })
    }

    /// Whether the frame matches.
    pub fn matches(&self, frame: &[u8]) -> bool {
        self.program.filter(frame)
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }
}

/// Per-flow state of the anomaly and loss-burst rules.
#[derive(Debug, Default, Clone)]
struct FlowState {
    next_seq: Option<u64>,
    /// Each anomaly source's run (indexed like the sources), as
    /// `nflab-analyze` defines it.
    runs: Vec<LiveRun>,
}

enum Rule {
    Filter(Filter),
    Anomaly(AnomalySpec),
    LossBurst(u64),
}

struct Source {
    rule: Rule,
    name: String,
    quiet_until_ns: u64,
}

/// Runs every trigger over the frames handed to it.
pub struct Analyzer {
    sources: Vec<Source>,
    /// Indexed by probe flow id (a u16): no hashing per frame.
    flows: Vec<Option<FlowState>>,
    /// Some source is an anomaly or loss-burst rule: only then is each frame
    /// parsed as a probe (a third of the analyzer's time per frame when done
    /// for filters alone).
    watches_flows: bool,
    hold_ns: u64,
    /// Frames the filters looked at.
    pub inspected: u64,
}

impl Analyzer {
    /// An analyzer for `specs`; a source that fired is quiet for `hold_ns`.
    pub fn new(specs: &[TriggerSpec], hold_ns: u64) -> Result<Analyzer, CaptureError> {
        let mut sources = Vec::with_capacity(specs.len());
        for s in specs {
            let rule = match s {
                TriggerSpec::Filter(f) => Rule::Filter(Filter::compile(f)?),
                TriggerSpec::Anomaly(a) => Rule::Anomaly(*a),
                TriggerSpec::LossBurst(k) => Rule::LossBurst(*k),
            };
            sources.push(Source {
                rule,
                name: s.describe(),
                quiet_until_ns: 0,
            });
        }
        let watches_flows = sources
            .iter()
            .any(|s| matches!(s.rule, Rule::Anomaly(_) | Rule::LossBurst(_)));
        Ok(Analyzer {
            sources,
            flows: Vec::new(),
            watches_flows,
            hold_ns,
            inspected: 0,
        })
    }

    /// Look at one frame; push what fired.
    pub fn scan(&mut self, frame: &Frame<'_>, fired: &mut Vec<Fired>) {
        self.inspected += 1;
        let sources = self.sources.len();
        // The flow's sequence gap and this probe's latency, for the flow rules.
        let probe = if self.watches_flows {
            parse_probe(frame.data).ok()
        } else {
            None
        };
        let probe = probe.map(|p| {
            let flow = usize::from(p.flow);
            if self.flows.len() <= flow {
                self.flows.resize(flow + 1, None);
            }
            let st = self.flows[flow].get_or_insert_with(|| FlowState {
                next_seq: None,
                runs: vec![LiveRun::default(); sources],
            });
            // Missing sequence numbers just before this probe (late ones do not count).
            let gap = st.next_seq.map_or(0, |next| p.seq.saturating_sub(next));
            st.next_seq = Some(st.next_seq.map_or(p.seq + 1, |next| next.max(p.seq + 1)));
            (p, gap, frame.ts_ns as i64 - p.tx_ns as i64)
        });
        for (i, src) in self.sources.iter_mut().enumerate() {
            let quiet = frame.ts_ns < src.quiet_until_ns;
            let reason = match (&src.rule, probe) {
                (Rule::Filter(f), _) => (!quiet && f.matches(frame.data)).then(|| src.name.clone()),
                (Rule::Anomaly(a), Some((p, gap, lat_ns))) => {
                    // Runs advance quiet or not, so they stay right.
                    let run = &mut self.flows[usize::from(p.flow)]
                        .as_mut()
                        .expect("flow entered above")
                        .runs[i];
                    let by_loss = gap > 0 && run.lost(a, gap);
                    (run.observe(a, lat_ns) || by_loss).then(|| {
                        format!(
                            "{} on flow {} ending at seq {} (latency {lat_ns} ns)",
                            src.name, p.flow, p.seq
                        )
                    })
                }
                (Rule::LossBurst(k), Some((p, gap, _))) if gap >= *k => Some(format!(
                    "{} ({gap} missing before seq {} of flow {})",
                    src.name, p.seq, p.flow
                )),
                _ => None,
            };
            if let Some(reason) = reason.filter(|_| !quiet) {
                src.quiet_until_ns = frame.ts_ns.saturating_add(self.hold_ns);
                fired.push(Fired {
                    at_ns: frame.ts_ns,
                    reason,
                });
            }
        }
    }

    /// A manual trigger at `now_ns`.
    pub fn fire_manual(&self, now_ns: u64, why: &str) -> Fired {
        Fired {
            at_ns: now_ns,
            reason: format!("manual ({why})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nflab_wire::{MacAddr, ProbeSpec, ProbeTemplate};

    fn probe(flow: u16, seq: u64, tx_ns: u64) -> Vec<u8> {
        let spec = ProbeSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            flow,
            ..ProbeSpec::default()
        };
        let t = ProbeTemplate::new(&spec).unwrap();
        let mut buf = vec![0u8; t.len()];
        t.write(&mut buf, seq, tx_ns);
        buf
    }

    fn feed(a: &mut Analyzer, frames: &[(u64, Vec<u8>)]) -> Vec<Fired> {
        let mut fired = Vec::new();
        for (ts, data) in frames {
            a.scan(
                &Frame {
                    ts_ns: *ts,
                    wire_len: data.len() as u32 + 4,
                    data,
                },
                &mut fired,
            );
        }
        fired
    }

    #[test]
    fn a_filter_that_does_not_compile_gives_libpcaps_message() {
        let e = Filter::compile("udp port nonsense")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("udp port nonsense"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_filter_fires_on_its_first_match_then_holds() {
        let mut a = Analyzer::new(&[TriggerSpec::Filter("udp dst port 7".into())], 1000).unwrap();
        let p = probe(0, 0, 0);
        let mut other = p.clone();
        other[37] = 10; // UDP destination port 7 -> 10 (low byte; frame without VLAN)
        let fired = feed(
            &mut a,
            &[
                (5, other.clone()),
                (10, p.clone()),
                (500, p.clone()),
                (1010, p.clone()),
            ],
        );
        let at: Vec<_> = fired.iter().map(|f| f.at_ns).collect();
        assert_eq!(at, vec![10, 1010]);
    }

    #[test]
    fn the_anomaly_rule_fires_on_the_nth_consecutive_slow_probe_and_loss_breaks_runs() {
        let spec: AnomalySpec = "2:250us".parse().unwrap();
        let mut a = Analyzer::new(&[TriggerSpec::Anomaly(spec)], 0).unwrap();
        let t0 = 1_000_000;
        let frames = vec![
            // seq 0 slow, seq 1 fast: no run of 2.
            (t0 + 300_000, probe(1, 0, t0)),
            (t0 + 10_000, probe(1, 1, t0)),
            // seq 2 slow, seq 4 slow, but seq 3 is lost: the loss breaks the run.
            (t0 + 300_000, probe(1, 2, t0)),
            (t0 + 300_000, probe(1, 4, t0)),
            // seq 5 slow: run of 2 (4, 5) fires here, once.
            (t0 + 260_000, probe(1, 5, t0)),
            (t0 + 260_000, probe(1, 6, t0)),
        ];
        let fired = feed(&mut a, &frames);
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert!(fired[0].reason.contains("seq 5"), "{fired:?}");
        assert_eq!(fired[0].at_ns, t0 + 260_000);
    }

    #[test]
    fn a_loss_burst_fires_on_a_gap_of_k() {
        let mut a = Analyzer::new(&[TriggerSpec::LossBurst(3)], 0).unwrap();
        let frames: Vec<_> = [0u64, 1, 3, 4, 8, 9]
            .iter()
            .map(|&s| (s * 10, probe(0, s, 0)))
            .collect();
        let fired = feed(&mut a, &frames);
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!(fired[0].at_ns, 80);
        assert!(
            fired[0].reason.contains("3 missing before seq 8"),
            "{fired:?}"
        );
    }
}
