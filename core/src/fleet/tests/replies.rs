//! A sync's reply from the script, checked: the picture's head, the spent proofs, the flood
//! answers and the ends of expiring sessions; anything else is refused.

use super::*;

#[test]
fn replies_are_checked() {
    let ints = |x: &[i64]| x.iter().map(|&i| Value::Int(i)).collect::<Vec<_>>();
    let arr = |x: &[i64]| Value::Array(ints(x));
    // The head, the spent proofs, the flood answers, the ends of expiring sessions, no whole
    // line (tests/whole.rs), the samples.
    let with_ends =
        |head: &[i64], spent: Vec<Value>, flood: Vec<Value>, ends: &[i64], samples: &[i64]| {
            let mut v = ints(head);
            v.push(Value::Array(spent));
            v.push(Value::Array(flood));
            v.push(arr(ends));
            v.push(Value::Bulk(Vec::new()));
            v.extend(ints(samples));
            Value::Array(v)
        };
    let with_spent = |head: &[i64], spent: Vec<Value>, flood: Vec<Value>, samples: &[i64]| {
        with_ends(head, spent, flood, &[0], samples)
    };
    let picture =
        |head: &[i64], flood: Vec<Value>, samples: &[i64]| with_spent(head, vec![], flood, samples);
    let head = [3, 5, -1, 2, 3, 7000, 4, 1, 2, 1, 3, -1, 2];
    let Ok(SyncAnswer::Picture(p)) = picture_reply(&picture(&head, vec![], &[0, 10, 4, 30])) else {
        panic!("not a picture");
    };
    assert_eq!((p.cursor, p.quota, p.nodes, p.free), (u64::MAX, 2, 3, 4));
    assert_eq!(p.rightful, u64::MAX);
    assert_eq!(p.reported, 2);
    assert_eq!((p.expiring, p.leaving, p.full, p.pressure), (1, 2, true, 3));
    assert_eq!(p.samples.len(), 2);
    assert!(p.flood.is_empty());
    // Flood answers: a client key in 16 hex digits and its wait.
    let hex = |s: &str| Value::Bulk(s.as_bytes().to_vec());
    let over = vec![hex("00000000000000ff"), Value::Int(1500)];
    let Ok(SyncAnswer::Picture(p)) = picture_reply(&picture(&head, over, &[])) else {
        panic!("not a picture");
    };
    assert_eq!(
        p.flood,
        [FloodOver {
            key: 0xff,
            retry_ms: 1500
        }]
    );
    for bad in [
        vec![hex("ff"), Value::Int(1)],
        vec![hex("00000000000000fg"), Value::Int(1)],
        vec![hex("00000000000000ff"), Value::Int(0)],
        vec![hex("00000000000000ff"), Value::Int(-1)],
        vec![hex("00000000000000ff")],
        vec![Value::Int(255), Value::Int(1)],
        (0..=FLOOD_ANSWER_CAP)
            .flat_map(|_| [hex("00000000000000ff"), Value::Int(1)])
            .collect(),
    ] {
        assert!(
            picture_reply(&picture(&head, bad.clone(), &[])).is_err(),
            "{bad:?}"
        );
    }
    // Spent proofs: a proof's key in 16 hex digits and how long it stays spent.
    let spent = vec![hex("00000000000000ab"), Value::Int(30_000)];
    let Ok(SyncAnswer::Picture(p)) = picture_reply(&with_spent(&head, spent, vec![], &[])) else {
        panic!("not a picture");
    };
    assert_eq!(
        p.spent,
        [SpentProof {
            key: 0xab,
            ms: 30_000
        }]
    );
    for bad in [
        vec![hex("ab"), Value::Int(1)],
        vec![hex("00000000000000ab"), Value::Int(0)],
        vec![hex("00000000000000ab")],
        (0..=SPENT_ANSWER_CAP)
            .flat_map(|_| [hex("00000000000000ab"), Value::Int(1)])
            .collect(),
    ] {
        let v = with_spent(&head, bad.clone(), vec![], &[]);
        assert!(picture_reply(&v).is_err(), "{bad:?}");
    }
    // The held places: how many, then their sessions' ends, ms from the picture, ascending,
    // every one while they are at most ENDS_CAP, else that many.
    let Ok(SyncAnswer::Picture(p)) = picture_reply(&with_ends(
        &head,
        vec![],
        vec![],
        &[4, 0, 40, 40, 900],
        &[0, 10],
    )) else {
        panic!("not a picture");
    };
    assert_eq!(
        (p.held, p.ends, p.samples.len()),
        (4, vec![0, 40, 40, 900], 1)
    );
    let cap = ENDS_CAP as i64;
    let capped: Vec<i64> = [1000].into_iter().chain(0..cap).collect();
    let v = with_ends(&head, vec![], vec![], &capped, &[]);
    assert!(matches!(picture_reply(&v), Ok(SyncAnswer::Picture(p)) if p.held == 1000));
    let too_many: Vec<i64> = [1000].into_iter().chain(0..=cap).collect();
    for bad in [&[2, 40, 0][..], &[1, -1], &[3, 1, 2], &[], &[-1], &too_many] {
        let v = with_ends(&head, vec![], vec![], bad, &[]);
        assert!(picture_reply(&v).is_err(), "{bad:?}");
    }
    // Without the ends' array (the reply of the script before it).
    let mut old = ints(&head);
    old.push(Value::Array(vec![]));
    old.push(Value::Array(vec![]));
    old.extend(ints(&[0, 10]));
    assert!(picture_reply(&Value::Array(old)).is_err());
    // Without the spent proofs' array (the reply of the script before it).
    let mut old = ints(&head);
    old.push(Value::Array(vec![]));
    assert!(picture_reply(&Value::Array(old)).is_err());
    assert_eq!(picture_reply(&arr(&[-1])), Ok(SyncAnswer::Stale));
    assert!(picture_reply(&arr(&[1, 2, 3])).is_err());
    // Without the flood answers' array (the reply of the script before it).
    assert!(picture_reply(&arr(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])).is_err());
    assert!(picture_reply(&arr(&[3, 5, -1, 2, 3, 7000, 4, 1, 2, 1, 0, 0, 10, 4, 30])).is_err());
    assert!(picture_reply(&picture(&head, vec![], &[0, 10, 4])).is_err());
    assert!(picture_reply(&picture(&[-1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0], vec![], &[])).is_err());
    // Without the pressure (the reply of the script before it), or a bad one.
    assert!(picture_reply(&picture(&head[..10], vec![], &[])).is_err());
    assert!(picture_reply(&picture(
        &[3, 5, -1, 2, 3, 7000, 4, 1, 2, 1, 256],
        vec![],
        &[]
    ))
    .is_err());
    assert!(picture_reply(&picture(
        &[3, 5, -1, 2, 3, 7000, 4, 1, 2, 1, -1],
        vec![],
        &[]
    ))
    .is_err());
    assert!(picture_reply(&Value::Error(b"NOSCRIPT x".to_vec())).is_err());
    assert_eq!(
        draw_reply(&arr(&[3, 9, 4])),
        Ok(Drawn { granted: 3, seq: 4 })
    );
    assert_eq!(
        draw_reply(&arr(&[0, 9, 0])),
        Ok(Drawn { granted: 0, seq: 0 })
    );
    assert!(draw_reply(&arr(&[-2, 9, 1])).is_err());
    assert!(draw_reply(&arr(&[2, 9])).is_err());
}
