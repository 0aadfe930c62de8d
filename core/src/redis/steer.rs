//! `max_active=auto` for a fleet, in Redis ([`crate::capacity::fleet`] says how it steers):
//! the Lua both the room script and the steering script include (steer.lua), the constants
//! it shares, the node's argument and the reply's values.

use super::script::{count, ints, load_command_of, script_call, sha_of, Form, ReplyError};
use crate::capacity::control::{Move, Window};
use crate::capacity::fleet::{Fleet, Tell};
use crate::capacity::{Auto, STEP_MS};

/// The constants steer.lua shares with Rust, in the preamble of every script that includes it
/// ([`super::lua_script!`]'s extra slice).
pub const STEER_SHARED: &[(&str, u64)] = &[
    ("AU_STEP_MS", STEP_MS),
    ("MOVE_UP", Move::Up.code()),
    ("S_VALUE", reply::VALUE as u64),
    ("S_PINNED", reply::PINNED as u64),
    ("S_WINDOW", reply::WINDOW as u64),
    ("S_N", reply::N as u64),
    ("S_SLOW", reply::SLOW as u64),
    ("S_WARM", reply::WARM as u64),
    ("S_ERRORS", reply::ERRORS as u64),
    ("S_CUT", reply::CUT as u64),
    ("S_MOVE", reply::MOVE as u64),
    ("S_MOVED_AT", reply::MOVED_AT as u64),
];

/// The steering's own call (steer_call.lua after steer.lua): a synced node's, beside its sync,
/// and an operator's pin.
pub const STEER_SCRIPT: &str = super::script::lua_script!(
    concat!(include_str!("steer.lua"), include_str!("steer_call.lua")),
    {},
    STEER_SHARED
);

/// Where each value of the steering's reply sits (Lua places from 1; in the room script's
/// visit reply, after the visit's own values).
pub mod reply {
    pub const VALUE: usize = 1;
    pub const PINNED: usize = 2;
    pub const WINDOW: usize = 3;
    pub const N: usize = 4;
    pub const SLOW: usize = 5;
    pub const WARM: usize = 6;
    pub const ERRORS: usize = 7;
    pub const CUT: usize = 8;
    pub const MOVE: usize = 9;
    pub const MOVED_AT: usize = 10;
    pub const LEN: usize = 10;
}

/// The node's argument: "MIN MAX N SLOW WARM ERRORS WINDOW TO MOVE PIN" (steer.lua).
pub fn argument(auto: &Auto, t: &Tell) -> String {
    let w = t.told;
    let (win, to, why) = t
        .answer
        .map_or((0, 0, 0), |a| (a.window, a.to, a.why.code()));
    format!(
        "{} {} {} {} {} {} {win} {to} {why} {}",
        auto.min,
        auto.max,
        w.n,
        w.slow,
        w.warm,
        w.errors,
        t.pin.code()
    )
}

/// The steering's values in a reply, from `x[from]` on (Lua places: `from` 1 for the steering
/// script's own reply). None: the call told nothing (a room without `auto`: all zero).
pub fn fleet_of(x: &[i64], from: usize) -> Result<Option<Fleet>, ReplyError> {
    let at = |pos: usize| super::at_place(x, from + pos - 1).copied().unwrap_or(0);
    let value = count(at(reply::VALUE))?;
    if value == 0 {
        return Ok(None);
    }
    let flag = |pos| match at(pos) {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(ReplyError::Shape("bad steering flag")),
    };
    let window = count(at(reply::WINDOW))?;
    let closed = Window {
        n: count(at(reply::N))?,
        slow: count(at(reply::SLOW))?,
        warm: count(at(reply::WARM))?,
        errors: count(at(reply::ERRORS))?,
    };
    let moved = count(at(reply::MOVE))?;
    Ok(Some(Fleet {
        value,
        pinned: flag(reply::PINNED)?,
        closed: (window > 0).then_some((window, closed)),
        cut_before: flag(reply::CUT)?,
        last_move: match moved {
            0 => None,
            c => Some(Move::from_code(c).ok_or(ReplyError::Shape("unknown move"))?),
        },
        moved_at: count(at(reply::MOVED_AT))?,
    }))
}

/// The steering script's reply.
pub fn steer_reply(v: &super::resp::Value) -> Result<Fleet, ReplyError> {
    let x = ints(v, reply::LEN)?;
    fleet_of(&x, 1)?.ok_or(ReplyError::Shape("no steering value"))
}

/// Calls of the steering script on one hash.
#[derive(Debug, Clone)]
pub struct SteerCall {
    pub sha: String,
    /// A synced room's `PREFIX:{ROOM}:auto`, or a central room's state hash.
    pub key: String,
}

impl SteerCall {
    pub fn new(key: String) -> SteerCall {
        SteerCall {
            sha: sha_of(STEER_SCRIPT),
            key,
        }
    }

    /// A synced room's hash.
    pub fn synced(prefix: &str, room: &str) -> SteerCall {
        SteerCall::new(format!("{prefix}:{{{room}}}:auto"))
    }

    pub fn load_command() -> Vec<u8> {
        load_command_of(STEER_SCRIPT)
    }

    /// One call: `now` 0 (the server's clock) from nginx; the hash outlives it by `ttl_ms`.
    pub fn call(&self, form: Form, auto: &Auto, t: &Tell, now: u64, ttl_ms: u64) -> Vec<u8> {
        let mut cmd = script_call(form, &self.sha, STEER_SCRIPT);
        cmd.arg(1)
            .arg(&self.key)
            .arg(argument(auto, t))
            .arg(now)
            .arg(ttl_ms);
        cmd.get_packed_command()
    }
}
