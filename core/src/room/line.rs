//! The waiting line: places in arrival order on a ring, positions by a Fenwick tree, absent
//! places found by the sight tree and removed a few at a time, and the decision for a client
//! without a valid admitted ticket ([S3]-[S6], [S15], [S16], [S20]).

use super::layout::Slot;
use super::layout::NIL;

use super::rules::{self, Capacity, Limits, Mode};
use super::sight::{is_due, is_present, key, Cuts};
use super::{Counted, Mirror, Place, Refusal, Room, Verdict, Visit};
use crate::util::fenwick;

/// At most this many absent places, and this many absent sessions, are removed per decision
/// (nginx's limit_req removes one or two expired entries per request; the Redis room's script
/// removes as many: its EXPIRE_STEP is this, sent in its preamble). Why not fewer: each decision
/// can make at most a place or two absent later (the place it takes or renews), so a handful keeps
/// up with a steady line, and 64 also drains a backlog (100,000 places left at once) within about
/// 1,600 decisions. Why not more: removing one costs a few hundred nanoseconds (hash chain, Fenwick
/// and sight trees), so 64 of each keeps the worst decision in the tens of microseconds, under the
/// zone's lock. Decisions are right before the backlog is gone: absent places no longer count as
/// the head, in the line's length or in the positions of the clients up to the ones this decision
/// cleared, and the session fence says whether the room is full (see `sessions`).
pub const EXPIRE_STEP: usize = 64;

/// How a waiting answer is given: the mode (positions in `fifo` only), the decision's cuts,
/// and whether the client just came back to a kept place.
#[derive(Clone, Copy)]
struct Waiting {
    mode: Mode,
    c: Cuts,
    resumed: bool,
}

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

    /// How old the figures mirrored from Redis are at `now` (None: none came yet).
    pub fn remote_age(&self, now: u64) -> Option<u64> {
        let at = self.hdr.remote_at_ms;
        (at != 0).then(|| now.saturating_sub(at))
    }

    // ------------------------------------------------------------------ the line

    pub(super) fn ring_index(&self, qnum: u64) -> usize {
        (qnum % self.hdr.ring_len as u64) as usize
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

    /// The front: queue number of the first kept place (seen within `keep`: its sight above
    /// `kept`), if any. Moves `low` to it: the places it passes are gone, left for the tidy to
    /// remove, and count nowhere from now on.
    fn front(&mut self, kept: u64) -> Option<u64> {
        let low = self.hdr.low;
        let from = self.ring_index(low);
        // Most of the time the front has not moved since the last look. (A place is kept for
        // the `kept` cut as it is present for the `present` one: its sight above the cut.)
        if let Some(s) = self.ring.get(from) {
            if s.sid != 0 && s.qnum == low && is_present(s, kept) {
                return Some(low);
            }
        }
        // Kept places all stand in low..tail (the line spans at most one turn of the ring),
        // so the first one found going round from `low` is the front.
        let front = match self.first_present(from, kept) {
            Some(ix) if self.hdr.waiting > 0 => self.ring.get(ix).map(|s| s.qnum),
            _ => None,
        };
        self.hdr.low = front.unwrap_or(self.hdr.tail);
        front
    }

    /// The head: queue number of the first present place (seen within `presence`), if anyone
    /// present waits. Absent places before it keep their arrival (with `keep=off`, none: the
    /// head is the front).
    pub(super) fn head(&mut self, c: Cuts) -> Option<u64> {
        let front = self.front(c.kept)?;
        let ix = self.ring_index(front);
        if self.ring.get(ix).is_some_and(|s| is_present(s, c.present)) {
            return Some(front);
        }
        // Present places are kept ones, so they stand in front..tail too.
        let found = self.first_present(ix, c.present)?;
        self.ring.get(found).map(|s| s.qnum)
    }

    /// Kept places behind the one at `qnum`'s ring index up to the tail, `qnum`'s included.
    fn places_to_tail(&self, qnum: u64) -> u64 {
        let behind = self.live_between(self.ring_index(self.hdr.tail), self.ring_index(qnum));
        self.hdr.waiting.saturating_sub(behind)
    }

    /// Kept places in the line: the places from the front to the tail (present, or absent
    /// within `keep`). The ones behind the tail going round (below the front) are gone ones not
    /// yet removed; gone ones between the front and the tail count until removed, which the
    /// tidy does first (see `tidy`).
    pub(super) fn line_len(&mut self, c: Cuts) -> u64 {
        match self.front(c.kept) {
            Some(front) => self.places_to_tail(front),
            None => 0,
        }
    }

    /// The places from the head to the tail: the clients a lottery draws among.
    fn present_len(&mut self, c: Cuts) -> u64 {
        match self.head(c) {
            Some(head) => self.places_to_tail(head),
            None => 0,
        }
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

    /// 1-based place of kept `qnum` as its client is told it ([S27]): the kept places from the
    /// front up to it, plus one. Absent ones ahead count while kept, so a place ahead that
    /// steps away or comes back moves nobody back; one that leaves for good (past `keep`) or
    /// goes in moves everyone behind it forward.
    pub(super) fn position(&mut self, qnum: u64, c: Cuts) -> u64 {
        let Some(front) = self.front(c.kept) else {
            return 0;
        };
        self.rank_from(front, qnum)
    }

    /// 1-based place of `qnum` counted from `first` (at or before it in the line).
    fn rank_from(&self, first: u64, qnum: u64) -> u64 {
        if first == qnum {
            return 1;
        }
        self.live_between(self.ring_index(first), self.ring_index(qnum)) + 1
    }

    fn join_line(&mut self, sid: u64, now: u64, c: Cuts) -> Option<u64> {
        let low = self.front(c.kept).unwrap_or(self.hdr.tail);
        let qnum = self.hdr.tail;
        // Queue numbers map onto ring slots: the line may span at most one turn of the ring.
        if qnum - low >= self.hdr.ring_len as u64 {
            return None;
        }
        let ix = self.ring_index(qnum);
        // The slot may still hold a place from the last turn: below the front, so gone, and
        // removed now (one more than the tidy's count, for the place this client takes).
        let held = *self.ring.get(ix)?;
        if held.sid != 0 {
            if !is_due(&held, c.kept) {
                return None;
            }
            self.expire_place(ix);
        }
        let b = self.sid_bucket(sid, self.places.len());
        self.ring[ix] = Slot {
            sid,
            qnum,
            last_seen: now,
            joined: now,
            chain: self.places[b],
            _pad: 0,
        };
        self.places[b] = ix as u32;
        self.sight_update(ix);
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
        if self.ring[ix].sid == 0 {
            return;
        }
        self.unchain(ix);
        self.ring[ix].sid = 0;
        self.sight_update(ix);
        fenwick::add(self.live, ix, -1);
        self.hdr.waiting = self.hdr.waiting.saturating_sub(1);
    }

    /// Puts the place at ring index `ix` on its session id's chain.
    fn chain(&mut self, ix: usize) {
        let b = self.sid_bucket(self.ring[ix].sid, self.places.len());
        self.ring[ix].chain = self.places[b];
        self.places[b] = ix as u32;
    }

    /// Exchanges the clients of two places (the start's shuffle, see `event`): each place
    /// keeps its queue number, the clients trade them. Either may be empty.
    pub(super) fn swap_places(&mut self, a: (usize, u64), b: (usize, u64)) {
        let ((ia, qa), (ib, qb)) = (a, b);
        if ia == ib || ia >= self.ring.len() || ib >= self.ring.len() {
            return;
        }
        let (sa, sb) = (self.ring[ia], self.ring[ib]);
        for (ix, s) in [(ia, sa), (ib, sb)] {
            if s.sid != 0 {
                self.unchain(ix);
            }
        }
        self.ring[ia] = Slot { qnum: qa, ..sb };
        self.ring[ib] = Slot { qnum: qb, ..sa };
        for (ix, s) in [(ia, sb), (ib, sa)] {
            if s.sid != 0 {
                self.chain(ix);
            }
        }
        match (sa.sid != 0, sb.sid != 0) {
            (true, false) => {
                fenwick::add(self.live, ia, -1);
                fenwick::add(self.live, ib, 1);
            }
            (false, true) => {
                fenwick::add(self.live, ib, -1);
                fenwick::add(self.live, ia, 1);
            }
            _ => {}
        }
        self.sight_update(ia);
        self.sight_update(ib);
    }

    /// Takes the place at ring index `ix` off its session id's chain.
    fn unchain(&mut self, ix: usize) {
        let sid = self.ring[ix].sid;
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
    }

    /// An absent place is removed (counted as expired).
    fn expire_place(&mut self, ix: usize) {
        self.remove_place(ix);
        self.hdr.counters.expired += 1;
    }

    /// A waiting client was seen: its place counts as present from now. (A clock behind the
    /// last sight, another worker's, leaves it: last sights only move forward.)
    fn seen_now(&mut self, ix: usize, now: u64) {
        let Some(s) = self.ring.get_mut(ix) else {
            return;
        };
        if now <= s.last_seen {
            return;
        }
        let old = key(s);
        s.last_seen = now;
        self.sight_seen(ix, old);
    }

    // ------------------------------------------------------------------ time passes

    /// Drops some of what time has made stale, at most [`EXPIRE_STEP`] admitted sessions
    /// unseen for the active window (oldest first) and as many places unseen for `keep`, the
    /// ones after the front first (they are the ones that would count in positions), then the
    /// ones behind it. What is left is removed by the next decisions; until then it counts
    /// nowhere that matters (see [`EXPIRE_STEP`]).
    pub(super) fn tidy(&mut self, now: u64, limits: &Limits) {
        for _ in 0..EXPIRE_STEP {
            let i = self.hdr.lru_first;
            match self.table.get(i as usize) {
                Some(e) if now.saturating_sub(e.last_seen) >= limits.active_window_ms => {
                    self.remove_entry(i as usize)
                }
                _ => break,
            }
        }
        let thr = Cuts::at(now, limits).kept;
        if self.any_due(thr) {
            // From the front on: moves `low` past the gone places before it first.
            let _ = self.front(thr);
            let mut from = self.ring_index(self.hdr.low);
            for _ in 0..EXPIRE_STEP {
                let Some(ix) = self.first_due(from, thr) else {
                    break;
                };
                self.expire_place(ix);
                from = ix;
            }
        }
        let minute = now / super::rules::MINUTE_MS;
        if minute != self.hdr.minute {
            self.hdr.minute = minute;
            self.hdr.admitted_in_minute = 0;
        }
    }

    fn capacity_now(&mut self, now: u64, limits: &Limits) -> Capacity {
        let active = self.active_now(now, limits);
        rules::capacity(
            limits,
            active,
            self.hdr.admitted_in_minute,
            self.hdr.free != NIL,
        )
    }

    // ------------------------------------------------------------------ decisions

    /// The decision for a client that holds no valid admitted ticket: the queue rules of
    /// ngx-smart-ratelimit ([S3]-[S6]) plus the room modes and flood control.
    pub fn visit(&mut self, v: Visit, now: u64, limits: &Limits) -> Verdict {
        self.tidy(now, limits);
        let c = Cuts::at(now, limits);
        let mode = self.mode(limits);
        let mut held = self.place_of(v.sid);
        let mut resumed = false;
        if let Some(ix) = held {
            if self.ring.get(ix).is_some_and(|s| is_due(s, c.kept)) {
                // Back after `keep`: the place was gone already, only not yet removed; the
                // client comes back at the tail like any newcomer ([S18]).
                self.expire_place(ix);
                held = None;
            } else {
                // Back within `keep` after an absence ([S27]): its arrival held.
                resumed = self.ring.get(ix).is_some_and(|s| !is_present(s, c.present));
                self.seen_now(ix, now);
            }
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
            if let Some(admit) = self.admitted_already(&v, now, limits) {
                return admit;
            }
            return self.newcomer(v, mode, now, limits);
        };
        let wait = Waiting { mode, c, resumed };
        let qnum = self.ring[ix].qnum;
        // One count of the active sessions for both limits and the turn (it may move the fence).
        let active = self.active_now(now, limits);
        let in_minute = self.hdr.admitted_in_minute;
        let cap = rules::capacity(limits, active, in_minute, self.hdr.free != NIL);
        let free = rules::free_places(limits, active, in_minute);
        let turn = match mode {
            // [S4] The head, and with k places free the first k places from it: each takes
            // one as it polls, whatever the order they poll in. Those ahead of one that goes
            // in stay within the places left (a place at p <= k goes, those ahead are at
            // p - 1 <= k - 1 or less), so nobody is passed over. The head alone left places
            // empty while it was slow to poll, or gone and not yet past presence: a rehearsal
            // (800 clients, a tenth giving up) kept a room of 100 at 12 on average while 620
            // waited. (`active_now` never counts fewer than are active, so `free` is never
            // more than the truth.) Counted from the head, not the front: an absent place
            // ahead of the head holds its arrival but nobody waits for it ([S27]); a kept
            // one back in time is the head again, and goes in at the next free place.
            Mode::Fifo => {
                free > 0
                    && self.drawn(qnum)
                    && self
                        .head(c)
                        .is_some_and(|h| self.rank_from(h, qnum) <= free)
            }
            // Lottery: with k free places and n clients from the head on, each poll wins with
            // chance k/n.
            Mode::Random => rules::lottery_wins(v.draw, free, self.present_len(c)),
            _ => false,
        };
        if turn && cap == Capacity::Room {
            self.remove_place(ix);
            self.admit(v.sid, now, true);
            return Verdict::Admit { sid: v.sid };
        }
        self.wait_answer(v.sid, qnum, wait)
    }

    /// [S3]/[S4]: a client without a place walks straight in when nobody waits and there is
    /// room; otherwise it takes the tail, paid from its address's flood budget ([S15]).
    fn newcomer(&mut self, v: Visit, mode: Mode, now: u64, limits: &Limits) -> Verdict {
        let c = Cuts::at(now, limits);
        let cap = self.capacity_now(now, limits);
        // Nobody present waits: absent ones ahead are not waited for ([S27]).
        let nobody_waits = self.head(c).is_none();
        if matches!(mode, Mode::Fifo | Mode::Random) && nobody_waits && cap == Capacity::Room {
            if let Err(retry_ms) = self.flood_take(v.flood_key, now, limits) {
                return self.throttled(retry_ms, c);
            }
            self.admit(v.sid, now, false);
            return Verdict::Admit { sid: v.sid };
        }
        if let Err(retry_ms) = self.flood_take(v.flood_key, now, limits) {
            return self.throttled(retry_ms, c);
        }
        let wait = Waiting {
            mode,
            c,
            resumed: false,
        };
        match self.join_line(v.sid, now, c) {
            Some(qnum) => self.wait_answer(v.sid, qnum, wait),
            None => {
                self.hdr.counters.rejected += 1;
                Verdict::Refuse(Refusal::LineFull {
                    queue_len: self.line_len(c),
                })
            }
        }
    }

    fn throttled(&mut self, retry_ms: u64, c: Cuts) -> Verdict {
        self.hdr.counters.throttled += 1;
        Verdict::Throttled {
            retry_ms,
            queue_len: self.line_len(c),
        }
    }

    fn wait_answer(&mut self, sid: u64, qnum: u64, w: Waiting) -> Verdict {
        self.hdr.counters.waited += 1;
        let position = match w.mode {
            Mode::Fifo => self.position(qnum, w.c),
            _ => 0,
        };
        let eta_secs = if position > 0 && self.hdr.admit_interval_ms > 0 {
            Some((position * self.hdr.admit_interval_ms).div_ceil(1000))
        } else {
            None
        };
        let queue_len = self.line_len(w.c);
        Verdict::Wait(Place {
            sid,
            qnum,
            position,
            queue_len,
            eta_secs,
            resumed: w.resumed,
            counted: Counted::All,
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
