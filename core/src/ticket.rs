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
//! Everything here runs inside nginx workers on untrusted bytes, so nothing may panic:
//! lengths are checked before slicing and every failure is a [`TicketError`] value.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use aes_gcm::aead::{Aead, AeadInPlace, KeyInit, Payload};
use aes_gcm::Aes256Gcm;
use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::page::{put_json_str, FixedBuf, Out};
use thiserror::Error;

/// Longest cookie value [`Keyring::open`] looks at, in bytes of base64 text. Checked before
/// decoding so an attacker cannot make a worker decode or decrypt large inputs. A real
/// ticket is well under this (about 200-350 characters with a 64-character room name).
pub const MAX_TICKET_LEN: usize = 512;

/// AES-256 key length in bytes.
const KEY_LEN: usize = 32;
/// AES-GCM standard nonce length (96 bits).
const NONCE_LEN: usize = 12;
/// AES-GCM authentication tag length.
const TAG_LEN: usize = 16;

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
}

/// The sealed document. Field names on the wire are short because the whole thing travels in
/// a cookie on every request.
#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    /// Room the ticket belongs to; must match the room that opens it.
    #[serde(rename = "room", borrow)]
    room: std::borrow::Cow<'a, str>,
    #[serde(rename = "sid")]
    sid: u64,
    #[serde(rename = "q")]
    qnum: u64,
    #[serde(rename = "iat")]
    issued_at: u64,
    #[serde(rename = "acc")]
    accepted_at: u64,
    #[serde(rename = "seen")]
    last_seen: u64,
}

impl<'a> Wire<'a> {
    #[cfg(test)]
    fn new(room: &'a str, t: &Ticket) -> Wire<'a> {
        Wire {
            room: room.into(),
            sid: t.sid,
            qnum: t.qnum,
            issued_at: t.issued_at,
            accepted_at: t.accepted_at,
            last_seen: t.last_seen,
        }
    }

    fn ticket(&self) -> Ticket {
        Ticket {
            sid: self.sid,
            qnum: self.qnum,
            issued_at: self.issued_at,
            accepted_at: self.accepted_at,
            last_seen: self.last_seen,
        }
    }
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
        reason: String,
    },
    /// The operating system's random source failed.
    #[error("cannot get random bytes for a key: {0}")]
    Random(crate::random::RandomError),
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
    Random(crate::random::RandomError),
}

/// Most raw bytes (nonce, JSON, tag) whose base64url fits in [`MAX_TICKET_LEN`].
const RAW_MAX: usize = MAX_TICKET_LEN / 4 * 3;

/// A sealed ticket: its base64url text, in a fixed buffer.
pub struct Sealed {
    text: [u8; MAX_TICKET_LEN],
    len: usize,
}

impl Sealed {
    pub fn as_str(&self) -> &str {
        // base64url is ASCII.
        core::str::from_utf8(self.text.get(..self.len).unwrap_or_default()).unwrap_or_default()
    }
}

/// The sealed document as [`Wire`] serialises it (same bytes, checked by a test), written
/// without allocating: `{"room":..,"sid":..,"q":..,"iat":..,"acc":..,"seen":..}`.
fn write_wire(room: &str, t: &Ticket, out: &mut impl Out) {
    out.put(b"{\"room\":");
    put_json_str(out, room);
    for (key, n) in [
        (&b",\"sid\":"[..], t.sid),
        (b",\"q\":", t.qnum),
        (b",\"iat\":", t.issued_at),
        (b",\"acc\":", t.accepted_at),
        (b",\"seen\":", t.last_seen),
    ] {
        out.put(key);
        out.put_u64(n);
    }
    out.put(b"}");
}

/// One or more AES-256-GCM keys. The first seals; all of them open, newest first.
#[derive(Clone)]
pub struct Keyring {
    // Ciphers rather than raw key bytes: the key schedule is computed once at load time,
    // and the raw bytes are not kept around in a second place.
    ciphers: Vec<Aes256Gcm>,
}

// Hand-written so that debug output can never print key material.
impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("keys", &self.ciphers.len())
            .finish()
    }
}

/// Base64 decoders for key files: people paste keys from many tools, so padding is optional
/// and both the standard and the url-safe alphabets are accepted.
const KEY_B64_STANDARD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
const KEY_B64_URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

impl Keyring {
    /// Parses a key file: one key per line; blank lines and lines starting with `#` are
    /// ignored; a key is 64 hex digits or base64 (standard or url-safe, padded or not) of
    /// exactly 32 bytes. The first key is the one that seals new tickets.
    pub fn parse(text: &str) -> Result<Keyring, KeyError> {
        // A UTF-8 byte order mark from some editors is not part of the first key.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut ciphers = Vec::new();
        for (idx, raw) in text.lines().enumerate() {
            let line = idx.saturating_add(1);
            let word = raw.trim();
            if word.is_empty() || word.starts_with('#') {
                continue;
            }
            let key = decode_key(word).map_err(|reason| KeyError::BadLine { line, reason })?;
            ciphers.push(cipher_for(&key).map_err(|reason| KeyError::BadLine { line, reason })?);
        }
        if ciphers.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(Keyring { ciphers })
    }

    /// One fresh random key, for running without a key file (tickets then do not survive a
    /// restart and are not shared by a fleet).
    pub fn generate() -> Result<Keyring, KeyError> {
        let mut key = [0u8; KEY_LEN];
        crate::random::fill(&mut key).map_err(KeyError::Random)?;
        let cipher = cipher_for(&key).map_err(|reason| KeyError::BadLine { line: 0, reason })?;
        Ok(Keyring {
            ciphers: vec![cipher],
        })
    }

    /// A keyring of one key given as bytes (a zone's own random key).
    pub fn from_key(key: &[u8; KEY_LEN]) -> Result<Keyring, KeyError> {
        let cipher = cipher_for(key).map_err(|reason| KeyError::BadLine { line: 0, reason })?;
        Ok(Keyring {
            ciphers: vec![cipher],
        })
    }

    /// Number of keys (at least 1).
    pub fn len(&self) -> usize {
        self.ciphers.len()
    }

    /// Always false: a keyring cannot be built without a key. Present for API hygiene.
    pub fn is_empty(&self) -> bool {
        self.ciphers.is_empty()
    }

    /// Seals a ticket of `room` with the first key: JSON, AES-256-GCM with a random 96-bit
    /// nonce and the room name as associated data, then base64url without padding of
    /// nonce || ciphertext+tag. Works in fixed buffers: no allocation.
    pub fn seal_fixed(&self, room: &str, t: &Ticket) -> Result<Sealed, TicketError> {
        let cipher = self.ciphers.first().ok_or(TicketError::Encrypt)?;
        // nonce || JSON (encrypted in place) || tag
        let mut raw: FixedBuf<RAW_MAX> = FixedBuf::default();
        let mut nonce = [0u8; NONCE_LEN];
        crate::random::fill(&mut nonce).map_err(TicketError::Random)?;
        raw.put(&nonce);
        write_wire(room, t, &mut raw);
        raw.put(&[0u8; TAG_LEN]);
        let too_long = |raw: &FixedBuf<RAW_MAX>| TicketError::TooLong {
            len: raw.bytes().map_or(MAX_TICKET_LEN + 1, |b| b.len() * 4 / 3),
        };
        let Some(bytes) = raw.bytes_mut() else {
            return Err(too_long(&raw));
        };
        let (nonce_part, rest) = bytes
            .split_at_mut_checked(NONCE_LEN)
            .ok_or(TicketError::Encrypt)?;
        let msg_len = rest.len().saturating_sub(TAG_LEN);
        let (msg, tag_part) = rest
            .split_at_mut_checked(msg_len)
            .ok_or(TicketError::Encrypt)?;
        let tag = cipher
            .encrypt_in_place_detached((&*nonce_part).into(), room.as_bytes(), msg)
            .map_err(|_| TicketError::Encrypt)?;
        tag_part.copy_from_slice(&tag);
        let mut out = Sealed {
            text: [0; MAX_TICKET_LEN],
            len: 0,
        };
        // A ticket open() would refuse is useless; fail here where the cause is clear.
        out.len = URL_SAFE_NO_PAD
            .encode_slice(&*bytes, &mut out.text)
            .map_err(|_| TicketError::TooLong {
                len: bytes.len() * 4 / 3,
            })?;
        Ok(out)
    }

    /// [`Keyring::seal_fixed`] as a string.
    pub fn seal(&self, room: &str, t: &Ticket) -> Result<String, TicketError> {
        Ok(self.seal_fixed(room, t)?.as_str().to_string())
    }

    /// Opens a cookie value for `room`. Tries every key; any failure is an error and the
    /// caller must treat the visitor as a new user.
    pub fn open(&self, value: &[u8], room: &str) -> Result<Ticket, TicketError> {
        // Bound the work before touching the content.
        if value.len() > MAX_TICKET_LEN {
            return Err(TicketError::TooLong { len: value.len() });
        }
        // Strict decoding (no padding, canonical trailing bits): one ticket has exactly one
        // textual form, so any changed character is either invalid base64 or changed bytes.
        let raw = URL_SAFE_NO_PAD
            .decode(value)
            .map_err(|_| TicketError::Base64)?;
        if raw.len() < NONCE_LEN.saturating_add(TAG_LEN) {
            return Err(TicketError::TooShort);
        }
        let (nonce, sealed) = raw
            .split_at_checked(NONCE_LEN)
            .ok_or(TicketError::TooShort)?;
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| TicketError::TooShort)?;
        let nonce = nonce.into();
        let plain = self
            .ciphers
            .iter()
            .find_map(|c| {
                c.decrypt(
                    &nonce,
                    Payload {
                        msg: sealed,
                        aad: room.as_bytes(),
                    },
                )
                .ok()
            })
            .ok_or(TicketError::Auth)?;
        let wire: Wire = serde_json::from_slice(&plain).map_err(TicketError::Json)?;
        // The AAD already binds the room; this is a second, explicit check.
        if wire.room != room {
            return Err(TicketError::WrongRoom);
        }
        Ok(wire.ticket())
    }
}

/// A random session id from the operating system's random source; never 0, so 0 can keep
/// meaning "no session" in stores and logs.
pub fn random_sid() -> Result<u64, TicketError> {
    Ok(crate::random::u64().map_err(TicketError::Random)?.max(1))
}

/// Builds the cipher for one key. The slice constructor reports a wrong length as an error
/// instead of panicking (it cannot be wrong here, but no panics is the rule).
fn cipher_for(key: &[u8; KEY_LEN]) -> Result<Aes256Gcm, String> {
    Aes256Gcm::new_from_slice(key).map_err(|_| "key is not 32 bytes".to_string())
}

/// Decodes one key word; the error says what is wrong without repeating the word.
fn decode_key(word: &str) -> Result<[u8; KEY_LEN], String> {
    if word.chars().any(char::is_whitespace) {
        return Err("expected one key per line, found spaces inside the key".to_string());
    }
    if word.len() == 2 * KEY_LEN {
        return decode_hex_key(word)
            .ok_or_else(|| "64 characters but not all hex digits (0-9, a-f)".to_string());
    }
    let decoded = KEY_B64_STANDARD
        .decode(word)
        .or_else(|_| KEY_B64_URL.decode(word));
    match decoded {
        Ok(bytes) => match <[u8; KEY_LEN]>::try_from(bytes.as_slice()) {
            Ok(key) => Ok(key),
            // A short all-hex line is much more likely a truncated hex key than base64.
            Err(_) if word.bytes().all(|b| b.is_ascii_hexdigit()) => Err(format!(
                "{} hex digits, a key needs exactly 64 (32 bytes)",
                word.len()
            )),
            Err(_) => Err(format!(
                "base64 decodes to {} bytes, a key needs exactly 32",
                bytes.len()
            )),
        },
        Err(_) if word.bytes().all(|b| b.is_ascii_hexdigit()) => Err(format!(
            "{} hex digits, a key needs exactly 64 (32 bytes)",
            word.len()
        )),
        Err(_) => {
            Err("not a key: expected 64 hex digits or base64 of exactly 32 bytes".to_string())
        }
    }
}

/// Decodes exactly 64 hex digits (either case) into 32 bytes.
fn decode_hex_key(word: &str) -> Option<[u8; KEY_LEN]> {
    let mut key = [0u8; KEY_LEN];
    let bytes = word.as_bytes();
    if bytes.len() != 2 * KEY_LEN {
        return None;
    }
    for (out, pair) in key.iter_mut().zip(bytes.chunks_exact(2)) {
        let (hi, lo) = match pair {
            [hi, lo] => (hex_val(*hi)?, hex_val(*lo)?),
            _ => return None,
        };
        *out = (hi << 4) | lo;
    }
    Some(key)
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Tickets one worker opened recently, by their exact cookie value: a client polling its
/// place, or loading a page's assets on an admitted ticket, presents the same bytes again and
/// again, and opening them (base64, AES-GCM, JSON) costs more than the rest of its request.
///
/// Only an exact byte-for-byte match is answered from here, and the same bytes always open to
/// the same ticket, so the cache can never make a value open that would not open by itself.
/// It is direct-mapped (one entry per slot, replaced on collision), with a fixed size, and
/// belongs to one room and one keyring (a zone's, for the life of its configuration).
pub struct OpenCache {
    slots: Vec<Option<Cached>>,
}

struct Cached {
    value: Vec<u8>,
    ticket: Ticket,
}

impl OpenCache {
    /// A cache of `slots` entries (rounded up to a power of two, at least 1).
    pub fn new(slots: usize) -> OpenCache {
        let n = slots.max(1).next_power_of_two();
        OpenCache {
            slots: (0..n).map(|_| None).collect(),
        }
    }

    fn slot(&self, value: &[u8]) -> usize {
        // The value ends with the base64 of the GCM tag: random for every sealed ticket, so
        // its last bytes spread tickets over the slots at no cost. (A forged value that
        // collides only evicts an entry.)
        let tail = value.len().saturating_sub(8);
        let mut h = [0u8; 8];
        for (d, s) in h.iter_mut().zip(value.get(tail..).unwrap_or_default()) {
            *d = *s;
        }
        let h = u64::from_le_bytes(h).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> 32) as usize & (self.slots.len() - 1)
    }

    /// [`Keyring::open`], answered from the cache when these exact bytes opened before.
    pub fn open(
        &mut self,
        keys: &Keyring,
        value: &[u8],
        room: &str,
    ) -> Result<Ticket, TicketError> {
        if value.len() > MAX_TICKET_LEN {
            return Err(TicketError::TooLong { len: value.len() });
        }
        let i = self.slot(value);
        if let Some(Some(c)) = self.slots.get(i) {
            if c.value == value {
                return Ok(c.ticket);
            }
        }
        let ticket = keys.open(value, room)?;
        self.remember_at(i, value, ticket);
        Ok(ticket)
    }

    /// Remembers a value this worker just sealed, so its first return is a hit.
    pub fn remember(&mut self, value: &[u8], ticket: Ticket) {
        if value.len() <= MAX_TICKET_LEN {
            self.remember_at(self.slot(value), value, ticket);
        }
    }

    fn remember_at(&mut self, i: usize, value: &[u8], ticket: Ticket) {
        if let Some(slot) = self.slots.get_mut(i) {
            match slot {
                // Reuse the entry's buffer: tickets of one room have nearly the same length.
                Some(c) => {
                    c.value.clear();
                    c.value.extend_from_slice(value);
                    c.ticket = ticket;
                }
                None => {
                    *slot = Some(Cached {
                        value: value.to_vec(),
                        ticket,
                    })
                }
            }
        }
    }
}

/// Finds cookie `name` in one `Cookie:` header value (`a=1; b=2`). Tolerant: spaces and
/// tabs around names and values, empty parts, parts without `=` and non-UTF-8 bytes are
/// skipped or trimmed. Names compare exactly (cookie names are case-sensitive). A value in
/// double quotes is returned without them. The first match wins; [`cookie_values`] gives
/// every one.
pub fn cookie_value<'a>(cookie_header: &'a [u8], name: &'a [u8]) -> Option<&'a [u8]> {
    cookie_values(cookie_header, name).next()
}

/// Every value of cookie `name` in one `Cookie:` header value, in order. A client may send
/// the same name twice (cookies set for different paths or domains, or a forged one placed
/// first): the caller tries each. (A [`CookieName`] made once does the same without
/// preparing the search each time.)
pub fn cookie_values<'a>(
    cookie_header: &'a [u8],
    name: &'a [u8],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let finder = memchr::memmem::Finder::new(name);
    values_found(cookie_header, name, finder)
}

/// A cookie name with its substring search prepared (e.g. once per zone).
pub struct CookieName {
    name: Vec<u8>,
    // Boxed: the searcher holds SIMD vectors (16- or 32-byte aligned), and a CookieName lives
    // in structures that nginx's pools align to 8 bytes only.
    finder: Box<memchr::memmem::Finder<'static>>,
}

impl CookieName {
    pub fn new(name: &str) -> CookieName {
        CookieName {
            name: name.as_bytes().to_vec(),
            finder: Box::new(memchr::memmem::Finder::new(name.as_bytes()).into_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.name).unwrap_or_default()
    }

    /// [`cookie_values`] of this name.
    pub fn values<'a>(&'a self, cookie_header: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        values_found(
            cookie_header,
            &self.name,
            memchr::memmem::Finder::as_ref(&self.finder),
        )
    }
}

/// Finds the name with a substring search (the header is mostly other cookies) and checks
/// that it starts a `;`-separated part.
fn values_found<'a>(
    cookie_header: &'a [u8],
    name: &'a [u8],
    finder: memchr::memmem::Finder<'a>,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut from = 0usize;
    core::iter::from_fn(move || {
        if name.is_empty() {
            return None;
        }
        loop {
            let rest = cookie_header.get(from..)?;
            let at = from + finder.find(rest)?;
            from = at + 1;
            // The name must start its part: only spaces or tabs since the last `;`.
            let before = cookie_header.get(..at).unwrap_or_default();
            let part_start = memchr::memrchr(b';', before).map_or(0, |i| i + 1);
            if !trim_start_ows(before.get(part_start..).unwrap_or_default()).is_empty() {
                continue;
            }
            let after = cookie_header.get(at + name.len()..).unwrap_or_default();
            let Some(v) = trim_start_ows(after).strip_prefix(b"=") else {
                continue;
            };
            let v = match memchr::memchr(b';', v) {
                Some(end) => v.get(..end).unwrap_or_default(),
                None => v,
            };
            return Some(match trim_ows(v) {
                [b'"', inner @ .., b'"'] => inner,
                other => other,
            });
        }
    })
}

fn trim_start_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    s
}

/// Trims spaces and tabs (HTTP optional whitespace) from both ends.
fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The `Set-Cookie` header value for a ticket: `name=value; Path=/; HttpOnly; SameSite=Lax`,
/// plus `; Secure` when the site is served over HTTPS and `; Max-Age=N` when given (without
/// it the cookie lasts for the browser session). HttpOnly because no script needs the
/// ticket; SameSite=Lax so it still comes along on top-level navigations from other sites.
pub fn set_cookie_header(
    name: &str,
    value: &str,
    secure: bool,
    max_age_secs: Option<u64>,
) -> String {
    let mut out = Vec::with_capacity(name.len() + value.len() + 64);
    write_set_cookie(&mut out, name, value, secure, max_age_secs);
    String::from_utf8(out).unwrap_or_default()
}

/// [`set_cookie_header`] into an [`Out`] (no allocation).
pub fn write_set_cookie(
    out: &mut impl Out,
    name: &str,
    value: &str,
    secure: bool,
    max_age_secs: Option<u64>,
) {
    out.put(name.as_bytes());
    out.put(b"=");
    out.put(value.as_bytes());
    out.put(b"; Path=/; HttpOnly; SameSite=Lax");
    if secure {
        out.put(b"; Secure");
    }
    if let Some(n) = max_age_secs {
        out.put(b"; Max-Age=");
        out.put_u64(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const KEY_B: &str = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

    fn ticket() -> Ticket {
        Ticket {
            sid: 0xdead_beef_1234_5678,
            qnum: 42,
            issued_at: 1_694_432_700_000,
            accepted_at: 0,
            last_seen: 1_694_432_754_000,
        }
    }

    /// Small deterministic generator so the fuzz-style loops are reproducible.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    #[test]
    fn open_cache_answers_only_exact_bytes() {
        let kr = Keyring::parse(KEY_A).unwrap();
        let mut cache = OpenCache::new(4);
        let v = kr.seal("shop", &ticket()).unwrap();
        assert_eq!(cache.open(&kr, v.as_bytes(), "shop").unwrap(), ticket());
        assert_eq!(cache.open(&kr, v.as_bytes(), "shop").unwrap(), ticket());
        // Any change misses the cache and fails to open, as without it.
        let mut bad = v.clone().into_bytes();
        bad[10] = if bad[10] == b'A' { b'B' } else { b'A' };
        assert!(cache.open(&kr, &bad, "shop").is_err());
        let short = &v.as_bytes()[..v.len() - 1];
        assert!(cache.open(&kr, short, "shop").is_err());
        // Many tickets through a small cache: every one still opens to itself.
        let mut sealed = vec![];
        for i in 0..50u64 {
            let t = Ticket {
                sid: i + 1,
                ..ticket()
            };
            sealed.push((kr.seal("shop", &t).unwrap(), t));
        }
        for _ in 0..3 {
            for (v, t) in &sealed {
                assert_eq!(cache.open(&kr, v.as_bytes(), "shop").unwrap(), *t);
            }
        }
        let t = Ticket {
            sid: 999,
            ..ticket()
        };
        let v = kr.seal("shop", &t).unwrap();
        cache.remember(v.as_bytes(), t);
        assert_eq!(cache.open(&kr, v.as_bytes(), "shop").unwrap(), t);
    }

    #[test]
    fn round_trip() {
        let kr = Keyring::parse(KEY_A).unwrap();
        let t = ticket();
        let v = kr.seal("shop", &t).unwrap();
        assert!(v.len() <= MAX_TICKET_LEN);
        assert!(
            v.bytes().all(|b| B64URL.contains(&b)),
            "base64url, no padding: {v}"
        );
        assert_eq!(kr.open(v.as_bytes(), "shop").unwrap(), t);
        // Fresh nonce every time.
        assert_ne!(kr.seal("shop", &t).unwrap(), v);
    }

    #[test]
    fn max_size_ticket_fits() {
        let kr = Keyring::generate().unwrap();
        let room = "r".repeat(64);
        let t = Ticket {
            sid: u64::MAX,
            qnum: u64::MAX,
            issued_at: u64::MAX,
            accepted_at: u64::MAX,
            last_seen: u64::MAX,
        };
        let v = kr.seal(&room, &t).unwrap();
        assert!(v.len() <= MAX_TICKET_LEN, "{}", v.len());
        assert_eq!(kr.open(v.as_bytes(), &room).unwrap(), t);
    }

    #[test]
    fn rotation_keeps_old_tickets() {
        let old = Keyring::parse(KEY_A).unwrap();
        let v = old.seal("shop", &ticket()).unwrap();
        let rotated =
            Keyring::parse(&format!("# new key first\n{KEY_B}\n\n# old key\n{KEY_A}\n")).unwrap();
        assert_eq!(rotated.len(), 2);
        assert_eq!(rotated.open(v.as_bytes(), "shop").unwrap(), ticket());
        // New tickets are sealed with the new key: the old keyring alone cannot open them.
        let v2 = rotated.seal("shop", &ticket()).unwrap();
        assert!(matches!(
            old.open(v2.as_bytes(), "shop"),
            Err(TicketError::Auth)
        ));
        let new_only = Keyring::parse(KEY_B).unwrap();
        assert!(new_only.open(v2.as_bytes(), "shop").is_ok());
    }

    #[test]
    fn tampering_any_byte_fails() {
        let kr = Keyring::parse(KEY_A).unwrap();
        let v = kr.seal("shop", &ticket()).unwrap().into_bytes();
        for i in 0..v.len() {
            for &c in B64URL {
                if c == v[i] {
                    continue;
                }
                let mut bad = v.clone();
                bad[i] = c;
                assert!(kr.open(&bad, "shop").is_err(), "byte {i} -> {}", c as char);
            }
        }
    }

    #[test]
    fn tampering_decoded_bytes_fails() {
        let kr = Keyring::parse(KEY_A).unwrap();
        let raw = URL_SAFE_NO_PAD
            .decode(kr.seal("shop", &ticket()).unwrap())
            .unwrap();
        for i in 0..raw.len() {
            for bit in 0..8 {
                let mut bad = raw.clone();
                bad[i] ^= 1 << bit;
                let enc = URL_SAFE_NO_PAD.encode(&bad);
                assert!(matches!(
                    kr.open(enc.as_bytes(), "shop"),
                    Err(TicketError::Auth)
                ));
            }
        }
    }

    #[test]
    fn truncation_fails() {
        let kr = Keyring::parse(KEY_A).unwrap();
        let v = kr.seal("shop", &ticket()).unwrap();
        for n in 0..v.len() {
            assert!(kr.open(&v.as_bytes()[..n], "shop").is_err(), "prefix {n}");
        }
        assert!(matches!(kr.open(b"", "shop"), Err(TicketError::TooShort)));
        let short = URL_SAFE_NO_PAD.encode([0u8; NONCE_LEN + TAG_LEN - 1]);
        assert!(matches!(
            kr.open(short.as_bytes(), "shop"),
            Err(TicketError::TooShort)
        ));
        // Appending data also breaks it.
        let longer = format!("{v}AAAA");
        assert!(kr.open(longer.as_bytes(), "shop").is_err());
    }

    #[test]
    fn other_room_fails() {
        let kr = Keyring::parse(KEY_A).unwrap();
        let v = kr.seal("shop", &ticket()).unwrap();
        assert!(matches!(
            kr.open(v.as_bytes(), "shop2"),
            Err(TicketError::Auth)
        ));
        assert!(matches!(kr.open(v.as_bytes(), ""), Err(TicketError::Auth)));
    }

    #[test]
    fn other_key_fails() {
        let v = Keyring::parse(KEY_A)
            .unwrap()
            .seal("shop", &ticket())
            .unwrap();
        let other = Keyring::parse(KEY_B).unwrap();
        assert!(matches!(
            other.open(v.as_bytes(), "shop"),
            Err(TicketError::Auth)
        ));
        let random = Keyring::generate().unwrap();
        assert!(matches!(
            random.open(v.as_bytes(), "shop"),
            Err(TicketError::Auth)
        ));
    }

    #[test]
    fn oversized_fails_before_decoding() {
        let kr = Keyring::parse(KEY_A).unwrap();
        let big = vec![b'A'; MAX_TICKET_LEN + 1];
        assert!(matches!(
            kr.open(&big, "shop"),
            Err(TicketError::TooLong { len }) if len == MAX_TICKET_LEN + 1
        ));
        // Non-base64 but oversized is still reported as oversized: length is checked first.
        let junk = vec![0xffu8; 10_000];
        assert!(matches!(
            kr.open(&junk, "shop"),
            Err(TicketError::TooLong { .. })
        ));
    }

    #[test]
    fn junk_never_panics() {
        let kr = Keyring::parse(KEY_A).unwrap();
        for junk in [
            &b""[..],
            b"=",
            b"====",
            b"not base64!",
            b"\xff\xfe\x00\x01",
            b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            b"+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/",
        ] {
            assert!(kr.open(junk, "shop").is_err());
        }
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let len = rng.below(MAX_TICKET_LEN + 64);
            let any: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            assert!(kr.open(&any, "shop").is_err());
            // Also valid base64url text, which reaches the decryption step.
            let text: Vec<u8> = (0..len).map(|_| B64URL[rng.below(64)]).collect();
            assert!(kr.open(&text, "shop").is_err());
        }
    }

    #[test]
    fn authenticated_garbage_is_rejected_as_json() {
        // Something sealed with the right key and room but not a ticket document.
        let kr = Keyring::parse(KEY_A).unwrap();
        let c = &kr.ciphers[0];
        let nonce = [7u8; NONCE_LEN];
        let ct = c
            .encrypt(
                &nonce.into(),
                Payload {
                    msg: b"{\"room\":1}",
                    aad: b"shop",
                },
            )
            .unwrap();
        let mut raw = nonce.to_vec();
        raw.extend_from_slice(&ct);
        let v = URL_SAFE_NO_PAD.encode(raw);
        assert!(matches!(
            kr.open(v.as_bytes(), "shop"),
            Err(TicketError::Json(_))
        ));
    }

    #[test]
    fn room_field_must_match() {
        // Sealed with AAD "shop" but claiming room "other": only the explicit check catches it.
        let kr = Keyring::parse(KEY_A).unwrap();
        let c = &kr.ciphers[0];
        let nonce = [9u8; NONCE_LEN];
        let json = serde_json::to_vec(&Wire::new("other", &ticket())).unwrap();
        let ct = c
            .encrypt(
                &nonce.into(),
                Payload {
                    msg: &json,
                    aad: b"shop",
                },
            )
            .unwrap();
        let mut raw = nonce.to_vec();
        raw.extend_from_slice(&ct);
        let v = URL_SAFE_NO_PAD.encode(raw);
        assert!(matches!(
            kr.open(v.as_bytes(), "shop"),
            Err(TicketError::WrongRoom)
        ));
    }

    #[test]
    fn wire_writer_matches_serde() {
        for room in ["shop", "a\"b\\c", "r\n\u{1}x", "日本", ""] {
            for t in [
                ticket(),
                Ticket {
                    sid: u64::MAX,
                    qnum: 0,
                    issued_at: 1,
                    accepted_at: u64::MAX,
                    last_seen: 0,
                },
            ] {
                let mut out = Vec::new();
                write_wire(room, &t, &mut out);
                assert_eq!(
                    out,
                    serde_json::to_vec(&Wire::new(room, &t)).unwrap(),
                    "{room:?}"
                );
                let kr = Keyring::parse(KEY_A).unwrap();
                let v = kr.seal(room, &t).unwrap();
                assert_eq!(kr.open(v.as_bytes(), room).unwrap(), t);
            }
        }
        // A room name too long for a ticket is refused when sealing, not cut.
        let kr = Keyring::parse(KEY_A).unwrap();
        assert!(matches!(
            kr.seal(&"x".repeat(400), &ticket()),
            Err(TicketError::TooLong { .. })
        ));
    }

    #[test]
    fn wire_format_uses_short_names() {
        let json = serde_json::to_string(&Wire::new("shop", &ticket())).unwrap();
        assert_eq!(
            json,
            r#"{"room":"shop","sid":16045690981402826360,"q":42,"iat":1694432700000,"acc":0,"seen":1694432754000}"#
        );
    }

    #[test]
    fn key_formats() {
        let bytes: Vec<u8> = (0u8..32).collect();
        let std_padded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let std_nopad = std_padded.trim_end_matches('=').to_string();
        let url = base64::engine::general_purpose::URL_SAFE.encode([0xfbu8; 32]);
        let url_nopad = url.trim_end_matches('=').to_string();
        let upper = KEY_A.to_uppercase();
        for k in [KEY_A, &upper, &std_padded, &std_nopad, &url, &url_nopad] {
            let kr = Keyring::parse(k).unwrap_or_else(|e| panic!("{k}: {e}"));
            assert_eq!(kr.len(), 1);
        }
        // Hex and base64 of the same bytes are the same key.
        let a = Keyring::parse(KEY_A).unwrap();
        let b = Keyring::parse(&std_padded).unwrap();
        let v = a.seal("x", &ticket()).unwrap();
        assert!(b.open(v.as_bytes(), "x").is_ok());
        // CRLF, BOM, indentation, comments.
        let text = format!("\u{feff}# keys\r\n  {KEY_B}  \r\n\r\n\t# old\r\n{std_nopad}\r\n");
        assert_eq!(Keyring::parse(&text).unwrap().len(), 2);
    }

    #[test]
    fn key_file_errors() {
        assert_eq!(Keyring::parse("").unwrap_err(), KeyError::Empty);
        assert_eq!(
            Keyring::parse("\n# only a comment\n   \n").unwrap_err(),
            KeyError::Empty
        );

        let bad_hex = format!("{}g", &KEY_A[..63]);
        let err = Keyring::parse(&format!("# c\n\n{bad_hex}\n")).unwrap_err();
        match &err {
            KeyError::BadLine { line, reason } => {
                assert_eq!(*line, 3);
                assert!(reason.contains("hex"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.starts_with("line 3: "), "{msg}");
        assert!(!msg.contains(&bad_hex[..20]), "key material leaked: {msg}");

        // Too short hex.
        let err = Keyring::parse(&format!("{KEY_A}\n{}\n", &KEY_A[..62])).unwrap_err();
        assert!(
            matches!(&err, KeyError::BadLine { line: 2, reason } if reason.contains("62 hex digits")),
            "{err}"
        );
        // Base64 of the wrong length.
        let b16 = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
        let err = Keyring::parse(&b16).unwrap_err();
        assert!(
            matches!(&err, KeyError::BadLine { line: 1, reason } if reason.contains("16 bytes")),
            "{err}"
        );
        // Garbage and two keys on one line.
        let err = Keyring::parse("%%%% not a key").unwrap_err();
        assert!(matches!(err, KeyError::BadLine { line: 1, .. }));
        let err = Keyring::parse(&format!("{KEY_A} {KEY_B}")).unwrap_err();
        assert!(matches!(&err, KeyError::BadLine { line: 1, reason } if reason.contains("spaces")));
        assert!(!err.to_string().contains(KEY_A));
        // Debug output of a keyring shows no key material.
        let dbg = format!("{:?}", Keyring::parse(KEY_A).unwrap());
        assert_eq!(dbg, "Keyring { keys: 1 }");
    }

    #[test]
    fn key_parse_never_panics() {
        let mut rng = XorShift(12345);
        for _ in 0..5_000 {
            let len = rng.below(200);
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let text = String::from_utf8_lossy(&bytes);
            let _ = Keyring::parse(&text);
        }
    }

    #[test]
    fn sid_is_random_and_nonzero() {
        let a = random_sid().unwrap();
        let b = random_sid().unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
    }

    #[test]
    fn cookie_lookup() {
        let h = b"a=1; smart_limit=abc_-; b=2";
        assert_eq!(cookie_value(h, b"smart_limit"), Some(&b"abc_-"[..]));
        assert_eq!(cookie_value(h, b"a"), Some(&b"1"[..]));
        assert_eq!(cookie_value(h, b"b"), Some(&b"2"[..]));
        assert_eq!(cookie_value(h, b"c"), None);
        assert_eq!(cookie_value(h, b""), None);
        // Prefix / suffix names do not match.
        assert_eq!(
            cookie_value(b"xsmart_limit=1; smart_limitx=2", b"smart_limit"),
            None
        );
        // Spaces, tabs, empty parts, junk, non-UTF-8.
        let h = b";; \xff\xfe junk ;=;  \t sl \t =  v1 \t; sl=v2";
        assert_eq!(cookie_value(h, b"sl"), Some(&b"v1"[..]));
        assert_eq!(cookie_value(b"sl=\"quoted\"", b"sl"), Some(&b"quoted"[..]));
        assert_eq!(cookie_value(b"sl=", b"sl"), Some(&b""[..]));
        assert_eq!(cookie_value(b"sl=a=b", b"sl"), Some(&b"a=b"[..]));
        assert_eq!(cookie_value(b"", b"sl"), None);
        assert_eq!(cookie_value(b"sl", b"sl"), None);
        assert_eq!(cookie_value(b"SL=1", b"sl"), None);
        assert_eq!(cookie_value(b"sl=\"", b"sl"), Some(&b"\""[..]));
        // Every value of a repeated name, in order.
        let all: Vec<&[u8]> = cookie_values(b"sl=junk; a=1; sl = good ;sl", b"sl").collect();
        assert_eq!(all, vec![&b"junk"[..], &b"good"[..]]);
        let name = CookieName::new("sl");
        let all: Vec<&[u8]> = name.values(b"sl=junk; a=1; sl = good ;sl").collect();
        assert_eq!(all, vec![&b"junk"[..], &b"good"[..]]);
        let mut rng = XorShift(777);
        for _ in 0..5_000 {
            let len = rng.below(100);
            let h: Vec<u8> = (0..len).map(|_| b"ab=; \t\"\xff"[rng.below(8)]).collect();
            let _ = cookie_value(&h, b"a");
        }
    }

    #[test]
    fn set_cookie_forms() {
        assert_eq!(
            set_cookie_header("sl", "v", false, None),
            "sl=v; Path=/; HttpOnly; SameSite=Lax"
        );
        assert_eq!(
            set_cookie_header("sl", "v", true, None),
            "sl=v; Path=/; HttpOnly; SameSite=Lax; Secure"
        );
        assert_eq!(
            set_cookie_header("sl", "v", true, Some(600)),
            "sl=v; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=600"
        );
        assert_eq!(
            set_cookie_header("sl", "v", false, Some(0)),
            "sl=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"
        );
    }
}
