//! What a node reports to the fleet: sessions once an interval, a failed sync's report given
//! back, and a capped report whose rest follows.

use super::*;

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
