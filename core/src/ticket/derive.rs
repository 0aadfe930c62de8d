//! Values derived from the ticket keys: the same on every node that has the same key file,
//! unpredictable to anyone without it. A fleet needs such values where nodes must agree
//! without talking (the seed that hashes flood-control keys, so that one address meets the
//! same budget in Redis whichever node it reaches).

use aes_gcm::aes::cipher::{Block, BlockEncrypt};
use aes_gcm::aes::Aes256;

use super::Keyring;

impl Keyring {
    /// A number for `purpose` in `room`, derived from the first key: CBC-MAC under AES-256
    /// whose first block holds both lengths (so no two inputs share an encoding, and the MAC
    /// of variable-length input stays a pseudo-random function), over `purpose`, then `room`,
    /// zero-padded to whole blocks. The key's ticket nonces are random 96-bit values and never
    /// take the form of this first block, so no ticket and no derived value share an input
    /// of the cipher. Changing the first key (rotating) changes every derived value.
    pub fn derive_u64(&self, purpose: &str, room: &str) -> u64 {
        derive_with(&self.derive, purpose.as_bytes(), room.as_bytes())
    }

    /// The session id of the clients of `room` whose `one_place_per=` value is `key`: the same
    /// on every node with the same key file, never 0, unpredictable without the key.
    pub fn user_sid(&self, room: &str, key: &[u8]) -> u64 {
        let mut what = Vec::with_capacity(key.len() + 1);
        what.push(2);
        what.extend_from_slice(key);
        self.derive_bytes(&what, room.as_bytes()).max(1)
    }

    /// [`Keyring::derive_u64`] over bytes: `what` (not text: a byte no text purpose starts
    /// with goes first, so it never derives what a text purpose does) and the room. Callers
    /// start `what` with a byte of their own (a challenge's seed 1, a user key's session 2).
    pub fn derive_bytes(&self, what: &[u8], room: &[u8]) -> u64 {
        let mut tagged = Vec::with_capacity(what.len() + 1);
        tagged.push(0xc5);
        tagged.extend_from_slice(what);
        derive_with(&self.derive, &tagged, room)
    }
}

fn derive_with(cipher: &Aes256, purpose: &[u8], room: &[u8]) -> u64 {
    let mut state = Block::<Aes256>::default();
    let mut head = [0u8; 16];
    let lens = [purpose.len() as u64, room.len() as u64];
    for (chunk, len) in head.chunks_exact_mut(8).zip(lens) {
        chunk.copy_from_slice(&len.to_le_bytes());
    }
    // A domain tag in the length block's top byte: a derived value, not a ticket.
    if let Some(b) = head.last_mut() {
        *b = 0xd5;
    }
    xor_into(&mut state, &head);
    cipher.encrypt_block(&mut state);
    for part in [purpose, room] {
        for chunk in part.chunks(16) {
            xor_into(&mut state, chunk);
            cipher.encrypt_block(&mut state);
        }
    }
    let mut out = [0u8; 8];
    for (o, s) in out.iter_mut().zip(state.iter()) {
        *o = *s;
    }
    u64::from_le_bytes(out)
}

/// XORs `bytes` (at most a block; shorter means zero-padded) into the block.
fn xor_into(block: &mut Block<Aes256>, bytes: &[u8]) {
    for (b, x) in block.iter_mut().zip(bytes) {
        *b ^= *x;
    }
}
