//! `smart-limit-bench mint`: tickets as the room's cookie check hands them out (a session id,
//! no place yet), sealed with the room's keys, one cookie per line. `scripts/bench --cost`
//! replays them so that every request is a client's first return: a place taken.
//!
//! Only for a bench: whoever holds the key file can mint tickets, which is why the module
//! reads it from a file only root can read.

use std::io::{BufWriter, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use smart_limit_core::ticket::{random_sid, Keyring, Ticket};

pub const USAGE: &str = "\
usage: smart-limit-bench mint --secret FILE --room NAME --count N [--cookie NAME]

Prints N tickets of room NAME, each a first contact's (a new session id, no place, issued
now), sealed with the first key of FILE (smart_limit_secret's format), one per line as
COOKIE=VALUE (COOKIE defaults to smart_limit_NAME).
";

struct Mint {
    secret: String,
    room: String,
    count: u64,
    cookie: Option<String>,
}

fn parse(argv: &[String]) -> Result<Mint, String> {
    let (mut secret, mut room, mut count, mut cookie) = (None, None, None, None);
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--secret" => secret = Some(value()?),
            "--room" => room = Some(value()?),
            "--count" => {
                let v = value()?;
                count = Some(v.parse::<u64>().map_err(|_| format!("--count: '{v}'"))?);
            }
            "--cookie" => cookie = Some(value()?),
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    Ok(Mint {
        secret: secret.ok_or("--secret is required")?,
        room: room.ok_or("--room is required")?,
        count: count.ok_or("--count is required")?,
        cookie,
    })
}

/// Runs `mint`; the error is a message for stderr.
pub fn main(argv: &[String]) -> Result<(), String> {
    let m = parse(argv)?;
    let text = std::fs::read_to_string(&m.secret).map_err(|e| format!("{}: {e}", m.secret))?;
    let keys = Keyring::parse(&text).map_err(|e| format!("{}: {e}", m.secret))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_millis() as u64;
    let cookie = m
        .cookie
        .unwrap_or_else(|| format!("smart_limit_{}", m.room));
    // One random base, then consecutive ids: distinct within the run, unguessable across runs.
    let base = random_sid().map_err(|e| e.to_string())?;
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
        };
        let sealed = keys.seal_fixed(&m.room, &t).map_err(|e| e.to_string())?;
        writeln!(out, "{cookie}={}", sealed.as_str()).map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}
