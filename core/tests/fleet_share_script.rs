//! How the synced room's script shares an interval's free places out to the nodes, side by
//! side with its Rust twin (see fleet_script.rs): a crowd's first interval equally by the
//! live nodes, later ones by their polls, what a node cannot use kept in the pool.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::Report;

use support::start;
use support::twin::{cfg, Twin, BASE};

#[test]
fn a_crowds_first_interval_is_shared_by_the_nodes_not_by_who_synced_first() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "cold", cfg(60));
    let now = BASE + 10_000;
    // Three nodes meet in an empty room nobody waits for.
    for node in 1..=3 {
        t.sync(node, now + node, &Report::default());
    }
    // The crowd: each node saw 30 newcomers by its sync of the next interval, and counts the
    // others' grants of the idle interval (one place each: nobody visited them,
    // SHARE_PER_POLL) as taken until they report. Shared equally, the half of what is free
    // (KEEP_PPM) gives 58 / 6, 59 / 6 and 60 / 6, and the pool keeps 32 for whoever runs out
    // first. Shared by the polls known when each synced (the first node's own 30 only), every
    // node's part was 1: 29, 29 and 2, and the pool kept none.
    let crowd = Report {
        polls: 30,
        ..Report::default()
    };
    let quotas: Vec<u64> = (1..=3)
        .map(|node| t.sync(node, now + 1000 + node, &crowd).quota)
        .collect();
    assert_eq!(quotas, [9, 9, 10]);
    assert_eq!(t.draw(3, now + 1010, 60), 32);
}
