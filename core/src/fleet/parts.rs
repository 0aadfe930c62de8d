//! The parts of the node's header (`layout.rs`), one per concern, with what changes each: the
//! block's shape, the syncs sent, the picture in force, this interval's share of places, the
//! pool draw, the report pending for the next sync, the metrics, the spent proofs, and the
//! arrival tally and its counts (`tally_zone.rs`); the newcomers the picture cannot show are
//! `fresh.rs`'s. Each is plain old data (`#[repr(C)]`, u64s and pairs of u32s: no padding),
//! valid all-zero, as a fresh zone holds it.

use super::{Ask, FleetConfig, RoomPicture, SpentProof, ENDS_CAP};
use super::{Sample, REVOKE_REPORT_CAP, SPENT_REPORT_CAP};

/// The longest line a picture shows whose clients the node counts as it lets them in
/// ([`Picture::watch_line`]): a line of a crowd's first moment (the node's own first client),
/// or of a quiet room's few; the count looks through it once per admission.
pub(super) const LINE_HERE_CAP: usize = 16;

/// The block's shape, written once by `FleetNode::format`.
#[repr(C)]
pub(super) struct Block {
    pub(super) magic: u64,
    /// Entries of the sent table, and of each batch.
    pub(super) seen_len: u32,
    pub(super) batch_len: u32,
    pub(super) node_id: u64,
}

/// The syncs this node sent.
#[repr(C)]
pub(super) struct Syncs {
    /// The last sync sent (fencing: only its answer is applied).
    pub(super) seq: u64,
    /// When a sync left while the node had no picture (0: none out). Requests that need a
    /// decision wait for it rather than decide alone ([S21]).
    pub(super) first_sync_ms: u64,
    /// When the last sync left: its picture knows nobody who came to this node after it.
    pub(super) sent_ms: u64,
    /// When this zone sent its first sync: the node knows its own newcomers since then only
    /// (a restart starts a new zone; a reload keeps this one).
    pub(super) started_ms: u64,
}

impl Syncs {
    /// The sequence number of the sync sent at `now`, `first` when the node has no picture.
    pub(super) fn next(&mut self, now: u64, first: bool) -> u64 {
        self.seq += 1;
        self.sent_ms = now;
        if self.started_ms == 0 {
            self.started_ms = now.max(1);
        }
        if first {
            self.first_sync_ms = now.max(1);
        }
        self.seq
    }
}

/// The picture in force: the fleet as the last sync's answer showed it, as it ages.
#[repr(C)]
pub(super) struct Picture {
    /// The window it is for (0: none yet), and when it came (0: never).
    pub(super) window_ms: u64,
    pub(super) synced_at_ms: u64,
    pub(super) fleet_active: u64,
    pub(super) queue_len: u64,
    pub(super) cursor: u64,
    /// The cursor without its band (the picture's `rightful`).
    pub(super) rightful: u64,
    pub(super) nodes: u64,
    /// Of them, those whose report of this window it holds (this node's included).
    pub(super) reported: u64,
    pub(super) free: u64,
    pub(super) expiring: u64,
    pub(super) leaving: u64,
    /// The samples of the line it holds (the block's samples table).
    pub(super) samples_len: u64,
    /// 1: the samples are the whole line, each with its session (positions are exact).
    pub(super) samples_exact: u64,
    /// The picture's pressure: 1 + its doublings (0: no picture yet).
    pub(super) pressure: u64,
    /// Places taken here since the picture came (against `max_line`).
    pub(super) taken: u64,
    /// Ranks of the picture's line let in since it came, as the node guesses without Redis
    /// (positions shown are that much nearer the head).
    pub(super) aged_ranks: u64,
    /// Newcomers the fleet takes places for in an interval, as this node reckons them when
    /// the picture came ([`super::FleetNode::unseen_ahead`]).
    pub(super) newcomers: u64,
    /// This node's part of the fleet's newcomers, as the picture let it reckon them when it
    /// came: of the waiters of the line's last complete interval, those it shows
    /// (`part_shown`) and those of them that took their places here (`part_mine`); 0 and 0:
    /// too few to tell ([`super::FleetNode::own_pace_ahead`]).
    pub(super) part_shown: u64,
    pub(super) part_mine: u64,
    /// Clients of a short line the picture shows whole, with a place for each of them (its
    /// cursor is everyone), not yet let in here (0: no such line). Those who came after the
    /// picture wait behind that line; once this node has let in every client of it, nobody
    /// waits ahead of them ([`Picture::let_in_of_line`]).
    pub(super) line_here: u64,
    /// Places those who came after the picture may take here while the line it shows waits
    /// (its cursor is everyone: a place for each of them): this node's part of the places
    /// beyond the line ([`Picture::room_past_line`]).
    pub(super) past_line: u64,
}

impl Picture {
    /// A new picture at `now`, but for its samples (the caller copies them), answering the
    /// sync that left at `sent_ms`. A client this node holds the cursor at who came after that
    /// is not in it: a picture of an empty line keeps the hold (else the arrivals after the
    /// client would be let in, or draw from the pool, ahead of it).
    pub(super) fn apply(&mut self, p: &RoomPicture, now: u64, sent_ms: u64) {
        let unseen_hold = self.hold().filter(|&arrival| arrival >= sent_ms);
        self.aged_ranks = 0;
        // "Everyone" means everyone only while nobody waits anywhere in the fleet; otherwise
        // those who came after this picture wait for the next one, behind the line it shows
        // (but for this node's part of the places beyond it: `room_past_line`).
        self.cursor = match (p.cursor, p.queue_len) {
            (u64::MAX, 0) => u64::MAX,
            (u64::MAX, _) => now,
            (c, _) => c,
        };
        self.rightful = p.rightful;
        self.window_ms = p.window_ms;
        self.synced_at_ms = now.max(1);
        self.fleet_active = p.fleet_active;
        self.queue_len = p.queue_len;
        self.taken = 0;
        self.nodes = p.nodes.max(1);
        self.reported = p.reported;
        self.free = p.free;
        self.expiring = p.expiring;
        self.leaving = p.leaving;
        self.pressure = u64::from(p.pressure) + 1;
        if let Some(arrival) = unseen_hold {
            self.hold_at(arrival);
        }
    }

    /// The picture's line, whole (`line`), lets everyone in but holds back those who came
    /// after the picture: when it is short, the node counts its clients it lets in.
    pub(super) fn watch_line(&mut self, p: &RoomPicture, line: &[Sample]) {
        let whole = p.exact && line.len() as u64 == p.queue_len;
        let short = p.queue_len <= LINE_HERE_CAP as u64;
        self.line_here = if p.cursor == u64::MAX && whole && short {
            p.queue_len
        } else {
            0
        };
    }

    /// `sid` was let in here: if it was the last of the picture's short line not yet let in,
    /// nobody waits ahead of those who came after the picture (the line it showed is empty).
    /// A node whose first request came with a crowd sent that client as a waiter in its first
    /// sync; the picture showed it in line, the node let it in at once, and every newcomer
    /// after it waited an interval for the next picture (the sync rehearsal's first fill).
    pub(super) fn let_in_of_line(&mut self, sid: u64, line: &[Sample]) {
        if self.line_here == 0 || !line.iter().any(|s| s.sid == sid) {
            return;
        }
        self.line_here -= 1;
        if self.line_here == 0 {
            self.past_line = 0;
            self.cursor = u64::MAX;
            self.rightful = u64::MAX;
            self.queue_len = 0;
            self.samples_len = 0;
        }
    }

    /// A picture of a line with a place for each of its clients (its cursor is everyone) and
    /// places beyond them: those who came after it may take this node's part of the places
    /// beyond, by the nodes, so that whatever every node lets in, each client of the line
    /// still finds a place when it comes back. Waiting for the next picture instead, a node
    /// whose first sync showed a few of its own newcomers in line, told to come back in a
    /// second, let nobody in for that second while the room stood empty.
    /// (After `apply`: the picture's counts are this one's.)
    pub(super) fn room_past_line(&mut self, p: &RoomPicture, max_active: u64) {
        let line = p.cursor == u64::MAX && p.queue_len > 0;
        self.past_line = if line {
            self.places(max_active).saturating_sub(p.queue_len) / self.nodes
        } else {
            0
        };
    }

    /// The places free within the picture's interval, as the script's cursor counts them:
    /// those free now and those of the sessions whose window ends in it.
    pub(super) fn places(&self, max_active: u64) -> u64 {
        max_active
            .saturating_add(self.expiring)
            .saturating_sub(self.fleet_active)
    }

    /// Whether a waiter who arrived at `arrival` may be admitted: at or before the cursor, or
    /// after a line with places beyond it left here.
    pub(super) fn eligible(&self, arrival: u64) -> bool {
        self.cursor == u64::MAX || arrival <= self.cursor || self.past_line > 0
    }

    /// A client who arrived at `arrival` took a place: past the line, one of the places
    /// beyond it.
    pub(super) fn took(&mut self, arrival: u64) {
        if self.cursor != u64::MAX && arrival > self.cursor {
            self.past_line = self.past_line.saturating_sub(1);
        }
    }

    /// The arrival this node holds the cursor at, if it does: the picture said nobody waits
    /// anywhere, and a client turned away since waits (`FleetNode::decide`). Only a picture of
    /// an empty line leaves the cursor at "everyone", so a cursor at an arrival under such a
    /// picture is the node's own hold.
    pub(super) fn hold(&self) -> Option<u64> {
        let empty = self.rightful == u64::MAX && self.queue_len == 0;
        (empty && self.cursor != u64::MAX).then_some(self.cursor)
    }

    /// A client who arrived at `arrival` was turned away while the picture lets everyone in:
    /// until the next picture, nobody who came later is let in ahead of it.
    pub(super) fn hold_at(&mut self, arrival: u64) {
        if self.cursor == u64::MAX {
            self.cursor = arrival;
        }
    }

    /// The client who arrived at `arrival` is in: if the cursor was held at it, the arrivals
    /// after it may take places (or draw) as they come again.
    pub(super) fn release(&mut self, arrival: u64) {
        if self.hold() == Some(arrival) {
            self.cursor = u64::MAX;
        }
    }

    /// A place taken in a line of at most `max_line` (as the picture saw it, with the places
    /// taken here since): None when taken, else the line's length (full).
    pub(super) fn join_line(&mut self, max_line: u64) -> Option<u64> {
        // (The picture's `full` is its queue length at max_line: counted here already.)
        let in_line = self.queue_len.saturating_add(self.taken);
        if in_line >= max_line {
            return Some(in_line);
        }
        self.taken += 1;
        None
    }

    /// Whether the picture saw the room not full: free places, which newcomers may take at
    /// once.
    pub(super) fn shows_free_places(&self, cfg: &FleetConfig) -> bool {
        self.fleet_active < cfg.max_active
    }

    /// How many places the line gains an interval, as the picture saw it: the free places,
    /// or those freeing within the interval, or the sessions about to leave spread over the
    /// horizon, whichever is most (in a room that is not full: its empty places).
    pub(super) fn per_interval(&self, cfg: &FleetConfig) -> u64 {
        match self.departures(cfg).max(self.free) {
            // A room that is not full has its empty places to give.
            0 => cfg.max_active.saturating_sub(self.fleet_active),
            n => n,
        }
    }

    /// How many sessions leave an interval, as the picture saw it: those whose window ends
    /// within it, or those about to leave spread over the horizon, whichever is more.
    pub(super) fn departures(&self, cfg: &FleetConfig) -> u64 {
        let soon = u128::from(self.leaving) * u128::from(cfg.interval_ms)
            / u128::from(cfg.horizon_ms().max(1));
        u64::try_from(soon).unwrap_or(u64::MAX).max(self.expiring)
    }

    /// How many sessions leave each interval after the picture's own, as it saw them: the ones
    /// it saw leaving after that interval, spread over the rest of the horizon. The picture's
    /// `expiring` were its own interval's, and its grant already gave their places: an interval
    /// without a picture that let them in again would let a lump of ends in once per interval
    /// of an outage (ten times in a 10 s stop).
    pub(super) fn later_departures(&self, cfg: &FleetConfig) -> u64 {
        let (interval, horizon) = (cfg.interval_ms, cfg.horizon_ms());
        let rate = match horizon.checked_sub(interval) {
            // A horizon of one interval: the picture saw nothing past its own, its rate stands.
            None | Some(0) => u128::from(self.leaving),
            Some(rest) => {
                u128::from(self.leaving.saturating_sub(self.expiring)) * u128::from(interval)
                    / u128::from(rest)
            }
        };
        u64::try_from(rate).unwrap_or(u64::MAX)
    }
}

/// The node's places this interval: the picture's grant, or an interval without one's equal
/// part of the departures.
#[repr(C)]
pub(super) struct Share {
    pub(super) quota: u64,
    /// What is left of it, with the places the pool's draws brought.
    pub(super) quota_left: u64,
    /// The last window a tick (re)granted the quota in.
    pub(super) granted_window: u64,
    /// The fraction of a place an old picture's share left over (thousandths).
    pub(super) age_carry: u64,
    /// The places of the picture's quota that are expiring sessions' (its `held`: 0 when none,
    /// or when an outage's share replaced the picture's) and when those sessions' windows end
    /// (the node's clock, ms, ascending; up to [`ENDS_CAP`] of them, evenly by rank): the node
    /// takes each only once it has ended (`held_back`).
    pub(super) expiring_held: u64,
    pub(super) ends_len: u64,
    pub(super) ends: [u64; ENDS_CAP],
}

impl Share {
    /// The picture's grant, come at `now`.
    pub(super) fn grant(&mut self, p: &RoomPicture, now: u64) {
        self.granted_window = p.window_ms;
        self.quota = p.quota;
        self.quota_left = p.quota;
        // The ends on this node's clock from the answer's arrival: later than the script's
        // `now` by the reply's way back, so a place is taken a little after its session ended,
        // never before.
        self.expiring_held = p.held;
        self.ends_len = 0;
        for (slot, ms) in self.ends.iter_mut().zip(p.ends.iter()) {
            *slot = now.saturating_add(*ms);
            self.ends_len += 1;
        }
    }

    /// Whether a place is left to take at `now` (beyond those held for sessions not ended).
    pub(super) fn open(&self, now: u64) -> bool {
        self.quota_left > self.held_back(now)
    }

    /// One place taken, if one is open at `now`.
    pub(super) fn take(&mut self, now: u64) -> bool {
        if !self.open(now) {
            return false;
        }
        self.quota_left -= 1;
        true
    }

    /// The places of the node's share that wait for a session to end at `now`: those the
    /// script gave it among the expiring sessions' places (each node its own: the places in
    /// the order they free, after the other nodes' grants), whose sessions are still in their
    /// window. Draws come from places free already: they add to what is left, not to what is
    /// held.
    pub(super) fn held_back(&self, now: u64) -> u64 {
        self.expiring_held.saturating_sub(self.ended_by(now))
    }

    /// How many of the held places' sessions have surely ended by `now`: the picture gives
    /// the ends of `n` of them, evenly by rank (all of them while they are at most
    /// [`ENDS_CAP`]); the i-th (1-based) is the end of the held place of rank
    /// floor(i x held / n) - 1, so once it has passed, that many have ended.
    fn ended_by(&self, now: u64) -> u64 {
        let listed = self.ends.get(..self.ends_len as usize).unwrap_or_default();
        let passed = listed.partition_point(|&end| end <= now) as u128;
        let n = (listed.len() as u128).max(1);
        u64::try_from(passed * u128::from(self.expiring_held) / n).unwrap_or(u64::MAX)
    }

    /// An interval of `window` without a picture: the node's equal part (of `nodes`) of the
    /// `gained` places the fleet lets in an interval.
    pub(super) fn age(&mut self, window: u64, gained: u64, nodes: u64) {
        self.granted_window = window;
        // The fleet keeps its level if it lets in about as many as leave: the sessions the
        // last picture saw leaving after its own interval, as a rate (the places free then,
        // and those its interval's ends freed, were a stock its share covered), split
        // equally, fractions carried to the next interval.
        let leaving = gained.saturating_mul(1000) / nodes.max(1) + self.age_carry;
        self.quota_left = leaving / 1000;
        self.age_carry = leaving % 1000;
        // A rate, not the picture's places: nothing held for their sessions' ends.
        self.expiring_held = 0;
    }
}

/// The pool draw (see `FleetNode::take_draw`).
#[repr(C)]
pub(super) struct Draw {
    /// The window the pool was found empty in (no more draws until the next picture).
    pub(super) pool_empty_window: u64,
    /// Clients whose turn it was, turned away for want of a place since the last draw, and
    /// the oldest arrival among them (0: none).
    pub(super) want: u64,
    pub(super) want_oldest: u64,
    /// The oldest arrival the draw in flight is for, and the oldest a draw came back short
    /// for since the picture came (0: none): with the pool found empty, only a client who
    /// arrived before it is worth another draw (the starved mark).
    pub(super) draw_oldest: u64,
    pub(super) told_oldest: u64,
    /// When the draw in flight was sent (0: none).
    pub(super) draw_since: u64,
}

impl Draw {
    /// A new picture: the pool is worth a draw again.
    pub(super) fn renew(&mut self) {
        self.pool_empty_window = 0;
        self.told_oldest = 0;
    }

    /// Whether the pool was found empty for the picture of `window_ms`.
    pub(super) fn pool_empty(&self, window_ms: u64) -> bool {
        window_ms != 0 && self.pool_empty_window == window_ms
    }

    /// Whether a client who arrived at `arrival` is older than any a draw came back short for
    /// since the picture.
    pub(super) fn untold(&self, arrival: u64) -> bool {
        arrival != 0 && (self.told_oldest == 0 || arrival < self.told_oldest)
    }

    /// A client whose turn it was, who arrived at `arrival`, turned away for want of a place.
    pub(super) fn wanted(&mut self, arrival: u64) {
        self.want += 1;
        self.want_oldest = oldest(self.want_oldest, arrival);
    }

    /// Whether a draw is out at `now`: sent, not answered, and not given up (after an
    /// interval).
    pub(super) fn out(&self, now: u64, interval_ms: u64) -> bool {
        self.draw_since != 0 && now.saturating_sub(self.draw_since) < interval_ms
    }

    /// The draw to send at `now`, if one is due (the picture's window `window_ms`).
    pub(super) fn take(&mut self, now: u64, interval_ms: u64, window_ms: u64) -> Option<Ask> {
        let busy = self.out(now, interval_ms);
        if self.want == 0 || busy || (self.pool_empty(window_ms) && !self.untold(self.want_oldest))
        {
            return None;
        }
        self.draw_since = now.max(1);
        let ask = Ask {
            want: core::mem::take(&mut self.want),
            oldest: core::mem::take(&mut self.want_oldest),
        };
        self.draw_oldest = ask.oldest;
        Some(ask)
    }

    /// The draw in flight answered; `short`: it got fewer places than it asked (the pool is
    /// empty for the picture of `window_ms`).
    pub(super) fn answered(&mut self, short: bool, window_ms: u64) {
        self.draw_since = 0;
        if short {
            self.pool_empty_window = window_ms;
            self.told_oldest = oldest(self.told_oldest, self.draw_oldest);
        }
    }
}

/// The older of two arrivals, 0 standing for none.
fn oldest(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (a, b) => a.min(b),
    }
}

/// The report pending for the next sync, but for its sightings (in the block's batches) and
/// spent proofs ([`Spent`]).
#[repr(C)]
pub(super) struct Pending {
    /// Waiting polls since the last report.
    pub(super) polls: u64,
    /// The sightings in each batch's live part.
    pub(super) n_active: u64,
    pub(super) n_admitted: u64,
    pub(super) n_waiters: u64,
    /// Newcomers that took a place here, and challenges given here, since the last report
    /// (the fleet's pressure).
    pub(super) n_asked: u64,
    pub(super) n_challenged: u64,
    /// Bumped when the batches are taken (entries of the sent table point into one batch).
    pub(super) batch_seq: u32,
    /// What a poll of a client whose turn it is weighs in `polls` (a poll of any other
    /// waiter weighs 1): the line's length over the ranks the cursor passed, from the last
    /// picture (0, as in a zone laid out before it existed, counts as 1).
    pub(super) turn_weight: u32,
}

impl Pending {
    /// A poll of a client whose turn it is: it weighs `turn_weight` (1 is counted already).
    pub(super) fn turn_polled(&mut self) {
        let extra = u64::from(self.turn_weight.max(1)) - 1;
        self.polls = self.polls.saturating_add(extra);
    }

    /// Sightings a capped report left in the batches.
    pub(super) fn backlog(&self) -> bool {
        self.n_active + self.n_admitted + self.n_waiters > 0
    }

    /// The batches were taken whole: entries of the sent table no longer point into them.
    pub(super) fn next_batch(&mut self) {
        self.batch_seq = self.batch_seq.wrapping_add(1) % u32::MAX;
    }
}

/// Cumulative, for metrics.
#[repr(C)]
pub(super) struct Metrics {
    pub(super) admitted: u64,
    pub(super) draws: u64,
    pub(super) draws_granted: u64,
    pub(super) dropped: u64,
    pub(super) syncs: u64,
    pub(super) sync_failures: u64,
}

/// Things that happened here, kept for the next report, up to `N` (the rest are not reported).
#[repr(C)]
pub(super) struct Kept<T: Copy, const N: usize> {
    pub(super) len: u64,
    pub(super) items: [T; N],
}

impl<T: Copy, const N: usize> Kept<T, N> {
    /// One kept for the next report (none past `N`).
    pub(super) fn keep(&mut self, item: T) {
        if let Some(slot) = self.items.get_mut(self.len as usize) {
            *slot = item;
            self.len += 1;
        }
    }

    /// Those kept, for a report.
    pub(super) fn take(&mut self) -> Vec<T> {
        let n = (core::mem::take(&mut self.len) as usize).min(N);
        self.items.get(..n).unwrap_or_default().to_vec()
    }
}

/// Proofs of work spent here since the last report (until when).
pub(super) type Spent = Kept<SpentProof, SPENT_REPORT_CAP>;

/// Sessions the origin revoked here since the last report.
pub(super) type Revoked = Kept<u64, REVOKE_REPORT_CAP>;

/// The arrival-bucket tally ([S22], `tally_zone.rs`): entries of the tally table in use, and
/// changes dropped for want of room in it (cumulative).
#[repr(C)]
pub(super) struct Tally {
    pub(super) len: u64,
    pub(super) dropped: u64,
}

/// The counts the last tally call brought: rows (in the block's counts table), when they were
/// settled (0: none), and the fleet's arrivals a second then.
#[repr(C)]
pub(super) struct Counts {
    pub(super) len: u64,
    pub(super) at: u64,
    pub(super) per_s: u64,
    /// What the counts lacked as they came ([`super::tally::Behind`]): the other nodes'
    /// let-ins since their last calls.
    pub(super) unreported: u64,
}
