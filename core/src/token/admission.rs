//! Admission tokens: what an admitted client can show instead of its ticket cookie.

use serde::{Deserialize, Serialize};

use super::jws;
use super::keys::SigningKey;
use super::TokenError;

/// The room's token keys and the issuer it names.
#[derive(Clone)]
pub struct Issuer {
    /// The first signs; all verify.
    keys: Vec<SigningKey>,
    issuer: String,
    /// `aud`, when set: written and required (verifiers such as API gateways ask for one).
    audience: Option<String>,
    /// The public keys as a JWK Set, made once with the keys.
    jwks: String,
}

/// What a verified admission token says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub sid: u64,
    /// When the token was issued (the session's last renewal), unix milliseconds.
    pub issued_at: u64,
    /// When the session was admitted, unix milliseconds.
    pub admitted_at: u64,
    /// The grant's end, unix milliseconds.
    pub expires_at: u64,
}

/// The token's claims: registered ones (RFC 7519 4.1) and the room's own. Times are seconds
/// (NumericDate), what every JWT library checks `exp` against.
#[derive(Serialize, Deserialize)]
struct Claims<'a> {
    iss: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<&'a str>,
    /// The session id, 16 hex digits (what `$smart_limit_sid` shows).
    sub: &'a str,
    room: &'a str,
    iat: u64,
    /// When the session was admitted.
    adm: u64,
    exp: u64,
    jti: &'a str,
}

/// The same claims read from untrusted JSON: owned strings (escapes cannot borrow).
#[derive(Deserialize)]
struct ClaimsIn {
    iss: String,
    #[serde(default)]
    aud: Option<String>,
    sub: String,
    room: String,
    iat: u64,
    adm: u64,
    exp: u64,
}

impl Issuer {
    /// Keys in the order given (at least one: the first signs), the `iss` to write, and the
    /// `aud` if any.
    pub fn new(keys: Vec<SigningKey>, issuer: String, audience: Option<String>) -> Option<Issuer> {
        if keys.is_empty() {
            return None;
        }
        let jwks = jwk_set(&keys);
        Some(Issuer {
            keys,
            issuer,
            audience,
            jwks,
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// A token for session `sid` of `room`, admitted at `admitted_at`, issued `now`, valid
    /// until `expires_at` (unix milliseconds).
    pub fn issue(
        &self,
        room: &str,
        sid: u64,
        admitted_at: u64,
        now: u64,
        expires_at: u64,
    ) -> Result<String, TokenError> {
        let key = self.keys.first().ok_or(TokenError::UnknownKey)?;
        let mut id = [0u8; 16];
        crate::util::random::fill(&mut id).map_err(|_| TokenError::Random)?;
        let sub = format!("{sid:016x}");
        let jti = hex(&id);
        let claims = Claims {
            iss: &self.issuer,
            aud: self.audience.as_deref(),
            sub: &sub,
            room,
            iat: now / 1000,
            adm: admitted_at / 1000,
            exp: expires_at.div_ceil(1000),
            jti: &jti,
        };
        let payload = serde_json::to_vec(&claims).map_err(|_| TokenError::Claims("encode"))?;
        let header = format!(
            r#"{{"alg":"{}","typ":"JWT","kid":"{}"}}"#,
            key.alg().name(),
            key.kid()
        );
        let input = jws::signing_input(header.as_bytes(), &payload);
        let signature = key.sign(input.as_bytes());
        Ok(jws::finish(input, &signature))
    }

    /// Checks a token shown for `room` at `now`: one of this room's keys signed it, for this
    /// issuer and room, and it has not expired.
    pub fn verify(&self, room: &str, token: &[u8], now: u64) -> Result<Admission, TokenError> {
        let parts = jws::split(token)?;
        let kid = parts.kid.as_deref().ok_or(TokenError::UnknownKey)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.kid() == kid)
            .ok_or(TokenError::UnknownKey)?;
        parts.expect(key.alg())?;
        key.public().verify(parts.signed, &parts.signature)?;
        let c: ClaimsIn =
            serde_json::from_slice(&parts.payload).map_err(|_| TokenError::Claims("shape"))?;
        if c.iss != self.issuer || c.room != room || c.aud != self.audience {
            return Err(TokenError::Foreign);
        }
        jws::check_times(c.exp, Some(c.iat), now)?;
        if c.adm > c.iat {
            return Err(TokenError::NotYetValid);
        }
        Ok(Admission {
            sid: parse_sid(&c.sub)?,
            issued_at: c.iat.saturating_mul(1000),
            admitted_at: c.adm.saturating_mul(1000),
            expires_at: c.exp.saturating_mul(1000),
        })
    }

    /// The public keys as a JWK Set (RFC 7517 section 5), the signing key first.
    pub fn jwks(&self) -> &str {
        &self.jwks
    }
}

fn jwk_set(keys: &[SigningKey]) -> String {
    #[derive(Serialize)]
    struct Set<'a> {
        keys: Vec<super::keys::Jwk<'a>>,
    }
    let set = Set {
        keys: keys.iter().map(SigningKey::jwk).collect(),
    };
    serde_json::to_string(&set).unwrap_or_default()
}

/// A session id as `sub` spells it: 16 lower-case hex digits, not zero.
fn parse_sid(sub: &str) -> Result<u64, TokenError> {
    let ok = sub.len() == 16 && sub.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    match u64::from_str_radix(sub, 16) {
        Ok(sid) if ok && sid != 0 => Ok(sid),
        _ => Err(TokenError::Claims("sub")),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
