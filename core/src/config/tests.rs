//! Unit tests of the value parsers.

use super::*;

#[test]
fn sizes() {
    assert_eq!(parse_size("0"), Ok(0));
    assert_eq!(parse_size("512"), Ok(512));
    assert_eq!(parse_size("32k"), Ok(32 * 1024));
    assert_eq!(parse_size("32K"), Ok(32 * 1024));
    assert_eq!(parse_size("10m"), Ok(10 * 1024 * 1024));
    assert_eq!(parse_size("10M"), Ok(10 * 1024 * 1024));
    assert_eq!(parse_size("1g"), Ok(1 << 30));
    assert_eq!(parse_size("2G"), Ok(2 << 30));
    assert_eq!(parse_size(""), Err(ParseError::Empty));
    for bad in [
        "k", "m", "10 m", " 10m", "10m ", "10mb", "1.5m", "-1", "+1", "10t", "abc", "1k2",
    ] {
        assert!(
            matches!(parse_size(bad), Err(ParseError::Syntax(_))),
            "{bad}"
        );
    }
    // Edges of overflow.
    assert_eq!(parse_size("18446744073709551615"), Ok(usize::MAX));
    assert_eq!(
        parse_size("18446744073709551616"),
        Err(ParseError::Overflow)
    );
    assert_eq!(parse_size("17179869183g"), Ok(17_179_869_183 << 30));
    assert_eq!(parse_size("17179869184g"), Err(ParseError::Overflow));
    assert_eq!(
        parse_size("99999999999999999999999k"),
        Err(ParseError::Overflow)
    );
}

#[test]
fn times() {
    let s = 1000;
    assert_eq!(parse_time_ms("0"), Ok(0));
    assert_eq!(parse_time_ms("20"), Ok(20 * s));
    assert_eq!(parse_time_ms("20s"), Ok(20 * s));
    assert_eq!(parse_time_ms("500ms"), Ok(500));
    assert_eq!(parse_time_ms("1ms"), Ok(1));
    assert_eq!(parse_time_ms("10m"), Ok(600 * s));
    assert_eq!(parse_time_ms("1h"), Ok(3600 * s));
    assert_eq!(parse_time_ms("1h30m"), Ok(5400 * s));
    assert_eq!(parse_time_ms("1m30s"), Ok(90 * s));
    assert_eq!(parse_time_ms("1m30"), Ok(90 * s));
    assert_eq!(parse_time_ms("1s500ms"), Ok(1500));
    assert_eq!(parse_time_ms("1d 12h"), Ok(36 * 3600 * s));
    assert_eq!(parse_time_ms("1w"), Ok(7 * 86400 * s));
    assert_eq!(parse_time_ms("1M"), Ok(30 * 86400 * s));
    assert_eq!(parse_time_ms("1y"), Ok(365 * 86400 * s));
    assert_eq!(
        parse_time_ms("1y1M1w1d1h1m1s1ms"),
        Ok((365 + 30 + 7 + 1) * 86400 * s + 3661 * s + 1)
    );
    assert_eq!(parse_time_ms(""), Err(ParseError::Empty));
    assert_eq!(parse_time_ms("   "), Err(ParseError::Empty));
    for bad in [
        "s", "ms", "1x", "1.5s", "-1s", "+1s", "1S", "1H", "abc", "1h 2h", "30m1h", "1s1m",
        "1ms1s", "1m1m", "5 1ms", "10 20", "1msx", "1hm", "1mss",
    ] {
        assert!(
            matches!(parse_time_ms(bad), Err(ParseError::Syntax(_))),
            "{bad}"
        );
    }
    // Overflow: u64::MAX ms is fine as a bare ms count, one more is not; multiplications overflow.
    assert_eq!(parse_time_ms("18446744073709551615ms"), Ok(u64::MAX));
    assert_eq!(
        parse_time_ms("18446744073709551616ms"),
        Err(ParseError::Overflow)
    );
    assert_eq!(
        parse_time_ms("18446744073709551s"),
        Ok(18_446_744_073_709_551_000)
    );
    assert_eq!(
        parse_time_ms("18446744073709552s"),
        Err(ParseError::Overflow)
    );
    assert_eq!(
        parse_time_ms("18446744073709551s999ms"),
        Err(ParseError::Overflow)
    );
    assert_eq!(parse_time_ms("99999999999y"), Err(ParseError::Overflow));
}

#[test]
fn statuses() {
    for ok in [200u16, 202, 429, 503] {
        assert_eq!(parse_status(&ok.to_string()), Ok(ok));
    }
    for bad in ["201", "418", "500", "0", "99999999999999999999999"] {
        assert!(parse_status(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_status("418"), Err(ParseError::Status));
    assert_eq!(parse_status(""), Err(ParseError::Empty));
    assert!(matches!(parse_status("abc"), Err(ParseError::Syntax(_))));
    assert!(matches!(parse_status(" 503"), Err(ParseError::Syntax(_))));
}

#[test]
fn host_ports() {
    assert_eq!(parse_host_port("127.0.0.1:6379"), Ok(("127.0.0.1", 6379)));
    assert_eq!(
        parse_host_port("redis.internal:1"),
        Ok(("redis.internal", 1))
    );
    assert_eq!(parse_host_port("redis_1:65535"), Ok(("redis_1", 65535)));
    assert_eq!(parse_host_port("[::1]:6379"), Ok(("::1", 6379)));
    assert_eq!(
        parse_host_port("[2001:db8::1]:7000"),
        Ok(("2001:db8::1", 7000))
    );
    for bad in [
        "",
        "localhost",
        "localhost:",
        ":6379",
        "host:0",
        "host:65536",
        "host:99999999999999999999",
        "host:port",
        "::1:6379",
        "[::1]",
        "[::1]6379",
        "[]:6379",
        "[zz]:1",
        "ho st:1",
        "h/x:1",
        "host:+1",
    ] {
        assert!(parse_host_port(bad).is_err(), "{bad}");
    }
}
