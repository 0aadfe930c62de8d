//! How a node decides on its own memory between pictures: the cursor and its band, the
//! share of the interval, and a poll whose turn it is.

use super::*;

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
        fleet_active: 9,
        queue_len: 3,
        cursor: 200,
        rightful: 100,
        quota: 2,
        nodes: 1,
        window_ms: 1000,
        free: 1,
        samples,
        ..RoomPicture::default()
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
            fleet_active: 8,
            queue_len: 3,
            cursor: 200,
            rightful: 200,
            quota: 1,
            nodes: 2,
            window_ms: 1000,
            free: 2,
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
            ..RoomPicture::default()
        },
        1001,
    );
    // Arrived at or before the cursor, with quota: in.
    assert_eq!(n.visit(w(1, 100), 1100, &c), FleetVerdict::Admit);
    // The quota is used up: come back in a moment; the node asks the pool meanwhile.
    assert_eq!(n.visit(w(2, 200), 1100, &c), come_back(2, 3, 2));
    assert_eq!(n.take_draw(1100, &c).map(|a| a.want), Some(1));
    // One draw in flight at a time.
    assert!(waits(n.visit(w(2, 200), 1150, &c)));
    assert_eq!(n.take_draw(1150, &c), None);
    // Granted: the next one whose turn it is walks in.
    n.drawn(1, got(1));
    assert_eq!(n.visit(w(2, 200), 1200, &c), FleetVerdict::Admit);
    // Two were turned away since (at 1150 and now): two places asked for.
    assert!(waits(n.visit(w(5, 150), 1210, &c)));
    assert_eq!(n.take_draw(1210, &c).map(|a| a.want), Some(2));
    // The pool is empty: no more draws this interval.
    n.drawn(2, got(0));
    assert!(waits(n.visit(w(5, 150), 1220, &c)));
    assert_eq!(n.take_draw(1220, &c), None);
    // Except for a client older than any the pool was found empty for (150): its draw tells
    // the script, which keeps the pool's next place for it (the starved mark).
    assert!(waits(n.visit(w(6, 180), 1230, &c)));
    assert_eq!(n.take_draw(1230, &c), None);
    assert!(waits(n.visit(w(7, 120), 1240, &c)));
    assert_eq!(
        n.take_draw(1240, &c),
        Some(Ask {
            want: 1,
            oldest: 120
        })
    );
    n.drawn(1, got(0));
    assert!(waits(n.visit(w(7, 120), 1250, &c)));
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
            fleet_active: 10,
            queue_len: 1000,
            cursor: 1000,
            nodes: 2,
            window_ms: 1000,
            samples: vec![sample(0, 100), sample(9, 1000), sample(999, 100_000)],
            ..RoomPicture::default()
        },
        1001,
    );
    // Its turn (no place here): 100 polls' weight; then a younger one: 1.
    assert!(waits(n.visit(w(1, 500), 1100, &c)));
    assert_eq!(n.take_report().polls, 100);
    assert!(waits(n.visit(w(2, 5000), 1200, &c)));
    assert_eq!(n.take_report().polls, 1);
    // Nobody waits: every poll weighs 1.
    show(
        &mut n,
        &RoomPicture {
            cursor: u64::MAX,
            quota: 5,
            ..RoomPicture::default()
        },
        2001,
    );
    assert_eq!(n.visit(w(3, 1500), 2100, &c), FleetVerdict::Admit);
    assert_eq!(n.take_report().polls, 1);
}
