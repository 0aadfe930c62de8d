//! A worker's cache of recently opened tickets: the same cookie value opens once, then is
//! recognised by its bytes (a waiting client polls with one value many times).

use super::MAX_TICKET_LEN;
use super::{Keyring, Ticket, TicketError};

/// Tickets one worker opened recently, by their exact cookie value: a client polling its
/// place, or loading a page's assets on an admitted ticket, presents the same bytes again and
/// again, and opening them (base64, AES-GCM, JSON) costs more than the rest of its request.
///
/// Only an exact byte-for-byte match is answered from here, and the same bytes always open to
/// the same ticket, so the cache can never make a value open that would not open by itself.
/// It is direct-mapped (one entry per slot, replaced on collision), with a fixed size, and
/// belongs to one room and one keyring (a zone's, for the life of its configuration).
pub struct OpenCache {
    slots: Vec<Option<Cached>>,
}

struct Cached {
    value: Vec<u8>,
    ticket: Ticket,
}

impl OpenCache {
    /// A cache of `slots` entries (rounded up to a power of two, at least 1).
    pub fn new(slots: usize) -> OpenCache {
        let n = slots.max(1).next_power_of_two();
        OpenCache {
            slots: (0..n).map(|_| None).collect(),
        }
    }

    fn slot(&self, value: &[u8]) -> usize {
        // The value ends with the base64 of the GCM tag: random for every sealed ticket, so
        // its last bytes spread tickets over the slots at no cost. (A forged value that
        // collides only evicts an entry.)
        let tail = value.len().saturating_sub(8);
        let mut h = [0u8; 8];
        for (d, s) in h.iter_mut().zip(value.get(tail..).unwrap_or_default()) {
            *d = *s;
        }
        let h = u64::from_le_bytes(h).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> 32) as usize & (self.slots.len() - 1)
    }

    /// [`Keyring::open`], answered from the cache when these exact bytes opened before.
    pub fn open(
        &mut self,
        keys: &Keyring,
        value: &[u8],
        room: &str,
    ) -> Result<Ticket, TicketError> {
        if value.len() > MAX_TICKET_LEN {
            return Err(TicketError::TooLong { len: value.len() });
        }
        let i = self.slot(value);
        if let Some(Some(c)) = self.slots.get(i) {
            if c.value == value {
                return Ok(c.ticket);
            }
        }
        let ticket = keys.open(value, room)?;
        self.remember_at(i, value, ticket);
        Ok(ticket)
    }

    /// Remembers a value this worker just sealed, so its first return is a hit.
    pub fn remember(&mut self, value: &[u8], ticket: Ticket) {
        if value.len() <= MAX_TICKET_LEN {
            self.remember_at(self.slot(value), value, ticket);
        }
    }

    fn remember_at(&mut self, i: usize, value: &[u8], ticket: Ticket) {
        if let Some(slot) = self.slots.get_mut(i) {
            match slot {
                // Reuse the entry's buffer: tickets of one room have nearly the same length.
                Some(c) => {
                    c.value.clear();
                    c.value.extend_from_slice(value);
                    c.ticket = ticket;
                }
                None => {
                    *slot = Some(Cached {
                        value: value.to_vec(),
                        ticket,
                    })
                }
            }
        }
    }
}
