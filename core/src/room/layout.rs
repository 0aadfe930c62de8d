//! The room's block of memory: its header, the ring of places, the session table and the
//! flood table, how they are laid out in one flat block (no pointers, so every worker can map
//! it), and how a block is formatted or attached again after a reload.

use core::mem::{align_of, size_of};

use super::rules::{Limits, Mode};
use super::{Counters, Room};

const MAGIC: u64 = 0x534d_4152_544c_4d31; // "SMARTLM1"
/// Bumped whenever the layout below changes; a reload onto an old layout is refused.
pub const LAYOUT_VERSION: u32 = 3;
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
    /// No live place has a queue number below this (the head is the first live one at or
    /// after it); `low == tail` when nobody waits.
    pub(super) low: u64,
    /// Next queue number to hand out.
    pub(super) tail: u64,
    /// Places by last sight (ring indices), oldest first.
    pub(super) seen_first: u32,
    pub(super) seen_last: u32,
    /// Live places in the line (the Fenwick tree's total, kept at hand).
    pub(super) waiting: u64,
    /// Entries in the admitted table (every one seen within `active_window`).
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
    /// Neighbours on the list by last sight (ring indices).
    pub(super) prev: u32,
    pub(super) next: u32,
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
    pub(super) prev: u32,
    pub(super) next: u32,
    pub(super) chain: u32, // next entry in the same hash bucket
    pub(super) _pad: u32,
}

/// The rate bucket of one client address (flood control).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct FloodEntry {
    /// Hash of the address key; 0 = unused.
    pub(super) key: u64,
    pub(super) tat: u64,
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
    pub(super) table: usize,
    pub(super) ring: usize,
    pub(super) places: usize,
    pub(super) live: usize,
    pub(super) flood: usize,
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
}
