//! Flood control on a synced node (`flood=` with `sync=`): the fleet's budget settled in the
//! background sync, never on the request path.
//!
//! - A client taking its place pays from the node's own budget (the room's flood table, as on
//!   one node) and is counted here, by its client key: places taken since the key was last
//!   reported ([`FleetNode::flood_took`]).
//! - A sync reports the keys that took more than [`FLOOD_ALLOWANCE`] places (at most
//!   [`FLOOD_REPORT_CAP`], those with the most places first; the rest wait for the next sync).
//!   The script charges the fleet's bucket of each with its places (the GCRA of
//!   `room::gcra::Rate`, one key per client key under the room's hash tag) and answers every
//!   key over its budget it knows of (at most [`FLOOD_ANSWER_CAP`]), with the time until it may
//!   take a place again.
//! - The node keeps those answers ([`FleetNode::flood_answers`]) and refuses the keys' new places
//!   until then ([`FleetNode::flood_over`]), whichever node they were taken on.
//!
//! Both tables are set-associative, a few kilobytes beside the batches, bounded whatever the
//! traffic. A key counted here but evicted before it took more than the allowance loses those
//! places (never charged): the entry with the fewest places in its set goes first, so a key
//! taking many places stays. A key whose refusal is evicted takes places again until the next
//! sync, which answers it again while it is over.

use super::{FleetNode, FloodOver, FloodPlaces};
use super::{FLOOD_ALLOWANCE, FLOOD_ANSWER_CAP, FLOOD_REPORT_CAP};

use crate::util::hash::set_of;

/// Entries per set of both tables.
pub(super) const WAYS: usize = 8;
/// The places table's length at most, and the refusals table's.
const TAKEN_MAX: usize = 1024;
const OVER_MAX: usize = 256;

/// A client key's places since its last report (key 0: an empty entry).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Taken {
    key: u64,
    places: u64,
}

/// A client key over the fleet's budget: refused new places until `until` (the node's clock).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Over {
    key: u64,
    until: u64,
}

/// The two tables' lengths for a block of `batch` report entries: whole sets, at least one,
/// at most one entry per batch entry (a quarter for the refusals), [`TAKEN_MAX`] and
/// [`OVER_MAX`].
pub(super) fn table_lens(batch: usize) -> (usize, usize) {
    let sets = |n: usize, max: usize| (n.min(max) / WAYS * WAYS).max(WAYS);
    (sets(batch, TAKEN_MAX), sets(batch / 4, OVER_MAX))
}

impl<'m> FleetNode<'m> {
    /// Whether the fleet said client key `key` is over its flood budget: the ms until it may
    /// take a place again (None: it may now).
    pub fn flood_over(&mut self, key: u64, now: u64) -> Option<u64> {
        let key = key.max(1);
        let set = set_of(self.flood_over, key, WAYS);
        let e = set.iter_mut().find(|e| e.key == key)?;
        if e.until > now {
            return Some(e.until - now);
        }
        *e = Over::default();
        None
    }

    /// A place taken here by client key `key` (paid from the node's own budget): counted for
    /// the fleet's.
    pub fn flood_took(&mut self, key: u64) {
        self.flood_count(key, 1);
    }

    fn flood_count(&mut self, key: u64, places: u64) {
        let key = key.max(1);
        let set = set_of(self.flood_taken, key, WAYS);
        let slot = match set.iter().position(|e| e.key == key) {
            Some(i) => set.get_mut(i),
            // A free entry, else the one with the fewest places (its places are lost: never
            // reported, so never charged).
            None => set
                .iter_mut()
                .min_by_key(|e| if e.key == 0 { 0 } else { e.places })
                .map(|e| {
                    *e = Taken { key, places: 0 };
                    e
                }),
        };
        if let Some(e) = slot {
            e.places = e.places.saturating_add(places);
        }
    }

    /// The keys to report at a sync: those that took more than [`FLOOD_ALLOWANCE`] places,
    /// the most first, at most [`FLOOD_REPORT_CAP`]; taken out of the table (the others stay,
    /// to be reported when they take more).
    pub(super) fn take_flood_report(&mut self) -> Vec<FloodPlaces> {
        let mut due: Vec<(u64, usize)> = self
            .flood_taken
            .iter()
            .enumerate()
            .filter(|(_, e)| e.key != 0 && e.places > FLOOD_ALLOWANCE)
            .map(|(i, e)| (e.places, i))
            .collect();
        due.sort_unstable_by(|a, b| b.cmp(a));
        due.truncate(FLOOD_REPORT_CAP);
        due.iter()
            .filter_map(|&(_, i)| {
                let e = self.flood_taken.get_mut(i)?;
                let report = FloodPlaces {
                    key: e.key,
                    places: e.places,
                };
                *e = Taken::default();
                Some(report)
            })
            .collect()
    }

    /// A report whose sync failed: its keys' places are counted again (charged at a later
    /// sync).
    pub(super) fn give_back_flood(&mut self, flood: &[FloodPlaces]) {
        for p in flood {
            self.flood_count(p.key, p.places);
        }
    }

    /// The fleet's answer: these keys are over its budget, from `now` (the node's clock, when
    /// the answer came) for their `retry_ms`.
    pub(super) fn flood_answers(&mut self, over: &[FloodOver], now: u64) {
        for o in over.iter().take(FLOOD_ANSWER_CAP) {
            let key = o.key.max(1);
            let until = now.saturating_add(o.retry_ms);
            let set = set_of(self.flood_over, key, WAYS);
            let slot = match set.iter().position(|e| e.key == key) {
                Some(i) => set.get_mut(i),
                // A free or lapsed entry, else the one that lapses first.
                None => set
                    .iter_mut()
                    .min_by_key(|e| if e.until <= now { 0 } else { e.until }),
            };
            if let Some(e) = slot {
                *e = Over { key, until };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FleetNode, FloodOver, FloodPlaces};
    use super::*;

    /// A node block of `len` bytes (8-aligned).
    fn block(len: usize) -> Vec<u64> {
        vec![0; len / 8]
    }

    /// `n` keys of the first set of a table of `len` entries.
    fn first_set(len: usize, n: usize) -> Vec<u64> {
        let mut table = vec![0u8; len];
        (1u64..)
            .filter(|&k| {
                let at = set_of(&mut table, k, WAYS).as_ptr() as usize;
                at == table.as_ptr() as usize
            })
            .take(n)
            .collect()
    }

    fn node(mem: &mut [u64]) -> FleetNode<'_> {
        // SAFETY (test): a u64 buffer viewed as bytes.
        let bytes =
            unsafe { core::slice::from_raw_parts_mut(mem.as_mut_ptr().cast(), mem.len() * 8) };
        FleetNode::format(bytes, 7).unwrap()
    }

    #[test]
    fn tables_are_whole_sets_bounded_by_the_batch() {
        assert_eq!(table_lens(0), (8, 8));
        assert_eq!(table_lens(80), (80, 16));
        assert_eq!(table_lens(87), (80, 16));
        assert_eq!(table_lens(100_000), (TAKEN_MAX, OVER_MAX));
        // A block of the smallest size the zone gives (384 KiB) gets the largest tables, a
        // 160 KiB one small ones, and both attach again.
        for len in [160 << 10, 384 << 10] {
            let mut mem = block(len);
            let (t, o) = {
                let n = node(&mut mem);
                (n.flood_taken.len(), n.flood_over.len())
            };
            assert!(t >= WAYS && t % WAYS == 0 && o >= WAYS && o % WAYS == 0);
            if len == 384 << 10 {
                assert_eq!((t, o), (TAKEN_MAX, OVER_MAX));
            } else {
                assert!(t < TAKEN_MAX && o < OVER_MAX, "{t} {o}");
            }
            // SAFETY (test): as above.
            let bytes = unsafe { core::slice::from_raw_parts_mut(mem.as_mut_ptr().cast(), len) };
            let again = FleetNode::attach(bytes).unwrap();
            assert_eq!(again.flood_taken.len(), t);
        }
    }

    #[test]
    fn keys_within_the_allowance_are_not_reported_the_rest_most_first() {
        let mut mem = block(384 << 10);
        let mut n = node(&mut mem);
        // Key 1 takes one place (within the allowance), 2 takes two, 3 takes five.
        n.flood_took(1);
        for _ in 0..2 {
            n.flood_took(2);
        }
        for _ in 0..5 {
            n.flood_took(3);
        }
        let r = n.take_flood_report();
        assert_eq!(
            r,
            [
                FloodPlaces { key: 3, places: 5 },
                FloodPlaces { key: 2, places: 2 }
            ]
        );
        // Reported places are gone; key 1's place stays, and is reported with its next one.
        assert_eq!(n.take_flood_report(), []);
        n.flood_took(1);
        assert_eq!(n.take_flood_report(), [FloodPlaces { key: 1, places: 2 }]);
        // A failed sync gives its report back: counted again, with what came since.
        n.give_back_flood(&r);
        n.flood_took(2);
        assert_eq!(
            n.take_flood_report(),
            [
                FloodPlaces { key: 3, places: 5 },
                FloodPlaces { key: 2, places: 3 }
            ]
        );
    }

    #[test]
    fn a_report_carries_at_most_its_cap_the_rest_waits() {
        let mut mem = block(384 << 10);
        let mut n = node(&mut mem);
        let keys = FLOOD_REPORT_CAP as u64 + 10;
        for key in 1..=keys {
            // Key k takes k + 1 places: the larger keys first.
            for _ in 0..=key {
                n.flood_took(key);
            }
        }
        let first = n.take_flood_report();
        assert_eq!(first.len(), FLOOD_REPORT_CAP);
        assert_eq!(first[0].key, keys);
        assert!(first.windows(2).all(|w| w[0].places >= w[1].places));
        let second = n.take_flood_report();
        assert_eq!(second.len(), 10);
        assert_eq!(second.iter().map(|p| p.key).max(), Some(10));
    }

    #[test]
    fn a_full_set_evicts_the_key_with_the_fewest_places() {
        let mut mem = block(160 << 10);
        let mut n = node(&mut mem);
        // Keys of one set (the table's first): a heavy one, then more one-place keys than
        // the set holds.
        let same_set = first_set(n.flood_taken.len(), 3 * WAYS);
        let heavy = same_set[0];
        for _ in 0..10 {
            n.flood_took(heavy);
        }
        for &k in &same_set[1..] {
            n.flood_took(k);
        }
        // The heavy key is still there, with all its places.
        assert_eq!(
            n.take_flood_report(),
            [FloodPlaces {
                key: heavy,
                places: 10
            }]
        );
    }

    #[test]
    fn refusals_hold_until_their_time_and_are_renewed_by_each_answer() {
        let mut mem = block(384 << 10);
        let mut n = node(&mut mem);
        assert_eq!(n.flood_over(9, 1000), None);
        n.flood_answers(
            &[
                FloodOver {
                    key: 9,
                    retry_ms: 500,
                },
                FloodOver {
                    key: 10,
                    retry_ms: 60_000,
                },
            ],
            1000,
        );
        assert_eq!(n.flood_over(9, 1000), Some(500));
        assert_eq!(n.flood_over(9, 1499), Some(1));
        assert_eq!(n.flood_over(9, 1500), None);
        assert_eq!(n.flood_over(10, 2000), Some(59_000));
        // A later answer sets the key's time anew.
        n.flood_answers(
            &[FloodOver {
                key: 10,
                retry_ms: 100,
            }],
            3000,
        );
        assert_eq!(n.flood_over(10, 3000), Some(100));
        assert_eq!(n.flood_over(10, 3100), None);
    }

    #[test]
    fn a_full_refusal_set_drops_the_one_that_lapses_first() {
        let mut mem = block(160 << 10);
        let mut n = node(&mut mem);
        let keys = first_set(n.flood_over.len(), WAYS + 1);
        // WAYS keys refused for 10 s and more, one of them for 1 s; then one more.
        let answers: Vec<FloodOver> = keys[..WAYS]
            .iter()
            .enumerate()
            .map(|(i, &key)| FloodOver {
                key,
                retry_ms: if i == 3 { 1000 } else { 10_000 + i as u64 },
            })
            .collect();
        n.flood_answers(&answers, 0);
        n.flood_answers(
            &[FloodOver {
                key: keys[WAYS],
                retry_ms: 5000,
            }],
            0,
        );
        assert_eq!(n.flood_over(keys[3], 0), None);
        assert_eq!(n.flood_over(keys[WAYS], 0), Some(5000));
        for (i, &k) in keys[..WAYS].iter().enumerate() {
            if i != 3 {
                assert!(n.flood_over(k, 0).is_some(), "{i}");
            }
        }
    }
}
