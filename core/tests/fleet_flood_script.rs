//! Flood control in the synced room's script, against a real `redis-server` and the script's
//! twin (`support::twin`): the budget is charged in the syncs, one budget for the fleet, and
//! every node is told the keys over it.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::{
    picture_reply, FleetScript, FloodOver, FloodPlaces, Report, SyncAnswer,
};
use smart_limit_core::fleet::{FLOOD_ANSWER_CAP, FLOOD_REPORT_CAP};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{self, Form};
use smart_limit_core::room::gcra::Rate;
use support::twin::{cfg, fence, waiters, Twin, BASE};
use support::{packed, start, Client};

/// A report of flood places: (client key, places).
fn flood(list: &[(u64, u64)]) -> Report {
    Report {
        flood: list
            .iter()
            .map(|&(key, places)| FloodPlaces { key, places })
            .collect(),
        ..Report::default()
    }
}

fn over(key: u64, retry_ms: u64) -> FloodOver {
    FloodOver { key, retry_ms }
}

#[test]
fn flood_one_budget_for_the_fleet_and_every_node_told_at_its_next_sync() {
    let Some(srv) = start() else { return };
    // 1 + 4 places at once, then one a minute.
    let rate = Rate::per_sec(1.0 / 60.0, 4);
    let mut t = Twin::new(srv.port, "flood", cfg(10)).flood(rate);
    let key = 0x5eed_0000_0000_0001;
    let now = BASE + 10_000;
    // Nodes 1 and 2 each let the key take two places: four of the five, nobody is told.
    assert_eq!(t.sync(1, now, &flood(&[(key, 2)])).flood, []);
    assert_eq!(t.sync(2, now + 1, &flood(&[(key, 2)])).flood, []);
    // Node 3 lets it take the fifth: its budget is spent; no place until a minute after the
    // first.
    let p = t.sync(3, now + 2, &flood(&[(key, 1)]));
    assert_eq!(p.flood, [over(key, 59_998)]);
    // Every node hears of it at its next sync, reporting or not.
    assert_eq!(
        t.sync(1, now + 1000, &waiters(&[])).flood,
        [over(key, 59_000)]
    );
    assert_eq!(
        t.sync(2, now + 1001, &waiters(&[])).flood,
        [over(key, 58_999)]
    );
    // Another key has its own budget (four places: one left).
    assert_eq!(
        t.sync(2, now + 1002, &flood(&[(key + 1, 4)])).flood,
        [over(key, 58_998)]
    );
    // Places the nodes let it take meanwhile (before they heard) are charged too: the wait
    // grows by an interval each.
    assert_eq!(
        t.sync(3, now + 2000, &flood(&[(key, 2)])).flood,
        [over(key, 2 * 60_000 + 58_000)]
    );
    // When the wait is over the key may take one place again, and is told so by silence.
    let free = now + 3 * 60_000;
    assert_eq!(t.sync(1, free, &waiters(&[])).flood, []);
    assert_eq!(
        t.sync(1, free + 1, &flood(&[(key, 1)])).flood,
        [over(key, 59_999)]
    );
    // The buckets: one key per client key under the room's hash tag, gone when full again
    // (Redis's TTL runs on its own clock: at most the wait plus 1 + burst intervals); the
    // keys over their budget in one sorted set beside the room's.
    let keys = t.redis.cmd(&packed(&["KEYS", "test:{flood}:flood*"]));
    let Value::Array(keys) = keys else { panic!() };
    let mut names: Vec<String> = keys
        .into_iter()
        .map(|k| match k {
            Value::Bulk(k) => String::from_utf8(k).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "test:{flood}:flood:5eed000000000001",
            "test:{flood}:flood:5eed000000000002",
            "test:{flood}:flood_over",
        ]
    );
    for name in &names {
        assert_eq!(redis::hash_tag(name), Some("flood"));
        let ttl = t.redis.cmd(&packed(&["PTTL", name]));
        assert!(
            matches!(ttl, Value::Int(ms) if ms > 0 && ms <= 9 * 60_000),
            "{name}: {ttl:?}"
        );
    }
}

#[test]
fn flood_answers_are_capped_the_reported_first_then_the_longest_refused() {
    let Some(srv) = start() else { return };
    let rate = Rate::per_sec(1.0, 0);
    let mut t = Twin::new(srv.port, "flood-cap", cfg(10)).flood(rate);
    let now = BASE + 10_000;
    // 100 keys over their budget, a longer wait the higher the key; ties among equal places.
    for chunk in (1..=100u64).collect::<Vec<_>>().chunks(FLOOD_REPORT_CAP) {
        let list: Vec<(u64, u64)> = chunk.iter().map(|&k| (k << 56 | k, 2 + k / 10)).collect();
        let p = t.sync(1, now, &flood(&list));
        assert!(p.flood.len() <= FLOOD_ANSWER_CAP);
    }
    // Another node's sync: the 64 refused longest (ties: the greater key first).
    let p = t.sync(2, now + 1, &waiters(&[]));
    assert_eq!(p.flood.len(), FLOOD_ANSWER_CAP);
    assert_eq!(p.flood[0].key, 100 << 56 | 100);
    assert!(p
        .flood
        .windows(2)
        .all(|w| (w[0].retry_ms, w[0].key) > (w[1].retry_ms, w[1].key)));
    // A node reporting a key that waits less is told of it first, whatever the rest.
    let p = t.sync(3, now + 2, &flood(&[(7, 2)]));
    assert_eq!(p.flood[0], over(7, 2000));
    assert_eq!(p.flood.len(), FLOOD_ANSWER_CAP);
}

#[test]
fn random_flood_reports_match_the_model() {
    let Some(srv) = start() else { return };
    let mut x: u64 = 0x0f10_0d5e_ed00_0001;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut all_silent = 0;
    for (room, rate) in [
        ("fa", Rate::per_sec(1.0, 60)),
        ("fb", Rate::per_sec(3.0, 0)),
        ("fc", Rate::per_sec(1.0 / 60.0, 4)),
        ("fd", Rate::per_sec(7.0, 2)),
    ] {
        let mut t = Twin::new(srv.port, room, cfg(10)).flood(rate);
        // 120 client keys, some with the high bits set (hex order is numeric order).
        let keys: Vec<u64> = (0..120)
            .map(|i| {
                let k = next(u64::MAX);
                if i % 3 == 0 {
                    k >> 40
                } else {
                    k
                }
            })
            .collect();
        let mut now = BASE + 60_000;
        let (mut told, mut silent) = (0, 0);
        for _ in 0..300 {
            now += next(700);
            // Now and then a quiet while: waits lapse, buckets fill again.
            if next(25) == 0 {
                now += 30_000 + next(300_000);
            }
            let node = 1 + next(3);
            let mut r = waiters(&[]);
            let reported = if next(3) == 0 { 0 } else { next(40) };
            for _ in 0..reported {
                r.flood.push(FloodPlaces {
                    key: keys[next(keys.len() as u64) as usize],
                    places: 2 + next(6),
                });
            }
            r.flood.sort_by_key(|p| core::cmp::Reverse(p.places));
            r.flood.truncate(FLOOD_REPORT_CAP);
            let p = t.sync(node, now, &r);
            if p.flood.is_empty() {
                silent += 1;
            } else {
                told += 1;
            }
        }
        assert!(told > 30, "{room}: told {told}, silent {silent}");
        all_silent += silent;
    }
    // Waits lapsed too (a minute's rate with long waits rarely does).
    assert!(all_silent > 100, "{all_silent}");
}

#[test]
fn flood_uses_the_servers_clock_when_now_is_zero() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let s =
        FleetScript::new("test", "clock", cfg(10)).with_flood(Some(Rate::per_sec(1.0 / 60.0, 1)));
    c.cmd(&FleetScript::load_command());
    let r = flood(&[(7, 3)]);
    let v = c.cmd(&s.sync(Form::Sha, fence(1, 1, BASE), (0, BASE), &r, 10));
    let Ok(SyncAnswer::Picture(p)) = picture_reply(&v) else {
        panic!("{v:?}")
    };
    // Three places of 1 + 1: two intervals' wait, less the time since.
    assert_eq!(p.flood.len(), 1);
    assert!(
        p.flood[0].retry_ms > 119_000 && p.flood[0].retry_ms <= 120_000,
        "{p:?}"
    );
}

#[test]
fn without_flood_control_nothing_is_charged() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "no-flood", cfg(10));
    let p = t.sync(1, BASE + 10_000, &flood(&[(7, 50)]));
    assert_eq!(p.flood, []);
    let keys = t.redis.cmd(&packed(&["KEYS", "test:{no-flood}:flood*"]));
    assert_eq!(keys, Value::Array(vec![]));
}
