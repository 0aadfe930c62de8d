//! `challenge=pow` ([S19]): a ticket without a place brings a proof of work before it takes
//! one (see `smart_limit_core::challenge`). The check is the same for every store: it happens
//! here, before the room is asked.
//!
//! - A ticket that holds (or held) a place, or a newcomer the room would let in at once, needs
//!   no proof.
//! - A proof comes as the cookie `smart_limit_<room>_proof` or the header `Smart-Limit-Proof`,
//!   `SEED.NONCE`; a valid one lets the ticket take its place (and the cookie is deleted).
//! - Without a valid proof, the client gets the challenge answer: the seed for its ticket, no
//!   place. A browser that runs no script is not locked out: once its ticket is
//!   [`no_script_wait_ms`] old, it takes its place without a proof (the page comes back then).

use ngx::http::Request;
use smart_limit_core::challenge::{encode_seed, seed, verify, GRACE_BITS, MIN_BITS, SEED_CHARS};
use smart_limit_core::ticket::Ticket;

use crate::request::RequestExt;
use crate::store::Zone;

/// The request header a program sends its proof in.
const PROOF_HEADER: &str = "smart-limit-proof";
/// Longest proof read: a seed, a dot, a nonce.
const MAX_PROOF: usize = SEED_CHARS + 1 + smart_limit_core::challenge::MAX_NONCE_DIGITS;

/// What the gate says of a waiting ticket.
pub enum Gate {
    /// It may take its place (`proven`: with a proof, whose cookie is to be deleted).
    Pass { proven: bool },
    /// The challenge answer: solve this seed (base64url) at this difficulty.
    Challenge([u8; SEED_CHARS], u8, u64),
}

/// How long a ticket waits before it may take a place without a proof (a browser without
/// JavaScript): 30 s, and as long again as a browser's core takes to solve at `bits` (about
/// 2^bits hashes at 100,000 a second, a slow phone), so that a script gains nothing by not
/// solving.
pub fn no_script_wait_ms(bits: u8) -> u64 {
    30_000 + (1u64 << bits.min(40)) / 100
}

/// The gate for a waiting ticket `t` at `now`.
pub fn gate(r: &Request, zone: &Zone, t: &Ticket, now: u64) -> Gate {
    let Some(bits) = zone.challenge_bits(now) else {
        return Gate::Pass { proven: false };
    };
    if t.qnum != 0 || zone.admits_at_once(now) {
        return Gate::Pass { proven: false };
    }
    let Some(keys) = zone.keys.as_ref() else {
        return Gate::Pass { proven: false };
    };
    let room = zone.params.name.as_str();
    if let Some(proof) = proof_of(r, zone) {
        let min = bits.saturating_sub(GRACE_BITS).max(MIN_BITS);
        match verify(keys, room, t.sid, &proof, min) {
            Ok(_) => return Gate::Pass { proven: true },
            // A proof that does not verify: a client without one.
            Err(_) => zone.count(|c| c.proofs_refused += 1),
        }
    }
    let waited = now.saturating_sub(t.issued_at);
    let wait = no_script_wait_ms(bits);
    if waited >= wait {
        return Gate::Pass { proven: false };
    }
    zone.count(|c| c.challenged += 1);
    let text = encode_seed(&seed(keys, room, t.sid, bits));
    let mut out = [b'A'; SEED_CHARS];
    for (o, b) in out.iter_mut().zip(text.bytes()) {
        *o = b;
    }
    Gate::Challenge(out, bits, (wait - waited).div_ceil(1000))
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
