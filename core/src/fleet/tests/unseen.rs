//! [S27] Positions that only go down on a synced room: a newcomer is told, besides the line
//! the picture shows and this node's own newcomers, the other nodes' newcomers no picture can
//! show yet, reckoned at the fleet's pace (`FleetNode::unseen_ahead`), so
//! that the next picture, which shows them, moves it forward rather than back.

use super::*;

fn newcomer(sid: u64, arrival: u64) -> Waiter {
    Waiter {
        sid,
        arrival,
        new_place: true,
    }
}

fn position(v: FleetVerdict) -> u64 {
    match v {
        FleetVerdict::Wait { position, .. } => position,
        other => panic!("not waiting: {other:?}"),
    }
}

/// A full room of `nodes`: three wait (arrived at 100, 200, 300: the last complete interval
/// before the picture of window 2000 shows them), and four newcomers take places here at 2100
/// to 2103: the positions this node tells them.
fn told(nodes: u64) -> Vec<u64> {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let picture = RoomPicture {
        fleet_active: 10,
        queue_len: 3,
        nodes,
        window_ms: 2000,
        samples: line_of(3),
        exact: true,
        ..RoomPicture::default()
    };
    n.next_sync(2000, 1, &c);
    show(&mut n, &picture, 2000);
    (0..4)
        .map(|i| position(n.visit(newcomer(10 + i, 2100 + i), 2100 + i, &c)))
        .collect()
}

#[test]
fn newcomers_are_told_the_other_nodes_newcomers_no_picture_shows_yet() {
    // One node: nobody else can come between; each is told the line and those before it here.
    assert_eq!(told(1), [4, 5, 6, 7]);
    // Two nodes: the newcomers since the picture's last complete interval (1000 on) are
    // reckoned at the fleet's pace (the three the interval before shows, and a quarter more:
    // 3 an interval), 3 more for each; positions stay distinct.
    assert_eq!(told(2), [7, 8, 9, 10]);
}
