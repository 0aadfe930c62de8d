//! Newcomers the picture cannot show: the places taken on this node since the report that
//! built its picture. The picture's line ends at its tail; without this, every newcomer of an
//! interval was told the same position (the line's length plus one) until the next picture.
//! Here the node keeps their arrivals, sorted, and a newcomer is told the line's length plus
//! its rank among them: distinct positions on one node from its first picture on. Newcomers
//! of other nodes are not known until the next picture (an interval at most).
//!
//! Bounded: at most [`FRESH_CAP`] arrivals; an insert or a removal moves at most that many
//! words, and new places come in arrival order, so an insert is nearly always at the end.

use super::{FleetNode, FRESH_CAP};

/// Arrivals kept sorted, the first [`FRESH_CAP`] of them.
#[repr(C)]
pub(super) struct Arrivals {
    len: u64,
    at: [u64; FRESH_CAP],
}

impl Arrivals {
    /// The kept arrivals, sorted.
    fn all(&self) -> &[u64] {
        let n = (self.len as usize).min(FRESH_CAP);
        self.at.get(..n).unwrap_or_default()
    }

    /// `arrival` kept in its place (not when the table is full).
    fn insert(&mut self, arrival: u64) {
        let n = self.all().len();
        let at = self.all().partition_point(|&a| a <= arrival);
        if n == FRESH_CAP {
            return;
        }
        self.at.copy_within(at..n, at + 1);
        if let Some(slot) = self.at.get_mut(at) {
            *slot = arrival;
            self.len = (n + 1) as u64;
        }
    }

    /// `arrival` kept in its place, the oldest kept leaving a full table for it: for counts
    /// of the latest arrivals, which a table full of older ones would stop.
    fn push(&mut self, arrival: u64) {
        if self.all().len() == FRESH_CAP && self.all().first().is_some_and(|&a| a < arrival) {
            let oldest = self.all().first().copied().unwrap_or(0);
            self.drop_through(oldest);
        }
        self.insert(arrival);
    }

    /// One `arrival` out of the table, if kept.
    fn remove(&mut self, arrival: u64) {
        let n = self.all().len();
        let at = self.all().partition_point(|&a| a < arrival);
        if self.all().get(at) == Some(&arrival) {
            self.at.copy_within(at + 1..n, at);
            self.len = (n - 1) as u64;
        }
    }

    /// How many kept arrivals are before `arrival`.
    fn before(&self, arrival: u64) -> u64 {
        self.all().partition_point(|&a| a < arrival) as u64
    }

    /// The arrivals up to `through` (inclusive) out of the table.
    fn drop_through(&mut self, through: u64) {
        let n = self.all().len();
        let gone = self.all().partition_point(|&a| a <= through);
        self.at.copy_within(gone..n, 0);
        self.len = (n - gone) as u64;
    }
}

/// The header's part ([`super::layout`]): this node's waiting newcomers, by arrival.
#[repr(C)]
pub(super) struct Fresh {
    /// Those the picture cannot show (their places taken since its report).
    unshown: Arrivals,
    /// Those of the last three intervals, shown or not: this node's own pace and its part of
    /// the fleet's newcomers, which [`FleetNode::unseen_ahead`] goes by.
    recent: Arrivals,
    /// Every place taken here in the last three intervals, those let in at once too: how
    /// fast a crowd comes while free places still take it ([`FleetNode::filling_ahead`]).
    arrived: Arrivals,
}

impl Fresh {
    /// A place taken here at `arrival` (it waits: the picture does not hold it); the recent
    /// ones older than three intervals before it leave.
    pub(super) fn took(&mut self, arrival: u64, interval_ms: u64) {
        self.unshown.insert(arrival);
        let old = arrival.saturating_sub(interval_ms.saturating_mul(3));
        if old > 0 {
            self.recent.drop_through(old - 1);
            self.arrived.drop_through(old - 1);
        }
        self.recent.insert(arrival);
        self.arrived.push(arrival);
    }

    /// A newcomer let in (or gone): it is no longer ahead of anyone.
    pub(super) fn left(&mut self, arrival: u64) {
        self.unshown.remove(arrival);
        self.recent.remove(arrival);
    }

    /// How many of the newcomers the picture cannot show took their place before `arrival`.
    pub(super) fn ahead(&self, arrival: u64) -> u64 {
        self.unshown.before(arrival)
    }

    /// How many of those took their place from `from` to before `to`.
    pub(super) fn unshown_between(&self, from: u64, to: u64) -> u64 {
        self.unshown
            .before(to)
            .saturating_sub(self.unshown.before(from))
    }

    /// How many newcomers of the last three intervals still waiting took their place from
    /// `from` to before `to`, whether the picture shows them or not.
    pub(super) fn recent_between(&self, from: u64, to: u64) -> u64 {
        self.recent
            .before(to)
            .saturating_sub(self.recent.before(from))
    }

    /// How many places were taken here from `from` to before `to`, whether let in since or
    /// not (of the last three intervals).
    pub(super) fn arrived_between(&self, from: u64, to: u64) -> u64 {
        self.arrived
            .before(to)
            .saturating_sub(self.arrived.before(from))
    }

    /// How many newcomers the picture cannot show are kept.
    fn kept(&self) -> u64 {
        self.unshown.all().len() as u64
    }

    /// A new picture, whose line ends at `tail` (0: it shows nobody): the newcomers it shows
    /// leave the table, those who came after its tail stay.
    pub(super) fn after(&mut self, tail: u64) {
        self.unshown.drop_through(tail);
    }
}

impl<'m> FleetNode<'m> {
    /// How many of this node's newcomers the picture cannot show took their place before
    /// `arrival`.
    pub(super) fn fresh_ahead(&self, arrival: u64) -> u64 {
        self.hdr.fresh.ahead(arrival)
    }

    /// A waiter's place in this node's own line while the node has never met the fleet (its
    /// sync failed, Redis away at its start): its 1-based position among the newcomers the
    /// node kept, and how many they are.
    pub fn place_alone(&self, arrival: u64) -> (u64, u64) {
        let kept = self.hdr.fresh.kept();
        let position = self.fresh_ahead(arrival) + 1;
        (position, kept.max(position))
    }
}
