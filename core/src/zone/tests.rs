//! Unit tests of the `smart_limit_zone` parameters.

use super::*;

#[test]
fn zone_defaults() {
    let z = ZoneParams::parse(&["shop"]).unwrap();
    assert_eq!(z, ZoneParams::defaults("shop"));
    assert_eq!(z.size, 10 * 1024 * 1024);
    assert_eq!(z.store, StoreKind::Shm);
    assert!(!z.redis.configured());
    assert_eq!(z.prefix, "smart_limit");
    assert_eq!(z.max_active, 100);
    assert_eq!(z.new_per_minute, None);
    assert_eq!(z.admit, AdmitMode::Grant(600_000));
    assert_eq!(z.admit_ms(), 600_000);
    assert_eq!(z.presence_ms, 20_000);
    assert_eq!(z.active_window_ms, 60_000);
    assert_eq!(z.timeout_ms, 200);
    assert_eq!(z.on_error, OnError::Local);
}

#[test]
fn zone_full() {
    let z = ZoneParams::parse(&[
        "shop-2_b",
        "size=32k",
        "store=redis",
        "redis=10.0.0.5:6380",
        "prefix=sl:prod",
        "max_active=5",
        "new_per_minute=60",
        "session=15m",
        "presence=30s",
        "active_window=2m",
        "timeout=1ms",
        "on_error=closed",
    ])
    .unwrap();
    assert_eq!(z.name, "shop-2_b");
    assert_eq!(z.size, 32 * 1024);
    assert_eq!(z.store, StoreKind::Redis);
    assert_eq!(z.redis.describe(), "10.0.0.5:6380");
    assert_eq!(z.prefix, "sl:prod");
    assert_eq!(z.max_active, 5);
    assert_eq!(z.new_per_minute, Some(60));
    assert_eq!(z.admit, AdmitMode::Session(900_000));
    assert_eq!(z.presence_ms, 30_000);
    assert_eq!(z.active_window_ms, 120_000);
    assert_eq!(z.timeout_ms, 1);
    assert_eq!(z.on_error, OnError::Closed);

    let z = ZoneParams::parse(&[
        "a",
        "grant=1ms",
        "timeout=60s",
        "on_error=open",
        "max_active=1",
        "new_per_minute=1",
    ])
    .unwrap();
    assert_eq!(z.admit, AdmitMode::Grant(1));
    assert_eq!(z.timeout_ms, 60_000);
    assert_eq!(z.on_error, OnError::Open);
    assert_eq!(z.max_active, 1);
    assert_eq!(z.new_per_minute, Some(1));
    assert_eq!(
        ZoneParams::parse(&["a", "store=shm"]).unwrap().store,
        StoreKind::Shm
    );
}

fn err(args: &[&str]) -> String {
    ZoneParams::parse(args).unwrap_err().to_string()
}

#[test]
fn zone_sync() {
    let redis = ["z", "store=redis", "redis=h:1"];
    let with = |extra: &[&'static str]| {
        let mut a = redis.to_vec();
        a.extend_from_slice(extra);
        a
    };
    assert_eq!(ZoneParams::parse(&redis).unwrap().sync_ms, None);
    let z = ZoneParams::parse(&with(&["sync=1s"])).unwrap();
    assert_eq!((z.sync_ms, z.timeout_ms), (Some(1000), 200));
    // Without timeout=, a short interval gets a shorter timeout.
    let z = ZoneParams::parse(&with(&["sync=100ms"])).unwrap();
    assert_eq!((z.sync_ms, z.timeout_ms), (Some(100), 90));
    let z = ZoneParams::parse(&with(&["timeout=2s", "sync=5s"])).unwrap();
    assert_eq!(z.timeout_ms, 2000);
    assert_eq!(
        err(&with(&["sync=1s", "timeout=1s"])),
        "invalid timeout \"1s\": must be shorter than sync= (1000 ms), so that two syncs \
         never overlap"
    );
    assert_eq!(
        err(&with(&["sync=50ms"])),
        "invalid sync \"50ms\": must be between 100ms and 60s"
    );
    assert_eq!(
        err(&with(&["sync=2m"])),
        "invalid sync \"2m\": must be between 100ms and 60s"
    );
    assert_eq!(err(&["z", "sync=1s"]), "\"sync=1s\" requires store=redis");
    assert_eq!(
        err(&with(&["sync"])),
        "parameter \"sync\" needs a value, e.g. sync=1s"
    );
}

#[test]
fn zone_abuse_limits() {
    let z = ZoneParams::parse(&["z"]).unwrap();
    assert_eq!(z.flood, Some(DEFAULT_FLOOD));
    assert_eq!(z.session_rate, Some(DEFAULT_SESSION_RATE));
    assert_eq!(z.poll, Some(DEFAULT_POLL));
    assert_eq!(z.max_line, DEFAULT_MAX_LINE);
    let z = ZoneParams::parse(&[
        "z",
        "flood_burst=5",
        "flood=120r/m",
        "flood_key=$binary_remote_addr$http_x_client",
        "session_rate=off",
        "poll=10r/s",
        "poll_burst=0",
    ])
    .unwrap();
    assert_eq!(
        z.flood,
        Some(RateParam {
            per_sec: 2.0,
            burst: 5
        })
    );
    assert_eq!(
        z.flood_key.as_deref(),
        Some("$binary_remote_addr$http_x_client")
    );
    assert_eq!(z.session_rate, None);
    assert_eq!(
        z.poll,
        Some(RateParam {
            per_sec: 10.0,
            burst: 0
        })
    );
    assert_eq!(z.flood.unwrap().rate().interval_us, 500_000);
    let z = ZoneParams::parse(&["z", "flood=off", "poll=off"]).unwrap();
    assert_eq!((z.flood, z.poll), (None, None));
    assert_eq!(
        err(&["z", "flood=fast"]),
        "invalid flood \"fast\": expected a rate like 10r/s or 600r/m, or off"
    );
    assert_eq!(
        err(&["z", "flood=0r/s"]),
        "invalid flood \"0r/s\": the rate must be at least 1r/m, or off"
    );
    assert_eq!(
        err(&["z", "flood=off", "flood_burst=3"]),
        "\"flood=off\" and \"flood_burst=3\" cannot be used together"
    );
    assert_eq!(
        err(&["z", "session_burst=3", "session_rate=off"]),
        "\"session_rate=off\" and \"session_burst=3\" cannot be used together"
    );
    assert_eq!(
        err(&["z", "poll_burst=-1"]),
        "invalid poll_burst \"-1\": expected a number"
    );
    assert_eq!(
        err(&["z", "max_line=10"]),
        "\"max_line=10\" requires store=redis"
    );
    assert_eq!(
        ZoneParams::parse(&["z", "store=redis", "redis=h:1", "max_line=10"])
            .unwrap()
            .max_line,
        10
    );
    assert_eq!(parse_rate("10r/s"), Ok(10.0));
    assert_eq!(parse_rate("30r/m"), Ok(0.5));
    assert!(parse_rate("10r/h").is_err());
    assert!(parse_rate("r/s").is_err());
    assert_eq!(parse_rate("99999999999r/s"), Err(ParseError::Overflow));
}

#[test]
fn zone_names() {
    assert_eq!(ZoneParams::parse(&[]).unwrap_err(), ConfError::MissingName);
    let long = "n".repeat(64);
    assert!(ZoneParams::parse(&[&long]).is_ok());
    let too_long = "n".repeat(65);
    assert!(matches!(
        ZoneParams::parse(&[&too_long]),
        Err(ConfError::BadName(_))
    ));
    for bad in ["", "a b", "a.b", "a:b", "größe", "size=10m", "{x}"] {
        assert!(
            matches!(ZoneParams::parse(&[bad]), Err(ConfError::BadName(_))),
            "{bad}"
        );
    }
    assert_eq!(
        err(&["size=10m"]),
        "invalid zone name \"size=10m\": expected 1 to 64 characters from A-Z a-z 0-9 _ -"
    );
    assert!(check_zone_name("shop").is_ok());
    // `smart_limit off;` is the switch: a zone named off could never be used.
    assert_eq!(check_zone_name("off"), Err(ConfError::ReservedName));
    assert!(check_zone_name("Off").is_ok());
}

#[test]
fn zone_messages_name_param_and_value() {
    assert_eq!(
        err(&["z", "max_active=abc"]),
        "invalid max_active \"abc\": expected a positive integer"
    );
    assert_eq!(
        err(&["z", "max_active=0"]),
        "invalid max_active \"0\": must be at least 1"
    );
    assert_eq!(
        err(&["z", "max_active=99999999999999999999999"]),
        "invalid max_active \"99999999999999999999999\": value too large"
    );
    assert_eq!(
        err(&["z", "new_per_minute=0"]),
        "invalid new_per_minute \"0\": must be at least 1"
    );
    assert_eq!(
        err(&["z", "colour=red"]),
        "unknown parameter \"colour=red\""
    );
    assert_eq!(err(&["z", "colour"]), "unknown parameter \"colour\"");
    assert_eq!(
        err(&["z", "size"]),
        "parameter \"size\" needs a value, e.g. size=10m"
    );
    assert_eq!(
        err(&["z", "size=10m", "size=20m"]),
        "duplicate parameter \"size=20m\""
    );
    assert_eq!(
        err(&["z", "grant=10m", "session=5m"]),
        "\"grant=10m\" and \"session=5m\" cannot be used together"
    );
    assert_eq!(
        err(&["z", "session=5m", "grant=10m"]),
        "\"session=5m\" and \"grant=10m\" cannot be used together"
    );
    assert_eq!(
        err(&["z", "store=redis"]),
        "\"store=redis\" requires redis=HOST:PORT or sentinel=HOST:PORT with master=NAME"
    );
    assert_eq!(
        err(&["z", "redis=127.0.0.1:6379"]),
        "\"redis=127.0.0.1:6379\" requires store=redis"
    );
    assert_eq!(
        err(&["z", "store=shm", "redis=127.0.0.1:6379"]),
        "\"redis=127.0.0.1:6379\" requires store=redis"
    );
    assert_eq!(err(&["z", "prefix=x"]), "\"prefix=x\" requires store=redis");
    assert_eq!(
        err(&["z", "store=redis", "redis=localhost"]),
        "invalid redis \"localhost\": expected HOST:PORT, e.g. 127.0.0.1:6379 or [::1]:6379"
    );
    assert_eq!(
        err(&["z", "store=redis", "redis=h:0"]),
        "invalid redis \"h:0\": port must be between 1 and 65535"
    );
    assert!(err(&["z", "store=redis", "redis=h:1", "prefix={x}"])
        .starts_with("invalid prefix \"{x}\": "));
    assert_eq!(
        err(&["z", "store=mysql"]),
        "invalid store \"mysql\": expected shm or redis"
    );
    assert_eq!(
        err(&["z", "on_error=maybe"]),
        "invalid on_error \"maybe\": expected open, closed or local"
    );
    assert_eq!(
        err(&["z", "size=16k"]),
        "invalid size \"16k\": must be at least 32k"
    );
    assert_eq!(
        err(&["z", "size=32767"]),
        "invalid size \"32767\": must be at least 32k"
    );
    assert_eq!(
        err(&["z", "size=ten"]),
        "invalid size \"ten\": expected a size like 512k, 10m or 1g"
    );
    assert_eq!(err(&["z", "size="]), "invalid size \"\": empty value");
    assert_eq!(
        err(&["z", "presence=0"]),
        "invalid presence \"0\": must be greater than 0"
    );
    assert_eq!(
        err(&["z", "grant=0s"]),
        "invalid grant \"0s\": must be greater than 0"
    );
    assert_eq!(
        err(&["z", "session=0"]),
        "invalid session \"0\": must be greater than 0"
    );
    assert_eq!(
        err(&["z", "active_window=0ms"]),
        "invalid active_window \"0ms\": must be greater than 0"
    );
    assert_eq!(
        err(&["z", "presence=soon"]),
        "invalid presence \"soon\": expected a time like 500ms, 20s, 10m or 1h30m"
    );
    assert_eq!(
        err(&["z", "timeout=0"]),
        "invalid timeout \"0\": must be between 1ms and 60s"
    );
    assert_eq!(
        err(&["z", "timeout=60001ms"]),
        "invalid timeout \"60001ms\": must be between 1ms and 60s"
    );
    assert_eq!(
        err(&["z", "timeout=1m1ms"]),
        "invalid timeout \"1m1ms\": must be between 1ms and 60s"
    );
    // Quotes and control characters in values are escaped, keeping one log line.
    assert_eq!(
        err(&["z", "max_active=\"\n"]),
        "invalid max_active \"\\\"\\n\": expected a positive integer"
    );
    // Parameter names are case-sensitive like nginx's own.
    assert_eq!(err(&["z", "SIZE=10m"]), "unknown parameter \"SIZE=10m\"");
}

#[test]
fn challenge_and_one_place_per_parse() {
    let z = ZoneParams::parse(&["shop", "challenge=pow", "one_place_per=$cookie_account"]).unwrap();
    assert_eq!(z.challenge, Some(crate::challenge::Bits::Auto));
    assert_eq!(z.one_place_per.as_deref(), Some("$cookie_account"));
    let z = ZoneParams::parse(&["shop", "invite=/k", "invite_status=404"]).unwrap();
    assert_eq!((z.invite.as_deref(), z.invite_status), (Some("/k"), 404));
    let z = ZoneParams::parse(&["shop", "challenge_bits=20", "challenge=pow"]).unwrap();
    assert_eq!(z.challenge, Some(crate::challenge::Bits::Fixed(20)));
    assert_eq!(ZoneParams::parse(&["shop"]).unwrap().challenge, None);
    for bad in [
        &["shop", "challenge_bits=20"][..],
        &["shop", "challenge=off", "challenge_bits=20"],
        &["shop", "challenge=maybe"],
        &["shop", "challenge=pow", "challenge_bits=0"],
        &["shop", "one_place_per="],
        &["shop", "challenge_noscript=off"],
        &["shop", "challenge=off", "challenge_noscript=on"],
        &["shop", "challenge=pow", "challenge_noscript=no"],
        &["shop", "invite="],
        &["shop", "invite_status=403"],
        &["shop", "invite=/k", "invite_status=302"],
        &["shop", "invite=/k", "invite_status=4033"],
        &["shop", "invite=/k", "one_place_per=$cookie_a"],
    ] {
        assert!(ZoneParams::parse(bad).is_err(), "{bad:?}");
    }
    // The no-script path is on unless turned off.
    assert!(
        ZoneParams::parse(&["shop", "challenge=pow"])
            .unwrap()
            .challenge_noscript
    );
    let z = ZoneParams::parse(&["shop", "challenge_noscript=off", "challenge=pow"]).unwrap();
    assert!(!z.challenge_noscript);
    let e = ZoneParams::parse(&["shop", "challenge_noscript=off"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("\"challenge_noscript=off\" requires challenge=pow"),
        "{e}"
    );
}

/// [S27] `keep=`: default 5m, `off`, at most 1h, never under presence=; on every store.
#[test]
fn zone_keep() {
    let z = ZoneParams::parse(&["z"]).unwrap();
    assert_eq!((z.keep_ms, z.effective_keep_ms()), (Some(300_000), 300_000));
    let z = ZoneParams::parse(&["z", "keep=off"]).unwrap();
    assert_eq!((z.keep_ms, z.effective_keep_ms()), (None, 20_000));
    let z = ZoneParams::parse(&["z", "keep=90s", "presence=10s"]).unwrap();
    assert_eq!(z.effective_keep_ms(), 90_000);
    // A presence longer than the default keep raises the keep with it.
    let z = ZoneParams::parse(&["z", "presence=10m"]).unwrap();
    assert_eq!(z.effective_keep_ms(), 600_000);
    assert_eq!(
        err(&["z", "keep=10s"]),
        "invalid keep \"10s\": must not be shorter than presence= (default 20s)"
    );
    assert_eq!(
        err(&["z", "presence=1m", "keep=30s"]),
        "invalid keep \"30s\": must not be shorter than presence= (default 20s)"
    );
    assert_eq!(
        err(&["z", "keep=2h"]),
        "invalid keep \"2h\": must be at most 1h, or off"
    );
    assert_eq!(
        err(&["z", "keep=soon"]),
        "invalid keep \"soon\": expected a time like 500ms, 20s, 10m or 1h30m, or off"
    );
    assert_eq!(
        err(&["z", "keep"]),
        "parameter \"keep\" needs a value, e.g. keep=5m"
    );
    // A synced room keeps places too, with the same default.
    let sync = ["z", "store=redis", "redis=127.0.0.1:6379", "sync=1s"];
    let z = ZoneParams::parse(&sync).unwrap();
    assert_eq!(z.effective_keep_ms(), 300_000);
    let with_keep: Vec<&str> = sync.iter().copied().chain(["keep=2m"]).collect();
    assert_eq!(
        ZoneParams::parse(&with_keep).unwrap().effective_keep_ms(),
        120_000
    );
    let off: Vec<&str> = sync.iter().copied().chain(["keep=off"]).collect();
    assert_eq!(ZoneParams::parse(&off).unwrap().effective_keep_ms(), 20_000);
}

#[test]
fn zone_max_active_auto() {
    let z = ZoneParams::parse(&["z", "max_active=auto:20..5000", "origin_latency=400ms"]).unwrap();
    let auto = z.auto.expect("auto");
    assert_eq!(
        (auto.min, auto.max, auto.target_ms, z.max_active),
        (20, 5000, 400, 20)
    );
    // Bare auto: the default bounds and target.
    let z = ZoneParams::parse(&["z", "max_active=auto"]).unwrap();
    assert_eq!(
        z.auto.map(|a| (a.min, a.max, a.target_ms)),
        Some((20, 5000, 500))
    );
    assert_eq!(
        ZoneParams::parse(&["z", "max_active=7"]).unwrap().auto,
        None
    );
    assert_eq!(
        err(&["z", "max_active=auto:50..20"]),
        "invalid max_active \"auto:50..20\": auto:MIN..MAX needs 1 <= MIN <= MAX"
    );
    assert_eq!(
        err(&["z", "max_active=auto:20"]),
        "invalid max_active \"auto:20\": expected a number, auto, or auto:MIN..MAX"
    );
    assert_eq!(
        err(&["z", "max_active=auto", "origin_latency=2m"]),
        "invalid origin_latency \"2m\": must be at most 1m"
    );
    assert_eq!(
        err(&["z", "origin_latency=400ms"]),
        "\"origin_latency=400ms\" requires max_active=auto"
    );
    for fleet in [&[][..], &["sync=1s"][..]] {
        let mut args = vec![
            "z",
            "max_active=auto:5..50",
            "store=redis",
            "redis=127.0.0.1:6379",
        ];
        args.extend_from_slice(fleet);
        let p = ZoneParams::parse(&args).unwrap();
        assert_eq!(p.auto.map(|a| (a.min, a.max)), Some((5, 50)), "{fleet:?}");
    }
}
