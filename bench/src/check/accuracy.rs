//! How close the told positions came, from what the clients saw (a figure of the report, not a
//! rule: a synced room's positions are estimates, whose error docs/fleet.md gives). Each waiting
//! answer of a client's first place is held against the clients holding a place when it was
//! sent: those whose place-taking answer came earlier, not let in yet, and not gone for longer
//! than `keep` (`presence` with keep=off: the module keeps a quiet client's place that long and
//! counts it in the positions behind it, [S27]), plus one.
//!
//! A client holds its place over one stretch: from its arrival to its admission, or to `keep`
//! after the last waiting answer of its first place. A sweep over the stretches'
//! ends and the answers, by time, with the holders counted by arrival rank: O(n log n).

use smart_limit_core::util::fenwick::Fenwick;

use crate::history::{Order, Outcome};

use super::clients::{reqs_of, ClientFacts};
use super::load::History;

/// The error of the told positions (told - true), over the answers compared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Accuracy {
    pub answers: u64,
    pub p1: i64,
    pub median: i64,
    pub p99: i64,
    /// The answers furthest off on either side: (error, sent ms, client).
    pub lowest: (i64, u64, u64),
    pub highest: (i64, u64, u64),
}

/// None for a lottery (its order is the draw's, not the arrivals') and when no answer told a
/// position.
pub fn measure(h: &History, clients: &[ClientFacts]) -> Option<Accuracy> {
    if h.run.order != Order::Fifo {
        return None;
    }
    // Kept places count in positions ([S27]): a quiet client holds its place for `keep`.
    let presence = h.run.kept_ms();
    // Holders by arrival: rank, and the stretch [from, to) each holds its place.
    let mut held: Vec<(u64, u64, &ClientFacts)> = clients
        .iter()
        .filter(|c| !c.minter())
        .filter_map(|c| {
            let from = c.arrival?.sent;
            let lapsed = c.last_wait?.saturating_add(presence);
            let to = c.admitted.map_or(lapsed, |a| a.sent.min(lapsed));
            Some((from, to, c))
        })
        .collect();
    held.sort_unstable_by_key(|&(from, _, c)| (from, c.id));
    // Events by time: a stretch's start (0) and end (1), and an answer (2), each with the
    // holder's rank; at one moment the starts and ends come before the answers.
    let mut events: Vec<(u64, u8, usize, i64)> = Vec::new();
    for (rank, &(from, to, c)) in held.iter().enumerate() {
        events.push((from, 0, rank, 0));
        events.push((to, 1, rank, 0));
        let last = c.last_wait.unwrap_or(0);
        for r in reqs_of(h, c) {
            if r.outcome == Outcome::Waiting && r.sent >= from && r.sent <= last {
                if let Some(pos) = r.pos {
                    events.push((r.sent, 2, rank, i64::try_from(pos).unwrap_or(i64::MAX)));
                }
            }
        }
    }
    events.sort_unstable_by_key(|&(t, kind, rank, _)| (t, kind, rank));
    let mut holders = Fenwick::new(held.len());
    let mut errors: Vec<(i64, u64, u64)> = Vec::new();
    for (t, kind, rank, pos) in events {
        match kind {
            0 => holders.add(rank),
            1 => holders.remove(rank),
            _ => {
                let truth = i64::try_from(holders.below(rank)).unwrap_or(i64::MAX) + 1;
                let id = held.get(rank).map_or(0, |h| h.2.id);
                errors.push((pos - truth, t, id));
            }
        }
    }
    if errors.is_empty() {
        return None;
    }
    let lowest = errors.iter().copied().min().unwrap_or_default();
    let highest = errors.iter().copied().max().unwrap_or_default();
    let mut e: Vec<i64> = errors.iter().map(|x| x.0).collect();
    e.sort_unstable();
    let at = |q: usize| e.get((e.len() - 1) * q / 100).copied().unwrap_or(0);
    Some(Accuracy {
        answers: e.len() as u64,
        p1: at(1),
        median: at(50),
        p99: at(99),
        lowest,
        highest,
    })
}
