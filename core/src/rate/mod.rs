//! A fleet-wide request rate, the AJA way ([S13]): every request passes with probability
//! `p = min(rate / fleet_rate, 1)`, where `fleet_rate` is the rate the whole fleet is offered,
//! derived once an interval from every node's **cumulative** counters.
//!
//! What runs where:
//! - on every request, in any worker: [`RateShared::record`] counts the request as offered,
//!   draws against `p` and counts it as passed when it passes: two atomic additions and a
//!   load, no lock, no I/O;
//! - once an interval, in one worker per node (the leader, [`RateShared::lead`]):
//!   [`RateShared::tick`] measures the node's own offered rate from its cumulative counter and
//!   sets `p` from the freshest picture it has; with Redis it then sends the node's counters in
//!   one script call ([`SyncScript`], `script.lua`) and [`RateShared::apply`] takes the
//!   fleet's picture from the reply ([`FleetPicture`]);
//! - without Redis the node's own rate stands for the fleet's: the zone caps the node alone.
//!
//! When the picture gets old (Redis gone, syncs timing out) the node keeps the fleet's last
//! `p` for two intervals, then moves it linearly, over `fallback=`, to the `p` of a local cap
//! (`local=`, by default the rate divided by the number of nodes last seen): see
//! [`aged_ppm`]. Probabilities are in parts per million, as AJA writes them.
//!
//! Everything here is plain data and arithmetic over atomics, so `cargo test` covers it; the
//! module only places [`RateShared`] in an nginx shared-memory zone and drives the timer and
//! the Redis call.

mod params;
mod script;
mod shared;

#[cfg(test)]
mod tests;

pub use params::RateZoneParams;
pub use script::{sync_reply, SyncScript, SYNC_SCRIPT};
pub use shared::{FleetPicture, NotARateZone, RateShared, RateSnapshot, SyncArgs};

pub use crate::util::PPM;

/// Default sync interval.
pub const DEFAULT_INTERVAL_MS: u64 = 1000;
/// A picture counts as fresh for this many intervals (one missed sync is nothing to act on).
pub const FRESH_INTERVALS: u64 = 2;
/// The node checks for a surge of its own offer every this many requests.
pub const SURGE_CHECK: u64 = 64;
/// ... and not before a tenth of the interval (at least this long) after a tick, nor before
/// this many requests since it: the rate of a few requests says little.
pub const SURGE_MIN_MS: u64 = 10;
pub const SURGE_MIN_COUNT: u64 = 64;
/// A surge: the node's offer since the last tick more than this many times the last
/// interval's (a spike, not the jitter of a loaded machine).
pub const SURGE_FACTOR: u64 = 2;
/// Default `fallback=`, in intervals: how long an old picture takes to age into the local cap.
pub const FALLBACK_INTERVALS: u64 = 10;

// ------------------------------------------------------------------------------ parameters

/// The probability (ppm) that lets `allowed` through out of `offered` (both in
/// milli-requests a second): 1 while the offer is within the allowance. Never 0 while
/// something is allowed: the smallest step is one in a million.
pub fn pass_ppm(allowed_milli: u64, offered_milli: u64) -> u32 {
    if offered_milli <= allowed_milli {
        return PPM;
    }
    let p = u128::from(allowed_milli) * u128::from(PPM) / u128::from(offered_milli);
    (p as u32).clamp(u32::from(allowed_milli > 0), PPM)
}

/// One reading of a cumulative counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub count: u64,
    pub at_ms: u64,
}

/// A count over milliseconds as milli-requests a second (x 1,000 for seconds, x 1,000 for
/// thousandths): the Rust and the script (rate/script.lua) rates alike.
pub const MILLI_PER_S_OVER_MS: u64 = 1_000_000;

/// The rate between two readings of a cumulative counter, in milli-requests a second. None
/// when no time passed, or when the counter went backwards (never a negative rate).
pub fn rate_milli(earlier: Sample, later: Sample) -> Option<u64> {
    let dt = later.at_ms.checked_sub(earlier.at_ms).filter(|&d| d > 0)?;
    let n = later.count.checked_sub(earlier.count)?;
    let r = u128::from(n) * u128::from(MILLI_PER_S_OVER_MS) / u128::from(dt);
    Some(u64::try_from(r).unwrap_or(u64::MAX))
}

/// A value from a picture `age_ms` old: the fleet's while fresh, then moving linearly to the
/// local one over `fallback_ms`.
pub fn aged(fleet: u64, local: u64, age_ms: u64, fresh_ms: u64, fallback_ms: u64) -> u64 {
    let Some(past) = age_ms.checked_sub(fresh_ms).filter(|&p| p > 0) else {
        return fleet;
    };
    if past >= fallback_ms {
        return local;
    }
    let (f, l) = (i128::from(fleet), i128::from(local));
    let v = f + (l - f) * i128::from(past) / i128::from(fallback_ms.max(1));
    u64::try_from(v.max(0)).unwrap_or(u64::MAX)
}

/// The probability to use when the fleet's picture is `age_ms` old (see [`aged`]).
pub fn aged_ppm(fleet: u32, local: u32, age_ms: u64, fresh_ms: u64, fallback_ms: u64) -> u32 {
    let p = aged(
        u64::from(fleet),
        u64::from(local),
        age_ms,
        fresh_ms,
        fallback_ms,
    );
    p.min(u64::from(PPM)) as u32
}

/// Whether a request with random `draw` passes at probability `p` (ppm).
pub fn passes(p: u32, draw: u32) -> bool {
    p >= PPM || (u64::from(draw) * u64::from(PPM)) >> 32 < u64::from(p)
}

// ------------------------------------------------------------------------------ shared state

/// What a zone's tick needs to know of its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateConfig {
    pub rate_milli: u64,
    pub local_milli: Option<u64>,
    pub interval_ms: u64,
    pub fallback_ms: u64,
    /// A Redis is configured: the node syncs with a fleet.
    pub fleet: bool,
    /// Most requests the node passes between two ticks (per interval): the whole rate's
    /// share of an interval, a fifth more, and three standard deviations of the draw, so that
    /// it only binds on a spike.
    pub budget: u64,
}

impl RateConfig {
    /// The budget for `rate_milli` per `interval_ms` (see [`RateConfig::budget`]).
    pub fn budget_for(rate_milli: u64, interval_ms: u64) -> u64 {
        let per_interval = rate_milli as f64 * interval_ms as f64 / 1_000_000.0;
        (per_interval * 1.2 + 3.0 * per_interval.sqrt() + 1.0).ceil() as u64
    }
}
