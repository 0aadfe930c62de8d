//! The room's signing keys, in PEM: Ed25519 (PKCS#8, what `openssl genpkey -algorithm ed25519`
//! writes; `EdDSA`) or P-256 (PKCS#8, or SEC1 as `openssl ecparam -genkey` writes; `ES256`,
//! for verifiers without EdDSA, such as AWS API Gateway's JWT authorizers). Each key is known
//! by its RFC 7638 thumbprint.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::pkcs8::DecodePrivateKey;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::jws::Alg;
use super::{TokenError, TokenKeyError};

#[derive(Clone)]
enum Key {
    Ed25519(ed25519_dalek::SigningKey),
    P256(p256::ecdsa::SigningKey),
}

/// One key the room signs or verifies admission tokens with.
#[derive(Clone)]
pub struct SigningKey {
    key: Key,
    /// The public key's JWK members (`x`, and `y` for P-256), base64url.
    pub(super) x: String,
    y: Option<String>,
    /// RFC 7638 thumbprint of the public JWK: the token header's `kid`.
    kid: String,
}

/// A public key as a JWK Set lists it (RFC 7517, RFC 8037 for OKP).
#[derive(Serialize)]
pub(super) struct Jwk<'a> {
    kty: &'static str,
    crv: &'static str,
    x: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    y: Option<&'a str>,
    kid: &'a str,
    alg: &'static str,
    #[serde(rename = "use")]
    use_: &'static str,
}

impl SigningKey {
    /// Reads a PEM file's text. Errors name what is wrong, never the key.
    pub fn from_pem(text: &str) -> Result<SigningKey, TokenKeyError> {
        if let Ok(key) = ed25519_dalek::SigningKey::from_pkcs8_pem(text) {
            let x = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
            return Ok(SigningKey::new(Key::Ed25519(key), x, None));
        }
        let p256 = p256::ecdsa::SigningKey::from_pkcs8_pem(text)
            .or_else(|_| p256::SecretKey::from_sec1_pem(text).map(p256::ecdsa::SigningKey::from));
        let key = p256.map_err(|_| TokenKeyError::NotPrivateKey)?;
        let point = key.verifying_key().to_encoded_point(false);
        let (Some(x), Some(y)) = (point.x(), point.y()) else {
            return Err(TokenKeyError::NotPrivateKey);
        };
        let (x, y) = (URL_SAFE_NO_PAD.encode(x), URL_SAFE_NO_PAD.encode(y));
        Ok(SigningKey::new(Key::P256(key), x, Some(y)))
    }

    fn new(key: Key, x: String, y: Option<String>) -> SigningKey {
        let kid = thumbprint(&key, &x, y.as_deref());
        SigningKey { key, x, y, kid }
    }

    /// The key's `kid`.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The algorithm its tokens name.
    pub(super) fn alg(&self) -> Alg {
        match self.key {
            Key::Ed25519(_) => Alg::EdDsa,
            Key::P256(_) => Alg::Es256,
        }
    }

    /// The JWS signature of `input` (ES256: r || s, 64 bytes, RFC 7518 3.4).
    pub(super) fn sign(&self, input: &[u8]) -> Vec<u8> {
        use signature::Signer;
        match &self.key {
            Key::Ed25519(k) => k.sign(input).to_bytes().to_vec(),
            Key::P256(k) => {
                let s: p256::ecdsa::Signature = k.sign(input);
                s.to_bytes().to_vec()
            }
        }
    }

    /// Its public half (what verifies its tokens).
    pub(super) fn public(&self) -> PublicKey {
        match &self.key {
            Key::Ed25519(k) => PublicKey::Ed25519(k.verifying_key()),
            Key::P256(k) => PublicKey::P256(*k.verifying_key()),
        }
    }

    pub(super) fn jwk(&self) -> Jwk<'_> {
        let (kty, crv) = kty_crv(&self.key);
        Jwk {
            kty,
            crv,
            x: &self.x,
            y: self.y.as_deref(),
            kid: &self.kid,
            alg: self.alg().name(),
            use_: "sig",
        }
    }
}

/// A public key that verifies JWS signatures: a signing key's half, or an `invite=` file's.
#[derive(Clone)]
pub enum PublicKey {
    Ed25519(ed25519_dalek::VerifyingKey),
    P256(p256::ecdsa::VerifyingKey),
}

impl PublicKey {
    /// Reads a public key in PEM (`BEGIN PUBLIC KEY`, SubjectPublicKeyInfo): Ed25519 or P-256.
    pub(super) fn from_pem(text: &str) -> Option<PublicKey> {
        use ed25519_dalek::pkcs8::DecodePublicKey;
        ed25519_dalek::VerifyingKey::from_public_key_pem(text)
            .map(PublicKey::Ed25519)
            .or_else(|_| p256::ecdsa::VerifyingKey::from_public_key_pem(text).map(PublicKey::P256))
            .ok()
    }

    /// The algorithm its tokens must name.
    pub(super) fn alg(&self) -> Alg {
        match self {
            PublicKey::Ed25519(_) => Alg::EdDsa,
            PublicKey::P256(_) => Alg::Es256,
        }
    }

    /// Checks a JWS signature over `input` (EdDSA: RFC 8032's strict verification, which
    /// refuses small-order keys and non-canonical signatures; ES256: r || s, RFC 7518 3.4).
    pub(super) fn verify(&self, input: &[u8], signature: &[u8]) -> Result<(), TokenError> {
        use signature::Verifier;
        let checked = match self {
            PublicKey::Ed25519(k) => ed25519_dalek::Signature::from_slice(signature)
                .and_then(|s| k.verify_strict(input, &s)),
            PublicKey::P256(k) => {
                p256::ecdsa::Signature::from_slice(signature).and_then(|s| k.verify(input, &s))
            }
        };
        checked.map_err(|_| TokenError::Signature)
    }
}

fn kty_crv(key: &Key) -> (&'static str, &'static str) {
    match key {
        Key::Ed25519(_) => ("OKP", "Ed25519"),
        Key::P256(_) => ("EC", "P-256"),
    }
}

/// RFC 7638 section 3: SHA-256 over the public JWK's required members in lexical order,
/// without whitespace (OKP: `crv`, `kty`, `x`; EC: `crv`, `kty`, `x`, `y`), base64url. Every
/// value is base64url or a fixed name, so nothing needs escaping.
fn thumbprint(key: &Key, x: &str, y: Option<&str>) -> String {
    let (kty, crv) = kty_crv(key);
    let mut h = Sha256::new();
    h.update(format!(r#"{{"crv":"{crv}","kty":"{kty}","x":"{x}""#));
    if let Some(y) = y {
        h.update(format!(r#","y":"{y}""#));
    }
    h.update(b"}");
    URL_SAFE_NO_PAD.encode(h.finalize())
}
