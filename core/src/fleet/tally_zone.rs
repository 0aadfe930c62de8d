//! The node's side of the arrival-bucket counts ([S22], `tally.rs`), in its block of shared
//! memory: what it counted since its last tally call (a small hash table of (epoch, bucket)
//! changes, places taken and waiters let in per bucket), and the counts that call brought,
//! which answer positions in a line too long for the picture to carry whole.
//!
//! Work under the lock: a probe of at most [`PROBES`] entries per change; taking the table
//! for a call walks its [`TALLY_SLOTS`] entries once; the counts are written once per call.

use super::tally::{Clock, Counts, CountsView, Delta, Tallied, Tally, TallyReport};
use super::{FleetConfig, FleetNode};

/// Entries of the tally table: changes (epoch, bucket) a node makes in an interval are at most
/// twice the seconds the line's arrivals span, and a few places taken and let in; at most
/// three quarters of the slots are used, so an interval's tally holds a line that arrived over
/// about six minutes (as far as the counts' script stays within 5 % of a Redis core on ten
/// nodes: docs/fleet.md). Past that a change is dropped (and counted).
pub const TALLY_SLOTS: usize = 1024;
const TALLY_MAX: u64 = (TALLY_SLOTS as u64) * 3 / 4;
/// Entries probed for a change's slot at most.
const PROBES: usize = 16;
/// Buckets of counts a node keeps (about 17 minutes of arrivals); a line that arrived over
/// longer keeps its oldest buckets, and those who arrived after them are told the positions
/// behind them.
pub const COUNT_SLOTS: usize = 1024;

/// Kinds of an entry; 0 is an empty slot. The first three add up; a span's ends keep the
/// least and the most.
const DELTA: u64 = 1;
const PLACED: u64 = 2;
const LET_IN: u64 = 3;
const FIRST: u64 = 4;
const LAST: u64 = 5;

/// One entry of the tally table.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TallyEntry {
    kind: u64,
    epoch: u64,
    bucket: u64,
    value: i64,
}

impl FleetNode<'_> {
    /// A waiting ticket written again at `now` (see [`Tally::seen`]): its place's `arrival`,
    /// and the stamp it came with (None: it takes its place now). Its count moves to this
    /// epoch. False when the table had no room (nothing counted; the ticket is counted at
    /// its next stamp).
    pub fn tally_seen(
        &mut self,
        cfg: &FleetConfig,
        arrival: u64,
        stamp: Option<u64>,
        now: u64,
    ) -> bool {
        let clock = Clock::new(cfg.kept_ms());
        let mut t = Tally::default();
        if !t.seen(&clock, arrival, stamp, now) {
            return true;
        }
        self.add_all(&t.take())
    }

    /// A waiting ticket of `arrival`, stamped at `stamp`, let in at `now` ([`Tally::left`]).
    pub fn tally_left(&mut self, cfg: &FleetConfig, arrival: u64, stamp: u64, now: u64) -> bool {
        let clock = Clock::new(cfg.kept_ms());
        let mut t = Tally::default();
        t.left(&clock, arrival, stamp, now);
        self.add_all(&t.take())
    }

    /// What the node counted since its last tally call, for the next one; the table empties.
    pub fn take_tally(&mut self) -> TallyReport {
        let mut r = TallyReport::default();
        let mut spans = std::collections::BTreeMap::<u64, (u64, u64)>::new();
        for e in self.tally.iter_mut() {
            match e.kind {
                DELTA if e.value != 0 => r.deltas.push(Delta {
                    epoch: e.epoch,
                    bucket: e.bucket,
                    delta: e.value,
                }),
                PLACED if e.value > 0 => r.placed.push((e.bucket, e.value as u64)),
                LET_IN if e.value > 0 => r.let_in.push((e.bucket, e.value as u64)),
                FIRST => spans.entry(e.bucket).or_insert((u64::MAX, 0)).0 = e.value as u64,
                LAST => spans.entry(e.bucket).or_insert((u64::MAX, 0)).1 = e.value as u64,
                _ => {}
            }
            *e = TallyEntry::default();
        }
        self.hdr.tally.len = 0;
        r.spans = spans
            .into_iter()
            .filter(|&(_, (lo, hi))| lo <= hi)
            .map(|(b, (lo, hi))| (b, lo, hi))
            .collect();
        r.deltas.sort_unstable_by_key(|d| (d.epoch, d.bucket));
        r.placed.sort_unstable();
        r.let_in.sort_unstable();
        r
    }

    /// A report whose call failed: counted again for the next.
    pub fn give_back_tally(&mut self, r: &TallyReport) {
        let _ = self.add_all(r);
    }

    /// The fleet's buckets from a tally call, settled at `now` ([`Counts::settled`]: over an
    /// interval, the time every node takes to report an arrival), and what they lack; the
    /// line's head is the picture's.
    pub fn set_counts(&mut self, t: Tallied, now: u64, cfg: &FleetConfig) {
        let front = self.line().first().map_or(0, |s| s.arrival);
        let c = Counts::settled(t.buckets, front, now, cfg.interval_ms);
        let n = c.rows().len().min(self.counts.len());
        for (slot, row) in self.counts.iter_mut().zip(c.rows()) {
            *slot = *row;
        }
        let counts = &mut self.hdr.counts;
        counts.len = n as u64;
        counts.at = c.at();
        counts.per_s = c.per_s();
        counts.unreported = t.behind.let_ins;
    }

    /// The counts, once a tally call brought some.
    pub fn counts(&self) -> Option<CountsView<'_>> {
        let kept = &self.hdr.counts;
        let rows = self.counts.get(..kept.len as usize)?;
        (!rows.is_empty()).then_some(CountsView {
            rows,
            at: kept.at,
            per_s: kept.per_s,
        })
    }

    /// Whether a tally call is worth its while with nothing counted: the line is too long to
    /// come whole, so its positions come from the counts, which change as others count.
    pub fn counts_wanted(&self) -> bool {
        self.hdr.pic.samples_exact == 0 && self.hdr.pic.queue_len > 0
    }

    /// Changes the table dropped for want of room, since the zone began.
    pub fn tally_dropped(&self) -> u64 {
        self.hdr.tally.dropped
    }

    /// All of a report's counts, or none (the table had no room for one of them); then its
    /// spans, where there is room (a span missed is the whole bucket's).
    fn add_all(&mut self, r: &TallyReport) -> bool {
        let mut done: Vec<(u64, u64, u64, i64)> = Vec::new();
        let all = r
            .deltas
            .iter()
            .map(|d| (DELTA, d.epoch, d.bucket, d.delta))
            .chain(r.placed.iter().map(|&(b, k)| (PLACED, 0, b, k as i64)))
            .chain(r.let_in.iter().map(|&(b, k)| (LET_IN, 0, b, k as i64)));
        for (kind, epoch, bucket, value) in all {
            if self.add(kind, epoch, bucket, value) {
                done.push((kind, epoch, bucket, value));
            } else {
                for (kind, epoch, bucket, value) in done {
                    self.add(kind, epoch, bucket, -value);
                }
                self.hdr.tally.dropped += 1;
                return false;
            }
        }
        for &(b, lo, hi) in &r.spans {
            let ends = [(FIRST, lo), (LAST, hi)];
            for (kind, at) in ends {
                self.add(kind, 0, b, i64::try_from(at).unwrap_or(i64::MAX));
            }
        }
        true
    }

    /// Adds `value` to the entry of (kind, epoch, bucket), taking an empty slot for it if
    /// there is none yet; false when none is within reach.
    fn add(&mut self, kind: u64, epoch: u64, bucket: u64, value: i64) -> bool {
        let len = self.tally.len();
        if len == 0 {
            return false;
        }
        let h = (epoch.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ bucket.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ kind)
            .rotate_left(29) as usize;
        for i in 0..PROBES {
            let Some(e) = self.tally.get_mut((h + i) % len) else {
                return false;
            };
            if e.kind == kind && e.epoch == epoch && e.bucket == bucket {
                e.value = match kind {
                    FIRST => e.value.min(value),
                    LAST => e.value.max(value),
                    _ => e.value.saturating_add(value),
                };
                return true;
            }
            if e.kind == 0 {
                if self.hdr.tally.len >= TALLY_MAX {
                    return false;
                }
                *e = TallyEntry {
                    kind,
                    epoch,
                    bucket,
                    value,
                };
                self.hdr.tally.len += 1;
                return true;
            }
        }
        false
    }
}
