//! The model's held places (the script's `still_for`, `span_of`, `pending`): each grant holds
//! places among the last of the interval to free, counted from the last session to end by the
//! interval's end (`hz`), and the pool keeps those that free first.

use super::{FleetModel, Node};

impl FleetModel {
    /// The places of this interval's grants still held for a session's end (the script's
    /// `still_for`): each grant holds places counted from the last session to end by `hz`, so
    /// with `ending` sessions still to end by then, those of its places below `ending` wait.
    pub(super) fn still_held(&self, now: u64) -> u64 {
        self.still_of(self.ending_by(now, self.hz), None)
    }

    /// [`FleetModel::still_held`] with `ending` sessions to end by `hz`, but `except`'s.
    pub(super) fn still_of(&self, ending: u64, except: Option<u64>) -> u64 {
        self.held_now(except)
            .map(|n| ending.saturating_sub(n.held_off).min(n.held))
            .sum()
    }

    /// Where a new grant's held places begin, counted from the last session to end by `hz`:
    /// past every other grant's (the script's `span_of`).
    pub(super) fn span_of(&self, except: Option<u64>) -> u64 {
        self.held_now(except)
            .map(|n| n.held_off + n.held)
            .max()
            .unwrap_or(0)
    }

    /// The nodes (but `except`) whose grant holds places for this interval's end.
    fn held_now(&self, except: Option<u64>) -> impl Iterator<Item = &Node> {
        let hz = self.hz;
        self.nodes
            .iter()
            .filter(move |(&id, n)| Some(id) != except && n.held > 0 && n.held_hz == hz && hz != 0)
            .map(|(_, n)| n)
    }

    /// Sessions whose window ends by `hz`, as seen at `now`.
    pub(super) fn ending_by(&self, now: u64, hz: u64) -> u64 {
        let aw = self.cfg.active_window_ms;
        self.active.count(self.cut(now, aw), self.cut(hz, aw))
    }

    /// The sessions that grants of an earlier `hz` may still wait for (the script's
    /// `pending`): all that end by the latest such hz, as they could be any of them.
    pub(super) fn pending(&self, now: u64, except: Option<u64>) -> u64 {
        let latest = self
            .nodes
            .iter()
            .filter(|(&id, n)| {
                Some(id) != except && n.held > 0 && n.held_hz != self.hz && n.held_hz > now
            })
            .map(|(_, n)| n.held_hz)
            .max();
        latest.map_or(0, |hz| self.ending_by(now, hz))
    }
}
