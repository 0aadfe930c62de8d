//! [S27] Counted and kept are two times: an absent waiter is skipped at the head after
//! `presence`, but its arrival is kept for `keep`; positions count kept places, so a present
//! client's position never grows.

use super::*;

const MIN: u64 = 60_000;

/// The room: two places, presence 5 s, and a keep of 5 minutes (or off).
fn kept(keep_ms: u64) -> Limits {
    Limits {
        max_active: 2,
        presence_ms: 5_000,
        keep_ms,
        ..limits()
    }
}

/// A room full with two admitted sessions (1 and 2), and four clients waiting in arrival
/// order (11..=14) at `t0`. Returns their queue numbers.
fn full_room_with_four_waiting(room: &mut Room, l: &Limits, t0: u64) -> Vec<u64> {
    for sid in [1, 2] {
        assert_eq!(visit(room, sid, 0, t0, l), Verdict::Admit { sid });
    }
    (11..=14)
        .map(|sid| place(visit(room, sid, 0, t0 + sid, l)).qnum)
        .collect()
}

/// Everyone but `away` polls every 2 s from `from` to `to`; the positions each is told never
/// grow. Returns the last answer of each poller.
fn poll_all(
    room: &mut Room,
    l: &Limits,
    qs: &[(u64, u64)],
    (from, to): (u64, u64),
    last: &mut [u64],
) {
    let mut now = from;
    while now <= to {
        for (i, &(sid, q)) in qs.iter().enumerate() {
            if let Verdict::Wait(p) = visit(room, sid, q, now, l) {
                assert!(
                    p.position <= last[i],
                    "client {sid} told {} after {} at {now}",
                    p.position,
                    last[i]
                );
                last[i] = p.position;
            }
        }
        now += 2_000;
    }
}

/// The experiment: the head stops polling for 16 s while the others poll. Before
/// keep (keep=off) it came back at the tail, position 3 of 3; kept, it is still first.
#[test]
fn the_head_away_for_16_seconds_comes_back_first() {
    for (keep_ms, back_at) in [(5 * MIN, 1), (5_000, 4)] {
        let mut mem = Mem::new(64 * 1024);
        let l = kept(keep_ms);
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        let t0 = 1_000_000;
        let q = full_room_with_four_waiting(&mut room, &l, t0);
        let others: Vec<(u64, u64)> = vec![(12, q[1]), (13, q[2]), (14, q[3])];
        let mut last = vec![u64::MAX; 3];
        room.pass(1, 0, t0 + 1_000, &l);
        room.pass(2, 0, t0 + 1_000, &l);
        poll_all(&mut room, &l, &others, (t0 + 2_000, t0 + 16_000), &mut last);
        let p = place(visit(&mut room, 11, q[0], t0 + 17_000, &l));
        assert_eq!(p.position, back_at, "keep {keep_ms}");
        assert_eq!(p.resumed, keep_ms > 5_000, "keep {keep_ms}");
        if keep_ms > 5_000 {
            // Kept: the others were told 2, 3, 4 throughout (11 counted ahead of them).
            assert_eq!(last, vec![2, 3, 4]);
        }
    }
}

/// Away for 2 minutes with keep=5m: back ahead of everyone who arrived after it, and the next
/// free place is its own; its first answer says it resumed, the next one does not.
#[test]
fn a_waiter_away_two_minutes_resumes_ahead_of_later_arrivals() {
    let mut mem = Mem::new(64 * 1024);
    let l = kept(5 * MIN);
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    let t0 = 1_000_000;
    let q = full_room_with_four_waiting(&mut room, &l, t0);
    let mut last = vec![u64::MAX; 3];
    let others = [(12, q[1]), (13, q[2]), (14, q[3])];
    let mut now = t0;
    while now < t0 + 2 * MIN {
        room.pass(1, 0, now, &l);
        room.pass(2, 0, now, &l);
        poll_all(&mut room, &l, &others, (now, now + 10_000), &mut last);
        now += 12_000;
    }
    // Newcomers arrived while it was away.
    let late = place(visit(&mut room, 20, 0, now, &l));
    assert_eq!(late.position, 5);
    let back = place(visit(&mut room, 11, q[0], now + 1, &l));
    assert_eq!((back.qnum, back.position, back.resumed), (q[0], 1, true));
    let again = place(visit(&mut room, 11, q[0], now + 2, &l));
    assert!(!again.resumed);
    // A place frees: it goes to 11, not to 12 who polled all along.
    assert!(room.revoke(1));
    assert!(matches!(
        visit(&mut room, 12, q[1], now + 3, &l),
        Verdict::Wait(_)
    ));
    assert_eq!(
        visit(&mut room, 11, q[0], now + 4, &l),
        Verdict::Admit { sid: 11 }
    );
}

/// Its turn came while it was away: the others went in past it; back, it takes the next free
/// place, and never one above max_active.
#[test]
fn a_waiter_whose_turn_passed_goes_in_at_the_next_free_place() {
    let mut mem = Mem::new(64 * 1024);
    let l = kept(5 * MIN);
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    let t0 = 1_000_000;
    let q = full_room_with_four_waiting(&mut room, &l, t0);
    // 11 stops polling; after its presence, both places free and 12, 13 go in past it.
    let t1 = t0 + 10_000;
    assert!(room.revoke(1) && room.revoke(2));
    assert_eq!(
        visit(&mut room, 12, q[1], t1, &l),
        Verdict::Admit { sid: 12 }
    );
    assert_eq!(
        visit(&mut room, 13, q[2], t1, &l),
        Verdict::Admit { sid: 13 }
    );
    // 14 still counts 11 ahead of it (kept), so its position did not grow when 11 left.
    assert_eq!(place(visit(&mut room, 14, q[3], t1 + 1, &l)).position, 2);
    // 11 is back within keep while the room is full: it waits first, never above max_active.
    let t2 = t1 + MIN;
    room.pass(12, 0, t2, &l);
    room.pass(13, 0, t2, &l);
    let back = place(visit(&mut room, 11, q[0], t2, &l));
    assert_eq!((back.position, back.resumed), (1, true));
    assert_eq!(room.active_now(t2, &l), 2);
    // The next free place is its own.
    assert!(room.revoke(13));
    assert!(matches!(
        visit(&mut room, 14, q[3], t2 + 1, &l),
        Verdict::Wait(_)
    ));
    assert_eq!(
        visit(&mut room, 11, q[0], t2 + 2, &l),
        Verdict::Admit { sid: 11 }
    );
    assert_eq!(room.active_now(t2 + 2, &l), 2);
}

/// Away past keep: the place is gone; back, the client starts again at the tail, and the
/// positions of those behind it only moved forward.
#[test]
fn a_waiter_away_past_keep_goes_to_the_tail() {
    let mut mem = Mem::new(64 * 1024);
    let l = kept(2 * MIN);
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    let t0 = 1_000_000;
    let q = full_room_with_four_waiting(&mut room, &l, t0);
    let others = [(12, q[1]), (13, q[2]), (14, q[3])];
    let mut last = vec![u64::MAX; 3];
    let mut now = t0;
    while now < t0 + 3 * MIN {
        room.pass(1, 0, now, &l);
        room.pass(2, 0, now, &l);
        poll_all(&mut room, &l, &others, (now, now + 10_000), &mut last);
        now += 12_000;
    }
    assert_eq!(last, vec![1, 2, 3]);
    let back = place(visit(&mut room, 11, q[0], now, &l));
    assert!(back.qnum > q[3]);
    assert_eq!((back.position, back.queue_len, back.resumed), (4, 4, false));
}

/// A full ring refuses a newcomer cleanly and drops no kept place.
#[test]
fn a_full_line_refuses_newcomers_and_keeps_kept_places() {
    let mut mem = Mem::new(48 * 1024);
    let l = Limits {
        max_active: 1,
        ..kept(5 * MIN)
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    let t0 = 1_000_000;
    assert_eq!(visit(&mut room, 1, 0, t0, &l), Verdict::Admit { sid: 1 });
    let mut places = vec![];
    let mut sid = 100;
    let refused = loop {
        sid += 1;
        match visit(&mut room, sid, 0, t0 + 1, &l) {
            Verdict::Wait(p) => places.push((sid, p.qnum)),
            Verdict::Refuse(Refusal::LineFull { queue_len }) => break queue_len,
            other => panic!("{other:?}"),
        }
        assert!(sid < 100_000, "the line never filled");
    };
    assert_eq!(refused, places.len() as u64);
    // A minute later (everyone absent, all kept) the line is still full, and every place
    // still answers at its own position.
    let t1 = t0 + MIN;
    room.pass(1, 0, t1, &l);
    assert!(matches!(
        visit(&mut room, sid + 1, 0, t1, &l),
        Verdict::Refuse(Refusal::LineFull { .. })
    ));
    for (i, &(s, q)) in places.iter().enumerate().step_by(97) {
        let p = place(visit(&mut room, s, q, t1 + 1, &l));
        assert_eq!((p.qnum, p.position, p.resumed), (q, i as u64 + 1, true));
    }
}
