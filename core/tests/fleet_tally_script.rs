//! The arrival-bucket counts' script (core/src/fleet/tally.lua) against a real `redis-server`,
//! side by side with its Rust twin [`Ledger`]: the same node reports at the same times must
//! give the same counts, bucket by bucket. The module does not call the script yet ([S22],
//! docs/fleet.md, "Counting a long line").
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::tally::{
    tally_reply, Bucket, Clock, Counts, Ledger, Tally, TallyReport, ROLL_CAP, TALLY_SCRIPT,
};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::ReplyError;
use support::{packed, start, Client};

const BASE: u64 = 1_800_000_000_000;
const PRESENCE: u64 = 20_000; // epochs of 5 s
const TTL: u64 = 600_000;

/// The script's keys for one room.
fn keys(room: &str) -> Vec<String> {
    ["by_epoch", "index", "n", "placed", "let_in"]
        .iter()
        .map(|k| format!("smart_limit:{{{room}}}:tally:{k}"))
        .collect()
}

/// One call of the script: its reply, parsed.
fn call(c: &mut Client, room: &str, r: &TallyReport, clock: &Clock, now: u64) -> (bool, Counts) {
    let keys = keys(room);
    let args = r.args(clock, now, TTL);
    let mut all: Vec<&str> = vec!["EVAL", TALLY_SCRIPT, "5"];
    all.extend(keys.iter().map(String::as_str));
    all.extend(args.iter().map(String::as_str));
    let reply = c.cmd(&packed(&all));
    let (rolled, buckets) = tally_reply(&reply).unwrap();
    (rolled, Counts::new(buckets, 0))
}

/// xorshift64*: the same clients every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

struct Person {
    arrival: u64,
    stamp: Option<u64>,
    gone: bool,
}

#[test]
fn the_script_counts_as_the_ledger_does_through_polls_admissions_and_rolls() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let clock = Clock::new(PRESENCE);
    let mut ledger = Ledger::new(clock);
    let mut nodes = [Tally::default(), Tally::default(), Tally::default()];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut clients: Vec<Person> = Vec::new();
    let (mut compared, mut peak) = (0, 0);
    // 150 s in 100 ms steps: clients arrive for the first 90 s, poll every 1-5 s on any node
    // (round robin as often as not), a few are let in, some stop polling (their count leaves
    // with the window).
    for step in 0..1_500u64 {
        let now = BASE + step * 100;
        if step < 900 && rng.below(3) == 0 {
            clients.push(Person {
                arrival: now,
                stamp: None,
                gone: false,
            });
        }
        for cl in clients.iter_mut().filter(|cl| !cl.gone) {
            if rng.below(30) != 0 {
                continue;
            }
            let node = &mut nodes[rng.below(3) as usize];
            match rng.below(40) {
                0 => cl.gone = true,
                1 if cl.stamp.is_some() => {
                    node.left(&clock, cl.arrival, cl.stamp.unwrap_or(0), now);
                    cl.gone = true;
                }
                _ => {
                    if node.seen(&clock, cl.arrival, cl.stamp, now) {
                        cl.stamp = Some(now);
                    }
                }
            }
        }
        // Each node syncs once a second, a third of a second apart.
        if step % 10 < 3 {
            let n = (step % 10) as usize;
            let report = nodes[n].take();
            ledger.apply(&report, now);
            let (rolled, counts) = call(&mut c, "twin", &report, &clock, now);
            assert!(rolled, "at step {step}");
            assert_eq!(counts, ledger.counts(0), "at step {step}");
            compared += 1;
            peak = peak.max(counts.total());
        }
    }
    assert_eq!(compared, 450);
    // A line was counted, and everyone left the counts a window after the last poll.
    assert!(peak > 50, "{peak} of {} clients", clients.len());
    let end = BASE + 150_000 + PRESENCE * 2;
    ledger.apply(&TallyReport::default(), end);
    let (_, counts) = call(&mut c, "twin", &TallyReport::default(), &clock, end);
    assert_eq!(counts, ledger.counts(0));
    assert_eq!(counts.total(), 0);
}

#[test]
fn a_roll_longer_than_the_cap_is_finished_by_the_next_calls() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let clock = Clock::new(PRESENCE);
    let mut ledger = Ledger::new(clock);
    // One node counts ROLL_CAP + 10 buckets (one waiter each) in one epoch.
    let mut t = Tally::default();
    let n = ROLL_CAP + 10;
    for i in 0..n {
        t.seen(&clock, BASE - 3_600_000 + i * 1000, None, BASE);
    }
    let report = t.take();
    ledger.apply(&report, BASE);
    let (rolled, counts) = call(&mut c, "cap", &report, &clock, BASE);
    assert!(rolled);
    assert_eq!(counts.total(), n);
    assert_eq!(counts, ledger.counts(0));
    // A window later, nobody was seen again: the first call takes ROLL_CAP entries off and says
    // it did not finish; the next takes the rest.
    let later = BASE + PRESENCE * 2;
    let (rolled, counts) = call(&mut c, "cap", &TallyReport::default(), &clock, later);
    assert!(!rolled);
    assert_eq!(counts.total(), 10);
    let (rolled, counts) = call(&mut c, "cap", &TallyReport::default(), &clock, later + 1);
    ledger.roll(later + 1);
    assert!(rolled);
    assert_eq!((counts.total(), counts), (0, ledger.counts(0)));
}

#[test]
fn a_broken_reply_is_an_error_not_counts() {
    let reply = |rolled: i64, text: &str| {
        Value::Array(vec![
            Value::Int(rolled),
            Value::Bulk(text.as_bytes().to_vec()),
        ])
    };
    assert_eq!(
        tally_reply(&reply(1, "7 2 3 1 9 1 1 0")).unwrap(),
        (true, vec![Bucket::of(7, 2, 3, 1), Bucket::of(9, 1, 1, 0)])
    );
    assert_eq!(tally_reply(&reply(0, "")).unwrap(), (false, vec![]));
    let broken = [
        Value::Int(1),
        Value::Array(vec![]),
        Value::Array(vec![Value::Int(1)]),
        reply(1, "7 2 3"),
        reply(1, "7 -2 3 1"),
        reply(1, "7 2 3 x"),
        Value::Array(vec![Value::Int(1), Value::Int(7)]),
        Value::Error(b"ERR smart_limit tally: bad arguments".to_vec()),
    ];
    for v in broken {
        assert!(tally_reply(&v).is_err(), "{v:?}");
    }
    assert!(matches!(
        tally_reply(&Value::Error(b"ERR x".to_vec())),
        Err(ReplyError::Server(_))
    ));
}
