//! Signed tokens (SPEC [S28]): admission travels as a JWS, and a line can be invite-only.
//!
//! - An **admission token** ([`Issuer`]) is a compact JWS (RFC 7515) signed with Ed25519
//!   (`EdDSA`, RFC 8037) or P-256 (`ES256`), issued when a client is admitted and renewed with its ticket. Any
//!   service verifies it with the public keys the room serves as a JWKS ([`Issuer::jwks`]),
//!   and `Authorization: Bearer <token>` passes a location of the room as an admitted ticket
//!   does. Keys come from PEM files; the first signs, all verify (rotation); each key's `kid`
//!   is its RFC 7638 thumbprint, so a verifier finds the key without a shared naming scheme.
//! - An **enqueue token** ([`InviteKey`]) comes from the operator's own backend (HS256 with a
//!   secret file, or EdDSA / ES256 with a public key file): without one no place is taken, and one
//!   place is kept per token id.
//!
//! The algorithm is the key's, never the token header's: a header that names another
//! algorithm than the key it would be checked with is refused before any signature work
//! (so `alg: none` and an HS256 token "signed" with a public key both fail). Tokens are
//! untrusted input read inside nginx workers: sizes are checked first, nothing panics, and
//! every failure is a [`TokenError`] that makes the caller treat the client as a new user.
//! The signatures are ed25519-dalek's, the RustCrypto `p256` and `hmac` crates', not hand-made.

mod admission;
mod cache;
mod invite;
mod jws;
mod keys;

#[cfg(test)]
mod tests;

use thiserror::Error;

pub use admission::{Admission, Issuer};
pub use cache::TokenCache;
pub use invite::{Invite, InviteKey};
pub use keys::SigningKey;

/// Longest token read, in bytes: checked before any decoding so a client cannot make a
/// worker decode or verify large inputs. An admission token with a 64-character room name is
/// under 450 bytes; an operator's enqueue token has room for its own claims.
pub const MAX_TOKEN_LEN: usize = 2048;

/// `smart_limit_token_key`'s settings: the keys and issuer, and the request header a bearer
/// token comes in.
#[derive(Clone)]
pub struct Tokens {
    pub issuer: Issuer,
    /// Lower-case header name (default `authorization`), read as `Bearer <token>`.
    pub bearer: String,
}

/// The default request header of bearer tokens (`bearer=`), lower case.
pub const DEFAULT_BEARER: &str = "authorization";

/// The default issuer (`iss`) of admission tokens.
pub const DEFAULT_ISSUER: &str = "smart_limit";

/// Why a token was refused (the caller treats the client as a new user).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenError {
    #[error("token longer than {MAX_TOKEN_LEN} bytes")]
    TooLong,
    #[error("token is not a compact JWS: {0}")]
    Malformed(&'static str),
    #[error("token's algorithm is not the key's ({0})")]
    Algorithm(&'static str),
    #[error("token names a key this room does not have")]
    UnknownKey,
    #[error("token's signature does not verify")]
    Signature,
    #[error("token's claims are unusable: {0}")]
    Claims(&'static str),
    #[error("token has expired")]
    Expired,
    #[error("token is not valid yet")]
    NotYetValid,
    #[error("token was issued for another room or issuer")]
    Foreign,
    #[error("cannot get random bytes for a token id")]
    Random,
}

/// Why a key file was refused. Messages never contain key material.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenKeyError {
    #[error(
        "not an Ed25519 or P-256 private key in PEM: make one with \
         \"openssl genpkey -algorithm ed25519\" (EdDSA) or \
         \"openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256\" (ES256)"
    )]
    NotPrivateKey,
    #[error(
        "neither an Ed25519 or P-256 public key in PEM (\"BEGIN PUBLIC KEY\") nor a secret \
         of at least {min} bytes for HS256",
        min = invite::MIN_SECRET_LEN
    )]
    NotInviteKey,
    #[error("holds a private key: give the public key only (\"openssl pkey -pubout\")")]
    PrivateInviteKey,
}
