//! A rehearsal's history ([S23]): what every client sent and was answered, the faults and the
//! nodes' own counts, one JSON object a line. `smart-limit-bench rehearse` writes it;
//! `smart-limit-bench check` reads it against the room's rules.
//!
//! Times are milliseconds since the run's start (the driver's monotonic clock), so that a
//! history reads the same whatever the wall clock did (a fault may step it on a node).
//!
//! The first line is a [`Record::Run`]; then, in any order, requests, faults and metric samples;
//! the driver writes the [`Record::Client`] lines last (what each client meant to do).

use serde::{Deserialize, Serialize};

/// How the room keeps its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One node, the room in its shared memory.
    Shm,
    /// Every decision one script call to the central room in Redis.
    Redis,
    /// `sync=`: each node decides on its own picture of the fleet's room.
    Sync,
}

/// The order in which the room admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// By arrival (the time the client took its place).
    Fifo,
    /// An event's pre-queue, drawn at the event's start: arrivals before `start_ms` in a random
    /// order, later ones behind them by arrival.
    Lottery,
}

/// What a client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A browser: the HTML page, polled at the page's refresh (some slower), some abandon.
    Person,
    /// A program asking for JSON, at the refresh the answer gives.
    Program,
    /// A script that takes a new ticket on every request (never keeps a cookie).
    Minter,
}

/// What an answer meant for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The cookie check (`307` and a ticket): a first contact, or a ticket the room no longer
    /// knew (a client that had a place and gets this was dropped).
    New,
    /// Waiting: `503` with a position (`pos`) and the line's length (`qlen`).
    Waiting,
    /// Passed to the origin (`200`): admitted, or an admitted session's request.
    Admitted,
    /// `429`: flood control or a session's request rate.
    Throttled,
    /// Any other answer (`5xx` without a position, a closed room, ...).
    Other,
    /// No answer: connection refused or reset, timeout, garbage.
    Error,
}

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Record {
    /// The run's settings (the first line).
    Run(Run),
    /// One request and its answer.
    Req(Req),
    /// A fault injected.
    Fault(Fault),
    /// A node's own counts, read from its metrics endpoint.
    Metrics(Metrics),
    /// What a client meant to do (written at the end).
    Client(ClientPlan),
}

/// The run's settings: the room's rules the checker holds the history to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub mode: Mode,
    pub order: Order,
    /// Nodes at the start (more may join: see faults).
    pub nodes: u32,
    pub max_active: u64,
    /// `session=` (an admitted client stays admitted this long after its last request), or
    /// none when the room uses `grant=`.
    pub session_ms: Option<u64>,
    /// `grant=` (admitted this long after admission), or none with `session=`.
    pub grant_ms: Option<u64>,
    /// `active_window=`: an admitted session counts for `max_active` while seen within it.
    pub active_window_ms: u64,
    /// `presence=`: a waiting client not seen for this long is absent (skipped at the head).
    pub presence_ms: u64,
    /// `keep=` ([S27]): an absent waiting client's place is kept this long (0, as in histories
    /// from before keep=, or less than `presence_ms`: a place goes with its presence).
    #[serde(default)]
    pub keep_ms: u64,
    /// `timeout=` of the Redis stores (0 for `shm`).
    pub timeout_ms: u64,
    /// `sync=` interval (0 unless `mode` is `sync`).
    pub sync_ms: u64,
    /// The waiting page's refresh: how often a person polls (unless slower).
    pub refresh_ms: u64,
    /// For `order = lottery`: the event's start (ms since the run's start).
    pub start_ms: Option<u64>,
    /// Duration of the run (ms).
    pub duration_ms: u64,
}

impl Run {
    /// How long a quiet waiting client's place lasts: `keep`, never less than `presence`.
    pub fn kept_ms(&self) -> u64 {
        self.keep_ms.max(self.presence_ms)
    }
}

/// One request and what came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Req {
    pub client: u64,
    pub kind: Kind,
    /// The node asked (index into the run's nodes, joined ones after).
    pub node: u32,
    /// Sent and answered (ms since the start).
    pub sent: u64,
    pub done: u64,
    /// HTTP status; 0 when no answer came.
    pub status: u16,
    pub outcome: Outcome,
    /// The position told (waiting answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pos: Option<u64>,
    /// The line's length told (waiting answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qlen: Option<u64>,
    /// When the answer asked the client back (ms): the page's refresh, or the JSON's
    /// `refresh_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_ms: Option<u64>,
    /// Whether the request carried a ticket.
    pub ticket: bool,
    /// Whether the answer set a new ticket (`Set-Cookie`): an admitted session's check-in
    /// moves only when its ticket is sealed again, at most every tenth of the session.
    #[serde(default)]
    pub renewed: bool,
}

/// A fault injected at `at` (until `until`, for those that last).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// `join`, `restart`, `reload`, `upgrade`, `redis-kill`, `redis-slow`, `clock-step`.
    pub what: String,
    /// The node it hit (none for Redis faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    pub at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

/// A node's counts at `at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub node: u32,
    pub at: u64,
    /// `smart_limit_active_sessions` (the node's view of the room's).
    pub active: u64,
    /// `smart_limit_queue_length`.
    pub queue: u64,
}

/// What one client meant to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientPlan {
    pub client: u64,
    pub kind: Kind,
    /// When it stopped polling on purpose while waiting (ms), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned_at: Option<u64>,
    /// How often it polls while waiting (ms): the refresh, or slower.
    pub poll_ms: u64,
    /// A phone ([S27]): when it stepped away while waiting and for how long (ms), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub away: Option<(u64, u64)>,
}

impl Record {
    /// One line of JSON (no newline).
    pub fn to_line(&self) -> String {
        // Serializing these plain structs cannot fail; an empty object would be skipped.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// Parses one line; an error names what is wrong.
    pub fn from_line(line: &str) -> Result<Record, serde_json::Error> {
        serde_json::from_str(line)
    }
}
