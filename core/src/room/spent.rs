//! Proofs of work spent ([S19], `challenge=pow`): a proof is accepted once; and admissions
//! the origin revoked ([S28]), whose tickets and tokens are refused when replayed. The node records
//! each proof it accepts, by its ticket (`challenge::spent_key`), until the ticket could take
//! its place without one (`challenge::spent_until`); the same proof again is then refused.
//!
//! A set-associative table like the flood table's: a set of `SPENT_WAYS` entries is scanned
//! whole, so one check costs the same whatever the room holds. A full set gives up the entry
//! that expires first: under a flood of proofs larger than the table, an old record may be
//! forgotten early, and a replay of that ticket gets what the ticket itself would (its own
//! place, one per session), never a second place.

use super::layout::{SpentEntry, FLOOD_WAYS};
use super::Room;
use crate::util::hash::{mix64, set_of};

/// Entries per set (the flood table's sets: the two tables are the same size).
const SPENT_WAYS: usize = FLOOD_WAYS;

impl<'m> Room<'m> {
    /// Records the proof of the ticket `key` as spent until `until` (unix ms). false: it was
    /// spent already (a replay), and nothing changes.
    pub fn spend_proof(&mut self, key: u64, until: u64, now: u64) -> bool {
        let key = key.max(1);
        let ways = self.spent_set(key);
        if ways.iter().any(|e| e.key == key && e.until > now) {
            return false;
        }
        // This ticket's old entry, else a free or expired one, else the one expiring first.
        let slot = ways.iter_mut().min_by_key(|e| match e.key {
            k if k == key => 0,
            0 => 1,
            _ if e.until <= now => 1,
            _ => e.until.saturating_add(2),
        });
        if let Some(e) = slot {
            *e = SpentEntry { key, until };
        }
        true
    }

    /// Forgets the proof of the ticket `key` (it was spent on a visit that gave no place:
    /// the client may use it again).
    pub fn unspend_proof(&mut self, key: u64) {
        let key = key.max(1);
        for e in self.spent_set(key).iter_mut().filter(|e| e.key == key) {
            e.key = 0;
        }
    }

    /// [S28] An admission the origin revoked (`X-Smart-Limit: revoke`): its ticket or token,
    /// replayed, is refused on this node until `until` (when it would have ended anyway). The
    /// record sits in this table beside the spent proofs, under a key no proof has.
    pub fn refuse_replays(&mut self, sid: u64, admitted_at: u64, until: u64, now: u64) {
        self.spend_proof(replay_key(sid, admitted_at), until, now);
    }

    /// Whether the admission of `sid` at `admitted_at` was revoked on this node.
    pub fn revoked(&mut self, sid: u64, admitted_at: u64, now: u64) -> bool {
        let key = replay_key(sid, admitted_at).max(1);
        self.spent_set(key)
            .iter()
            .any(|e| e.key == key && e.until > now)
    }

    /// The set of entries `key` is kept in.
    fn spent_set(&mut self, key: u64) -> &mut [SpentEntry] {
        set_of(self.spent, key, SPENT_WAYS)
    }
}

/// An admission's key among the spent proofs: the session and its admission time in seconds
/// (what a ticket and an admission token both say), mixed under a tag of its own. A session
/// let in again later (one place per user or invitation) has another admission time: its new
/// ticket passes.
fn replay_key(sid: u64, admitted_at: u64) -> u64 {
    const TAG: u64 = 0x7265_766f_6b65_6421; // "revoked!"
    mix64(sid ^ mix64((admitted_at / 1000) ^ TAG))
}
