//! `--control URL`: the room's settings read from a node's `smart_limit_control` endpoint
//! (its JSON: store, `max_active`, admission, `presence_ms`, `active_window_ms`,
//! `timeout_ms`, `sync_ms`), so a rehearsal against staging nodes checks the room they
//! really run rather than what the operator remembered to type. Settings given as flags win.

use std::time::Duration;

use serde::Deserialize;

use crate::args::{parse_url, UrlError};
use crate::history::{Mode, Run};
use crate::http::Client;

/// One room of the endpoint's answer (only what the checker needs).
#[derive(Debug, Deserialize)]
pub struct Room {
    room: String,
    store: String,
    max_active: u64,
    admission: String,
    admission_seconds: u64,
    presence_ms: u64,
    /// `keep=` in force (absent from nodes older than [S27]: places went with presence).
    #[serde(default)]
    keep_ms: u64,
    active_window_ms: u64,
    timeout_ms: u64,
    sync_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Rooms {
    rooms: Vec<Room>,
}

/// Why the control endpoint's settings could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("the control endpoint's answer is not its JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("the control endpoint has no room '{0}'")]
    NoRoom(String),
    #[error("the control endpoint names admission '{0}'")]
    Admission(String),
    #[error("the control endpoint names store '{0}'")]
    Store(String),
    #[error("--control {url}: {source}")]
    Url { url: String, source: UrlError },
    #[error("--control {url}: {source}")]
    Http { url: String, source: std::io::Error },
    #[error("--control {url}: answered {status}")]
    Status { url: String, status: u16 },
    #[error("--control {url}: {source}")]
    Room {
        url: String,
        source: Box<ControlError>,
    },
}

/// Reads room `room` out of the endpoint's JSON, its store and admission checked.
fn room_of(json: &str, room: &str) -> Result<Room, ControlError> {
    let doc: Rooms = serde_json::from_str(json)?;
    let r = doc
        .rooms
        .into_iter()
        .find(|r| r.room == room)
        .ok_or_else(|| ControlError::NoRoom(room.to_string()))?;
    mode_of(&r)?;
    if r.admission != "session" && r.admission != "grant" {
        return Err(ControlError::Admission(r.admission));
    }
    Ok(r)
}

/// The store mode the room runs: shared memory, central Redis, or synced.
fn mode_of(r: &Room) -> Result<Mode, ControlError> {
    match (r.store.as_str(), r.sync_ms) {
        ("shm", _) => Ok(Mode::Shm),
        ("redis", Some(_)) => Ok(Mode::Sync),
        ("redis", None) => Ok(Mode::Redis),
        (other, _) => Err(ControlError::Store(other.to_string())),
    }
}

/// GETs `url?room=ROOM` and reads the room there.
pub fn fetch(url: &str, room: &str) -> Result<Room, ControlError> {
    let target = parse_url(url).map_err(|source| ControlError::Url {
        url: url.to_string(),
        source,
    })?;
    let mut http = Client::new(&target, None, Duration::from_secs(5));
    let base = if target.base.is_empty() {
        "/"
    } else {
        &target.base
    };
    let res = http
        .get(&format!("{base}?room={room}"), "application/json", None)
        .map_err(|source| ControlError::Http {
            url: url.to_string(),
            source,
        })?;
    if res.status != 200 {
        return Err(ControlError::Status {
            url: url.to_string(),
            status: res.status,
        });
    }
    room_of(&String::from_utf8_lossy(&res.body), room).map_err(|e| ControlError::Room {
        url: url.to_string(),
        source: Box::new(e),
    })
}

/// Takes the room's settings into `run`, except those `given` as flags.
pub fn apply(run: &mut Run, r: &Room, given: impl Fn(&str) -> bool) {
    let mode = mode_of(r).unwrap_or(run.mode);
    if !given("--mode") {
        run.mode = mode;
    }
    if !given("--max-active") {
        run.max_active = r.max_active;
    }
    if !given("--session") && !given("--grant") {
        let ms = Some(r.admission_seconds.saturating_mul(1000));
        (run.session_ms, run.grant_ms) = match r.admission.as_str() {
            "session" => (ms, None),
            _ => (None, ms),
        };
    }
    if !given("--active-window") {
        run.active_window_ms = r.active_window_ms;
    }
    if !given("--presence") {
        run.presence_ms = r.presence_ms;
    }
    if !given("--keep") {
        run.keep_ms = r.keep_ms;
    }
    if !given("--timeout") {
        run.timeout_ms = if mode == Mode::Shm { 0 } else { r.timeout_ms };
    }
    if !given("--sync") {
        run.sync_ms = r.sync_ms.unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"{"rooms":[{"room":"other","store":"shm","max_active":1,
        "admission":"grant","admission_seconds":600,"presence_ms":20000,
        "active_window_ms":60000,"timeout_ms":200,"sync_ms":null},
        {"room":"shop","store":"redis","mode":"fifo","max_active":40,"admission":"session",
        "admission_seconds":5,"presence_ms":10000,"active_window_ms":5000,"timeout_ms":900,
        "sync_ms":1000,"up":true,"counters":null,"events":[]}],"updated_at":1}"#;

    fn run_of(flags: &str) -> Run {
        let argv = format!("--node http://127.0.0.1:1/ --out h {flags}");
        let argv: Vec<String> = argv.split_whitespace().map(str::to_string).collect();
        crate::rehearse::args::parse(&argv).expect("parses").run
    }

    #[test]
    fn reads_the_room_it_is_asked_for() {
        let mut run = run_of("--max-active 1 --grant 1");
        apply(
            &mut run,
            &room_of(ANSWER, "shop").expect("the room"),
            |_| false,
        );
        assert_eq!((run.mode, run.max_active), (Mode::Sync, 40));
        assert_eq!((run.session_ms, run.grant_ms), (Some(5000), None));
        assert_eq!((run.active_window_ms, run.presence_ms), (5000, 10_000));
        assert_eq!((run.timeout_ms, run.sync_ms), (900, 1000));
        apply(
            &mut run,
            &room_of(ANSWER, "other").expect("the room"),
            |_| false,
        );
        assert_eq!(
            (run.mode, run.grant_ms, run.timeout_ms, run.sync_ms),
            (Mode::Shm, Some(600_000), 0, 0)
        );
        assert!(room_of(ANSWER, "none").is_err());
        assert!(room_of("<html>", "shop").is_err());
        assert!(room_of(&ANSWER.replace("\"shm\"", "\"disk\""), "other").is_err());
    }

    #[test]
    fn flags_given_win() {
        let mut run = run_of("--max-active 7 --grant 60");
        let given = |f: &str| f == "--max-active" || f == "--grant";
        apply(&mut run, &room_of(ANSWER, "shop").expect("the room"), given);
        assert_eq!(
            (run.max_active, run.grant_ms, run.session_ms),
            (7, Some(60_000), None)
        );
        assert_eq!(
            (run.mode, run.presence_ms, run.sync_ms),
            (Mode::Sync, 10_000, 1000)
        );
    }
}
