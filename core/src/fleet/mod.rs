//! A fleet room decided locally ([S12], Cloudflare's data-center design), for
//! `smart_limit_zone ... store=redis sync=TIME`.
//!
//! Every request is decided on the node's own shared memory ([`FleetNode`]); Redis is met once
//! an interval, by one worker per node, in one script call (`script.lua`), and otherwise
//! only to draw one admission from the fleet's pool when the node's own share is used up.
//!
//! - **The line is the fleet's, ordered by arrival.** A ticket carries its first contact's time
//!   (`issued_at`), the same on every node. Nodes report the waiting sessions they saw, with
//!   that time, and Redis keeps the line as one sorted set by arrival: present waiters and,
//!   for `keep` ([S27]), those away (unseen for `presence`), so positions count a place whose
//!   holder stepped away and never grow when it comes back. Each interval's picture gives a
//!   **cursor**: the arrival time of the oldest present waiters the free places can take (a
//!   second set holds the present ones by arrival: a kept place holds no free place). A waiter
//!   whose arrival is at or before the cursor may be admitted wherever it polls, one back from
//!   an absence too; younger ones wait. Two clients who arrived more than an interval apart are
//!   thus let in by arrival order, whichever nodes they poll.
//! - **Active sessions are counted once.** Nodes report the admitted sessions they saw (each at
//!   most once an interval), Redis keeps them in one sorted set by last sight: a client that
//!   moves between nodes is one member.
//! - **Capacity is shared out, never exceeded.** At each interval's first sync the fleet's free
//!   places (max_active - active - reserved) are shared out to nodes by their part of the
//!   waiting polls (Cloudflare: the share of last interval's traffic), a part kept back as the
//!   pool. Grants are reserved until the node's next sync reports what it admitted; a draw from
//!   the pool reserves places atomically. So admissions never exceed `max_active`.
//! - **No request waits for Redis.** A client whose turn it is, on a node whose share is used
//!   up, is told to come back in a moment, and the node asks the pool for as many places as it
//!   turned such clients away (one call in flight per node, in the background); the places it
//!   gets admit the next ones whose turn it is.
//! - **Positions** come from the picture: the whole line while it is at most [`EXACT_LINE`]
//!   (each waiter its own rank), else the fleet's arrival-bucket counts ([`tally`], sent
//!   beside each sync), or samples of the line (rank, arrival) until counts come.
//! - **Flood control** (`flood=`) is paid on the node (its own budget, in the room) and settled
//!   in the sync: the node counts each client key's places, reports the keys that took more
//!   than [`FLOOD_ALLOWANCE`], the script charges the fleet's bucket of each and answers the
//!   keys over it, which every node refuses new places until their retry time (`flood.rs`).
//! - **Redis gone**: each interval without a picture, a node lets in its equal part of the
//!   sessions the last picture saw leaving an interval (so the fleet holds its level), and moves
//!   its cursor on through the picture's line by as many; no request waits for Redis. When
//!   Redis answers again, the reports kept meanwhile (with the time of each sighting) bring the
//!   fleet's picture back at the next sync.
//!
//! Everything here is plain data over a block of memory (like [`crate::room::Room`]), so
//! `cargo test` and the simulator (`sim/`) run the very code nginx runs. [`FleetModel`] is the
//! script's rules in Rust, for the simulator; `tests/fleet_script.rs` holds the two to the
//! same answers.
//!
//! Uses `room` (shared vocabulary), `redis` (replies) and `sync` (the leader).

mod flood;
mod flood_model;
mod fresh;
mod layout;
mod node;
mod parts;
mod report;
mod script;
mod tally_zone;
mod unseen;
mod wire;

pub mod model;
pub mod tally;

#[cfg(test)]
mod tests;

use core::ops::Range;

use layout::{Header, Seen};

use crate::room::Counted;
use crate::sync::STALE_INTERVALS;

pub use model::FleetModel;
pub use script::{draw_reply, picture_reply, Drawn, Fence, FleetScript, SyncAnswer, FLEET_SCRIPT};

/// Most samples of the line a picture carries while the line is longer than [`EXACT_LINE`].
pub const MAX_SAMPLES: usize = 128;
/// A line of at most this many waiters comes whole in the picture (each waiter's arrival and
/// session, in the fleet's order): every waiter is told its own position, the head 1, with no
/// two alike. Its cost: one `ZRANGE` of the line and a reply of about 35 bytes a waiter per
/// sync (about 70 KB per node and interval at the most), and 48 KB of the zone.
pub const EXACT_LINE: usize = 2048;
/// The zone's room for a picture's samples: a whole line or a sampled one.
const SAMPLE_SLOTS: usize = if EXACT_LINE > MAX_SAMPLES {
    EXACT_LINE
} else {
    MAX_SAMPLES
};
/// Places taken on a node since its picture's report whose rank behind the picture's line
/// the node keeps exactly (see `fresh.rs`); those past it are told the last of these ranks.
pub const FRESH_CAP: usize = 1024;
/// Parts per million of an interval's free places shared out to nodes; the rest is the pool.
/// Half: a client whose turn it is on a node whose share is used up waits for a draw from the
/// pool, so a larger pool lets the head of the line in wherever it polls (with 80 % shared,
/// the head polling exhausted nodes watched clients 40 places back go in for 4 s: the
/// ten-minute rehearsal; docs/fleet.md, "The pool's size", has the simulator's figures).
pub const KEEP_PPM: u64 = 500_000;
/// A node's share of an interval is at most this many places per visit it answered since its
/// last sync, and one: a node nobody visited holds no more of the room than it could use, and
/// what it could not stays in the pool. Shared by the nodes they knew, a fleet started into a
/// crowd held half its room on the node that synced first (alone, before it knew the others)
/// for an interval, and the newcomers of the node that synced last waited in an empty room:
/// the rehearsal's first fill took 2.2-2.9 s against 0.25 s once the nodes had met.
pub const SHARE_PER_POLL: u64 = 2;
/// Most sightings one sync carries (admissions first, then active sessions, then waiters; the
/// rest wait in the batch): the script's work per call stays bounded whatever the node kept
/// (after an outage, with a long line), about a millisecond of Redis's time at 100,000
/// waiting (docs/benchmarks.md, "Why a sync's caps are these sizes"). t/273-sync-bounded.t
/// holds every call to these caps (its work, read from MONITOR).
pub const REPORT_CAP: usize = 400;
/// Most waiter sightings of those.
pub const REPORT_WAITERS_CAP: usize = 200;
/// Syncs a leader sends in one interval at most: the first, then more at once while its batch
/// holds what a capped sync left (a long line's sightings keep up, each call stays short).
pub const MAX_SYNCS_PER_INTERVAL: u32 = 16;
/// Flood control: places one client key may take on a node without the node reporting it
/// (most clients take one place; only keys that take more cost the sync anything). At most
/// this many places per key and node are never charged to the fleet's budget.
pub const FLOOD_ALLOWANCE: u64 = 1;
/// Most client keys one sync reports (those that took the most places first; the rest wait
/// for the next sync): one GET and one SET each in the script, so a sync's time grows by
/// about a third at most (docs/benchmarks.md, "Why a sync's caps are these sizes").
pub const FLOOD_REPORT_CAP: usize = 32;
/// Most keys over the fleet's flood budget one sync's answer carries: the reported ones over
/// it, then the others the fleet knows, those refused longest first.
pub const FLOOD_ANSWER_CAP: usize = 64;

/// Spent proofs of work (`challenge=pow`) a node keeps for its next report, and reports at most
/// (the script's SPENT_REPORT); past it, a proof is spent on this node only.
pub const SPENT_REPORT_CAP: usize = 64;

/// Sessions the origin revoked here (`X-Smart-Limit: revoke`) a node keeps for its next report,
/// and reports at most (the script's REVOKED_REPORT): the sync takes each off the fleet's
/// active sessions, so its place is free on every node from the next share-out. Past it (a
/// burst of logouts within one interval), a session's place frees when its window ends.
pub const REVOKE_REPORT_CAP: usize = 64;

/// Proofs spent on other nodes one picture tells of at most (the script's SPENT_ANSWERS).
pub const SPENT_ANSWER_CAP: usize = 256;

/// The ends of expiring sessions one picture carries at most (the script's ENDS): the earliest
/// ones; a node takes an expiring place only once its session's window has ended, and counts
/// those past the last it knows as not yet ended.
pub const ENDS_CAP: usize = 64;

/// The longest the picture looks ahead for sessions about to leave ([`FleetConfig::horizon_ms`],
/// and the sync script's count of them).
pub const HORIZON_MAX_MS: u64 = 10_000;

/// What a sync needs to know of the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetConfig {
    pub interval_ms: u64,
    pub max_active: u64,
    pub active_window_ms: u64,
    pub presence_ms: u64,
    /// How long an absent waiter's arrival stays in the fleet's line ([S27], `keep=`; read
    /// through [`FleetConfig::kept_ms`]): it counts in positions but holds no free place.
    pub keep_ms: u64,
    /// Most waiters in the fleet's line (0: no cap).
    pub max_line: u64,
}

impl FleetConfig {
    /// How long an absent waiter's place lasts: `keep`, never less than `presence` (equal:
    /// `keep=off`, a place goes with its presence, as before places were kept).
    pub fn kept_ms(&self) -> u64 {
        crate::room::rules::kept_ms(self.keep_ms, self.presence_ms)
    }

    pub fn stale_ms(&self) -> u64 {
        self.interval_ms.saturating_mul(STALE_INTERVALS)
    }

    /// How near a picture's end a client whose turn it is waits for the next picture
    /// ([`FleetVerdict::NextPicture`]), before it and after it: a twentieth of the interval, at
    /// most 50 ms, as a pool draw waits (no request waits longer for Redis, slow or hung).
    pub fn picture_edge_ms(&self) -> u64 {
        (self.interval_ms / 20).min(50)
    }

    /// How far ahead the picture counts the sessions about to leave, to tell how fast the line
    /// will move: the interval, or half the active window up to 10 s, whichever is longer.
    pub fn horizon_ms(&self) -> u64 {
        (self.active_window_ms / 2)
            .min(HORIZON_MAX_MS)
            .max(self.interval_ms)
    }

    /// The keys live this long after the room's last sync.
    pub fn key_ttl_ms(&self) -> u64 {
        2 * self
            .kept_ms()
            .max(self.active_window_ms)
            .max(crate::redis::KEY_TTL_FLOOR_MS)
            .max(self.interval_ms.saturating_mul(30))
    }
}

/// One sample of the fleet's line: `rank` waiters stand before the one at `arrival`, whose
/// session is `sid` (known only in a whole line, [`EXACT_LINE`]; 0 in a sampled one).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    pub rank: u64,
    pub arrival: u64,
    pub sid: u64,
}

impl Sample {
    /// Whether this waiter stands before the one of `sid` who arrived at `arrival`, in the
    /// fleet's line: by arrival, then as Redis orders members of one score, by the session's
    /// decimal digits byte by byte (so "10" before "9").
    pub fn before(&self, arrival: u64, sid: u64) -> bool {
        match self.arrival.cmp(&arrival) {
            core::cmp::Ordering::Equal => member_lt(self.sid, sid),
            o => o.is_lt(),
        }
    }
}

/// `a` before `b` as Redis orders sorted-set members of one score: their decimal digits
/// compared byte by byte.
pub fn member_lt(a: u64, b: u64) -> bool {
    fn digits(mut x: u64, buf: &mut [u8; 20]) -> &[u8] {
        let mut i = buf.len();
        loop {
            i -= 1;
            if let Some(d) = buf.get_mut(i) {
                *d = b'0' + (x % 10) as u8;
            }
            x /= 10;
            if x == 0 || i == 0 {
                break;
            }
        }
        buf.get(i..).unwrap_or_default()
    }
    let (mut x, mut y) = ([0u8; 20], [0u8; 20]);
    digits(a, &mut x) < digits(b, &mut y)
}

/// The fleet as one sync reply shows it to one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoomPicture {
    pub fleet_active: u64,
    pub queue_len: u64,
    /// Waiters who arrived at or before this time may be admitted; `u64::MAX`: everyone (and
    /// newcomers walk in), 0: nobody.
    pub cursor: u64,
    /// The cursor without its band: the arrival of the last present waiter the free places
    /// rightly take (`u64::MAX`: everyone, 0: nobody). A kept place of someone away is not
    /// among them ([S27]); the nodes hold the band back until those before it had their turn
    /// (`FleetNode::band_waits`).
    pub rightful: u64,
    /// Admissions granted to this node until its next sync.
    pub quota: u64,
    pub nodes: u64,
    /// The nodes whose report of this window (their sync in it) the picture holds, this
    /// node's included: when they are all `nodes`, it shows every place taken before the
    /// window's tick ([`FleetNode::settled`]); when fewer, the node looks again
    /// ([`FleetNode::look_again`]).
    pub reported: u64,
    pub window_ms: u64,
    /// This interval's free places, before they were shared out.
    pub free: u64,
    /// Active sessions whose window ends within the interval (their places free before the
    /// next picture; the cursor counts them) and within the horizon.
    pub expiring: u64,
    pub leaving: u64,
    /// How many of this node's `quota` places are expiring sessions' (the places in the order
    /// they free: free now, then by their sessions' ends; the other nodes' grants hold the
    /// first ones), and when those sessions' windows end, ms from the picture: every one while
    /// they are at most [`ENDS_CAP`], else that many evenly by rank (the i-th, 1..n, is the end
    /// of the held place of rank floor(i x held / n) - 1), ascending. The node takes a held
    /// place only once it has ended.
    pub held: u64,
    pub ends: Vec<u64>,
    /// The line holds `max_line` waiters: no new place until it shortens.
    pub full: bool,
    /// The fleet's pressure at the interval's look, in doublings (`challenge_bits=auto`:
    /// `challenge::Pressure`'s rule over the whole fleet).
    pub pressure: u8,
    /// Samples of the line by rank: the whole line, with each waiter's session, when
    /// `exact` (at most [`EXACT_LINE`]); else at most [`MAX_SAMPLES`], sessions unknown.
    pub samples: Vec<Sample>,
    pub exact: bool,
    /// Client keys over the fleet's flood budget (at most [`FLOOD_ANSWER_CAP`]).
    pub flood: Vec<FloodOver>,
    /// Proofs of work spent on other nodes since this node's last sync (at most
    /// [`SPENT_ANSWER_CAP`]): refused here from now on.
    pub spent: Vec<SpentProof>,
}

/// A proof of work spent (`challenge=pow`, [S19]), by its key (`challenge::spent_key`): in a
/// report, until when (the node's clock, ms); in a picture, for how long still (`ms`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpentProof {
    pub key: u64,
    pub ms: u64,
}

/// Places a client key took on a node since the node last reported it (flood control).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FloodPlaces {
    pub key: u64,
    pub places: u64,
}

/// A client key over the fleet's flood budget: no new place for it until `retry_ms` from the
/// answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FloodOver {
    pub key: u64,
    pub retry_ms: u64,
}

/// A session seen at `at` (the node's clock, ms).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sighting {
    pub sid: u64,
    pub at: u64,
}

/// A waiting session seen at `at`, who first came at `arrival`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaiterSighting {
    pub sid: u64,
    pub arrival: u64,
    pub at: u64,
}

/// What a node tells the fleet at a sync. Each sighting goes with when it was made, so a
/// report that waited (a sync that failed, given back) does not make a session look more
/// recent than it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    pub polls: u64,
    /// Newcomers that took a place here, and challenges given here, since the last sync
    /// (the fleet's pressure).
    pub asked: u64,
    pub challenged: u64,
    /// Admitted sessions seen (each at most once an interval).
    pub active: Vec<Sighting>,
    /// Sessions this node admitted since its last sync.
    pub admitted: Vec<Sighting>,
    /// Waiting sessions seen (each once per half presence).
    pub waiters: Vec<WaiterSighting>,
    /// Client keys that took more than [`FLOOD_ALLOWANCE`] places since their last report (at
    /// most [`FLOOD_REPORT_CAP`]).
    pub flood: Vec<FloodPlaces>,
    /// Proofs of work spent on this node since the last sync (`ms`: until when).
    pub spent: Vec<SpentProof>,
    /// Sessions the origin revoked on this node since the last sync.
    pub revoked: Vec<u64>,
}

/// A client without a valid admitted ticket, as the node sees it: its session, and its place in
/// the fleet's line (the moment it took it: see [`place_arrival`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiter {
    pub sid: u64,
    pub arrival: u64,
    /// It takes its place now (a first return after the cookie check, or a place gone).
    pub new_place: bool,
}

/// How old a synced room's waiting ticket's `last_seen` may grow before a node seals it again:
/// a quarter of `presence`. (Half, as before, lost the places of clients polling between half
/// a presence and a presence apart: a poll just short of the renewal left the ticket to the
/// next one, more than a presence old. The rehearsal caught it: a client polling every 5 s,
/// `presence=10s`, sent to the tail at position 168 from 10.)
pub fn ticket_renew_ms(presence_ms: u64) -> u64 {
    (presence_ms / 4).max(1)
}

/// Where a waiting ticket stands in the fleet's line: the arrival its place dates from, if it
/// still holds one. A synced room's waiting ticket carries, as its queue number, the moment it
/// took its place (its first return with the ticket), and as `last_seen` when a node last
/// answered it (renewed every [`ticket_renew_ms`] of `presence`); a place unseen for `kept`
/// ([`crate::room::rules::kept_ms`]: `keep=`, [S27]) is gone on every node, as in the central
/// room, so coming back later means the tail. The ticket's `last_seen` lags the client's last
/// answer by less than the renewal, so the place is taken as held for `kept` and that much more:
/// every client that polled within `kept` keeps its place, and one away for up to a renewal
/// longer may too. A queue number that is not such a moment (before the ticket was issued, or
/// ahead of this node's clock by more than the skew allowed) is no place either, unless it is
/// a lottery moment of the event in force (`lottery`: its pre-queue, see [`lottery_arrival`]).
pub fn place_arrival(
    (qnum, issued_at, last_seen): (u64, u64, u64),
    now: u64,
    (presence_ms, kept_ms): (u64, u64),
    skew_ms: u64,
    lottery: Option<Range<u64>>,
) -> Option<u64> {
    let plausible = (qnum >= issued_at && qnum <= now.saturating_add(skew_ms))
        || lottery.is_some_and(|r| r.contains(&qnum));
    let held = now.saturating_sub(last_seen) <= kept_ms + ticket_renew_ms(presence_ms);
    (qnum != 0 && plausible && held).then_some(qnum)
}

/// Whether a waiting ticket that still holds its place ([`place_arrival`]) comes back from an
/// absence: unseen for longer than `presence` and its renewal, so the fleet counted it away
/// ([S27]: the first answer after it says the place was resumed).
pub fn comes_back(last_seen: u64, now: u64, presence_ms: u64) -> bool {
    now.saturating_sub(last_seen) > presence_ms + ticket_renew_ms(presence_ms)
}

/// The start's lottery in a synced room ([S18]): a place taken while an event's pre-queue
/// `[from, to)` (ms) is open dates not from its arrival but from a moment drawn uniformly in
/// the pre-queue, from the operating system's randomness. The fleet's line is ordered by
/// arrival, so the pre-queue's members stand in the order of independent uniform draws: a
/// uniformly random order, the same on every node (the moment travels in the ticket, and the
/// line is one sorted set in Redis), with those in line before the pre-queue opened ahead and
/// those who come after the start behind. Two members drawing the same millisecond are let in
/// at once (the cursor takes both) and ranked by session id. None: no randomness (the place
/// then dates from its arrival).
pub fn lottery_arrival(lottery: Range<u64>) -> Option<u64> {
    let span = lottery.end.checked_sub(lottery.start).filter(|&s| s > 0)?;
    // The remainder's bias is below span / 2^64: nil for any pre-queue.
    Some(lottery.start + crate::util::random::u64().ok()? % span)
}

/// A pool draw to send ([`FleetNode::take_draw`]): the places wanted, and the oldest arrival
/// among the clients they are for (the script keeps a place of the pool for the oldest client
/// a draw found it empty for: its starved mark).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub want: u64,
    pub oldest: u64,
}

/// What the node says to a client without a valid admitted ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetVerdict {
    Admit,
    /// Not yet (its turn, but the node's share is used up: `eta_secs` is `Some(0)`, come back
    /// in a moment; [`FleetNode::take_draw`] then asks the pool).
    Wait {
        position: u64,
        queue_len: u64,
        eta_secs: Option<u64>,
        /// What the position counts: every place taken ahead that a picture can show, once
        /// the client took its place an interval before the picture's tick or earlier
        /// ([`FleetNode::settled`]); before that, an estimate that also reckons newcomers no
        /// picture shows yet, and may be too near the head ([S27], `room::told`).
        counted: Counted,
    },
    /// No place left in the fleet's line (`max_line`) for a client taking one.
    LineFull {
        queue_len: u64,
    },
    /// No picture yet (the node has not met the fleet since it started): the request waits
    /// for the node's first sync ([`FleetNode::first_sync_pending`]); only when that fails
    /// does the zone's on_error policy decide.
    Unknown,
    /// Its turn, with no place it may take now, as the node's picture ends: the request
    /// waits for the next picture ([`FleetNode::picture_window`] changes) and is decided by it
    /// ([`FleetNode::decide`]), at most [`FleetConfig::picture_edge_ms`] past the picture's
    /// end.
    NextPicture,
}

/// The node's side of a synced room, laid over a block of shared memory; build one per use with
/// [`FleetNode::attach`] while holding the block's lock.
pub struct FleetNode<'m> {
    hdr: &'m mut Header,
    samples: &'m mut [Sample],
    /// The arrival-bucket tally since the last tally call, and the counts it brought.
    tally: &'m mut [tally_zone::TallyEntry],
    counts: &'m mut [tally::Row],
    seen: &'m mut [Seen],
    active: &'m mut [Sighting],
    admitted: &'m mut [Sighting],
    waiters: &'m mut [WaiterSighting],
    /// Flood control: places taken per client key since its last report, and the keys the
    /// fleet said are over its budget (until when).
    flood_taken: &'m mut [flood::Taken],
    flood_over: &'m mut [flood::Over],
}

/// The block is not a synced room of this layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("zone memory does not hold a synced room of this module's layout")]
pub struct NotAFleetNode;

/// The node's figures, for metrics and the control endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FleetSnapshot {
    pub fleet_active: u64,
    pub queue_len: u64,
    pub quota_left: u64,
    pub nodes: u64,
    pub admitted: u64,
    /// Pool draws sent, and the places they got.
    pub draws: u64,
    pub draws_granted: u64,
    /// Sightings not reported for want of room in the batches (zone memory), and changes of
    /// the line's counts not kept for want of room in the tally table.
    pub dropped: u64,
    pub syncs: u64,
    pub sync_failures: u64,
    pub sync_age_ms: Option<u64>,
    /// The fleet's pressure in the picture, in doublings (None: no picture yet).
    pub pressure: Option<u8>,
}

// ------------------------------------------------------------------------------ Redis
