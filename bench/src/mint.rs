//! `smart-limit-bench mint`: tickets as the room's cookie check hands them out (a session id,
//! no place yet), sealed with the room's keys, one cookie per line. `scripts/bench --cost`
//! replays them so that every request is a client's first return: a place taken.
//!
//! Only for a bench: whoever holds the key file can mint tickets, which is why the module
//! reads it from a file only root can read.

use std::io::{BufWriter, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;
use smart_limit_core::ticket::{random_sid, Floor, KeyError, Keyring, Ticket, TicketError};

const ABOUT: &str = "\
Prints N tickets of room NAME, each a first contact's (a new session id, no place, issued
now), sealed with the first key of FILE (smart_limit_secret's format), one per line as
COOKIE=VALUE (COOKIE defaults to smart_limit_NAME).";

/// `smart-limit-bench mint`'s command line.
#[derive(Debug, Parser)]
#[command(
    name = "smart-limit-bench mint",
    about = ABOUT,
    override_usage = "smart-limit-bench mint --secret FILE --room NAME --count N [--cookie NAME]",
    args_override_self = true
)]
struct Mint {
    /// the key file (smart_limit_secret's format)
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    secret: String,
    /// the room
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    room: String,
    /// how many tickets
    #[arg(long, value_name = "N")]
    count: u64,
    /// the cookie's name [default: smart_limit_NAME]
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    cookie: Option<String>,
}

/// Why `mint` printed no (or not every) ticket.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// What clap found (and `--help`, which it prints).
    #[error(transparent)]
    Usage(#[from] clap::Error),
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Keys { path: String, source: KeyError },
    #[error(transparent)]
    Clock(#[from] std::time::SystemTimeError),
    #[error(transparent)]
    Ticket(#[from] TicketError),
    #[error(transparent)]
    Write(#[from] std::io::Error),
}

/// Runs `mint` with its command line (`argv` after `mint`).
pub fn main(argv: &[String]) -> Result<(), MintError> {
    let program = std::iter::once("smart-limit-bench mint".to_string());
    let m = Mint::try_parse_from(program.chain(argv.iter().cloned()))?;
    let text = std::fs::read_to_string(&m.secret).map_err(|source| MintError::Read {
        path: m.secret.clone(),
        source,
    })?;
    let keys = Keyring::parse(&text).map_err(|source| MintError::Keys {
        path: m.secret.clone(),
        source,
    })?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    let cookie = m
        .cookie
        .unwrap_or_else(|| format!("smart_limit_{}", m.room));
    // One random base, then consecutive ids: distinct within the run, unguessable across runs.
    let base = random_sid()?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    for i in 0..m.count {
        // (0 is no session: skipped, once in 2^64 runs.)
        let sid = base.wrapping_add(i).max(1);
        let t = Ticket {
            sid,
            qnum: 0,
            issued_at: now,
            accepted_at: 0,
            last_seen: now,
            told: Floor::NONE,
        };
        let sealed = keys.seal_fixed(&m.room, &t)?;
        writeln!(out, "{cookie}={}", sealed.as_str())?;
    }
    Ok(out.flush()?)
}
