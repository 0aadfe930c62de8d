//! Configuration value parsers: nginx-style sizes and times, the waiting answer's status
//! code, `HOST:PORT` addresses, and the parameters of the `smart_limit_zone` directive.
//!
//! These run at configuration time (`nginx -t`), so their job is to refuse every bad value
//! with a message that says which parameter is wrong and quotes what was written; the FFI
//! layer only prefixes the directive name (SPEC §3). [`ParseError`] messages are the reason
//! alone ("expected a size like 512k, 10m or 1g"); [`ConfError`] adds the parameter and the
//! quoted value. Nothing here panics, whatever the input.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use std::fmt;
use thiserror::Error;

use crate::redis_params::{RedisParams, REDIS_PARAMS};

/// Why a single value did not parse. The message is the reason only; the caller names the
/// parameter and quotes the value (see [`ConfError`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// Nothing was written.
    #[error("empty value")]
    Empty,
    /// The text does not have the expected shape; the string says what was expected.
    #[error("{0}")]
    Syntax(&'static str),
    /// The number does not fit.
    #[error("value too large")]
    Overflow,
    /// A well-formed status code that is not one of the allowed ones.
    #[error("expected one of 200, 202, 429, 503")]
    Status,
    /// A page template uses `{{name}}` placeholders that do not exist; lists them.
    #[error("unknown placeholder {0} (known: {{{{position}}}}, {{{{eta_seconds}}}}, {{{{eta_text}}}}, {{{{refresh_seconds}}}}, {{{{room}}}}, {{{{queue_length}}}}, {{{{status}}}}, {{{{updated_at}}}})")]
    UnknownPlaceholder(String),
}

/// Why the `smart_limit_zone` arguments were refused. Every message names the parameter and
/// quotes the offending text; the FFI layer prefixes the directive name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfError {
    /// No arguments at all.
    #[error("missing zone name")]
    MissingName,
    /// The zone name has characters or a length that are not allowed.
    #[error("invalid zone name \"{}\": expected 1 to {MAX_NAME_LEN} characters from A-Z a-z 0-9 _ -", Quoted(.0))]
    BadName(String),
    /// A parameter this directive does not know (the whole argument is quoted).
    #[error("unknown parameter \"{}\"", Quoted(.0))]
    Unknown(String),
    /// A known parameter written without `=value`.
    #[error("parameter \"{}\" needs a value, e.g. {}", Quoted(.param), .example)]
    MissingValue {
        /// The parameter name as written.
        param: String,
        /// An example of a correct argument.
        example: &'static str,
    },
    /// The same parameter given twice (the second occurrence is quoted).
    #[error("duplicate parameter \"{}\"", Quoted(.0))]
    Duplicate(String),
    /// A value that does not parse or is out of range.
    #[error("invalid {param} \"{}\": {reason}", Quoted(.value))]
    Invalid {
        /// Parameter name.
        param: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong / what was expected.
        reason: String,
    },
    /// Two parameters that exclude each other (both arguments quoted).
    #[error("\"{}\" and \"{}\" cannot be used together", Quoted(.0), Quoted(.1))]
    Conflict(String, String),
    /// A required parameter is missing (what to write, with an example).
    #[error("needs {0}")]
    Needs(&'static str),
    /// A parameter that only makes sense with another one (argument quoted, then the requirement).
    #[error("\"{}\" requires {}", Quoted(.0), .1)]
    Requires(String, &'static str),
}

/// Displays user text between quotes with quotes, backslashes and control characters escaped,
/// so a message is always one readable log line.
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '"' | '\\' => write!(f, "\\{c}")?,
                c if c.is_control() => write!(f, "{}", c.escape_default())?,
                c => write!(f, "{c}")?,
            }
        }
        Ok(())
    }
}

/// Parses an nginx size: decimal digits with an optional `k`/`K` (KiB), `m`/`M` (MiB) or
/// `g`/`G` (GiB) suffix. `10m` is 10485760. Overflow is an error, not a wrap.
pub fn parse_size(s: &str) -> Result<usize, ParseError> {
    const EXPECTED: &str = "expected a size like 512k, 10m or 1g";
    if s.is_empty() {
        return Err(ParseError::Empty);
    }
    let (digits, mult): (&str, u64) = if let Some(d) = s.strip_suffix(['k', 'K']) {
        (d, 1 << 10)
    } else if let Some(d) = s.strip_suffix(['m', 'M']) {
        (d, 1 << 20)
    } else if let Some(d) = s.strip_suffix(['g', 'G']) {
        (d, 1 << 30)
    } else {
        (s, 1)
    };
    let n = parse_digits(digits).map_err(|e| match e {
        ParseError::Overflow => ParseError::Overflow,
        _ => ParseError::Syntax(EXPECTED),
    })?;
    let bytes = n.checked_mul(mult).ok_or(ParseError::Overflow)?;
    usize::try_from(bytes).map_err(|_| ParseError::Overflow)
}

/// Parses an nginx time into milliseconds. A number without unit is seconds; units are
/// `ms`, `s`, `m`, `h`, `d`, `w`, `M` (30 days) and `y` (365 days), combinable from the
/// largest to the smallest, each at most once: `1h30m`, `1m30s`, `500ms`, `1d 12h`.
pub fn parse_time_ms(s: &str) -> Result<u64, ParseError> {
    const EXPECTED: &str = "expected a time like 500ms, 20s, 10m or 1h30m";
    const ORDER: &str =
        "expected time units from largest to smallest, each at most once (y M w d h m s ms)";
    const SEC: u64 = 1000;
    const MIN: u64 = 60 * SEC;
    const HOUR: u64 = 60 * MIN;
    const DAY: u64 = 24 * HOUR;

    let b = s.as_bytes();
    if s.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let mut i = 0usize;
    let mut total: u64 = 0;
    // Rank of the last unit used; each next unit must rank strictly lower.
    let mut last_rank = u8::MAX;
    loop {
        while b.get(i) == Some(&b' ') {
            i = i.saturating_add(1);
        }
        if i >= b.len() {
            break;
        }
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i = i.saturating_add(1);
        }
        let digits = s.get(start..i).ok_or(ParseError::Syntax(EXPECTED))?;
        if digits.is_empty() {
            return Err(ParseError::Syntax(EXPECTED));
        }
        let n = parse_digits(digits)?;
        let (scale, rank, width) = match b.get(i) {
            Some(b'y') => (365 * DAY, 7, 1),
            Some(b'M') => (30 * DAY, 6, 1),
            Some(b'w') => (7 * DAY, 5, 1),
            Some(b'd') => (DAY, 4, 1),
            Some(b'h') => (HOUR, 3, 1),
            Some(b'm') if b.get(i.saturating_add(1)) == Some(&b's') => (1, 0, 2),
            Some(b'm') => (MIN, 2, 1),
            Some(b's') => (SEC, 1, 1),
            // A bare number is seconds and must be the last part.
            None | Some(b' ') => {
                let rest = s.get(i..).unwrap_or("");
                if !rest.trim().is_empty() {
                    return Err(ParseError::Syntax(EXPECTED));
                }
                (SEC, 1, 0)
            }
            Some(_) => return Err(ParseError::Syntax(EXPECTED)),
        };
        if rank >= last_rank {
            return Err(ParseError::Syntax(ORDER));
        }
        last_rank = rank;
        i = i.saturating_add(width);
        let part = n.checked_mul(scale).ok_or(ParseError::Overflow)?;
        total = total.checked_add(part).ok_or(ParseError::Overflow)?;
    }
    Ok(total)
}

/// Parses the status code of the waiting answer; only 200, 202, 429 and 503 make sense for
/// "not yet, come back" (SPEC §3).
pub fn parse_status(s: &str) -> Result<u16, ParseError> {
    let n = parse_digits(s).map_err(|e| match e {
        ParseError::Empty => ParseError::Empty,
        _ => ParseError::Syntax("expected a status code: 200, 202, 429 or 503"),
    })?;
    match n {
        200 | 202 | 429 | 503 => u16::try_from(n).map_err(|_| ParseError::Status),
        _ => Err(ParseError::Status),
    }
}

/// Splits `HOST:PORT` (IPv6 in brackets: `[::1]:6379`) into the host (brackets removed) and
/// the port. The port is required and must be 1-65535; the host must be non-empty and made
/// of name/address characters.
pub fn parse_host_port(s: &str) -> Result<(&str, u16), ParseError> {
    const EXPECTED: &str = "expected HOST:PORT, e.g. 127.0.0.1:6379 or [::1]:6379";
    if s.is_empty() {
        return Err(ParseError::Empty);
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once("]:").ok_or(ParseError::Syntax(EXPECTED))?;
        let ok = !h.is_empty()
            && h.contains(':')
            && h.bytes()
                .all(|c| c.is_ascii_hexdigit() || c == b':' || c == b'.');
        if !ok {
            return Err(ParseError::Syntax(EXPECTED));
        }
        (h, p)
    } else {
        let (h, p) = s.rsplit_once(':').ok_or(ParseError::Syntax(EXPECTED))?;
        if h.contains(':') {
            return Err(ParseError::Syntax(
                "an IPv6 address needs brackets, e.g. [::1]:6379",
            ));
        }
        let ok = !h.is_empty()
            && h.len() <= 253
            && h.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'));
        if !ok {
            return Err(ParseError::Syntax(EXPECTED));
        }
        (h, p)
    };
    let port = match parse_digits(port) {
        Ok(n @ 1..=65535) => u16::try_from(n).map_err(|_| ParseError::Syntax(EXPECTED))?,
        Ok(_) | Err(ParseError::Overflow) => {
            return Err(ParseError::Syntax("port must be between 1 and 65535"))
        }
        Err(_) => return Err(ParseError::Syntax(EXPECTED)),
    };
    Ok((host, port))
}

/// Plain decimal digits to u64: no sign, no spaces, no underscores (`str::parse` would take
/// a leading `+`).
fn parse_digits(s: &str) -> Result<u64, ParseError> {
    if s.is_empty() {
        return Err(ParseError::Empty);
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::Syntax("expected digits"));
    }
    s.bytes().try_fold(0u64, |acc, d| {
        acc.checked_mul(10)
            .and_then(|a| a.checked_add(u64::from(d - b'0')))
            .ok_or(ParseError::Overflow)
    })
}

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
/// Default Redis key prefix.
pub const DEFAULT_PREFIX: &str = "smart_limit";
/// Default `max_active`.
pub const DEFAULT_MAX_ACTIVE: u64 = 100;
/// Default grant: 10 minutes.
pub const DEFAULT_GRANT_MS: u64 = 10 * 60 * 1000;
/// Default presence: 20 seconds.
pub const DEFAULT_PRESENCE_MS: u64 = 20 * 1000;
/// Default active window: 1 minute.
pub const DEFAULT_ACTIVE_WINDOW_MS: u64 = 60 * 1000;
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
/// Default store timeout: 200 ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 200;
/// Largest store timeout: 60 s.
pub const MAX_TIMEOUT_MS: u64 = 60 * 1000;
/// Longest zone name.
pub const MAX_NAME_LEN: usize = 64;
/// Longest Redis key prefix.
pub const MAX_PREFIX_LEN: usize = 64;

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
    /// `max_active=`, distinct active admitted sessions, default 100.
    pub max_active: u64,
    /// `new_per_minute=`, admissions per minute, unlimited when absent.
    pub new_per_minute: Option<u64>,
    /// `grant=` (default 10m) or `session=`.
    pub admit: AdmitMode,
    /// `presence=`, how long a waiting session keeps its place unseen, default 20s.
    pub presence_ms: u64,
    /// `active_window=`, the window active sessions are counted over, default 1m.
    pub active_window_ms: u64,
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
}

/// A rate with a burst, as written: `rate=10r/s` (or `r/m`) and `..._burst=N`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateParam {
    /// Requests per second.
    pub per_sec: f64,
    pub burst: u64,
}

impl RateParam {
    pub fn rate(&self) -> crate::rate::Rate {
        crate::rate::Rate::per_sec(self.per_sec, self.burst)
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
    ("new_per_minute", "new_per_minute=60"),
    ("grant", "grant=10m"),
    ("session", "session=10m"),
    ("presence", "presence=20s"),
    ("active_window", "active_window=1m"),
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
];

/// Checks a zone name: 1 to 64 characters from `A-Z a-z 0-9 _ -`. The same rule applies to
/// the name in `smart_limit NAME;`. Keeping names plain keeps them safe in Redis keys,
/// metrics labels and log lines.
pub fn check_zone_name(name: &str) -> Result<(), ConfError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ConfError::BadName(name.to_string()))
    }
}

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
            new_per_minute: None,
            admit: AdmitMode::Grant(DEFAULT_GRANT_MS),
            presence_ms: DEFAULT_PRESENCE_MS,
            active_window_ms: DEFAULT_ACTIVE_WINDOW_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            on_error: OnError::Local,
            flood: Some(DEFAULT_FLOOD),
            flood_key: None,
            session_rate: Some(DEFAULT_SESSION_RATE),
            poll: Some(DEFAULT_POLL),
            max_line: DEFAULT_MAX_LINE,
            sync_ms: None,
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
    fn set(&mut self, param: &str, value: &str) -> Result<(), String> {
        match param {
            "size" => self.size = zone_size(value)?,
            "store" => self.store = store_kind(value)?,
            p if RedisParams::knows(p) => self.redis.set(p, value)?,
            "prefix" => self.prefix = key_prefix(value)?,
            "max_active" => self.max_active = positive(value)?,
            "new_per_minute" => self.new_per_minute = Some(positive(value)?),
            "grant" => self.admit = AdmitMode::Grant(positive_time(value)?),
            "session" => self.admit = AdmitMode::Session(positive_time(value)?),
            "presence" => self.presence_ms = positive_time(value)?,
            "active_window" => self.active_window_ms = positive_time(value)?,
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
            // Unreachable: `param` comes from PARAMS, and every entry is handled above.
            _ => return Err("unknown parameter".to_string()),
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
                reason: format!(
                    "must be shorter than sync= ({sync_ms} ms), so that two syncs never overlap"
                ),
            }),
            Some(_) => Ok(()),
            None => {
                self.timeout_ms = self.timeout_ms.min(sync_ms * 9 / 10).max(1);
                Ok(())
            }
        }
    }

    /// The admitted period in ms, whichever mode it is.
    pub fn admit_ms(&self) -> u64 {
        match self.admit {
            AdmitMode::Grant(ms) | AdmitMode::Session(ms) => ms,
        }
    }
}

/// A positive integer parameter (>= 1).
pub(crate) fn positive(value: &str) -> Result<u64, String> {
    match parse_digits(value) {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(ParseError::Overflow) => Err("value too large".to_string()),
        Err(_) => Err("expected a positive integer".to_string()),
    }
}

/// A time parameter that must be greater than zero.
pub(crate) fn positive_time(value: &str) -> Result<u64, String> {
    match parse_time_ms(value) {
        Ok(0) => Err("must be greater than 0".to_string()),
        Ok(ms) => Ok(ms),
        Err(e) => Err(e.to_string()),
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

/// `key=value` split against a directive's table of `(name, example)`: the parameter's
/// canonical name and its value; an unknown parameter, or a known one without a value (with
/// an example), is an error.
pub(crate) fn split_param_in<'a>(
    table: &[(&'static str, &'static str)],
    arg: &'a str,
) -> Result<(&'static str, &'a str), ConfError> {
    let Some((key, value)) = arg.split_once('=') else {
        return Err(match table.iter().find(|(k, _)| *k == arg) {
            Some(&(_, example)) => ConfError::MissingValue {
                param: arg.to_string(),
                example,
            },
            None => ConfError::Unknown(arg.to_string()),
        });
    };
    match table.iter().find(|(k, _)| *k == key) {
        Some(&(param, _)) => Ok((param, value)),
        None => Err(ConfError::Unknown(arg.to_string())),
    }
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

fn zone_size(value: &str) -> Result<usize, String> {
    let n = parse_size(value).map_err(|e| e.to_string())?;
    if n < MIN_SIZE {
        return Err("must be at least 32k".to_string());
    }
    Ok(n)
}

fn store_kind(value: &str) -> Result<StoreKind, String> {
    if value.eq_ignore_ascii_case("shm") {
        Ok(StoreKind::Shm)
    } else if value.eq_ignore_ascii_case("redis") {
        Ok(StoreKind::Redis)
    } else {
        Err("expected shm or redis".to_string())
    }
}

pub(crate) fn key_prefix(value: &str) -> Result<String, String> {
    let ok = !value.is_empty()
        && value.len() <= MAX_PREFIX_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'.'));
    if !ok {
        // Braces in particular are refused: they would break the Redis Cluster hash tag that
        // keeps one room's keys in one slot.
        return Err(format!(
            "expected 1 to {MAX_PREFIX_LEN} characters from A-Z a-z 0-9 _ - : ."
        ));
    }
    Ok(value.to_string())
}

pub(crate) fn store_timeout(value: &str) -> Result<u64, String> {
    let ms = parse_time_ms(value).map_err(|e| e.to_string())?;
    if !(1..=MAX_TIMEOUT_MS).contains(&ms) {
        return Err("must be between 1ms and 60s".to_string());
    }
    Ok(ms)
}

/// `sync=` (and a rate zone's `interval=`): 100ms to 60s.
pub(crate) fn sync_interval(value: &str) -> Result<u64, String> {
    let ms = parse_time_ms(value).map_err(|e| e.to_string())?;
    if !(crate::fleet_rate::MIN_INTERVAL_MS..=crate::fleet_rate::MAX_INTERVAL_MS).contains(&ms) {
        return Err("must be between 100ms and 60s".to_string());
    }
    Ok(ms)
}

fn on_error(value: &str) -> Result<OnError, String> {
    if value.eq_ignore_ascii_case("open") {
        Ok(OnError::Open)
    } else if value.eq_ignore_ascii_case("closed") {
        Ok(OnError::Closed)
    } else if value.eq_ignore_ascii_case("local") {
        Ok(OnError::Local)
    } else {
        Err("expected open, closed or local".to_string())
    }
}

/// Parses a request rate as `limit_req` writes it: `10r/s`, `600r/m`.
pub fn parse_rate(s: &str) -> Result<f64, ParseError> {
    const EXPECTED: &str = "expected a rate like 10r/s or 600r/m";
    let (digits, per) = if let Some(d) = s.strip_suffix("r/s") {
        (d, 1.0)
    } else if let Some(d) = s.strip_suffix("r/m") {
        (d, 60.0)
    } else {
        return Err(ParseError::Syntax(EXPECTED));
    };
    match parse_digits(digits) {
        Ok(0) => Err(ParseError::Syntax("the rate must be at least 1r/m")),
        Ok(n) if n > 1_000_000 => Err(ParseError::Overflow),
        Ok(n) => Ok(n as f64 / per),
        Err(ParseError::Overflow) => Err(ParseError::Overflow),
        Err(_) => Err(ParseError::Syntax(EXPECTED)),
    }
}

/// `RATE` or `off`, keeping a burst already given.
fn rate_or_off(
    value: &str,
    current: Option<RateParam>,
    default: RateParam,
) -> Result<Option<RateParam>, String> {
    if value == "off" {
        return Ok(None);
    }
    let per_sec = parse_rate(value).map_err(|e| format!("{e}, or off"))?;
    Ok(Some(RateParam {
        per_sec,
        burst: current.map_or(default.burst, |c| c.burst),
    }))
}

/// A `..._burst=N` (0 allowed: no burst above the rate).
fn set_burst(limit: &mut Option<RateParam>, value: &str) -> Result<(), String> {
    let n = match parse_digits(value) {
        Ok(n) if n <= 1_000_000 => n,
        Ok(_) | Err(ParseError::Overflow) => return Err("value too large".to_string()),
        Err(_) => return Err("expected a number".to_string()),
    };
    // Off stays off (check_combination refuses a burst for a limit that is off).
    if let Some(l) = limit.as_mut() {
        l.burst = n;
    }
    Ok(())
}

/// A flood key: nginx text, usually with variables (compiled by the module).
fn flood_key(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Err("expected a value, e.g. $binary_remote_addr".to_string());
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("32k"), Ok(32 * 1024));
        assert_eq!(parse_size("32K"), Ok(32 * 1024));
        assert_eq!(parse_size("10m"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_size("10M"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size(""), Err(ParseError::Empty));
        for bad in [
            "k", "m", "10 m", " 10m", "10m ", "10mb", "1.5m", "-1", "+1", "10t", "abc", "1k2",
        ] {
            assert!(
                matches!(parse_size(bad), Err(ParseError::Syntax(_))),
                "{bad}"
            );
        }
        // Edges of overflow.
        assert_eq!(parse_size("18446744073709551615"), Ok(usize::MAX));
        assert_eq!(
            parse_size("18446744073709551616"),
            Err(ParseError::Overflow)
        );
        assert_eq!(parse_size("17179869183g"), Ok(17_179_869_183 << 30));
        assert_eq!(parse_size("17179869184g"), Err(ParseError::Overflow));
        assert_eq!(
            parse_size("99999999999999999999999k"),
            Err(ParseError::Overflow)
        );
    }

    #[test]
    fn times() {
        let s = 1000;
        assert_eq!(parse_time_ms("0"), Ok(0));
        assert_eq!(parse_time_ms("20"), Ok(20 * s));
        assert_eq!(parse_time_ms("20s"), Ok(20 * s));
        assert_eq!(parse_time_ms("500ms"), Ok(500));
        assert_eq!(parse_time_ms("1ms"), Ok(1));
        assert_eq!(parse_time_ms("10m"), Ok(600 * s));
        assert_eq!(parse_time_ms("1h"), Ok(3600 * s));
        assert_eq!(parse_time_ms("1h30m"), Ok(5400 * s));
        assert_eq!(parse_time_ms("1m30s"), Ok(90 * s));
        assert_eq!(parse_time_ms("1m30"), Ok(90 * s));
        assert_eq!(parse_time_ms("1s500ms"), Ok(1500));
        assert_eq!(parse_time_ms("1d 12h"), Ok(36 * 3600 * s));
        assert_eq!(parse_time_ms("1w"), Ok(7 * 86400 * s));
        assert_eq!(parse_time_ms("1M"), Ok(30 * 86400 * s));
        assert_eq!(parse_time_ms("1y"), Ok(365 * 86400 * s));
        assert_eq!(
            parse_time_ms("1y1M1w1d1h1m1s1ms"),
            Ok((365 + 30 + 7 + 1) * 86400 * s + 3661 * s + 1)
        );
        assert_eq!(parse_time_ms(""), Err(ParseError::Empty));
        assert_eq!(parse_time_ms("   "), Err(ParseError::Empty));
        for bad in [
            "s", "ms", "1x", "1.5s", "-1s", "+1s", "1S", "1H", "abc", "1h 2h", "30m1h", "1s1m",
            "1ms1s", "1m1m", "5 1ms", "10 20", "1msx", "1hm", "1mss",
        ] {
            assert!(
                matches!(parse_time_ms(bad), Err(ParseError::Syntax(_))),
                "{bad}"
            );
        }
        // Overflow: u64::MAX ms is fine as a bare ms count, one more is not; multiplications overflow.
        assert_eq!(parse_time_ms("18446744073709551615ms"), Ok(u64::MAX));
        assert_eq!(
            parse_time_ms("18446744073709551616ms"),
            Err(ParseError::Overflow)
        );
        assert_eq!(
            parse_time_ms("18446744073709551s"),
            Ok(18_446_744_073_709_551_000)
        );
        assert_eq!(
            parse_time_ms("18446744073709552s"),
            Err(ParseError::Overflow)
        );
        assert_eq!(
            parse_time_ms("18446744073709551s999ms"),
            Err(ParseError::Overflow)
        );
        assert_eq!(parse_time_ms("99999999999y"), Err(ParseError::Overflow));
    }

    #[test]
    fn statuses() {
        for ok in [200u16, 202, 429, 503] {
            assert_eq!(parse_status(&ok.to_string()), Ok(ok));
        }
        for bad in ["201", "418", "500", "0", "99999999999999999999999"] {
            assert!(parse_status(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_status("418"), Err(ParseError::Status));
        assert_eq!(parse_status(""), Err(ParseError::Empty));
        assert!(matches!(parse_status("abc"), Err(ParseError::Syntax(_))));
        assert!(matches!(parse_status(" 503"), Err(ParseError::Syntax(_))));
    }

    #[test]
    fn host_ports() {
        assert_eq!(parse_host_port("127.0.0.1:6379"), Ok(("127.0.0.1", 6379)));
        assert_eq!(
            parse_host_port("redis.internal:1"),
            Ok(("redis.internal", 1))
        );
        assert_eq!(parse_host_port("redis_1:65535"), Ok(("redis_1", 65535)));
        assert_eq!(parse_host_port("[::1]:6379"), Ok(("::1", 6379)));
        assert_eq!(
            parse_host_port("[2001:db8::1]:7000"),
            Ok(("2001:db8::1", 7000))
        );
        for bad in [
            "",
            "localhost",
            "localhost:",
            ":6379",
            "host:0",
            "host:65536",
            "host:99999999999999999999",
            "host:port",
            "::1:6379",
            "[::1]",
            "[::1]6379",
            "[]:6379",
            "[zz]:1",
            "ho st:1",
            "h/x:1",
            "host:+1",
        ] {
            assert!(parse_host_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn zone_defaults() {
        let z = ZoneParams::parse(&["shop"]).unwrap();
        assert_eq!(z, ZoneParams::defaults("shop"));
        assert_eq!(z.size, 10 * 1024 * 1024);
        assert_eq!(z.store, StoreKind::Shm);
        assert!(!z.redis.configured());
        assert_eq!(z.prefix, "smart_limit");
        assert_eq!(z.max_active, 100);
        assert_eq!(z.new_per_minute, None);
        assert_eq!(z.admit, AdmitMode::Grant(600_000));
        assert_eq!(z.admit_ms(), 600_000);
        assert_eq!(z.presence_ms, 20_000);
        assert_eq!(z.active_window_ms, 60_000);
        assert_eq!(z.timeout_ms, 200);
        assert_eq!(z.on_error, OnError::Local);
    }

    #[test]
    fn zone_full() {
        let z = ZoneParams::parse(&[
            "shop-2_b",
            "size=32k",
            "store=redis",
            "redis=10.0.0.5:6380",
            "prefix=sl:prod",
            "max_active=5",
            "new_per_minute=60",
            "session=15m",
            "presence=30s",
            "active_window=2m",
            "timeout=1ms",
            "on_error=closed",
        ])
        .unwrap();
        assert_eq!(z.name, "shop-2_b");
        assert_eq!(z.size, 32 * 1024);
        assert_eq!(z.store, StoreKind::Redis);
        assert_eq!(z.redis.describe(), "10.0.0.5:6380");
        assert_eq!(z.prefix, "sl:prod");
        assert_eq!(z.max_active, 5);
        assert_eq!(z.new_per_minute, Some(60));
        assert_eq!(z.admit, AdmitMode::Session(900_000));
        assert_eq!(z.presence_ms, 30_000);
        assert_eq!(z.active_window_ms, 120_000);
        assert_eq!(z.timeout_ms, 1);
        assert_eq!(z.on_error, OnError::Closed);

        let z = ZoneParams::parse(&[
            "a",
            "grant=1ms",
            "timeout=60s",
            "on_error=open",
            "max_active=1",
            "new_per_minute=1",
        ])
        .unwrap();
        assert_eq!(z.admit, AdmitMode::Grant(1));
        assert_eq!(z.timeout_ms, 60_000);
        assert_eq!(z.on_error, OnError::Open);
        assert_eq!(z.max_active, 1);
        assert_eq!(z.new_per_minute, Some(1));
        assert_eq!(
            ZoneParams::parse(&["a", "store=shm"]).unwrap().store,
            StoreKind::Shm
        );
    }

    fn err(args: &[&str]) -> String {
        ZoneParams::parse(args).unwrap_err().to_string()
    }

    #[test]
    fn zone_sync() {
        let redis = ["z", "store=redis", "redis=h:1"];
        let with = |extra: &[&'static str]| {
            let mut a = redis.to_vec();
            a.extend_from_slice(extra);
            a
        };
        assert_eq!(ZoneParams::parse(&redis).unwrap().sync_ms, None);
        let z = ZoneParams::parse(&with(&["sync=1s"])).unwrap();
        assert_eq!((z.sync_ms, z.timeout_ms), (Some(1000), 200));
        // Without timeout=, a short interval gets a shorter timeout.
        let z = ZoneParams::parse(&with(&["sync=100ms"])).unwrap();
        assert_eq!((z.sync_ms, z.timeout_ms), (Some(100), 90));
        let z = ZoneParams::parse(&with(&["timeout=2s", "sync=5s"])).unwrap();
        assert_eq!(z.timeout_ms, 2000);
        assert_eq!(
            err(&with(&["sync=1s", "timeout=1s"])),
            "invalid timeout \"1s\": must be shorter than sync= (1000 ms), so that two syncs \
             never overlap"
        );
        assert_eq!(
            err(&with(&["sync=50ms"])),
            "invalid sync \"50ms\": must be between 100ms and 60s"
        );
        assert_eq!(
            err(&with(&["sync=2m"])),
            "invalid sync \"2m\": must be between 100ms and 60s"
        );
        assert_eq!(err(&["z", "sync=1s"]), "\"sync=1s\" requires store=redis");
        assert_eq!(
            err(&with(&["sync"])),
            "parameter \"sync\" needs a value, e.g. sync=1s"
        );
    }

    #[test]
    fn zone_abuse_limits() {
        let z = ZoneParams::parse(&["z"]).unwrap();
        assert_eq!(z.flood, Some(DEFAULT_FLOOD));
        assert_eq!(z.session_rate, Some(DEFAULT_SESSION_RATE));
        assert_eq!(z.poll, Some(DEFAULT_POLL));
        assert_eq!(z.max_line, DEFAULT_MAX_LINE);
        let z = ZoneParams::parse(&[
            "z",
            "flood_burst=5",
            "flood=120r/m",
            "flood_key=$binary_remote_addr$http_x_client",
            "session_rate=off",
            "poll=10r/s",
            "poll_burst=0",
        ])
        .unwrap();
        assert_eq!(
            z.flood,
            Some(RateParam {
                per_sec: 2.0,
                burst: 5
            })
        );
        assert_eq!(
            z.flood_key.as_deref(),
            Some("$binary_remote_addr$http_x_client")
        );
        assert_eq!(z.session_rate, None);
        assert_eq!(
            z.poll,
            Some(RateParam {
                per_sec: 10.0,
                burst: 0
            })
        );
        assert_eq!(z.flood.unwrap().rate().interval_us, 500_000);
        let z = ZoneParams::parse(&["z", "flood=off", "poll=off"]).unwrap();
        assert_eq!((z.flood, z.poll), (None, None));
        assert_eq!(
            err(&["z", "flood=fast"]),
            "invalid flood \"fast\": expected a rate like 10r/s or 600r/m, or off"
        );
        assert_eq!(
            err(&["z", "flood=0r/s"]),
            "invalid flood \"0r/s\": the rate must be at least 1r/m, or off"
        );
        assert_eq!(
            err(&["z", "flood=off", "flood_burst=3"]),
            "\"flood=off\" and \"flood_burst=3\" cannot be used together"
        );
        assert_eq!(
            err(&["z", "session_burst=3", "session_rate=off"]),
            "\"session_rate=off\" and \"session_burst=3\" cannot be used together"
        );
        assert_eq!(
            err(&["z", "poll_burst=-1"]),
            "invalid poll_burst \"-1\": expected a number"
        );
        assert_eq!(
            err(&["z", "max_line=10"]),
            "\"max_line=10\" requires store=redis"
        );
        assert_eq!(
            ZoneParams::parse(&["z", "store=redis", "redis=h:1", "max_line=10"])
                .unwrap()
                .max_line,
            10
        );
        assert_eq!(parse_rate("10r/s"), Ok(10.0));
        assert_eq!(parse_rate("30r/m"), Ok(0.5));
        assert!(parse_rate("10r/h").is_err());
        assert!(parse_rate("r/s").is_err());
        assert_eq!(parse_rate("99999999999r/s"), Err(ParseError::Overflow));
    }

    #[test]
    fn zone_names() {
        assert_eq!(ZoneParams::parse(&[]).unwrap_err(), ConfError::MissingName);
        let long = "n".repeat(64);
        assert!(ZoneParams::parse(&[&long]).is_ok());
        let too_long = "n".repeat(65);
        assert!(matches!(
            ZoneParams::parse(&[&too_long]),
            Err(ConfError::BadName(_))
        ));
        for bad in ["", "a b", "a.b", "a:b", "größe", "size=10m", "{x}"] {
            assert!(
                matches!(ZoneParams::parse(&[bad]), Err(ConfError::BadName(_))),
                "{bad}"
            );
        }
        assert_eq!(
            err(&["size=10m"]),
            "invalid zone name \"size=10m\": expected 1 to 64 characters from A-Z a-z 0-9 _ -"
        );
        assert!(check_zone_name("shop").is_ok());
    }

    #[test]
    fn zone_messages_name_param_and_value() {
        assert_eq!(
            err(&["z", "max_active=abc"]),
            "invalid max_active \"abc\": expected a positive integer"
        );
        assert_eq!(
            err(&["z", "max_active=0"]),
            "invalid max_active \"0\": must be at least 1"
        );
        assert_eq!(
            err(&["z", "max_active=99999999999999999999999"]),
            "invalid max_active \"99999999999999999999999\": value too large"
        );
        assert_eq!(
            err(&["z", "new_per_minute=0"]),
            "invalid new_per_minute \"0\": must be at least 1"
        );
        assert_eq!(
            err(&["z", "colour=red"]),
            "unknown parameter \"colour=red\""
        );
        assert_eq!(err(&["z", "colour"]), "unknown parameter \"colour\"");
        assert_eq!(
            err(&["z", "size"]),
            "parameter \"size\" needs a value, e.g. size=10m"
        );
        assert_eq!(
            err(&["z", "size=10m", "size=20m"]),
            "duplicate parameter \"size=20m\""
        );
        assert_eq!(
            err(&["z", "grant=10m", "session=5m"]),
            "\"grant=10m\" and \"session=5m\" cannot be used together"
        );
        assert_eq!(
            err(&["z", "session=5m", "grant=10m"]),
            "\"session=5m\" and \"grant=10m\" cannot be used together"
        );
        assert_eq!(
            err(&["z", "store=redis"]),
            "\"store=redis\" requires redis=HOST:PORT or sentinel=HOST:PORT with master=NAME"
        );
        assert_eq!(
            err(&["z", "redis=127.0.0.1:6379"]),
            "\"redis=127.0.0.1:6379\" requires store=redis"
        );
        assert_eq!(
            err(&["z", "store=shm", "redis=127.0.0.1:6379"]),
            "\"redis=127.0.0.1:6379\" requires store=redis"
        );
        assert_eq!(err(&["z", "prefix=x"]), "\"prefix=x\" requires store=redis");
        assert_eq!(
            err(&["z", "store=redis", "redis=localhost"]),
            "invalid redis \"localhost\": expected HOST:PORT, e.g. 127.0.0.1:6379 or [::1]:6379"
        );
        assert_eq!(
            err(&["z", "store=redis", "redis=h:0"]),
            "invalid redis \"h:0\": port must be between 1 and 65535"
        );
        assert!(err(&["z", "store=redis", "redis=h:1", "prefix={x}"])
            .starts_with("invalid prefix \"{x}\": "));
        assert_eq!(
            err(&["z", "store=mysql"]),
            "invalid store \"mysql\": expected shm or redis"
        );
        assert_eq!(
            err(&["z", "on_error=maybe"]),
            "invalid on_error \"maybe\": expected open, closed or local"
        );
        assert_eq!(
            err(&["z", "size=16k"]),
            "invalid size \"16k\": must be at least 32k"
        );
        assert_eq!(
            err(&["z", "size=32767"]),
            "invalid size \"32767\": must be at least 32k"
        );
        assert_eq!(
            err(&["z", "size=ten"]),
            "invalid size \"ten\": expected a size like 512k, 10m or 1g"
        );
        assert_eq!(err(&["z", "size="]), "invalid size \"\": empty value");
        assert_eq!(
            err(&["z", "presence=0"]),
            "invalid presence \"0\": must be greater than 0"
        );
        assert_eq!(
            err(&["z", "grant=0s"]),
            "invalid grant \"0s\": must be greater than 0"
        );
        assert_eq!(
            err(&["z", "session=0"]),
            "invalid session \"0\": must be greater than 0"
        );
        assert_eq!(
            err(&["z", "active_window=0ms"]),
            "invalid active_window \"0ms\": must be greater than 0"
        );
        assert_eq!(
            err(&["z", "presence=soon"]),
            "invalid presence \"soon\": expected a time like 500ms, 20s, 10m or 1h30m"
        );
        assert_eq!(
            err(&["z", "timeout=0"]),
            "invalid timeout \"0\": must be between 1ms and 60s"
        );
        assert_eq!(
            err(&["z", "timeout=60001ms"]),
            "invalid timeout \"60001ms\": must be between 1ms and 60s"
        );
        assert_eq!(
            err(&["z", "timeout=1m1ms"]),
            "invalid timeout \"1m1ms\": must be between 1ms and 60s"
        );
        // Quotes and control characters in values are escaped, keeping one log line.
        assert_eq!(
            err(&["z", "max_active=\"\n"]),
            "invalid max_active \"\\\"\\n\": expected a positive integer"
        );
        // Parameter names are case-sensitive like nginx's own.
        assert_eq!(err(&["z", "SIZE=10m"]), "unknown parameter \"SIZE=10m\"");
    }
}
