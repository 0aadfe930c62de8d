//! The fleet room's script in Redis (`script.lua`): its arguments, and its replies (the
//! fleet's picture, a pool draw) read fallibly.

use super::model::{self, line};
use super::{Ask, FleetConfig, Report, RoomPicture, Sample, ENDS_CAP, EXACT_LINE, MAX_SAMPLES};
use super::{FloodOver, Sighting, FLOOD_ANSWER_CAP, FLOOD_REPORT_CAP, KEEP_PPM};
use super::{SpentProof, REVOKE_REPORT_CAP, SPENT_ANSWER_CAP, SPENT_REPORT_CAP};

use super::wire::{arg, at, drawn, picture, Args};
use crate::redis::resp::Value;
use crate::redis::{count, Form, Keys, ReplyError};
use crate::room::gcra::Rate;

/// Members per variadic command the script sends (Lua's `unpack` has a limit of a few
/// thousand).
const CHUNK: usize = 500;
/// Lapsed client keys over the flood budget one sync removes at most.
const FLOOD_EXPIRE: usize = 64;

/// The sync script. Its constants are these (their one source: the model's and the node's
/// where they share them), in the preamble before `script.lua`'s text.
pub const FLEET_SCRIPT: &str = crate::redis::lua_script!(include_str!("script.lua"), {
    EXPIRE_STEP = model::EXPIRE_STEP,
    EXPIRE_MIN = model::EXPIRE_MIN,
    HERE_CHECK = model::HERE_CHECK,
    CHUNK = CHUNK,
    FIRST_RANKS = line::FIRST_RANKS,
    SAMPLES = line::SAMPLES,
    EVEN_SAMPLES = line::EVEN_SAMPLES,
    GROWTH = line::GROWTH,
    BAND = line::BAND,
    FLOOD_KEYS = FLOOD_REPORT_CAP,
    FLOOD_ANSWERS = FLOOD_ANSWER_CAP,
    FLOOD_EXPIRE = FLOOD_EXPIRE,
    SPENT_REPORT = SPENT_REPORT_CAP,
    SPENT_ANSWERS = SPENT_ANSWER_CAP,
    SPENT_EXPIRE = model::SPENT_EXPIRE,
    SPENT_KEEP_MS = model::SPENT_KEEP_MS,
    ENDS = ENDS_CAP,
    EXACT_LINE = EXACT_LINE,
    SHARE_PER_POLL = super::SHARE_PER_POLL,
    LOOK_MS = crate::challenge::LOOK_MS,
    PPM = crate::util::PPM,
    PRESSURE_KEEP_PCT = crate::challenge::PRESSURE_KEEP_PCT,
    MAX_DOUBLINGS = crate::challenge::MAX_DOUBLINGS,
    HORIZON_MAX_MS = super::HORIZON_MAX_MS,
    // Where each argument and reply field sits (super::wire).
    A_OP = arg::OP, A_NODE = arg::NODE, A_WINDOW = arg::WINDOW, A_NOW = arg::NOW,
    A_MAX_ACTIVE = arg::MAX_ACTIVE, A_ACTIVE_WINDOW = arg::ACTIVE_WINDOW,
    A_PRESENCE = arg::PRESENCE, A_STALE = arg::STALE, A_KEY_TTL = arg::KEY_TTL,
    A_KEEP = arg::KEEP, A_INTERVAL = arg::INTERVAL, A_GENERATION = arg::GENERATION,
    A_SEQ = arg::SEQ, A_MAX_LINE = arg::MAX_LINE,
    A_POLLS = arg::POLLS, A_ACTIVE = arg::ACTIVE, A_ADMITTED = arg::ADMITTED,
    A_WAITERS = arg::WAITERS, A_FLOOD_INTERVAL = arg::FLOOD_INTERVAL,
    A_FLOOD_BURST = arg::FLOOD_BURST, A_FLOOD_PLACES = arg::FLOOD_PLACES, A_ASKED = arg::ASKED,
    A_CHALLENGED = arg::CHALLENGED, A_SPENT = arg::SPENT, A_REVOKED = arg::REVOKED,
    A_KEPT = arg::KEPT,
    REVOKED_REPORT = super::REVOKE_REPORT_CAP,
    A_WANT = arg::WANT, A_OLDEST = arg::OLDEST,
    P_FLEET_ACTIVE = picture::FLEET_ACTIVE, P_QUEUE_LEN = picture::QUEUE_LEN,
    P_CURSOR = picture::CURSOR, P_QUOTA = picture::QUOTA, P_NODES = picture::NODES,
    P_WINDOW = picture::WINDOW, P_FREE = picture::FREE, P_EXPIRING = picture::EXPIRING,
    P_LEAVING = picture::LEAVING, P_FULL = picture::FULL, P_PRESSURE = picture::PRESSURE,
    P_SPENT = picture::SPENT, P_FLOOD = picture::FLOOD, P_ENDS = picture::ENDS,
    P_LINE = picture::LINE, P_RIGHTFUL = picture::RIGHTFUL, P_REPORTED = picture::REPORTED,
    D_GRANTED = drawn::GRANTED, D_ACTIVE = drawn::ACTIVE, D_SEQ = drawn::SEQ,
});

/// The calls of one synced room.
#[derive(Debug, Clone)]
pub struct FleetScript {
    pub sha: String,
    /// The room's hash, its three sorted sets, the client keys over the flood budget, the
    /// spent proofs, and the line's present and absent (kept) waiters.
    pub keys: [String; 8],
    cfg: FleetConfig,
    /// `flood=`: the fleet's budget per client key (None: no flood control).
    flood: Option<Rate>,
    /// Names the flood buckets (`PREFIX:{ROOM}:flood:HASH`, as the central room's).
    flood_keys: Keys,
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
                format!("{base}:flood_over"),
                format!("{base}:spent"),
                format!("{base}:here"),
                format!("{base}:away"),
            ],
            cfg,
            flood: None,
            flood_keys: Keys::new(prefix, room),
        }
    }

    /// With flood control: the syncs charge the reported client keys' buckets at `rate`.
    pub fn with_flood(self, rate: Option<Rate>) -> FleetScript {
        FleetScript {
            flood: rate,
            ..self
        }
    }

    pub fn load_command() -> Vec<u8> {
        crate::redis::load_command_of(FLEET_SCRIPT)
    }

    /// The call's common arguments, in a list of `len` ([`arg::SYNC`] or [`arg::DRAW`]);
    /// `max_active` is the room's at the moment (a scheduled event's, while one runs).
    fn head(&self, (op, len): (&str, usize), f: Fence, now: u64, max_active: u64) -> Args {
        let c = &self.cfg;
        let mut a = Args::new(len);
        a.set(arg::OP, op)
            .set(arg::NODE, f.node_id)
            .set(arg::WINDOW, f.window)
            .set(arg::NOW, now)
            .set(arg::MAX_ACTIVE, max_active)
            .set(arg::ACTIVE_WINDOW, c.active_window_ms)
            .set(arg::PRESENCE, c.presence_ms)
            .set(arg::STALE, c.stale_ms())
            .set(arg::KEY_TTL, c.key_ttl_ms())
            .set(arg::KEEP, KEEP_PPM)
            .set(arg::INTERVAL, c.interval_ms)
            .set(arg::GENERATION, f.generation)
            .set(arg::SEQ, f.seq)
            .set(arg::MAX_LINE, c.max_line);
        a
    }

    /// The call: the room's keys, then `buckets`, the flood buckets of the client keys a sync
    /// reports, then the arguments.
    fn call(&self, form: Form, buckets: &[u64], args: Args) -> Vec<u8> {
        let mut cmd = crate::redis::script_call(form, &self.sha, FLEET_SCRIPT);
        cmd.arg(self.keys.len() + buckets.len());
        for k in &self.keys {
            cmd.arg(k);
        }
        for &key in buckets {
            cmd.arg(self.flood_keys.flood(key));
        }
        for a in args.into_vec() {
            cmd.arg(a);
        }
        cmd.get_packed_command()
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
        // Flood control: the reported keys' buckets (none without it), and their places.
        let flood = match self.flood {
            Some(_) => r
                .flood
                .get(..r.flood.len().min(FLOOD_REPORT_CAP))
                .unwrap_or_default(),
            None => &[],
        };
        let buckets: Vec<u64> = flood.iter().map(|p| p.key).collect();
        let mut places = String::with_capacity(flood.len() * 4);
        for p in flood {
            let _ = write!(places, "{} ", p.places);
        }
        let (interval_us, burst) = self
            .flood
            .map_or((0, 0), |r| (r.interval_us.max(1), r.burst));
        let mut a = self.head(("sync", arg::SYNC), f, now, max_active);
        a.set(arg::POLLS, r.polls)
            .set(arg::ACTIVE, join(&r.active))
            .set(arg::ADMITTED, join(&r.admitted))
            .set(arg::WAITERS, waiters)
            .set(arg::FLOOD_INTERVAL, interval_us)
            .set(arg::FLOOD_BURST, burst)
            .set(arg::FLOOD_PLACES, places)
            .set(arg::ASKED, r.asked)
            .set(arg::CHALLENGED, r.challenged);
        // Spent proofs, as the ms each stays spent (lapsed ones are not sent).
        let mut spent = String::with_capacity(r.spent.len().min(SPENT_REPORT_CAP) * 24);
        for p in r.spent.iter().take(SPENT_REPORT_CAP) {
            if p.ms > node_now {
                let _ = write!(spent, "{:016x}:{} ", p.key, p.ms - node_now);
            }
        }
        a.set(arg::SPENT, spent);
        // Sessions the origin revoked here.
        let mut revoked = String::with_capacity(r.revoked.len().min(REVOKE_REPORT_CAP) * 21);
        for sid in r.revoked.iter().take(REVOKE_REPORT_CAP) {
            let _ = write!(revoked, "{sid} ");
        }
        a.set(arg::REVOKED, revoked)
            .set(arg::KEPT, self.cfg.kept_ms());
        self.call(form, &buckets, a)
    }

    /// A draw of up to `ask.want` places from the pool, for clients the oldest of whom
    /// arrived at `ask.oldest` (`f.seq`: the node's last sync sent).
    pub fn draw(&self, form: Form, f: Fence, now: u64, ask: Ask, max_active: u64) -> Vec<u8> {
        let mut a = self.head(("draw", arg::DRAW), f, now, max_active);
        a.set(arg::WANT, ask.want).set(arg::OLDEST, ask.oldest);
        self.call(form, &[], a)
    }
}

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
    let (
        Some(head),
        Some(Value::Array(spent)),
        Some(Value::Array(over)),
        Some(Value::Array(ends)),
        Some(Value::Bulk(whole)),
        Some(rest),
    ) = (
        items.get(..picture::INTS),
        at(items, picture::SPENT),
        at(items, picture::FLOOD),
        at(items, picture::ENDS),
        at(items, picture::LINE),
        items.get(picture::SAMPLES_FROM - 1..),
    )
    else {
        return Err(ReplyError::Shape("array of the wrong length"));
    };
    if rest.len() % 2 == 1
        || rest.len() > 2 * (MAX_SAMPLES + 1)
        || !(whole.is_empty() || rest.is_empty())
    {
        return Err(ReplyError::Shape("array of the wrong length"));
    }
    let line = line_reply(whole)?;
    let flood = flood_reply(over)?;
    let spent = spent_reply(spent)?;
    let (held, ends) = ends_reply(ends)?;
    let mut ints = Vec::with_capacity(items.len());
    for i in head.iter().chain(rest) {
        match i {
            Value::Int(x) => ints.push(*x),
            _ => return Err(ReplyError::Shape("expected integers")),
        }
    }
    // `ints`: the picture's integers at their places, then the samples' from INTS + 1 on.
    let n = |pos: usize| {
        at(&ints, pos)
            .copied()
            .map_or(Err(ReplyError::Shape("short")), count)
    };
    let everyone_or = |pos: usize| match at(&ints, pos) {
        Some(-1) => Ok(u64::MAX),
        Some(&c) => count(c),
        None => Err(ReplyError::Shape("short")),
    };
    let cursor = everyone_or(picture::CURSOR)?;
    let rightful = everyone_or(picture::RIGHTFUL)?;
    let exact = !line.is_empty();
    let mut samples = line;
    let mut pos = picture::INTS + 1;
    while pos < ints.len() {
        samples.push(Sample {
            rank: n(pos)?,
            arrival: n(pos + 1)?,
            sid: 0,
        });
        pos += 2;
    }
    samples.truncate(MAX_SAMPLES.max(EXACT_LINE));
    Ok(SyncAnswer::Picture(RoomPicture {
        fleet_active: n(picture::FLEET_ACTIVE)?,
        queue_len: n(picture::QUEUE_LEN)?,
        cursor,
        rightful,
        quota: n(picture::QUOTA)?,
        nodes: n(picture::NODES)?.max(1),
        reported: n(picture::REPORTED)?,
        window_ms: n(picture::WINDOW)?,
        free: n(picture::FREE)?,
        expiring: n(picture::EXPIRING)?,
        leaving: n(picture::LEAVING)?,
        full: n(picture::FULL)? != 0,
        pressure: u8::try_from(n(picture::PRESSURE)?)
            .map_err(|_| ReplyError::Shape("bad pressure"))?,
        held,
        ends,
        samples,
        exact,
        flood,
        spent,
    }))
}

/// A small line whole: "arrival:sid" for each waiter, by rank, separated by spaces (at most
/// [`EXACT_LINE`], in the fleet's order); empty: not sent (the line is longer).
fn line_reply(text: &[u8]) -> Result<Vec<Sample>, ReplyError> {
    let bad = ReplyError::Shape("the line");
    let mut out: Vec<Sample> = Vec::new();
    for word in text.split(|&b| b == b' ').filter(|w| !w.is_empty()) {
        let mut parts = word.splitn(2, |&b| b == b':');
        let (Some(arrival), Some(sid)) = (parts.next(), parts.next()) else {
            return Err(bad);
        };
        let (Some(arrival), Some(sid)) = (decimal(arrival), decimal(sid)) else {
            return Err(bad);
        };
        if out.len() >= EXACT_LINE || out.last().is_some_and(|l| !l.before(arrival, sid)) {
            return Err(bad);
        }
        out.push(Sample {
            rank: out.len() as u64,
            arrival,
            sid,
        });
    }
    Ok(out)
}

/// A decimal number of at most 20 digits that fits a u64.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    core::str::from_utf8(digits).ok()?.parse().ok()
}

/// A sync's held places: how many of the quota's places are expiring sessions', then those
/// sessions' ends, ms from the picture, ascending: every one while they are at most
/// [`ENDS_CAP`], else that many.
fn ends_reply(items: &[Value]) -> Result<(u64, Vec<u64>), ReplyError> {
    let bad = ReplyError::Shape("session ends");
    let (Some(&Value::Int(held)), Some(rest)) = (items.first(), items.get(1..)) else {
        return Err(bad);
    };
    let held = count(held)?;
    if rest.len() as u64 != held.min(ENDS_CAP as u64) {
        return Err(bad);
    }
    let mut out = Vec::with_capacity(rest.len());
    for i in rest {
        let Value::Int(ms) = i else {
            return Err(ReplyError::Shape("session ends"));
        };
        let ms = count(*ms)?;
        if out.last().is_some_and(|&before| ms < before) {
            return Err(ReplyError::Shape("session ends"));
        }
        out.push(ms);
    }
    Ok((held, out))
}

/// A sync's flood answers: pairs of a client key (16 hex digits, as it names its bucket) and
/// the ms until it may take a place again (at least 1).
fn flood_reply(items: &[Value]) -> Result<Vec<FloodOver>, ReplyError> {
    let pairs = keyed_ms(items, FLOOD_ANSWER_CAP, "flood answers")?;
    Ok(pairs
        .into_iter()
        .map(|(key, retry_ms)| FloodOver { key, retry_ms })
        .collect())
}

/// A sync's spent proofs: pairs of a proof's key (16 hex digits) and the ms it stays spent.
fn spent_reply(items: &[Value]) -> Result<Vec<SpentProof>, ReplyError> {
    let pairs = keyed_ms(items, SPENT_ANSWER_CAP, "spent proofs")?;
    Ok(pairs
        .into_iter()
        .map(|(key, ms)| SpentProof { key, ms })
        .collect())
}

/// Pairs of a key in 16 hex digits and a number of ms (at least 1), at most `cap`.
fn keyed_ms(
    items: &[Value],
    cap: usize,
    what: &'static str,
) -> Result<Vec<(u64, u64)>, ReplyError> {
    if items.len() % 2 == 1 || items.len() > 2 * cap {
        return Err(ReplyError::Shape(what));
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    for pair in items.chunks_exact(2) {
        let (Some(Value::Bulk(hex)), Some(&Value::Int(ms))) = (pair.first(), pair.get(1)) else {
            return Err(ReplyError::Shape(what));
        };
        let key = core::str::from_utf8(hex)
            .ok()
            .filter(|h| h.len() == 16)
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or(ReplyError::Shape(what))?;
        let ms = count(ms)?;
        if ms == 0 {
            return Err(ReplyError::Shape(what));
        }
        out.push((key, ms));
    }
    Ok(out)
}

/// The script's answer to a draw: how many places were granted, and the sequence of the
/// node's last sync the script had run then (the places count only if the node sent none
/// since).
pub fn draw_reply(v: &Value) -> Result<Drawn, ReplyError> {
    let x = crate::redis::ints(v, drawn::LEN)?;
    match (at(&x, drawn::GRANTED), at(&x, drawn::SEQ)) {
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
