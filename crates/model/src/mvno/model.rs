//! The MVNO model on the engine; see the module docs of [`super`].

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::spec::{AucHold, MvnoConfig, Policy};
use crate::des::monitor::{Counter, TimeWeighted};
use crate::des::{Core, EntityId, Flow, Model, PathId, Sim, Station, StationId, Step};

const CMAP: usize = 0;
const HLR: usize = 1;
const AUC: usize = 2;
const BACKEND: usize = 3;
const ISD: usize = 4;
/// Station names, in station order.
pub const COMPONENTS: [&str; 5] = ["cmap", "hlr", "auc", "backend", "isd"];

const SAI_VLR: u8 = 0;
const UL: u8 = 1;
const SAI_SGSN: u8 = 2;
const UL_GPRS: u8 = 3;
const ATTACHED: u8 = 4;
const KINDS: usize = 4;

// Services, in the order of spec::Steps.
const S_CMAP_IN: u16 = 0;
const S_HLR_QUERY: u16 = 1;
const S_BACKEND_HIT: u16 = 2;
const S_BACKEND_MISS: u16 = 3;
const S_ISD: u16 = 4;
const S_BACKEND_UPDATE: u16 = 5;
const S_AUC_KEYS: u16 = 6;
const S_AUC_UPDATE: u16 = 7;
const S_CMAP_OUT: u16 = 8;

const H_LOOKUP: u16 = 0;
const H_FILL: u16 = 1;
const H_ANSWER: u16 = 2;

#[derive(Clone, Copy)]
struct Msg {
    dev: u32,
    attempt: u32,
    kind: u8,
}

#[derive(Clone, Copy)]
enum Ev {
    Arrival,
    /// Timeout or retry hint of a device's attempt (stale if `generation`
    /// is not the device's).
    Restart {
        dev: u32,
        generation: u32,
    },
}

#[derive(Clone, Copy)]
struct Device {
    arrived_s: f64,
    retries: u32,
    stage: u8,
    generation: u32,
    in_system: u32,
    hlr_until_s: f64,
    backend_until_s: f64,
}

/// Paths after the HLR lookup, per message family (SAI = 0, UL = 1).
struct Routes {
    front: PathId,
    after_hit: [PathId; 2],
    backend_hit: [PathId; 2],
    backend_miss: [PathId; 2],
}

struct Mvno {
    cfg: MvnoConfig,
    routes: Routes,
    devices: Vec<Device>,
    in_system: [u32; KINDS],
    devices_in_system: u32,
    attached: u64,
    attach_times_s: Vec<f64>,
    arrivals: Counter,
    attachments: Counter,
    retries: Counter,
    refused: Counter,
    dropped: Counter,
    open_dialogs: TimeWeighted,
}

fn family(kind: u8) -> usize {
    match kind {
        SAI_VLR | SAI_SGSN => 0,
        UL | UL_GPRS => 1,
        _ => unreachable!("message kind {kind}"),
    }
}

impl Mvno {
    fn timeout_s(&self, kind: u8) -> f64 {
        if family(kind) == 0 {
            self.cfg.sai_timeout_s
        } else {
            self.cfg.ul_timeout_s
        }
    }

    /// The device sends the message of its current stage.
    fn send(&mut self, core: &mut Core<Msg, Ev>, dev: u32) {
        let now = core.now();
        let d = self.devices[dev as usize];
        let kind = d.stage;
        let refuse = match self.cfg.policy {
            Policy::Msu => self.in_system[usize::from(kind)] >= self.cfg.msu_quota,
            Policy::Device => {
                kind == SAI_VLR
                    && d.in_system == 0
                    && self.devices_in_system >= self.cfg.device_quota
            }
            Policy::Baseline | Policy::Dropping => false,
        };
        let generation = d.generation.wrapping_add(1);
        self.devices[dev as usize].generation = generation;
        if refuse {
            self.refused.hit(now);
            let wait = if self.cfg.policy == Policy::Device {
                let unattached = self.devices.len() as u64 - self.attached;
                (unattached as f64 / self.cfg.hint_rate_per_s)
                    .ceil()
                    .max(1.0)
            } else {
                self.timeout_s(kind)
            };
            core.schedule(wait, Ev::Restart { dev, generation });
            return;
        }
        let d = &mut self.devices[dev as usize];
        d.in_system += 1;
        if d.in_system == 1 {
            self.devices_in_system += 1;
        }
        self.in_system[usize::from(kind)] += 1;
        self.open_dialogs.add(now, 1.0);
        let attempt = d.retries;
        core.spawn(self.routes.front, Msg { dev, attempt, kind });
        let t = self.timeout_s(kind);
        core.schedule(t, Ev::Restart { dev, generation });
    }

    fn answer(&mut self, core: &mut Core<Msg, Ev>, m: Msg) {
        let now = core.now();
        let d = &mut self.devices[m.dev as usize];
        if m.attempt != d.retries || m.kind != d.stage {
            return; // the answer to an abandoned attempt
        }
        d.generation = d.generation.wrapping_add(1); // cancels the timeout
        d.stage += 1;
        if d.stage == ATTACHED {
            self.attached += 1;
            self.attachments.hit(now);
            self.attach_times_s.push(now - d.arrived_s);
        } else {
            self.send(core, m.dev);
        }
    }
}

impl Model for Mvno {
    type Tag = Msg;
    type Event = Ev;

    fn on_event(&mut self, core: &mut Core<Msg, Ev>, ev: Ev) {
        let now = core.now();
        match ev {
            Ev::Arrival => {
                self.arrivals.hit(now);
                let dev = self.devices.len() as u32;
                self.devices.push(Device {
                    arrived_s: now,
                    retries: 0,
                    stage: SAI_VLR,
                    generation: 0,
                    in_system: 0,
                    hlr_until_s: f64::NEG_INFINITY,
                    backend_until_s: f64::NEG_INFINITY,
                });
                self.send(core, dev);
                let gap = core.rng.exp(1.0 / self.cfg.rate_per_s);
                core.schedule(gap, Ev::Arrival);
            }
            Ev::Restart { dev, generation } => {
                let d = &mut self.devices[dev as usize];
                if d.generation != generation || d.stage == ATTACHED {
                    return;
                }
                d.retries += 1;
                d.stage = SAI_VLR;
                self.retries.hit(now);
                self.send(core, dev);
            }
        }
    }

    fn hook(&mut self, core: &mut Core<Msg, Ev>, e: EntityId, hook: u16) -> Flow {
        let m = *core.tag(e);
        let now = core.now();
        let f = family(m.kind);
        match hook {
            H_LOOKUP => {
                let d = &self.devices[m.dev as usize];
                if d.hlr_until_s > now {
                    Flow::Jump(self.routes.after_hit[f])
                } else if d.backend_until_s > now {
                    Flow::Jump(self.routes.backend_hit[f])
                } else {
                    Flow::Jump(self.routes.backend_miss[f])
                }
            }
            H_FILL => {
                let d = &mut self.devices[m.dev as usize];
                d.hlr_until_s = now + self.cfg.hlr_ttl_s;
                if d.backend_until_s <= now {
                    d.backend_until_s = now + self.cfg.backend_ttl_s;
                }
                Flow::Next
            }
            _ => {
                self.answer(core, m);
                Flow::Next
            }
        }
    }

    fn on_blocked(&mut self, core: &mut Core<Msg, Ev>, _e: EntityId, _s: StationId) {
        self.dropped.hit(core.now());
    }

    fn on_exit(&mut self, core: &mut Core<Msg, Ev>, e: EntityId) {
        if core.is_child(e) {
            return;
        }
        let m = *core.tag(e);
        self.in_system[usize::from(m.kind)] -= 1;
        self.open_dialogs.add(core.now(), -1.0);
        let d = &mut self.devices[m.dev as usize];
        d.in_system -= 1;
        if d.in_system == 0 {
            self.devices_in_system -= 1;
        }
    }
}

fn build(core: &mut Core<Msg, Ev>, cfg: &MvnoConfig) -> Routes {
    let limit = (cfg.policy == Policy::Dropping).then_some(cfg.queue_limit);
    for (i, name) in COMPONENTS.iter().enumerate().take(ISD) {
        core.add_station(Station::new(name, cfg.processors[i], limit));
    }
    core.add_station(Station::new("isd", u32::MAX, None));
    for s in &cfg.services {
        core.add_service(s.clone());
    }
    let st = |i: usize| StationId(i as u16);
    let sv = crate::des::ServiceId;
    let serve = |i: usize, s: u16| [Step::Seize(st(i)), Step::Hold(sv(s)), Step::Release(st(i))];
    let front = core.add_path(
        serve(CMAP, S_CMAP_IN)
            .into_iter()
            .chain(serve(HLR, S_HLR_QUERY))
            .chain([Step::Hook(H_LOOKUP)])
            .collect(),
    );
    let sai = match cfg.auc_hold {
        AucHold::KeysOutUpdate => vec![Step::Seize(st(AUC)), Step::Hold(sv(S_AUC_KEYS))]
            .into_iter()
            .chain(serve(CMAP, S_CMAP_OUT))
            .chain([
                Step::Hook(H_ANSWER),
                Step::Hold(sv(S_AUC_UPDATE)),
                Step::Release(st(AUC)),
            ])
            .collect::<Vec<_>>(),
        AucHold::Parallel => {
            let update = core.add_path(vec![Step::Hold(sv(S_AUC_UPDATE)), Step::Release(st(AUC))]);
            let out = core.add_path(
                serve(CMAP, S_CMAP_OUT)
                    .into_iter()
                    .chain([Step::Hook(H_ANSWER)])
                    .collect(),
            );
            let fork = core.add_fork(vec![update, out]);
            vec![
                Step::Seize(st(AUC)),
                Step::Hold(sv(S_AUC_KEYS)),
                Step::Fork(fork),
            ]
        }
    };
    let sai_rest = core.add_path(sai);
    let ul_rest = core.add_path(
        [
            serve(ISD, S_ISD),
            serve(BACKEND, S_BACKEND_UPDATE),
            serve(CMAP, S_CMAP_OUT),
        ]
        .concat()
        .into_iter()
        .chain([Step::Hook(H_ANSWER)])
        .collect(),
    );
    let rest = [sai_rest, ul_rest];
    let mut backend = |s: u16| {
        [0, 1].map(|f| {
            core.add_path(
                serve(BACKEND, s)
                    .into_iter()
                    .chain([Step::Hook(H_FILL), Step::Jump(rest[f])])
                    .collect(),
            )
        })
    };
    let backend_hit = backend(S_BACKEND_HIT);
    let backend_miss = backend(S_BACKEND_MISS);
    Routes {
        front,
        after_hit: rest,
        backend_hit,
        backend_miss,
    }
}

/// Per-second series of a run (index = second).
#[derive(Debug, Clone, Default, Serialize)]
pub struct MvnoSeries {
    /// New devices.
    pub arrivals: Vec<u64>,
    /// Devices that completed the attach.
    pub attachments: Vec<u64>,
    /// Device restarts (timeouts, retry hints).
    pub retries: Vec<u64>,
    /// Messages refused by a policy.
    pub refused: Vec<u64>,
    /// Messages dropped at a full queue.
    pub dropped: Vec<u64>,
    /// Messages in the system (time-weighted mean over the second).
    pub open_dialogs: Vec<f64>,
    /// Queue length per component (time-weighted).
    pub queue: BTreeMap<String, Vec<f64>>,
    /// Utilisation per component (busy / processors; ISD: busy servers).
    pub utilisation: BTreeMap<String, Vec<f64>>,
}

/// The outcome of one run.
#[derive(Debug, Clone, Serialize)]
pub struct MvnoResult {
    /// Offered rate of new devices.
    pub offered_rate_per_s: f64,
    /// Mean utilisation after the warm-up, per component (cmap, hlr, auc, backend).
    pub utilisation: BTreeMap<String, f64>,
    /// Mean attachments per second after the warm-up.
    pub attach_rate_per_s: f64,
    /// Mean new devices per second after the warm-up.
    pub arrival_rate_per_s: f64,
    /// Mean messages in the system after the warm-up.
    pub open_dialogs_mean: f64,
    /// Devices that arrived.
    pub devices: u64,
    /// Devices attached by the end.
    pub attached: u64,
    /// Most retries of one device.
    pub max_retries: u32,
    /// Mean time from arrival to attach of the attached devices.
    pub mean_time_to_attach_s: f64,
    /// Messages refused by the policy.
    pub refused: u64,
    /// Messages dropped at a full queue.
    pub dropped: u64,
    /// Engine events processed.
    pub events: u64,
    /// Wall-clock seconds of the simulation.
    pub wall_s: f64,
    /// Engine events per wall-clock second.
    pub events_per_s: f64,
    /// Retries of every device (for percentiles).
    #[serde(skip)]
    pub retries_per_device: Vec<u32>,
    /// Per-second series.
    #[serde(skip)]
    pub series: MvnoSeries,
}

/// Runs the model once.
pub fn run(cfg: &MvnoConfig) -> MvnoResult {
    let started = Instant::now();
    let mut core = Core::new(cfg.seed);
    let routes = build(&mut core, cfg);
    core.schedule(0.0, Ev::Arrival);
    let model = Mvno {
        cfg: cfg.clone(),
        routes,
        devices: Vec::with_capacity((cfg.rate_per_s * cfg.duration_s * 1.1) as usize),
        in_system: [0; KINDS],
        devices_in_system: 0,
        attached: 0,
        attach_times_s: Vec::new(),
        arrivals: Counter::default(),
        attachments: Counter::default(),
        retries: Counter::default(),
        refused: Counter::default(),
        dropped: Counter::default(),
        open_dialogs: TimeWeighted::default(),
    };
    let mut sim = Sim { core, model };
    sim.run_until(cfg.duration_s);
    let wall_s = started.elapsed().as_secs_f64();
    let Sim { core, mut model } = sim;
    model.open_dialogs.close(core.now());
    let secs = cfg.duration_s.floor() as usize;
    let from = (cfg.warmup_s.ceil() as usize).min(secs.saturating_sub(1));
    let mut utilisation = BTreeMap::new();
    let mut series = MvnoSeries {
        arrivals: model.arrivals.per_second(secs),
        attachments: model.attachments.per_second(secs),
        retries: model.retries.per_second(secs),
        refused: model.refused.per_second(secs),
        dropped: model.dropped.per_second(secs),
        open_dialogs: model.open_dialogs.per_second(secs),
        ..Default::default()
    };
    for (i, st) in core.stations.iter().enumerate() {
        let name = COMPONENTS[i].to_string();
        let servers = if st.servers == u32::MAX {
            1.0
        } else {
            f64::from(st.servers)
        };
        series
            .queue
            .insert(name.clone(), st.queue_level.per_second(secs));
        series.utilisation.insert(
            name.clone(),
            st.busy_level
                .per_second(secs)
                .into_iter()
                .map(|b| b / servers)
                .collect(),
        );
        if i != ISD {
            utilisation.insert(name, st.utilisation_between(from, secs));
        }
    }
    let events = core.events();
    MvnoResult {
        offered_rate_per_s: cfg.rate_per_s,
        utilisation,
        attach_rate_per_s: model.attachments.rate_between(from, secs),
        arrival_rate_per_s: model.arrivals.rate_between(from, secs),
        open_dialogs_mean: model.open_dialogs.mean_between(from, secs),
        devices: model.devices.len() as u64,
        attached: model.attached,
        max_retries: model.devices.iter().map(|d| d.retries).max().unwrap_or(0),
        mean_time_to_attach_s: nflab_analyze::crossrun::mean(&model.attach_times_s).unwrap_or(0.0),
        refused: model.refused.total(),
        dropped: model.dropped.total(),
        events,
        wall_s,
        events_per_s: events as f64 / wall_s.max(1e-9),
        retries_per_device: model.devices.iter().map(|d| d.retries).collect(),
        series,
    }
}

impl MvnoSeries {
    /// Writes `series.csv` (one row per second) into `dir`.
    pub fn write_csv(&self, dir: &std::path::Path) -> std::io::Result<()> {
        use std::fmt::Write as _;
        let mut s =
            String::from("second,arrivals,attachments,retries,refused,dropped,open_dialogs");
        for c in COMPONENTS {
            let _ = write!(s, ",queue_{c}");
        }
        for c in COMPONENTS {
            let _ = write!(s, ",utilisation_{c}");
        }
        s.push('\n');
        for i in 0..self.arrivals.len() {
            let _ = write!(
                s,
                "{i},{},{},{},{},{},{:.3}",
                self.arrivals[i],
                self.attachments[i],
                self.retries[i],
                self.refused[i],
                self.dropped[i],
                self.open_dialogs[i]
            );
            for c in COMPONENTS {
                let _ = write!(s, ",{:.3}", self.queue[c][i]);
            }
            for c in COMPONENTS {
                let _ = write!(s, ",{:.5}", self.utilisation[c][i]);
            }
            s.push('\n');
        }
        std::fs::write(dir.join("series.csv"), s)
    }
}

impl MvnoResult {
    /// Writes `series.csv` and `retries.csv` (device, retries) into `dir`.
    pub fn write_csv(&self, dir: &std::path::Path) -> std::io::Result<()> {
        use std::fmt::Write as _;
        std::fs::create_dir_all(dir)?;
        self.series.write_csv(dir)?;
        let mut s = String::from("device,retries\n");
        for (i, r) in self.retries_per_device.iter().enumerate() {
            let _ = writeln!(s, "{i},{r}");
        }
        std::fs::write(dir.join("retries.csv"), s)
    }
}
