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
//! - the places again, on a list ordered by last sight: the ones unseen for `presence` fall
//!   off its front at the next decision, wherever they stood in the line, so abandoned places
//!   stop counting at once and their memory comes back ([S6], [S15]);
//! - the admitted sessions seen recently: a chained hash table (session id -> entry) whose
//!   entries also sit on a list ordered by last sight, so "active sessions" is an exact O(1)
//!   count and the ones unseen for `active_window` fall off the front of the list; each entry
//!   also holds its session's request-rate bucket;
//! - flood control: rate buckets of client addresses (by a hash of the key), in a
//!   set-associative table, so one address cannot take places faster than its rate ([S15]);
//! - cumulative counters for metrics, and the figures the estimated wait is computed from.
//!
//! All functions take `now` (unix milliseconds) from the caller: the rules never read a clock.
//! Every operation is O(1) or O(log n), amortised: each place and session is removed once.

use core::mem::{align_of, size_of};

use crate::fenwick;
use crate::rules::{self, Capacity, Limits, Mode};

const MAGIC: u64 = 0x534d_4152_544c_4d31; // "SMARTLM1"
/// Bumped whenever the layout below changes; a reload onto an old layout is refused.
pub const LAYOUT_VERSION: u32 = 3;
const NIL: u32 = u32::MAX;
/// Entries per set of the flood table (a set is scanned whole).
const FLOOD_WAYS: usize = 8;

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
    /// Waiting clients that lost their place by being absent longer than `presence`.
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
}

#[repr(C)]
struct Header {
    magic: u64,
    version: u32,
    ring_len: u32,
    table_len: u32,
    bucket_len: u32,
    flood_len: u32,
    _pad0: u32,
    /// No live place has a queue number below this (the head is the first live one at or
    /// after it); `low == tail` when nobody waits.
    low: u64,
    /// Next queue number to hand out.
    tail: u64,
    /// Places by last sight (ring indices), oldest first.
    seen_first: u32,
    seen_last: u32,
    /// Live places in the line (the Fenwick tree's total, kept at hand).
    waiting: u64,
    /// Entries in the admitted table (every one seen within `active_window`).
    active: u64,
    lru_first: u32,
    lru_last: u32,
    free: u32,
    _pad: u32,
    /// Minute (unix ms / 60000) that `admitted_in_minute` counts, for `new_per_minute`.
    minute: u64,
    admitted_in_minute: u64,
    /// When the line last moved, and a smoothed interval between admissions from the line:
    /// the estimated wait is `position * interval`.
    last_admit_ms: u64,
    admit_interval_ms: u64,
    /// Mode switched at run time (see `rules::Mode`), stored as its code; 0 = the configured one.
    mode_override: u32,
    _pad2: u32,
    counters: Counters,
    /// Redis store: the room's line length and active count from the latest script reply,
    /// and when it came (0 = never). Snapshots report them while they are fresh.
    remote_queue_len: u64,
    remote_active: u64,
    remote_at_ms: u64,
    /// The Redis clock of the reply the figures came from: replies coming back on several
    /// connections (workers) never put older figures over newer ones.
    remote_version: u64,
}

/// A place in the line.
#[repr(C)]
#[derive(Clone, Copy)]
struct Slot {
    sid: u64, // 0 = empty (left, admitted, expired, or never used)
    qnum: u64,
    last_seen: u64,
    /// When the client took this place (for the "oldest wait" gauge).
    joined: u64,
    /// Neighbours on the list by last sight (ring indices).
    prev: u32,
    next: u32,
    /// Next place in the same bucket of the session-id hash.
    chain: u32,
    _pad: u32,
}

/// An admitted session recently seen.
#[repr(C)]
#[derive(Clone, Copy)]
struct Entry {
    sid: u64, // 0 = free
    last_seen: u64,
    /// The session's request-rate bucket (see `rate`), 0 = full.
    rate_tat: u64,
    prev: u32,
    next: u32,
    chain: u32, // next entry in the same hash bucket
    _pad: u32,
}

/// The rate bucket of one client address (flood control).
#[repr(C)]
#[derive(Clone, Copy)]
struct FloodEntry {
    /// Hash of the address key; 0 = unused.
    key: u64,
    tat: u64,
}

/// Why a block of memory cannot hold or be read as a room.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("zone is too small: {0} bytes, need at least {1}")]
    TooSmall(usize, usize),
    #[error("zone memory is not aligned to 8 bytes")]
    Misaligned,
    #[error("zone holds a room of layout version {0}, this module uses version {LAYOUT_VERSION}")]
    Version(u32),
    #[error("zone memory does not hold a room")]
    NotARoom,
}

/// The flood-control key of a client (its address, or the configured `flood_key`) as the
/// number the room's table keys on, mixed with a per-zone `seed` (the same in every worker)
/// so that nobody can aim addresses at one set of the table. Never 0.
pub fn flood_hash(seed: u64, key: &[u8]) -> u64 {
    let mut h = seed ^ 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // A final mix so that keys differing in their last bytes spread over the sets too.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h.max(1)
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The line has no free slot (zone memory).
    LineFull { queue_len: u64 },
    /// The room is closed (mode `reject`).
    Closed,
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
    buckets: &'m mut [u32],
    table: &'m mut [Entry],
    ring: &'m mut [Slot],
    /// Session id -> its place (ring index), chained through `Slot::chain`.
    places: &'m mut [u32],
    live: &'m mut [u32],
    flood: &'m mut [FloodEntry],
}

fn round8(n: usize) -> usize {
    (n + 7) & !7
}

/// Bytes one session costs in the zone: a ring slot, its Fenwick counter and hash bucket, a
/// table entry and its bucket, and a quarter of a flood-table entry.
pub const BYTES_PER_SESSION: usize = size_of::<Slot>()
    + 2 * size_of::<u32>()
    + size_of::<Entry>()
    + size_of::<u32>()
    + size_of::<FloodEntry>() / 4;

/// How many sessions a block of `len` bytes holds (the line and the admitted table each).
pub fn capacity_for(len: usize) -> usize {
    len.saturating_sub(round8(size_of::<Header>()) + 64 + 2 * FLOOD_WAYS * size_of::<FloodEntry>())
        / BYTES_PER_SESSION
}

/// The regions after the header (buckets first): their offsets and the end.
struct Layout {
    table: usize,
    ring: usize,
    places: usize,
    live: usize,
    flood: usize,
    end: usize,
}

fn layout(nb: usize, nt: usize, nr: usize, nf: usize) -> Layout {
    let hsize = round8(size_of::<Header>());
    let table = hsize + round8(nb * size_of::<u32>());
    let ring = table + nt * size_of::<Entry>();
    let places = ring + nr * size_of::<Slot>();
    let live = places + round8(nr * size_of::<u32>());
    let flood = live + round8(nr * size_of::<u32>());
    let end = flood + nf * size_of::<FloodEntry>();
    Layout {
        table,
        ring,
        places,
        live,
        flood,
        end,
    }
}

impl<'m> Room<'m> {
    /// Smallest block that makes a usable room (a few dozen sessions).
    pub const MIN_BYTES: usize = 8192;

    /// Writes an empty room into `mem`, using all of it. `first_qnum` seeds queue numbers, so
    /// tickets from an earlier zone (before a restart) do not match places in this one.
    pub fn format(mem: &'m mut [u8], first_qnum: u64) -> Result<Room<'m>, LayoutError> {
        if mem.len() < Self::MIN_BYTES {
            return Err(LayoutError::TooSmall(mem.len(), Self::MIN_BYTES));
        }
        if !(mem.as_ptr() as usize).is_multiple_of(align_of::<u64>()) {
            return Err(LayoutError::Misaligned);
        }
        mem.fill(0);
        let n = capacity_for(mem.len()).min(u32::MAX as usize - 1);
        // Flood sets: a quarter entry per session, whole sets, at least two.
        let nf = ((n / 4) / FLOOD_WAYS).max(2) * FLOOD_WAYS;
        let first = first_qnum.max(1);
        let hdr = Header {
            magic: MAGIC,
            version: LAYOUT_VERSION,
            ring_len: n as u32,
            table_len: n as u32,
            bucket_len: n as u32,
            flood_len: nf as u32,
            _pad0: 0,
            low: first,
            tail: first,
            seen_first: NIL,
            seen_last: NIL,
            waiting: 0,
            active: 0,
            lru_first: NIL,
            lru_last: NIL,
            free: 0,
            _pad: 0,
            minute: 0,
            admitted_in_minute: 0,
            last_admit_ms: 0,
            admit_interval_ms: 0,
            mode_override: 0,
            _pad2: 0,
            counters: Counters::default(),
            remote_queue_len: 0,
            remote_active: 0,
            remote_at_ms: 0,
            remote_version: 0,
        };
        if layout(n, n, n, nf).end > mem.len() {
            return Err(LayoutError::TooSmall(mem.len(), Self::MIN_BYTES));
        }
        // SAFETY: length and alignment checked above; Header is plain old data.
        unsafe { core::ptr::write(mem.as_mut_ptr() as *mut Header, hdr) };
        let room = Self::attach(mem)?;
        room.buckets.fill(NIL);
        // Thread every table entry onto the free list.
        let len = room.table.len();
        for (i, e) in room.table.iter_mut().enumerate() {
            e.next = if i + 1 < len { (i + 1) as u32 } else { NIL };
            e.prev = NIL;
            e.chain = NIL;
        }
        room.hdr.free = if len > 0 { 0 } else { NIL };
        for s in room.ring.iter_mut() {
            s.prev = NIL;
            s.next = NIL;
            s.chain = NIL;
        }
        room.places.fill(NIL);
        Ok(room)
    }

    /// Reads a room that [`Room::format`] wrote earlier (by this or another process).
    pub fn attach(mem: &'m mut [u8]) -> Result<Room<'m>, LayoutError> {
        let hsize = round8(size_of::<Header>());
        if mem.len() < hsize {
            return Err(LayoutError::TooSmall(mem.len(), hsize));
        }
        if !(mem.as_ptr() as usize).is_multiple_of(align_of::<u64>()) {
            return Err(LayoutError::Misaligned);
        }
        let base = mem.as_mut_ptr();
        // SAFETY: size and alignment checked; every bit pattern is a valid Header.
        let hdr = unsafe { &mut *(base as *mut Header) };
        if hdr.magic != MAGIC {
            return Err(LayoutError::NotARoom);
        }
        if hdr.version != LAYOUT_VERSION {
            return Err(LayoutError::Version(hdr.version));
        }
        let nb = hdr.bucket_len as usize;
        let nt = hdr.table_len as usize;
        let nr = hdr.ring_len as usize;
        let nf = hdr.flood_len as usize;
        let l = layout(nb, nt, nr, nf);
        if l.end > mem.len() || nb == 0 || nt == 0 || nr == 0 || nf < FLOOD_WAYS {
            return Err(LayoutError::NotARoom);
        }
        // SAFETY: the regions are disjoint, inside `mem`, 8-aligned (offsets are multiples of
        // 8 and the element types are 4- or 8-aligned), and plain old data.
        unsafe {
            Ok(Room {
                buckets: core::slice::from_raw_parts_mut(base.add(hsize) as *mut u32, nb),
                table: core::slice::from_raw_parts_mut(base.add(l.table) as *mut Entry, nt),
                ring: core::slice::from_raw_parts_mut(base.add(l.ring) as *mut Slot, nr),
                places: core::slice::from_raw_parts_mut(base.add(l.places) as *mut u32, nr),
                live: core::slice::from_raw_parts_mut(base.add(l.live) as *mut u32, nr),
                flood: core::slice::from_raw_parts_mut(base.add(l.flood) as *mut FloodEntry, nf),
                hdr,
            })
        }
    }

    /// How many sessions the line (and the admitted table) can hold.
    pub fn capacity(&self) -> u64 {
        self.hdr.ring_len as u64
    }

    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.hdr.counters
    }

    /// The mode switched at run time, if any (code of `rules::Mode`, 0 = configured one).
    pub fn set_mode_override(&mut self, code: u32) {
        self.hdr.mode_override = code;
    }

    pub fn mode_override(&self) -> u32 {
        self.hdr.mode_override
    }

    /// The mode in force: the run-time override, else the configured one.
    pub fn mode(&self, limits: &Limits) -> Mode {
        Mode::from_code(self.hdr.mode_override).unwrap_or(limits.mode)
    }

    /// Redis store: mirrors the room's figures from a script reply, so this node's metrics
    /// show the fleet's line and active count, and the mode override set on any node is in
    /// force here too (also for decisions taken locally while Redis is away). Figures older
    /// than the ones already mirrored (by `m.version`, the Redis clock) are ignored.
    pub fn mirror_remote(&mut self, m: &Mirror, now: u64) {
        if m.version < self.hdr.remote_version {
            return;
        }
        self.hdr.remote_version = m.version;
        if let Some(q) = m.queue_len {
            self.hdr.remote_queue_len = q;
        }
        if let Some(a) = m.active {
            self.hdr.remote_active = a;
        }
        if let Some(mode) = m.mode_override {
            self.hdr.mode_override = mode;
        }
        self.hdr.remote_at_ms = now.max(1);
    }

    // ------------------------------------------------------------------ the line

    fn ring_index(&self, qnum: u64) -> usize {
        (qnum % self.hdr.ring_len as u64) as usize
    }

    /// Live places in the line.
    fn waiting(&self) -> u64 {
        self.hdr.waiting
    }

    /// Live places among ring indices `from..to` going round the ring (`from == to`: none).
    fn live_between(&self, from: usize, to: usize) -> u64 {
        let t = &*self.live;
        if from <= to {
            fenwick::prefix(t, to) - fenwick::prefix(t, from)
        } else {
            fenwick::prefix(t, t.len()) - fenwick::prefix(t, from) + fenwick::prefix(t, to)
        }
    }

    /// The head: queue number of the first live place, if anyone waits. Moves `low` to it.
    fn head(&mut self) -> Option<u64> {
        let n = self.ring.len();
        let low = self.hdr.low;
        let from = self.ring_index(low);
        // Most of the time the head has not moved since the last look.
        let at_low = self.ring[from];
        if at_low.sid != 0 && at_low.qnum == low {
            return Some(low);
        }
        let t = &*self.live;
        let before = fenwick::prefix(t, from);
        let total = fenwick::prefix(t, n);
        if total == 0 {
            self.hdr.low = self.hdr.tail;
            return None;
        }
        // The first live index at or after `from`, going round the ring.
        let ix = if total > before {
            fenwick::find(t, before + 1)?
        } else {
            fenwick::find(t, 1)?
        };
        let ahead = (ix + n - from) % n;
        let head = low + ahead as u64;
        self.hdr.low = head;
        Some(head)
    }

    /// The client's place (its ring index), whatever queue number its ticket shows: one
    /// session has one place, however often it comes back ([S3]).
    fn place_of(&self, sid: u64) -> Option<usize> {
        let mut i = self.places[self.sid_bucket(sid, self.places.len())];
        let mut steps = 0usize;
        while i != NIL && steps <= self.ring.len() {
            let s = self.ring.get(i as usize)?;
            if s.sid == sid {
                return Some(i as usize);
            }
            i = s.chain;
            steps += 1;
        }
        None
    }

    fn sid_bucket(&self, sid: u64, len: usize) -> usize {
        // Session ids are random, but mix anyway so a low-entropy id cannot crowd one bucket.
        let h = sid.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((h >> 32) % len as u64) as usize
    }

    /// 1-based place of live `qnum`: the live places ahead of it, plus one.
    fn position(&mut self, qnum: u64) -> u64 {
        let Some(head) = self.head() else {
            return 0;
        };
        if head == qnum {
            return 1;
        }
        let from = self.ring_index(head);
        let to = self.ring_index(qnum);
        self.live_between(from, to) + 1
    }

    fn join_line(&mut self, sid: u64, now: u64) -> Option<u64> {
        let low = self.head().unwrap_or(self.hdr.tail);
        let qnum = self.hdr.tail;
        // Queue numbers map onto ring slots: the line may span at most one turn of the ring.
        if qnum - low >= self.hdr.ring_len as u64 {
            return None;
        }
        let ix = self.ring_index(qnum);
        if self.ring[ix].sid != 0 {
            return None;
        }
        let b = self.sid_bucket(sid, self.places.len());
        self.ring[ix] = Slot {
            sid,
            qnum,
            last_seen: now,
            joined: now,
            prev: NIL,
            next: NIL,
            chain: self.places[b],
            _pad: 0,
        };
        self.places[b] = ix as u32;
        self.seen_push(ix);
        fenwick::add(self.live, ix, 1);
        self.hdr.waiting += 1;
        self.hdr.tail += 1;
        if low == qnum {
            self.hdr.low = qnum;
        }
        self.hdr.counters.queued += 1;
        Some(qnum)
    }

    /// The place at ring index `ix` empties (admitted, expired, passthrough).
    fn remove_place(&mut self, ix: usize) {
        let sid = self.ring[ix].sid;
        if sid == 0 {
            return;
        }
        // Unchain from its session-id bucket.
        let b = self.sid_bucket(sid, self.places.len());
        if self.places[b] == ix as u32 {
            self.places[b] = self.ring[ix].chain;
        } else {
            let mut j = self.places[b];
            let mut steps = 0usize;
            while j != NIL && steps <= self.ring.len() {
                let next = self.ring[j as usize].chain;
                if next == ix as u32 {
                    self.ring[j as usize].chain = self.ring[ix].chain;
                    break;
                }
                j = next;
                steps += 1;
            }
        }
        self.ring[ix].chain = NIL;
        self.seen_unlink(ix);
        self.ring[ix].sid = 0;
        fenwick::add(self.live, ix, -1);
        self.hdr.waiting = self.hdr.waiting.saturating_sub(1);
    }

    /// A waiting client was seen: its place counts as present from now.
    fn seen_now(&mut self, ix: usize, now: u64) {
        self.ring[ix].last_seen = now;
        self.seen_unlink(ix);
        self.seen_push(ix);
    }

    fn seen_unlink(&mut self, ix: usize) {
        let Slot { prev, next, .. } = self.ring[ix];
        if prev == NIL {
            self.hdr.seen_first = next;
        } else {
            self.ring[prev as usize].next = next;
        }
        if next == NIL {
            self.hdr.seen_last = prev;
        } else {
            self.ring[next as usize].prev = prev;
        }
        self.ring[ix].prev = NIL;
        self.ring[ix].next = NIL;
    }

    fn seen_push(&mut self, ix: usize) {
        let last = self.hdr.seen_last;
        self.ring[ix].prev = last;
        self.ring[ix].next = NIL;
        if last == NIL {
            self.hdr.seen_first = ix as u32;
        } else {
            self.ring[last as usize].next = ix as u32;
        }
        self.hdr.seen_last = ix as u32;
    }

    // ------------------------------------------------------------------ time passes

    /// Drops what time has made stale: admitted sessions unseen for the active window, and
    /// places unseen for `presence`, wherever they stand in the line. Each goes once, so this
    /// is O(1) amortised per decision.
    fn tidy(&mut self, now: u64, limits: &Limits) {
        while self.hdr.lru_first != NIL {
            let i = self.hdr.lru_first as usize;
            let Some(e) = self.table.get(i).copied() else {
                break;
            };
            if now.saturating_sub(e.last_seen) < limits.active_window_ms {
                break;
            }
            self.remove_entry(i);
        }
        while self.hdr.seen_first != NIL {
            let ix = self.hdr.seen_first as usize;
            if now.saturating_sub(self.ring[ix].last_seen) < limits.presence_ms {
                break;
            }
            self.remove_place(ix);
            self.hdr.counters.expired += 1;
        }
        let minute = now / 60_000;
        if minute != self.hdr.minute {
            self.hdr.minute = minute;
            self.hdr.admitted_in_minute = 0;
        }
    }

    fn capacity_now(&self, limits: &Limits) -> Capacity {
        rules::capacity(
            limits,
            self.hdr.active,
            self.hdr.admitted_in_minute,
            self.hdr.free != NIL,
        )
    }

    // ------------------------------------------------------------------ decisions

    /// The decision for a client that holds no valid admitted ticket: the queue rules of
    /// ngx-smart-ratelimit ([S3]-[S6]) plus the room modes and flood control.
    pub fn visit(&mut self, v: Visit, now: u64, limits: &Limits) -> Verdict {
        self.tidy(now, limits);
        let mode = self.mode(limits);
        let held = self.place_of(v.sid);
        if let Some(ix) = held {
            self.seen_now(ix, now);
        }
        match mode {
            Mode::Reject => {
                self.hdr.counters.rejected += 1;
                return Verdict::Refuse(Refusal::Closed);
            }
            Mode::Passthrough => {
                if let Some(ix) = held {
                    self.remove_place(ix);
                }
                self.admit(v.sid, now, false);
                return Verdict::Admit { sid: v.sid };
            }
            Mode::Fifo | Mode::Random | Mode::QueueAll => {}
        }
        let Some(ix) = held else {
            return self.newcomer(v, mode, now, limits);
        };
        let qnum = self.ring[ix].qnum;
        let cap = self.capacity_now(limits);
        let turn = match mode {
            Mode::Fifo => self.head() == Some(qnum),
            // Lottery: with k free places and n clients present, each poll wins with chance k/n.
            Mode::Random => {
                let free = rules::free_places(limits, self.hdr.active, self.hdr.admitted_in_minute);
                rules::lottery_wins(v.draw, free, self.waiting())
            }
            _ => false,
        };
        if turn && cap == Capacity::Room {
            self.remove_place(ix);
            self.admit(v.sid, now, true);
            return Verdict::Admit { sid: v.sid };
        }
        self.wait_answer(v.sid, qnum, mode)
    }

    /// [S3]/[S4]: a client without a place walks straight in when nobody waits and there is
    /// room; otherwise it takes the tail, paid from its address's flood budget ([S15]).
    fn newcomer(&mut self, v: Visit, mode: Mode, now: u64, limits: &Limits) -> Verdict {
        let cap = self.capacity_now(limits);
        if matches!(mode, Mode::Fifo | Mode::Random) && self.waiting() == 0 && cap == Capacity::Room
        {
            if let Err(retry_ms) = self.flood_take(v.flood_key, now, limits) {
                return self.throttled(retry_ms);
            }
            self.admit(v.sid, now, false);
            return Verdict::Admit { sid: v.sid };
        }
        if let Err(retry_ms) = self.flood_take(v.flood_key, now, limits) {
            return self.throttled(retry_ms);
        }
        match self.join_line(v.sid, now) {
            Some(qnum) => self.wait_answer(v.sid, qnum, mode),
            None => {
                self.hdr.counters.rejected += 1;
                Verdict::Refuse(Refusal::LineFull {
                    queue_len: self.waiting(),
                })
            }
        }
    }

    fn throttled(&mut self, retry_ms: u64) -> Verdict {
        self.hdr.counters.throttled += 1;
        Verdict::Throttled {
            retry_ms,
            queue_len: self.waiting(),
        }
    }

    fn wait_answer(&mut self, sid: u64, qnum: u64, mode: Mode) -> Verdict {
        self.hdr.counters.waited += 1;
        let position = match mode {
            Mode::Fifo => self.position(qnum),
            _ => 0,
        };
        let eta_secs = if position > 0 && self.hdr.admit_interval_ms > 0 {
            Some((position * self.hdr.admit_interval_ms).div_ceil(1000))
        } else {
            None
        };
        Verdict::Wait(Place {
            sid,
            qnum,
            position,
            queue_len: self.waiting(),
            eta_secs,
        })
    }

    fn admit(&mut self, sid: u64, now: u64, from_line: bool) {
        self.touch(sid, now);
        self.hdr.admitted_in_minute += 1;
        self.hdr.counters.admitted += 1;
        if from_line {
            // Smooth the interval between admissions from the line (weight 1/4 on the newest).
            if self.hdr.last_admit_ms != 0 {
                let gap = now.saturating_sub(self.hdr.last_admit_ms).max(1);
                self.hdr.admit_interval_ms = if self.hdr.admit_interval_ms == 0 {
                    gap
                } else {
                    (self.hdr.admit_interval_ms * 3 + gap) / 4
                };
            }
            self.hdr.last_admit_ms = now;
        }
    }

    // ------------------------------------------------------------------ flood control

    /// Flood control on its own (the Redis store decides places in Redis, after this node's
    /// check): pays for one place from `key`'s budget; Err: ms until it may take one again.
    pub fn flood_check(&mut self, key: u64, now: u64, limits: &Limits) -> Result<(), u64> {
        let r = self.flood_take(Some(key), now, limits);
        if r.is_err() {
            self.hdr.counters.throttled += 1;
        }
        r
    }

    /// A first contact: counted, and the mode in force returned (one lock for both).
    pub fn arrival(&mut self, limits: &Limits) -> Mode {
        let mode = self.mode(limits);
        if !matches!(mode, Mode::Reject | Mode::Passthrough) {
            self.hdr.counters.arrivals += 1;
        }
        mode
    }

    /// Pays for one place from the budget of address `key` (when there is a key and a flood
    /// limit). Err: how long until the address may take one again (ms).
    fn flood_take(&mut self, key: Option<u64>, now: u64, limits: &Limits) -> Result<(), u64> {
        let (Some(key), Some(rate)) = (key, limits.flood) else {
            return Ok(());
        };
        let key = key.max(1);
        let now_us = now.saturating_mul(1000);
        let sets = self.flood.len() / FLOOD_WAYS;
        let set = ((key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize) % sets.max(1);
        let ways = &mut self.flood[set * FLOOD_WAYS..(set + 1) * FLOOD_WAYS];
        // This address's bucket, else the bucket closest to full (a full bucket is as good as
        // none, so it can be reused without giving anyone more than their budget).
        let i = match ways.iter().position(|e| e.key == key) {
            Some(i) => i,
            None => {
                let (i, _) = ways
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, e)| if e.key == 0 { 0 } else { e.tat })
                    .unwrap_or((0, &ways[0]));
                ways[i] = FloodEntry { key, tat: 0 };
                i
            }
        };
        match rate.take(ways[i].tat, now_us) {
            Ok(tat) => {
                ways[i].tat = tat;
                Ok(())
            }
            Err(wait_us) => Err(wait_us.div_ceil(1000)),
        }
    }

    // ------------------------------------------------------------------ admitted sessions

    /// Records that an admitted session was seen now (it counts as active for `active_window`).
    /// Returns false when the table has no room left for it (zone memory), which the caller logs.
    pub fn touch(&mut self, sid: u64, now: u64) -> bool {
        self.touch_entry(sid, now).is_some()
    }

    fn touch_entry(&mut self, sid: u64, now: u64) -> Option<usize> {
        if let Some(i) = self.find(sid) {
            self.table[i].last_seen = now;
            self.lru_unlink(i);
            self.lru_push(i);
            return Some(i);
        }
        let i = self.hdr.free;
        if i == NIL {
            return None;
        }
        let i = i as usize;
        self.hdr.free = self.table[i].next;
        let b = self.bucket(sid);
        self.table[i] = Entry {
            sid,
            last_seen: now,
            rate_tat: 0,
            prev: NIL,
            next: NIL,
            chain: self.buckets[b],
            _pad: 0,
        };
        self.buckets[b] = i as u32;
        self.lru_push(i);
        self.hdr.active += 1;
        Some(i)
    }

    /// A request on a valid admitted ticket: counted as active, within the session's request
    /// rate (when one is set), unless the room is closed.
    pub fn pass(&mut self, sid: u64, now: u64, limits: &Limits) -> PassVerdict {
        self.tidy(now, limits);
        if self.mode(limits) == Mode::Reject {
            return PassVerdict::Closed;
        }
        let Some(i) = self.touch_entry(sid, now) else {
            self.hdr.counters.passed += 1;
            return PassVerdict::Uncounted;
        };
        if let Some(rate) = limits.session_rate {
            match rate.take(self.table[i].rate_tat, now.saturating_mul(1000)) {
                Ok(tat) => self.table[i].rate_tat = tat,
                Err(wait_us) => {
                    self.hdr.counters.session_limited += 1;
                    return PassVerdict::Limited {
                        retry_ms: wait_us.div_ceil(1000),
                    };
                }
            }
        }
        self.hdr.counters.passed += 1;
        PassVerdict::Counted
    }

    /// Ends an admitted session at once (origin said revoke): its place frees immediately.
    pub fn revoke(&mut self, sid: u64) -> bool {
        match self.find(sid) {
            Some(i) => {
                self.remove_entry(i);
                self.hdr.counters.revoked += 1;
                true
            }
            None => false,
        }
    }

    pub fn snapshot(&mut self, now: u64, limits: &Limits) -> Snapshot {
        self.tidy(now, limits);
        let oldest_wait_ms = match self.head() {
            Some(q) => now.saturating_sub(self.ring[self.ring_index(q)].joined.min(now)),
            None => 0,
        };
        // Mirrored Redis figures while fresh; this node's own once Redis has been silent for
        // a while (then the local room is what decides, under on_error=local).
        let fresh = self.hdr.remote_at_ms != 0
            && now.saturating_sub(self.hdr.remote_at_ms) < limits.active_window_ms.max(60_000);
        let (queue_len, active) = if fresh {
            (self.hdr.remote_queue_len, self.hdr.remote_active)
        } else {
            (self.waiting(), self.hdr.active)
        };
        Snapshot {
            queue_len,
            active,
            oldest_wait_ms,
            counters: self.hdr.counters,
            capacity: self.capacity(),
            mode_override: self.hdr.mode_override,
        }
    }

    fn bucket(&self, sid: u64) -> usize {
        self.sid_bucket(sid, self.buckets.len())
    }

    fn find(&self, sid: u64) -> Option<usize> {
        let mut i = self.buckets[self.bucket(sid)];
        let mut steps = 0usize;
        while i != NIL && steps <= self.table.len() {
            let e = self.table.get(i as usize)?;
            if e.sid == sid {
                return Some(i as usize);
            }
            i = e.chain;
            steps += 1;
        }
        None
    }

    fn remove_entry(&mut self, i: usize) {
        let sid = self.table[i].sid;
        // Unchain from its bucket.
        let b = self.bucket(sid);
        if self.buckets[b] == i as u32 {
            self.buckets[b] = self.table[i].chain;
        } else {
            let mut j = self.buckets[b];
            while j != NIL {
                let next = self.table[j as usize].chain;
                if next == i as u32 {
                    self.table[j as usize].chain = self.table[i].chain;
                    break;
                }
                j = next;
            }
        }
        self.lru_unlink(i);
        self.table[i] = Entry {
            sid: 0,
            last_seen: 0,
            rate_tat: 0,
            prev: NIL,
            next: self.hdr.free,
            chain: NIL,
            _pad: 0,
        };
        self.hdr.free = i as u32;
        self.hdr.active = self.hdr.active.saturating_sub(1);
    }

    fn lru_unlink(&mut self, i: usize) {
        let Entry { prev, next, .. } = self.table[i];
        if prev == NIL {
            self.hdr.lru_first = next;
        } else {
            self.table[prev as usize].next = next;
        }
        if next == NIL {
            self.hdr.lru_last = prev;
        } else {
            self.table[next as usize].prev = prev;
        }
        self.table[i].prev = NIL;
        self.table[i].next = NIL;
    }

    fn lru_push(&mut self, i: usize) {
        let last = self.hdr.lru_last;
        self.table[i].prev = last;
        self.table[i].next = NIL;
        if last == NIL {
            self.hdr.lru_first = i as u32;
        } else {
            self.table[last as usize].next = i as u32;
        }
        self.hdr.lru_last = i as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_active: 2,
            new_per_minute: None,
            presence_ms: 20_000,
            active_window_ms: 60_000,
            mode: Mode::Fifo,
            flood: None,
            session_rate: None,
        }
    }

    struct Mem(Vec<u64>);
    impl Mem {
        fn new(bytes: usize) -> Mem {
            Mem(vec![0u64; bytes / 8])
        }
        fn bytes(&mut self) -> &mut [u8] {
            let len = self.0.len() * 8;
            // SAFETY: a Vec<u64> is 8-aligned and `len` bytes long.
            unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut u8, len) }
        }
    }

    fn visit(room: &mut Room, sid: u64, qnum: u64, now: u64, l: &Limits) -> Verdict {
        room.visit(
            Visit {
                sid,
                qnum,
                draw: 0,
                flood_key: None,
                arrival: 0,
            },
            now,
            l,
        )
    }

    fn place(v: Verdict) -> Place {
        match v {
            Verdict::Wait(p) => p,
            other => panic!("expected to wait, got {other:?}"),
        }
    }

    #[test]
    fn empty_room_admits_then_queues_in_arrival_order() {
        let mut mem = Mem::new(64 * 1024);
        let l = limits();
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        assert_eq!(
            visit(&mut room, 11, 0, 1000, &l),
            Verdict::Admit { sid: 11 }
        );
        assert_eq!(
            visit(&mut room, 12, 0, 1000, &l),
            Verdict::Admit { sid: 12 }
        );
        let c = place(visit(&mut room, 13, 0, 1000, &l));
        let d = place(visit(&mut room, 14, 0, 1001, &l));
        assert_eq!((c.position, d.position), (1, 2));
        assert_eq!(d.queue_len, 2);
        // Retrying keeps the same place.
        let c2 = place(visit(&mut room, 13, c.qnum, 1500, &l));
        assert_eq!((c2.qnum, c2.position), (c.qnum, 1));
        let d2 = place(visit(&mut room, 14, d.qnum, 1500, &l));
        assert_eq!((d2.qnum, d2.position), (d.qnum, 2));
    }

    #[test]
    fn head_is_admitted_when_capacity_frees_after_active_window() {
        let mut mem = Mem::new(64 * 1024);
        let l = limits();
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        visit(&mut room, 2, 0, 0, &l);
        let c = place(visit(&mut room, 3, 0, 0, &l));
        let d = place(visit(&mut room, 4, 0, 0, &l));
        // Both keep polling every 10 s; the second in line never goes first.
        for t in [10_000, 20_000, 30_000, 40_000, 50_000] {
            assert!(matches!(
                visit(&mut room, 4, d.qnum, t, &l),
                Verdict::Wait(_)
            ));
            assert!(matches!(
                visit(&mut room, 3, c.qnum, t, &l),
                Verdict::Wait(_)
            ));
        }
        // Admitted 1 stays active by being seen; 2 is not seen again.
        assert_eq!(room.pass(1, 30_000, &l), PassVerdict::Counted);
        assert!(matches!(
            visit(&mut room, 3, c.qnum, 59_999, &l),
            Verdict::Wait(_)
        ));
        // 2 has been unseen for active_window: its place frees and the head goes in.
        assert_eq!(
            visit(&mut room, 3, c.qnum, 60_000, &l),
            Verdict::Admit { sid: 3 }
        );
        let d = place(visit(&mut room, 4, d.qnum, 60_001, &l));
        assert_eq!(d.position, 1);
    }

    #[test]
    fn absent_head_loses_its_place() {
        let mut mem = Mem::new(64 * 1024);
        let l = Limits {
            max_active: 1,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        let b = place(visit(&mut room, 2, 0, 0, &l));
        let c = place(visit(&mut room, 3, 0, 0, &l));
        assert_eq!(c.position, 2);
        // c keeps polling, b goes away.
        let c = place(visit(&mut room, 3, c.qnum, 19_000, &l));
        assert_eq!(c.position, 2);
        let c = place(visit(&mut room, 3, c.qnum, 20_000, &l));
        assert_eq!(c.position, 1, "absent head dropped after presence");
        // b comes back too late: a new place at the tail.
        let b2 = place(visit(&mut room, 2, b.qnum, 21_000, &l));
        assert_ne!(b2.qnum, b.qnum);
        assert_eq!(b2.position, 2);
        assert_eq!(room.snapshot(21_000, &l).counters.expired, 1);
    }

    #[test]
    fn new_per_minute_limits_inflow() {
        let mut mem = Mem::new(64 * 1024);
        let l = Limits {
            max_active: 100,
            new_per_minute: Some(2),
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        assert!(matches!(
            visit(&mut room, 1, 0, 0, &l),
            Verdict::Admit { .. }
        ));
        assert!(matches!(
            visit(&mut room, 2, 0, 0, &l),
            Verdict::Admit { .. }
        ));
        let c = place(visit(&mut room, 3, 0, 0, &l));
        assert_eq!(
            visit(&mut room, 3, c.qnum, 60_000, &l),
            Verdict::Admit { sid: 3 }
        );
    }

    #[test]
    fn full_line_refuses_without_corruption() {
        let mut mem = Mem::new(Room::MIN_BYTES);
        let l = Limits {
            max_active: 1,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        let cap = room.capacity();
        visit(&mut room, 1, 0, 0, &l);
        let mut places = vec![];
        for sid in 2..2 + cap {
            places.push(place(visit(&mut room, sid, 0, 0, &l)));
        }
        assert!(matches!(
            visit(&mut room, 999_999, 0, 0, &l),
            Verdict::Refuse(Refusal::LineFull { .. })
        ));
        // Everyone already in line keeps a correct position.
        for (i, p) in places.iter().enumerate() {
            let again = place(visit(&mut room, p.sid, p.qnum, 1, &l));
            assert_eq!(again.position, i as u64 + 1);
        }
    }

    #[test]
    fn attach_sees_what_format_wrote_and_refuses_junk() {
        let mut mem = Mem::new(64 * 1024);
        let l = limits();
        {
            let mut room = Room::format(mem.bytes(), 7).unwrap();
            visit(&mut room, 1, 0, 0, &l);
            visit(&mut room, 2, 0, 0, &l);
            visit(&mut room, 3, 0, 0, &l);
        }
        let mut room = Room::attach(mem.bytes()).unwrap();
        let s = room.snapshot(1, &l);
        assert_eq!((s.queue_len, s.active), (1, 2));
        let mut junk = Mem::new(64 * 1024);
        assert_eq!(
            Room::attach(junk.bytes()).err(),
            Some(LayoutError::NotARoom)
        );
    }

    #[test]
    fn mirrored_figures_show_while_fresh() {
        let mut mem = Mem::new(64 * 1024);
        let l = limits();
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        let m = Mirror {
            queue_len: Some(40),
            active: Some(7),
            mode_override: Some(5),
            version: 900,
        };
        room.mirror_remote(&m, 1000);
        // An older reply that arrives later changes nothing; a partial one changes its part.
        let old = Mirror {
            queue_len: Some(39),
            version: 899,
            ..m
        };
        room.mirror_remote(&old, 1000);
        let part = Mirror {
            queue_len: None,
            active: Some(6),
            mode_override: None,
            version: 901,
        };
        room.mirror_remote(&part, 1000);
        let s = room.snapshot(1000, &l);
        assert_eq!((s.queue_len, s.active, s.mode_override), (40, 6, 5));
        // Stale after the active window: the local figures again.
        let s = room.snapshot(1000 + l.active_window_ms, &l);
        assert_eq!((s.queue_len, s.active), (0, 0));
    }

    #[test]
    fn oldest_wait_counts_from_joining_not_from_the_last_poll() {
        let mut mem = Mem::new(64 * 1024);
        let l = Limits {
            max_active: 1,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        let b = place(visit(&mut room, 2, 0, 1_000, &l));
        place(visit(&mut room, 2, b.qnum, 10_000, &l));
        assert_eq!(room.snapshot(15_000, &l).oldest_wait_ms, 14_000);
    }

    #[test]
    fn revoke_frees_a_place_at_once() {
        let mut mem = Mem::new(64 * 1024);
        let l = Limits {
            max_active: 1,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        let b = place(visit(&mut room, 2, 0, 0, &l));
        assert!(room.revoke(1));
        assert_eq!(
            visit(&mut room, 2, b.qnum, 10, &l),
            Verdict::Admit { sid: 2 }
        );
    }

    #[test]
    fn table_survives_many_sessions_coming_and_going() {
        let mut mem = Mem::new(16 * 1024);
        let l = Limits {
            max_active: 10,
            active_window_ms: 1000,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        for round in 0..200u64 {
            for s in 0..10u64 {
                room.touch(round * 100 + s + 1, round * 1000);
            }
            let snap = room.snapshot(round * 1000, &l);
            assert_eq!(snap.active, 10, "round {round}");
        }
    }

    #[test]
    fn eta_follows_admissions() {
        let mut mem = Mem::new(64 * 1024);
        let l = Limits {
            max_active: 1,
            active_window_ms: 1000,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        let b = place(visit(&mut room, 2, 0, 0, &l));
        let c = place(visit(&mut room, 3, 0, 0, &l));
        let d = place(visit(&mut room, 4, 0, 0, &l));
        assert_eq!(c.eta_secs, None);
        assert!(matches!(
            visit(&mut room, 2, b.qnum, 1000, &l),
            Verdict::Admit { .. }
        ));
        visit(&mut room, 4, d.qnum, 1000, &l);
        assert!(matches!(
            visit(&mut room, 3, c.qnum, 2000, &l),
            Verdict::Admit { .. }
        ));
        let d = place(visit(&mut room, 4, d.qnum, 2000, &l));
        assert_eq!(d.position, 1);
        assert_eq!(d.eta_secs, Some(1));
    }

    #[test]
    fn positions_count_only_present_places() {
        let mut mem = Mem::new(64 * 1024);
        let l = Limits {
            max_active: 1,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        // Ten clients in line; the ones in the middle stop polling.
        let places: Vec<Place> = (2..12)
            .map(|sid| place(visit(&mut room, sid, 0, 0, &l)))
            .collect();
        assert_eq!(places[9].position, 10);
        for t in [10_000u64, 19_999] {
            for p in places.iter().filter(|p| p.sid % 2 == 0) {
                place(visit(&mut room, p.sid, p.qnum, t, &l));
            }
        }
        // At 20 s the absent ones (odd sids) are gone, wherever they stood.
        let last = place(visit(&mut room, 10, places[8].qnum, 20_000, &l));
        assert_eq!((last.position, last.queue_len), (5, 5));
        let first = place(visit(&mut room, 2, places[0].qnum, 20_001, &l));
        assert_eq!(first.position, 1);
        assert_eq!(room.snapshot(20_001, &l).counters.expired, 5);
    }

    #[test]
    fn head_is_the_first_present_place_and_goes_first() {
        let mut mem = Mem::new(64 * 1024);
        let l = Limits {
            max_active: 1,
            active_window_ms: 30_000,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        let b = place(visit(&mut room, 2, 0, 0, &l));
        let c = place(visit(&mut room, 3, 0, 0, &l));
        // b leaves (stops polling); c keeps polling and becomes the head at 20 s.
        place(visit(&mut room, 3, c.qnum, 15_000, &l));
        let c2 = place(visit(&mut room, 3, c.qnum, 25_000, &l));
        assert_eq!(c2.position, 1);
        // Capacity frees at 30 s (session 1 unseen): the head goes in.
        assert_eq!(
            visit(&mut room, 3, c.qnum, 30_000, &l),
            Verdict::Admit { sid: 3 }
        );
        assert_ne!(b.qnum, c.qnum);
        assert_eq!(room.snapshot(30_000, &l).queue_len, 0);
    }

    #[test]
    fn abandoned_places_free_the_ring() {
        // A small ring filled by clients who never come back is empty again after presence.
        let mut mem = Mem::new(Room::MIN_BYTES);
        let l = Limits {
            max_active: 1,
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        let cap = room.capacity();
        visit(&mut room, 1, 0, 0, &l);
        for round in 0..3u64 {
            let t = round * 20_000;
            for sid in 0..cap {
                assert!(
                    matches!(
                        visit(&mut room, 10 + round * cap + sid, 0, t, &l),
                        Verdict::Wait(_)
                    ),
                    "round {round} sid {sid}"
                );
            }
            assert!(matches!(
                visit(&mut room, 999_999_999, 0, t, &l),
                Verdict::Refuse(Refusal::LineFull { .. })
            ));
        }
    }

    #[test]
    fn one_address_takes_places_at_its_rate_others_are_not_slowed() {
        let mut mem = Mem::new(256 * 1024);
        let l = Limits {
            max_active: 1,
            flood: Some(crate::rate::Rate::per_sec(1.0, 4)),
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        let from = |room: &mut Room, sid: u64, key: u64, now: u64| {
            room.visit(
                Visit {
                    sid,
                    qnum: 0,
                    draw: 0,
                    flood_key: Some(key),
                    arrival: 0,
                },
                now,
                &l,
            )
        };
        // Address 7: one plus a burst of four places at once, then one a second.
        for sid in 10..15 {
            assert!(matches!(from(&mut room, sid, 7, 1000), Verdict::Wait(_)));
        }
        assert!(matches!(
            from(&mut room, 15, 7, 1000),
            Verdict::Throttled { retry_ms: 1000, .. }
        ));
        // Another address is not slowed.
        assert!(matches!(from(&mut room, 16, 8, 1000), Verdict::Wait(_)));
        assert!(matches!(from(&mut room, 17, 7, 2000), Verdict::Wait(_)));
        assert!(matches!(
            from(&mut room, 18, 7, 2000),
            Verdict::Throttled { .. }
        ));
        assert_eq!(room.snapshot(2000, &l).counters.throttled, 2);
        // Many addresses: each keeps its own budget even when the table turns over.
        for key in 100..20_000u64 {
            assert!(!matches!(
                from(&mut room, key + 1_000_000, key, 3000),
                Verdict::Throttled { .. }
            ));
        }
    }

    #[test]
    fn a_session_over_its_request_rate_is_limited() {
        let mut mem = Mem::new(64 * 1024);
        let l = Limits {
            session_rate: Some(crate::rate::Rate::per_sec(10.0, 19)),
            ..limits()
        };
        let mut room = Room::format(mem.bytes(), 1).unwrap();
        visit(&mut room, 1, 0, 0, &l);
        for _ in 0..20 {
            assert_eq!(room.pass(1, 1000, &l), PassVerdict::Counted);
        }
        assert_eq!(
            room.pass(1, 1000, &l),
            PassVerdict::Limited { retry_ms: 100 }
        );
        assert_eq!(room.pass(1, 1100, &l), PassVerdict::Counted);
        // Another session has its own budget.
        assert_eq!(room.pass(2, 1100, &l), PassVerdict::Counted);
        assert_eq!(room.snapshot(1100, &l).counters.session_limited, 1);
    }
}
