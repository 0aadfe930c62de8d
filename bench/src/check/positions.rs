//! (c) A polling client's position never grows ([S16]: only the clients ahead that are still
//! present count, and nobody gets ahead of a place): not at all on shared memory and a
//! central room, which count exactly, and on a synced room, whose positions are estimates,
//! by no more than max(2, 1 %), the most the module lets a told position rise ([S27], issue
//! 51; docs/fleet.md, "A count's spread, and a restarted node's own count"); or by
//! `--position-tolerance`.
//!
//! Within one place (see [`places`]), each waiting answer is compared with the latest earlier
//! one that was done before it was sent: two answers in flight at once may have been decided in
//! either order. A lottery's positions before its start are provisional (the draw reorders
//! them), so no comparison starts before the start (for sync, before the fleet has heard; for
//! shared memory, before its draw is through).

use crate::history::{Mode, Order, Outcome, Req};

use super::clients::{places, reqs_of, ClientFacts};
use super::load::History;
use super::options::Tolerances;
use super::violation::{Rule, Violation};

/// How far back an answer looks for one that certainly came before it (answers overlap only
/// when a client sends several requests at once: a few).
const LOOK_BACK: usize = 8;

/// What (c)'s growth check found.
#[derive(Debug, Clone, Default)]
pub struct Positions {
    pub violations: Vec<Violation>,
    /// The largest growth seen between two compared answers, whether allowed or not.
    pub max_growth: u64,
    /// Pairs of answers compared.
    pub compared: u64,
}

/// Shared memory draws the pre-queue's order from the start on, 64 places a decision
/// (docs/reference.md, `smart_limit_event`): a position told in the first decisions, before
/// the draw reached the place, may still change. The pre-queue comes back within 4 s of the
/// start (the module's spread), which is when those decisions are taken.
const SHM_DRAW_MS: u64 = 4000;

/// The moment from which positions are final: a lottery's start (plus, for sync, the time the
/// nodes take to hear of the draw; for shared memory, the time its draw takes).
fn final_from(h: &History) -> u64 {
    match (h.run.order, h.run.start_ms) {
        (Order::Lottery, Some(s)) if h.run.mode == Mode::Sync => {
            s.saturating_add(h.run.sync_ms.saturating_mul(2).saturating_add(1000))
        }
        (Order::Lottery, Some(s)) if h.run.mode == Mode::Shm => s.saturating_add(SHM_DRAW_MS),
        (Order::Lottery, Some(s)) => s,
        _ => 0,
    }
}

/// The growth check over one client's requests.
fn client(reqs: &[Req], h: &History, tol: &Tolerances, out: &mut Positions) {
    let from = final_from(h);
    for span in places(reqs, h.run.kept_ms()) {
        let waits: Vec<(&Req, u64)> = reqs
            .get(span)
            .unwrap_or(&[])
            .iter()
            .filter(|r| r.outcome == Outcome::Waiting)
            .filter_map(|r| r.pos.map(|p| (r, p)))
            .collect();
        for (k, &(r, pos)) in waits.iter().enumerate() {
            let prev = waits
                .get(k.saturating_sub(LOOK_BACK)..k)
                .unwrap_or(&[])
                .iter()
                .rev()
                .find(|(p, _)| p.done <= r.sent);
            let Some(&(p, ppos)) = prev else { continue };
            if p.sent < from {
                continue;
            }
            out.compared += 1;
            let growth = pos.saturating_sub(ppos);
            out.max_growth = out.max_growth.max(growth);
            let allowed = tol.position_growth(ppos);
            if growth > allowed {
                out.violations.push(Violation::at(
                    Rule::PositionGrew,
                    r,
                    format!(
                        "told position {ppos} at {}-{} ms, then {pos} at {}-{} ms \
                         (+{growth}, tolerance {allowed})",
                        p.sent, p.done, r.sent, r.done
                    ),
                ));
            }
        }
    }
}

/// (c)'s growth check over every client but minters (each of a minter's requests is a new
/// place).
pub fn check(h: &History, clients: &[ClientFacts], tol: &Tolerances) -> Positions {
    let mut out = Positions::default();
    for c in clients.iter().filter(|c| !c.minter()) {
        client(reqs_of(h, c), h, tol, &mut out);
    }
    out.violations.sort_by_key(|v| v.at_ms);
    out
}
