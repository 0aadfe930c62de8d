//! The fleet rate's sync script (core/src/rate/script.lua) against a real `redis-server`:
//! per-node rates from successive cumulative reports, one window summed for all nodes, late
//! (older) reports ignored, silent nodes dropped from the sum, totals that only grow, one key
//! with a TTL.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use std::time::Duration;

use smart_limit_core::rate::{sync_reply, FleetPicture, RateZoneParams, SyncArgs, SyncScript};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::Form;
use support::{packed, start, Client};

fn zone(interval: &str) -> RateZoneParams {
    let line = format!("api rate=100r/s redis=127.0.0.1:1 interval={interval}");
    let words: Vec<&str> = line.split(' ').collect();
    RateZoneParams::parse(&words).unwrap()
}

struct Report {
    node: u64,
    seq: u64,
    offered: u64,
    own: u64,
    window: u64,
    at: u64,
}

fn sync(c: &mut Client, s: &SyncScript, r: Report) -> FleetPicture {
    let args = SyncArgs {
        node_id: r.node,
        seq: r.seq,
        offered: r.offered,
        passed: r.offered / 2,
        own_rate_milli: r.own,
        window_ms: r.window,
        at_ms: r.at,
    };
    let v = c.cmd(&s.call(Form::Sha, &args));
    sync_reply(&v).unwrap_or_else(|e| panic!("{e}: {v:?}"))
}

/// Node `node`'s report number `seq` of window `seq * 1000`, read 2 ms after the boundary.
fn report(node: u64, seq: u64, offered: u64) -> Report {
    Report {
        node,
        seq,
        offered,
        own: 0,
        window: seq * 1000,
        at: seq * 1000 + 2,
    }
}

#[test]
fn rates_come_from_successive_reports_and_never_go_negative() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let s = SyncScript::new(&zone("1s"));
    assert_eq!(
        c.cmd(&SyncScript::load_command()),
        Value::Bulk(s.sha.clone().into_bytes())
    );
    // First reports: each node's own measurement stands for it.
    let p = sync(
        &mut c,
        &s,
        Report {
            own: 3_000_000,
            ..report(1, 1, 0)
        },
    );
    assert_eq!((p.offered_milli, p.nodes, p.accepted), (3_000_000, 1, true));
    let p = sync(
        &mut c,
        &s,
        Report {
            own: 1_000_000,
            ..report(2, 1, 0)
        },
    );
    assert_eq!((p.offered_milli, p.nodes), (4_000_000, 2));
    // Window 2: node 1 counted 3000 more over its own second (3000 r/s). Node 2 has not
    // reported window 2 yet: both nodes' rates for window 1 are summed (node 1's first one).
    let p = sync(&mut c, &s, report(1, 2, 3000));
    assert_eq!((p.offered_milli, p.window_ms), (4_000_000, 1000));
    // ... and node 1's own rate is the one of that same window.
    assert_eq!(p.own_offered_milli, 3_000_000);
    assert_eq!((p.offered_total, p.passed_total), (3000, 1500));
    // Node 2 reports window 2 (500 more: 500 r/s): window 2 is complete, its rates are summed.
    let p = sync(&mut c, &s, report(2, 2, 500));
    assert_eq!((p.offered_milli, p.window_ms), (3_500_000, 2000));
    assert_eq!(p.own_offered_milli, 500_000);
    // A late report (older seq, smaller counts: a sync its node abandoned) is ignored: the
    // rates and the totals stay as they were; nothing runs backwards.
    let late = sync(&mut c, &s, report(1, 1, 100));
    assert!(!late.accepted);
    assert_eq!((late.offered_milli, late.offered_total), (3_500_000, 3500));
    // Counts that went backwards with a newer seq and window are ignored too.
    let odd = sync(&mut c, &s, report(1, 3, 10));
    assert!(!odd.accepted);
    assert_eq!(odd.offered_total, 3500);
    // No traffic on node 2 in window 3: rate 0, never negative.
    sync(&mut c, &s, report(1, 3, 6000));
    let p = sync(&mut c, &s, report(2, 3, 500));
    assert_eq!((p.offered_milli, p.window_ms), (3_000_000, 3000));
    let ttl = c.cmd(&packed(&["PTTL", &s.key]));
    assert!(matches!(ttl, Value::Int(t) if t > 0), "{ttl:?}");
}

#[test]
fn a_silent_node_drops_out_after_the_stale_time() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    // interval 100ms: a node unheard of for 300 ms (by Redis's clock) drops out.
    let s = SyncScript::new(&zone("100ms"));
    c.cmd(&SyncScript::load_command());
    sync(
        &mut c,
        &s,
        Report {
            own: 2_000_000,
            ..report(1, 1, 0)
        },
    );
    let p = sync(
        &mut c,
        &s,
        Report {
            own: 5_000_000,
            ..report(2, 1, 0)
        },
    );
    assert_eq!((p.offered_milli, p.nodes), (7_000_000, 2));
    std::thread::sleep(Duration::from_millis(400));
    let p = sync(&mut c, &s, report(2, 2, 2000));
    assert_eq!(p.nodes, 1, "node 1 stopped reporting");
    assert_eq!(p.offered_milli, 2_000_000);
    let fields = c.cmd(&packed(&["HKEYS", &s.key]));
    let Value::Array(f) = fields else {
        panic!("{fields:?}")
    };
    assert_eq!(f.len(), 2, "node 2 and the fleet totals: {f:?}");
}

#[test]
fn bad_arguments_are_an_error_reply() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let s = SyncScript::new(&zone("1s"));
    c.cmd(&SyncScript::load_command());
    let mut args = vec!["EVALSHA", &s.sha, "1", &s.key, "x"];
    args.extend(["1"; 8]);
    let v = c.cmd(&packed(&args));
    assert!(matches!(v, Value::Error(_)), "{v:?}");
    assert!(sync_reply(&v).is_err());
}
