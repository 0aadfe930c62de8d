//! Configuration value parsers shared by the directives: nginx-style sizes and times, rates,
//! status codes, `HOST:PORT` addresses, `key=value` splitting against a parameter table, and
//! the errors every directive reports.
//!
//! These run at configuration time (`nginx -t`), so their job is to refuse every bad value
//! with a message that says which parameter is wrong and quotes what was written; the FFI
//! layer only prefixes the directive name (SPEC §3). [`ParseError`] messages are the reason
//! alone ("expected a size like 512k, 10m or 1g"); [`ConfError`] adds the parameter and the
//! quoted value. Nothing here panics, whatever the input.
//!
//! The bottom layer of the crate: it uses no other module.

mod param;
mod value;

#[cfg(test)]
mod tests;

use std::fmt;
use thiserror::Error;

pub use param::*;
pub use value::*;

/// Why a single value did not parse. The message is the reason only; the caller names the
/// parameter and quotes the value (see [`ConfError`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// Nothing was written.
    #[error("empty value")]
    Empty,
    /// The text does not have the expected shape; the string says what was expected.
    #[error("{0}")]
    Syntax(&'static str),
    /// The number does not fit.
    #[error("value too large")]
    Overflow,
    /// A well-formed status code that is not one of the allowed ones.
    #[error("expected one of 200, 202, 429, 503")]
    Status,
    /// Outside the parameter's bounds; the string says which ("must be between 1s and 1m").
    #[error("{0}")]
    Range(&'static str),
    /// A value that must be shorter than another parameter's (`timeout=` under `sync=`).
    #[error("must be shorter than {what} ({ms} ms), so that two syncs never overlap")]
    ShorterThan {
        /// The other parameter, as written (`sync=`).
        what: &'static str,
        /// Its value.
        ms: u64,
    },
    /// A rate that does not parse where `off` is accepted too.
    #[error("{0}, or off")]
    OrOff(Box<ParseError>),
    /// A word or a number in a range (`challenge_bits=`).
    #[error("expected {words} from {min} to {max}")]
    WordOrRange {
        /// What may be written instead, and what the number counts ("auto or a number of bits").
        words: &'static str,
        min: u64,
        max: u64,
    },
    /// A name of characters from a set (`prefix=`).
    #[error("expected 1 to {max} characters from {chars}")]
    Chars {
        max: usize,
        /// The characters allowed, as the message lists them.
        chars: &'static str,
    },
    /// A name given to Redis (ACL user, master name, TLS name).
    #[error("expected a {0}: 1 to 255 printable characters, no spaces or quotes")]
    PlainName(&'static str),
    /// An entry of a list given twice (the entry as written).
    #[error("\"{0}\" is listed twice")]
    Twice(String),
    /// A list longer than its bound.
    #[error("at most {max} {what}")]
    TooMany {
        max: usize,
        /// What the list holds ("addresses").
        what: &'static str,
    },
    /// A page template uses `{{name}}` placeholders that do not exist; lists them.
    #[error("unknown placeholder {0} (known: {{{{position}}}}, {{{{eta_seconds}}}}, {{{{eta_text}}}}, {{{{refresh_seconds}}}}, {{{{room}}}}, {{{{queue_length}}}}, {{{{status}}}}, {{{{updated_at}}}}, {{{{starts_at}}}}, {{{{challenge_seed}}}}, {{{{challenge_bits}}}}, {{{{challenge_script}}}})")]
    UnknownPlaceholder(String),
}

/// Why the `smart_limit_zone` arguments were refused. Every message names the parameter and
/// quotes the offending text; the FFI layer prefixes the directive name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfError {
    /// No arguments at all.
    #[error("missing zone name")]
    MissingName,
    /// The zone name has characters or a length that are not allowed.
    #[error("invalid zone name \"{}\": expected 1 to {MAX_NAME_LEN} characters from A-Z a-z 0-9 _ -", Quoted(.0))]
    BadName(String),
    /// The zone is named `off`, which `smart_limit off;` (and `smart_limit_rate off;`) reads
    /// as the switch: such a zone could never be used.
    #[error("zone name \"off\" is reserved: \"smart_limit off;\" switches the room off in a location, so a zone of that name could never be used")]
    ReservedName,
    /// A parameter this directive does not know (the whole argument is quoted).
    #[error("unknown parameter \"{}\"", Quoted(.0))]
    Unknown(String),
    /// A known parameter written without `=value`.
    #[error("parameter \"{}\" needs a value, e.g. {}", Quoted(.param), .example)]
    MissingValue {
        /// The parameter name as written.
        param: String,
        /// An example of a correct argument.
        example: &'static str,
    },
    /// The same parameter given twice (the second occurrence is quoted).
    #[error("duplicate parameter \"{}\"", Quoted(.0))]
    Duplicate(String),
    /// A value that does not parse or is out of range.
    #[error("invalid {param} \"{}\": {reason}", Quoted(.value))]
    Invalid {
        /// Parameter name.
        param: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong / what was expected.
        reason: ParseError,
    },
    /// Two parameters that exclude each other (both arguments quoted).
    #[error("\"{}\" and \"{}\" cannot be used together", Quoted(.0), Quoted(.1))]
    Conflict(String, String),
    /// A required parameter is missing (what to write, with an example).
    #[error("needs {0}")]
    Needs(&'static str),
    /// A parameter that only makes sense with another one (argument quoted, then the requirement).
    #[error("\"{}\" requires {}", Quoted(.0), .1)]
    Requires(String, &'static str),
}

/// Displays user text between quotes with quotes, backslashes and control characters escaped,
/// so a message is always one readable log line.
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '"' | '\\' => write!(f, "\\{c}")?,
                c if c.is_control() => write!(f, "{}", c.escape_default())?,
                c => write!(f, "{c}")?,
            }
        }
        Ok(())
    }
}
