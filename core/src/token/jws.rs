//! The compact JWS form (RFC 7515 section 7.1): `BASE64URL(header) . BASE64URL(payload) .
//! BASE64URL(signature)`, read with every length checked and nothing trusted before the
//! signature is.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;

use super::{TokenError, MAX_TOKEN_LEN};
use crate::room::rules::MAX_CLOCK_SKEW_MS;

/// The algorithms this module verifies. Which one applies is the key's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Alg {
    EdDsa,
    Es256,
    Hs256,
}

impl Alg {
    pub(super) fn name(self) -> &'static str {
        match self {
            Alg::EdDsa => "EdDSA",
            Alg::Es256 => "ES256",
            Alg::Hs256 => "HS256",
        }
    }
}

/// The protected header fields this module reads.
#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    /// Extensions a verifier must understand (RFC 7515 4.1.11): none are, so any is refused.
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

/// A token cut into its parts, its header read, its signature not yet checked.
pub(super) struct Parts<'a> {
    alg: String,
    pub kid: Option<String>,
    /// `header . payload`, the bytes the signature covers.
    pub signed: &'a [u8],
    pub payload: Vec<u8>,
    pub signature: Vec<u8>,
}

impl Parts<'_> {
    /// Refuses a header naming any algorithm but `alg`, the key's: called before the
    /// signature is looked at.
    pub fn expect(&self, alg: Alg) -> Result<(), TokenError> {
        if self.alg == alg.name() {
            Ok(())
        } else {
            Err(TokenError::Algorithm(alg.name()))
        }
    }
}

/// Cuts `token` into its parts and reads its header.
pub(super) fn split(token: &[u8]) -> Result<Parts<'_>, TokenError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::TooLong);
    }
    let mut dots = token
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'.')
        .map(|(i, _)| i);
    let (Some(first), Some(second), None) = (dots.next(), dots.next(), dots.next()) else {
        return Err(TokenError::Malformed("not three parts"));
    };
    let header = token.get(..first).unwrap_or_default();
    let payload = token.get(first + 1..second).unwrap_or_default();
    let signature = token.get(second + 1..).unwrap_or_default();
    let header = decode(header)?;
    let header: Header =
        serde_json::from_slice(&header).map_err(|_| TokenError::Malformed("header"))?;
    if header.crit.is_some() {
        return Err(TokenError::Malformed("critical header extension"));
    }
    Ok(Parts {
        alg: header.alg,
        kid: header.kid,
        signed: token.get(..second).unwrap_or_default(),
        payload: decode(payload)?,
        signature: decode(signature)?,
    })
}

fn decode(part: &[u8]) -> Result<Vec<u8>, TokenError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| TokenError::Malformed("not base64url"))
}

/// A token's times against `now` (unix ms): refused from `exp` (seconds) on, and when it
/// claims to start (`iat`, `nbf`) further ahead than the clock skew a fleet may have.
pub(super) fn check_times(exp: u64, starts: Option<u64>, now: u64) -> Result<(), TokenError> {
    let now_s = now / 1000;
    if now_s >= exp {
        return Err(TokenError::Expired);
    }
    let skew = MAX_CLOCK_SKEW_MS / 1000;
    if starts.is_some_and(|t| t > now_s.saturating_add(skew)) {
        return Err(TokenError::NotYetValid);
    }
    Ok(())
}

/// `header . payload` of a new token, to be signed and completed with [`finish`].
pub(super) fn signing_input(header: &[u8], payload: &[u8]) -> String {
    let mut out = URL_SAFE_NO_PAD.encode(header);
    out.push('.');
    URL_SAFE_NO_PAD.encode_string(payload, &mut out);
    out
}

/// Appends `. signature` to a signing input.
pub(super) fn finish(mut input: String, signature: &[u8]) -> String {
    input.push('.');
    URL_SAFE_NO_PAD.encode_string(signature, &mut input);
    input
}
