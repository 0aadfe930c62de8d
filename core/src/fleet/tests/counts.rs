//! A long line's positions from the fleet's arrival-bucket counts (tally_zone.rs): what the
//! node counts for its next tally call, and when its answers come from the counts.

use super::*;
use crate::fleet::tally::{Behind, Bucket, Delta, Tallied};

fn told(n: &FleetNode, arrival: u64) -> u64 {
    told_at(n, arrival, 5)
}

fn told_at(n: &FleetNode, arrival: u64, now: u64) -> u64 {
    match n.wait(arrival, 9, now, &cfg()) {
        FleetVerdict::Wait { position, .. } => position,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_node_counts_each_ticket_it_writes_and_sends_it_once() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg(); // presence 20 s: epochs of 5 s
                   // Two take their places in bucket 1; one of them is written again in the next epoch; the
                   // other is let in.
    assert!(n.tally_seen(&c, 1_200, None, 1_200));
    assert!(n.tally_seen(&c, 1_700, None, 1_700));
    assert!(n.tally_seen(&c, 1_200, Some(1_200), 6_000));
    assert!(n.tally_left(&c, 1_700, 1_700, 6_500));
    let r = n.take_tally();
    assert_eq!(r.placed, vec![(1, 2)]);
    assert_eq!(r.let_in, vec![(1, 1)]);
    assert_eq!(r.spans, vec![(1, 1_200, 1_700)]);
    // Epoch 0: +2 -1 (moved) -1 (let in): nothing to send; epoch 1: +1.
    assert_eq!(
        r.deltas,
        vec![Delta {
            epoch: 1,
            bucket: 1,
            delta: 1
        }]
    );
    // Taken: the table is empty; a call that failed gives it back whole.
    assert!(n.take_tally().is_empty());
    n.give_back_tally(&r);
    assert_eq!(n.take_tally(), r);
}

#[test]
fn a_long_line_is_told_its_positions_from_counts_that_hold_it() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    show(&mut n, &sampled(), 5);
    // No counts yet: the samples (between ranks 0 and 100).
    assert_eq!(told(&n, 1_500), 51);
    // Counts of 1,100: 600 arrived in bucket 1 (from the head, 1,000 ms), 500 in bucket 2.
    let counts = |first: u64| vec![Bucket::of(1, first, first, 0), Bucket::of(2, 500, 500, 0)];
    n.set_counts(alone(counts(600)), 5, &c);
    assert_eq!(told(&n, 1_500), 301);
    assert_eq!(told(&n, 2_000), 601);
    // Counts below the line Redis keeps (1,000) lost something: the samples answer again.
    n.set_counts(alone(counts(400)), 5, &c);
    assert_eq!(told(&n, 1_500), 51);
}

/// Between two pictures the counts' positions move on by the places the picture expects the
/// interval to let in (those its wait is reckoned by), for the part of the interval gone, and by
/// no more than those whose turn it is.
#[test]
fn counts_move_on_between_pictures_by_the_places_the_picture_expects() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let counts = || vec![Bucket::of(1, 600, 600, 0), Bucket::of(2, 500, 500, 0)];
    // An empty room of 10: 10 places an interval; it is the turn of those who came by 1,500
    // (301 of them).
    let turn = |cursor| RoomPicture {
        cursor,
        ..sampled()
    };
    show(&mut n, &turn(1_500), 5);
    n.set_counts(alone(counts()), 5, &c);
    assert_eq!(told_at(&n, 2_000, 5), 601);
    assert_eq!(told_at(&n, 2_000, 505), 596);
    // An interval's places at most: a picture older than that is aged by its own rule.
    assert_eq!(told_at(&n, 2_000, 1_005), 591);
    assert_eq!(told_at(&n, 2_000, 3_005), 591);
    // The head stays at 1.
    assert_eq!(told_at(&n, 1_000, 1_005), 1);
    // Only the first 3 may take the places: the line moves by 3 at most.
    show(&mut n, &turn(1_004), 1_005);
    n.set_counts(alone(counts()), 1_005, &c);
    assert_eq!(told_at(&n, 2_000, 1_505), 598);
}

/// Counts from a fleet of one node: they lack nothing.
fn alone(buckets: Vec<Bucket>) -> Tallied {
    Tallied {
        buckets,
        behind: Behind {
            nodes: 1,
            let_ins: 0,
        },
    }
}

/// The counts still hold as waiting the let-ins of the other nodes since their last calls:
/// the line has moved on by as many as the counts' call reckoned.
#[test]
fn counts_move_on_by_the_other_nodes_let_ins_not_reported_yet() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let buckets = vec![Bucket::of(1, 600, 600, 0), Bucket::of(2, 500, 500, 0)];
    show(
        &mut n,
        &RoomPicture {
            cursor: 1_500,
            ..sampled()
        },
        5,
    );
    // Four nodes; the other three let in 6 since their last calls, by the call's reckoning.
    let behind = Behind {
        nodes: 4,
        let_ins: 6,
    };
    n.set_counts(
        Tallied {
            buckets: buckets.clone(),
            behind,
        },
        5,
        &c,
    );
    assert_eq!(told_at(&n, 2_000, 5), 601 - 6);
    // And by the interval's places as it goes, as from counts that lack nothing.
    assert_eq!(told_at(&n, 2_000, 505), 596 - 6);
    n.set_counts(alone(buckets), 5, &c);
    assert_eq!(told_at(&n, 2_000, 5), 601);
}
