//! The start's lottery ([S18]): everyone present in the pre-queue gets a uniformly random
//! place, and every node of a fleet computes the same order without being sent it.
//!
//! A lottery is a 32-byte seed drawn once per event from the operating system's random source
//! (the first node to reach the start stores it; the others read it). Each member's ticket is
//! AES-256 under the seed of a block holding the member's session id: AES is a pseudo-random
//! permutation, so the tickets of distinct members are distinct, and without the seed nobody
//! can tell which session ids draw low. Sorting the members by ticket is then a uniformly
//! random order (every member equally likely at every rank), and any node that knows the seed
//! and a session id knows that session's ticket: a member's place needs no message, only
//! `rank` over the members it knows.

use aes_gcm::aes::cipher::{Block, BlockEncrypt, KeyInit};
use aes_gcm::aes::Aes256;

/// One event's draw.
pub struct Lottery {
    cipher: Aes256,
}

impl Lottery {
    pub fn new(seed: &[u8; 32]) -> Lottery {
        Lottery {
            cipher: Aes256::new(seed.into()),
        }
    }

    /// The member's ticket: lower draws earlier. Distinct session ids never share a full
    /// block; the 64 bits kept tie with chance 2^-64 a pair, and ties go by session id.
    pub fn ticket(&self, sid: u64) -> u64 {
        let mut block = Block::<Aes256>::default();
        for (b, s) in block.iter_mut().zip(sid.to_le_bytes()) {
            *b = s;
        }
        // A domain tag: a lottery ticket, whatever else the seed might be used for.
        if let Some(b) = block.last_mut() {
            *b = 0x1e;
        }
        self.cipher.encrypt_block(&mut block);
        let mut out = [0u8; 8];
        for (o, b) in out.iter_mut().zip(block.iter()) {
            *o = *b;
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
