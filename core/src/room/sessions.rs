//! Admitted sessions: a chained hash table (session id -> entry) whose entries also sit on a
//! list ordered by last sight, so the active count is exact and O(1); each entry holds its
//! session's request-rate bucket. Also the room's snapshot for metrics.

use super::layout::Entry;
use super::layout::NIL;
use super::rules::Mode;

use super::rules::Limits;
use super::{PassVerdict, Room, Snapshot};

impl<'m> Room<'m> {
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
