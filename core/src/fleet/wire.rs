//! Where each value sits in a synced room's script call and in its replies: the one table
//! both sides' positions come from.
//!
//! A call's values go as Redis arguments, a reply's as an array, both by position (a named
//! format, JSON through Redis's cjson, cost a sync call 120-180 µs more inside Redis, +12-18 %
//! of a typical call at 100,000 waiting: docs/benchmarks.md, "A named message format"). So
//! the positions are named here, once: the node writes each argument at its name's place and
//! reads each reply field by its name, and the script gets the same names in its preamble
//! (`ARGV[A_NOW]`, `picture[P_QUEUE_LEN]`). Positions are Lua's, from 1.

/// A call's arguments (`ARGV`). Both calls share the first [`HEAD`]; a draw reuses the
/// sync's 15th and 16th places for its own two.
pub mod arg {
    /// "sync" or "draw".
    pub const OP: usize = 1;
    pub const NODE: usize = 2;
    pub const WINDOW: usize = 3;
    pub const NOW: usize = 4;
    pub const MAX_ACTIVE: usize = 5;
    pub const ACTIVE_WINDOW: usize = 6;
    pub const PRESENCE: usize = 7;
    pub const STALE: usize = 8;
    pub const KEY_TTL: usize = 9;
    pub const KEEP: usize = 10;
    pub const INTERVAL: usize = 11;
    pub const GENERATION: usize = 12;
    pub const SEQ: usize = 13;
    pub const MAX_LINE: usize = 14;
    /// The arguments every call has.
    #[cfg(test)]
    pub const HEAD: usize = 14;

    // A sync's.
    pub const POLLS: usize = 15;
    pub const ACTIVE: usize = 16;
    pub const ADMITTED: usize = 17;
    pub const WAITERS: usize = 18;
    pub const FLOOD_INTERVAL: usize = 19;
    pub const FLOOD_BURST: usize = 20;
    pub const FLOOD_PLACES: usize = 21;
    pub const ASKED: usize = 22;
    pub const CHALLENGED: usize = 23;
    pub const SPENT: usize = 24;
    pub const REVOKED: usize = 25;
    /// How long an absent waiter's place is kept (ms, [`super::super::FleetConfig::kept_ms`]).
    pub const KEPT: usize = 26;
    /// A sync's arguments.
    pub const SYNC: usize = 26;

    // A draw's.
    pub const WANT: usize = 15;
    pub const OLDEST: usize = 16;
    /// A draw's arguments.
    pub const DRAW: usize = 16;
}

/// A sync's reply: the picture. The fields, then (when the line did not come whole) the
/// samples, pairs of integers from [`SAMPLES_FROM`](picture::SAMPLES_FROM) on.
pub mod picture {
    pub const FLEET_ACTIVE: usize = 1;
    pub const QUEUE_LEN: usize = 2;
    /// -1: everyone.
    pub const CURSOR: usize = 3;
    pub const QUOTA: usize = 4;
    pub const NODES: usize = 5;
    pub const WINDOW: usize = 6;
    pub const FREE: usize = 7;
    pub const EXPIRING: usize = 8;
    pub const LEAVING: usize = 9;
    pub const FULL: usize = 10;
    pub const PRESSURE: usize = 11;
    /// The cursor without its band: the arrival of the last present waiter the free places
    /// rightly take (-1: everyone; 0: nobody).
    pub const RIGHTFUL: usize = 12;
    /// The nodes whose report of this window the picture holds, this one's included.
    pub const REPORTED: usize = 13;
    /// The integers above.
    pub const INTS: usize = 13;
    /// Arrays: spent proofs, flood answers, held places and their ends.
    pub const SPENT: usize = 14;
    pub const FLOOD: usize = 15;
    pub const ENDS: usize = 16;
    /// The whole line (a string; empty when the line is longer than `EXACT_LINE`).
    pub const LINE: usize = 17;
    pub const SAMPLES_FROM: usize = 18;
}

/// A draw's reply.
pub mod drawn {
    pub const GRANTED: usize = 1;
    pub const ACTIVE: usize = 2;
    /// The sequence of the node's last sync the script had run.
    pub const SEQ: usize = 3;
    pub const LEN: usize = 3;
}

pub use crate::redis::at_place as at;

/// A call's arguments, each written at its name's place; places not written go as "".
#[derive(Debug, Default)]
pub struct Args(Vec<Vec<u8>>);

impl Args {
    pub fn new(len: usize) -> Args {
        Args(vec![Vec::new(); len])
    }

    /// Writes `value` at Lua position `pos` (ignored past the call's length: the unit tests
    /// hold every name within it).
    pub fn set(&mut self, pos: usize, value: impl core::fmt::Display) -> &mut Args {
        use std::io::Write as _;
        if let Some(slot) = pos.checked_sub(1).and_then(|i| self.0.get_mut(i)) {
            slot.clear();
            let _ = write!(slot, "{value}");
        }
        self
    }

    pub fn into_vec(self) -> Vec<Vec<u8>> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each list's names are its places 1..=len, once each, so no value is left out or
    /// written over by another (a draw's two reuse the sync's 15th and 16th).
    #[test]
    fn every_place_has_one_name() {
        let head = [
            arg::OP,
            arg::NODE,
            arg::WINDOW,
            arg::NOW,
            arg::MAX_ACTIVE,
            arg::ACTIVE_WINDOW,
            arg::PRESENCE,
            arg::STALE,
            arg::KEY_TTL,
            arg::KEEP,
            arg::INTERVAL,
            arg::GENERATION,
            arg::SEQ,
            arg::MAX_LINE,
        ];
        let sync = [
            arg::POLLS,
            arg::ACTIVE,
            arg::ADMITTED,
            arg::WAITERS,
            arg::FLOOD_INTERVAL,
            arg::FLOOD_BURST,
            arg::FLOOD_PLACES,
            arg::ASKED,
            arg::CHALLENGED,
            arg::SPENT,
            arg::REVOKED,
            arg::KEPT,
        ];
        let pic = [
            picture::FLEET_ACTIVE,
            picture::QUEUE_LEN,
            picture::CURSOR,
            picture::QUOTA,
            picture::NODES,
            picture::WINDOW,
            picture::FREE,
            picture::EXPIRING,
            picture::LEAVING,
            picture::FULL,
            picture::PRESSURE,
            picture::RIGHTFUL,
            picture::REPORTED,
            picture::SPENT,
            picture::FLOOD,
            picture::ENDS,
            picture::LINE,
        ];
        let one_each = |names: Vec<usize>, len: usize| {
            let mut v = names.clone();
            v.sort_unstable();
            assert_eq!(v, (1..=len).collect::<Vec<_>>(), "{names:?}");
        };
        assert_eq!(head.len(), arg::HEAD);
        one_each([&head[..], &sync[..]].concat(), arg::SYNC);
        one_each([&head[..], &[arg::WANT, arg::OLDEST]].concat(), arg::DRAW);
        one_each(pic.to_vec(), picture::SAMPLES_FROM - 1);
        assert_eq!(picture::REPORTED, picture::INTS);
        one_each(vec![drawn::GRANTED, drawn::ACTIVE, drawn::SEQ], drawn::LEN);
    }

    #[test]
    fn args_go_at_their_places() {
        let mut a = Args::new(3);
        a.set(3, 7).set(1, "sync").set(4, 9).set(0, 1);
        assert_eq!(a.into_vec(), [b"sync".to_vec(), Vec::new(), b"7".to_vec()]);
        assert_eq!(at(&[10, 20], 1), Some(&10));
        assert_eq!(at(&[10, 20], 0), None);
        assert_eq!(at(&[10, 20], 3), None);
    }
}
