//! Time helpers every layer shares: ticks on multiples of an interval, and UTC calendar parts.

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

/// UTC calendar parts (year, month, day, hour, minute, second) of a unix time: the page's
/// "updated" line, the events' instants. Clamped to year 9999 so the arithmetic stays small
/// whatever the input.
pub fn utc_parts(unix_secs: u64) -> (u64, u64, u64, u64, u64, u64) {
    let secs = unix_secs.min(253_402_300_799);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (proleptic Gregorian), shifted so the era
    // starts on 0000-03-01; all values stay non-negative.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
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
