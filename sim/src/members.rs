//! The fleet's members over the run: each node's block of memory, which nodes are up, and
//! where a client's request goes. Nodes join (`--join`), restart (`--restart`: the zone is
//! lost, the node is out of routing for a while, then back with an empty zone and a new node
//! id) and leave for good (`--remove`).
//!
//! A node is a *slot* (its number in the tables, from 1): the run's first `--nodes` slots are
//! up from the start, each join adds one. Routing sees only the slots that are up.

use smart_limit_core::fleet::{FleetNode, FleetSnapshot};

use crate::args::{Args, Routing};
use crate::workload::{mix, node_weights};

/// A node's zone: its shared memory, 8-byte aligned as the node's header requires.
pub struct Zone(Vec<u64>);

impl Zone {
    pub fn new(bytes: usize, node_id: u64) -> Zone {
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
    pub fn node(&mut self) -> FleetNode<'_> {
        match FleetNode::attach(self.bytes()) {
            Ok(n) => n,
            Err(_) => unreachable!("the zone was formatted at start"),
        }
    }
}

/// A change of the fleet at a moment of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A new node (slot) starts: an empty zone, no picture.
    Join(usize),
    /// The node stops: its zone is lost, it leaves routing.
    Down(usize),
    /// It is back after a restart: an empty zone, no picture, a new node id.
    Up(usize),
    /// It stops for good.
    Remove(usize),
}

/// One join, restart or removal, as the report shows it.
#[derive(Debug, Clone, Default)]
pub struct Event {
    /// "join", "restart" or "remove".
    pub kind: &'static str,
    /// The node's number in the tables (from 1).
    pub node: usize,
    /// Ms from the start: when it joined, stopped, or left.
    pub at: u64,
    /// When it was back in routing (a join: `at`; a removal: never).
    pub back: Option<u64>,
    /// When its new zone got its first picture.
    pub first_picture: Option<u64>,
    /// Requests that waited for its first sync (its first request's, or those that came
    /// while Redis was away and were answered after it), decided by the picture it brought.
    pub waited_first_sync: u64,
    /// Waiting answers it gave without a picture (Redis away): queued, nobody admitted.
    pub unknown: u64,
    /// What its lost zone held that no sync had carried: admissions, sightings of admitted
    /// sessions, and of waiters.
    pub lost_admissions: u64,
    pub lost_active: u64,
    pub lost_waiters: u64,
}

/// The run's changes in time order (ms from the start), each with the event it belongs to.
pub fn changes(a: &Args) -> (Vec<(u64, Change, usize)>, Vec<Event>) {
    let mut events = Vec::new();
    let mut out = Vec::new();
    let mut joins = a.joins.clone();
    joins.sort_unstable();
    for (k, &at) in joins.iter().enumerate() {
        let slot = a.nodes + k;
        out.push((at, Change::Join(slot), events.len()));
        events.push(Event {
            kind: "join",
            node: slot + 1,
            at,
            back: Some(at),
            ..Event::default()
        });
    }
    for &(node, at, down) in &a.restarts {
        out.push((at, Change::Down(node - 1), events.len()));
        out.push((at + down, Change::Up(node - 1), events.len()));
        events.push(Event {
            kind: "restart",
            node,
            at,
            back: Some(at + down),
            ..Event::default()
        });
    }
    for &(node, at) in &a.removes {
        out.push((at, Change::Remove(node - 1), events.len()));
        events.push(Event {
            kind: "remove",
            node,
            at,
            ..Event::default()
        });
    }
    // At one moment, nodes stop before others start.
    out.sort_by_key(|&(at, c, _)| (at, matches!(c, Change::Join(_) | Change::Up(_))));
    (out, events)
}

/// One node of the run over its lives.
pub struct Slot {
    /// Its current zone; None while it is down (or before it joins, or after it left).
    pub zone: Option<Zone>,
    /// In routing.
    pub up: bool,
    /// The event whose node the current zone is (a join's or a restart's).
    pub event: Option<usize>,
    /// The counters of its earlier lives (restarts), added to its current one's at the end.
    pub past: FleetSnapshot,
}

pub struct Members {
    pub slots: Vec<Slot>,
    /// Sticky routing: each slot's weight (a joined node: the mean of the first nodes').
    pub weights: Vec<f64>,
    /// Cumulative weights of the slots up, and which slots they are.
    live: Vec<(f64, usize)>,
    /// Some joined node is up: new sticky clients are spread over all nodes up by weight.
    joined_up: bool,
    rr: usize,
    next_id: u64,
    zone_bytes: usize,
}

/// Where a client's requests go when its node is down: a stable draw of its own.
const FALLBACK_SALT: u64 = 0x5EED_FA11_BAC0_0001;
/// Where a new client goes once nodes joined.
const HOME_SALT: u64 = 0x5EED_4040_E000_0002;

/// A client's uniform draw in [0, 1) for `salt`, the same every time it is asked.
fn draw(c: usize, salt: u64) -> f64 {
    (mix(c as u64 ^ salt) >> 11) as f64 / (1u64 << 53) as f64
}

impl Members {
    pub fn new(a: &Args) -> Members {
        let mut weights = match a.routing {
            Routing::Sticky => node_weights(a.nodes, &a.weights),
            Routing::RoundRobin => vec![1.0; a.nodes],
        };
        let mean = weights.iter().sum::<f64>() / weights.len().max(1) as f64;
        weights.extend(std::iter::repeat_n(mean, a.joins.len()));
        let zone_bytes = a.zone_mb << 20;
        let slots = (0..a.nodes + a.joins.len())
            .map(|i| Slot {
                zone: (i < a.nodes).then(|| Zone::new(zone_bytes, i as u64 + 1)),
                up: i < a.nodes,
                event: None,
                past: FleetSnapshot::default(),
            })
            .collect();
        let mut m = Members {
            slots,
            weights,
            live: Vec::new(),
            joined_up: false,
            rr: 0,
            next_id: a.nodes as u64 + 1,
            zone_bytes,
        };
        m.relive(a.nodes);
        m
    }

    /// The first nodes (those up from the start) are `first`.
    fn relive(&mut self, first: usize) {
        let mut sum = 0.0;
        self.live.clear();
        for (i, s) in self.slots.iter().enumerate() {
            if s.up {
                sum += self.weights[i];
                self.live.push((sum, i));
            }
        }
        self.joined_up = self.slots.iter().skip(first).any(|s| s.up);
    }

    /// A change of the fleet; `first` the number of nodes up from the start. Returns the lost
    /// zone of a node that stopped.
    pub fn apply(&mut self, change: Change, event: usize, first: usize) -> Option<Zone> {
        let lost = match change {
            Change::Join(i) | Change::Up(i) => {
                let s = &mut self.slots[i];
                s.zone = Some(Zone::new(self.zone_bytes, self.next_id));
                s.up = true;
                s.event = Some(event);
                self.next_id += 1;
                None
            }
            Change::Down(i) | Change::Remove(i) => {
                let s = &mut self.slots[i];
                s.up = false;
                s.event = None;
                let mut zone = s.zone.take();
                if let Some(z) = zone.as_mut() {
                    let snap = z.node().snapshot(0);
                    add_counters(&mut s.past, &snap);
                }
                zone
            }
        };
        self.relive(first);
        lost
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.slots.get(i).is_some_and(|s| s.up)
    }

    /// The node of slot `i` (up).
    pub fn node(&mut self, i: usize) -> FleetNode<'_> {
        match self.slots[i].zone.as_mut() {
            Some(z) => z.node(),
            None => unreachable!("a node up has a zone"),
        }
    }

    /// The next node up of a round-robin balancer.
    pub fn round_robin(&mut self) -> Option<usize> {
        let n = self.slots.len();
        for _ in 0..n {
            let i = self.rr;
            self.rr = (i + 1) % n;
            if self.slots[i].up {
                return Some(i);
            }
        }
        None
    }

    fn pick(&self, u: f64) -> Option<usize> {
        let total = self.live.last()?.0;
        let x = u * total;
        let k = self.live.partition_point(|&(c, _)| c <= x);
        self.live.get(k.min(self.live.len() - 1)).map(|&(_, i)| i)
    }

    /// A new sticky client's node, `pref` the one drawn for it at the start: kept while the
    /// fleet is the first nodes and `pref` is up; otherwise a draw by weight over the nodes up.
    pub fn home(&self, pref: usize, c: usize) -> Option<usize> {
        if !self.joined_up && self.is_up(pref) {
            return Some(pref);
        }
        self.pick(draw(c, HOME_SALT))
    }

    /// A sticky client's request: its node if up, otherwise another by weight (the same one
    /// for this client while the nodes up do not change).
    pub fn sticky(&self, home: usize, c: usize) -> Option<usize> {
        if self.is_up(home) {
            return Some(home);
        }
        self.pick(draw(c, FALLBACK_SALT))
    }

    /// Each slot's figures at `end`: its current life's plus its earlier lives' counters.
    pub fn snapshots(&mut self, end: u64) -> Vec<FleetSnapshot> {
        self.slots
            .iter_mut()
            .map(|s| {
                let mut snap = match s.zone.as_mut() {
                    Some(z) => z.node().snapshot(end),
                    None => FleetSnapshot::default(),
                };
                add_counters(&mut snap, &s.past);
                snap
            })
            .collect()
    }
}

fn add_counters(to: &mut FleetSnapshot, from: &FleetSnapshot) {
    to.admitted += from.admitted;
    to.draws += from.draws;
    to.draws_granted += from.draws_granted;
    to.dropped += from.dropped;
    to.syncs += from.syncs;
    to.sync_failures += from.sync_failures;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> Args {
        Args {
            nodes: 3,
            zone_mb: 1,
            joins: vec![20_000, 10_000],
            restarts: vec![(2, 5000, 1000)],
            removes: vec![(4, 30_000)],
            ..Args::default()
        }
    }

    #[test]
    fn changes_in_time_order_stops_first() {
        let (c, e) = changes(&args());
        let at: Vec<(u64, Change)> = c.iter().map(|&(t, ch, _)| (t, ch)).collect();
        assert_eq!(
            at,
            vec![
                (5000, Change::Down(1)),
                (6000, Change::Up(1)),
                (10_000, Change::Join(3)),
                (20_000, Change::Join(4)),
                (30_000, Change::Remove(3)),
            ]
        );
        assert_eq!(e.len(), 4);
        assert_eq!((e[0].kind, e[0].node, e[0].at), ("join", 4, 10_000));
        assert_eq!((e[2].kind, e[2].back), ("restart", Some(6000)));
        let (d0, u0) = (Change::Down(0), Change::Up(0));
        let mut same = [(1000, u0, 0), (1000, d0, 0)];
        same.sort_by_key(|&(at, c, _)| (at, matches!(c, Change::Join(_) | Change::Up(_))));
        assert_eq!(same[0].1, d0);
    }

    #[test]
    fn routing_skips_nodes_down_and_sticky_clients_come_back() {
        let a = Args {
            routing: Routing::Sticky,
            ..args()
        };
        let mut m = Members::new(&a);
        assert!(!m.is_up(3));
        assert_eq!((0..6).filter_map(|_| m.round_robin()).max(), Some(2));
        assert!(m.apply(Change::Down(1), 0, 3).is_some());
        assert!((0..6).all(|_| m.round_robin() != Some(1)));
        let elsewhere: Vec<usize> = (0..50).filter_map(|c| m.sticky(1, c)).collect();
        assert!(elsewhere.iter().all(|&n| n == 0 || n == 2));
        // The same client goes to the same other node.
        assert_eq!(m.sticky(1, 7), m.sticky(1, 7));
        // Before any join, a client keeps the node drawn for it, unless it is down.
        assert_eq!(m.home(0, 5), Some(0));
        assert_ne!(m.home(1, 5), Some(1));
        assert!(m.apply(Change::Up(1), 0, 3).is_none());
        assert_eq!(m.sticky(1, 7), Some(1));
        // Joined: new clients are spread over every node up, the new one included.
        m.apply(Change::Join(3), 1, 3);
        let homes: Vec<usize> = (0..400).filter_map(|c| m.home(0, c)).collect();
        assert!(homes.contains(&3) && homes.contains(&1), "{homes:?}");
        m.apply(Change::Remove(0), 2, 3);
        m.apply(Change::Remove(1), 2, 3);
        m.apply(Change::Remove(2), 2, 3);
        m.apply(Change::Remove(3), 2, 3);
        assert_eq!(m.round_robin(), None);
        assert_eq!(m.sticky(0, 1), None);
    }
}
