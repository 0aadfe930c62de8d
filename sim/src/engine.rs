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

use smart_limit_core::fleet::FleetModel;
use smart_limit_core::fleet::{refresh_secs, FleetConfig, FleetNode, FleetSnapshot, FleetVerdict};
use smart_limit_core::fleet::{Fence, SyncAnswer, Waiter, MAX_SYNCS_PER_INTERVAL};
use smart_limit_core::util::fenwick;
use smart_limit_core::util::time::window_end;

use crate::args::{Args, OutageReport, Routing};
use crate::stats::{Inversions, Tick, TrueActive};
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

/// A node's zone: its shared memory, 8-byte aligned as the node's header requires.
struct Zone(Vec<u64>);

impl Zone {
    fn new(bytes: usize, node_id: u64) -> Zone {
        let mut z = Zone(vec![0; bytes.div_ceil(8)]);
        if FleetNode::format(z.bytes(), node_id).is_err() {
            panic!("--zone-mb too small for a synced room");
        }
        z
    }

    fn bytes(&mut self) -> &mut [u8] {
        let len = self.0.len() * 8;
        // SAFETY: a Vec<u64>'s buffer is 8-aligned and `len` bytes long; u8 has no invalid
        // values, and the borrow of self keeps the buffer alive and unaliased.
        unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), len) }
    }

    /// The node, attached as a worker does under the zone's lock.
    fn node(&mut self) -> FleetNode<'_> {
        match FleetNode::attach(self.bytes()) {
            Ok(n) => n,
            Err(_) => unreachable!("the zone was formatted at start"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its first request is still to come.
    New,
    Waiting,
    Admitted,
    /// Left after its stay, or abandoned: no more requests.
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
    /// Stops requesting at this time (set on admission).
    leave_at: u64,
    /// Its node under sticky routing.
    node: u16,
    state: State,
}

/// How well the nodes' answered positions match the true line.
#[derive(Debug, Default, Clone)]
pub struct Positions {
    pub samples: u64,
    pub sum_abs: f64,
    /// Answered minus true: positive, the node says the client is further back than it is.
    pub sum_signed: f64,
    pub sum_true: f64,
    pub abs: Vec<u64>,
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
}

struct Engine {
    a: Args,
    cfg: FleetConfig,
    t0: u64,
    model: FleetModel,
    zones: Vec<Zone>,
    order: Vec<usize>,
    clients: Vec<Client>,
    calendar: Vec<Vec<u32>>,
    rng: Rng,
    rr: usize,
    /// 1 at a client's index while it truly waits: indices are in arrival order, so the
    /// prefix count before a client is its true place in the line.
    line: Vec<u32>,
    waiting: u64,
    arrived: u64,
    wait_polls: u64,
    true_active: TrueActive,
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
                leave_at: u64::MAX,
                node: picker.pick(&mut rng) as u16,
                state: State::New,
            });
            calendar[off as usize].push(i as u32);
        }
        let zones = (0..a.nodes)
            .map(|i| Zone::new(a.zone_mb << 20, i as u64 + 1))
            .collect();
        Engine {
            cfg,
            t0,
            // The fleet's line is indexed by arrival from t0; arrivals end at --arrive.
            model: FleetModel::new(cfg, t0, a.arrive_ms + 1),
            zones,
            order: (0..a.nodes).collect(),
            clients,
            calendar,
            rng,
            rr: 0,
            line: vec![0; a.clients],
            waiting: 0,
            arrived: 0,
            wait_polls: 0,
            true_active: TrueActive::default(),
            out: Outcome {
                args: a.clone(),
                ticks: Vec::with_capacity((a.seconds_ms / a.interval_ms) as usize + 1),
                node_weights: weights,
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

    /// The fleet's interval: sample the truth, then every node syncs (or ages).
    fn tick(&mut self, now: u64, off: u64) {
        let outage = self.in_outage(now);
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
            let mut node = self.zones[i].node();
            let report = node.take_report();
            let size = report.waiters.len() + report.active.len() + report.admitted.len();
            self.out.biggest_report = self.out.biggest_report.max(size);
            if outage {
                // The call fails: the node keeps its report for the next sync (or loses it,
                // --outage-report) and decides on its aged picture.
                node.sync_failed();
                if self.a.outage_report == OutageReport::Kept {
                    node.give_back(&report);
                }
                node.age(now, &self.cfg);
                self.out.failed_syncs += 1;
            } else {
                // As the module's leader does: while a capped report left sightings behind,
                // the next sync follows at once (a few per interval at most).
                let mut report = report;
                for n in 1..=MAX_SYNCS_PER_INTERVAL {
                    let fence = node.next_sync(now, 1, &self.cfg);
                    self.out.reported_waiters += report.waiters.len() as u64;
                    self.out.reported_active +=
                        (report.active.len() + report.admitted.len()) as u64;
                    let SyncAnswer::Picture(picture) = self.model.sync(fence, now, &report) else {
                        // Cannot happen: one sync per node at a time, in order.
                        node.give_back(&report);
                        break;
                    };
                    node.apply(&picture, fence.seq, now);
                    free = picture.free;
                    granted += picture.quota;
                    cursor = Some(picture.cursor);
                    self.out.syncs += 1;
                    if !node.backlog() || n == MAX_SYNCS_PER_INTERVAL {
                        break;
                    }
                    report = node.take_report();
                }
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

    fn request(&mut self, c: usize, now: u64) {
        match self.clients[c].state {
            State::New => {
                self.clients[c].state = State::Waiting;
                fenwick::add(&mut self.line, c, 1);
                self.waiting += 1;
                self.arrived += 1;
                self.poll(c, now);
            }
            State::Waiting if now >= self.clients[c].abandon_at => {
                self.clients[c].state = State::Gone;
                fenwick::add(&mut self.line, c, -1);
                self.waiting -= 1;
                self.out.abandoned += 1;
            }
            State::Waiting => self.poll(c, now),
            State::Admitted => {
                let n = self.route(c);
                let mut node = self.zones[n].node();
                node.saw_admitted(sid(c), now, &self.cfg);
                self.out.active_requests += 1;
                self.next_active(c, now);
            }
            State::Gone => {}
        }
    }

    fn route(&mut self, c: usize) -> usize {
        match self.a.routing {
            Routing::Sticky => usize::from(self.clients[c].node),
            Routing::RoundRobin => {
                let n = self.rr;
                self.rr = (n + 1) % self.zones.len();
                n
            }
        }
    }

    /// A waiting client's request, as `src/store/fleet.rs` serves it: the node's verdict,
    /// then (Redis reachable) a pool draw if the node turned away clients whose turn it was.
    /// A request that was turned away and sent the draw waits for its answer and claims a
    /// place it brought; here the answer comes back at once (a loopback round trip is far
    /// below the virtual clock's step).
    fn poll(&mut self, c: usize, now: u64) {
        let n = self.route(c);
        let (sid, arrival) = (sid(c), self.clients[c].arrival);
        let outage = self.in_outage(now);
        self.out.visits += 1;
        let mut node = self.zones[n].node();
        let waiter = Waiter {
            sid,
            arrival,
            new_place: !self.clients[c].placed,
        };
        self.clients[c].placed = true;
        let mut verdict = node.visit(waiter, now, &self.cfg);
        if !outage {
            if let Some(want) = node.take_draw(now, &self.cfg) {
                let fence = Fence {
                    node_id: node.node_id(),
                    generation: 1,
                    window: window_end(now, self.cfg.interval_ms),
                    seq: node.seq(),
                };
                let drawn = self.model.draw(fence, now, want);
                let granted = drawn.granted;
                node.drawn(want, Some(drawn));
                self.out.draws += 1;
                self.out.places_asked += want;
                self.out.places_granted += granted;
                if let FleetVerdict::Wait {
                    eta_secs: Some(0), ..
                } = verdict
                {
                    verdict = node.claim(sid, arrival, now, &self.cfg);
                }
            }
        }
        match verdict {
            FleetVerdict::Admit => self.admit(c, now, outage),
            FleetVerdict::Wait {
                position, eta_secs, ..
            } => {
                self.wait_polls += 1;
                if self.wait_polls.is_multiple_of(POSITION_SAMPLE) {
                    self.check_position(c, position);
                }
                // The waiting answer's refresh, as the handler computes it: sooner than the
                // configured one when the client's turn is expected sooner.
                let configured = self.a.refresh_ms.div_ceil(1000).max(1);
                let secs = refresh_secs(configured, eta_secs, self.a.interval_ms);
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
            // No picture yet: the zone's on_error policy; here the client just waits. (No
            // max_line here.)
            FleetVerdict::Unknown | FleetVerdict::LineFull { .. } => {
                self.out.unknown += 1;
                self.next_poll(c, now, self.a.refresh_ms);
            }
        }
    }

    fn check_position(&mut self, c: usize, answered: u64) {
        let truth = fenwick::prefix(&self.line, c) + 1;
        let err = answered as f64 - truth as f64;
        let p = &mut self.out.positions;
        p.samples += 1;
        p.sum_abs += err.abs();
        p.sum_signed += err;
        p.sum_true += truth as f64;
        p.abs.push(answered.abs_diff(truth));
    }

    fn next_poll(&mut self, c: usize, now: u64, every_ms: u64) {
        let next = now + self.rng.jitter(every_ms);
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
        self.out.nodes = self
            .zones
            .iter_mut()
            .map(|z| z.node().snapshot(end))
            .collect();
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
