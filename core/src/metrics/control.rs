//! The control endpoint: the rooms' status as JSON, and its query string read.

use serde::Serialize;

use super::RoomFigures;
use crate::room::rules::Admission;
use crate::room::rules::Mode;

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
    presence_ms: u64,
    keep_ms: u64,
    active_window_ms: u64,
    timeout_ms: u64,
    sync_ms: Option<u64>,
    up: bool,
    queue_length: Option<u64>,
    active_sessions: Option<u64>,
    oldest_wait_seconds: Option<u64>,
    session_capacity: Option<u64>,
    counters: Option<JsonCounters>,
    events: Vec<JsonEvent<'a>>,
    /// `max_active=auto` ([S26]); absent for a fixed `max_active`.
    #[serde(skip_serializing_if = "Option::is_none")]
    auto: Option<JsonAuto>,
}

/// `max_active=auto`: its bounds and target, whether it is pinned, and its last move.
#[derive(Serialize)]
struct JsonAuto {
    min: u64,
    max: u64,
    origin_latency_ms: u64,
    pinned: bool,
    origin_responses: u64,
    origin_slow: u64,
    origin_errors: u64,
    /// "up" or "down" (null: it has not moved).
    last_move: Option<&'static str>,
    last_move_reason: Option<&'static str>,
    /// Unix ms of the last move (0: none).
    last_move_at_ms: u64,
}

/// A scheduled event of the room ([S18]): its times (unix seconds), where it stands, and the
/// limits it puts in force while it runs (null: the room's).
#[derive(Serialize)]
struct JsonEvent<'a> {
    name: &'a str,
    phase: &'static str,
    /// "config" (`smart_limit_event`) or "control" (made at run time).
    source: &'static str,
    prequeue: u64,
    start: u64,
    end: Option<u64>,
    shuffle: bool,
    max_active: Option<u64>,
    new_per_minute: Option<u64>,
    admission_seconds: Option<u64>,
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
        presence_ms: f.times.presence_ms,
        keep_ms: f.times.keep_ms,
        active_window_ms: f.times.active_window_ms,
        timeout_ms: f.times.timeout_ms,
        sync_ms: f.times.sync_ms,
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
        events: f
            .events
            .iter()
            .map(|f| (&f.spec, f.phase, f.source))
            .map(|(e, phase, source)| JsonEvent {
                name: &e.name,
                phase: phase.name(),
                source: source.name(),
                prequeue: e.prequeue,
                start: e.start,
                end: e.end,
                shuffle: e.shuffle,
                max_active: e.max_active,
                new_per_minute: e.new_per_minute,
                admission_seconds: e.grant_ms.map(|ms| ms / 1000),
            })
            .collect(),
        auto: f.origin.map(|(a, v)| JsonAuto {
            min: a.min,
            max: a.max,
            origin_latency_ms: a.target_ms,
            pinned: v.pinned,
            origin_responses: v.responses,
            origin_slow: v.slow,
            origin_errors: v.errors,
            last_move: v.last_move.map(|m| if m.up() { "up" } else { "down" }),
            last_move_reason: v.last_move.map(|m| m.reason()),
            last_move_at_ms: v.last_move_at,
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
    /// `event=NAME`: the event to create (POST) or cancel (DELETE).
    pub event: Option<&'a str>,
    /// The event's parameters, as `smart_limit_event` takes them (`start=...`), decoded.
    pub event_args: Vec<String>,
    /// `max_active=N|auto` without `event=` ([S26]): pins `max_active=auto` to N (Some), or
    /// gives it back to the controller (None).
    pub pin: Option<Option<u64>>,
}

/// The parameters of `smart_limit_event` the control endpoint takes (besides `room=`).
const EVENT_PARAMS: [&str; 9] = [
    "prequeue",
    "start",
    "end",
    "shuffle",
    "max_active",
    "new_per_minute",
    "grant",
    "session",
    "page",
];

/// Why the control endpoint's query was refused (the `400` answer's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("query is not valid UTF-8")]
    NotUtf8,
    #[error("bad escape in \"{0}\"")]
    BadEscape(String),
    #[error("\"{0}\" is not UTF-8")]
    DecodedNotUtf8(String),
    #[error("{0} is given twice")]
    Twice(&'static str),
    #[error("{0} is empty")]
    Empty(&'static str),
    #[error("unknown mode \"{0}\": expected one of {names}, or default", names = Mode::NAMES)]
    UnknownMode(String),
    #[error(
        "unknown parameter \"{0}\": expected room=, mode=, or event= with the parameters of \
         smart_limit_event"
    )]
    UnknownParameter(String),
    #[error("mode=, event= and max_active= (without event=) are separate requests")]
    ModeAndEvent,
    #[error("max_active=\"{0}\" without event=: expected a positive number, or auto")]
    BadPin(String),
    #[error("an event's parameters need event=NAME")]
    EventParamsWithoutEvent,
}

/// Decodes `%XX` escapes (an instant's colons may come as `%3A`); anything else is kept.
fn percent_decode(v: &str) -> Result<String, QueryError> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| core::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| QueryError::BadEscape(v.escape_default().to_string()))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| QueryError::DecodedNotUtf8(v.escape_default().to_string()))
}

/// Parses `room=NAME&mode=MODE|default`, or `room=NAME&event=NAME[&start=T...]` (any order;
/// nothing else is accepted, so a typo is an error rather than a silent no-op). Room, mode
/// and event names are plain ASCII; an event's parameters are percent-decoded.
pub fn parse_control_query(args: &[u8]) -> Result<ControlQuery<'_>, QueryError> {
    let text = std::str::from_utf8(args).map_err(|_| QueryError::NotUtf8)?;
    let mut q = ControlQuery {
        room: None,
        mode: None,
        event: None,
        event_args: Vec::new(),
        pin: None,
    };
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "room" | "event" => {
                let (slot, name) = if k == "room" {
                    (&mut q.room, "room")
                } else {
                    (&mut q.event, "event")
                };
                if slot.is_some() {
                    return Err(QueryError::Twice(name));
                }
                if v.is_empty() {
                    return Err(QueryError::Empty(name));
                }
                *slot = Some(v);
            }
            "mode" => {
                if q.mode.is_some() {
                    return Err(QueryError::Twice("mode"));
                }
                q.mode =
                    Some(if v == "default" {
                        None
                    } else {
                        Some(Mode::from_name(v).ok_or_else(|| {
                            QueryError::UnknownMode(v.escape_default().to_string())
                        })?)
                    });
            }
            k if EVENT_PARAMS.contains(&k) => {
                q.event_args.push(format!("{k}={}", percent_decode(v)?));
            }
            other => {
                return Err(QueryError::UnknownParameter(
                    other.escape_default().to_string(),
                ))
            }
        }
    }
    // Without event=, max_active= alone pins max_active=auto.
    if q.event.is_none() {
        if let [only] = q.event_args.as_slice() {
            if let Some(v) = only.strip_prefix("max_active=") {
                let bad = || QueryError::BadPin(v.escape_default().to_string());
                q.pin = Some(match v {
                    "auto" => None,
                    n => Some(crate::config::positive(n).map_err(|_| bad())?),
                });
                q.event_args.clear();
            }
        }
    }
    if q.mode.is_some() && (q.event.is_some() || !q.event_args.is_empty() || q.pin.is_some()) {
        return Err(QueryError::ModeAndEvent);
    }
    if q.event.is_none() && !q.event_args.is_empty() {
        return Err(QueryError::EventParamsWithoutEvent);
    }
    Ok(q)
}
