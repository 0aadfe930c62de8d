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

impl<'m> FleetNode<'m> {
    /// The kept arrivals, sorted.
    fn fresh(&self) -> &[u64] {
        let n = (self.hdr.fresh_len as usize).min(FRESH_CAP);
        self.hdr.fresh.get(..n).unwrap_or_default()
    }

    /// A place taken here at `arrival` (it waits: the picture does not hold it).
    pub(super) fn fresh_took(&mut self, arrival: u64) {
        let n = self.fresh().len();
        let at = self.fresh().partition_point(|&a| a <= arrival);
        let h = &mut *self.hdr;
        if n == FRESH_CAP {
            return;
        }
        h.fresh.copy_within(at..n, at + 1);
        if let Some(slot) = h.fresh.get_mut(at) {
            *slot = arrival;
            h.fresh_len = (n + 1) as u64;
        }
    }

    /// A newcomer let in (or gone): it is no longer ahead of anyone.
    pub(super) fn fresh_left(&mut self, arrival: u64) {
        let n = self.fresh().len();
        let at = self.fresh().partition_point(|&a| a < arrival);
        if self.fresh().get(at) == Some(&arrival) {
            let h = &mut *self.hdr;
            h.fresh.copy_within(at + 1..n, at);
            h.fresh_len = (n - 1) as u64;
        }
    }

    /// How many of this node's newcomers the picture cannot show took their place before
    /// `arrival`.
    pub(super) fn fresh_ahead(&self, arrival: u64) -> u64 {
        self.fresh().partition_point(|&a| a < arrival) as u64
    }

    /// A new picture, whose line ends at `tail` (0: it shows nobody): the newcomers it shows
    /// leave the table, those who came after its tail stay.
    pub(super) fn fresh_after(&mut self, tail: u64) {
        let n = self.fresh().len();
        let shown = self.fresh().partition_point(|&a| a <= tail);
        let h = &mut *self.hdr;
        h.fresh.copy_within(shown..n, 0);
        h.fresh_len = (n - shown) as u64;
    }

    /// A waiter's place in this node's own line while the node has never met the fleet (its
    /// sync failed, Redis away at its start): its 1-based position among the newcomers the
    /// node kept, and how many they are.
    pub fn place_alone(&self, arrival: u64) -> (u64, u64) {
        let kept = self.fresh().len() as u64;
        let position = self.fresh_ahead(arrival) + 1;
        (position, kept.max(position))
    }
}
