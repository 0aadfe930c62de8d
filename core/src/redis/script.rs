//! Scripts by SHA (EVALSHA, with EVAL on NOSCRIPT), and replies read fallibly: a server
//! error, a wrong shape or a negative count is a [`ReplyError`], never a panic.

use core::fmt;

use super::resp::Value;

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
