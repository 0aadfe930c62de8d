//! Directive arguments: `key=value` split against a directive's parameter table, and the
//! values several directives share (names, key prefixes, store timeouts, sync intervals).

use super::{parse_time_ms, ConfError, ParseError};

/// Default Redis key prefix (rooms and rate zones).
pub const DEFAULT_PREFIX: &str = "smart_limit";
/// Shortest `sync=` (and rate zone `interval=`).
pub const MIN_SYNC_MS: u64 = 100;
/// Longest `sync=` (and rate zone `interval=`).
pub const MAX_SYNC_MS: u64 = 60_000;
/// Largest store timeout: 60 s.
pub const MAX_TIMEOUT_MS: u64 = 60 * 1000;
/// Longest zone name.
pub const MAX_NAME_LEN: usize = 64;
/// Longest Redis key prefix.
pub const MAX_PREFIX_LEN: usize = 64;

/// Checks a zone name: 1 to 64 characters from `A-Z a-z 0-9 _ -`, and not `off` (the
/// location directives' switch). The same rule applies to
/// the name in `smart_limit NAME;`. Keeping names plain keeps them safe in Redis keys,
/// metrics labels and log lines.
pub fn check_zone_name(name: &str) -> Result<(), ConfError> {
    if name == "off" {
        return Err(ConfError::ReservedName);
    }
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ConfError::BadName(name.to_string()))
    }
}

/// `key=value` split against a directive's table of `(name, example)`: the parameter's
/// canonical name and its value; an unknown parameter, or a known one without a value (with
/// an example), is an error.
pub(crate) fn split_param_in<'a>(
    table: &[(&'static str, &'static str)],
    arg: &'a str,
) -> Result<(&'static str, &'a str), ConfError> {
    let Some((key, value)) = arg.split_once('=') else {
        return Err(match table.iter().find(|(k, _)| *k == arg) {
            Some(&(_, example)) => ConfError::MissingValue {
                param: arg.to_string(),
                example,
            },
            None => ConfError::Unknown(arg.to_string()),
        });
    };
    match table.iter().find(|(k, _)| *k == key) {
        Some(&(param, _)) => Ok((param, value)),
        None => Err(ConfError::Unknown(arg.to_string())),
    }
}

pub(crate) fn key_prefix(value: &str) -> Result<String, ParseError> {
    let ok = !value.is_empty()
        && value.len() <= MAX_PREFIX_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'.'));
    if !ok {
        // Braces in particular are refused: they would break the Redis Cluster hash tag that
        // keeps one room's keys in one slot.
        return Err(ParseError::Chars {
            max: MAX_PREFIX_LEN,
            chars: "A-Z a-z 0-9 _ - : .",
        });
    }
    Ok(value.to_string())
}

pub(crate) fn store_timeout(value: &str) -> Result<u64, ParseError> {
    let ms = parse_time_ms(value)?;
    if !(1..=MAX_TIMEOUT_MS).contains(&ms) {
        return Err(ParseError::Range("must be between 1ms and 60s"));
    }
    Ok(ms)
}

/// `sync=` (and a rate zone's `interval=`): 100ms to 60s.
pub(crate) fn sync_interval(value: &str) -> Result<u64, ParseError> {
    let ms = parse_time_ms(value)?;
    if !(MIN_SYNC_MS..=MAX_SYNC_MS).contains(&ms) {
        return Err(ParseError::Range("must be between 100ms and 60s"));
    }
    Ok(ms)
}
