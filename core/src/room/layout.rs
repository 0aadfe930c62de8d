//! The room's block of memory: its header, the ring of places, the session table and the
//! flood table, how they are laid out in one flat block (no pointers, so every worker can map
//! it), and how a block is formatted or attached again after a reload.

use core::mem::{align_of, size_of};

use super::rules::{Limits, Mode};
use super::{Counters, Room};

const MAGIC: u64 = 0x534d_4152_544c_4d31; // "SMARTLM1"
/// Bumped whenever the layout below changes; a reload onto an old layout is refused.
/// 4: the places' last-sight list became the sight tree; sessions carry a stamp (the fence).
/// 5: the header holds a scheduled event's pre-queue and the start's shuffle.
/// 6: the table of events made at run time follows the header.
/// 7: two counters of the proof of work (`challenged`, `proofs_refused`).
/// 8: the table of spent proofs (see `spent`).
/// 9: the zone's header (the module's, before the room) gains `max_active=auto`'s state: a
///    reload onto a module of the earlier layout must not read it.
pub const LAYOUT_VERSION: u32 = 9;
pub(super) const NIL: u32 = u32::MAX;
/// Entries per set of the flood table (a set is scanned whole).
pub(super) const FLOOD_WAYS: usize = 8;

#[repr(C)]
pub(super) struct Header {
    magic: u64,
    pub(super) version: u32,
    pub(super) ring_len: u32,
    table_len: u32,
    bucket_len: u32,
    flood_len: u32,
    _pad0: u32,
    /// No present place has a queue number below this (the head is the first present one at
    /// or after it; places below it are absent ones not removed yet); `low == tail` when
    /// nobody present waits.
    pub(super) low: u64,
    /// Next queue number to hand out.
    pub(super) tail: u64,
    /// The admitted session `fence_k` entries from the back of the list by last sight (table
    /// index), NIL when fewer are on it: whether `max_active` sessions are still active is
    /// whether this one is (see `sessions`).
    pub(super) fence: u32,
    pub(super) _pad1: u32,
    /// How far from the back `fence` stands; 0: not placed yet.
    pub(super) fence_k: u64,
    /// Stamp of the next session put at the back of the list (stamps rise along the list).
    pub(super) next_stamp: u64,
    /// Places in the ring (the Fenwick tree's total, kept at hand), absent ones not yet
    /// removed included.
    pub(super) waiting: u64,
    /// Entries in the admitted table, all on the list by last sight (absent ones not yet
    /// removed included).
    pub(super) active: u64,
    pub(super) lru_first: u32,
    pub(super) lru_last: u32,
    pub(super) free: u32,
    pub(super) _pad: u32,
    /// Minute (unix ms / 60000) that `admitted_in_minute` counts, for `new_per_minute`.
    pub(super) minute: u64,
    pub(super) admitted_in_minute: u64,
    /// When the line last moved, and a smoothed interval between admissions from the line:
    /// the estimated wait is `position * interval`.
    pub(super) last_admit_ms: u64,
    pub(super) admit_interval_ms: u64,
    /// Mode switched at run time (see `rules::Mode`), stored as its code; 0 = the configured one.
    pub(super) mode_override: u32,
    _pad2: u32,
    pub(super) counters: Counters,
    /// Redis store: the room's line length and active count from the latest script reply,
    /// and when it came (0 = never). Snapshots report them while they are fresh.
    pub(super) remote_queue_len: u64,
    pub(super) remote_active: u64,
    pub(super) remote_at_ms: u64,
    /// The Redis clock of the reply the figures came from: replies coming back on several
    /// connections (workers) never put older figures over newer ones.
    pub(super) remote_version: u64,
    /// A scheduled event's pre-queue (see `event`): the event's id (0: none), the queue numbers
    /// its places took (`ev_from..ev_to`; `ev_to` is 0 until the start), how far the start's
    /// shuffle has come (the places below `ev_next` are in their final order), how many
    /// random numbers it has drawn, and the seed it draws them from.
    pub(super) ev_id: u64,
    pub(super) ev_from: u64,
    pub(super) ev_to: u64,
    pub(super) ev_next: u64,
    pub(super) ev_draws: u64,
    pub(super) ev_seed: [u8; 32],
}

/// The room's events made at run time (see `event::runtime`): their lines, as text, and
/// what tells a worker its copy is out of date.
#[repr(C)]
pub(super) struct EventTable {
    /// Changes whenever the text does.
    pub(super) generation: u64,
    /// A Redis store: the version of the fleet's table the text is a copy of.
    pub(super) remote_version: u64,
    /// A Redis store: when a worker last asked Redis for the fleet's table (wall ms).
    pub(super) fetched_at: u64,
    pub(super) len: u32,
    pub(super) _pad: u32,
    pub(super) text: [u8; crate::event::runtime::MAX_TABLE_BYTES],
}

/// Where the regions after the header and the event table begin.
fn regions_start() -> usize {
    round8(size_of::<Header>()) + round8(size_of::<EventTable>())
}

/// A place in the line.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Slot {
    pub(super) sid: u64, // 0 = empty (left, admitted, expired, or never used)
    pub(super) qnum: u64,
    pub(super) last_seen: u64,
    /// When the client took this place (for the "oldest wait" gauge).
    pub(super) joined: u64,
    /// Next place in the same bucket of the session-id hash.
    pub(super) chain: u32,
    pub(super) _pad: u32,
}

/// An admitted session recently seen.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub(super) sid: u64, // 0 = free
    pub(super) last_seen: u64,
    /// The session's request-rate bucket (see `rate`), 0 = full.
    pub(super) rate_tat: u64,
    /// When it was put at the back of the list by last sight (`Header::next_stamp`).
    pub(super) stamp: u64,
    pub(super) prev: u32,
    pub(super) next: u32,
    pub(super) chain: u32, // next entry in the same hash bucket
    pub(super) _pad: u32,
}

/// A node of the sight tree (see `sight`): the latest and the earliest key (last sight plus
/// one) of the places under it.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Sight {
    pub(super) max: u64,
    pub(super) min: u64,
}

impl Sight {
    /// No place: below every threshold for "present", above every one for "absent".
    pub(super) const EMPTY: Sight = Sight {
        max: 0,
        min: u64::MAX,
    };
}

/// Ring slots per leaf of the sight tree: a leaf is recomputed by reading its slots (16 slots
/// of 40 bytes, ten cache lines next to each other), which keeps the tree small.
pub(super) const SIGHT_BLOCK: usize = 16;

/// Leaves of the sight tree for a ring of `ring_len` slots: a power of two.
pub(super) fn sight_leaves(ring_len: usize) -> usize {
    ring_len.div_ceil(SIGHT_BLOCK).max(1).next_power_of_two()
}

/// Nodes of the sight tree for a ring of `ring_len` slots (index 0 unused).
fn sight_nodes(ring_len: usize) -> usize {
    2 * sight_leaves(ring_len)
}

/// The rate bucket of one client address (flood control).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct FloodEntry {
    /// Hash of the address key; 0 = unused.
    pub(super) key: u64,
    pub(super) tat: u64,
}

/// A proof of work recorded as spent (see `spent`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct SpentEntry {
    /// `challenge::spent_key` of the proof's ticket; 0 = unused.
    pub(super) key: u64,
    /// Until when it is remembered (unix ms).
    pub(super) until: u64,
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

fn round8(n: usize) -> usize {
    (n + 7) & !7
}

/// Bytes one session costs in the zone: a ring slot, its Fenwick counter and hash bucket, a
/// table entry and its bucket, a quarter of a flood-table entry and of a spent-proof entry,
/// and its share of the sight tree (2 to 4 bytes, as the tree's leaves round up to a power of
/// two; 4 counted here).
pub const BYTES_PER_SESSION: usize = size_of::<Slot>()
    + 2 * size_of::<u32>()
    + size_of::<Entry>()
    + size_of::<u32>()
    + size_of::<FloodEntry>() / 4
    + size_of::<SpentEntry>() / 4
    + 4;

/// Flood-table entries for `n` sessions: a quarter entry each, whole sets, at least two. The
/// spent-proof table has as many.
fn flood_len(n: usize) -> usize {
    ((n / 4) / FLOOD_WAYS).max(2) * FLOOD_WAYS
}

/// How many sessions a block of `len` bytes holds (the line and the admitted table each): the
/// most whose layout fits (the sight tree's size is not linear in it, so this searches).
pub fn capacity_for(len: usize) -> usize {
    let fits = |n: usize| n == 0 || layout(n, n, n, flood_len(n)).end <= len;
    let (mut lo, mut hi) = (0usize, len / (size_of::<Slot>() + size_of::<Entry>()) + 1);
    // Invariant: `lo` fits, `hi` does not.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The regions after the header (buckets first): their offsets and the end.
struct Layout {
    pub(super) table: usize,
    pub(super) ring: usize,
    pub(super) places: usize,
    pub(super) live: usize,
    pub(super) flood: usize,
    pub(super) spent: usize,
    pub(super) sight: usize,
    end: usize,
}

fn layout(nb: usize, nt: usize, nr: usize, nf: usize) -> Layout {
    let hsize = regions_start();
    let table = hsize + round8(nb * size_of::<u32>());
    let ring = table + nt * size_of::<Entry>();
    let places = ring + nr * size_of::<Slot>();
    let live = places + round8(nr * size_of::<u32>());
    let flood = live + round8(nr * size_of::<u32>());
    let spent = flood + nf * size_of::<FloodEntry>();
    let sight = spent + nf * size_of::<SpentEntry>();
    let end = sight + sight_nodes(nr) * size_of::<Sight>();
    Layout {
        table,
        ring,
        places,
        live,
        flood,
        spent,
        sight,
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
        let nf = flood_len(n);
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
            fence: NIL,
            _pad1: 0,
            fence_k: 0,
            next_stamp: 1,
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
            ev_id: 0,
            ev_from: 0,
            ev_to: 0,
            ev_next: 0,
            ev_draws: 0,
            ev_seed: [0; 32],
        };
        if n == 0 || layout(n, n, n, nf).end > mem.len() {
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
            s.chain = NIL;
        }
        room.places.fill(NIL);
        room.sight.fill(Sight::EMPTY);
        Ok(room)
    }

    /// Reads a room that [`Room::format`] wrote earlier (by this or another process).
    pub fn attach(mem: &'m mut [u8]) -> Result<Room<'m>, LayoutError> {
        let hsize = regions_start();
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
                events: &mut *(base.add(round8(size_of::<Header>())) as *mut EventTable),
                buckets: core::slice::from_raw_parts_mut(base.add(hsize) as *mut u32, nb),
                table: core::slice::from_raw_parts_mut(base.add(l.table) as *mut Entry, nt),
                ring: core::slice::from_raw_parts_mut(base.add(l.ring) as *mut Slot, nr),
                places: core::slice::from_raw_parts_mut(base.add(l.places) as *mut u32, nr),
                live: core::slice::from_raw_parts_mut(base.add(l.live) as *mut u32, nr),
                flood: core::slice::from_raw_parts_mut(base.add(l.flood) as *mut FloodEntry, nf),
                spent: core::slice::from_raw_parts_mut(base.add(l.spent) as *mut SpentEntry, nf),
                sight: core::slice::from_raw_parts_mut(
                    base.add(l.sight) as *mut Sight,
                    sight_nodes(nr),
                ),
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
}
