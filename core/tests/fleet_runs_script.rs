//! The synced room's script against a real `redis-server`, beside its Rust twin (as in
//! fleet_script.rs): random runs of syncs and draws must match the model; stale calls change
//! nothing; a node's second sync of an interval keeps its places; a picture counts the nodes
//! that synced in its window.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::{Ask, Fence, FleetConfig, Report, SpentProof, SyncAnswer};
use std::collections::HashMap;

use support::start;
use support::twin::{cfg, fence, sighting, waiter, waiters, Twin, BASE};

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
