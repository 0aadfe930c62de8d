//! The arrival-bucket counts' script (core/src/fleet/tally.lua) against a real `redis-server`,
//! side by side with its Rust twin [`Ledger`]: the same node reports at the same times must
//! give the same counts, bucket by bucket ([S22], docs/fleet.md, "Counting a long line").
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::tally::{
    tally_reply, Bucket, Clock, Counts, Delta, Ledger, Tally, TallyReport, TALLY_KEYS, TALLY_SCRIPT,
};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::ReplyError;
use support::{packed, start, Client, Server};

const BASE: u64 = 1_800_000_000_000;
const PRESENCE: u64 = 20_000; // epochs of 5 s
const TTL: u64 = 600_000;

/// The script's keys for one room.
fn keys(room: &str) -> Vec<String> {
    TALLY_KEYS
        .iter()
        .map(|k| format!("smart_limit:{{{room}}}:tally:{k}"))
        .collect()
}

/// One call of the script: its reply, parsed.
fn call(c: &mut Client, room: &str, r: &TallyReport, clock: &Clock, now: u64) -> Counts {
    let keys = keys(room);
    let args = r.args(clock, now, TTL);
    let n = TALLY_KEYS.len().to_string();
    let mut all: Vec<&str> = vec!["EVAL", TALLY_SCRIPT, &n];
    all.extend(keys.iter().map(String::as_str));
    all.extend(args.iter().map(String::as_str));
    let reply = c.cmd(&packed(&all));
    Counts::new(tally_reply(&reply).unwrap(), 0)
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

/// A server, a connection to it, the room's clock and the Rust twin, for one test (None: no
/// `redis-server` here).
fn twin() -> Option<(Server, Client, Clock, Ledger)> {
    let srv = start()?;
    let c = Client::connect(srv.port).unwrap();
    let clock = Clock::new(PRESENCE);
    Some((srv, c, clock, Ledger::new(clock)))
}

struct Person {
    arrival: u64,
    stamp: Option<u64>,
    gone: bool,
}

#[test]
fn the_script_counts_as_the_ledger_does_through_polls_admissions_and_rolls() {
    let Some((_srv, mut c, clock, mut ledger)) = twin() else {
        return;
    };
    let mut nodes = [Tally::default(), Tally::default(), Tally::default()];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut clients: Vec<Person> = Vec::new();
    let (mut compared, mut peak) = (0, 0);
    // 150 s in 100 ms steps: clients arrive for the first 90 s and poll about every 3 s (a
    // chance in 30 each step), each time on one of the three nodes at random; a few are let
    // in, some stop polling (their count leaves with the window).
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
            let counts = call(&mut c, "twin", &report, &clock, now);
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
    let counts = call(&mut c, "twin", &TallyReport::default(), &clock, end);
    assert_eq!(counts, ledger.counts(0));
    assert_eq!(counts.total(), 0);
}

#[test]
fn an_epoch_leaves_whole_and_its_slot_serves_a_later_one() {
    let Some((_srv, mut c, clock, mut ledger)) = twin() else {
        return;
    };
    let e = clock.epoch(BASE);
    let delta = |epoch: u64, bucket: u64, delta: i64| Delta {
        epoch,
        bucket,
        delta,
    };
    // 3,000 buckets of one waiter each in epoch e, 2 waiters of bucket 7 in e + 1, and deltas
    // the window refuses: one to an epoch gone, one two epochs ahead.
    let mut report = TallyReport {
        deltas: (0..3000).map(|b| delta(e, 100 + b, 1)).collect(),
        ..TallyReport::default()
    };
    report
        .deltas
        .extend([delta(e + 1, 7, 2), delta(e - 5, 9, 4), delta(e + 2, 9, 8)]);
    ledger.apply(&report, BASE);
    let counts = call(&mut c, "slots", &report, &clock, BASE);
    assert_eq!((counts.total(), &counts), (3002, &ledger.counts(0)));
    // Epoch e + 6 takes epoch e's slot: e left the window whole, e + 1 with it; a waiter of
    // bucket 8 is counted in e + 6.
    let later = BASE + 6 * clock.epoch_ms;
    let report = TallyReport {
        deltas: vec![delta(e + 6, 8, 1)],
        ..TallyReport::default()
    };
    ledger.apply(&report, later);
    let counts = call(&mut c, "slots", &report, &clock, later);
    assert_eq!((counts.total(), &counts), (1, &ledger.counts(0)));
}

#[test]
fn a_broken_reply_is_an_error_not_counts() {
    let reply = |text: &str| Value::Bulk(text.as_bytes().to_vec());
    assert_eq!(
        tally_reply(&reply("7 2 3 1 7100 7250 9 1 1 0 0 0")).unwrap(),
        vec![
            Bucket::of(7, 2, 3, 1).spanning(7_100, 7_250),
            Bucket::of(9, 1, 1, 0)
        ]
    );
    assert_eq!(tally_reply(&reply("")).unwrap(), vec![]);
    let broken = [
        Value::Int(1),
        Value::Array(vec![]),
        Value::Nil,
        reply("7 2 3"),
        reply("7 2 3 1"),
        reply("7 -2 3 1 0 0"),
        reply("7 2 3 x 0 0"),
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
