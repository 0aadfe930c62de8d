//! Scripts by SHA (EVALSHA, with EVAL on NOSCRIPT), and replies read fallibly: a server
//! error, a wrong shape or a negative count is a [`ReplyError`], never a panic.

use core::fmt;

use super::resp::Value;

/// The first line of every script's text: what the generated lines below it are.
pub const PREAMBLE_HEAD: &str =
    "-- From Rust, the one source of the constants this script shares (generated at build):\n";

/// The text of a script as it is sent (and as its SHA is taken): a preamble of one
/// `local NAME = value` line for each constant the script shares with Rust, then the script's
/// file, which defines no numeric constant of its own (scripts/check-layout keeps it so). Built
/// at compile time from the Rust constants, their one source:
///
/// ```ignore
/// pub const TALLY_SCRIPT: &str = lua_script!(include_str!("tally.lua"), {
///     STALE = STALE_INTERVALS,
///     BATCH = BATCH,
/// });
/// ```
///
/// More constants may follow the braces as slices of `(name, value)` (the constants of a part
/// of Lua that several scripts include, given once beside it). A value must be an integer Lua
/// holds exactly (below 2^53), a name a Lua upper-case identifier: else the crate does not
/// build.
macro_rules! lua_script {
    ($body:expr, { $($name:ident = $value:expr),* $(,)? } $(, $more:expr)* $(,)?) => {{
        const SHARED: &[&[(&str, u64)]] =
            &[&[$((stringify!($name), $value as u64)),*] $(, $more)*];
        const BODY: &str = $body;
        const LEN: usize = $crate::redis::script_text_len(SHARED, BODY);
        const BYTES: [u8; LEN] = $crate::redis::script_text(SHARED, BODY);
        match core::str::from_utf8(&BYTES) {
            Ok(text) => text,
            Err(_) => panic!("a script's text is UTF-8"),
        }
    }};
}
pub(crate) use lua_script;

/// Largest integer a Lua number (a double) holds exactly.
const LUA_EXACT: u64 = 1 << 53;

const fn decimal_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// The length of [`script_text`]'s text (a constant's array length).
pub(crate) const fn script_text_len(shared: &[&[(&str, u64)]], body: &str) -> usize {
    let mut n = PREAMBLE_HEAD.len() + body.len();
    let mut p = 0;
    while p < shared.len() {
        let part = shared[p];
        let mut i = 0;
        while i < part.len() {
            let (name, value) = part[i];
            n += "local ".len() + name.len() + " = ".len() + decimal_len(value) + 1;
            i += 1;
        }
        p += 1;
    }
    n
}

const fn put<const N: usize>(out: &mut [u8; N], mut at: usize, s: &[u8]) -> usize {
    let mut i = 0;
    while i < s.len() {
        out[at] = s[i];
        at += 1;
        i += 1;
    }
    at
}

/// One `local NAME = value` line of the preamble, at `at`.
const fn put_constant<const N: usize>(
    out: &mut [u8; N],
    mut at: usize,
    (name, value): (&str, u64),
) -> usize {
    let b = name.as_bytes();
    assert!(
        !b.is_empty() && b[0].is_ascii_uppercase(),
        "a shared name is upper case"
    );
    let mut j = 0;
    while j < b.len() {
        let c = b[j];
        assert!(
            c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_',
            "a shared name is upper case"
        );
        j += 1;
    }
    assert!(value <= LUA_EXACT, "a shared value is exact in Lua");
    at = put(out, at, b"local ");
    at = put(out, at, b);
    at = put(out, at, b" = ");
    let len = decimal_len(value);
    let mut v = value;
    let mut k = len;
    while k > 0 {
        k -= 1;
        out[at + k] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    at += len;
    put(out, at, b"\n")
}

/// The script's text: [`PREAMBLE_HEAD`], `local NAME = value` for each shared constant, the
/// body (see [`lua_script!`]).
pub(crate) const fn script_text<const N: usize>(shared: &[&[(&str, u64)]], body: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = put(&mut out, 0, PREAMBLE_HEAD.as_bytes());
    let mut p = 0;
    while p < shared.len() {
        let mut i = 0;
        while i < shared[p].len() {
            at = put_constant(&mut out, at, shared[p][i]);
            i += 1;
        }
        p += 1;
    }
    at = put(&mut out, at, body.as_bytes());
    assert!(at == N, "the script's length");
    out
}

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

/// Which form of the call: `EVALSHA` normally, `EVAL` with the whole text after a NOSCRIPT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Sha,
    Text,
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

/// An error reply as a [`ReplyError`] (`NOSCRIPT` told apart, the text shortened); None for
/// any other reply.
pub fn server_error(v: &Value) -> Option<ReplyError> {
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

/// The item at Lua position `pos` (from 1) of a list: a script's message and its Rust reader
/// name their places in Lua's numbering (`fleet::wire`, `reply` in room.rs). None past its end.
pub fn at_place<T>(items: &[T], pos: usize) -> Option<&T> {
    items.get(pos.checked_sub(1)?)
}

/// The integers of an array reply of exactly `n` integers.
pub fn ints(v: &Value, n: usize) -> Result<Vec<i64>, ReplyError> {
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

pub fn count(x: i64) -> Result<u64, ReplyError> {
    u64::try_from(x).map_err(|_| ReplyError::Shape("negative count"))
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
