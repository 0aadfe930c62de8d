//! Time helpers every layer shares: ticks on multiples of an interval.

/// The window a tick at `now` closes: `now` rounded to the nearest multiple of the interval
/// (a timer may fire a moment before or after the boundary it was set for).
pub fn window_end(now: u64, interval_ms: u64) -> u64 {
    let i = interval_ms.max(1);
    (now.saturating_add(i / 2) / i).saturating_mul(i)
}

/// How long until the next tick: the boundary after the one `now` is closest to, so that
/// every node ticks at the same instants (multiples of the interval on the wall clock).
pub fn next_tick_in(now: u64, interval_ms: u64) -> u64 {
    let next = window_end(now, interval_ms).saturating_add(interval_ms.max(1));
    next.saturating_sub(now).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_land_on_the_interval_boundaries() {
        assert_eq!(window_end(10_003, 1000), 10_000);
        assert_eq!(window_end(9_998, 1000), 10_000);
        assert_eq!(window_end(10_600, 1000), 11_000);
        // Late or early by a little, the next tick is on the next boundary.
        assert_eq!(next_tick_in(10_003, 1000), 997);
        assert_eq!(next_tick_in(9_998, 1000), 1002);
        assert_eq!(next_tick_in(10_000, 250), 250);
        assert_eq!(next_tick_in(5, 0), 1);
    }
}
