//! `max_active=auto` on a fleet (core/src/redis/steer.lua, in the room script and in its own
//! call) against a real `redis-server`: the nodes' counts add up in one window, the window
//! goes to the one call that closed it, the value its rule gives holds for every node (and is
//! the central room's `max_active`), a late value is dropped, and a pin rules.
//!
//! Needs `redis-server` on the PATH; without it the tests print a note and pass.

mod support;

use support::{start, Client};

use smart_limit_core::capacity::control::{Load, Move, Window};
use smart_limit_core::capacity::fleet::{Answer, Fleet, PinOp, Tell};
use smart_limit_core::capacity::Auto;
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::steer::{argument, steer_reply, SteerCall};
use smart_limit_core::redis::{self, Form, Script, Telling};
use smart_limit_core::room::rules::{Limits, Mode};
use smart_limit_core::room::{Verdict, Visit};

const T0: u64 = 1_800_000_000_000;

const AUTO: Auto = Auto {
    min: 2,
    max: 50,
    target_ms: 400,
};

fn limits() -> Limits {
    Limits {
        // What the node's configuration would send: the fleet's value overrides it.
        max_active: 100,
        new_per_minute: None,
        presence_ms: 20_000,
        keep_ms: 20_000,
        active_window_ms: 60_000,
        mode: Mode::Fifo,
        flood: None,
        session_rate: None,
    }
}

fn fast(n: u64) -> Window {
    Window {
        n,
        ..Window::default()
    }
}

/// A node of a central room: its visits carry what it measured.
struct Node {
    script: Script,
    form: Form,
}

impl Node {
    fn new() -> Node {
        Node {
            script: Script::new("test", "steer", limits(), 0),
            form: Form::Text,
        }
    }

    fn visit(&self, redis: &mut Client, sid: u64, now: u64, tell: Tell) -> (Verdict, Fleet) {
        let v = Visit {
            sid,
            qnum: 0,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        };
        let telling = Telling {
            challenges: 0,
            steer: Some(argument(&AUTO, &tell)),
        };
        let le = (&self.script.limits, None);
        let reply = redis.cmd(
            &self
                .script
                .visit_telling(self.form, &v, now, le, None, &telling),
        );
        let o = redis::visit_outcome(&reply, &v)
            .unwrap_or_else(|e| panic!("visit({sid}): {e}: {reply:?}"));
        (o.verdict, o.steer.expect("a steering visit's reply steers"))
    }
}

fn told(w: Window) -> Tell {
    Tell {
        told: w,
        ..Tell::default()
    }
}

#[test]
fn one_window_one_step_one_value_for_the_fleet() {
    let Some(srv) = start() else { return };
    let mut redis = Client::connect(srv.port).unwrap();
    let (a, b) = (Node::new(), Node::new());

    // The value starts at the lower bound, and it is the room's max_active (not ARGV's 100).
    let (v1, f) = a.visit(&mut redis, 1, T0, told(fast(6)));
    assert!(matches!(v1, Verdict::Admit { .. }));
    assert_eq!((f.value, f.closed), (2, None), "a window begins");
    let (v2, _) = b.visit(&mut redis, 2, T0 + 300, told(fast(6)));
    assert!(matches!(v2, Verdict::Admit { .. }));
    let (v3, f) = b.visit(&mut redis, 3, T0 + 600, told(Window::default()));
    assert!(matches!(v3, Verdict::Wait(_)), "2 places: the third waits");
    assert_eq!(f.closed, None, "the window lasts a second");

    // The call after a second closes it, with both nodes' counts, for that caller alone.
    let (_, f) = a.visit(&mut redis, 3, T0 + 1000, told(fast(1)));
    let (window, counts) = f.closed.expect("closed");
    assert_eq!((window, counts), (T0 + 1000, fast(13)));
    let full = Load {
        active: 2,
        waiting: 1,
    };
    let (answer, stepped) = f.settle(full, &AUTO).expect("the limit binds: up");
    assert_eq!(
        (answer.to, stepped.why, stepped.turned),
        (3, Move::Up, true)
    );
    let (_, f) = b.visit(&mut redis, 3, T0 + 1100, told(fast(1)));
    assert_eq!((f.value, f.closed), (2, None), "not yet brought");

    // Brought with a's next call: every node's value, and the room's.
    let with = |answer| Tell {
        answer: Some(answer),
        ..told(fast(1))
    };
    let (_, f) = a.visit(&mut redis, 4, T0 + 1200, with(answer));
    assert_eq!(
        (f.value, f.last_move, f.moved_at),
        (3, Some(Move::Up), T0 + 1200)
    );
    let (v3, f) = b.visit(&mut redis, 3, T0 + 1300, told(Window::default()));
    assert_eq!(f.value, 3);
    assert!(
        matches!(v3, Verdict::Admit { .. }),
        "the third place is open"
    );

    // A value for a window that is no longer open is dropped.
    let (_, f) = b.visit(&mut redis, 5, T0 + 2300, told(fast(20)));
    let (late_window, _) = f.closed.expect("b closes the next window");
    let late = Answer {
        window: late_window,
        to: 40,
        why: Move::Up,
    };
    let (_, f) = a.visit(&mut redis, 5, T0 + 3400, told(fast(1)));
    assert!(f.closed.is_some(), "a closes another one first");
    let (_, f) = b.visit(&mut redis, 5, T0 + 3500, with(late));
    assert_eq!(f.value, 3, "b's late value is dropped");

    // A cut ends the slow start for the fleet.
    let (_, f) = a.visit(&mut redis, 5, T0 + 4500, told(fast(1)));
    let (window, _) = f.closed.expect("closed");
    let cut = Answer {
        window,
        to: 2,
        why: Move::DownSlow,
    };
    let (_, f) = a.visit(&mut redis, 5, T0 + 4600, with(cut));
    assert_eq!((f.value, f.cut_before), (2, true));
}

#[test]
fn a_pin_rules_every_node_until_it_is_given_back() {
    let Some(srv) = start() else { return };
    let mut redis = Client::connect(srv.port).unwrap();
    let node = Node::new();
    let state = "test:{steer}:state".to_string();
    let call = SteerCall::new(state.clone());
    let pin = |redis: &mut Client, op: PinOp, now: u64| -> Fleet {
        let t = Tell {
            pin: op,
            ..Tell::default()
        };
        let reply = redis.cmd(&call.call(Form::Text, &AUTO, &t, now, 60_000));
        steer_reply(&reply).unwrap_or_else(|e| panic!("pin: {e}: {reply:?}"))
    };
    let (_, f) = node.visit(&mut redis, 1, T0, told(fast(1)));
    assert_eq!(f.value, 2);
    let f = pin(&mut redis, PinOp::Pin(7), T0 + 10);
    assert_eq!((f.value, f.pinned), (7, true));
    // The pin is past the bounds' reach, and a step does not move it.
    let (_, f) = node.visit(&mut redis, 2, T0 + 1100, told(fast(30)));
    let (window, _) = f.closed.expect("closed");
    assert_eq!((f.value, f.pinned), (7, true));
    assert_eq!(f.settle(Load::default(), &AUTO), None, "pinned: no step");
    let up = Answer {
        window,
        to: 9,
        why: Move::Up,
    };
    let (_, f) = node.visit(
        &mut redis,
        2,
        T0 + 1200,
        Tell {
            answer: Some(up),
            ..Tell::default()
        },
    );
    assert_eq!(f.value, 7);
    let f = pin(&mut redis, PinOp::Release, T0 + 1300);
    assert_eq!((f.value, f.pinned), (2, false), "back to the controller's");
    // The pin call left the state's TTL to the room (it only ever lengthens it).
    let ttl = redis.cmd(&support::packed(&["PTTL", &state]));
    assert!(matches!(ttl, Value::Int(t) if t > 60_000), "{ttl:?}");
}

#[test]
fn a_synced_fleets_hash_expires_and_bad_arguments_are_refused() {
    let Some(srv) = start() else { return };
    let mut redis = Client::connect(srv.port).unwrap();
    let call = SteerCall::synced("test", "synced");
    let reply = redis.cmd(&call.call(Form::Text, &AUTO, &told(fast(3)), T0, 30_000));
    let f = steer_reply(&reply).unwrap();
    assert_eq!((f.value, f.closed), (2, None));
    let ttl = redis.cmd(&support::packed(&["PTTL", "test:{synced}:auto"]));
    assert!(
        matches!(ttl, Value::Int(t) if t > 0 && t <= 30_000),
        "{ttl:?}"
    );
    let reply = redis.cmd(&call.call(Form::Text, &AUTO, &told(fast(3)), T0 + 1000, 30_000));
    assert_eq!(
        steer_reply(&reply).unwrap().closed,
        Some((T0 + 1000, fast(6)))
    );
    for bad in [
        "",
        "2 50 1 0 0 0 0 0 0",
        "0 50 1 0 0 0 0 0 0 0",
        "9 5 1 0 0 0 0 0 0 0",
        "x",
    ] {
        let cmd = support::packed(&[
            "EVAL",
            smart_limit_core::redis::steer::STEER_SCRIPT,
            "1",
            "test:{synced}:auto",
            bad,
            "0",
            "1000",
        ]);
        let reply = redis.cmd(&cmd);
        assert!(
            matches!(&reply, Value::Error(e) if e.starts_with(b"smart_limit: bad steering")),
            "{bad:?}: {reply:?}"
        );
    }
}

/// Measurement, not a test (run by hand: `cargo test --release -p smart_limit_core --test
/// redis_steer_script -- --ignored --nocapture`): the room script's time per poll (Redis's own
/// `usec_per_call` of `EVALSHA`) in a room of 1,000 places, with and without the steering's
/// argument, alternating rounds of 2,000 polls.
#[test]
#[ignore]
fn steering_script_time() {
    let Some(srv) = start() else { return };
    let mut redis = Client::connect(srv.port).unwrap();
    let node = Node {
        form: Form::Sha,
        ..Node::new()
    };
    let _ = redis.cmd(&Script::load_command());
    for sid in 1..=1000 {
        node.visit(&mut redis, sid, T0 + sid, told(fast(1)));
    }
    let plain = |redis: &mut Client, sid: u64, now: u64| {
        let v = Visit {
            sid,
            qnum: 0,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        };
        // The fleet's value (the lower bound) as the configured max_active: the same verdicts.
        let limits = Limits {
            max_active: AUTO.min,
            ..node.script.limits
        };
        redis.cmd(
            &node
                .script
                .visit_in(Form::Sha, &v, now, (&limits, None), None),
        );
    };
    let usec = |redis: &mut Client| -> f64 {
        let Value::Bulk(b) = redis.cmd(&support::packed(&["INFO", "commandstats"])) else {
            panic!()
        };
        let text = String::from_utf8(b).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("cmdstat_evalsha:"))
            .unwrap_or_else(|| panic!("{text}"));
        let (_, rest) = line.split_once("usec_per_call=").unwrap();
        rest.split(',').next().unwrap().parse().unwrap()
    };
    let (mut with, mut without) = (vec![], vec![]);
    let mut now = T0 + 2000;
    for round in 0..10 {
        let _ = redis.cmd(&support::packed(&["CONFIG", "RESETSTAT"]));
        for i in 0..2000u64 {
            now += 1;
            let sid = 10 + (i * 7) % 990;
            if round % 2 == 0 {
                node.visit(&mut redis, sid, now, told(fast(1)));
            } else {
                plain(&mut redis, sid, now);
            }
        }
        let u = usec(&mut redis);
        if round % 2 == 0 {
            with.push(u)
        } else {
            without.push(u)
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    println!(
        "room script per poll, 1,000 in line: with steering {:.2} us, without {:.2} us (medians of 5 rounds of 2,000)",
        median(&mut with),
        median(&mut without)
    );
}
