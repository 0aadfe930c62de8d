//! The start's lottery ([S18]): everyone present in the pre-queue gets a uniformly random
//! place, and every node of a fleet computes the same order without being sent it.
//!
//! A lottery is a 32-byte seed drawn once per event from the operating system's random source
//! (the first node to reach the start stores it; the others read it). Each member's ticket is
//! HMAC-SHA256 under the seed of the member's session id: a pseudo-random function, so
//! without the seed nobody can tell which session ids draw low, and two members' tickets tie
//! with chance 2^-64 (ties go by session id). Sorting the members by ticket is then a
//! uniformly random order (every member equally likely at every rank), and any node that
//! knows the seed and a session id knows that session's ticket: a member's place needs no
//! message, only `rank` over the members it knows.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// One event's draw.
pub struct Lottery {
    /// Keyed once with the seed; each ticket works on a copy.
    mac: Option<Hmac<Sha256>>,
}

impl Lottery {
    pub fn new(seed: &[u8; 32]) -> Lottery {
        Lottery {
            mac: Hmac::<Sha256>::new_from_slice(seed).ok(),
        }
    }

    /// The member's ticket: lower draws earlier (64 bits of the HMAC).
    pub fn ticket(&self, sid: u64) -> u64 {
        let Some(mut mac) = self.mac.clone() else {
            // HMAC takes keys of any length: unreachable, and no panic is the rule.
            return sid;
        };
        // A domain tag: a lottery ticket, whatever else the seed might be used for.
        mac.update(&[0x1e]);
        mac.update(&sid.to_le_bytes());
        let tag = mac.finalize().into_bytes();
        let mut out = [0u8; 8];
        for (o, t) in out.iter_mut().zip(tag.iter()) {
            *o = *t;
        }
        u64::from_le_bytes(out)
    }

    /// The members in the lottery's order (their session ids).
    pub fn order(&self, members: &[u64]) -> Vec<u64> {
        let mut drawn: Vec<(u64, u64)> = members.iter().map(|&s| (self.ticket(s), s)).collect();
        drawn.sort_unstable();
        drawn.dedup_by_key(|d| d.1);
        drawn.into_iter().map(|(_, s)| s).collect()
    }
}
