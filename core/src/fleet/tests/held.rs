//! The places of sessions about to end: a node takes those the script gave it only once their
//! sessions have ended, and the cursor's band only half an interval after that.

use super::*;

/// The places of sessions whose window ends within the interval are shared out at the sync,
/// but a node takes those the script gave it only as their sessions end (issue 30: a rehearsal
/// saw 103 of 100 for 67 ms when they were taken at once).
#[test]
fn expiring_places_are_taken_as_their_sessions_end() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let samples = line_of(8);
    // The room is full (10 of 10); this node's 3 places are one free now and two of sessions
    // that end 200 and 400 ms after the picture.
    let picture = RoomPicture {
        fleet_active: 10,
        queue_len: 8,
        cursor: 800,
        rightful: 800,
        quota: 3,
        nodes: 2,
        window_ms: 1000,
        free: 4,
        expiring: 4,
        leaving: 22,
        held: 2,
        ends: vec![200, 400],
        samples,
        ..RoomPicture::default()
    };
    show(&mut n, &picture, 1000);
    let admitted = |n: &mut FleetNode, sid, now| {
        matches!(n.visit(w(sid, 100 * sid), now, &c), FleetVerdict::Admit)
    };
    // The free place at once; then none of its own until 1200: a client turned away before
    // draws from the pool, whose places are those that free first.
    assert!(admitted(&mut n, 1, 1010));
    assert!(!admitted(&mut n, 2, 1100));
    let ask = Ask {
        want: 1,
        oldest: 200,
    };
    assert_eq!(n.take_draw(1100, &c), Some(ask));
    let seq = n.seq();
    n.drawn(1, Some(Drawn { granted: 1, seq }));
    assert!(admitted(&mut n, 2, 1110));
    // The pool empty: the held two as their sessions end, and no more draws this interval
    // for younger clients.
    assert!(!admitted(&mut n, 3, 1150));
    assert_eq!(n.take_draw(1150, &c).map(|a| a.oldest), Some(300));
    n.drawn(1, Some(Drawn { granted: 0, seq }));
    assert!(admitted(&mut n, 3, 1200));
    assert!(!admitted(&mut n, 4, 1250));
    assert!(admitted(&mut n, 4, 1400));
    assert!(!admitted(&mut n, 5, 1450));
    assert_eq!(n.take_draw(1450, &c), None);

    // More than ENDS_CAP held: the ends of ENDS_CAP of them evenly by rank; once the i-th has
    // passed, i x held / ENDS_CAP have ended. 128 held: 2 per end.
    let mut big = picture.clone();
    big.fleet_active = 200;
    big.expiring = 128;
    big.free = 128;
    big.quota = 128;
    big.held = 128;
    big.ends = (1..=ENDS_CAP as u64).map(|i| 10 * i).collect();
    show(&mut n, &big, 2000);
    let mut c2 = c;
    c2.max_active = 200;
    let taken = |n: &mut FleetNode, now| {
        (0..200)
            .filter(|&i| matches!(n.visit(w(1000 + i, 100), now, &c2), FleetVerdict::Admit))
            .count()
    };
    assert_eq!(taken(&mut n, 2005), 0);
    assert_eq!(taken(&mut n, 2010), 2);
    assert_eq!(taken(&mut n, 2035), 4);
    assert_eq!(taken(&mut n, 2000 + 10 * ENDS_CAP as u64), 122);

    // An interval without a picture: the outage's share is a rate, nothing is held.
    show(&mut n, &picture, 3000);
    n.age(4000, &c);
    assert!(n.snapshot(4000).quota_left > 0);
    assert!(admitted(&mut n, 5, 4001));
}

/// A held place that frees is the band's only half an interval after its session ended: until
/// then it waits for those the places rightly take (a slow-polling head of the line was passed
/// over by the band for 10 s and more when the band took held places as they freed).
#[test]
fn a_held_place_waits_half_an_interval_for_the_rightful_ones() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let samples = line_of(8);
    // Full, 2 places freeing at 1700 and 1800 (both this node's); the cursor's band reaches
    // the waiters of 300 and 400, past the rightful 100 and 200.
    let picture = RoomPicture {
        fleet_active: 10,
        queue_len: 8,
        cursor: 400,
        rightful: 200,
        quota: 2,
        nodes: 1,
        window_ms: 1000,
        free: 2,
        expiring: 2,
        held: 2,
        ends: vec![700, 800],
        samples,
        ..RoomPicture::default()
    };
    show(&mut n, &picture, 1000);
    let visit = |n: &mut FleetNode, sid: u64, now| n.visit(w(sid, 100 * sid), now, &c);
    // At 1750 the first place is free: the band waits, the rightful one takes it.
    assert!(!matches!(visit(&mut n, 3, 1750), FleetVerdict::Admit));
    assert_eq!(visit(&mut n, 1, 1750), FleetVerdict::Admit);
    // At 1900 the second is free: still the rightful one's until 2300.
    assert!(!matches!(visit(&mut n, 3, 1900), FleetVerdict::Admit));
    assert!(!matches!(visit(&mut n, 4, 2299), FleetVerdict::Admit));
    assert_eq!(visit(&mut n, 3, 2300), FleetVerdict::Admit);
}
