//! A room's families: its counters, its gauges, and the synced room's figures.

use std::fmt::Write as _;

use super::text::{family, label, sample, value, Value};
use super::RoomFigures;
use crate::capacity::steering::View;
use crate::capacity::Auto;
use crate::event::{EventSpec, Phase};
use crate::fleet::FleetSnapshot;
use crate::room::rules::Mode;
use crate::room::{Counters, Snapshot};

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
    (
        "challenged",
        "challenge=pow: clients given a proof of work to solve before they take a place.",
        |c| c.challenged,
    ),
    (
        "proofs_refused",
        "challenge=pow: proofs refused (another ticket's, unsolved, too easy or malformed).",
        |c| c.proofs_refused,
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
        "Limit of active admitted sessions in force (max_active=auto: where it stands now).",
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

type OriginOf = fn(&Auto, &View) -> Value;

/// `max_active=auto`'s families ([S26]): name (without `smart_limit_`), type, help, value.
const ORIGIN_FAMILIES: &[(&str, &str, &str, OriginOf)] = &[
    (
        "origin_responses_total",
        "counter",
        "Upstream responses to admitted requests, as max_active=auto measured them.",
        |_, v| Value::Int(v.responses),
    ),
    (
        "origin_slow_total",
        "counter",
        "Of those, slower than origin_latency=.",
        |_, v| Value::Int(v.slow),
    ),
    (
        "origin_errors_total",
        "counter",
        "Of those, failed: upstream 5xx, timeouts and connection errors.",
        |_, v| Value::Int(v.errors),
    ),
    (
        "origin_latency_target_seconds",
        "gauge",
        "origin_latency=: the 90th percentile of the origin's response time to hold.",
        |a, _| Value::Milli(a.target_ms),
    ),
    (
        "max_active_auto_min",
        "gauge",
        "max_active=auto's lower bound (and its start).",
        |a, _| Value::Int(a.min),
    ),
    (
        "max_active_auto_max",
        "gauge",
        "max_active=auto's upper bound.",
        |a, _| Value::Int(a.max),
    ),
    (
        "max_active_pinned",
        "gauge",
        "1 while max_active=auto is pinned to a value through smart_limit_control.",
        |_, v| Value::Int(u64::from(v.pinned)),
    ),
];

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
    if rooms.iter().any(|f| !f.events.is_empty()) {
        events(&mut out, rooms);
    }
    if rooms.iter().any(|f| f.origin.is_some()) {
        for (name, kind, help, get) in ORIGIN_FAMILIES {
            family(&mut out, name, kind, help);
            for f in rooms {
                if let Some((a, v)) = &f.origin {
                    room_value(&mut out, name, f.room, get(a, v));
                }
            }
        }
    }
    if rooms.iter().any(|f| f.fleet.is_some()) {
        for (name, kind, help, get) in FLEET_FAMILIES {
            let full = format!("fleet_{name}");
            family(&mut out, &full, kind, help);
            for f in rooms {
                if let Some(v) = f.fleet.as_ref().and_then(get) {
                    room_value(&mut out, &full, f.room, v);
                }
            }
        }
    }
    out
}

/// One room's sample of a family whose value may be fractional (`Value`).
fn room_value(out: &mut String, name: &str, room: &str, v: Value) {
    let _ = write!(out, "smart_limit_{name}{{room=\"");
    label(out, room);
    out.push_str("\"} ");
    value(out, v);
}

/// The scheduled events' families ([S18]): each event's phase (1 for the one it is in), its
/// start, and the limits it puts in force while it runs.
fn events(out: &mut String, rooms: &[RoomFigures]) {
    let each = |out: &mut String, name: &str, f: &RoomFigures, event: &str| {
        let _ = write!(out, "smart_limit_{name}{{room=\"");
        label(out, f.room);
        out.push_str("\",event=\"");
        label(out, event);
        out.push('"');
    };
    family(
        out,
        "event_phase",
        "gauge",
        "A scheduled event's phase (before, prequeue, running, over): 1 for the one it is in.",
    );
    for f in rooms {
        for e in &f.events {
            for p in Phase::ALL {
                each(out, "event_phase", f, &e.spec.name);
                let _ = writeln!(out, ",phase=\"{}\"}} {}", p.name(), u64::from(p == e.phase));
            }
        }
    }
    type Of = fn(&EventSpec) -> Option<u64>;
    const FIGURES: &[(&str, &str, Of)] = &[
        (
            "event_prequeue_seconds",
            "When the event's pre-queue opens (unix seconds; the start when it has none).",
            |e| Some(e.prequeue),
        ),
        (
            "event_start_seconds",
            "When the event starts: the pre-queue's lottery, then its limits (unix seconds).",
            |e| Some(e.start),
        ),
        (
            "event_end_seconds",
            "When the room's own settings return (unix seconds; absent: no end).",
            |e| e.end,
        ),
        (
            "event_max_active",
            "The event's limit of active admitted sessions while it runs (absent: the room's).",
            |e| e.max_active,
        ),
        (
            "event_new_per_minute",
            "The event's limit of admissions per minute while it runs (absent: the room's).",
            |e| e.new_per_minute,
        ),
    ];
    for (name, help, get) in FIGURES {
        family(out, name, "gauge", help);
        for f in rooms {
            for e in &f.events {
                if let Some(v) = get(&e.spec) {
                    each(out, name, f, &e.spec.name);
                    let _ = writeln!(out, "}} {v}");
                }
            }
        }
    }
}
