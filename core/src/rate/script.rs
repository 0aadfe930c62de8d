//! The rate zone's script in Redis (`script.lua`): its arguments and its reply read fallibly.

use super::{FleetPicture, RateZoneParams, SyncArgs};
use crate::redis::resp::Value;
use crate::redis::{count, ints, Form, ReplyError};

/// A node's entry in the zone's hash: its numbers, by their place in the entry (Lua's, from 1).
/// Only the script reads entries; their places are written here, as its other constants are.
#[derive(Debug, Clone, Copy)]
enum Entry {
    Seq = 1,
    Offered,
    Passed,
    At,
    Window,
    RateOffered,
    RatePassed,
    PrevWindow,
    PrevRateOffered,
    PrevRatePassed,
    Seen,
}

/// The sync script, after a preamble of the entry's places.
pub const SYNC_SCRIPT: &str = crate::redis::lua_script!(include_str!("script.lua"), {
    SEQ = Entry::Seq,
    OFF = Entry::Offered,
    PASS = Entry::Passed,
    AT = Entry::At,
    WIN = Entry::Window,
    R_OFF = Entry::RateOffered,
    R_PASS = Entry::RatePassed,
    P_WIN = Entry::PrevWindow,
    P_R_OFF = Entry::PrevRateOffered,
    P_R_PASS = Entry::PrevRatePassed,
    SEEN = Entry::Seen,
    RATE_SCALE = super::MILLI_PER_S_OVER_MS,
});

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
