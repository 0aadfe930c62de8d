//! A fleet room decided locally ([S12], Cloudflare's data-center design), for
//! `smart_limit_zone ... store=redis sync=TIME`.
//!
//! Every request is decided on the node's own shared memory ([`FleetNode`]); Redis is met once
//! an interval, by one worker per node, in one script call (`fleet_room.lua`), and otherwise
//! only to draw one admission from the fleet's pool when the node's own share is used up.
//!
//! - **The line is the fleet's, ordered by arrival.** A ticket carries its first contact's time
//!   (`issued_at`), the same on every node. Nodes report the waiting sessions they saw, with
//!   that time, and Redis keeps one sorted set of present waiters by arrival (and drops those
//!   unseen for `presence`). Each interval's picture gives a **cursor**: the arrival time of the
//!   oldest waiters the free places can take. A waiter whose arrival is at or before the cursor
//!   may be admitted wherever it polls; younger ones wait. Two clients who arrived more than an
//!   interval apart are thus let in by arrival order, whichever nodes they poll.
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
//! - **Positions** come from samples of the fleet's line (rank, arrival) in the picture.
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

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use core::mem::{align_of, size_of};

use crate::fleet_rate::window_end;
use crate::leader::Leadership;
use crate::redis::{count, Form, ReplyError};
use crate::resp::Value;

/// The sync script.
pub const FLEET_SCRIPT: &str = include_str!("fleet_room.lua");

const MAGIC: u64 = 0x534c_464c_4545_5402; // "SLFLEET", version 2
/// Most samples of the line a picture carries.
pub const MAX_SAMPLES: usize = 128;
/// Parts per million of an interval's free places shared out to nodes; the rest is the pool.
pub const KEEP_PPM: u64 = 800_000;
/// A node unheard of for this many intervals is dropped (its grants released).
pub const STALE_INTERVALS: u64 = 3;

/// What a sync needs to know of the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetConfig {
    pub interval_ms: u64,
    pub max_active: u64,
    pub active_window_ms: u64,
    pub presence_ms: u64,
}

impl FleetConfig {
    pub fn stale_ms(&self) -> u64 {
        self.interval_ms.saturating_mul(STALE_INTERVALS)
    }

    /// How far ahead the picture counts the sessions about to leave, to tell how fast the line
    /// will move: the interval, or half the active window up to 10 s, whichever is longer.
    pub fn horizon_ms(&self) -> u64 {
        (self.active_window_ms / 2)
            .min(10_000)
            .max(self.interval_ms)
    }

    /// The keys live this long after the room's last sync.
    pub fn key_ttl_ms(&self) -> u64 {
        2 * self
            .presence_ms
            .max(self.active_window_ms)
            .max(60_000)
            .max(self.interval_ms.saturating_mul(30))
    }
}

/// One sample of the fleet's line: `rank` waiters arrived before `arrival`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    pub rank: u64,
    pub arrival: u64,
}

/// The fleet as one sync reply shows it to one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoomPicture {
    pub fleet_active: u64,
    pub queue_len: u64,
    /// Waiters who arrived at or before this time may be admitted; `u64::MAX`: everyone (and
    /// newcomers walk in), 0: nobody.
    pub cursor: u64,
    /// Admissions granted to this node until its next sync.
    pub quota: u64,
    pub nodes: u64,
    pub window_ms: u64,
    /// This interval's free places, before they were shared out.
    pub free: u64,
    /// Active sessions whose window ends within the interval (their places free before the
    /// next picture; the cursor counts them) and within the horizon.
    pub expiring: u64,
    pub leaving: u64,
    pub samples: Vec<Sample>,
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
    /// Admitted sessions seen (each at most once an interval).
    pub active: Vec<Sighting>,
    /// Sessions this node admitted since its last sync.
    pub admitted: Vec<Sighting>,
    /// Waiting sessions seen (each once per half presence).
    pub waiters: Vec<WaiterSighting>,
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
    },
    /// No picture yet (the node has not met the fleet since it started): the zone's on_error
    /// policy decides.
    Unknown,
}

#[repr(C)]
struct Header {
    magic: u64,
    seen_len: u32,
    batch_len: u32,
    node_id: u64,
    seq: u64,
    /// The picture in force.
    window_ms: u64,
    synced_at_ms: u64,
    fleet_active: u64,
    queue_len: u64,
    cursor: u64,
    quota_left: u64,
    quota: u64,
    nodes: u64,
    free: u64,
    expiring: u64,
    leaving: u64,
    samples_len: u64,
    /// Ranks of the picture's line let in since it came, as the node guesses without Redis
    /// (positions shown are that much nearer the head), and the fraction of a place an old
    /// picture's share left over (thousandths).
    aged_ranks: u64,
    age_carry: u64,
    /// The window the pool was found empty in (no more draws until the next picture).
    pool_empty_window: u64,
    /// Clients whose turn it was, turned away for want of a place since the last draw.
    want: u64,
    /// When the draw in flight was sent (0: none), and the sync sequence then: a sync sent
    /// after it released its places, so its answer no longer counts.
    draw_since: u64,
    draw_seq: u64,
    /// The last window a tick (re)granted the quota in.
    granted_window: u64,
    /// Since the last report.
    polls: u64,
    n_active: u64,
    n_admitted: u64,
    n_waiters: u64,
    /// Bumped when the batches are taken (entries of the sent table point into one batch).
    batch_seq: u32,
    _pad: u32,
    /// Cumulative, for metrics.
    admitted: u64,
    draws: u64,
    draws_granted: u64,
    dropped: u64,
    syncs: u64,
    sync_failures: u64,
    leadership: Leadership,
}

/// A session reported recently (so it is not sent again too soon), and where its sighting
/// waits in the current batch (so a later sighting before the sync updates its time).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Seen {
    sid: u64,
    sent_ms: u64,
    /// The batch generation (`Header::batch_seq`) and index of the sighting.
    batch: u32,
    slot: u32,
}

/// A sighting of `key`: new (to be put in the batch; the index of its entry in the sent
/// table), or recent (already in a batch: the entry, to refresh the time there).
enum Sight {
    New(Option<usize>),
    Recent(usize),
}

/// Puts a sighting in its batch (`new`), or refreshes the time of the one already there.
/// False when a new one found the batch full.
fn record<T>(
    seen: Option<&mut Seen>,
    batch_seq: u32,
    list: &mut [T],
    n: &mut u64,
    new: bool,
    entry: T,
    same: impl Fn(&T) -> bool,
) -> bool {
    if !new {
        if let Some(e) = seen.filter(|e| e.batch == batch_seq) {
            if let Some(old) = list.get_mut(e.slot as usize).filter(|old| same(old)) {
                *old = entry;
            }
        }
        return true;
    }
    let ix = *n as usize;
    let Some(slot) = list.get_mut(ix) else {
        return false;
    };
    *slot = entry;
    *n += 1;
    if let Some(e) = seen {
        e.batch = batch_seq;
        e.slot = ix as u32;
    }
    true
}

/// The node's side of a synced room, laid over a block of shared memory; build one per use with
/// [`FleetNode::attach`] while holding the block's lock.
pub struct FleetNode<'m> {
    hdr: &'m mut Header,
    samples: &'m mut [Sample],
    seen: &'m mut [Seen],
    active: &'m mut [Sighting],
    admitted: &'m mut [Sighting],
    waiters: &'m mut [WaiterSighting],
}

/// The block is not a synced room of this layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("zone memory does not hold a synced room of this module's layout")]
pub struct NotAFleetNode;

fn round8(n: usize) -> usize {
    (n + 7) & !7
}

struct Layout {
    samples: usize,
    seen: usize,
    active: usize,
    admitted: usize,
    waiters: usize,
    end: usize,
}

fn layout(seen: usize, batch: usize) -> Layout {
    let samples = round8(size_of::<Header>());
    let seen_at = samples + MAX_SAMPLES * size_of::<Sample>();
    let active = seen_at + seen * size_of::<Seen>();
    let admitted = active + batch * size_of::<Sighting>();
    let waiters = admitted + batch * size_of::<Sighting>();
    let end = waiters + batch * size_of::<WaiterSighting>();
    Layout {
        samples,
        seen: seen_at,
        active,
        admitted,
        waiters,
        end,
    }
}

impl<'m> FleetNode<'m> {
    /// Writes an empty node into `mem` (a sessions table of 4 entries per batch entry).
    pub fn format(mem: &'m mut [u8], node_id: u64) -> Result<FleetNode<'m>, NotAFleetNode> {
        if !(mem.as_ptr() as usize).is_multiple_of(align_of::<u64>()) {
            return Err(NotAFleetNode);
        }
        let per = 4 * size_of::<Seen>() + 2 * size_of::<Sighting>() + size_of::<WaiterSighting>();
        let room = mem.len().saturating_sub(layout(0, 0).end);
        let batch = (room / per).min(1 << 20);
        if batch < 16 {
            return Err(NotAFleetNode);
        }
        mem.fill(0);
        let base = mem.as_mut_ptr() as *mut Header;
        // SAFETY: aligned, large enough (layout(0,0).end <= len), Header is plain old data
        // but for the atomics of Leadership, which are valid all-zero too.
        unsafe {
            (*base).magic = MAGIC;
            (*base).seen_len = (4 * batch) as u32;
            (*base).batch_len = batch as u32;
            (*base).node_id = node_id.max(1);
        }
        let node = FleetNode::attach(mem)?;
        node.hdr.leadership = Leadership::new();
        Ok(node)
    }

    pub fn attach(mem: &'m mut [u8]) -> Result<FleetNode<'m>, NotAFleetNode> {
        if mem.len() < size_of::<Header>()
            || !(mem.as_ptr() as usize).is_multiple_of(align_of::<u64>())
        {
            return Err(NotAFleetNode);
        }
        let base = mem.as_mut_ptr();
        // SAFETY: size and alignment checked; every bit pattern is a valid Header.
        let hdr = unsafe { &mut *(base as *mut Header) };
        if hdr.magic != MAGIC {
            return Err(NotAFleetNode);
        }
        let (seen, batch) = (hdr.seen_len as usize, hdr.batch_len as usize);
        let l = layout(seen, batch);
        if l.end > mem.len() {
            return Err(NotAFleetNode);
        }
        // SAFETY: disjoint regions inside `mem`, 8-aligned, plain old data.
        unsafe {
            Ok(FleetNode {
                samples: core::slice::from_raw_parts_mut(base.add(l.samples).cast(), MAX_SAMPLES),
                seen: core::slice::from_raw_parts_mut(base.add(l.seen).cast(), seen),
                active: core::slice::from_raw_parts_mut(base.add(l.active).cast(), batch),
                admitted: core::slice::from_raw_parts_mut(base.add(l.admitted).cast(), batch),
                waiters: core::slice::from_raw_parts_mut(base.add(l.waiters).cast(), batch),
                hdr,
            })
        }
    }

    pub fn leadership(&self) -> &Leadership {
        &self.hdr.leadership
    }

    pub fn node_id(&self) -> u64 {
        self.hdr.node_id
    }

    /// Whether the node has met the fleet (a picture, perhaps old).
    pub fn synced(&self) -> bool {
        self.hdr.synced_at_ms != 0
    }

    // ------------------------------------------------------------------ the request path

    /// A client without a valid admitted ticket, who arrived (first contact) at `arrival`.
    pub fn visit(&mut self, sid: u64, arrival: u64, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        self.hdr.polls += 1;
        self.saw_waiter(sid, arrival, now, cfg);
        if !self.synced() {
            return FleetVerdict::Unknown;
        }
        if !self.eligible(arrival) {
            return self.wait(arrival, cfg);
        }
        if self.take_place(sid, now) {
            return FleetVerdict::Admit;
        }
        if !self.pool_empty() {
            self.hdr.want += 1;
        }
        // The picture said nobody waits, and now someone does: until the next picture,
        // nobody who came later is let in ahead of it (the place drawn for it is its own).
        if self.hdr.cursor == u64::MAX {
            self.hdr.cursor = arrival;
        }
        match self.wait(arrival, cfg) {
            FleetVerdict::Wait {
                position,
                queue_len,
                ..
            } => FleetVerdict::Wait {
                position,
                queue_len,
                eta_secs: Some(0),
            },
            other => other,
        }
    }

    /// The same client once the pool's answer to its draw is in (it was turned away because
    /// the node's share was used up): in if its turn still holds and a place came; otherwise
    /// it waits like anyone else. Not counted as another poll.
    pub fn claim(&mut self, sid: u64, arrival: u64, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        if self.eligible(arrival) && self.take_place(sid, now) {
            return FleetVerdict::Admit;
        }
        self.wait(arrival, cfg)
    }

    /// One place of the node's share (or of its draws), if any is left: taken by `sid`.
    fn take_place(&mut self, sid: u64, now: u64) -> bool {
        if self.hdr.quota_left == 0 {
            return false;
        }
        self.hdr.quota_left -= 1;
        self.admit(sid, now);
        true
    }

    fn pool_empty(&self) -> bool {
        self.hdr.window_ms != 0 && self.hdr.pool_empty_window == self.hdr.window_ms
    }

    /// A client who must wait whatever its turn (a room in `queue_all` mode): seen and
    /// reported like any waiter, so the fleet's line stays true, and told its place.
    pub fn hold(&mut self, sid: u64, arrival: u64, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        self.hdr.polls += 1;
        self.saw_waiter(sid, arrival, now, cfg);
        self.wait(arrival, cfg)
    }

    /// Places to ask the fleet's pool for now, if any: as many as clients whose turn it was
    /// were turned away since the last draw, one draw in flight per node (one that has not
    /// answered within an interval is given up).
    pub fn take_draw(&mut self, now: u64, cfg: &FleetConfig) -> Option<u64> {
        let h = &mut *self.hdr;
        let busy = h.draw_since != 0 && now.saturating_sub(h.draw_since) < cfg.interval_ms;
        if h.want == 0 || busy || self.pool_empty() {
            return None;
        }
        let h = &mut *self.hdr;
        h.draw_since = now.max(1);
        h.draw_seq = h.seq;
        h.draws += 1;
        Some(core::mem::take(&mut h.want))
    }

    /// The pool's answer to [`FleetNode::take_draw`]: `granted` of the `asked` places (all
    /// of them when the pool had enough; otherwise it is empty until the next picture). None:
    /// no answer (Redis away): no places, and no more draws this interval.
    pub fn drawn(&mut self, asked: u64, granted: Option<u64>) {
        let h = &mut *self.hdr;
        h.draw_since = 0;
        // A sync sent since the draw released its places (they were counted as this node's
        // draws, which every sync gives back).
        let granted = granted.filter(|_| h.draw_seq == h.seq);
        let got = granted.unwrap_or(0).min(asked);
        h.draws_granted += got;
        h.quota_left += got;
        if got < asked {
            h.pool_empty_window = h.window_ms;
        }
    }

    /// A request on a valid admitted ticket: the session counts as active in the fleet. Each
    /// sync reports the sessions seen since the last one, once each, at their latest sighting
    /// (so the fleet frees a session's place when its window really ends); active sessions are
    /// at most `max_active`, so this stays cheap.
    pub fn saw_admitted(&mut self, sid: u64, now: u64, cfg: &FleetConfig) {
        let every = cfg.interval_ms.min(cfg.active_window_ms / 2);
        let key = sid ^ ACTIVE_TAG;
        let batch_seq = self.hdr.batch_seq;
        let (new, at) = match self.sight(key, now, every) {
            Sight::New(at) => (true, at),
            // Seen since the last sync but reported before it: in this batch too, so the
            // fleet's last sight of a session is never older than the node's last sync.
            Sight::Recent(at) => (
                self.seen.get(at).is_none_or(|e| e.batch != batch_seq),
                Some(at),
            ),
        };
        let seen = at.and_then(|i| self.seen.get_mut(i));
        let entry = Sighting { sid, at: now };
        let h = &mut *self.hdr;
        if !record(
            seen,
            h.batch_seq,
            self.active,
            &mut h.n_active,
            new,
            entry,
            |e| e.sid == sid,
        ) {
            self.drop_report(key);
        }
    }

    fn eligible(&self, arrival: u64) -> bool {
        self.hdr.cursor == u64::MAX || arrival <= self.hdr.cursor
    }

    fn admit(&mut self, sid: u64, now: u64) {
        self.hdr.admitted += 1;
        let h = &mut *self.hdr;
        let entry = Sighting { sid, at: now };
        if !record(
            None,
            0,
            self.admitted,
            &mut h.n_admitted,
            true,
            entry,
            |_| false,
        ) {
            h.dropped += 1;
        }
    }

    fn saw_waiter(&mut self, sid: u64, arrival: u64, now: u64, cfg: &FleetConfig) {
        let (new, at) = match self.sight(sid, now, cfg.presence_ms / 2) {
            Sight::New(at) => (true, at),
            Sight::Recent(at) => (false, Some(at)),
        };
        let seen = at.and_then(|i| self.seen.get_mut(i));
        let entry = WaiterSighting {
            sid,
            arrival,
            at: now,
        };
        let h = &mut *self.hdr;
        if !record(
            seen,
            h.batch_seq,
            self.waiters,
            &mut h.n_waiters,
            new,
            entry,
            |e| e.sid == sid,
        ) {
            self.drop_report(sid);
        }
    }

    /// Whether `key` was sent within `every_ms` (then: where it is in the sent table), or not
    /// (then it is noted sent now). A full table evicts the oldest entry of the probed ones: a
    /// session is at worst sent twice.
    fn sight(&mut self, key: u64, now: u64, every_ms: u64) -> Sight {
        let len = self.seen.len();
        if len == 0 {
            return Sight::New(None);
        }
        let h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
        let mut oldest = h % len;
        for i in 0..8 {
            let ix = (h + i) % len;
            let Some(e) = self.seen.get(ix).copied() else {
                break;
            };
            if e.sid == key {
                if now.saturating_sub(e.sent_ms) < every_ms {
                    return Sight::Recent(ix);
                }
                oldest = ix;
                break;
            }
            if e.sid == 0 || now.saturating_sub(e.sent_ms) >= every_ms {
                oldest = ix;
                break;
            }
            if self.seen.get(oldest).is_some_and(|o| e.sent_ms < o.sent_ms) {
                oldest = ix;
            }
        }
        match self.seen.get_mut(oldest) {
            Some(slot) => {
                *slot = Seen {
                    sid: key,
                    sent_ms: now,
                    batch: u32::MAX,
                    slot: 0,
                };
                Sight::New(Some(oldest))
            }
            None => Sight::New(None),
        }
    }

    /// A report that found its batch full: not noted as sent, so the next sighting tries again.
    fn drop_report(&mut self, key: u64) {
        self.hdr.dropped += 1;
        let len = self.seen.len();
        let h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
        for i in 0..8 {
            if let Some(e) = self.seen.get_mut((h + i) % len.max(1)) {
                if e.sid == key {
                    e.sid = 0;
                    return;
                }
            }
        }
    }

    fn wait(&self, arrival: u64, cfg: &FleetConfig) -> FleetVerdict {
        let position = self
            .position(arrival)
            .saturating_sub(self.hdr.aged_ranks)
            .max(1);
        FleetVerdict::Wait {
            position,
            queue_len: self.hdr.queue_len.max(position),
            eta_secs: self.eta_secs(position, cfg),
        }
    }

    /// How long until `position` is let in: the line moves by the places free now, and those
    /// the sessions about to leave will free (unknown while nobody is about to leave).
    fn eta_secs(&self, position: u64, cfg: &FleetConfig) -> Option<u64> {
        let per_interval = per_interval(self.hdr, cfg);
        if per_interval == 0 {
            return None;
        }
        let ms = u128::from(position) * u128::from(cfg.interval_ms) / u128::from(per_interval);
        Some(u64::try_from(ms.div_ceil(1000)).unwrap_or(u64::MAX))
    }

    /// 1-based position of a waiter who arrived at `arrival`: the fleet's waiters who arrived
    /// before it (interpolated between the picture's samples of the line), plus one.
    pub fn position(&self, arrival: u64) -> u64 {
        let samples = self
            .samples
            .get(..self.hdr.samples_len as usize)
            .unwrap_or_default();
        let Some(first_after) = samples.iter().position(|s| s.arrival >= arrival) else {
            return self.hdr.queue_len + 1;
        };
        let Some(after) = samples.get(first_after) else {
            return self.hdr.queue_len + 1;
        };
        let Some(before) = first_after.checked_sub(1).and_then(|i| samples.get(i)) else {
            return after.rank + 1;
        };
        let span = after.arrival.saturating_sub(before.arrival).max(1);
        let into = arrival.saturating_sub(before.arrival);
        let ranks = after.rank.saturating_sub(before.rank);
        before.rank + 1 + (u128::from(ranks) * u128::from(into) / u128::from(span)) as u64
    }

    /// The arrival of the waiter at 0-based `rank` in the picture's line (interpolated between
    /// its samples); None past the line's end.
    fn arrival_at_rank(&self, rank: u64) -> Option<u64> {
        let samples = self
            .samples
            .get(..self.hdr.samples_len as usize)
            .unwrap_or_default();
        let i = samples.iter().position(|s| s.rank >= rank)?;
        let after = samples.get(i)?;
        let Some(before) = i.checked_sub(1).and_then(|b| samples.get(b)) else {
            return Some(after.arrival);
        };
        let span = after.rank.saturating_sub(before.rank).max(1);
        let into = rank.saturating_sub(before.rank);
        let arrivals = after.arrival.saturating_sub(before.arrival);
        Some(before.arrival + (u128::from(arrivals) * u128::from(into) / u128::from(span)) as u64)
    }

    // ------------------------------------------------------------------ the sync

    /// The node's report since the last sync (and empties the batches).
    pub fn take_report(&mut self) -> Report {
        fn take<T: Copy>(v: &[T], n: u64) -> Vec<T> {
            v.get(..n as usize).unwrap_or_default().to_vec()
        }
        let r = Report {
            polls: core::mem::take(&mut self.hdr.polls),
            active: take(self.active, self.hdr.n_active),
            admitted: take(self.admitted, self.hdr.n_admitted),
            waiters: take(self.waiters, self.hdr.n_waiters),
        };
        self.hdr.n_active = 0;
        self.hdr.n_admitted = 0;
        self.hdr.n_waiters = 0;
        // The sync releases what is left of this node's places (the report says what it used):
        // none is spent until the picture brings the next share.
        self.hdr.quota_left = 0;
        // Entries of the sent table no longer point into the batches.
        self.hdr.batch_seq = self.hdr.batch_seq.wrapping_add(1) % u32::MAX;
        r
    }

    /// A report whose sync failed goes back into the batches (as far as they have room), so
    /// what the node admitted while Redis was away still reaches the fleet when it returns.
    pub fn give_back(&mut self, r: &Report) {
        let h = &mut *self.hdr;
        h.polls += r.polls;
        for &e in &r.admitted {
            if !record(None, 0, self.admitted, &mut h.n_admitted, true, e, |_| {
                false
            }) {
                h.dropped += 1;
            }
        }
        for &e in &r.active {
            if !record(None, 0, self.active, &mut h.n_active, true, e, |_| false) {
                break;
            }
        }
        for &e in &r.waiters {
            if !record(None, 0, self.waiters, &mut h.n_waiters, true, e, |_| false) {
                break;
            }
        }
    }

    /// The next sequence number and window of this node's sync at `now`.
    pub fn next_sync(&mut self, now: u64, cfg: &FleetConfig) -> (u64, u64) {
        self.hdr.seq += 1;
        (self.hdr.seq, window_end(now, cfg.interval_ms))
    }

    /// The fleet's picture came back: the node decides by it until the next.
    pub fn apply(&mut self, p: &RoomPicture, now: u64) {
        let h = &mut *self.hdr;
        h.aged_ranks = 0;
        // "Everyone" means everyone only while nobody waits anywhere in the fleet; otherwise
        // those who came after this picture wait for the next one, behind the line it shows.
        h.cursor = match (p.cursor, p.queue_len) {
            (u64::MAX, 0) => u64::MAX,
            (u64::MAX, _) => now,
            (c, _) => c,
        };
        h.window_ms = p.window_ms;
        h.synced_at_ms = now.max(1);
        h.granted_window = p.window_ms;
        h.fleet_active = p.fleet_active;
        h.queue_len = p.queue_len;
        h.quota = p.quota;
        h.quota_left = p.quota;
        h.nodes = p.nodes.max(1);
        h.free = p.free;
        h.expiring = p.expiring;
        h.leaving = p.leaving;
        h.pool_empty_window = 0;
        h.syncs += 1;
        let n = p.samples.len().min(MAX_SAMPLES);
        for (slot, s) in self.samples.iter_mut().zip(p.samples.iter()) {
            *slot = *s;
        }
        self.hdr.samples_len = n as u64;
    }

    /// A sync that failed (no answer, or not the script's).
    pub fn sync_failed(&mut self) {
        self.hdr.sync_failures += 1;
    }

    /// A tick whose window had no picture (Redis gone or slow): the node lets in its equal part
    /// of the sessions the last picture saw leaving an interval, and its cursor moves on
    /// through the picture's line by those places each interval.
    pub fn age(&mut self, now: u64, cfg: &FleetConfig) {
        let window = window_end(now, cfg.interval_ms);
        if self.hdr.synced_at_ms == 0 || self.hdr.granted_window >= window {
            return;
        }
        let gained = departures(self.hdr, cfg);
        if self.hdr.cursor != u64::MAX {
            // The cursor's rank in the picture's line, moved on by what the fleet lets in.
            let rank = self.position(self.hdr.cursor).saturating_sub(1);
            let next = rank.max(self.hdr.aged_ranks) + gained;
            self.hdr.cursor = match self.arrival_at_rank(next) {
                Some(a) => a.max(self.hdr.cursor),
                // Past the picture's line: everyone who came until now.
                None => now.max(self.hdr.cursor),
            };
            self.hdr.aged_ranks = self.hdr.aged_ranks.saturating_add(gained);
        }
        let h = &mut *self.hdr;
        h.granted_window = window;
        // The fleet keeps its level if it lets in about as many as leave: the sessions the
        // last picture saw leaving an interval (a rate: the places free then were a stock,
        // which its share covered), split equally, fractions carried to the next interval.
        let leaving = departures(h, cfg).saturating_mul(1000) / h.nodes.max(1) + h.age_carry;
        h.quota_left = leaving / 1000;
        h.age_carry = leaving % 1000;
        h.pool_empty_window = window;
        h.window_ms = window;
    }

    pub fn snapshot(&self, now: u64) -> FleetSnapshot {
        FleetSnapshot {
            fleet_active: self.hdr.fleet_active,
            queue_len: self.hdr.queue_len,
            quota_left: self.hdr.quota_left,
            nodes: self.hdr.nodes,
            admitted: self.hdr.admitted,
            draws: self.hdr.draws,
            draws_granted: self.hdr.draws_granted,
            dropped: self.hdr.dropped,
            syncs: self.hdr.syncs,
            sync_failures: self.hdr.sync_failures,
            sync_age_ms: (self.hdr.synced_at_ms != 0)
                .then(|| now.saturating_sub(self.hdr.synced_at_ms)),
        }
    }
}

/// How soon a waiting client should come back: a client whose turn is expected before its
/// configured refresh comes back at that time (never sooner than an interval, nor 1 s), so the
/// head of the line is there when places free and the fleet fills them in order.
pub fn refresh_secs(configured: u64, eta_secs: Option<u64>, interval_ms: u64) -> u64 {
    let floor = interval_ms.div_ceil(1000).max(1);
    match eta_secs {
        Some(eta) if eta < configured => eta.max(floor).min(configured),
        _ => configured,
    }
}

/// How many places the line gains an interval, as the last picture saw it: the free places,
/// or those freeing within the interval, or the sessions about to leave spread over the
/// horizon, whichever is most (in a room that is not full: its empty places).
fn per_interval(h: &Header, cfg: &FleetConfig) -> u64 {
    match departures(h, cfg).max(h.free) {
        // A room that is not full has its empty places to give.
        0 => cfg.max_active.saturating_sub(h.fleet_active),
        n => n,
    }
}

/// How many sessions leave an interval, as the last picture saw it: those whose window ends
/// within it, or those about to leave spread over the horizon, whichever is more.
fn departures(h: &Header, cfg: &FleetConfig) -> u64 {
    let soon =
        u128::from(h.leaving) * u128::from(cfg.interval_ms) / u128::from(cfg.horizon_ms().max(1));
    u64::try_from(soon).unwrap_or(u64::MAX).max(h.expiring)
}

/// Keys of active sightings differ from waiting ones in the sent table.
const ACTIVE_TAG: u64 = 0xA5A5_0000_0000_A5A5;

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
    /// Sightings not reported for want of room in the batches (zone memory).
    pub dropped: u64,
    pub syncs: u64,
    pub sync_failures: u64,
    pub sync_age_ms: Option<u64>,
}

// ------------------------------------------------------------------------------ Redis

/// The calls of one synced room.
#[derive(Debug, Clone)]
pub struct FleetScript {
    pub sha: String,
    pub keys: [String; 4],
    cfg: FleetConfig,
}

impl FleetScript {
    pub fn new(prefix: &str, room: &str, cfg: FleetConfig) -> FleetScript {
        let base = format!("{prefix}:{{{room}}}");
        FleetScript {
            sha: crate::redis::sha_of(FLEET_SCRIPT),
            keys: [
                format!("{base}:fleet"),
                format!("{base}:active"),
                format!("{base}:present"),
                format!("{base}:arrival"),
            ],
            cfg,
        }
    }

    pub fn load_command() -> Vec<u8> {
        crate::redis::load_command_of(FLEET_SCRIPT)
    }

    fn head(&self, form: Form, op: &str, node_id: u64, window: u64, now: u64) -> ::redis::Cmd {
        let mut cmd = crate::redis::script_call(form, &self.sha, FLEET_SCRIPT);
        let c = &self.cfg;
        cmd.arg(4)
            .arg(&self.keys[0])
            .arg(&self.keys[1])
            .arg(&self.keys[2])
            .arg(&self.keys[3])
            .arg(op)
            .arg(node_id)
            .arg(window)
            .arg(now)
            .arg(c.max_active)
            .arg(c.active_window_ms)
            .arg(c.presence_ms)
            .arg(c.stale_ms())
            .arg(c.key_ttl_ms())
            .arg(KEEP_PPM)
            .arg(c.interval_ms);
        cmd
    }

    /// A sync; `now` 0 lets the script use the Redis server's clock (what nginx sends).
    /// Sightings go as their age at `node_now` (the node's clock), so the two clocks need not
    /// agree.
    pub fn sync(
        &self,
        form: Form,
        node_id: u64,
        window: u64,
        now: u64,
        node_now: u64,
        r: &Report,
    ) -> Vec<u8> {
        use core::fmt::Write as _;
        let age = |at: u64| node_now.saturating_sub(at);
        let join = |v: &[Sighting]| {
            let mut out = String::with_capacity(v.len() * 24);
            for e in v {
                let _ = write!(out, "{}:{} ", e.sid, age(e.at));
            }
            out
        };
        let mut waiters = String::with_capacity(r.waiters.len() * 40);
        for w in &r.waiters {
            let _ = write!(waiters, "{}:{}:{} ", w.sid, w.arrival, age(w.at));
        }
        let mut cmd = self.head(form, "sync", node_id, window, now);
        cmd.arg(r.polls)
            .arg(join(&r.active))
            .arg(join(&r.admitted))
            .arg(waiters);
        cmd.get_packed_command()
    }

    /// A draw of up to `want` places from the pool.
    pub fn draw(&self, form: Form, node_id: u64, window: u64, now: u64, want: u64) -> Vec<u8> {
        self.head(form, "draw", node_id, window, now)
            .arg(want)
            .get_packed_command()
    }
}

/// Integers before the samples in a sync's reply.
const HEAD: usize = 9;

/// The script's answer to a sync, checked.
pub fn picture_reply(v: &Value) -> Result<RoomPicture, ReplyError> {
    if let Some(e) = v.error_text() {
        return Err(if e.starts_with("NOSCRIPT") {
            ReplyError::NoScript
        } else {
            ReplyError::Server(e.chars().take(200).collect())
        });
    }
    let Value::Array(items) = v else {
        return Err(ReplyError::Shape("expected an array"));
    };
    if items.len() < HEAD
        || (items.len() - HEAD) % 2 == 1
        || items.len() > HEAD + 2 * (MAX_SAMPLES + 1)
    {
        return Err(ReplyError::Shape("array of the wrong length"));
    }
    let mut ints = Vec::with_capacity(items.len());
    for i in items {
        match i {
            Value::Int(x) => ints.push(*x),
            _ => return Err(ReplyError::Shape("expected integers")),
        }
    }
    let n = |i: usize| {
        ints.get(i)
            .copied()
            .map_or(Err(ReplyError::Shape("short")), count)
    };
    let cursor = match ints.get(2) {
        Some(-1) => u64::MAX,
        Some(&c) => count(c)?,
        None => return Err(ReplyError::Shape("short")),
    };
    let mut samples = Vec::new();
    let mut i = HEAD;
    while i + 1 < ints.len() {
        samples.push(Sample {
            rank: n(i)?,
            arrival: n(i + 1)?,
        });
        i += 2;
    }
    samples.truncate(MAX_SAMPLES);
    Ok(RoomPicture {
        fleet_active: n(0)?,
        queue_len: n(1)?,
        cursor,
        quota: n(3)?,
        nodes: n(4)?.max(1),
        window_ms: n(5)?,
        free: n(6)?,
        expiring: n(7)?,
        leaving: n(8)?,
        samples,
    })
}

/// The script's answer to a draw: how many places were granted.
pub fn draw_reply(v: &Value) -> Result<u64, ReplyError> {
    let x = crate::redis::ints(v, 2)?;
    match x.first() {
        Some(&n) => count(n),
        None => Err(ReplyError::Shape("bad draw answer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FleetConfig {
        FleetConfig {
            interval_ms: 1000,
            max_active: 10,
            active_window_ms: 60_000,
            presence_ms: 20_000,
        }
    }

    struct Mem(Vec<u64>);
    impl Mem {
        fn bytes(&mut self) -> &mut [u8] {
            let len = self.0.len() * 8;
            // SAFETY: a Vec<u64> is 8-aligned and `len` bytes long.
            unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut u8, len) }
        }
    }

    fn node(mem: &mut Mem) -> FleetNode<'_> {
        FleetNode::format(mem.bytes(), 7).unwrap()
    }

    #[test]
    fn unknown_until_the_first_picture_then_by_cursor_and_quota() {
        let mut mem = Mem(vec![0; 1 << 14]);
        let mut n = node(&mut mem);
        let c = cfg();
        assert_eq!(n.visit(1, 100, 1000, &c), FleetVerdict::Unknown);
        n.apply(
            &RoomPicture {
                fleet_active: 8,
                queue_len: 3,
                cursor: 200,
                quota: 1,
                nodes: 2,
                window_ms: 1000,
                free: 2,
                expiring: 0,
                leaving: 0,
                samples: vec![
                    Sample {
                        rank: 0,
                        arrival: 100,
                    },
                    Sample {
                        rank: 1,
                        arrival: 200,
                    },
                    Sample {
                        rank: 2,
                        arrival: 300,
                    },
                ],
            },
            1001,
        );
        // Arrived at or before the cursor, with quota: in.
        assert_eq!(n.visit(1, 100, 1100, &c), FleetVerdict::Admit);
        // The quota is used up: come back in a moment; the node asks the pool meanwhile.
        assert_eq!(
            n.visit(2, 200, 1100, &c),
            FleetVerdict::Wait {
                position: 2,
                queue_len: 3,
                eta_secs: Some(0)
            }
        );
        assert_eq!(n.take_draw(1100, &c), Some(1));
        // One draw in flight at a time.
        assert!(matches!(
            n.visit(2, 200, 1150, &c),
            FleetVerdict::Wait { .. }
        ));
        assert_eq!(n.take_draw(1150, &c), None);
        // Granted: the next one whose turn it is walks in.
        n.drawn(1, Some(1));
        assert_eq!(n.visit(2, 200, 1200, &c), FleetVerdict::Admit);
        // Two were turned away since (at 1150 and now): two places asked for.
        assert!(matches!(
            n.visit(5, 150, 1210, &c),
            FleetVerdict::Wait { .. }
        ));
        assert_eq!(n.take_draw(1210, &c), Some(2));
        // The pool is empty: no more draws this interval.
        n.drawn(2, Some(0));
        assert!(matches!(
            n.visit(5, 150, 1220, &c),
            FleetVerdict::Wait { .. }
        ));
        assert_eq!(n.take_draw(1220, &c), None);
        // Younger than the cursor: waits, at its place in the fleet's line.
        assert!(matches!(
            n.visit(3, 300, 1100, &c),
            FleetVerdict::Wait {
                position: 3,
                queue_len: 3,
                ..
            }
        ));
        assert!(matches!(
            n.visit(4, 900, 1100, &c),
            FleetVerdict::Wait { position: 4, .. }
        ));
        let r = n.take_report();
        let sids = |v: &[Sighting]| v.iter().map(|e| (e.sid, e.at)).collect::<Vec<_>>();
        assert_eq!(sids(&r.admitted), vec![(1, 1100), (2, 1200)]);
        assert_eq!(r.polls, 9);
        // Each waiter once per half presence (the admitted ones included: they were waiting),
        // at its latest sighting.
        let waiters = r
            .waiters
            .iter()
            .map(|w| (w.sid, w.arrival, w.at))
            .collect::<Vec<_>>();
        assert_eq!(
            waiters,
            vec![
                (1, 100, 1100),
                (2, 200, 1200),
                (5, 150, 1220),
                (3, 300, 1100),
                (4, 900, 1100)
            ]
        );
        assert!(n.take_report().waiters.is_empty());
    }

    #[test]
    fn places_drawn_for_those_turned_away_are_theirs() {
        let mut mem = Mem(vec![0; 1 << 14]);
        let mut n = node(&mut mem);
        let c = cfg();
        // Nobody waits anywhere: everyone may come in, as far as the share goes.
        n.apply(
            &RoomPicture {
                fleet_active: 0,
                queue_len: 0,
                cursor: u64::MAX,
                quota: 1,
                nodes: 1,
                window_ms: 1000,
                free: 2,
                expiring: 0,
                leaving: 0,
                samples: vec![],
            },
            1001,
        );
        assert_eq!(n.visit(1, 1010, 1010, &c), FleetVerdict::Admit);
        // The share is used up: B is turned away for a moment, and a place drawn for it.
        assert!(matches!(
            n.visit(2, 1020, 1020, &c),
            FleetVerdict::Wait { .. }
        ));
        assert_eq!(n.take_draw(1020, &c), Some(1));
        n.drawn(1, Some(1));
        // C, who came after B, does not take B's place ...
        assert!(matches!(
            n.visit(3, 1030, 1030, &c),
            FleetVerdict::Wait { .. }
        ));
        // ... which B finds when it comes back.
        assert_eq!(n.visit(2, 1020, 1500, &c), FleetVerdict::Admit);
        // D, who came before B, is turned away: its request waits for the draw and claims
        // the place it brought.
        assert!(matches!(
            n.visit(4, 1005, 1510, &c),
            FleetVerdict::Wait {
                eta_secs: Some(0),
                ..
            }
        ));
        assert_eq!(n.take_draw(1510, &c), Some(1));
        n.drawn(1, Some(1));
        assert_eq!(n.claim(4, 1005, 1512, &c), FleetVerdict::Admit);
        // The pool had nothing for E (who came before D): it waits, by its place in the line.
        assert!(matches!(
            n.visit(5, 1002, 1520, &c),
            FleetVerdict::Wait { .. }
        ));
        assert_eq!(n.take_draw(1520, &c), Some(1));
        n.drawn(1, Some(0));
        assert!(matches!(
            n.claim(5, 1002, 1522, &c),
            FleetVerdict::Wait { .. }
        ));
        let admitted: Vec<u64> = n.take_report().admitted.iter().map(|e| e.sid).collect();
        assert_eq!(admitted, vec![1, 2, 4]);
    }

    #[test]
    fn sessions_are_reported_once_an_interval() {
        let mut mem = Mem(vec![0; 1 << 14]);
        let mut n = node(&mut mem);
        let c = cfg();
        for t in [10_000, 10_500, 10_999] {
            n.saw_admitted(5, t, &c);
        }
        // One sighting, at the latest time it was seen before the sync.
        assert_eq!(
            n.take_report().active,
            vec![Sighting { sid: 5, at: 10_999 }]
        );
        // Seen again after the sync: in the next report, once, at its latest sighting.
        n.saw_admitted(5, 11_000, &c);
        n.saw_admitted(5, 11_001, &c);
        assert_eq!(
            n.take_report().active,
            vec![Sighting { sid: 5, at: 11_001 }]
        );
        // Not seen since: nothing.
        assert!(n.take_report().active.is_empty());
    }

    #[test]
    fn positions_interpolate_between_samples() {
        let mut mem = Mem(vec![0; 1 << 14]);
        let mut n = node(&mut mem);
        n.apply(
            &RoomPicture {
                queue_len: 1000,
                cursor: 0,
                nodes: 1,
                window_ms: 1000,
                samples: vec![
                    Sample {
                        rank: 0,
                        arrival: 1_000,
                    },
                    Sample {
                        rank: 100,
                        arrival: 2_000,
                    },
                    Sample {
                        rank: 999,
                        arrival: 11_000,
                    },
                ],
                ..RoomPicture::default()
            },
            5,
        );
        assert_eq!(n.position(500), 1);
        assert_eq!(n.position(1_500), 51);
        assert_eq!(n.position(2_000), 101);
        assert_eq!(n.position(6_500), 101 + 449);
        assert_eq!(n.position(20_000), 1001);
    }

    #[test]
    fn without_pictures_the_share_ages_and_the_cursor_moves_on() {
        let mut mem = Mem(vec![0; 1 << 14]);
        let mut n = node(&mut mem);
        let c = cfg();
        let sample = |rank, arrival| Sample { rank, arrival };
        // A line of 100 who arrived from 10 s to 20 s; 4 sessions leave an interval.
        n.apply(
            &RoomPicture {
                cursor: 10_000,
                quota: 6,
                nodes: 2,
                free: 9,
                expiring: 4,
                queue_len: 100,
                window_ms: 2000,
                samples: vec![
                    sample(0, 10_000),
                    sample(10, 11_000),
                    sample(20, 12_000),
                    sample(99, 20_000),
                ],
                ..RoomPicture::default()
            },
            2000,
        );
        assert!(matches!(
            n.visit(7, 12_000, 2100, &c),
            FleetVerdict::Wait { position: 21, .. }
        ));
        // No picture at 3 s: this node's half of the 4 leaving; the cursor 4 places on.
        n.age(3000, &c);
        assert_eq!(n.snapshot(3000).quota_left, 2);
        assert_eq!(n.hdr.cursor, 10_400);
        // Positions move up as the fleet is thought to let people in.
        assert!(matches!(
            n.visit(7, 12_000, 3100, &c),
            FleetVerdict::Wait { position: 17, .. }
        ));
        n.age(4000, &c);
        assert_eq!(n.hdr.cursor, 10_800);
        n.age(30_000, &c);
        assert_eq!(n.snapshot(30_000).quota_left, 2);
        assert_eq!(n.hdr.cursor, 11_200);
        // The same window is aged once.
        let left = n.snapshot(0).quota_left;
        n.visit(1, 1, 30_100, &c);
        n.age(30_200, &c);
        assert_eq!(n.snapshot(0).quota_left, left - 1);
        // Past the end of the picture's line: everyone who came until now.
        for t in 31..80 {
            n.age(t * 1000, &c);
        }
        assert_eq!(n.hdr.cursor, 79_000);
        // Fractions of a place are carried: 3 leaving, 2 nodes: 1, 2, 1, 2...
        n.apply(
            &RoomPicture {
                cursor: 0,
                nodes: 2,
                expiring: 3,
                window_ms: 80_000,
                ..RoomPicture::default()
            },
            80_000,
        );
        let mut got = vec![];
        for t in 81..85 {
            n.age(t * 1000, &c);
            got.push(n.snapshot(0).quota_left);
        }
        assert_eq!(got, vec![1, 2, 1, 2]);
    }

    #[test]
    fn a_failed_sync_gives_its_report_back() {
        let mut mem = Mem(vec![0; 1 << 14]);
        let mut n = node(&mut mem);
        let c = cfg();
        n.apply(
            &RoomPicture {
                cursor: u64::MAX,
                quota: 5,
                nodes: 1,
                window_ms: 1000,
                ..RoomPicture::default()
            },
            1000,
        );
        assert_eq!(n.visit(1, 10, 1100, &c), FleetVerdict::Admit);
        let r = n.take_report();
        // The sync released the rest of the share: nothing more until the next picture.
        assert!(matches!(
            n.visit(2, 20, 1200, &c),
            FleetVerdict::Wait {
                eta_secs: Some(0),
                ..
            }
        ));
        n.give_back(&r);
        let again = n.take_report();
        assert_eq!(again.polls, 2);
        assert_eq!(again.admitted, vec![Sighting { sid: 1, at: 1100 }]);
        let mut waiters = again.waiters.iter().map(|w| w.sid).collect::<Vec<_>>();
        waiters.sort_unstable();
        assert_eq!(waiters, vec![1, 2]);
    }

    #[test]
    fn the_head_of_the_line_comes_back_sooner() {
        assert_eq!(refresh_secs(10, None, 1000), 10);
        assert_eq!(refresh_secs(10, Some(30), 1000), 10);
        assert_eq!(refresh_secs(10, Some(4), 1000), 4);
        assert_eq!(refresh_secs(10, Some(0), 1000), 1);
        assert_eq!(refresh_secs(10, Some(0), 2500), 3);
        assert_eq!(refresh_secs(2, Some(0), 5000), 2);
    }

    #[test]
    fn replies_are_checked() {
        let arr = |x: &[i64]| Value::Array(x.iter().map(|&i| Value::Int(i)).collect());
        let p = picture_reply(&arr(&[3, 5, -1, 2, 3, 7000, 4, 1, 2, 0, 10, 4, 30])).unwrap();
        assert_eq!((p.cursor, p.quota, p.nodes, p.free), (u64::MAX, 2, 3, 4));
        assert_eq!((p.expiring, p.leaving), (1, 2));
        assert_eq!(p.samples.len(), 2);
        assert!(picture_reply(&arr(&[1, 2, 3])).is_err());
        assert!(picture_reply(&arr(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])).is_err());
        assert!(picture_reply(&arr(&[-1, 2, 3, 4, 5, 6, 7, 8, 9])).is_err());
        assert!(picture_reply(&Value::Error(b"NOSCRIPT x".to_vec())).is_err());
        assert_eq!(draw_reply(&arr(&[3, 9])), Ok(3));
        assert_eq!(draw_reply(&arr(&[0, 9])), Ok(0));
        assert!(draw_reply(&arr(&[-2, 9])).is_err());
    }
}
