//! The sync's steps, in the order [`FleetModel::sync`] takes them and with the names of their
//! Lua twins in script.lua (the table above `sync` lists them): each reads what the steps
//! before it found (`Census`, `Counts`, `FreePlaces`, `HeldPlaces`: the script's `fleet`,
//! `counts`, `free`, `places`) and the fleet's state, and changes only its own part.

use super::{line::BAND, SpentEntry};
use super::{FleetModel, Node, EXPIRE_MIN, EXPIRE_STEP, SPENT_EXPIRE, SPENT_KEEP_MS};
use crate::fleet::{Fence, FloodOver, Report, RoomPicture, SpentProof};
use crate::fleet::{
    ENDS_CAP, EXACT_LINE, KEEP_PPM, SHARE_PER_POLL, SPENT_ANSWER_CAP, SPENT_REPORT_CAP,
};

/// What the census found: the other live nodes' places (grants and draws not yet reported),
/// their number and their polls (the script's `fleet`).
pub(super) struct Census {
    pub(super) reserved: u64,
    pub(super) nodes: u64,
    /// Of them, those that synced in this window before this call.
    pub(super) reported: u64,
    pub(super) polls: u64,
}

/// The fleet's sessions and line (the script's `counts`): those whose active window ends from
/// `since` on within the interval (`expiring`) and within the horizon (`leaving`).
pub(super) struct Counts {
    active: u64,
    queue_len: u64,
    /// Present waiters: those the cursor counts.
    present: u64,
    full: bool,
    since: u64,
    expiring: u64,
    leaving: u64,
}

/// The places free for this interval's allocation (`now`) and the sessions among them that end
/// by the interval's end (`ending`).
pub(super) struct FreePlaces {
    ending: u64,
    now: u64,
}

/// Where the node's held places go (`from`, counted from the last session to end by the
/// interval's end), how many may (`held_room`), and those and what else is free now (`room`).
pub(super) struct HeldPlaces {
    from: u64,
    held_room: u64,
    room: u64,
}

/// What the steps after the counts give the picture (the script's `shared`).
pub(super) struct Shared {
    pub(super) cursor: u64,
    pub(super) rightful: u64,
    pub(super) quota: u64,
    pub(super) nodes: u64,
    pub(super) reported: u64,
    pub(super) pressure: u8,
    pub(super) held: u64,
    pub(super) ends: Vec<u64>,
    pub(super) flood: Vec<FloodOver>,
    pub(super) spent: Vec<SpentProof>,
}

impl FleetModel {
    /// 1. A sync not newer than the last one taken from the node changes nothing (`None`);
    ///    else its entry, fenced at this sync.
    pub(super) fn fence(&mut self, f: Fence, now: u64) -> Option<Node> {
        let mut me = self.entry(f.node_id, now);
        let gen = u64::from(f.generation);
        if gen < me.gen || (gen == me.gen && f.seq <= me.seq) || f.window < me.alloc {
            return None;
        }
        (me.gen, me.seq, me.seen) = (gen, f.seq, now);
        self.synced_since_silence(f, now);
        Some(me)
    }

    /// 2. The sightings: admissions first (they leave the line for the active set), then the
    ///    active sessions seen. The script gets ages (node_now - at) and scores now - age: with
    ///    one clock, `at`.
    pub(super) fn take_sightings(&mut self, r: &Report, now: u64) {
        for e in &r.admitted {
            self.active.add_later(e.sid, e.at.min(now));
            self.leave_line(e.sid);
        }
        for e in &r.active {
            self.active.add_later(e.sid, e.at.min(now));
        }
        for &sid in r.revoked.iter().take(super::super::REVOKE_REPORT_CAP) {
            self.active.remove(sid);
        }
    }

    /// 3. Waiters: an active session never joins the line again, nor one this report revoked;
    ///    arrivals only move later. How many waiters the node reported.
    pub(super) fn take_waiters(&mut self, r: &Report, now: u64) -> usize {
        let mut queue_len = self.queue_len;
        let revoked = r.revoked.iter().take(super::super::REVOKE_REPORT_CAP);
        for w in &r.waiters {
            if self.active.score.contains_key(&w.sid) || revoked.clone().any(|&s| s == w.sid) {
                continue;
            }
            let in_line = self.arrival.contains_key(&w.sid);
            if !in_line && self.cfg.max_line > 0 && queue_len >= self.cfg.max_line {
                continue;
            }
            if !in_line {
                queue_len += 1;
            }
            self.join_line(w.sid, w.arrival);
            self.be_here(w.sid, w.at.min(now));
        }
        r.waiters.len()
    }

    /// 4. Waiters unseen for presence go away: the cursor no longer counts them, their places
    ///    stay in the line for `keep` ([S27]; with `keep=off` they leave it at once); those
    ///    away for `keep` leave the line. At most a step of each, fewer the more the node
    ///    `reported`. Sessions whose window ended free their places.
    pub(super) fn expire(&mut self, now: u64, reported: usize) {
        let (presence, kept) = (self.cfg.presence_ms, self.cfg.kept_ms());
        let most = EXPIRE_STEP.saturating_sub(reported).max(EXPIRE_MIN);
        let old = self.present.oldest_seen(self.cut(now, presence), most);
        for &(sid, seen) in &old {
            if kept > presence {
                self.go_away(sid);
                self.away.add(sid, seen);
            } else {
                self.leave_line(sid);
            }
        }
        let most = most.saturating_sub(old.len()).max(EXPIRE_MIN);
        for sid in self.away.oldest(self.cut(now, kept), most) {
            self.leave_line(sid);
        }
        self.trim_active(now);
    }

    /// 5. The census (the draw's too): the other live nodes' places, their number and polls;
    ///    silent nodes are dropped.
    pub(super) fn census(&mut self, me: u64, window: u64, now: u64) -> Census {
        let stale = self.cfg.stale_ms();
        self.nodes
            .retain(|&id, n| id == me || now.saturating_sub(n.seen) <= stale);
        let nodes = &self.nodes;
        self.spent_told
            .retain(|id, _| *id == me || nodes.contains_key(id));
        let mut fleet = Census {
            reserved: 0,
            nodes: 0,
            reported: 0,
            polls: 0,
        };
        for (&id, n) in &self.nodes {
            if id != me {
                fleet.reserved += n.grant + n.draws;
                fleet.nodes += 1;
                fleet.reported += u64::from(n.alloc == window && n.seen >= window);
                fleet.polls += n.polls;
            }
        }
        fleet
    }

    /// 6. The fleet's active sessions and line, and those whose window ends soon.
    pub(super) fn count_sessions(&self, now: u64) -> Counts {
        let (cfg, queue_len) = (self.cfg, self.queue_len);
        let aw = cfg.active_window_ms;
        let since = self.cut(now, aw);
        Counts {
            active: self.active.len(),
            queue_len,
            present: self.here_len,
            full: cfg.max_line > 0 && queue_len >= cfg.max_line,
            since,
            expiring: self
                .active
                .count(since, self.cut(now + cfg.interval_ms, aw)),
            leaving: self
                .active
                .count(since, self.cut(now + cfg.horizon_ms(), aw)),
        }
    }

    /// 7. The interval's end (moved by a sync of another window only once the last is at most
    ///    half an interval from its end) and the places free for the allocation: those free now
    ///    and those of the sessions that end by then.
    pub(super) fn free_places(
        &mut self,
        f: Fence,
        now: u64,
        fleet: &Census,
        counts: &Counts,
    ) -> FreePlaces {
        let interval = self.cfg.interval_ms;
        let a = &mut self.allocation;
        if a.window != f.window && a.interval_end <= now + interval / 2 {
            a.interval_end = now + interval;
        }
        let end = self.cut(self.allocation.interval_end, self.cfg.active_window_ms);
        let ending = self.active.count(counts.since, end);
        let free = self.cfg.max_active as i128 - counts.active as i128 - fleet.reserved as i128
            + ending as i128;
        FreePlaces {
            ending,
            now: free.max(0) as u64,
        }
    }

    /// 8. Where the node's held places may go: before the other nodes' (of this interval's
    ///    end), after the sessions an earlier end's grants may still wait for; and what else is
    ///    free now. A second sync in the interval keeps where its grant held, or what is left.
    pub(super) fn held_places(
        &self,
        me: &Node,
        f: Fence,
        now: u64,
        fleet: &Census,
        counts: &Counts,
        free: &FreePlaces,
    ) -> HeldPlaces {
        let me_id = Some(f.node_id);
        let waits = self.awaited(now, me_id).min(free.ending);
        let interval_end = self.allocation.interval_end;
        let (from, held_room) = if me.held > 0 && me.held_end == interval_end && interval_end != 0 {
            let from = me.held_from;
            (
                from,
                (from + me.held)
                    .min(free.ending - waits)
                    .saturating_sub(from),
            )
        } else {
            let from = self.held_span(me_id);
            (from, (free.ending - waits).saturating_sub(from))
        };
        let others = self.still_held(free.ending, me_id);
        let free_room =
            self.cfg.max_active as i128 - counts.active as i128 - fleet.reserved as i128
                + others as i128;
        HeldPlaces {
            from,
            held_room,
            room: held_room + free_room.max(0) as u64,
        }
    }

    /// 9. This interval's allocation (set by its first sync, raised by later ones by what
    ///    their reports freed) and the node's share of it by its part of the polls, the
    ///    fraction left over kept for its next share; a second sync in the interval keeps what
    ///    is left of the node's places. The node's quota.
    pub(super) fn share(
        &mut self,
        me: &mut Node,
        f: Fence,
        r: &Report,
        fleet: &Census,
        free: &FreePlaces,
        places: &HeldPlaces,
    ) -> u64 {
        let before = me.polls;
        me.polls = if me.alloc == f.window {
            me.polls + r.polls
        } else {
            r.polls
        };
        let left = (me.grant + me.draws).saturating_sub(r.admitted.len() as u64);
        me.draws = 0;
        let a = &mut self.allocation;
        if a.window != f.window {
            // A crowd's first interval (nobody polled in the fleet's last) is shared equally
            // by the live nodes (allocation polls 0): the polls are only the first syncing
            // node's (the script says why).
            let cold = fleet.polls == 0 && before == 0;
            (a.window, a.free) = (f.window, free.now);
            (a.polls, a.given) = (if cold { 0 } else { fleet.polls + me.polls }, 0);
        } else {
            a.free = a.free.max(free.now + a.given);
        }
        let quota = if me.alloc != f.window {
            let part = if a.polls > 0 {
                (me.polls as f64 / a.polls as f64).min(1.0)
            } else {
                1.0 / (fleet.nodes + 1) as f64
            };
            let millionths = (a.free as f64 * part * KEEP_PPM as f64).floor() as u64 + me.remainder;
            let ppm = u64::from(crate::util::PPM);
            let quota = millionths / ppm;
            me.remainder = millionths - quota * ppm;
            let quota = quota
                .min(places.room)
                .min(SHARE_PER_POLL.saturating_mul(me.polls) + 1);
            a.given += quota;
            me.alloc = f.window;
            quota
        } else {
            left.min(places.room)
        };
        me.grant = quota;
        quota
    }

    /// 10. Which of the node's places free only later: the grants take the last places of the
    ///     interval to free (the ending sessions' by their ends), this node's past the other
    ///     grants' (a node's second sync in the interval as well: where it held before may be
    ///     behind another's); the pool keeps those free first. How many, and the ends of up
    ///     to [`ENDS_CAP`] of them, evenly by rank, ms from now.
    pub(super) fn held_ends(
        &self,
        me: &mut Node,
        now: u64,
        quota: u64,
        counts: &Counts,
        free: &FreePlaces,
        places: &HeldPlaces,
    ) -> (u64, Vec<u64>) {
        let aw = self.cfg.active_window_ms;
        let interval_end = self.allocation.interval_end;
        let held = quota.min(places.held_room);
        let lo = free.ending.saturating_sub(places.from + held);
        me.held = held;
        me.held_end = interval_end;
        me.held_from = if held > 0 { places.from } else { 0 };
        let range = (counts.since, self.cut(interval_end, aw));
        let ends = self
            .active
            .sights_by_rank(range, lo as usize, held as usize, ENDS_CAP)
            .into_iter()
            .map(|seen| (seen + aw).saturating_sub(now))
            .collect();
        (held, ends)
    }

    /// 11. The fleet's pressure: the doublings in the picture (`PressureSums::sync`).
    pub(super) fn pressure(&mut self, window: u64, counts: &Counts, r: &Report) -> u8 {
        let at = (window, self.cfg.interval_ms);
        let admitted = r.admitted.len() as u64;
        self.pressure_sums.sync(at, counts.queue_len, r, admitted)
    }

    /// 12. The cursor for the places free within the interval: the arrival of the last waiter
    ///     they rightly take, or further: up to [`BAND`] times as many waiters, as long as
    ///     those arrived within an interval of that last one (`u64::MAX`: everyone). The places
    ///     then fill as fast as that band polls, not as fast as its slowest client (or one who
    ///     left) does; a node lets the band's clients take places only from half an interval
    ///     after its picture on (`FleetNode::band_waits`), so those before them come first.
    ///     (Bounded by an interval after the head of the line instead, the band vanished
    ///     whenever one early waiter was still in line, and departure waves found places
    ///     empty: the simulator's seeds 10 and 13, sticky, fell to 0.917 and 0.953 of
    ///     max_active.)
    ///     Also the rightful one's arrival (the cursor without its band).
    pub(super) fn cursor(&self, counts: &Counts) -> (u64, u64) {
        let places = self.cfg.max_active as i128 - counts.active as i128 + counts.expiring as i128;
        if places <= 0 {
            return (0, 0);
        } else if places as u64 >= counts.present {
            return (u64::MAX, u64::MAX);
        }
        let places = places as u64;
        let rightful = self.here_at_rank(places - 1).unwrap_or(0);
        let band = self
            .here_at_rank(places.saturating_mul(BAND).min(counts.present) - 1)
            .unwrap_or(0);
        let cursor = rightful.max(band.min(rightful.saturating_add(self.cfg.interval_ms)));
        (cursor, rightful)
    }

    /// 13. Flood control: the reported keys charged, and the keys over their budget.
    pub(super) fn flood(&mut self, r: &Report, now: u64) -> Vec<FloodOver> {
        self.flood_model.sync(&r.flood, now)
    }

    /// 14. Spent proofs: `reported` go in the log (from this node, numbered), lapsed entries
    ///     leave it, and the entries after this node's cursor that other nodes reported are
    ///     answered (at most [`SPENT_ANSWER_CAP`]).
    pub(super) fn spent_proofs(
        &mut self,
        node: u64,
        now: u64,
        reported: &[SpentProof],
    ) -> Vec<SpentProof> {
        self.record_spent(node, now, reported);
        let since = self.spent_told.get(&node).copied().unwrap_or(0);
        let heard = self.spent.iter().filter(|e| e.seq > since);
        let heard: Vec<&SpentEntry> = heard.take(SPENT_ANSWER_CAP).collect();
        self.spent_told
            .insert(node, heard.last().map_or(since, |e| e.seq));
        heard
            .into_iter()
            .filter(|e| e.node != node && e.until > now)
            .map(|e| SpentProof {
                key: e.key,
                ms: e.until - now,
            })
            .collect()
    }

    /// The proofs `node` reports go in the log, numbered; lapsed entries (the oldest, while
    /// reported before the keep) leave it.
    fn record_spent(&mut self, node: u64, now: u64, reported: &[SpentProof]) {
        for p in reported.iter().take(SPENT_REPORT_CAP) {
            // (A lapsed one is not sent.)
            if p.ms <= now {
                continue;
            }
            self.spent_seq += 1;
            let e = SpentEntry {
                seq: self.spent_seq,
                key: p.key,
                until: p.ms,
                node,
                at: now,
            };
            // (ZADD of a member already there renumbers it.)
            self.spent.retain(|o| !o.same_member(&e));
            self.spent.push(e);
        }
        let keep_from = now.saturating_sub(self.cfg.stale_ms().max(SPENT_KEEP_MS));
        let lapsed = self
            .spent
            .iter()
            .take(SPENT_EXPIRE)
            .take_while(|e| e.at < keep_from)
            .count();
        self.spent.drain(..lapsed);
    }

    /// 15. The picture: the counts, what the steps shared, and the line (whole while short,
    ///     else sampled).
    pub(super) fn reply(&self, window: u64, counts: &Counts, shared: Shared) -> RoomPicture {
        let queue_len = counts.queue_len;
        RoomPicture {
            fleet_active: counts.active,
            queue_len,
            cursor: shared.cursor,
            rightful: shared.rightful,
            quota: shared.quota,
            nodes: shared.nodes,
            reported: shared.reported,
            window_ms: window,
            free: self.allocation.free,
            expiring: counts.expiring,
            leaving: counts.leaving,
            held: shared.held,
            ends: shared.ends,
            full: counts.full,
            pressure: shared.pressure,
            samples: self.samples(queue_len),
            exact: queue_len > 0 && queue_len <= EXACT_LINE as u64,
            flood: shared.flood,
            spent: shared.spent,
        }
    }
}
