//! A TableVisor-class proxy (docs/sdn.md): switches connect to it, it
//! connects to the controller and presents them as one emulated switch whose
//! tables and ports are the configured maps of theirs.
//!
//! Threads: one accepts switches (and re-accepts them after a disconnect),
//! one reads each connection; all state lives in one core loop fed by a
//! bounded channel, which also writes every message.
//!
//! Whoever reaches `listen` can speak as a switch, so the switch side is
//! guarded: at most [`MAX_SWITCH_CONNECTIONS`] at once, a handshake within
//! [`HANDSHAKE_TIMEOUT`], every write within [`WRITE_TIMEOUT`] (a peer that
//! stops reading loses its connection instead of stalling the core and with
//! it every other switch), and a datapath id keeps the switch that has it
//! until that one is gone: a second claimant waits [`HANDSHAKE_TIMEOUT`] for
//! the first to go and is refused otherwise. The app pipeline is the
//! translation app (`multi-switch`, or `transparent` for one switch passed
//! through unchanged) with the `log` app before it (logging the
//! controller's view) and/or after it (logging each switch's view); the way
//! back runs the same apps in reverse order.

pub mod config;
pub mod switch10;
pub mod translate;
pub mod v10;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender as Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::conn::{send, send_raw, Reader};
use crate::error::SdnError;
use crate::of13::message::{error, typ, Body, Features, Message, PortStatus, MULTIPART_MORE};
use crate::of13::multipart::{mp, FlowStats, FlowStatsRequest, Port, PORT_STATE_LINK_DOWN};
use crate::of13::stats::{port_stats_request, AggregateStats};
use crate::of13::PortName;

pub use config::ProxyConfig;
use translate::{
    flow_mod_down, flow_removed_up, flow_stats_up, packet_in_up, packet_out_down,
    stats_request_down, EntryRule, Maps,
};

/// xids of the proxy's own requests to switches (never the controller's).
const INTERNAL_XID: u32 = 0xf000_0000;

/// Switch connections at once, handshaking or serving; more are closed at once.
pub const MAX_SWITCH_CONNECTIONS: usize = 64;
/// How long a switch has for its handshake (hello, features, ports), and how
/// long a second switch claiming a connected datapath id waits for the first to go.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// A write to a switch or the controller not done within this ends that connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Events queued for the core; the readers wait while it is full.
const QUEUE_EVENTS: usize = 4096;

enum Event {
    /// Switch, connection id, writer, ports, whether it speaks OpenFlow 1.0.
    SwitchUp(usize, u64, TcpStream, Vec<Port>, bool),
    /// Switch, connection id (only the switch's current connection is heard).
    FromSwitch(usize, u64, Message, Vec<u8>),
    /// Switch, connection id: a late "down" of a replaced connection is ignored.
    SwitchDown(usize, u64),
    ControllerUp(TcpStream),
    FromController(Message, Vec<u8>),
    ControllerDown,
}

/// A running proxy.
pub struct ProxyHandle {
    stop: Arc<AtomicBool>,
    core: Option<JoinHandle<Result<(), SdnError>>>,
    /// Where switches connect.
    pub listen: SocketAddr,
}

impl ProxyHandle {
    /// Whether the core loop has ended (an error, or stopped).
    pub fn is_finished(&self) -> bool {
        self.core.as_ref().is_none_or(|c| c.is_finished())
    }

    /// Stop everything and return the core's result.
    pub fn stop(mut self) -> Result<(), SdnError> {
        self.stop.store(true, Ordering::SeqCst);
        match self.core.take() {
            Some(c) => c
                .join()
                .unwrap_or_else(|_| Err(SdnError::Protocol("the proxy core panicked".into()))),
            None => Ok(()),
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(c) = self.core.take() {
            let _ = c.join();
        }
    }
}

/// Bind the switch listener and start the proxy (in the caller's network
/// namespace: every thread it starts inherits it).
pub fn start(cfg: ProxyConfig) -> Result<ProxyHandle, SdnError> {
    cfg.check()?;
    let listener = TcpListener::bind(&cfg.proxy.listen).map_err(|e| {
        SdnError::Config(format!(
            "proxy.listen = \"{}\" cannot be bound: {e}",
            cfg.proxy.listen
        ))
    })?;
    let listen = listener
        .local_addr()
        .map_err(|e| SdnError::io("proxy listener", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| SdnError::io("proxy listener", e))?;
    let log = match (&cfg.proxy.log, cfg.proxy.apps.iter().any(|a| a == "log")) {
        (Some(path), true) => Some(std::fs::File::create(path).map_err(|e| {
            SdnError::Config(format!("proxy.log = \"{path}\" cannot be created: {e}"))
        })?),
        (None, true) => {
            return Err(SdnError::Config(
                "proxy.apps has \"log\" but proxy.log names no file".into(),
            ))
        }
        _ => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = sync_channel(QUEUE_EVENTS);
    let dpids: Vec<u64> = cfg.switches.iter().map(|s| s.datapath_id).collect();
    {
        let (tx, stop) = (tx.clone(), stop.clone());
        std::thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || accept_loop(listener, dpids, tx, stop))
            .map_err(|e| SdnError::io("starting the proxy", e))?;
    }
    let core_stop = stop.clone();
    let core = std::thread::Builder::new()
        .name("proxy-core".into())
        .spawn(move || Core::new(cfg, log, tx).run(rx, core_stop))
        .map_err(|e| SdnError::io("starting the proxy", e))?;
    Ok(ProxyHandle {
        stop,
        core: Some(core),
        listen,
    })
}

/// Counts a live switch connection until dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: TcpListener, dpids: Vec<u64>, tx: Sender<Event>, stop: Arc<AtomicBool>) {
    let live = Arc::new(AtomicUsize::new(0));
    let mut refused = 0u64;
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, peer)) => {
                if live.load(Ordering::SeqCst) >= MAX_SWITCH_CONNECTIONS {
                    // Closed unread: one line for the first of a burst.
                    if refused == 0 {
                        eprintln!(
                            "proxy: {MAX_SWITCH_CONNECTIONS} switch connections are open; {peer} and others after it refused"
                        );
                    }
                    refused += 1;
                    drop(stream);
                    continue;
                }
                refused = 0;
                live.fetch_add(1, Ordering::SeqCst);
                let slot = Slot(live.clone());
                let (tx, dpids) = (tx.clone(), dpids.clone());
                std::thread::spawn(move || {
                    let _slot = slot;
                    if let Err(e) = switch_conn(stream, &dpids, &tx) {
                        eprintln!("proxy: switch connection from {peer}: {e}");
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => {
                eprintln!("proxy: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Handshake with one switch (hello, features, port descriptions), then
/// forward what it says to the core.
fn switch_conn(stream: TcpStream, dpids: &[u64], tx: &Sender<Event>) -> Result<(), SdnError> {
    stream.set_nodelay(true).ok();
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    stream
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(|e| SdnError::io("switch connection", e))?;
    let mut w = stream
        .try_clone()
        .map_err(|e| SdnError::io("switch connection", e))?;
    let mut r = Reader::new(stream.try_clone().map_err(|e| SdnError::io("switch", e))?);
    // Absolute: every read of the handshake, also each within one message,
    // ends by the deadline, however slowly the peer trickles its bytes.
    r.set_deadline(
        deadline,
        format!(
            "no complete handshake within {} s: closed",
            HANDSHAKE_TIMEOUT.as_secs()
        ),
    );
    send(&mut w, &Message::new(INTERNAL_XID, Body::Hello(vec![])))?;
    // The switch's HELLO says its version: 1.0 (0x01) takes the 1.0 path.
    let hello = r
        .next_raw()?
        .ok_or_else(|| SdnError::Protocol("the switch closed before its HELLO".into()))?;
    if hello.first() == Some(&crate::of10::VERSION) {
        return switch_conn_v10(stream, w, r, dpids, tx);
    }
    send(
        &mut w,
        &Message::new(INTERNAL_XID + 1, Body::FeaturesRequest),
    )?;
    let features: Features = loop {
        let (m, _) = r.expect("the switch's features")?;
        match m.body {
            Body::FeaturesReply(f) => break f,
            Body::EchoRequest(d) => send(&mut w, &Message::new(m.xid, Body::EchoReply(d)))?,
            Body::Error(e) => {
                return Err(SdnError::Protocol(format!(
                    "the switch refused the handshake (error type {} code {}); does it speak OpenFlow 1.3?",
                    e.typ, e.code
                )))
            }
            _ => {}
        }
    };
    let Some(idx) = dpids.iter().position(|d| *d == features.datapath_id) else {
        return Err(SdnError::Config(format!(
            "a switch with datapath id {:#018x} connected, which no [[switch]] names",
            features.datapath_id
        )));
    };
    send(
        &mut w,
        &Message::new(
            INTERNAL_XID + 2,
            Body::MultipartRequest(mp::PORT_DESC, 0, vec![]),
        ),
    )?;
    let mut ports = Vec::new();
    loop {
        let (m, _) = r.expect("the switch's port descriptions")?;
        match m.body {
            Body::MultipartReply(mp::PORT_DESC, flags, body) => {
                ports.extend(
                    Port::decode_all(&body).map_err(|e| SdnError::Protocol(e.to_string()))?,
                );
                if flags & MULTIPART_MORE == 0 {
                    break;
                }
            }
            Body::EchoRequest(d) => send(&mut w, &Message::new(m.xid, Body::EchoReply(d)))?,
            _ => {}
        }
    }
    // Served now: a switch may stay silent for as long as it likes.
    r.clear_deadline();
    stream
        .set_read_timeout(None)
        .map_err(|e| SdnError::io("switch connection", e))?;
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let _ = tx.send(Event::SwitchUp(idx, conn, w, ports, false));
    while let Ok(Some((m, raw))) = r.next_message() {
        if tx.send(Event::FromSwitch(idx, conn, m, raw)).is_err() {
            break;
        }
    }
    let _ = tx.send(Event::SwitchDown(idx, conn));
    Ok(())
}

static NEXT_CONN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The rest of [`switch_conn`] for a switch that speaks only OpenFlow 1.0:
/// features (with its ports) in 1.0, then each message turned into 1.3.
fn switch_conn_v10(
    stream: TcpStream,
    mut w: TcpStream,
    mut r: Reader,
    dpids: &[u64],
    tx: &Sender<Event>,
) -> Result<(), SdnError> {
    use crate::of10::{Body as B10, Message10};
    let proto = |e: crate::of13::CodecError| SdnError::Protocol(format!("OpenFlow 1.0: {e}"));
    send_raw(
        &mut w,
        &Message10::new(INTERNAL_XID + 1, B10::FeaturesRequest).encode(),
    )?;
    let features = loop {
        let raw = r.next_raw()?.ok_or_else(|| {
            SdnError::Protocol(
                "the connection closed while waiting for the switch's features".into(),
            )
        })?;
        let m = Message10::decode(&raw).map_err(proto)?;
        match m.body {
            B10::FeaturesReply(f) => break f,
            B10::EchoRequest(d) => {
                send_raw(&mut w, &Message10::new(m.xid, B10::EchoReply(d)).encode())?
            }
            _ => {}
        }
    };
    let Some(idx) = dpids.iter().position(|d| *d == features.datapath_id) else {
        return Err(SdnError::Config(format!(
            "a switch with datapath id {:#018x} connected, which no [[switch]] names",
            features.datapath_id
        )));
    };
    let ports = features.ports.iter().map(v10::port_up_desc).collect();
    r.clear_deadline();
    stream
        .set_read_timeout(None)
        .map_err(|e| SdnError::io("switch connection", e))?;
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let _ = tx.send(Event::SwitchUp(idx, conn, w, ports, true));
    while let Ok(Some(raw)) = r.next_raw() {
        let Ok(m) = Message10::decode(&raw) else {
            break;
        };
        if let Some(m13) = switch10::up(m) {
            let raw13 = m13.encode();
            if tx.send(Event::FromSwitch(idx, conn, m13, raw13)).is_err() {
                break;
            }
        }
    }
    let _ = tx.send(Event::SwitchDown(idx, conn));
    Ok(())
}

fn controller_conn(addr: String, tx: Sender<Event>, stop: Arc<AtomicBool>) {
    let stream = loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match TcpStream::connect(&addr) {
            Ok(s) => break s,
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    stream.set_nodelay(true).ok();
    // A controller that stops reading loses the connection, not the proxy.
    stream.set_write_timeout(Some(WRITE_TIMEOUT)).ok();
    let Ok(w) = stream.try_clone() else { return };
    if tx.send(Event::ControllerUp(w)).is_err() {
        return;
    }
    let mut r = Reader::new(stream);
    while let Ok(Some((m, raw))) = r.next_message() {
        if tx.send(Event::FromController(m, raw)).is_err() {
            return;
        }
    }
    let _ = tx.send(Event::ControllerDown);
}

/// Where the core writes to a switch: its socket, or nowhere (the fuzz entry).
enum PeerOut {
    Tcp(TcpStream),
    Sink,
}

impl PeerOut {
    /// Write whole; a failure (a timeout: the peer stopped reading) closes
    /// the connection, whose reader then reports it gone.
    fn send(&mut self, bytes: &[u8]) {
        if let PeerOut::Tcp(s) = self {
            if send_raw(s, bytes).is_err() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    fn close(&self) {
        if let PeerOut::Tcp(s) = self {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

struct SwitchState {
    conn: u64,
    writer: PeerOut,
    ports: Vec<Port>,
    /// Speaks OpenFlow 1.0: what is sent to it goes through [`switch10::down`].
    v10: bool,
}

/// A multipart request fanned out: which switches still owe their last part.
struct PendingMultipart {
    typ: u16,
    waiting: BTreeSet<usize>,
    /// AGGREGATE: the sum so far (the controller gets one body, the total).
    aggregate: AggregateStats,
}

struct Core {
    cfg: ProxyConfig,
    maps: Maps,
    transparent: bool,
    log_outer: bool,
    log_inner: bool,
    log: Option<std::fs::File>,
    started: Instant,
    tx: Sender<Event>,
    switches: Vec<Option<SwitchState>>,
    /// A second switch with a connected switch's datapath id, and since when:
    /// it takes over only if the first goes within [`HANDSHAKE_TIMEOUT`].
    claimants: Vec<Option<(SwitchState, Instant)>>,
    controller: Option<TcpStream>,
    controller_wanted: bool,
    barriers: HashMap<u32, BTreeSet<usize>>,
    multiparts: HashMap<u32, PendingMultipart>,
    entries: BTreeMap<(usize, u16), EntryRule>,
}

impl Core {
    fn new(cfg: ProxyConfig, log: Option<std::fs::File>, tx: Sender<Event>) -> Core {
        let apps = &cfg.proxy.apps;
        let core_pos = apps
            .iter()
            .position(|a| a == "multi-switch" || a == "transparent")
            .unwrap_or(apps.len());
        let log_pos = apps.iter().position(|a| a == "log");
        Core {
            maps: Maps::new(&cfg),
            transparent: apps.iter().any(|a| a == "transparent"),
            log_outer: log_pos.is_some_and(|p| p < core_pos),
            log_inner: log_pos.is_some_and(|p| p > core_pos),
            log,
            started: Instant::now(),
            tx,
            switches: (0..cfg.switches.len()).map(|_| None).collect(),
            claimants: (0..cfg.switches.len()).map(|_| None).collect(),
            controller: None,
            controller_wanted: false,
            barriers: HashMap::new(),
            multiparts: HashMap::new(),
            entries: BTreeMap::new(),
            cfg,
        }
    }

    fn run(mut self, rx: Receiver<Event>, stop: Arc<AtomicBool>) -> Result<(), SdnError> {
        let deadline = Instant::now() + Duration::from_secs_f64(self.cfg.proxy.connect_timeout_s);
        let result = loop {
            if stop.load(Ordering::SeqCst) {
                break Ok(());
            }
            if !self.controller_wanted && self.switches.iter().all(Option::is_some) {
                self.controller_wanted = true;
                let (addr, tx, stop) = (
                    self.cfg.proxy.controller.clone(),
                    self.tx.clone(),
                    stop.clone(),
                );
                std::thread::spawn(move || controller_conn(addr, tx, stop));
            }
            if !self.controller_wanted && Instant::now() > deadline {
                let missing: Vec<String> = self
                    .switches
                    .iter()
                    .zip(&self.cfg.switches)
                    .filter(|(s, _)| s.is_none())
                    .map(|(_, c)| format!("\"{}\" ({:#x})", c.name, c.datapath_id))
                    .collect();
                break Err(SdnError::Config(format!(
                    "switch {} did not connect to {} within {} s: the tables mapped to it cannot be served",
                    missing.join(", "),
                    self.cfg.proxy.listen,
                    self.cfg.proxy.connect_timeout_s
                )));
            }
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(ev) => self.handle(ev, &stop),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break Ok(()),
            }
            self.refuse_stale_claimants();
        };
        for s in self.switches.iter().flatten() {
            s.writer.close();
        }
        for (s, _) in self.claimants.iter().flatten() {
            s.writer.close();
        }
        if let Some(c) = &self.controller {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        result
    }

    fn log_line(&mut self, dir: &str, peer: &str, raw: &[u8]) {
        if let Some(f) = &mut self.log {
            let t = self.started.elapsed().as_nanos();
            let (ty, xid) = (
                raw.get(1).copied().unwrap_or(0),
                raw.get(4..8)
                    .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            );
            let _ = writeln!(f, "{t} {dir} {peer} type={ty} xid={xid} len={}", raw.len());
        }
    }

    fn send_controller(&mut self, msg: &Message) {
        if self.controller.is_none() {
            return;
        }
        let raw = msg.encode();
        if self.log_outer {
            self.log_line("up", "controller", &raw);
        }
        self.write_controller(&raw);
    }

    /// A controller that does not take a message within [`WRITE_TIMEOUT`]
    /// loses its connection (and reconnects), rather than stalling the switches.
    fn write_controller(&mut self, raw: &[u8]) {
        if let Some(c) = &mut self.controller {
            if send_raw(c, raw).is_err() {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// Second switches of a datapath id whose first is still there after
    /// [`HANDSHAKE_TIMEOUT`]: closed.
    fn refuse_stale_claimants(&mut self) {
        for i in 0..self.claimants.len() {
            let stale = self.claimants[i]
                .as_ref()
                .is_some_and(|(_, since)| since.elapsed() > HANDSHAKE_TIMEOUT);
            if stale {
                if let Some((s, _)) = self.claimants[i].take() {
                    s.writer.close();
                }
                eprintln!(
                    "proxy: a second switch claimed datapath id {:#x} (\"{}\") while the first stayed connected: refused",
                    self.cfg.switches[i].datapath_id, self.cfg.switches[i].name
                );
            }
        }
    }

    fn send_switch(&mut self, sw: usize, raw: &[u8]) {
        if self.log_inner {
            let name = self.cfg.switches[sw].name.clone();
            self.log_line("down", &name, raw);
        }
        let Some(s) = &mut self.switches[sw] else {
            return;
        };
        if !s.v10 {
            s.writer.send(raw);
            return;
        }
        let Ok(m) = Message::decode(raw) else { return };
        match switch10::down(&m) {
            Ok(switch10::Down::Send(m10)) => s.writer.send(&m10.encode()),
            Ok(switch10::Down::EmptyReply(t)) => {
                // 1.0 has no PORT_DESC: its ports came with its features.
                let mut body = Vec::new();
                if t == mp::PORT_DESC {
                    for p in &s.ports {
                        p.encode(&mut body);
                    }
                }
                let conn = s.conn;
                let reply = Message::new(m.xid, Body::MultipartReply(t, 0, body));
                let bytes = reply.encode();
                // Handled here: the core never waits on its own full queue.
                self.heard_from_switch(sw, conn, reply, bytes);
            }
            Ok(switch10::Down::Drop) => {}
            Err((typ, code)) if m.xid < INTERNAL_XID => {
                // A refused statistics request ends there: no parts follow the error.
                if matches!(m.body, Body::MultipartRequest(..)) {
                    self.multiparts.remove(&m.xid);
                }
                let e = Message::error_for(raw, m.xid, typ, code);
                self.send_controller(&e);
            }
            Err((typ, code)) => eprintln!(
                "proxy: switch \"{}\" speaks OpenFlow 1.0, which cannot take a rule of the proxy's own (error type {typ} code {code})",
                self.cfg.switches[sw].name
            ),
        }
    }

    fn handle(&mut self, ev: Event, stop: &Arc<AtomicBool>) {
        match ev {
            Event::SwitchUp(i, conn, w, ports, v10) => {
                let st = SwitchState {
                    conn,
                    writer: PeerOut::Tcp(w),
                    ports,
                    v10,
                };
                if self.switches[i].is_some() {
                    // The first switch of a datapath id keeps it unless it is gone:
                    // this one waits for its going, then is refused.
                    if let Some((older, _)) = self.claimants[i].replace((st, Instant::now())) {
                        older.writer.close();
                    }
                    return;
                }
                self.switch_up(i, st);
            }
            Event::SwitchDown(i, conn) => {
                if self.claimants[i]
                    .as_ref()
                    .is_some_and(|(s, _)| s.conn == conn)
                {
                    self.claimants[i] = None;
                    return;
                }
                if self.switches[i].as_ref().is_none_or(|s| s.conn != conn) {
                    return;
                }
                self.port_status_of(i, true);
                self.switches[i] = None;
                for w in self.barriers.values_mut() {
                    w.remove(&i);
                }
                self.finish_barriers();
                // Statistics it owes complete without it: as if its last part came, empty.
                let owed: Vec<(u32, u16)> = self
                    .multiparts
                    .iter()
                    .filter(|(_, p)| p.waiting.contains(&i))
                    .map(|(x, p)| (*x, p.typ))
                    .collect();
                for (xid, t) in owed {
                    self.on_switch(i, Message::new(xid, Body::MultipartReply(t, 0, vec![])));
                }
                // A second claimant of its datapath id takes over now.
                if let Some((st, _)) = self.claimants[i].take() {
                    self.switch_up(i, st);
                }
            }
            Event::ControllerUp(w) => {
                self.controller = Some(w);
                self.send_controller(&Message::new(0, Body::Hello(vec![])));
            }
            Event::ControllerDown => {
                self.controller = None;
                self.barriers.clear();
                self.multiparts.clear();
                let (addr, tx, stop) = (
                    self.cfg.proxy.controller.clone(),
                    self.tx.clone(),
                    stop.clone(),
                );
                std::thread::spawn(move || controller_conn(addr, tx, stop));
            }
            Event::FromController(m, raw) => {
                if self.log_outer {
                    self.log_line("down", "controller", &raw);
                }
                if self.transparent {
                    self.send_switch(0, &raw);
                } else {
                    self.on_controller(m, &raw);
                }
            }
            Event::FromSwitch(i, conn, m, raw) => self.heard_from_switch(i, conn, m, raw),
        }
    }

    /// Switch `i` is served by the connection `st`.
    fn switch_up(&mut self, i: usize, st: SwitchState) {
        let was_known = self.controller.is_some();
        self.switches[i] = Some(st);
        if was_known {
            // A switch came back: its ports are up again, its entry rules gone.
            self.entries.retain(|(s, _), _| *s != i);
            self.port_status_of(i, false);
        }
    }

    /// A message of switch `i` over its connection `conn`; any other
    /// connection's (a second claimant of its datapath id) is not heard.
    fn heard_from_switch(&mut self, i: usize, conn: u64, m: Message, raw: Vec<u8>) {
        if self.switches[i].as_ref().is_none_or(|s| s.conn != conn) {
            return;
        }
        if self.log_inner {
            let name = self.cfg.switches[i].name.clone();
            self.log_line("up", &name, &raw);
        }
        if let Body::PortStatus(ps) = &m.body {
            // Keep the switch's port list current (add, delete,
            // modify) in every mode: a 1.0 switch's PORT_DESC is
            // answered from it.
            if let Some(st) = &mut self.switches[i] {
                st.ports.retain(|p| p.port_no != ps.port.port_no);
                if ps.reason != 1 {
                    st.ports.push(ps.port.clone());
                }
            }
        }
        if self.transparent {
            if m.xid < INTERNAL_XID || matches!(m.body, Body::PortStatus(_)) {
                if self.log_outer {
                    self.log_line("up", "controller", &raw);
                }
                self.write_controller(&raw);
            }
        } else {
            self.on_switch(i, m);
        }
    }

    /// Tell the controller the ports of switch `i` went down (or came back).
    fn port_status_of(&mut self, i: usize, down: bool) {
        if self.transparent {
            return;
        }
        let ports = self.emulated_ports();
        for p in ports {
            if self
                .maps
                .ports
                .get(&p.port_no)
                .is_some_and(|(s, _)| *s == i)
            {
                let mut p = p;
                if down {
                    p.state |= PORT_STATE_LINK_DOWN;
                }
                self.send_controller(&Message::new(
                    0,
                    Body::PortStatus(PortStatus { reason: 2, port: p }),
                ));
            }
        }
    }

    /// The emulated switch's ports: each global port with its switch's description.
    fn emulated_ports(&self) -> Vec<Port> {
        self.maps
            .ports
            .iter()
            .map(|(&g, &(s, l))| {
                let known = self.switches[s]
                    .as_ref()
                    .and_then(|st| st.ports.iter().find(|p| p.port_no == l).cloned());
                let mut p = known.unwrap_or(Port {
                    port_no: l,
                    hw_addr: [0; 6],
                    name: PortName::new(&format!("{}-{l}", self.cfg.switches[s].name)),
                    config: 0,
                    state: PORT_STATE_LINK_DOWN,
                    curr: 0,
                    advertised: 0,
                    supported: 0,
                    peer: 0,
                    curr_speed: 0,
                    max_speed: 0,
                });
                if self.switches[s].is_none() {
                    p.state |= PORT_STATE_LINK_DOWN;
                }
                p.port_no = g;
                p
            })
            .collect()
    }

    fn refuse(&mut self, raw: &[u8], xid: u32, (t, c): (u16, u16)) {
        self.send_controller(&Message::error_for(raw, xid, t, c));
    }

    fn connected(&self) -> Vec<usize> {
        (0..self.switches.len())
            .filter(|i| self.switches[*i].is_some())
            .collect()
    }

    fn on_controller(&mut self, m: Message, raw: &[u8]) {
        let xid = m.xid;
        match m.body {
            Body::Hello(_) | Body::EchoReply(_) | Body::Error(_) => {}
            Body::EchoRequest(d) => self.send_controller(&Message::new(xid, Body::EchoReply(d))),
            Body::FeaturesRequest => {
                let f = Features {
                    datapath_id: self.cfg.proxy.datapath_id,
                    n_buffers: 0,
                    n_tables: self.maps.n_tables(),
                    auxiliary_id: 0,
                    // Flow, table and port statistics.
                    capabilities: 0x7,
                };
                self.send_controller(&Message::new(xid, Body::FeaturesReply(f)));
            }
            Body::GetConfigRequest => {
                self.send_controller(&Message::new(xid, Body::GetConfigReply(0, 0xffff)))
            }
            Body::SetConfig(..) => {
                for i in self.connected() {
                    self.send_switch(i, raw);
                }
            }
            Body::BarrierRequest => {
                let sws = self.connected();
                self.barriers.insert(xid, sws.iter().copied().collect());
                for i in sws {
                    self.send_switch(i, raw);
                }
                self.finish_barriers();
            }
            Body::FlowMod(fm) => match flow_mod_down(&self.maps, &fm) {
                Err(refusal) => self.refuse(raw, xid, refusal),
                Ok(t) => {
                    for e in t.entries {
                        let key = (e.switch, e.vid);
                        match self.entries.get(&key) {
                            Some(old) if *old == e => {}
                            // The tag already means another table or metadata on that switch.
                            Some(_) => return self.refuse(raw, xid, (error::BAD_INSTRUCTION, 5)),
                            None => {
                                let msg =
                                    Message::new(INTERNAL_XID + 3, Body::FlowMod(e.flow_mod()));
                                self.send_switch(e.switch, &msg.encode());
                                self.entries.insert(key, e);
                            }
                        }
                    }
                    if fm.table_id == crate::of13::OFPTT_ALL
                        && fm.command == crate::of13::flow::command::DELETE
                    {
                        self.entries.clear();
                    }
                    for (sw, fm) in t.mods {
                        let msg = Message::new(xid, Body::FlowMod(fm));
                        self.send_switch(sw, &msg.encode());
                    }
                }
            },
            Body::MultipartRequest(mp::PORT_DESC, _, _) => {
                let mut body = Vec::new();
                for p in self.emulated_ports() {
                    p.encode(&mut body);
                }
                self.send_controller(&Message::new(
                    xid,
                    Body::MultipartReply(mp::PORT_DESC, 0, body),
                ));
            }
            Body::MultipartRequest(mp::DESC, _, _) => {
                let mut body = Vec::new();
                for (text, len) in [
                    ("nflab", 256),
                    ("TableVisor-class proxy", 256),
                    (env!("CARGO_PKG_VERSION"), 256),
                    ("", 32),
                    ("emulated switch", 256),
                ] {
                    let mut f = text.as_bytes().to_vec();
                    f.resize(len, 0);
                    body.extend(f);
                }
                self.send_controller(&Message::new(xid, Body::MultipartReply(mp::DESC, 0, body)));
            }
            Body::MultipartRequest(
                t @ (mp::FLOW | mp::TABLE | mp::PORT_STATS | mp::AGGREGATE),
                flags,
                body,
            ) => {
                let mut targets: Vec<(usize, Vec<u8>)> = Vec::new();
                if t == mp::FLOW || t == mp::AGGREGATE {
                    let Ok(req) = FlowStatsRequest::decode(&body) else {
                        return self.refuse(raw, xid, (error::BAD_REQUEST, error::BAD_LEN));
                    };
                    if req.table_id != crate::of13::OFPTT_ALL
                        && !self.maps.tables.contains_key(&req.table_id)
                    {
                        return self.refuse(raw, xid, (error::BAD_REQUEST, error::BAD_MULTIPART));
                    }
                    // Each switch that can hold such flows, asked in its own terms.
                    targets = (0..self.switches.len())
                        .filter_map(|i| {
                            stats_request_down(&self.maps, i, &req).map(|r| (i, r.encode()))
                        })
                        .collect();
                } else if t == mp::PORT_STATS {
                    // One port: its switch only, asked for its local number.
                    let Some(port) = body.get(..4) else {
                        return self.refuse(raw, xid, (error::BAD_REQUEST, error::BAD_LEN));
                    };
                    match u32::from_be_bytes([port[0], port[1], port[2], port[3]]) {
                        crate::of13::OFPP_ANY => {
                            targets = self
                                .connected()
                                .into_iter()
                                .map(|i| (i, body.clone()))
                                .collect()
                        }
                        g => match self.maps.ports.get(&g) {
                            Some(&(s, l)) => targets.push((s, port_stats_request(l))),
                            // OFPBRC_BAD_PORT
                            None => return self.refuse(raw, xid, (error::BAD_REQUEST, 11)),
                        },
                    }
                } else {
                    targets = self
                        .connected()
                        .into_iter()
                        .map(|i| (i, body.clone()))
                        .collect();
                }
                // A switch that is down answers nothing: leave it out.
                targets.retain(|(i, _)| self.switches[*i].is_some());
                if targets.is_empty() {
                    // No switch to ask: no entries, or an aggregate of zeros.
                    let mut body = Vec::new();
                    if t == mp::AGGREGATE {
                        AggregateStats::default().encode(&mut body);
                    }
                    return self
                        .send_controller(&Message::new(xid, Body::MultipartReply(t, 0, body)));
                }
                self.multiparts.insert(
                    xid,
                    PendingMultipart {
                        typ: t,
                        waiting: targets.iter().map(|(i, _)| *i).collect(),
                        aggregate: AggregateStats::default(),
                    },
                );
                for (i, b) in targets {
                    let msg = Message::new(xid, Body::MultipartRequest(t, flags, b));
                    self.send_switch(i, &msg.encode());
                }
            }
            Body::MultipartRequest(..) => {
                self.refuse(raw, xid, (error::BAD_REQUEST, error::BAD_MULTIPART))
            }
            Body::Other(typ::PACKET_OUT, body) => match packet_out_down(&self.maps, &body) {
                Ok((sw, body)) => {
                    let msg = Message::new(xid, Body::Other(typ::PACKET_OUT, body));
                    self.send_switch(sw, &msg.encode());
                }
                Err(refusal) => self.refuse(raw, xid, refusal),
            },
            // Anything else (group, meter, role, …) this emulated switch does not do.
            _ => self.refuse(raw, xid, (error::BAD_REQUEST, error::BAD_TYPE)),
        }
    }

    fn finish_barriers(&mut self) {
        let done: Vec<u32> = self
            .barriers
            .iter()
            .filter(|(_, w)| w.is_empty())
            .map(|(x, _)| *x)
            .collect();
        for xid in done {
            self.barriers.remove(&xid);
            self.send_controller(&Message::new(xid, Body::BarrierReply));
        }
    }

    fn on_switch(&mut self, i: usize, m: Message) {
        let xid = m.xid;
        match m.body {
            Body::EchoRequest(d) => {
                let msg = Message::new(xid, Body::EchoReply(d));
                self.send_switch(i, &msg.encode());
            }
            Body::BarrierReply => {
                if let Some(w) = self.barriers.get_mut(&xid) {
                    w.remove(&i);
                    self.finish_barriers();
                }
            }
            Body::MultipartReply(t, flags, body) => {
                let Some(p) = self.multiparts.get_mut(&xid) else {
                    return;
                };
                if p.typ != t {
                    return;
                }
                let last_of_switch = flags & MULTIPART_MORE == 0;
                if last_of_switch {
                    p.waiting.remove(&i);
                }
                let all_done = p.waiting.is_empty();
                if t == mp::AGGREGATE {
                    // One body for the emulated switch: the sum over its switches.
                    if let Ok(a) = AggregateStats::decode(&body) {
                        p.aggregate = p.aggregate.sum(&a);
                    }
                    if !all_done {
                        return;
                    }
                }
                let total = p.aggregate;
                if all_done {
                    self.multiparts.remove(&xid);
                }
                let body = if t == mp::AGGREGATE {
                    let mut b = Vec::with_capacity(AggregateStats::LEN);
                    total.encode(&mut b);
                    b
                } else {
                    self.multipart_up(i, t, body)
                };
                let flags = if all_done { 0 } else { MULTIPART_MORE };
                self.send_controller(&Message::new(xid, Body::MultipartReply(t, flags, body)));
            }
            Body::Error(e) => {
                if xid < INTERNAL_XID {
                    self.send_controller(&Message::new(xid, Body::Error(e)));
                } else {
                    eprintln!(
                        "proxy: switch \"{}\" refused a rule of the proxy's own (error type {} code {})",
                        self.cfg.switches[i].name, e.typ, e.code
                    );
                }
            }
            Body::FlowRemoved(fr) => {
                if let Some(fr) = flow_removed_up(&self.maps, i, fr) {
                    self.send_controller(&Message::new(xid, Body::FlowRemoved(fr)));
                }
            }
            Body::Other(typ::PACKET_IN, body) => {
                if let Some(body) = packet_in_up(&self.maps, i, &body) {
                    self.send_controller(&Message::new(xid, Body::Other(typ::PACKET_IN, body)));
                }
            }
            Body::PortStatus(mut ps) => {
                if let Some(&g) = self.maps.ports_back.get(&(i, ps.port.port_no)) {
                    ps.port.port_no = g;
                    self.send_controller(&Message::new(xid, Body::PortStatus(ps)));
                }
            }
            _ => {}
        }
    }

    /// A switch's multipart reply body in the controller's view.
    fn multipart_up(&self, i: usize, t: u16, body: Vec<u8>) -> Vec<u8> {
        match t {
            mp::FLOW => {
                let Ok(entries) = FlowStats::decode_all(&body) else {
                    return body;
                };
                let mut out = Vec::with_capacity(body.len());
                for e in entries {
                    if let Some(e) = flow_stats_up(&self.maps, &self.entries, i, e) {
                        e.encode(&mut out);
                    }
                }
                out
            }
            // Whole entries only: a body cut short or padded is not passed on
            // (`chunks` would hand over a short last piece, and a port's
            // number was read from it before its length was known).
            mp::TABLE => body
                .chunks_exact(24)
                .filter_map(|c| {
                    let g = *self.maps.tables_back.get(&(i, c[0]))?;
                    let mut c = c.to_vec();
                    c[0] = g;
                    Some(c)
                })
                .flatten()
                .collect(),
            mp::PORT_STATS => body
                .chunks_exact(112)
                .filter_map(|c| {
                    let l = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
                    let g = *self.maps.ports_back.get(&(i, l))?;
                    let mut c = c.to_vec();
                    c[..4].copy_from_slice(&g.to_be_bytes());
                    Some(c)
                })
                .flatten()
                .collect(),
            _ => body,
        }
    }
}

/// Message types the emulated switch answers or forwards (docs/sdn.md).
pub const HANDLED_TYPES: [u8; 10] = [
    typ::HELLO,
    typ::ERROR,
    typ::ECHO_REQUEST,
    typ::ECHO_REPLY,
    typ::FEATURES_REQUEST,
    typ::GET_CONFIG_REQUEST,
    typ::SET_CONFIG,
    typ::FLOW_MOD,
    typ::MULTIPART_REQUEST,
    typ::BARRIER_REQUEST,
];

/// The proxy of the fuzz target: two switches, a table and a port on each.
const FUZZ_CONFIG: &str = r#"
[proxy]
listen = "127.0.0.1:0"
controller = "127.0.0.1:1"
[[switch]]
name = "a"
datapath_id = 1
[[switch]]
name = "b"
datapath_id = 2
[[table]]
id = 0
switch = "a"
local = 0
[[table]]
id = 1
switch = "b"
local = 1
[[port]]
id = 1
switch = "a"
local = 1
[[port]]
id = 2
switch = "b"
local = 1
[[link]]
from = "a"
from_port = 10
to = "b"
to_port = 10
"#;

/// The switch-facing side of the core, without sockets, for the fuzz target
/// (`fuzz/fuzz_targets/openflow_proxy.rs`): `data`'s first byte picks which
/// of two connected switches sends each message (bit k for message k), the
/// rest is what they send, OpenFlow 1.3 or 1.0 frames back to back. Before
/// each reply the controller's matching request is pending, so the reply is
/// translated as a real one would be. Whatever the bytes, it must not panic.
#[doc(hidden)]
pub fn fuzz_switch_side(data: &[u8]) {
    let cfg: ProxyConfig = toml::from_str(FUZZ_CONFIG).expect("the fuzz config parses");
    let (tx, _rx) = sync_channel(1);
    let mut core = Core::new(cfg, None, tx);
    for (i, s) in core.switches.iter_mut().enumerate() {
        *s = Some(SwitchState {
            conn: i as u64,
            writer: PeerOut::Sink,
            ports: Vec::new(),
            v10: i == 1,
        });
    }
    let Some((&pick, mut rest)) = data.split_first() else {
        return;
    };
    let mut k = 0;
    while let Ok(Some(len)) = crate::of13::frame_len(rest) {
        let (frame, tail) = rest.split_at(len);
        rest = tail;
        let m = if frame[0] == crate::of10::VERSION {
            match crate::of10::Message10::decode(frame)
                .ok()
                .and_then(switch10::up)
            {
                Some(m) => m,
                None => continue,
            }
        } else {
            match Message::decode(frame) {
                Ok(m) => m,
                Err(_) => continue,
            }
        };
        let sw = usize::from(pick >> (k % 8) & 1);
        k += 1;
        // The request this reply answers, from the controller.
        let ask = match &m.body {
            Body::MultipartReply(t, _, _) => {
                let body = match *t {
                    mp::FLOW | mp::AGGREGATE => FlowStatsRequest::all().encode(),
                    mp::PORT_STATS => port_stats_request(crate::of13::OFPP_ANY),
                    _ => Vec::new(),
                };
                Some(Message::new(m.xid, Body::MultipartRequest(*t, 0, body)))
            }
            Body::BarrierReply => Some(Message::new(m.xid, Body::BarrierRequest)),
            _ => None,
        };
        if let Some(ask) = ask.filter(|a| a.xid < INTERNAL_XID) {
            let raw = ask.encode();
            core.on_controller(ask, &raw);
        }
        let raw = m.encode();
        core.heard_from_switch(sw, sw as u64, m, raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A switch's multipart reply of type `t` whose body is `body_len` bytes.
    fn reply(t: u16, body_len: usize) -> Vec<u8> {
        let body: Vec<u8> = (0..body_len).map(|i| i as u8).collect();
        Message::new(7, Body::MultipartReply(t, 0, body)).encode()
    }

    #[test]
    fn stats_bodies_of_any_length_are_translated_without_a_panic() {
        for (t, entry) in [(mp::PORT_STATS, 112), (mp::TABLE, 24), (mp::FLOW, 56)] {
            for len in [0, 1, 3, entry - 1, entry + 1, entry + 3, 2 * entry - 1] {
                // From switch a (OpenFlow 1.3), then from switch b.
                for pick in [0u8, 0xff] {
                    let mut data = vec![pick];
                    data.extend(reply(t, len));
                    fuzz_switch_side(&data);
                }
            }
        }
    }
}
