//! (a) Never above `max_active`: count the admitted sessions the clients' answers prove, and
//! (fleet modes) read the nodes' own counts.
//!
//! A session is made as short as the answers allow, so that a count above the limit is one
//! the room really held: it starts when its first admitted answer was done and ends as early
//! as the room could have let it go.

use std::collections::VecDeque;

use crate::history::{Mode, Outcome, Req, Run};

use super::clients::{reqs_of, ClientFacts};
use super::load::History;
use super::violation::{Rule, Violation};

/// How many of the last admitted clients a violation names.
const NAMED: usize = 10;

/// What (a) found.
#[derive(Debug, Clone, Default)]
pub struct Admission {
    pub violations: Vec<Violation>,
    /// Above this many sessions at once is a violation: floor(max_active × 1.02).
    pub limit: u64,
    /// Most sessions at once, and when.
    pub peak: u64,
    pub peak_at: u64,
    /// The highest `active` a node reported, if any metrics were read.
    pub metrics_peak: Option<u64>,
    /// The count after each change: (ms, sessions), for the report.
    pub series: Vec<(u64, u64)>,
    /// Sessions counted.
    pub sessions: u64,
}

/// One admitted session: [start, end) and its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    pub start: u64,
    pub end: u64,
    pub client: u64,
}

/// The sessions at once on average (a share of `max_active`), weighted by time, from the first
/// moment the room was full to `end_ms`: how full the room kept (its first fill is the ramp's,
/// not the room's). None if it never filled.
pub fn mean_fill(series: &[(u64, u64)], max_active: u64, end_ms: u64) -> Option<(u64, f64)> {
    let first = series.iter().position(|&(_, n)| n >= max_active)?;
    let from = series.get(first)?.0;
    if end_ms <= from || max_active == 0 {
        return None;
    }
    let mut sum = 0u128;
    for (i, &(t, n)) in series.iter().enumerate().skip(first) {
        let next = series.get(i + 1).map_or(end_ms, |&(u, _)| u).min(end_ms);
        sum += u128::from(n) * u128::from(next.saturating_sub(t.min(next)));
    }
    let mean = sum as f64 / (end_ms - from) as f64;
    Some((from, mean / max_active as f64))
}

/// `floor(max_active × 1.02)`, at least `max_active`.
pub fn limit(max_active: u64) -> u64 {
    let l = (max_active as u128 * 102 / 100).min(u64::MAX as u128) as u64;
    l.max(max_active)
}

/// A session being followed through a client's requests.
struct Open {
    start: u64,
    last_sent: u64,
    /// `sent` of the admission that started the grant (grant rooms).
    grant_from: u64,
}

/// The latest moment the room must still count `s`.
fn end_of(run: &Run, s: &Open) -> u64 {
    // active_window counts a session while it was seen within it; a session ends with the
    // session time too, whichever is first (0 means the history did not say: ignore it).
    let window = if run.active_window_ms > 0 {
        run.active_window_ms
    } else {
        u64::MAX
    };
    match run.session_ms {
        Some(session) => s.last_sent.saturating_add(session.min(window)),
        None => {
            let grant = run.grant_ms.unwrap_or(600_000);
            s.grant_from
                .saturating_add(grant)
                .min(s.last_sent.saturating_add(window))
        }
    }
}

/// The sessions one client's answers prove. A new one starts at an admitted answer that comes
/// after the previous session's end, or after a waiting answer or cookie check (the room had
/// let it go).
pub fn sessions_of(run: &Run, client: u64, reqs: &[Req], out: &mut Vec<Session>) {
    let mut open: Option<Open> = None;
    // A grant outlives the active window: a client back after a pause passes on the same one.
    let mut grant_from: Option<u64> = None;
    let grant = run.grant_ms.unwrap_or(600_000);
    let close = |o: Open, end: u64, out: &mut Vec<Session>| {
        if end > o.start {
            out.push(Session {
                start: o.start,
                end,
                client,
            });
        }
    };
    for r in reqs {
        match r.outcome {
            Outcome::Admitted => {
                if let Some(o) = open.as_mut() {
                    if r.sent <= end_of(run, o) {
                        // With session=, the ticket admits until its sealed check-in plus the
                        // session, and the check-in moves only when the answer seals it
                        // again (every tenth of the session): a request in between does not
                        // lengthen the session.
                        if run.session_ms.is_none() || r.renewed {
                            o.last_sent = o.last_sent.max(r.sent);
                        }
                        continue;
                    }
                }
                if let Some(o) = open.take() {
                    let end = end_of(run, &o);
                    close(o, end, out);
                }
                let from = match grant_from {
                    Some(g) if r.sent < g.saturating_add(grant) => g,
                    _ => r.sent,
                };
                grant_from = Some(from);
                open = Some(Open {
                    start: r.done,
                    last_sent: r.sent,
                    grant_from: from,
                });
            }
            Outcome::Waiting | Outcome::New => {
                grant_from = None;
                if let Some(o) = open.take() {
                    let end = end_of(run, &o).min(r.sent);
                    close(o, end, out);
                }
            }
            Outcome::Throttled | Outcome::Other | Outcome::Error => {}
        }
    }
    if let Some(o) = open {
        let end = end_of(run, &o);
        close(o, end, out);
    }
}

/// Every session of every client but minters (a minter never holds a session).
pub fn sessions(h: &History, clients: &[ClientFacts]) -> Vec<Session> {
    let mut out = Vec::new();
    for c in clients
        .iter()
        .filter(|c| !c.minter() && c.admitted.is_some())
    {
        sessions_of(&h.run, c.id, reqs_of(h, c), &mut out);
    }
    out
}

/// An over-limit stretch being followed by the sweep.
struct Over {
    start: u64,
    peak: u64,
    peak_at: u64,
    named: Vec<u64>,
}

/// Counts sessions at once by a sweep over their starts and ends (an end at the same moment as
/// a start goes first: a freed place taken at once is not two).
pub fn sweep(sessions: &[Session], max_active: u64) -> Admission {
    let limit = limit(max_active);
    let mut events: Vec<(u64, bool, u64)> = Vec::with_capacity(sessions.len() * 2);
    for s in sessions {
        events.push((s.start, true, s.client));
        events.push((s.end, false, s.client));
    }
    // false (an end) sorts before true (a start) at the same moment.
    events.sort_unstable();
    let mut a = Admission {
        limit,
        sessions: sessions.len() as u64,
        ..Admission::default()
    };
    let mut count = 0u64;
    let mut recent: VecDeque<u64> = VecDeque::with_capacity(NAMED);
    let mut over: Option<Over> = None;
    for group in events.chunk_by(|x, y| x.0 == y.0) {
        let Some(&(t, _, _)) = group.first() else {
            continue;
        };
        for &(_, start, client) in group {
            if start {
                count += 1;
                if recent.len() == NAMED {
                    recent.pop_front();
                }
                recent.push_back(client);
            } else {
                count = count.saturating_sub(1);
            }
        }
        a.series.push((t, count));
        if count > a.peak {
            a.peak = count;
            a.peak_at = t;
        }
        if count > limit {
            let o = over.get_or_insert_with(|| Over {
                start: t,
                peak: 0,
                peak_at: t,
                named: Vec::new(),
            });
            if count > o.peak {
                o.peak = count;
                o.peak_at = t;
                o.named = recent.iter().rev().copied().collect();
            }
        } else if let Some(o) = over.take() {
            a.violations.push(over_violation(o, t, max_active, limit));
        }
    }
    if let Some(o) = over {
        // Sessions always end, so this is only reached with no end recorded: report it open.
        let end = o.peak_at;
        a.violations.push(over_violation(o, end, max_active, limit));
    }
    a
}

fn over_violation(o: Over, end: u64, max_active: u64, limit: u64) -> Violation {
    Violation {
        rule: Rule::OverAdmission,
        at_ms: o.start,
        text: format!(
            "{} admitted sessions at once (max_active {max_active}, limit {limit}) \
             from {} to {end} ms, peak at {} ms; the clients admitted last are listed",
            o.peak, o.start, o.peak_at
        ),
        clients: o.named,
    }
}

/// The nodes' own counts above the limit, one violation per node per stretch (fleet modes:
/// a shm node's count is the room's and the sessions above already check it).
pub fn metrics(h: &History, limit: u64) -> (Vec<Violation>, Option<u64>) {
    let peak = h.metrics.iter().map(|m| m.active).max();
    if h.run.mode == Mode::Shm {
        return (Vec::new(), peak);
    }
    let mut out = Vec::new();
    for node in h.metrics.chunk_by(|a, b| a.node == b.node) {
        for stretch in node.chunk_by(|a, b| (a.active > limit) == (b.active > limit)) {
            let (Some(first), Some(last)) = (stretch.first(), stretch.last()) else {
                continue;
            };
            if first.active <= limit {
                continue;
            }
            let top = stretch.iter().max_by_key(|m| m.active).unwrap_or(first);
            out.push(Violation {
                rule: Rule::OverAdmissionMetrics,
                at_ms: first.at,
                clients: Vec::new(),
                text: format!(
                    "node {} reported {} active (limit {limit}) at {} ms; above from {} to {} ms \
                     ({} samples)",
                    first.node,
                    top.active,
                    top.at,
                    first.at,
                    last.at,
                    stretch.len()
                ),
            });
        }
    }
    (out, peak)
}

/// (a) in full.
pub fn check(h: &History, clients: &[ClientFacts]) -> Admission {
    let mut a = sweep(&sessions(h, clients), h.run.max_active);
    let (more, peak) = metrics(h, a.limit);
    a.violations.extend(more);
    a.metrics_peak = peak;
    a
}
