//! Entities that walk paths through stations: the interpreter, its stations
//! and the [`Model`] hooks a concrete model fills in.

use std::collections::VecDeque;

use super::calendar::Calendar;
use super::monitor::TimeWeighted;
use super::service::Service;
use crate::rng::Rng;

/// Index of a station in the [`Core`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StationId(pub u16);
/// Index of a path in the [`Core`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathId(pub u16);
/// Index of a service-time distribution in the [`Core`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceId(pub u16);
/// Index of a fork (a set of branch paths) in the [`Core`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForkId(pub u16);
/// A live entity. Slots are reused, so a stale id must not be kept past
/// the entity's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityId(pub u32);

const NONE: u32 = u32::MAX;
const NO_STATION: u16 = u16::MAX;

/// One step of a path.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// Take a server of the station, waiting in its FIFO queue if all are
    /// busy; a full queue blocks the entity (it leaves, [`Model::on_blocked`]).
    Seize(StationId),
    /// Give a server back; the head of the queue takes it.
    Release(StationId),
    /// Spend a duration drawn from the service distribution.
    Hold(ServiceId),
    /// Start one child per branch (each a copy of the tag) and wait until
    /// all have finished (the join), then go on.
    Fork(ForkId),
    /// Ask the model what to do ([`Model::hook`]).
    Hook(u16),
    /// Continue at the start of another path.
    Jump(PathId),
}

/// What an entity does after a [`Step::Hook`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// The next step.
    Next,
    /// The start of another path.
    Jump(PathId),
    /// Leave the system now.
    Exit,
    /// Park until the model calls [`Core::resume`] (a signal, a timer).
    Wait,
}

/// A multi-server FIFO station: `servers` (`u32::MAX` = infinite-server),
/// a queue of `queue_limit` places (None = unbounded) and its monitors.
#[derive(Debug, Clone)]
pub struct Station {
    /// Name for outputs.
    pub name: String,
    /// Parallel servers.
    pub servers: u32,
    /// Places in the queue, None for unbounded.
    pub queue_limit: Option<usize>,
    busy: u32,
    queue: VecDeque<u32>,
    /// Busy servers over time.
    pub busy_level: TimeWeighted,
    /// Queue length over time.
    pub queue_level: TimeWeighted,
    /// Entities that asked for a server.
    pub arrivals: u64,
    /// Entities turned away by a full queue.
    pub blocked: u64,
    /// Entities that left the queue before service.
    pub reneged: u64,
}

impl Station {
    /// A station with `servers` servers (`u32::MAX`: infinite) and an
    /// optional queue limit.
    pub fn new(name: &str, servers: u32, queue_limit: Option<usize>) -> Station {
        Station {
            name: name.to_string(),
            servers,
            queue_limit,
            busy: 0,
            queue: VecDeque::new(),
            busy_level: TimeWeighted::default(),
            queue_level: TimeWeighted::default(),
            arrivals: 0,
            blocked: 0,
            reneged: 0,
        }
    }

    /// Servers busy now.
    pub fn busy(&self) -> u32 {
        self.busy
    }

    /// Entities waiting now.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Mean busy servers / servers over `[from, to)` seconds; 0 for an
    /// infinite-server station (its utilisation is undefined).
    pub fn utilisation_between(&self, from_s: usize, to_s: usize) -> f64 {
        if self.servers == u32::MAX {
            return 0.0;
        }
        self.busy_level.mean_between(from_s, to_s) / f64::from(self.servers)
    }
}

struct Entity<T> {
    tag: T,
    path: u16,
    pc: u32,
    parent: u32,
    pending: u32,
    timer_gen: u32,
    waiting_at: u16,
}

/// Calendar entries of the engine.
#[derive(Debug, Clone, Copy)]
enum Ev<E> {
    Resume(u32),
    Timer { e: u32, generation: u32, tag: u16 },
    Model(E),
}

/// The state a model acts on: clock, calendar, stations, paths, entities,
/// random numbers. `T` is the entity's tag, `E` the model's own events.
pub struct Core<T, E> {
    calendar: Calendar<Ev<E>>,
    /// The stations, by [`StationId`].
    pub stations: Vec<Station>,
    paths: Vec<Vec<Step>>,
    forks: Vec<Vec<PathId>>,
    services: Vec<Service>,
    entities: Vec<Option<Entity<T>>>,
    free: Vec<u32>,
    ready: VecDeque<u32>,
    reneged: Vec<u32>,
    /// The model's random numbers.
    pub rng: Rng,
    events: u64,
}

impl<T: Copy, E: Copy> Core<T, E> {
    /// An empty core drawing from `seed`.
    pub fn new(seed: u64) -> Core<T, E> {
        Core {
            calendar: Calendar::default(),
            stations: Vec::new(),
            paths: Vec::new(),
            forks: Vec::new(),
            services: Vec::new(),
            entities: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            reneged: Vec::new(),
            rng: Rng::new(seed),
            events: 0,
        }
    }

    /// Adds a station.
    pub fn add_station(&mut self, s: Station) -> StationId {
        self.stations.push(s);
        StationId((self.stations.len() - 1) as u16)
    }

    /// Adds a service-time distribution.
    pub fn add_service(&mut self, s: Service) -> ServiceId {
        self.services.push(s);
        ServiceId((self.services.len() - 1) as u16)
    }

    /// Reserves a path id to fill later with [`set_path`](Self::set_path)
    /// (paths may jump to each other).
    pub fn new_path(&mut self) -> PathId {
        self.paths.push(Vec::new());
        PathId((self.paths.len() - 1) as u16)
    }

    /// Sets the steps of a path.
    pub fn set_path(&mut self, p: PathId, steps: Vec<Step>) {
        self.paths[usize::from(p.0)] = steps;
    }

    /// Adds a path.
    pub fn add_path(&mut self, steps: Vec<Step>) -> PathId {
        let p = self.new_path();
        self.set_path(p, steps);
        p
    }

    /// Adds a fork over these branch paths.
    pub fn add_fork(&mut self, branches: Vec<PathId>) -> ForkId {
        self.forks.push(branches);
        ForkId((self.forks.len() - 1) as u16)
    }

    /// Simulated time now, seconds.
    #[inline]
    pub fn now(&self) -> f64 {
        self.calendar.now()
    }

    /// Events processed so far (stale timers not counted).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Schedules a model event `delay` seconds from now.
    #[inline]
    pub fn schedule(&mut self, delay: f64, ev: E) {
        let t = self.now() + delay;
        self.calendar.schedule(t, Ev::Model(ev));
    }

    /// Creates an entity at the start of `path`; it moves once the current
    /// event is done.
    pub fn spawn(&mut self, path: PathId, tag: T) -> EntityId {
        self.spawn_child(path, tag, NONE)
    }

    fn spawn_child(&mut self, path: PathId, tag: T, parent: u32) -> EntityId {
        let ent = Entity {
            tag,
            path: path.0,
            pc: 0,
            parent,
            pending: 0,
            timer_gen: 0,
            waiting_at: NO_STATION,
        };
        let id = match self.free.pop() {
            Some(i) => {
                let generation = self.entities[i as usize]
                    .as_ref()
                    .map_or(0, |e| e.timer_gen);
                self.entities[i as usize] = Some(Entity {
                    timer_gen: generation.wrapping_add(1),
                    ..ent
                });
                i
            }
            None => {
                self.entities.push(Some(ent));
                (self.entities.len() - 1) as u32
            }
        };
        self.ready.push_back(id);
        EntityId(id)
    }

    fn ent(&mut self, e: u32) -> &mut Entity<T> {
        match self.entities[e as usize].as_mut() {
            Some(x) => x,
            None => unreachable!("entity {e} used after exit"),
        }
    }

    /// The entity's tag.
    pub fn tag(&self, e: EntityId) -> &T {
        match self.entities[e.0 as usize].as_ref() {
            Some(x) => &x.tag,
            None => unreachable!("entity {} used after exit", e.0),
        }
    }

    /// The entity's tag, to change.
    pub fn tag_mut(&mut self, e: EntityId) -> &mut T {
        &mut self.ent(e.0).tag
    }

    /// True for a branch started by a [`Step::Fork`].
    pub fn is_child(&self, e: EntityId) -> bool {
        self.entities[e.0 as usize]
            .as_ref()
            .is_some_and(|x| x.parent != NONE)
    }

    /// Starts (or restarts) the entity's one timer: [`Model::on_timer`]
    /// runs `delay` from now unless the timer is cancelled first.
    pub fn set_timer(&mut self, e: EntityId, delay: f64, tag: u16) {
        let ent = self.ent(e.0);
        ent.timer_gen = ent.timer_gen.wrapping_add(1);
        let generation = ent.timer_gen;
        let t = self.now() + delay;
        self.calendar.schedule(
            t,
            Ev::Timer {
                e: e.0,
                generation,
                tag,
            },
        );
    }

    /// Cancels the entity's timer, if any.
    pub fn cancel_timer(&mut self, e: EntityId) {
        let ent = self.ent(e.0);
        ent.timer_gen = ent.timer_gen.wrapping_add(1);
    }

    /// Takes a waiting entity out of its station's queue (reneging); false
    /// if it is not waiting. The entity then leaves the system
    /// ([`Model::on_exit`]) once the current callback returns.
    pub fn renege(&mut self, e: EntityId) -> bool {
        let at = self.ent(e.0).waiting_at;
        if at == NO_STATION {
            return false;
        }
        let now = self.now();
        let st = &mut self.stations[usize::from(at)];
        let Some(pos) = st.queue.iter().position(|&x| x == e.0) else {
            return false;
        };
        st.queue.remove(pos);
        st.queue_level.add(now, -1.0);
        st.reneged += 1;
        self.ent(e.0).waiting_at = NO_STATION;
        self.reneged.push(e.0);
        true
    }

    /// Moves a [`Flow::Wait`]ing entity on to its next step.
    pub fn resume(&mut self, e: EntityId) {
        self.ready.push_back(e.0);
    }

    fn free_entity(&mut self, e: u32) -> Option<u32> {
        let parent = self.ent(e).parent;
        // Keep the slot's timer generation so stale timers stay stale.
        if let Some(x) = self.entities[e as usize].as_mut() {
            x.timer_gen = x.timer_gen.wrapping_add(1);
        }
        self.free.push(e);
        (parent != NONE).then_some(parent)
    }
}

/// A concrete model: what happens at its own events and at the hooks of its
/// paths. Every method gets the [`Core`] to act on.
pub trait Model {
    /// Data each entity carries (copied into fork branches).
    type Tag: Copy;
    /// The model's own calendar events (arrivals, device timers, …).
    type Event: Copy;
    /// A model event is due.
    fn on_event(&mut self, core: &mut Core<Self::Tag, Self::Event>, ev: Self::Event);
    /// An entity reached a [`Step::Hook`].
    fn hook(&mut self, _core: &mut Core<Self::Tag, Self::Event>, _e: EntityId, _hook: u16) -> Flow {
        Flow::Next
    }
    /// An entity's timer fired.
    fn on_timer(&mut self, _core: &mut Core<Self::Tag, Self::Event>, _e: EntityId, _tag: u16) {}
    /// An entity found the station's queue full (it leaves next).
    fn on_blocked(
        &mut self,
        _core: &mut Core<Self::Tag, Self::Event>,
        _e: EntityId,
        _s: StationId,
    ) {
    }
    /// An entity leaves the system (end of path, exit, blocked, reneged).
    fn on_exit(&mut self, _core: &mut Core<Self::Tag, Self::Event>, _e: EntityId) {}
}

/// A core and its model.
pub struct Sim<M: Model> {
    /// Engine state.
    pub core: Core<M::Tag, M::Event>,
    /// The model.
    pub model: M,
}

impl<M: Model> Sim<M> {
    /// Runs until the calendar holds nothing due before `t_end`, sets the
    /// clock to `t_end` (or leaves it at the last event when nothing is left
    /// to do) and closes the stations' monitors.
    pub fn run_until(&mut self, t_end: f64) {
        loop {
            loop {
                if let Some(e) = self.core.reneged.pop() {
                    self.exit(e);
                } else if let Some(e) = self.core.ready.pop_front() {
                    self.advance(e);
                } else {
                    break;
                }
            }
            let Some((_, ev)) = self.core.calendar.pop_until(t_end) else {
                break;
            };
            match ev {
                Ev::Resume(e) => {
                    self.core.events += 1;
                    self.advance(e);
                }
                Ev::Timer { e, generation, tag } => {
                    let live = self.core.entities[e as usize]
                        .as_ref()
                        .is_some_and(|x| x.timer_gen == generation);
                    if live {
                        self.core.events += 1;
                        self.model.on_timer(&mut self.core, EntityId(e), tag);
                    }
                }
                Ev::Model(m) => {
                    self.core.events += 1;
                    self.model.on_event(&mut self.core, m);
                }
            }
        }
        // With work left the clock stands at the horizon; a calendar that ran
        // dry leaves it at the last event (a huge horizon means "until done").
        if !self.core.calendar.is_empty() {
            self.core.calendar.advance_to(t_end);
        }
        let now = self.core.now();
        for s in &mut self.core.stations {
            s.busy_level.close(now);
            s.queue_level.close(now);
        }
    }

    fn exit(&mut self, e: u32) {
        self.model.on_exit(&mut self.core, EntityId(e));
        if let Some(parent) = self.core.free_entity(e) {
            let p = self.core.ent(parent);
            p.pending -= 1;
            if p.pending == 0 {
                self.core.ready.push_back(parent);
            }
        }
    }

    fn advance(&mut self, e: u32) {
        loop {
            let core = &mut self.core;
            let ent = core.ent(e);
            let (path, pc) = (usize::from(ent.path), ent.pc as usize);
            let Some(&step) = core.paths[path].get(pc) else {
                self.exit(e);
                return;
            };
            let now = core.now();
            match step {
                Step::Seize(s) => {
                    let st = &mut core.stations[usize::from(s.0)];
                    st.arrivals += 1;
                    if st.busy < st.servers {
                        st.busy += 1;
                        st.busy_level.add(now, 1.0);
                        core.ent(e).pc += 1;
                    } else if st.queue_limit.is_some_and(|l| st.queue.len() >= l) {
                        st.blocked += 1;
                        self.model.on_blocked(&mut self.core, EntityId(e), s);
                        self.exit(e);
                        return;
                    } else {
                        st.queue.push_back(e);
                        st.queue_level.add(now, 1.0);
                        core.ent(e).waiting_at = s.0;
                        return;
                    }
                }
                Step::Release(s) => {
                    let st = &mut core.stations[usize::from(s.0)];
                    if let Some(next) = st.queue.pop_front() {
                        st.queue_level.add(now, -1.0);
                        let n = core.ent(next);
                        n.waiting_at = NO_STATION;
                        n.pc += 1;
                        core.ready.push_back(next);
                    } else {
                        st.busy -= 1;
                        st.busy_level.add(now, -1.0);
                    }
                    core.ent(e).pc += 1;
                }
                Step::Hold(svc) => {
                    let d = core.services[usize::from(svc.0)].sample(&mut core.rng);
                    core.ent(e).pc += 1;
                    core.calendar.schedule(now + d, Ev::Resume(e));
                    return;
                }
                Step::Fork(f) => {
                    let n = core.forks[usize::from(f.0)].len();
                    let tag = core.ent(e).tag;
                    {
                        let ent = core.ent(e);
                        ent.pc += 1;
                        ent.pending = n as u32;
                    }
                    for i in 0..n {
                        let branch = core.forks[usize::from(f.0)][i];
                        core.spawn_child(branch, tag, e);
                    }
                    if n > 0 {
                        return;
                    }
                }
                Step::Jump(p) => {
                    let ent = core.ent(e);
                    ent.path = p.0;
                    ent.pc = 0;
                }
                Step::Hook(h) => match self.model.hook(&mut self.core, EntityId(e), h) {
                    Flow::Next => self.core.ent(e).pc += 1,
                    Flow::Jump(p) => {
                        let ent = self.core.ent(e);
                        ent.path = p.0;
                        ent.pc = 0;
                    }
                    Flow::Exit => {
                        self.exit(e);
                        return;
                    }
                    Flow::Wait => {
                        self.core.ent(e).pc += 1;
                        return;
                    }
                },
            }
        }
    }
}
