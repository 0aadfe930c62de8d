//! The rule that moves `max_active=auto` from one window of the origin's measurements.
//!
//! Multiplicative increase, multiplicative decrease, with a hold after a cut:
//! - **over**: more than 1 % of the window's responses failed (a 5xx, a timeout or a
//!   connection error: `$upstream_status` 5xx), or more than 10 % took longer than
//!   `origin_latency=` (the 90th percentile is over the target): the value goes to 0.8 of the
//!   sessions active (or of itself, if lower), not below the lower bound. Lowering evicts
//!   nobody: it stops admissions until departures bring the active count under it, so while
//!   the count is still above the value the last cut has not acted yet and the value holds
//!   (cutting again would only overshoot: the origin cannot recover faster than people leave).
//! - **under**: no failure, at most 5 % over the target (the 95th percentile under it), and the
//!   limit binds (sessions active at 0.9 of the value or more, or at 0.8 while people wait:
//!   the line fills a new place only as fast as its head polls; a limit nobody reaches proves
//!   nothing about the origin): up by half before the first cut (TCP's slow start: a cold
//!   start finds the origin's size in a few windows), after it by a quarter while at most 5 %
//!   took over half the target (far from it), else by a tenth; at least 1, not above the upper
//!   bound.
//! - otherwise, or with fewer than [`super::MIN_SAMPLES`] responses: it holds.
//!
//! Why this and not a latency gradient: Envoy's adaptive concurrency and Netflix's gradient
//! limit compare each sample with the latency the upstream shows when lightly loaded, which
//! they measure by dropping the limit to a floor now and then. A waiting room cannot: its
//! "requests" are sessions that last minutes and cannot be shed to take a measurement. The
//! operator states the latency to hold instead (`origin_latency=`, a percentile, as SLOs are
//! written), and the rule is Netflix's AIMD limit over windows (its backoff ratio is 0.9 of
//! the limit; here 0.8 of the sessions active, as a cut acts only through departures), with a
//! multiplicative rise so a cold start reaches a large origin's capacity in tens of windows
//! (20 to 1,000 in 18 far under the target, 41 near it) rather than thousands.

use super::{Auto, MIN_SAMPLES};

/// One window of measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// Responses from the upstream to admitted requests.
    pub n: u64,
    /// Of those, slower than the target.
    pub slow: u64,
    /// Of those, slower than half the target (the slow ones included).
    pub warm: u64,
    /// Of those, failed (5xx, timeouts, connection errors).
    pub errors: u64,
}

/// Which way a step moved the value, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// The origin is under its target and healthy and the limit binds.
    Up,
    /// More than 1 % failed.
    DownErrors,
    /// More than 10 % over the target.
    DownSlow,
}

impl Move {
    /// Code kept in shared memory (0: no move yet).
    pub const fn code(self) -> u64 {
        match self {
            Move::Up => 1,
            Move::DownErrors => 2,
            Move::DownSlow => 3,
        }
    }

    pub fn from_code(code: u64) -> Option<Move> {
        match code {
            1 => Some(Move::Up),
            2 => Some(Move::DownErrors),
            3 => Some(Move::DownSlow),
            _ => None,
        }
    }

    pub fn up(self) -> bool {
        self == Move::Up
    }

    /// Why, for the log and the control endpoint.
    pub fn reason(self) -> &'static str {
        match self {
            Move::Up => "origin under origin_latency, no errors, and the limit reached",
            Move::DownErrors => "origin errors over 1 % of responses",
            Move::DownSlow => "origin latency p90 over origin_latency",
        }
    }
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

/// The room as a step sees it: sessions active, people waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    pub active: u64,
    pub waiting: u64,
}

/// The value after a window: `value` now, the room's `load`, and whether the value was ever
/// cut (`cut_before`: the slow start is over). None: it holds.
pub fn next(
    value: u64,
    w: Window,
    load: Load,
    cut_before: bool,
    auto: &Auto,
) -> Option<(u64, Move)> {
    let Load { active, waiting } = load;
    if w.n < MIN_SAMPLES {
        return None;
    }
    let over = if w.errors.saturating_mul(100) > w.n {
        Some(Move::DownErrors)
    } else if w.slow.saturating_mul(10) > w.n {
        Some(Move::DownSlow)
    } else {
        None
    };
    if let Some(why) = over {
        // The last cut still waits for departures: nobody is let in meanwhile.
        if active > value {
            return None;
        }
        let cut = auto.clamp(active.min(value).saturating_mul(4) / 5);
        return (cut < value).then_some((cut, why));
    }
    let calm = w.errors == 0 && w.slow.saturating_mul(20) <= w.n;
    let binds = active.saturating_mul(10) >= value.saturating_mul(9)
        || (waiting > 0 && active.saturating_mul(5) >= value.saturating_mul(4));
    if !(calm && binds) {
        return None;
    }
    let far = w.warm.saturating_mul(20) <= w.n;
    let raised = auto.clamp(value.saturating_add(rise(value, cut_before, far)));
    (raised > value).then_some((raised, Move::Up))
}

/// The places a rise adds to `value`: half before the first cut (the slow start), after it a
/// quarter while the origin is `far` under the target, else a tenth; at least one.
pub fn rise(value: u64, cut_before: bool, far: bool) -> u64 {
    let step = match (cut_before, far) {
        (false, _) => value / 2,
        (true, true) => value / 4,
        (true, false) => value / 10,
    };
    step.max(1)
}
