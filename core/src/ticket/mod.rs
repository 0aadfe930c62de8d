//! The session ticket: what a visitor carries in the smart_limit cookie.
//!
//! A ticket is a small JSON document (room, session id, queue number, times) sealed with
//! AES-256-GCM under a key from the [`Keyring`] and written as base64url without padding
//! (SPEC S8). The room name is the AEAD's associated data, so a ticket made for one room
//! fails authentication in every other room even before its JSON is read. Anything that
//! does not open cleanly - tampered, truncated, oversized, sealed with an unknown key, made
//! for another room - is an error, and the caller treats the visitor as a new user.
//!
//! Key rotation: a keyring holds one or more keys; the first one seals, every one opens.
//! Putting a new key first and keeping the old one second rotates without logging anyone
//! out; the old key is dropped once the longest grant has run out.
//!
//! Each key is used through subkeys derived with HKDF-SHA256, one per use: one seals, one
//! derives the values a fleet's nodes must agree on without talking ([`Keyring::derive_u64`]:
//! the seed of flood-control keys, user session ids). Tickets the previous build sealed with
//! the key itself still open (docs/upgrade.md).
//!
//! Everything here runs inside nginx workers on untrusted bytes, so nothing may panic:
//! lengths are checked before slicing and every failure is a [`TicketError`] value.

mod cache;
mod cookie;
mod derive;
mod seal;

#[cfg(test)]
mod tests;

use thiserror::Error;

pub use cache::OpenCache;
pub use cookie::{cookie_value, cookie_values, set_cookie_header, write_set_cookie, CookieName};
pub use seal::{random_sid, Keyring, Sealed};

/// Longest cookie value [`Keyring::open`] looks at, in bytes of base64 text. Checked before
/// decoding so an attacker cannot make a worker decode or decrypt large inputs. A real
/// ticket is well under this (about 200-350 characters with a 64-character room name).
pub const MAX_TICKET_LEN: usize = 512;

/// The decrypted content of a session ticket (the room it belongs to is given by the caller
/// of [`Keyring::seal`] and [`Keyring::open`]: it is the AEAD's associated data and a field
/// of the sealed document).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// Random session id.
    pub sid: u64,
    /// Queue number, 0 = none.
    pub qnum: u64,
    /// When the ticket was first issued, unix milliseconds.
    pub issued_at: u64,
    /// When the session was admitted, unix milliseconds; 0 = still waiting.
    pub accepted_at: u64,
    /// Last check-in, unix milliseconds.
    pub last_seen: u64,
    /// While waiting, the lowest position told for this place (`qnum`).
    pub told: Floor,
}

/// The lowest position a waiting answer told for a place, which no later answer exceeds
/// ([`crate::room::told`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    /// The position, 0 = none.
    pub position: u64,
    /// A synced room's estimate for a newcomer no picture showed yet: it holds later
    /// estimates only.
    pub estimate: bool,
}

impl Floor {
    pub const NONE: Floor = Floor {
        position: 0,
        estimate: false,
    };
}

/// Why a key file (or key generation) was refused. Messages never contain key material:
/// they name the line and what is wrong with it, nothing more, because they end up in
/// nginx's error log.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// The file holds no key at all (only blank lines and comments, or nothing).
    #[error("no key found: expected one key per line (64 hex digits or base64 of 32 bytes)")]
    Empty,
    /// One line is not a usable key.
    #[error("line {line}: {reason}")]
    BadLine {
        /// 1-based line number in the key file.
        line: usize,
        /// What is wrong with it (never the key itself).
        reason: BadKey,
    },
    /// The operating system's random source failed.
    #[error("cannot get random bytes for a key: {0}")]
    Random(crate::util::random::RandomError),
}

/// What is wrong with one line of a key file (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BadKey {
    #[error("expected one key per line, found spaces inside the key")]
    Spaces,
    #[error("64 characters but not all hex digits (0-9, a-f)")]
    NotHex,
    #[error("{0} hex digits, a key needs exactly 64 (32 bytes)")]
    HexLength(usize),
    #[error("base64 decodes to {0} bytes, a key needs exactly 32")]
    Base64Length(usize),
    #[error("not a key: expected 64 hex digits or base64 of exactly 32 bytes")]
    NotAKey,
    /// The cipher refused the key's length (cannot happen with 32 bytes; no panics is the
    /// rule).
    #[error("key is not 32 bytes")]
    Length,
    /// HKDF refused the subkey's length (cannot happen with 32 bytes).
    #[error("cannot derive a subkey")]
    Subkey,
}

/// Why a ticket could not be sealed or opened. For opening, every variant means the same
/// thing to the caller - a new user - but the distinction helps debug logging.
#[derive(Debug, Error)]
pub enum TicketError {
    /// The cookie value is longer than [`MAX_TICKET_LEN`]; not even decoded.
    #[error("ticket is {len} bytes long, at most {MAX_TICKET_LEN} are accepted")]
    TooLong {
        /// Length of the offending value.
        len: usize,
    },
    /// Not base64url without padding.
    #[error("ticket is not valid base64url")]
    Base64,
    /// Decodes to fewer bytes than a nonce plus a tag.
    #[error("ticket is too short")]
    TooShort,
    /// No key authenticates it: tampered, sealed with an unknown key, or made for another room.
    #[error("ticket does not authenticate (tampered, unknown key, or another room)")]
    Auth,
    /// Authenticated but not a ticket document (should only happen across incompatible versions).
    #[error("ticket content is not valid: {0}")]
    Json(#[source] serde_json::Error),
    /// Authenticated but names another room than the one opening it.
    #[error("ticket belongs to another room")]
    WrongRoom,
    /// Could not serialise the ticket.
    #[error("cannot encode ticket: {0}")]
    Encode(#[source] serde_json::Error),
    /// Encryption failed (not expected with valid inputs).
    #[error("cannot encrypt ticket")]
    Encrypt,
    /// The operating system's random source failed.
    #[error("cannot get random bytes: {0}")]
    Random(crate::util::random::RandomError),
}
