//! The Redis store's logic without any I/O: key names, the room script and its arguments,
//! replies turned into verdicts (fallibly), and the reconnect backoff. The network client that
//! carries these bytes lives in the module (`src/net/`); this part is covered by `cargo test`,
//! and `tests/redis_script.rs` runs the script against a real `redis-server` side by side with
//! [`Room`](crate::room::Room).

use core::fmt;
use std::net::{IpAddr, SocketAddr};

use crate::resp::Value;
use crate::room::{Mirror, Place, Refusal, Verdict, Visit};
use crate::rules::{Limits, Mode};

/// The room's rules in Lua: one call per decision, atomic inside Redis.
pub const ROOM_SCRIPT: &str = include_str!("room.lua");

/// SHA-1 of a script: the name `EVALSHA` calls it by.
pub fn sha_of(script: &str) -> String {
    ::redis::Script::new(script).get_hash().to_string()
}

/// `SCRIPT LOAD` of a script, sent first on every new connection so `EVALSHA` finds it.
pub fn load_command_of(script: &str) -> Vec<u8> {
    ::redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .get_packed_command()
}

/// A call of a script by its name (`EVALSHA sha`) or, once the server has lost it, by its text
/// (`EVAL`); the number of keys and the arguments follow.
pub fn script_call(form: Form, sha: &str, script: &str) -> ::redis::Cmd {
    match form {
        Form::Sha => {
            let mut cmd = ::redis::cmd("EVALSHA");
            cmd.arg(sha);
            cmd
        }
        Form::Text => {
            let mut cmd = ::redis::cmd("EVAL");
            cmd.arg(script);
            cmd
        }
    }
}

/// The four keys of one room. They share the `{room}` hash tag, so Redis Cluster keeps
/// them in one slot and the script may touch them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// Hash: tail, minute counters, the smoothed admission interval, the mode override.
    pub state: String,
    /// Sorted set: waiting session ids by queue number.
    pub line: String,
    /// Sorted set: waiting session ids by last sight.
    pub seen: String,
    /// Sorted set: admitted session ids by last sight.
    pub active: String,
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
        }
    }

    #[cfg(test)]
    fn all(&self) -> [&str; 4] {
        [&self.state, &self.line, &self.seen, &self.active]
    }
}

/// The Redis Cluster hash tag of a key: the text between the first `{` and the next `}`.
pub fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
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
}

/// Which form of the call: `EVALSHA` normally, `EVAL` with the whole text after a NOSCRIPT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Sha,
    Text,
}

impl Script {
    pub fn new(prefix: &str, room: &str, limits: Limits, max_line: u64) -> Script {
        Script {
            sha: sha_of(ROOM_SCRIPT),
            keys: Keys::new(prefix, room),
            limits,
            max_line,
        }
    }

    /// `SCRIPT LOAD`, sent first on every new connection so `EVALSHA` finds the script.
    pub fn load_command() -> Vec<u8> {
        load_command_of(ROOM_SCRIPT)
    }

    fn call(&self, form: Form, op: &str, now: u64, sid: u64, a9: u64, a10: u64) -> Vec<u8> {
        let l = &self.limits;
        let mut cmd = script_call(form, &self.sha, ROOM_SCRIPT);
        cmd.arg(4)
            .arg(&self.keys.state)
            .arg(&self.keys.line)
            .arg(&self.keys.seen)
            .arg(&self.keys.active)
            .arg(op)
            .arg(now)
            .arg(l.max_active)
            .arg(l.new_per_minute.unwrap_or(0))
            .arg(l.presence_ms)
            .arg(l.active_window_ms)
            .arg(l.mode.code())
            .arg(sid)
            .arg(a9)
            .arg(a10)
            .arg(self.max_line);
        cmd.get_packed_command()
    }

    pub fn visit(&self, form: Form, v: &Visit, now: u64) -> Vec<u8> {
        self.call(form, "visit", now, v.sid, v.qnum, u64::from(v.draw))
    }

    pub fn touch(&self, form: Form, sid: u64, now: u64) -> Vec<u8> {
        self.call(form, "touch", now, sid, 0, 0)
    }

    pub fn revoke(&self, form: Form, sid: u64, now: u64) -> Vec<u8> {
        self.call(form, "revoke", now, sid, 0, 0)
    }

    /// Sets the room-wide mode override (None: back to each node's configured mode).
    pub fn set_mode(&self, form: Form, mode: Option<Mode>) -> Vec<u8> {
        self.call(form, "mode", 0, 1, u64::from(mode.map_or(0, Mode::code)), 0)
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

/// Why a reply cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// Redis answered with an error (the text, shortened).
    Server(String),
    /// The script is not in the server's cache (send it with `EVAL`).
    NoScript,
    /// A reply of the wrong shape or type.
    Shape(&'static str),
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyError::Server(e) => write!(f, "redis answered an error: {e}"),
            ReplyError::NoScript => f.write_str("redis does not have the room script"),
            ReplyError::Shape(what) => write!(f, "unexpected reply from redis: {what}"),
        }
    }
}

impl std::error::Error for ReplyError {}

fn server_error(v: &Value) -> Option<ReplyError> {
    let text = v.error_text()?;
    if text.starts_with("NOSCRIPT") {
        return Some(ReplyError::NoScript);
    }
    let mut short: String = text.chars().take(200).collect();
    if short.len() < text.len() {
        short.push_str("...");
    }
    Some(ReplyError::Server(short))
}

/// The integers of an array reply of exactly `n` integers.
pub(crate) fn ints(v: &Value, n: usize) -> Result<Vec<i64>, ReplyError> {
    if let Some(e) = server_error(v) {
        return Err(e);
    }
    let Value::Array(items) = v else {
        return Err(ReplyError::Shape("expected an array"));
    };
    if items.len() != n {
        return Err(ReplyError::Shape("array of the wrong length"));
    }
    items
        .iter()
        .map(|i| match i {
            Value::Int(x) => Ok(*x),
            _ => Err(ReplyError::Shape("expected integers")),
        })
        .collect()
}

pub(crate) fn count(x: i64) -> Result<u64, ReplyError> {
    u64::try_from(x).map_err(|_| ReplyError::Shape("negative count"))
}

/// The script's answer to a visit, as the verdict [`Room::visit`](crate::room::Room::visit)
/// would give, plus the room's figures.
pub fn visit_outcome(v: &Value, visit: &Visit) -> Result<Outcome, ReplyError> {
    let x = ints(v, 10)?;
    let (kind, qnum, position) = (x[0], count(x[1])?, count(x[2])?);
    let queue_len = count(x[3])?;
    let interval_ms = count(x[4])?;
    let active = count(x[5])?;
    let joined = match x[6] {
        0 => false,
        1 => true,
        _ => return Err(ReplyError::Shape("bad joined flag")),
    };
    let expired = count(x[7])?;
    let mode_override = u32::try_from(x[8]).map_err(|_| ReplyError::Shape("bad mode"))?;
    let version = count(x[9])?;
    let verdict = match kind {
        1 => Verdict::Admit { sid: visit.sid },
        2 => {
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
            })
        }
        3 => Verdict::Refuse(Refusal::Closed),
        4 => Verdict::Refuse(Refusal::LineFull { queue_len }),
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
    })
}

/// A touch reply: the room's active count.
pub fn touch_outcome(v: &Value) -> Result<Mirror, ReplyError> {
    let x = ints(v, 2)?;
    Ok(Mirror {
        active: Some(count(x[0])?),
        version: count(x[1])?,
        ..Mirror::default()
    })
}

/// A revoke reply: whether the session counted, and the room's active count.
pub fn revoke_outcome(v: &Value) -> Result<(bool, Mirror), ReplyError> {
    let x = ints(v, 3)?;
    let mirror = Mirror {
        active: Some(count(x[1])?),
        version: count(x[2])?,
        ..Mirror::default()
    };
    Ok((x[0] == 1, mirror))
}

/// The reply to `SCRIPT LOAD`: the script's SHA-1, which must be ours.
pub fn check_load(v: &Value, sha: &str) -> Result<(), ReplyError> {
    if let Some(e) = server_error(v) {
        return Err(e);
    }
    match v {
        Value::Bulk(b) if b.as_slice() == sha.as_bytes() => Ok(()),
        Value::Bulk(_) => Err(ReplyError::Shape("SCRIPT LOAD named another script")),
        _ => Err(ReplyError::Shape("expected a bulk string")),
    }
}

/// `AUTH [user] password`: an ACL user (Redis 6+), or the `requirepass` password alone.
pub fn auth_command(user: Option<&str>, password: &str) -> Vec<u8> {
    let mut cmd = ::redis::cmd("AUTH");
    if let Some(u) = user {
        cmd.arg(u);
    }
    cmd.arg(password);
    cmd.get_packed_command()
}

/// `ASKING`, sent before a command a cluster node redirected with `ASK`.
pub fn asking_command() -> Vec<u8> {
    ::redis::cmd("ASKING").get_packed_command()
}

/// `SENTINEL get-master-addr-by-name NAME`.
pub fn master_query(master: &str) -> Vec<u8> {
    ::redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(master)
        .get_packed_command()
}

/// The node of a cluster redirection, `MOVED <slot> <ip>:<port>` or `ASK <slot> <ip>:<port>`
/// (`prefix` is `b"MOVED "` or `b"ASK "`, the error reply's text follows it). Numeric
/// addresses only, which is what a cluster announces by default: the module resolves no
/// names at run time.
pub fn redirection(error: &[u8], prefix: &[u8]) -> Option<SocketAddr> {
    let rest = error.strip_prefix(prefix)?;
    let text = core::str::from_utf8(rest).ok()?;
    let (slot, node) = text.trim().split_once(' ')?;
    slot.parse::<u16>().ok()?;
    let (host, port) = node.rsplit_once(':')?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    Some(SocketAddr::new(ip, port.parse().ok()?))
}

/// A Sentinel's answer to [`master_query`]: `[ip, port]` (nil when it does not know the
/// master).
pub fn master_address(v: &Value) -> Option<SocketAddr> {
    let Value::Array(items) = v else { return None };
    let [Value::Bulk(ip), Value::Bulk(port)] = items.as_slice() else {
        return None;
    };
    let ip: IpAddr = core::str::from_utf8(ip).ok()?.parse().ok()?;
    let port: u16 = core::str::from_utf8(port).ok()?.parse().ok()?;
    Some(SocketAddr::new(ip, port))
}

/// Reconnect delays: from `first_ms`, doubling up to `max_ms`, back to the start after a
/// success. A failed connection is not retried before its delay is over; the decisions in
/// between take the failure policy at once instead of waiting for a timeout each.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    first_ms: u64,
    max_ms: u64,
    next_ms: u64,
    /// No new connection before this time (unix ms).
    pub retry_at: u64,
}

/// First and largest delay before reconnecting to Redis after a failure.
pub const BACKOFF_FIRST_MS: u64 = 100;
pub const BACKOFF_MAX_MS: u64 = 3_000;

impl Backoff {
    pub const fn new(first_ms: u64, max_ms: u64) -> Backoff {
        Backoff {
            first_ms,
            max_ms,
            next_ms: first_ms,
            retry_at: 0,
        }
    }

    /// A failure at `now`: returns the delay before the next attempt.
    pub fn failed(&mut self, now: u64) -> u64 {
        let delay = self.next_ms;
        self.retry_at = now.saturating_add(delay);
        self.next_ms = (self.next_ms.saturating_mul(2)).min(self.max_ms);
        delay
    }

    pub fn succeeded(&mut self) {
        self.next_ms = self.first_ms;
        self.retry_at = 0;
    }

    pub fn may_try(&self, now: u64) -> bool {
        now >= self.retry_at
    }
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

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp;

    fn limits() -> Limits {
        Limits {
            max_active: 5,
            new_per_minute: None,
            presence_ms: 20_000,
            active_window_ms: 60_000,
            mode: Mode::Fifo,
            flood: None,
            session_rate: None,
        }
    }

    fn visit() -> Visit {
        Visit {
            sid: u64::MAX - 1,
            qnum: 0,
            draw: 7,
            flood_key: None,
            arrival: 0,
        }
    }

    fn arr(x: &[i64]) -> Value {
        Value::Array(x.iter().map(|&i| Value::Int(i)).collect())
    }

    #[test]
    fn keys_share_one_hash_tag() {
        let k = Keys::new("smart_limit", "shop");
        assert_eq!(k.state, "smart_limit:{shop}:state");
        for key in k.all() {
            assert_eq!(hash_tag(key), Some("shop"));
        }
        let k = Keys::new("eu-1:sl", "a_b");
        assert_eq!(k.line, "eu-1:sl:{a_b}:line");
        assert_eq!(hash_tag(&k.line), Some("a_b"));
        assert_eq!(hash_tag("no tag"), None);
        assert_eq!(hash_tag("{}x"), None);
    }

    #[test]
    fn script_calls_are_well_formed() {
        let s = Script::new("p", "r", limits(), 0);
        assert_eq!(s.sha.len(), 40);
        let cmd = s.visit(Form::Sha, &visit(), 0);
        let (v, used) = resp::parse(&cmd).unwrap().unwrap();
        assert_eq!(used, cmd.len());
        let Value::Array(items) = v else { panic!() };
        let text: Vec<String> = items
            .iter()
            .map(|i| match i {
                Value::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
                _ => panic!(),
            })
            .collect();
        assert_eq!(text[0], "EVALSHA");
        assert_eq!(text[1], s.sha);
        assert_eq!(text[2], "4");
        assert_eq!(text[7], "visit");
        assert_eq!(text[14], (u64::MAX - 1).to_string());
        assert_eq!(text.len(), 18);
        let eval = s.visit(Form::Text, &visit(), 0);
        assert!(eval
            .windows(ROOM_SCRIPT.len())
            .any(|w| w == ROOM_SCRIPT.as_bytes()));
    }

    #[test]
    fn replies_become_verdicts() {
        let v = visit();
        let o = visit_outcome(&arr(&[1, 0, 0, 3, 0, 4, 0, 0, 0, 77]), &v).unwrap();
        assert_eq!(o.verdict, Verdict::Admit { sid: v.sid });
        assert_eq!((o.queue_len, o.active), (3, 4));
        let o = visit_outcome(&arr(&[2, 1000, 3, 7, 1500, 5, 1, 2, 0, 78]), &v).unwrap();
        assert_eq!(
            o.verdict,
            Verdict::Wait(Place {
                sid: v.sid,
                qnum: 1000,
                position: 3,
                queue_len: 7,
                eta_secs: Some(5)
            })
        );
        assert!(o.joined);
        assert_eq!(o.expired, 2);
        let o = visit_outcome(&arr(&[3, 0, 0, 0, 0, 0, 0, 0, 4, 79]), &v).unwrap();
        assert_eq!(o.verdict, Verdict::Refuse(Refusal::Closed));
        assert_eq!(o.mode_override, 4);
    }

    #[test]
    fn bad_replies_are_errors() {
        let v = visit();
        let bad = [
            Value::Nil,
            Value::Int(1),
            Value::Status(b"OK".to_vec()),
            Value::Bulk(b"1".to_vec()),
            arr(&[1, 0, 0]),
            arr(&[1, 0, 0, 3, 0, 4, 0, 0, 0]),
            arr(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            arr(&[2, 0, 1, 1, 0, 0, 0, 0, 0, 1]),
            arr(&[2, 5, -1, 1, 0, 0, 0, 0, 0, 1]),
            arr(&[2, 5, 1, 1, 0, 0, 7, 0, 0, 1]),
            arr(&[2, 5, 1, 1, 0, 0, 0, 0, 0, -1]),
            Value::Array(vec![Value::Bulk(b"1".to_vec()); 10]),
            Value::Error(b"WRONGTYPE Operation against a key".to_vec()),
        ];
        for b in bad {
            assert!(visit_outcome(&b, &v).is_err(), "{b:?}");
        }
        assert_eq!(
            visit_outcome(&Value::Error(b"NOSCRIPT No matching script".to_vec()), &v),
            Err(ReplyError::NoScript)
        );
        assert_eq!(touch_outcome(&arr(&[3, 9])).unwrap().active, Some(3));
        assert!(touch_outcome(&arr(&[-3, 9])).is_err());
        assert!(touch_outcome(&arr(&[3])).is_err());
        let (removed, m) = revoke_outcome(&arr(&[1, 2, 9])).unwrap();
        assert!(removed);
        assert_eq!((m.active, m.version), (Some(2), 9));
        assert!(revoke_outcome(&arr(&[1, 2])).is_err());
    }

    #[test]
    fn load_reply_must_name_our_script() {
        let sha = sha_of(ROOM_SCRIPT);
        assert!(check_load(&Value::Bulk(sha.clone().into_bytes()), &sha).is_ok());
        assert!(check_load(&Value::Bulk(b"0000".to_vec()), &sha).is_err());
        assert!(check_load(&Value::Error(b"ERR no scripts".to_vec()), &sha).is_err());
    }

    #[test]
    fn cluster_redirections_and_sentinel_answers() {
        let a = redirection(b"MOVED 3999 127.0.0.1:6381", b"MOVED ").unwrap();
        assert_eq!(a, "127.0.0.1:6381".parse().unwrap());
        let a = redirection(b"ASK 12 ::1:7002", b"ASK ").unwrap();
        assert_eq!(a, "[::1]:7002".parse().unwrap());
        assert_eq!(redirection(b"MOVED 3999 127.0.0.1:6381", b"ASK "), None);
        assert_eq!(redirection(b"MOVED x 127.0.0.1:6381", b"MOVED "), None);
        assert_eq!(redirection(b"MOVED 1 redis-a:6381", b"MOVED "), None);
        assert_eq!(redirection(b"MOVED 1 127.0.0.1:99999", b"MOVED "), None);
        assert_eq!(redirection(b"MOVED 1", b"MOVED "), None);
        let ok = Value::Array(vec![
            Value::Bulk(b"127.0.0.1".to_vec()),
            Value::Bulk(b"6380".to_vec()),
        ]);
        assert_eq!(master_address(&ok), Some("127.0.0.1:6380".parse().unwrap()));
        for bad in [
            Value::Nil,
            Value::Array(vec![]),
            Value::Array(vec![Value::Bulk(b"x".to_vec()), Value::Bulk(b"1".to_vec())]),
            Value::Error(b"ERR no such master".to_vec()),
        ] {
            assert_eq!(master_address(&bad), None);
        }
        let auth = auth_command(Some("u"), "p w");
        let (v, _) = crate::resp::parse(&auth).unwrap().unwrap();
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Bulk(b"AUTH".to_vec()),
                Value::Bulk(b"u".to_vec()),
                Value::Bulk(b"p w".to_vec())
            ])
        );
    }

    #[test]
    fn backoff_doubles_and_resets() {
        let mut b = Backoff::new(100, 1000);
        assert!(b.may_try(0));
        assert_eq!(b.failed(10), 100);
        assert!(!b.may_try(109));
        assert!(b.may_try(110));
        assert_eq!(b.failed(110), 200);
        assert_eq!(b.failed(310), 400);
        assert_eq!(b.failed(710), 800);
        assert_eq!(b.failed(1510), 1000);
        assert_eq!(b.failed(2510), 1000);
        b.succeeded();
        assert!(b.may_try(2511));
        assert_eq!(b.failed(3000), 100);
    }

    #[test]
    fn touches_are_rate_limited_per_session() {
        let mut t = TouchLog::default();
        assert!(t.due(1, 0, 30_000));
        assert!(!t.due(1, 29_999, 30_000));
        assert!(t.due(1, 30_000, 30_000));
        t.note(2, 100);
        assert!(!t.due(2, 200, 30_000));
        for sid in 10..10_000 {
            t.due(sid, 40_000, 30_000);
        }
        // Old entries are pruned once the log is large.
        t.due(5, 80_000, 30_000);
        assert!(t.len() < 100);
    }
}
