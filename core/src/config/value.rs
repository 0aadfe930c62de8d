//! Single values: sizes, times, rates, status codes, addresses, positive numbers.

use super::ParseError;

/// Parses an nginx size: decimal digits with an optional `k`/`K` (KiB), `m`/`M` (MiB) or
/// `g`/`G` (GiB) suffix. `10m` is 10485760. Overflow is an error, not a wrap.
pub fn parse_size(s: &str) -> Result<usize, ParseError> {
    const EXPECTED: &str = "expected a size like 512k, 10m or 1g";
    if s.is_empty() {
        return Err(ParseError::Empty);
    }
    let (digits, mult): (&str, u64) = if let Some(d) = s.strip_suffix(['k', 'K']) {
        (d, 1 << 10)
    } else if let Some(d) = s.strip_suffix(['m', 'M']) {
        (d, 1 << 20)
    } else if let Some(d) = s.strip_suffix(['g', 'G']) {
        (d, 1 << 30)
    } else {
        (s, 1)
    };
    let n = parse_digits(digits).map_err(|e| match e {
        ParseError::Overflow => ParseError::Overflow,
        _ => ParseError::Syntax(EXPECTED),
    })?;
    let bytes = n.checked_mul(mult).ok_or(ParseError::Overflow)?;
    usize::try_from(bytes).map_err(|_| ParseError::Overflow)
}

/// Parses an nginx time into milliseconds. A number without unit is seconds; units are
/// `ms`, `s`, `m`, `h`, `d`, `w`, `M` (30 days) and `y` (365 days), combinable from the
/// largest to the smallest, each at most once: `1h30m`, `1m30s`, `500ms`, `1d 12h`.
pub fn parse_time_ms(s: &str) -> Result<u64, ParseError> {
    const EXPECTED: &str = "expected a time like 500ms, 20s, 10m or 1h30m";
    const ORDER: &str =
        "expected time units from largest to smallest, each at most once (y M w d h m s ms)";
    const SEC: u64 = 1000;
    const MIN: u64 = 60 * SEC;
    const HOUR: u64 = 60 * MIN;
    const DAY: u64 = 24 * HOUR;

    let b = s.as_bytes();
    if s.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let mut i = 0usize;
    let mut total: u64 = 0;
    // Rank of the last unit used; each next unit must rank strictly lower.
    let mut last_rank = u8::MAX;
    loop {
        while b.get(i) == Some(&b' ') {
            i = i.saturating_add(1);
        }
        if i >= b.len() {
            break;
        }
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i = i.saturating_add(1);
        }
        let digits = s.get(start..i).ok_or(ParseError::Syntax(EXPECTED))?;
        if digits.is_empty() {
            return Err(ParseError::Syntax(EXPECTED));
        }
        let n = parse_digits(digits)?;
        let (scale, rank, width) = match b.get(i) {
            Some(b'y') => (365 * DAY, 7, 1),
            Some(b'M') => (30 * DAY, 6, 1),
            Some(b'w') => (7 * DAY, 5, 1),
            Some(b'd') => (DAY, 4, 1),
            Some(b'h') => (HOUR, 3, 1),
            Some(b'm') if b.get(i.saturating_add(1)) == Some(&b's') => (1, 0, 2),
            Some(b'm') => (MIN, 2, 1),
            Some(b's') => (SEC, 1, 1),
            // A bare number is seconds and must be the last part.
            None | Some(b' ') => {
                let rest = s.get(i..).unwrap_or("");
                if !rest.trim().is_empty() {
                    return Err(ParseError::Syntax(EXPECTED));
                }
                (SEC, 1, 0)
            }
            Some(_) => return Err(ParseError::Syntax(EXPECTED)),
        };
        if rank >= last_rank {
            return Err(ParseError::Syntax(ORDER));
        }
        last_rank = rank;
        i = i.saturating_add(width);
        let part = n.checked_mul(scale).ok_or(ParseError::Overflow)?;
        total = total.checked_add(part).ok_or(ParseError::Overflow)?;
    }
    Ok(total)
}

/// Parses the status code of the waiting answer; only 200, 202, 429 and 503 make sense for
/// "not yet, come back" (SPEC §3).
pub fn parse_status(s: &str) -> Result<u16, ParseError> {
    let n = parse_digits(s).map_err(|e| match e {
        ParseError::Empty => ParseError::Empty,
        _ => ParseError::Syntax("expected a status code: 200, 202, 429 or 503"),
    })?;
    match n {
        200 | 202 | 429 | 503 => u16::try_from(n).map_err(|_| ParseError::Status),
        _ => Err(ParseError::Status),
    }
}

/// Splits `HOST:PORT` (IPv6 in brackets: `[::1]:6379`) into the host (brackets removed) and
/// the port. The port is required and must be 1-65535; the host must be non-empty and made
/// of name/address characters.
pub fn parse_host_port(s: &str) -> Result<(&str, u16), ParseError> {
    const EXPECTED: &str = "expected HOST:PORT, e.g. 127.0.0.1:6379 or [::1]:6379";
    if s.is_empty() {
        return Err(ParseError::Empty);
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once("]:").ok_or(ParseError::Syntax(EXPECTED))?;
        let ok = !h.is_empty()
            && h.contains(':')
            && h.bytes()
                .all(|c| c.is_ascii_hexdigit() || c == b':' || c == b'.');
        if !ok {
            return Err(ParseError::Syntax(EXPECTED));
        }
        (h, p)
    } else {
        let (h, p) = s.rsplit_once(':').ok_or(ParseError::Syntax(EXPECTED))?;
        if h.contains(':') {
            return Err(ParseError::Syntax(
                "an IPv6 address needs brackets, e.g. [::1]:6379",
            ));
        }
        let ok = !h.is_empty()
            && h.len() <= 253
            && h.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'));
        if !ok {
            return Err(ParseError::Syntax(EXPECTED));
        }
        (h, p)
    };
    let port = match parse_digits(port) {
        Ok(n @ 1..=65535) => u16::try_from(n).map_err(|_| ParseError::Syntax(EXPECTED))?,
        Ok(_) | Err(ParseError::Overflow) => {
            return Err(ParseError::Syntax("port must be between 1 and 65535"))
        }
        Err(_) => return Err(ParseError::Syntax(EXPECTED)),
    };
    Ok((host, port))
}

/// Plain decimal digits to u64: no sign, no spaces, no underscores (`str::parse` would take
/// a leading `+`).
pub(crate) fn parse_digits(s: &str) -> Result<u64, ParseError> {
    if s.is_empty() {
        return Err(ParseError::Empty);
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::Syntax("expected digits"));
    }
    s.bytes().try_fold(0u64, |acc, d| {
        acc.checked_mul(10)
            .and_then(|a| a.checked_add(u64::from(d - b'0')))
            .ok_or(ParseError::Overflow)
    })
}

/// A positive integer parameter (>= 1).
pub(crate) fn positive(value: &str) -> Result<u64, ParseError> {
    match parse_digits(value) {
        Ok(0) => Err(ParseError::Range("must be at least 1")),
        Ok(n) => Ok(n),
        Err(ParseError::Overflow) => Err(ParseError::Overflow),
        Err(_) => Err(ParseError::Syntax("expected a positive integer")),
    }
}

/// A time parameter that must be greater than zero.
pub(crate) fn positive_time(value: &str) -> Result<u64, ParseError> {
    match parse_time_ms(value) {
        Ok(0) => Err(ParseError::Range("must be greater than 0")),
        other => other,
    }
}

/// Parses a request rate as `limit_req` writes it: `10r/s`, `600r/m`.
pub fn parse_rate(s: &str) -> Result<f64, ParseError> {
    const EXPECTED: &str = "expected a rate like 10r/s or 600r/m";
    let (digits, per) = if let Some(d) = s.strip_suffix("r/s") {
        (d, 1.0)
    } else if let Some(d) = s.strip_suffix("r/m") {
        (d, 60.0)
    } else {
        return Err(ParseError::Syntax(EXPECTED));
    };
    match parse_digits(digits) {
        Ok(0) => Err(ParseError::Syntax("the rate must be at least 1r/m")),
        Ok(n) if n > 1_000_000 => Err(ParseError::Overflow),
        Ok(n) => Ok(n as f64 / per),
        Err(ParseError::Overflow) => Err(ParseError::Overflow),
        Err(_) => Err(ParseError::Syntax(EXPECTED)),
    }
}
