//! The model's line: a Fenwick tree of waiters per millisecond of arrival (within the model's
//! horizon), so that a rank's arrival is an order statistic in O(log n), as `ZRANGE` by rank is
//! in Redis; the cursor (share.rs) and the picture's samples (or the whole line, while it is short) read
//! from it.

use super::FleetModel;
use crate::fleet::{Sample, EXACT_LINE, MAX_SAMPLES};
use crate::util::fenwick;

// These are the script's too (its preamble, `FLEET_SCRIPT` in script.rs): written here only.

/// The ranks at the head of the line sampled one by one.
pub(in crate::fleet) const FIRST_RANKS: u64 = 32;
/// The cursor's band: up to this many times the waiters the free places take.
pub(in crate::fleet) const BAND: u64 = 2;
/// Samples of a line too long to come whole, at most (and its last waiter).
pub(in crate::fleet) const SAMPLES: u64 = 120;
/// Samples spaced evenly over the line past the head, at most (as many as the tail needs).
pub(in crate::fleet) const EVEN_SAMPLES: u64 = 64;
/// Past the first ranks, samples are at most their rank over this apart.
pub(in crate::fleet) const GROWTH: u64 = 4;

impl FleetModel {
    pub(super) fn slot(&self, arrival: u64) -> usize {
        (arrival.saturating_sub(self.base_ms) as usize).min(self.line.len() - 1)
    }

    pub(super) fn leave_line(&mut self, sid: u64) {
        self.go_away(sid);
        self.away.remove(sid);
        if let Some(a) = self.arrival.remove(&sid) {
            let ix = self.slot(a);
            fenwick::add(&mut self.line, ix, -1);
            self.queue_len -= 1;
        }
    }

    /// `ZADD arrival GT`: a new waiter joins the line; a known one only moves later.
    pub(super) fn join_line(&mut self, sid: u64, arrival: u64) {
        match self.arrival.get(&sid).copied() {
            Some(old) if old >= arrival => {}
            Some(old) => {
                let (from, to) = (self.slot(old), self.slot(arrival));
                fenwick::add(&mut self.line, from, -1);
                fenwick::add(&mut self.line, to, 1);
                self.arrival.insert(sid, arrival);
            }
            None => {
                let ix = self.slot(arrival);
                fenwick::add(&mut self.line, ix, 1);
                self.arrival.insert(sid, arrival);
                self.queue_len += 1;
            }
        }
    }

    /// A present waiter is no longer counted present (`ZREM present`, `ZREM here`); its place
    /// stays in the line. True when it was present.
    pub(super) fn go_away(&mut self, sid: u64) -> bool {
        if !self.present.remove(sid) {
            return false;
        }
        if let Some(&a) = self.arrival.get(&sid) {
            let ix = self.slot(a);
            fenwick::add(&mut self.here, ix, -1);
            self.here_len -= 1;
        }
        true
    }

    /// A waiter in the line seen at `at`: present at its place (`ZADD present GT`, `ZADD
    /// here`, `ZREM away`), back if it was away.
    pub(super) fn be_here(&mut self, sid: u64, at: u64) {
        let Some(&a) = self.arrival.get(&sid) else {
            return;
        };
        let was_at = self.present.score.get(&sid).copied();
        self.go_away(sid);
        self.away.remove(sid);
        self.present.add(sid, was_at.map_or(at, |w| w.max(at)));
        let ix = self.slot(a);
        fenwick::add(&mut self.here, ix, 1);
        self.here_len += 1;
    }

    /// The arrival of the present waiter at 0-based `rank` among the present ones.
    pub(super) fn here_at_rank(&self, rank: u64) -> Option<u64> {
        let ix = fenwick::find(&self.here, rank + 1)?;
        Some(self.base_ms + ix as u64)
    }

    /// The arrival of the waiter at 0-based `rank` in the line.
    pub(super) fn at_rank(&self, rank: u64) -> Option<u64> {
        let ix = fenwick::find(&self.line, rank + 1)?;
        Some(self.base_ms + ix as u64)
    }

    /// Samples of the line: every rank at the head, then spaced a quarter of their rank apart
    /// while the samples left can still reach the tail at the even spacing, then evenly.
    pub(super) fn samples(&self, queue_len: u64) -> Vec<Sample> {
        if queue_len > 0 && queue_len <= EXACT_LINE as u64 {
            return self.whole_line();
        }
        let mut samples = Vec::new();
        let spread = queue_len
            .saturating_sub(FIRST_RANKS)
            .div_ceil(EVEN_SAMPLES)
            .max(1);
        let (mut rank, mut step) = (0u64, 1u64);
        for i in 1..=SAMPLES {
            if rank >= queue_len {
                break;
            }
            let Some(a) = self.at_rank(rank) else { break };
            samples.push(Sample {
                rank,
                arrival: a,
                sid: 0,
            });
            if rank + 1 >= FIRST_RANKS {
                let left = SAMPLES - i;
                let rest = queue_len - 1 - rank;
                step = if left > rest.div_ceil(spread) {
                    (rank / GROWTH).min(spread).max(1)
                } else {
                    spread.max(rest.div_ceil(left.max(1)))
                };
            }
            rank += step;
        }
        if queue_len > 0 && queue_len - 1 > rank.saturating_sub(step) {
            if let Some(a) = self.at_rank(queue_len - 1) {
                samples.push(Sample {
                    rank: queue_len - 1,
                    arrival: a,
                    sid: 0,
                });
            }
        }
        samples.truncate(MAX_SAMPLES);
        samples
    }

    /// A line short enough to come whole: every waiter, in the line's order (by arrival, then
    /// as Redis orders the members of one score).
    pub(super) fn whole_line(&self) -> Vec<Sample> {
        let mut line: Vec<Sample> = self
            .arrival
            .iter()
            .map(|(&sid, &arrival)| Sample {
                rank: 0,
                arrival,
                sid,
            })
            .collect();
        line.sort_unstable_by(|a, b| {
            if a.before(b.arrival, b.sid) {
                core::cmp::Ordering::Less
            } else if b.before(a.arrival, a.sid) {
                core::cmp::Ordering::Greater
            } else {
                core::cmp::Ordering::Equal
            }
        });
        for (rank, s) in line.iter_mut().enumerate() {
            s.rank = rank as u64;
        }
        line
    }
}
