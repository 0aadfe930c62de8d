//! Unit tests of the room: the line, positions, sessions and flood control.

use super::rules::{Limits, Mode};
use super::*;

fn limits() -> Limits {
    Limits {
        max_active: 2,
        new_per_minute: None,
        presence_ms: 20_000,
        keep_ms: 20_000,
        active_window_ms: 60_000,
        mode: Mode::Fifo,
        flood: None,
        session_rate: None,
    }
}

struct Mem(Vec<u64>);
impl Mem {
    fn new(bytes: usize) -> Mem {
        Mem(vec![0u64; bytes / 8])
    }
    fn bytes(&mut self) -> &mut [u8] {
        let len = self.0.len() * 8;
        // SAFETY: a Vec<u64> is 8-aligned and `len` bytes long.
        unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut u8, len) }
    }
}

fn visit(room: &mut Room, sid: u64, qnum: u64, now: u64, l: &Limits) -> Verdict {
    room.visit(
        Visit {
            sid,
            qnum,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        },
        now,
        l,
    )
}

fn place(v: Verdict) -> Place {
    match v {
        Verdict::Wait(p) => p,
        other => panic!("expected to wait, got {other:?}"),
    }
}

#[test]
fn empty_room_admits_then_queues_in_arrival_order() {
    let mut mem = Mem::new(64 * 1024);
    let l = limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    assert_eq!(
        visit(&mut room, 11, 0, 1000, &l),
        Verdict::Admit { sid: 11 }
    );
    assert_eq!(
        visit(&mut room, 12, 0, 1000, &l),
        Verdict::Admit { sid: 12 }
    );
    let c = place(visit(&mut room, 13, 0, 1000, &l));
    let d = place(visit(&mut room, 14, 0, 1001, &l));
    assert_eq!((c.position, d.position), (1, 2));
    assert_eq!(d.queue_len, 2);
    // Retrying keeps the same place.
    let c2 = place(visit(&mut room, 13, c.qnum, 1500, &l));
    assert_eq!((c2.qnum, c2.position), (c.qnum, 1));
    let d2 = place(visit(&mut room, 14, d.qnum, 1500, &l));
    assert_eq!((d2.qnum, d2.position), (d.qnum, 2));
}

/// [S29] The room is engaged while a place is missing or someone present waits, and idle
/// again once places free and the line is gone; its mode can engage it too.
#[test]
fn engaged_while_full_or_waiting() {
    let mut mem = Mem::new(64 * 1024);
    let l = limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    assert!(!room.engaged(1000, &l));
    visit(&mut room, 11, 0, 1000, &l);
    assert!(!room.engaged(1000, &l), "one of two places taken");
    visit(&mut room, 12, 0, 1000, &l);
    assert!(room.engaged(1000, &l), "full");
    let waiter = place(visit(&mut room, 13, 0, 1000, &l));
    // The admitted leave (their active window ends) while the waiter is still present.
    place(visit(&mut room, 13, waiter.qnum, 60_000, &l));
    assert!(room.engaged(61_500, &l), "someone waits");
    // The waiter goes too: nobody present waits, nobody is active. (The look itself does no
    // tidying: the room's next decision, or a snapshot, removes the sessions that ended.)
    let later = 60_000 + l.presence_ms + 1;
    let _ = room.snapshot(later, &l);
    assert!(!room.engaged(later, &l));
    let _ = waiter;
    let queue_all = Limits {
        mode: Mode::QueueAll,
        ..l
    };
    assert!(room.engaged(200_000, &queue_all));
    let open = Limits {
        mode: Mode::Passthrough,
        max_active: 0,
        ..l
    };
    assert!(!room.engaged(200_000, &open));
}

/// [S29] One person, one place: a page's sub-resource on its page pass (`Visit::page`) of a
/// session admitted and still active is let in as it is: no second admission counted, no
/// place in line, even when the room is full. Any other visit of that session (a user key's
/// second device) takes the line as before.
#[test]
fn a_page_pass_visit_of_an_admitted_session_takes_nothing_more() {
    let mut mem = Mem::new(64 * 1024);
    let l = limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    let page = |sid| Visit {
        sid,
        qnum: 0,
        draw: 0,
        flood_key: None,
        arrival: 0,
        page: true,
    };
    assert_eq!(room.visit(page(7), 1000, &l), Verdict::Admit { sid: 7 });
    assert_eq!(visit(&mut room, 8, 0, 1000, &l), Verdict::Admit { sid: 8 });
    // Full now; the page's other assets on 7's pass come at once.
    assert_eq!(room.visit(page(7), 1001, &l), Verdict::Admit { sid: 7 });
    let s = room.snapshot(1001, &l);
    assert_eq!((s.active, s.queue_len, s.counters.admitted), (2, 0, 2));
    // Not on a page pass: the same session waits in line (one_place_per='s second device).
    let second_device = place(visit(&mut room, 8, 0, 1002, &l));
    assert_eq!(second_device.position, 1);
}

/// A waiting ticket shown again once its session was let in (two tabs opened at once on it:
/// the first took the place) is the same person: let in as it is, no second admission
/// counted, no new place at the tail, even with the room full (`Visit::follows_admission`).
#[test]
fn a_waiting_ticket_shown_after_its_admission_takes_nothing_more() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        max_active: 1,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    assert_eq!(visit(&mut room, 1, 0, 1000, &l), Verdict::Admit { sid: 1 });
    let waiting = place(visit(&mut room, 2, 0, 1000, &l));
    assert_eq!(waiting.position, 1);
    assert!(room.revoke(1));
    assert_eq!(
        visit(&mut room, 2, waiting.qnum, 1200, &l),
        Verdict::Admit { sid: 2 }
    );
    // The second tab, with the same waiting ticket, a moment later; the room is full.
    assert_eq!(
        visit(&mut room, 2, waiting.qnum, 1201, &l),
        Verdict::Admit { sid: 2 }
    );
    let s = room.snapshot(1201, &l);
    assert_eq!((s.active, s.queue_len, s.counters.admitted), (1, 0, 2));
}

#[test]
fn head_is_admitted_when_capacity_frees_after_active_window() {
    let mut mem = Mem::new(64 * 1024);
    let l = limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    visit(&mut room, 2, 0, 0, &l);
    let c = place(visit(&mut room, 3, 0, 0, &l));
    let d = place(visit(&mut room, 4, 0, 0, &l));
    // Both keep polling every 10 s; the second in line never goes first.
    for t in [10_000, 20_000, 30_000, 40_000, 50_000] {
        assert!(matches!(
            visit(&mut room, 4, d.qnum, t, &l),
            Verdict::Wait(_)
        ));
        assert!(matches!(
            visit(&mut room, 3, c.qnum, t, &l),
            Verdict::Wait(_)
        ));
    }
    // Admitted 1 stays active by being seen; 2 is not seen again.
    assert_eq!(room.pass(1, 0, 30_000, &l), PassVerdict::Counted);
    assert!(matches!(
        visit(&mut room, 3, c.qnum, 59_999, &l),
        Verdict::Wait(_)
    ));
    // 2 has been unseen for active_window: its place frees and the head goes in.
    assert_eq!(
        visit(&mut room, 3, c.qnum, 60_000, &l),
        Verdict::Admit { sid: 3 }
    );
    let d = place(visit(&mut room, 4, d.qnum, 60_001, &l));
    assert_eq!(d.position, 1);
}

#[test]
fn absent_head_loses_its_place() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        max_active: 1,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    let b = place(visit(&mut room, 2, 0, 0, &l));
    let c = place(visit(&mut room, 3, 0, 0, &l));
    assert_eq!(c.position, 2);
    // c keeps polling, b goes away.
    let c = place(visit(&mut room, 3, c.qnum, 19_000, &l));
    assert_eq!(c.position, 2);
    let c = place(visit(&mut room, 3, c.qnum, 20_000, &l));
    assert_eq!(c.position, 1, "absent head dropped after presence");
    // b comes back too late: a new place at the tail.
    let b2 = place(visit(&mut room, 2, b.qnum, 21_000, &l));
    assert_ne!(b2.qnum, b.qnum);
    assert_eq!(b2.position, 2);
    assert_eq!(room.snapshot(21_000, &l).counters.expired, 1);
}

#[test]
fn new_per_minute_limits_inflow() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        max_active: 100,
        new_per_minute: Some(2),
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    assert!(matches!(
        visit(&mut room, 1, 0, 0, &l),
        Verdict::Admit { .. }
    ));
    assert!(matches!(
        visit(&mut room, 2, 0, 0, &l),
        Verdict::Admit { .. }
    ));
    let c = place(visit(&mut room, 3, 0, 0, &l));
    assert_eq!(
        visit(&mut room, 3, c.qnum, 60_000, &l),
        Verdict::Admit { sid: 3 }
    );
}

#[test]
fn full_line_refuses_without_corruption() {
    let mut mem = Mem::new(Room::MIN_BYTES);
    let l = Limits {
        max_active: 1,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    let cap = room.capacity();
    visit(&mut room, 1, 0, 0, &l);
    let mut places = vec![];
    for sid in 2..2 + cap {
        places.push(place(visit(&mut room, sid, 0, 0, &l)));
    }
    assert!(matches!(
        visit(&mut room, 999_999, 0, 0, &l),
        Verdict::Refuse(Refusal::LineFull { .. })
    ));
    // Everyone already in line keeps a correct position.
    for (i, p) in places.iter().enumerate() {
        let again = place(visit(&mut room, p.sid, p.qnum, 1, &l));
        assert_eq!(again.position, i as u64 + 1);
    }
}

#[test]
fn attach_sees_what_format_wrote_and_refuses_junk() {
    let mut mem = Mem::new(64 * 1024);
    let l = limits();
    {
        let mut room = Room::format(mem.bytes(), 7).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        visit(&mut room, 2, 0, 0, &l);
        visit(&mut room, 3, 0, 0, &l);
    }
    let mut room = Room::attach(mem.bytes()).unwrap();
    let s = room.snapshot(1, &l);
    assert_eq!((s.queue_len, s.active), (1, 2));
    let mut junk = Mem::new(64 * 1024);
    assert_eq!(
        Room::attach(junk.bytes()).err(),
        Some(LayoutError::NotARoom)
    );
}

#[test]
fn mirrored_figures_show_while_fresh() {
    let mut mem = Mem::new(64 * 1024);
    let l = limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    let m = Mirror {
        queue_len: Some(40),
        active: Some(7),
        mode_override: Some(5),
        version: 900,
    };
    room.mirror_remote(&m, 1000);
    // An older reply that arrives later changes nothing; a partial one changes its part.
    let old = Mirror {
        queue_len: Some(39),
        version: 899,
        ..m
    };
    room.mirror_remote(&old, 1000);
    let part = Mirror {
        queue_len: None,
        active: Some(6),
        mode_override: None,
        version: 901,
    };
    room.mirror_remote(&part, 1000);
    let s = room.snapshot(1000, &l);
    assert_eq!((s.queue_len, s.active, s.mode_override), (40, 6, 5));
    // Stale after the active window: the local figures again.
    let s = room.snapshot(1000 + l.active_window_ms, &l);
    assert_eq!((s.queue_len, s.active), (0, 0));
}

#[test]
fn oldest_wait_counts_from_joining_not_from_the_last_poll() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        max_active: 1,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    let b = place(visit(&mut room, 2, 0, 1_000, &l));
    place(visit(&mut room, 2, b.qnum, 10_000, &l));
    assert_eq!(room.snapshot(15_000, &l).oldest_wait_ms, 14_000);
}

#[test]
fn revoke_frees_a_place_at_once() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        max_active: 1,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    let b = place(visit(&mut room, 2, 0, 0, &l));
    assert!(room.revoke(1));
    assert_eq!(
        visit(&mut room, 2, b.qnum, 10, &l),
        Verdict::Admit { sid: 2 }
    );
}

#[test]
fn a_revoked_admission_replayed_is_refused_until_it_would_have_ended() {
    let mut mem = Mem::new(64 * 1024);
    let l = limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    assert_eq!(room.pass(1, 5_000, 6_000, &l), PassVerdict::Counted);
    assert!(room.revoke(1));
    room.refuse_replays(1, 5_000, 66_000, 6_000);
    // The same admission (a ticket's milliseconds or a token's seconds alike): refused.
    assert_eq!(room.pass(1, 5_000, 7_000, &l), PassVerdict::Revoked);
    assert_eq!(room.pass(1, 5_999, 7_000, &l), PassVerdict::Revoked);
    // Another session, or the same one admitted again later: they pass.
    assert_eq!(room.pass(2, 5_000, 7_000, &l), PassVerdict::Counted);
    assert_eq!(room.pass(1, 9_000, 9_000, &l), PassVerdict::Counted);
    // Once the admission would have ended, the record is gone.
    assert_eq!(room.pass(1, 5_000, 66_000, &l), PassVerdict::Counted);
}

#[test]
fn table_survives_many_sessions_coming_and_going() {
    let mut mem = Mem::new(16 * 1024);
    let l = Limits {
        max_active: 10,
        active_window_ms: 1000,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    for round in 0..200u64 {
        for s in 0..10u64 {
            room.touch(round * 100 + s + 1, round * 1000);
        }
        let snap = room.snapshot(round * 1000, &l);
        assert_eq!(snap.active, 10, "round {round}");
    }
}

#[test]
fn eta_follows_admissions() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        max_active: 1,
        active_window_ms: 1000,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    let b = place(visit(&mut room, 2, 0, 0, &l));
    let c = place(visit(&mut room, 3, 0, 0, &l));
    let d = place(visit(&mut room, 4, 0, 0, &l));
    assert_eq!(c.eta_secs, None);
    assert!(matches!(
        visit(&mut room, 2, b.qnum, 1000, &l),
        Verdict::Admit { .. }
    ));
    visit(&mut room, 4, d.qnum, 1000, &l);
    assert!(matches!(
        visit(&mut room, 3, c.qnum, 2000, &l),
        Verdict::Admit { .. }
    ));
    let d = place(visit(&mut room, 4, d.qnum, 2000, &l));
    assert_eq!(d.position, 1);
    assert_eq!(d.eta_secs, Some(1));
}

#[test]
fn positions_count_only_present_places() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        max_active: 1,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    // Ten clients in line; the ones in the middle stop polling.
    let places: Vec<Place> = (2..12)
        .map(|sid| place(visit(&mut room, sid, 0, 0, &l)))
        .collect();
    assert_eq!(places[9].position, 10);
    for t in [10_000u64, 19_999] {
        for p in places.iter().filter(|p| p.sid % 2 == 0) {
            place(visit(&mut room, p.sid, p.qnum, t, &l));
        }
    }
    // At 20 s the absent ones (odd sids) are gone, wherever they stood.
    let last = place(visit(&mut room, 10, places[8].qnum, 20_000, &l));
    assert_eq!((last.position, last.queue_len), (5, 5));
    let first = place(visit(&mut room, 2, places[0].qnum, 20_001, &l));
    assert_eq!(first.position, 1);
    assert_eq!(room.snapshot(20_001, &l).counters.expired, 5);
}

#[test]
fn head_is_the_first_present_place_and_goes_first() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        max_active: 1,
        active_window_ms: 30_000,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    let b = place(visit(&mut room, 2, 0, 0, &l));
    let c = place(visit(&mut room, 3, 0, 0, &l));
    // b leaves (stops polling); c keeps polling and becomes the head at 20 s.
    place(visit(&mut room, 3, c.qnum, 15_000, &l));
    let c2 = place(visit(&mut room, 3, c.qnum, 25_000, &l));
    assert_eq!(c2.position, 1);
    // Capacity frees at 30 s (session 1 unseen): the head goes in.
    assert_eq!(
        visit(&mut room, 3, c.qnum, 30_000, &l),
        Verdict::Admit { sid: 3 }
    );
    assert_ne!(b.qnum, c.qnum);
    assert_eq!(room.snapshot(30_000, &l).queue_len, 0);
}

#[test]
fn abandoned_places_free_the_ring() {
    // A small ring filled by clients who never come back is empty again after presence.
    let mut mem = Mem::new(Room::MIN_BYTES);
    let l = Limits {
        max_active: 1,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    let cap = room.capacity();
    visit(&mut room, 1, 0, 0, &l);
    for round in 0..3u64 {
        let t = round * 20_000;
        for sid in 0..cap {
            assert!(
                matches!(
                    visit(&mut room, 10 + round * cap + sid, 0, t, &l),
                    Verdict::Wait(_)
                ),
                "round {round} sid {sid}"
            );
        }
        assert!(matches!(
            visit(&mut room, 999_999_999, 0, t, &l),
            Verdict::Refuse(Refusal::LineFull { .. })
        ));
    }
}

#[test]
fn one_address_takes_places_at_its_rate_others_are_not_slowed() {
    let mut mem = Mem::new(256 * 1024);
    let l = Limits {
        max_active: 1,
        flood: Some(crate::room::gcra::Rate::per_sec(1.0, 4)),
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    let from = |room: &mut Room, sid: u64, key: u64, now: u64| {
        room.visit(
            Visit {
                sid,
                qnum: 0,
                draw: 0,
                flood_key: Some(key),
                arrival: 0,
                page: false,
            },
            now,
            &l,
        )
    };
    // Address 7: one plus a burst of four places at once, then one a second.
    for sid in 10..15 {
        assert!(matches!(from(&mut room, sid, 7, 1000), Verdict::Wait(_)));
    }
    assert!(matches!(
        from(&mut room, 15, 7, 1000),
        Verdict::Throttled { retry_ms: 1000, .. }
    ));
    // Another address is not slowed.
    assert!(matches!(from(&mut room, 16, 8, 1000), Verdict::Wait(_)));
    assert!(matches!(from(&mut room, 17, 7, 2000), Verdict::Wait(_)));
    assert!(matches!(
        from(&mut room, 18, 7, 2000),
        Verdict::Throttled { .. }
    ));
    assert_eq!(room.snapshot(2000, &l).counters.throttled, 2);
    // Many addresses: each keeps its own budget even when the table turns over.
    for key in 100..20_000u64 {
        assert!(!matches!(
            from(&mut room, key + 1_000_000, key, 3000),
            Verdict::Throttled { .. }
        ));
    }
}

#[test]
fn a_session_over_its_request_rate_is_limited() {
    let mut mem = Mem::new(64 * 1024);
    let l = Limits {
        session_rate: Some(crate::room::gcra::Rate::per_sec(10.0, 19)),
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    for _ in 0..20 {
        assert_eq!(room.pass(1, 0, 1000, &l), PassVerdict::Counted);
    }
    assert_eq!(
        room.pass(1, 0, 1000, &l),
        PassVerdict::Limited { retry_ms: 100 }
    );
    assert_eq!(room.pass(1, 0, 1100, &l), PassVerdict::Counted);
    // Another session has its own budget.
    assert_eq!(room.pass(2, 0, 1100, &l), PassVerdict::Counted);
    assert_eq!(room.snapshot(1100, &l).counters.session_limited, 1);
}

mod event;
mod expiry;
mod keep;

#[test]
fn a_proof_is_spent_once_until_its_record_expires() {
    let mut mem = Mem::new(64 * 1024);
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    assert!(room.spend_proof(42, 5_000, 1_000));
    // The same proof again, on this node, while remembered: refused, and still remembered.
    assert!(!room.spend_proof(42, 9_000, 2_000));
    assert!(!room.spend_proof(42, 9_000, 4_999));
    // Another ticket's proof is its own.
    assert!(room.spend_proof(43, 5_000, 2_000));
    // Once the record is past (the ticket may then join without a proof anyway), it is new.
    assert!(room.spend_proof(42, 9_000, 5_000));
    assert!(!room.spend_proof(42, 9_000, 6_000));
    // A flood of proofs larger than the table: the work per proof is one set, and a proof
    // just spent is still refused again (the entries given up are the ones expiring first).
    for key in 1_000..200_000u64 {
        assert!(room.spend_proof(key, 100_000 + key, 7_000));
        assert!(!room.spend_proof(key, 100_000 + key, 7_000), "{key}");
    }
}
