//! Enqueue tokens (`invite=`): an invite-only line takes a place only for a token signed by
//! the operator's own backend (HS256 with a shared secret, or EdDSA / ES256 with the backend's
//! public key), one place per token id.

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use super::jws::{self, Alg};
use super::keys::PublicKey;
use super::{TokenError, TokenKeyError};

/// Shortest HS256 secret accepted: RFC 7518 section 3.2 asks for a key at least as long as
/// the hash's output.
pub const MIN_SECRET_LEN: usize = 32;

/// Longest token id kept (it becomes the session's key, so a place per id).
const MAX_ID_LEN: usize = 128;

/// How the operator's backend signs enqueue tokens.
#[derive(Clone)]
pub enum InviteKey {
    /// HS256 with a shared secret (the file's bytes, surrounding whitespace removed).
    Secret(Vec<u8>),
    /// EdDSA or ES256 with the backend's Ed25519 or P-256 key; the room holds only the
    /// public half.
    Public(PublicKey),
}

/// What a verified enqueue token grants: one place, for its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    pub id: String,
    /// unix milliseconds
    pub expires_at: u64,
}

#[derive(Deserialize)]
struct Claims {
    jti: String,
    exp: u64,
    #[serde(default)]
    nbf: Option<u64>,
    /// When present, the room the token is for.
    #[serde(default)]
    room: Option<String>,
}

impl InviteKey {
    /// Reads an `invite=` file: an Ed25519 public key in PEM, or an HS256 secret.
    pub fn parse(file: &[u8]) -> Result<InviteKey, TokenKeyError> {
        let text = core::str::from_utf8(file).unwrap_or_default();
        if text.contains("PRIVATE KEY-----") {
            return Err(TokenKeyError::PrivateInviteKey);
        }
        if text.contains("-----BEGIN PUBLIC KEY-----") {
            return PublicKey::from_pem(text)
                .map(InviteKey::Public)
                .ok_or(TokenKeyError::NotInviteKey);
        }
        let secret = file.trim_ascii();
        if secret.len() < MIN_SECRET_LEN {
            return Err(TokenKeyError::NotInviteKey);
        }
        Ok(InviteKey::Secret(secret.to_vec()))
    }

    /// The algorithm tokens must name (shown in the reference and in `nginx -t`'s log).
    pub fn alg(&self) -> &'static str {
        self.kind().name()
    }

    fn kind(&self) -> Alg {
        match self {
            InviteKey::Secret(_) => Alg::Hs256,
            InviteKey::Public(key) => key.alg(),
        }
    }

    /// Checks an enqueue token shown for `room` at `now` (unix milliseconds).
    pub fn verify(&self, room: &str, token: &[u8], now: u64) -> Result<Invite, TokenError> {
        let parts = jws::split(token)?;
        parts.expect(self.kind())?;
        match self {
            InviteKey::Secret(secret) => {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(secret).map_err(|_| TokenError::Signature)?;
                mac.update(parts.signed);
                // Constant-time comparison (the crate's).
                mac.verify_slice(&parts.signature)
                    .map_err(|_| TokenError::Signature)?;
            }
            InviteKey::Public(key) => key.verify(parts.signed, &parts.signature)?,
        }
        let c: Claims =
            serde_json::from_slice(&parts.payload).map_err(|_| TokenError::Claims("shape"))?;
        if c.jti.is_empty() || c.jti.len() > MAX_ID_LEN {
            return Err(TokenError::Claims("jti"));
        }
        if c.room.as_deref().is_some_and(|r| r != room) {
            return Err(TokenError::Foreign);
        }
        jws::check_times(c.exp, c.nbf, now)?;
        Ok(Invite {
            id: c.jti,
            expires_at: c.exp.saturating_mul(1000),
        })
    }
}
