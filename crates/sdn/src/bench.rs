//! The FlowMod/FlowStats benchmark (TableVisor's evaluation): N Open vSwitch
//! bridges, nflab's harness as the controller, directly or through the proxy.
//!
//! - Installation time: k FlowMods spread round-robin over the N switches
//!   (through the proxy: over its N global tables, table i on switch i),
//!   then one Barrier (through the proxy it fans out to every switch), timed
//!   from writing the first FlowMod to reading the last BarrierReply.
//! - FlowStats delay: one flow-stats request over all tables (to every
//!   switch, or once to the proxy, which fans it out) to the last reply part
//!   (MORE flag clear). The reply must list exactly the k flows just
//!   installed, or the run fails.
//!
//! The harness has one thread per connection (directly: one per bridge),
//! started together, so the baseline sends and reads in parallel as the
//! proxy does with its thread per switch.
//!
//! Each repetition starts from empty tables (delete all + barrier). Means
//! and 95 % Student-t intervals come from `nflab_analyze::crossrun`.

use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use serde::Serialize;

use crate::conn::{send, send_raw, Reader};
use crate::error::SdnError;
use crate::netns::{NetnsGuard, PrivateNetns};
use crate::of13::message::{Body, Message, MULTIPART_MORE};
use crate::of13::multipart::{mp, FlowStats, FlowStatsRequest};
use crate::of13::oxm::field;
use crate::of13::{flow::command, FlowMod, Match, Oxm, OFPTT_ALL};
use crate::ovs::{BridgeOptions, Ovs};
use crate::proxy::config::{ProxyConfig, ProxySection, SwitchEntry, TableEntry};

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchOptions {
    /// Bridges.
    pub switches: usize,
    /// FlowMods per repetition (over all switches).
    pub flowmods: usize,
    /// Through the proxy.
    pub via_proxy: bool,
    /// Repetitions.
    pub repeat: usize,
}

/// Mean and the half-width of its 95 % confidence interval.
#[derive(Debug, Clone, Serialize)]
pub struct MeanCi {
    /// Mean.
    pub mean: f64,
    /// Half-width of the 95 % Student-t interval (null for one repetition).
    pub ci95: Option<f64>,
}

impl MeanCi {
    /// Of `values`.
    pub fn of(values: &[f64]) -> MeanCi {
        match nflab_analyze::crossrun::mean_t_ci(values, 0.95) {
            Some(i) => MeanCi {
                mean: i.mean,
                ci95: Some(i.hi - i.mean),
            },
            None => MeanCi {
                mean: values.first().copied().unwrap_or(f64::NAN),
                ci95: None,
            },
        }
    }
}

/// The result (`nflab sdn bench --json`).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Installation time, s.
    pub install_s: MeanCi,
    /// FlowStats delay, ms.
    pub stats_delay_ms: MeanCi,
    /// Per repetition, s.
    pub install_s_samples: Vec<f64>,
    /// Per repetition, ms.
    pub stats_delay_ms_samples: Vec<f64>,
    /// What ran.
    pub options: BenchOptions,
}

/// One controller connection of the harness.
pub(crate) struct Peer {
    pub(crate) w: TcpStream,
    pub(crate) r: Reader,
}

impl Peer {
    fn handshake(s: TcpStream) -> Result<(Peer, u64), SdnError> {
        s.set_nodelay(true).ok();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .ok();
        let w = s.try_clone().map_err(|e| SdnError::io("harness", e))?;
        let mut p = Peer {
            w,
            r: Reader::new(s),
        };
        send(&mut p.w, &Message::new(1, Body::Hello(vec![])))?;
        send(&mut p.w, &Message::new(2, Body::FeaturesRequest))?;
        let dpid = loop {
            let (m, _) = p.r.expect("a features reply")?;
            match m.body {
                Body::FeaturesReply(f) => break f.datapath_id,
                Body::EchoRequest(d) => send(&mut p.w, &Message::new(m.xid, Body::EchoReply(d)))?,
                _ => {}
            }
        };
        Ok((p, dpid))
    }

    pub(crate) fn wait_barrier(&mut self, xid: u32) -> Result<(), SdnError> {
        loop {
            let (m, _) = self.r.expect("a barrier reply")?;
            match m.body {
                Body::BarrierReply if m.xid == xid => return Ok(()),
                Body::Error(e) => {
                    return Err(SdnError::Protocol(format!(
                        "a FlowMod was refused (error type {} code {})",
                        e.typ, e.code
                    )))
                }
                Body::EchoRequest(d) => {
                    send(&mut self.w, &Message::new(m.xid, Body::EchoReply(d)))?
                }
                _ => {}
            }
        }
    }

    /// Flows in the (possibly multi-part) flow-stats reply to `xid`.
    fn wait_stats(&mut self, xid: u32) -> Result<usize, SdnError> {
        let mut n = 0;
        loop {
            let (m, _) = self.r.expect("a flow-stats reply")?;
            match m.body {
                Body::MultipartReply(mp::FLOW, flags, body) if m.xid == xid => {
                    n += FlowStats::decode_all(&body)
                        .map_err(|e| SdnError::Protocol(e.to_string()))?
                        .len();
                    if flags & MULTIPART_MORE == 0 {
                        return Ok(n);
                    }
                }
                Body::EchoRequest(d) => {
                    send(&mut self.w, &Message::new(m.xid, Body::EchoReply(d)))?
                }
                _ => {}
            }
        }
    }
}

/// FlowMod `j`: a distinct IPv4 destination in table `table`, dropping.
pub fn bench_flow(j: usize, table: u8) -> FlowMod {
    let dst = [198, 18 + (j >> 16) as u8 % 2, (j >> 8) as u8, j as u8];
    FlowMod::add(
        table,
        100,
        Match::new(vec![
            Oxm::basic(field::ETH_TYPE, &0x0800u16.to_be_bytes()),
            Oxm::basic(field::IPV4_DST, &dst),
        ]),
        vec![],
    )
}

/// Run the benchmark in a private namespace with its own Open vSwitch.
pub fn run(opts: &BenchOptions) -> Result<BenchReport, SdnError> {
    if opts.switches == 0 || opts.flowmods == 0 || opts.repeat == 0 {
        return Err(SdnError::Config(
            "--switches, --flowmods and --repeat must each be at least 1".into(),
        ));
    }
    if opts.flowmods > 131_072 {
        return Err(SdnError::Config("--flowmods is at most 131072".into()));
    }
    if opts.via_proxy && opts.switches > 254 {
        return Err(SdnError::Config(
            "--switches is at most 254 with --via-proxy (one global table per switch)".into(),
        ));
    }
    let ns = PrivateNetns::create("sdnbench")?;
    let ovs = Ovs::start(Some(ns.name()))?;
    let _in_ns = NetnsGuard::enter(ns.name())?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| SdnError::io("harness", e))?;
    let harness = listener
        .local_addr()
        .map_err(|e| SdnError::io("harness", e))?;
    let dpid = |i: usize| 0x100 + i as u64;
    let proxy = if opts.via_proxy {
        let cfg = ProxyConfig {
            proxy: ProxySection {
                listen: "127.0.0.1:0".into(),
                controller: harness.to_string(),
                datapath_id: 1,
                apps: vec!["multi-switch".into()],
                log: None,
                connect_timeout_s: 60.0,
                allow_remote_switches: false,
            },
            switches: (0..opts.switches)
                .map(|i| SwitchEntry {
                    name: format!("s{i}"),
                    datapath_id: dpid(i),
                })
                .collect(),
            tables: (0..opts.switches)
                .map(|i| TableEntry {
                    id: i as u8,
                    switch: format!("s{i}"),
                    local: 0,
                })
                .collect(),
            ports: vec![],
            links: vec![],
        };
        Some(crate::proxy::start(cfg)?)
    } else {
        None
    };
    let target = match &proxy {
        Some(p) => format!("tcp:{}", p.listen),
        None => format!("tcp:{harness}"),
    };
    for i in 0..opts.switches {
        ovs.add_bridge(
            &format!("br{i}"),
            &BridgeOptions {
                controller: Some(target.clone()),
                datapath_id: Some(dpid(i)),
                protocols: None,
            },
        )?;
    }
    // Peers: one per switch directly, or the proxy's one connection.
    let n_peers = if opts.via_proxy { 1 } else { opts.switches };
    let mut peers = connect_all(&listener, n_peers, |id| {
        if opts.via_proxy {
            Some(0)
        } else {
            id.checked_sub(0x100)
                .map(|i| i as usize)
                .filter(|i| *i < n_peers)
        }
    })?;
    // The FlowMods, encoded once: (peer, bytes).
    let mut batches: Vec<Vec<u8>> = vec![Vec::new(); n_peers];
    for j in 0..opts.flowmods {
        let sw = j % opts.switches;
        let (peer, table) = if opts.via_proxy {
            (0, sw as u8)
        } else {
            (sw, 0)
        };
        batches[peer]
            .extend(Message::new(1000 + j as u32, Body::FlowMod(bench_flow(j, table))).encode());
    }
    let mut install = Vec::new();
    let mut stats = Vec::new();
    let mut delete_all = FlowMod::add(OFPTT_ALL, 0, Match::default(), vec![]);
    delete_all.command = command::DELETE;
    for rep in 0..opts.repeat {
        let x = 10 * rep as u32;
        for p in &mut peers {
            send(
                p_w(p),
                &Message::new(x + 1, Body::FlowMod(delete_all.clone())),
            )?;
            send(p_w(p), &Message::new(x + 2, Body::BarrierRequest))?;
        }
        for p in &mut peers {
            p.wait_barrier(x + 2)?;
        }
        let barrier = Message::new(x + 3, Body::BarrierRequest).encode();
        install.push(
            in_parallel(&mut peers, &batches, |p, batch| {
                if !batch.is_empty() {
                    send_raw(&mut p.w, batch)?;
                }
                send_raw(&mut p.w, &barrier)?;
                p.wait_barrier(x + 3).map(|_| 0)
            })?
            .0,
        );
        let req = Message::new(
            x + 4,
            Body::MultipartRequest(mp::FLOW, 0, FlowStatsRequest::all().encode()),
        )
        .encode();
        let (secs, flows) = in_parallel(&mut peers, &batches, |p, _| {
            send_raw(&mut p.w, &req)?;
            p.wait_stats(x + 4)
        })?;
        stats.push(secs * 1e3);
        if flows != opts.flowmods {
            return Err(SdnError::Protocol(format!(
                "the flow statistics list {flows} flows after installing {}",
                opts.flowmods
            )));
        }
    }
    drop(peers);
    if let Some(p) = proxy {
        p.stop()?;
    }
    drop(_in_ns);
    ovs.stop();
    drop(ns);
    Ok(BenchReport {
        install_s: MeanCi::of(&install),
        stats_delay_ms: MeanCi::of(&stats),
        install_s_samples: install,
        stats_delay_ms_samples: stats,
        options: opts.clone(),
    })
}

/// Run `work` on every peer at once, one thread each (as the proxy has one
/// thread per switch, so the direct baseline is as parallel as the proxy):
/// the threads start together, and the time is from their start to the
/// last one's end. Returns it with the sum of what `work` returned.
fn in_parallel(
    peers: &mut [Peer],
    batches: &[Vec<u8>],
    work: impl Fn(&mut Peer, &[u8]) -> Result<usize, SdnError> + Sync,
) -> Result<(f64, usize), SdnError> {
    let go = std::sync::Barrier::new(peers.len() + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = peers
            .iter_mut()
            .zip(batches)
            .map(|(p, b)| {
                let (go, work) = (&go, &work);
                s.spawn(move || {
                    go.wait();
                    let r = work(p, b);
                    (r, Instant::now())
                })
            })
            .collect();
        let t0 = Instant::now();
        go.wait();
        let mut total = 0;
        let mut end = t0;
        for h in handles {
            let (r, t) = h
                .join()
                .map_err(|_| SdnError::Protocol("a harness thread panicked".into()))?;
            total += r?;
            end = end.max(t);
        }
        Ok((end.duration_since(t0).as_secs_f64(), total))
    })
}

/// Accept until every slot has a switch that answered a barrier: a switch
/// whose first connection attempt timed out on its side (a busy
/// ovs-vswitchd) connects again, and the later connection wins.
pub(crate) fn connect_all(
    listener: &TcpListener,
    n: usize,
    slot_of: impl Fn(u64) -> Option<usize>,
) -> Result<Vec<Peer>, SdnError> {
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    let mut peers: Vec<Option<Peer>> = (0..n).map(|_| None).collect();
    listener
        .set_nonblocking(true)
        .map_err(|e| SdnError::io("harness", e))?;
    loop {
        if peers.iter().all(Option::is_some) {
            // Every peer answers a barrier, or its slot is opened again.
            for slot in peers.iter_mut() {
                let ok = slot.as_mut().is_some_and(|p| {
                    send(&mut p.w, &Message::new(7, Body::BarrierRequest)).is_ok()
                        && p.wait_barrier(7).is_ok()
                });
                if !ok {
                    *slot = None;
                }
            }
            if peers.iter().all(Option::is_some) {
                return Ok(peers.into_iter().flatten().collect());
            }
        }
        if Instant::now() > deadline {
            return Err(SdnError::Ovs(format!(
                "only {} of {n} switches connected to the harness within 120 s",
                peers.iter().filter(|p| p.is_some()).count()
            )));
        }
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).ok();
                if let Ok((p, id)) = Peer::handshake(s) {
                    match slot_of(id) {
                        Some(slot) => peers[slot] = Some(p),
                        None => {
                            return Err(SdnError::Protocol(format!(
                                "unexpected datapath id {id:#x}"
                            )))
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(2))
            }
            Err(e) => return Err(SdnError::io("the harness accepting a switch", e)),
        }
    }
}

fn p_w(p: &mut Peer) -> &mut TcpStream {
    &mut p.w
}
