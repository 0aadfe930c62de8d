//! The instants an event is written with: RFC 3339 in UTC (`2026-12-01T10:00:00Z`) or
//! `@EPOCH_SECONDS`. Only UTC is accepted: an offset would make two nodes' configurations
//! read the same text differently only if one of them got it wrong, and the operator's
//! launch time is one moment for the whole fleet.

use crate::config::ParseError;
use crate::util::out::put_utc_iso;

const EXPECTED: &str = "expected a UTC time like 2026-12-01T10:00:00Z or @1764583200";

/// Parses an instant into seconds since the Unix epoch.
pub fn parse_instant(s: &str) -> Result<u64, ParseError> {
    if s.is_empty() {
        return Err(ParseError::Empty);
    }
    if let Some(digits) = s.strip_prefix('@') {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ParseError::Syntax(EXPECTED));
        }
        return digits.parse::<u64>().map_err(|_| ParseError::Overflow);
    }
    // YYYY-MM-DDTHH:MM:SSZ, exactly (a lower-case t or z is allowed, as RFC 3339 does).
    let b = s.as_bytes();
    if b.len() != 20 {
        return Err(ParseError::Syntax(EXPECTED));
    }
    let shape_ok = b.iter().enumerate().all(|(i, &c)| match i {
        4 | 7 => c == b'-',
        10 => c == b'T' || c == b't',
        13 | 16 => c == b':',
        19 => c == b'Z' || c == b'z',
        _ => c.is_ascii_digit(),
    });
    if !shape_ok {
        return Err(ParseError::Syntax(EXPECTED));
    }
    let num = |from: usize, to: usize| -> u64 {
        b.get(from..to)
            .unwrap_or_default()
            .iter()
            .fold(0u64, |n, &c| n * 10 + u64::from(c - b'0'))
    };
    let (year, month, day) = (num(0, 4), num(5, 7), num(8, 10));
    let (hour, minute, second) = (num(11, 13), num(14, 16), num(17, 19));
    if year < 1970
        || !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(ParseError::Syntax(EXPECTED));
    }
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Writes seconds since the epoch as RFC 3339 UTC (what the control endpoint and the JSON
/// answers show).
pub fn format_instant(secs: u64) -> String {
    let mut out = Vec::with_capacity(20);
    put_utc_iso(&mut out, secs);
    String::from_utf8(out).unwrap_or_default()
}

fn is_leap(y: u64) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date on or after it (the proleptic Gregorian calendar).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    // Years counted from March, so the leap day ends a year: the era arithmetic of the usual
    // civil-date algorithm, here for years >= 1970 only (no negative numbers).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
