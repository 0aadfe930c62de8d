//! The node's block of shared memory (beside its room in the same zone): the header with the
//! last picture and this interval's share, and the tables of sightings kept for the next
//! report; how a block is formatted or attached again after a reload.

use core::mem::{align_of, size_of};

use super::flood::{self, Over, Taken};
use super::tally::Row;
use super::tally_zone::{TallyEntry, COUNT_SLOTS, TALLY_SLOTS};
use super::SPENT_REPORT_CAP;
use super::{FleetNode, NotAFleetNode};
use super::{Sample, Sighting, SpentProof, WaiterSighting, ENDS_CAP, FRESH_CAP, SAMPLE_SLOTS};

use crate::sync::leader::Leadership;

// "SLFLEET", version 11 (10 + what the counts lack: the other nodes' unreported let-ins)
const MAGIC: u64 = 0x534c_464c_4545_540b;
#[repr(C)]
pub(super) struct Header {
    magic: u64,
    seen_len: u32,
    batch_len: u32,
    pub(super) node_id: u64,
    /// The last sync sent (fencing: only its answer is applied).
    pub(super) seq: u64,
    /// The picture in force.
    pub(super) window_ms: u64,
    pub(super) synced_at_ms: u64,
    pub(super) fleet_active: u64,
    pub(super) queue_len: u64,
    pub(super) cursor: u64,
    pub(super) quota_left: u64,
    pub(super) quota: u64,
    pub(super) nodes: u64,
    pub(super) free: u64,
    pub(super) expiring: u64,
    pub(super) leaving: u64,
    pub(super) samples_len: u64,
    /// 1: the samples are the whole line, each with its session (positions are exact).
    pub(super) samples_exact: u64,
    /// Places taken here since the picture came (against `max_line`).
    pub(super) taken: u64,
    /// Ranks of the picture's line let in since it came, as the node guesses without Redis
    /// (positions shown are that much nearer the head), and the fraction of a place an old
    /// picture's share left over (thousandths).
    pub(super) aged_ranks: u64,
    pub(super) age_carry: u64,
    /// The window the pool was found empty in (no more draws until the next picture).
    pub(super) pool_empty_window: u64,
    /// Clients whose turn it was, turned away for want of a place since the last draw, and
    /// the oldest arrival among them (0: none).
    pub(super) want: u64,
    pub(super) want_oldest: u64,
    /// The oldest arrival the draw in flight is for, and the oldest a draw came back short
    /// for since the picture came (0: none): with the pool found empty, only a client who
    /// arrived before it is worth another draw (the starved mark, see
    /// [`FleetNode::take_draw`]).
    pub(super) draw_oldest: u64,
    pub(super) told_oldest: u64,
    /// When the draw in flight was sent (0: none).
    pub(super) draw_since: u64,
    /// The last window a tick (re)granted the quota in.
    pub(super) granted_window: u64,
    /// Since the last report.
    pub(super) polls: u64,
    pub(super) n_active: u64,
    pub(super) n_admitted: u64,
    pub(super) n_waiters: u64,
    /// Newcomers that took a place here, and challenges given here, since the last report
    /// (the fleet's pressure).
    pub(super) n_asked: u64,
    pub(super) n_challenged: u64,
    /// The picture's pressure: 1 + its doublings (0: no picture yet).
    pub(super) pressure: u64,
    /// Bumped when the batches are taken (entries of the sent table point into one batch).
    pub(super) batch_seq: u32,
    /// What a poll of a client whose turn it is weighs in `polls` (a poll of any other
    /// waiter weighs 1): the line's length over the ranks the cursor passed, from the last
    /// picture (0, as in a zone laid out before it existed, counts as 1).
    pub(super) turn_weight: u32,
    /// Cumulative, for metrics.
    pub(super) admitted: u64,
    pub(super) draws: u64,
    pub(super) draws_granted: u64,
    pub(super) dropped: u64,
    pub(super) syncs: u64,
    pub(super) sync_failures: u64,
    /// When a sync left while the node had no picture (0: none out). Requests that need a
    /// decision wait for it rather than decide alone ([S21]).
    pub(super) first_sync_ms: u64,
    /// The arrivals of the places taken here that the picture cannot show (taken since its
    /// report), sorted, the first [`FRESH_CAP`] of them: a newcomer's rank behind the line.
    pub(super) fresh_len: u64,
    pub(super) fresh: [u64; FRESH_CAP],
    /// Proofs of work spent here since the last report (until when).
    pub(super) spent_len: u64,
    pub(super) spent: [SpentProof; SPENT_REPORT_CAP],
    /// The places of the picture's quota that are expiring sessions' (its `held`: 0 when none,
    /// or when an outage's share replaced the picture's) and when those sessions' windows end
    /// (the node's clock, ms, ascending; up to [`ENDS_CAP`] of them, evenly by rank): the node
    /// takes each only once it has ended (`held_back`).
    pub(super) expiring_held: u64,
    pub(super) ends_len: u64,
    pub(super) ends: [u64; ENDS_CAP],
    /// The arrival-bucket tally ([S22], `tally_zone.rs`): entries of the tally table in use,
    /// changes dropped for want of room in it (cumulative), and whether a tally call is out.
    pub(super) tally_len: u64,
    pub(super) tally_dropped: u64,
    /// The counts the last tally call brought: rows, when they were settled (0: none), and
    /// the fleet's arrivals a second then.
    pub(super) counts_len: u64,
    pub(super) counts_at: u64,
    pub(super) counts_per_s: u64,
    /// What the counts lacked as they came ([`super::tally::Behind`]): the other nodes'
    /// let-ins since their last calls.
    pub(super) counts_unreported: u64,
    leadership: Leadership,
}

impl Header {
    /// A spent proof kept for the next report (none past [`SPENT_REPORT_CAP`]).
    pub(super) fn keep_spent(&mut self, p: SpentProof) {
        if let Some(slot) = self.spent.get_mut(self.spent_len as usize) {
            *slot = p;
            self.spent_len += 1;
        }
    }
}

/// A session reported recently (so it is not sent again too soon), and where its sighting
/// waits in the current batch (so a later sighting before the sync updates its time).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct Seen {
    pub(super) sid: u64,
    pub(super) sent_ms: u64,
    /// The batch generation (`Header::batch_seq`) and index of the sighting.
    pub(super) batch: u32,
    pub(super) slot: u32,
}

/// A sighting of `key`: new (to be put in the batch; the index of its entry in the sent
/// table), or recent (already in a batch: the entry, to refresh the time there).
pub(super) enum Sight {
    New(Option<usize>),
    Recent(usize),
}

/// Puts a sighting in its batch (`new`), or refreshes the time of the one already there.
/// False when a new one found the batch full.
pub(super) fn record<T>(
    seen: Option<&mut Seen>,
    batch_seq: u32,
    list: &mut [T],
    n: &mut u64,
    new: bool,
    entry: T,
    same: impl Fn(&T) -> bool,
) -> bool {
    if !new {
        // Only within the batch's live part: entries past it were sent (a capped report takes
        // the batch's tail).
        if let Some(e) = seen.filter(|e| e.batch == batch_seq && u64::from(e.slot) < *n) {
            if let Some(old) = list.get_mut(e.slot as usize).filter(|old| same(old)) {
                *old = entry;
            }
        }
        return true;
    }
    let ix = *n as usize;
    let Some(slot) = list.get_mut(ix) else {
        return false;
    };
    *slot = entry;
    *n += 1;
    if let Some(e) = seen {
        e.batch = batch_seq;
        e.slot = ix as u32;
    }
    true
}

fn round8(n: usize) -> usize {
    (n + 7) & !7
}

struct Layout {
    pub(super) samples: usize,
    pub(super) tally: usize,
    pub(super) counts: usize,
    pub(super) seen: usize,
    pub(super) active: usize,
    pub(super) admitted: usize,
    pub(super) waiters: usize,
    /// Flood control's tables, after the batches (their lengths follow from the batch's).
    pub(super) flood_taken: usize,
    pub(super) flood_over: usize,
    pub(super) end: usize,
}

fn layout(seen: usize, batch: usize) -> Layout {
    let samples = round8(size_of::<Header>());
    let tally = samples + SAMPLE_SLOTS * size_of::<Sample>();
    let counts = tally + TALLY_SLOTS * size_of::<TallyEntry>();
    let seen_at = counts + COUNT_SLOTS * size_of::<Row>();
    let active = seen_at + seen * size_of::<Seen>();
    let admitted = active + batch * size_of::<Sighting>();
    let waiters = admitted + batch * size_of::<Sighting>();
    let (n_taken, n_over) = flood::table_lens(batch);
    let flood_taken = waiters + batch * size_of::<WaiterSighting>();
    let flood_over = flood_taken + n_taken * size_of::<Taken>();
    let end = flood_over + n_over * size_of::<Over>();
    Layout {
        samples,
        tally,
        counts,
        seen: seen_at,
        active,
        admitted,
        waiters,
        flood_taken,
        flood_over,
        end,
    }
}

/// Keys of active sightings differ from waiting ones in the sent table.
pub(super) const ACTIVE_TAG: u64 = 0xA5A5_0000_0000_A5A5;

impl<'m> FleetNode<'m> {
    /// Writes an empty node into `mem` (a sessions table of 4 entries per batch entry).
    pub fn format(mem: &'m mut [u8], node_id: u64) -> Result<FleetNode<'m>, NotAFleetNode> {
        if !(mem.as_ptr() as usize).is_multiple_of(align_of::<u64>()) {
            return Err(NotAFleetNode);
        }
        // (The flood tables: at most one entry of each per batch entry and a quarter, beyond
        // the smallest tables that layout(0, 0) counts already.)
        let per = 4 * size_of::<Seen>()
            + 2 * size_of::<Sighting>()
            + size_of::<WaiterSighting>()
            + size_of::<Taken>()
            + size_of::<Over>().div_ceil(4);
        let room = mem.len().saturating_sub(layout(0, 0).end);
        let batch = (room / per).min(1 << 20);
        if batch < 16 {
            return Err(NotAFleetNode);
        }
        mem.fill(0);
        let base = mem.as_mut_ptr() as *mut Header;
        // SAFETY: aligned, large enough (layout(0,0).end <= len), Header is plain old data
        // but for the atomics of Leadership, which are valid all-zero too.
        unsafe {
            (*base).magic = MAGIC;
            (*base).seen_len = (4 * batch) as u32;
            (*base).batch_len = batch as u32;
            (*base).node_id = node_id.max(1);
        }
        let node = FleetNode::attach(mem)?;
        node.hdr.leadership = Leadership::new();
        Ok(node)
    }

    pub fn attach(mem: &'m mut [u8]) -> Result<FleetNode<'m>, NotAFleetNode> {
        if mem.len() < size_of::<Header>()
            || !(mem.as_ptr() as usize).is_multiple_of(align_of::<u64>())
        {
            return Err(NotAFleetNode);
        }
        let base = mem.as_mut_ptr();
        // SAFETY: size and alignment checked; every bit pattern is a valid Header.
        let hdr = unsafe { &mut *(base as *mut Header) };
        if hdr.magic != MAGIC {
            return Err(NotAFleetNode);
        }
        let (seen, batch) = (hdr.seen_len as usize, hdr.batch_len as usize);
        let l = layout(seen, batch);
        if l.end > mem.len() {
            return Err(NotAFleetNode);
        }
        let (n_taken, n_over) = flood::table_lens(batch);
        // SAFETY: disjoint regions inside `mem`, 8-aligned, plain old data.
        unsafe {
            Ok(FleetNode {
                samples: core::slice::from_raw_parts_mut(base.add(l.samples).cast(), SAMPLE_SLOTS),
                tally: core::slice::from_raw_parts_mut(base.add(l.tally).cast(), TALLY_SLOTS),
                counts: core::slice::from_raw_parts_mut(base.add(l.counts).cast(), COUNT_SLOTS),
                seen: core::slice::from_raw_parts_mut(base.add(l.seen).cast(), seen),
                active: core::slice::from_raw_parts_mut(base.add(l.active).cast(), batch),
                admitted: core::slice::from_raw_parts_mut(base.add(l.admitted).cast(), batch),
                waiters: core::slice::from_raw_parts_mut(base.add(l.waiters).cast(), batch),
                flood_taken: core::slice::from_raw_parts_mut(
                    base.add(l.flood_taken).cast(),
                    n_taken,
                ),
                flood_over: core::slice::from_raw_parts_mut(base.add(l.flood_over).cast(), n_over),
                hdr,
            })
        }
    }

    pub fn leadership(&self) -> &Leadership {
        &self.hdr.leadership
    }

    pub fn node_id(&self) -> u64 {
        self.hdr.node_id
    }

    /// Whether the node has met the fleet (a picture, perhaps old).
    pub fn synced(&self) -> bool {
        self.hdr.synced_at_ms != 0
    }

    // ------------------------------------------------------------------ the request path
}
