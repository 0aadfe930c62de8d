//! A client whose turn it is, as the node's picture ends, waits for the next picture.

use super::*;

/// With no place it may take, a client whose turn it is waits for the next picture from 50 ms
/// before the picture's end to 50 ms after it (a twentieth of the interval, at most 50 ms);
/// before and after that (and anyone whose turn it is not) is told as before. `decide`, which the waiting request
/// is decided by, never says so.
#[test]
fn a_turn_at_the_tick_waits_for_the_next_picture() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    // Full, no share: the waiters of 100..400 are the turn's, those of 500.. wait.
    let picture = RoomPicture {
        fleet_active: 10,
        queue_len: 8,
        cursor: 400,
        nodes: 1,
        window_ms: 1000,
        samples: line_of(8),
        ..RoomPicture::default()
    };
    show(&mut n, &picture, 1000);
    let come_back = |v: FleetVerdict| {
        matches!(
            v,
            FleetVerdict::Wait {
                eta_secs: Some(0),
                ..
            }
        )
    };
    assert!(come_back(n.visit(w(1, 100), 1900, &c)));
    assert_eq!(n.visit(w(1, 100), 1950, &c), FleetVerdict::NextPicture);
    assert_eq!(n.visit(w(2, 200), 2049, &c), FleetVerdict::NextPicture);
    assert!(come_back(n.decide(w(2, 200), 2049, &c)));
    assert!(come_back(n.visit(w(2, 200), 2050, &c)));
    assert!(matches!(
        n.visit(w(6, 600), 1990, &c),
        FleetVerdict::Wait { eta_secs, .. } if eta_secs != Some(0)
    ));
    // With a place it may take, it takes it.
    let share = RoomPicture {
        quota: 1,
        window_ms: 2000,
        ..picture
    };
    show(&mut n, &share, 2000);
    assert_eq!(n.visit(w(1, 100), 2990, &c), FleetVerdict::Admit);
    assert_eq!(n.picture_window(), 2000);
}
