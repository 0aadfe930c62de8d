//! [S27] A picture that holds every node's sync of its window shows every place taken before
//! its tick: its waiters are settled, and only the newcomers since the tick are reckoned. A
//! picture that lacks some (the nodes sync one after another, a few milliseconds apart) makes
//! the node look again (`FleetNode::look_again`).

use super::*;

/// A full room of two nodes, 15 waiting (arrived 100 ms apart from 100 on, sessions 1..15),
/// in the picture of window 2000 that holds `reported` nodes' syncs of that window.
fn shown(mem: &mut Mem, reported: u64, queue_len: u64) -> FleetNode<'_> {
    let mut n = node(mem);
    let samples: Vec<Sample> = line_of(queue_len)
        .into_iter()
        .map(|s| Sample {
            sid: s.rank + 1,
            ..s
        })
        .collect();
    let picture = RoomPicture {
        fleet_active: 10,
        queue_len,
        nodes: 2,
        reported,
        window_ms: 2000,
        samples,
        exact: queue_len > 0,
        ..RoomPicture::default()
    };
    n.next_sync(2000, 1, &cfg());
    show(&mut n, &picture, 2000);
    n
}

fn answer(reported: u64, w: Waiter, now: u64) -> FleetVerdict {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = shown(&mut mem, reported, 15);
    n.visit(w, now, &cfg())
}

#[test]
fn every_nodes_sync_of_the_window_settles_the_places_taken_before_its_tick() {
    // The last of the line took its place half an interval before the tick.
    let last = Waiter {
        sid: 15,
        arrival: 1500,
        new_place: false,
    };
    let counted = |v: FleetVerdict| match v {
        FleetVerdict::Wait {
            position, counted, ..
        } => (position, counted),
        other => panic!("not waiting: {other:?}"),
    };
    assert_eq!(counted(answer(2, last, 2100)), (15, Counted::All));
    // Without the other node's sync of this window, its places of the last interval may be
    // missing: an estimate.
    assert_eq!(
        counted(answer(1, last, 2100)),
        (15, Counted::Estimate { seen: 15 })
    );
}

#[test]
fn with_every_nodes_sync_only_the_newcomers_since_the_tick_are_reckoned() {
    let newcomer = Waiter {
        sid: 99,
        arrival: 2100,
        new_place: true,
    };
    let position = |v: FleetVerdict| match v {
        FleetVerdict::Wait { position, .. } => position,
        other => panic!("not waiting: {other:?}"),
    };
    // Every place before the tick shown: the line, and the other node's newcomers of the
    // 100 ms since at the last interval's pace (6 shown, and a quarter more: none in 100 ms).
    assert_eq!(position(answer(2, newcomer, 2100)), 16);
    // Without it: the other node's places since an interval before the tick are reckoned too
    // (at the pace of the interval before, 9 and a quarter more, over 1,100 ms, less the 6
    // shown: 6, and twice its square root more: 10).
    assert_eq!(position(answer(1, newcomer, 2100)), 26);
}

#[test]
fn a_picture_without_every_nodes_sync_of_its_window_looks_again() {
    let c = cfg();
    let mut mem = Mem(vec![0; 1 << 15]);
    let n = shown(&mut mem, 1, 15);
    assert!(n.look_again(2005, &c));
    // Not once the window has passed: the next tick's sync looks anyway.
    assert!(!n.look_again(2600, &c));
    let mut mem = Mem(vec![0; 1 << 15]);
    assert!(!shown(&mut mem, 2, 15).look_again(2005, &c));
    // Nobody waits, and the room is full: positions will be told from it.
    let mut mem = Mem(vec![0; 1 << 15]);
    assert!(shown(&mut mem, 1, 0).look_again(2005, &c));
}
