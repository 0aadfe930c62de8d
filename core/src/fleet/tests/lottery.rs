//! An event's start: lottery moments are places in the prequeue.

use super::*;

/// A synced room's place: a moment the ticket could not have taken is no place, unless it is a
/// lottery moment of the event in force; lottery moments fall in the pre-queue, uniformly.
#[test]
fn lottery_moments_are_places_and_fall_in_the_prequeue() {
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
