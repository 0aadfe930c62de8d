//! The synced room's flood script (core/src/flood/script.lua) against a real `redis-server`,
//! side by side with [`Rate::take`] (the shared-memory room's bucket): the same takes at the
//! same times must give the same verdicts and waits, whichever node sends them. Also: the
//! bucket is one key with the room's hash tag and a TTL that ends when it is full again.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::flood::{take_reply, FloodScript, Take};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{self, Form};
use smart_limit_core::room::gcra::Rate;
use support::{packed, start, Client};

const T0: u64 = 1_800_000_000_000;

fn take(c: &mut Client, s: &FloodScript, key: u64, now: u64) -> Take {
    let v = c.cmd(&s.take(Form::Text, key, now));
    take_reply(&v).unwrap_or_else(|e| panic!("take({key}) at {now}: {e}: {v:?}"))
}

/// What the shared-memory room's bucket says for the same take.
fn model(rate: Rate, tat: &mut u64, now: u64) -> Take {
    match rate.take(*tat, now * 1000) {
        Ok(t) => {
            *tat = t;
            Take::Paid
        }
        Err(wait_us) => Take::Refused {
            retry_ms: wait_us.div_ceil(1000),
        },
    }
}

#[test]
fn script_loads_under_its_sha() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let s = FloodScript::new("test", "shop", Rate::per_sec(1.0, 3));
    redis::check_load(&c.cmd(&FloodScript::load_command()), &s.sha).unwrap();
    // By SHA once loaded.
    let v = c.cmd(&s.take(Form::Sha, 1, T0));
    assert_eq!(take_reply(&v), Ok(Take::Paid));
}

#[test]
fn one_budget_for_every_node_then_the_rate() {
    let Some(srv) = start() else { return };
    // Three nodes, three connections, one bucket.
    let mut nodes: Vec<Client> = (0..3).map(|_| Client::connect(srv.port).unwrap()).collect();
    let s = FloodScript::new("test", "shop", Rate::per_sec(1.0 / 60.0, 4));
    let key = 0x5eed_0000_0000_0001;
    for i in 0..5 {
        let n = &mut nodes[i % 3];
        assert_eq!(take(n, &s, key, T0 + i as u64), Take::Paid, "place {i}");
    }
    // 1 + burst places at once on the fleet; then none until an interval after the first.
    for i in 5..9u64 {
        let n = &mut nodes[i as usize % 3];
        match take(n, &s, key, T0 + i) {
            Take::Refused { retry_ms } => assert_eq!(retry_ms, 60_000 - i),
            other => panic!("{other:?}"),
        }
    }
    // Another key has its own budget.
    assert_eq!(take(&mut nodes[0], &s, key + 1, T0), Take::Paid);
    // The rate: one more place an interval later.
    assert_eq!(take(&mut nodes[2], &s, key, T0 + 60_000), Take::Paid);
    assert!(matches!(
        take(&mut nodes[1], &s, key, T0 + 60_001),
        Take::Refused { .. }
    ));
    // The bucket: one key under the room's hash tag, expiring when it is full again (the
    // script's clock is the test's, Redis's TTL runs on its own: it is at most 5 intervals).
    let keys = nodes[0].cmd(&packed(&["KEYS", "test:*"]));
    let Value::Array(keys) = keys else { panic!() };
    assert_eq!(keys.len(), 2, "{keys:?}");
    for k in keys {
        let Value::Bulk(k) = k else { panic!() };
        let name = String::from_utf8(k).unwrap();
        assert!(name.starts_with("test:{shop}:flood:"), "{name}");
        assert_eq!(redis::hash_tag(&name), Some("shop"));
        let ttl = nodes[0].cmd(&packed(&["PTTL", &name]));
        assert!(
            matches!(ttl, Value::Int(ms) if ms > 0 && ms <= 5 * 60_000),
            "{name}: {ttl:?}"
        );
    }
}

#[test]
fn random_takes_match_the_shm_bucket() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for (room, rate) in [
        ("a", Rate::per_sec(1.0, 60)),
        ("b", Rate::per_sec(3.0, 0)),
        ("c", Rate::per_sec(1.0 / 60.0, 4)),
        ("d", Rate::per_sec(7.0, 2)),
    ] {
        let s = FloodScript::new("test", room, rate);
        let mut tats = [0u64; 3];
        let mut now = T0;
        let (mut paid, mut refused) = (0, 0);
        for _ in 0..2000 {
            now += rnd(rate.interval_us / 1000 / 2 + 2);
            let k = rnd(3) as usize;
            let want = model(rate, &mut tats[k], now);
            let got = take(&mut c, &s, k as u64 + 1, now);
            assert_eq!(got, want, "room {room}, key {k}, at {now}");
            match got {
                Take::Paid => paid += 1,
                Take::Refused { .. } => refused += 1,
            }
        }
        assert!(paid > 100 && refused > 100, "{room}: {paid} / {refused}");
    }
}

#[test]
fn the_servers_clock_is_used_when_now_is_zero() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let s = FloodScript::new("test", "clock", Rate::per_sec(1.0 / 60.0, 1));
    assert_eq!(take(&mut c, &s, 7, 0), Take::Paid);
    assert_eq!(take(&mut c, &s, 7, 0), Take::Paid);
    match take(&mut c, &s, 7, 0) {
        Take::Refused { retry_ms } => assert!(retry_ms > 59_000 && retry_ms <= 60_000),
        other => panic!("{other:?}"),
    }
    let ttl = c.cmd(&packed(&["PTTL", "test:{clock}:flood:0000000000000007"]));
    assert!(
        matches!(ttl, Value::Int(ms) if ms > 110_000 && ms <= 120_000),
        "{ttl:?}"
    );
}

#[test]
fn bad_arguments_are_an_error_reply() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let s = FloodScript::new("test", "bad", Rate::per_sec(1.0, 1));
    let v = c.cmd(&s.take(Form::Text, 1, T0));
    assert_eq!(take_reply(&v), Ok(Take::Paid));
    // A hand-made call with interval 0: refused by the script, read as an error.
    let text = smart_limit_core::flood::FLOOD_SCRIPT;
    let v = c.cmd(&packed(&[
        "EVAL",
        text,
        "1",
        "test:{bad}:flood:1",
        "0",
        "0",
        "1",
    ]));
    assert!(take_reply(&v).is_err(), "{v:?}");
}
