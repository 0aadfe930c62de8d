//! The waiting answer's bodies (SPEC S7, §3): a self-refreshing HTML page for people and a
//! JSON document for programs, plus the small content-negotiation helpers that pick between
//! them (`Accept`) and between English and Japanese (`Accept-Language`).
//!
//! The default page has no external assets (a waiting room must work when the origin is the
//! thing that is overloaded) and needs no JavaScript (it must work on any browser): it
//! refreshes itself with `<meta http-equiv="refresh">`. Its small inline scripts only add to
//! that: a countdown before an event's start, the proof-of-work solver, and the background
//! script that keeps polling in a hidden tab and tells the person when the turn has come
//! (`builtin.rs`). A branded page can replace it through a template with
//! `{{placeholder}}`s; every substituted value is HTML-escaped.
//!
//! Pages are prepared once ([`Template`]: the text cut at its placeholders) and a request
//! only writes into an [`Out`]: no allocation and no formatting machinery on the poll path.
//!
//! Header parsing works on raw bytes from the client: nothing here panics on any input.

mod accept;
mod builtin;
mod fetch;
mod invite;
mod json;
pub mod refresh;
mod solver;
mod template;
mod text;

#[cfg(test)]
mod tests;

pub use accept::{pick_lang, wants_json};
pub use builtin::{html_max_len, prepare_builtin, render_html, write_html};
pub use fetch::Fetch;
pub use invite::{invite_max_len, write_invite_html, write_invite_json};
pub use json::{json_max_len, render_json, write_json};
pub use template::{check_template, Template};
pub use text::eta_text;

/// Where the visitor stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewStatus {
    /// In the queue.
    Waiting,
    /// Let in (the page then just reloads into the site).
    Admitted,
    /// The room admits nobody right now (e.g. store down with `on_error=closed`).
    Closed,
    /// Flood control: the client's network takes places too fast; it gets one in a moment.
    Throttled,
    /// A scheduled event's pre-queue: the client holds a place; the order is drawn at the
    /// start (`starts_at`).
    Prequeue,
    /// `challenge=pow`: the client takes its place once it brings a proof of work for the
    /// seed it is given (`challenge`).
    Challenge,
}

impl ViewStatus {
    /// The wire name: "waiting", "admitted" or "closed".
    pub fn as_str(self) -> &'static str {
        match self {
            ViewStatus::Waiting => "waiting",
            ViewStatus::Admitted => "admitted",
            ViewStatus::Closed => "closed",
            ViewStatus::Throttled => "throttled",
            ViewStatus::Prequeue => "prequeue",
            ViewStatus::Challenge => "challenge",
        }
    }
}

/// Everything the waiting answer shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitView<'a> {
    /// Room name.
    pub room: &'a str,
    /// Status of this visitor.
    pub status: ViewStatus,
    /// 1-based position in the queue, None if unknown.
    pub position: Option<u64>,
    /// Number of sessions waiting in the room.
    pub queue_len: u64,
    /// Estimated wait in seconds, None if unknown.
    pub eta_secs: Option<u64>,
    /// Seconds until the page refreshes (and the `Retry-After` value).
    pub refresh_secs: u64,
    /// When this view was computed, unix seconds.
    pub updated_at: u64,
    /// A scheduled event's start (unix seconds), while its pre-queue is open.
    pub starts_at: Option<u64>,
    /// `challenge=pow`: the seed to solve (base64url) and its difficulty in bits.
    pub challenge: Option<([u8; crate::challenge::SEED_CHARS], u8)>,
    /// [S28] The admission token of an admitted answer (`smart_limit_token_key`).
    pub token: Option<&'a str>,
    /// [S27] The client came back to its kept place after an absence (its first answer since).
    pub resumed: bool,
}

/// Language of the HTML page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// English (the default).
    En,
    /// Japanese.
    Ja,
}

// ---------------------------------------------------------------------------------------
// Content negotiation
// ---------------------------------------------------------------------------------------
