//! The room's signing keys: Ed25519 private keys in PEM (PKCS#8, what `openssl genpkey
//! -algorithm ed25519` writes), each known by its RFC 7638 thumbprint.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::pkcs8::DecodePrivateKey;
use sha2::{Digest, Sha256};

use super::TokenKeyError;

/// One Ed25519 key the room signs or verifies admission tokens with.
#[derive(Clone)]
pub struct SigningKey {
    pub(super) key: ed25519_dalek::SigningKey,
    /// The public key, base64url (the JWK's `x`).
    pub(super) x: String,
    /// RFC 7638 thumbprint of the public JWK: the token header's `kid`.
    pub(super) kid: String,
}

impl SigningKey {
    /// Reads a PEM file's text. Errors name what is wrong, never the key.
    pub fn from_pem(text: &str) -> Result<SigningKey, TokenKeyError> {
        let key = ed25519_dalek::SigningKey::from_pkcs8_pem(text)
            .map_err(|_| TokenKeyError::NotEd25519Private)?;
        let x = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
        let kid = thumbprint(&x);
        Ok(SigningKey { key, x, kid })
    }

    /// The key's `kid`.
    pub fn kid(&self) -> &str {
        &self.kid
    }
}

/// RFC 7638 section 3: SHA-256 over the public JWK's required members in lexical order,
/// without whitespace (for an OKP key: `crv`, `kty`, `x`), base64url. Every character of
/// `x` is base64url, so nothing needs escaping.
pub(super) fn thumbprint(x: &str) -> String {
    let mut h = Sha256::new();
    h.update(br#"{"crv":"Ed25519","kty":"OKP","x":""#);
    h.update(x.as_bytes());
    h.update(br#""}"#);
    URL_SAFE_NO_PAD.encode(h.finalize())
}
