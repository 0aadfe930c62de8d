//! A Fenwick (binary indexed) tree of counts: add at an index, count below an index, both in
//! O(log n). (b) uses it to count later arrivals admitted before a moment; the positions'
//! accuracy, the clients holding a place ahead of an answer.

pub struct Fenwick {
    tree: Vec<u64>,
}

impl Fenwick {
    pub fn new(n: usize) -> Fenwick {
        Fenwick {
            tree: vec![0; n + 1],
        }
    }

    /// Adds one at index `i` (from 0).
    pub fn add(&mut self, i: usize) {
        self.update(i, |n| n + 1);
    }

    /// Takes one off index `i` (from 0), which had one added before.
    pub fn remove(&mut self, i: usize) {
        self.update(i, |n| n.saturating_sub(1));
    }

    /// Applies `f` to every node that covers index `i`.
    fn update(&mut self, i: usize, f: impl Fn(u64) -> u64) {
        let mut k = i + 1;
        while let Some(slot) = self.tree.get_mut(k) {
            *slot = f(*slot);
            k += k & k.wrapping_neg();
        }
    }

    /// The count at indices below `end`.
    pub fn below(&self, end: usize) -> u64 {
        let mut k = end.min(self.tree.len().saturating_sub(1));
        let mut sum = 0;
        while k > 0 {
            sum += self.tree.get(k).copied().unwrap_or(0);
            k &= k - 1;
        }
        sum
    }
}
