//! A worker's cache of tokens it signed and verified: an app calls the API with one bearer
//! token again and again, and a location that reads `$smart_limit_token` would sign one per
//! request; signatures cost more than the rest of such a request (an Ed25519 verification is
//! about 55 µs here, a P-256 one about 360 µs: `cargo bench --bench hot_paths -- token`).
//!
//! Only an exact byte-for-byte match is answered from the verified side, and its expiry is
//! checked again on every use, so the cache never lets in a token that would not verify by
//! itself at that moment. The signed side hands out the same token for the same admission
//! (session, admission time, renewal, end): its `jti` then names that admission's token.
//! Direct-mapped (one entry per slot, replaced on collision), fixed size, one room and one
//! key set (a zone's, for the life of its configuration).

use super::{Admission, Issuer, TokenError};
use crate::util::hash::mix64;

/// What a signed token was made from: the session, when it was admitted, when the token says
/// it was issued, and when it ends.
type Basis = (u64, u64, u64, u64);

pub struct TokenCache {
    verified: Vec<Option<(Vec<u8>, Admission)>>,
    signed: Vec<Option<(Basis, String)>>,
}

impl TokenCache {
    /// A cache of `slots` entries on each side (rounded up to a power of two, at least 1).
    pub fn new(slots: usize) -> TokenCache {
        let n = slots.max(1).next_power_of_two();
        TokenCache {
            verified: (0..n).map(|_| None).collect(),
            signed: (0..n).map(|_| None).collect(),
        }
    }

    /// [`Issuer::verify`], answered from the cache for a token verified before.
    pub fn verify(
        &mut self,
        issuer: &Issuer,
        room: &str,
        token: &[u8],
        now: u64,
    ) -> Result<Admission, TokenError> {
        let i = slot(self.verified.len(), token);
        if let Some(Some((t, a))) = self.verified.get(i) {
            if t.as_slice() == token {
                return if now / 1000 < a.expires_at / 1000 {
                    Ok(*a)
                } else {
                    Err(TokenError::Expired)
                };
            }
        }
        let a = issuer.verify(room, token, now)?;
        if let Some(e) = self.verified.get_mut(i) {
            *e = Some((token.to_vec(), a));
        }
        Ok(a)
    }

    /// [`Issuer::issue`], the same token again for the same admission.
    pub fn issue(
        &mut self,
        issuer: &Issuer,
        room: &str,
        (sid, admitted_at, issued_at, expires_at): Basis,
    ) -> Result<String, TokenError> {
        let basis = (sid, admitted_at, issued_at, expires_at);
        let n = self.signed.len();
        let i = (mix64(sid) as usize) & (n - 1);
        if let Some(Some((b, t))) = self.signed.get(i) {
            if *b == basis {
                return Ok(t.clone());
            }
        }
        let t = issuer.issue(room, sid, admitted_at, issued_at, expires_at)?;
        if let Some(e) = self.signed.get_mut(i) {
            *e = Some((basis, t.clone()));
        }
        Ok(t)
    }
}

/// A token's slot: from its last bytes, the signature's (a forged token that collides only
/// evicts an entry).
fn slot(n: usize, token: &[u8]) -> usize {
    let tail = token.len().saturating_sub(8);
    let mut h = [0u8; 8];
    for (d, s) in h.iter_mut().zip(token.get(tail..).unwrap_or_default()) {
        *d = *s;
    }
    (mix64(u64::from_le_bytes(h)) as usize) & (n - 1)
}
