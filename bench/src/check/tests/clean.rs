//! A clean history passes every rule; one planted answer fails it; the report.

use super::*;

// A clean room --------------------------------------------------------------------------------

/// Where a simulated client is.
#[derive(Clone, Copy, PartialEq)]
enum State {
    Fresh,
    Returning,
    Waiting(u32),
    Admitted(u32),
}

/// A FIFO room of `max_active` 5 as the module keeps it, decided at each request's `sent`:
/// `n` clients arrive 200 ms apart, poll every second, and once admitted make three requests a
/// second apart; two abandon after three waiting answers. Sessions last 2.5 s after the last
/// request; a place lapses 5 s after it was last seen.
pub(super) fn clean_fifo(n: u64) -> Vec<Record> {
    let mut r = run(Mode::Shm, 5);
    r.session_ms = Some(2500);
    r.active_window_ms = 2500;
    let (max, session, presence) = (5usize, 2500u64, r.presence_ms);
    let mut out = vec![Record::Run(r)];
    let mut line: Vec<(u64, u64)> = Vec::new(); // (client, last seen)
    let mut active: HashMap<u64, u64> = HashMap::new(); // client -> last request
    let mut state: HashMap<u64, State> = (0..n).map(|c| (c, State::Fresh)).collect();
    let mut abandoned: HashMap<u64, u64> = HashMap::new();
    let mut events: BinaryHeap<Reverse<(u64, u64)>> =
        (0..n).map(|c| Reverse((200 * c + 1, c))).collect();
    let mut next_metrics = 0;
    let kind = |c: u64| {
        if c.is_multiple_of(3) {
            Kind::Program
        } else {
            Kind::Person
        }
    };
    let answer = |c: u64, t: u64, outcome: Outcome, pos: Option<u64>, qlen: Option<u64>| {
        let mut q = req(c, t, outcome, pos);
        q.kind = kind(c);
        q.qlen = qlen;
        Record::Req(q)
    };
    while let Some(Reverse((t, c))) = events.pop() {
        line.retain(|&(_, seen)| seen + presence > t);
        active.retain(|_, &mut last| last + session > t);
        while next_metrics <= t {
            out.push(Record::Metrics(Metrics {
                node: 0,
                at: next_metrics,
                active: active.len() as u64,
                queue: line.len() as u64,
            }));
            next_metrics += 1000;
        }
        let s = state.get(&c).copied().unwrap_or(State::Fresh);
        match s {
            State::Fresh => {
                let mut q = req(c, t, Outcome::New, None);
                q.kind = kind(c);
                q.ticket = false;
                out.push(Record::Req(q));
                state.insert(c, State::Returning);
                events.push(Reverse((t + 5, c)));
            }
            State::Returning | State::Waiting(_) => {
                let i = match line.iter().position(|&(x, _)| x == c) {
                    Some(i) => i,
                    None => {
                        line.push((c, t));
                        line.len() - 1
                    }
                };
                let pos = i + 1;
                if pos + active.len() <= max {
                    line.remove(i);
                    active.insert(c, t);
                    out.push(answer(c, t, Outcome::Admitted, None, None));
                    state.insert(c, State::Admitted(1));
                    events.push(Reverse((t + 1000, c)));
                } else {
                    line[i].1 = t;
                    out.push(answer(
                        c,
                        t,
                        Outcome::Waiting,
                        Some(pos as u64),
                        Some(line.len() as u64),
                    ));
                    let polls = if let State::Waiting(p) = s { p + 1 } else { 1 };
                    state.insert(c, State::Waiting(polls));
                    if (c == 7 || c == 20) && polls == 3 {
                        abandoned.insert(c, t + 1);
                    } else {
                        events.push(Reverse((t + 1000, c)));
                    }
                }
            }
            State::Admitted(k) => {
                active.insert(c, t);
                out.push(answer(c, t, Outcome::Admitted, None, None));
                state.insert(c, State::Admitted(k + 1));
                if k + 1 < 3 {
                    events.push(Reverse((t + 1000, c)));
                }
            }
        }
    }
    for c in 0..n {
        out.push(Record::Client(ClientPlan {
            client: c,
            kind: kind(c),
            abandoned_at: abandoned.get(&c).copied(),
            poll_ms: 1000,
            away: None,
        }));
    }
    out
}

#[test]
fn clean_fifo_history_passes() {
    let h = History::from_records(clean_fifo(50)).expect("history");
    let f = findings(&h);
    assert!(
        f.clean(),
        "{:#?}",
        f.violations().take(5).collect::<Vec<_>>()
    );
    assert_eq!(f.admission.peak, 5, "the room was full at times");
    assert!(
        f.order.checked > 30,
        "most clients waited: {}",
        f.order.checked
    );
    assert!(f.positions.compared > 100);
    assert!(f.distinct.as_ref().is_some_and(|d| d.answers > 100));
    let admitted = f.clients.iter().filter(|c| c.admitted.is_some()).count();
    assert_eq!(admitted, 48, "all but the two who abandoned");
    let text = crate::check::summary::text(&h, &f, "clean");
    assert!(text.contains("result: PASS"), "{text}");
    assert!(text.contains("; 2 abandoned"), "{text}");
}

#[test]
fn clean_history_with_a_swapped_admission_fails() {
    // The same room, with one admission answer moved to a client behind: the checker must see
    // it (a clean pass is not a checker that never fails).
    let mut records = clean_fifo(50);
    let mut seen = 0;
    for r in records.iter_mut() {
        if let Record::Req(q) = r {
            if q.client == 30 && q.outcome == Outcome::Waiting {
                seen += 1;
                if seen == 2 {
                    q.outcome = Outcome::Admitted;
                    q.status = 200;
                    q.pos = None;
                }
            }
        }
    }
    let f = findings(&History::from_records(records).expect("history"));
    // Everyone who arrived before 30 and was still waiting (but 20, who left) was passed
    // over, and 30 was back in line at its next request.
    assert_eq!(f.count(Rule::Order), 19);
    assert!(f
        .order
        .violations
        .iter()
        .all(|v| v.clients.get(1) == Some(&30)));
    assert_eq!(f.count(Rule::LostAdmission), 1);
    assert_eq!(f.violations().count(), 20);
}

#[test]
fn report_is_one_self_contained_page() {
    let h = History::from_records(clean_fifo(50)).expect("history");
    let f = findings(&h);
    let html = crate::check::report::html(&h, &f, "summary <here>", "x.jsonl");
    assert!(html.starts_with("<!doctype html>"));
    assert_eq!(html.matches("<svg").count(), 5);
    assert!(html.contains("summary &lt;here&gt;"));
    for banned in ["<script", "src=", "href=", "@import"] {
        assert!(!html.contains(banned), "{banned}");
    }
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
}
