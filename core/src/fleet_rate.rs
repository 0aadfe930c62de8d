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
//!   one script call ([`SyncScript`], `fleet_rate.lua`) and [`RateShared::apply`] takes the
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

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::leader::Leadership;
use crate::parse::{
    key_prefix, parse_rate, parse_time_ms, split_param_in, store_timeout, sync_interval, ConfError,
    DEFAULT_PREFIX,
};
use crate::redis::{count, ints, Form, ReplyError, BACKOFF_MAX_MS};
use crate::redis_params::{RedisParams, REDIS_PARAMS};
use crate::resp::Value;

/// Probability 1, in parts per million.
pub const PPM: u32 = 1_000_000;

/// The sync script.
pub const SYNC_SCRIPT: &str = include_str!("fleet_rate.lua");

/// Default sync interval.
pub const DEFAULT_INTERVAL_MS: u64 = 1000;
/// Shortest and longest sync interval.
pub const MIN_INTERVAL_MS: u64 = 100;
pub const MAX_INTERVAL_MS: u64 = 60_000;
/// A picture counts as fresh for this many intervals (one missed sync is nothing to act on).
pub const FRESH_INTERVALS: u64 = 2;
/// A node unheard of for this many intervals drops out of the fleet's sum.
pub const STALE_INTERVALS: u64 = 3;
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

/// The parsed `smart_limit_rate_zone` directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateZoneParams {
    pub name: String,
    /// `rate=`: requests a second the whole fleet passes, in milli-requests a second.
    pub rate_milli: u64,
    /// `redis=` (or `sentinel=`, with `redis_user=`, `redis_tls=`...): where the nodes meet;
    /// none: this node alone.
    pub redis: RedisParams,
    /// `prefix=`: the Redis key prefix.
    pub prefix: String,
    /// `interval=`: how often a node syncs (and measures its own rate).
    pub interval_ms: u64,
    /// `timeout=`: a sync not answered within this is abandoned; shorter than the interval, so
    /// two syncs of a node never overlap.
    pub timeout_ms: u64,
    /// `local=`: the cap a node falls back to alone (milli r/s); None: the rate divided by the
    /// number of nodes in the last fleet picture.
    pub local_milli: Option<u64>,
    /// `fallback=`: how long an old picture takes to age into the local cap.
    pub fallback_ms: u64,
}

/// The rate zone's own parameters (the Redis connection's are [`REDIS_PARAMS`]).
const RATE_PARAMS: &[(&str, &str)] = &[
    ("rate", "rate=1000r/s"),
    ("prefix", "prefix=smart_limit"),
    ("interval", "interval=1s"),
    ("timeout", "timeout=900ms"),
    ("local", "local=500r/s"),
    ("fallback", "fallback=10s"),
];

/// A rate value in milli-requests a second (`10r/s`, `600r/m`).
fn rate_value(value: &str) -> Result<u64, String> {
    let per_sec = parse_rate(value).map_err(|e| e.to_string())?;
    Ok(((per_sec * 1000.0).round() as u64).max(1))
}

impl RateZoneParams {
    /// Parses the arguments after the directive name: the zone name, then `key=value`.
    pub fn parse(args: &[&str]) -> Result<RateZoneParams, ConfError> {
        let (name, rest) = args.split_first().ok_or(ConfError::MissingName)?;
        crate::parse::check_zone_name(name)?;
        let mut z = RateZoneParams {
            name: name.to_string(),
            rate_milli: 0,
            redis: RedisParams::default(),
            prefix: DEFAULT_PREFIX.to_string(),
            interval_ms: DEFAULT_INTERVAL_MS,
            timeout_ms: 0,
            local_milli: None,
            fallback_ms: 0,
        };
        let mut seen: Vec<(&'static str, &str)> = Vec::new();
        for &arg in rest {
            let (param, value) = split_param_in(RATE_PARAMS, arg).or_else(|e| match e {
                ConfError::Unknown(_) => split_param_in(REDIS_PARAMS, arg),
                e => Err(e),
            })?;
            if seen.iter().any(|(k, _)| *k == param) {
                return Err(ConfError::Duplicate(arg.to_string()));
            }
            seen.push((param, arg));
            z.set(param, value).map_err(|reason| ConfError::Invalid {
                param,
                value: value.to_string(),
                reason,
            })?;
        }
        let arg_of = |k: &str| seen.iter().find(|(p, _)| *p == k).map(|(_, a)| *a);
        if z.rate_milli == 0 {
            return Err(ConfError::Needs("rate=RATE, e.g. rate=1000r/s"));
        }
        if !z.redis.configured() {
            let fleet_only = RedisParams::first_arg(arg_of)
                .or_else(|| arg_of("prefix"))
                .or_else(|| arg_of("local"))
                .or_else(|| arg_of("fallback"));
            if let Some(a) = fleet_only {
                return Err(ConfError::Requires(a.to_string(), "redis=HOST:PORT"));
            }
        }
        z.redis.check(arg_of)?;
        match arg_of("timeout") {
            Some(arg) if z.timeout_ms >= z.interval_ms => {
                return Err(ConfError::Invalid {
                    param: "timeout",
                    value: arg.trim_start_matches("timeout=").to_string(),
                    reason: format!(
                        "must be shorter than interval= ({} ms), so that two syncs never \
                         overlap",
                        z.interval_ms
                    ),
                });
            }
            Some(_) => {}
            // 9/10 of the interval, as AJA's 900 ms under 1 s.
            None => z.timeout_ms = (z.interval_ms * 9 / 10).max(1),
        }
        if arg_of("fallback").is_none() {
            z.fallback_ms = z.interval_ms.saturating_mul(FALLBACK_INTERVALS);
        }
        Ok(z)
    }

    fn set(&mut self, param: &str, value: &str) -> Result<(), String> {
        match param {
            "rate" => self.rate_milli = rate_value(value)?,
            p if RedisParams::knows(p) => self.redis.set(p, value)?,
            "prefix" => self.prefix = key_prefix(value)?,
            "interval" => self.interval_ms = sync_interval(value)?,
            "timeout" => self.timeout_ms = store_timeout(value)?,
            "local" => self.local_milli = Some(rate_value(value)?),
            "fallback" => {
                let ms = parse_time_ms(value).map_err(|e| e.to_string())?;
                if ms == 0 || ms > 24 * 3_600_000 {
                    return Err("must be between 1ms and 24h".to_string());
                }
                self.fallback_ms = ms;
            }
            _ => return Err("unknown parameter".to_string()),
        }
        Ok(())
    }

    /// A node not heard from for this long drops out of the fleet's sum.
    pub fn stale_ms(&self) -> u64 {
        self.interval_ms.saturating_mul(STALE_INTERVALS)
    }

    /// The Redis key of the zone lives this long after the last sync of any node.
    pub fn key_ttl_ms(&self) -> u64 {
        self.interval_ms
            .saturating_mul(STALE_INTERVALS * 10)
            .max(60_000)
    }
}

// ------------------------------------------------------------------------------ the math

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

/// The rate between two readings of a cumulative counter, in milli-requests a second. None
/// when no time passed, or when the counter went backwards (never a negative rate).
pub fn rate_milli(earlier: Sample, later: Sample) -> Option<u64> {
    let dt = later.at_ms.checked_sub(earlier.at_ms).filter(|&d| d > 0)?;
    let n = later.count.checked_sub(earlier.count)?;
    let r = u128::from(n) * 1_000_000 / u128::from(dt);
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

const MAGIC: u64 = 0x534c_5241_5445_0001; // "SLRATE", version 1

/// How the leader's tick should reach the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncArgs {
    pub node_id: u64,
    pub seq: u64,
    pub offered: u64,
    pub passed: u64,
    /// The node's own offered rate, as it measured it (milli r/s).
    pub own_rate_milli: u64,
    /// The end of the window the counters close: the tick's instant rounded to a multiple of
    /// the interval (the same on every node).
    pub window_ms: u64,
    /// When the counters were read (the node's clock, ms).
    pub at_ms: u64,
}

/// The window a tick at `now` closes: `now` rounded to the nearest multiple of the interval
/// (a timer may fire a moment before or after the boundary it was set for).
pub fn window_end(now: u64, interval_ms: u64) -> u64 {
    let i = interval_ms.max(1);
    (now.saturating_add(i / 2) / i).saturating_mul(i)
}

/// How long until the next tick: the boundary after the one `now` is closest to, so that
/// every node ticks at the same instants (multiples of the interval on the wall clock).
pub fn next_tick_in(now: u64, interval_ms: u64) -> u64 {
    let next = window_end(now, interval_ms).saturating_add(interval_ms.max(1));
    next.saturating_sub(now).max(1)
}

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

impl From<&RateZoneParams> for RateConfig {
    fn from(p: &RateZoneParams) -> RateConfig {
        RateConfig {
            rate_milli: p.rate_milli,
            local_milli: p.local_milli,
            interval_ms: p.interval_ms,
            fallback_ms: p.fallback_ms,
            fleet: p.redis.configured(),
            budget: RateConfig::budget_for(p.rate_milli, p.interval_ms),
        }
    }
}

/// The fleet as one sync reply shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetPicture {
    /// The fleet's offered and passed rates (milli r/s): the sum of the live nodes' rates.
    pub offered_milli: u64,
    pub passed_milli: u64,
    /// Live nodes (this one included).
    pub nodes: u64,
    /// The fleet's cumulative totals, for metrics.
    pub offered_total: u64,
    pub passed_total: u64,
    /// This node's own offered rate over the same window (milli r/s).
    pub own_offered_milli: u64,
    /// The end of the window the fleet's rates are for.
    pub window_ms: u64,
    /// Whether this node's report was taken (false: not newer than the one stored).
    pub accepted: bool,
}

/// A rate zone's state in the node's shared memory: every field an atomic, written by any
/// worker without a lock (the counters) or by the leader (the rest).
#[repr(C)]
#[derive(Debug)]
pub struct RateShared {
    magic: AtomicU64,
    /// Random per zone (kept across reloads): the node's name in Redis.
    node_id: AtomicU64,
    /// Requests offered to the zone and passed, since the zone was created.
    offered: AtomicU64,
    passed: AtomicU64,
    /// The probability every request is drawn against (ppm).
    p_ppm: AtomicU64,
    /// The last fleet picture, and when it came (0: none yet).
    fleet_ppm: AtomicU64,
    fleet_offered_milli: AtomicU64,
    fleet_passed_milli: AtomicU64,
    fleet_nodes: AtomicU64,
    fleet_offered_total: AtomicU64,
    fleet_passed_total: AtomicU64,
    /// The totals as the last picture gave them (to see them restart from 0).
    fleet_offered_raw: AtomicU64,
    fleet_passed_raw: AtomicU64,
    synced_at_ms: AtomicU64,
    /// The node's own offered rate, and the counter reading it was measured from.
    local_offered_milli: AtomicU64,
    sample_count: AtomicU64,
    sample_at_ms: AtomicU64,
    /// The passed counter at that reading (the budget since the tick counts from it).
    passed_at_tick: AtomicU64,
    /// Grows with every sync sent (lets Redis ignore a late, older report).
    seq: AtomicU64,
    /// The last window reported (a window is reported once).
    window_ms: AtomicU64,
    /// Since when pictures show fewer nodes than the last one applied (0: they do not).
    shrink_since_ms: AtomicU64,
    /// Which worker syncs for the node.
    leadership: Leadership,
    /// Syncs answered, failed (no reply, bad reply), and reports Redis found older than the
    /// one it had.
    syncs: AtomicU64,
    sync_errors: AtomicU64,
    ignored: AtomicU64,
}

/// The shared state is not what it should be (another module's zone, an older layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("zone memory does not hold a rate zone of this module's layout")]
pub struct NotARateZone;

/// A reading of the shared state, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateSnapshot {
    pub offered: u64,
    pub passed: u64,
    pub p_ppm: u32,
    pub fleet_offered_milli: u64,
    pub fleet_passed_milli: u64,
    pub nodes: u64,
    pub fleet_offered_total: u64,
    pub fleet_passed_total: u64,
    pub local_offered_milli: u64,
    /// Since the last fleet picture (None: never had one).
    pub sync_age_ms: Option<u64>,
    pub syncs: u64,
    pub sync_errors: u64,
    pub ignored: u64,
}

impl RateShared {
    /// A fresh zone: nothing counted, everything passes until the first tick measures.
    pub fn new(node_id: u64, now: u64) -> RateShared {
        let a = AtomicU64::new;
        RateShared {
            magic: a(MAGIC),
            node_id: a(node_id.max(1)),
            offered: a(0),
            passed: a(0),
            p_ppm: a(u64::from(PPM)),
            fleet_ppm: a(u64::from(PPM)),
            fleet_offered_milli: a(0),
            fleet_passed_milli: a(0),
            fleet_nodes: a(0),
            fleet_offered_total: a(0),
            fleet_passed_total: a(0),
            fleet_offered_raw: a(0),
            fleet_passed_raw: a(0),
            synced_at_ms: a(0),
            local_offered_milli: a(0),
            sample_count: a(0),
            sample_at_ms: a(now),
            passed_at_tick: a(0),
            seq: a(0),
            window_ms: a(0),
            shrink_since_ms: a(0),
            leadership: Leadership::new(),
            syncs: a(0),
            sync_errors: a(0),
            ignored: a(0),
        }
    }

    /// Checks a zone an earlier configuration set up.
    pub fn check(&self) -> Result<(), NotARateZone> {
        if self.magic.load(Relaxed) == MAGIC {
            Ok(())
        } else {
            Err(NotARateZone)
        }
    }

    /// Which worker syncs for the node (see [`Leadership`]).
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    pub fn node_id(&self) -> u64 {
        self.node_id.load(Relaxed)
    }

    /// One request at `now`: counted as offered, drawn against `p`, counted as passed when it
    /// passes. Every [`SURGE_CHECK`]th request of the node also checks for a surge.
    #[inline]
    pub fn record(&self, draw: u32, now: u64, cfg: &RateConfig) -> bool {
        let offered = self.offered.fetch_add(1, Relaxed).wrapping_add(1);
        if offered.is_multiple_of(SURGE_CHECK) {
            self.surge_guard(offered, now, cfg);
        }
        let pass = passes(self.p_ppm.load(Relaxed) as u32, draw) && self.within_budget(now, cfg);
        if pass {
            self.passed.fetch_add(1, Relaxed);
        }
        pass
    }

    /// The backstop under the draw: since the last tick the node has passed less than
    /// [`RateConfig::budget`] per interval (at least one interval). It does not bind while `p`
    /// is right (the node passes its share of the rate, give or take the draw's spread); it
    /// holds a spike from idle to about the rate itself until the surge guard and the next tick
    /// catch up.
    fn within_budget(&self, now: u64, cfg: &RateConfig) -> bool {
        let since = now
            .saturating_sub(self.sample_at_ms.load(Relaxed))
            .max(cfg.interval_ms);
        let allowed =
            u128::from(cfg.budget) * u128::from(since) / u128::from(cfg.interval_ms.max(1));
        let passed = self
            .passed
            .load(Relaxed)
            .saturating_sub(self.passed_at_tick.load(Relaxed));
        u128::from(passed) < allowed
    }

    /// Between two ticks `p` rests on the rates measured over the last interval; a node whose
    /// own offer jumps (a spike from idle) would pass nearly all of it until the next tick. So
    /// now and then a worker compares the node's offer since the last tick with the one `p` was
    /// set from and, when it is more than [`SURGE_FACTOR`] times higher, lowers `p` at once to
    /// what the fleet's rate with this node's new offer allows. Only ever lowers `p`; the next
    /// tick sets it from fresh measurements.
    fn surge_guard(&self, offered: u64, now: u64, cfg: &RateConfig) {
        let since = Sample {
            count: self.sample_count.load(Relaxed),
            at_ms: self.sample_at_ms.load(Relaxed),
        };
        if now.saturating_sub(since.at_ms) < (cfg.interval_ms / 10).max(SURGE_MIN_MS)
            || offered.saturating_sub(since.count) < SURGE_MIN_COUNT
        {
            return;
        }
        let Some(own_now) = rate_milli(
            since,
            Sample {
                count: offered,
                at_ms: now,
            },
        ) else {
            return;
        };
        let own_then = self.local_offered_milli.load(Relaxed);
        if own_now <= own_then.saturating_mul(SURGE_FACTOR) {
            return;
        }
        let fleet = self
            .fleet_offered_milli
            .load(Relaxed)
            .saturating_sub(own_then)
            .saturating_add(own_now);
        let p = u64::from(pass_ppm(cfg.rate_milli, fleet));
        self.p_ppm.fetch_min(p, Relaxed);
    }

    /// The leader's step, once an interval: measures the node's own offered rate, sets `p`
    /// from the freshest picture (or the local cap), and says what to send the fleet (None
    /// without a fleet).
    pub fn tick(&self, now: u64, cfg: &RateConfig) -> Option<SyncArgs> {
        let offered = self.offered.load(Relaxed);
        let earlier = Sample {
            count: self.sample_count.load(Relaxed),
            at_ms: self.sample_at_ms.load(Relaxed),
        };
        let later = Sample {
            count: offered,
            at_ms: now,
        };
        if let Some(r) = rate_milli(earlier, later) {
            self.local_offered_milli.store(r, Relaxed);
            self.sample_count.store(offered, Relaxed);
            self.passed_at_tick
                .store(self.passed.load(Relaxed), Relaxed);
            self.sample_at_ms.store(now, Relaxed);
        }
        let own = self.local_offered_milli.load(Relaxed);
        if !cfg.fleet {
            // Alone: the node's own rate is the fleet's.
            let p = pass_ppm(cfg.rate_milli, own);
            self.fleet_offered_milli.store(own, Relaxed);
            self.fleet_nodes.store(1, Relaxed);
            self.fleet_ppm.store(u64::from(p), Relaxed);
            self.synced_at_ms.store(now, Relaxed);
            self.p_ppm.store(u64::from(p), Relaxed);
            return None;
        }
        let local_cap = cfg
            .local_milli
            .unwrap_or(cfg.rate_milli / self.fleet_nodes.load(Relaxed).max(1));
        let local = pass_ppm(local_cap, own);
        let synced_at = self.synced_at_ms.load(Relaxed);
        let p = if synced_at == 0 {
            local
        } else {
            aged_ppm(
                self.fleet_ppm.load(Relaxed) as u32,
                local,
                now.saturating_sub(synced_at),
                cfg.interval_ms.saturating_mul(FRESH_INTERVALS),
                cfg.fallback_ms,
            )
        };
        self.p_ppm.store(u64::from(p), Relaxed);
        let window_ms = window_end(now, cfg.interval_ms);
        if self.window_ms.fetch_max(window_ms, Relaxed) >= window_ms {
            // This window was reported already (a tick a moment early, then on time).
            return None;
        }
        Some(SyncArgs {
            node_id: self.node_id(),
            seq: self.seq.fetch_add(1, Relaxed).wrapping_add(1),
            offered,
            passed: self.passed.load(Relaxed),
            own_rate_milli: own,
            window_ms,
            at_ms: now,
        })
    }

    /// The fleet's picture came back: `p` follows it at once.
    ///
    /// Pictures with fewer nodes than the last one applied wait until they have shown it for
    /// the longest reconnect delay and two intervals ([`RateShared::shrink_confirm_ms`]):
    /// right after Redis lost its data (a restart) the nodes come back one by one as their
    /// reconnect delays run out, and the first would see itself alone and pass the whole rate.
    /// A node that really left stays gone, and its traffic, moved to the others, is still in
    /// the fleet's rate, so waiting costs little. Meanwhile the last applied picture ages as
    /// without Redis (toward the local cap).
    pub fn apply(&self, picture: &FleetPicture, now: u64, cfg: &RateConfig) {
        self.syncs.fetch_add(1, Relaxed);
        if !picture.accepted {
            self.ignored.fetch_add(1, Relaxed);
        }
        if picture.nodes < self.fleet_nodes.load(Relaxed) {
            let since = match self.shrink_since_ms.load(Relaxed) {
                0 => {
                    self.shrink_since_ms.store(now.max(1), Relaxed);
                    now
                }
                t => t,
            };
            if now.saturating_sub(since) < Self::shrink_confirm_ms(cfg) {
                return;
            }
        }
        self.shrink_since_ms.store(0, Relaxed);
        let p = pass_ppm(cfg.rate_milli, picture.offered_milli);
        self.fleet_ppm.store(u64::from(p), Relaxed);
        self.fleet_offered_milli
            .store(picture.offered_milli, Relaxed);
        self.fleet_passed_milli.store(picture.passed_milli, Relaxed);
        self.fleet_nodes.store(picture.nodes.max(1), Relaxed);
        // The fleet's totals as counters that never go backwards on this node: Redis may
        // lose them (a restart), and then they start again from 0 there.
        let grow = |raw: &AtomicU64, total: &AtomicU64, now_raw: u64| {
            let before = raw.swap(now_raw, Relaxed);
            let delta = now_raw.checked_sub(before).unwrap_or(now_raw);
            total.fetch_add(delta, Relaxed);
        };
        grow(
            &self.fleet_offered_raw,
            &self.fleet_offered_total,
            picture.offered_total,
        );
        grow(
            &self.fleet_passed_raw,
            &self.fleet_passed_total,
            picture.passed_total,
        );
        self.synced_at_ms.store(now.max(1), Relaxed);
        self.p_ppm.store(u64::from(p), Relaxed);
    }

    /// How long pictures must show a smaller fleet before the node believes it.
    pub fn shrink_confirm_ms(cfg: &RateConfig) -> u64 {
        BACKOFF_MAX_MS.saturating_add(cfg.interval_ms.saturating_mul(2))
    }

    /// A sync got no usable reply.
    pub fn sync_failed(&self) {
        self.sync_errors.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self, now: u64) -> RateSnapshot {
        let synced_at = self.synced_at_ms.load(Relaxed);
        RateSnapshot {
            offered: self.offered.load(Relaxed),
            passed: self.passed.load(Relaxed),
            p_ppm: self.p_ppm.load(Relaxed) as u32,
            fleet_offered_milli: self.fleet_offered_milli.load(Relaxed),
            fleet_passed_milli: self.fleet_passed_milli.load(Relaxed),
            nodes: self.fleet_nodes.load(Relaxed),
            fleet_offered_total: self.fleet_offered_total.load(Relaxed),
            fleet_passed_total: self.fleet_passed_total.load(Relaxed),
            local_offered_milli: self.local_offered_milli.load(Relaxed),
            sync_age_ms: (synced_at != 0).then(|| now.saturating_sub(synced_at)),
            syncs: self.syncs.load(Relaxed),
            sync_errors: self.sync_errors.load(Relaxed),
            ignored: self.ignored.load(Relaxed),
        }
    }
}

// ------------------------------------------------------------------------------ Redis

/// The sync call of one rate zone.
#[derive(Debug, Clone)]
pub struct SyncScript {
    pub sha: String,
    pub key: String,
    stale_ms: u64,
    ttl_ms: u64,
}

impl SyncScript {
    pub fn new(p: &RateZoneParams) -> SyncScript {
        SyncScript {
            sha: crate::redis::sha_of(SYNC_SCRIPT),
            key: format!("{}:{{{}}}:rate", p.prefix, p.name),
            stale_ms: p.stale_ms(),
            ttl_ms: p.key_ttl_ms(),
        }
    }

    /// `SCRIPT LOAD`, sent first on every new connection.
    pub fn load_command() -> Vec<u8> {
        crate::redis::load_command_of(SYNC_SCRIPT)
    }

    pub fn call(&self, form: Form, a: &SyncArgs) -> Vec<u8> {
        let mut cmd = crate::redis::script_call(form, &self.sha, SYNC_SCRIPT);
        cmd.arg(1)
            .arg(&self.key)
            .arg(a.node_id)
            .arg(a.seq)
            .arg(a.offered)
            .arg(a.passed)
            .arg(a.own_rate_milli)
            .arg(a.window_ms)
            .arg(a.at_ms)
            .arg(self.stale_ms)
            .arg(self.ttl_ms);
        cmd.get_packed_command()
    }
}

/// The script's reply, checked.
pub fn sync_reply(v: &Value) -> Result<FleetPicture, ReplyError> {
    let x = ints(v, 8)?;
    let n = |i: usize| {
        x.get(i)
            .copied()
            .map_or(Err(ReplyError::Shape("short")), count)
    };
    let nodes = n(2)?;
    if nodes == 0 {
        return Err(ReplyError::Shape("a fleet of no nodes"));
    }
    Ok(FleetPicture {
        offered_milli: n(0)?,
        passed_milli: n(1)?,
        nodes,
        offered_total: n(3)?,
        passed_total: n(4)?,
        own_offered_milli: n(7)?,
        window_ms: n(5)?,
        accepted: match n(6)? {
            0 => false,
            1 => true,
            _ => return Err(ReplyError::Shape("bad accepted flag")),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<RateZoneParams, ConfError> {
        let words: Vec<&str> = line.split(' ').collect();
        RateZoneParams::parse(&words)
    }

    #[test]
    fn parameters_and_defaults() {
        let z = parse("api rate=15000r/s redis=10.0.0.5:6379 interval=1s timeout=900ms").unwrap();
        assert_eq!(z.rate_milli, 15_000_000);
        assert_eq!((z.interval_ms, z.timeout_ms), (1000, 900));
        assert_eq!(z.fallback_ms, 10_000);
        assert_eq!(z.local_milli, None);
        let z = parse("api rate=600r/m").unwrap();
        assert_eq!(z.rate_milli, 10_000);
        assert_eq!((z.interval_ms, z.timeout_ms), (1000, 900));
        assert!(!z.redis.configured());
        let z = parse("api rate=10r/s interval=2s redis=r:1 local=3r/s fallback=1m").unwrap();
        assert_eq!(
            (z.timeout_ms, z.local_milli, z.fallback_ms),
            (1800, Some(3000), 60_000)
        );
    }

    #[test]
    fn refusals_name_the_parameter() {
        let msg = |l: &str| parse(l).unwrap_err().to_string();
        assert!(msg("api").contains("rate="), "{}", msg("api"));
        assert!(msg("api rate=fast").contains("invalid rate \"fast\""));
        assert!(msg("api rate=10r/s interval=1s timeout=1s").contains("invalid timeout \"1s\""));
        assert!(msg("api rate=10r/s timeout=2s").contains("shorter than interval="));
        assert!(msg("api rate=10r/s interval=50ms").contains("invalid interval"));
        assert!(msg("api rate=10r/s local=5r/s").contains("requires redis="));
        assert!(msg("api rate=10r/s rate=5r/s").contains("duplicate"));
        assert!(msg("api rate=10r/s burst=5").contains("unknown parameter"));
        assert!(msg("api rate").contains("needs a value"));
        assert!(msg("a{b} rate=1r/s").contains("invalid zone name"));
    }

    #[test]
    fn probability_is_the_share_that_fits() {
        assert_eq!(pass_ppm(1000, 500), PPM);
        assert_eq!(pass_ppm(1000, 1000), PPM);
        assert_eq!(pass_ppm(1000, 4000), 250_000);
        assert_eq!(pass_ppm(15_000_000, 20_000_000), 750_000);
        // Never 0 while something is allowed; 0 only for nothing.
        assert_eq!(pass_ppm(1, u64::MAX), 1);
        assert_eq!(pass_ppm(0, 5), 0);
    }

    #[test]
    fn rates_from_cumulative_counters_are_never_negative() {
        let s = |count, at_ms| Sample { count, at_ms };
        assert_eq!(rate_milli(s(100, 1000), s(1100, 2000)), Some(1_000_000));
        assert_eq!(rate_milli(s(100, 1000), s(100, 2000)), Some(0));
        // A counter running backwards, or no time passing: no rate at all.
        assert_eq!(rate_milli(s(500, 1000), s(100, 2000)), None);
        assert_eq!(rate_milli(s(100, 2000), s(200, 2000)), None);
        assert_eq!(rate_milli(s(100, 2000), s(200, 1000)), None);
    }

    #[test]
    fn an_old_picture_ages_into_the_local_cap() {
        let (fresh, fallback) = (2000, 10_000);
        assert_eq!(aged_ppm(800_000, 200_000, 0, fresh, fallback), 800_000);
        assert_eq!(aged_ppm(800_000, 200_000, 2000, fresh, fallback), 800_000);
        assert_eq!(aged_ppm(800_000, 200_000, 7000, fresh, fallback), 500_000);
        assert_eq!(aged_ppm(800_000, 200_000, 12_000, fresh, fallback), 200_000);
        assert_eq!(aged_ppm(200_000, 800_000, 7000, fresh, fallback), 500_000);
        assert_eq!(aged_ppm(5, 9, u64::MAX, fresh, 0), 9);
    }

    #[test]
    fn ticks_land_on_the_interval_boundaries() {
        assert_eq!(window_end(10_003, 1000), 10_000);
        assert_eq!(window_end(9_998, 1000), 10_000);
        assert_eq!(window_end(10_600, 1000), 11_000);
        // Late or early by a little, the next tick is on the next boundary.
        assert_eq!(next_tick_in(10_003, 1000), 997);
        assert_eq!(next_tick_in(9_998, 1000), 1002);
        assert_eq!(next_tick_in(10_000, 250), 250);
        assert_eq!(next_tick_in(5, 0), 1);
    }

    #[test]
    fn draws_pass_in_proportion() {
        assert!(passes(PPM, u32::MAX));
        assert!(!passes(0, 0));
        let mut state = 7;
        let mut passed = 0;
        for _ in 0..1_000_000 {
            let draw = (crate::random::fast_next(&mut state) >> 32) as u32;
            if passes(250_000, draw) {
                passed += 1;
            }
        }
        assert!((248_000..252_000).contains(&passed), "{passed}");
    }

    fn cfg(fleet: bool) -> RateConfig {
        RateConfig {
            rate_milli: 1_000_000, // 1000 r/s
            local_milli: None,
            interval_ms: 1000,
            fallback_ms: 10_000,
            fleet,
            budget: RateConfig::budget_for(1_000_000, 1000),
        }
    }

    /// `n` requests spread evenly over the second before `at_ms`.
    fn offer_at(s: &RateShared, n: u64, at_ms: u64, c: &RateConfig, seed: &mut u64) -> u64 {
        (0..n)
            .filter(|i| {
                let now = at_ms.saturating_sub(1000) + i * 1000 / n;
                s.record((crate::random::fast_next(seed) >> 32) as u32, now, c)
            })
            .count() as u64
    }

    fn offer(s: &RateShared, n: u64, seed: &mut u64) -> u64 {
        // Far from any tick's measurement: no surge check applies (their time is 0).
        (0..n)
            .filter(|_| {
                s.record(
                    (crate::random::fast_next(seed) >> 32) as u32,
                    0,
                    &cfg(false),
                )
            })
            .count() as u64
    }

    #[test]
    fn alone_the_node_caps_itself_from_its_own_rate() {
        let s = RateShared::new(9, 0);
        let c = cfg(false);
        let mut seed = 1;
        // 4000 requests a second for 10 s: after the first second, ~1000 a second pass.
        let mut passed_after_first = 0;
        let mut first = 0;
        for sec in 0..10u64 {
            let passed = offer_at(&s, 4000, (sec + 1) * 1000, &c, &mut seed);
            assert_eq!(s.tick((sec + 1) * 1000, &c), None);
            if sec > 0 {
                passed_after_first += passed;
            } else {
                first = passed;
            }
        }
        assert!(
            (8_700..9_300).contains(&passed_after_first),
            "{passed_after_first}"
        );
        // The first second comes from idle: the surge guard and the budget hold it near the
        // rate, not the 4000 offered.
        assert!(first <= RateConfig::budget_for(1_000_000, 1000), "{first}");
        assert_eq!(RateConfig::budget_for(1_000_000, 1000), 1296);
        let snap = s.snapshot(10_000);
        assert_eq!(snap.p_ppm, 250_000);
        assert_eq!(snap.offered, 40_000);
        assert_eq!(snap.sync_age_ms, Some(0));
    }

    #[test]
    fn a_surge_lowers_p_before_the_next_tick() {
        let s = RateShared::new(9, 0);
        let c = cfg(true);
        // The fleet (4 nodes) offered 2000 r/s, this node 500 of them: p = 1/2.
        s.offered.store(500, Relaxed);
        s.tick(1000, &c);
        let picture = FleetPicture {
            offered_milli: 2_000_000,
            passed_milli: 1_000_000,
            nodes: 4,
            offered_total: 0,
            passed_total: 0,
            own_offered_milli: 0,
            window_ms: 1000,
            accepted: true,
        };
        s.apply(&picture, 1000, &c);
        assert_eq!(s.snapshot(1000).p_ppm, 500_000);
        // The node's own offer jumps to 10,500 r/s: p follows within the interval, to what
        // the fleet's rate with the new offer allows: 1000 / (1500 + 10,500).
        let mut seed = 5;
        for i in 0..2_100u64 {
            s.record(
                (crate::random::fast_next(&mut seed) >> 32) as u32,
                1000 + i / 10,
                &c,
            );
        }
        let p = s.snapshot(1200).p_ppm;
        assert!((80_000..90_000).contains(&p), "{p}");
        // The guard never raises p: a quieter offer leaves it for the next tick.
        s.offered.store(s.snapshot(0).offered + 254, Relaxed);
        for _ in 0..4 {
            s.record(0, 1900, &c);
        }
        assert_eq!(s.snapshot(1900).p_ppm, p);
    }

    #[test]
    fn the_fleet_picture_sets_p_and_ages_without_syncs() {
        let s = RateShared::new(9, 0);
        let c = cfg(true);
        offer(&s, 500, &mut 3);
        // First tick: no picture yet; the local cap is the whole rate (no nodes seen): p = 1.
        let args = s.tick(1000, &c).unwrap();
        assert_eq!(
            (args.seq, args.offered, args.own_rate_milli),
            (1, 500, 500_000)
        );
        assert_eq!(s.snapshot(1000).p_ppm, PPM);
        // The fleet offers 4000 r/s over 4 nodes: p = 1/4 at once.
        let picture = FleetPicture {
            offered_milli: 4_000_000,
            passed_milli: 1_000_000,
            nodes: 4,
            offered_total: 10,
            passed_total: 5,
            own_offered_milli: 0,
            window_ms: 1000,
            accepted: true,
        };
        s.apply(&picture, 1010, &c);
        assert_eq!(s.snapshot(1010).p_ppm, 250_000);
        // No picture for a while: the fleet's p for two intervals, then toward the local cap
        // (1000/4 = 250 r/s against this node's own 500 r/s: p = 1/2), reached after fallback.
        offer(&s, 500, &mut 3);
        s.tick(2000, &c).unwrap();
        assert_eq!(s.snapshot(2000).p_ppm, 250_000);
        s.tick(3010, &c).unwrap();
        assert_eq!(s.snapshot(3010).p_ppm, 250_000);
        let offered = s.snapshot(3010).offered;
        s.offered.store(offered + 2_500, Relaxed); // 500 r/s over the next 5 s
        s.tick(8_010, &c).unwrap();
        // Half way through the fallback: half way from the fleet's p to the local one.
        assert_eq!(s.snapshot(8_010).p_ppm, 375_000);
        s.offered.store(offered + 5_500, Relaxed);
        s.tick(14_010, &c).unwrap();
        assert_eq!(s.snapshot(14_010).p_ppm, 500_000);
        // A picture again: back to the fleet's p.
        s.apply(&picture, 14_020, &c);
        assert_eq!(s.snapshot(14_020).p_ppm, 250_000);
        // Sequence numbers grow with every sync; a window is reported once.
        assert_eq!(s.tick(15_000, &c).unwrap().seq, 6);
        assert_eq!(s.tick(15_001, &c), None);
        let next = s.tick(15_999, &c).unwrap();
        assert_eq!((next.seq, next.window_ms, next.at_ms), (7, 16_000, 15_999));
    }

    #[test]
    fn a_fleet_that_shrinks_is_believed_after_the_reconnect_delays() {
        let s = RateShared::new(9, 0);
        let c = cfg(true);
        let pic = |offered, nodes| FleetPicture {
            offered_milli: offered,
            passed_milli: 0,
            nodes,
            offered_total: 0,
            passed_total: 0,
            own_offered_milli: 0,
            window_ms: 0,
            accepted: true,
        };
        s.apply(&pic(4_000_000, 3), 1000, &c);
        assert_eq!(s.snapshot(1000).p_ppm, 250_000);
        // Redis restarted empty: this node reports first and sees itself alone.
        s.apply(&pic(1_500_000, 1), 2000, &c);
        assert_eq!(s.snapshot(2000).p_ppm, 250_000);
        // A full picture again: applied.
        s.apply(&pic(5_000_000, 3), 3000, &c);
        assert_eq!(s.snapshot(3000).p_ppm, 200_000);
        // A node really left: pictures with fewer nodes for 3 s + 2 intervals, then applied.
        assert_eq!(RateShared::shrink_confirm_ms(&c), 5000);
        for t in [4000, 5000, 8000, 8999] {
            s.apply(&pic(2_000_000, 2), t, &c);
            assert_eq!(s.snapshot(t).p_ppm, 200_000);
        }
        s.apply(&pic(2_000_000, 2), 9000, &c);
        assert_eq!(s.snapshot(9000).p_ppm, 500_000);
        assert_eq!(s.snapshot(9000).syncs, 8);
    }

    #[test]
    fn the_fleets_totals_never_go_backwards_here() {
        let s = RateShared::new(9, 0);
        let c = cfg(true);
        let pic = |offered_total| FleetPicture {
            offered_milli: 1,
            passed_milli: 0,
            nodes: 1,
            offered_total,
            passed_total: offered_total / 2,
            own_offered_milli: 0,
            window_ms: 0,
            accepted: true,
        };
        s.apply(&pic(1000), 1000, &c);
        s.apply(&pic(1500), 2000, &c);
        assert_eq!(s.snapshot(2000).fleet_offered_total, 1500);
        // Redis restarted: its totals start again from 0; here they go on.
        s.apply(&pic(200), 3000, &c);
        assert_eq!(s.snapshot(3000).fleet_offered_total, 1700);
        assert_eq!(s.snapshot(3000).fleet_passed_total, 850);
        s.apply(&pic(300), 4000, &c);
        assert_eq!(s.snapshot(4000).fleet_offered_total, 1800);
    }

    #[test]
    fn sync_calls_and_replies() {
        let z = parse("api rate=100r/s redis=127.0.0.1:6379 prefix=eu").unwrap();
        let script = SyncScript::new(&z);
        assert_eq!(script.key, "eu:{api}:rate");
        assert_eq!(crate::redis::hash_tag(&script.key), Some("api"));
        let args = SyncArgs {
            node_id: 77,
            seq: 3,
            offered: 1000,
            passed: 400,
            own_rate_milli: 5,
            window_ms: 2000,
            at_ms: 2003,
        };
        let cmd = script.call(Form::Sha, &args);
        let (v, used) = crate::resp::parse(&cmd).unwrap().unwrap();
        assert_eq!(used, cmd.len());
        let Value::Array(items) = v else { panic!() };
        assert_eq!(items.len(), 13);
        let arr = |x: &[i64]| Value::Array(x.iter().map(|&i| Value::Int(i)).collect());
        let p = sync_reply(&arr(&[4_000_000, 1_000_000, 3, 50, 20, 7000, 1, 900])).unwrap();
        assert_eq!((p.offered_milli, p.nodes, p.accepted), (4_000_000, 3, true));
        assert_eq!((p.window_ms, p.own_offered_milli), (7000, 900));
        for bad in [
            arr(&[1, 2, 3]),
            arr(&[-1, 0, 1, 0, 0, 0, 1, 0]),
            arr(&[1, 0, 0, 0, 0, 0, 1, 0]),
            arr(&[1, 0, 1, 0, 0, 0, 2, 0]),
            arr(&[1, 0, 1, 0, 0, 0, 1, -5]),
            Value::Error(b"NOSCRIPT x".to_vec()),
            Value::Nil,
        ] {
            assert!(sync_reply(&bad).is_err(), "{bad:?}");
        }
    }
}
