//! The node's side of a sync: the report of what it saw since the last one, the picture
//! applied, and the interval without Redis (the equal split of departures).

use super::layout::record;
use super::{Fence, REPORT_CAP, REPORT_WAITERS_CAP};
use super::{FleetConfig, FleetNode, FleetSnapshot, Report, RoomPicture, SpentProof};

use crate::util::time::window_end;

/// The fewest waiters of the line's last complete interval from which a node reckons its part
/// of the fleet's newcomers ([`FleetNode::newcomers_of_last_interval`]): a few tell nothing.
const PART_SAMPLE: u64 = 32;

impl<'m> FleetNode<'m> {
    /// The node's report since the last sync, at most [`REPORT_CAP`] sightings: admissions
    /// first (they free the line and hold the fleet's places), then active sessions, then
    /// waiters (at most [`REPORT_WAITERS_CAP`]); the newest of each, the rest wait for the next sync ([`FleetNode::backlog`]).
    /// With it, the client keys that took more places than the flood allowance (see
    /// `flood.rs`; those left over wait for the next sync, but do not hasten it).
    pub fn take_report(&mut self) -> Report {
        /// The last `cap` entries of the batch's live part; the others stay where they are
        /// (so the sent table's slots still point at them).
        fn take<T: Copy>(v: &[T], n: &mut u64, cap: &mut usize) -> Vec<T> {
            let end = (*n as usize).min(v.len());
            let start = end.saturating_sub(*cap);
            *n = start as u64;
            *cap -= end - start;
            v.get(start..end).unwrap_or_default().to_vec()
        }
        let flood = self.take_flood_report();
        let h = &mut self.hdr.pending;
        let mut cap = REPORT_CAP;
        let admitted = take(self.admitted, &mut h.n_admitted, &mut cap);
        let active = take(self.active, &mut h.n_active, &mut cap);
        let mut wcap = cap.min(REPORT_WAITERS_CAP);
        let waiters = take(self.waiters, &mut h.n_waiters, &mut wcap);
        let r = Report {
            polls: core::mem::take(&mut h.polls),
            asked: core::mem::take(&mut h.n_asked),
            challenged: core::mem::take(&mut h.n_challenged),
            spent: self.hdr.spent.take(),
            revoked: self.hdr.revoked.take(),
            active,
            admitted,
            waiters,
            flood,
        };
        // The sync releases what is left of this node's places (the report says what it used):
        // none is spent until the picture brings the next share.
        self.hdr.share.quota_left = 0;
        if !self.hdr.pending.backlog() {
            self.hdr.pending.next_batch();
        }
        r
    }

    /// A proof of work spent here on a new place (`challenge=pow`), until `until` (ms):
    /// reported with the next sync, so the other nodes refuse it from their next picture on.
    pub fn spent_here(&mut self, key: u64, until: u64) {
        self.hdr.spent.keep(SpentProof { key, ms: until });
    }

    /// A session the origin revoked here: reported with the next sync, which takes it off the
    /// fleet's active sessions (its place frees on every node from the next share-out).
    pub fn revoked_here(&mut self, sid: u64) {
        self.hdr.revoked.keep(sid);
    }

    /// A challenge given here (`challenge_bits=auto`): reported with the next sync.
    pub fn challenged(&mut self) {
        let h = &mut self.hdr.pending;
        h.n_challenged = h.n_challenged.saturating_add(1);
    }

    /// Sightings a capped report left in the batches (another sync should follow soon).
    pub fn backlog(&self) -> bool {
        self.hdr.pending.backlog()
    }

    /// A report whose sync failed goes back into the batches (as far as they have room), so
    /// what the node admitted while Redis was away still reaches the fleet when it returns.
    pub fn give_back(&mut self, r: &Report) {
        for &p in &r.spent {
            self.hdr.spent.keep(p);
        }
        for &sid in &r.revoked {
            self.hdr.revoked.keep(sid);
        }
        let h = &mut self.hdr.pending;
        h.polls += r.polls;
        h.n_asked += r.asked;
        h.n_challenged += r.challenged;
        for &e in &r.admitted {
            if !record(None, 0, self.admitted, &mut h.n_admitted, true, e, |_| {
                false
            }) {
                self.hdr.metrics.dropped += 1;
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
        self.give_back_flood(&r.flood);
    }

    /// The fence of this node's next sync at `now` (a new sequence number).
    pub fn next_sync(&mut self, now: u64, generation: u32, cfg: &FleetConfig) -> Fence {
        let first = !self.synced();
        let seq = self.hdr.sync.next(now, first);
        Fence {
            node_id: self.hdr.block.node_id,
            generation,
            window: window_end(now, cfg.interval_ms),
            seq,
        }
    }

    /// The fleet's picture came back for the sync of `seq`: the node decides by it until the
    /// next. An answer to a sync that a newer one superseded (a stalled leader's, one answered
    /// late) is ignored: false.
    pub fn apply(&mut self, p: &RoomPicture, seq: u64, now: u64, cfg: &FleetConfig) -> bool {
        if self.hdr.sync.seq != seq {
            return false;
        }
        let h = &mut *self.hdr;
        h.pic.apply(p, now, h.sync.sent_ms);
        h.share.grant(p, now);
        h.draw.renew();
        h.metrics.syncs += 1;
        let n = p.samples.len().min(self.samples.len());
        for (slot, s) in self.samples.iter_mut().zip(p.samples.iter()) {
            *slot = *s;
        }
        h.pic.samples_len = n as u64;
        h.pic.samples_exact = u64::from(p.exact && n == p.samples.len());
        h.pic.watch_line(p, self.samples.get(..n).unwrap_or(&[]));
        h.pic.room_past_line(p, cfg.max_active);
        h.sync.first_sync_ms = 0;
        let tail = self.tail();
        self.hdr.fresh.after(tail);
        self.newcomers_of_last_interval(cfg);
        self.hdr.pending.turn_weight = self.turn_weight();
        self.flood_answers(&p.flood, now);
        true
    }

    /// What the new picture's line shows of the fleet's newcomers in its last complete
    /// interval (every node has reported it; a whole line shows them, whatever node they came
    /// to), counted once for the two paces a newcomer no picture shows is told
    /// ([`FleetNode::unseen_ahead`]):
    /// - the fleet's pace (`newcomers`): those places, or the places this node took in that
    ///   interval (those let in at once too) as many of the fleet's, whichever is more; and a
    ///   quarter more (arrivals come in bursts; a position told too far back only falls).
    ///   The places let in count because a crowd's first interval lets most of it in at
    ///   once and its next, the room full, makes every newcomer wait: the waiters alone gave
    ///   the second interval a third of its pace (the 60-second rehearsal, seed 5: 61 shown
    ///   of 161 places taken, and newcomers told 3 to 8 places too near the head). A crowd's
    ///   first intervals have no such pace: the node's own answers them
    ///   ([`FleetNode::own_pace_ahead`]);
    /// - this node's part of them (`part_shown`, `part_mine`): how many of those the line
    ///   shows took their places here and still wait. Both counted at once, now: counted
    ///   later, the node's own let in since shrank its part (a node taking 60 % of the
    ///   newcomers read a part of a few percent and told 2,391 for a true 180, `t/270` TEST
    ///   7). Fewer than [`PART_SAMPLE`] shown tell nothing (a crowd's first interval, most of
    ///   it let in at once).
    fn newcomers_of_last_interval(&mut self, cfg: &FleetConfig) {
        let to = self.reported_to(cfg);
        let from = to.saturating_sub(cfg.interval_ms.max(1));
        let shown = self.shown_between(from, to);
        let mine = self.hdr.fresh.recent_between(from, to).min(shown);
        let known = shown >= PART_SAMPLE && mine > 0;
        let took = self.hdr.fresh.arrived_between(from, to);
        let pic = &mut self.hdr.pic;
        (pic.part_shown, pic.part_mine) = if known { (shown, mine) } else { (0, 0) };
        let pace = shown.max(self.fleet_of_own(took));
        self.hdr.pic.newcomers = pace.saturating_add(pace / 4);
    }

    /// Whether a sync the node sent while it had no picture may still bring one (sent within
    /// `timeout_ms`, not failed): a request that needs a decision waits for it. False once the
    /// node has a picture, and when no such sync is out: then only a new one can bring it.
    pub fn first_sync_pending(&self, now: u64, timeout_ms: u64) -> bool {
        let sent = self.hdr.sync.first_sync_ms;
        !self.synced() && sent != 0 && now.saturating_sub(sent) <= timeout_ms
    }

    /// The weight of a poll of a client whose turn it is: as much as all the waiting polls
    /// together, fleet-wide, so that a node's share of the next interval's places follows
    /// half its part of the waiting traffic and half its part of the clients whose turn it
    /// is. The first alone is right for clients that poll any node (round robin): those whose
    /// turn it is poll every node alike, and their few polls an interval are a noisy guide.
    /// The second is right for clients that keep to one node (sticky routing, uneven
    /// traffic): those whose turn it is come back to where they polled, which need not be
    /// where the traffic is. Measured in the simulator (docs/fleet.md, seeds 1-8): departure
    /// waves at 0.976-0.989 of max_active with sticky clients (0.971-0.979 on the waiting
    /// traffic alone), 0.976-0.988 round robin (0.981-0.991).
    fn turn_weight(&self) -> u32 {
        let h = &self.hdr.pic;
        if h.cursor == u64::MAX || h.queue_len == 0 {
            return 1;
        }
        let ranks = self.position(h.cursor).max(1);
        u32::try_from(h.queue_len / ranks)
            .unwrap_or(u32::MAX)
            .max(1)
    }

    /// A sync that failed (no answer, or not the script's).
    pub fn sync_failed(&mut self) {
        self.hdr.metrics.sync_failures += 1;
        // Requests waiting for a first picture stop waiting: the on_error policy decides.
        self.hdr.sync.first_sync_ms = 0;
    }

    /// A tick whose window had no picture (Redis gone or slow): the node lets in its equal part
    /// of the sessions the last picture saw leaving an interval, and its cursor moves on
    /// through the picture's line by those places each interval.
    pub fn age(&mut self, now: u64, cfg: &FleetConfig) {
        let window = window_end(now, cfg.interval_ms);
        if self.hdr.pic.synced_at_ms == 0 || self.hdr.share.granted_window >= window {
            return;
        }
        let gained = self.hdr.pic.later_departures(cfg);
        let cursor = self.hdr.pic.cursor;
        if cursor != u64::MAX {
            // The cursor's rank in the picture's line, moved on by what the fleet lets in.
            let rank = self.position(cursor).saturating_sub(1);
            let next = rank.max(self.hdr.pic.aged_ranks) + gained;
            let moved = match self.arrival_at_rank(next) {
                Some(a) => a.max(cursor),
                // Past the picture's line: everyone who came until now.
                None => now.max(cursor),
            };
            let pic = &mut self.hdr.pic;
            pic.cursor = moved;
            pic.aged_ranks = pic.aged_ranks.saturating_add(gained);
        }
        let h = &mut *self.hdr;
        h.share.age(window, gained, h.pic.nodes);
        h.draw.pool_empty_window = window;
        h.pic.window_ms = window;
    }

    pub fn snapshot(&self, now: u64) -> FleetSnapshot {
        let (pic, m) = (&self.hdr.pic, &self.hdr.metrics);
        FleetSnapshot {
            fleet_active: pic.fleet_active,
            queue_len: pic.queue_len,
            quota_left: self.hdr.share.quota_left,
            nodes: pic.nodes,
            admitted: m.admitted,
            draws: m.draws,
            draws_granted: m.draws_granted,
            dropped: m.dropped + self.hdr.tally.dropped,
            syncs: m.syncs,
            sync_failures: m.sync_failures,
            sync_age_ms: (pic.synced_at_ms != 0).then(|| now.saturating_sub(pic.synced_at_ms)),
            pressure: pic
                .pressure
                .checked_sub(1)
                .map(|d| u8::try_from(d).unwrap_or(u8::MAX)),
        }
    }
}
