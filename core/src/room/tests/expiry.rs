//! Bounded expiry (issue 16): a mass expiry is removed a bounded number per decision, while
//! the head, the room's fullness and what a decision sees stay exact.

use super::*;
use crate::room::layout::NIL;

/// A room of `mb` MiB with one admitted session (so everyone else waits) that stays active.
fn big_room(mb: usize) -> Mem {
    Mem::new(mb << 20)
}

fn long_session_limits() -> Limits {
    Limits {
        max_active: 1,
        active_window_ms: 3_600_000,
        ..limits()
    }
}

/// Places removed as absent so far (read without a decision: `snapshot` would tidy).
fn expired(room: &Room) -> u64 {
    room.hdr.counters.expired
}

#[test]
fn a_mass_expiry_is_removed_a_bounded_number_per_decision() {
    let mut mem = big_room(12);
    let l = long_session_limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    assert!(room.capacity() > 100_010);
    visit(&mut room, 1, 0, 0, &l);
    // 100,000 clients take a place at once and never come back.
    for sid in 0..100_000u64 {
        place(visit(&mut room, 1_000 + sid, 0, 0, &l));
    }
    // Two behind them keep polling.
    let p = place(visit(&mut room, 7, 0, 1, &l));
    assert_eq!(p.position, 100_001);
    let p = place(visit(&mut room, 7, p.qnum, 10_000, &l));
    let q = place(visit(&mut room, 8, 0, 10_000, &l));
    assert_eq!((p.position, q.position), (100_001, 100_002));

    // At 20 s the 100,000 are gone: the next decision removes EXPIRE_STEP of them, and its
    // answer is already as if all were gone.
    let p2 = place(visit(&mut room, 7, p.qnum, 20_000, &l));
    assert_eq!(expired(&room), EXPIRE_STEP as u64);
    assert_eq!((p2.qnum, p2.position, p2.queue_len), (p.qnum, 1, 2));
    let q2 = place(visit(&mut room, 8, q.qnum, 20_001, &l));
    assert_eq!(expired(&room), 2 * EXPIRE_STEP as u64);
    assert_eq!((q2.position, q2.queue_len), (2, 2));

    // One of the absent ones comes back: its place was gone, it goes to the tail.
    let back = place(visit(&mut room, 1_000, 1, 20_002, &l));
    assert_ne!(back.qnum, 1);
    assert_eq!((back.position, back.queue_len), (3, 3));
    // A newcomer takes the place after it.
    let r = place(visit(&mut room, 9, 0, 20_003, &l));
    assert_eq!((r.position, r.queue_len), (4, 4));

    // A place frees: the first present client is the head and goes in at once.
    assert!(room.revoke(1));
    assert_eq!(
        visit(&mut room, 7, p.qnum, 20_004, &l),
        Verdict::Admit { sid: 7 }
    );
    let q3 = place(visit(&mut room, 8, q.qnum, 20_005, &l));
    assert_eq!((q3.position, q3.queue_len), (1, 3));

    // The rest drains at EXPIRE_STEP per decision, each decision's answer exact meanwhile.
    let mut decisions = 0u64;
    let mut t = 20_006;
    while expired(&room) < 100_000 {
        let before = expired(&room);
        let q4 = place(visit(&mut room, 8, q.qnum, t, &l));
        assert_eq!((q4.position, q4.queue_len), (1, 3), "decision {decisions}");
        assert!(expired(&room) - before <= EXPIRE_STEP as u64);
        decisions += 1;
        t += 1;
        assert!(decisions < 2_000, "the backlog does not drain");
    }
    assert_eq!(expired(&room), 100_000);
    assert_eq!(room.hdr.waiting, 3);
    assert_eq!(room.snapshot(t, &l).queue_len, 3);
}

#[test]
fn nobody_present_means_nobody_waits_while_absent_places_are_removed() {
    let mut mem = big_room(2);
    let l = Limits {
        max_active: 2,
        active_window_ms: 3_600_000,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    visit(&mut room, 2, 0, 0, &l);
    for sid in 0..1_000u64 {
        place(visit(&mut room, 1_000 + sid, 0, 0, &l));
    }
    assert!(room.revoke(2));
    // All 1,000 are absent at 20 s: a newcomer finds nobody waiting and walks in.
    assert_eq!(
        visit(&mut room, 5, 0, 20_000, &l),
        Verdict::Admit { sid: 5 }
    );
    assert!(room.hdr.waiting > 0, "removal is bounded: some are left");
    let s = room.snapshot(20_000, &l);
    assert_eq!((s.queue_len, s.oldest_wait_ms), (0, 0));
    // The line is full again (2 active): the next newcomer is first in line.
    let w = place(visit(&mut room, 6, 0, 20_001, &l));
    assert_eq!((w.position, w.queue_len), (1, 1));
}

#[test]
fn a_ring_full_of_absent_places_takes_newcomers() {
    // Every slot of a small ring holds an absent place: each newcomer gets one (the slot of
    // its queue number is freed on the spot), and positions are right from the first.
    let mut mem = Mem::new(64 * 1024);
    let l = long_session_limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    let cap = room.capacity();
    assert!(cap > 2 * EXPIRE_STEP as u64);
    visit(&mut room, 1, 0, 0, &l);
    for sid in 0..cap {
        place(visit(&mut room, 10 + sid, 0, 0, &l));
    }
    assert!(matches!(
        visit(&mut room, 5, 0, 0, &l),
        Verdict::Refuse(Refusal::LineFull { .. })
    ));
    let mut mine = vec![];
    for (i, sid) in (1_000_000..1_000_000 + cap).enumerate() {
        let p = place(visit(&mut room, sid, 0, 20_000, &l));
        assert_eq!((p.position, p.queue_len), (i as u64 + 1, i as u64 + 1));
        mine.push(p);
    }
    assert!(matches!(
        visit(&mut room, 5, 0, 20_000, &l),
        Verdict::Refuse(Refusal::LineFull { .. })
    ));
    let last = mine.last().unwrap();
    let again = place(visit(&mut room, last.sid, last.qnum, 20_001, &l));
    assert_eq!(again.position, cap);
}

#[test]
fn absent_places_among_present_ones_stop_counting_as_they_are_reached() {
    let mut mem = big_room(2);
    let l = long_session_limits();
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    visit(&mut room, 1, 0, 0, &l);
    // Ten present clients, each behind `gap` absent places.
    let run = |room: &mut Room, gap: u64, base: u64, t0: u64| -> Vec<Place> {
        let mut present = vec![];
        for k in 0..10u64 {
            for j in 0..gap {
                place(visit(room, base + k * 1_000 + j, 0, t0, &l));
            }
            present.push(place(visit(room, base + k * 1_000 + 999, 0, t0, &l)));
        }
        for p in &present {
            place(visit(room, p.sid, p.qnum, t0 + 10_000, &l));
        }
        present
    };
    // A few absent places (fewer than one decision removes) between each: exact at once.
    let present = run(&mut room, 5, 1_000_000, 0);
    for (i, p) in present.iter().enumerate() {
        let a = place(visit(&mut room, p.sid, p.qnum, 20_000, &l));
        assert_eq!((a.position, a.queue_len), (i as u64 + 1, 10), "client {i}");
    }
    // Many (more than a decision removes) ahead of the last ones: the head and the first
    // clients are exact at once, the ones further back count absent places ahead of them
    // until the decisions reach them (ahead first), then are exact too.
    let present = run(&mut room, 100, 2_000_000, 100_000);
    let first = place(visit(
        &mut room,
        present[0].sid,
        present[0].qnum,
        120_000,
        &l,
    ));
    assert_eq!(first.position, 1);
    let mut t = 120_001;
    for _ in 0..(10 * 100 / EXPIRE_STEP as u64 + 2) {
        place(visit(&mut room, present[0].sid, present[0].qnum, t, &l));
        t += 1;
    }
    for (i, p) in present.iter().enumerate() {
        let a = place(visit(&mut room, p.sid, p.qnum, t, &l));
        assert_eq!((a.position, a.queue_len), (i as u64 + 1, 10), "client {i}");
    }
}

#[test]
fn sessions_gone_at_once_free_their_places_at_the_next_decision() {
    let mut mem = big_room(12);
    let n = 100_000u64;
    let l = Limits {
        max_active: n,
        ..limits()
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    for sid in 0..n {
        assert_eq!(
            visit(&mut room, 1_000 + sid, 0, 0, &l),
            Verdict::Admit { sid: 1_000 + sid }
        );
    }
    let w = place(visit(&mut room, 7, 0, 1, &l));
    let x = place(visit(&mut room, 8, 0, 1, &l));
    for t in [15_000, 30_000, 45_000, 59_999] {
        place(visit(&mut room, 7, w.qnum, t, &l));
        place(visit(&mut room, 8, x.qnum, t, &l));
    }
    // At 60 s all 100,000 are gone: the head goes in at its next decision, the next one too.
    assert_eq!(
        visit(&mut room, 7, w.qnum, 60_000, &l),
        Verdict::Admit { sid: 7 }
    );
    assert!(
        room.hdr.active > n - 2 * EXPIRE_STEP as u64,
        "removal is bounded"
    );
    assert_eq!(
        visit(&mut room, 8, x.qnum, 60_001, &l),
        Verdict::Admit { sid: 8 }
    );
}

#[test]
fn absent_sessions_beyond_max_active_do_not_hold_the_room_full() {
    // Passthrough lets 10,000 in with max_active 10; back in arrival order, all but a few
    // stop at once: the room knows at the next decision, not 10,000 / EXPIRE_STEP later.
    let mut mem = big_room(2);
    let fifo = Limits {
        max_active: 10,
        ..limits()
    };
    let open = Limits {
        mode: Mode::Passthrough,
        ..fifo
    };
    let mut room = Room::format(mem.bytes(), 1).unwrap();
    for sid in 0..10_000u64 {
        assert!(matches!(
            visit(&mut room, 1_000 + sid, 0, 0, &open),
            Verdict::Admit { .. }
        ));
    }
    // Nine stay (seen at 30 s); the room is full until the others are gone.
    for sid in 0..9u64 {
        assert_eq!(
            room.pass(1_000 + sid, 0, 30_000, &fifo),
            PassVerdict::Counted
        );
    }
    let w = place(visit(&mut room, 7, 0, 30_000, &fifo));
    let x = place(visit(&mut room, 8, 0, 30_000, &fifo));
    assert_eq!(w.position, 1);
    let w = place(visit(&mut room, 7, w.qnum, 59_999, &fifo));
    assert_eq!(w.position, 1);
    // At 60 s: 9 active, one place free. The head goes in, the next one waits (10 active),
    // though thousands of absent sessions are still in the table.
    assert_eq!(
        visit(&mut room, 7, w.qnum, 60_000, &fifo),
        Verdict::Admit { sid: 7 }
    );
    assert!(room.hdr.active > 9_000);
    let x2 = place(visit(&mut room, 8, x.qnum, 60_001, &fifo));
    assert_eq!(x2.position, 1);
    // One of the nine leaves (revoked): the next goes in.
    assert!(room.revoke(1_000));
    assert_eq!(
        visit(&mut room, 8, x.qnum, 60_002, &fifo),
        Verdict::Admit { sid: 8 }
    );
    // max_active changes (a reload): the fence moves there, and the answer follows.
    let more = Limits {
        max_active: 12,
        ..fifo
    };
    // (10 active: 8 of the nine, 7 and 8.)
    assert_eq!(
        visit(&mut room, 9, 0, 60_003, &more),
        Verdict::Admit { sid: 9 }
    );
    assert_eq!(
        visit(&mut room, 10, 0, 60_003, &more),
        Verdict::Admit { sid: 10 }
    );
    let y = place(visit(&mut room, 11, 0, 60_004, &more));
    assert_eq!(y.position, 1);
    let fewer = Limits {
        max_active: 3,
        ..fifo
    };
    let y = place(visit(&mut room, 11, y.qnum, 60_005, &fewer));
    assert_eq!(y.position, 1);
    // The eight go at 90 s, leaving 7 to 10 (4 of 3); 7 at 120 s, 8 at 120.002 s, 9 and 10
    // at 120.003 s: then the next decision admits.
    for t in [75_000, 90_000, 105_000, 120_001] {
        let y2 = place(visit(&mut room, 11, y.qnum, t, &fewer));
        assert_eq!(y2.position, 1, "at {t}");
    }
    assert!(room.hdr.active > 9_000, "absent ones still in the table");
    assert_eq!(
        visit(&mut room, 11, y.qnum, 120_003, &fewer),
        Verdict::Admit { sid: 11 }
    );
}

/// A small deterministic generator for the model tests.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

/// What the room's structures must agree on, checked against plain scans.
fn check(room: &mut Room, now: u64, l: &Limits) {
    use super::sight::{is_present, Cuts};
    let c = Cuts::at(now, l);
    let thr = c.present;
    // The sight tree: every node is the join of its children, every leaf of its slots.
    let nodes = room.sight.len();
    let leaves = nodes / 2;
    for v in (1..nodes).rev() {
        let want = if v >= leaves {
            let b = v - leaves;
            let start = (b * super::layout::SIGHT_BLOCK).min(room.ring.len());
            let end = ((b + 1) * super::layout::SIGHT_BLOCK).min(room.ring.len());
            room.ring[start..end]
                .iter()
                .filter(|s| s.sid != 0)
                .fold(Sight::EMPTY, |a, s| Sight {
                    max: a.max.max(s.last_seen + 1),
                    min: a.min.min(s.last_seen + 1),
                })
        } else {
            let (a, b) = (room.sight[2 * v], room.sight[2 * v + 1]);
            Sight {
                max: a.max.max(b.max),
                min: a.min.min(b.min),
            }
        };
        assert_eq!(room.sight[v], want, "node {v}");
    }
    // The head: the present place with the lowest queue number.
    let want_head = room
        .ring
        .iter()
        .filter(|s| s.sid != 0 && is_present(s, thr))
        .map(|s| s.qnum)
        .min();
    assert_eq!(room.head(c), want_head);
    // The front: the kept place with the lowest queue number.
    let want_front = room
        .ring
        .iter()
        .filter(|s| s.sid != 0 && is_present(s, c.kept))
        .map(|s| s.qnum)
        .min();
    let live = room.ring.iter().filter(|s| s.sid != 0).count() as u64;
    assert_eq!(room.hdr.waiting, live);
    // The sessions: the table's count is the list's length, and the fence stands `fence_k`
    // from its back.
    let mut order = vec![];
    let mut i = room.hdr.lru_last;
    while i != NIL {
        order.push(i);
        i = room.table[i as usize].prev;
    }
    assert_eq!(room.hdr.active, order.len() as u64);
    assert_eq!(
        room.table.iter().filter(|e| e.sid != 0).count(),
        order.len()
    );
    for w in order.windows(2) {
        assert!(room.table[w[0] as usize].stamp > room.table[w[1] as usize].stamp);
    }
    let k = room.hdr.fence_k;
    if k > 0 {
        let want = order.get(k as usize - 1).copied().unwrap_or(NIL);
        assert_eq!(room.hdr.fence, want, "fence {k} of {}", order.len());
    }
    // Whether the room is full is exact, however many absent sessions are left.
    let live_sessions = room
        .table
        .iter()
        .filter(|e| e.sid != 0 && now - e.last_seen < l.active_window_ms)
        .count() as u64;
    let full = room.active_now(now, l) >= l.max_active;
    assert_eq!(
        full,
        live_sessions >= l.max_active,
        "{live_sessions} active"
    );
    // The line's length: the kept places, plus gone ones after the front not yet removed.
    let kept = room
        .ring
        .iter()
        .filter(|s| s.sid != 0 && is_present(s, c.kept))
        .count() as u64;
    let gone_after_front = match want_front {
        Some(f) => room
            .ring
            .iter()
            .filter(|s| s.sid != 0 && !is_present(s, c.kept) && s.qnum > f)
            .count() as u64,
        None => 0,
    };
    assert_eq!(room.line_len(c), kept + gone_after_front);
}

#[test]
fn the_line_and_the_sessions_agree_with_plain_scans() {
    let (mut lingering_places, mut lingering_sessions) = (0u64, 0u64);
    for seed in 1..=4u64 {
        let mut rng = Lcg(seed);
        let mut mem = Mem::new(48 * 1024);
        let mut room = Room::format(mem.bytes(), 1 + seed * 1_000).unwrap();
        let mut l = Limits {
            max_active: 3,
            presence_ms: 2_000,
            // Half the seeds keep absent places past their presence ([S27]).
            keep_ms: if seed % 2 == 0 { 5_000 } else { 2_000 },
            active_window_ms: 5_000,
            ..limits()
        };
        let mut now = 1_000u64;
        let mut waiting: Vec<(u64, u64)> = vec![];
        let mut admitted: Vec<u64> = vec![];
        let mut next_sid = 1u64;
        for step in 0..6_000 {
            match rng.next(100) {
                0..=29 => {
                    let sid = next_sid;
                    next_sid += 1;
                    match visit(&mut room, sid, 0, now, &l) {
                        Verdict::Wait(p) => waiting.push((sid, p.qnum)),
                        Verdict::Admit { sid } => admitted.push(sid),
                        _ => {}
                    }
                }
                30..=64 if !waiting.is_empty() => {
                    let i = rng.next(waiting.len() as u64) as usize;
                    let (sid, q) = waiting[i];
                    match visit(&mut room, sid, q, now, &l) {
                        Verdict::Wait(p) => {
                            waiting[i] = (sid, p.qnum);
                            if l.mode == Mode::Fifo {
                                let thr = super::sight::cut(now, l.presence_ms);
                                // The position counts the places from the head: at least the
                                // present ones ahead.
                                let ahead = room
                                    .ring
                                    .iter()
                                    .filter(|s| {
                                        s.sid != 0
                                            && s.qnum < p.qnum
                                            && super::sight::is_present(s, thr)
                                    })
                                    .count() as u64;
                                assert!(p.position > ahead, "step {step}");
                            }
                        }
                        Verdict::Admit { sid } => {
                            waiting.swap_remove(i);
                            admitted.push(sid);
                        }
                        _ => {}
                    }
                }
                65..=84 if !admitted.is_empty() => {
                    let sid = admitted[rng.next(admitted.len() as u64) as usize];
                    room.pass(sid, 0, now, &l);
                }
                85..=87 if !admitted.is_empty() => {
                    let i = rng.next(admitted.len() as u64) as usize;
                    room.revoke(admitted.swap_remove(i));
                }
                88..=89 => {
                    l.max_active = 1 + rng.next(8);
                    l.mode = match rng.next(6) {
                        0 => Mode::Passthrough,
                        1 => Mode::Random,
                        _ => Mode::Fifo,
                    };
                }
                90..=92 => {
                    let _ = room.snapshot(now, &l);
                }
                93 => {
                    // A burst: more newcomers at once than a decision removes later.
                    for _ in 0..100 {
                        let sid = next_sid;
                        next_sid += 1;
                        match visit(&mut room, sid, 0, now, &l) {
                            Verdict::Wait(p) => waiting.push((sid, p.qnum)),
                            Verdict::Admit { sid } => admitted.push(sid),
                            _ => {}
                        }
                    }
                }
                _ => now += rng.next(900),
            }
            check(&mut room, now, &l);
            // How often absent places and sessions were left over (the cases under test).
            let thr = super::sight::Cuts::at(now, &l).kept;
            if room.any_due(thr) {
                lingering_places += 1;
            }
            let front = room.table.get(room.hdr.lru_first as usize);
            if front.is_some_and(|e| now - e.last_seen >= l.active_window_ms) {
                lingering_sessions += 1;
            }
        }
    }
    assert!(lingering_places > 500, "{lingering_places}");
    assert!(lingering_sessions > 500, "{lingering_sessions}");
}
