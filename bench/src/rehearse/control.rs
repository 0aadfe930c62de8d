//! `--control URL`: the room's settings read from a node's `smart_limit_control` endpoint
//! (its JSON: store, `max_active`, admission, `presence_ms`, `active_window_ms`,
//! `timeout_ms`, `sync_ms`), so a rehearsal against staging nodes checks the room they
//! really run rather than what the operator remembered to type. Settings given as flags win.

use std::time::Duration;

use serde::Deserialize;

use crate::args::parse_url;
use crate::history::{Mode, Run};
use crate::http::Client;

/// One room of the endpoint's answer (only what the checker needs).
#[derive(Debug, Deserialize)]
struct Room {
    room: String,
    store: String,
    max_active: u64,
    admission: String,
    admission_seconds: u64,
    presence_ms: u64,
    active_window_ms: u64,
    timeout_ms: u64,
    sync_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Rooms {
    rooms: Vec<Room>,
}

/// What the endpoint says of the room: a run's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub mode: Mode,
    pub max_active: u64,
    pub session_ms: Option<u64>,
    pub grant_ms: Option<u64>,
    pub active_window_ms: u64,
    pub presence_ms: u64,
    pub timeout_ms: u64,
    pub sync_ms: u64,
}

/// Reads room `room` out of the endpoint's JSON.
pub fn settings(json: &str, room: &str) -> Result<Settings, String> {
    let doc: Rooms = serde_json::from_str(json)
        .map_err(|e| format!("the control endpoint's answer is not its JSON: {e}"))?;
    let r = doc
        .rooms
        .into_iter()
        .find(|r| r.room == room)
        .ok_or_else(|| format!("the control endpoint has no room '{room}'"))?;
    let mode = match (r.store.as_str(), r.sync_ms) {
        ("shm", _) => Mode::Shm,
        ("redis", Some(_)) => Mode::Sync,
        ("redis", None) => Mode::Redis,
        (other, _) => return Err(format!("the control endpoint names store '{other}'")),
    };
    let ms = r.admission_seconds.saturating_mul(1000);
    let (session_ms, grant_ms) = match r.admission.as_str() {
        "session" => (Some(ms), None),
        "grant" => (None, Some(ms)),
        other => return Err(format!("the control endpoint names admission '{other}'")),
    };
    Ok(Settings {
        mode,
        max_active: r.max_active,
        session_ms,
        grant_ms,
        active_window_ms: r.active_window_ms,
        presence_ms: r.presence_ms,
        timeout_ms: if mode == Mode::Shm { 0 } else { r.timeout_ms },
        sync_ms: r.sync_ms.unwrap_or(0),
    })
}

/// GETs `url?room=ROOM` and reads the room's settings.
pub fn fetch(url: &str, room: &str) -> Result<Settings, String> {
    let target = parse_url(url)?;
    let mut http = Client::new(&target, None, Duration::from_secs(5));
    let base = if target.base.is_empty() {
        "/"
    } else {
        &target.base
    };
    let res = http
        .get(&format!("{base}?room={room}"), "application/json", None)
        .map_err(|e| format!("--control {url}: {e}"))?;
    if res.status != 200 {
        return Err(format!("--control {url}: answered {}", res.status));
    }
    settings(&String::from_utf8_lossy(&res.body), room).map_err(|e| format!("--control {url}: {e}"))
}

/// Takes the endpoint's settings into `run`, except those `given` as flags.
pub fn apply(run: &mut Run, s: &Settings, given: impl Fn(&str) -> bool) {
    if !given("--mode") {
        run.mode = s.mode;
    }
    if !given("--max-active") {
        run.max_active = s.max_active;
    }
    if !given("--session") && !given("--grant") {
        run.session_ms = s.session_ms;
        run.grant_ms = s.grant_ms;
    }
    if !given("--active-window") {
        run.active_window_ms = s.active_window_ms;
    }
    if !given("--presence") {
        run.presence_ms = s.presence_ms;
    }
    if !given("--timeout") {
        run.timeout_ms = s.timeout_ms;
    }
    if !given("--sync") {
        run.sync_ms = s.sync_ms;
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

    #[test]
    fn reads_the_room_it_is_asked_for() {
        let s = settings(ANSWER, "shop").expect("the room");
        assert_eq!(
            s,
            Settings {
                mode: Mode::Sync,
                max_active: 40,
                session_ms: Some(5000),
                grant_ms: None,
                active_window_ms: 5000,
                presence_ms: 10_000,
                timeout_ms: 900,
                sync_ms: 1000,
            }
        );
        let o = settings(ANSWER, "other").expect("the other room");
        assert_eq!(
            (o.mode, o.grant_ms, o.timeout_ms),
            (Mode::Shm, Some(600_000), 0)
        );
        assert!(settings(ANSWER, "none").is_err());
        assert!(settings("<html>", "shop").is_err());
    }

    #[test]
    fn flags_given_win() {
        let s = settings(ANSWER, "shop").expect("the room");
        let mut run = crate::rehearse::args::parse(
            &"--node http://127.0.0.1:1/ --out h --max-active 7 --grant 60"
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>(),
        )
        .expect("parses")
        .run;
        apply(&mut run, &s, |f| f == "--max-active" || f == "--grant");
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
