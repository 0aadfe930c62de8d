//! The arrival-bucket counts' script (core/src/fleet/tally.lua) against a real `redis-server`,
//! side by side with its Rust twin [`Ledger`]: the same node reports at the same times must
//! give the same counts, bucket by bucket ([S22], docs/fleet.md, "Counting a long line").
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::tally::{
    tally_reply, Behind, Bucket, Caller, Clock, Counts, Delta, Ledger, Tallied, Tally, TallyReport,
    TALLY_KEYS, TALLY_SCRIPT,
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

/// Node 1's call at `now` (the fleet's clock too), its counts.
fn call(c: &mut Client, room: &str, r: &TallyReport, clock: &Clock, now: u64) -> Counts {
    let by = by(1, now);
    Counts::new(call_by(c, room, r, clock, now, &by).buckets, 0)
}

/// A node's call, a second an interval, the fleet's clock `fleet_now` (0: the server's).
fn by(node: u64, fleet_now: u64) -> Caller {
    Caller {
        node,
        interval_ms: 1_000,
        fleet_now,
    }
}

/// One call of the script: its reply, parsed.
fn call_by(
    c: &mut Client,
    room: &str,
    r: &TallyReport,
    clock: &Clock,
    now: u64,
    by: &Caller,
) -> Tallied {
    let keys = keys(room);
    let args = r.args(clock, now, TTL, by);
    let n = TALLY_KEYS.len().to_string();
    let mut all: Vec<&str> = vec!["EVAL", TALLY_SCRIPT, &n];
    all.extend(keys.iter().map(String::as_str));
    all.extend(args.iter().map(String::as_str));
    let reply = c.cmd(&packed(&all));
    tally_reply(&reply).unwrap()
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
    let (mut compared, mut peak, mut unreported) = (0, 0, 0);
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
            let by = by(n as u64 + 1, now);
            let got = call_by(&mut c, "twin", &report, &clock, now, &by);
            let counts = Counts::new(got.buckets, 0);
            assert_eq!(counts, ledger.counts(0), "at step {step}");
            assert_eq!(
                got.behind,
                ledger.called(&by, report.let_ins()),
                "at step {step}"
            );
            if step >= 10 {
                assert_eq!(got.behind.nodes, 3);
            }
            unreported += got.behind.let_ins;
            compared += 1;
            peak = peak.max(counts.total());
        }
    }
    assert_eq!(compared, 450);
    // Some let-ins were reckoned unreported as the calls came.
    assert!(unreported > 0);
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

/// What the counts lack: the other nodes' let-ins since their last calls, each at the pace of
/// its last report (its let-ins over the time since its call before; an interval for its
/// first) for the time since, an interval at most; on the server's clock when the nodes send
/// none (theirs may differ). A node silent for three intervals is gone from it, and from the
/// nodes' hash.
#[test]
fn the_counts_say_how_many_the_other_nodes_let_in_unreported() {
    let Some((_srv, mut c, clock, mut ledger)) = twin() else {
        return;
    };
    let mut at = |c: &mut Client, node: u64, ms: u64, let_ins: u64| {
        let report = TallyReport {
            let_in: vec![(5, let_ins)],
            ..TallyReport::default()
        };
        let by = by(node, ms);
        let got = call_by(c, "behind", &report, &clock, BASE, &by).behind;
        assert_eq!(got, ledger.called(&by, let_ins), "node {node} at {ms}");
        got
    };
    let behind = |nodes, let_ins| Behind { nodes, let_ins };
    assert_eq!(at(&mut c, 1, BASE, 10), behind(1, 0));
    // Node 1's 10 over its first interval: 4 in 400 ms.
    assert_eq!(at(&mut c, 2, BASE + 400, 0), behind(2, 4));
    assert_eq!(at(&mut c, 1, BASE + 1_000, 30), behind(2, 0));
    assert_eq!(at(&mut c, 2, BASE + 1_400, 5), behind(2, 12));
    // An interval at most of each: 30 and 5.
    assert_eq!(at(&mut c, 3, BASE + 2_900, 0), behind(3, 35));
    // Node 1 last called 3.1 s ago: gone.
    assert_eq!(at(&mut c, 3, BASE + 4_100, 0), behind(2, 5));
    // A clock behind the others' counts node 3 as just called (node 2: 5 a second, 600 ms).
    assert_eq!(at(&mut c, 4, BASE + 2_000, 0), behind(3, 3));
    // The server's clock: what node 7 let in over its first interval, a moment's worth.
    let report = TallyReport {
        let_in: vec![(5, 1_000)],
        ..TallyReport::default()
    };
    let got = call_by(&mut c, "server", &report, &clock, BASE, &by(7, 0)).behind;
    assert_eq!(got, behind(1, 0));
    let got = call_by(&mut c, "server", &report, &clock, BASE, &by(8, 0)).behind;
    assert_eq!(got.nodes, 2);
    assert!(got.let_ins < 1_000, "{got:?}");
    let key = &keys("server")[10];
    let Value::Bulk(kept) = c.cmd(&packed(&["HGET", key, "7"])) else {
        panic!("node 7's call not kept");
    };
    let kept = String::from_utf8(kept).unwrap();
    let when: u64 = kept.split(' ').next().unwrap().parse().unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(when.abs_diff(wall) < 60_000, "{kept} at {wall}");
    assert!(kept.ends_with(" 1000 1000"), "{kept}");
}

#[test]
fn a_broken_reply_is_an_error_not_counts() {
    let reply = |text: &str| Value::Bulk(text.as_bytes().to_vec());
    assert_eq!(
        tally_reply(&reply("3 1500 7 2 3 1 7100 7250 9 1 1 0 0 0")).unwrap(),
        Tallied {
            buckets: vec![
                Bucket::of(7, 2, 3, 1).spanning(7_100, 7_250),
                Bucket::of(9, 1, 1, 0)
            ],
            behind: Behind {
                nodes: 3,
                let_ins: 1_500
            }
        }
    );
    assert_eq!(
        tally_reply(&reply("1 0")).unwrap(),
        Tallied {
            buckets: vec![],
            behind: Behind {
                nodes: 1,
                let_ins: 0
            }
        }
    );
    let broken = [
        Value::Int(1),
        Value::Array(vec![]),
        Value::Nil,
        reply(""),
        reply("1"),
        reply("1 0 7 2 3"),
        reply("1 0 7 2 3 1"),
        reply("1 0 7 -2 3 1 0 0"),
        reply("1 0 7 2 3 x 0 0"),
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
