//! The `smart_limit_rate_zone` directive's parameters.

use super::{RateConfig, DEFAULT_INTERVAL_MS, FALLBACK_INTERVALS};
use crate::config::{
    key_prefix, parse_rate, parse_time_ms, split_param_in, store_timeout, sync_interval, ConfError,
    ParseError, DEFAULT_PREFIX,
};
use crate::redis::params::{RedisParams, REDIS_PARAMS};
use crate::sync::STALE_INTERVALS;

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
fn rate_value(value: &str) -> Result<u64, ParseError> {
    let per_sec = parse_rate(value)?;
    Ok(((per_sec * 1000.0).round() as u64).max(1))
}

impl RateZoneParams {
    /// Parses the arguments after the directive name: the zone name, then `key=value`.
    pub fn parse(args: &[&str]) -> Result<RateZoneParams, ConfError> {
        let (name, rest) = args.split_first().ok_or(ConfError::MissingName)?;
        crate::config::check_zone_name(name)?;
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
                    reason: ParseError::ShorterThan {
                        what: "interval=",
                        ms: z.interval_ms,
                    },
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

    pub(super) fn set(&mut self, param: &str, value: &str) -> Result<(), ParseError> {
        match param {
            "rate" => self.rate_milli = rate_value(value)?,
            p if RedisParams::knows(p) => self.redis.set(p, value)?,
            "prefix" => self.prefix = key_prefix(value)?,
            "interval" => self.interval_ms = sync_interval(value)?,
            "timeout" => self.timeout_ms = store_timeout(value)?,
            "local" => self.local_milli = Some(rate_value(value)?),
            "fallback" => {
                let ms = parse_time_ms(value)?;
                if ms == 0 || ms > 24 * 3_600_000 {
                    return Err(ParseError::Range("must be between 1ms and 24h"));
                }
                self.fallback_ms = ms;
            }
            _ => return Err(ParseError::Syntax("unknown parameter")),
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
