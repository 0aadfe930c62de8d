//! Admitted sessions: a chained hash table (session id -> entry) whose entries also sit on a
//! list ordered by last sight; each entry holds its session's request-rate bucket. Also the
//! room's snapshot for metrics.
//!
//! The sessions unseen for `active_window` fall off the front of the list, a few per decision
//! (see `line::EXPIRE_STEP`), so the table's count may include absent ones for a while. Whether
//! the room is full must not wait for them: a fence stands `max_active` entries from the back
//! of the list, moved one step by each change at the back or behind it (O(1)). The list is in
//! order of last sight, so at least `max_active` sessions are active exactly when the fenced
//! one is ([S4], [S20]).

use super::layout::Entry;
use super::layout::NIL;
use super::rules::Mode;

use super::rules::Limits;
use super::sight::{cut, Cuts};
use super::{PassVerdict, Room, Snapshot, Verdict, Visit};

/// How many steps a decision may move the fence when `max_active` changed (a reload): each
/// step is one link followed, so 1,024 cost a few microseconds at most, and until the fence
/// stands at `max_active` the room decides by the table's count (which may still hold absent
/// sessions: it then admits later, never beyond `max_active`).
const FENCE_STEP: usize = 1024;

impl<'m> Room<'m> {
    /// Records that an admitted session was seen now (it counts as active for `active_window`).
    /// Returns false when the table has no room left for it (zone memory), which the caller logs.
    pub fn touch(&mut self, sid: u64, now: u64) -> bool {
        self.touch_entry(sid, now).is_some()
    }

    fn touch_entry(&mut self, sid: u64, now: u64) -> Option<usize> {
        if let Some(i) = self.find(sid) {
            self.table[i].last_seen = now;
            // Already the most recent: nothing moves (and the fence stays right).
            if self.hdr.lru_last != i as u32 {
                self.lru_unlink(i);
                self.lru_push(i);
            }
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
            stamp: 0,
            prev: NIL,
            next: NIL,
            chain: self.buckets[b],
            _pad: 0,
        };
        self.buckets[b] = i as u32;
        self.lru_push(i);
        Some(i)
    }

    /// Admitted sessions active at `now` as far as the limits need it: the table's count when
    /// no absent session is left in it (exact); otherwise the fence says whether `max_active`
    /// are active, and the count returned gives the same answer (full: the table's count, at
    /// least `max_active`; not full: below `max_active`, though possibly below the truth).
    pub(super) fn active_now(&mut self, now: u64, limits: &Limits) -> u64 {
        let active = self.hdr.active;
        let wcut = cut(now, limits.active_window_ms);
        let front_absent = self
            .table
            .get(self.hdr.lru_first as usize)
            .is_some_and(|e| e.last_seen.saturating_add(1) <= wcut);
        if !front_absent || active < limits.max_active || limits.max_active == 0 {
            return active;
        }
        self.seat_fence(limits.max_active);
        if self.hdr.fence_k != limits.max_active {
            return active;
        }
        match self.table.get(self.hdr.fence as usize) {
            Some(e) if e.last_seen.saturating_add(1) <= wcut => limits.max_active - 1,
            // Active, or (never, as `active` is at least `max_active`) no fence.
            _ => active,
        }
    }

    /// Moves the fence towards `k` entries from the back, [`FENCE_STEP`] steps at most.
    fn seat_fence(&mut self, k: u64) {
        if self.hdr.fence_k == k {
            return;
        }
        let active = self.hdr.active;
        // Fewer entries than `k`: no fence, wherever it stood.
        if active < k {
            self.hdr.fence = NIL;
            self.hdr.fence_k = k;
            return;
        }
        // Walk from whichever is nearest: where it stands (when it stands on an entry), the
        // back of the list (the entry 1 from the back) or its front (`active` from the back).
        let here = match self.hdr.fence {
            NIL => u64::MAX,
            _ => self.hdr.fence_k.abs_diff(k),
        };
        let (back, front) = (k - 1, active - k);
        if back < here.min(front) {
            self.hdr.fence = self.hdr.lru_last;
            self.hdr.fence_k = 1;
        } else if front < here {
            self.hdr.fence = self.hdr.lru_first;
            self.hdr.fence_k = active;
        }
        for _ in 0..FENCE_STEP {
            if self.hdr.fence_k == k {
                return;
            }
            let f = self.table.get(self.hdr.fence as usize);
            if self.hdr.fence_k < k {
                // One further from the back.
                self.hdr.fence = f.map_or(NIL, |e| e.prev);
                self.hdr.fence_k += 1;
            } else {
                // One nearer the back.
                self.hdr.fence = f.map_or(NIL, |e| e.next);
                self.hdr.fence_k -= 1;
            }
        }
    }

    /// A request on a valid admitted ticket (or admission token) of the session `sid`,
    /// admitted at `admitted_at`: counted as active, within the session's request rate (when
    /// one is set), unless the room is closed or the origin revoked that admission here.
    pub fn pass(&mut self, sid: u64, admitted_at: u64, now: u64, limits: &Limits) -> PassVerdict {
        self.tidy(now, limits);
        if self.mode(limits) == Mode::Reject {
            return PassVerdict::Closed;
        }
        if self.revoked(sid, admitted_at, now) {
            return PassVerdict::Revoked;
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
        let c = Cuts::at(now, limits);
        let oldest_wait_ms = match self.head(c) {
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
            (self.line_len(c), self.hdr.active)
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

    /// [S29] Whether the room is engaged: someone present waits, no place is free, or its mode
    /// holds newcomers back (closed, everyone queued). While it is not, a page view under the
    /// rate limit passes untouched; while it is, a newcomer's document goes through the room.
    /// On a Redis room's node: the fleet's figures from its last reply, however old (a node
    /// that has not heard from the fleet for long asks it with the next document it routes).
    /// Bounded work: a look at the head of the line and at the active count, no tidy.
    pub fn engaged(&mut self, now: u64, limits: &Limits) -> bool {
        match self.mode(limits) {
            Mode::Passthrough => return false,
            Mode::Reject | Mode::QueueAll => return true,
            Mode::Fifo | Mode::Random => {}
        }
        if self.hdr.remote_at_ms != 0 {
            return self.hdr.remote_queue_len > 0 || self.hdr.remote_active >= limits.max_active;
        }
        self.head(Cuts::at(now, limits)).is_some()
            || self.active_now(now, limits) >= limits.max_active
    }

    /// [S29] One person, one place: a visit that follows its session's admission
    /// ([`Visit::follows_admission`]) of a session admitted here and still active is let in as
    /// it is (seen now, not counted again); None otherwise. The room asks it for a visit that
    /// holds no place; a synced node at every look of a visit, the first and each after a
    /// wait (for a picture, for a draw), since two of a page's assets that both waited each
    /// took a place (t/355, `sync=`).
    pub fn admitted_already(&mut self, v: &Visit, now: u64, limits: &Limits) -> Option<Verdict> {
        if !(v.follows_admission() && self.is_admitted(v.sid, now, limits)) {
            return None;
        }
        self.touch(v.sid, now);
        Some(Verdict::Admit { sid: v.sid })
    }

    /// Whether `sid` is an admitted session still active at `now` (seen within
    /// `active_window`).
    pub fn is_admitted(&self, sid: u64, now: u64, limits: &Limits) -> bool {
        let wcut = cut(now, limits.active_window_ms);
        self.find(sid)
            .and_then(|i| self.table.get(i))
            .is_some_and(|e| e.last_seen.saturating_add(1) > wcut)
    }

    pub(super) fn bucket(&self, sid: u64) -> usize {
        self.sid_bucket(sid, self.buckets.len())
    }

    pub(super) fn find(&self, sid: u64) -> Option<usize> {
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

    pub(super) fn remove_entry(&mut self, i: usize) {
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
            stamp: 0,
            prev: NIL,
            next: self.hdr.free,
            chain: NIL,
            _pad: 0,
        };
        self.hdr.free = i as u32;
    }

    /// Takes entry `i` off the list (the table's count follows). Leaving at or behind the
    /// fence brings the fence one step further from the back, so it stays `fence_k` from it.
    fn lru_unlink(&mut self, i: usize) {
        if let Some(f) = self.table.get(self.hdr.fence as usize) {
            let behind = self.table.get(i).is_some_and(|e| e.stamp >= f.stamp);
            if behind {
                self.hdr.fence = f.prev;
            }
        }
        self.hdr.active = self.hdr.active.saturating_sub(1);
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

    /// Puts entry `i` at the back of the list (the table's count follows), with the next
    /// stamp; the fence moves one step towards the back, or appears when the list reaches
    /// `fence_k` entries.
    fn lru_push(&mut self, i: usize) {
        let last = self.hdr.lru_last;
        self.table[i].prev = last;
        self.table[i].next = NIL;
        self.table[i].stamp = self.hdr.next_stamp;
        self.hdr.next_stamp += 1;
        if last == NIL {
            self.hdr.lru_first = i as u32;
        } else {
            self.table[last as usize].next = i as u32;
        }
        self.hdr.lru_last = i as u32;
        self.hdr.active += 1;
        match self.table.get(self.hdr.fence as usize) {
            Some(f) => self.hdr.fence = f.next,
            None if self.hdr.fence_k > 0 && self.hdr.active == self.hdr.fence_k => {
                self.hdr.fence = self.hdr.lru_first;
            }
            None => {}
        }
    }
}
