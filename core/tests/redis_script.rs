//! The room script (core/src/redis/room.lua) against a real `redis-server`, side by side with the
//! shared-memory [`Room`]: the same visits at the same times must give the same verdicts.
//!
//! Needs `redis-server` on the PATH (Debian package `redis-server`); without it the tests
//! print a note and pass. Each test starts its own server on a free loopback port.

mod support;

use support::{packed, start, Client};

use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{self, Form, Script, SpentProof};
use smart_limit_core::room::gcra::Rate;
use smart_limit_core::room::rules::{Limits, Mode};
use smart_limit_core::room::{Refusal, Room, Verdict, Visit};

struct Mem(Vec<u64>);
impl Mem {
    fn new(bytes: usize) -> Mem {
        Mem(vec![0u64; bytes / 8])
    }
    fn bytes(&mut self) -> &mut [u8] {
        let len = self.0.len() * 8;
        // SAFETY: a Vec<u64> is 8-aligned and `len` bytes long.
        unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut u8, len) }
    }
}

fn limits(max_active: u64, npm: Option<u64>) -> Limits {
    Limits {
        max_active,
        new_per_minute: npm,
        presence_ms: 20_000,
        keep_ms: 20_000,
        active_window_ms: 60_000,
        mode: Mode::Fifo,
        flood: None,
        session_rate: None,
    }
}

/// One room in both stores.
struct Twin<'m> {
    room: Room<'m>,
    redis: Client,
    script: Script,
    limits: Limits,
}

impl Twin<'_> {
    fn visit(&mut self, sid: u64, qnum: u64, draw: u32, now: u64) -> Verdict {
        self.visit_from(sid, qnum, draw, None, now)
    }

    /// A visit that pays for a place from client key `flood_key`'s budget, when it has one.
    fn visit_from(
        &mut self,
        sid: u64,
        qnum: u64,
        draw: u32,
        flood_key: Option<u64>,
        now: u64,
    ) -> Verdict {
        let v = Visit {
            sid,
            qnum,
            draw,
            flood_key,
            arrival: 0,
            page: false,
        };
        let expected = self.room.visit(v, now, &self.limits);
        let reply = self.redis.cmd(&self.script.visit(Form::Text, &v, now));
        let got = redis::visit_outcome(&reply, &v)
            .unwrap_or_else(|e| panic!("visit({sid}, {qnum}) at {now}: {e}: {reply:?}"));
        if got.verdict != expected || std::env::var("TWIN_TRACE").is_ok() {
            let line = self.redis.cmd(&packed(&[
                "ZRANGE",
                &self.script.keys.line,
                "0",
                "-1",
                "WITHSCORES",
            ]));
            let state = self
                .redis
                .cmd(&packed(&["HGETALL", &self.script.keys.state]));
            eprintln!("visit({sid}, {qnum}) at {now}: {got:?} / {expected:?}\n line {line:?}\n state {state:?}");
            let a = &self.script.keys.active;
            let act = self
                .redis
                .cmd(&packed(&["ZRANGE", a, "0", "-1", "WITHSCORES"]));
            eprintln!(" active {act:?}");
        }
        assert_eq!(got.verdict, expected, "visit({sid}, {qnum}) at {now}");
        // (The queue length is compared inside Wait places; after an admission the snapshot
        // would also drop absent heads, which the script leaves to the next visit. The script
        // counts the active set only when a decision needs it: exact after an admission.)
        if let Verdict::Admit { .. } = got.verdict {
            let snap = self.room.snapshot(now, &self.limits);
            assert_eq!(got.active, snap.active, "active at {now}");
        }
        expected
    }

    fn pass(&mut self, sid: u64, now: u64) {
        assert_eq!(
            self.room.pass(sid, 0, now, &self.limits),
            smart_limit_core::room::PassVerdict::Counted
        );
        let reply = self.redis.cmd(&self.script.touch(Form::Text, sid, now));
        let active = redis::touch_outcome(&reply).unwrap().active.unwrap();
        assert_eq!(
            active,
            self.room.snapshot(now, &self.limits).active,
            "active after pass"
        );
    }

    fn revoke(&mut self, sid: u64, now: u64) {
        // Both remove the session; whether it still counted (the return value) depends on
        // when each store last tidied sessions past the active window, which the module never
        // looks at.
        self.room.revoke(sid);
        let reply = self.redis.cmd(&self.script.revoke(Form::Text, sid, now));
        let (_, m) = redis::revoke_outcome(&reply).unwrap();
        assert_eq!(m.version, now * 1000);
        assert_eq!(m.active, Some(self.room.snapshot(now, &self.limits).active));
    }

    fn set_mode(&mut self, mode: Option<Mode>) {
        self.room.set_mode_override(mode.map_or(0, Mode::code));
        let reply = self.redis.cmd(&self.script.set_mode(Form::Text, mode));
        assert!(matches!(reply, Value::Array(_)), "{reply:?}");
    }
}

fn twin<'m>(mem: &'m mut Mem, port: u16, room: &str, l: Limits, t0: u64) -> Twin<'m> {
    let script = Script::new("test", room, l, 0);
    let mut redis = Client::connect(port).unwrap();
    // Both rooms number their places from t0 (the script would start at its first visit).
    let t = t0.to_string();
    let cmd = ["HSET", &script.keys.state, "tail", &t];
    assert_eq!(redis.cmd(&packed(&cmd)), Value::Int(1));
    Twin {
        room: Room::format(mem.bytes(), t0).unwrap(),
        redis,
        script,
        limits: l,
    }
}

fn place(v: Verdict) -> u64 {
    match v {
        Verdict::Wait(p) => p.qnum,
        other => panic!("expected to wait, got {other:?}"),
    }
}

const T0: u64 = 1_700_000_000_000;

#[test]
fn script_loads_under_its_sha() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let reply = c.cmd(&Script::load_command());
    redis::check_load(&reply, &redis::sha_of(redis::ROOM_SCRIPT)).unwrap();
}

#[test]
fn edge_cases_match_the_shm_room() {
    let Some(srv) = start() else { return };
    let mut mem = Mem::new(256 * 1024);
    let mut t = twin(&mut mem, srv.port, "edges", limits(2, None), T0);
    // Newcomers walk in while there is room and nobody waits.
    t.visit(11, 0, 0, T0);
    t.visit(12, 0, 0, T0);
    // Then they queue in arrival order, and keep one place however often they retry.
    let c = place(t.visit(13, 0, 0, T0 + 1));
    let d = place(t.visit(14, 0, 0, T0 + 2));
    for i in 0..5 {
        assert_eq!(place(t.visit(14, d, 0, T0 + 100 + i)), d);
        assert_eq!(place(t.visit(13, c, 0, T0 + 100 + i)), c);
    }
    // A forged qnum (someone else's place) does not take that place.
    place(t.visit(99, c, 0, T0 + 200));
    // Admitted 11 stays active; 12 goes quiet; after the active window 13 (head) goes in.
    for now in [
        T0 + 10_000,
        T0 + 19_000,
        T0 + 25_000,
        T0 + 40_000,
        T0 + 59_999,
    ] {
        if now == T0 + 25_000 {
            t.pass(11, now);
        }
        t.visit(14, d, 0, now);
        t.visit(13, c, 0, now);
    }
    assert!(matches!(
        t.visit(13, c, 0, T0 + 60_000),
        Verdict::Admit { .. }
    ));
    // 99 never came back: absent, dropped when it reaches the head after presence.
    t.visit(14, d, 0, T0 + 60_001);
    t.visit(14, d, 0, T0 + 80_000);
    t.visit(14, d, 0, T0 + 95_000);
    // Revoke frees a place at once.
    t.revoke(11, T0 + 95_000);
    t.revoke(11, T0 + 95_000);
    t.visit(14, d, 0, T0 + 95_001);
    // Modes.
    let e = place(t.visit(15, 0, 0, T0 + 95_002));
    t.set_mode(Some(Mode::QueueAll));
    t.visit(16, 0, 0, T0 + 95_003);
    t.visit(15, e, 0, T0 + 95_004);
    t.set_mode(Some(Mode::Reject));
    t.visit(15, e, 0, T0 + 95_005);
    t.visit(17, 0, 0, T0 + 95_006);
    t.set_mode(Some(Mode::Passthrough));
    t.visit(15, e, 0, T0 + 95_007);
    t.visit(18, 0, 0, T0 + 95_008);
    t.set_mode(None);
    t.visit(19, 0, 0, T0 + 95_009);
}

#[test]
fn new_per_minute_counts_calendar_minutes() {
    let Some(srv) = start() else { return };
    let mut mem = Mem::new(256 * 1024);
    let mut t = twin(&mut mem, srv.port, "npm", limits(100, Some(2)), T0);
    assert_eq!(T0 % 60_000, 20_000, "T0 is 20 s into a minute");
    t.visit(1, 0, 0, T0);
    t.visit(2, 0, 0, T0);
    let c = place(t.visit(3, 0, 0, T0));
    t.visit(3, c, 0, T0 + 19_000);
    t.visit(3, c, 0, T0 + 38_000);
    t.visit(3, c, 0, T0 + 39_999);
    assert!(matches!(
        t.visit(3, c, 0, T0 + 40_000),
        Verdict::Admit { .. }
    ));
}

/// A long random run: clients arrive, poll, pass, go away, get revoked; the mode changes now
/// and then. Every verdict must be the same in both stores. With `flood`, clients come from
/// three addresses and pay for their places from their address's budget.
fn random_run(mode: Mode, seed: u64, steps: usize, port: u16, flood: Option<Rate>) {
    random_run_keeping(mode, seed, steps, port, flood, 0);
}

/// A random run whose room keeps absent places for `keep_ms` ([S27]; 0: keep=off). Clients
/// that stop polling ("gone") may come back later, to a kept place or as newcomers.
fn random_run_keeping(
    mode: Mode,
    seed: u64,
    steps: usize,
    port: u16,
    flood: Option<Rate>,
    keep_ms: u64,
) {
    let mut mem = Mem::new(1 << 20);
    let base = limits(3, Some(8));
    let l = Limits {
        mode,
        flood,
        keep_ms: keep_ms.max(base.presence_ms),
        ..base
    };
    let mut t = twin(&mut mem, port, &format!("rnd{seed}"), l, T0);
    #[derive(Clone, Copy)]
    enum S {
        New,
        Waiting(u64),
        Admitted(u64),
        Gone,
    }
    let mut clients: Vec<(u64, S)> = (1..=40u64).map(|i| (i * 1_000_003, S::New)).collect();
    let mut x = seed | 1;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut now = T0;
    let (mut admits, mut waits, mut throttled, mut resumed) = (0, 0, 0, 0u64);
    for _ in 0..steps {
        now += rnd(2500);
        let i = rnd(clients.len() as u64) as usize;
        let (sid, s) = clients[i];
        match rnd(100) {
            0 => {
                let m = [
                    None,
                    Some(Mode::QueueAll),
                    Some(Mode::Passthrough),
                    Some(mode),
                ];
                t.set_mode(m[rnd(4) as usize]);
                continue;
            }
            1..=2 => {
                t.revoke(sid, now);
                continue;
            }
            3..=6 => {
                clients[i].1 = S::Gone;
                continue;
            }
            _ => {}
        }
        let draw = rnd(1 << 32) as u32;
        clients[i].1 = match s {
            S::Admitted(at) if now - at < 45_000 => {
                t.pass(sid, now);
                s
            }
            S::Waiting(q) => match t.visit(sid, q, draw, now) {
                Verdict::Admit { .. } => {
                    admits += 1;
                    S::Admitted(now)
                }
                Verdict::Wait(p) => {
                    waits += 1;
                    resumed += u64::from(p.resumed);
                    S::Waiting(p.qnum)
                }
                Verdict::Refuse(_) | Verdict::Throttled { .. } => S::Waiting(q),
            },
            _ => match t.visit_from(sid, 0, draw, Some(sid % 3 + 1), now) {
                Verdict::Admit { .. } => S::Admitted(now),
                Verdict::Wait(p) => {
                    resumed += u64::from(p.resumed);
                    S::Waiting(p.qnum)
                }
                Verdict::Refuse(_) => S::New,
                Verdict::Throttled { .. } => {
                    throttled += 1;
                    S::New
                }
            },
        };
    }
    // The run went through both paths many times (not a room that only queues).
    assert!(admits > 20 && waits > 200, "admits {admits}, waits {waits}");
    // With flood control, the budgets were exhausted and refilled many times.
    assert_eq!(flood.is_some(), throttled > 20, "throttled {throttled}");
    // Kept places were resumed many times; with keep=off, never.
    assert_eq!(keep_ms > 0, resumed > 20, "resumed {resumed}");
}

#[test]
fn random_runs_match_the_shm_room() {
    let Some(srv) = start() else { return };
    for seed in 1..=4 {
        random_run(Mode::Fifo, seed, 3000, srv.port, None);
    }
    random_run(Mode::Random, 7, 3000, srv.port, None);
}

/// [S27] With places kept past their presence, the script and the room still agree on every
/// verdict: positions over kept places, turns from the head, a return within keep resuming
/// its place (and saying so), one after keep starting again.
#[test]
fn random_runs_keeping_places_match_the_shm_room() {
    let Some(srv) = start() else { return };
    for seed in 21..=24 {
        random_run_keeping(Mode::Fifo, seed, 3000, srv.port, None, 60_000);
    }
    let flood = Some(Rate::per_sec(1.0 / 60.0, 2));
    random_run_keeping(Mode::Fifo, 25, 3000, srv.port, flood, 45_000);
    random_run_keeping(Mode::Random, 27, 3000, srv.port, None, 60_000);
}

#[test]
fn random_runs_with_flood_control_match_the_shm_room() {
    let Some(srv) = start() else { return };
    for seed in 11..=13 {
        random_run(
            Mode::Fifo,
            seed,
            3000,
            srv.port,
            Some(Rate::per_sec(1.0 / 60.0, 2)),
        );
    }
    random_run(
        Mode::Random,
        17,
        3000,
        srv.port,
        Some(Rate::per_sec(1.0 / 30.0, 0)),
    );
}

#[test]
fn flood_control_matches_the_shm_room() {
    let Some(srv) = start() else { return };
    let mut mem = Mem::new(256 * 1024);
    let l = Limits {
        flood: Some(Rate::per_sec(1.0 / 60.0, 2)),
        ..limits(1, None)
    };
    let mut t = twin(&mut mem, srv.port, "flood", l, T0);
    let addr = Some(0x0a0b_0c0d);
    // Walking in pays too: 1 + burst 2 places for the address, then throttled.
    assert!(matches!(
        t.visit_from(1, 0, 0, addr, T0),
        Verdict::Admit { .. }
    ));
    let q2 = place(t.visit_from(2, 0, 0, addr, T0 + 1));
    place(t.visit_from(3, 0, 0, addr, T0 + 2));
    for (sid, at) in [(4, T0 + 3), (5, T0 + 10_000)] {
        match t.visit_from(sid, 0, 0, addr, at) {
            Verdict::Throttled { retry_ms, .. } => assert_eq!(retry_ms, 60_000 - (at - T0)),
            other => panic!("expected throttled, got {other:?}"),
        }
    }
    // A client that holds its place pays nothing, even with a key.
    assert_eq!(place(t.visit_from(2, 0, 0, addr, T0 + 11_000)), q2);
    // Another address is not slowed.
    place(t.visit_from(6, 0, 0, Some(7), T0 + 12_000));
    // A closed or open room takes no place, so nobody pays.
    t.set_mode(Some(Mode::Reject));
    t.visit_from(8, 0, 0, addr, T0 + 13_000);
    t.set_mode(Some(Mode::Passthrough));
    t.visit_from(9, 0, 0, addr, T0 + 14_000);
    t.set_mode(None);
    t.visit_from(10, 0, 0, addr, T0 + 15_000);
    // The rate: a place an interval after the first one.
    place(t.visit_from(11, 0, 0, addr, T0 + 60_000));
    t.visit_from(12, 0, 0, addr, T0 + 60_001);
}

#[test]
fn every_key_has_a_ttl_and_one_hash_tag() {
    let Some(srv) = start() else { return };
    let mut mem = Mem::new(256 * 1024);
    let kept = Limits {
        keep_ms: 300_000,
        ..limits(1, None)
    };
    let mut t = twin(&mut mem, srv.port, "ttl", kept, T0);
    t.visit(1, 0, 0, T0);
    t.visit(2, 0, 0, T0);
    // 2 steps away (past presence): the `away` set; 4 stays present (`here`, `seen`).
    t.visit(4, 0, 0, T0 + 10_000);
    t.visit(4, 0, 0, T0 + 25_000);
    t.set_mode(Some(Mode::Fifo));
    t.pass(1, T0 + 1);
    // A flood bucket is one more key (the twin's limits have no flood control: set it here).
    t.script.limits.flood = Some(Rate::per_sec(1.0, 5));
    t.limits.flood = t.script.limits.flood;
    t.visit_from(3, 0, 0, Some(42), T0 + 25_002);
    let keys = t.redis.cmd(&packed(&["KEYS", "test:*"]));
    let Value::Array(keys) = keys else { panic!() };
    assert_eq!(keys.len(), 7, "{keys:?}");
    for k in keys {
        let Value::Bulk(k) = k else { panic!() };
        let name = String::from_utf8(k).unwrap();
        assert_eq!(redis::hash_tag(&name), Some("ttl"));
        let ttl = t.redis.cmd(&packed(&["PTTL", &name]));
        assert!(
            matches!(ttl, Value::Int(ms) if ms > 0),
            "{name} has no TTL: {ttl:?}"
        );
    }
}

/// A scheduled event's pre-queue ([S18]): places taken during it are numbered by the lottery
/// keys the visits bring, so at the start the line is in key order, behind those who were in
/// line before the pre-queue opened and ahead of those who come after the start.
#[test]
fn the_prequeue_is_ordered_by_lottery_keys() {
    use smart_limit_core::redis::{EventArgs, LOTTERY_SPAN};
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    c.cmd(&Script::load_command());
    let base = limits(1, None);
    let script = Script::new("test", "event", base, 0);
    let queue_all = Limits {
        mode: Mode::QueueAll,
        ..base
    };
    let mut visit = |sid: u64, now: u64, l: &Limits, ev: Option<EventArgs>| {
        let v = Visit {
            sid,
            qnum: 0,
            draw: 0,
            flood_key: None,
            arrival: now,
            page: false,
        };
        let reply = c.cmd(&script.visit_in(Form::Text, &v, now, (l, ev), None));
        redis::visit_outcome(&reply, &v).unwrap().verdict
    };
    let pos = |v: Verdict| match v {
        Verdict::Wait(p) => p.position,
        other => panic!("expected to wait, got {other:?}"),
    };
    // One admitted, one waiting before the event.
    assert!(matches!(visit(1, T0, &base, None), Verdict::Admit { .. }));
    assert_eq!(pos(visit(2, T0 + 1, &base, None)), 1);
    // The pre-queue: nobody is told a position; keys in reverse order of arrival.
    let pre = |key| {
        Some(EventArgs {
            id: 77,
            started: false,
            key,
        })
    };
    let keys = [LOTTERY_SPAN - 1, 900, 5, 1_000_000];
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(pos(visit(10 + i as u64, T0 + 10, &queue_all, pre(k))), 0);
    }
    // The start: the line is 2 (before the pre-queue), then the pre-queue by key, then a
    // client who came after the start.
    let run = Some(EventArgs {
        id: 77,
        started: true,
        key: 0,
    });
    assert_eq!(pos(visit(99, T0 + 20, &base, run)), 6);
    let by_key = [(12u64, 2u64), (11, 3), (13, 4), (10, 5)];
    for (sid, want) in by_key {
        assert_eq!(pos(visit(sid, T0 + 21, &base, run)), want, "session {sid}");
    }
    assert_eq!(pos(visit(2, T0 + 22, &base, run)), 1);
}

/// The fleet's table of events made at run time ([S18]): a node writes the table it read; a
/// write from a stale read is refused with the table as it is, so two nodes changing it at
/// once never lose one change.
#[test]
fn the_events_table_refuses_a_write_from_a_stale_read() {
    use smart_limit_core::redis::{get_reply, put_reply, EventsKey, FleetTable, Put};
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    let key = EventsKey::new("test", "shop");
    let empty = FleetTable {
        version: 0,
        text: String::new(),
    };
    assert_eq!(get_reply(&c.cmd(&key.get())), Ok(empty));
    let one = "drop room=shop start=@2000000000";
    let written = put_reply(&c.cmd(&key.put(Form::Text, 0, one))).unwrap();
    let v1 = FleetTable {
        version: 1,
        text: one.to_string(),
    };
    assert_eq!(written, Put::Written(v1.clone()));
    // A second node that read version 0 too: refused, and told what is there now.
    let other = "sale room=shop start=@2100000000";
    let stale = put_reply(&c.cmd(&key.put(Form::Text, 0, other))).unwrap();
    assert_eq!(stale, Put::Stale(v1.clone()));
    assert_eq!(get_reply(&c.cmd(&key.get())), Ok(v1));
    // By its SHA once loaded.
    let load = c.cmd(&redis::load_command_of(redis::EVENTS_SCRIPT));
    redis::check_load(&load, &redis::sha_of(redis::EVENTS_SCRIPT)).unwrap();
    let both = format!("{one}\n{other}");
    let written = put_reply(&c.cmd(&key.put(Form::Sha, 1, &both))).unwrap();
    assert!(matches!(
        written,
        Put::Written(FleetTable { version: 2, .. })
    ));
    let keys = c.cmd(&packed(&["KEYS", "test:*"]));
    let Value::Array(keys) = keys else { panic!() };
    assert_eq!(keys, vec![Value::Bulk(b"test:{shop}:events".to_vec())]);
}

/// challenge=pow on a central room: the visit that takes a new place with a proof records it
/// spent in the same call, so the proof takes one place on the whole fleet. The ticket's own
/// place answers it again (no second spend); once that place is gone, the same proof gets
/// none (kind 6), on whichever node it comes back; another proof is not affected; a visit
/// given no place (the line full) leaves its proof unspent.
#[test]
fn a_proof_takes_one_place_on_the_fleet() {
    let Some(srv) = start() else { return };
    let mut redis = Client::connect(srv.port).unwrap();
    let script = Script::new("test", "spent", limits(1, None), 0);
    let mut visit = |sid: u64, key: Option<u64>, now: u64| -> Verdict {
        let v = Visit {
            sid,
            qnum: 0,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        };
        let cmd = match key {
            Some(key) => {
                let spent = SpentProof {
                    key,
                    ttl_ms: 600_000,
                };
                script.visit_in(Form::Text, &v, now, (&script.limits, None), Some(spent))
            }
            None => script.visit(Form::Text, &v, now),
        };
        let reply = redis.cmd(&cmd);
        redis::visit_outcome(&reply, &v)
            .unwrap_or_else(|e| panic!("visit({sid}): {e}: {reply:?}"))
            .verdict
    };
    // The holder walks in (nobody waits); then the proof's client takes its place.
    assert!(matches!(visit(1, None, T0), Verdict::Admit { .. }));
    let q = place(visit(2, Some(0xab), T0 + 1));
    // Its place again, the same proof with it: the same place.
    assert_eq!(place(visit(2, Some(0xab), T0 + 2)), q);
    // Absent for presence: the place is gone, and the proof may not take another.
    assert_eq!(
        visit(2, Some(0xab), T0 + 30_000),
        Verdict::Refuse(Refusal::ProofSpent { queue_len: 0 })
    );
    // Another proof takes its place.
    place(visit(3, Some(0xcd), T0 + 30_001));
    let key = script.keys.spent(0xcd);
    match redis.cmd(&packed(&["PTTL", &key])) {
        Value::Int(ms) => assert!(ms > 0 && ms <= 600_000, "PTTL {ms}"),
        other => panic!("PTTL {other:?}"),
    }
    // A walk-in with a spent proof gets nothing either.
    let script2 = Script::new("test", "spent2", limits(5, None), 0);
    let v = Visit {
        sid: 9,
        qnum: 0,
        draw: 0,
        flood_key: None,
        arrival: 0,
        page: false,
    };
    let spent = SpentProof {
        key: 0xef,
        ttl_ms: 1000,
    };
    let first =
        redis.cmd(&script2.visit_in(Form::Text, &v, T0, (&script2.limits, None), Some(spent)));
    assert!(matches!(
        redis::visit_outcome(&first, &v).unwrap().verdict,
        Verdict::Admit { .. }
    ));
    let v10 = Visit { sid: 10, ..v };
    let again = redis.cmd(&script2.visit_in(
        Form::Text,
        &v10,
        T0 + 1,
        (&script2.limits, None),
        Some(spent),
    ));
    assert_eq!(
        redis::visit_outcome(&again, &v10).unwrap().verdict,
        Verdict::Refuse(Refusal::ProofSpent { queue_len: 0 })
    );
}

/// `challenge_bits=auto` on a Redis room: the script counts the whole fleet's newcomers and
/// admissions and looks once a second, so every node reads the same doublings; a node that
/// does not ask gets none. Room of 1: one walks in, 8 more join over the first second
/// (ratio 0.25 x 1 + 0.75 x (9 + 1) / (1 + 1) = 4: 2 doublings); a quiet second after the
/// next joiner brings it down to 1 (2.5), another to 0 (1.375); 30 challenges told in the
/// next second (scripts that do not solve: they ask, and take no place) bring it to 4
/// (0.25 x 1.375 + 0.75 x 31 = 23.6).
#[test]
fn the_fleets_pressure_is_one_figure_for_every_node() {
    let Some(srv) = start() else { return };
    let mut redis = Client::connect(srv.port).unwrap();
    let a = Script::new("test", "pressure", limits(1, None), 0).with_pressure(true);
    let b = Script::new("test", "pressure", limits(1, None), 0).with_pressure(true);
    let plain = Script::new("test", "pressure", limits(1, None), 0);
    let mut told = |s: &Script, sid: u64, now: u64, challenges: u64| -> (Verdict, Option<u8>) {
        let v = Visit {
            sid,
            qnum: 0,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        };
        let le = (&s.limits, None);
        let telling = redis::Telling {
            challenges,
            steer: None,
        };
        let reply = redis.cmd(&s.visit_telling(Form::Text, &v, now, le, None, &telling));
        let o = redis::visit_outcome(&reply, &v)
            .unwrap_or_else(|e| panic!("visit({sid}): {e}: {reply:?}"));
        (o.verdict, o.pressure)
    };
    let mut visit = |s: &Script, sid: u64, now: u64| told(s, sid, now, 0);
    let (first, d) = visit(&a, 1, T0);
    assert!(matches!(first, Verdict::Admit { .. }));
    assert_eq!(d, Some(0), "the first look: nobody waits");
    for sid in 2..=9 {
        let node = if sid % 2 == 0 { &a } else { &b };
        let (v, d) = visit(node, sid, T0 + sid * 10);
        place(v);
        assert_eq!(d, Some(0), "no look within the second");
    }
    assert_eq!(visit(&b, 10, T0 + 1000).1, Some(2));
    assert_eq!(
        visit(&a, 2, T0 + 1001).1,
        Some(2),
        "the other node reads the same"
    );
    assert_eq!(visit(&plain, 3, T0 + 1002).1, None);
    assert_eq!(visit(&a, 4, T0 + 2000).1, Some(1));
    assert_eq!(visit(&b, 5, T0 + 3000).1, Some(0));
    assert_eq!(told(&a, 6, T0 + 3500, 30).1, Some(0));
    assert_eq!(told(&b, 7, T0 + 4000, 0).1, Some(4));
}
