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

/// The header's part ([`super::layout`]): the arrivals of the places taken here that the
/// picture cannot show (taken since its report), sorted, the first [`FRESH_CAP`] of them.
#[repr(C)]
pub(super) struct Fresh {
    len: u64,
    arrivals: [u64; FRESH_CAP],
}

impl Fresh {
    /// The kept arrivals, sorted.
    fn arrivals(&self) -> &[u64] {
        let n = (self.len as usize).min(FRESH_CAP);
        self.arrivals.get(..n).unwrap_or_default()
    }

    /// A place taken here at `arrival` (it waits: the picture does not hold it).
    pub(super) fn took(&mut self, arrival: u64) {
        let n = self.arrivals().len();
        let at = self.arrivals().partition_point(|&a| a <= arrival);
        if n == FRESH_CAP {
            return;
        }
        self.arrivals.copy_within(at..n, at + 1);
        if let Some(slot) = self.arrivals.get_mut(at) {
            *slot = arrival;
            self.len = (n + 1) as u64;
        }
    }

    /// A newcomer let in (or gone): it is no longer ahead of anyone.
    pub(super) fn left(&mut self, arrival: u64) {
        let n = self.arrivals().len();
        let at = self.arrivals().partition_point(|&a| a < arrival);
        if self.arrivals().get(at) == Some(&arrival) {
            self.arrivals.copy_within(at + 1..n, at);
            self.len = (n - 1) as u64;
        }
    }

    /// How many of the newcomers kept took their place before `arrival`.
    pub(super) fn ahead(&self, arrival: u64) -> u64 {
        self.arrivals().partition_point(|&a| a < arrival) as u64
    }

    /// A new picture, whose line ends at `tail` (0: it shows nobody): the newcomers it shows
    /// leave the table, those who came after its tail stay.
    pub(super) fn after(&mut self, tail: u64) {
        let n = self.arrivals().len();
        let shown = self.arrivals().partition_point(|&a| a <= tail);
        self.arrivals.copy_within(shown..n, 0);
        self.len = (n - shown) as u64;
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
        let kept = self.hdr.fresh.arrivals().len() as u64;
        let position = self.fresh_ahead(arrival) + 1;
        (position, kept.max(position))
    }
}
