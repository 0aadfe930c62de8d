//! `max_active=auto` ([S26]): the room admits what the origin can serve. The admitted requests
//! that reach an upstream are measured (their response time and status, in the log phase), a
//! window at a time ([`STEP_MS`]), and each window moves the effective `max_active` between
//! the configured bounds by the rule in [`control`]; the state lives in the zone's shared
//! memory ([`steering`]), fed by every worker.
//!
//! This module holds the parameters (`auto:MIN..MAX`, `origin_latency=`), the rule and the
//! shared state, and nothing of nginx.

pub mod control;
pub mod fleet;
pub mod steering;

use crate::config::ParseError;

/// How long one window of measurements lasts (ms): the controller moves at most once per
/// window. A second: the origin's latency answers a change of the admitted count within a few
/// page loads, and a window holds enough responses to judge at a room's usual traffic.
pub const STEP_MS: u64 = 1000;

/// Fewer responses than this in a window say nothing: the value stays where it is (static
/// pages, no traffic yet).
pub const MIN_SAMPLES: u64 = 10;

/// Default `origin_latency=`: the 90th percentile of the origin's response time to hold.
pub const DEFAULT_TARGET_MS: u64 = 500;

/// The bounds `max_active=auto` takes when written without them.
pub const DEFAULT_BOUNDS: (u64, u64) = (20, 5000);

/// `max_active=auto:MIN..MAX` and `origin_latency=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Auto {
    /// The lowest value, and the one the room starts from.
    pub min: u64,
    pub max: u64,
    /// `origin_latency=` (ms): the 90th percentile of the origin's response time to hold.
    pub target_ms: u64,
}

impl Auto {
    /// The value inside the bounds (a reload may have moved them).
    pub fn clamp(&self, value: u64) -> u64 {
        value.clamp(self.min, self.max)
    }
}

/// Parses a `max_active=` value that starts with `auto`: `auto` (the default bounds) or
/// `auto:MIN..MAX`, 1 <= MIN <= MAX. None: not an `auto` value (a plain number).
pub fn parse_auto(value: &str) -> Option<Result<Auto, ParseError>> {
    let rest = value.strip_prefix("auto")?;
    let bounds = match rest {
        "" => Ok(DEFAULT_BOUNDS),
        _ => match rest.strip_prefix(':').and_then(|r| r.split_once("..")) {
            Some((lo, hi)) => bounds(lo, hi),
            None => Err(ParseError::Syntax(
                "expected a number, auto, or auto:MIN..MAX",
            )),
        },
    };
    Some(bounds.map(|(min, max)| Auto {
        min,
        max,
        target_ms: DEFAULT_TARGET_MS,
    }))
}

fn bounds(lo: &str, hi: &str) -> Result<(u64, u64), ParseError> {
    let number = |s: &str| crate::config::parse_digits(s);
    let (min, max) = (number(lo)?, number(hi)?);
    if min == 0 || min > max {
        return Err(ParseError::Range("auto:MIN..MAX needs 1 <= MIN <= MAX"));
    }
    Ok((min, max))
}

#[cfg(test)]
mod tests;
