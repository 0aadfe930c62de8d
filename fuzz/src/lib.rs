//! Helpers shared by the fuzz targets in `src/bin/` (one binary per target, each a
//! `afl::fuzz!` loop). Nothing here uses the `afl` crate, so `cargo afl test --lib` can
//! check the helpers themselves (scripts/fuzz does, before fuzzing).
//!
//! The targets only call smart_limit_core's public API. Besides "no panic" (any panic aborts
//! the process, which afl-fuzz records as a crash), each one asserts a few cheap properties
//! that the callers in the nginx module rely on; a failed assertion is a crash too.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::Aes256Gcm;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// The fuzz key, as a key file line: bytes 00 01 .. 1f. The seed tickets in
/// `corpus/ticket/` were sealed with it.
pub const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// The room the ticket target opens tickets for (and the seeds were sealed for).
pub const ROOM: &str = "shop";

/// The cookie name the cookie target looks for when the input does not choose one.
pub const COOKIE_NAME: &str = "smart_limit_shop";

/// The fuzz key's 32 bytes (what [`KEY_HEX`] spells).
pub fn key_bytes() -> [u8; 32] {
    core::array::from_fn(|i| i as u8)
}

/// Seals `plain` the way a ticket is sealed (SPEC S8): AES-256-GCM under the fuzz key with
/// `room` as associated data, then base64url without padding of nonce || ciphertext || tag.
///
/// Why the harness seals by itself: a fuzzer cannot forge a GCM tag, so fed raw cookie
/// values it never gets past authentication, and the JSON reading and room check behind
/// it would never be fuzzed. Sealing the fuzzer's bytes as the plaintext reaches them. A
/// fixed nonce is fine here: nothing secret is protected.
pub fn seal_plaintext(plain: &[u8], room: &str) -> String {
    let Ok(cipher) = Aes256Gcm::new_from_slice(&key_bytes()) else {
        return String::new();
    };
    let nonce = [0x5au8; 12];
    let Ok(sealed) = cipher.encrypt(
        (&nonce).into(),
        Payload {
            msg: plain,
            aad: room.as_bytes(),
        },
    ) else {
        return String::new();
    };
    let mut raw = Vec::with_capacity(nonce.len() + sealed.len());
    raw.extend_from_slice(&nonce);
    raw.extend_from_slice(&sealed);
    URL_SAFE_NO_PAD.encode(raw)
}

/// Whether `inner` lies within `outer` (same memory, not merely equal bytes): the cookie
/// walker must hand out sub-slices of the header it was given, never copies or bytes from
/// elsewhere.
pub fn is_subslice(outer: &[u8], inner: &[u8]) -> bool {
    let o = outer.as_ptr_range();
    let i = inner.as_ptr_range();
    o.start <= i.start && i.end <= o.end
}

/// Splits the cookie target's input: `NAME \0 HEADER` chooses the cookie name (at most 64
/// bytes before the first NUL), anything else is a header searched for [`COOKIE_NAME`].
pub fn split_cookie_input(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().take(65).position(|&b| b == 0) {
        Some(nul) => (&data[..nul], &data[nul + 1..]),
        None => (COOKIE_NAME.as_bytes(), data),
    }
}

/// Splits a configuration line into directive arguments on spaces or NULs (empty arguments
/// stay: nginx passes `""` through as one).
pub fn words(text: &str) -> Vec<&str> {
    text.split([' ', '\0']).collect()
}

/// ASCII-case-insensitive substring test (for the accept target's properties).
pub fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// The fuzz token key's seed (an Ed25519 private key): bytes 20 21 .. 3f.
pub fn token_seed() -> [u8; 32] {
    core::array::from_fn(|i| 0x20 + i as u8)
}

/// The fuzz invite secret (HS256).
pub const INVITE_SECRET: &[u8] = b"fuzz-invite-secret-0123456789abcdef";

/// [`token_seed`] as `openssl genpkey -algorithm ed25519` writes a key (PKCS#8 v1, PEM).
pub fn token_pem() -> String {
    let mut der = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    der.extend_from_slice(&token_seed());
    format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(der)
    )
}

/// Signs `payload` as a token's claims under `header`, the way an issuer would, with the fuzz
/// keys: (EdDSA under [`token_seed`], HS256 under [`INVITE_SECRET`]).
///
/// Why: a fuzzer cannot forge a signature, so fed raw tokens it never gets past verification
/// and the claims reading behind it would never be fuzzed (the ticket target's reason too).
pub fn sign_token(header_eddsa: &str, header_hs256: &str, payload: &[u8]) -> (String, String) {
    use ed25519_dalek::Signer;
    use hmac::Mac;
    let input = |header: &str| {
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        )
    };
    let ed_input = input(header_eddsa);
    let key = ed25519_dalek::SigningKey::from_bytes(&token_seed());
    let ed = key.sign(ed_input.as_bytes()).to_bytes();
    let hs_input = input(header_hs256);
    let mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(INVITE_SECRET).map(|mut m| {
        m.update(hs_input.as_bytes());
        m.finalize().into_bytes().to_vec()
    });
    (
        format!("{ed_input}.{}", URL_SAFE_NO_PAD.encode(ed)),
        format!(
            "{hs_input}.{}",
            URL_SAFE_NO_PAD.encode(mac.unwrap_or_default())
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use smart_limit_core::ticket::{Floor, Keyring, Ticket, TicketError};

    /// The ticket target's sealed-plaintext mode is only useful while the harness seals
    /// exactly like core does; if the ticket envelope changes, this fails (and the target
    /// would silently stop reaching the JSON checks).
    #[test]
    fn harness_seal_gets_past_authentication() {
        let keys = Keyring::parse(KEY_HEX).unwrap();
        let t = Ticket {
            sid: 7,
            qnum: 3,
            issued_at: 1_700_000_000_000,
            accepted_at: 0,
            last_seen: 1_700_000_005_000,
            told: Floor::NONE,
        };
        // The envelope is right when what core seals and what the harness seals open alike.
        let by_core = keys.seal(ROOM, &t).unwrap();
        assert_eq!(keys.open(by_core.as_bytes(), ROOM).unwrap(), t);
        // Not JSON at all: authentication passes, the document is refused.
        let v = seal_plaintext(b"not json", ROOM);
        assert!(matches!(
            keys.open(v.as_bytes(), ROOM),
            Err(TicketError::Json(_))
        ));
        // Sealed for another room: authentication fails.
        let v = seal_plaintext(b"{}", "other");
        assert!(matches!(
            keys.open(v.as_bytes(), ROOM),
            Err(TicketError::Auth)
        ));
    }

    #[test]
    fn key_hex_spells_key_bytes() {
        let hex: String = key_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, KEY_HEX);
    }

    #[test]
    fn helpers() {
        let h = b"a=1; b=2";
        assert!(is_subslice(h, &h[3..5]));
        assert!(!is_subslice(h, b"a=1"));
        assert_eq!(
            split_cookie_input(b"sid\0sid=1"),
            (&b"sid"[..], &b"sid=1"[..])
        );
        assert_eq!(split_cookie_input(b"x=1").0, COOKIE_NAME.as_bytes());
        assert_eq!(words("a  b\0c"), vec!["a", "", "b", "c"]);
        assert!(contains_ignore_case(b"application/JSON", b"json"));
        assert!(!contains_ignore_case(b"text/html", b"json"));
    }
}
