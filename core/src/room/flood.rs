//! Flood control: one rate bucket (GCRA) per client address, by a hash of its key, in a
//! set-associative table of the room's block, so one address cannot take places faster than
//! its rate ([S15]).

use super::layout::FloodEntry;
use super::layout::FLOOD_WAYS;

use super::rules::{Limits, Mode};
use super::Room;
use crate::util::hash::{mix64, set_of};

/// The flood-control key of a client (its address, or the configured `flood_key`) as the
/// number the room's table keys on, mixed with a per-zone `seed` (the same in every worker)
/// so that nobody can aim addresses at one set of the table. Never 0.
pub fn flood_hash(seed: u64, key: &[u8]) -> u64 {
    let mut h = seed ^ 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // A final mix so that keys differing in their last bytes spread over the sets too.
    mix64(h).max(1)
}

impl<'m> Room<'m> {
    /// Flood control on its own (the Redis store decides places in Redis, after this node's
    /// check): pays for one place from `key`'s budget; Err: ms until it may take one again.
    pub fn flood_check(&mut self, key: u64, now: u64, limits: &Limits) -> Result<(), u64> {
        let r = self.flood_take(Some(key), now, limits);
        if r.is_err() {
            self.hdr.counters.throttled += 1;
        }
        r
    }

    /// A first contact: counted, and the mode in force returned (one lock for both).
    pub fn arrival(&mut self, limits: &Limits) -> Mode {
        let mode = self.mode(limits);
        if !matches!(mode, Mode::Reject | Mode::Passthrough) {
            self.hdr.counters.arrivals += 1;
        }
        mode
    }

    /// Pays for one place from the budget of address `key` (when there is a key and a flood
    /// limit). Err: how long until the address may take one again (ms).
    pub(super) fn flood_take(
        &mut self,
        key: Option<u64>,
        now: u64,
        limits: &Limits,
    ) -> Result<(), u64> {
        let (Some(key), Some(rate)) = (key, limits.flood) else {
            return Ok(());
        };
        let key = key.max(1);
        let now_us = now.saturating_mul(1000);
        let ways = set_of(self.flood, key, FLOOD_WAYS);
        // This address's bucket, else the bucket closest to full (a full bucket is as good as
        // none, so it can be reused without giving anyone more than their budget).
        let i = match ways.iter().position(|e| e.key == key) {
            Some(i) => i,
            None => {
                let (i, _) = ways
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, e)| if e.key == 0 { 0 } else { e.tat })
                    .unwrap_or((0, &ways[0]));
                ways[i] = FloodEntry { key, tat: 0 };
                i
            }
        };
        match rate.take(ways[i].tat, now_us) {
            Ok(tat) => {
                ways[i].tat = tat;
                Ok(())
            }
            Err(wait_us) => Err(wait_us.div_ceil(1000)),
        }
    }
}
