//! The central room in Redis: its keys (one hash tag per room, so a cluster keeps them in one
//! slot), the room script and its arguments, and its replies turned into verdicts.

use super::resp::Value;
use super::script::{count, ints, Form, ReplyError};
use super::script::{load_command_of, script_call, sha_of};

use crate::challenge::LOOK_MS;
use crate::room::gcra::Rate;
use crate::room::rules::{Limits, Mode};
use crate::room::{Counted, Mirror, Place, Refusal, Verdict, Visit, EXPIRE_STEP};

/// The room's rules in Lua: one call per decision, atomic inside Redis. Its constants are
/// these (their one source), in the preamble before `room.lua`'s text.
pub const ROOM_SCRIPT: &str = super::script::lua_script!(
    concat!(include_str!("steer.lua"), include_str!("room.lua")),
    {
    EXPIRE_STEP = EXPIRE_STEP,
    LOTTERY_SPAN = LOTTERY_SPAN,
    LOOK_MS = LOOK_MS,
    FIFO = Mode::Fifo.code(),
    RANDOM = Mode::Random.code(),
    PASSTHROUGH = Mode::Passthrough.code(),
    REJECT = Mode::Reject.code(),
    QUEUE_ALL = Mode::QueueAll.code(),
    PPM = crate::util::PPM,
    PRESSURE_KEEP_PCT = crate::challenge::PRESSURE_KEEP_PCT,
    MAX_DOUBLINGS = crate::challenge::MAX_DOUBLINGS,
    KEY_TTL_FLOOR_MS = super::KEY_TTL_FLOOR_MS,
    MODE_KEEP_MS = MODE_KEEP_MS,
    MINUTE_MS = crate::room::rules::MINUTE_MS,
    DRAW_SCALE = crate::room::rules::DRAW_SCALE,
    // Where each value of a reply sits, and a visit's kinds (`reply`).
    V_KIND = reply::KIND, V_QNUM = reply::QNUM, V_POSITION = reply::POSITION,
    V_QUEUE_LEN = reply::QUEUE_LEN, V_INTERVAL = reply::INTERVAL, V_ACTIVE = reply::ACTIVE,
    V_JOINED = reply::JOINED, V_EXPIRED = reply::EXPIRED, V_MODE = reply::MODE,
    V_VERSION = reply::VERSION, V_PRESSURE = reply::PRESSURE, V_RESUMED = reply::RESUMED,
    K_ADMIT = reply::ADMIT, K_WAIT = reply::WAIT, K_CLOSED = reply::CLOSED,
    K_LINE_FULL = reply::LINE_FULL, K_THROTTLED = reply::THROTTLED,
    K_PROOF_SPENT = reply::PROOF_SPENT,
    T_ACTIVE = reply::touch::ACTIVE, T_VERSION = reply::touch::VERSION,
    R_REMOVED = reply::revoke::REMOVED, R_ACTIVE = reply::revoke::ACTIVE,
    R_VERSION = reply::revoke::VERSION,
    V_STEER = reply::STEER, V_LEN = reply::LEN,
    },
    super::steer::STEER_SHARED
);

/// Where each value of the script's replies sits, and what a visit's kind says: the one
/// table the script (in its preamble) and the readers below ([`visit_outcome`],
/// [`touch_outcome`], [`revoke_outcome`]) take them from. Positions are Lua's, from 1.
pub mod reply {
    /// A visit's: its kind (below), the queue number (a throttle's wait, ms), the position,
    /// the line's length, the admission interval (ms), the active sessions, whether it
    /// joined the line, places expired, the mode override, the script's clock (µs), the
    /// fleet's pressure (0: not asked, else 1 + doublings), and whether the client came back
    /// to its kept place ([S27]).
    pub const KIND: usize = 1;
    pub const QNUM: usize = 2;
    pub const POSITION: usize = 3;
    pub const QUEUE_LEN: usize = 4;
    pub const INTERVAL: usize = 5;
    pub const ACTIVE: usize = 6;
    pub const JOINED: usize = 7;
    pub const EXPIRED: usize = 8;
    pub const MODE: usize = 9;
    pub const VERSION: usize = 10;
    pub const PRESSURE: usize = 11;
    pub const RESUMED: usize = 12;
    /// `max_active=auto`'s values follow from place `STEER + 1` (`super::steer::reply`).
    pub const STEER: usize = 12;
    pub const LEN: usize = STEER + crate::redis::steer::reply::LEN;

    /// A visit's kinds.
    pub const ADMIT: u8 = 1;
    pub const WAIT: u8 = 2;
    /// The room is closed (mode reject).
    pub const CLOSED: u8 = 3;
    pub const LINE_FULL: u8 = 4;
    /// Flood control: no place (QNUM is then the ms until the address may take one).
    pub const THROTTLED: u8 = 5;
    /// The proof brought was spent already (no place).
    pub const PROOF_SPENT: u8 = 6;

    /// A touch's: the active sessions, the script's clock.
    pub mod touch {
        pub const ACTIVE: usize = 1;
        pub const VERSION: usize = 2;
        pub const LEN: usize = 2;
    }

    /// A revoke's: whether the session counted (1), the active sessions, the script's clock.
    pub mod revoke {
        pub const REMOVED: usize = 1;
        pub const ACTIVE: usize = 2;
        pub const VERSION: usize = 3;
        pub const LEN: usize = 3;
    }

    /// The value at Lua position `pos` of a reply's integers (0 past its end: the readers
    /// check the length first).
    pub fn at(x: &[i64], pos: usize) -> i64 {
        crate::redis::at_place(x, pos).copied().unwrap_or(0)
    }
}

/// How long a mode override outlives the room's last visit: it is an operator's switch, not
/// traffic, so it stays for a day.
pub const MODE_KEEP_MS: u64 = 86_400_000;

/// The six keys of one room, and the names of its flood buckets. They share the `{room}`
/// hash tag, so Redis Cluster keeps them in one slot and the script may touch them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// Hash: tail, minute counters, the smoothed admission interval, the mode override.
    pub state: String,
    /// Sorted set: kept waiting session ids (present, or absent within `keep`) by queue number.
    pub line: String,
    /// Sorted set: present waiting session ids by last sight.
    pub seen: String,
    /// Sorted set: admitted session ids by last sight.
    pub active: String,
    /// Sorted set: present waiting session ids by queue number (the head is the first).
    pub here: String,
    /// Sorted set: absent kept waiting session ids by last sight ([S27]).
    pub away: String,
    /// Start of the flood-control buckets' names (see [`Keys::flood`]).
    flood_base: String,
    /// Start of the spent proofs' names (see [`Keys::spent`]).
    spent_base: String,
}

impl Keys {
    /// `prefix` and `room` are already validated by the configuration parser: no braces, no
    /// spaces (so the hash tag is exactly `{room}`).
    pub fn new(prefix: &str, room: &str) -> Keys {
        let base = format!("{prefix}:{{{room}}}");
        Keys {
            state: format!("{base}:state"),
            line: format!("{base}:line"),
            seen: format!("{base}:seen"),
            active: format!("{base}:active"),
            here: format!("{base}:here"),
            away: format!("{base}:away"),
            flood_base: format!("{base}:flood:"),
            spent_base: format!("{base}:spent:"),
        }
    }

    /// A proof of work spent on the fleet (`challenge=pow`, [S19]), by its key
    /// (`challenge::spent_key`): a string that expires when the proof would no longer be
    /// needed. Under the room's hash tag, so the visit's own call records it.
    pub fn spent(&self, key: u64) -> String {
        format!("{}{key:016x}", self.spent_base)
    }

    /// The flood-control bucket of one client key ([S15]), by the key's hash (seeded alike on
    /// every node, so one address names one bucket on the fleet): a string holding the GCRA's
    /// theoretical arrival time (us) that expires when the bucket is full again. Under the
    /// room's hash tag, so a script may touch it with the room's other keys.
    pub fn flood(&self, key: u64) -> String {
        format!("{}{key:016x}", self.flood_base)
    }

    #[cfg(test)]
    pub(super) fn all(&self) -> [&str; 6] {
        [
            &self.state,
            &self.line,
            &self.seen,
            &self.active,
            &self.here,
            &self.away,
        ]
    }
}

/// Builds the script calls of one room. `now` is sent as 0 by nginx: the script then reads
/// the Redis server's clock, one clock for the whole fleet.
#[derive(Debug, Clone)]
pub struct Script {
    pub sha: String,
    pub keys: Keys,
    pub limits: Limits,
    /// Most places in the line (0: no cap).
    pub max_line: u64,
    /// `challenge_bits=auto`: visits count the fleet's pressure and bring its doublings back
    /// ([`Outcome::pressure`]).
    pub pressure: bool,
}

impl Script {
    pub fn new(prefix: &str, room: &str, limits: Limits, max_line: u64) -> Script {
        Script {
            sha: sha_of(ROOM_SCRIPT),
            keys: Keys::new(prefix, room),
            limits,
            max_line,
            pressure: false,
        }
    }

    /// Visits ask for the fleet's pressure (`challenge_bits=auto`).
    pub fn with_pressure(mut self, on: bool) -> Script {
        self.pressure = on;
        self
    }

    /// `SCRIPT LOAD`, sent first on every new connection so `EVALSHA` finds the script.
    pub fn load_command() -> Vec<u8> {
        load_command_of(ROOM_SCRIPT)
    }

    /// A call of the room script, with ARGV 10 and 11 as given; `flood`: the visit pays for a
    /// place from this client key's bucket (a seventh key, and the rate as ARGV 13 and 14);
    /// `ev`: a visit while a scheduled event is in force (ARGV 15 to 17); `spent`: the proof
    /// the visit spends to take a new place (the last key, its TTL as ARGV 18); a visit of a
    /// room with [`Script::pressure`] sends ARGV 19, one that steers `max_active=auto` ARGV 20
    /// ([`Telling`]).
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        form: Form,
        op: &str,
        now: u64,
        sid: u64,
        [a9, a10]: [u64; 2],
        (flood, spent): (Option<(u64, Rate)>, Option<SpentProof>),
        (l, ev): (&Limits, Option<EventArgs>),
        telling: &Telling,
    ) -> Vec<u8> {
        let mut cmd = script_call(form, &self.sha, ROOM_SCRIPT);
        cmd.arg(6 + usize::from(flood.is_some()) + usize::from(spent.is_some()))
            .arg(&self.keys.state)
            .arg(&self.keys.line)
            .arg(&self.keys.seen)
            .arg(&self.keys.active)
            .arg(&self.keys.here)
            .arg(&self.keys.away);
        if let Some((key, _)) = flood {
            cmd.arg(self.keys.flood(key));
        }
        if let Some(s) = spent {
            cmd.arg(self.keys.spent(s.key));
        }
        cmd.arg(op)
            .arg(now)
            .arg(l.max_active)
            .arg(l.new_per_minute.unwrap_or(0))
            .arg(l.presence_ms)
            .arg(l.kept_ms())
            .arg(l.active_window_ms)
            .arg(l.mode.code())
            .arg(sid)
            .arg(a9)
            .arg(a10)
            .arg(self.max_line);
        let (interval_us, burst) = flood.map_or((0, 0), |(_, r)| (r.interval_us, r.burst));
        cmd.arg(interval_us).arg(burst);
        let visit = op == "visit" || op == "page";
        let steer = telling.steer.as_deref().filter(|_| visit);
        let pressure = self.pressure && visit;
        match ev {
            Some(ev) => {
                let phase = if ev.started { 2 } else { 1 };
                cmd.arg(ev.id).arg(phase).arg(ev.key);
            }
            // (ARGV 18 or more follows: no event is "0" 0 0.)
            None if spent.is_some() || pressure || steer.is_some() => {
                cmd.arg(0).arg(0).arg(0);
            }
            None => {}
        }
        match spent {
            Some(s) => {
                cmd.arg(s.ttl_ms.max(1));
            }
            None if pressure || steer.is_some() => {
                cmd.arg(0);
            }
            None => {}
        }
        if pressure {
            cmd.arg(telling.challenges.saturating_add(1));
        } else if steer.is_some() {
            cmd.arg(0);
        }
        if let Some(steer) = steer {
            cmd.arg(steer);
        }
        cmd.get_packed_command()
    }

    /// A visit. A client with a flood key (taking its place) pays for it from its address's
    /// budget in the same call, when the room has flood control: one round trip still.
    pub fn visit(&self, form: Form, v: &Visit, now: u64) -> Vec<u8> {
        self.visit_in(form, v, now, (&self.limits, None), None)
    }

    /// A visit under `limits` (a scheduled event's, see `store::Zone::limits_in`) while the
    /// event `ev` is in force, spending `spent` if it takes a new place (see [`SpentProof`]).
    pub fn visit_in(
        &self,
        form: Form,
        v: &Visit,
        now: u64,
        le: (&Limits, Option<EventArgs>),
        spent: Option<SpentProof>,
    ) -> Vec<u8> {
        self.visit_telling(form, v, now, le, spent, &Telling::default())
    }

    /// The same, telling the fleet what this worker measured ([`Telling`]).
    pub fn visit_telling(
        &self,
        form: Form,
        v: &Visit,
        now: u64,
        (limits, ev): (&Limits, Option<EventArgs>),
        spent: Option<SpentProof>,
        telling: &Telling,
    ) -> Vec<u8> {
        let flood = v.flood_key.zip(limits.flood);
        let a = [v.qnum, u64::from(v.draw)];
        let le = (limits, ev);
        let op = if v.follows_admission() {
            "page"
        } else {
            "visit"
        };
        self.call(form, op, now, v.sid, a, (flood, spent), le, telling)
    }

    /// A call that is not a visit: no flood bucket, no proof, no event, the room's limits.
    fn other(&self, form: Form, op: &str, now: u64, sid: u64, a: [u64; 2]) -> Vec<u8> {
        let plain = (None, None);
        let told = &Telling::default();
        self.call(form, op, now, sid, a, plain, (&self.limits, None), told)
    }

    pub fn touch(&self, form: Form, sid: u64, now: u64) -> Vec<u8> {
        self.other(form, "touch", now, sid, [0, 0])
    }

    pub fn revoke(&self, form: Form, sid: u64, now: u64) -> Vec<u8> {
        self.other(form, "revoke", now, sid, [0, 0])
    }

    /// Sets the room-wide mode override (None: back to each node's configured mode).
    pub fn set_mode(&self, form: Form, mode: Option<Mode>) -> Vec<u8> {
        let code = u64::from(mode.map_or(0, Mode::code));
        self.other(form, "mode", 0, 1, [code, 0])
    }
}

/// What a visit tells the fleet beyond itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Telling {
    /// [`Script::pressure`]: the challenges this worker gave since its last visit.
    pub challenges: u64,
    /// `max_active=auto`: the node's steering argument ([`super::steer::argument`]); the
    /// fleet's value is then the visit's `max_active`, and the reply says it
    /// ([`Outcome::steer`]).
    pub steer: Option<String>,
}

/// A proof of work a visit brings to take a new place (`challenge=pow`): the room script
/// records it spent (SET NX, for `ttl_ms`) in the same call, and refuses the place when it was
/// spent already, on any node ([`Refusal::ProofSpent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpentProof {
    pub key: u64,
    pub ttl_ms: u64,
}

/// The queue numbers an event's pre-queue reserves for its members' lottery keys (`room.lua`,
/// "Events"): a key is below this.
pub const LOTTERY_SPAN: u64 = 1 << 40;

/// A scheduled event in force for a visit, as the room script needs it ([S18]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventArgs {
    /// The event's id (never 0).
    pub id: u64,
    /// Running (else its pre-queue is open).
    pub started: bool,
    /// In the pre-queue: the client's lottery key, 1 .. [`LOTTERY_SPAN`] (from
    /// [`EventArgs::draw_key`]); 0: places by arrival (`shuffle=off`).
    pub key: u64,
}

impl EventArgs {
    /// A lottery key from the operating system's randomness (None: it gave none; the place
    /// is then taken by arrival).
    pub fn draw_key() -> Option<u64> {
        let key = crate::util::random::u64().ok()? % LOTTERY_SPAN;
        Some(key.max(1))
    }
}

/// What a reply says beyond the verdict: the room's figures, mirrored into this node's shared
/// memory for metrics (and counted there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub queue_len: u64,
    pub active: u64,
    /// The client took a new place at the tail on this call.
    pub joined: bool,
    /// Absent clients this call dropped from the head of the line.
    pub expired: u64,
    /// The room's mode override code (0 = none).
    pub mode_override: u32,
    /// The script's clock (µs): orders replies that come back on different connections.
    pub version: u64,
    /// `challenge_bits=auto`: the fleet's pressure at the script's last look, in doublings
    /// (None: the visit did not ask).
    pub pressure: Option<u8>,
    /// `max_active=auto`: the fleet's value, and the window this visit closed (None: the
    /// visit did not steer).
    pub steer: Option<crate::capacity::fleet::Fleet>,
}

impl Outcome {
    /// The room's figures, for this node's shared memory.
    pub fn mirror(&self) -> Mirror {
        Mirror {
            queue_len: Some(self.queue_len),
            active: Some(self.active),
            mode_override: Some(self.mode_override),
            version: self.version,
        }
    }
}

/// The script's answer to a visit, as the verdict [`Room::visit`](crate::room::Room::visit)
/// would give, plus the room's figures.
pub fn visit_outcome(v: &Value, visit: &Visit) -> Result<Outcome, ReplyError> {
    let x = ints(v, reply::LEN)?;
    let at = |pos| reply::at(&x, pos);
    let kind = u8::try_from(at(reply::KIND)).map_err(|_| ReplyError::Shape("unknown verdict"))?;
    let (qnum, position) = (count(at(reply::QNUM))?, count(at(reply::POSITION))?);
    let queue_len = count(at(reply::QUEUE_LEN))?;
    let interval_ms = count(at(reply::INTERVAL))?;
    let active = count(at(reply::ACTIVE))?;
    let joined = match at(reply::JOINED) {
        0 => false,
        1 => true,
        _ => return Err(ReplyError::Shape("bad joined flag")),
    };
    let resumed = match at(reply::RESUMED) {
        0 => false,
        1 => true,
        _ => return Err(ReplyError::Shape("bad resumed flag")),
    };
    let expired = count(at(reply::EXPIRED))?;
    let mode_override =
        u32::try_from(at(reply::MODE)).map_err(|_| ReplyError::Shape("bad mode"))?;
    let version = count(at(reply::VERSION))?;
    let pressure = match count(at(reply::PRESSURE))? {
        0 => None,
        n => Some(u8::try_from(n - 1).map_err(|_| ReplyError::Shape("bad pressure"))?),
    };
    let steer = super::steer::fleet_of(&x, reply::STEER + 1)?;
    let verdict = match kind {
        reply::ADMIT => Verdict::Admit { sid: visit.sid },
        reply::WAIT => {
            if qnum == 0 {
                return Err(ReplyError::Shape("a place without a queue number"));
            }
            // The same estimate as Room::wait_answer.
            let eta_secs = (position > 0 && interval_ms > 0)
                .then(|| position.saturating_mul(interval_ms).div_ceil(1000));
            Verdict::Wait(Place {
                sid: visit.sid,
                qnum,
                position,
                queue_len,
                eta_secs,
                resumed,
                counted: Counted::All,
            })
        }
        reply::CLOSED => Verdict::Refuse(Refusal::Closed),
        reply::LINE_FULL => Verdict::Refuse(Refusal::LineFull { queue_len }),
        // Flood control: the second element is the wait (never 0), not a queue number.
        reply::THROTTLED if qnum > 0 => Verdict::Throttled {
            retry_ms: qnum,
            queue_len,
        },
        reply::THROTTLED => return Err(ReplyError::Shape("a throttle without a wait")),
        reply::PROOF_SPENT => Verdict::Refuse(Refusal::ProofSpent { queue_len }),
        _ => return Err(ReplyError::Shape("unknown verdict")),
    };
    Ok(Outcome {
        verdict,
        queue_len,
        active,
        joined,
        expired,
        mode_override,
        version,
        pressure,
        steer,
    })
}

/// A touch reply: the room's active count.
pub fn touch_outcome(v: &Value) -> Result<Mirror, ReplyError> {
    let x = ints(v, reply::touch::LEN)?;
    Ok(Mirror {
        active: Some(count(reply::at(&x, reply::touch::ACTIVE))?),
        version: count(reply::at(&x, reply::touch::VERSION))?,
        ..Mirror::default()
    })
}

/// A revoke reply: whether the session counted, and the room's active count.
pub fn revoke_outcome(v: &Value) -> Result<(bool, Mirror), ReplyError> {
    let x = ints(v, reply::revoke::LEN)?;
    let mirror = Mirror {
        active: Some(count(reply::at(&x, reply::revoke::ACTIVE))?),
        version: count(reply::at(&x, reply::revoke::VERSION))?,
        ..Mirror::default()
    };
    Ok((reply::at(&x, reply::revoke::REMOVED) == 1, mirror))
}

/// Admitted sessions this worker has told Redis about recently: a session seen on a valid
/// admitted ticket is written to the room's active set at most once per `every_ms` (half the
/// active window), so it never drops out of the count while it keeps coming, and a busy
/// session costs Redis one write per half window per worker, not one per request.
#[derive(Debug, Default)]
pub struct TouchLog {
    seen: std::collections::HashMap<u64, u64>,
    pruned_at: u64,
}

impl TouchLog {
    /// True when `sid` should be written now (and records it as written).
    pub fn due(&mut self, sid: u64, now: u64, every_ms: u64) -> bool {
        if self.seen.len() > 4096 && now.saturating_sub(self.pruned_at) >= every_ms {
            self.seen.retain(|_, t| now.saturating_sub(*t) < every_ms);
            self.pruned_at = now;
        }
        match self.seen.get(&sid) {
            Some(&t) if now.saturating_sub(t) < every_ms => false,
            _ => {
                self.seen.insert(sid, now);
                true
            }
        }
    }

    /// Records a write made by other means (the admission itself adds the session).
    pub fn note(&mut self, sid: u64, now: u64) {
        self.seen.insert(sid, now);
    }

    /// When this worker last wrote `sid` to the active set. A session ticket is renewed no
    /// further than this: a ticket that admitted past the room's last sight of its session
    /// would admit after Redis gave its place to someone else.
    pub fn written_at(&self, sid: u64) -> Option<u64> {
        self.seen.get(&sid).copied()
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}
