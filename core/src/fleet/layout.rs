//! The node's block of shared memory (beside its room in the same zone): the header with the
//! last picture and this interval's share, and the tables of sightings kept for the next
//! report; how a block is formatted or attached again after a reload.

use core::mem::{align_of, size_of};

use super::flood::{self, Over, Taken};
use super::fresh::Fresh;
use super::parts::{Block, Counts, Draw, Metrics, Pending, Picture, Revoked, Share, Spent};
use super::parts::{Syncs, Tally};
use super::tally::Row;
use super::tally_zone::{TallyEntry, COUNT_SLOTS, TALLY_SLOTS};
use super::{FleetNode, NotAFleetNode};
use super::{Sample, Sighting, WaiterSighting, SAMPLE_SLOTS};

use crate::sync::leader::Leadership;

// "SLFLEET", version 20 (20: when the zone first synced; 19: the nodes whose report of its window the picture holds; 18: this node's recent places taken, those let in too; 17: this
// node's recent newcomers and part; 16: the picture's short
// line let in here; 15: when the last sync
// left; 14: the picture's rightful arrival; 13: the sessions revoked here; 11: in parts). A block is met only by the build that
// formatted it: a reload keeps the zone and the module already loaded, a binary upgrade or a
// restart formats new zones (docs/upgrade.md). One of another version is refused by `attach`,
// never misread: nginx then says the zone cannot be reused.
const MAGIC: u64 = 0x534c_464c_4545_5414;

/// The block's header: its parts, one per concern (`parts.rs`, `fresh.rs`), each changed by
/// the functions of its concern.
#[repr(C)]
pub(super) struct Header {
    pub(super) block: Block,
    pub(super) sync: Syncs,
    pub(super) pic: Picture,
    pub(super) share: Share,
    pub(super) draw: Draw,
    pub(super) pending: Pending,
    pub(super) metrics: Metrics,
    pub(super) fresh: Fresh,
    pub(super) spent: Spent,
    pub(super) revoked: Revoked,
    pub(super) tally: Tally,
    pub(super) counts: Counts,
    leadership: Leadership,
}

// The block is 8-aligned (`attach` checks it; the slab and the simulator give no more): so
// must every part be. And the parts leave no padding between them.
const _: () = assert!(align_of::<Header>() <= align_of::<u64>());
const _: () = assert!(
    size_of::<Header>()
        == size_of::<Block>()
            + size_of::<Syncs>()
            + size_of::<Picture>()
            + size_of::<Share>()
            + size_of::<Draw>()
            + size_of::<Pending>()
            + size_of::<Metrics>()
            + size_of::<Fresh>()
            + size_of::<Spent>()
            + size_of::<Revoked>()
            + size_of::<Tally>()
            + size_of::<Counts>()
            + size_of::<Leadership>()
);

/// A session reported recently (so it is not sent again too soon), and where its sighting
/// waits in the current batch (so a later sighting before the sync updates its time).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct Seen {
    pub(super) sid: u64,
    pub(super) sent_ms: u64,
    /// The batch generation (`Pending::batch_seq`) and index of the sighting.
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
            (*base).block = Block {
                magic: MAGIC,
                seen_len: (4 * batch) as u32,
                batch_len: batch as u32,
                node_id: node_id.max(1),
            };
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
        if hdr.block.magic != MAGIC {
            return Err(NotAFleetNode);
        }
        let (seen, batch) = (hdr.block.seen_len as usize, hdr.block.batch_len as usize);
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
        self.hdr.block.node_id
    }

    /// Whether the node has met the fleet (a picture, perhaps old).
    pub fn synced(&self) -> bool {
        self.hdr.pic.synced_at_ms != 0
    }

    // ------------------------------------------------------------------ the request path
}
