//! The fleet room's script in Redis (`script.lua`): its arguments, and its replies (the
//! fleet's picture, a pool draw) read fallibly.

use super::{FleetConfig, Report, RoomPicture, Sample, MAX_SAMPLES};
use super::{Sighting, KEEP_PPM};

use crate::redis::resp::Value;
use crate::redis::{count, Form, ReplyError};

/// The sync script.
pub const FLEET_SCRIPT: &str = include_str!("script.lua");

/// The calls of one synced room.
#[derive(Debug, Clone)]
pub struct FleetScript {
    pub sha: String,
    pub keys: [String; 4],
    cfg: FleetConfig,
}

impl FleetScript {
    pub fn new(prefix: &str, room: &str, cfg: FleetConfig) -> FleetScript {
        let base = format!("{prefix}:{{{room}}}");
        FleetScript {
            sha: crate::redis::sha_of(FLEET_SCRIPT),
            keys: [
                format!("{base}:fleet"),
                format!("{base}:active"),
                format!("{base}:present"),
                format!("{base}:arrival"),
            ],
            cfg,
        }
    }

    pub fn load_command() -> Vec<u8> {
        crate::redis::load_command_of(FLEET_SCRIPT)
    }

    /// The call's common arguments; `max_active` is the room's at the moment (a scheduled
    /// event's, while one runs).
    fn head(&self, form: Form, op: &str, f: Fence, now: u64, max_active: u64) -> ::redis::Cmd {
        let mut cmd = crate::redis::script_call(form, &self.sha, FLEET_SCRIPT);
        let c = &self.cfg;
        cmd.arg(4)
            .arg(&self.keys[0])
            .arg(&self.keys[1])
            .arg(&self.keys[2])
            .arg(&self.keys[3])
            .arg(op)
            .arg(f.node_id)
            .arg(f.window)
            .arg(now)
            .arg(max_active)
            .arg(c.active_window_ms)
            .arg(c.presence_ms)
            .arg(c.stale_ms())
            .arg(c.key_ttl_ms())
            .arg(KEEP_PPM)
            .arg(c.interval_ms)
            .arg(f.generation)
            .arg(f.seq)
            .arg(c.max_line);
        cmd
    }

    /// A sync; `now` 0 lets the script use the Redis server's clock (what nginx sends).
    /// Sightings go as their age at `node_now` (the node's clock), so the two clocks need not
    /// agree. `max_active`: the room's now (a running event's, see `store::Zone::limits_at`).
    pub fn sync(
        &self,
        form: Form,
        f: Fence,
        (now, node_now): (u64, u64),
        r: &Report,
        max_active: u64,
    ) -> Vec<u8> {
        use core::fmt::Write as _;
        let age = |at: u64| node_now.saturating_sub(at);
        let join = |v: &[Sighting]| {
            let mut out = String::with_capacity(v.len() * 24);
            for e in v {
                let _ = write!(out, "{}:{} ", e.sid, age(e.at));
            }
            out
        };
        let mut waiters = String::with_capacity(r.waiters.len() * 40);
        for w in &r.waiters {
            let _ = write!(waiters, "{}:{}:{} ", w.sid, w.arrival, age(w.at));
        }
        let mut cmd = self.head(form, "sync", f, now, max_active);
        cmd.arg(r.polls)
            .arg(join(&r.active))
            .arg(join(&r.admitted))
            .arg(waiters);
        cmd.get_packed_command()
    }

    /// A draw of up to `want` places from the pool (`f.seq`: the node's last sync sent).
    pub fn draw(&self, form: Form, f: Fence, now: u64, want: u64, max_active: u64) -> Vec<u8> {
        self.head(form, "draw", f, now, max_active)
            .arg(want)
            .get_packed_command()
    }
}

/// Integers before the samples in a sync's reply.
const HEAD: usize = 10;

/// What a sync got back: the fleet's picture, or word that the script took a newer sync of
/// this node already (this one changed nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncAnswer {
    Picture(RoomPicture),
    Stale,
}

/// The script's answer to a sync, checked.
pub fn picture_reply(v: &Value) -> Result<SyncAnswer, ReplyError> {
    if let Some(e) = v.error_text() {
        return Err(if e.starts_with("NOSCRIPT") {
            ReplyError::NoScript
        } else {
            ReplyError::Server(e.chars().take(200).collect())
        });
    }
    let Value::Array(items) = v else {
        return Err(ReplyError::Shape("expected an array"));
    };
    if let [Value::Int(-1)] = items.as_slice() {
        return Ok(SyncAnswer::Stale);
    }
    if items.len() < HEAD
        || (items.len() - HEAD) % 2 == 1
        || items.len() > HEAD + 2 * (MAX_SAMPLES + 1)
    {
        return Err(ReplyError::Shape("array of the wrong length"));
    }
    let mut ints = Vec::with_capacity(items.len());
    for i in items {
        match i {
            Value::Int(x) => ints.push(*x),
            _ => return Err(ReplyError::Shape("expected integers")),
        }
    }
    let n = |i: usize| {
        ints.get(i)
            .copied()
            .map_or(Err(ReplyError::Shape("short")), count)
    };
    let cursor = match ints.get(2) {
        Some(-1) => u64::MAX,
        Some(&c) => count(c)?,
        None => return Err(ReplyError::Shape("short")),
    };
    let mut samples = Vec::new();
    let mut i = HEAD;
    while i + 1 < ints.len() {
        samples.push(Sample {
            rank: n(i)?,
            arrival: n(i + 1)?,
        });
        i += 2;
    }
    samples.truncate(MAX_SAMPLES);
    Ok(SyncAnswer::Picture(RoomPicture {
        fleet_active: n(0)?,
        queue_len: n(1)?,
        cursor,
        quota: n(3)?,
        nodes: n(4)?.max(1),
        window_ms: n(5)?,
        free: n(6)?,
        expiring: n(7)?,
        leaving: n(8)?,
        full: n(9)? != 0,
        samples,
    }))
}

/// The script's answer to a draw: how many places were granted, and the sequence of the
/// node's last sync the script had run then (the places count only if the node sent none
/// since).
pub fn draw_reply(v: &Value) -> Result<Drawn, ReplyError> {
    let x = crate::redis::ints(v, 3)?;
    match (x.first(), x.get(2)) {
        (Some(&n), Some(&seq)) => Ok(Drawn {
            granted: count(n)?,
            seq: count(seq)?,
        }),
        _ => Err(ReplyError::Shape("bad draw answer")),
    }
}

/// A pool draw's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    pub granted: u64,
    pub seq: u64,
}

/// Who sends a call, and when: the node, its configuration's generation, the interval's window
/// and the node's sync sequence. The script ignores a sync that is not newer than the last it
/// took from the node, and a draw sent before that sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    pub node_id: u64,
    pub generation: u32,
    pub window: u64,
    pub seq: u64,
}
