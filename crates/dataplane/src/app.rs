//! Apps and chains of apps (Snabb's `core/app`, cut down to straight lines).
//!
//! An [`App`] moves packets from its input link to its outputs in one
//! bounded pass: it handles at most the packets that were readable when the
//! pass began, and every packet it takes is either transmitted, kept (a
//! delay or reorder buffer) or dropped and counted. A [`Chain`] is the app
//! network of one worker: `rx → app 1 → … → app n → tx`, plus one shared
//! `back` link for packets that leave through the port they came in on (the
//! router's ICMP errors). Seed 004 keeps its extern workers to straight
//! networks of 2–3 apps for the same reason: every app is one call per
//! breath, and a branch-free order is the cheap one.

use serde::Serialize;

use crate::link::{Link, LinkCounters};

/// Where an app's packets go.
pub struct Output<'a> {
    /// Onward: the next app, or the output port after the last one.
    pub fwd: &'a mut Link,
    /// Back out of the input port (ICMP errors to the sender).
    pub back: &'a mut Link,
}

/// A network function: one bounded pass per breath.
pub trait App {
    /// Name in counters and configs.
    fn name(&self) -> &'static str;

    /// Handle at most the packets readable in `input` now. `now_ns` is
    /// `CLOCK_MONOTONIC` as read once per breath by the worker, or 0 when no app
    /// of the chain [needs the clock](App::needs_clock) and no timer runs.
    fn push(&mut self, input: &mut Link, out: &mut Output<'_>, now_ns: u64);

    /// Whether this app needs `now_ns` and packet receive stamps in every breath
    /// (delays, timeouts). A busy-polling worker whose chain needs no clock reads
    /// none: a clock read per poll was 3 % of a forwarding core's cycles.
    fn needs_clock(&self) -> bool {
        false
    }

    /// Packets held inside the app (delay or reorder buffer).
    fn held(&self) -> usize {
        0
    }

    /// Free packet buffers the app wants in its worker's pool before the
    /// first packet (a delay buffer's typical occupancy). The worker fills
    /// the pool on its own thread; constructing an app allocates none, so
    /// building one to check a config costs nothing that outlives it.
    fn pool_reserve(&self) -> usize {
        0
    }

    /// The earliest time at which this app has work even without new input
    /// (a delayed packet falls due, a reorder timer expires).
    fn next_deadline_ns(&self) -> Option<u64> {
        None
    }

    /// The least time this app keeps any packet it is given, counted from the
    /// packet's receive stamp (`rx_ns`): no new packet makes it act sooner. A
    /// worker that holds packets sleeps through arrivals on the strength of it
    /// (`engine`, "sleeping through arrivals"); 0, the default, promises nothing.
    fn min_hold_ns(&self) -> u64 {
        0
    }

    /// Counters of the app's own, as a JSON object (drop reasons and the like).
    fn counters(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// Counters of one app in a chain.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AppStats {
    /// Function name.
    pub name: String,
    /// Packets taken from the input link.
    pub packets_in: u64,
    /// Packets transmitted onward or back (including drops at a full link).
    pub packets_out: u64,
    /// Packets dropped inside the app: in − out − held.
    pub drops: u64,
    /// Packets held in the app's buffer at the time of the snapshot.
    pub held: u64,
    /// The app's own counters.
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
}

/// Counters of one link in a chain.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkStats {
    /// "rx -> l2fwd", "l2fwd -> tx", "back".
    pub name: String,
    /// Capacity in packets.
    pub capacity: usize,
    /// What went through.
    #[serde(flatten)]
    pub counters: LinkCounters,
}

/// The straight app network of one worker.
pub struct Chain {
    apps: Vec<Box<dyn App>>,
    /// links[0] is the input, links[i + 1] the output of app i.
    links: Vec<Link>,
    back: Link,
    /// Per app: packets out (fwd + back) counted around each push.
    out_counts: Vec<u64>,
}

impl Chain {
    /// Apps in order; every link holds `link_capacity` packets.
    pub fn new(apps: Vec<Box<dyn App>>, link_capacity: usize) -> Chain {
        let n = apps.len();
        Chain {
            apps,
            links: (0..=n).map(|_| Link::new(link_capacity)).collect(),
            back: Link::new(link_capacity),
            out_counts: vec![0; n],
        }
    }

    /// Whether any app [needs the clock](App::needs_clock).
    pub fn needs_clock(&self) -> bool {
        self.apps.iter().any(|a| a.needs_clock())
    }

    /// The chain's input link (filled by the worker's receive).
    pub fn input(&mut self) -> &mut Link {
        &mut self.links[0]
    }

    /// The chain's output link (drained by the worker's transmit).
    pub fn output(&mut self) -> &mut Link {
        let last = self.links.len() - 1;
        &mut self.links[last]
    }

    /// Packets to send back out of the input port.
    pub fn back(&mut self) -> &mut Link {
        &mut self.back
    }

    /// One breath: every app, in order, handles what is readable. With no
    /// apps, packets stay in the input link, which is also the output.
    pub fn breathe(&mut self, now_ns: u64) {
        for i in 0..self.apps.len() {
            let (before, after) = self.links.split_at_mut(i + 1);
            let fwd = &mut after[0];
            let out0 = fwd.counters.tx_packets
                + fwd.counters.tx_drops
                + self.back.counters.tx_packets
                + self.back.counters.tx_drops;
            let mut out = Output {
                fwd,
                back: &mut self.back,
            };
            self.apps[i].push(&mut before[i], &mut out, now_ns);
            let out1 = out.fwd.counters.tx_packets
                + out.fwd.counters.tx_drops
                + out.back.counters.tx_packets
                + out.back.counters.tx_drops;
            self.out_counts[i] += out1 - out0;
        }
    }

    /// Packets inside the chain: in links and held by apps (not `back`).
    pub fn in_flight(&self) -> usize {
        self.links.iter().map(Link::nreadable).sum::<usize>()
            + self.apps.iter().map(|a| a.held()).sum::<usize>()
    }

    /// Free packet buffers the apps want in the pool ([`App::pool_reserve`]).
    pub fn pool_reserve(&self) -> usize {
        self.apps.iter().map(|a| a.pool_reserve()).sum()
    }

    /// The earliest deadline of any app.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.apps.iter().filter_map(|a| a.next_deadline_ns()).min()
    }

    /// The least time before the chain acts on a packet taken in now: the
    /// first app's [minimum hold](App::min_hold_ns). Holds do not add up — a
    /// delay line counts from the packet's receive stamp, not from when the
    /// app before it passed the packet on — and an app behind the first sees
    /// the packet only after the first has held it.
    pub fn min_hold_ns(&self) -> u64 {
        self.apps.first().map_or(0, |a| a.min_hold_ns())
    }

    /// Names of the apps, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.apps.iter().map(|a| a.name()).collect()
    }

    /// Counters of every app.
    pub fn app_stats(&self) -> Vec<AppStats> {
        self.apps
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let packets_in = self.links[i].counters.rx_packets;
                let packets_out = self.out_counts[i];
                let held = a.held() as u64;
                AppStats {
                    name: a.name().to_string(),
                    packets_in,
                    packets_out,
                    drops: packets_in.saturating_sub(packets_out + held),
                    held,
                    detail: a.counters(),
                }
            })
            .collect()
    }

    /// Counters of every link, input first, then `back`.
    pub fn link_stats(&self) -> Vec<LinkStats> {
        let names = self.names();
        let mut v: Vec<LinkStats> = self
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let from = if i == 0 { "rx" } else { names[i - 1] };
                let to = names.get(i).copied().unwrap_or("tx");
                LinkStats {
                    name: format!("{from} -> {to}"),
                    capacity: l.capacity(),
                    counters: l.counters,
                }
            })
            .collect();
        v.push(LinkStats {
            name: "back".into(),
            capacity: self.back.capacity(),
            counters: self.back.counters,
        });
        v
    }
}
