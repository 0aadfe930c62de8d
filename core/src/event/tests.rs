use super::*;
use crate::config::ParseError;

fn t(s: &str) -> u64 {
    parse_instant(s).unwrap()
}

#[test]
fn instants_are_rfc3339_utc_or_epoch_seconds() {
    assert_eq!(t("1970-01-01T00:00:00Z"), 0);
    assert_eq!(t("2026-12-01T10:00:00Z"), 1_796_119_200);
    assert_eq!(t("@1796119200"), 1_796_119_200);
    assert_eq!(t("2024-02-29t23:59:59z"), 1_709_251_199);
    assert_eq!(
        t("2000-03-01T00:00:00Z") - t("2000-02-28T00:00:00Z"),
        2 * 86_400
    );
    assert_eq!(
        t("2100-03-01T00:00:00Z") - t("2100-02-28T00:00:00Z"),
        86_400
    );
    for secs in [0, 951_782_400, 1_709_251_199, 1_796_119_200, 4_102_444_800] {
        assert_eq!(t(&format_instant(secs)), secs);
    }
    assert_eq!(format_instant(1_796_119_200), "2026-12-01T10:00:00Z");
}

#[test]
fn other_instants_are_refused() {
    for bad in [
        "2026-12-01 10:00:00Z",
        "2026-12-01T10:00:00",
        "2026-12-01T10:00:00+01:00",
        "2026-12-01T10:00:00.5Z",
        "2026-13-01T10:00:00Z",
        "2026-02-29T10:00:00Z",
        "2026-12-01T24:00:00Z",
        "1969-12-31T23:59:59Z",
        "@",
        "@-5",
        "@12x",
        "tomorrow",
    ] {
        assert!(
            matches!(parse_instant(bad), Err(ParseError::Syntax(_))),
            "{bad}"
        );
    }
    assert_eq!(parse_instant(""), Err(ParseError::Empty));
    assert_eq!(
        parse_instant("@99999999999999999999999"),
        Err(ParseError::Overflow)
    );
}

const DROP: [&str; 10] = [
    "drop",
    "room=shop",
    "prequeue=2026-12-01T09:30:00Z",
    "start=2026-12-01T10:00:00Z",
    "end=2026-12-01T12:00:00Z",
    "shuffle=on",
    "max_active=500",
    "new_per_minute=200",
    "session=5m",
    "page=/etc/nginx/drop.html",
];

#[test]
fn the_issue_example_parses() {
    let e = parse_event(&DROP).unwrap();
    assert_eq!(e.name, "drop");
    assert_eq!(e.room, "shop");
    assert_eq!(e.prequeue, t("2026-12-01T09:30:00Z"));
    assert_eq!(e.start, t("2026-12-01T10:00:00Z"));
    assert_eq!(e.end, Some(t("2026-12-01T12:00:00Z")));
    assert!(e.shuffle);
    assert_eq!(e.max_active, Some(500));
    assert_eq!(e.new_per_minute, Some(200));
    assert_eq!(e.grant_ms, Some(300_000));
    assert_eq!(e.page.as_deref(), Some("/etc/nginx/drop.html"));
    // Only room and start are needed: no pre-queue, no end, a lottery by default.
    let e = parse_event(&["sale", "room=shop", "start=@1796119200"]).unwrap();
    assert_eq!(
        (e.prequeue, e.start, e.end, e.shuffle),
        (1_796_119_200, 1_796_119_200, None, true)
    );
}

#[test]
fn phases_follow_the_clock() {
    let e = parse_event(&DROP).unwrap();
    assert_eq!(e.phase(t("2026-12-01T09:29:59Z")), Phase::Before);
    assert_eq!(e.phase(t("2026-12-01T09:30:00Z")), Phase::Prequeue);
    assert_eq!(e.phase(t("2026-12-01T09:59:59Z")), Phase::Prequeue);
    assert_eq!(e.phase(t("2026-12-01T10:00:00Z")), Phase::Running);
    assert_eq!(e.phase(t("2026-12-01T11:59:59Z")), Phase::Running);
    assert_eq!(e.phase(t("2026-12-01T12:00:00Z")), Phase::Over);
}

#[test]
fn bad_events_are_refused_with_their_name() {
    let msg = |args: &[&str]| parse_event(args).unwrap_err().to_string();
    assert_eq!(
        msg(&[
            "drop",
            "room=shop",
            "start=2026-12-01T10:00:00Z",
            "end=2026-12-01T09:00:00Z"
        ]),
        "event \"drop\": end (2026-12-01T09:00:00Z) is not after start (2026-12-01T10:00:00Z)"
    );
    assert_eq!(
        msg(&["drop", "room=shop", "start=@100", "prequeue=@200"]),
        "event \"drop\": prequeue (1970-01-01T00:03:20Z) is after start (1970-01-01T00:01:40Z)"
    );
    assert_eq!(
        msg(&["drop", "start=@100"]),
        "event \"drop\": room= is required"
    );
    assert_eq!(
        msg(&["drop", "room=shop"]),
        "event \"drop\": start= is required"
    );
    assert_eq!(
        msg(&["drop", "room=shop", "start=@1", "colour=red"]),
        "event \"drop\": unknown parameter \"colour=red\""
    );
    assert_eq!(
        msg(&["drop", "room=shop", "start=@1", "grant=1m", "session=5m"]),
        "event \"drop\": \"session\" is given twice"
    );
    assert!(msg(&["drop", "room=shop", "start=10:00"])
        .starts_with("event \"drop\": invalid start \"10:00\": expected a UTC time"));
    assert!(msg(&["drop", "room=shop", "start=@1", "max_active=0"])
        .contains("invalid max_active \"0\""));
    assert!(msg(&["drop", "room=shop", "start=@1", "shuffle=yes"]).contains("expected on or off"));
    assert_eq!(msg(&[]), "missing event name");
    assert!(msg(&["drop!", "room=shop", "start=@1"]).starts_with("invalid event name \"drop!\""));
}

#[test]
fn events_of_one_room_may_not_overlap() {
    let ev = |name: &str, room: &str, pq: u64, start: u64, end: Option<u64>| {
        let (pq, start) = (format!("prequeue=@{pq}"), format!("start=@{start}"));
        let end = end.map(|e| format!("end=@{e}"));
        let room = format!("room={room}");
        let mut args = vec![name, room.as_str(), pq.as_str(), start.as_str()];
        if let Some(e) = end.as_deref() {
            args.push(e);
        }
        parse_event(&args).unwrap()
    };
    let rooms = |r: &str| r == "shop" || r == "exam";
    let a = ev("a", "shop", 100, 200, Some(300));
    // Back to back is fine; another room is fine.
    let b = ev("b", "shop", 300, 400, Some(500));
    let c = ev("c", "exam", 100, 200, None);
    assert_eq!(
        check_events(&[a.clone(), b.clone(), c.clone()], rooms),
        Ok(())
    );
    // A pre-queue that opens before the other event ends overlaps it.
    let d = ev("d", "shop", 250, 400, Some(500));
    assert_eq!(
        check_events(&[a.clone(), d], rooms)
            .unwrap_err()
            .to_string(),
        "events \"a\" and \"d\" of room \"shop\" overlap"
    );
    // An event without an end overlaps everything after it.
    let e = ev("e", "exam", 10_000, 20_000, None);
    assert!(matches!(
        check_events(&[c, e], rooms),
        Err(EventError::Overlap(..))
    ));
    assert_eq!(
        check_events(&[a.clone(), a.clone()], rooms),
        Err(EventError::Twice("a".into()))
    );
    let lost = ev("f", "nowhere", 1, 2, None);
    assert_eq!(
        check_events(&[lost], rooms).unwrap_err().to_string(),
        "event \"f\": unknown room \"nowhere\" (no smart_limit_zone of that name)"
    );
}

fn seed(n: u64) -> [u8; 32] {
    let mut s = [0u8; 32];
    s[..8].copy_from_slice(&n.to_le_bytes());
    s[8] = 0x5e;
    s
}

/// Spearman's rank correlation of two rankings of 0..n.
fn spearman(a: &[usize], b: &[usize]) -> f64 {
    let n = a.len() as f64;
    let d2: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

#[test]
fn the_lottery_is_a_permutation_every_node_computes_alike() {
    // 500 pre-queued session ids in arrival order (random-looking, as session ids are).
    let arrivals: Vec<u64> = (0..500u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xabc)
        .collect();
    let one = Lottery::new(&seed(1)).order(&arrivals);
    // Every position 1..500 used once.
    let mut sorted = one.clone();
    sorted.sort_unstable();
    let mut expected = arrivals.clone();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    // Another node, seeing the members in another order (and one twice), agrees.
    let mut seen: Vec<u64> = arrivals.iter().rev().copied().collect();
    seen.push(arrivals[7]);
    assert_eq!(Lottery::new(&seed(1)).order(&seen), one);
    // Another event's seed, another order.
    assert_ne!(Lottery::new(&seed(2)).order(&arrivals), one);
}

#[test]
fn arrival_order_does_not_predict_the_draw() {
    let arrivals: Vec<u64> = (0..500u64).map(|i| 1_000_000 + i).collect();
    let mut worst = 0f64;
    for s in 0..200 {
        let order = Lottery::new(&seed(s)).order(&arrivals);
        let position: Vec<usize> = arrivals
            .iter()
            .map(|sid| order.iter().position(|o| o == sid).unwrap())
            .collect();
        let arrival_rank: Vec<usize> = (0..arrivals.len()).collect();
        let rho = spearman(&arrival_rank, &position);
        worst = worst.max(rho.abs());
    }
    // With n = 500 the sampling deviation of rho is 1/sqrt(499) = 0.045. The bound is on the
    // worst of 200 draws, so it must hold 200 times: 0.2 is 4.5 deviations (a draw exceeds it
    // with chance 8e-6, one of 200 with chance 0.16 %). (The AES-based draw before HMAC
    // passed a bound of 0.15 with these seeds; HMAC's worst is 0.167, 3.7 deviations, which
    // the worst of 200 fair draws exceeds with chance 4 %: 0.15 held for the old function's
    // seeds by luck, not by design.)
    assert!(worst < 0.2, "worst |rho| {worst}");
}

#[test]
fn every_member_is_equally_likely_at_every_rank() {
    // 5 members, 20,000 draws: each (member, rank) cell expects 4,000.
    let members = [11u64, 12, 13, 14, 15];
    let mut cells = [[0u32; 5]; 5];
    for s in 0..20_000 {
        for (rank, sid) in Lottery::new(&seed(s)).order(&members).iter().enumerate() {
            cells[(sid - 11) as usize][rank] += 1;
        }
    }
    let chi2: f64 = cells
        .iter()
        .flatten()
        .map(|&c| (f64::from(c) - 4000.0).powi(2) / 4000.0)
        .sum();
    // 16 degrees of freedom: chi-square above 39.3 has probability 0.001.
    assert!(chi2 < 39.3, "chi2 {chi2}, cells {cells:?}");
}

mod runtime_table {
    use super::super::runtime::*;
    use super::super::*;

    fn ev(args: &str) -> EventSpec {
        let words: Vec<&str> = args.split_whitespace().collect();
        parse_event(&words).unwrap()
    }

    #[test]
    fn a_line_makes_the_same_event_again() {
        for args in [
            "drop room=shop prequeue=2026-12-01T09:30:00Z start=2026-12-01T10:00:00Z \
             end=2026-12-01T12:00:00Z shuffle=on max_active=500 new_per_minute=200 \
             session=5m page=/etc/nginx/drop.html",
            "sale room=shop start=@2000000000 shuffle=off",
        ] {
            let spec = ev(args);
            let entry = Entry::Created(spec.clone());
            assert_eq!(Entry::parse(&entry.line()), Ok(entry));
        }
        let cancelled = Entry::Cancelled("sale".into());
        assert_eq!(cancelled.line(), "-sale");
        assert_eq!(Entry::parse("-sale"), Ok(cancelled));
        assert!(Entry::parse("-bad name").is_err());
        assert!(Entry::parse("drop room=shop").is_err());
    }

    #[test]
    fn a_table_is_read_line_by_line_and_bad_lines_are_told() {
        let text = "drop room=shop start=@2000000000\n\n-sale\nnonsense here";
        let (entries, bad) = read_table(text);
        assert_eq!(entries.len(), 2);
        assert_eq!(bad.len(), 1);
        assert_eq!(read_table(&write_table(&entries)).0, entries);
    }

    #[test]
    fn creating_meets_the_checks_of_nginx_t() {
        let configured = vec![ev("sale room=shop start=@2000000000 end=@2000003600")];
        let now = 1_900_000_000;
        let overlapping = ev("drop room=shop prequeue=@2000001800 start=@2000007200");
        assert_eq!(
            apply(&configured, &[], Change::Create(overlapping), now),
            Err(EventError::Overlap(
                "sale".into(),
                "drop".into(),
                "shop".into()
            ))
        );
        let same_name = ev("sale room=shop start=@2100000000");
        assert_eq!(
            apply(&configured, &[], Change::Create(same_name), now),
            Err(EventError::Twice("sale".into()))
        );
        let fine = ev("drop room=shop prequeue=@2000003600 start=@2000007200");
        let table = apply(&configured, &[], Change::Create(fine.clone()), now).unwrap();
        assert_eq!(table, vec![Entry::Created(fine.clone())]);
        let all = merge(&configured, &table);
        assert_eq!(
            all,
            vec![(&configured[0], Source::Config), (&fine, Source::Control)]
        );
    }

    #[test]
    fn cancelling_removes_a_created_event_or_hides_a_configured_one() {
        let configured = vec![ev("sale room=shop start=@2000000000 end=@2000003600")];
        let now = 1_900_000_000;
        let drop = ev("drop room=shop start=@2100000000");
        let table = apply(&configured, &[], Change::Create(drop), now).unwrap();
        let table = apply(&configured, &table, Change::Cancel("drop".into()), now).unwrap();
        assert!(table.is_empty());
        let table = apply(&configured, &table, Change::Cancel("sale".into()), now).unwrap();
        assert_eq!(table, vec![Entry::Cancelled("sale".into())]);
        assert!(merge(&configured, &table).is_empty());
        assert_eq!(
            apply(&configured, &table, Change::Cancel("sale".into()), now),
            Err(EventError::NotFound("sale".into()))
        );
        // The cancelled event's time is free again.
        let again = ev("sale2 room=shop start=@2000000000");
        assert!(apply(&configured, &table, Change::Create(again), now).is_ok());
    }

    #[test]
    fn the_table_is_bounded_and_events_over_leave_it() {
        let mut table = Vec::new();
        for i in 0..MAX_ENTRIES as u64 {
            let t0 = 2_000_000_000 + i * 7200;
            let e = ev(&format!("e{i} room=shop start=@{t0} end=@{}", t0 + 3600));
            table = apply(&[], &table, Change::Create(e), 1_900_000_000).unwrap();
        }
        let one_more = ev("late room=shop start=@2100000000");
        assert_eq!(
            apply(&[], &table, Change::Create(one_more.clone()), 1_900_000_000),
            Err(EventError::TableFull(MAX_ENTRIES))
        );
        // Once the first is over, it leaves the table and makes room.
        let later = 2_000_003_600;
        let table = apply(&[], &table, Change::Create(one_more), later).unwrap();
        assert_eq!(table.len(), MAX_ENTRIES);
        assert!(table.iter().all(|e| e.name() != "e0"));
    }
}
