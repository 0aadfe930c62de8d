//! A short line whole in the picture ([S22], issue 32): every waiter of a line of at most
//! [`EXACT_LINE`] is told its own position, the head 1, no two alike, with ties in arrival
//! ordered as Redis orders them.

use super::*;
use crate::redis::ReplyError;

/// A reply with the whole line `words` (and no samples).
fn reply(words: &str) -> Value {
    let mut v: Vec<Value> = [3, 5, 0, 0, 3, 7000, 0, 0, 0, 0, 0, 0, 1]
        .iter()
        .map(|&i| Value::Int(i))
        .collect();
    v.push(Value::Array(vec![]));
    v.push(Value::Array(vec![]));
    v.push(Value::Array(vec![Value::Int(0)]));
    v.push(Value::Bulk(words.as_bytes().to_vec()));
    Value::Array(v)
}

fn picture_of(words: &str) -> Result<RoomPicture, ReplyError> {
    match picture_reply(&reply(words))? {
        SyncAnswer::Picture(p) => Ok(p),
        SyncAnswer::Stale => panic!("stale"),
    }
}

#[test]
fn the_whole_line_is_read_in_the_fleets_order_or_refused() {
    let p = picture_of("100:3 500:10 500:100 500:9 900:7").unwrap();
    assert!(p.exact);
    let got: Vec<(u64, u64, u64)> = p
        .samples
        .iter()
        .map(|s| (s.rank, s.arrival, s.sid))
        .collect();
    assert_eq!(
        got,
        [
            (0, 100, 3),
            (1, 500, 10),
            (2, 500, 100),
            (3, 500, 9),
            (4, 900, 7)
        ]
    );
    // No line: a sampled picture (none here).
    let p = picture_of("").unwrap();
    assert!(!p.exact && p.samples.is_empty());
    for bad in [
        "500:9 500:10",             // "9" after "10" in one millisecond
        "900:1 100:2",              // arrivals going back
        "500:9 500:9",              // one session twice
        "100",                      // no session
        "100:",                     // an empty session
        "x:1",                      // not a number
        "100:1:2",                  // too many parts
        "100:18446744073709551616", // past u64
    ] {
        assert!(picture_of(bad).is_err(), "{bad}");
    }
    // At most EXACT_LINE waiters.
    let long: Vec<String> = (0..=EXACT_LINE)
        .map(|i| format!("{}:1", 1000 + i))
        .collect();
    assert!(picture_of(&long.join(" ")).is_err());
    assert!(picture_of(&long[..EXACT_LINE].join(" ")).is_ok());
    // A whole line and samples both: refused.
    let Value::Array(mut v) = reply("100:3") else {
        unreachable!()
    };
    v.extend([Value::Int(0), Value::Int(100)]);
    assert!(picture_reply(&Value::Array(v)).is_err());
}

/// Decimal digits compared as Redis compares members of one score.
#[test]
fn members_of_one_score_go_by_their_digits() {
    assert!(member_lt(10, 9));
    assert!(member_lt(100, 9));
    assert!(member_lt(10, 100));
    assert!(!member_lt(9, 9));
    assert!(member_lt(0, 1));
    assert!(member_lt(1_000_000, 7));
    assert!(member_lt(u64::MAX, 9));
    assert!(!member_lt(u64::MAX, 1));
}

/// 500 waiters, many of them in one millisecond, on a picture that holds the line whole:
/// each is told its own rank, 1..500, whichever of them asks; one the picture does not hold
/// yet is told where it stands among them.
#[test]
fn every_waiter_of_a_whole_line_is_told_its_own_place() {
    let mut mem = Mem(vec![0; 1 << 16]);
    let mut n = node(&mut mem);
    let c = cfg();
    // Arrivals 10 ms apart in groups of 7 sharing a millisecond; sessions in no order.
    let mut line: Vec<Sample> = (0..500u64)
        .map(|i| Sample {
            rank: 0,
            arrival: 10_000 + 10 * (i / 7),
            sid: (i * 7919) % 100_003 + 1,
        })
        .collect();
    line.sort_by(|a, b| {
        if a.before(b.arrival, b.sid) {
            core::cmp::Ordering::Less
        } else {
            core::cmp::Ordering::Greater
        }
    });
    for (rank, s) in line.iter_mut().enumerate() {
        s.rank = rank as u64;
    }
    let picture = RoomPicture {
        fleet_active: 10,
        queue_len: 500,
        nodes: 3,
        window_ms: 1000,
        samples: line.clone(),
        exact: true,
        ..RoomPicture::default()
    };
    show(&mut n, &picture, 1000);
    let mut told = Vec::new();
    for s in line.iter().rev() {
        match n.visit(w(s.sid, s.arrival), 1001, &c) {
            FleetVerdict::Wait {
                position,
                queue_len,
                ..
            } => {
                assert_eq!(queue_len, 500);
                told.push(position);
            }
            v => panic!("{v:?}"),
        }
    }
    told.reverse();
    assert_eq!(told, (1..=500).collect::<Vec<u64>>());
    // The same line sampled (a picture that did not hold it whole) tells many alike.
    let sampled: Vec<Sample> = line
        .iter()
        .filter(|s| s.rank < 32 || s.rank % 8 == 0 || s.rank == 499)
        .map(|s| Sample { sid: 0, ..*s })
        .collect();
    n.next_sync(1500, 1, &c);
    show(
        &mut n,
        &RoomPicture {
            samples: sampled,
            exact: false,
            ..picture.clone()
        },
        2000,
    );
    let mut alike: Vec<u64> = line
        .iter()
        .map(|s| n.position_of(s.arrival, s.sid))
        .collect();
    alike.dedup();
    assert!(alike.len() < 500, "{}", alike.len());
    // Whole again; a waiter the picture does not hold yet, in a millisecond of the line, is
    // told where it stands among those of that millisecond.
    n.next_sync(2500, 1, &c);
    show(&mut n, &picture, 3000);
    let stranger = 999_999_999;
    let ahead = line.iter().filter(|s| s.before(10_070, stranger)).count() as u64;
    assert!((49..=56).contains(&ahead), "{ahead}");
    assert_eq!(n.position_of(10_070, stranger), ahead + 1);
    // A session the line holds at another arrival (`one_place_per=`: a second ticket of one
    // user, with the moment it took the user's place) is told the session's place.
    assert_eq!(n.position_of(99_999, line[17].sid), 18);
    assert_eq!(n.position_of(1, line[17].sid), 18);
}
