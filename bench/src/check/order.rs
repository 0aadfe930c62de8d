//! (b) Admission in arrival order.
//!
//! An inversion is a pair (A, B): A certainly arrived first (A's place-taking answer was done
//! more than the tolerance before B's was sent), B was admitted (its first admitted answer done
//! at tB), and A was still told to wait, in the place it arrived with, by an answer sent more
//! than the tolerance after tB. Only A's first place counts: a client whose place lapsed
//! (it stopped polling, or was dropped: rule (c)) took a new one at the tail.
//!
//! A victim is held to order only while it came back when asked: the room lets the first
//! present places take free ones in the order they poll (docs/reference.md, `max_active=`), so
//! a head that comes back later than its page asked may be passed while it is overdue, and for
//! the tolerance after (the room hears of its return that late at most). Such pairs are counted
//! as excused, not as inversions.
//!
//! A kept place ([S27]) comes back ahead of everyone who arrived after it. When it comes back
//! while free places are being taken in poll order, it takes the one the victim's share counted
//! on, so a later arrival that polled first may have got in just before: pairs whose later
//! client was admitted between the victim's last poll before such a return and the return
//! (each widened by the tolerance) are excused too.
//!
//! Lottery ([S18]): arrivals before the start are drawn in a random order, so among themselves
//! nothing is checked; they all go before every arrival after the start, and those are FIFO.
//!
//! Pairs are counted, not listed (there may be millions): victims are taken by their threshold,
//! later arrivals inserted as they qualify into a Fenwick tree over admission times.

use smart_limit_core::util::fenwick::Fenwick;

use crate::history::Order as RoomOrder;

use super::clients::{reqs_of, tells, ClientFacts, Window};
use super::load::History;
use super::violation::{Rule, Violation};

/// What (b) found.
#[derive(Debug, Clone, Default)]
pub struct Order {
    pub violations: Vec<Violation>,
    /// Inversion pairs.
    pub pairs: u64,
    /// The tolerance used (ms).
    pub tolerance_ms: u64,
    /// Clients whose order was checked as the earlier one.
    pub checked: u64,
    /// Clients involved in an inversion (victims and the examples named), for the report.
    pub involved: Vec<u64>,
    /// Pairs in which the earlier client was overdue when the later one got in (not
    /// inversions).
    pub excused: u64,
}

/// A client that may have been passed over.
#[derive(Debug, Clone)]
struct Earlier {
    id: u64,
    arrival: Window,
    /// Its last waiting answer in the place it arrived with.
    last_wait: u64,
    /// When it may be passed (overdue, or displaced by a kept place's return), each stretch
    /// widened by the tolerance, merged, by time.
    late: Vec<(u64, u64)>,
}

/// A client admitted, possibly ahead of its turn.
#[derive(Debug, Clone, Copy)]
struct Later {
    id: u64,
    arrival: Window,
    admitted: Window,
}

/// `late` (stretches `[from, to)`) each widened to `to + tol`, merged, by `from`.
fn widened(late: &[(u64, u64)], tol: u64) -> Vec<(u64, u64)> {
    let mut late = late.to_vec();
    late.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(late.len());
    for (from, to) in late {
        let to = to.saturating_add(tol);
        match out.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => out.push((from, to)),
        }
    }
    out
}

/// Counts and names inversions between `earlier` (possible victims) and `later` (admitted
/// clients): B passes A when B.arrival.sent > A.arrival.done + tol and B.admitted.done + tol <
/// A.last_wait, unless A was overdue when B got in.
fn inversions(mut earlier: Vec<Earlier>, mut later: Vec<Later>, tol: u64) -> Order {
    let mut times: Vec<u64> = later.iter().map(|b| b.admitted.done).collect();
    times.sort_unstable();
    times.dedup();
    let mut tree = Fenwick::new(times.len());
    // Latest arrivals first on both sides: a later arrival that qualifies for one victim
    // qualifies for every victim that arrived before it.
    later.sort_unstable_by_key(|b| std::cmp::Reverse(b.arrival.sent));
    earlier.sort_unstable_by_key(|a| std::cmp::Reverse(a.arrival.done.saturating_add(tol)));
    let mut next = later.iter().peekable();
    // The later arrivals inserted so far, by admission: the examples.
    let mut inserted: std::collections::BTreeMap<(u64, u64), Later> = Default::default();
    let slot = |t: u64| times.partition_point(|&x| x < t);
    let mut out = Order {
        tolerance_ms: tol,
        checked: earlier.len() as u64,
        ..Order::default()
    };
    for a in &earlier {
        let threshold = a.arrival.done.saturating_add(tol);
        while let Some(b) = next.next_if(|b| b.arrival.sent > threshold) {
            tree.add(slot(b.admitted.done));
            inserted.insert((b.admitted.done, b.id), *b);
        }
        // Admitted more than `tol` before A's last waiting answer was sent.
        if a.last_wait < tol {
            continue;
        }
        let before = a.last_wait.saturating_sub(tol);
        let all = tree.below(slot(before));
        let clip = |(from, to): (u64, u64)| (from.min(before), to.min(before));
        let excused: u64 = a
            .late
            .iter()
            .map(|&l| clip(l))
            .map(|(from, to)| tree.below(slot(to)) - tree.below(slot(from)))
            .sum();
        out.excused += excused;
        let n = all - excused;
        if n == 0 {
            continue;
        }
        out.pairs += n;
        // The earliest admitted while A was on time.
        let on_time = |t: u64| !a.late.iter().any(|&(from, to)| from <= t && t < to);
        let Some(b) = inserted
            .range(..(before, 0))
            .map(|(_, b)| b)
            .find(|b| on_time(b.admitted.done))
        else {
            continue;
        };
        out.involved.push(a.id);
        out.involved.push(b.id);
        out.violations.push(Violation {
            rule: Rule::Order,
            at_ms: b.admitted.done,
            clients: vec![a.id, b.id],
            text: format!(
                "client {} (arrived {}-{} ms) still told to wait at {} ms, after {n} later \
                 arrival(s) were admitted; the first, client {} (arrived {}-{} ms), at {}-{} ms",
                a.id,
                a.arrival.sent,
                a.arrival.done,
                a.last_wait,
                b.id,
                b.arrival.sent,
                b.arrival.done,
                b.admitted.sent,
                b.admitted.done
            ),
        });
    }
    out.violations
        .sort_by(|x, y| (x.at_ms, &x.clients).cmp(&(y.at_ms, &y.clients)));
    out.involved.sort_unstable();
    out.involved.dedup();
    out
}

/// The stretches in which a client of `polls` (the `sent` of its answers, in order) that
/// arrived at `arrival` was displaced: each return of a client that may have arrived before it
/// (`returners`: arrival, returns), from its last poll more than `tol` before the return to the
/// return's end (widened by the tolerance later).
fn displaced(
    polls: &[u64],
    arrival: Window,
    returners: &[(Window, &[Window])],
    tol: u64,
) -> Vec<(u64, u64)> {
    returners
        .iter()
        .filter(|(c, _)| c.sent < arrival.done)
        .flat_map(|(_, returns)| returns.iter())
        .filter_map(|r| {
            let before = polls.partition_point(|&p| p.saturating_add(tol) < r.sent);
            let last = polls.get(before.checked_sub(1)?)?;
            Some((*last, r.done))
        })
        .collect()
}

/// (b) with tolerance `tol` (ms).
pub fn check(h: &History, clients: &[ClientFacts], tol: u64) -> Order {
    let start = match h.run.order {
        RoomOrder::Lottery => h.run.start_ms,
        RoomOrder::Fifo => None,
    };
    // Certainly drawn in the lottery / certainly after it (FIFO: everyone is "after").
    let pre = |w: Window| start.is_some_and(|s| w.done.saturating_add(tol) < s);
    let post = |w: Window| start.is_none_or(|s| w.sent > s.saturating_add(tol));
    let people = clients.iter().filter(|c| !c.minter());
    let returners: Vec<(Window, &[Window])> = people
        .clone()
        .filter(|c| !c.returns.is_empty())
        .filter_map(|c| Some((c.arrival?, c.returns.as_slice())))
        .collect();
    let earlier: Vec<Earlier> = people
        .clone()
        .filter_map(|c| {
            let arrival = c.arrival?;
            if !(pre(arrival) || post(arrival)) {
                return None;
            }
            let polls: Vec<u64> = reqs_of(h, c)
                .iter()
                .filter(|r| tells(r))
                .map(|r| r.sent)
                .collect();
            let mut late = c.late.clone();
            late.extend(displaced(&polls, arrival, &returners, tol));
            Some(Earlier {
                id: c.id,
                arrival,
                last_wait: c.last_wait?,
                late: widened(&late, tol),
            })
        })
        .collect();
    let later: Vec<Later> = people
        .filter_map(|c| {
            let arrival = c.arrival?;
            post(arrival).then_some(Later {
                id: c.id,
                arrival,
                admitted: c.admitted?,
            })
        })
        .collect();
    inversions(earlier, later, tol)
}
