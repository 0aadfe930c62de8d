//! `challenge=pow` ([S19]): a ticket without a place brings a proof of work before it takes
//! one (see `smart_limit_core::challenge`). The check is the same for every store: it happens
//! here, before the room is asked.
//!
//! - A ticket that holds (or held) a place, or a newcomer the room would let in at once, needs
//!   no proof.
//! - A proof comes as the cookie `smart_limit_<room>_proof` or the header `Smart-Limit-Proof`,
//!   `SEED.NONCE`; a valid one lets the ticket take its place (and the cookie is deleted), once:
//!   the node records it spent, and the same proof again is a client without one. A central
//!   Redis room records it too, in the visit's own call, for the whole fleet
//!   ([`spent_elsewhere`] answers a proof it found spent).
//! - Without a valid proof, the client gets the challenge answer: the seed for its ticket, no
//!   place. A browser that runs no script is not locked out: [`no_script_wait_ms`] after its
//!   ticket's first challenge ([`first_challenge`], which the first challenge answer writes
//!   into the ticket), it takes its place without a proof (the page comes back then), unless
//!   `challenge_noscript=off`. Counted from the first challenge, not from the ticket's issue,
//!   so a ticket minted long ahead is challenged like any other.

use ngx::http::Request;
use smart_limit_core::challenge::{
    encode_seed, first_challenge, no_script_wait_ms, seed, spent_key, spent_until, verify,
    GRACE_BITS, MIN_BITS, SEED_CHARS,
};
use smart_limit_core::ticket::{Keyring, Ticket};

use crate::request::RequestExt;
use crate::store::{SpentProof, Zone};

/// The request header a program sends its proof in.
const PROOF_HEADER: &str = "smart-limit-proof";
/// Longest proof read: a seed, a dot, a nonce.
const MAX_PROOF: usize = SEED_CHARS + 1 + smart_limit_core::challenge::MAX_NONCE_DIGITS;

/// What the gate says of a waiting ticket.
pub enum Gate {
    /// It may take its place (`spent`: with a proof, recorded spent on this node under this
    /// key, whose cookie is to be deleted; the central room records it too).
    Pass { spent: Option<SpentProof> },
    /// The challenge answer: solve this seed (base64url) at this difficulty.
    Challenge(Challenge),
}

/// A challenge answer's contents.
pub struct Challenge {
    pub seed: [u8; SEED_CHARS],
    pub bits: u8,
    /// Seconds until the ticket may take its place without a proof (the page's `<noscript>`
    /// refresh); None with `challenge_noscript=off`.
    pub no_script_secs: Option<u64>,
    /// This is the ticket's first challenge: the answer writes the ticket again with this
    /// moment as its check-in, where its no-script wait starts.
    pub first: bool,
}

/// The gate for a waiting ticket `t` at `now`.
pub fn gate(r: &Request, zone: &Zone, t: &Ticket, now: u64) -> Gate {
    // (`auto` looks at the room once a second per worker, whoever asks: the polls of the
    // tickets that hold places keep its view current, at the cost of a compare each.)
    let Some(bits) = zone.challenge_bits(now) else {
        return Gate::Pass { spent: None };
    };
    if t.qnum != 0 || zone.admits_at_once(now) {
        return Gate::Pass { spent: None };
    }
    let Some(keys) = zone.keys.as_ref() else {
        return Gate::Pass { spent: None };
    };
    let room = zone.params.name.as_str();
    let bound = (t.sid, t.issued_at);
    let first = first_challenge(t.issued_at, t.last_seen);
    let since = first.unwrap_or(now);
    if let Some(proof) = proof_of(r, zone) {
        let min = bits.saturating_sub(GRACE_BITS).max(MIN_BITS);
        let key = spent_key(bound);
        let until = |solved| spent_until(since, solved);
        match verify(keys, room, bound, &proof, min) {
            Ok(solved) if zone.spend_proof(key, until(solved), now) => {
                let ttl_ms = until(solved).saturating_sub(now);
                return Gate::Pass {
                    spent: Some(SpentProof { key, ttl_ms }),
                };
            }
            // A proof that does not verify, or one spent already: a client without one.
            _ => zone.count(|c| c.proofs_refused += 1),
        }
    }
    let no_script = zone.params.challenge_noscript;
    if no_script && now.saturating_sub(since) >= no_script_wait_ms(bits) {
        return Gate::Pass { spent: None };
    }
    Gate::Challenge(challenge(zone, keys, t, bits, now))
}

/// The challenge answer for `t` again: its proof took this node's gate, but the central room
/// found it spent already (on another node, or by a place since gone).
pub fn spent_elsewhere(zone: &Zone, t: &Ticket, now: u64) -> Option<Challenge> {
    zone.count(|c| c.proofs_refused += 1);
    let bits = zone.challenge_bits(now)?;
    Some(challenge(zone, zone.keys.as_ref()?, t, bits, now))
}

/// The challenge answer: the ticket's seed at `bits`, and how long until its no-script wait
/// from its first challenge is over.
fn challenge(zone: &Zone, keys: &Keyring, t: &Ticket, bits: u8, now: u64) -> Challenge {
    let first = first_challenge(t.issued_at, t.last_seen);
    let waited = now.saturating_sub(first.unwrap_or(now));
    let wait = no_script_wait_ms(bits);
    zone.challenge_given();
    let room = zone.params.name.as_str();
    let text = encode_seed(&seed(keys, room, (t.sid, t.issued_at), bits));
    let mut out = [b'A'; SEED_CHARS];
    for (o, b) in out.iter_mut().zip(text.bytes()) {
        *o = b;
    }
    Challenge {
        seed: out,
        bits,
        no_script_secs: zone
            .params
            .challenge_noscript
            .then(|| wait.saturating_sub(waited).div_ceil(1000)),
        first: first.is_none(),
    }
}

/// The proof the request brings: the header, else the room's proof cookie.
fn proof_of(r: &Request, zone: &Zone) -> Option<Vec<u8>> {
    let header = r.header_values(PROOF_HEADER).next();
    let cookie = || {
        r.header_values("cookie")
            .flat_map(|h| zone.proof_cookie.values(h))
            .next()
    };
    header
        .or_else(cookie)
        .filter(|p| p.len() <= MAX_PROOF)
        .map(<[u8]>::to_vec)
}
