//! One worker per node does a zone's periodic work (the fleet rate's sync, the synced room's
//! sync): elected through the zone's shared memory with one compare-and-swap, so two workers
//! never both lead. A worker keeps the role while it beats; one of a newer configuration (a
//! reload) takes it over at once; anyone takes it from a leader whose last beat is older than
//! the stale time (it exited or hangs); an exiting leader resigns.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A worker: its process id, and the configuration generation it belongs to, in one word (so
/// one compare-and-swap hands leadership over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    pub pid: u32,
    pub generation: u32,
}

impl Leader {
    fn word(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.pid)
    }

    fn of(word: u64) -> Leader {
        Leader {
            pid: word as u32,
            generation: (word >> 32) as u32,
        }
    }
}

/// The election's state, in a zone's shared memory (atomics only).
#[repr(C)]
#[derive(Debug)]
pub struct Leadership {
    /// Bumped by every configuration that keeps the zone (a reload).
    generation: AtomicU64,
    leader: AtomicU64,
    beat_ms: AtomicU64,
}

impl Default for Leadership {
    fn default() -> Self {
        Leadership::new()
    }
}

impl Leadership {
    pub const fn new() -> Leadership {
        Leadership {
            generation: AtomicU64::new(1),
            leader: AtomicU64::new(0),
            beat_ms: AtomicU64::new(0),
        }
    }

    /// A new configuration keeps the zone: its workers' generation (they take over from the
    /// previous configuration's workers).
    pub fn next_generation(&self) -> u32 {
        let g = self.generation.fetch_add(1, Relaxed).wrapping_add(1);
        // 0 is never a generation (a leader word of 0 means "nobody").
        (g as u32).max(1)
    }

    pub fn generation(&self) -> u32 {
        (self.generation.load(Relaxed) as u32).max(1)
    }

    /// Whether worker `me` leads now (and beats when it does).
    pub fn lead(&self, me: Leader, now: u64, stale_ms: u64) -> bool {
        let cur = self.leader.load(Relaxed);
        let held = Leader::of(cur);
        if cur == me.word() {
            self.beat_ms.store(now, Relaxed);
            return true;
        }
        let stale = now.saturating_sub(self.beat_ms.load(Relaxed)) > stale_ms;
        if cur != 0 && me.generation <= held.generation && !stale {
            return false;
        }
        if self
            .leader
            .compare_exchange(cur, me.word(), Relaxed, Relaxed)
            .is_ok()
        {
            self.beat_ms.store(now, Relaxed);
            return true;
        }
        false
    }

    /// Worker `me` exits: another one may take over at its next tick.
    pub fn resign(&self, me: Leader) {
        let _ = self.leader.compare_exchange(me.word(), 0, Relaxed, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_leader_at_a_time_and_a_newer_configuration_takes_over() {
        let s = Leadership::new();
        let a = Leader {
            pid: 100,
            generation: 1,
        };
        let b = Leader {
            pid: 101,
            generation: 1,
        };
        assert!(s.lead(a, 1000, 3000));
        assert!(!s.lead(b, 1000, 3000));
        assert!(s.lead(a, 2000, 3000));
        // a stops beating: b takes over once the beat is stale.
        assert!(!s.lead(b, 4000, 3000));
        assert!(s.lead(b, 5001, 3000));
        assert!(!s.lead(a, 5002, 3000));
        // A worker of a reloaded configuration takes over at once...
        let g = s.next_generation();
        assert_eq!(g, 2);
        let c = Leader {
            pid: 200,
            generation: g,
        };
        assert!(s.lead(c, 5003, 3000));
        // ...and an older one never takes it back while c beats.
        assert!(!s.lead(b, 5004, 3000));
        // An exiting leader resigns: the next worker leads at once.
        s.resign(c);
        assert!(s.lead(b, 5005, 3000));
    }
}
