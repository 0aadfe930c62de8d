//! The synced room's script (core/src/fleet_room.lua) against a real `redis-server`, side by
//! side with its Rust twin [`FleetModel`] (what the simulator runs): the same syncs and draws
//! at the same times must give the same pictures and grants. Also the rules themselves: the
//! cursor takes the oldest waiters, grants never exceed `max_active`, a client seen on two
//! nodes is counted once; flood control's budget charged in the syncs (one budget for the
//! fleet, every node told the keys over it).
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use smart_limit_core::fleet::FleetModel;
use smart_limit_core::fleet::{
    draw_reply, picture_reply, Fence, FleetConfig, FleetScript, FloodOver, FloodPlaces, Report,
    RoomPicture, Sighting, SpentProof, SyncAnswer, WaiterSighting, FLOOD_ANSWER_CAP,
    FLOOD_REPORT_CAP,
};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{self, Form};
use smart_limit_core::room::gcra::Rate;
use std::collections::HashMap;
use support::{packed, start, Client};

const BASE: u64 = 1_800_000_000_000;

fn cfg(max_active: u64) -> FleetConfig {
    FleetConfig {
        interval_ms: 1000,
        max_active,
        active_window_ms: 10_000,
        presence_ms: 5_000,
        max_line: 0,
    }
}

struct Twin {
    redis: Client,
    script: FleetScript,
    model: FleetModel,
    /// Each node's last sync sequence.
    seqs: HashMap<u64, u64>,
    max_active: u64,
}

fn fence(node_id: u64, seq: u64, now: u64) -> Fence {
    Fence {
        node_id,
        generation: 1,
        window: now / 1000 * 1000,
        seq,
    }
}

impl Twin {
    fn new(port: u16, room: &str, c: FleetConfig) -> Twin {
        let mut redis = Client::connect(port).unwrap();
        let script = FleetScript::new("test", room, c);
        let v = redis.cmd(&FleetScript::load_command());
        assert_eq!(v, Value::Bulk(script.sha.clone().into_bytes()));
        Twin {
            redis,
            script,
            model: FleetModel::new(c, BASE, 3_600_000),
            seqs: HashMap::new(),
            max_active: c.max_active,
        }
    }

    /// With flood control at `rate`, in the script and the model alike.
    fn flood(self, rate: Rate) -> Twin {
        Twin {
            script: self.script.with_flood(Some(rate)),
            model: self.model.with_flood(Some(rate)),
            ..self
        }
    }

    /// A sync with the fence given, by both; their answers must agree.
    fn sync_fenced(&mut self, f: Fence, now: u64, r: &Report) -> SyncAnswer {
        let v = self.redis.cmd(
            &self
                .script
                .sync(Form::Sha, f, (now, now), r, self.max_active),
        );
        let got = picture_reply(&v).unwrap_or_else(|e| panic!("{e}: {v:?}"));
        let want = self.model.sync(f, now, r);
        assert_eq!(got, want, "sync of node {} at {now}", f.node_id);
        got
    }

    fn sync(&mut self, node: u64, now: u64, r: &Report) -> RoomPicture {
        let seq = self.seqs.entry(node).or_insert(0);
        *seq += 1;
        let f = fence(node, *seq, now);
        match self.sync_fenced(f, now, r) {
            SyncAnswer::Picture(p) => p,
            SyncAnswer::Stale => panic!("a sync in order was taken for stale"),
        }
    }

    fn draw_fenced(&mut self, f: Fence, now: u64, want: u64) -> u64 {
        let v = self
            .redis
            .cmd(&self.script.draw(Form::Sha, f, now, want, self.max_active));
        let got = draw_reply(&v).unwrap_or_else(|e| panic!("{e}: {v:?}"));
        assert_eq!(
            got,
            self.model.draw(f, now, want),
            "draw of node {} at {now}",
            f.node_id
        );
        got.granted
    }

    fn draw(&mut self, node: u64, now: u64, want: u64) -> u64 {
        let seq = self.seqs.get(&node).copied().unwrap_or(0);
        self.draw_fenced(fence(node, seq, now), now, want)
    }
}

/// Waiters (sid, arrival ms after BASE), seen as the report is sent.
fn waiters(list: &[(u64, u64)]) -> Report {
    Report {
        polls: list.len() as u64,
        waiters: list.iter().map(|&(s, a)| waiter(s, a, u64::MAX)).collect(),
        ..Report::default()
    }
}

fn waiter(sid: u64, arrival: u64, at: u64) -> WaiterSighting {
    WaiterSighting {
        sid,
        arrival: BASE + arrival,
        at,
    }
}

fn sighting(sid: u64, at: u64) -> Sighting {
    Sighting { sid, at }
}

#[test]
fn the_cursor_takes_the_oldest_and_grants_never_exceed_max_active() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "rules", cfg(3));
    let now = BASE + 10_000;
    // Node 1 saw waiters who arrived at 1, 5, 9 s; node 2 at 2, 6 s.
    t.sync(1, now, &waiters(&[(11, 1000), (15, 5000), (19, 9000)]));
    let p = t.sync(2, now + 5, &waiters(&[(22, 2000), (26, 6000)]));
    assert_eq!(p.queue_len, 5);
    // 3 free places: the 3 oldest (1, 2, 5 s), whichever node saw them, and the band beyond
    // them: up to as many again who came within an interval of the third (6 s; not 9 s).
    assert_eq!(p.cursor, BASE + 6000);
    // The first interval shared its 3 free places out by the polls seen so far (node 1's 3),
    // 80 % of them: 2 to node 1; node 2, reporting later, got 1. Both are reserved.
    assert_eq!(p.quota, 1);
    // Next interval: node 1 reports (its grant is released, it admitted nobody); node 2's is
    // still reserved until it reports: 2 free places, shared by the polls (node 2's).
    let p1 = t.sync(1, now + 1000, &waiters(&[]));
    assert_eq!((p1.free, p1.quota), (2, 0));
    // Node 2 reports (its grant released); it answered no polls this time: no share.
    let p2 = t.sync(2, now + 1001, &waiters(&[]));
    assert_eq!(p2.quota, 0);
    // The pool: grants and draws never exceed the free places (3), then none.
    assert_eq!(t.draw(2, now + 1002, 1), 1);
    assert_eq!(t.draw(2, now + 1002, 5), 2);
    assert_eq!(t.draw(1, now + 1003, 1), 0);
    // Node 1 admitted waiter 11 (its grant): reported, it is active and out of the line;
    // node 2's grants and draws are released by its report too.
    let r = Report {
        admitted: vec![sighting(11, now + 1500)],
        ..Report::default()
    };
    let p = t.sync(1, now + 2000, &r);
    assert_eq!((p.fleet_active, p.queue_len), (1, 4));
}

#[test]
fn samples_of_a_long_line_reach_its_tail_evenly() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "samples", cfg(1));
    // 190 waiters: the head rank by rank, then evenly to the tail, never a gap wider than
    // the spread (a line longer than the samples once had its last half interpolated from
    // one pair of samples).
    let list: Vec<(u64, u64)> = (0..190).map(|i| (1000 + i, 10 * (i + 1))).collect();
    let p = t.sync(1, BASE + 10_000, &waiters(&list));
    assert_eq!(p.queue_len, 190);
    let ranks: Vec<u64> = p.samples.iter().map(|s| s.rank).collect();
    assert_eq!(ranks[..32], (0..32).collect::<Vec<_>>()[..]);
    assert_eq!(ranks.last(), Some(&189));
    let widest = ranks.windows(2).map(|w| w[1] - w[0]).max();
    assert_eq!(widest, Some(3), "{ranks:?}");
}

#[test]
fn samples_of_a_longer_line_stay_close_near_its_head() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "samples-head", cfg(1));
    // 5,000 waiters: evenly spaced, samples would be 78 ranks apart from rank 32 on, and a
    // waiter at rank 100 would be told its place from a pair of samples 78 apart; near the
    // head they are at most a quarter of their rank apart instead, and the rest still reach
    // the tail no wider than the even spacing.
    let list: Vec<(u64, u64)> = (0..5000).map(|i| (10_000 + i, i + 1)).collect();
    let p = t.sync(1, BASE + 10_000, &waiters(&list));
    assert_eq!(p.queue_len, 5000);
    let ranks: Vec<u64> = p.samples.iter().map(|s| s.rank).collect();
    assert_eq!(ranks[..32], (0..32).collect::<Vec<_>>()[..]);
    assert_eq!(ranks.last(), Some(&4999));
    assert!(ranks.len() <= 121, "{}", ranks.len());
    for w in ranks.windows(2) {
        let gap = w[1] - w[0];
        assert!(gap <= 78, "{ranks:?}");
        assert!(gap <= (w[0] / 4).max(1) || w[0] >= 4 * 78, "{ranks:?}");
    }
}

#[test]
fn a_session_seen_on_every_node_counts_once() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "once", cfg(10));
    let now = BASE + 10_000;
    let seen = |sids: &[u64], at: u64| Report {
        active: sids.iter().map(|&s| sighting(s, at)).collect(),
        ..Report::default()
    };
    t.sync(1, now, &seen(&[1, 2, 3], now));
    t.sync(2, now + 1, &seen(&[2, 3, 4], now + 1));
    let p = t.sync(3, now + 2, &seen(&[1, 4], now + 2));
    assert_eq!(p.fleet_active, 4);
    // Unseen for the active window: gone (syncs at least every 3 s: no silence).
    for at in [3_000, 6_000, 9_000] {
        t.sync(2, now + at, &seen(&[], now));
    }
    let p = t.sync(1, now + 10_003, &seen(&[1], now + 10_003));
    assert_eq!(p.fleet_active, 1);
}

#[test]
fn a_late_report_keeps_the_time_of_its_sightings() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "late", cfg(10));
    let now = BASE + 10_000;
    let seen = |sids: &[u64], at: u64| Report {
        active: sids.iter().map(|&s| sighting(s, at)).collect(),
        ..Report::default()
    };
    // Session 1 was seen at `now` but reported 9 s later (a sync that failed, given back);
    // session 2 was seen just before that report. Another node's older sighting of 2 does not
    // move it back.
    t.sync(1, now + 9_000, &seen(&[1, 2], now));
    t.sync(2, now + 9_001, &seen(&[2], now + 8_999));
    let p = t.sync(2, now + 9_500, &seen(&[2], now + 100));
    assert_eq!(p.fleet_active, 2);
    // Its window ends 10 s after it was seen, not after it was reported.
    let p = t.sync(1, now + 10_001, &seen(&[], now));
    assert_eq!(p.fleet_active, 1);
    // (Syncs at least every 3 s: a longer silence holds expiry, see below.)
    for at in [12_000, 15_000, 18_000] {
        t.sync(1, now + at, &seen(&[], now));
    }
    let p = t.sync(1, now + 19_000, &seen(&[], now));
    assert_eq!(p.fleet_active, 0);
}

#[test]
fn after_a_silence_sessions_stay_until_every_node_can_have_reported() {
    let Some(srv) = start() else { return };
    let seen = |sids: &[u64], at: u64| Report {
        active: sids.iter().map(|&s| sighting(s, at)).collect(),
        ..Report::default()
    };
    let now = BASE + 10_000;
    // Three nodes see sessions 1, 2 (node 1), 3 (node 2) and 4 (node 3) every second, and
    // node 2 a waiter, 9; then Redis is away for 12 s (more than the 10 s window and the 5 s
    // presence). Sessions 1 and 3 went on (their nodes kept the sightings), 2 and 4 left; 9
    // still waits.
    let before = |room: &str| {
        let mut t = Twin::new(srv.port, room, cfg(10));
        for at in [0, 1_000, 2_000] {
            t.sync(1, now + at, &seen(&[1, 2], now + at));
            let mut r = seen(&[3], now + at);
            r.waiters.push(waiter(9, 5_000, now + at));
            t.sync(2, now + at + 1, &r);
            t.sync(3, now + at + 2, &seen(&[4], now + at));
        }
        t
    };
    // Node 1 is back first: the fleet has not heard from nodes 2 and 3 since, so sessions 3
    // and 4 (last known 12 s ago) keep their places, and so does 2; waiter 9 keeps its place
    // in the line.
    let mut t = before("silence-all");
    let p = t.sync(1, now + 14_000, &seen(&[1], now + 13_000));
    assert_eq!((p.fleet_active, p.queue_len), (4, 1));
    assert!(p.quota <= 10 - 4, "{p:?}");
    let p = t.sync(2, now + 14_200, &seen(&[3], now + 12_000));
    assert_eq!(p.fleet_active, 4);
    // A sync node 3 built during the silence runs now (sent on a connection it gave up on):
    // it does not say what node 3 saw since.
    let built = fence(3, 10, now + 3_000);
    let p = t.sync_fenced(built, now + 14_300, &seen(&[], now));
    assert!(
        matches!(p, SyncAnswer::Picture(ref p) if p.fleet_active == 4),
        "{p:?}"
    );
    // Once all three have synced after the silence, expiry is back where it was: 2 and 4
    // are gone.
    t.seqs.insert(3, 10);
    let p = t.sync(3, now + 14_400, &seen(&[], now));
    assert_eq!(p.fleet_active, 2);

    // Node 3 does not come back: the hold ends a node's staleness (3 intervals) after the
    // first call.
    let mut t = before("silence-one-gone");
    t.sync(1, now + 14_000, &seen(&[1], now + 13_000));
    let p = t.sync(2, now + 14_200, &seen(&[3], now + 12_000));
    assert_eq!(p.fleet_active, 4);
    let p = t.sync(1, now + 16_900, &seen(&[], now));
    assert_eq!(p.fleet_active, 4);
    let p = t.sync(1, now + 17_001, &seen(&[], now));
    assert_eq!(p.fleet_active, 2);
    // Without the hold, node 1's first sync would have counted one session, and given the
    // places of 3 (in use) away.
}

#[test]
fn an_admitted_session_never_rejoins_the_line() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "rejoin", cfg(10));
    let now = BASE + 10_000;
    // Client 7 waits on node 1 and node 2; node 2 admits it and reports first; node 1's late
    // report of it waiting does not put it back in the line.
    t.sync(1, now, &waiters(&[(7, 1000), (8, 2000)]));
    let admitted = Report {
        admitted: vec![sighting(7, now + 5)],
        waiters: vec![waiter(7, 1000, now)],
        ..Report::default()
    };
    let p = t.sync(2, now + 10, &admitted);
    assert_eq!((p.fleet_active, p.queue_len), (1, 1));
    let p = t.sync(1, now + 1000, &waiters(&[(7, 1000)]));
    assert_eq!((p.fleet_active, p.queue_len), (1, 1));
    assert_eq!(p.samples[0].arrival, BASE + 2000);
}

#[test]
fn random_syncs_and_draws_match_the_model() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "random", cfg(20));
    let mut x: u64 = 0x1234_5678;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    // Sightings are up to a few seconds old when reported (some much older: given back).
    let at = |now: u64, r: u64| now - r % 2_000 - if r.is_multiple_of(20) { 20_000 } else { 0 };
    let mut now = BASE + 60_000;
    let mut sid = 100u64;
    let mut waiting: Vec<(u64, u64)> = Vec::new();
    let mut active: Vec<u64> = Vec::new();
    for _ in 0..400 {
        now += 37 + next(400);
        // Now and then Redis is away for a while (expiry held after it).
        if next(40) == 0 {
            now += 3_000 + next(12_000);
        }
        let node = 1 + next(3);
        if next(10) == 0 {
            t.draw(node, now, 1 + next(4));
            continue;
        }
        let mut r = Report {
            polls: next(50),
            asked: next(8),
            challenged: next(12),
            ..Report::default()
        };
        for _ in 0..next(3) {
            let key = next(40);
            r.spent.push(SpentProof {
                key,
                ms: now + next(20_000),
            });
        }
        for _ in 0..next(6) {
            sid += 1;
            let arrival = now - BASE - next(30_000);
            waiting.push((sid, arrival));
        }
        // Some of the waiting are seen again, some admitted, some vanish.
        // Sightings are up to a few seconds old when reported (some much older: given back).
        for &(s, a) in waiting.iter() {
            if next(3) == 0 {
                r.waiters.push(waiter(s, a, at(now, next(1 << 30))));
            }
        }
        if !waiting.is_empty() && next(2) == 0 {
            let (s, _) = waiting.remove(next(waiting.len() as u64) as usize);
            r.admitted.push(sighting(s, at(now, next(1 << 30))));
            active.push(s);
        }
        if next(4) == 0 && !waiting.is_empty() {
            waiting.remove(0);
        }
        for &s in &active {
            if next(3) == 0 {
                r.active.push(sighting(s, at(now, next(1 << 30))));
            }
        }
        t.sync(node, now, &r);
    }
}

#[test]
fn stale_syncs_and_draws_change_nothing() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "fenced", cfg(4));
    let now = BASE + 10_000;
    t.sync(1, now, &waiters(&[(11, 1000)]));
    let p = t.sync(1, now + 1000, &waiters(&[]));
    assert_eq!(p.quota, 3);
    // A sync answered late (sequence 1 again, e.g. a stalled ex-leader's) is refused; so is
    // one of an older configuration.
    let late = Report {
        admitted: vec![sighting(11, now + 900)],
        ..Report::default()
    };
    assert_eq!(
        t.sync_fenced(fence(1, 1, now + 1100), now + 1100, &late),
        SyncAnswer::Stale
    );
    let old_gen = Fence {
        generation: 0,
        ..fence(1, 9, now + 1100)
    };
    assert_eq!(t.sync_fenced(old_gen, now + 1100, &late), SyncAnswer::Stale);
    // A draw sent before the node's last sync was run is refused.
    assert_eq!(t.draw_fenced(fence(1, 1, now + 1200), now + 1200, 1), 0);
    // Nothing moved: the line still has 11, nobody is active.
    let p = t.sync(2, now + 1300, &waiters(&[]));
    assert_eq!((p.fleet_active, p.queue_len), (0, 1));
}

#[test]
fn a_second_sync_in_the_interval_keeps_the_node_its_places() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "reload", cfg(10));
    let now = BASE + 10_500;
    // Alone, with everyone's polls: 80 % of 10 free places.
    let p = t.sync(
        1,
        now,
        &Report {
            polls: 5,
            ..Report::default()
        },
    );
    assert_eq!(p.quota, 8);
    // It admits 3, then a reload's new leader syncs in the same interval: it keeps the other 5.
    let r = Report {
        admitted: (1..=3).map(|s| sighting(s, now + 100)).collect(),
        ..Report::default()
    };
    let p = t.sync(1, now + 200, &r);
    assert_eq!((p.quota, p.fleet_active), (5, 3));
    // The next interval shares out again: 7 free places, 80 %.
    let p = t.sync(
        1,
        now + 1000,
        &Report {
            polls: 5,
            ..Report::default()
        },
    );
    assert_eq!(p.quota, 5);
}

#[test]
fn the_line_holds_max_line_and_a_place_gone_comes_back_at_the_tail() {
    let Some(srv) = start() else { return };
    let c = FleetConfig {
        max_line: 3,
        ..cfg(1)
    };
    let mut t = Twin::new(srv.port, "maxline", c);
    let now = BASE + 10_000;
    let p = t.sync(
        1,
        now,
        &waiters(&[(1, 1000), (2, 2000), (3, 3000), (4, 4000)]),
    );
    assert_eq!((p.queue_len, p.full), (3, true));
    // 1 goes quiet; 2 and 3 keep polling: 1 leaves the line after presence (5 s).
    let p = t.sync(1, now + 5_500, &waiters(&[(2, 2000), (3, 3000)]));
    assert_eq!((p.queue_len, p.full), (2, false));
    // 1 comes back with a new place (its ticket's place was gone): the tail.
    let p = t.sync(1, now + 5_600, &waiters(&[(1, 15_600)]));
    assert_eq!(p.queue_len, 3);
    assert_eq!(p.samples.last().map(|s| s.arrival), Some(BASE + 15_600));
    // A waiter's arrival only moves later: an old sighting does not take it back to the head.
    let p = t.sync(2, now + 5_700, &waiters(&[(1, 1000)]));
    assert_eq!(p.samples.last().map(|s| s.arrival), Some(BASE + 15_600));
}

// ------------------------------------------------------------------ flood control

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

/// `challenge_bits=auto`: the script sums every node's newcomers and admissions per interval
/// and the first sync of the next interval looks (challenge::Pressure's rule), so both nodes
/// are told the same doublings all interval. Interval 1: 9 + 9 newcomers, 1 admission: ratio
/// 0.25 x 1 + 0.75 x 19 / 2 = 7.375, 2 doublings from interval 2 on; a quiet interval 2
/// brings it to 2.59 (1); the line gone, 0.
#[test]
fn the_fleets_pressure_is_summed_over_nodes_and_told_to_each() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "pressure", cfg(2));
    let now = BASE + 60_000;
    let mut r1 = waiters(&[(1, 1), (2, 2), (3, 3)]);
    r1.asked = 9;
    assert_eq!(t.sync(1, now, &r1).pressure, 0, "no interval looked at yet");
    let mut r2 = waiters(&[(4, 4), (5, 5)]);
    r2.asked = 9;
    r2.admitted = vec![sighting(1, now)];
    assert_eq!(t.sync(2, now + 100, &r2).pressure, 0);
    let p1 = t.sync(1, now + 1000, &waiters(&[(2, 2), (3, 3)]));
    let p2 = t.sync(2, now + 1100, &waiters(&[(4, 4), (5, 5)]));
    assert_eq!((p1.pressure, p2.pressure), (2, 2));
    assert_eq!(t.sync(1, now + 2000, &Report::default()).pressure, 1);
    // Challenges count as clients asking when they outnumber the places taken (scripts that
    // do not solve): 20 challenges, 2 places: 0.25 x 2.59 + 0.75 x 21 = 16.4, 4 doublings.
    let mut r = waiters(&[(2, 2)]);
    (r.asked, r.challenged) = (2, 20);
    t.sync(2, now + 2100, &r);
    assert_eq!(t.sync(1, now + 3000, &Report::default()).pressure, 4);
    // Everyone in line leaves (absent for presence): nobody waits, no pressure.
    let mut at = now + 4000;
    while t.sync(1, at, &Report::default()).queue_len > 0 {
        assert!(at < now + 20_000, "the line never emptied");
        at += 1000;
    }
    assert_eq!(t.sync(2, at + 1000, &Report::default()).pressure, 0);
}

/// With an interval shorter than a second the fleet looks once a second, as one node does:
/// the sums of five 200 ms intervals make one look, and its doublings stand until the next.
#[test]
fn the_fleets_pressure_looks_once_a_second_whatever_the_interval() {
    let Some(srv) = start() else { return };
    let c = FleetConfig {
        interval_ms: 200,
        ..cfg(2)
    };
    let mut t = Twin::new(srv.port, "pressure200", c);
    let now = BASE + 60_000;
    let mut seqs = [0u64; 3];
    let mut sync = |t: &mut Twin, node: usize, at: u64, r: &Report| {
        seqs[node] += 1;
        let f = Fence {
            node_id: node as u64,
            generation: 1,
            window: at / 200 * 200,
            seq: seqs[node],
        };
        match t.sync_fenced(f, at, r) {
            SyncAnswer::Picture(p) => p.pressure,
            SyncAnswer::Stale => panic!("stale"),
        }
    };
    sync(&mut t, 1, now, &waiters(&[(1, 1), (2, 2)]));
    let mut seen = Vec::new();
    for i in 1..=12u64 {
        let mut r = Report::default();
        // 10 challenges an interval for the first second.
        if i <= 5 {
            r.challenged = 10;
        }
        seen.push(sync(&mut t, 1 + (i % 2) as usize, now + i * 200, &r));
    }
    // No look within the first second (intervals 1-4: 40 challenges summed); the look at 1 s:
    // 0.25 + 0.75 x 41 = 31, 4 doublings, until the look at 2 s (interval 5's 10:
    // 0.25 x 31 + 0.75 x 11 = 16, 4 again). A look each interval would have seen 10 at a time.
    assert_eq!(seen, [0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4], "{seen:?}");
}

/// challenge=pow on a synced room: a node reports the proofs it took places with, and every
/// other node is told of them with its next sync (once each, how long they stay spent), a node
/// that joins later too, while the fleet keeps them (the nodes' staleness); the reporter is not
/// told its own. Script and model alike.
#[test]
fn spent_proofs_reach_every_other_node_once() {
    let Some(srv) = start() else { return };
    let mut t = Twin::new(srv.port, "spent", cfg(5));
    let now = BASE + 60_000;
    let spent = |list: &[(u64, u64)]| Report {
        spent: list
            .iter()
            .map(|&(key, ms)| SpentProof { key, ms })
            .collect(),
        ..Report::default()
    };
    let keys = |p: &RoomPicture| p.spent.iter().map(|s| (s.key, s.ms)).collect::<Vec<_>>();
    // Node 1 took places with two proofs; the second stays spent 10 ms only.
    let p = t.sync(1, now, &spent(&[(0xab, now + 30_000), (0xcd, now + 10)]));
    assert!(p.spent.is_empty(), "not told its own: {:?}", p.spent);
    let p = t.sync(2, now + 100, &spent(&[(0xef, now + 20_000)]));
    assert_eq!(keys(&p), [(0xab, 29_900)], "the lapsed one is not told");
    assert!(
        t.sync(2, now + 200, &Report::default()).spent.is_empty(),
        "once"
    );
    assert_eq!(
        keys(&t.sync(1, now + 1000, &Report::default())),
        [(0xef, 19_000)]
    );
    // Node 1 syncs, then node 2 reports in the same millisecond: node 1 hears of it next time
    // (numbered entries, not times: the nodes' ticks are aligned, such ties are common).
    t.sync(1, now + 1500, &Report::default());
    t.sync(2, now + 1500, &spent(&[(0x12, now + 9_000)]));
    assert_eq!(
        keys(&t.sync(1, now + 1700, &Report::default())),
        [(0x12, 7_300)]
    );
    // A node that joins later hears what the fleet keeps.
    let p = t.sync(3, now + 2000, &Report::default());
    assert_eq!(keys(&p), [(0xab, 28_000), (0xef, 18_000), (0x12, 7_000)]);
    // After a minute (longer than the nodes' staleness here) the fleet forgets them.
    let keep = cfg(5).stale_ms().max(60_000);
    let p = t.sync(4, now + 100 + keep + 1, &Report::default());
    assert!(p.spent.is_empty(), "{:?}", p.spent);
}
