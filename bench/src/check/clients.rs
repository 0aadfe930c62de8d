//! What each client's own requests say about it: when it arrived, when it was admitted, and the
//! stretches during which it held one place in line.
//!
//! Every time here comes as a window [sent, done]: the room decided at some moment inside it,
//! and the rules only call something broken when it is broken for every such moment.

use std::ops::Range;

use crate::history::{Kind, Outcome, Req};

use super::load::History;

/// An answer's window: the room decided between `sent` and `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub sent: u64,
    pub done: u64,
}

impl Window {
    pub fn of(r: &Req) -> Window {
        Window {
            sent: r.sent,
            done: r.done,
        }
    }
}

/// One client, as its requests show it.
#[derive(Debug, Clone)]
pub struct ClientFacts {
    pub id: u64,
    pub kind: Kind,
    /// Its requests: `history.reqs[reqs]`, by `sent`.
    pub reqs: Range<usize>,
    /// The answer that took its place ([S18]): its first waiting answer, or its first admitted
    /// one when it walked straight in.
    pub arrival: Option<Window>,
    /// Its first admitted answer.
    pub admitted: Option<Window>,
    /// `sent` of the last waiting answer of its first place (before its admission): the latest
    /// moment it was certainly still in line where it arrived.
    pub last_wait: Option<u64>,
    /// The stretches `[from, to)` of its first place during which it was overdue: its last
    /// answer had asked it back (plus [`slack`]) and it had not asked again yet. By sent.
    pub late: Vec<(u64, u64)>,
    /// The answers with which it came back to its first place (or was admitted from it) after
    /// an absence the room may have counted (more than `presence` since the answer before):
    /// the room takes a kept place back ahead of everyone who arrived after it ([S27]).
    pub returns: Vec<Window>,
    /// When it gave up, if it stopped while waiting (summary only).
    pub abandoned_at: Option<u64>,
}

impl ClientFacts {
    pub fn minter(&self) -> bool {
        self.kind == Kind::Minter
    }
}

/// Whether an answer says anything about the room (an error, a 429 or an odd status does not
/// say where the client stands).
pub fn tells(r: &Req) -> bool {
    matches!(
        r.outcome,
        Outcome::New | Outcome::Waiting | Outcome::Admitted
    )
}

/// The stretches of `reqs` (index ranges, each starting and ending at a waiting answer) during
/// which the client certainly held one place: no cookie check or admission inside, each waiting
/// answer certainly within `kept_ms` of the one before (`keep`, or `presence` with keep=off,
/// [S27]: else the place may have expired and the next answer be a new place at the tail). A
/// client that abandons simply stops: every waiting answer it got still shows where the room
/// held it.
pub fn places(reqs: &[Req], kept_ms: u64) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    // (first waiting index, last waiting index) of the place being followed.
    let mut cur: Option<(usize, usize)> = None;
    for (i, r) in reqs.iter().enumerate() {
        match r.outcome {
            Outcome::Waiting => {
                cur = match cur {
                    Some((s, l)) => {
                        let prev_sent = reqs.get(l).map_or(r.sent, |p| p.sent);
                        if r.done.saturating_sub(prev_sent) <= kept_ms {
                            Some((s, i))
                        } else {
                            spans.push(s..l + 1);
                            Some((i, i))
                        }
                    }
                    None => Some((i, i)),
                };
            }
            Outcome::New | Outcome::Admitted => {
                if let Some((s, l)) = cur.take() {
                    spans.push(s..l + 1);
                }
            }
            Outcome::Throttled | Outcome::Other | Outcome::Error => {}
        }
    }
    if let Some((s, l)) = cur {
        spans.push(s..l + 1);
    }
    spans
}

/// How much later than asked a client may come back and still count as on time: the rehearsal
/// spreads each poll by a tenth either way, and its threads may run late on a loaded machine.
pub fn slack(asked_ms: u64) -> u64 {
    asked_ms / 10 + 500
}

/// The stretches of `reqs` during which the client was overdue: after `reqs[j]`, done at `d`,
/// asked it back at `d + asked` (a waiting answer's own refresh; otherwise the room's, a client
/// retries at least that soon), it sent `reqs[j + 1]` later than that plus [`slack`].
pub fn overdue(reqs: &[Req], refresh_ms: u64) -> Vec<(u64, u64)> {
    reqs.windows(2)
        .filter_map(|w| {
            let (a, b) = (&w[0], &w[1]);
            let asked = match a.outcome {
                Outcome::Waiting => a.refresh_ms.unwrap_or(refresh_ms),
                _ => refresh_ms,
            };
            let due = a.done.saturating_add(asked).saturating_add(slack(asked));
            (b.sent > due).then_some((due, b.sent))
        })
        .collect()
}

/// `end`, taken one further when the next answer that says anything is an admission: the
/// answer a place ends with when it is let in.
fn next_told(reqs: &[Req], end: usize) -> usize {
    match reqs.iter().skip(end).position(tells) {
        Some(k)
            if reqs
                .get(end + k)
                .is_some_and(|r| r.outcome == Outcome::Admitted) =>
        {
            end + k + 1
        }
        _ => end,
    }
}

/// The answers in `reqs[span]` that came more than `presence_ms` after the one before (from
/// the one before's `sent` to this one's `done`: the room may have counted the client away).
fn comebacks(reqs: &[Req], span: Range<usize>, presence_ms: u64) -> Vec<Window> {
    let told: Vec<&Req> = reqs
        .get(span)
        .unwrap_or(&[])
        .iter()
        .filter(|r| tells(r))
        .collect();
    told.windows(2)
        .filter(|w| w[1].done.saturating_sub(w[0].sent) > presence_ms)
        .map(|w| Window::of(w[1]))
        .collect()
}

/// The facts of every client that sent a request or has a plan, by id.
pub fn facts(h: &History) -> Vec<ClientFacts> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    for (id, reqs) in h.by_client() {
        let range = offset..offset + reqs.len();
        offset += reqs.len();
        let plan = h.plan(id);
        let kind = plan.map(|p| p.kind).or(reqs.first().map(|r| r.kind));
        // (The driver notes the moment only for a client that stopped while waiting.)
        let abandoned_at = plan.and_then(|p| p.abandoned_at);
        let arrival_idx = reqs
            .iter()
            .position(|r| matches!(r.outcome, Outcome::Waiting | Outcome::Admitted));
        let arrival_req = arrival_idx.and_then(|i| reqs.get(i));
        let arrival = arrival_req.map(Window::of);
        let admitted = reqs
            .iter()
            .find(|r| r.outcome == Outcome::Admitted)
            .map(Window::of);
        // Only a client that arrived by waiting has a first place to follow.
        let first_place = arrival_idx
            .filter(|_| arrival_req.is_some_and(|r| r.outcome == Outcome::Waiting))
            .and_then(|first| {
                places(reqs, h.run.kept_ms())
                    .into_iter()
                    .find(|p| p.start == first)
            });
        let last_wait = first_place
            .as_ref()
            .and_then(|p| reqs.get(p.end.saturating_sub(1)))
            .map(|r| r.sent);
        let late = first_place
            .clone()
            .and_then(|p| reqs.get(p))
            .map_or_else(Vec::new, |r| overdue(r, h.run.refresh_ms));
        let returns = first_place.map_or_else(Vec::new, |p| {
            comebacks(reqs, p.start..next_told(reqs, p.end), h.run.presence_ms)
        });
        out.push(ClientFacts {
            id,
            kind: kind.unwrap_or(Kind::Person),
            reqs: range,
            arrival,
            admitted,
            last_wait,
            late,
            returns,
            abandoned_at,
        });
    }
    // Clients that planned but never sent anything still count in the summary.
    let missing: Vec<ClientFacts> = h
        .plans
        .iter()
        .filter(|p| out.binary_search_by_key(&p.client, |c| c.id).is_err())
        .map(|p| ClientFacts {
            id: p.client,
            kind: p.kind,
            reqs: 0..0,
            arrival: None,
            admitted: None,
            last_wait: None,
            late: Vec::new(),
            returns: Vec::new(),
            abandoned_at: None,
        })
        .collect();
    if !missing.is_empty() {
        out.extend(missing);
        out.sort_by_key(|c| c.id);
    }
    out
}

/// The requests of one client.
pub fn reqs_of<'h>(h: &'h History, c: &ClientFacts) -> &'h [Req] {
    h.reqs.get(c.reqs.clone()).unwrap_or(&[])
}
