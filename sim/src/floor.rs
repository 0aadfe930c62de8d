//! The floor under a synced room's positions: what a node would tell if it knew, at each sync
//! tick, the fleet's line exactly (every place held, by the module's rule), and nothing between
//! two ticks. It is no design (a node learns the line through reports that lag, and counts it
//! by buckets); it bounds every design that hears from the fleet once an interval and makes no
//! Redis call per poll, as a `sync=` room does. Two rows:
//! - the line as it stood at the last tick, and the newcomers since who came before the waiter;
//! - that line, moved on by how many ahead of the waiter will have let go of their place by the
//!   next tick (let in, or lapsed), known in advance and spread evenly over the interval: only
//!   the order of the interval's events within it left to chance.

use smart_limit_core::util::fenwick;

use crate::stats::Positions;

#[derive(Debug, Default, Clone)]
pub struct Floor {
    /// The places held at the last tick (a copy of the engine's Fenwick tree).
    at_tick: Vec<u32>,
    /// The first client (by arrival) who had not arrived at the last tick: those from it on
    /// who arrived before a waiter are ahead of it too (newcomers the floor knows of).
    first_new: usize,
    tick_ms: u64,
    interval_ms: u64,
    /// This interval's samples: (client index, position at the tick, share of the interval
    /// gone in millionths, true position when answered).
    pending: Vec<(usize, u64, u64, u64)>,
    pub at_last_tick: Positions,
    pub knowing_the_interval: Positions,
}

impl Floor {
    pub fn new(interval_ms: u64) -> Self {
        Floor {
            interval_ms: interval_ms.max(1),
            ..Floor::default()
        }
    }

    /// A tick: the interval's samples are settled against the places let go since the last
    /// one, and the line is taken again.
    pub fn tick(&mut self, held: &[u32], first_new: usize, now: u64) {
        for (c, was, gone_ppm, truth) in self.pending.drain(..) {
            let let_go = (was - 1).saturating_sub(fenwick::prefix(held, c));
            let moved = let_go * gone_ppm / 1_000_000;
            self.knowing_the_interval
                .add(was.saturating_sub(moved).max(1), truth);
        }
        self.at_tick.clear();
        self.at_tick.extend_from_slice(held);
        self.first_new = first_new;
        self.tick_ms = now;
    }

    /// A waiting answer to client `c` at `now`, whose true position is `truth`.
    pub fn sample(&mut self, c: usize, now: u64, truth: u64) {
        if self.at_tick.is_empty() {
            return;
        }
        let was = fenwick::prefix(&self.at_tick, c) + c.saturating_sub(self.first_new) as u64 + 1;
        self.at_last_tick.add(was, truth);
        let gone = now.saturating_sub(self.tick_ms).min(self.interval_ms);
        self.pending
            .push((c, was, gone * 1_000_000 / self.interval_ms, truth));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_moves_by_the_interval_s_let_gos_spread_evenly() {
        let mut held = vec![0u32; 10];
        for c in 0..10 {
            fenwick::add(&mut held, c, 1);
        }
        let mut f = Floor::new(1000);
        f.sample(8, 0, 9); // before any tick: nothing to answer from
        f.tick(&held, 10, 1000);
        // Half the interval gone, client 8 (true position 9 then).
        f.sample(8, 1500, 9);
        assert_eq!(f.at_last_tick.pairs, vec![(9, 0)]);
        // Four ahead of it let go before the next tick: half of them counted at 1.5 s.
        for c in 0..4 {
            fenwick::add(&mut held, c, -1);
        }
        f.tick(&held, 9, 2000);
        assert_eq!(f.knowing_the_interval.pairs, vec![(9, -2)]);
        // The next interval's answer starts from the line as it stood at 2 s; client 9 came
        // since, and client 8 before it.
        f.sample(8, 2000, 5);
        assert_eq!(f.at_last_tick.pairs.last(), Some(&(5, 0)));
        fenwick::add(&mut held, 9, 1);
        f.sample(9, 2100, 6);
        assert_eq!(f.at_last_tick.pairs.last(), Some(&(6, 0)));
    }
}
