//! A Fenwick (binary indexed) tree of 0/1 counts over a slice: how many places are live
//! before a given slot, and which slot holds the k-th live place, each in O(log n). The
//! room's line keeps one over its ring, so a waiting client's position counts only the live
//! places ahead of it ([S16]) whatever has left the line in between.
//!
//! Plain functions over a `[u32]` (it lives in shared memory, next to the ring). Indices are
//! 0-based for callers; the tree itself is the classic 1-based layout shifted by one.
//! [`Fenwick`] is the same tree in a `Vec` of its own, for callers outside shared memory (the
//! rehearsal's checker counts with it).

/// Adds `delta` (+1 or -1) to the counter at `i`.
pub fn add(t: &mut [u32], i: usize, delta: i32) {
    let mut k = i + 1;
    while let Some(c) = t.get_mut(k - 1) {
        *c = c.wrapping_add_signed(delta);
        k += k & k.wrapping_neg();
    }
}

/// Sum of the counters at `0..i` (`i` may be `t.len()`).
pub fn prefix(t: &[u32], i: usize) -> u64 {
    let mut k = i.min(t.len());
    let mut s = 0u64;
    while k > 0 {
        s += u64::from(t.get(k - 1).copied().unwrap_or(0));
        k &= k - 1;
    }
    s
}

/// The smallest index `i` with `prefix(t, i + 1) >= k` (the k-th set counter, 1-based), if
/// there are at least `k`.
pub fn find(t: &[u32], k: u64) -> Option<usize> {
    let n = t.len();
    if k == 0 || n == 0 {
        return None;
    }
    let mut pos = 0usize;
    let mut rest = k;
    let mut step = 1usize << (usize::BITS - 1 - n.leading_zeros());
    while step > 0 {
        let next = pos + step;
        if next <= n {
            let c = u64::from(t.get(next - 1).copied().unwrap_or(0));
            if c < rest {
                pos = next;
                rest -= c;
            }
        }
        step >>= 1;
    }
    (pos < n).then_some(pos)
}

/// Counts at indices `0..n` in a tree of their own: [`add`], [`prefix`] and [`find`] over a `Vec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    /// `n` counters at zero.
    pub fn new(n: usize) -> Fenwick {
        Fenwick { tree: vec![0; n] }
    }

    /// Adds one at index `i` (nothing beyond `n`).
    pub fn add(&mut self, i: usize) {
        add(&mut self.tree, i, 1);
    }

    /// Takes one off index `i`; nothing when its count is zero (it never goes below).
    pub fn remove(&mut self, i: usize) {
        if i < self.tree.len() && prefix(&self.tree, i + 1) > prefix(&self.tree, i) {
            add(&mut self.tree, i, -1);
        }
    }

    /// The count at indices below `end` (all of them for `end >= n`).
    pub fn below(&self, end: usize) -> u64 {
        prefix(&self.tree, end)
    }

    /// The smallest index at which the counts up to it reach `k` (from 1), if they do.
    pub fn find(&self, k: u64) -> Option<usize> {
        find(&self.tree, k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_plain_count() {
        for n in [1usize, 2, 3, 7, 8, 100, 257] {
            let mut t = vec![0u32; n];
            let mut plain = vec![0u32; n];
            let mut x = 12345u64;
            for _ in 0..2000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let i = (x >> 33) as usize % n;
                if plain[i] == 0 {
                    plain[i] = 1;
                    add(&mut t, i, 1);
                } else {
                    plain[i] = 0;
                    add(&mut t, i, -1);
                }
                let j = (x >> 17) as usize % (n + 1);
                let want: u64 = plain[..j].iter().map(|&c| u64::from(c)).sum();
                assert_eq!(prefix(&t, j), want);
                let total: u64 = plain.iter().map(|&c| u64::from(c)).sum();
                for k in 1..=total.min(5) {
                    let want = plain
                        .iter()
                        .enumerate()
                        .filter(|(_, &c)| c == 1)
                        .nth(k as usize - 1)
                        .map(|(i, _)| i);
                    assert_eq!(find(&t, k), want, "n {n} k {k}");
                }
                assert_eq!(find(&t, total + 1), None);
            }
        }
    }

    #[test]
    fn the_owned_tree_counts_as_the_functions_do() {
        let mut t = Fenwick::new(5);
        for i in [0, 2, 2, 4, 9] {
            t.add(i);
        }
        assert_eq!(
            (0..=6).map(|k| t.below(k)).collect::<Vec<_>>(),
            vec![0, 1, 1, 3, 3, 4, 4]
        );
        assert_eq!(
            (t.find(2), t.find(3), t.find(4), t.find(5)),
            (Some(2), Some(2), Some(4), None)
        );
        t.remove(2);
        assert_eq!(t.below(3), 2);
        // A count at zero stays there, and its neighbours keep theirs.
        t.remove(1);
        t.remove(7);
        assert_eq!(
            (0..=5).map(|k| t.below(k)).collect::<Vec<_>>(),
            vec![0, 1, 1, 2, 2, 3]
        );
        t.remove(0);
        t.remove(2);
        t.remove(4);
        assert_eq!(t, Fenwick::new(5));
        assert_eq!(Fenwick::default().below(3), 0);
    }
}
