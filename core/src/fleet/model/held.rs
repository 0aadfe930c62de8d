//! The model's held places (the script's `still_held`, `held_span`, `awaited`): each grant
//! holds places among the last of the interval to free, counted from the last session to end
//! by the interval's end (the allocation's `interval_end`), and the pool keeps those that free
//! first.

use super::{FleetModel, Node};

impl FleetModel {
    /// The places of this interval's grants still held for a session's end, as seen at `now`
    /// (the draw's).
    pub(super) fn still_held_now(&self, now: u64) -> u64 {
        let interval_end = self.allocation.interval_end;
        self.still_held(self.ending_by(now, interval_end), None)
    }

    /// The places of this interval's grants but `except`'s still held for a session's end (the
    /// script's `still_held`): each grant holds places counted from the last session to end by
    /// the interval's end, so with `ending` sessions still to end by then, those of its places
    /// below `ending` wait.
    pub(super) fn still_held(&self, ending: u64, except: Option<u64>) -> u64 {
        self.holds_now(except)
            .map(|n| ending.saturating_sub(n.held_from).min(n.held))
            .sum()
    }

    /// Where a new grant's held places begin, counted from the last session to end by the
    /// interval's end: past every other grant's (the script's `held_span`).
    pub(super) fn held_span(&self, except: Option<u64>) -> u64 {
        self.holds_now(except)
            .map(|n| n.held_from + n.held)
            .max()
            .unwrap_or(0)
    }

    /// The nodes (but `except`) whose grant holds places for this interval's end (the
    /// script's `holds_now`).
    fn holds_now(&self, except: Option<u64>) -> impl Iterator<Item = &Node> {
        let interval_end = self.allocation.interval_end;
        self.nodes
            .iter()
            .filter(move |(&id, n)| {
                Some(id) != except && n.held > 0 && n.held_end == interval_end && interval_end != 0
            })
            .map(|(_, n)| n)
    }

    /// Sessions whose window ends by `t`, as seen at `now`.
    pub(super) fn ending_by(&self, now: u64, t: u64) -> u64 {
        let aw = self.cfg.active_window_ms;
        self.active.count(self.cut(now, aw), self.cut(t, aw))
    }

    /// The sessions that grants of an earlier interval end may still wait for (the script's
    /// `awaited`): all that end by the latest such end, as they could be any of them.
    pub(super) fn awaited(&self, now: u64, except: Option<u64>) -> u64 {
        let interval_end = self.allocation.interval_end;
        let latest = self
            .nodes
            .iter()
            .filter(|(&id, n)| {
                Some(id) != except && n.held > 0 && n.held_end != interval_end && n.held_end > now
            })
            .map(|(_, n)| n.held_end)
            .max();
        latest.map_or(0, |end| self.ending_by(now, end))
    }
}
