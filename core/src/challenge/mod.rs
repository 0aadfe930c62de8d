//! A proof of work to take a place in the line ([S19], `challenge=pow`): scripts pay for each
//! place in CPU, as people's browsers do, so many addresses no longer mean many places for
//! free.
//!
//! A client whose ticket has no place yet is given a **seed** bound to that ticket: the
//! difficulty (`bits`, one byte) followed by a MAC of the room, the ticket's session id, its
//! issue time and the difficulty under the room's key (8 bytes; [`Keyring::derive_bytes`]),
//! written in base64url (12 characters). It finds a **nonce** (decimal ASCII) such that
//! SHA-256(seed bytes followed by the nonce) starts with `bits` zero bits, about 2^bits hashes,
//! and comes back with `SEED.NONCE`. Checking costs one MAC and one hash. A seed of another
//! ticket (another room, a forged one) does not verify; a proof is accepted once (the node
//! records it spent, [`spent_key`], until [`spent_until`]), and once the ticket holds a place
//! its proof is never asked for again, so a proof buys one place.

mod pressure;
#[cfg(test)]
mod tests;

pub use pressure::{
    doublings, keep, kept, Pressure, FLEET_FRESH_MS, LOOK_MS, MAX_DOUBLINGS, PRESSURE_KEEP_PCT,
};

use crate::config::ParseError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::ticket::Keyring;

/// The seed's bytes: the difficulty, then the MAC.
pub const SEED_BYTES: usize = 9;
/// The seed in base64url.
pub const SEED_CHARS: usize = 12;
/// Digits of a nonce, at most (a u64 in decimal).
pub const MAX_NONCE_DIGITS: usize = 20;
/// `challenge_bits=N`: the range a fixed difficulty may take.
pub const MIN_BITS: u8 = 1;
pub const MAX_BITS: u8 = 32;
/// `challenge_bits=auto`: from this difficulty when the line drains as fast as it grows...
pub const AUTO_MIN_BITS: u8 = 16;
/// ...to this one under a flood (each bit doubles the work: 2^22 hashes take a browser's
/// core a few seconds; see docs/under-attack.md for the measured costs).
pub const AUTO_MAX_BITS: u8 = 22;
/// A proof solved at a difficulty up to this much below the one in force now is taken (the
/// difficulty may rise while an honest browser solves).
pub const GRACE_BITS: u8 = 2;

/// The first byte of what a seed is derived from (see `Keyring::derive_bytes`; a user key's
/// session id starts with another).
const SEED_TAG: u8 = 1;

/// `challenge_bits=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bits {
    Fixed(u8),
    Auto,
}

/// Parses `challenge_bits=` (`auto` or 1..=32).
pub fn parse_bits(v: &str) -> Result<Bits, ParseError> {
    if v == "auto" {
        return Ok(Bits::Auto);
    }
    match v.parse::<u8>() {
        Ok(n) if (MIN_BITS..=MAX_BITS).contains(&n) => Ok(Bits::Fixed(n)),
        _ => Err(ParseError::WordOrRange {
            words: "auto or a number of bits",
            min: u64::from(MIN_BITS),
            max: u64::from(MAX_BITS),
        }),
    }
}

/// What a seed is bound to: a ticket's session id and issue time (unix ms). Two tickets of one
/// session (`one_place_per=`: a user's devices) have two seeds.
pub type Bound = (u64, u64);

/// The seed of the challenge of ticket `(sid, issued_at)` in `room` at difficulty `bits`.
pub fn seed(keys: &Keyring, room: &str, (sid, issued_at): Bound, bits: u8) -> [u8; SEED_BYTES] {
    // What is derived: the tag of a challenge's seed, the session id, the issue time, the
    // difficulty.
    let mut input = [bits; 18];
    let parts = [SEED_TAG]
        .into_iter()
        .chain(sid.to_le_bytes())
        .chain(issued_at.to_le_bytes());
    for (i, b) in input.iter_mut().zip(parts) {
        *i = b;
    }
    // (The ticket and the difficulty as the derivation's first part, the room as its second.)
    let mac = keys.derive_bytes(&input, room.as_bytes());
    let mut seed = [bits; SEED_BYTES];
    for (s, b) in seed.iter_mut().skip(1).zip(mac.to_le_bytes()) {
        *s = b;
    }
    seed
}

/// The seed as the client sees it (base64url, no padding).
pub fn encode_seed(seed: &[u8; SEED_BYTES]) -> String {
    URL_SAFE_NO_PAD.encode(seed)
}

/// Why a proof is not taken (any of them: the client is one without a proof).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("not SEED.NONCE")]
    Malformed,
    #[error("a seed of another ticket")]
    Foreign,
    #[error("solved at a difficulty below the one in force")]
    TooEasy,
    #[error("the hash does not start with enough zero bits")]
    Unsolved,
}

/// Checks `proof` (`SEED.NONCE`) for ticket `bound` of `room`: the seed is this ticket's, at a
/// difficulty of at least `min_bits`, and the hash has that many leading zero bits. Returns the
/// difficulty it was solved at. (Whether it was spent already is the node's record's to say.)
pub fn verify(
    keys: &Keyring,
    room: &str,
    bound: Bound,
    proof: &[u8],
    min_bits: u8,
) -> Result<u8, ProofError> {
    let dot = proof
        .iter()
        .position(|&b| b == b'.')
        .ok_or(ProofError::Malformed)?;
    let (text, rest) = proof.split_at_checked(dot).ok_or(ProofError::Malformed)?;
    let nonce = rest.get(1..).ok_or(ProofError::Malformed)?;
    if text.len() != SEED_CHARS
        || nonce.is_empty()
        || nonce.len() > MAX_NONCE_DIGITS
        || !nonce.iter().all(u8::is_ascii_digit)
    {
        return Err(ProofError::Malformed);
    }
    let mut got = [0u8; SEED_BYTES];
    match URL_SAFE_NO_PAD.decode_slice(text, &mut got) {
        Ok(SEED_BYTES) => {}
        _ => return Err(ProofError::Malformed),
    }
    let [bits, ..] = got;
    if !(MIN_BITS..=MAX_BITS).contains(&bits) {
        return Err(ProofError::Malformed);
    }
    if bits < min_bits {
        return Err(ProofError::TooEasy);
    }
    let want = seed(keys, room, bound, bits);
    // (Equal-time comparison: a MAC's bytes are not to be found one at a time.)
    if got
        .iter()
        .zip(want.iter())
        .fold(0u8, |d, (a, b)| d | (a ^ b))
        != 0
    {
        return Err(ProofError::Foreign);
    }
    if zero_bits(&hash(&got, nonce)) < u32::from(bits) {
        return Err(ProofError::Unsolved);
    }
    Ok(bits)
}

/// How long a ticket waits before it may take a place without a proof (a browser without
/// JavaScript): 30 s, and as long again as a browser's core takes to solve at `bits` (about
/// 2^bits hashes at 100,000 a second, a slow phone), so that a script gains nothing by not
/// solving.
pub fn no_script_wait_ms(bits: u8) -> u64 {
    30_000 + (1u64 << bits.min(40)) / 100
}

/// When a waiting ticket was first challenged, which starts its no-script wait: the challenge
/// answer writes the ticket again with that moment as its check-in (`last_seen`). The cookie
/// check writes `last_seen` equal to `issued_at`, so a ticket whose two are equal was never
/// challenged (None): its wait starts with this challenge. So a ticket minted long before it
/// is used (a script preparing a launch) is challenged at least once, however old it is.
pub fn first_challenge(issued_at: u64, last_seen: u64) -> Option<u64> {
    (last_seen != issued_at).then_some(last_seen)
}

/// The key a spent proof of ticket `bound` is recorded under (never 0: 0 is a free entry).
pub fn spent_key((sid, issued_at): Bound) -> u64 {
    crate::util::hash::mix64(sid ^ issued_at.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15).max(1)
}

/// Until when a proof solved at `bits` for a ticket first challenged at `since` must be
/// remembered as spent: after that the ticket takes its place without a proof anyway (the
/// no-script path; a proof at `bits` is taken while the difficulty in force is at most
/// `GRACE_BITS` above it).
pub fn spent_until(since: u64, bits: u8) -> u64 {
    since.saturating_add(no_script_wait_ms(bits.saturating_add(GRACE_BITS)))
}

/// SHA-256 of the seed's bytes followed by the nonce's ASCII.
pub fn hash(seed: &[u8], nonce: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(seed);
    h.update(nonce);
    h.finalize().into()
}

/// Leading zero bits of a hash.
pub fn zero_bits(h: &[u8; 32]) -> u32 {
    let mut n = 0;
    for &b in h {
        if b == 0 {
            n += 8;
        } else {
            return n + b.leading_zeros();
        }
    }
    n
}

/// Solves a seed natively (tests, the botnet bench): the first nonce from `from` whose hash
/// has `bits` zero bits, trying at most `tries`.
pub fn solve(seed: &[u8], bits: u8, from: u64, tries: u64) -> Option<u64> {
    let mut buf = itoa::Buffer::new();
    (from..from.saturating_add(tries))
        .find(|&n| zero_bits(&hash(seed, buf.format(n).as_bytes())) >= u32::from(bits))
}

/// A client's side: the proof (`SEED.NONCE`) for a seed as the challenge answer gives it
/// (base64url), found natively within `tries` (tests, the botnet bench).
pub fn solve_proof(seed_text: &str, bits: u8, tries: u64) -> Option<String> {
    let mut seed = [0u8; SEED_BYTES];
    match URL_SAFE_NO_PAD.decode_slice(seed_text.as_bytes(), &mut seed) {
        Ok(SEED_BYTES) => {}
        _ => return None,
    }
    solve(&seed, bits, 0, tries).map(|n| format!("{seed_text}.{n}"))
}
