//! The synced room's script against a real `redis-server`, beside its Rust twin (as in
//! fleet_script.rs): the sessions the nodes report. A session seen on every node counts once,
//! a late report keeps the time of its sightings, sessions stay through a silence until every
//! node can have reported, an admitted session never rejoins the line, and a revoked one
//! leaves the fleet with the next sync.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::{Report, SyncAnswer};

use support::start;
use support::twin::{cfg, fence, sighting, waiter, waiters, Twin, BASE};

#[test]
fn a_session_seen_on_every_node_counts_once() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "once", cfg(10));
    let now = BASE + 10_000;
    let seen = |sids: &[u64], at: u64| Report {
        active: sids.iter().map(|&s| sighting(s, at)).collect(),
        ..Report::default()
    };
    t.sync(1, now, &seen(&[1, 2, 3], now));
    t.sync(2, now + 1, &seen(&[2, 3, 4], now + 1));
    let p = t.sync(3, now + 2, &seen(&[1, 4], now + 2));
    assert_eq!(p.fleet_active, 4);
    // Unseen for the active window: gone (syncs at least every 3 s: no silence).
    for at in [3_000, 6_000, 9_000] {
        t.sync(2, now + at, &seen(&[], now));
    }
    let p = t.sync(1, now + 10_003, &seen(&[1], now + 10_003));
    assert_eq!(p.fleet_active, 1);
}

#[test]
fn a_late_report_keeps_the_time_of_its_sightings() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "late", cfg(10));
    let now = BASE + 10_000;
    let seen = |sids: &[u64], at: u64| Report {
        active: sids.iter().map(|&s| sighting(s, at)).collect(),
        ..Report::default()
    };
    // Session 1 was seen at `now` but reported 9 s later (a sync that failed, given back);
    // session 2 was seen just before that report. Another node's older sighting of 2 does not
    // move it back.
    t.sync(1, now + 9_000, &seen(&[1, 2], now));
    t.sync(2, now + 9_001, &seen(&[2], now + 8_999));
    let p = t.sync(2, now + 9_500, &seen(&[2], now + 100));
    assert_eq!(p.fleet_active, 2);
    // Its window ends 10 s after it was seen, not after it was reported.
    let p = t.sync(1, now + 10_001, &seen(&[], now));
    assert_eq!(p.fleet_active, 1);
    // (Syncs at least every 3 s: a longer silence holds expiry, see below.)
    for at in [12_000, 15_000, 18_000] {
        t.sync(1, now + at, &seen(&[], now));
    }
    let p = t.sync(1, now + 19_000, &seen(&[], now));
    assert_eq!(p.fleet_active, 0);
}

#[test]
fn after_a_silence_sessions_stay_until_every_node_can_have_reported() {
    let Some(srv) = start() else { return };
    let seen = |sids: &[u64], at: u64| Report {
        active: sids.iter().map(|&s| sighting(s, at)).collect(),
        ..Report::default()
    };
    let now = BASE + 10_000;
    // Three nodes see sessions 1, 2 (node 1), 3 (node 2) and 4 (node 3) every second, and
    // node 2 a waiter, 9; then Redis is away for 12 s (more than the 10 s window and the 5 s
    // presence). Sessions 1 and 3 went on (their nodes kept the sightings), 2 and 4 left; 9
    // still waits.
    let before = |room: &str| {
        let mut t = Twin::new(srv.port, room, cfg(10));
        for at in [0, 1_000, 2_000] {
            t.sync(1, now + at, &seen(&[1, 2], now + at));
            let mut r = seen(&[3], now + at);
            r.waiters.push(waiter(9, 5_000, now + at));
            t.sync(2, now + at + 1, &r);
            t.sync(3, now + at + 2, &seen(&[4], now + at));
        }
        t
    };
    // Node 1 is back first: the fleet has not heard from nodes 2 and 3 since, so sessions 3
    // and 4 (last known 12 s ago) keep their places, and so does 2; waiter 9 keeps its place
    // in the line.
    let mut t = before("silence-all");
    let p = t.sync(1, now + 14_000, &seen(&[1], now + 13_000));
    assert_eq!((p.fleet_active, p.queue_len), (4, 1));
    assert!(p.quota <= 10 - 4, "{p:?}");
    let p = t.sync(2, now + 14_200, &seen(&[3], now + 12_000));
    assert_eq!(p.fleet_active, 4);
    // A sync node 3 built during the silence runs now (sent on a connection it gave up on):
    // it does not say what node 3 saw since.
    let built = fence(3, 10, now + 3_000);
    let p = t.sync_fenced(built, now + 14_300, &seen(&[], now));
    assert!(
        matches!(p, SyncAnswer::Picture(ref p) if p.fleet_active == 4),
        "{p:?}"
    );
    // Once all three have synced after the silence, expiry is back where it was: 2 and 4
    // are gone.
    t.seqs.insert(3, 10);
    let p = t.sync(3, now + 14_400, &seen(&[], now));
    assert_eq!(p.fleet_active, 2);

    // Node 3 does not come back: the hold ends a node's staleness (3 intervals) after the
    // first call.
    let mut t = before("silence-one-gone");
    t.sync(1, now + 14_000, &seen(&[1], now + 13_000));
    let p = t.sync(2, now + 14_200, &seen(&[3], now + 12_000));
    assert_eq!(p.fleet_active, 4);
    let p = t.sync(1, now + 16_900, &seen(&[], now));
    assert_eq!(p.fleet_active, 4);
    let p = t.sync(1, now + 17_001, &seen(&[], now));
    assert_eq!(p.fleet_active, 2);
    // Without the hold, node 1's first sync would have counted one session, and given the
    // places of 3 (in use) away.
}

#[test]
fn an_admitted_session_never_rejoins_the_line() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "rejoin", cfg(10));
    let now = BASE + 10_000;
    // Client 7 waits on node 1 and node 2; node 2 admits it and reports first; node 1's late
    // report of it waiting does not put it back in the line.
    t.sync(1, now, &waiters(&[(7, 1000), (8, 2000)]));
    let admitted = Report {
        admitted: vec![sighting(7, now + 5)],
        waiters: vec![waiter(7, 1000, now)],
        ..Report::default()
    };
    let p = t.sync(2, now + 10, &admitted);
    assert_eq!((p.fleet_active, p.queue_len), (1, 1));
    let p = t.sync(1, now + 1000, &waiters(&[(7, 1000)]));
    assert_eq!((p.fleet_active, p.queue_len), (1, 1));
    assert_eq!(p.samples[0].arrival, BASE + 2000);
}

/// A session the origin revoked on a node leaves the fleet's active sessions with that node's
/// next sync (issue 50, item 6), after the report's own sightings of it, so its place is free
/// for the next share-out; on both twins alike.
#[test]
fn a_revoked_session_leaves_the_fleet_with_the_next_sync() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "revoke", cfg(1));
    let now = BASE + 10_000;
    let admitted = Report {
        admitted: vec![sighting(11, now)],
        ..Report::default()
    };
    let p = t.sync(1, now + 500, &admitted);
    assert_eq!((p.fleet_active, p.free), (1, 0));
    // Seen active and revoked in the same interval: revoked wins.
    let revoked = Report {
        active: vec![sighting(11, now + 900)],
        revoked: vec![11, 99],
        ..Report::default()
    };
    let p = t.sync(1, now + 1000, &revoked);
    assert_eq!((p.fleet_active, p.free), (0, 1));
}

/// A session admitted, seen waiting and revoked within one interval (a client let in at its
/// first poll, whose origin ends the session at once): its waiting sighting does not bring it
/// back into the line, where it would stand ahead of everyone until presence. Found by
/// t/380-tokens.t (the client behind it waited ~20 s at position 2 of 2); on both twins.
#[test]
fn a_session_revoked_in_the_report_that_saw_it_waiting_does_not_join_the_line() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "revoke-waiting", cfg(1));
    let now = BASE + 10_000;
    let p = t.sync(
        1,
        now + 200,
        &Report {
            waiters: vec![waiter(11, now, now), waiter(12, now + 50, now + 50)],
            admitted: vec![sighting(11, now + 10)],
            revoked: vec![11],
            ..Report::default()
        },
    );
    assert_eq!((p.fleet_active, p.queue_len), (0, 1), "{p:?}");
}
