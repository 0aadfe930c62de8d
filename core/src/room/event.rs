//! A scheduled event's pre-queue and the start's lottery in the room of one node ([S18]).
//!
//! While the pre-queue is open the room takes places as always (the cookie check and flood
//! control apply; the caller runs the room in `queue_all`, so nobody is let in), and the room
//! notes the first queue number of the pre-queue. At the start it notes the last one and
//! shuffles the places in between: a Fisher-Yates shuffle from the front, [`SHUFFLE_STEP`]
//! places per decision under the zone's lock, so no decision does unbounded work however long
//! the pre-queue is. A place at the front is final as soon as the shuffle has passed it, and
//! nobody is let in from a place the shuffle has not reached yet (see `Room::drawn`): the head
//! is always drawn, since every decision moves the shuffle on by more than it admits.
//!
//! The random numbers come from the event's seed (32 bytes from the operating system, drawn
//! when the shuffle begins): HMAC-SHA256 in counter mode ([`Lottery`]), each index drawn without
//! bias (Lemire's multiply-and-reject). So every member of the pre-queue is equally likely to
//! get every rank, and nobody can tell an order from the outside.

use super::Room;
use crate::event::Lottery;
use crate::util::random;

/// Places the start's shuffle settles per decision. A swap costs about a microsecond (two
/// hash chains, the Fenwick and sight trees), so 64 keep a decision in tens of microseconds,
/// as [`super::EXPIRE_STEP`] does; a pre-queue of 100,000 is drawn in about 1,600 decisions.
pub const SHUFFLE_STEP: u64 = 64;

/// An event in force for this decision, as the room needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventNow {
    /// Names the event (a hash of its name and start): a new id is a new pre-queue.
    pub id: u64,
    /// The start has passed (otherwise the pre-queue is open).
    pub started: bool,
    /// Draw the pre-queue's order at the start (`shuffle=on`); off: arrival order.
    pub shuffle: bool,
}

/// Where an event's pre-queue stands in this room (metrics and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrequeueState {
    pub id: u64,
    /// Queue numbers the pre-queue took (`to` is 0 before the start).
    pub from: u64,
    pub to: u64,
    /// The places below this one are in their final order.
    pub drawn_to: u64,
}

impl Room<'_> {
    /// Before a decision while an event is in force: notes the pre-queue's opening and start,
    /// and moves the start's shuffle on by [`SHUFFLE_STEP`] places.
    pub fn event_step(&mut self, ev: EventNow) {
        let h = &mut *self.hdr;
        if h.ev_id != ev.id {
            // The first decision of this event here: its pre-queue starts at the tail (those
            // in line before it opened stay ahead). Opened after the start (nobody came during
            // the pre-queue, or a room that restarted): nothing to draw.
            h.ev_id = ev.id;
            h.ev_from = h.tail;
            h.ev_to = if ev.started { h.tail } else { 0 };
            h.ev_next = h.ev_to;
            h.ev_draws = 0;
        }
        if !ev.started {
            return;
        }
        if h.ev_to == 0 {
            // The start: the pre-queue is the places taken since it opened. Places below the
            // head are absent (and may since be reused by a later turn of the ring): not drawn.
            h.ev_to = h.tail;
            h.ev_from = h.ev_from.max(h.low);
            h.ev_next = if ev.shuffle { h.ev_from } else { h.ev_to };
            h.ev_draws = 0;
            if random::fill(&mut h.ev_seed).is_err() {
                // No randomness from the system: the order stays the arrival order.
                h.ev_next = h.ev_to;
            }
        }
        self.shuffle_some();
    }

    /// Before a decision while no event is in force: a start's shuffle that its event's end
    /// or cancellation cut short goes on, so every place of the pre-queue is drawn (and may
    /// be let in).
    pub fn event_settle(&mut self) {
        self.shuffle_some();
    }

    /// Whether the place `qnum` may be let in: not one the start's shuffle has yet to reach.
    pub(super) fn drawn(&self, qnum: u64) -> bool {
        let h = &*self.hdr;
        !(qnum >= h.ev_next && qnum < h.ev_to)
    }

    pub fn prequeue_state(&self) -> PrequeueState {
        let h = &*self.hdr;
        PrequeueState {
            id: h.ev_id,
            from: h.ev_from,
            to: h.ev_to,
            drawn_to: h.ev_next,
        }
    }

    fn shuffle_some(&mut self) {
        let (next, to) = (self.hdr.ev_next, self.hdr.ev_to);
        if next >= to {
            return;
        }
        let lottery = Lottery::new(&self.hdr.ev_seed);
        let mut draws = self.hdr.ev_draws;
        let mut k = next;
        while k < to && k - next < SHUFFLE_STEP {
            let j = k + below(to - k, || {
                draws += 1;
                lottery.ticket(draws)
            });
            self.swap_places((self.ring_index(k), k), (self.ring_index(j), j));
            k += 1;
        }
        let h = &mut *self.hdr;
        h.ev_next = k;
        h.ev_draws = draws;
        // A present place may have moved below `low` (its lowest bound on the head).
        h.low = h.low.min(next);
    }
}

/// A uniform number below `n` (n > 0) from a stream of uniform u64s, without bias (Lemire:
/// the high half of `x * n`, rejecting the few `x` that would favour low numbers; with a
/// pre-queue far below 2^64 a rejection is about as likely as guessing the seed, so after a
/// few the number is taken as it is rather than loop on).
fn below(n: u64, mut next: impl FnMut() -> u64) -> u64 {
    let threshold = n.wrapping_neg() % n;
    let mut m = u128::from(next()) * u128::from(n);
    for _ in 0..4 {
        if (m as u64) >= threshold {
            break;
        }
        m = u128::from(next()) * u128::from(n);
    }
    (m >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::below;

    #[test]
    fn below_stays_below() {
        let mut x = 0u64;
        for n in [1u64, 2, 3, 7, 1000, u64::MAX] {
            for _ in 0..100 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                assert!(below(n, || x) < n);
            }
        }
    }
}
