//! The `smart_limit_zone` directive: a room's parameters, their defaults and the rules that
//! tie them together (what `nginx -t` refuses). Above the stores: a zone names its store and
//! how to reach Redis.

#[cfg(test)]
mod tests;

use crate::capacity::Auto;
use crate::challenge::{parse_bits, Bits};
use crate::config::{
    check_zone_name, key_prefix, parse_digits, parse_rate, parse_size, positive, positive_time,
    split_param_in, store_timeout, sync_interval, ConfError, ParseError, DEFAULT_PREFIX,
};
use crate::redis::params::{RedisParams, REDIS_PARAMS};
use crate::room::gcra::Rate;

/// Where a room keeps its shared state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// nginx shared memory: one node, no other service.
    Shm,
    /// Redis / Valkey / Redis Cluster shared by a fleet.
    Redis,
}

/// How long an admitted session passes (SPEC S5, §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmitMode {
    /// Fixed period from admission, in ms (the source article's 10 minutes).
    Grant(u64),
    /// Renewed by every request, in ms (Cloudflare's session duration).
    Session(u64),
}

/// What a decision does when the store fails or times out (SPEC S10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Let the request through.
    Open,
    /// Answer with the waiting response.
    Closed,
    /// Decide with the node's own shared-memory state.
    Local,
}

/// Default shared memory zone size: 10m.
pub const DEFAULT_SIZE: usize = 10 << 20;
/// Smallest accepted zone size: 32k (a few nginx pages for the slab allocator and state).
pub const MIN_SIZE: usize = 32 << 10;
/// Default `max_active`.
pub const DEFAULT_MAX_ACTIVE: u64 = 100;
/// Default grant: 10 minutes.
pub const DEFAULT_GRANT_MS: u64 = 10 * 60 * 1000;
/// Default presence: 20 seconds.
pub const DEFAULT_PRESENCE_MS: u64 = 20 * 1000;
/// Default keep ([S27]): how long an absent waiter's arrival is kept. Five minutes covers a
/// locked phone, an app switch, a train tunnel (Cloudflare keeps a place as long after the last
/// refresh).
pub const DEFAULT_KEEP_MS: u64 = 5 * 60 * 1000;
/// Longest keep: a kept place holds memory (a slot of the ring, or Redis entries) that long.
pub const MAX_KEEP_MS: u64 = 60 * 60 * 1000;
/// Default active window: 1 minute.
pub const DEFAULT_ACTIVE_WINDOW_MS: u64 = 60 * 1000;
/// Default page pass ([S29]): a browser asks for a page's sub-resources within milliseconds
/// of its document, and a slow phone on a busy network within a few seconds.
pub const DEFAULT_PAGE_PASS_MS: u64 = 10 * 1000;
/// Longest page pass: a pass lets a page's sub-resources past the rate limit, so it stays
/// short (it is not an admission).
pub const MAX_PAGE_PASS_MS: u64 = 60 * 1000;
/// Default flood control: 1 place a second per client address, 60 at once.
pub const DEFAULT_FLOOD: RateParam = RateParam {
    per_sec: 1.0,
    burst: 60,
};
/// Default session request rate: 20 a second, 200 at once (a heavy page).
pub const DEFAULT_SESSION_RATE: RateParam = RateParam {
    per_sec: 20.0,
    burst: 200,
};
/// Default poll rate of one waiting ticket, per worker: 2 a second, 10 at once.
pub const DEFAULT_POLL: RateParam = RateParam {
    per_sec: 2.0,
    burst: 10,
};
/// Default cap of a Redis line.
pub const DEFAULT_MAX_LINE: u64 = 1_000_000;
/// Default status of the "invite only" answer (`invite_status=`).
pub const DEFAULT_INVITE_STATUS: u16 = 403;
/// Default store timeout: 200 ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 200;
/// The parsed `smart_limit_zone` directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneParams {
    /// Room / zone name.
    pub name: String,
    /// Shared memory size in bytes (`size=`, default 10m).
    pub size: usize,
    /// `store=shm|redis`, default shm.
    pub store: StoreKind,
    /// How to reach Redis (`redis=`, `redis_user=`, `redis_tls=`, `sentinel=`, ...).
    pub redis: RedisParams,
    /// `prefix=`, Redis key prefix, default "smart_limit".
    pub prefix: String,
    /// `max_active=`, distinct active admitted sessions, default 100 (with `auto`: the lower
    /// bound, where the room starts).
    pub max_active: u64,
    /// `max_active=auto:MIN..MAX` with `origin_latency=` ([S26]): the value moves with the
    /// origin's measurements (shared-memory store only, for now).
    pub auto: Option<Auto>,
    /// `origin_latency=` as written (folded into `auto` once every parameter is read).
    pub origin_latency_ms: Option<u64>,
    /// `new_per_minute=`, admissions per minute, unlimited when absent.
    pub new_per_minute: Option<u64>,
    /// `grant=` (default 10m) or `session=`.
    pub admit: AdmitMode,
    /// `presence=`, how long a waiting session keeps its place unseen, default 20s.
    pub presence_ms: u64,
    /// `keep=`, how long an absent waiter's arrival is kept ([S27]), default 5m, at most 1h,
    /// never shorter than `presence=`; None: `keep=off` (an absent waiter's place is gone
    /// after `presence`, as before keep existed).
    pub keep_ms: Option<u64>,
    /// `active_window=`, the window active sessions are counted over, default 1m.
    pub active_window_ms: u64,
    /// `page_pass=`, how long a page's sub-resources pass the room after its document was
    /// served under the rate limit (`smart_limit_documents`, [S29]); default 10s, 1s..1m.
    pub page_pass_ms: u64,
    /// `timeout=`, store round-trip bound, default 200ms, 1ms..=60s.
    pub timeout_ms: u64,
    /// `on_error=open|closed|local`, default local.
    pub on_error: OnError,
    /// `flood=RATE|off` and `flood_burst=N`: how fast one client address may take places
    /// (default 1r/s with a burst of 60); None when off.
    pub flood: Option<RateParam>,
    /// `flood_key=VALUE`: what identifies a client for flood control, usually with variables
    /// (default: the client address, an IPv6 address by its /64).
    pub flood_key: Option<String>,
    /// `session_rate=RATE|off` and `session_burst=N`: requests per admitted session (default
    /// 20r/s with a burst of 200); None when off.
    pub session_rate: Option<RateParam>,
    /// `poll=RATE|off` and `poll_burst=N`: how often one waiting ticket is answered by the
    /// store, per worker (default 2r/s with a burst of 10); faster polls get the last answer.
    pub poll: Option<RateParam>,
    /// `max_line=N`: most places in a Redis line (default 1000000; the shm line is bounded by
    /// `size=`).
    pub max_line: u64,
    /// `sync=TIME` (with `store=redis`): every request is decided on this node's shared memory,
    /// and the node meets the fleet in Redis once per TIME (100ms..60s). None: every decision
    /// is one Redis call (exact FIFO across the fleet).
    pub sync_ms: Option<u64>,
    /// `challenge=pow|off` and `challenge_bits=N|auto`: a proof of work to take a place
    /// ([S19], see `challenge`); None when off (the default).
    pub challenge: Option<Bits>,
    /// `challenge_noscript=on|off`: whether a ticket may take its place without a proof once
    /// its no-script wait from its first challenge is over (browsers without JavaScript; on
    /// by default). Off: every place needs a proof.
    pub challenge_noscript: bool,
    /// `one_place_per=VALUE`: clients with the same non-empty value share one session id, so
    /// one place in the line and one admitted session (nginx text, usually a variable such as
    /// `$cookie_account`; compiled by the module).
    pub one_place_per: Option<String>,
    /// `invite=FILE` ([S28]): the line is invite-only; a place takes an enqueue token signed
    /// with the key in FILE (an Ed25519 public key in PEM: EdDSA; anything else: an HS256
    /// secret), one place per token id. The module reads the file.
    pub invite: Option<String>,
    /// `invite_status=CODE`: the status of the "invite only" answer (default 403).
    pub invite_status: u16,
}

/// A rate with a burst, as written: `rate=10r/s` (or `r/m`) and `..._burst=N`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateParam {
    /// Requests per second.
    pub per_sec: f64,
    pub burst: u64,
}

impl RateParam {
    pub fn rate(&self) -> Rate {
        Rate::per_sec(self.per_sec, self.burst)
    }
}

impl Eq for RateParam {}

/// Parameter names, for duplicate detection and "needs a value" messages (the Redis
/// connection's are [`REDIS_PARAMS`]).
const PARAMS: &[(&str, &str)] = &[
    ("size", "size=10m"),
    ("store", "store=redis"),
    ("prefix", "prefix=smart_limit"),
    ("max_active", "max_active=100"),
    ("origin_latency", "origin_latency=400ms"),
    ("new_per_minute", "new_per_minute=60"),
    ("grant", "grant=10m"),
    ("session", "session=10m"),
    ("presence", "presence=20s"),
    ("keep", "keep=5m"),
    ("active_window", "active_window=1m"),
    ("page_pass", "page_pass=10s"),
    ("timeout", "timeout=200ms"),
    ("on_error", "on_error=local"),
    ("flood", "flood=1r/s"),
    ("flood_burst", "flood_burst=60"),
    ("flood_key", "flood_key=$binary_remote_addr"),
    ("session_rate", "session_rate=20r/s"),
    ("session_burst", "session_burst=200"),
    ("poll", "poll=2r/s"),
    ("poll_burst", "poll_burst=10"),
    ("max_line", "max_line=1000000"),
    ("sync", "sync=1s"),
    ("challenge", "challenge=pow"),
    ("challenge_bits", "challenge_bits=auto"),
    ("challenge_noscript", "challenge_noscript=off"),
    ("one_place_per", "one_place_per=$cookie_account"),
    ("invite", "invite=/etc/nginx/presale.pub"),
    ("invite_status", "invite_status=403"),
];

impl ZoneParams {
    /// A zone with every parameter at its default.
    pub fn defaults(name: &str) -> ZoneParams {
        ZoneParams {
            name: name.to_string(),
            size: DEFAULT_SIZE,
            store: StoreKind::Shm,
            redis: RedisParams::default(),
            prefix: DEFAULT_PREFIX.to_string(),
            max_active: DEFAULT_MAX_ACTIVE,
            auto: None,
            origin_latency_ms: None,
            new_per_minute: None,
            admit: AdmitMode::Grant(DEFAULT_GRANT_MS),
            presence_ms: DEFAULT_PRESENCE_MS,
            keep_ms: Some(DEFAULT_KEEP_MS),
            active_window_ms: DEFAULT_ACTIVE_WINDOW_MS,
            page_pass_ms: DEFAULT_PAGE_PASS_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            on_error: OnError::Local,
            flood: Some(DEFAULT_FLOOD),
            flood_key: None,
            session_rate: Some(DEFAULT_SESSION_RATE),
            poll: Some(DEFAULT_POLL),
            max_line: DEFAULT_MAX_LINE,
            sync_ms: None,
            challenge: None,
            challenge_noscript: true,
            one_place_per: None,
            invite: None,
            invite_status: DEFAULT_INVITE_STATUS,
        }
    }

    /// Parses the directive arguments after the directive name: the zone name, then
    /// `key=value` parameters in any order. See the module doc and SPEC §3 for the rules.
    pub fn parse(args: &[&str]) -> Result<ZoneParams, ConfError> {
        let (name, rest) = args.split_first().ok_or(ConfError::MissingName)?;
        check_zone_name(name)?;
        let mut z = ZoneParams::defaults(name);
        // The argument that set each parameter, to detect duplicates and to quote in
        // cross-parameter messages.
        let mut seen: Vec<(&'static str, &str)> = Vec::new();
        for &arg in rest {
            let (param, value) = split_param(arg)?;
            if seen.iter().any(|(k, _)| *k == param) {
                return Err(ConfError::Duplicate(arg.to_string()));
            }
            if let Some(conflict) = conflicting(param, &seen) {
                return Err(ConfError::Conflict(conflict.to_string(), arg.to_string()));
            }
            seen.push((param, arg));
            z.set(param, value).map_err(|reason| ConfError::Invalid {
                param,
                value: value.to_string(),
                reason,
            })?;
        }
        z.check_combination(&seen)?;
        Ok(z)
    }

    /// Sets one parameter from its value; the error is the reason only.
    fn set(&mut self, param: &str, value: &str) -> Result<(), ParseError> {
        match param {
            "size" => self.size = zone_size(value)?,
            "store" => self.store = store_kind(value)?,
            p if RedisParams::knows(p) => self.redis.set(p, value)?,
            "prefix" => self.prefix = key_prefix(value)?,
            "max_active" => match crate::capacity::parse_auto(value) {
                Some(auto) => {
                    let auto = auto?;
                    self.max_active = auto.min;
                    self.auto = Some(auto);
                }
                None => {
                    self.max_active = positive(value)?;
                    self.auto = None;
                }
            },
            "origin_latency" => self.origin_latency_ms = Some(origin_latency(value)?),
            "new_per_minute" => self.new_per_minute = Some(positive(value)?),
            "grant" => self.admit = AdmitMode::Grant(positive_time(value)?),
            "session" => self.admit = AdmitMode::Session(positive_time(value)?),
            "presence" => self.presence_ms = positive_time(value)?,
            "keep" => self.keep_ms = keep(value)?,
            "active_window" => self.active_window_ms = positive_time(value)?,
            "page_pass" => self.page_pass_ms = page_pass(value)?,
            "timeout" => self.timeout_ms = store_timeout(value)?,
            "on_error" => self.on_error = on_error(value)?,
            "flood" => self.flood = rate_or_off(value, self.flood, DEFAULT_FLOOD)?,
            "flood_burst" => set_burst(&mut self.flood, value)?,
            "flood_key" => self.flood_key = Some(flood_key(value)?),
            "session_rate" => {
                self.session_rate = rate_or_off(value, self.session_rate, DEFAULT_SESSION_RATE)?
            }
            "session_burst" => set_burst(&mut self.session_rate, value)?,
            "poll" => self.poll = rate_or_off(value, self.poll, DEFAULT_POLL)?,
            "poll_burst" => set_burst(&mut self.poll, value)?,
            "max_line" => self.max_line = positive(value)?,
            "sync" => self.sync_ms = Some(sync_interval(value)?),
            "challenge" => {
                self.challenge = match value {
                    // (challenge_bits= may have come first.)
                    "pow" => Some(self.challenge.unwrap_or(Bits::Auto)),
                    "off" => None,
                    _ => return Err(ParseError::Syntax("expected pow or off")),
                }
            }
            "one_place_per" => self.one_place_per = Some(flood_key(value)?),
            "invite" if value.is_empty() => return Err(ParseError::Syntax("expected a file")),
            "invite" => self.invite = Some(value.to_string()),
            "invite_status" => self.invite_status = refusal_status(value)?,
            "challenge_bits" => {
                let bits = parse_bits(value)?;
                self.challenge = Some(bits);
            }
            "challenge_noscript" => {
                self.challenge_noscript = match value {
                    "on" => true,
                    "off" => false,
                    _ => return Err(ParseError::Syntax("expected on or off")),
                }
            }
            // Unreachable: `param` comes from PARAMS, and every entry is handled above.
            _ => return Err(ParseError::Syntax("unknown parameter")),
        }
        Ok(())
    }

    /// Rules between parameters, once all are read.
    fn check_combination(&mut self, seen: &[(&str, &str)]) -> Result<(), ConfError> {
        let arg_of = |k: &str| seen.iter().find(|(p, _)| *p == k).map(|(_, a)| *a);
        let store_redis = self.store == StoreKind::Redis;
        if store_redis && !self.redis.configured() {
            let store_arg = arg_of("store").unwrap_or("store=redis");
            return Err(ConfError::Requires(
                store_arg.to_string(),
                "redis=HOST:PORT or sentinel=HOST:PORT with master=NAME",
            ));
        }
        if !store_redis {
            // Redis-only settings without the Redis store are most likely a mistake (a
            // forgotten store=redis); refuse rather than silently run node-local.
            let redis_only = RedisParams::first_arg(arg_of)
                .or_else(|| arg_of("prefix"))
                .or_else(|| arg_of("max_line"))
                .or_else(|| arg_of("sync"));
            if let Some(a) = redis_only {
                return Err(ConfError::Requires(a.to_string(), "store=redis"));
            }
        }
        self.redis.check(arg_of)?;
        self.check_sync(arg_of)?;
        self.check_keep(arg_of)?;
        self.check_auto(arg_of)?;
        // challenge_bits= and challenge_noscript= tune challenge=pow, which must be there and
        // on.
        for b in [arg_of("challenge_bits"), arg_of("challenge_noscript")]
            .into_iter()
            .flatten()
        {
            match arg_of("challenge") {
                Some(c) if c.ends_with("=pow") => {}
                Some(c) => return Err(ConfError::Conflict(c.to_string(), b.to_string())),
                None => return Err(ConfError::Requires(b.to_string(), "challenge=pow")),
            }
        }
        if let (Some(s), None) = (arg_of("invite_status"), arg_of("invite")) {
            return Err(ConfError::Requires(s.to_string(), "invite=FILE"));
        }
        // An invite-only line keys its sessions by the enqueue token's id; a user key would
        // be a second, contradicting one.
        if let (Some(i), Some(o)) = (arg_of("invite"), arg_of("one_place_per")) {
            return Err(ConfError::Conflict(i.to_string(), o.to_string()));
        }
        // A burst or key for a limit that is off is a contradiction, whatever the order.
        for (burst, limit, on) in [
            ("flood_burst", "flood", self.flood.is_some()),
            ("flood_key", "flood", self.flood.is_some()),
            ("session_burst", "session_rate", self.session_rate.is_some()),
            ("poll_burst", "poll", self.poll.is_some()),
        ] {
            if let (Some(b), false) = (arg_of(burst), on) {
                let off = arg_of(limit).unwrap_or(limit);
                return Err(ConfError::Conflict(off.to_string(), b.to_string()));
            }
        }
        Ok(())
    }

    /// `sync=`: a sync that has not answered by `timeout=` is abandoned, and the next one starts
    /// an interval later, so the timeout must be shorter than the interval (then two syncs of a
    /// node never overlap). A zone without `timeout=` gets the shorter of its default and 9/10
    /// of the interval.
    fn check_sync<'a>(
        &mut self,
        arg_of: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<(), ConfError> {
        let Some(sync_ms) = self.sync_ms else {
            return Ok(());
        };
        match arg_of("timeout") {
            Some(arg) if self.timeout_ms >= sync_ms => Err(ConfError::Invalid {
                param: "timeout",
                value: arg.trim_start_matches("timeout=").to_string(),
                reason: ParseError::ShorterThan {
                    what: "sync=",
                    ms: sync_ms,
                },
            }),
            Some(_) => Ok(()),
            None => {
                self.timeout_ms = self.timeout_ms.min(sync_ms * 9 / 10).max(1);
                Ok(())
            }
        }
    }

    /// `origin_latency=` tunes `max_active=auto` and means nothing without it.
    fn check_auto<'a>(
        &mut self,
        arg_of: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<(), ConfError> {
        let latency = arg_of("origin_latency");
        match (self.auto.as_mut(), latency) {
            (None, Some(l)) => Err(ConfError::Requires(l.to_string(), "max_active=auto")),
            (Some(auto), _) => {
                auto.target_ms = self.origin_latency_ms.unwrap_or(auto.target_ms);
                Ok(())
            }
            (None, None) => Ok(()),
        }
    }

    /// `keep=`: a kept place outlives its presence (a keep shorter than `presence=` would
    /// forget a person the room still counts as present). Without `keep=`, a `presence=` past
    /// the default keep raises the keep with it.
    fn check_keep<'a>(
        &mut self,
        arg_of: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<(), ConfError> {
        let Some(k) = arg_of("keep") else {
            self.keep_ms = self.keep_ms.map(|k| k.max(self.presence_ms));
            return Ok(());
        };
        match self.keep_ms {
            Some(ms) if ms < self.presence_ms => Err(ConfError::Invalid {
                param: "keep",
                value: k.trim_start_matches("keep=").to_string(),
                reason: ParseError::Range("must not be shorter than presence= (default 20s)"),
            }),
            _ => Ok(()),
        }
    }

    /// How long an absent waiter's arrival is kept, in ms: `keep=`, or `presence=` when off.
    pub fn effective_keep_ms(&self) -> u64 {
        let keep = self.keep_ms.unwrap_or(self.presence_ms);
        crate::room::rules::kept_ms(keep, self.presence_ms)
    }

    /// The admitted period in ms, whichever mode it is.
    pub fn admit_ms(&self) -> u64 {
        match self.admit {
            AdmitMode::Grant(ms) | AdmitMode::Session(ms) => ms,
        }
    }
}

/// `key=value` split, with the parameter's canonical name; a known parameter without a value
/// gets an example.
fn split_param(arg: &str) -> Result<(&'static str, &str), ConfError> {
    split_param_in(PARAMS, arg).or_else(|e| match e {
        ConfError::Unknown(_) => split_param_in(REDIS_PARAMS, arg),
        e => Err(e),
    })
}

/// The earlier argument that excludes `param` (`grant` and `session`).
fn conflicting<'a>(param: &str, seen: &[(&str, &'a str)]) -> Option<&'a str> {
    let other = match param {
        "grant" => "session",
        "session" => "grant",
        _ => return None,
    };
    seen.iter().find(|(k, _)| *k == other).map(|(_, a)| *a)
}

fn zone_size(value: &str) -> Result<usize, ParseError> {
    let n = parse_size(value)?;
    if n < MIN_SIZE {
        return Err(ParseError::Range("must be at least 32k"));
    }
    Ok(n)
}

fn store_kind(value: &str) -> Result<StoreKind, ParseError> {
    if value.eq_ignore_ascii_case("shm") {
        Ok(StoreKind::Shm)
    } else if value.eq_ignore_ascii_case("redis") {
        Ok(StoreKind::Redis)
    } else {
        Err(ParseError::Syntax("expected shm or redis"))
    }
}

fn on_error(value: &str) -> Result<OnError, ParseError> {
    if value.eq_ignore_ascii_case("open") {
        Ok(OnError::Open)
    } else if value.eq_ignore_ascii_case("closed") {
        Ok(OnError::Closed)
    } else if value.eq_ignore_ascii_case("local") {
        Ok(OnError::Local)
    } else {
        Err(ParseError::Syntax("expected open, closed or local"))
    }
}

/// `RATE` or `off`, keeping a burst already given.
fn rate_or_off(
    value: &str,
    current: Option<RateParam>,
    default: RateParam,
) -> Result<Option<RateParam>, ParseError> {
    if value == "off" {
        return Ok(None);
    }
    let per_sec = parse_rate(value).map_err(|e| ParseError::OrOff(Box::new(e)))?;
    Ok(Some(RateParam {
        per_sec,
        burst: current.map_or(default.burst, |c| c.burst),
    }))
}

/// A `..._burst=N` (0 allowed: no burst above the rate).
fn set_burst(limit: &mut Option<RateParam>, value: &str) -> Result<(), ParseError> {
    let n = match parse_digits(value) {
        Ok(n) if n <= 1_000_000 => n,
        Ok(_) | Err(ParseError::Overflow) => return Err(ParseError::Overflow),
        Err(_) => return Err(ParseError::Syntax("expected a number")),
    };
    // Off stays off (check_combination refuses a burst for a limit that is off).
    if let Some(l) = limit.as_mut() {
        l.burst = n;
    }
    Ok(())
}

/// A flood key: nginx text, usually with variables (compiled by the module).
fn flood_key(value: &str) -> Result<String, ParseError> {
    if value.is_empty() {
        return Err(ParseError::Syntax(
            "expected a value, e.g. $binary_remote_addr",
        ));
    }
    Ok(value.to_string())
}

/// `invite_status=`: a client or server error status, 400 to 599.
fn refusal_status(value: &str) -> Result<u16, ParseError> {
    match parse_digits(value)? {
        n @ 400..=599 => u16::try_from(n).map_err(|_| ParseError::Status),
        _ => Err(ParseError::Syntax("expected a status code from 400 to 599")),
    }
}

/// `page_pass=`: 1s to 1m.
/// `keep=TIME|off`: at most [`MAX_KEEP_MS`].
/// `origin_latency=`: 1ms to 1m.
fn origin_latency(value: &str) -> Result<u64, ParseError> {
    match positive_time(value)? {
        ms if ms <= 60_000 => Ok(ms),
        _ => Err(ParseError::Range("must be at most 1m")),
    }
}

fn keep(value: &str) -> Result<Option<u64>, ParseError> {
    if value == "off" {
        return Ok(None);
    }
    match positive_time(value) {
        Ok(ms) if ms <= MAX_KEEP_MS => Ok(Some(ms)),
        Ok(_) => Err(ParseError::Range("must be at most 1h, or off")),
        Err(e) => Err(ParseError::OrOff(Box::new(e))),
    }
}

fn page_pass(value: &str) -> Result<u64, ParseError> {
    match positive_time(value)? {
        ms if (1000..=MAX_PAGE_PASS_MS).contains(&ms) => Ok(ms),
        _ => Err(ParseError::Range("must be between 1s and 1m")),
    }
}
