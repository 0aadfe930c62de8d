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
    told_behind(nodes, 3)
}

/// As [`told`], behind a line of `line` (0: the picture shows no pace).
fn told_behind(nodes: u64, line: u64) -> Vec<u64> {
    answers(nodes, line).into_iter().map(position).collect()
}

/// The answers behind [`told_behind`].
fn answers(nodes: u64, line: u64) -> Vec<FleetVerdict> {
    answers_of(nodes, line, 1)
}

/// As [`answers`], from a node whose zone first synced at `started`.
fn answers_of(nodes: u64, line: u64, started: u64) -> Vec<FleetVerdict> {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    n.hdr.sync.started_ms = started;
    let c = cfg();
    let picture = RoomPicture {
        fleet_active: 10,
        queue_len: line,
        nodes,
        window_ms: 2000,
        samples: line_of(line),
        exact: true,
        ..RoomPicture::default()
    };
    n.next_sync(2000, 1, &c);
    show(&mut n, &picture, 2000);
    (0..4)
        .map(|i| n.visit(newcomer(10 + i, 2100 + i), 2100 + i, &c))
        .collect()
}

#[test]
fn newcomers_are_told_the_other_nodes_newcomers_no_picture_shows_yet() {
    // One node: nobody else can come between; each is told the line and those before it here.
    assert_eq!(told(1), [4, 5, 6, 7]);
    // Two nodes: the newcomers since the picture's last complete interval (1000 on) are
    // reckoned at the fleet's pace (the three the interval before shows, and a quarter more:
    // 3 an interval), and twice its square root more (2), 5 more for each; positions stay
    // distinct. The last two are told this node's own pace, higher: k newcomers here in k
    // ms, as many on the other node, and a half more (4 and 6 unseen, so 8 and 10).
    assert_eq!(told(2), [9, 10, 14, 17]);
}

/// An estimate says what it saw taken ahead (the line, and this node's own newcomers before
/// it) apart from what it reckons: an estimate's floor that the places seen pass was too near
/// the head (`room::told`).
#[test]
fn an_estimate_says_what_it_saw_apart_from_what_it_reckons() {
    let seen: Vec<_> = answers(2, 3)
        .into_iter()
        .map(|v| match v {
            FleetVerdict::Wait {
                counted: Counted::Estimate { seen },
                ..
            } => seen,
            other => panic!("not an estimate: {other:?}"),
        })
        .collect();
    assert_eq!(seen, [4, 5, 6, 7]);
}

/// A crowd's first newcomers, while the picture shows no pace (nobody in its last complete
/// interval): each is told the others' newcomers reckoned at this node's own pace, as many on
/// every node and a half more. Told only the line and this node's own, they were told
/// positions far too near the head and moved back by up to 150 places in the 60-second
/// rehearsal when the next picture showed the others.
#[test]
fn a_crowds_first_newcomers_are_told_the_others_at_this_nodes_pace() {
    // Alone: nobody else can come between.
    assert_eq!(told_behind(1, 0), [1, 2, 3, 4]);
    // Three nodes: the i-th newcomer has i here ahead of it, so about 3i in the fleet, and a
    // half more (rounded down): 0, 4, 9 and 13 ahead, of whom 0, 3, 7 and 10 unseen, and
    // twice their square root more: 0, 6, 13 and 19 ahead. In a full room a lone newcomer is
    // no sign of others: the first is told 1.
    assert_eq!(told_behind(3, 0), [1, 7, 14, 20]);
}

/// A node restarted since the picture's last complete interval counted its own newcomers
/// over the part of it that it was up: as many over the whole span, up to four times its
/// count. Counted over its part alone, a node restarted 0.4 s before told its newcomers 8 to
/// 15 places too near the head (the 60-second rehearsal, seed 34).
#[test]
fn a_restarted_node_reckons_its_own_newcomers_over_the_whole_span() {
    let told = |started| -> Vec<u64> {
        answers_of(3, 0, started)
            .into_iter()
            .map(position)
            .collect()
    };
    // Up all along: as `a_crowds_first_newcomers_are_told_the_others_at_this_nodes_pace`.
    assert_eq!(told(1), [1, 7, 14, 20]);
    // Up 50 of the 1,100 ms since 1000: the i newcomers ahead here count as 4i (the most),
    // 12i in the fleet and a half more, less its own i: 17i unseen (17, 34, 51), and twice
    // their square root more (25, 44, 65), behind its own i.
    assert_eq!(told(2050), [1, 27, 47, 69]);
    // Up 600 of the 1,100 ms: 1.8 times its count, rounded down (1, 3, 5): 3, 11 and 19
    // unseen, told as 5, 17 and 27.
    assert_eq!(told(1500), [1, 7, 20, 31]);
}

/// A picture of window 2000 with the room's ten places free, `quota` of them this node's,
/// among three nodes.
fn show_free_places(n: &mut FleetNode, quota: u64) {
    let picture = RoomPicture {
        cursor: u64::MAX,
        rightful: u64::MAX,
        quota,
        free: 10,
        nodes: 3,
        window_ms: 2000,
        ..RoomPicture::default()
    };
    n.next_sync(2000, 1, &cfg());
    show(n, &picture, 2000);
}

/// While the picture shows free places, a newcomer that waits does so because this node's
/// share ran out, and the other nodes', taking as many newcomers, ran out about as soon: it
/// counts itself in this node's pace. Counted as none, each node's first waiter of a crowd
/// was told 1 with up to 5 waiting ahead on the others (the 60-second rehearsal, 5 ms in).
#[test]
fn a_first_waiter_while_places_are_free_reckons_the_others_first_waiters() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    // Ten free places, one of them this node's.
    show_free_places(&mut n, 1);
    assert_eq!(n.visit(newcomer(10, 2100), 2100, &c), FleetVerdict::Admit);
    // Itself, as many on each of the others, and a half more: 4 reckoned ahead, and twice
    // their square root more: 8. (The places taken, 2 here and 6 in the fleet, are fewer
    // than the 10 free.)
    assert_eq!(position(n.visit(newcomer(11, 2101), 2101, &c)), 9);
}

/// This node's own pace counts its newcomers of the last two intervals that still wait: those
/// let in are no longer ahead of anyone, and those before the picture's last complete
/// interval are in its line.
#[test]
fn the_own_pace_counts_recent_newcomers_who_still_wait() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let picture = RoomPicture {
        fleet_active: 10,
        nodes: 2,
        window_ms: 2000,
        ..RoomPicture::default()
    };
    n.next_sync(2000, 1, &c);
    show(&mut n, &picture, 2000);
    // Newcomers here: two long before, two in the picture's last complete interval, one
    // later; those more than three intervals older than the last leave the count.
    for (sid, at) in [(1, 10), (2, 20), (3, 1500), (4, 1600), (5, 3500)] {
        position(n.visit(newcomer(sid, at), 3500, &c));
    }
    assert_eq!(n.hdr.fresh.recent_between(0, 4000), 3);
    assert_eq!(n.hdr.fresh.recent_between(1000, 2100), 2);
    // One of them let in: no longer ahead.
    n.hdr.fresh.left(1500);
    assert_eq!(n.hdr.fresh.recent_between(1000, 2100), 1);
}

/// A node that took all of the last interval's newcomers (its part known from the picture's
/// line: all 32 it shows are this node's) reckons the others' newcomers in a burst by that
/// part, not by one of the nodes: nobody else is coming, and it tells no phantom newcomers of
/// the others (`t/270` TEST 7: a node taking 60 % of the newcomers told 413 for a true 185 by
/// one node's part).
#[test]
fn a_node_that_takes_every_newcomer_tells_no_phantoms() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let line: Vec<Sample> = (0..32)
        .map(|rank| Sample {
            rank,
            arrival: 1100 + 25 * rank,
            sid: 0,
        })
        .collect();
    for s in &line {
        n.hdr.fresh.took(s.arrival, c.interval_ms);
    }
    let picture = RoomPicture {
        fleet_active: 10,
        queue_len: 32,
        nodes: 3,
        window_ms: 3000,
        samples: line,
        exact: true,
        ..RoomPicture::default()
    };
    n.next_sync(3000, 1, &c);
    show(&mut n, &picture, 3000);
    // A burst of 40 here: the last is told the line's 32, the 39 before it here, and the
    // line's pace since its last complete interval (40 an interval, 45 in 1,139 ms, and
    // twice its square root more: 57); one of three nodes' part would tell it 107 others
    // instead of 45.
    let told: Vec<u64> = (0..40)
        .map(|i| position(n.visit(newcomer(10 + i, 3100 + i), 3100 + i, &c)))
        .collect();
    assert_eq!(told.last(), Some(&129));
}

/// A crowd that fills the room: this node's share (6 of the 10 free places) lasts longer than
/// the others' (2 each), so its first waiter comes when the others have a line already. With
/// as many newcomers on each of the three nodes, 12 came to the others by then and 4 places
/// took them: 8 wait ahead of it. Reckoned from its own waiting newcomers (none yet), it was
/// told 1; reckoned from its own places taken (7 with its own, those let in too), 21 in the
/// fleet and a half more, less the 10 places, it is told 22: too far back, so its position
/// falls.
#[test]
fn a_crowd_filling_the_room_is_reckoned_from_the_places_taken() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    show_free_places(&mut n, 6);
    let answers: Vec<FleetVerdict> = (0..10)
        .map(|i| n.visit(newcomer(10 + i, 2100 + i), 2100 + i, &c))
        .collect();
    assert!(answers.iter().take(6).all(|v| *v == FleetVerdict::Admit));
    let told: Vec<u64> = answers.into_iter().skip(6).map(position).collect();
    // Each later one: three more places taken in the fleet (and a half, rounded down).
    assert_eq!(told, [22, 27, 31, 36]);
}

/// The places taken are counted from the latest: a full table lets its oldest go, so a crowd
/// faster than the table still counts its last arrivals (a table that kept its first 1,024
/// counted none after them).
#[test]
fn the_places_taken_are_counted_from_the_latest() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let n = node(&mut mem);
    let c = cfg();
    for at in 1000..2100 {
        n.hdr.fresh.took(at, c.interval_ms);
    }
    assert_eq!(n.hdr.fresh.arrived_between(2000, 2100), 100);
    assert_eq!(n.hdr.fresh.arrived_between(0, 2100), FRESH_CAP as u64);
}
