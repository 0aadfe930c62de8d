//! A node's first meeting with the fleet ([S21]): it decides nothing before its first picture,
//! a sync it sends meanwhile is one requests may wait for, and the newcomers a picture cannot
//! show are told distinct places behind its line.

use super::*;

fn picture(queue_len: u64, cursor: u64, quota: u64, samples: Vec<Sample>) -> RoomPicture {
    RoomPicture {
        reported: 0,
        fleet_active: 10,
        queue_len,
        cursor,
        rightful: cursor,
        quota,
        nodes: 1,
        window_ms: 1000,
        free: 0,
        expiring: 0,
        leaving: 0,
        held: 0,
        ends: Vec::new(),
        full: false,
        pressure: 0,
        spent: Vec::new(),
        samples,
        flood: Vec::new(),
        exact: false,
    }
}

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

#[test]
fn a_first_sync_is_pending_until_its_picture_or_its_failure() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    assert!(!n.first_sync_pending(1000, 200), "nothing sent yet");
    assert_eq!(n.visit(newcomer(1, 1000), 1000, &c), FleetVerdict::Unknown);
    n.next_sync(1000, 1, &c);
    assert!(n.first_sync_pending(1100, 200));
    // Past timeout=, the sync was abandoned: nothing to wait for.
    assert!(!n.first_sync_pending(1201, 200));
    // A failed sync ends the wait at once.
    n.next_sync(1300, 1, &c);
    assert!(n.first_sync_pending(1300, 200));
    n.sync_failed();
    assert!(!n.first_sync_pending(1300, 200));
    // A picture: the node decides by it, and nothing is pending any more.
    n.next_sync(1400, 1, &c);
    show(&mut n, &picture(0, u64::MAX, 0, vec![]), 1401);
    assert!(!n.first_sync_pending(1402, 200));
    assert_ne!(n.decide(w(1, 1000), 1402, &c), FleetVerdict::Unknown);
    // A later sync is no first sync.
    n.next_sync(2000, 1, &c);
    assert!(!n.first_sync_pending(2000, 200));
}

#[test]
fn newcomers_the_picture_cannot_show_get_distinct_places_behind_its_line() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    // Before any picture: the node's own line (what on_error=local tells), by arrival.
    for (sid, arrival) in [(1, 1000), (2, 1010), (3, 1020)] {
        assert_eq!(
            n.visit(newcomer(sid, arrival), arrival, &c),
            FleetVerdict::Unknown
        );
    }
    assert_eq!(n.place_alone(1010), (2, 3));
    // The picture shows a line of ten (arrivals 90..900) and the first of the three, whose
    // sighting its report carried; the room is full (no cursor reaches them).
    let samples = (0..11)
        .map(|rank| Sample {
            rank,
            arrival: if rank < 10 { 90 * (rank + 1) } else { 1000 },
            sid: 0,
        })
        .collect();
    n.next_sync(1030, 1, &c);
    show(&mut n, &picture(11, 0, 0, samples), 1040);
    assert_eq!(position(n.decide(w(1, 1000), 1050, &c)), 11);
    assert_eq!(position(n.decide(w(2, 1010), 1050, &c)), 12);
    assert_eq!(position(n.decide(w(3, 1020), 1050, &c)), 13);
    // Two more come: 14 and 15, by arrival.
    assert_eq!(position(n.visit(newcomer(4, 1060), 1060, &c)), 14);
    assert_eq!(position(n.visit(newcomer(5, 1070), 1070, &c)), 15);
    assert_eq!(position(n.decide(w(4, 1060), 1080, &c)), 14);
    // The next picture shows them all: the table keeps only those after its tail.
    let samples = (0..15)
        .map(|rank| Sample {
            rank,
            arrival: [
                90, 180, 270, 360, 450, 540, 630, 720, 810, 900, 1000, 1010, 1020, 1060, 1070,
            ][rank as usize],
            sid: 0,
        })
        .collect();
    n.next_sync(2000, 1, &c);
    show(&mut n, &picture(15, 0, 0, samples), 2001);
    assert_eq!(n.fresh_ahead(u64::MAX), 0);
    assert_eq!(position(n.decide(w(5, 1070), 2002, &c)), 15);
}

#[test]
fn a_newcomer_let_in_leaves_the_newcomers_ahead_of_others() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    n.next_sync(900, 1, &c);
    // Nobody waits, one place: the first newcomer walks in, the second is told 1, not 2.
    show(&mut n, &picture(0, u64::MAX, 1, vec![]), 901);
    assert_eq!(n.visit(newcomer(1, 1000), 1000, &c), FleetVerdict::Admit);
    assert_eq!(position(n.visit(newcomer(2, 1001), 1001, &c)), 1);
    assert_eq!(position(n.visit(newcomer(3, 1002), 1002, &c)), 2);
}

#[test]
fn the_table_is_bounded() {
    let mut mem = Mem(vec![0; 1 << 16]);
    let mut n = node(&mut mem);
    let c = cfg();
    for i in 0..(FRESH_CAP as u64 + 10) {
        n.visit(newcomer(i + 1, 1000 + i), 1000 + i, &c);
    }
    assert_eq!(n.fresh_ahead(u64::MAX), FRESH_CAP as u64);
    // Past the table, the last rank it keeps: never more.
    assert_eq!(n.place_alone(5000).0, FRESH_CAP as u64 + 1);
}

/// A node whose first request comes with a crowd reports that client as a waiter, and its
/// first picture shows it in line (with a place for it): the node lets it in, and then nobody
/// waits ahead of those who came after the picture. A line of a client it did not let in
/// still holds them back until the next picture.
#[test]
fn a_short_line_the_node_let_in_whole_holds_nobody_back() {
    let c = cfg();
    let own = |sid| RoomPicture {
        exact: true,
        ..picture(
            1,
            u64::MAX,
            3,
            vec![Sample {
                rank: 0,
                arrival: 1000,
                sid,
            }],
        )
    };
    for (in_line, let_in) in [(1, true), (9, false)] {
        let mut mem = Mem(vec![0; 1 << 15]);
        let mut n = node(&mut mem);
        assert_eq!(n.visit(newcomer(1, 1000), 1000, &c), FleetVerdict::Unknown);
        n.next_sync(1000, 1, &c);
        show(&mut n, &own(in_line), 1005);
        assert_eq!(n.decide(w(1, 1000), 1005, &c), FleetVerdict::Admit);
        let later = n.visit(newcomer(2, 1010), 1010, &c);
        assert_eq!(
            later == FleetVerdict::Admit,
            let_in,
            "line of {in_line}: {later:?}"
        );
    }
}

/// A picture of a line with a place for each of its clients and places beyond them: those
/// who came after it take this node's part of the places beyond (by the nodes), not more, so
/// the line's clients still find theirs when they come back.
#[test]
fn those_after_a_line_with_room_beyond_take_the_nodes_part_of_it() {
    let c = cfg();
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    n.next_sync(1000, 1, &c);
    // Two wait elsewhere; 10 places, none taken, two nodes: 4 beyond the line are this node's.
    let p = RoomPicture {
        fleet_active: 0,
        nodes: 2,
        ..picture(2, u64::MAX, 6, line_of(2))
    };
    show(&mut n, &p, 1005);
    let after: Vec<bool> = (0..6)
        .map(|i| n.visit(newcomer(10 + i, 1010 + i), 1010 + i, &c) == FleetVerdict::Admit)
        .collect();
    assert_eq!(after, [true, true, true, true, false, false]);
    // The line's clients take the places left of the node's share.
    assert_eq!(n.decide(w(1, 100), 1020, &c), FleetVerdict::Admit);
    assert_eq!(n.decide(w(2, 200), 1020, &c), FleetVerdict::Admit);
}
