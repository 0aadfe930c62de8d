//! [S27] Places kept while people are away, in the synced room's script and its Rust twin
//! side by side (`support::twin`) on a real `redis-server`: a kept place counts in the line
//! but holds no free place. (The random runs with places kept are in fleet_runs_script.rs, beside
//! the runs they share their driver with.)
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::{FleetConfig, Report};
use support::start;
use support::twin::{cfg, sighting, waiters, Twin, BASE};

/// [S27] A place kept while its waiter is away (`keep=15s`, presence 5 s): it stays in the line
/// (positions count it) but holds no free place (the cursor passes over it to the next one
/// present); back within the keep, it is present at its place again, ahead of those who came
/// after it; away past the keep, it leaves the line. On both twins alike.
#[test]
fn a_kept_place_counts_in_the_line_but_holds_no_free_place() {
    let Some(srv) = start() else { return };
    let c = FleetConfig {
        keep_ms: 15_000,
        ..cfg(1)
    };
    let mut t = Twin::new(srv.port, "kept", c);
    let t0 = BASE + 60_000;
    // One session holds the one place (active window 10 s); A, B, C wait.
    let first = Report {
        admitted: vec![sighting(9, t0)],
        ..waiters(&[(1, 1000), (2, 5000), (3, 9000)])
    };
    let p = t.sync(1, t0, &first);
    assert_eq!((p.queue_len, p.cursor), (3, 0));
    // A stops polling; B and C go on. Unseen for presence, A is away, still in the line.
    for s in 1..=9 {
        let p = t.sync(1, t0 + s * 1000, &waiters(&[(2, 5000), (3, 9000)]));
        assert_eq!(p.queue_len, 3, "at {s} s");
        assert_eq!(p.samples[0].sid, 1);
    }
    // Session 9's window ends: the free place's cursor takes B (and C's band is an interval
    // past B), not A.
    let p = t.sync(1, t0 + 11_000, &waiters(&[(2, 5000), (3, 9000)]));
    assert_eq!((p.queue_len, p.cursor), (3, BASE + 6000));
    assert_eq!(p.rightful, BASE + 5000);
    // A comes back (12 s away, within the keep): present at its place, its turn first.
    let p = t.sync(1, t0 + 12_000, &waiters(&[(1, 1000), (2, 5000), (3, 9000)]));
    assert_eq!((p.queue_len, p.cursor), (3, BASE + 2000));
    assert_eq!(p.rightful, BASE + 1000);
    assert_eq!(p.samples[0].sid, 1);
    // C stops polling for good: after presence it holds no place of the cursor's band, after
    // the keep (15 s) it leaves the line.
    for s in 13..=26 {
        let p = t.sync(1, t0 + s * 1000, &waiters(&[(1, 1000), (2, 5000)]));
        assert_eq!(p.queue_len, 3, "at {s} s");
    }
    let p = t.sync(1, t0 + 27_000, &waiters(&[(1, 1000), (2, 5000)]));
    assert_eq!(p.queue_len, 2);
    assert!(p.samples.iter().all(|w| w.sid != 3));
}
