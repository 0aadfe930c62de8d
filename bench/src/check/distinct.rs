//! (d) Distinct positions ([S22]: exact while the line is small, every waiting client a
//! distinct number): two places told the same position by answers in flight at the same time
//! are one too many, unless somebody left the line meanwhile (then the one behind moved up
//! into the number legitimately). Arrivals join behind and change nobody's number.
//!
//! Leaves: an admission (a client's admitted answer after it was not admitted), a place lapsing
//! (its last waiting answer's `sent` + keep, ± 1 s), and moments that reorder everyone (a
//! fault, a lottery's start, ± 1 s).
//!
//! Answers are grouped by position and swept by `sent`; each is compared with the earlier one
//! of another place that was in flight longest, which bounds the work to a sort.

use crate::history::{Order, Outcome, Req};

use super::clients::{places, reqs_of, tells, ClientFacts};
use super::load::History;
use super::violation::{Rule, Violation};

/// How far a lapse or a reordering moment may be from the room's own clock.
const SLACK_MS: u64 = 1000;

/// What (d) found.
#[derive(Debug, Clone, Default)]
pub struct Distinct {
    pub violations: Vec<Violation>,
    /// Waiting answers with a position examined.
    pub answers: u64,
}

/// One waiting answer with a position: a place (client, and for a minter the answer's index:
/// each of its requests is a new ticket) told `pos` in [sent, done].
#[derive(Debug, Clone, Copy)]
struct Told {
    pos: u64,
    sent: u64,
    done: u64,
    client: u64,
    place: u64,
}

/// The moments somebody left, for "did anyone leave within [lo, hi]".
struct Leaves {
    /// Admission windows by `sent`, with the running maximum of `done`.
    admissions: Vec<(u64, u64)>,
    max_done: Vec<u64>,
    /// Lapses and reorderings, sorted.
    points: Vec<u64>,
}

impl Leaves {
    fn build(h: &History, clients: &[ClientFacts]) -> Leaves {
        let mut admissions = Vec::new();
        let mut points = Vec::new();
        for c in clients {
            let reqs = reqs_of(h, c);
            let mut was_admitted = false;
            for r in reqs.iter().filter(|r| tells(r)) {
                let admitted = r.outcome == Outcome::Admitted;
                if admitted && !was_admitted {
                    admissions.push((r.sent, r.done));
                }
                was_admitted = admitted;
            }
            if c.minter() {
                points.extend(
                    reqs.iter()
                        .filter(|r| r.outcome == Outcome::Waiting)
                        .map(|r| r.sent.saturating_add(h.run.kept_ms())),
                );
            } else {
                for span in places(reqs, h.run.kept_ms()) {
                    if let Some(last) = reqs.get(span.end.saturating_sub(1)) {
                        points.push(last.sent.saturating_add(h.run.kept_ms()));
                    }
                }
            }
        }
        for f in &h.faults {
            points.push(f.at);
            points.extend(f.until);
        }
        if h.run.order == Order::Lottery {
            points.extend(h.run.start_ms);
        }
        admissions.sort_unstable();
        points.sort_unstable();
        let mut max_done = Vec::with_capacity(admissions.len());
        let mut m = 0;
        for &(_, done) in &admissions {
            m = m.max(done);
            max_done.push(m);
        }
        Leaves {
            admissions,
            max_done,
            points,
        }
    }

    /// Whether somebody may have left between `lo` and `hi`.
    fn within(&self, lo: u64, hi: u64) -> bool {
        // An admission window meets [lo, hi] when it was sent by `hi` and done from `lo` on:
        // among those sent by `hi`, the latest done tells.
        let sent_by = self.admissions.partition_point(|&(s, _)| s <= hi);
        if sent_by > 0 && self.max_done.get(sent_by - 1).is_some_and(|&d| d >= lo) {
            return true;
        }
        let from = lo.saturating_sub(SLACK_MS);
        let to = hi.saturating_add(SLACK_MS);
        let i = self.points.partition_point(|&p| p < from);
        self.points.get(i).is_some_and(|&p| p <= to)
    }
}

fn told(h: &History, clients: &[ClientFacts]) -> Vec<Told> {
    let mut out = Vec::new();
    for c in clients {
        let reqs: &[Req] = reqs_of(h, c);
        for (i, r) in reqs.iter().enumerate() {
            if r.outcome != Outcome::Waiting {
                continue;
            }
            let Some(pos) = r.pos else { continue };
            out.push(Told {
                pos,
                sent: r.sent,
                done: r.done,
                client: c.id,
                place: if c.minter() { i as u64 } else { u64::MAX },
            });
        }
    }
    out
}

fn duplicate(a: &Told, b: &Told) -> Violation {
    Violation {
        rule: Rule::DuplicatePosition,
        at_ms: a.sent.min(b.sent),
        clients: vec![a.client, b.client],
        text: format!(
            "both told position {} by answers in flight together ({}-{} ms and {}-{} ms), \
             nobody leaving the line meanwhile",
            a.pos, a.sent, a.done, b.sent, b.done
        ),
    }
}

/// (d) over every waiting answer.
pub fn check(h: &History, clients: &[ClientFacts]) -> Distinct {
    let leaves = Leaves::build(h, clients);
    let mut all = told(h, clients);
    all.sort_unstable_by_key(|t| (t.pos, t.sent, t.done));
    let mut out = Distinct {
        answers: all.len() as u64,
        ..Distinct::default()
    };
    for group in all.chunk_by(|a, b| a.pos == b.pos) {
        // The earlier answers still in flight longest, of two different places.
        let mut longest: [Option<Told>; 2] = [None, None];
        for t in group {
            let same = |o: &Told| o.client == t.client && o.place == t.place;
            let other = longest
                .iter()
                .flatten()
                .find(|o| !same(o) && o.done >= t.sent);
            if let Some(o) = other {
                if !leaves.within(o.sent.min(t.sent), o.done.max(t.done)) {
                    out.violations.push(duplicate(o, t));
                }
            }
            // Keep the two longest-running answers of distinct places.
            longest = match longest {
                [Some(a), b] if a.client == t.client && a.place == t.place => {
                    if t.done > a.done {
                        [Some(*t), b]
                    } else {
                        [Some(a), b]
                    }
                }
                [a, Some(b)] if b.client == t.client && b.place == t.place => {
                    if t.done > b.done {
                        [a, Some(*t)]
                    } else {
                        [a, Some(b)]
                    }
                }
                [None, _] => [Some(*t), None],
                [Some(a), None] => [Some(a), Some(*t)],
                [Some(a), Some(b)] => {
                    // Drop whichever ends first of the three.
                    let mut three = [a, b, *t];
                    three.sort_by_key(|x| std::cmp::Reverse(x.done));
                    [Some(three[0]), Some(three[1])]
                }
            };
        }
    }
    out.violations.sort_by_key(|v| v.at_ms);
    out
}
