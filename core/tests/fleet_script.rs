//! The synced room's script (core/src/fleet/script.lua) against a real `redis-server`, side by
//! side with its Rust twin [`FleetModel`](smart_limit_core::fleet::FleetModel) (what the
//! simulator runs; `support::twin`): the same syncs and draws at the same times must give the
//! same pictures and grants. Also the rules themselves: the cursor takes the oldest waiters,
//! grants never exceed `max_active`, a client seen on two nodes is counted once. Flood
//! control: fleet_flood_script.rs; the join proof's fleet state: fleet_challenge_script.rs.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::{
    Ask, Fence, FleetConfig, Report, SpentProof, SyncAnswer, EXACT_LINE,
};
use std::collections::HashMap;

use support::start;
use support::twin::{cfg, fence, sighting, waiter, waiters, Twin, BASE};

#[test]
fn the_cursor_takes_the_oldest_and_grants_never_exceed_max_active() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "rules", cfg(3));
    let now = BASE + 10_000;
    // Node 1 saw waiters who arrived at 1, 5, 9 s; node 2 at 2, 6 s.
    t.sync(1, now, &waiters(&[(11, 1000), (15, 5000), (19, 9000)]));
    let p = t.sync(2, now + 5, &waiters(&[(22, 2000), (26, 6000)]));
    assert_eq!(p.queue_len, 5);
    // 3 free places: the 3 oldest (1, 2, 5 s), whichever node saw them, and the band beyond
    // them: up to as many again who came within an interval of the third (6 s; not 9 s).
    assert_eq!(p.cursor, BASE + 6000);
    // The first interval (nobody polled before it) shared half its 3 free places (KEEP_PPM)
    // equally by the nodes it knew, not by whoever synced first: node 1, alone, 1 (the half
    // place carried); node 2 a half of the half: 0.75, none.
    assert_eq!(p.quota, 0);
    // Next interval: node 1 reports (its grant is released, it admitted nobody): 3 free
    // places, shared by the polls (node 2's).
    let p1 = t.sync(1, now + 1000, &waiters(&[]));
    assert_eq!((p1.free, p1.quota), (3, 0));
    // Node 2 reports (its grant released); it answered no polls this time: no share.
    let p2 = t.sync(2, now + 1001, &waiters(&[]));
    assert_eq!(p2.quota, 0);
    // The pool: grants and draws never exceed the free places (3), then none.
    assert_eq!(t.draw(2, now + 1002, 1), 1);
    assert_eq!(t.draw(2, now + 1002, 5), 2);
    assert_eq!(t.draw(1, now + 1003, 1), 0);
    // Node 1 admitted waiter 11 (its grant): reported, it is active and out of the line;
    // node 2's grants and draws are released by its report too.
    let r = Report {
        admitted: vec![sighting(11, now + 1500)],
        ..Report::default()
    };
    let p = t.sync(1, now + 2000, &r);
    assert_eq!((p.fleet_active, p.queue_len), (1, 4));
}

/// A room for the starved-mark tests. Interval W0 (`now`): node 1 sees five waiters (arrived
/// at 1..5 s) and takes its share; node 2 draws the pool empty for the youngest, then finds it
/// empty for the head (`starve`), or does not (no mark). Then the syncs of the interval `later`
/// ms on, node 2 first (so the rooms compared share the same free places), node 1 reporting
/// `r1`.
fn starved_room(port: u16, name: &str, now: u64, starve: bool, later: u64, r1: &Report) -> Twin {
    let mut t = Twin::new(port, name, cfg(6));
    let line = [(11, 1000), (12, 2000), (13, 3000), (14, 4000), (15, 5000)];
    t.sync(1, now, &waiters(&line));
    t.sync(2, now + 1, &waiters(&[]));
    if starve {
        assert!(t.draw_for(2, now + 2, 50, BASE + 5000) < 50);
        assert_eq!(t.draw_for(2, now + 3, 1, BASE + 1000), 0);
    }
    t.sync(2, now + later, &waiters(&[]));
    t.sync(1, now + later + 1, r1);
    t
}

/// Node 2 draws all it can for the youngest (arrived at 5 s), then node 1 one place for a
/// client who arrived at `head` ms: what each got.
fn young_then_head(t: &mut Twin, at: u64, head: u64) -> (u64, u64) {
    let young = t.draw_for(2, at, 50, BASE + 5000);
    (young, t.draw_for(1, at + 1, 1, BASE + head))
}

#[test]
fn the_pool_keeps_a_place_for_the_oldest_client_a_draw_found_it_empty_for() {
    let Some(srv) = start() else { return };
    let (now, none) = (BASE + 10_000, waiters(&[]));
    // Without a mark, a draw for a young client takes what the pool has.
    let mut t = starved_room(srv.port, "unmarked", now, false, 1000, &none);
    let (all, head) = young_then_head(&mut t, now + 1010, 1000);
    assert!(all >= 2, "the pool has places to keep: {all}");
    assert_eq!(head, 0);
    // With the head found starved in the interval before, the pool keeps one place from the
    // young client's draw, and a draw for the head takes it, on any node; then the mark is
    // gone and nothing more is kept.
    let mut t = starved_room(srv.port, "marked", now, true, 1000, &none);
    assert_eq!(young_then_head(&mut t, now + 1010, 1000), (all - 1, 1));
    assert_eq!(t.draw_for(2, now + 1012, 1, BASE + 5000), 0);
    // A mark lasts the interval it was set in and the next: two intervals on, nothing kept.
    let mut t = starved_room(srv.port, "lapsed", now, true, 2000, &none);
    let (later, head) = young_then_head(&mut t, now + 2010, 1000);
    assert!(later >= 2, "{later}");
    assert_eq!(head, 0);
    // The head let in (node 1 reports it): nobody at or before the mark waits, nothing kept.
    let admitted = Report {
        admitted: vec![sighting(11, now + 900)],
        ..Report::default()
    };
    let mut t = starved_room(srv.port, "served", now, true, 1000, &admitted);
    let (left, next) = young_then_head(&mut t, now + 1010, 2000);
    assert!(left >= 1, "{left}");
    assert_eq!(next, 0);
}

#[test]
fn samples_of_a_long_line_reach_its_tail_evenly() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "samples", cfg(1));
    // A line just too long to come whole (EXACT_LINE + 190 waiters): the head rank by rank,
    // then evenly to the tail, never a gap wider than the spread (a line longer than the
    // samples once had its last half interpolated from one pair of samples).
    let n = EXACT_LINE as u64 + 190;
    let list: Vec<(u64, u64)> = (0..n).map(|i| (10_000 + i, 2 * (i + 1))).collect();
    let p = t.sync(1, BASE + 10_000, &waiters(&list));
    assert_eq!((p.queue_len, p.exact), (n, false));
    let ranks: Vec<u64> = p.samples.iter().map(|s| s.rank).collect();
    assert_eq!(ranks[..32], (0..32).collect::<Vec<_>>()[..]);
    assert_eq!(ranks.last(), Some(&(n - 1)));
    let spread = (n - 32).div_ceil(64);
    let widest = ranks.windows(2).map(|w| w[1] - w[0]).max();
    assert_eq!(widest, Some(spread), "{ranks:?}");
    assert!(p.samples.iter().all(|s| s.sid == 0));
}

#[test]
fn a_short_line_comes_whole_in_the_fleets_order() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "whole", cfg(2));
    // Sessions 9, 10 and 100 arrived in one millisecond: Redis orders members of one score by
    // their bytes ("10" < "100" < "9"), and so must the nodes, or two of them would be told
    // one position.
    let p = t.sync(
        1,
        BASE + 10_000,
        &waiters(&[(9, 500), (10, 500), (7, 900), (100, 500)]),
    );
    let p2 = t.sync(2, BASE + 10_010, &waiters(&[(3, 100), (1_000_000, 900)]));
    assert!(p2.exact);
    let order: Vec<(u64, u64, u64)> = p2
        .samples
        .iter()
        .map(|s| (s.rank, s.arrival - BASE, s.sid))
        .collect();
    assert_eq!(
        order,
        [
            (0, 100, 3),
            (1, 500, 10),
            (2, 500, 100),
            (3, 500, 9),
            (4, 900, 1_000_000),
            (5, 900, 7)
        ]
    );
    assert_eq!(p.samples.len(), 4);
    // A line of exactly EXACT_LINE still comes whole; one more and it is sampled.
    let list: Vec<(u64, u64)> = (0..EXACT_LINE as u64 - 6)
        .map(|i| (20_000 + i, 1000 + i))
        .collect();
    let p = t.sync(1, BASE + 11_000, &waiters(&list));
    assert_eq!(
        (p.queue_len, p.exact, p.samples.len()),
        (EXACT_LINE as u64, true, EXACT_LINE)
    );
    let p = t.sync(2, BASE + 11_010, &waiters(&[(99_999, 5000)]));
    assert_eq!((p.queue_len, p.exact), (EXACT_LINE as u64 + 1, false));
    assert!(p.samples.len() <= 121);
}

#[test]
fn samples_of_a_longer_line_stay_close_near_its_head() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "samples-head", cfg(1));
    // 5,000 waiters: evenly spaced, samples would be 78 ranks apart from rank 32 on, and a
    // waiter at rank 100 would be told its place from a pair of samples 78 apart; near the
    // head they are at most a quarter of their rank apart instead, and the rest still reach
    // the tail no wider than the even spacing.
    let list: Vec<(u64, u64)> = (0..5000).map(|i| (10_000 + i, i + 1)).collect();
    let p = t.sync(1, BASE + 10_000, &waiters(&list));
    assert_eq!(p.queue_len, 5000);
    let ranks: Vec<u64> = p.samples.iter().map(|s| s.rank).collect();
    assert_eq!(ranks[..32], (0..32).collect::<Vec<_>>()[..]);
    assert_eq!(ranks.last(), Some(&4999));
    assert!(ranks.len() <= 121, "{}", ranks.len());
    for w in ranks.windows(2) {
        let gap = w[1] - w[0];
        assert!(gap <= 78, "{ranks:?}");
        assert!(gap <= (w[0] / 4).max(1) || w[0] >= 4 * 78, "{ranks:?}");
    }
}

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

/// The grants' held places are the last of an interval to free, and are of one interval end
/// (hz): places an earlier end's grant still waits for are given to nobody else, and a late
/// sync of an earlier window does not move the end.
#[test]
fn held_places_of_two_interval_ends_are_never_given_twice() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "two_ends", cfg(10));
    let tick = BASE + 20_000;
    // The room is full: 10 sessions, whose windows end at tick + 700, + 800, ... + 1600.
    let r = Report {
        active: (0..10)
            .map(|k| sighting(1 + k, tick - 9_300 + 100 * k))
            .collect(),
        polls: 10,
        ..Report::default()
    };
    t.sync(1, tick - 5_000, &r);
    let polls = |n| Report {
        polls: n,
        ..Report::default()
    };
    // Node 1, 600 ms into the interval (its end: tick + 1600): 9 places free by then, its
    // half 4, the last 4 to free (tick + 1200 .. + 1500).
    let p1 = t.sync(1, tick + 600, &polls(10));
    assert_eq!((p1.quota, p1.held), (4, 4), "{p1:?}");
    assert_eq!(p1.ends, [600, 700, 800, 900]);
    // Node 2 starts the next interval at tick + 1150 (its end: tick + 2150). Node 1 still
    // waits for sessions that end by tick + 1600 (any of the four left before it): node 2's
    // held place is the one after them (tick + 1600), and one of the 5 free now.
    let p2 = t.sync(2, tick + 1_150, &polls(1_000));
    assert_eq!((p2.fleet_active, p2.quota, p2.held), (5, 2, 1), "{p2:?}");
    assert_eq!(p2.ends, [450]);
    // The other 4 free seats are node 1's places, taken as its sessions end: none for the
    // pool.
    assert_eq!(t.draw(3, tick + 1_160, 3), 0);
    // A late sync of the last window (node 3) keeps the interval's end: node 1 waits for 3
    // more, node 2 for one; one place is free now, none to hold.
    let late = Fence {
        window: tick,
        ..fence(3, 1, tick + 1_200)
    };
    let SyncAnswer::Picture(p3) = t.sync_fenced(late, tick + 1_200, &polls(100_000)) else {
        panic!("a late sync of a new node was taken for stale");
    };
    assert_eq!((p3.fleet_active, p3.quota, p3.held), (4, 1, 0), "{p3:?}");
}

/// A node's second sync in the interval (a capped report's rest) keeps its held places where
/// they were: another node's, placed since, are never given to it again.
#[test]
fn a_second_sync_keeps_its_held_places_off_anothers() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "resync_held", cfg(10));
    let tick = BASE + 20_000;
    // The room is full: 10 sessions, whose windows end at tick + 100, + 200, ... + 1000.
    let r = Report {
        active: (0..10)
            .map(|k| sighting(1 + k, tick - 9_900 + 100 * k))
            .collect(),
        polls: 10,
        ..Report::default()
    };
    t.sync(1, tick - 5_000, &r);
    let polls = |n| Report {
        polls: n,
        ..Report::default()
    };
    // Node 1 holds the last 5 to end (tick + 600 .. + 1000), node 2 the 5 before them.
    let p1 = t.sync(1, tick + 1, &polls(10));
    assert_eq!((p1.quota, p1.held), (5, 5), "{p1:?}");
    assert_eq!(p1.ends, [599, 699, 799, 899, 999]);
    let p2 = t.sync(2, tick + 2, &polls(10));
    assert_eq!((p2.quota, p2.held), (5, 5), "{p2:?}");
    assert_eq!(p2.ends, [98, 198, 298, 398, 498]);
    // Node 1 again, in the same interval: the same 5 (placed past node 2's, it would wait
    // for node 2's sessions too, and both would take their places).
    let p1 = t.sync(1, tick + 3, &polls(0));
    assert_eq!((p1.quota, p1.held), (5, 5), "{p1:?}");
    assert_eq!(p1.ends, [597, 697, 797, 897, 997]);
    // The grants hold every place of the interval: the pool has none, early or late.
    assert_eq!(t.draw(3, tick + 4, 1), 0);
    assert_eq!(t.draw(3, tick + 700, 1), 0);
}

#[test]
fn random_syncs_and_draws_match_the_model() {
    random_run("random", cfg(20));
}

/// [S27] The same with places kept (`keep=15s`, presence 5 s), and waiters who step away for
/// 3-23 s now and then: some come back within the keep (present again at their place), some
/// after it (a new place at the tail), on both twins alike.
#[test]
fn random_runs_keeping_places_match_the_model() {
    let kept = random_run(
        "random_keep",
        FleetConfig {
            keep_ms: 15_000,
            ..cfg(20)
        },
    );
    assert!(kept.is_none_or(|k| k > 20), "{kept:?}");
}

/// Returns how many times a waiter away for longer than presence (and the sightings' lag)
/// stood in a picture's line: places kept.
fn random_run(room: &str, c: FleetConfig) -> Option<u64> {
    let srv = start()?;
    let mut t = Twin::new(srv.port, room, c);
    let mut x: u64 = 0x1234_5678;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    // Sightings are up to a few seconds old when reported (some much older: given back).
    let at = |now: u64, r: u64| now - r % 2_000 - if r.is_multiple_of(20) { 20_000 } else { 0 };
    let mut now = BASE + 60_000;
    let mut sid = 100u64;
    let mut waiting: Vec<(u64, u64)> = Vec::new();
    // Waiters away (not seen by any node) since and until then.
    let mut away: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut kept = 0;
    let mut active: Vec<u64> = Vec::new();
    for _ in 0..400 {
        now += 37 + next(400);
        // Now and then Redis is away for a while (expiry held after it).
        if next(40) == 0 {
            now += 3_000 + next(12_000);
        }
        let node = 1 + next(3);
        if next(10) == 0 {
            // For no client known, or for one of those waiting (the starved mark).
            let oldest = match next(3) {
                0 => 0,
                _ => waiting.get(next(4) as usize).map_or(BASE, |w| BASE + w.1),
            };
            t.draw_for(node, now, 1 + next(4), oldest);
            continue;
        }
        let mut r = Report {
            polls: next(50),
            asked: next(8),
            challenged: next(12),
            ..Report::default()
        };
        for _ in 0..next(3) {
            let key = next(40);
            r.spent.push(SpentProof {
                key,
                ms: now + next(20_000),
            });
        }
        for _ in 0..next(6) {
            sid += 1;
            let arrival = now - BASE - next(30_000);
            waiting.push((sid, arrival));
        }
        // Some of the waiting are seen again, some admitted, some vanish.
        // Sightings are up to a few seconds old when reported (some much older: given back).
        for &(s, a) in waiting.iter() {
            if away.get(&s).is_some_and(|&(_, until)| until > now) {
                continue;
            }
            if next(40) == 0 {
                away.insert(s, (now, now + 3_000 + next(20_000)));
            } else if next(3) == 0 {
                r.waiters.push(waiter(s, a, at(now, next(1 << 30))));
            }
        }
        if !waiting.is_empty() && next(2) == 0 {
            let (s, _) = waiting.remove(next(waiting.len() as u64) as usize);
            r.admitted.push(sighting(s, at(now, next(1 << 30))));
            active.push(s);
        }
        if next(4) == 0 && !waiting.is_empty() {
            waiting.remove(0);
        }
        for &s in &active {
            if next(3) == 0 {
                r.active.push(sighting(s, at(now, next(1 << 30))));
            }
        }
        let p = t.sync(node, now, &r);
        let lag = c.presence_ms + 1_000;
        kept += p
            .samples
            .iter()
            .filter(|w| {
                away.get(&w.sid)
                    .is_some_and(|&(since, until)| until > now && now > since + lag)
            })
            .count() as u64;
    }
    Some(kept)
}

#[test]
fn stale_syncs_and_draws_change_nothing() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "fenced", cfg(4));
    let now = BASE + 10_000;
    t.sync(1, now, &waiters(&[(11, 1000)]));
    let p = t.sync(
        1,
        now + 1000,
        &Report {
            polls: 1,
            ..Report::default()
        },
    );
    assert_eq!(p.quota, 2);
    // A sync answered late (sequence 1 again, e.g. a stalled ex-leader's) is refused; so is
    // one of an older configuration.
    let late = Report {
        admitted: vec![sighting(11, now + 900)],
        ..Report::default()
    };
    assert_eq!(
        t.sync_fenced(fence(1, 1, now + 1100), now + 1100, &late),
        SyncAnswer::Stale
    );
    let old_gen = Fence {
        generation: 0,
        ..fence(1, 9, now + 1100)
    };
    assert_eq!(t.sync_fenced(old_gen, now + 1100, &late), SyncAnswer::Stale);
    // A draw sent before the node's last sync was run is refused.
    assert_eq!(
        t.draw_fenced(
            fence(1, 1, now + 1200),
            now + 1200,
            Ask { want: 1, oldest: 0 }
        ),
        0
    );
    // Nothing moved: the line still has 11, nobody is active.
    let p = t.sync(2, now + 1300, &waiters(&[]));
    assert_eq!((p.fleet_active, p.queue_len), (0, 1));
}

#[test]
fn a_second_sync_in_the_interval_keeps_the_node_its_places() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "reload", cfg(10));
    let now = BASE + 10_500;
    // Alone, with everyone's polls: half of 10 free places (KEEP_PPM).
    let p = t.sync(
        1,
        now,
        &Report {
            polls: 5,
            ..Report::default()
        },
    );
    assert_eq!(p.quota, 5);
    // It admits 3, then a reload's new leader syncs in the same interval: it keeps the other 2.
    let r = Report {
        admitted: (1..=3).map(|s| sighting(s, now + 100)).collect(),
        ..Report::default()
    };
    let p = t.sync(1, now + 200, &r);
    assert_eq!((p.quota, p.fleet_active), (2, 3));
    // The next interval shares out again: 7 free places, half (3.5: 3, the half carried).
    let p = t.sync(
        1,
        now + 1000,
        &Report {
            polls: 5,
            ..Report::default()
        },
    );
    assert_eq!(p.quota, 3);
}

#[test]
fn the_line_holds_max_line_and_a_place_gone_comes_back_at_the_tail() {
    let Some(srv) = start() else { return };
    let c = FleetConfig {
        max_line: 3,
        ..cfg(1)
    };
    let mut t = Twin::new(srv.port, "maxline", c);
    let now = BASE + 10_000;
    let p = t.sync(
        1,
        now,
        &waiters(&[(1, 1000), (2, 2000), (3, 3000), (4, 4000)]),
    );
    assert_eq!((p.queue_len, p.full), (3, true));
    // 1 goes quiet; 2 and 3 keep polling: 1 leaves the line after presence (5 s).
    let p = t.sync(1, now + 5_500, &waiters(&[(2, 2000), (3, 3000)]));
    assert_eq!((p.queue_len, p.full), (2, false));
    // 1 comes back with a new place (its ticket's place was gone): the tail.
    let p = t.sync(1, now + 5_600, &waiters(&[(1, 15_600)]));
    assert_eq!(p.queue_len, 3);
    assert_eq!(p.samples.last().map(|s| s.arrival), Some(BASE + 15_600));
    // A waiter's arrival only moves later: an old sighting does not take it back to the head.
    let p = t.sync(2, now + 5_700, &waiters(&[(1, 1000)]));
    assert_eq!(p.samples.last().map(|s| s.arrival), Some(BASE + 15_600));
}

#[test]
fn a_picture_gives_when_the_places_it_shares_free() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "ends", cfg(130));
    let now = BASE + 10_000;
    // 128 sessions seen from 9.9 s before a sync, one every 5 ms: with a 10 s window and a
    // 1 s interval, all end within the interval after it, 100 to 735 ms after it. 2 places are
    // free now (130).
    let r = Report {
        active: (0..128)
            .map(|i| sighting(1 + i, now + 100 + 5 * i))
            .collect(),
        polls: 10,
        ..Report::default()
    };
    t.sync(1, now + 1_000, &r);
    let p = t.sync(
        1,
        now + 10_000,
        &Report {
            polls: 100,
            ..Report::default()
        },
    );
    assert_eq!((p.fleet_active, p.expiring, p.free), (128, 128, 130));
    // The node's quota (half of the 130: 65) is the last 65 places of the interval to free,
    // those of the sessions of rank 63..127 by their ends: all held. At most 64 ends are
    // listed, evenly by rank (the i-th is that of held place floor(i x 65 / 64) - 1), ms from
    // the picture.
    assert_eq!((p.quota, p.held, p.ends.len()), (65, 65, 64));
    let end = |rank: u64| 100 + 5 * rank;
    let want: Vec<u64> = (1..=64u64).map(|i| end(63 + i * 65 / 64 - 1)).collect();
    assert_eq!(p.ends, want);
    // The pool keeps the places that free first: a draw at once gets the 2 free now (before
    // 2026-11-29 the grants took those, and this draw got none), ...
    assert_eq!(t.draw(3, now + 10_001, 3), 2);
    // ... and one 400 ms later those of the 61 sessions that ended since (ranks 0..60),
    // while the node's held places wait for theirs.
    assert_eq!(t.draw(3, now + 10_400, 70), 61);
    // A second node, in the same interval: what is left, the 2 places of the pool still to
    // free (ranks 61 and 62: just before the first node's), held for their sessions' ends.
    let p2 = t.sync(
        2,
        now + 10_401,
        &Report {
            polls: 10,
            ..Report::default()
        },
    );
    assert_eq!((p2.quota, p2.held), (2, 2), "{p2:?}");
    assert_eq!(p2.ends, [end(61) - 401, end(62) - 401]);
    assert_eq!(t.draw(3, now + 10_402, 1), 0);
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

/// The picture says how many nodes synced in its window, this one included ([S27]): the
/// nodes tick together but sync one after another, and the first of a tick lacks the others'
/// reports of the interval before it; its second look, once they synced, has them all.
#[test]
fn a_picture_counts_the_nodes_that_synced_in_its_window() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "reported", cfg(10));
    let now = BASE + 10_000;
    let r = Report::default();
    for node in 1..=3 {
        t.sync(node, now + node, &r);
    }
    let tick: Vec<(u64, u64)> = (1..=3)
        .map(|node| {
            let p = t.sync(node, now + 1000 + node, &r);
            (p.nodes, p.reported)
        })
        .collect();
    assert_eq!(tick, [(3, 1), (3, 2), (3, 3)]);
    let p = t.sync(1, now + 1008, &r);
    assert_eq!((p.nodes, p.reported), (3, 3));
    // The next window: the first to sync has only its own again.
    let p = t.sync(2, now + 2001, &r);
    assert_eq!((p.nodes, p.reported), (3, 1));
    // A sync a little before a tick (a node's first, a reload's) is of that tick's window but
    // shows nothing after it: neither its own picture nor a later one counts it.
    let early = fence(3, 100, now + 2950);
    let early = Fence {
        window: now + 3000,
        ..early
    };
    let SyncAnswer::Picture(p) = t.sync_fenced(early, now + 2950, &r) else {
        panic!("stale");
    };
    assert_eq!((p.nodes, p.reported), (3, 0));
    let p = t.sync(1, now + 3002, &r);
    assert_eq!((p.nodes, p.reported), (3, 1));
}
