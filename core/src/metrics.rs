//! What the module tells operators about its rooms: Prometheus text exposition (format 0.0.4)
//! for `smart_limit_metrics`, and the JSON status of `smart_limit_control`. Both are rendered
//! from [`RoomFigures`]: a room's configuration plus a [`Snapshot`] of its state, taken from
//! the node's shared-memory room, so counters are the sum over every worker of the node.
//!
//! Counters are cumulative (they only grow while the zone lives; a reload keeps them, a
//! restart or a new `size=` starts them at zero), so a collector computes rates from
//! differences, as the AJA article does. Nothing here panics, whatever the input.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use std::fmt::Write as _;

use serde::Serialize;

use crate::fleet_rate::RateSnapshot;
use crate::fleet_room::FleetSnapshot;
use crate::room::{Counters, Snapshot};
use crate::rules::{Admission, Mode};

/// One room as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomFigures<'a> {
    /// Room (zone) name.
    pub room: &'a str,
    /// "shm" or "redis".
    pub store: &'a str,
    /// The mode configured for the room (fifo unless changed).
    pub configured_mode: Mode,
    /// The mode switched at run time through the control endpoint, if any.
    pub override_mode: Option<Mode>,
    pub max_active: u64,
    pub new_per_minute: Option<u64>,
    pub admission: Admission,
    /// The room's state; None when the store could not be read (reported as `up 0`).
    pub snapshot: Option<Snapshot>,
    /// `sync=`: this node's side of the fleet's room.
    pub fleet: Option<FleetSnapshot>,
}

impl RoomFigures<'_> {
    /// The mode in force: the run-time one, else the configured one.
    pub fn mode(&self) -> Mode {
        self.override_mode.unwrap_or(self.configured_mode)
    }
}

/// Content type of the exposition.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

type CounterOf = fn(&Counters) -> u64;

/// The counters, in exposition order: name (without `smart_limit_` and `_total`), help,
/// and where the value comes from.
const COUNTERS: &[(&str, &str, CounterOf)] = &[
    (
        "admitted",
        "Sessions admitted, from the line or at once.",
        |c| c.admitted,
    ),
    (
        "queued",
        "Clients that took a place at the tail of the line.",
        |c| c.queued,
    ),
    (
        "passed",
        "Requests passed on a valid admitted ticket.",
        |c| c.passed,
    ),
    (
        "bypassed",
        "Requests let through by smart_limit_bypass, without a ticket.",
        |c| c.bypassed,
    ),
    (
        "waiting_answers",
        "Waiting answers given (every poll of a waiting client counts).",
        |c| c.waited,
    ),
    (
        "rejected",
        "Requests refused: room closed (mode reject) or no place left in the line.",
        |c| c.rejected,
    ),
    (
        "expired",
        "Waiting clients that lost their place by being absent longer than presence.",
        |c| c.expired,
    ),
    (
        "revoked",
        "Admitted sessions ended by the origin (X-Smart-Limit: revoke).",
        |c| c.revoked,
    ),
    (
        "store_errors",
        "Decisions the store could not take (unreachable, timeout, bad reply).",
        |c| c.store_errors,
    ),
    (
        "arrivals",
        "First contacts: clients without a ticket, given one and sent back for it.",
        |c| c.arrivals,
    ),
    (
        "throttled",
        "Clients refused a place by flood control (their address took places too fast).",
        |c| c.throttled,
    ),
    (
        "session_limited",
        "Requests of admitted sessions over the session request rate.",
        |c| c.session_limited,
    ),
    (
        "fast_polls",
        "Polls of a waiting ticket answered without the store (polled faster than a browser).",
        |c| c.fast_polls,
    ),
];

type GaugeOf = fn(&RoomFigures, &Snapshot) -> Option<u64>;

/// The gauges that come from the room's state or limits: name, help, unit suffix handled in
/// the name, value (None: no sample for that room).
const GAUGES: &[(&str, &str, GaugeOf)] = &[
    (
        "queue_length",
        "Clients waiting in the line now.",
        |_, s| Some(s.queue_len),
    ),
    (
        "active_sessions",
        "Admitted sessions seen within the active window (what max_active limits).",
        |_, s| Some(s.active),
    ),
    (
        "oldest_wait_seconds",
        "How long the client at the head of the line has been waiting, in seconds.",
        |_, s| Some(s.oldest_wait_ms / 1000),
    ),
    (
        "max_active",
        "Configured limit of active admitted sessions.",
        |f, _| Some(f.max_active),
    ),
    (
        "new_per_minute",
        "Configured limit of admissions per minute (absent when unlimited).",
        |f, _| f.new_per_minute,
    ),
    (
        "session_capacity",
        "How many waiting and admitted sessions the zone's memory can hold.",
        |_, s| Some(s.capacity),
    ),
];

type FleetOf = fn(&FleetSnapshot) -> Option<Value>;

/// The synced room's families (`sync=`): name (without `smart_limit_fleet_`), type, help, value.
const FLEET_FAMILIES: &[(&str, &str, &str, FleetOf)] = &[
    (
        "syncs_total",
        "counter",
        "Syncs with the fleet answered (one call an interval, by one worker of the node).",
        |s| Some(Value::Int(s.syncs)),
    ),
    (
        "sync_errors_total",
        "counter",
        "Syncs with the fleet that got no usable reply within the timeout.",
        |s| Some(Value::Int(s.sync_failures)),
    ),
    (
        "draws_total",
        "counter",
        "Calls to the fleet's pool for places beyond this node's share.",
        |s| Some(Value::Int(s.draws)),
    ),
    (
        "drawn_places_total",
        "counter",
        "Places the fleet's pool gave this node.",
        |s| Some(Value::Int(s.draws_granted)),
    ),
    (
        "admitted_total",
        "counter",
        "Sessions this node admitted on the fleet's behalf.",
        |s| Some(Value::Int(s.admitted)),
    ),
    (
        "dropped_reports_total",
        "counter",
        "Sightings not reported to the fleet for want of room between two syncs (size=).",
        |s| Some(Value::Int(s.dropped)),
    ),
    (
        "share_left",
        "gauge",
        "Admissions left in this node's share of the current interval.",
        |s| Some(Value::Int(s.quota_left)),
    ),
    (
        "nodes",
        "gauge",
        "Nodes in the fleet's last picture.",
        |s| Some(Value::Int(s.nodes)),
    ),
    (
        "sync_age_seconds",
        "gauge",
        "Seconds since the last fleet picture (absent before the first one).",
        |s| s.sync_age_ms.map(Value::Milli),
    ),
];

/// Escapes a label value: backslash, double quote and line feed (exposition format 0.0.4).
fn label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    // Help texts are constants without backslashes or line feeds.
    let _ = writeln!(out, "# HELP smart_limit_{name} {help}");
    let _ = writeln!(out, "# TYPE smart_limit_{name} {kind}");
}

fn sample(out: &mut String, name: &str, room: &str, extra: Option<(&str, &str)>, value: u64) {
    out.push_str("smart_limit_");
    out.push_str(name);
    out.push_str("{room=\"");
    label(out, room);
    out.push('"');
    if let Some((k, v)) = extra {
        out.push(',');
        out.push_str(k);
        out.push_str("=\"");
        label(out, v);
        out.push('"');
    }
    let _ = writeln!(out, "}} {value}");
}

/// Prometheus text exposition of every room. Each metric family appears once, with one
/// sample per room; a room whose store could not be read only has `smart_limit_up 0`.
pub fn render_prometheus(rooms: &[RoomFigures]) -> String {
    let mut out = String::with_capacity(1024 + rooms.len() * 1536);
    family(
        &mut out,
        "up",
        "gauge",
        "1 when the room's state could be read for this scrape, 0 otherwise.",
    );
    for f in rooms {
        sample(
            &mut out,
            "up",
            f.room,
            None,
            u64::from(f.snapshot.is_some()),
        );
    }
    for (name, help, get) in COUNTERS {
        let full = format!("{name}_total");
        family(&mut out, &full, "counter", help);
        for f in rooms {
            if let Some(s) = &f.snapshot {
                sample(&mut out, &full, f.room, None, get(&s.counters));
            }
        }
    }
    for (name, help, get) in GAUGES {
        family(&mut out, name, "gauge", help);
        for f in rooms {
            if let Some(v) = f.snapshot.as_ref().and_then(|s| get(f, s)) {
                sample(&mut out, name, f.room, None, v);
            }
        }
    }
    family(
        &mut out,
        "mode",
        "gauge",
        "The room's mode: 1 for the mode in force, 0 for the others.",
    );
    for f in rooms {
        let now = f.mode();
        for m in Mode::ALL {
            sample(
                &mut out,
                "mode",
                f.room,
                Some(("mode", m.name())),
                u64::from(m == now),
            );
        }
    }
    family(
        &mut out,
        "mode_overridden",
        "gauge",
        "1 when the mode was switched at run time (smart_limit_control), 0 when configured.",
    );
    for f in rooms {
        sample(
            &mut out,
            "mode_overridden",
            f.room,
            None,
            u64::from(f.override_mode.is_some()),
        );
    }
    if rooms.iter().any(|f| f.fleet.is_some()) {
        for (name, kind, help, get) in FLEET_FAMILIES {
            let full = format!("fleet_{name}");
            family(&mut out, &full, kind, help);
            for f in rooms {
                if let Some(v) = f.fleet.as_ref().and_then(get) {
                    let _ = write!(out, "smart_limit_{full}{{room=\"");
                    label(&mut out, f.room);
                    out.push_str("\"} ");
                    value(&mut out, v);
                }
            }
        }
    }
    out
}

fn value(out: &mut String, v: Value) {
    let _ = match v {
        Value::Int(n) => writeln!(out, "{n}"),
        Value::Milli(m) => writeln!(out, "{}.{:03}", m / 1000, m % 1000),
    };
}

/// One fleet rate zone as the operator sees it (`smart_limit_rate_zone`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateFigures<'a> {
    pub zone: &'a str,
    /// A Redis is configured: the zone's fleet figures come from it.
    pub fleet: bool,
    /// The configured rate, in milli-requests a second.
    pub rate_milli: u64,
    /// The zone's state; None when its shared memory could not be read.
    pub snapshot: Option<RateSnapshot>,
}

type RateOf = fn(&RateFigures, &RateSnapshot) -> Option<Value>;

/// A sample value: an integer, or a decimal given in thousandths (rates, probabilities).
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(u64),
    Milli(u64),
}

/// The fleet rate families: name (without `smart_limit_rate_`), type, help, value.
const RATE_FAMILIES: &[(&str, &str, &str, RateOf)] = &[
    (
        "offered_total",
        "counter",
        "Requests offered to the rate zone on this node (every request of its locations).",
        |_, s| Some(Value::Int(s.offered)),
    ),
    (
        "passed_total",
        "counter",
        "Requests of this node that passed the rate zone's draw.",
        |_, s| Some(Value::Int(s.passed)),
    ),
    (
        "fleet_offered_total",
        "counter",
        "Requests offered to the rate zone on every node, as the fleet's last sync reported.",
        |f, s| f.fleet.then_some(Value::Int(s.fleet_offered_total)),
    ),
    (
        "fleet_passed_total",
        "counter",
        "Requests passed on every node, as the fleet's last sync reported.",
        |f, s| f.fleet.then_some(Value::Int(s.fleet_passed_total)),
    ),
    (
        "syncs_total",
        "counter",
        "Syncs with the fleet answered (or local measurements, without Redis).",
        |f, s| f.fleet.then_some(Value::Int(s.syncs)),
    ),
    (
        "sync_errors_total",
        "counter",
        "Syncs with the fleet that got no usable reply within the timeout.",
        |f, s| f.fleet.then_some(Value::Int(s.sync_errors)),
    ),
    (
        "probability",
        "gauge",
        "The probability each request passes with now (min(rate / fleet rate, 1)).",
        |_, s| Some(Value::Milli(u64::from(s.p_ppm) / 1000)),
    ),
    (
        "fleet_qps",
        "gauge",
        "Requests a second offered to the whole fleet, from the last picture.",
        |_, s| Some(Value::Milli(s.fleet_offered_milli)),
    ),
    (
        "fleet_passed_qps",
        "gauge",
        "Requests a second passed by the whole fleet, from the last picture.",
        |f, s| f.fleet.then_some(Value::Milli(s.fleet_passed_milli)),
    ),
    (
        "node_qps",
        "gauge",
        "Requests a second offered to this node, measured once an interval.",
        |_, s| Some(Value::Milli(s.local_offered_milli)),
    ),
    (
        "nodes",
        "gauge",
        "Nodes in the fleet's last picture.",
        |_, s| Some(Value::Int(s.nodes)),
    ),
    (
        "limit_qps",
        "gauge",
        "The configured rate (rate=), requests a second for the whole fleet.",
        |f, _| Some(Value::Milli(f.rate_milli)),
    ),
    (
        "sync_age_seconds",
        "gauge",
        "Seconds since the last fleet picture (absent before the first one).",
        |_, s| s.sync_age_ms.map(Value::Milli),
    ),
];

/// Prometheus text exposition of the fleet rate zones (appended to the rooms').
pub fn render_rate_prometheus(zones: &[RateFigures]) -> String {
    let mut out = String::with_capacity(256 + zones.len() * 1024);
    if zones.is_empty() {
        return out;
    }
    family(
        &mut out,
        "rate_up",
        "gauge",
        "1 when the rate zone's state could be read for this scrape, 0 otherwise.",
    );
    for z in zones {
        let _ = write!(out, "smart_limit_rate_up{{zone=\"");
        label(&mut out, z.zone);
        let _ = writeln!(out, "\"}} {}", u64::from(z.snapshot.is_some()));
    }
    for (name, kind, help, get) in RATE_FAMILIES {
        let full = format!("rate_{name}");
        family(&mut out, &full, kind, help);
        for z in zones {
            let Some(v) = z.snapshot.as_ref().and_then(|s| get(z, s)) else {
                continue;
            };
            let _ = write!(out, "smart_limit_{full}{{zone=\"");
            label(&mut out, z.zone);
            out.push_str("\"} ");
            value(&mut out, v);
        }
    }
    out
}

#[derive(Serialize)]
struct JsonCounters {
    admitted: u64,
    queued: u64,
    passed: u64,
    bypassed: u64,
    waiting_answers: u64,
    rejected: u64,
    expired: u64,
    revoked: u64,
    store_errors: u64,
}

#[derive(Serialize)]
struct JsonRoom<'a> {
    room: &'a str,
    store: &'a str,
    mode: &'static str,
    configured_mode: &'static str,
    mode_overridden: bool,
    max_active: u64,
    new_per_minute: Option<u64>,
    admission: &'static str,
    admission_seconds: u64,
    up: bool,
    queue_length: Option<u64>,
    active_sessions: Option<u64>,
    oldest_wait_seconds: Option<u64>,
    session_capacity: Option<u64>,
    counters: Option<JsonCounters>,
}

fn json_room<'a>(f: &'a RoomFigures) -> JsonRoom<'a> {
    let (admission, ms) = match f.admission {
        Admission::Grant { ms } => ("grant", ms),
        Admission::Session { ms } => ("session", ms),
    };
    let s = f.snapshot.as_ref();
    JsonRoom {
        room: f.room,
        store: f.store,
        mode: f.mode().name(),
        configured_mode: f.configured_mode.name(),
        mode_overridden: f.override_mode.is_some(),
        max_active: f.max_active,
        new_per_minute: f.new_per_minute,
        admission,
        admission_seconds: ms / 1000,
        up: s.is_some(),
        queue_length: s.map(|s| s.queue_len),
        active_sessions: s.map(|s| s.active),
        oldest_wait_seconds: s.map(|s| s.oldest_wait_ms / 1000),
        session_capacity: s.map(|s| s.capacity),
        counters: s.map(|s| {
            let c = &s.counters;
            JsonCounters {
                admitted: c.admitted,
                queued: c.queued,
                passed: c.passed,
                bypassed: c.bypassed,
                waiting_answers: c.waited,
                rejected: c.rejected,
                expired: c.expired,
                revoked: c.revoked,
                store_errors: c.store_errors,
            }
        }),
    }
}

#[derive(Serialize)]
struct JsonRooms<'a> {
    rooms: Vec<JsonRoom<'a>>,
    updated_at: u64,
}

/// The control endpoint's JSON: `{"rooms":[{...}, ...],"updated_at":UNIX_SECONDS}`.
pub fn render_control_json(rooms: &[RoomFigures], updated_at: u64) -> String {
    let doc = JsonRooms {
        rooms: rooms.iter().map(json_room).collect(),
        updated_at,
    };
    // Plain structs of numbers and strings: serialising cannot fail; no panic path anyway.
    serde_json::to_string(&doc).unwrap_or_else(|_| "{\"rooms\":[]}".to_string())
}

/// A JSON error body for the control endpoint: `{"error":"..."}`.
pub fn render_error_json(message: &str) -> String {
    #[derive(Serialize)]
    struct E<'a> {
        error: &'a str,
    }
    serde_json::to_string(&E { error: message }).unwrap_or_else(|_| "{}".to_string())
}

/// What a control request asks for, from its query string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlQuery<'a> {
    pub room: Option<&'a str>,
    /// `Some(None)`: back to the configured mode (`mode=default`).
    pub mode: Option<Option<Mode>>,
}

/// Parses `room=NAME&mode=MODE|default` (any order; nothing else is accepted, so a typo is
/// an error rather than a silent no-op). Values need no percent-decoding: room names and
/// mode names are plain ASCII.
pub fn parse_control_query(args: &[u8]) -> Result<ControlQuery<'_>, String> {
    let text = std::str::from_utf8(args).map_err(|_| "query is not valid UTF-8".to_string())?;
    let mut q = ControlQuery {
        room: None,
        mode: None,
    };
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "room" => {
                if q.room.is_some() {
                    return Err("room is given twice".to_string());
                }
                if v.is_empty() {
                    return Err("room is empty".to_string());
                }
                q.room = Some(v);
            }
            "mode" => {
                if q.mode.is_some() {
                    return Err("mode is given twice".to_string());
                }
                q.mode = Some(if v == "default" {
                    None
                } else {
                    Some(Mode::from_name(v).ok_or_else(|| {
                        format!(
                            "unknown mode \"{}\": expected one of {}, or default",
                            v.escape_default(),
                            Mode::NAMES
                        )
                    })?)
                });
            }
            other => {
                return Err(format!(
                    "unknown parameter \"{}\": expected room= and mode=",
                    other.escape_default()
                ))
            }
        }
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            },
            capacity: 1000,
            mode_override: 0,
        }
    }

    fn figures(room: &str, snapshot: Option<Snapshot>) -> RoomFigures<'_> {
        RoomFigures {
            room,
            store: "shm",
            configured_mode: Mode::Fifo,
            override_mode: None,
            max_active: 5,
            new_per_minute: None,
            admission: Admission::Grant { ms: 600_000 },
            snapshot,
            fleet: None,
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
        let get = |n: &str| {
            samples
                .iter()
                .filter(|(sn, _, _)| sn == n)
                .map(|s| (s.1.clone(), s.2))
                .collect::<Vec<_>>()
        };
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
        let j: serde_json::Value =
            serde_json::from_str(&render_control_json(&[b, figures("c", None)], 99)).unwrap();
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
                mode: Some(Some(Mode::Reject))
            })
        );
        assert_eq!(
            parse_control_query(b"mode=default&room=shop"),
            Ok(ControlQuery {
                room: Some("shop"),
                mode: Some(None)
            })
        );
        assert_eq!(
            parse_control_query(b""),
            Ok(ControlQuery {
                room: None,
                mode: None
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
        ] {
            assert!(
                parse_control_query(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let e = parse_control_query(b"mode=nope").unwrap_err();
        assert!(
            e.contains("fifo, random, passthrough, reject, queue_all"),
            "{e}"
        );
    }
}
