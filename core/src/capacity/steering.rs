//! The controller's state in the zone's shared memory: the effective value, the open window's
//! counts, totals for the metrics, and the last move. Atomics, not the zone's lock: the log
//! phase of every admitted request that reached the upstream adds to the window, and the
//! access handler reads the value; one worker a window (the one whose sample closes it) takes
//! the window's counts and steps the rule.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::control::{self, Load, Move, Window};
use super::{Auto, STEP_MS};

/// `max_active=auto`'s state, `repr(C)` in shared memory; all zero is "not started".
#[repr(C)]
#[derive(Default)]
pub struct Steering {
    /// The effective `max_active` (0: not started).
    value: AtomicU64,
    /// A value pinned through the control endpoint (0: auto).
    pinned: AtomicU64,
    /// When the open window began (wall ms; 0: none yet).
    window_from: AtomicU64,
    n: AtomicU64,
    slow: AtomicU64,
    warm: AtomicU64,
    errors: AtomicU64,
    /// Since the zone began, for the metrics.
    total_n: AtomicU64,
    total_slow: AtomicU64,
    total_errors: AtomicU64,
    /// The value the last cut set (0: never cut: the slow start).
    last_cut: AtomicU64,
    /// The last move ([`Move::code`]) and when (wall ms).
    last_move: AtomicU64,
    last_move_at: AtomicU64,
}

/// One response measured: how long the upstream took, whether it failed.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub ms: u64,
    pub failed: bool,
}

/// A step that changed the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stepped {
    pub from: u64,
    pub to: u64,
    pub why: Move,
    /// The direction differs from the last move's (log it: once per change of direction).
    pub turned: bool,
}

/// What the metrics and the control endpoint show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub value: u64,
    pub pinned: bool,
    pub responses: u64,
    pub slow: u64,
    pub errors: u64,
    pub last_move: Option<Move>,
    pub last_move_at: u64,
}

impl Steering {
    /// At the zone's (re)configuration: a new zone starts at the lower bound; a reused one
    /// keeps its value, inside the new bounds.
    pub fn start(&self, auto: &Auto) {
        let v = self.value.load(Relaxed);
        self.value
            .store(if v == 0 { auto.min } else { auto.clamp(v) }, Relaxed);
    }

    /// The `max_active` in force.
    pub fn value(&self, auto: &Auto) -> u64 {
        match self.pinned.load(Relaxed) {
            0 => auto.clamp(self.value.load(Relaxed)),
            p => p,
        }
    }

    /// Pins the value (Some) or gives it back to the controller (None).
    pub fn pin(&self, value: Option<u64>) {
        self.pinned.store(value.unwrap_or(0), Relaxed);
    }

    /// Counts one response at `now`. Some: this sample closed the window before it (it is
    /// counted in the next): the caller steps it ([`Steering::step`]).
    pub fn observe(&self, s: Sample, now: u64, auto: &Auto) -> Option<Window> {
        let from = self.window_from.load(Relaxed);
        let closed = if from == 0 || now >= from.saturating_add(STEP_MS) {
            // One worker wins the window; the others count into the new one.
            self.window_from
                .compare_exchange(from, now.max(1), Relaxed, Relaxed)
                .ok()
                .filter(|&f| f != 0)
                .map(|_| Window {
                    n: self.n.swap(0, Relaxed),
                    slow: self.slow.swap(0, Relaxed),
                    warm: self.warm.swap(0, Relaxed),
                    errors: self.errors.swap(0, Relaxed),
                })
        } else {
            None
        };
        let slow = u64::from(s.ms > auto.target_ms);
        let failed = u64::from(s.failed);
        self.n.fetch_add(1, Relaxed);
        self.slow.fetch_add(slow, Relaxed);
        self.warm
            .fetch_add(u64::from(s.ms > auto.target_ms / 2), Relaxed);
        self.errors.fetch_add(failed, Relaxed);
        self.total_n.fetch_add(1, Relaxed);
        self.total_slow.fetch_add(slow, Relaxed);
        self.total_errors.fetch_add(failed, Relaxed);
        closed
    }

    /// Steps the rule on a closed window with the room's `load`. Some: the value moved. A
    /// pinned value is left alone (the window is measured all the same).
    pub fn step(&self, w: Window, load: Load, auto: &Auto, now: u64) -> Option<Stepped> {
        if self.pinned.load(Relaxed) != 0 {
            return None;
        }
        let from = self.value(auto);
        let cut_before = self.last_cut.load(Relaxed) != 0;
        let (to, why) = control::next(from, w, load, cut_before, auto)?;
        if !why.up() {
            self.last_cut.store(to, Relaxed);
        }
        self.value.store(to, Relaxed);
        let last = Move::from_code(self.last_move.swap(why.code(), Relaxed));
        self.last_move_at.store(now, Relaxed);
        Some(Stepped {
            from,
            to,
            why,
            turned: last.is_none_or(|l| l.up() != why.up()),
        })
    }

    pub fn view(&self, auto: &Auto) -> View {
        View {
            value: self.value(auto),
            pinned: self.pinned.load(Relaxed) != 0,
            responses: self.total_n.load(Relaxed),
            slow: self.total_slow.load(Relaxed),
            errors: self.total_errors.load(Relaxed),
            last_move: Move::from_code(self.last_move.load(Relaxed)),
            last_move_at: self.last_move_at.load(Relaxed),
        }
    }
}
