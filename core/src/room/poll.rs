//! What one worker remembers of the waiting clients it answered: their place, and how fast
//! they poll. A browser reloads the waiting page every few seconds; a script can replay one
//! ticket thousands of times a second. Each ticket has a poll budget per worker (a rate with
//! a burst, `poll=` on the zone): within it a poll asks the store (and renews the client's
//! presence); beyond it the poll gets the last answer again without touching the store.
//! The store's work for one ticket is so bounded however hard it is replayed ([S15]).
//!
//! The Redis store also answers a client far back in line from here when it asked moments
//! ago: nobody that far back can be admitted on the next poll in arrival order, so the round
//! trip would only say what was just said. Moments: less than half the shortest refresh the
//! room tells (1 s), so a client that comes back when it was told always asks the store (a
//! line that lets ten in a second moves a client from position 13 to the head within one
//! refresh: the central rehearsal, with a second's reuse once those near their turn were
//! told to come back after 1 s, answered such a client from here 933 ms after its last
//! answer while four who came after it went in).
//!
//! Fixed size (direct-mapped by session id, replaced on collision): no allocation per poll.

use crate::room::gcra::Rate;
use crate::room::Place;

/// How a poll is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Ask the store.
    Ask,
    /// Polled faster than its budget: the last answer, without the store.
    TooFast(Place),
    /// Far back in line and answered moments ago: the same answer (Redis).
    Recent(Place),
}

#[derive(Clone, Copy)]
struct Entry {
    place: Place,
    /// When the store last answered for this ticket (ms).
    at: u64,
    /// The ticket's poll budget (see `rate`).
    tat: u64,
}

/// Places of recently answered waiting tickets, per worker.
pub struct PollCache {
    slots: Vec<Option<Entry>>,
}

impl PollCache {
    /// Only places at least this far back are reused as [`Poll::Recent`].
    pub const FAR_POSITION: u64 = 10;

    /// A cache of `slots` entries (rounded up to a power of two, at least 1).
    pub fn new(slots: usize) -> PollCache {
        let n = slots.max(1).next_power_of_two();
        PollCache {
            slots: vec![None; n],
        }
    }

    fn slot(&self, sid: u64) -> usize {
        (sid.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & (self.slots.len() - 1)
    }

    /// How to answer a poll of `sid` (holding place `qnum`) at `now`. `budget`: the poll rate
    /// (None: unlimited); `recent_ms`: how long a far-back place may be reused (0: never).
    pub fn check(
        &mut self,
        sid: u64,
        qnum: u64,
        now: u64,
        budget: Option<Rate>,
        recent_ms: u64,
    ) -> Poll {
        let i = self.slot(sid);
        let Some(Some(e)) = self.slots.get_mut(i) else {
            return Poll::Ask;
        };
        if e.place.sid != sid || e.place.qnum != qnum || qnum == 0 {
            return Poll::Ask;
        }
        if let Some(rate) = budget {
            match rate.take(e.tat, now.saturating_mul(1000)) {
                Ok(tat) => e.tat = tat,
                Err(_) => return Poll::TooFast(e.place),
            }
        }
        if recent_ms > 0
            && e.place.position >= Self::FAR_POSITION
            && now.saturating_sub(e.at) < recent_ms
        {
            return Poll::Recent(e.place);
        }
        Poll::Ask
    }

    /// Remembers the place the store just gave (keeping the ticket's poll budget).
    pub fn put(&mut self, place: Place, now: u64) {
        let i = self.slot(place.sid);
        if let Some(slot) = self.slots.get_mut(i) {
            let tat = match slot {
                Some(e) if e.place.sid == place.sid => e.tat,
                _ => 0,
            };
            *slot = Some(Entry {
                // A repeat of this answer is not the first after an absence ([S27]).
                place: Place {
                    resumed: false,
                    ..place
                },
                at: now,
                tat,
            });
        }
    }

    /// Forgets a ticket that is no longer waiting (admitted, refused).
    pub fn forget(&mut self, sid: u64) {
        let i = self.slot(sid);
        if let Some(slot) = self.slots.get_mut(i) {
            if slot.is_some_and(|e| e.place.sid == sid) {
                *slot = None;
            }
        }
    }

    /// How long a far-back place may be reused: half a second (see the module's comment), and
    /// never more than a quarter of `presence` (the next real poll must renew the client's
    /// presence in time).
    pub fn recent_ms(presence_ms: u64) -> u64 {
        (presence_ms / 4).min(500)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::room::Counted;

    fn place(sid: u64, qnum: u64, position: u64) -> Place {
        Place {
            sid,
            qnum,
            position,
            queue_len: 30,
            eta_secs: None,
            resumed: false,
            counted: Counted::All,
        }
    }

    #[test]
    fn a_replayed_ticket_is_answered_without_the_store() {
        let mut c = PollCache::new(64);
        let budget = Some(Rate::per_sec(2.0, 3));
        assert_eq!(c.check(7, 100, 0, budget, 0), Poll::Ask, "unknown ticket");
        c.put(place(7, 100, 1), 0);
        // The budget: 1 + 3 at once, then 2 a second.
        for _ in 0..4 {
            assert_eq!(c.check(7, 100, 1000, budget, 0), Poll::Ask);
            c.put(place(7, 100, 1), 1000);
        }
        assert_eq!(
            c.check(7, 100, 1000, budget, 0),
            Poll::TooFast(place(7, 100, 1))
        );
        assert_eq!(
            c.check(7, 100, 1499, budget, 0),
            Poll::TooFast(place(7, 100, 1))
        );
        assert_eq!(c.check(7, 100, 1500, budget, 0), Poll::Ask);
        // A browser's pace never runs out.
        for t in 1..100u64 {
            assert_eq!(c.check(7, 100, 2000 + t * 5000, budget, 0), Poll::Ask);
            c.put(place(7, 100, 1), 2000 + t * 5000);
        }
        // Another place of the same session, or no budget: the store.
        assert_eq!(c.check(7, 101, 600_000, budget, 0), Poll::Ask);
        assert_eq!(c.check(7, 100, 600_000, None, 0), Poll::Ask);
        c.forget(7);
        assert_eq!(c.check(7, 100, 600_000, budget, 0), Poll::Ask);
    }

    #[test]
    fn far_back_places_are_reused_briefly() {
        let mut c = PollCache::new(64);
        let ttl = PollCache::recent_ms(20_000);
        assert_eq!(ttl, 500);
        assert_eq!(PollCache::recent_ms(1000), 250);
        c.put(place(7, 100, 12), 1_000);
        c.put(place(8, 101, 3), 1_000);
        assert_eq!(
            c.check(7, 100, 1_499, None, ttl),
            Poll::Recent(place(7, 100, 12))
        );
        // Back after 0.9 s of a 1 s refresh: the store answers.
        assert_eq!(c.check(7, 100, 1_900, None, ttl), Poll::Ask, "too old");
        assert_eq!(
            c.check(8, 101, 1_500, None, ttl),
            Poll::Ask,
            "near the head"
        );
    }
}
