//! Unit tests of the flood buckets' names and the central room's flood step, without I/O.

use crate::redis::resp::{self, Value};
use crate::redis::{hash_tag, Form, Keys, Script};
use crate::room::gcra::Rate;
use crate::room::rules::{Limits, Mode};
use crate::room::Visit;

fn words(cmd: &[u8]) -> Vec<String> {
    let (v, used) = resp::parse(cmd).unwrap().unwrap();
    assert_eq!(used, cmd.len());
    let Value::Array(items) = v else { panic!() };
    items
        .iter()
        .map(|i| match i {
            Value::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
            _ => panic!(),
        })
        .collect()
}

#[test]
fn the_bucket_is_one_key_per_client_under_the_rooms_tag() {
    let k = Keys::new("smart_limit", "shop");
    let a = k.flood(0x0123_4567_89ab_cdef);
    assert_eq!(a, "smart_limit:{shop}:flood:0123456789abcdef");
    assert_eq!(hash_tag(&a), Some("shop"));
    // Fixed width: small hashes do not shorten the name.
    assert_eq!(k.flood(1), "smart_limit:{shop}:flood:0000000000000001");
    assert_ne!(k.flood(1), k.flood(2));
}

#[test]
fn the_central_room_pays_in_its_own_call() {
    let limits = Limits {
        max_active: 5,
        new_per_minute: None,
        presence_ms: 20_000,
        keep_ms: 20_000,
        active_window_ms: 60_000,
        mode: Mode::Fifo,
        flood: Some(Rate::per_sec(1.0, 60)),
        session_rate: None,
    };
    let v = Visit {
        sid: 9,
        qnum: 0,
        draw: 0,
        flood_key: Some(0xabc),
        arrival: 0,
        page: false,
    };
    let s = Script::new("p", "r", limits, 0);
    let w = words(&s.visit(Form::Sha, &v, 0));
    // Seven keys, the seventh the client's bucket, and the rate at the end.
    assert_eq!(w[2], "7");
    assert_eq!(w[9], "p:{r}:flood:0000000000000abc");
    assert_eq!(w[10], "visit");
    assert_eq!(&w[w.len() - 2..], ["1000000", "60"]);
    // No flood key (a client holding a place), or no flood control: six keys, rate 0.
    for (v, l) in [
        (
            Visit {
                flood_key: None,
                ..v
            },
            limits,
        ),
        (
            v,
            Limits {
                flood: None,
                ..limits
            },
        ),
    ] {
        let w = words(&Script::new("p", "r", l, 0).visit(Form::Sha, &v, 0));
        assert_eq!(w[2], "6");
        assert_eq!(w[9], "visit");
        assert_eq!(&w[w.len() - 2..], ["0", "0"]);
        assert!(!w.iter().any(|x| x.contains(":flood:")));
    }
    // Touches never carry a bucket.
    let w = words(&s.touch(Form::Sha, 9, 0));
    assert_eq!(w[2], "6");
}
