//! The places' last sight, as a tree over the ring: each node holds the latest and the
//! earliest last sight of the places under it. With it the line finds, in O(log n) whatever
//! the line holds, the first present place after a point (the head) and the first absent one
//! (to remove), so a place unseen for `presence` stops counting the moment it is due, before
//! the bounded tidy gets round to removing it ([S6], [S16], [S20]).
//!
//! Leaves are blocks of `SIGHT_BLOCK` ring slots (a leaf is computed from its slots, so the
//! tree costs 2 to 4 bytes per place); the tree is the classic array layout (root 1, children
//! 2v and 2v + 1, leaves from `leaves`), its leaf count a power of two; leaves past the ring
//! stay empty. The nodes live in the room's block (`layout`).

use super::layout::{sight_leaves, Sight, Slot, SIGHT_BLOCK as BLOCK};
use super::Room;

fn join(a: Sight, b: Sight) -> Sight {
    Sight {
        max: a.max.max(b.max),
        min: a.min.min(b.min),
    }
}

/// A place's key: its last sight plus one (so that 0 means no place), 0 for an empty slot.
pub(super) fn key(s: &Slot) -> u64 {
    if s.sid == 0 {
        0
    } else {
        s.last_seen.saturating_add(1)
    }
}

/// The line between present and absent places at `now`: a place is present while
/// `now - last_seen < presence`, that is while its key is above this.
pub(super) fn cut(now: u64, presence_ms: u64) -> u64 {
    now.saturating_add(1).saturating_sub(presence_ms)
}

/// The two lines a decision draws at `now` ([S27]): a place seen within `presence` is present
/// (it may be the head, the room waits for it); one seen within `keep` is kept (its arrival
/// holds: it counts in the positions behind it and the line's length, and takes its turn when
/// it comes back); an older one is gone, left for the tidy.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cuts {
    pub present: u64,
    pub kept: u64,
}

impl Cuts {
    pub(super) fn at(now: u64, limits: &crate::room::rules::Limits) -> Cuts {
        Cuts {
            present: cut(now, limits.presence_ms),
            kept: cut(now, limits.kept_ms()),
        }
    }
}

/// Whether the place in `s` is present (seen within `presence`) for threshold `thr`.
pub(super) fn is_present(s: &Slot, thr: u64) -> bool {
    key(s) > thr
}

/// Whether `s` holds a place that is due: unseen for `presence`, waiting to be removed.
pub(super) fn is_due(s: &Slot, thr: u64) -> bool {
    s.sid != 0 && key(s) <= thr
}

/// The first leaf at or after `start` whose node satisfies `pred`, if any: climb to the next
/// subtree on the right until one satisfies it, then descend to its leftmost such leaf. The
/// node values are exact (a node satisfies `pred` exactly when one of its children does), so
/// this is O(log n).
fn first_leaf(
    nodes: &[Sight],
    leaves: usize,
    start: usize,
    pred: impl Fn(Sight) -> bool,
) -> Option<usize> {
    if start >= leaves {
        return None;
    }
    let mut v = leaves + start;
    loop {
        if pred(*nodes.get(v)?) {
            while v < leaves {
                let left = 2 * v;
                v = if pred(*nodes.get(left)?) {
                    left
                } else {
                    left + 1
                };
            }
            return Some(v - leaves);
        }
        // The next subtree to the right: up while `v` is a right child (the root, 1, is odd
        // and has no parent: nothing is left).
        while v & 1 == 1 {
            v >>= 1;
            if v == 0 {
                return None;
            }
        }
        v += 1;
    }
}

impl<'m> Room<'m> {
    fn leaves(&self) -> usize {
        sight_leaves(self.ring.len())
    }

    /// The place at ring index `ix` changed (taken, seen, emptied): its leaf and the nodes
    /// above it follow. O(BLOCK + log n).
    pub(super) fn sight_update(&mut self, ix: usize) {
        let leaves = self.leaves();
        let block = ix / BLOCK;
        let start = block * BLOCK;
        let end = (start + BLOCK).min(self.ring.len());
        let leaf = self
            .ring
            .get(start..end)
            .unwrap_or(&[])
            .iter()
            .filter(|s| s.sid != 0)
            .fold(Sight::EMPTY, |acc, s| {
                let k = key(s);
                join(acc, Sight { max: k, min: k })
            });
        let mut v = leaves + block;
        match self.sight.get_mut(v) {
            Some(n) => *n = leaf,
            None => return,
        }
        while v > 1 {
            v /= 2;
            let (Some(&l), Some(&r)) = (self.sight.get(2 * v), self.sight.get(2 * v + 1)) else {
                return;
            };
            let joined = join(l, r);
            match self.sight.get_mut(v) {
                // Nothing changes further up.
                Some(n) if *n == joined => return,
                Some(n) => *n = joined,
                None => return,
            }
        }
    }

    /// The place at ring index `ix` was seen again, its key risen from `old`: the common case
    /// (a poll) costs a walk up the latest sights only, stopping where they are later already;
    /// only when it was its block's earliest is the block recomputed.
    pub(super) fn sight_seen(&mut self, ix: usize, old: u64) {
        let Some(new) = self.ring.get(ix).map(key) else {
            return;
        };
        let mut v = self.leaves() + ix / BLOCK;
        match self.sight.get(v) {
            Some(leaf) if old > leaf.min => {}
            _ => return self.sight_update(ix),
        }
        // The earliest sights are unchanged (another place in the block holds the earliest).
        loop {
            match self.sight.get_mut(v) {
                Some(n) if n.max < new => n.max = new,
                _ => return,
            }
            if v <= 1 {
                return;
            }
            v /= 2;
        }
    }

    /// The first ring index at or after `from`, going round the ring, whose slot satisfies
    /// `slot_ok`, the tree pruned by `node_ok` (which must hold for a node whenever it holds
    /// for a slot under it).
    fn first_round(
        &self,
        from: usize,
        node_ok: impl Fn(Sight) -> bool + Copy,
        slot_ok: impl Fn(&Slot) -> bool + Copy,
    ) -> Option<usize> {
        let n = self.ring.len();
        if n == 0 {
            return None;
        }
        let from = from % n;
        self.first_from(from, n, node_ok, slot_ok)
            .or_else(|| self.first_from(0, from, node_ok, slot_ok))
    }

    /// The first ring index in `from..to` whose slot satisfies `slot_ok`.
    fn first_from(
        &self,
        from: usize,
        to: usize,
        node_ok: impl Fn(Sight) -> bool + Copy,
        slot_ok: impl Fn(&Slot) -> bool + Copy,
    ) -> Option<usize> {
        // The rest of `from`'s own block, slot by slot.
        let block = from / BLOCK;
        let block_end = ((block + 1) * BLOCK).min(to);
        if let Some(i) = self.scan(from, block_end, slot_ok) {
            return Some(i);
        }
        // Then the first later block that holds one, through the tree.
        let next = first_leaf(self.sight, self.leaves(), block + 1, node_ok)?;
        let start = next * BLOCK;
        if start >= to {
            return None;
        }
        self.scan(start, (start + BLOCK).min(to), slot_ok)
    }

    fn scan(&self, from: usize, to: usize, slot_ok: impl Fn(&Slot) -> bool) -> Option<usize> {
        let slots = self.ring.get(from..to)?;
        slots.iter().position(slot_ok).map(|i| from + i)
    }

    /// Ring index of the first present place at or after `from`, going round the ring.
    pub(super) fn first_present(&self, from: usize, thr: u64) -> Option<usize> {
        self.first_round(from, |n| n.max > thr, |s| is_present(s, thr))
    }

    /// Ring index of the first due place at or after `from`, going round the ring.
    pub(super) fn first_due(&self, from: usize, thr: u64) -> Option<usize> {
        self.first_round(from, |n| n.min <= thr, |s| is_due(s, thr))
    }

    /// Whether any place is due, in O(1) (the root's earliest key).
    pub(super) fn any_due(&self, thr: u64) -> bool {
        self.sight.get(1).is_some_and(|root| root.min <= thr)
    }
}
