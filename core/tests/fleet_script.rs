//! The synced room's script (core/src/fleet/script.lua) against a real `redis-server`, side by
//! side with its Rust twin [`FleetModel`](smart_limit_core::fleet::FleetModel) (what the
//! simulator runs; `support::twin`): the same syncs and draws at the same times must give the
//! same pictures and grants. Also the rules themselves: the cursor takes the oldest waiters,
//! grants never exceed `max_active`, the line's samples, held places never given twice. The
//! sessions the nodes report: fleet_sessions_script.rs; random runs against the model, stale
//! calls, a picture's reports: fleet_runs_script.rs; flood control: fleet_flood_script.rs;
//! the join proof's fleet state: fleet_challenge_script.rs.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::{Fence, FleetConfig, Report, SyncAnswer, EXACT_LINE};

use support::start;
use support::twin::{cfg, fence, sighting, waiters, Twin, BASE};

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
