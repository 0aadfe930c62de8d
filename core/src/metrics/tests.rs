//! Unit tests of the Prometheus text and the control JSON.

use super::control::QueryError;
use super::*;
use crate::rate::RateSnapshot;
use crate::room::Counters;

fn snap(n: u64) -> Snapshot {
    Snapshot {
        queue_len: 3 * n,
        active: 5,
        oldest_wait_ms: 12_345,
        counters: Counters {
            admitted: 10 * n,
            queued: 20,
            passed: 30,
            bypassed: 4,
            waited: 50,
            rejected: 6,
            expired: 7,
            revoked: 8,
            store_errors: 9,
            arrivals: 11,
            throttled: 12,
            session_limited: 13,
            fast_polls: 14,
            challenged: 15,
            proofs_refused: 16,
        },
        capacity: 1000,
        mode_override: 0,
    }
}

fn figures(room: &str, snapshot: Option<Snapshot>) -> RoomFigures<'_> {
    RoomFigures {
        origin: None,
        room,
        store: "shm",
        configured_mode: Mode::Fifo,
        override_mode: None,
        max_active: 5,
        new_per_minute: None,
        admission: Admission::Grant { ms: 600_000 },
        times: RoomTimes {
            presence_ms: 20_000,
            keep_ms: 300_000,
            active_window_ms: 60_000,
            timeout_ms: 100,
            sync_ms: None,
        },
        snapshot,
        fleet: None,
        events: Vec::new(),
    }
}

/// A strict reader of the text format: every line is a comment (HELP/TYPE for the family
/// that follows) or a sample of the last TYPE'd family; families are not repeated;
/// label sets are not repeated; counters end in `_total`; values are numbers.
fn check_exposition(text: &str) -> Vec<(String, String, f64)> {
    let mut samples = vec![];
    let mut families: Vec<String> = vec![];
    let mut current: Option<(String, String)> = None;
    let mut seen = std::collections::HashSet::new();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            assert!(!help.is_empty());
            assert!(
                !families.contains(&name.to_string()),
                "family {name} repeated"
            );
            families.push(name.to_string());
            current = None;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(Some(&name.to_string()), families.last());
            assert!(["counter", "gauge"].contains(&kind));
            if kind == "counter" {
                assert!(name.ends_with("_total"), "{name}");
            }
            current = Some((name.to_string(), kind.to_string()));
        } else {
            let (name, _) = current.clone().expect("sample before TYPE");
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (sname, labels) = series.split_once('{').unwrap();
            assert_eq!(sname, name);
            assert!(labels.ends_with('}'));
            assert!(seen.insert(series.to_string()), "{series} repeated");
            let v: f64 = value.parse().unwrap();
            samples.push((sname.to_string(), labels.to_string(), v));
        }
    }
    samples
}

#[test]
fn rate_zones_render_strictly() {
    let snap = RateSnapshot {
        offered: 1000,
        passed: 250,
        p_ppm: 250_000,
        fleet_offered_milli: 4_000_500,
        fleet_passed_milli: 1_000_000,
        nodes: 3,
        fleet_offered_total: 9000,
        fleet_passed_total: 2000,
        local_offered_milli: 1_500_000,
        sync_age_ms: Some(350),
        syncs: 7,
        sync_errors: 1,
        ignored: 0,
    };
    let zones = [
        RateFigures {
            zone: "api",
            fleet: true,
            rate_milli: 1_000_000,
            snapshot: Some(snap),
        },
        RateFigures {
            zone: "solo",
            fleet: false,
            rate_milli: 50_000,
            snapshot: Some(RateSnapshot {
                sync_age_ms: None,
                ..snap
            }),
        },
        RateFigures {
            zone: "gone",
            fleet: false,
            rate_milli: 1,
            snapshot: None,
        },
    ];
    let text = render_rate_prometheus(&zones);
    let samples = check_exposition(&text);
    let get = |name: &str, zone: &str| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && l.contains(&format!("zone=\"{zone}\"")))
            .map(|s| s.2)
    };
    assert_eq!(get("smart_limit_rate_probability", "api"), Some(0.25));
    assert_eq!(get("smart_limit_rate_fleet_qps", "api"), Some(4000.5));
    assert_eq!(get("smart_limit_rate_sync_age_seconds", "api"), Some(0.35));
    assert_eq!(get("smart_limit_rate_sync_age_seconds", "solo"), None);
    assert_eq!(get("smart_limit_rate_fleet_offered_total", "solo"), None);
    assert_eq!(get("smart_limit_rate_limit_qps", "solo"), Some(50.0));
    assert_eq!(get("smart_limit_rate_up", "gone"), Some(0.0));
    assert_eq!(get("smart_limit_rate_offered_total", "gone"), None);
    assert!(render_rate_prometheus(&[]).is_empty());
}

#[test]
fn exposition_is_well_formed_and_complete() {
    let mut b = figures("b-2", Some(snap(2)));
    b.new_per_minute = Some(60);
    b.override_mode = Some(Mode::Reject);
    let rooms = [figures("a_1", Some(snap(1))), b, figures("down", None)];
    let text = render_prometheus(&rooms);
    let samples = check_exposition(&text);
    let get = |n: &str, l: &str| {
        samples
            .iter()
            .find(|(sn, sl, _)| sn == n && sl == l)
            .map(|s| s.2)
    };
    assert_eq!(
        get("smart_limit_admitted_total", "room=\"a_1\"}"),
        Some(10.0)
    );
    assert_eq!(
        get("smart_limit_admitted_total", "room=\"b-2\"}"),
        Some(20.0)
    );
    assert_eq!(get("smart_limit_admitted_total", "room=\"down\"}"), None);
    assert_eq!(get("smart_limit_up", "room=\"down\"}"), Some(0.0));
    assert_eq!(get("smart_limit_up", "room=\"a_1\"}"), Some(1.0));
    assert_eq!(get("smart_limit_queue_length", "room=\"b-2\"}"), Some(6.0));
    assert_eq!(
        get("smart_limit_oldest_wait_seconds", "room=\"b-2\"}"),
        Some(12.0)
    );
    assert_eq!(get("smart_limit_new_per_minute", "room=\"a_1\"}"), None);
    assert_eq!(
        get("smart_limit_new_per_minute", "room=\"b-2\"}"),
        Some(60.0)
    );
    assert_eq!(
        get("smart_limit_mode", "room=\"b-2\",mode=\"reject\"}"),
        Some(1.0)
    );
    assert_eq!(
        get("smart_limit_mode", "room=\"b-2\",mode=\"fifo\"}"),
        Some(0.0)
    );
    assert_eq!(
        get("smart_limit_mode", "room=\"a_1\",mode=\"fifo\"}"),
        Some(1.0)
    );
    assert_eq!(
        get("smart_limit_mode_overridden", "room=\"b-2\"}"),
        Some(1.0)
    );
    for c in [
        "admitted",
        "queued",
        "passed",
        "bypassed",
        "rejected",
        "revoked",
        "store_errors",
    ] {
        assert!(
            text.contains(&format!("# TYPE smart_limit_{c}_total counter\n")),
            "{c}"
        );
    }
    // No rooms: still valid (families with no samples).
    check_exposition(&render_prometheus(&[]));
    assert!(!text.contains("smart_limit_fleet_"));
}

/// The samples of one metric: (labels, value).
fn named(samples: &[(String, String, f64)], name: &str) -> Vec<(String, f64)> {
    samples
        .iter()
        .filter(|(n, _, _)| n == name)
        .map(|s| (s.1.clone(), s.2))
        .collect()
}

#[test]
fn synced_rooms_show_the_fleet() {
    let mut synced = figures("s", Some(snap(1)));
    synced.fleet = Some(FleetSnapshot {
        quota_left: 4,
        nodes: 3,
        draws: 2,
        draws_granted: 5,
        syncs: 9,
        sync_age_ms: Some(1_250),
        ..FleetSnapshot::default()
    });
    let rooms = [figures("plain", Some(snap(1))), synced];
    let samples = check_exposition(&render_prometheus(&rooms));
    let get = |n: &str| named(&samples, n);
    assert_eq!(
        get("smart_limit_fleet_nodes"),
        vec![("room=\"s\"}".to_string(), 3.0)]
    );
    assert_eq!(get("smart_limit_fleet_share_left")[0].1, 4.0);
    assert_eq!(get("smart_limit_fleet_drawn_places_total")[0].1, 5.0);
    assert_eq!(get("smart_limit_fleet_syncs_total")[0].1, 9.0);
    assert_eq!(get("smart_limit_fleet_sync_age_seconds")[0].1, 1.25);
}

#[test]
fn events_show_their_phase_times_and_limits() {
    let drop = crate::event::parse_event(&[
        "drop",
        "room=s",
        "prequeue=@1000",
        "start=@2000",
        "max_active=500",
    ])
    .unwrap();
    let mut room = figures("s", Some(snap(1)));
    room.events = vec![super::EventFigures {
        spec: drop,
        phase: Phase::Prequeue,
        source: crate::event::runtime::Source::Control,
    }];
    let rooms = [figures("plain", Some(snap(1))), room];
    let text = render_prometheus(&rooms);
    let samples = check_exposition(&text);
    let get = |n: &str| named(&samples, n);
    assert_eq!(get("smart_limit_event_phase").len(), 4);
    assert!(
        text.contains("smart_limit_event_phase{room=\"s\",event=\"drop\",phase=\"prequeue\"} 1\n")
    );
    assert!(
        text.contains("smart_limit_event_phase{room=\"s\",event=\"drop\",phase=\"running\"} 0\n")
    );
    assert_eq!(get("smart_limit_event_start_seconds")[0].1, 2000.0);
    assert_eq!(get("smart_limit_event_prequeue_seconds")[0].1, 1000.0);
    assert_eq!(get("smart_limit_event_max_active")[0].1, 500.0);
    // No end, no new_per_minute: no sample.
    assert!(get("smart_limit_event_end_seconds").is_empty());
    assert!(get("smart_limit_event_new_per_minute").is_empty());
    // Rooms without events: no event families at all.
    let plain = render_prometheus(&[figures("plain", Some(snap(1)))]);
    assert!(!plain.contains("smart_limit_event_"));

    let j: serde_json::Value = serde_json::from_str(&render_control_json(&rooms, 1)).unwrap();
    assert_eq!(j["rooms"][0]["events"], serde_json::json!([]));
    let e = &j["rooms"][1]["events"][0];
    assert_eq!(e["name"], "drop");
    assert_eq!(e["phase"], "prequeue");
    assert_eq!(e["source"], "control");
    assert_eq!(e["start"], 2000);
    assert_eq!(e["max_active"], 500);
    assert!(e["end"].is_null());
}

#[test]
fn label_values_are_escaped() {
    let rooms = [figures("a\"b\\c\nd", Some(snap(1)))];
    let text = render_prometheus(&rooms);
    assert!(text.contains("smart_limit_up{room=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

#[test]
fn control_json() {
    let mut b = figures("b", Some(snap(1)));
    b.override_mode = Some(Mode::QueueAll);
    b.admission = Admission::Session { ms: 300_000 };
    b.times.sync_ms = Some(250);
    let j: serde_json::Value =
        serde_json::from_str(&render_control_json(&[b, figures("c", None)], 99)).unwrap();
    // The room's times, in ms (`sync_ms` null without sync=).
    let r = &j["rooms"][0];
    assert_eq!(r["presence_ms"], 20_000);
    assert_eq!(r["keep_ms"], 300_000);
    assert_eq!(r["active_window_ms"], 60_000);
    assert_eq!(r["timeout_ms"], 100);
    assert_eq!(r["sync_ms"], 250);
    assert!(j["rooms"][1]["sync_ms"].is_null());
    assert_eq!(j["updated_at"], 99);
    let r = &j["rooms"][0];
    assert_eq!(r["room"], "b");
    assert_eq!(r["mode"], "queue_all");
    assert_eq!(r["configured_mode"], "fifo");
    assert_eq!(r["mode_overridden"], true);
    assert_eq!(r["admission"], "session");
    assert_eq!(r["admission_seconds"], 300);
    assert_eq!(r["queue_length"], 3);
    assert_eq!(r["counters"]["admitted"], 10);
    assert_eq!(r["up"], true);
    let r = &j["rooms"][1];
    assert_eq!(r["up"], false);
    assert!(r["counters"].is_null());
    assert!(r["queue_length"].is_null());
    let e: serde_json::Value = serde_json::from_str(&render_error_json("bad \"x\"")).unwrap();
    assert_eq!(e["error"], "bad \"x\"");
}

#[test]
fn control_queries() {
    assert_eq!(
        parse_control_query(b"room=shop&mode=reject"),
        Ok(ControlQuery {
            room: Some("shop"),
            mode: Some(Some(Mode::Reject)),
            event: None,
            event_args: vec![],
            pin: None,
        })
    );
    assert_eq!(
        parse_control_query(b"mode=default&room=shop"),
        Ok(ControlQuery {
            room: Some("shop"),
            mode: Some(None),
            event: None,
            event_args: vec![],
            pin: None,
        })
    );
    assert_eq!(
        parse_control_query(b""),
        Ok(ControlQuery {
            room: None,
            mode: None,
            event: None,
            event_args: vec![],
            pin: None,
        })
    );
    // An event to create: its parameters as smart_limit_event takes them, decoded.
    assert_eq!(
        parse_control_query(b"room=shop&event=drop&start=2026-12-01T10%3A00%3A00Z&max_active=5"),
        Ok(ControlQuery {
            room: Some("shop"),
            mode: None,
            event: Some("drop"),
            event_args: vec!["start=2026-12-01T10:00:00Z".into(), "max_active=5".into()],
            pin: None,
        })
    );
    for m in Mode::ALL {
        let q = format!("room=x&mode={}", m.name());
        assert_eq!(
            parse_control_query(q.as_bytes()).unwrap().mode,
            Some(Some(m))
        );
    }
    for bad in [
        &b"room=shop&mode=lottery"[..],
        b"room=shop&mode=",
        b"room=&mode=fifo",
        b"room=a&room=b",
        b"room=a&mode=fifo&mode=reject",
        b"room=a&dry=1",
        b"\xff",
        b"room=a&mode=fifo&event=e",
        b"room=a&start=@1",
        b"room=a&event=e&start=%3",
        b"room=a&event=",
    ] {
        assert!(
            parse_control_query(bad).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let e = parse_control_query(b"mode=nope").unwrap_err().to_string();
    assert!(
        e.contains("fifo, random, passthrough, reject, queue_all"),
        "{e}"
    );
}

#[test]
fn build_info_names_the_version_and_nginx() {
    let text = render_build_info("0.8.0", "1.28.3");
    assert_eq!(
        text,
        "# HELP smart_limit_build_info The module's version and the nginx version it was built \
         for, as labels; always 1.\n# TYPE smart_limit_build_info gauge\n\
         smart_limit_build_info{version=\"0.8.0\",nginx=\"1.28.3\"} 1\n"
    );
    assert!(render_build_info("a\"b", "1").contains("version=\"a\\\"b\""));
}

#[test]
fn max_active_without_an_event_pins_auto() {
    let q = parse_control_query(b"room=shop&max_active=40").unwrap();
    assert_eq!((q.pin, q.event_args.len()), (Some(Some(40)), 0));
    let q = parse_control_query(b"max_active=auto&room=shop").unwrap();
    assert_eq!(q.pin, Some(None));
    // With event= it is the event's own limit, as before.
    let q = parse_control_query(b"room=shop&event=e&start=1&max_active=40").unwrap();
    assert_eq!(q.pin, None);
    assert!(matches!(
        parse_control_query(b"room=shop&max_active=0"),
        Err(QueryError::BadPin(_))
    ));
    assert!(matches!(
        parse_control_query(b"room=shop&max_active=5&mode=reject"),
        Err(QueryError::ModeAndEvent)
    ));
    // Another event parameter without event= is still refused.
    assert!(matches!(
        parse_control_query(b"room=shop&max_active=5&start=1"),
        Err(QueryError::EventParamsWithoutEvent)
    ));
}
