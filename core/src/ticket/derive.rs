//! Values derived from the ticket keys: the same on every node that has the same key file,
//! unpredictable to anyone without it. A fleet needs such values where nodes must agree
//! without talking (the seed that hashes flood-control keys, so that one address meets the
//! same budget in Redis whichever node it reaches; a user key's session id; a proof of work's
//! seed).
//!
//! HMAC-SHA256 under the first key's own subkey for derived values (`seal::Use::Derive`,
//! from HKDF): a key that seals tickets derives nothing, and a derived value says nothing of
//! the sealing key.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::Keyring;

impl Keyring {
    /// A number for `purpose` in `room`, derived from the first key. Changing the first key
    /// (rotating) changes every derived value.
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

    /// The session id of the holders of the enqueue token `id` in `room` (`invite=`): one
    /// place per token id, the same on every node with the same key file, never 0.
    pub fn invite_sid(&self, room: &str, id: &[u8]) -> u64 {
        let mut what = Vec::with_capacity(id.len() + 1);
        what.push(3);
        what.extend_from_slice(id);
        self.derive_bytes(&what, room.as_bytes()).max(1)
    }

    /// [`Keyring::derive_u64`] over bytes: `what` (not text: a byte no text purpose starts
    /// with goes first, so it never derives what a text purpose does) and the room. Callers
    /// start `what` with a byte of their own (a challenge's seed 1, a user key's session 2,
    /// an enqueue token's session 3).
    pub fn derive_bytes(&self, what: &[u8], room: &[u8]) -> u64 {
        let mut tagged = Vec::with_capacity(what.len() + 1);
        tagged.push(0xc5);
        tagged.extend_from_slice(what);
        derive_with(&self.derive, &tagged, room)
    }
}

/// HMAC-SHA256 over both inputs, each after its length (so no two pairs share an encoding),
/// cut to its first 8 bytes.
fn derive_with(key: &[u8; 32], purpose: &[u8], room: &[u8]) -> u64 {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        // HMAC takes keys of any length: unreachable, and no panic is the rule.
        return 0;
    };
    for part in [purpose, room] {
        mac.update(&(part.len() as u64).to_le_bytes());
        mac.update(part);
    }
    let tag = mac.finalize().into_bytes();
    let mut out = [0u8; 8];
    for (o, t) in out.iter_mut().zip(tag.iter()) {
        *o = *t;
    }
    u64::from_le_bytes(out)
}
