//! Per-packet stage timestamps inside a kernel DuT (`[monitor] kind = "stages"`):
//! see `src/bpf/stages.bpf.c`. The stages of each kernel path, in path order, are
//! [`ROUTER`], [`BRIDGE`] and [`UDP_RELAY`] (a DuT kind's driver in `nflab-lab` says
//! which is its own); `stages.parquet` has one `t_<stage>_ns` column per stage.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};
use serde::Serialize;

use crate::skel::stages::StagesSkelBuilder;
use crate::{bpf_err, clock, netns, MonitorError};

/// A hook of the stages program (the `enum hook` of stages.bpf.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Stage {
    /// netif_receive_skb on the DuT's ingress interface.
    Ingress = 0,
    /// The router's route lookup (fib_table_lookup) for the packet.
    Route = 1,
    /// The datagram queued on the relay's socket (sk_data_ready).
    Enqueue = 2,
    /// The relay's recv copies it out (skb_copy_datagram_iovec).
    Recv = 3,
    /// dev_queue_xmit on the egress interface (net_dev_queue).
    Queue = 4,
    /// The driver's transmit on the egress interface (net_dev_start_xmit).
    Egress = 5,
}

impl Stage {
    /// Column name part: `t_<name>_ns`.
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Ingress => "ingress",
            Stage::Route => "route",
            Stage::Enqueue => "enqueue",
            Stage::Recv => "recv",
            Stage::Queue => "queue",
            Stage::Egress => "egress",
        }
    }

    fn from_id(id: u8) -> Option<Stage> {
        [
            Stage::Ingress,
            Stage::Route,
            Stage::Enqueue,
            Stage::Recv,
            Stage::Queue,
            Stage::Egress,
        ]
        .get(id as usize)
        .copied()
    }
}

/// The stages of the kernel's IPv4 forwarding (`linux-router`), in path order.
pub const ROUTER: &[Stage] = &[Stage::Ingress, Stage::Route, Stage::Queue, Stage::Egress];

/// The stages of a kernel bridge (`linux-bridge`), in path order.
pub const BRIDGE: &[Stage] = &[Stage::Ingress, Stage::Queue, Stage::Egress];

/// The stages of a UDP VNF's socket in the DuT namespace (`udp-relay`), in path order.
pub const UDP_RELAY: &[Stage] = &[
    Stage::Ingress,
    Stage::Enqueue,
    Stage::Recv,
    Stage::Queue,
    Stage::Egress,
];

/// Where to take the stages.
#[derive(Debug, Clone)]
pub struct StagesConfig {
    /// The DuT's namespace.
    pub netns: String,
    /// The DuT's ingress interface (dut0).
    pub ingress_dev: String,
    /// The DuT's egress interface (dut1).
    pub egress_dev: String,
    /// The stages to attach, in path order.
    pub stages: Vec<Stage>,
}

/// One packet's stage times (CLOCK_REALTIME), in the order of
/// [`StagesConfig::stages`]; `None` where a hook did not see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageRow {
    /// Probe flow.
    pub flow: u16,
    /// Probe sequence number.
    pub seq: u64,
    /// Times per stage.
    pub t_ns: Vec<Option<u64>>,
}

/// What a stages run produced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StagesResult {
    /// The stages, in path order.
    pub stages: Vec<&'static str>,
    /// One row per probe seen, by (flow, seq).
    #[serde(skip)]
    pub rows: Vec<StageRow>,
    /// Packets seen by some hooks but not all.
    pub incomplete: u64,
    /// Events lost to a full ring buffer.
    pub ringbuf_full: u64,
    /// A hook saw the same probe twice (the later time is dropped).
    pub duplicates: u64,
}

/// A running stages monitor.
pub struct StagesMonitor {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<StagesResult, MonitorError>>,
}

impl StagesMonitor {
    /// Start; returns once the programs are attached.
    pub fn start(cfg: StagesConfig) -> Result<StagesMonitor, MonitorError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop_t = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("nflab-stages".into())
            .spawn(move || run(cfg, &stop_t, ready_tx))
            .map_err(|e| MonitorError::Bpf(format!("cannot start the stages thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(StagesMonitor { stop, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(MonitorError::Bpf("the stages thread ended early".into())),
        }
    }

    /// Detach and return the rows.
    pub fn stop(self) -> Result<StagesResult, MonitorError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| MonitorError::Bpf("the stages thread panicked".into()))?
    }
}

fn run(
    cfg: StagesConfig,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<(), MonitorError>>,
) -> Result<StagesResult, MonitorError> {
    let fail = |e: MonitorError| {
        let _ = ready.send(Err(MonitorError::Bpf(e.to_string())));
        e
    };
    let ns_ino = netns::enter(&cfg.netns).map_err(fail)?;
    let ingress = netns::ifindex(&cfg.ingress_dev).map_err(fail)?;
    let egress = netns::ifindex(&cfg.egress_dev).map_err(fail)?;
    let mut obj = MaybeUninit::uninit();
    let open = StagesSkelBuilder::default()
        .open(&mut obj)
        .map_err(bpf_err("cannot open the stages BPF object"))
        .map_err(fail)?;
    let skel = open
        .load()
        .map_err(bpf_err("the kernel refused the stages programs"))
        .map_err(fail)?;
    let mut config = Vec::with_capacity(16);
    for v in [ns_ino, ingress, egress, 1] {
        config.extend_from_slice(&v.to_ne_bytes());
    }
    let zero = 0u32.to_ne_bytes();
    skel.maps
        .config
        .update(&zero, &config, MapFlags::ANY)
        .map_err(bpf_err("cannot configure the stages monitor"))
        .map_err(fail)?;
    let a = bpf_err("cannot attach a stages program");
    let mut links = Vec::new();
    for s in &cfg.stages {
        let p = &skel.progs;
        let link = match s {
            Stage::Ingress => p.stage_ingress.attach(),
            Stage::Route => p.stage_route.attach(),
            Stage::Enqueue => p.stage_enqueue.attach(),
            Stage::Recv => p.stage_recv.attach(),
            Stage::Queue => p.stage_queue.attach(),
            Stage::Egress => p.stage_egress.attach(),
        };
        links.push(link.map_err(&a).map_err(fail)?);
    }
    let offset_ns = clock::tai_minus_realtime_ns();
    let events: RefCell<Vec<(u8, u16, u64, u64)>> = RefCell::new(Vec::new());
    let mut rb = RingBufferBuilder::new();
    rb.add(&skel.maps.events, |d: &[u8]| {
        if d.len() >= 24 {
            let u64_at = |i: usize| u64::from_ne_bytes(d[i..i + 8].try_into().expect("8"));
            let flow = u16::from_ne_bytes([d[16], d[17]]);
            events
                .borrow_mut()
                .push((d[18], flow, u64_at(8), u64_at(0)));
        }
        0
    })
    .map_err(bpf_err("cannot open the stages ring buffer"))
    .map_err(fail)?;
    let rb = rb
        .build()
        .map_err(bpf_err("cannot open the stages ring buffer"))
        .map_err(fail)?;
    let _ = ready.send(Ok(()));
    while !stop.load(Ordering::Relaxed) {
        rb.poll(Duration::from_millis(5))
            .map_err(bpf_err("cannot read the stages ring buffer"))?;
    }
    drop(links);
    rb.consume()
        .map_err(bpf_err("cannot read the stages ring buffer"))?;
    let full = skel
        .maps
        .ringbuf_full
        .lookup(&zero, MapFlags::ANY)
        .map_err(bpf_err("cannot read the stages counters"))?
        .and_then(|b| {
            b.get(..8)
                .map(|s| u64::from_ne_bytes(s.try_into().expect("8")))
        })
        .unwrap_or(0);
    let mut result = assemble(&cfg.stages, &events.take(), offset_ns);
    result.ringbuf_full = full;
    Ok(result)
}

/// Rows from `(hook, flow, seq, tai_ns)` events.
fn assemble(stages: &[Stage], events: &[(u8, u16, u64, u64)], offset_ns: i64) -> StagesResult {
    let mut rows: BTreeMap<(u16, u64), Vec<Option<u64>>> = BTreeMap::new();
    let mut duplicates = 0;
    for &(hook, flow, seq, t) in events {
        let Some(col) = Stage::from_id(hook).and_then(|s| stages.iter().position(|x| *x == s))
        else {
            continue;
        };
        let row = rows
            .entry((flow, seq))
            .or_insert_with(|| vec![None; stages.len()]);
        if row[col].is_some() {
            duplicates += 1;
        } else {
            row[col] = Some(clock::to_realtime(t, offset_ns));
        }
    }
    let rows: Vec<StageRow> = rows
        .into_iter()
        .map(|((flow, seq), t_ns)| StageRow { flow, seq, t_ns })
        .collect();
    StagesResult {
        stages: stages.iter().map(Stage::name).collect(),
        incomplete: rows
            .iter()
            .filter(|r| r.t_ns.iter().any(Option::is_none))
            .count() as u64,
        rows,
        ringbuf_full: 0,
        duplicates,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_the_stage_order_and_keep_the_first_time() {
        let st = ROUTER;
        let ev = [
            (0, 1, 7, 100),
            (5, 1, 7, 130),
            (1, 1, 7, 110),
            (4, 1, 7, 120),
            (0, 1, 8, 200),
            (0, 1, 7, 999),
        ];
        let r = assemble(st, &ev, 0);
        assert_eq!(r.stages, ["ingress", "route", "queue", "egress"]);
        assert_eq!(r.rows[0].t_ns, [Some(100), Some(110), Some(120), Some(130)]);
        assert_eq!(r.rows[1].t_ns, [Some(200), None, None, None]);
        assert_eq!((r.incomplete, r.duplicates), (1, 1));
    }
}
