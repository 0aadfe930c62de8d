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
