//! Scheduled events ([S18]): a room's launch with a pre-queue and a fair lottery at the start.
//!
//! ```nginx
//! smart_limit_event drop room=shop prequeue=2026-12-01T09:30:00Z start=2026-12-01T10:00:00Z
//!                   end=2026-12-01T12:00:00Z shuffle=on max_active=500;
//! ```
//!
//! This module holds what needs no nginx: the directive's arguments and their checks (each
//! message names the event), the phase an event is in at a given instant, and the lottery
//! ([`lottery`]). Instants are seconds since the Unix epoch, wall time: an event's start is
//! one moment for the whole fleet, written by the operator in UTC.

mod instant;
mod lottery;
pub mod runtime;
#[cfg(test)]
mod tests;

pub use instant::{format_instant, parse_instant};
pub use lottery::Lottery;

use crate::config::{check_zone_name, positive, positive_time, ParseError};
use thiserror::Error;

/// One `smart_limit_event`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub name: String,
    pub room: String,
    /// When the pre-queue opens (seconds since the epoch); `start` when not written (no
    /// pre-queue).
    pub prequeue: u64,
    pub start: u64,
    /// When the room's own settings return; `None`: the event runs until cancelled.
    pub end: Option<u64>,
    /// The pre-queue's order at the start: a lottery (on, the default) or arrival (off).
    pub shuffle: bool,
    pub max_active: Option<u64>,
    pub new_per_minute: Option<u64>,
    /// The admitted client's time (`grant=` or its synonym `session=`), in ms.
    pub grant_ms: Option<u64>,
    pub page: Option<String>,
}

/// Where an event stands at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The room behaves as configured.
    Before,
    /// Everyone gets the pre-queue answer; `starts_at` is the start.
    Prequeue,
    /// The event's overrides apply.
    Running,
    /// Over (`end` has passed): the room's own settings again.
    Over,
}

impl Phase {
    pub const ALL: [Phase; 4] = [Phase::Before, Phase::Prequeue, Phase::Running, Phase::Over];

    /// The name metrics and the control endpoint use.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::Prequeue => "prequeue",
            Phase::Running => "running",
            Phase::Over => "over",
        }
    }
}

impl EventSpec {
    pub fn phase(&self, now_secs: u64) -> Phase {
        if now_secs < self.prequeue {
            Phase::Before
        } else if now_secs < self.start {
            Phase::Prequeue
        } else if self.end.is_none_or(|end| now_secs < end) {
            Phase::Running
        } else {
            Phase::Over
        }
    }

    /// Whether two events' times share a moment (from the pre-queue's opening to the end).
    pub fn overlaps(&self, other: &EventSpec) -> bool {
        let ends_after = |e: &EventSpec, t: u64| e.end.is_none_or(|end| end > t);
        ends_after(self, other.prequeue) && ends_after(other, self.prequeue)
    }
}

/// Why an event was refused. Every message names the event (the FFI layer prefixes the
/// directive's name).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EventError {
    #[error("missing event name")]
    MissingName,
    #[error("invalid event name \"{0}\": expected 1 to 32 characters from A-Z a-z 0-9 _ -")]
    BadName(String),
    #[error("event \"{0}\": unknown parameter \"{1}\"")]
    Unknown(String, String),
    #[error("event \"{0}\": \"{1}\" is given twice")]
    Duplicate(String, String),
    #[error("event \"{0}\": invalid {1} \"{2}\": {3}")]
    Invalid(String, &'static str, String, ParseError),
    #[error("event \"{0}\": room= is required")]
    NoRoom(String),
    #[error("event \"{0}\": start= is required")]
    NoStart(String),
    #[error("event \"{0}\": end ({1}) is not after start ({2})")]
    EndBeforeStart(String, String, String),
    #[error("event \"{0}\": prequeue ({1}) is after start ({2})")]
    PrequeueAfterStart(String, String, String),
    #[error("event \"{0}\": unknown room \"{1}\" (no smart_limit_zone of that name)")]
    UnknownRoom(String, String),
    #[error("event \"{0}\" is defined twice")]
    Twice(String),
    #[error("events \"{0}\" and \"{1}\" of room \"{2}\" overlap")]
    Overlap(String, String, String),
    #[error("no event \"{0}\" in this room")]
    NotFound(String),
    #[error("the room's table of run-time events is full ({0} entries): cancel one first")]
    TableFull(usize),
}

/// Parses the arguments of `smart_limit_event` (the event's name first).
pub fn parse_event(args: &[&str]) -> Result<EventSpec, EventError> {
    let (&name, params) = args.split_first().ok_or(EventError::MissingName)?;
    if name.is_empty()
        || name.len() > 32
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(EventError::BadName(name.to_string()));
    }
    let named = |e: fn(String, String) -> EventError, a: &str| e(name.to_string(), a.to_string());
    let invalid = |what: &'static str, v: &str, why: ParseError| {
        EventError::Invalid(name.to_string(), what, v.to_string(), why)
    };
    let instant = |what: &'static str, v: &str| parse_instant(v).map_err(|e| invalid(what, v, e));
    let number = |what: &'static str, v: &str| positive(v).map_err(|e| invalid(what, v, e));
    let mut spec = EventSpec {
        name: name.to_string(),
        room: String::new(),
        prequeue: 0,
        start: 0,
        end: None,
        shuffle: true,
        max_active: None,
        new_per_minute: None,
        grant_ms: None,
        page: None,
    };
    let (mut prequeue, mut start) = (None, None);
    let mut seen: Vec<&str> = Vec::new();
    for &arg in params {
        let (key, value) = arg
            .split_once('=')
            .ok_or_else(|| named(EventError::Unknown, arg))?;
        // grant= and session= are one setting.
        let slot = if key == "session" { "grant" } else { key };
        if seen.contains(&slot) {
            return Err(named(EventError::Duplicate, key));
        }
        seen.push(slot);
        match key {
            "room" => {
                check_zone_name(value).map_err(|_| {
                    invalid("room", value, ParseError::Syntax("expected a zone name"))
                })?;
                spec.room = value.to_string();
            }
            "prequeue" => prequeue = Some(instant("prequeue", value)?),
            "start" => start = Some(instant("start", value)?),
            "end" => spec.end = Some(instant("end", value)?),
            "shuffle" => {
                spec.shuffle = match value {
                    "on" => true,
                    "off" => false,
                    _ => {
                        return Err(invalid(
                            "shuffle",
                            value,
                            ParseError::Syntax("expected on or off"),
                        ))
                    }
                }
            }
            "max_active" => spec.max_active = Some(number("max_active", value)?),
            "new_per_minute" => spec.new_per_minute = Some(number("new_per_minute", value)?),
            "grant" | "session" => {
                spec.grant_ms = Some(positive_time(value).map_err(|e| invalid("grant", value, e))?)
            }
            "page" if !value.is_empty() => spec.page = Some(value.to_string()),
            "page" => return Err(invalid("page", value, ParseError::Empty)),
            _ => return Err(named(EventError::Unknown, arg)),
        }
    }
    if spec.room.is_empty() {
        return Err(EventError::NoRoom(spec.name));
    }
    spec.start = start.ok_or_else(|| EventError::NoStart(spec.name.clone()))?;
    spec.prequeue = prequeue.unwrap_or(spec.start);
    if spec.prequeue > spec.start {
        return Err(EventError::PrequeueAfterStart(
            spec.name,
            format_instant(spec.prequeue),
            format_instant(spec.start),
        ));
    }
    if let Some(end) = spec.end.filter(|&end| end <= spec.start) {
        return Err(EventError::EndBeforeStart(
            spec.name,
            format_instant(end),
            format_instant(spec.start),
        ));
    }
    Ok(spec)
}

/// Checks a configuration's events together: every room exists (`is_room`), no name is used
/// twice, and no two events of one room overlap (pre-queue to end).
pub fn check_events(
    events: &[EventSpec],
    is_room: impl Fn(&str) -> bool,
) -> Result<(), EventError> {
    for (i, e) in events.iter().enumerate() {
        if !is_room(&e.room) {
            return Err(EventError::UnknownRoom(e.name.clone(), e.room.clone()));
        }
        for earlier in events.iter().take(i) {
            if earlier.name == e.name {
                return Err(EventError::Twice(e.name.clone()));
            }
            if earlier.room == e.room && earlier.overlaps(e) {
                return Err(EventError::Overlap(
                    earlier.name.clone(),
                    e.name.clone(),
                    e.room.clone(),
                ));
            }
        }
    }
    Ok(())
}
