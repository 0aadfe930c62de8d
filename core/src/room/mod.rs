//! One waiting room's state in a flat block of memory, and the queue rules that act on it.
//!
//! The block lives in an nginx shared-memory zone, mapped by every worker of a node, so it holds
//! no pointers: only numbers and indices. The same code runs over a `Vec` in `cargo test`.
//!
//! What the block holds:
//! - the waiting line: a ring of slots addressed by queue number (`qnum % ring_len`); the ticket
//!   carries its qnum, so finding a client's place is O(1). A Fenwick tree over the ring counts
//!   the live places, so a position is the number of live places ahead, in O(log n), and the
//!   head (the first live place) is found in O(log n) too ([S16]);
//! - the places' last sight again, in a tree over the ring (`sight`): the first present place
//!   (the head) and the absent places are found in O(log n), so a place unseen for `presence`
//!   stops counting at once, wherever it stands, even before it is removed ([S6], [S15]);
//! - the admitted sessions seen recently: a chained hash table (session id -> entry) whose
//!   entries also sit on a list ordered by last sight; the ones unseen for `active_window` fall
//!   off its front, and a fence `max_active` entries from its back tells in O(1) whether the
//!   room is full, however many absent ones wait to be removed; each entry also holds its
//!   session's request-rate bucket;
//! - flood control: rate buckets of client addresses (by a hash of the key), in a
//!   set-associative table, so one address cannot take places faster than its rate ([S15]);
//! - cumulative counters for metrics, and the figures the estimated wait is computed from.
//!
//! All functions take `now` (unix milliseconds) from the caller: the rules never read a clock.
//! Every operation is O(log n) or better and removes at most a fixed number of absent places
//! and sessions ([`EXPIRE_STEP`] of each), however many went absent at once ([S20]).

mod event;
mod flood;
mod layout;
mod line;
mod sessions;
mod sight;
mod spent;
mod table;

pub mod gcra;
pub mod poll;
pub mod rules;
pub mod told;

#[cfg(test)]
mod tests;

use layout::{Entry, EventTable, FloodEntry, Header, Sight, Slot, SpentEntry};

pub use event::{EventNow, PrequeueState, SHUFFLE_STEP};
pub use flood::flood_hash;
pub use layout::{capacity_for, LayoutError, BYTES_PER_SESSION, LAYOUT_VERSION};
pub use line::EXPIRE_STEP;

/// Cumulative counters (never decrease), exported as Prometheus counters.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Sessions let in from the line (or at once when nobody waited).
    pub admitted: u64,
    /// Clients that took a place at the tail.
    pub queued: u64,
    /// Requests passed on a valid admitted ticket.
    pub passed: u64,
    /// Requests let through by a bypass rule or passthrough mode.
    pub bypassed: u64,
    /// Waiting answers given (each poll of a waiting client counts).
    pub waited: u64,
    /// Requests refused: room full, closed, or zone out of memory.
    pub rejected: u64,
    /// Waiting clients that lost their place by being absent longer than `keep` (`presence`
    /// with `keep=off`).
    pub expired: u64,
    /// Admitted sessions ended by the origin (revoke).
    pub revoked: u64,
    /// Store errors (Redis unreachable, bad reply, timeout).
    pub store_errors: u64,
    /// First contacts: clients without a ticket, given one and sent back for it.
    pub arrivals: u64,
    /// Clients refused a place by flood control (their address took places too fast).
    pub throttled: u64,
    /// Requests of admitted sessions over the session request rate.
    pub session_limited: u64,
    /// Polls of a waiting ticket answered without the store (polled faster than a browser).
    pub fast_polls: u64,
    /// `challenge=pow`: clients that would have taken a place given a proof of work to solve
    /// first (no place yet).
    pub challenged: u64,
    /// `challenge=pow`: proofs refused (another ticket's seed, unsolved, too easy, malformed).
    pub proofs_refused: u64,
}

/// What a waiting (not admitted) client asked the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visit {
    /// The session id from a valid ticket (never 0). A session's place is found by it.
    pub sid: u64,
    /// The queue number the ticket shows (0 = none: the client had no place yet). The room
    /// answers with the place's true number; a ticket that shows another gets a new one.
    pub qnum: u64,
    /// A number in 0..u32::MAX drawn per request, used only by the lottery mode.
    pub draw: u32,
    /// Flood control: the hash of the client's address key, when taking a place must be paid
    /// from that address's budget (a client without a place yet). None: no check.
    pub flood_key: Option<u64>,
    /// When the client first came (its ticket's `issued_at`, ms): the fleet's line is ordered by
    /// it (`sync=`); a room in one place orders by queue number instead.
    pub arrival: u64,
    /// [S29] A page's sub-resource on its page pass: a session admitted and still active is let
    /// in as it is (the page's other sub-resources, one person's one place), never admitted a
    /// second time nor given a place in line. Any other visit of an admitted session (a user
    /// key's second device) is decided as a visit without a place.
    pub page: bool,
}

impl Visit {
    /// Whether this visit, when it holds no place and its session is admitted and still
    /// active, is let in as it is: never admitted a second time nor given a place in line.
    /// A page's sub-resource on its page pass ([`Visit::page`]); or a visit on a waiting
    /// ticket, whose place only the session's own admission can have ended: the same person
    /// again (two tabs opened at once on one waiting ticket both reach the store at its
    /// turn; on `sync=` the second took a second place, t/355's visitor counted twice). Every
    /// store asks this (the shm room, the central script's op "page", a synced node); a
    /// visit without a ticket's place (a user key's second device) takes the line as before.
    pub fn follows_admission(&self) -> bool {
        self.page || self.qnum != 0
    }
}

/// The room's answer to a waiting client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let in now: issue an admitted ticket.
    Admit { sid: u64 },
    /// Keep waiting at this place.
    Wait(Place),
    /// No place could be given: the line is full (zone memory) or the room is closed.
    Refuse(Refusal),
    /// Flood control: the client's address takes places too fast; no place this time, ask
    /// again after `retry_ms`.
    Throttled { retry_ms: u64, queue_len: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub sid: u64,
    pub qnum: u64,
    /// 1-based; 0 when the mode has no order (everyone waits in `queue_all`, lottery).
    pub position: u64,
    pub queue_len: u64,
    /// Estimated wait in seconds, when the line has moved recently enough to tell.
    pub eta_secs: Option<u64>,
    /// The client came back to its kept place after an absence ([S27]): its first answer
    /// after the absence says so.
    pub resumed: bool,
    /// What the position counts of the places taken ahead: which floor the ticket keeps of it
    /// ([`told`]).
    pub counted: Counted,
}

/// What a waiting answer's position counts of the places taken ahead ([S27], [`told`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Every one: never too near the head, too far back at most (by let-ins no picture
    /// showed yet). Every store's position but a synced room's newcomer's.
    All,
    /// A synced room's newcomer no picture shows yet: the places `seen` taken ahead (in a
    /// picture, or on this node), and a reckoning of the other nodes' newcomers since,
    /// which may be too near the head or too far back.
    Estimate { seen: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The line has no free slot (zone memory).
    LineFull { queue_len: u64 },
    /// The room is closed (mode `reject`).
    Closed,
    /// `challenge=pow`: the proof the client brought was spent already on the fleet (the
    /// central room records each spent proof; see `redis::SpentProof`).
    ProofSpent { queue_len: u64 },
}

/// What became of a request on a valid admitted ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassVerdict {
    /// It passes, counted as active.
    Counted,
    /// It passes, but the table had no room to count it (zone memory).
    Uncounted,
    /// Over the session's request rate: not now, again after `retry_ms`.
    Limited { retry_ms: u64 },
    /// The room is closed (mode `reject`): admitted tickets are turned away too.
    Closed,
    /// [S28] The origin revoked this admission on this node: the ticket or token is replayed;
    /// its client is a new user.
    Revoked,
}

/// Figures from a Redis reply, for [`Room::mirror_remote`]; None leaves one as it was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mirror {
    pub queue_len: Option<u64>,
    pub active: Option<u64>,
    pub mode_override: Option<u32>,
    /// The Redis clock (µs) of the reply: later replies have larger versions.
    pub version: u64,
}

/// A read-only picture of the room for metrics and status pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub queue_len: u64,
    pub active: u64,
    pub oldest_wait_ms: u64,
    pub counters: Counters,
    pub capacity: u64,
    pub mode_override: u32,
}

/// A room laid over a block of memory. Build one per use with [`Room::attach`] while holding
/// the zone's lock; it borrows the memory for that long only.
pub struct Room<'m> {
    hdr: &'m mut Header,
    /// The events made at run time (see `table`).
    events: &'m mut EventTable,
    buckets: &'m mut [u32],
    table: &'m mut [Entry],
    ring: &'m mut [Slot],
    /// Session id -> its place (ring index), chained through `Slot::chain`.
    places: &'m mut [u32],
    live: &'m mut [u32],
    flood: &'m mut [FloodEntry],
    /// Proofs of work spent, by their ticket (see `spent`).
    spent: &'m mut [SpentEntry],
    /// Last sight of the places, a tree over blocks of the ring (see `sight`).
    sight: &'m mut [Sight],
}
