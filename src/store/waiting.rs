//! A waiting ticket's rules that differ by store, behind the zone: the place a ticket holds,
//! when it is written again, how the line's counts follow it, how often its page polls.
//!
//! The shared-memory and central rooms keep every place themselves: a ticket names its place
//! by queue number, and is written again only when that changes. A synced room's line is
//! spread over the fleet's nodes: its ticket carries the moment its holder took its place
//! (as its queue number), renews that proof of presence now and then so that any node can
//! tell it is still present, and its node counts it in the line's arrival buckets
//! (`fleet/tally.rs`).

use smart_limit_core::fleet;
use smart_limit_core::page::refresh;
use smart_limit_core::room::rules;
use smart_limit_core::room::Place;
use smart_limit_core::ticket::Ticket;

use super::{Store, Zone};

impl Zone {
    /// The place a waiting ticket holds (its queue number) and when it took it. A synced
    /// room's ticket carries the moment as its queue number and keeps it while it is seen (see
    /// [`fleet::place_arrival`]); a place gone, or never taken (the ticket of the cookie
    /// check), is taken now: number 0, arrival now. The other stores keep places themselves.
    ///
    /// While an event's pre-queue is open (`shuffle=on`), a synced room's new place dates from
    /// a moment drawn in the pre-queue ([`fleet::lottery_arrival`]): the start's lottery.
    pub fn place_of(&self, t: &Ticket, now: u64) -> (u64, u64) {
        let Store::Synced(_) = self.store else {
            return (t.qnum, now);
        };
        let ev = self.event_now(now);
        let lottery = ev.as_ref().and_then(|(e, _)| e.lottery_ms());
        let hold = (self.limits.presence_ms, self.limits.kept_ms());
        let ticket = (t.qnum, t.issued_at, t.last_seen);
        let skew = rules::MAX_CLOCK_SKEW_MS;
        if let Some(arrival) = fleet::place_arrival(ticket, now, hold, skew, lottery.clone()) {
            return (t.qnum, arrival);
        }
        match (ev, lottery) {
            (Some((_, e)), Some(moments)) if !e.started => {
                (0, fleet::lottery_arrival(moments).unwrap_or(now))
            }
            _ => (0, now),
        }
    }

    /// [S27] Whether a waiting client comes back to its kept place after an absence (the first
    /// answer after it says so, `"resumed":true`). The shared-memory and central rooms tell
    /// it in their place; a synced room's ticket does: it holds the place it had, unseen for
    /// longer than presence ([`fleet::comes_back`]).
    pub fn resumes(&self, held: Option<Ticket>, place: &Place, now: u64) -> bool {
        if place.resumed {
            return true;
        }
        let Store::Synced(_) = self.store else {
            return false;
        };
        held.is_some_and(|t| {
            t.qnum != 0
                && t.qnum == place.qnum
                && t.sid == place.sid
                && fleet::comes_back(t.last_seen, now, self.limits.presence_ms)
        })
    }

    /// Whether the room's waiting tickets carry the lowest position told ([S27],
    /// `room::told`): where positions are estimates (a synced room) and final (no event, whose
    /// draw orders its pre-queue later). Shared memory and a central room count the waiters
    /// ahead exactly: their positions never rise, and a floor would only cost a ticket sealed
    /// again every few places the line moves.
    pub fn keeps_position_floors(&self) -> bool {
        matches!(self.store, Store::Synced(_)) && self.events().is_empty()
    }

    /// Whether a waiting ticket is written again: its place changed, or (a synced room) its
    /// `last_seen` is a quarter of a presence old ([`fleet::ticket_renew_ms`]), so every node
    /// can tell it is still present. (Its stamp is then of an earlier epoch of the line's
    /// counts, which [`Zone::count_waiting`] moves it from.)
    pub fn renews_waiting(&self, held: Option<Ticket>, place: &Place, now: u64) -> bool {
        let Some(t) = held else { return true };
        if t.qnum != place.qnum || t.sid != place.sid {
            return true;
        }
        matches!(self.store, Store::Synced(_))
            && now.saturating_sub(t.last_seen) >= fleet::ticket_renew_ms(self.limits.presence_ms)
    }

    /// A waiting ticket written again: a synced room counts it in this epoch of the line's
    /// counts (and takes it off the epoch of its old stamp, when it keeps its place).
    pub fn count_waiting(&self, held: Option<Ticket>, place: &Place, now: u64) {
        let Store::Synced(_) = self.store else {
            return;
        };
        let stamp = held
            .filter(|t| t.qnum != 0 && t.qnum == place.qnum && t.sid == place.sid)
            .map(|t| t.last_seen);
        self.tally_seen(place.qnum, stamp, now);
    }

    /// A waiting ticket let in: a synced room's waiter leaves the line's counts.
    pub fn count_let_in(&self, held: Option<Ticket>, now: u64) {
        let Store::Synced(_) = self.store else {
            return;
        };
        if let Some(t) = held.filter(|t| t.qnum != 0) {
            self.tally_left(t.qnum, t.last_seen, now);
        }
    }

    /// How soon a waiting client comes back ([`refresh::refresh_secs`]): a synced room's
    /// answers change with its pictures, the others' whenever asked; `max_active=auto`'s next
    /// rises open places no pace predicts.
    pub fn refresh_secs(&self, configured: u64, position: u64, eta_secs: Option<u64>) -> u64 {
        let floor_secs = match &self.store {
            Store::Synced(fs) => fs.cfg.interval_ms.div_ceil(1000),
            Store::Shm | Store::Central(_) => 1,
        };
        let opening = match (self.params.auto, self.shm.steering()) {
            (Some(auto), Some(st)) => st.opening(&auto),
            _ => 0,
        };
        let turn = refresh::Turn {
            position,
            eta_secs,
            opening,
        };
        refresh::refresh_secs(configured, floor_secs, turn)
    }

    /// Why a line refused a newcomer (the error log's words): the shared-memory line is
    /// bounded by the zone's memory, a Redis line by `max_line=`.
    pub fn line_full_reason(&self) -> &'static str {
        match self.store {
            Store::Central(_) | Store::Synced(_) => {
                "is full: no place left in the line for a new client (max_line=)"
            }
            Store::Shm => "is full: no place left in the line for a new client; increase its size=",
        }
    }
}
