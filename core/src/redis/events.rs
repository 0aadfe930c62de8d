//! The fleet's table of events made at run time ([S18], `event::runtime`), in Redis: read
//! with `HMGET`, changed by `events.lua` only when nobody changed it since it was read.

use super::resp::Value;
use super::script::{script_call, sha_of, Form, ReplyError};

pub const EVENTS_SCRIPT: &str = include_str!("events.lua");

/// The table as Redis holds it: its version (0: never written) and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetTable {
    pub version: u64,
    pub text: String,
}

/// What a change came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    Written(FleetTable),
    /// Another node changed the table first: here it is now.
    Stale(FleetTable),
}

/// The commands for one room's table.
#[derive(Debug, Clone)]
pub struct EventsKey {
    key: String,
    sha: String,
}

impl EventsKey {
    /// `prefix` and `room` as for the room's other keys (same hash tag).
    pub fn new(prefix: &str, room: &str) -> EventsKey {
        EventsKey {
            key: format!("{prefix}:{{{room}}}:events"),
            sha: sha_of(EVENTS_SCRIPT),
        }
    }

    pub fn get(&self) -> Vec<u8> {
        ::redis::cmd("HMGET")
            .arg(&self.key)
            .arg("v")
            .arg("t")
            .get_packed_command()
    }

    /// Writes `text` if the table is still at `version`.
    pub fn put(&self, form: Form, version: u64, text: &str) -> Vec<u8> {
        let mut cmd = script_call(form, &self.sha, EVENTS_SCRIPT);
        cmd.arg(1).arg(&self.key).arg(version).arg(text);
        cmd.get_packed_command()
    }
}

fn text_of(v: &Value) -> Result<String, ReplyError> {
    match v {
        Value::Nil => Ok(String::new()),
        Value::Bulk(b) => String::from_utf8(b.clone()).map_err(|_| ReplyError::Shape("text")),
        _ => Err(ReplyError::Shape("events text")),
    }
}

fn version_of(v: &Value) -> Result<u64, ReplyError> {
    match v {
        Value::Nil => Ok(0),
        Value::Int(n) => u64::try_from(*n).map_err(|_| ReplyError::Shape("version")),
        Value::Bulk(b) => core::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(ReplyError::Shape("version")),
        _ => Err(ReplyError::Shape("events version")),
    }
}

fn server_error(v: &Value) -> Option<ReplyError> {
    match v {
        Value::Error(e) if e.starts_with(b"NOSCRIPT") => Some(ReplyError::NoScript),
        Value::Error(_) => Some(ReplyError::Server(v.error_text().unwrap_or_default())),
        _ => None,
    }
}

/// The reply of [`EventsKey::get`].
pub fn get_reply(v: &Value) -> Result<FleetTable, ReplyError> {
    if let Some(e) = server_error(v) {
        return Err(e);
    }
    match v {
        Value::Array(a) if a.len() == 2 => Ok(FleetTable {
            version: version_of(&a[0])?,
            text: text_of(&a[1])?,
        }),
        _ => Err(ReplyError::Shape("events table")),
    }
}

/// The reply of [`EventsKey::put`].
pub fn put_reply(v: &Value) -> Result<Put, ReplyError> {
    if let Some(e) = server_error(v) {
        return Err(e);
    }
    match v {
        Value::Array(a) if a.len() == 3 => {
            let table = FleetTable {
                version: version_of(&a[1])?,
                text: text_of(&a[2])?,
            };
            match a[0] {
                Value::Int(1) => Ok(Put::Written(table)),
                Value::Int(0) => Ok(Put::Stale(table)),
                _ => Err(ReplyError::Shape("events put")),
            }
        }
        _ => Err(ReplyError::Shape("events put")),
    }
}
