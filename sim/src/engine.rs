//! The simulation proper: N nodes, each a [`FleetNode`] over its own block of memory, and one
//! [`FleetModel`] standing for Redis, driven by M clients on a virtual clock.
//!
//! Time advances a millisecond at a time over a calendar of buckets (one per millisecond of
//! the run, each the clients whose next request falls in it): pushing and popping an event is
//! O(1), and a client has at most one pending event, so the calendar never holds more than M.
//! At every multiple of the interval the nodes sync first (in a new random order each tick:
//! their leaders fire at the same instant, Redis serialises them in whatever order the calls
//! land), then the requests of that millisecond are served.
//!
//! The calls mirror the module's (src/store/fleet.rs, src/handler.rs): per waiting poll
//! `visit`, then `take_draw` and, if it asks, the script's `draw` and `drawn`; the client comes
//! back after `refresh_secs` (sooner when its turn is near); per request on an admitted ticket
//! `saw_admitted`; per tick and node `take_report`, `next_sync`, the script's `sync` and
//! `apply`, or, Redis unreachable, `sync_failed`, `give_back` of the report and `age` (and no
//! draws).
//!
//! Nodes join, restart and leave (`members`): a node with no picture (a new zone) does not
//! decide alone while Redis answers: the first request it must decide triggers a sync at once,
//! waits for it (here the answer is at once) and is decided by the picture it brings; the
//! sync's report carries the waiters the node saw. Redis away, such a node admits nobody (it
//! only queues) until its first picture.

use smart_limit_core::fleet::FleetModel;
use smart_limit_core::fleet::{Fence, SyncAnswer, Waiter, MAX_SYNCS_PER_INTERVAL};
use smart_limit_core::fleet::{FleetConfig, FleetSnapshot, FleetVerdict};
use smart_limit_core::page::refresh::{refresh_secs, Turn};
use smart_limit_core::util::fenwick;
use smart_limit_core::util::time::window_end;

use crate::args::{Args, OutageReport, Routing, StopReport};
use crate::counted::Counted;
use crate::floor::Floor;
use crate::members::{changes, Change, Event, Members};
use crate::stats::{Inversions, Positions, Tick, TrueActive};
use crate::workload::{arrivals, node_weights, sid, Picker, Rng};

/// The run's virtual epoch: a wall-clock-like time (arrivals and windows are never 0), which
/// [`epoch`] rounds down to a multiple of the interval so ticks fall on the run's whole
/// intervals, as the module's do on the wall clock.
const EPOCH: u64 = 1_800_000_000_000;

pub fn epoch(interval_ms: u64) -> u64 {
    EPOCH / interval_ms.max(1) * interval_ms.max(1)
}

/// One in this many waiting answers is checked against the true position (the check is an
/// O(log M) count; a sample keeps the run fast and is plenty for a mean).
const POSITION_SAMPLE: u64 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its first request is still to come.
    New,
    Waiting,
    Admitted,
    /// Gave up waiting: no more requests, but its place holds until `presence` after the
    /// last poll a node saw (the module's rule; a waiter who comes back in time keeps it).
    Lapsing,
    /// Left after its stay, or abandoned and its place lapsed: no more requests.
    Gone,
}

#[derive(Debug, Clone, Copy)]
struct Client {
    /// Absolute ms of its first request (the moment it takes its place: in the module, its
    /// first return after the cookie check), which its ticket carries to every node.
    arrival: u64,
    /// Its place was taken (its first poll).
    placed: bool,
    /// Gives up waiting at this time (u64::MAX: never).
    abandon_at: u64,
    /// Its last poll a node saw.
    seen_at: u64,
    /// Stops requesting at this time (set on admission).
    leave_at: u64,
    /// Its node under sticky routing.
    node: u16,
    state: State,
}

/// Everything a run produced, for the report.
#[derive(Default)]
pub struct Outcome {
    pub args: Args,
    pub ticks: Vec<Tick>,
    pub node_weights: Vec<f64>,
    pub nodes: Vec<FleetSnapshot>,
    pub waits_ms: Vec<u64>,
    pub positions: Positions,
    /// The same samples, as the picture's line alone answers them (the module before the
    /// arrival-bucket counts).
    pub positions_sampled: Positions,
    /// Both against the places held by the module's rule (`presence` after the last poll),
    /// which is what a position promises (docs/reference.md, presence=).
    pub positions_held: Positions,
    pub positions_sampled_held: Positions,
    /// What a node knowing the line exactly at each tick would answer (floor.rs).
    pub floor: Floor,
    pub inversions: Inversions,
    pub inversions_in_outage: u64,
    /// When (ms from the start) the worst inversion happened, and its gap.
    pub worst_inversion: (u64, u64),
    pub calls: u64,
    pub syncs: u64,
    pub failed_syncs: u64,
    /// Pool draws (calls), and the places they asked for and got.
    pub draws: u64,
    pub places_asked: u64,
    pub places_granted: u64,
    /// Waiting answers "your turn, come back in a moment" (the node's share used up).
    pub come_back_soon: u64,
    /// Waiting answers with a refresh shorter than the configured one.
    pub early_refreshes: u64,
    /// Answers before the node's first picture (the zone's on_error policy).
    pub unknown: u64,
    /// Decisions: waiting polls answered (each one `visit`).
    pub visits: u64,
    /// Requests on admitted tickets.
    pub active_requests: u64,
    pub admitted: u64,
    pub abandoned: u64,
    pub waiting_at_end: u64,
    pub admitted_at_end: u64,
    pub never_arrived: u64,
    /// Sessions the successful syncs carried: waiters, and active + admitted.
    pub reported_waiters: u64,
    pub reported_active: u64,
    /// Most entries (waiters + active + admitted) in one node's report.
    pub biggest_report: usize,
    /// Joins, restarts and removals, with what each node's new life met.
    pub events: Vec<Event>,
    /// Waiting polls that found their node without a picture, Redis answering: each waited
    /// for the sync it triggered and was decided by its picture.
    pub waited_first_sync: u64,
    /// Admissions by a node without a picture (the rule says none).
    pub admitted_unsynced: u64,
    /// Requests that found no node up (every node down): tried again later.
    pub unrouted: u64,
}

struct Engine {
    a: Args,
    cfg: FleetConfig,
    t0: u64,
    model: FleetModel,
    members: Members,
    /// The run's joins, restarts and removals (ms from the start, change, event), in time
    /// order, and the next to come.
    changes: Vec<(u64, Change, usize)>,
    next_change: usize,
    /// The nodes up, in the order of the last tick's calls.
    order: Vec<usize>,
    clients: Vec<Client>,
    calendar: Vec<Vec<u32>>,
    rng: Rng,
    /// 1 at a client's index while it truly waits: indices are in arrival order, so the
    /// prefix count before a client is its true place in the line.
    line: Vec<u32>,
    /// 1 at a client's index while it holds a place by the module's rule: waiting, or gave
    /// up less than `presence` after its last poll seen.
    held: Vec<u32>,
    waiting: u64,
    arrived: u64,
    wait_polls: u64,
    true_active: TrueActive,
    counted: Counted,
    out: Outcome,
}

/// Runs the simulation.
pub fn run(a: &Args) -> Outcome {
    let mut e = Engine::new(a);
    for off in 0..=a.seconds_ms {
        let now = e.t0 + off;
        if off % a.interval_ms == 0 {
            e.tick(now, off);
        }
        // After the tick: a node that starts at a tick's moment has missed it (as one
        // starting a moment after it), and meets the fleet by the rule for a new node.
        e.change(off);
        // Events are always scheduled at least 1 ms ahead: the bucket is final.
        let due = std::mem::take(&mut e.calendar[off as usize]);
        for &c in &due {
            e.request(c as usize, now);
        }
    }
    e.finish()
}

impl Engine {
    fn new(a: &Args) -> Engine {
        let cfg = FleetConfig {
            interval_ms: a.interval_ms,
            max_active: a.max_active,
            active_window_ms: a.active_window_ms,
            presence_ms: a.presence_ms,
            keep_ms: a.presence_ms,
            max_line: 0,
        };
        let t0 = epoch(a.interval_ms);
        let end = t0 + a.seconds_ms;
        let mut rng = Rng::new(a.seed);
        let weights = match a.routing {
            Routing::Sticky => node_weights(a.nodes, &a.weights),
            Routing::RoundRobin => vec![1.0; a.nodes],
        };
        let picker = Picker::new(&weights);
        let offsets = arrivals(a.clients, a.arrive_ms, a.curve, &mut rng);
        let mut calendar = vec![Vec::new(); a.seconds_ms as usize + 1];
        let mut clients = Vec::with_capacity(a.clients);
        for (i, &off) in offsets.iter().enumerate() {
            let arrival = t0 + off;
            let abandon_at = if rng.f64() < a.abandon {
                arrival + 1 + rng.below(end.saturating_sub(arrival).max(1))
            } else {
                u64::MAX
            };
            clients.push(Client {
                arrival,
                placed: false,
                abandon_at,
                seen_at: arrival,
                leave_at: u64::MAX,
                node: picker.pick(&mut rng) as u16,
                state: State::New,
            });
            calendar[off as usize].push(i as u32);
        }
        let members = Members::new(a);
        let node_weights = members.weights.clone();
        let (changes, events) = changes(a);
        Engine {
            cfg,
            t0,
            // The fleet's line is indexed by arrival from t0; arrivals end at --arrive.
            model: FleetModel::new(cfg, t0, a.arrive_ms + 1),
            order: (0..a.nodes).collect(),
            changes,
            next_change: 0,
            members,
            clients,
            calendar,
            rng,
            line: vec![0; a.clients],
            held: vec![0; a.clients],
            waiting: 0,
            arrived: 0,
            wait_polls: 0,
            true_active: TrueActive::default(),
            counted: Counted::new(a.presence_ms, a.clients),
            out: Outcome {
                args: a.clone(),
                ticks: Vec::with_capacity((a.seconds_ms / a.interval_ms) as usize + 1),
                node_weights,
                events,
                floor: Floor::new(a.interval_ms),
                ..Outcome::default()
            },
            a: a.clone(),
        }
    }

    fn in_outage(&self, now: u64) -> bool {
        self.a.outage.is_some_and(|(start, len)| {
            let off = now - self.t0;
            off >= start && off < start + len
        })
    }

    fn schedule(&mut self, at: u64, c: usize) {
        // Past the end of the run: nothing more to see.
        if let Some(b) = self.calendar.get_mut((at - self.t0) as usize) {
            b.push(c as u32);
        }
    }

    /// The joins, restarts and removals due at `off` (ms from the start).
    fn change(&mut self, off: u64) {
        while let Some(&(at, change, ev)) = self.changes.get(self.next_change) {
            if at > off {
                break;
            }
            self.next_change += 1;
            let now = self.t0 + off;
            if let Change::Down(i) | Change::Remove(i) = change {
                if self.a.stop_report == StopReport::Synced && !self.in_outage(now) {
                    self.sync(i, now);
                }
            }
            let lost = self.members.apply(change, ev, self.a.nodes);
            // The nodes up, whose calls each tick shuffles. (Only the nodes up: until the
            // first change a run draws the same numbers as without changes.)
            let members = &self.members;
            self.order = (0..members.slots.len())
                .filter(|&i| members.is_up(i))
                .collect();
            let Some(mut zone) = lost else {
                continue;
            };
            if let Change::Down(i) | Change::Remove(i) = change {
                self.counted.lost(i);
            }
            // What the lost zone held that no sync had carried to the fleet.
            let mut node = zone.node();
            let e = &mut self.out.events[ev];
            loop {
                let r = node.take_report();
                e.lost_admissions += r.admitted.len() as u64;
                e.lost_active += r.active.len() as u64;
                e.lost_waiters += r.waiters.len() as u64;
                if !node.backlog() {
                    break;
                }
            }
        }
    }

    /// The fleet's interval: sample the truth, then every node up syncs (or ages).
    fn tick(&mut self, now: u64, off: u64) {
        let outage = self.in_outage(now);
        let first_new = self.clients.partition_point(|c| c.arrival <= now);
        self.out.floor.tick(&self.held, first_new, now);
        self.out.ticks.push(Tick {
            t: off,
            true_active: self.true_active.at(now),
            waiting: self.waiting,
            room_active: self.model.active(),
            line: self.model.queue_len(),
            arrived: self.arrived,
            admitted: self.out.admitted,
            abandoned: self.out.abandoned,
            inversions: self.out.inversions.count,
            outage,
            ..Tick::default()
        });
        let (mut free, mut granted, mut cursor) = (0, 0, None);
        // Fisher-Yates: this tick's order of the nodes' calls.
        for i in (1..self.order.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            self.order.swap(i, j);
        }
        for k in 0..self.order.len() {
            let i = self.order[k];
            if !self.members.is_up(i) {
                continue;
            }
            if outage {
                // The call fails: the node keeps its report for the next sync (or loses it,
                // --outage-report) and decides on its aged picture.
                let mut node = self.members.node(i);
                let report = node.take_report();
                let size = report.waiters.len() + report.active.len() + report.admitted.len();
                self.out.biggest_report = self.out.biggest_report.max(size);
                node.sync_failed();
                if self.a.outage_report == OutageReport::Kept {
                    node.give_back(&report);
                }
                node.age(now, &self.cfg);
                self.out.failed_syncs += 1;
            } else if let Some((f, g, cur)) = self.sync(i, now) {
                free = f;
                granted += g;
                cursor = Some(cur);
            }
        }
        let eligible = cursor.map_or(0, |cur| {
            // Arrivals are sorted by index: the waiters at or before the cursor are a prefix.
            let k = self.clients.partition_point(|c| c.arrival <= cur);
            fenwick::prefix(&self.line, k)
        });
        if let Some(t) = self.out.ticks.last_mut() {
            (t.free, t.granted, t.eligible) = (free, granted, eligible);
        }
    }

    /// Node `i`'s sync, Redis answering: its report, the picture applied. As the module's
    /// leader does: while a capped report left sightings behind, the next sync follows at
    /// once (a few per interval at most). Returns the last picture's free places, the places
    /// its pictures granted, and its cursor.
    fn sync(&mut self, i: usize, now: u64) -> Option<(u64, u64, u64)> {
        let mut node = self.members.node(i);
        let mut report = node.take_report();
        let size = report.waiters.len() + report.active.len() + report.admitted.len();
        self.out.biggest_report = self.out.biggest_report.max(size);
        let mut got = None;
        let mut granted = 0;
        for n in 1..=MAX_SYNCS_PER_INTERVAL {
            let fence = node.next_sync(now, 1, &self.cfg);
            self.out.reported_waiters += report.waiters.len() as u64;
            self.out.reported_active += (report.active.len() + report.admitted.len()) as u64;
            let SyncAnswer::Picture(picture) = self.model.sync(fence, now, &report) else {
                // Cannot happen: one sync per node at a time, in order.
                node.give_back(&report);
                break;
            };
            node.apply(&picture, fence.seq, now, &self.cfg);
            if n == 1 {
                let counted = self.counted.synced(i, now, self.cfg.interval_ms);
                node.set_counts(counted, now, &self.cfg);
            }
            granted += picture.quota;
            got = Some((picture.free, granted, picture.cursor));
            self.out.syncs += 1;
            if !node.backlog() || n == MAX_SYNCS_PER_INTERVAL {
                break;
            }
            report = node.take_report();
        }
        if got.is_some() {
            if let Some(ev) = self.members.slots[i].event {
                let e = &mut self.out.events[ev];
                e.first_picture = e.first_picture.or(Some(now - self.t0));
            }
        }
        got
    }

    fn request(&mut self, c: usize, now: u64) {
        match self.clients[c].state {
            State::New => {
                if self.a.routing == Routing::Sticky {
                    // Its node, among those up at its first request.
                    let pref = usize::from(self.clients[c].node);
                    if let Some(home) = self.members.home(pref, c) {
                        self.clients[c].node = home as u16;
                    }
                }
                self.clients[c].state = State::Waiting;
                fenwick::add(&mut self.line, c, 1);
                fenwick::add(&mut self.held, c, 1);
                self.waiting += 1;
                self.arrived += 1;
                self.poll(c, now);
            }
            State::Waiting if now >= self.clients[c].abandon_at => {
                self.clients[c].state = State::Lapsing;
                fenwick::add(&mut self.line, c, -1);
                self.waiting -= 1;
                self.out.abandoned += 1;
                let lapses = self.clients[c].seen_at + self.a.presence_ms;
                self.schedule(lapses.max(now + 1), c);
            }
            State::Lapsing => {
                self.clients[c].state = State::Gone;
                fenwick::add(&mut self.held, c, -1);
            }
            State::Waiting => self.poll(c, now),
            State::Admitted => {
                match self.route(c) {
                    Some(n) => {
                        let mut node = self.members.node(n);
                        node.saw_admitted(sid(c), now, &self.cfg);
                        self.out.active_requests += 1;
                    }
                    None => self.out.unrouted += 1,
                }
                self.next_active(c, now);
            }
            State::Gone => {}
        }
    }

    /// The node up that the client's request goes to (None: every node is down).
    fn route(&mut self, c: usize) -> Option<usize> {
        match self.a.routing {
            Routing::Sticky => self.members.sticky(usize::from(self.clients[c].node), c),
            Routing::RoundRobin => self.members.round_robin(),
        }
    }

    /// A waiting client's request, as `src/store/fleet.rs` serves it: the node's verdict,
    /// then (Redis reachable) a pool draw if the node turned away clients whose turn it was.
    /// A request that was turned away and sent the draw waits for its answer and claims a
    /// place it brought; here the answer comes back at once (a loopback round trip is far
    /// below the virtual clock's step). A node without a picture, Redis reachable, syncs at
    /// once and the request is decided by the picture it brings, at the same moment.
    fn poll(&mut self, c: usize, now: u64) {
        let Some(n) = self.route(c) else {
            self.out.unrouted += 1;
            self.next_poll(c, now, self.a.refresh_ms);
            return;
        };
        let (sid, arrival) = (sid(c), self.clients[c].arrival);
        self.clients[c].seen_at = now;
        let outage = self.in_outage(now);
        self.out.visits += 1;
        let waiter = Waiter {
            sid,
            arrival,
            new_place: !self.clients[c].placed,
        };
        self.clients[c].placed = true;
        let first = self.members.node(n).visit(waiter, now, &self.cfg);
        let event = self.members.slots[n].event;
        if first == FleetVerdict::Unknown {
            if outage {
                if let Some(ev) = event {
                    self.out.events[ev].unknown += 1;
                }
            } else if self.sync(n, now).is_some() {
                self.out.waited_first_sync += 1;
                if let Some(ev) = event {
                    self.out.events[ev].waited_first_sync += 1;
                }
            }
        }
        let mut node = self.members.node(n);
        // The request that waited for the first picture is decided by it (`decide`: seen
        // once, by the visit), as `src/store/fleet.rs` does; a draw it sends is not waited for.
        let waited = first == FleetVerdict::Unknown && node.synced();
        let mut verdict = if waited {
            node.decide(waiter, now, &self.cfg)
        } else {
            first
        };
        if !outage {
            if let Some(ask) = node.take_draw(now, &self.cfg) {
                let want = ask.want;
                let fence = Fence {
                    node_id: node.node_id(),
                    generation: 1,
                    window: window_end(now, self.cfg.interval_ms),
                    seq: node.seq(),
                };
                let drawn = self.model.draw(fence, now, ask);
                let granted = drawn.granted;
                node.drawn(want, Some(drawn));
                self.out.draws += 1;
                self.out.places_asked += want;
                self.out.places_granted += granted;
                if let FleetVerdict::Wait {
                    eta_secs: Some(0), ..
                } = verdict
                {
                    if !waited {
                        verdict = node.claim(sid, arrival, now, &self.cfg);
                    }
                }
            }
        }
        if verdict == FleetVerdict::Admit && !node.synced() {
            self.out.admitted_unsynced += 1;
        }
        let next_picture = node.picture_window() + self.cfg.interval_ms + 1;
        match verdict {
            FleetVerdict::Admit => {
                self.counted.admitted(n, c, arrival, now);
                self.admit(c, now, outage)
            }
            FleetVerdict::Wait {
                position, eta_secs, ..
            } => {
                self.wait_polls += 1;
                self.counted.waiting(n, c, arrival, now);
                if self.wait_polls.is_multiple_of(POSITION_SAMPLE) {
                    let (sampled, _seen) = self
                        .members
                        .node(n)
                        .sampled_position(arrival, sid, &self.cfg);
                    let truth = fenwick::prefix(&self.line, c) + 1;
                    self.out.positions.add(position, truth);
                    self.out.positions_sampled.add(sampled, truth);
                    let held = fenwick::prefix(&self.held, c) + 1;
                    self.out.positions_held.add(position, held);
                    self.out.positions_sampled_held.add(sampled, held);
                    self.out.floor.sample(c, now, held);
                }
                // The waiting answer's refresh, as the handler computes it: sooner than the
                // configured one when the client's turn is expected sooner.
                let configured = self.a.refresh_ms.div_ceil(1000).max(1);
                // (A fixed max_active: no rise opens places.)
                let turn = Turn {
                    position,
                    eta_secs,
                    opening: 0,
                };
                let secs = refresh_secs(configured, self.a.interval_ms.div_ceil(1000), turn);
                if eta_secs == Some(0) {
                    self.out.come_back_soon += 1;
                }
                if secs < configured {
                    self.out.early_refreshes += 1;
                }
                let every = if secs < configured {
                    secs * 1000
                } else {
                    self.a.refresh_ms
                };
                self.next_poll(c, now, every);
            }
            // Its turn as the node's picture ends: the module holds the request until the next
            // picture; here it comes again just after the next tick (a poll counted again).
            FleetVerdict::NextPicture => {
                let at = next_picture.min(self.clients[c].abandon_at);
                self.schedule(at, c);
            }
            // No picture, Redis away: the node admits nobody until its first picture; the
            // client waits (the configured refresh). (No max_line here.)
            FleetVerdict::Unknown | FleetVerdict::LineFull { .. } => {
                self.out.unknown += 1;
                self.next_poll(c, now, self.a.refresh_ms);
            }
        }
    }

    fn next_poll(&mut self, c: usize, now: u64, every_ms: u64) {
        let next = now + self.rng.spread(every_ms, self.a.jitter);
        // One who gives up before the next poll is seen going at that moment.
        let at = next.min(self.clients[c].abandon_at);
        self.schedule(at, c);
    }

    fn admit(&mut self, c: usize, now: u64, outage: bool) {
        let stay = self.rng.jitter(self.a.stay_ms);
        let cl = &mut self.clients[c];
        cl.state = State::Admitted;
        cl.leave_at = now + stay;
        let arrival = cl.arrival;
        fenwick::add(&mut self.line, c, -1);
        fenwick::add(&mut self.held, c, -1);
        self.waiting -= 1;
        self.out.admitted += 1;
        self.true_active.admit();
        self.out.waits_ms.push(now - arrival);
        if self.out.inversions.admit(arrival, self.a.interval_ms) {
            self.out.inversions_in_outage += u64::from(outage);
            if self.out.inversions.worst_gap_ms > self.out.worst_inversion.1 {
                self.out.worst_inversion = (now - self.t0, self.out.inversions.worst_gap_ms);
            }
        }
        self.next_active(c, now);
    }

    /// After a request on an admitted ticket (the admitting one included): the next, or the
    /// client leaves, `now` being its last request.
    fn next_active(&mut self, c: usize, now: u64) {
        let next = now + self.rng.jitter(self.a.active_every_ms);
        if next >= self.clients[c].leave_at {
            self.clients[c].state = State::Gone;
            self.true_active.leave(now, self.a.active_window_ms);
        } else {
            self.schedule(next, c);
        }
    }

    fn finish(mut self) -> Outcome {
        let end = self.t0 + self.a.seconds_ms;
        self.out.calls = self.model.calls;
        self.out.waiting_at_end = self.waiting;
        self.out.never_arrived = self.a.clients as u64 - self.arrived;
        self.out.admitted_at_end = self
            .clients
            .iter()
            .filter(|c| c.state == State::Admitted)
            .count() as u64;
        self.out.nodes = self.members.snapshots(end);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Curve;

    fn small() -> Args {
        Args {
            nodes: 3,
            clients: 3000,
            arrive_ms: 10_000,
            curve: Curve::Flat,
            max_active: 200,
            seconds_ms: 120_000,
            stay_ms: 20_000,
            ..Args::default()
        }
    }

    #[test]
    fn every_client_is_accounted_for() {
        for routing in [Routing::Sticky, Routing::RoundRobin] {
            let o = run(&Args { routing, ..small() });
            let a = &o.args;
            assert_eq!(o.ticks.len() as u64, a.seconds_ms / a.interval_ms + 1);
            assert_eq!(o.never_arrived, 0);
            assert_eq!(
                o.admitted + o.abandoned + o.waiting_at_end,
                a.clients as u64,
                "{routing:?}"
            );
            assert_eq!(o.waits_ms.len() as u64, o.admitted);
            // The room filled and kept admitting as people left.
            assert!(o.admitted > 2 * a.max_active, "{routing:?}: {}", o.admitted);
            assert!(o.places_granted <= o.places_asked);
            assert_eq!(o.calls, o.syncs + o.draws);
            assert_eq!(o.syncs, o.ticks.len() as u64 * a.nodes as u64);
            // The nodes' own count of admissions is the run's.
            assert_eq!(o.nodes.iter().map(|n| n.admitted).sum::<u64>(), o.admitted);
        }
    }

    #[test]
    fn the_room_never_holds_more_than_max_active() {
        for routing in [Routing::Sticky, Routing::RoundRobin] {
            let o = run(&Args {
                routing,
                clients: 20_000,
                ..small()
            });
            let worst = o.ticks.iter().map(|t| t.true_active).max().unwrap();
            // The brief's band: within 2 % of max_active at worst.
            assert!(
                worst * 100 <= o.args.max_active * 102,
                "{routing:?}: {worst}"
            );
        }
    }

    #[test]
    fn runs_are_reproducible_and_seeds_matter() {
        let one = run(&small());
        let two = run(&small());
        assert_eq!(one.ticks, two.ticks);
        let other = run(&Args { seed: 2, ..small() });
        assert_ne!(one.ticks, other.ticks);
    }

    #[test]
    fn an_outage_fails_syncs_and_draws() {
        let o = run(&Args {
            outage: Some((30_000, 10_000)),
            ..small()
        });
        assert_eq!(o.failed_syncs, 10 * 3);
        assert!(o.ticks.iter().filter(|t| t.outage).count() == 10);
        assert_eq!(o.calls, o.syncs + o.draws);
    }

    /// Redis away for 10 s as a departure wave ends (the crowd admitted together leaves
    /// together at about 130 s): each interval without a picture, the nodes let in the ends
    /// the last picture saw past its own interval, not that interval's lump of ends again
    /// (which took this room to 1.132 of max_active during the outage and 1.178 after it).
    #[test]
    fn an_outage_as_a_wave_ends_keeps_the_room() {
        let a = Args {
            nodes: 5,
            clients: 20_000,
            arrive_ms: 60_000,
            curve: Curve::Ramp,
            max_active: 500,
            routing: Routing::RoundRobin,
            active_window_ms: 60_000,
            seconds_ms: 200_000,
            outage: Some((130_000, 10_000)),
            ..Args::default()
        };
        let o = run(&a);
        let worst = o
            .ticks
            .iter()
            .filter(|t| t.t >= 120_000)
            .map(|t| t.true_active)
            .max()
            .unwrap();
        assert!(worst * 100 <= a.max_active * 102, "{worst}");
    }

    /// A line too long for the picture, told from the counts on ten nodes: each node moves
    /// its positions on by the let-ins the others have not reported yet (on average four and a
    /// half intervals of one node's), so the head is not told it stands further back than it
    /// does. Here (30,000 clients, a room of 5,000 turning over in waves), positions 101 to
    /// 1,000 are told -4 on average and the p99 relative error is 25 %; without it (the code
    /// before 2026-11-30) +35 and 58 %.
    #[test]
    fn the_head_of_a_counted_line_is_not_told_the_others_unreported_let_ins() {
        let a = Args {
            nodes: 10,
            clients: 30_000,
            routing: Routing::RoundRobin,
            active_window_ms: 60_000,
            seconds_ms: 400_000,
            ..Args::default()
        };
        let o = run(&a);
        let p = &o.positions_held;
        let head: Vec<i64> = p
            .pairs
            .iter()
            .filter(|(t, _)| (101..=1_000).contains(t))
            .map(|&(_, e)| e)
            .collect();
        let mean = head.iter().sum::<i64>() as f64 / head.len().max(1) as f64;
        let p99 = crate::stats::quantile(&mut p.rel_ppm(1..=u64::MAX), 0.99);
        assert!(head.len() > 1_000, "{} samples at the head", head.len());
        assert!(mean.abs() <= 15.0, "head's mean error {mean:.1}");
        assert!(p99 <= 400_000, "p99 relative error {p99} ppm");
    }

    /// Joins and restarts (one of a joined node) while the room turns over, all between
    /// ticks.
    fn changing() -> Args {
        Args {
            joins: vec![8_400, 30_400],
            restarts: vec![(2, 45_300, 2000), (5, 70_600, 1000)],
            ..small()
        }
    }

    /// The room never holds more than max_active when a stopping node loses nothing (one
    /// last sync first); no node admits before its first picture; each new node's first
    /// picture comes with its first request, which waited for it, not at the next tick.
    #[test]
    fn joins_and_restarts_keep_the_room_and_the_rule() {
        for routing in [Routing::Sticky, Routing::RoundRobin] {
            let a = Args {
                routing,
                stop_report: StopReport::Synced,
                ..changing()
            };
            let o = run(&a);
            let worst = o.ticks.iter().map(|t| t.true_active).max().unwrap();
            assert!(worst <= a.max_active, "{routing:?}: {worst}");
            assert_eq!(o.admitted_unsynced, 0, "{routing:?}");
            assert!(o.waited_first_sync >= 2, "{routing:?}");
            assert_eq!(o.unknown, 0, "{routing:?}: Redis answered throughout");
            for e in &o.events {
                let (back, first) = (e.back.unwrap(), e.first_picture.unwrap());
                assert!(first >= back && first < back + a.interval_ms, "{e:?}");
                assert_eq!((e.lost_admissions, e.lost_active), (0, 0), "{e:?}");
            }
            // The restarted node came back to clients (its own, or the round's), the first of
            // which waited for its first sync.
            assert_eq!(o.events[2].waited_first_sync, 1, "{:?}", o.events[2]);
            assert_eq!(
                o.admitted + o.abandoned + o.waiting_at_end,
                a.clients as u64
            );
            assert_eq!(o.nodes.len(), 5);
            assert_eq!(o.nodes.iter().map(|n| n.admitted).sum::<u64>(), o.admitted);
            assert_eq!(o.calls, o.syncs + o.draws);
            assert_eq!(o.unrouted, 0);
        }
    }

    /// As the module does, a stopping node loses what no sync carried: an admission the
    /// fleet never heard of, a session's last sighting (the fleet then lets its place go
    /// early). The room may exceed max_active by those, no more (in these runs, both
    /// routings: 202 of 200 some 16-20 s after the removal, which lost 3 sightings of
    /// admitted sessions; the active window is 20 s).
    #[test]
    fn a_lost_zone_costs_at_most_what_it_held() {
        for routing in [Routing::Sticky, Routing::RoundRobin] {
            let a = Args {
                routing,
                removes: vec![(1, 90_200)],
                ..changing()
            };
            let o = run(&a);
            let lost: u64 = o
                .events
                .iter()
                .map(|e| e.lost_admissions + e.lost_active)
                .sum();
            assert!(lost > 0, "{routing:?}");
            let worst = o.ticks.iter().map(|t| t.true_active).max().unwrap();
            assert!(
                worst <= a.max_active + lost,
                "{routing:?}: {worst}, lost {lost}"
            );
            assert_eq!(o.admitted_unsynced, 0, "{routing:?}");
            assert_eq!(o.nodes.iter().map(|n| n.admitted).sum::<u64>(), o.admitted);
        }
    }

    /// Redis away when a node starts: it only queues (answers without a picture, admits
    /// nobody) until its first picture, which the first request after Redis is back brings.
    #[test]
    fn a_node_that_starts_in_an_outage_only_queues() {
        let a = Args {
            routing: Routing::RoundRobin,
            outage: Some((30_000, 10_500)),
            joins: vec![31_500],
            restarts: vec![(1, 32_000, 1000)],
            ..small()
        };
        let o = run(&a);
        assert_eq!(o.admitted_unsynced, 0);
        for e in &o.events {
            assert!(e.unknown > 0, "{e:?}");
            // The first request after Redis was back (40.5 s) brought it, a few ms later.
            let first = e.first_picture.unwrap();
            assert!((40_500..40_600).contains(&first), "{e:?}");
            assert_eq!(e.waited_first_sync, 1, "{e:?}");
        }
        assert_eq!(o.unknown, o.events.iter().map(|e| e.unknown).sum::<u64>());
    }

    #[test]
    fn every_node_down_leaves_requests_unrouted() {
        let a = Args {
            nodes: 1,
            clients: 300,
            restarts: vec![(1, 5_000, 3000)],
            ..small()
        };
        let o = run(&a);
        assert!(o.unrouted > 0);
        assert_eq!(
            o.admitted + o.abandoned + o.waiting_at_end,
            a.clients as u64
        );
        assert_eq!(o.events[0].first_picture.map(|t| t >= 8000), Some(true));
    }

    #[test]
    fn without_a_queue_everyone_walks_in() {
        let a = Args {
            clients: 100,
            max_active: 1000,
            abandon: 0.0,
            ..small()
        };
        let o = run(&a);
        assert_eq!(o.admitted, 100);
        // In within a refresh: at the first poll, or told to come back in a moment (a node
        // without a share this interval asks the pool; a newcomer may wait for the next
        // picture), or, in the very first interval, at the next poll.
        let worst = o.waits_ms.iter().copied().max().unwrap_or(0);
        assert!(worst <= a.refresh_ms * 6 / 5, "{:?}", o.waits_ms);
    }
}
