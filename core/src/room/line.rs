//! The waiting line: places in arrival order on a ring, positions by a Fenwick tree, the
//! last-sight list that drops absent places, and the decision for a client without a valid
//! admitted ticket ([S3]-[S6], [S15], [S16]).

use super::layout::Slot;
use super::layout::NIL;

use super::rules::{self, Capacity, Limits, Mode};
use super::{Mirror, Place, Refusal, Room, Verdict, Visit};
use crate::util::fenwick;

impl<'m> Room<'m> {
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

    pub(super) fn ring_index(&self, qnum: u64) -> usize {
        (qnum % self.hdr.ring_len as u64) as usize
    }

    /// Live places in the line.
    pub(super) fn waiting(&self) -> u64 {
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
    pub(super) fn head(&mut self) -> Option<u64> {
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

    pub(super) fn sid_bucket(&self, sid: u64, len: usize) -> usize {
        // Session ids are random, but mix anyway so a low-entropy id cannot crowd one bucket.
        let h = sid.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((h >> 32) % len as u64) as usize
    }

    /// 1-based place of live `qnum`: the live places ahead of it, plus one.
    pub(super) fn position(&mut self, qnum: u64) -> u64 {
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
    pub(super) fn tidy(&mut self, now: u64, limits: &Limits) {
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

    pub(super) fn throttled(&mut self, retry_ms: u64) -> Verdict {
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
}
