//! Which Redis a connection needs, and whether the server it reached is one.
//!
//! A server too old for a script fails it where the script reaches the missing feature: Redis
//! 6.0 answers the synced room's syncs with "ERR syntax error" (`ZADD ... GT`) as soon as the
//! node has a client to report, while its pool draws (which do not use it) go through and
//! reserve places that no sync releases. The node never gets a picture, and its room falls
//! into `on_error` with lines that do not say why. So every new data connection asks
//! `INFO server` first ([`info_command`]), before any script goes out, and the client compares
//! the server's `redis_version` with what the zone needs ([`check`]): a server too old is a
//! failure of the connection with a line that names both versions ([`too_old`]).
//!
//! What needs which version (the commands' "available since", Redis's documentation):
//! - every script: `HSET` of several fields at once (4.0); `TIME` before writes with
//!   `redis.replicate_commands()` (3.2; Redis 5 replicates effects by default): [`NEEDS_SCRIPTS`];
//! - the synced room's script (`sync=`): `ZADD ... GT` (6.2): [`NEEDS_ZADD_GT`], found in a
//!   script's text by [`script_needs`];
//! - `redis_user=`: `AUTH user password`, ACL users (6.0): [`NEEDS_ACL_USER`];
//! - `redis_tls=on`: TLS in the server (6.0): [`NEEDS_TLS`].
//!
//! Sentinels are not asked: they only name the master, whose version is checked when the
//! client connects to it. The server's reply is untrusted input: nothing here panics, and a
//! reply that does not say its version is [`Check::Unknown`] (a proxy, an ACL user without
//! `+info`): the client warns once and goes on, as it did before the check existed.

use core::fmt;

use super::resp::Value;

/// A server version, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RedisVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl RedisVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> RedisVersion {
        RedisVersion {
            major,
            minor,
            patch,
        }
    }

    /// `7.0.15`, `6.2.0`, `6.2` (patch 0). Anything else (letters, a missing or empty part,
    /// more than three parts, a number out of range) is None.
    pub fn parse(text: &str) -> Option<RedisVersion> {
        let mut parts = text.trim().split('.');
        let major = number(parts.next()?)?;
        let minor = number(parts.next()?)?;
        let patch = match parts.next() {
            Some(p) => number(p)?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(RedisVersion::new(major, minor, patch))
    }
}

/// A decimal part of a version: digits only (no sign, no spaces), at most 9 of them.
fn number(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for RedisVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The lowest server a connection works with, and what raised it there (for the log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    pub version: RedisVersion,
    pub why: &'static str,
}

/// Every script: `HSET` of several fields (4.0), `TIME` before writes (3.2).
pub const NEEDS_SCRIPTS: Requirement = Requirement {
    version: RedisVersion::new(4, 0, 0),
    why: "its scripts set several hash fields in one HSET",
};
/// `redis_user=`: ACL users.
pub const NEEDS_ACL_USER: Requirement = Requirement {
    version: RedisVersion::new(6, 0, 0),
    why: "redis_user= is an ACL user",
};
/// `redis_tls=on`: TLS in the server.
pub const NEEDS_TLS: Requirement = Requirement {
    version: RedisVersion::new(6, 0, 0),
    why: "redis_tls=on",
};
/// The synced room's script (`sync=`).
pub const NEEDS_ZADD_GT: Requirement = Requirement {
    version: RedisVersion::new(6, 2, 0),
    why: "the sync= script uses ZADD ... GT",
};

impl Requirement {
    /// The stricter of two (the first on a tie).
    pub fn max(self, other: Requirement) -> Requirement {
        if other.version > self.version {
            other
        } else {
            self
        }
    }

    /// `6.2` (`6.2.1` when a patch release is needed).
    pub fn version_text(&self) -> String {
        let v = self.version;
        if v.patch == 0 {
            format!("{}.{}", v.major, v.minor)
        } else {
            v.to_string()
        }
    }
}

/// Options of late Redis versions, as the scripts write them (Lua strings), with what they
/// need. The scripts' needs are pinned by `core/tests/` on the real scripts.
const LATE_OPTIONS: &[(&[u8], Requirement)] = &[(b"'GT'", NEEDS_ZADD_GT), (b"'LT'", NEEDS_ZADD_GT)];

/// What a script needs of the server, read from its text (or from its `SCRIPT LOAD`
/// command, which carries the text as is).
pub fn script_needs(script: &[u8]) -> Requirement {
    LATE_OPTIONS
        .iter()
        .filter(|(token, _)| script.windows(token.len()).any(|w| w == *token))
        .fold(NEEDS_SCRIPTS, |need, (_, r)| need.max(*r))
}

/// `INFO server`: the section with `redis_version` (a few hundred bytes).
pub fn info_command() -> Vec<u8> {
    ::redis::cmd("INFO").arg("server").get_packed_command()
}

/// The `redis_version:` line of an `INFO` text (`field:value` lines ended by CRLF). Valkey
/// reports there the Redis version it is compatible with, which is what the scripts need.
pub fn version_in_info(info: &[u8]) -> Option<RedisVersion> {
    info.split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .find_map(|line| line.strip_prefix(b"redis_version:"))
        .and_then(|v| core::str::from_utf8(v).ok())
        .and_then(RedisVersion::parse)
}

/// What the reply to [`info_command`] says about the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Recent enough.
    Fine(RedisVersion),
    /// Older than needed.
    TooOld(RedisVersion),
    /// The reply does not tell (why, for the log line): the check is skipped.
    Unknown(String),
}

/// Reads the reply to [`info_command`] against what the connection needs.
pub fn check(reply: &Value, need: &Requirement) -> Check {
    let info = match reply {
        Value::Bulk(b) => b,
        Value::Error(_) => {
            let mut text: String = reply.error_text().unwrap_or_default();
            if text.len() > 200 {
                text = text.chars().take(200).collect::<String>() + "...";
            }
            return Check::Unknown(format!("INFO answered an error: {text}"));
        }
        other => return Check::Unknown(format!("INFO answered a {}", other.kind())),
    };
    match version_in_info(info) {
        Some(v) if v < need.version => Check::TooOld(v),
        Some(v) => Check::Fine(v),
        None => Check::Unknown("INFO has no readable redis_version".to_string()),
    }
}

/// The error of a connection to a server too old: names the server, both versions and why.
pub fn too_old(at: &str, found: RedisVersion, need: &Requirement) -> String {
    format!(
        "Redis at {at} is version {found}; smart_limit needs Redis {} or later ({})",
        need.version_text(),
        need.why
    )
}
