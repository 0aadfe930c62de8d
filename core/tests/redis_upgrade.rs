//! The central room's script across an upgrade ([S27]): a line a build from before `keep=`
//! left in Redis, met by this build's script.

mod support;

use support::{packed, start, Client};

use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{self, Form, Script};
use smart_limit_core::room::rules::{Limits, Mode};
use smart_limit_core::room::{Verdict, Visit};

const T0: u64 = 1_700_000_000_000;

/// [S27] A line left by a build from before `keep=` (no `here` set, every place in `line` and
/// `seen`): each place joins `here` at its first visit and takes its turn, and a member of
/// `here` that is no longer in the line (left by a node of the earlier build) does not hold
/// the head.
#[test]
fn a_line_from_an_earlier_build_takes_its_turns() {
    let Some(srv) = start() else { return };
    let mut c = Client::connect(srv.port).unwrap();
    c.cmd(&Script::load_command());
    let l = Limits {
        max_active: 1,
        new_per_minute: None,
        presence_ms: 20_000,
        keep_ms: 300_000,
        active_window_ms: 60_000,
        mode: Mode::Fifo,
        flood: None,
        session_rate: None,
    };
    let script = Script::new("test", "older", l, 0);
    let k = &script.keys;
    let q = |n: u64| (T0 + n).to_string();
    c.cmd(&packed(&["HSET", &k.state, "tail", &q(10)]));
    for (sid, n) in [("7", 1), ("8", 2)] {
        c.cmd(&packed(&["ZADD", &k.line, &q(n), sid]));
        c.cmd(&packed(&["ZADD", &k.seen, &q(n), sid]));
    }
    // A stale member ahead of both, and the room full (one active session).
    c.cmd(&packed(&["ZADD", &k.here, &q(0), "99"]));
    c.cmd(&packed(&["ZADD", &k.active, &q(0), "1"]));
    let mut raw = Client::connect(srv.port).unwrap();
    let mut visit = |sid: u64, now: u64| {
        let v = Visit {
            sid,
            qnum: 0,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        };
        let reply = c.cmd(&script.visit(Form::Text, &v, now));
        redis::visit_outcome(&reply, &v).unwrap().verdict
    };
    // 8 polls first: second in line (7 is present, not yet in `here`); the room is full.
    match visit(8, T0 + 1_000) {
        Verdict::Wait(p) => assert_eq!((p.position, p.queue_len), (2, 2)),
        other => panic!("{other:?}"),
    }
    match visit(7, T0 + 1_001) {
        Verdict::Wait(p) => assert_eq!((p.position, p.resumed), (1, false)),
        other => panic!("{other:?}"),
    }
    // The session ends (revoked): 8 polls first, but the place is 7's, then the next is 8's.
    raw.cmd(&packed(&["ZREM", &k.active, "1"]));
    assert!(matches!(visit(8, T0 + 2_000), Verdict::Wait(_)));
    assert!(matches!(visit(7, T0 + 2_001), Verdict::Admit { .. }));
    raw.cmd(&packed(&["ZREM", &k.active, "7"]));
    assert!(matches!(visit(8, T0 + 3_000), Verdict::Admit { .. }));
    // The stale member was dropped on the way.
    let here = raw.cmd(&packed(&["ZCARD", &k.here]));
    assert_eq!(here, Value::Int(0));
}
