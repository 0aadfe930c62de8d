//! (c) Nobody who kept polling is dropped, and (f) an admitted client keeps its admission,
//! faults or not.
//!
//! Each client's answers are followed in order (errors, 429s and odd statuses say nothing about
//! where it stands and are skipped):
//! - waiting, then a cookie check (`New`) for a request that carried its ticket, certainly
//!   within `keep` (`presence` with keep=off, [S27]) of the waiting answer (the check's `done`
//!   minus the waiting answer's `sent`): the room forgot a place it had to keep. **Dropped.**
//! - admitted, then waiting or a cookie check certainly within the session (`session=`: the
//!   answer's `done` before the last admitted answer's `sent` + session) or the grant
//!   (`grant=`: before the granting answer's `sent` + grant): **admitted session lost.**
//!
//! A later answer only counts when it was sent after the earlier one was done: two requests in
//! flight at once may have been decided in either order.

use crate::history::{Outcome, Req, Run};

use super::clients::{reqs_of, tells, ClientFacts};
use super::load::History;
use super::violation::{Rule, Violation};

/// What the client held before an answer.
#[derive(Clone, Copy)]
enum Held<'r> {
    Nothing,
    Place(&'r Req),
    /// The last admitted answer, and the `sent` of the one that began the grant.
    Admission(&'r Req, u64),
}

/// Whether `r` was certainly decided while the admission held.
fn within_admission(run: &Run, last: &Req, grant_from: u64, r: &Req) -> bool {
    match run.session_ms {
        Some(session) => r.done < last.sent.saturating_add(session),
        None => r.done < grant_from.saturating_add(run.grant_ms.unwrap_or(600_000)),
    }
}

fn describe(r: &Req) -> String {
    match (r.outcome, r.pos) {
        (Outcome::Waiting, Some(p)) => format!("told to wait at position {p}"),
        (Outcome::Waiting, None) => "told to wait".into(),
        _ => "given a cookie check (the room no longer knew its ticket)".into(),
    }
}

fn client(run: &Run, reqs: &[Req], out: &mut Vec<Violation>) {
    let mut held = Held::Nothing;
    for r in reqs.iter().filter(|r| tells(r)) {
        match (held, r.outcome) {
            (Held::Place(w), Outcome::New)
                if r.ticket
                    && r.sent >= w.done
                    && r.done.saturating_sub(w.sent) <= run.kept_ms() =>
            {
                out.push(Violation::at(
                    Rule::Dropped,
                    r,
                    format!(
                        "waiting ({}at {} ms), then {} at {}-{} ms with its ticket, \
                         within keep ({} ms)",
                        w.pos.map(|p| format!("position {p} ")).unwrap_or_default(),
                        w.sent,
                        describe(r),
                        r.sent,
                        r.done,
                        run.kept_ms()
                    ),
                ));
            }
            (Held::Admission(last, from), Outcome::New | Outcome::Waiting)
                if r.sent >= last.done && within_admission(run, last, from, r) =>
            {
                let kind = match run.session_ms {
                    Some(s) => format!("session of {s} ms"),
                    None => format!(
                        "grant of {} ms from {from} ms",
                        run.grant_ms.unwrap_or(600_000)
                    ),
                };
                out.push(Violation::at(
                    Rule::LostAdmission,
                    r,
                    format!(
                        "admitted (last at {}-{} ms), then {} at {}-{} ms, within its {kind}",
                        last.sent,
                        last.done,
                        describe(r),
                        r.sent,
                        r.done
                    ),
                ));
            }
            _ => {}
        }
        held = match r.outcome {
            Outcome::Waiting => Held::Place(r),
            Outcome::Admitted => {
                let from = match held {
                    // The grant runs from the admission, not from each request.
                    Held::Admission(_, from)
                        if r.sent < from.saturating_add(run.grant_ms.unwrap_or(600_000)) =>
                    {
                        from
                    }
                    _ => r.sent,
                };
                match held {
                    // With session=, the session runs from the ticket's sealed check-in, which
                    // only an answer that seals it again moves.
                    Held::Admission(prev, _) if run.session_ms.is_some() && !r.renewed => {
                        Held::Admission(prev, from)
                    }
                    _ => Held::Admission(r, from),
                }
            }
            _ => Held::Nothing,
        };
    }
}

/// Dropped places and lost admissions, minters aside (they never keep a ticket).
pub fn check(h: &History, clients: &[ClientFacts]) -> Vec<Violation> {
    let mut out = Vec::new();
    for c in clients.iter().filter(|c| !c.minter()) {
        client(&h.run, reqs_of(h, c), &mut out);
    }
    out.sort_by_key(|v| (v.at_ms, v.rule));
    out
}
