//! Positions from a line that came in samples.

use super::*;

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
