//! Each rule against a small history built in code: it catches what it looks for, and a clean
//! history (a simulated FIFO room) passes them all.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::process::ExitCode;

use super::load::{History, LoadError};
use super::options::Given;
use super::violation::Rule;
use super::{check, main, Findings};
use crate::history::{ClientPlan, Fault, Kind, Metrics, Mode, Order, Outcome, Record, Req, Run};

fn run(mode: Mode, max_active: u64) -> Run {
    Run {
        mode,
        order: Order::Fifo,
        nodes: 1,
        max_active,
        session_ms: Some(10_000),
        grant_ms: None,
        active_window_ms: 10_000,
        presence_ms: 5000,
        timeout_ms: if mode == Mode::Shm { 0 } else { 200 },
        sync_ms: if mode == Mode::Sync { 1000 } else { 0 },
        refresh_ms: 1000,
        start_ms: None,
        duration_ms: 100_000,
    }
}

fn status(o: Outcome) -> u16 {
    match o {
        Outcome::New => 307,
        Outcome::Waiting => 503,
        Outcome::Admitted => 200,
        Outcome::Throttled => 429,
        Outcome::Other => 500,
        Outcome::Error => 0,
    }
}

/// A request answered 2 ms after it was sent, with its ticket.
fn req(client: u64, sent: u64, outcome: Outcome, pos: Option<u64>) -> Req {
    Req {
        client,
        kind: Kind::Person,
        node: 0,
        sent,
        done: sent.saturating_add(2),
        status: status(outcome),
        outcome,
        pos,
        qlen: pos.map(|p| p.saturating_add(5)),
        ticket: true,
        renewed: true,
    }
}

fn wait(client: u64, sent: u64, pos: u64) -> Req {
    req(client, sent, Outcome::Waiting, Some(pos))
}

fn admit(client: u64, sent: u64) -> Req {
    req(client, sent, Outcome::Admitted, None)
}

fn history(run: Run, reqs: Vec<Req>) -> History {
    let records = std::iter::once(Record::Run(run)).chain(reqs.into_iter().map(Record::Req));
    History::from_records(records).expect("a history with a run")
}

fn findings(h: &History) -> Findings {
    check(h, &Given::default())
}

fn rules(f: &Findings) -> Vec<Rule> {
    let mut r: Vec<Rule> = f.violations().map(|v| v.rule).collect();
    r.dedup();
    r.sort();
    r.dedup();
    r
}

// (a) ------------------------------------------------------------------------------------------

#[test]
fn a_session_runs_from_its_sealed_check_in() {
    // session=10s: client 1 admitted at 1000 (its ticket sealed), back at 1900 without a new
    // ticket (the check-in moves every tenth of the session): its ticket admits until 11,000,
    // so client 2 let in at 11,500 makes one session, not two.
    let mut again = admit(1, 1900);
    again.renewed = false;
    let h = history(
        run(Mode::Redis, 1),
        vec![admit(1, 1000), again.clone(), admit(2, 11_500)],
    );
    assert!(findings(&h).clean());
    // Sealed again at 1900, it would admit until 11,900: two at once.
    again.renewed = true;
    let h = history(
        run(Mode::Redis, 1),
        vec![admit(1, 1000), again, admit(2, 11_500)],
    );
    assert_eq!(rules(&findings(&h)), vec![Rule::OverAdmission]);
}

#[test]
fn over_admission_four_sessions_on_three() {
    let h = history(
        run(Mode::Shm, 3),
        (1..=4).map(|c| admit(c, 1000 + 100 * c)).collect(),
    );
    let f = findings(&h);
    assert_eq!(rules(&f), vec![Rule::OverAdmission]);
    assert_eq!(f.admission.limit, 3);
    assert_eq!(f.admission.peak, 4);
    let v = &f.admission.violations[0];
    assert_eq!(
        v.at_ms, 1402,
        "the fourth session began when its answer was done"
    );
    assert_eq!(
        v.clients.first(),
        Some(&4),
        "the last admitted is named first"
    );
}

#[test]
fn sessions_that_follow_each_other_pass() {
    // Client 1's session ends 10 s after its last request; client 4 takes its place then.
    let mut reqs: Vec<Req> = (1..=3).map(|c| admit(c, 1000 + 100 * c)).collect();
    reqs.push(admit(4, 1100 + 10_000));
    let f = findings(&history(run(Mode::Shm, 3), reqs));
    assert!(f.clean(), "{:?}", f.violations().collect::<Vec<_>>());
    assert_eq!(f.admission.peak, 3);
}

#[test]
fn waiting_answer_ends_a_session() {
    // Client 1 is told to wait at 2000 (a lost admission, rule (f)): from then on it does not
    // hold a place among the 3, so client 4 does not make 4.
    let mut reqs: Vec<Req> = (1..=3).map(|c| admit(c, 1000 + 100 * c)).collect();
    reqs.push(wait(1, 2000, 1));
    reqs.push(admit(4, 2100));
    let f = findings(&history(run(Mode::Shm, 3), reqs));
    assert_eq!(rules(&f), vec![Rule::LostAdmission]);
}

#[test]
fn metrics_above_the_limit_in_fleet_modes_only() {
    for (mode, expect) in [(Mode::Redis, true), (Mode::Shm, false)] {
        let records = vec![
            Record::Run(run(mode, 3)),
            Record::Metrics(Metrics {
                node: 1,
                at: 500,
                active: 4,
                queue: 0,
            }),
            Record::Metrics(Metrics {
                node: 1,
                at: 1500,
                active: 5,
                queue: 0,
            }),
            Record::Metrics(Metrics {
                node: 1,
                at: 2500,
                active: 3,
                queue: 0,
            }),
        ];
        let f = findings(&History::from_records(records).expect("history"));
        assert_eq!(
            f.count(Rule::OverAdmissionMetrics),
            usize::from(expect),
            "{mode:?}"
        );
        assert_eq!(f.admission.metrics_peak, Some(5));
    }
}

// (b) ------------------------------------------------------------------------------------------

/// A waits from 100, B from 200; B is admitted at `b_admitted`, A at 2300 (told to wait at
/// 1300 before).
fn two_in_line(b_admitted: u64) -> History {
    history(
        run(Mode::Shm, 3),
        vec![
            wait(1, 100, 1),
            wait(2, 200, 2),
            wait(1, 1300, 1),
            admit(2, b_admitted),
            admit(1, 2300),
        ],
    )
}

#[test]
fn inversion_is_caught() {
    let f = findings(&two_in_line(1200));
    assert_eq!(rules(&f), vec![Rule::Order]);
    assert_eq!(f.order.pairs, 1);
    assert_eq!(f.order.violations[0].clients, vec![1, 2]);
    assert_eq!(f.order.involved, vec![1, 2]);
}

#[test]
fn admission_after_the_last_wait_is_in_order() {
    // B admitted after A's last waiting answer: A was admitted next, no inversion.
    let f = findings(&two_in_line(2400));
    assert!(f.clean(), "{:?}", f.violations().collect::<Vec<_>>());
    // B's admission answer overlapping A's waiting answer proves nothing either.
    let f = findings(&two_in_line(1299));
    assert_eq!(f.order.pairs, 0);
}

#[test]
fn inversion_tolerance_is_honoured() {
    let h = two_in_line(1200);
    let given = Given {
        inversion_ms: Some(150),
        ..Given::default()
    };
    assert_eq!(check(&h, &given).order.pairs, 0, "arrivals 100 ms apart");
}

#[test]
fn lottery_draws_the_pre_queue_then_fifo() {
    let mut r = run(Mode::Shm, 10);
    r.order = Order::Lottery;
    r.start_ms = Some(5000);
    r.presence_ms = 10_000;
    // 1 and 2 arrive before the start: any order between them.
    let base = vec![
        wait(1, 100, 1),
        wait(2, 200, 2),
        wait(2, 5100, 1),
        admit(2, 6000),
        wait(1, 6500, 1),
        admit(1, 7000),
    ];
    let f = findings(&history(r.clone(), base.clone()));
    assert!(f.clean(), "{:?}", f.violations().collect::<Vec<_>>());
    // 3 arrives after the start and is admitted while 1 (pre-queue) still waits.
    let mut late = base;
    late.extend([wait(3, 5500, 3), admit(3, 6200)]);
    let f = findings(&history(r, late));
    assert_eq!(rules(&f), vec![Rule::Order]);
    assert_eq!(f.order.violations[0].clients, vec![1, 3]);
}

// (c) ------------------------------------------------------------------------------------------

#[test]
fn growing_position_is_caught() {
    let h = history(
        run(Mode::Shm, 3),
        vec![wait(1, 100, 3), wait(1, 1100, 5), wait(1, 2100, 2)],
    );
    let f = findings(&h);
    assert_eq!(rules(&f), vec![Rule::PositionGrew]);
    assert_eq!(f.positions.max_growth, 2);
    assert_eq!(f.positions.violations[0].at_ms, 1100);
}

#[test]
fn sync_positions_are_estimates_within_the_documented_bound() {
    // Each answer of a synced room may be off by what moved in two intervals (here the
    // client's own arrival: 1) + a 128th of the line told (305 and 322: 3) + 3: 7 each, and
    // 1 % of 300 (3) besides: a growth of 17 passes, 18 does not.
    let ok = history(
        run(Mode::Sync, 3),
        vec![wait(1, 100, 300), wait(1, 1100, 317)],
    );
    assert!(findings(&ok).clean());
    let bad = history(
        run(Mode::Sync, 3),
        vec![wait(1, 100, 300), wait(1, 1100, 318)],
    );
    assert_eq!(rules(&findings(&bad)), vec![Rule::PositionGrew]);
    let given = Given {
        position: Some(10),
        ..Given::default()
    };
    assert!(check(&bad, &given).clean());
    // A place lost (sent to the tail) is far beyond it.
    let lost = history(
        run(Mode::Sync, 3),
        vec![wait(1, 100, 10), wait(1, 1100, 168)],
    );
    assert_eq!(rules(&findings(&lost)), vec![Rule::PositionGrew]);
}

#[test]
fn positions_before_a_lottery_are_provisional() {
    let mut r = run(Mode::Shm, 3);
    r.order = Order::Lottery;
    r.start_ms = Some(5000);
    let h = history(r, vec![wait(1, 100, 1), wait(1, 1100, 2), wait(1, 5100, 7)]);
    let f = findings(&h);
    assert!(f.clean(), "{:?}", f.violations().collect::<Vec<_>>());
}

#[test]
fn a_new_place_after_a_lapse_may_be_further_back() {
    // Not seen for more than presence: the place lapsed and the next one is at the tail.
    let h = history(run(Mode::Shm, 3), vec![wait(1, 100, 1), wait(1, 6000, 9)]);
    assert!(findings(&h).clean());
}

#[test]
fn dropped_client_is_caught() {
    let new = |sent| req(1, sent, Outcome::New, None);
    let h = history(run(Mode::Shm, 3), vec![wait(1, 100, 2), new(1100)]);
    let f = findings(&h);
    assert_eq!(rules(&f), vec![Rule::Dropped]);
    assert_eq!(f.kept[0].clients, vec![1]);
    // After presence, the room may forget it.
    let h = history(run(Mode::Shm, 3), vec![wait(1, 100, 2), new(5200)]);
    assert!(findings(&h).clean());
    // Without its ticket, a cookie check is what it asked for.
    let mut lost = new(1100);
    lost.ticket = false;
    let h = history(run(Mode::Shm, 3), vec![wait(1, 100, 2), lost]);
    assert!(findings(&h).clean());
}

// (f) ------------------------------------------------------------------------------------------

#[test]
fn lost_admission_is_caught() {
    let h = history(run(Mode::Shm, 3), vec![admit(1, 100), wait(1, 1100, 4)]);
    let f = findings(&h);
    assert_eq!(rules(&f), vec![Rule::LostAdmission]);
    // After its session, a client starts over.
    let h = history(
        run(Mode::Shm, 3),
        vec![admit(1, 100), req(1, 20_000, Outcome::New, None)],
    );
    assert!(findings(&h).clean());
}

#[test]
fn a_grant_holds_however_idle() {
    let mut r = run(Mode::Shm, 3);
    r.session_ms = None;
    r.grant_ms = Some(60_000);
    let lost = vec![admit(1, 100), admit(1, 20_000), wait(1, 30_000, 1)];
    assert_eq!(
        rules(&findings(&history(r.clone(), lost))),
        vec![Rule::LostAdmission]
    );
    let expired = vec![admit(1, 100), req(1, 70_000, Outcome::New, None)];
    assert!(findings(&history(r, expired)).clean());
}

// (d) ------------------------------------------------------------------------------------------

fn same_position(extra: Vec<Req>) -> History {
    let mut a = wait(1, 1000, 1);
    a.done = 1010;
    let b = wait(2, 1005, 1);
    let mut reqs = vec![a, b];
    reqs.extend(extra);
    history(run(Mode::Shm, 3), reqs)
}

#[test]
fn duplicate_position_is_caught() {
    let f = findings(&same_position(Vec::new()));
    assert_eq!(rules(&f), vec![Rule::DuplicatePosition]);
    let d = f.distinct.as_ref().expect("checked in shm");
    assert_eq!(d.violations[0].clients, vec![1, 2]);
}

#[test]
fn a_leave_between_excuses_a_duplicate() {
    // Client 3, ahead, is admitted while the two answers are in flight.
    let f = findings(&same_position(vec![wait(3, 500, 1), admit(3, 1003)]));
    assert!(f.distinct.is_some_and(|d| d.violations.is_empty()));
}

#[test]
fn sync_positions_are_estimates_unless_asked() {
    let mut h = same_position(Vec::new());
    h.run = run(Mode::Sync, 3);
    assert!(findings(&h).distinct.is_none());
    let given = Given {
        exact_sync: true,
        ..Given::default()
    };
    assert_eq!(check(&h, &given).count(Rule::DuplicatePosition), 1);
}

// (e) ------------------------------------------------------------------------------------------

#[test]
fn over_timeout_latency_is_caught() {
    let mut slow = admit(1, 100);
    slow.done = 100 + 1051;
    let mut fine = admit(2, 100);
    fine.done = 100 + 1050;
    let f = findings(&history(run(Mode::Shm, 3), vec![slow, fine]));
    assert_eq!(rules(&f), vec![Rule::Latency]);
    assert_eq!(f.latency.limit_ms, 1050);
    assert_eq!(f.latency.nodes[0].max, 1051);
    assert_eq!(f.latency.nodes[0].slow, 1);
    // Redis: the store's timeout (200) plus slack.
    let mut r = admit(1, 100);
    r.done = 100 + 251;
    let f = findings(&history(run(Mode::Redis, 3), vec![r]));
    assert_eq!(f.latency.limit_ms, 250);
    assert_eq!(rules(&f), vec![Rule::Latency]);
}

#[test]
fn errors_are_expected_only_near_a_fault() {
    let mut records = vec![Record::Run(run(Mode::Redis, 3))];
    records.push(Record::Fault(Fault {
        what: "restart".into(),
        node: Some(0),
        at: 10_000,
        until: None,
    }));
    let error = |client, node, sent| {
        let mut r = req(client, sent, Outcome::Error, None);
        r.node = node;
        Record::Req(r)
    };
    records.push(error(1, 0, 10_500)); // right after the restart of its node
    records.push(error(2, 1, 10_500)); // another node: unexplained
    records.push(error(3, 0, 30_000)); // long after: unexplained
    let f = findings(&History::from_records(records).expect("history"));
    assert_eq!(f.count(Rule::Unanswered), 2);
    let n0 = f
        .latency
        .nodes
        .iter()
        .find(|n| n.node == 0)
        .expect("node 0");
    assert_eq!((n0.errors, n0.errors_near_fault), (2, 1));
    assert_eq!(f.faults.len(), 1);
    assert_eq!((f.faults[0].requests, f.faults[0].errors), (1, 1));
}

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
fn clean_fifo(n: u64) -> Vec<Record> {
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
    let text = super::summary::text(&h, &f, "clean");
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
    let html = super::report::html(&h, &f, "summary <here>", "x.jsonl");
    assert!(html.starts_with("<!doctype html>"));
    assert_eq!(html.matches("<svg").count(), 5);
    assert!(html.contains("summary &lt;here&gt;"));
    for banned in ["<script", "src=", "href=", "@import"] {
        assert!(!html.contains(banned), "{banned}");
    }
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
}

// Input ---------------------------------------------------------------------------------------

#[test]
fn malformed_lines_are_counted_not_fatal() {
    let mut text = Record::Run(run(Mode::Shm, 3)).to_line();
    text.push('\n');
    text.push_str("{\"type\":\"req\",\"client\":1\n"); // cut mid-line
    text.push_str("not json at all\n\n");
    let mut reversed = admit(1, 500);
    reversed.done = 400;
    text.push_str(&Record::Req(reversed).to_line());
    text.push('\n');
    text.push_str(&Record::Run(run(Mode::Redis, 9)).to_line());
    text.push('\n');
    text.push_str(&Record::Req(admit(2, 100)).to_line());
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(b"\n\xff\xfe\n");
    let h = History::read(&bytes[..]).expect("still a history");
    assert_eq!(h.malformed.count, 5);
    assert_eq!(h.malformed.examples.len(), 5);
    assert_eq!(h.reqs.len(), 1);
    assert_eq!(h.run.mode, Mode::Shm, "the first run record holds");
    let f = findings(&h);
    assert!(f.clean());
    assert!(super::summary::text(&h, &f, "x").contains("5 malformed"));
}

#[test]
fn a_history_needs_its_run() {
    assert_eq!(History::parse("").err(), Some(LoadError::NoRun));
    let req = Record::Req(admit(1, 1)).to_line();
    assert_eq!(History::parse(&req).err(), Some(LoadError::NoRun));
    let zero = Record::Run(run(Mode::Shm, 0)).to_line();
    assert!(matches!(History::parse(&zero), Err(LoadError::BadRun(_))));
}

#[test]
fn a_byte_order_mark_and_crlf_are_not_malformed() {
    let text = format!(
        "\u{feff}{}\r\n{}\r\n",
        Record::Run(run(Mode::Shm, 3)).to_line(),
        Record::Req(admit(1, 100)).to_line()
    );
    let h = History::parse(&text).expect("a history");
    assert_eq!((h.malformed.count, h.reqs.len()), (0, 1));
}

#[test]
fn extreme_values_do_not_panic() {
    let mut r = run(Mode::Sync, u64::MAX);
    r.session_ms = Some(u64::MAX);
    r.presence_ms = u64::MAX;
    r.sync_ms = u64::MAX;
    r.order = Order::Lottery;
    r.start_ms = Some(u64::MAX);
    let mut a = wait(u64::MAX, u64::MAX - 2, u64::MAX);
    a.done = u64::MAX;
    let mut b = admit(0, u64::MAX - 1);
    b.done = u64::MAX;
    let f = findings(&history(
        r.clone(),
        vec![a.clone(), b.clone(), wait(0, 0, 0)],
    ));
    let _ = super::report::html(&history(r, vec![a, b]), &f, "", "x");
}

#[test]
fn violations_are_listed_twenty_per_rule() {
    let reqs: Vec<Req> = (0..25)
        .map(|c| {
            let mut r = admit(c, 100);
            r.done = 100 + 5000;
            r
        })
        .collect();
    let mut r = run(Mode::Shm, 100);
    r.session_ms = Some(1);
    let h = history(r, reqs);
    let f = findings(&h);
    assert_eq!(f.count(Rule::Latency), 25);
    let text = super::summary::text(&h, &f, "x");
    assert_eq!(text.matches("(e) latency at ").count(), 20);
    assert!(text.contains("... and 5 more"), "{text}");
}

#[test]
fn fenwick_counts_below() {
    let mut t = super::fenwick::Fenwick::new(5);
    for i in [0, 2, 2, 4] {
        t.add(i);
    }
    assert_eq!(
        (0..=6).map(|k| t.below(k)).collect::<Vec<_>>(),
        vec![0, 1, 1, 3, 3, 4, 4]
    );
}

#[test]
fn downsampling_keeps_the_peak() {
    let points: Vec<(f64, f64)> = (0..10_000)
        .map(|i| (i as f64, if i == 7777 { 99.0 } else { 1.0 }))
        .collect();
    let d = super::svg::downsample(&points, 2000);
    assert!(d.len() <= 2000);
    assert!(d.iter().any(|p| p.1 == 99.0));
}

// The command ---------------------------------------------------------------------------------

fn write_temp(name: &str, records: &[Record]) -> String {
    let path = std::env::temp_dir().join(format!("sl-check-{}-{name}", std::process::id()));
    let text: Vec<String> = records.iter().map(Record::to_line).collect();
    std::fs::write(&path, text.join("\n")).expect("write a temp file");
    path.display().to_string()
}

#[test]
fn exit_codes() {
    let clean = write_temp("clean.jsonl", &clean_fifo(20));
    let bad = write_temp(
        "bad.jsonl",
        &[
            Record::Run(run(Mode::Shm, 3)),
            Record::Req(wait(1, 100, 1)),
            Record::Req(wait(1, 1100, 2)),
        ],
    );
    let no_run = write_temp("norun.jsonl", &[Record::Req(wait(1, 100, 1))]);
    let report = format!("{clean}.html");
    let summary = format!("{clean}.txt");
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        main(&args(&[&clean, "--report", &report, "--summary", &summary])),
        ExitCode::SUCCESS
    );
    let written = std::fs::read_to_string(&summary).expect("summary written");
    assert!(written.contains("result: PASS"));
    assert!(std::fs::metadata(&report).is_ok_and(|m| m.len() > 1000));
    assert_eq!(main(&args(&[&bad])), ExitCode::from(1));
    assert_eq!(
        main(&args(&[&bad, "--position-tolerance", "1"])),
        ExitCode::SUCCESS
    );
    assert_eq!(main(&args(&[&no_run])), ExitCode::from(2));
    assert_eq!(
        main(&args(&["/nonexistent/history.jsonl"])),
        ExitCode::from(2)
    );
    assert_eq!(main(&args(&[])), ExitCode::from(2));
    assert_eq!(main(&args(&[&clean, "--bogus"])), ExitCode::from(2));
    assert_eq!(
        main(&args(&[&clean, "--latency-slack-ms", "x"])),
        ExitCode::from(2)
    );
    assert_eq!(main(&args(&["--help"])), ExitCode::SUCCESS);
    for p in [clean, bad, no_run, report, summary] {
        let _ = std::fs::remove_file(p);
    }
}
