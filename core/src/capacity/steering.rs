//! The controller's state in the zone's shared memory: the effective value, the open window's
//! counts, totals for the metrics, and the last move. Atomics, not the zone's lock: the log
//! phase of every admitted request that reached the upstream adds to the window, and the
//! access handler reads the value; one worker a window (the one whose sample closes it) takes
//! the window's counts and steps the rule.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::control::{self, Load, Move, Stepped, Window};
use super::fleet::Fleet;
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

    /// The places the next two rises may open (as far as the upper bound lets it): those
    /// waiting within them should be at the door when they come. Two, as a client comes back
    /// when its last answer said: the ones the rise after next lets in must already be told
    /// to come back soon when the next one comes (with one, `scripts/bench --auto` showed the
    /// second rise of a cold start standing empty 4 s). 0 while pinned.
    pub fn opening(&self, auto: &Auto) -> u64 {
        if self.pinned.load(Relaxed) != 0 {
            return 0;
        }
        let value = self.value(auto);
        let cut_before = self.last_cut.load(Relaxed) != 0;
        let next = value.saturating_add(control::rise(value, cut_before, true));
        let after = next.saturating_add(control::rise(next, cut_before, true));
        after.min(auto.max).saturating_sub(value)
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
                .map(|_| self.take_told())
        } else {
            None
        };
        self.count(s, auto);
        closed
    }

    /// Counts one response into the open window (on a fleet, the counts not told yet).
    pub fn count(&self, s: Sample, auto: &Auto) {
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
    }

    /// Takes the open window's counts (on a fleet: those not told yet, for a call to Redis). (Each counter is taken
    /// on its own: a response counted meanwhile by another worker may go with this call in
    /// one counter and the next in another; nothing is lost or counted twice.)
    pub fn take_told(&self) -> Window {
        Window {
            n: self.n.swap(0, Relaxed),
            slow: self.slow.swap(0, Relaxed),
            warm: self.warm.swap(0, Relaxed),
            errors: self.errors.swap(0, Relaxed),
        }
    }

    /// A call that carried `w` failed: its counts go with the next one.
    pub fn give_back(&self, w: Window) {
        self.n.fetch_add(w.n, Relaxed);
        self.slow.fetch_add(w.slow, Relaxed);
        self.warm.fetch_add(w.warm, Relaxed);
        self.errors.fetch_add(w.errors, Relaxed);
    }

    /// On a fleet: what Redis said, so this node's decisions (and its decisions alone while
    /// Redis is away), metrics and control endpoint use the fleet's value.
    pub fn mirror(&self, f: &Fleet) {
        self.value.store(f.value, Relaxed);
        self.pinned
            .store(if f.pinned { f.value } else { 0 }, Relaxed);
        self.last_cut.store(u64::from(f.cut_before), Relaxed);
        self.last_move
            .store(f.last_move.map_or(0, Move::code), Relaxed);
        self.last_move_at.store(f.moved_at, Relaxed);
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
