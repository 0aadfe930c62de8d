//! The node's side of a sync: the report of what it saw since the last one, the picture
//! applied, and the interval without Redis (the equal split of departures).

use super::layout::record;
use super::node::later_departures;
use super::{Fence, REPORT_CAP, REPORT_WAITERS_CAP};
use super::{FleetConfig, FleetNode, FleetSnapshot, Report, RoomPicture, SpentProof};

use crate::util::time::window_end;

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
        let h = &mut *self.hdr;
        let mut cap = REPORT_CAP;
        let admitted = take(self.admitted, &mut h.n_admitted, &mut cap);
        let active = take(self.active, &mut h.n_active, &mut cap);
        let mut wcap = cap.min(REPORT_WAITERS_CAP);
        let waiters = take(self.waiters, &mut h.n_waiters, &mut wcap);
        let r = Report {
            polls: core::mem::take(&mut h.polls),
            asked: core::mem::take(&mut h.n_asked),
            challenged: core::mem::take(&mut h.n_challenged),
            spent: {
                let n = (core::mem::take(&mut h.spent_len) as usize).min(h.spent.len());
                h.spent.get(..n).unwrap_or_default().to_vec()
            },
            active,
            admitted,
            waiters,
            flood,
        };
        // The sync releases what is left of this node's places (the report says what it used):
        // none is spent until the picture brings the next share.
        h.quota_left = 0;
        if !self.backlog() {
            // Entries of the sent table no longer point into the batches.
            let h = &mut *self.hdr;
            h.batch_seq = h.batch_seq.wrapping_add(1) % u32::MAX;
        }
        r
    }

    /// A proof of work spent here on a new place (`challenge=pow`), until `until` (ms):
    /// reported with the next sync, so the other nodes refuse it from their next picture on.
    pub fn spent_here(&mut self, key: u64, until: u64) {
        self.hdr.keep_spent(SpentProof { key, ms: until });
    }

    /// A challenge given here (`challenge_bits=auto`): reported with the next sync.
    pub fn challenged(&mut self) {
        self.hdr.n_challenged = self.hdr.n_challenged.saturating_add(1);
    }

    /// Sightings a capped report left in the batches (another sync should follow soon).
    pub fn backlog(&self) -> bool {
        self.hdr.n_active + self.hdr.n_admitted + self.hdr.n_waiters > 0
    }

    /// A report whose sync failed goes back into the batches (as far as they have room), so
    /// what the node admitted while Redis was away still reaches the fleet when it returns.
    pub fn give_back(&mut self, r: &Report) {
        let h = &mut *self.hdr;
        h.polls += r.polls;
        h.n_asked += r.asked;
        h.n_challenged += r.challenged;
        for &p in &r.spent {
            h.keep_spent(p);
        }
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
        self.give_back_flood(&r.flood);
    }

    /// The fence of this node's next sync at `now` (a new sequence number).
    pub fn next_sync(&mut self, now: u64, generation: u32, cfg: &FleetConfig) -> Fence {
        self.hdr.seq += 1;
        if !self.synced() {
            self.hdr.first_sync_ms = now.max(1);
        }
        Fence {
            node_id: self.hdr.node_id,
            generation,
            window: window_end(now, cfg.interval_ms),
            seq: self.hdr.seq,
        }
    }

    /// The fleet's picture came back for the sync of `seq`: the node decides by it until the
    /// next. An answer to a sync that a newer one superseded (a stalled leader's, one answered
    /// late) is ignored: false.
    pub fn apply(&mut self, p: &RoomPicture, seq: u64, now: u64) -> bool {
        if self.hdr.seq != seq {
            return false;
        }
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
        h.taken = 0;
        h.quota = p.quota;
        h.quota_left = p.quota;
        h.nodes = p.nodes.max(1);
        h.free = p.free;
        h.expiring = p.expiring;
        h.leaving = p.leaving;
        // The ends on this node's clock from the answer's arrival: later than the script's
        // `now` by the reply's way back, so a place is taken a little after its session ended,
        // never before.
        h.expiring_held = p.held;
        h.ends_len = 0;
        for (slot, ms) in h.ends.iter_mut().zip(p.ends.iter()) {
            *slot = now.saturating_add(*ms);
            h.ends_len += 1;
        }
        h.pressure = u64::from(p.pressure) + 1;
        h.pool_empty_window = 0;
        h.told_oldest = 0;
        h.syncs += 1;
        let n = p.samples.len().min(self.samples.len());
        for (slot, s) in self.samples.iter_mut().zip(p.samples.iter()) {
            *slot = *s;
        }
        self.hdr.samples_len = n as u64;
        self.hdr.samples_exact = u64::from(p.exact && n == p.samples.len());
        self.hdr.first_sync_ms = 0;
        self.fresh_after(self.tail());
        self.hdr.turn_weight = self.turn_weight();
        self.flood_answers(&p.flood, now);
        true
    }

    /// Whether a sync the node sent while it had no picture may still bring one (sent within
    /// `timeout_ms`, not failed): a request that needs a decision waits for it. False once the
    /// node has a picture, and when no such sync is out: then only a new one can bring it.
    pub fn first_sync_pending(&self, now: u64, timeout_ms: u64) -> bool {
        let sent = self.hdr.first_sync_ms;
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
        let h = &*self.hdr;
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
        self.hdr.sync_failures += 1;
        // Requests waiting for a first picture stop waiting: the on_error policy decides.
        self.hdr.first_sync_ms = 0;
    }

    /// A tick whose window had no picture (Redis gone or slow): the node lets in its equal part
    /// of the sessions the last picture saw leaving an interval, and its cursor moves on
    /// through the picture's line by those places each interval.
    pub fn age(&mut self, now: u64, cfg: &FleetConfig) {
        let window = window_end(now, cfg.interval_ms);
        if self.hdr.synced_at_ms == 0 || self.hdr.granted_window >= window {
            return;
        }
        let gained = later_departures(self.hdr, cfg);
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
        // last picture saw leaving after its own interval, as a rate (the places free then,
        // and those its interval's ends freed, were a stock its share covered), split
        // equally, fractions carried to the next interval.
        let leaving = gained.saturating_mul(1000) / h.nodes.max(1) + h.age_carry;
        h.quota_left = leaving / 1000;
        h.age_carry = leaving % 1000;
        // A rate, not the picture's places: nothing held for their sessions' ends.
        h.expiring_held = 0;
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
            dropped: self.hdr.dropped + self.hdr.tally_dropped,
            syncs: self.hdr.syncs,
            sync_failures: self.hdr.sync_failures,
            sync_age_ms: (self.hdr.synced_at_ms != 0)
                .then(|| now.saturating_sub(self.hdr.synced_at_ms)),
            pressure: self
                .hdr
                .pressure
                .checked_sub(1)
                .map(|d| u8::try_from(d).unwrap_or(u8::MAX)),
        }
    }
}
