//! Unit tests of the synced room: the node's rules, reports, pictures and replies.

use super::*;
use crate::redis::resp::Value;

mod counts;
mod first;
mod held;
mod next;
mod replies;
mod reported;
mod unseen;
mod whole;

fn cfg() -> FleetConfig {
    FleetConfig {
        interval_ms: 1000,
        max_active: 10,
        active_window_ms: 60_000,
        presence_ms: 20_000,
        keep_ms: 20_000,
        max_line: 0,
    }
}

/// Its turn, no place yet: told its (unsettled) position, which saw `seen` taken ahead, and
/// to come back in a moment.
fn come_back(position: u64, queue_len: u64, seen: u64) -> FleetVerdict {
    FleetVerdict::Wait {
        position,
        queue_len,
        eta_secs: Some(0),
        counted: Counted::Estimate { seen },
    }
}

/// A waiter holding its place since `arrival`.
fn w(sid: u64, arrival: u64) -> Waiter {
    Waiter {
        sid,
        arrival,
        new_place: false,
    }
}

/// The node's next picture (the answer to its last sync).
fn show(n: &mut FleetNode, p: &RoomPicture, now: u64) {
    assert!(n.apply(p, n.seq(), now, &cfg()));
}

/// A draw's answer after the node's last sync.
fn got(granted: u64) -> Option<Drawn> {
    Some(Drawn { granted, seq: 0 })
}

/// Samples of a line of `n` who arrived 100 ms apart from 100 on, rank by rank.
fn line_of(n: u64) -> Vec<Sample> {
    (0..n)
        .map(|rank| Sample {
            rank,
            arrival: 100 * (rank + 1),
            sid: 0,
        })
        .collect()
}

struct Mem(Vec<u64>);
impl Mem {
    fn bytes(&mut self) -> &mut [u8] {
        let len = self.0.len() * 8;
        // SAFETY: a Vec<u64> is 8-aligned and `len` bytes long.
        unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut u8, len) }
    }
}

fn node(mem: &mut Mem) -> FleetNode<'_> {
    FleetNode::format(mem.bytes(), 7).unwrap()
}

/// The cursor's band (waiters past those the free places rightly take) may take a place only
/// from half an interval after the picture on: until then the places wait for those before it.
#[test]
fn the_band_comes_after_those_the_places_rightly_take() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let samples = line_of(3);
    // One free place (9 of 10 active): it rightly goes to the waiter of 100; the cursor's band
    // reaches 200.
    let picture = RoomPicture {
        reported: 0,
        fleet_active: 9,
        queue_len: 3,
        cursor: 200,
        rightful: 100,
        quota: 2,
        nodes: 1,
        window_ms: 1000,
        free: 1,
        expiring: 0,
        leaving: 0,
        held: 0,
        ends: Vec::new(),
        full: false,
        pressure: 0,
        spent: Vec::new(),
        flood: Vec::new(),
        samples,
        exact: false,
    };
    show(&mut n, &picture, 1000);
    // The band's client, early in the interval: its turn, but come back in a moment; no draw
    // for it (the node's places are not used up).
    let back = come_back(2, 3, 2);
    assert_eq!(n.visit(w(2, 200), 1100, &c), back);
    assert_eq!(n.take_draw(1100, &c), None);
    assert_eq!(n.claim(2, 200, 1499, &c), back);
    // The one before it: in at once.
    assert_eq!(n.visit(w(1, 100), 1200, &c), FleetVerdict::Admit);
    // From half an interval after the picture: the band's client takes what is left.
    assert_eq!(n.visit(w(2, 200), 1500, &c), FleetVerdict::Admit);
    // Past the band: waits, as ever.
    assert!(matches!(
        n.visit(w(3, 300), 1600, &c),
        FleetVerdict::Wait {
            position: 3,
            eta_secs: None | Some(1..),
            ..
        }
    ));
}

#[test]
fn unknown_until_the_first_picture_then_by_cursor_and_quota() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    assert_eq!(n.visit(w(1, 100), 1000, &c), FleetVerdict::Unknown);
    show(
        &mut n,
        &RoomPicture {
            reported: 0,
            fleet_active: 8,
            queue_len: 3,
            cursor: 200,
            rightful: 200,
            quota: 1,
            nodes: 2,
            window_ms: 1000,
            free: 2,
            expiring: 0,
            leaving: 0,
            held: 0,
            ends: Vec::new(),
            full: false,
            pressure: 0,
            spent: Vec::new(),
            flood: Vec::new(),
            samples: vec![
                Sample {
                    rank: 0,
                    arrival: 100,
                    sid: 0,
                },
                Sample {
                    rank: 1,
                    arrival: 200,
                    sid: 0,
                },
                Sample {
                    rank: 2,
                    arrival: 300,
                    sid: 0,
                },
            ],
            exact: false,
        },
        1001,
    );
    // Arrived at or before the cursor, with quota: in.
    assert_eq!(n.visit(w(1, 100), 1100, &c), FleetVerdict::Admit);
    // The quota is used up: come back in a moment; the node asks the pool meanwhile.
    assert_eq!(n.visit(w(2, 200), 1100, &c), come_back(2, 3, 2));
    assert_eq!(n.take_draw(1100, &c).map(|a| a.want), Some(1));
    // One draw in flight at a time.
    assert!(matches!(
        n.visit(w(2, 200), 1150, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1150, &c), None);
    // Granted: the next one whose turn it is walks in.
    n.drawn(1, got(1));
    assert_eq!(n.visit(w(2, 200), 1200, &c), FleetVerdict::Admit);
    // Two were turned away since (at 1150 and now): two places asked for.
    assert!(matches!(
        n.visit(w(5, 150), 1210, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1210, &c).map(|a| a.want), Some(2));
    // The pool is empty: no more draws this interval.
    n.drawn(2, got(0));
    assert!(matches!(
        n.visit(w(5, 150), 1220, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1220, &c), None);
    // Except for a client older than any the pool was found empty for (150): its draw tells
    // the script, which keeps the pool's next place for it (the starved mark).
    assert!(matches!(
        n.visit(w(6, 180), 1230, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1230, &c), None);
    assert!(matches!(
        n.visit(w(7, 120), 1240, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(
        n.take_draw(1240, &c),
        Some(Ask {
            want: 1,
            oldest: 120
        })
    );
    n.drawn(1, got(0));
    assert!(matches!(
        n.visit(w(7, 120), 1250, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1250, &c), None);
    // Younger than the cursor: waits, at its place in the fleet's line.
    assert!(matches!(
        n.visit(w(3, 300), 1100, &c),
        FleetVerdict::Wait {
            position: 3,
            queue_len: 3,
            ..
        }
    ));
    assert!(matches!(
        n.visit(w(4, 900), 1100, &c),
        FleetVerdict::Wait { position: 4, .. }
    ));
    let r = n.take_report();
    let sids = |v: &[Sighting]| v.iter().map(|e| (e.sid, e.at)).collect::<Vec<_>>();
    assert_eq!(sids(&r.admitted), vec![(1, 1100), (2, 1200)]);
    assert_eq!(r.polls, 12);
    // Each waiter once per half presence (the admitted ones included: they were waiting),
    // at its latest sighting.
    let waiters = r
        .waiters
        .iter()
        .map(|w| (w.sid, w.arrival, w.at))
        .collect::<Vec<_>>();
    assert_eq!(
        waiters,
        vec![
            (1, 100, 1100),
            (2, 200, 1200),
            (5, 150, 1220),
            (6, 180, 1230),
            (7, 120, 1250),
            (3, 300, 1100),
            (4, 900, 1100)
        ]
    );
    assert!(n.take_report().waiters.is_empty());
}

#[test]
fn places_drawn_for_those_turned_away_are_theirs() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    // Nobody waits anywhere: everyone may come in, as far as the share goes.
    show(
        &mut n,
        &RoomPicture {
            reported: 0,
            fleet_active: 0,
            queue_len: 0,
            cursor: u64::MAX,
            rightful: u64::MAX,
            quota: 1,
            nodes: 1,
            window_ms: 1000,
            free: 2,
            expiring: 0,
            leaving: 0,
            held: 0,
            ends: Vec::new(),
            full: false,
            pressure: 0,
            spent: Vec::new(),
            flood: Vec::new(),
            samples: vec![],
            exact: false,
        },
        1001,
    );
    assert_eq!(n.visit(w(1, 1010), 1010, &c), FleetVerdict::Admit);
    // The share is used up: B is turned away for a moment, and a place drawn for it.
    assert!(matches!(
        n.visit(w(2, 1020), 1020, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1020, &c).map(|a| a.want), Some(1));
    n.drawn(1, got(1));
    // C, who came after B, does not take B's place ...
    assert!(matches!(
        n.visit(w(3, 1030), 1030, &c),
        FleetVerdict::Wait { .. }
    ));
    // ... which B finds when it comes back.
    assert_eq!(n.visit(w(2, 1020), 1500, &c), FleetVerdict::Admit);
    // D, who came before B, is turned away: its request waits for the draw and claims
    // the place it brought.
    assert!(matches!(
        n.visit(w(4, 1005), 1510, &c),
        FleetVerdict::Wait {
            eta_secs: Some(0),
            ..
        }
    ));
    assert_eq!(n.take_draw(1510, &c).map(|a| a.want), Some(1));
    n.drawn(1, got(1));
    assert_eq!(n.claim(4, 1005, 1512, &c), FleetVerdict::Admit);
    // The pool had nothing for E (who came before D): it waits, by its place in the line.
    assert!(matches!(
        n.visit(w(5, 1002), 1520, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1520, &c).map(|a| a.want), Some(1));
    n.drawn(1, got(0));
    assert!(matches!(
        n.claim(5, 1002, 1522, &c),
        FleetVerdict::Wait { .. }
    ));
    let admitted: Vec<u64> = n.take_report().admitted.iter().map(|e| e.sid).collect();
    assert_eq!(admitted, vec![1, 2, 4]);
}

/// A picture of an empty line answering a sync that left before the client the node holds the
/// cursor at came cannot know it: the hold stays, and those who came later neither come in nor
/// draw ahead of it (t/290 TEST 5 saw a second draw for a later newcomer). A picture answering
/// a sync sent after the held client came, and still showing nobody, ends the hold.
#[test]
fn a_picture_that_cannot_know_the_held_client_keeps_the_hold() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let empty = RoomPicture {
        fleet_active: 1,
        cursor: u64::MAX,
        rightful: u64::MAX,
        nodes: 1,
        window_ms: 1000,
        ..RoomPicture::default()
    };
    n.next_sync(900, 1, &c);
    show(&mut n, &empty, 1001);
    // B finds no place here: turned away, a draw for it, the pool empty.
    assert!(matches!(
        n.visit(w(2, 1020), 1020, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1020, &c).map(|a| a.want), Some(1));
    n.drawn(1, got(0));
    // The next picture answers a sync that left before B came (at 1010): still "nobody waits".
    n.next_sync(1010, 1, &c);
    show(
        &mut n,
        &RoomPicture {
            window_ms: 2000,
            ..empty.clone()
        },
        1100,
    );
    // C, who came after B, waits behind it and sends no draw.
    assert!(matches!(
        n.visit(w(3, 1110), 1110, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1110, &c), None);
    // B, back, is the one whose turn it is: the new picture is worth a draw for it.
    assert!(matches!(
        n.visit(w(2, 1020), 1120, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1120, &c).map(|a| a.oldest), Some(1020));
    n.drawn(1, got(0));
    // A picture answering a sync sent after B and C came, showing nobody (they left): no hold.
    n.next_sync(1200, 1, &c);
    show(
        &mut n,
        &RoomPicture {
            window_ms: 3000,
            ..empty.clone()
        },
        1300,
    );
    assert!(matches!(
        n.visit(w(4, 1310), 1310, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_draw(1310, &c).map(|a| a.oldest), Some(1310));
}

#[test]
fn sessions_are_reported_once_an_interval() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    for t in [10_000, 10_500, 10_999] {
        n.saw_admitted(5, t, &c);
    }
    // One sighting, at the latest time it was seen before the sync.
    assert_eq!(
        n.take_report().active,
        vec![Sighting { sid: 5, at: 10_999 }]
    );
    // Seen again after the sync: in the next report, once, at its latest sighting.
    n.saw_admitted(5, 11_000, &c);
    n.saw_admitted(5, 11_001, &c);
    assert_eq!(
        n.take_report().active,
        vec![Sighting { sid: 5, at: 11_001 }]
    );
    // Not seen since: nothing.
    assert!(n.take_report().active.is_empty());
}

/// A sampled line of 1,000 (too long to come whole): 100 before 2,000 ms, the rest by 11,000.
fn sampled() -> RoomPicture {
    let at = |rank, arrival| Sample {
        rank,
        arrival,
        sid: 0,
    };
    RoomPicture {
        queue_len: 1000,
        cursor: 0,
        nodes: 1,
        window_ms: 1000,
        samples: vec![at(0, 1_000), at(100, 2_000), at(999, 11_000)],
        ..RoomPicture::default()
    }
}

#[test]
fn positions_interpolate_between_samples() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    show(&mut n, &sampled(), 5);
    assert_eq!(n.position(500), 1);
    assert_eq!(n.position(1_500), 51);
    assert_eq!(n.position(2_000), 101);
    assert_eq!(n.position(6_500), 101 + 449);
    assert_eq!(n.position(20_000), 1001);
}

#[test]
fn without_pictures_the_share_ages_and_the_cursor_moves_on() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let sample = |rank, arrival| Sample {
        rank,
        arrival,
        sid: 0,
    };
    // A line of 100 who arrived from 10 s to 20 s; 7 sessions end in the picture's interval
    // (its grant's), 36 more within the horizon's other 9 s: 4 leave each later interval.
    show(
        &mut n,
        &RoomPicture {
            cursor: 10_000,
            quota: 6,
            nodes: 2,
            free: 9,
            expiring: 7,
            leaving: 43,
            queue_len: 100,
            window_ms: 2000,
            samples: vec![
                sample(0, 10_000),
                sample(10, 11_000),
                sample(20, 12_000),
                sample(99, 20_000),
            ],
            ..RoomPicture::default()
        },
        2000,
    );
    assert!(matches!(
        n.visit(w(7, 12_000), 2100, &c),
        FleetVerdict::Wait { position: 21, .. }
    ));
    // No picture at 3 s: this node's half of the 4 leaving; the cursor 4 places on.
    n.age(3000, &c);
    assert_eq!(n.snapshot(3000).quota_left, 2);
    assert_eq!(n.hdr.pic.cursor, 10_400);
    // Positions move up as the fleet is thought to let people in.
    assert!(matches!(
        n.visit(w(7, 12_000), 3100, &c),
        FleetVerdict::Wait { position: 17, .. }
    ));
    n.age(4000, &c);
    assert_eq!(n.hdr.pic.cursor, 10_800);
    n.age(30_000, &c);
    assert_eq!(n.snapshot(30_000).quota_left, 2);
    assert_eq!(n.hdr.pic.cursor, 11_200);
    // The same window is aged once.
    let left = n.snapshot(0).quota_left;
    n.visit(w(1, 1), 30_100, &c);
    n.age(30_200, &c);
    assert_eq!(n.snapshot(0).quota_left, left - 1);
    // Past the end of the picture's line: everyone who came until now.
    for t in 31..80 {
        n.age(t * 1000, &c);
    }
    assert_eq!(n.hdr.pic.cursor, 79_000);
    // Fractions of a place are carried: 3 leaving, 2 nodes: 1, 2, 1, 2...
    show(
        &mut n,
        &RoomPicture {
            cursor: 0,
            nodes: 2,
            expiring: 5,
            leaving: 32,
            window_ms: 80_000,
            ..RoomPicture::default()
        },
        80_000,
    );
    let mut got = vec![];
    for t in 81..85 {
        n.age(t * 1000, &c);
        got.push(n.snapshot(0).quota_left);
    }
    assert_eq!(got, vec![1, 2, 1, 2]);
}

#[test]
fn a_failed_sync_gives_its_report_back() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    show(
        &mut n,
        &RoomPicture {
            cursor: u64::MAX,
            quota: 5,
            nodes: 1,
            window_ms: 1000,
            ..RoomPicture::default()
        },
        1000,
    );
    assert_eq!(n.visit(w(1, 10), 1100, &c), FleetVerdict::Admit);
    let r = n.take_report();
    // The sync released the rest of the share: nothing more until the next picture.
    assert!(matches!(
        n.visit(w(2, 20), 1200, &c),
        FleetVerdict::Wait {
            eta_secs: Some(0),
            ..
        }
    ));
    n.give_back(&r);
    let again = n.take_report();
    assert_eq!(again.polls, 2);
    assert_eq!(again.admitted, vec![Sighting { sid: 1, at: 1100 }]);
    let mut waiters = again.waiters.iter().map(|w| w.sid).collect::<Vec<_>>();
    waiters.sort_unstable();
    assert_eq!(waiters, vec![1, 2]);
}

#[test]
fn a_report_is_capped_and_the_rest_follows() {
    let mut mem = Mem(vec![0; 1 << 16]);
    let mut n = node(&mut mem);
    let c = cfg();
    for sid in 1..=700 {
        n.visit(w(sid, 100 + sid), 1000 + sid, &c);
    }
    for sid in 1001..=900 + REPORT_CAP as u64 {
        n.admit(sid, 2000);
    }
    // Admissions first, then waiters, REPORT_CAP in all.
    let r = n.take_report();
    assert_eq!(r.admitted.len(), REPORT_CAP - 100);
    assert_eq!(r.waiters.len(), 100);
    assert!(n.backlog());
    // The rest comes with the next syncs, each waiter once.
    let mut sids: Vec<u64> = r.waiters.iter().map(|w| w.sid).collect();
    while n.backlog() {
        let r = n.take_report();
        assert!(r.waiters.len() <= REPORT_WAITERS_CAP);
        sids.extend(r.waiters.iter().map(|w| w.sid));
    }
    sids.sort_unstable();
    assert_eq!(sids, (1..=700).collect::<Vec<_>>());
    // A waiter seen again after it was sent is not sent again before half presence.
    n.visit(w(5, 105), 3000, &c);
    assert!(!n.backlog());
}

#[test]
fn a_poll_whose_turn_it_is_weighs_the_share_as_much_as_the_whole_line() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let sample = |rank, arrival| Sample {
        rank,
        arrival,
        sid: 0,
    };
    // 1,000 wait; the cursor passed the first 10 of them.
    show(
        &mut n,
        &RoomPicture {
            reported: 0,
            fleet_active: 10,
            queue_len: 1000,
            cursor: 1000,
            rightful: 0,
            quota: 0,
            nodes: 2,
            window_ms: 1000,
            free: 0,
            expiring: 0,
            leaving: 0,
            held: 0,
            ends: Vec::new(),
            full: false,
            pressure: 0,
            spent: Vec::new(),
            flood: Vec::new(),
            samples: vec![sample(0, 100), sample(9, 1000), sample(999, 100_000)],
            exact: false,
        },
        1001,
    );
    // Its turn (no place here): 100 polls' weight; then a younger one: 1.
    assert!(matches!(
        n.visit(w(1, 500), 1100, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_report().polls, 100);
    assert!(matches!(
        n.visit(w(2, 5000), 1200, &c),
        FleetVerdict::Wait { .. }
    ));
    assert_eq!(n.take_report().polls, 1);
    // Nobody waits: every poll weighs 1.
    show(
        &mut n,
        &RoomPicture {
            queue_len: 0,
            cursor: u64::MAX,
            samples: vec![],
            quota: 5,
            ..RoomPicture::default()
        },
        2001,
    );
    assert_eq!(n.visit(w(3, 1500), 2100, &c), FleetVerdict::Admit);
    assert_eq!(n.take_report().polls, 1);
}

/// A synced room's place: a moment the ticket could not have taken is no place, unless it is a
/// lottery moment of the event in force; lottery moments fall in the pre-queue, uniformly.
#[test]
fn lottery_moments_are_places_and_fall_in_the_prequeue() {
    use super::{lottery_arrival, place_arrival};
    let now = 1_000_000;
    // Issued at 900,000, a place dated before that is no place...
    assert_eq!(
        place_arrival((800_000, 900_000, now), now, (20_000, 20_000), 5_000, None),
        None
    );
    // ...unless the event's pre-queue drew it; but a place unseen for presence is gone.
    let pre = Some(500_000..990_000);
    assert_eq!(
        place_arrival(
            (800_000, 900_000, now),
            now,
            (20_000, 20_000),
            5_000,
            pre.clone()
        ),
        Some(800_000)
    );
    assert_eq!(
        place_arrival(
            (800_000, 900_000, now - 30_000),
            now,
            (20_000, 20_000),
            5_000,
            pre.clone()
        ),
        None
    );
    // A ticket renewed every quarter presence lags its client's last answer by less than
    // that: present for presence and a quarter more, not a millisecond beyond.
    assert_eq!(
        place_arrival(
            (950_000, 900_000, now - 25_000),
            now,
            (20_000, 20_000),
            5_000,
            None
        ),
        Some(950_000)
    );
    assert_eq!(
        place_arrival(
            (950_000, 900_000, now - 25_001),
            now,
            (20_000, 20_000),
            5_000,
            pre
        ),
        None
    );
    // [S27] With keep=5m the place outlives its presence by the keep (and the renewal's lag),
    // and the ticket tells that its holder comes back from an absence.
    let kept = (20_000, 300_000);
    let t = |ago: u64| (950_000, 900_000, now - ago);
    assert_eq!(
        place_arrival(t(120_000), now, kept, 5_000, None),
        Some(950_000)
    );
    assert_eq!(
        place_arrival(t(305_000), now, kept, 5_000, None),
        Some(950_000)
    );
    assert_eq!(place_arrival(t(305_001), now, kept, 5_000, None), None);
    assert!(super::comes_back(now - 25_001, now, 20_000));
    assert!(!super::comes_back(now - 25_000, now, 20_000));
    // Uniform over the pre-queue: 10,000 draws over 10 buckets, each near 1,000.
    let mut buckets = [0u32; 10];
    for _ in 0..10_000 {
        let a = lottery_arrival(1_000..2_000).unwrap();
        assert!((1_000..2_000).contains(&a));
        buckets[((a - 1_000) / 100) as usize] += 1;
    }
    assert!(
        buckets.iter().all(|&b| (850..1150).contains(&b)),
        "{buckets:?}"
    );
    assert_eq!(lottery_arrival(5..5), None);
}
