//! Unit tests of the Redis store without I/O.

use super::resp;
use super::resp::Value;
use super::*;
use crate::room::rules::{Limits, Mode};
use crate::room::{Counted, Place, Refusal, Verdict, Visit};

fn limits() -> Limits {
    Limits {
        max_active: 5,
        new_per_minute: None,
        presence_ms: 20_000,
        keep_ms: 20_000,
        active_window_ms: 60_000,
        mode: Mode::Fifo,
        flood: None,
        session_rate: None,
    }
}

fn visit() -> Visit {
    Visit {
        sid: u64::MAX - 1,
        qnum: 0,
        draw: 7,
        flood_key: None,
        arrival: 0,
        page: false,
    }
}

fn arr(x: &[i64]) -> Value {
    Value::Array(x.iter().map(|&i| Value::Int(i)).collect())
}

#[test]
fn keys_share_one_hash_tag() {
    let k = Keys::new("smart_limit", "shop");
    assert_eq!(k.state, "smart_limit:{shop}:state");
    for key in k.all() {
        assert_eq!(hash_tag(key), Some("shop"));
    }
    let k = Keys::new("eu-1:sl", "a_b");
    assert_eq!(k.line, "eu-1:sl:{a_b}:line");
    assert_eq!(hash_tag(&k.line), Some("a_b"));
    assert_eq!(hash_tag("no tag"), None);
    assert_eq!(hash_tag("{}x"), None);
}

#[test]
fn script_calls_are_well_formed() {
    let s = Script::new("p", "r", limits(), 0);
    assert_eq!(s.sha.len(), 40);
    let cmd = s.visit(Form::Sha, &visit(), 0);
    let (v, used) = resp::parse(&cmd).unwrap().unwrap();
    assert_eq!(used, cmd.len());
    let Value::Array(items) = v else { panic!() };
    let text: Vec<String> = items
        .iter()
        .map(|i| match i {
            Value::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
            _ => panic!(),
        })
        .collect();
    assert_eq!(text[0], "EVALSHA");
    assert_eq!(text[1], s.sha);
    assert_eq!(text[2], "6");
    assert_eq!(text[9], "visit");
    assert_eq!(text[17], (u64::MAX - 1).to_string());
    assert_eq!(text.len(), 23);
    let eval = s.visit(Form::Text, &visit(), 0);
    assert!(eval
        .windows(ROOM_SCRIPT.len())
        .any(|w| w == ROOM_SCRIPT.as_bytes()));
}

/// A visit's reply without `max_active=auto`: its values, then the steering's zeros.
fn steering_off(visit: &[i64]) -> Vec<i64> {
    let mut x = visit.to_vec();
    x.resize(reply::LEN, 0);
    x
}

#[test]
fn replies_become_verdicts() {
    let v = visit();
    let o = visit_outcome(
        &arr(&steering_off(&[1, 0, 0, 3, 0, 4, 0, 0, 0, 77, 0, 0])),
        &v,
    )
    .unwrap();
    assert_eq!(o.verdict, Verdict::Admit { sid: v.sid });
    assert_eq!((o.queue_len, o.active), (3, 4));
    let o = visit_outcome(
        &arr(&steering_off(&[2, 1000, 3, 7, 1500, 5, 1, 2, 0, 78, 0, 0])),
        &v,
    )
    .unwrap();
    assert_eq!(
        o.verdict,
        Verdict::Wait(Place {
            sid: v.sid,
            qnum: 1000,
            position: 3,
            queue_len: 7,
            eta_secs: Some(5),
            resumed: false,
            counted: Counted::All,
        })
    );
    assert!(o.joined);
    assert_eq!(o.expired, 2);
    let o = visit_outcome(
        &arr(&steering_off(&[3, 0, 0, 0, 0, 0, 0, 0, 4, 79, 0, 0])),
        &v,
    )
    .unwrap();
    assert_eq!(o.verdict, Verdict::Refuse(Refusal::Closed));
    assert_eq!(o.mode_override, 4);
    // Flood control: no place, the wait in the second element, the line as it is.
    let o = visit_outcome(
        &arr(&steering_off(&[5, 2500, 0, 6, 0, 1, 0, 0, 0, 80, 0, 0])),
        &v,
    )
    .unwrap();
    assert_eq!(
        o.verdict,
        Verdict::Throttled {
            retry_ms: 2500,
            queue_len: 6
        }
    );
    assert!(!o.joined);
    assert_eq!(o.pressure, None);
    // challenge_bits=auto: 1 + the fleet's doublings.
    let o = visit_outcome(
        &arr(&steering_off(&[2, 1000, 3, 7, 1500, 5, 0, 0, 0, 81, 4, 0])),
        &v,
    )
    .unwrap();
    assert_eq!(o.pressure, Some(3));
}

#[test]
fn bad_replies_are_errors() {
    let v = visit();
    let bad = [
        Value::Nil,
        Value::Int(1),
        Value::Status(b"OK".to_vec()),
        Value::Bulk(b"1".to_vec()),
        arr(&[1, 0, 0]),
        arr(&[1, 0, 0, 3, 0, 4, 0, 0, 0]),
        arr(&[1, 0, 0, 3, 0, 4, 0, 0, 0, 1]),
        arr(&[1, 0, 0, 3, 0, 4, 0, 0, 0, 1, -1, 0]),
        arr(&[1, 0, 0, 3, 0, 4, 0, 0, 0, 1, 257, 0]),
        arr(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]),
        arr(&[2, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0]),
        arr(&[2, 5, -1, 1, 0, 0, 0, 0, 0, 1, 0, 0]),
        arr(&[2, 5, 1, 1, 0, 0, 7, 0, 0, 1, 0, 0]),
        arr(&[2, 5, 1, 1, 0, 0, 0, 0, 0, -1, 0, 0]),
        arr(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0]),
        arr(&[5, -5, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0]),
        arr(&[2, 5, 1, 1, 0, 0, 0, 0, 0, 1, 0, 2]),
        Value::Array(vec![Value::Bulk(b"1".to_vec()); 12]),
        Value::Error(b"WRONGTYPE Operation against a key".to_vec()),
    ];
    for b in bad {
        assert!(visit_outcome(&b, &v).is_err(), "{b:?}");
    }
    assert_eq!(
        visit_outcome(&Value::Error(b"NOSCRIPT No matching script".to_vec()), &v),
        Err(ReplyError::NoScript)
    );
    assert_eq!(touch_outcome(&arr(&[3, 9])).unwrap().active, Some(3));
    assert!(touch_outcome(&arr(&[-3, 9])).is_err());
    assert!(touch_outcome(&arr(&[3])).is_err());
    let (removed, m) = revoke_outcome(&arr(&[1, 2, 9])).unwrap();
    assert!(removed);
    assert_eq!((m.active, m.version), (Some(2), 9));
    assert!(revoke_outcome(&arr(&[1, 2])).is_err());
}

/// Each script's text is the preamble of the Rust constants it shares, then its file; the SHA
/// that `EVALSHA` sends and `SCRIPT LOAD` checks is the whole text's.
#[test]
fn scripts_take_their_constants_from_rust() {
    use crate::fleet::{tally::TALLY_SCRIPT, ENDS_CAP, EXACT_LINE, FLEET_SCRIPT};
    let scripts = [
        (
            ROOM_SCRIPT,
            concat!(include_str!("steer.lua"), include_str!("room.lua")),
            38 + 2 + steer::STEER_SHARED.len(),
        ),
        (
            steer::STEER_SCRIPT,
            concat!(include_str!("steer.lua"), include_str!("steer_call.lua")),
            steer::STEER_SHARED.len(),
        ),
        (FLEET_SCRIPT, include_str!("../fleet/script.lua"), 73),
        (TALLY_SCRIPT, include_str!("../fleet/tally.lua"), 3),
        (
            crate::rate::SYNC_SCRIPT,
            include_str!("../rate/script.lua"),
            12,
        ),
    ];
    for (text, file, n) in scripts {
        let preamble = text.strip_suffix(file).unwrap();
        let mut lines = preamble.lines();
        assert_eq!(lines.next(), PREAMBLE_HEAD.strip_suffix('\n'));
        let lines: Vec<&str> = lines.collect();
        assert_eq!(lines.len(), n);
        for l in lines {
            let (name, value) = l.strip_prefix("local ").unwrap().split_once(" = ").unwrap();
            assert!(
                name.bytes().all(|c| c.is_ascii_uppercase() || c == b'_'),
                "{l}"
            );
            assert!(value.parse::<u64>().is_ok(), "{l}");
        }
        let sha = sha_of(text);
        assert_ne!(sha, sha_of(file));
        assert!(check_load(&Value::Bulk(sha.clone().into_bytes()), &sha).is_ok());
    }
    for (text, line) in [
        (
            ROOM_SCRIPT,
            format!("local EXPIRE_STEP = {}\n", crate::room::EXPIRE_STEP),
        ),
        (
            ROOM_SCRIPT,
            format!("local LOTTERY_SPAN = {LOTTERY_SPAN}\n"),
        ),
        (
            ROOM_SCRIPT,
            format!("local QUEUE_ALL = {}\n", Mode::QueueAll.code()),
        ),
        (FLEET_SCRIPT, format!("local EXACT_LINE = {EXACT_LINE}\n")),
        (FLEET_SCRIPT, format!("local ENDS = {ENDS_CAP}\n")),
        (
            FLEET_SCRIPT,
            format!("local LOOK_MS = {}\n", crate::challenge::LOOK_MS),
        ),
        (
            TALLY_SCRIPT,
            format!("local STALE = {}\n", crate::sync::STALE_INTERVALS),
        ),
        (crate::rate::SYNC_SCRIPT, "local SEEN = 11\n".to_string()),
    ] {
        assert!(text.contains(&line), "{line}");
    }
    assert_eq!(Script::new("p", "r", limits(), 0).sha, sha_of(ROOM_SCRIPT));
    assert_eq!(ROOM_SCRIPT.lines().nth(1), Some("local EXPIRE_STEP = 64"));
}

#[test]
fn load_reply_must_name_our_script() {
    let sha = sha_of(ROOM_SCRIPT);
    assert!(check_load(&Value::Bulk(sha.clone().into_bytes()), &sha).is_ok());
    assert!(check_load(&Value::Bulk(b"0000".to_vec()), &sha).is_err());
    assert!(check_load(&Value::Error(b"ERR no scripts".to_vec()), &sha).is_err());
}

#[test]
fn cluster_redirections_and_sentinel_answers() {
    let a = redirection(b"MOVED 3999 127.0.0.1:6381", b"MOVED ").unwrap();
    assert_eq!(a, "127.0.0.1:6381".parse().unwrap());
    let a = redirection(b"ASK 12 ::1:7002", b"ASK ").unwrap();
    assert_eq!(a, "[::1]:7002".parse().unwrap());
    assert_eq!(redirection(b"MOVED 3999 127.0.0.1:6381", b"ASK "), None);
    assert_eq!(redirection(b"MOVED x 127.0.0.1:6381", b"MOVED "), None);
    assert_eq!(redirection(b"MOVED 1 redis-a:6381", b"MOVED "), None);
    assert_eq!(redirection(b"MOVED 1 127.0.0.1:99999", b"MOVED "), None);
    assert_eq!(redirection(b"MOVED 1", b"MOVED "), None);
    let ok = Value::Array(vec![
        Value::Bulk(b"127.0.0.1".to_vec()),
        Value::Bulk(b"6380".to_vec()),
    ]);
    assert_eq!(master_address(&ok), Some("127.0.0.1:6380".parse().unwrap()));
    for bad in [
        Value::Nil,
        Value::Array(vec![]),
        Value::Array(vec![Value::Bulk(b"x".to_vec()), Value::Bulk(b"1".to_vec())]),
        Value::Error(b"ERR no such master".to_vec()),
    ] {
        assert_eq!(master_address(&bad), None);
    }
    let auth = auth_command(Some("u"), "p w");
    let (v, _) = super::resp::parse(&auth).unwrap().unwrap();
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Bulk(b"AUTH".to_vec()),
            Value::Bulk(b"u".to_vec()),
            Value::Bulk(b"p w".to_vec())
        ])
    );
}

#[test]
fn backoff_doubles_and_resets() {
    let mut b = Backoff::new(100, 1000);
    assert!(b.may_try(0));
    assert_eq!(b.failed(10), 100);
    assert!(!b.may_try(109));
    assert!(b.may_try(110));
    assert_eq!(b.failed(110), 200);
    assert_eq!(b.failed(310), 400);
    assert_eq!(b.failed(710), 800);
    assert_eq!(b.failed(1510), 1000);
    assert_eq!(b.failed(2510), 1000);
    b.succeeded();
    assert!(b.may_try(2511));
    assert_eq!(b.failed(3000), 100);
}

#[test]
fn touches_are_rate_limited_per_session() {
    let mut t = TouchLog::default();
    assert!(t.due(1, 0, 30_000));
    assert!(!t.due(1, 29_999, 30_000));
    assert!(t.due(1, 30_000, 30_000));
    t.note(2, 100);
    assert!(!t.due(2, 200, 30_000));
    assert_eq!(t.written_at(2), Some(100));
    assert_eq!(t.written_at(1), Some(30_000));
    assert_eq!(t.written_at(3), None);
    for sid in 10..10_000 {
        t.due(sid, 40_000, 30_000);
    }
    // Old entries are pruned once the log is large.
    t.due(5, 80_000, 30_000);
    assert!(t.len() < 100);
}

// ------------------------------------------------------------------ server version

use super::version::{self, Check, RedisVersion, Requirement};

fn info(version_line: &str) -> Vec<u8> {
    format!(
        "# Server\r\nredis_git_sha1:00000000\r\n{version_line}\r\nredis_mode:standalone\r\n\
         os:Linux 6.1.0 x86_64\r\n"
    )
    .into_bytes()
}

#[test]
fn versions_parse_and_order() {
    assert_eq!(
        RedisVersion::parse("6.2.0"),
        Some(RedisVersion::new(6, 2, 0))
    );
    assert_eq!(
        RedisVersion::parse("7.0.15"),
        Some(RedisVersion::new(7, 0, 15))
    );
    assert_eq!(
        RedisVersion::parse("6.0.16"),
        Some(RedisVersion::new(6, 0, 16))
    );
    // Unstable builds say 255.255.255; a version without its patch is .0.
    assert_eq!(
        RedisVersion::parse("255.255.255"),
        Some(RedisVersion::new(255, 255, 255))
    );
    assert_eq!(RedisVersion::parse("6.2"), Some(RedisVersion::new(6, 2, 0)));
    assert!(RedisVersion::new(6, 0, 16) < RedisVersion::new(6, 2, 0));
    assert!(RedisVersion::new(6, 10, 0) > RedisVersion::new(6, 2, 0));
    assert!(RedisVersion::new(7, 0, 0) > RedisVersion::new(6, 2, 99));
    assert_eq!(RedisVersion::new(6, 0, 16).to_string(), "6.0.16");
}

#[test]
fn garbage_versions_are_none() {
    for bad in [
        "",
        "7",
        "7.",
        ".7",
        "7..1",
        "7.0.15.1",
        "v7.0.15",
        "7.0.15-rc1",
        "7.0.x",
        "-7.0.1",
        "+7.0.1",
        "7 .0.1",
        "７.0.1",
        "99999999999.0.0",
        "1.2.3\0",
    ] {
        assert_eq!(RedisVersion::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn the_version_is_read_from_info() {
    assert_eq!(
        version::version_in_info(&info("redis_version:7.0.15")),
        Some(RedisVersion::new(7, 0, 15))
    );
    // Lines ended by LF only, and the field first.
    assert_eq!(
        version::version_in_info(b"redis_version:6.0.16\nredis_mode:standalone\n"),
        Some(RedisVersion::new(6, 0, 16))
    );
    // Valkey: the Redis version it is compatible with (7.2.4 in every release).
    assert_eq!(
        version::version_in_info(&info(
            "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1"
        )),
        Some(RedisVersion::new(7, 2, 4))
    );
    // Missing, another field's name that ends alike, garbage, binary.
    assert_eq!(version::version_in_info(&info("redis_mode:cluster")), None);
    assert_eq!(
        version::version_in_info(&info("xredis_version:7.0.15")),
        None
    );
    assert_eq!(version::version_in_info(&info("redis_version:seven")), None);
    assert_eq!(version::version_in_info(b""), None);
    assert_eq!(version::version_in_info(b"redis_version:\xff\xfe"), None);
    assert_eq!(
        version::version_in_info(b"HTTP/1.0 200 OK\r\n\r\n<html>"),
        None
    );
}

#[test]
fn a_reply_is_checked_against_what_the_connection_needs() {
    let bulk = |line: &str| Value::Bulk(info(line));
    let sync = version::NEEDS_ZADD_GT;
    assert_eq!(
        version::check(&bulk("redis_version:6.0.16"), &sync),
        Check::TooOld(RedisVersion::new(6, 0, 16))
    );
    assert_eq!(
        version::check(&bulk("redis_version:6.2.0"), &sync),
        Check::Fine(RedisVersion::new(6, 2, 0))
    );
    assert_eq!(
        version::check(&bulk("redis_version:7.0.15"), &sync),
        Check::Fine(RedisVersion::new(7, 0, 15))
    );
    // The central room's scripts are happy with 6.0.
    assert_eq!(
        version::check(&bulk("redis_version:6.0.16"), &version::NEEDS_SCRIPTS),
        Check::Fine(RedisVersion::new(6, 0, 16))
    );
    // Replies that do not tell: the check is skipped, with the reason.
    let unknown = |v: &Value| match version::check(v, &sync) {
        Check::Unknown(why) => why,
        other => panic!("{other:?}"),
    };
    assert!(unknown(&bulk("redis_mode:standalone")).contains("no readable redis_version"));
    assert!(unknown(&Value::Error(
        b"NOPERM this user has no permissions to run the 'info' command".to_vec()
    ))
    .contains("NOPERM"));
    assert!(unknown(&Value::Error(vec![b'x'; 5000])).len() < 300);
    assert!(unknown(&Value::Int(1)).contains("integer"));
    assert!(unknown(&Value::Nil).contains("nil"));
    assert!(unknown(&Value::Array(vec![])).contains("array"));
}

#[test]
fn what_raises_the_requirement() {
    let r = version::NEEDS_SCRIPTS;
    assert_eq!(r.version_text(), "4.0");
    assert_eq!(r.max(version::NEEDS_ACL_USER), version::NEEDS_ACL_USER);
    assert_eq!(
        r.max(version::NEEDS_TLS).max(version::NEEDS_ZADD_GT),
        version::NEEDS_ZADD_GT
    );
    // A tie keeps the first reason.
    assert_eq!(
        version::NEEDS_ACL_USER.max(version::NEEDS_TLS),
        version::NEEDS_ACL_USER
    );
    let patch = Requirement {
        version: RedisVersion::new(6, 2, 7),
        why: "x",
    };
    assert_eq!(patch.version_text(), "6.2.7");
    // A script's text (or its SCRIPT LOAD) tells what it needs.
    assert_eq!(
        version::script_needs(b"redis.call('ZADD', k, 'GT', s, m)"),
        version::NEEDS_ZADD_GT
    );
    assert_eq!(
        version::script_needs(b"redis.call('ZADD', k, 'NX', s, m)"),
        version::NEEDS_SCRIPTS
    );
    assert_eq!(
        version::script_needs(&Script::load_command()),
        version::NEEDS_SCRIPTS
    );
}

#[test]
fn the_line_names_both_versions_and_why() {
    assert_eq!(
        version::too_old(
            "127.0.0.1:6390",
            RedisVersion::new(6, 0, 16),
            &version::NEEDS_ZADD_GT
        ),
        "Redis at 127.0.0.1:6390 is version 6.0.16; smart_limit needs Redis 6.2 or later \
         (the sync= script uses ZADD ... GT)"
    );
}

#[test]
fn info_asks_for_the_server_section() {
    assert_eq!(
        version::info_command(),
        b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n".to_vec()
    );
}

#[test]
fn random_info_never_panics() {
    // Deterministic xorshift; bytes biased toward what an INFO line is made of.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let alphabet = b"redis_version:.0123456789\r\n\xff-";
    let need = version::NEEDS_ZADD_GT;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 48) as usize;
        let mut buf = b"redis_version:".to_vec();
        let mut y = x;
        for _ in 0..len {
            y = y
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            buf.push(alphabet[(y >> 59) as usize % alphabet.len()]);
        }
        let _ = version::check(&Value::Bulk(buf), &need);
    }
}

/// `max_active=auto`'s argument, as steer.lua reads it, and its values in a reply, read
/// fallibly.
#[test]
fn steering_argument_and_reply() {
    use crate::capacity::control::{Move, Window};
    use crate::capacity::fleet::{Answer, PinOp, Tell};
    use crate::capacity::Auto;
    let auto = Auto {
        min: 5,
        max: 90,
        target_ms: 300,
    };
    let t = Tell {
        told: Window {
            n: 12,
            slow: 1,
            warm: 3,
            errors: 2,
        },
        answer: Some(Answer {
            window: 1_700_000_000_123,
            to: 7,
            why: Move::DownErrors,
        }),
        pin: PinOp::Pin(40),
    };
    assert_eq!(
        steer::argument(&auto, &t),
        "5 90 12 1 3 2 1700000000123 7 2 41"
    );
    assert_eq!(
        steer::argument(&auto, &Tell::default()),
        "5 90 0 0 0 0 0 0 0 0"
    );
    assert_eq!(PinOp::Release.code(), 1);
    // Value, pinned, window, n, slow, warm, errors, cut, move, moved at.
    let f = steer::fleet_of(&[6, 0, 1000, 11, 2, 3, 0, 1, 3, 999], 1)
        .unwrap()
        .unwrap();
    assert_eq!(f.value, 6);
    assert_eq!(f.closed.map(|(w, c)| (w, c.n, c.slow)), Some((1000, 11, 2)));
    assert_eq!((f.cut_before, f.last_move), (true, Some(Move::DownSlow)));
    assert_eq!(steer::fleet_of(&[0; 10], 1).unwrap(), None, "not steering");
    for bad in [
        [6, 2, 0, 0, 0, 0, 0, 0, 0, 0],
        [6, 0, 0, 0, 0, 0, 0, 0, 9, 0],
        [6, 0, -1, 0, 0, 0, 0, 0, 0, 0],
    ] {
        assert!(steer::fleet_of(&bad, 1).is_err(), "{bad:?}");
    }
    assert!(steer::steer_reply(&arr(&[6, 0, 0])).is_err());
}
