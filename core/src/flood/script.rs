//! The synced room's flood script (`script.lua`): its call, and its reply read fallibly.

use crate::redis::resp::Value;
use crate::redis::{count, ints, load_command_of, script_call, sha_of, Form, Keys, ReplyError};
use crate::room::gcra::Rate;

/// The flood script.
pub const FLOOD_SCRIPT: &str = include_str!("script.lua");

/// The flood calls of one room.
#[derive(Debug, Clone)]
pub struct FloodScript {
    pub sha: String,
    keys: Keys,
    rate: Rate,
}

/// What the fleet's budget said about one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Paid: the client may take its place.
    Paid,
    /// No place this time; the budget allows the next one in `retry_ms`.
    Refused { retry_ms: u64 },
}

impl FloodScript {
    pub fn new(prefix: &str, room: &str, rate: Rate) -> FloodScript {
        FloodScript {
            sha: sha_of(FLOOD_SCRIPT),
            keys: Keys::new(prefix, room),
            rate,
        }
    }

    /// `SCRIPT LOAD`, sent first on every new connection so `EVALSHA` finds the script.
    pub fn load_command() -> Vec<u8> {
        load_command_of(FLOOD_SCRIPT)
    }

    /// Pays for one place from the bucket of client key `key` (its seeded hash). `now` 0 lets
    /// the script use the Redis server's clock (what nginx sends).
    pub fn take(&self, form: Form, key: u64, now: u64) -> Vec<u8> {
        let mut cmd = script_call(form, &self.sha, FLOOD_SCRIPT);
        cmd.arg(1)
            .arg(self.keys.flood(key))
            .arg(now)
            .arg(self.rate.interval_us.max(1))
            .arg(self.rate.burst);
        cmd.get_packed_command()
    }
}

/// The script's reply: `{1, 0}` paid, `{0, retry_ms}` refused; anything else is an error.
pub fn take_reply(v: &Value) -> Result<Take, ReplyError> {
    let x = ints(v, 2)?;
    match (x.first(), x.get(1)) {
        (Some(1), Some(0)) => Ok(Take::Paid),
        (Some(0), Some(&ms)) => match count(ms)? {
            0 => Err(ReplyError::Shape("a refusal without a wait")),
            retry_ms => Ok(Take::Refused { retry_ms }),
        },
        _ => Err(ReplyError::Shape("unknown flood verdict")),
    }
}
