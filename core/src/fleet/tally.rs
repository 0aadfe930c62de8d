//! Counting a long line without a sighting per waiter ([S22]): arrival buckets, counted once
//! per epoch through the ticket.
//!
//! The waiting ticket already carries what a count needs: its arrival (the place) and when a
//! node last answered it (`last_seen`, written again at most once an epoch). So a node that
//! answers a waiting ticket not yet stamped in this epoch counts it once, in its arrival's
//! bucket and this epoch, takes it off the epoch it was stamped in before, and stamps it. The
//! next node the client asks (round robin or not) reads the stamp and does not count it again:
//! no node needs to remember the session, and Redis only adds numbers.
//!
//! The fleet keeps, per live epoch and bucket, how many sessions were last stamped there, and
//! per bucket the sum over the live epochs (`n`): the sessions of that arrival second seen
//! within the window. An epoch that leaves the window is taken off `n` whole, so a waiter who
//! stops polling leaves the count within a window, as a place unseen for `keep` leaves the
//! line. A waiter's position is the count of the older buckets, plus its share of its own by
//! arrival time within the bucket, plus one.
//!
//! Work: a node sends one number per (epoch, bucket) it touched since its last sync (at most
//! the buckets of the line, twice); the fleet adds them, and subtracts an expired epoch once.
//! Neither depends on how many wait.

use std::collections::BTreeMap;

mod counts;

pub use counts::{Counts, CountsView, Row};

use crate::redis::resp::Value;
use crate::redis::{server_error, ReplyError};
use crate::sync::STALE_INTERVALS;

/// [`Ledger`] in Redis (tally.lua): called by a synced node once an interval; checked against
/// the `Ledger` by core/tests/fleet_tally_script.rs on a real `redis-server`. Its constants
/// are these, in the preamble before `tally.lua`'s text (a node unheard of for
/// [`STALE_INTERVALS`] is gone from the fleet's reckoning of what its counts lack: its entry
/// is dropped).
pub const TALLY_SCRIPT: &str = crate::redis::lua_script!(include_str!("tally.lua"), {
    SLOTS = EPOCH_SLOTS,
    BATCH = BATCH,
    STALE = STALE_INTERVALS,
});
/// The script's keys after the room's prefix: six epoch slots (more than the live epochs), the
/// slots' epochs, places taken, waiters let in, their arrivals' spans, and when each node
/// last called.
pub const TALLY_KEYS: [&str; 11] = [
    "e0", "e1", "e2", "e3", "e4", "e5", "epochs", "placed", "let_in", "spans", "nodes",
];
/// The epoch slots: the first keys of [`TALLY_KEYS`] (the script's SLOTS).
pub const EPOCH_SLOTS: usize = 6;
const _: () = assert!(TALLY_KEYS.len() == EPOCH_SLOTS + 5);
/// Fields one `HSET` (pairs) or `HDEL` of the script writes back at most (its BATCH).
const BATCH: usize = 1000;

/// Width of an arrival bucket.
pub const BUCKET_MS: u64 = 1000;
/// Epochs a stamp stays counted after its own: a window of `WINDOW_EPOCHS` whole epochs and the
/// current one, `kept` to `kept` and a quarter when an epoch is a quarter of it.
pub const WINDOW_EPOCHS: u64 = 4;

/// The epochs and buckets of a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// Length of an epoch (ms): a quarter of how long a place is kept unseen
    /// ([`super::FleetConfig::kept_ms`]), so a waiter who stops polling leaves the counts as
    /// its place leaves the line. Tickets are renewed every quarter of `presence`, which is
    /// never longer: a renewal within the same epoch moves no count.
    pub epoch_ms: u64,
}

impl Clock {
    pub fn new(kept_ms: u64) -> Clock {
        Clock {
            epoch_ms: super::ticket_renew_ms(kept_ms),
        }
    }

    pub fn epoch(&self, ms: u64) -> u64 {
        ms / self.epoch_ms.max(1)
    }

    pub fn bucket(arrival_ms: u64) -> u64 {
        arrival_ms / BUCKET_MS
    }

    /// Whether a stamp of epoch `x` still counts at `now`.
    pub fn live(&self, x: u64, now: u64) -> bool {
        x.saturating_add(WINDOW_EPOCHS) >= self.epoch(now)
    }
}

/// One change of the fleet's counts: sessions of arrival bucket `bucket` last stamped in
/// epoch `epoch`, `delta` more (or fewer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delta {
    pub epoch: u64,
    pub bucket: u64,
    pub delta: i64,
}

/// What a node sends in a sync: the epoch deltas, and per bucket the places taken and the
/// waiters let in since its last sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TallyReport {
    pub deltas: Vec<Delta>,
    pub placed: Vec<(u64, u64)>,
    pub let_in: Vec<(u64, u64)>,
    /// Per bucket, the first and the last arrival (ms) of the places taken.
    pub spans: Vec<(u64, u64, u64)>,
}

/// Who calls, for what the counts lack: the node, its interval, and the fleet's clock (ms; 0:
/// the server's, as a node sends it: the nodes' clocks may differ, Redis's is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub node: u64,
    pub interval_ms: u64,
    pub fleet_now: u64,
}

/// What the fleet's counts lack as a call returns them: the let-ins of the other nodes since
/// their last calls. A node that calls once an interval reports an interval's let-ins at
/// once; until then the counts still hold them as waiting (on average half an interval of
/// every other node's, in a crowd's waves a few hundred places at the head).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Behind {
    /// The nodes calling (the caller and those that called within [`STALE_INTERVALS`]).
    pub nodes: u64,
    /// The other nodes' let-ins since their last calls, each at the pace of its last report
    /// (the let-ins it reported over the time since its call before), for the time since, at
    /// most an interval.
    pub let_ins: u64,
}

/// A node's last call, as the fleet keeps it: when, and the pace of its let-ins then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Call {
    at: u64,
    let_ins: u64,
    span_ms: u64,
}

impl Call {
    /// Its let-ins since, `now`: at most an interval's.
    fn since(&self, now: u64, interval_ms: u64) -> u64 {
        let gone = now.saturating_sub(self.at).min(interval_ms);
        let n = u128::from(self.let_ins) * u128::from(gone) / u128::from(self.span_ms.max(1));
        u64::try_from(n).unwrap_or(u64::MAX)
    }
}

/// A tally call's reply: the fleet's buckets, and what they lack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tallied {
    pub buckets: Vec<Bucket>,
    pub behind: Behind,
}

/// Adds `d` to `map[key]`, dropping the entry when it comes to zero (a count that went up and
/// down again is not sent, nor kept).
fn bump<K: Ord>(map: &mut BTreeMap<K, i64>, key: K, d: i64) {
    let e = map.entry(key);
    match e {
        std::collections::btree_map::Entry::Occupied(mut o) => {
            *o.get_mut() += d;
            if *o.get() == 0 {
                o.remove();
            }
        }
        std::collections::btree_map::Entry::Vacant(v) => {
            if d != 0 {
                v.insert(d);
            }
        }
    }
}

impl TallyReport {
    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty() && self.placed.is_empty() && self.let_in.is_empty()
    }

    /// The waiters let in that it reports (what the script sums for the node's pace).
    pub fn let_ins(&self) -> u64 {
        self.let_in.iter().map(|&(_, k)| k).sum()
    }

    /// The script's arguments after its keys (tally.lua's ARGV), for a call at `now`.
    pub fn args(&self, clock: &Clock, now: u64, ttl_ms: u64, by: &Caller) -> Vec<String> {
        let mut a = vec![
            now.to_string(),
            clock.epoch_ms.max(1).to_string(),
            WINDOW_EPOCHS.to_string(),
            ttl_ms.max(1).to_string(),
        ];
        for pairs in [&self.placed, &self.let_in] {
            a.push(pairs.len().to_string());
            for &(b, k) in pairs {
                a.extend([b.to_string(), k.to_string()]);
            }
        }
        a.push(self.deltas.len().to_string());
        for d in &self.deltas {
            a.extend([
                d.epoch.to_string(),
                d.bucket.to_string(),
                d.delta.to_string(),
            ]);
        }
        a.push(self.spans.len().to_string());
        for &(b, lo, hi) in &self.spans {
            a.extend([b.to_string(), lo.to_string(), hi.to_string()]);
        }
        a.extend([
            by.node.to_string(),
            by.interval_ms.max(1).to_string(),
            by.fleet_now.to_string(),
        ]);
        a
    }
}

/// The tally calls of one synced room (the script's keys share the room's hash tag, so a
/// Redis Cluster keeps them on the fleet's slot).
#[derive(Debug, Clone)]
pub struct TallyScript {
    pub sha: String,
    pub keys: Vec<String>,
}

impl TallyScript {
    pub fn new(prefix: &str, room: &str) -> TallyScript {
        TallyScript {
            sha: crate::redis::sha_of(TALLY_SCRIPT),
            keys: TALLY_KEYS
                .iter()
                .map(|k| format!("{prefix}:{{{room}}}:tally:{k}"))
                .collect(),
        }
    }

    pub fn load_command() -> Vec<u8> {
        crate::redis::load_command_of(TALLY_SCRIPT)
    }

    /// A call with a node's report, at `now` on the node's clock (the stamps' clock).
    pub fn call(
        &self,
        form: crate::redis::Form,
        r: &TallyReport,
        clock: &Clock,
        now: u64,
        ttl_ms: u64,
        by: &Caller,
    ) -> Vec<u8> {
        let mut cmd = crate::redis::script_call(form, &self.sha, TALLY_SCRIPT);
        cmd.arg(self.keys.len());
        for k in &self.keys {
            cmd.arg(k);
        }
        for a in r.args(clock, now, ttl_ms, by) {
            cmd.arg(a);
        }
        cmd.get_packed_command()
    }
}

/// The script's reply: what the counts lack, then the buckets whose count is above 0, by
/// bucket.
pub fn tally_reply(v: &Value) -> Result<Tallied, ReplyError> {
    if let Some(e) = server_error(v) {
        return Err(e);
    }
    let Value::Bulk(text) = v else {
        return Err(ReplyError::Shape("expected a string"));
    };
    let bad = ReplyError::Shape("the counts");
    let text = core::str::from_utf8(text).map_err(|_| bad.clone())?;
    let ints = text
        .split_ascii_whitespace()
        .map(|w| w.parse::<u64>().map_err(|_| bad.clone()))
        .collect::<Result<Vec<u64>, _>>()?;
    let ([nodes, let_ins], rows) = match ints.split_first_chunk::<2>() {
        Some((head, rows)) if rows.len() % 6 == 0 => (*head, rows),
        _ => return Err(bad),
    };
    Ok(Tallied {
        buckets: rows
            .chunks_exact(6)
            .map(|r| match *r {
                [bucket, waiting, placed, let_in, first, last] => {
                    Bucket::of(bucket, waiting, placed, let_in).spanning(first, last)
                }
                _ => Bucket::of(0, 0, 0, 0),
            })
            .collect(),
        behind: Behind { nodes, let_ins },
    })
}

/// A node's counts since its last sync.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    deltas: BTreeMap<(u64, u64), i64>,
    placed: BTreeMap<u64, u64>,
    let_in: BTreeMap<u64, u64>,
    spans: BTreeMap<u64, (u64, u64)>,
}

/// Widens the span of `bucket` in `map` to hold `lo..=hi`.
fn widen(map: &mut BTreeMap<u64, (u64, u64)>, bucket: u64, lo: u64, hi: u64) {
    let e = map.entry(bucket).or_insert((lo, hi));
    *e = (e.0.min(lo), e.1.max(hi));
}

impl Tally {
    /// A waiting ticket answered at `now`: its place's `arrival`, and the stamp it came with
    /// (`last_seen`; None: it takes its place now). Returns whether the ticket is to be
    /// stamped again (written with `last_seen = now`): it was not counted in this epoch yet.
    pub fn seen(&mut self, clock: &Clock, arrival: u64, stamp: Option<u64>, now: u64) -> bool {
        let e = clock.epoch(now);
        let bucket = Clock::bucket(arrival);
        if let Some(s) = stamp {
            let x = clock.epoch(s);
            if x >= e {
                return false;
            }
            if clock.live(x, now) {
                bump(&mut self.deltas, (x, bucket), -1);
            }
        } else {
            *self.placed.entry(bucket).or_insert(0) += 1;
            widen(&mut self.spans, bucket, arrival, arrival);
        }
        bump(&mut self.deltas, (e, bucket), 1);
        true
    }

    /// A waiting ticket leaves the line (admitted): taken off the epoch it was stamped in.
    pub fn left(&mut self, clock: &Clock, arrival: u64, stamp: u64, now: u64) {
        let x = clock.epoch(stamp);
        let bucket = Clock::bucket(arrival);
        if clock.live(x, now) {
            bump(&mut self.deltas, (x, bucket), -1);
        }
        *self.let_in.entry(bucket).or_insert(0) += 1;
    }

    /// What to send, and starts again.
    pub fn take(&mut self) -> TallyReport {
        TallyReport {
            deltas: std::mem::take(&mut self.deltas)
                .into_iter()
                .map(|((epoch, bucket), delta)| Delta {
                    epoch,
                    bucket,
                    delta,
                })
                .collect(),
            placed: std::mem::take(&mut self.placed).into_iter().collect(),
            let_in: std::mem::take(&mut self.let_in).into_iter().collect(),
            spans: std::mem::take(&mut self.spans)
                .into_iter()
                .map(|(b, (lo, hi))| (b, lo, hi))
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty() && self.placed.is_empty() && self.let_in.is_empty()
    }
}

/// The fleet's counts (what the script keeps, in Rust).
#[derive(Debug, Clone)]
pub struct Ledger {
    clock: Clock,
    /// Per live epoch and bucket: sessions last stamped there.
    by_epoch: BTreeMap<(u64, u64), i64>,
    /// Per bucket: the sum over the live epochs.
    n: BTreeMap<u64, i64>,
    /// Per bucket: places taken, and waiters let in, since the bucket began.
    placed: BTreeMap<u64, u64>,
    let_in: BTreeMap<u64, u64>,
    /// Per bucket: the first and last arrival of the places taken in it.
    spans: BTreeMap<u64, (u64, u64)>,
    /// Per node: its last call (the fleet's clock).
    calls: BTreeMap<u64, Call>,
}

impl Ledger {
    pub fn new(clock: Clock) -> Ledger {
        Ledger {
            clock,
            by_epoch: BTreeMap::new(),
            n: BTreeMap::new(),
            placed: BTreeMap::new(),
            let_in: BTreeMap::new(),
            spans: BTreeMap::new(),
            calls: BTreeMap::new(),
        }
    }

    /// A call by `by` that reported `let_ins`: kept, and what the counts lack for it (the
    /// script's first two numbers). Its pace is over the time since its last call (an
    /// interval, for its first). A node silent for [`STALE_INTERVALS`] is dropped.
    pub fn called(&mut self, by: &Caller, let_ins: u64) -> Behind {
        let (me, now, interval) = (by.node, by.fleet_now, by.interval_ms.max(1));
        let span_ms = match self.calls.get(&me) {
            Some(c) => now.saturating_sub(c.at).max(1),
            None => interval,
        };
        self.calls.insert(
            me,
            Call {
                at: now,
                let_ins,
                span_ms,
            },
        );
        self.calls
            .retain(|_, c| now.saturating_sub(c.at) <= STALE_INTERVALS * interval);
        let others = self.calls.iter().filter(|&(&n, _)| n != me);
        Behind {
            nodes: self.calls.len() as u64,
            let_ins: others.map(|(_, c)| c.since(now, interval)).sum(),
        }
    }

    /// Takes the epochs that left the window off the counts.
    pub fn roll(&mut self, now: u64) {
        while let Some((&(x, b), &c)) = self.by_epoch.first_key_value() {
            if self.clock.live(x, now) {
                break;
            }
            self.by_epoch.remove(&(x, b));
            bump(&mut self.n, b, -c);
        }
    }

    /// A node's deltas, at `now`. A delta to an epoch already out of the window is dropped:
    /// that epoch's sessions have left the counts already; so is one more than an epoch ahead
    /// of `now` (a clock far ahead: the script keeps six epochs at most).
    pub fn apply(&mut self, report: &TallyReport, now: u64) {
        self.roll(now);
        for &(b, k) in &report.placed {
            *self.placed.entry(b).or_insert(0) += k;
        }
        for &(b, k) in &report.let_in {
            *self.let_in.entry(b).or_insert(0) += k;
        }
        for &(b, lo, hi) in &report.spans {
            if lo <= hi {
                widen(&mut self.spans, b, lo, hi);
            }
        }
        let ahead = self.clock.epoch(now).saturating_add(1);
        for d in &report.deltas {
            if !self.clock.live(d.epoch, now) || d.epoch > ahead {
                continue;
            }
            bump(&mut self.by_epoch, (d.epoch, d.bucket), d.delta);
            bump(&mut self.n, d.bucket, d.delta);
        }
    }

    /// The counts by bucket, for the picture; `front` as [`Counts::new`] takes it.
    pub fn counts(&self, front: u64) -> Counts {
        Counts::new(self.buckets(), front)
    }

    /// The buckets as the script replies them.
    pub fn buckets(&self) -> Vec<Bucket> {
        let part = |m: &BTreeMap<u64, u64>, b: u64| m.get(&b).copied().unwrap_or(0);
        self.n
            .iter()
            .map(|(&b, &c)| {
                let (first, last) = self.spans.get(&b).copied().unwrap_or((0, 0));
                Bucket::of(
                    b,
                    u64::try_from(c).unwrap_or(0),
                    part(&self.placed, b),
                    part(&self.let_in, b),
                )
                .spanning(first, last)
            })
            .collect()
    }
}

/// One bucket of the picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub bucket: u64,
    /// Waiters counted in the window.
    pub waiting: u64,
    /// The part of the bucket's places already let in, in millionths: the line admits by
    /// arrival, so they were its first arrivals, and those waiting are after them.
    pub let_in_ppm: u64,
    /// The first and the last arrival (ms) of the places taken in it (0, 0: not known, the
    /// whole bucket). A crowd that comes within part of a second, or stops, fills part of it.
    pub first: u64,
    pub last: u64,
}

impl Bucket {
    /// From the fleet's sums: `waiting` counted, `placed` places taken and `let_in` waiters let
    /// in since the bucket began.
    pub fn of(bucket: u64, waiting: u64, placed: u64, let_in: u64) -> Bucket {
        Bucket {
            bucket,
            waiting,
            let_in_ppm: let_in.min(placed).saturating_mul(1_000_000) / placed.max(1),
            first: 0,
            last: 0,
        }
    }

    /// With the arrivals it holds: from `first` to `last` (ignored unless within the bucket,
    /// in order).
    pub fn spanning(self, first: u64, last: u64) -> Bucket {
        let (start, end) = (self.bucket * BUCKET_MS, (self.bucket + 1) * BUCKET_MS);
        if first > last || first < start || last >= end {
            return self;
        }
        Bucket {
            first,
            last,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 20_000; // presence: epochs of 5 s

    #[test]
    fn a_session_is_counted_once_per_epoch_wherever_it_polls() {
        let clock = Clock::new(P);
        let (mut a, mut b) = (Tally::default(), Tally::default());
        let mut ledger = Ledger::new(clock);
        // Takes its place on A at 1,000 (arrival 1,000), polls B at 2,000: not counted again.
        assert!(a.seen(&clock, 1_000, None, 1_000));
        assert!(!b.seen(&clock, 1_000, Some(1_000), 2_000));
        // Next epoch on B: moved from epoch 0 to 1.
        assert!(b.seen(&clock, 1_000, Some(1_000), 6_000));
        ledger.apply(&a.take(), 6_000);
        ledger.apply(&b.take(), 6_000);
        assert_eq!(ledger.counts(0).total(), 1);
        assert!(b.is_empty());
        // Admitted on A with the stamp of epoch 1: gone.
        a.left(&clock, 1_000, 6_000, 7_000);
        ledger.apply(&a.take(), 7_000);
        assert_eq!(ledger.counts(0).total(), 0);
    }

    #[test]
    fn a_waiter_who_stops_polling_leaves_with_its_epoch() {
        let clock = Clock::new(P);
        let mut t = Tally::default();
        let mut ledger = Ledger::new(clock);
        t.seen(&clock, 3_000, None, 3_000);
        ledger.apply(&t.take(), 3_000);
        // Epoch 0 counts through epoch 4 (to 25 s), not in epoch 5.
        ledger.roll(24_999);
        assert_eq!(ledger.counts(0).total(), 1);
        ledger.roll(25_000);
        assert_eq!(ledger.counts(0).total(), 0);
        // Coming back then is a new count (its old epoch is not touched).
        assert!(t.seen(&clock, 3_000, Some(3_000), 26_000));
        assert_eq!(
            t.take().deltas,
            vec![Delta {
                epoch: 5,
                bucket: 3,
                delta: 1
            }]
        );
    }

    #[test]
    fn the_picture_says_which_part_of_a_bucket_was_let_in() {
        let clock = Clock::new(P);
        let mut t = Tally::default();
        let mut ledger = Ledger::new(clock);
        for i in 0..4 {
            t.seen(&clock, 1_000 + 250 * i, None, 1_000 + 250 * i);
        }
        t.left(&clock, 1_000, 1_000, 2_000);
        ledger.apply(&t.take(), 2_000);
        let c = ledger.counts(0);
        assert_eq!((c.total(), c.position(1_250), c.position(1_500)), (3, 1, 2));
    }

    #[test]
    fn a_late_delta_to_an_expired_epoch_is_dropped() {
        let clock = Clock::new(P);
        let mut ledger = Ledger::new(clock);
        let mut t = Tally::default();
        t.seen(&clock, 1_000, None, 1_000);
        ledger.apply(&t.take(), 1_000);
        // A node that thought epoch 0 still live moves the session to epoch 5 after the fleet
        // dropped epoch 0: the session counts once.
        ledger.roll(25_000);
        let late = TallyReport {
            deltas: vec![
                Delta {
                    epoch: 0,
                    bucket: 1,
                    delta: -1,
                },
                Delta {
                    epoch: 5,
                    bucket: 1,
                    delta: 1,
                },
            ],
            ..TallyReport::default()
        };
        ledger.apply(&late, 25_001);
        assert_eq!(ledger.counts(0).total(), 1);
    }
}
