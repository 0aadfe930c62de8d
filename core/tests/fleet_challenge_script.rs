//! The join proof's state in the synced room's script (challenge=pow, [S19]), against a real
//! `redis-server` and the script's twin (`support::twin`): the fleet's pressure for
//! `challenge_bits=auto`, and the proofs spent on one node told to the others.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::{Fence, FleetConfig, Report, RoomPicture, SpentProof, SyncAnswer};
use support::start;
use support::twin::{cfg, sighting, waiters, Twin, BASE};

/// `challenge_bits=auto`: the script sums every node's newcomers and admissions per interval
/// and the first sync of the next interval looks (challenge::Pressure's rule), so both nodes
/// are told the same doublings all interval. Interval 1: 9 + 9 newcomers, 1 admission: ratio
/// 0.25 x 1 + 0.75 x 19 / 2 = 7.375, 2 doublings from interval 2 on; a quiet interval 2
/// brings it to 2.59 (1); the line gone, 0.
#[test]
fn the_fleets_pressure_is_summed_over_nodes_and_told_to_each() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "pressure", cfg(2));
    let now = BASE + 60_000;
    let mut r1 = waiters(&[(1, 1), (2, 2), (3, 3)]);
    r1.asked = 9;
    assert_eq!(t.sync(1, now, &r1).pressure, 0, "no interval looked at yet");
    let mut r2 = waiters(&[(4, 4), (5, 5)]);
    r2.asked = 9;
    r2.admitted = vec![sighting(1, now)];
    assert_eq!(t.sync(2, now + 100, &r2).pressure, 0);
    let p1 = t.sync(1, now + 1000, &waiters(&[(2, 2), (3, 3)]));
    let p2 = t.sync(2, now + 1100, &waiters(&[(4, 4), (5, 5)]));
    assert_eq!((p1.pressure, p2.pressure), (2, 2));
    assert_eq!(t.sync(1, now + 2000, &Report::default()).pressure, 1);
    // Challenges count as clients asking when they outnumber the places taken (scripts that
    // do not solve): 20 challenges, 2 places: 0.25 x 2.59 + 0.75 x 21 = 16.4, 4 doublings.
    let mut r = waiters(&[(2, 2)]);
    (r.asked, r.challenged) = (2, 20);
    t.sync(2, now + 2100, &r);
    assert_eq!(t.sync(1, now + 3000, &Report::default()).pressure, 4);
    // Everyone in line leaves (absent for presence): nobody waits, no pressure.
    let mut at = now + 4000;
    while t.sync(1, at, &Report::default()).queue_len > 0 {
        assert!(at < now + 20_000, "the line never emptied");
        at += 1000;
    }
    assert_eq!(t.sync(2, at + 1000, &Report::default()).pressure, 0);
}

/// With an interval shorter than a second the fleet looks once a second, as one node does:
/// the sums of five 200 ms intervals make one look, and its doublings stand until the next.
#[test]
fn the_fleets_pressure_looks_once_a_second_whatever_the_interval() {
    let Some(srv) = start() else { return };
    let c = FleetConfig {
        interval_ms: 200,
        ..cfg(2)
    };
    let mut t = Twin::new(srv.port, "pressure200", c);
    let now = BASE + 60_000;
    let mut seqs = [0u64; 3];
    let mut sync = |t: &mut Twin, node: usize, at: u64, r: &Report| {
        seqs[node] += 1;
        let f = Fence {
            node_id: node as u64,
            generation: 1,
            window: at / 200 * 200,
            seq: seqs[node],
        };
        match t.sync_fenced(f, at, r) {
            SyncAnswer::Picture(p) => p.pressure,
            SyncAnswer::Stale => panic!("stale"),
        }
    };
    sync(&mut t, 1, now, &waiters(&[(1, 1), (2, 2)]));
    let mut seen = Vec::new();
    for i in 1..=12u64 {
        let mut r = Report::default();
        // 10 challenges an interval for the first second.
        if i <= 5 {
            r.challenged = 10;
        }
        seen.push(sync(&mut t, 1 + (i % 2) as usize, now + i * 200, &r));
    }
    // No look within the first second (intervals 1-4: 40 challenges summed); the look at 1 s:
    // 0.25 + 0.75 x 41 = 31, 4 doublings, until the look at 2 s (interval 5's 10:
    // 0.25 x 31 + 0.75 x 11 = 16, 4 again). A look each interval would have seen 10 at a time.
    assert_eq!(seen, [0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4], "{seen:?}");
}

/// challenge=pow on a synced room: a node reports the proofs it took places with, and every
/// other node is told of them with its next sync (once each, how long they stay spent), a node
/// that joins later too, while the fleet keeps them (the nodes' staleness); the reporter is not
/// told its own. Script and model alike.
#[test]
fn spent_proofs_reach_every_other_node_once() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "spent", cfg(5));
    let now = BASE + 60_000;
    let spent = |list: &[(u64, u64)]| Report {
        spent: list
            .iter()
            .map(|&(key, ms)| SpentProof { key, ms })
            .collect(),
        ..Report::default()
    };
    let keys = |p: &RoomPicture| p.spent.iter().map(|s| (s.key, s.ms)).collect::<Vec<_>>();
    // Node 1 took places with two proofs; the second stays spent 10 ms only.
    let p = t.sync(1, now, &spent(&[(0xab, now + 30_000), (0xcd, now + 10)]));
    assert!(p.spent.is_empty(), "not told its own: {:?}", p.spent);
    let p = t.sync(2, now + 100, &spent(&[(0xef, now + 20_000)]));
    assert_eq!(keys(&p), [(0xab, 29_900)], "the lapsed one is not told");
    assert!(
        t.sync(2, now + 200, &Report::default()).spent.is_empty(),
        "once"
    );
    assert_eq!(
        keys(&t.sync(1, now + 1000, &Report::default())),
        [(0xef, 19_000)]
    );
    // Node 1 syncs, then node 2 reports in the same millisecond: node 1 hears of it next time
    // (numbered entries, not times: the nodes' ticks are aligned, such ties are common).
    t.sync(1, now + 1500, &Report::default());
    t.sync(2, now + 1500, &spent(&[(0x12, now + 9_000)]));
    assert_eq!(
        keys(&t.sync(1, now + 1700, &Report::default())),
        [(0x12, 7_300)]
    );
    // A node that joins later hears what the fleet keeps.
    let p = t.sync(3, now + 2000, &Report::default());
    assert_eq!(keys(&p), [(0xab, 28_000), (0xef, 18_000), (0x12, 7_000)]);
    // After a minute (longer than the nodes' staleness here) the fleet forgets them.
    let keep = cfg(5).stale_ms().max(60_000);
    let p = t.sync(4, now + 100 + keep + 1, &Report::default());
    assert!(p.spent.is_empty(), "{:?}", p.spent);
}
