//! Sealing and opening: the ticket's wire form (JSON with the room name), AES-256-GCM under
//! each key's sealing subkey (HKDF-SHA256), base64url; key files (base64 or hex) and key
//! generation.

use aes_gcm::aead::{Aead, AeadInPlace, KeyInit, Payload};
use aes_gcm::Aes256Gcm;
use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use hkdf::Hkdf;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::{BadKey, Floor, KeyError, Ticket, TicketError, MAX_TICKET_LEN};
use crate::util::out::{put_json_str, FixedBuf, Out};

/// AES-256 key length in bytes.
const KEY_LEN: usize = 32;
/// AES-GCM standard nonce length (96 bits).
pub(super) const NONCE_LEN: usize = 12;
/// AES-GCM authentication tag length.
pub(super) const TAG_LEN: usize = 16;

/// The sealed document. Field names on the wire are short because the whole thing travels in
/// a cookie on every request.
#[derive(Serialize, Deserialize)]
pub(super) struct Wire<'a> {
    /// Room the ticket belongs to; must match the room that opens it.
    #[serde(rename = "room", borrow)]
    pub(super) room: std::borrow::Cow<'a, str>,
    #[serde(rename = "sid")]
    pub(super) sid: u64,
    #[serde(rename = "q")]
    pub(super) qnum: u64,
    #[serde(rename = "iat")]
    pub(super) issued_at: u64,
    #[serde(rename = "acc")]
    pub(super) accepted_at: u64,
    #[serde(rename = "seen")]
    pub(super) last_seen: u64,
    /// Written only when set: a ticket sealed before it existed opens with none.
    #[serde(rename = "pos", default, skip_serializing_if = "is_zero")]
    pub(super) told: u64,
    /// Written only when set, like `pos`.
    #[serde(rename = "est", default, skip_serializing_if = "is_false")]
    pub(super) told_estimate: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl<'a> Wire<'a> {
    #[cfg(test)]
    pub(super) fn new(room: &'a str, t: &Ticket) -> Wire<'a> {
        Wire {
            room: room.into(),
            sid: t.sid,
            qnum: t.qnum,
            issued_at: t.issued_at,
            accepted_at: t.accepted_at,
            last_seen: t.last_seen,
            told: t.told.position,
            told_estimate: t.told.estimate,
        }
    }

    pub(super) fn ticket(&self) -> Ticket {
        Ticket {
            sid: self.sid,
            qnum: self.qnum,
            issued_at: self.issued_at,
            accepted_at: self.accepted_at,
            last_seen: self.last_seen,
            told: Floor {
                position: self.told,
                estimate: self.told_estimate,
            },
        }
    }
}

/// Most raw bytes (nonce, JSON, tag) whose base64url fits in [`MAX_TICKET_LEN`].
const RAW_MAX: usize = MAX_TICKET_LEN / 4 * 3;

/// A sealed ticket: its base64url text, in a fixed buffer.
pub struct Sealed {
    pub(super) text: [u8; MAX_TICKET_LEN],
    pub(super) len: usize,
}

impl Sealed {
    pub fn as_str(&self) -> &str {
        // base64url is ASCII.
        core::str::from_utf8(self.text.get(..self.len).unwrap_or_default()).unwrap_or_default()
    }
}

/// The sealed document as [`Wire`] serialises it (same bytes, checked by a test), written
/// without allocating: `{"room":..,"sid":..,"q":..,"iat":..,"acc":..,"seen":..}`, and
/// `"pos":..` and `"est":true` when set.
pub(super) fn write_wire(room: &str, t: &Ticket, out: &mut impl Out) {
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
    if t.told.position != 0 {
        out.put(b",\"pos\":");
        out.put_u64(t.told.position);
    }
    if t.told.estimate {
        out.put(b",\"est\":true");
    }
    out.put(b"}");
}

/// The keys of `smart_limit_secret`, each turned into its subkeys (see [`subkey`]): the first
/// key's sealing subkey seals, every key's opens, newest first.
#[derive(Clone)]
pub struct Keyring {
    // Ciphers rather than raw key bytes: the key schedule is computed once at load time,
    // and the raw bytes are not kept around in a second place.
    pub(super) ciphers: Vec<Aes256Gcm>,
    /// The same keys as the previous build used them (the key itself as the AES-GCM key),
    /// for opening only: tickets sealed before the subkeys keep opening, on an upgraded node,
    /// until they run out (docs/upgrade.md). Nothing is sealed with them.
    pub(super) previous: Vec<Aes256Gcm>,
    /// The first key's subkey for derived values ([`Keyring::derive_u64`]): an HMAC-SHA256
    /// key. Boxed: a keyring lives in nginx's configuration pool, which aligns to the word
    /// size only.
    pub(super) derive: Box<[u8; KEY_LEN]>,
}

/// HKDF-SHA256's salt for every key of `smart_limit_secret` (RFC 5869: a fixed, public salt
/// separates this application's keys from any other use of the same key file).
const HKDF_SALT: &[u8] = b"smart_limit key file";

/// What a subkey is for: HKDF's `info`. One subkey per use, so that no key serves two
/// constructions. (Admission tokens, to come, get their own.)
#[derive(Debug, Clone, Copy)]
pub(super) enum Use {
    /// Sealing and opening tickets and page passes (AES-256-GCM).
    Seal,
    /// Values a fleet's nodes agree on without talking: flood seeds, user session ids,
    /// proof-of-work seeds (HMAC-SHA256).
    Derive,
}

impl Use {
    fn info(self) -> &'static [u8] {
        match self {
            Use::Seal => b"smart_limit ticket seal v1",
            Use::Derive => b"smart_limit derived values v1",
        }
    }
}

/// The subkey of `key` for `purpose`: HKDF-SHA256 (extract with [`HKDF_SALT`], expand with the
/// use's `info`) to 32 bytes.
pub(super) fn subkey(key: &[u8; KEY_LEN], purpose: Use) -> Result<[u8; KEY_LEN], BadKey> {
    let mut out = [0u8; KEY_LEN];
    Hkdf::<Sha256>::new(Some(HKDF_SALT), key)
        .expand(purpose.info(), &mut out)
        .map_err(|_| BadKey::Subkey)?;
    Ok(out)
}

/// A key's ciphers: its sealing subkey's, and the key's own as the previous build used it.
fn ciphers_of(key: &[u8; KEY_LEN]) -> Result<(Aes256Gcm, Aes256Gcm), BadKey> {
    Ok((cipher_for(&subkey(key, Use::Seal)?)?, cipher_for(key)?))
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
        let mut previous = Vec::new();
        let mut derive = None;
        for (idx, raw) in text.lines().enumerate() {
            let line = idx.saturating_add(1);
            let word = raw.trim();
            if word.is_empty() || word.starts_with('#') {
                continue;
            }
            let bad = |reason| KeyError::BadLine { line, reason };
            let key = decode_key(word).map_err(bad)?;
            let (seal, old) = ciphers_of(&key).map_err(bad)?;
            ciphers.push(seal);
            previous.push(old);
            if derive.is_none() {
                derive = Some(Box::new(subkey(&key, Use::Derive).map_err(bad)?));
            }
        }
        match derive {
            Some(derive) if !ciphers.is_empty() => Ok(Keyring {
                ciphers,
                previous,
                derive,
            }),
            _ => Err(KeyError::Empty),
        }
    }

    /// One fresh random key, for running without a key file (tickets then do not survive a
    /// restart and are not shared by a fleet).
    pub fn generate() -> Result<Keyring, KeyError> {
        let mut key = [0u8; KEY_LEN];
        crate::util::random::fill(&mut key).map_err(KeyError::Random)?;
        Keyring::from_key(&key)
    }

    /// A keyring of one key given as bytes (a zone's own random key).
    pub fn from_key(key: &[u8; KEY_LEN]) -> Result<Keyring, KeyError> {
        let bad = |reason| KeyError::BadLine { line: 0, reason };
        let (seal, old) = ciphers_of(key).map_err(bad)?;
        Ok(Keyring {
            ciphers: vec![seal],
            previous: vec![old],
            derive: Box::new(subkey(key, Use::Derive).map_err(bad)?),
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
        crate::util::random::fill(&mut nonce).map_err(TicketError::Random)?;
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
        // The subkeys first (every ticket sealed by this build), then the keys as the previous
        // build used them.
        let plain = self
            .ciphers
            .iter()
            .chain(&self.previous)
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
    Ok(crate::util::random::u64()
        .map_err(TicketError::Random)?
        .max(1))
}

/// Builds the cipher for one key. The slice constructor reports a wrong length as an error
/// instead of panicking (it cannot be wrong here, but no panics is the rule).
fn cipher_for(key: &[u8; KEY_LEN]) -> Result<Aes256Gcm, BadKey> {
    Aes256Gcm::new_from_slice(key).map_err(|_| BadKey::Length)
}

/// Decodes one key word; the error says what is wrong without repeating the word.
fn decode_key(word: &str) -> Result<[u8; KEY_LEN], BadKey> {
    if word.chars().any(char::is_whitespace) {
        return Err(BadKey::Spaces);
    }
    if word.len() == 2 * KEY_LEN {
        return decode_hex_key(word).ok_or(BadKey::NotHex);
    }
    let decoded = KEY_B64_STANDARD
        .decode(word)
        .or_else(|_| KEY_B64_URL.decode(word));
    match decoded {
        Ok(bytes) => match <[u8; KEY_LEN]>::try_from(bytes.as_slice()) {
            Ok(key) => Ok(key),
            // A short all-hex line is much more likely a truncated hex key than base64.
            Err(_) if word.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Err(BadKey::HexLength(word.len()))
            }
            Err(_) => Err(BadKey::Base64Length(bytes.len())),
        },
        Err(_) if word.bytes().all(|b| b.is_ascii_hexdigit()) => Err(BadKey::HexLength(word.len())),
        Err(_) => Err(BadKey::NotAKey),
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
