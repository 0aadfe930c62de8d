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
    up: bool,
    queue_length: Option<u64>,
    active_sessions: Option<u64>,
    oldest_wait_seconds: Option<u64>,
    session_capacity: Option<u64>,
    counters: Option<JsonCounters>,
    events: Vec<JsonEvent<'a>>,
}

/// A scheduled event of the room ([S18]): its times (unix seconds), where it stands, and the
/// limits it puts in force while it runs (null: the room's).
#[derive(Serialize)]
struct JsonEvent<'a> {
    name: &'a str,
    phase: &'static str,
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
            .map(|(e, phase)| JsonEvent {
                name: &e.name,
                phase: phase.name(),
                prequeue: e.prequeue,
                start: e.start,
                end: e.end,
                shuffle: e.shuffle,
                max_active: e.max_active,
                new_per_minute: e.new_per_minute,
                admission_seconds: e.grant_ms.map(|ms| ms / 1000),
            })
            .collect(),
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
