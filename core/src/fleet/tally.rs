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
//! stops polling leaves the count within a window, as a place unseen for `presence` leaves the
//! line. A waiter's position is the count of the older buckets, plus its share of its own by
//! arrival time within the bucket, plus one.
//!
//! Work: a node sends one number per (epoch, bucket) it touched since its last sync (at most
//! the buckets of the line, twice); the fleet adds them, and subtracts an expired epoch once.
//! Neither depends on how many wait.

use std::collections::BTreeMap;

use crate::redis::resp::Value;
use crate::redis::{server_error, ReplyError};

/// [`Ledger`] in Redis (tally.lua): not called by the module yet; checked against the
/// `Ledger` by core/tests/fleet_tally_script.rs on a real `redis-server`.
pub const TALLY_SCRIPT: &str = include_str!("tally.lua");
/// The script's keys after the room's prefix: six epoch slots (more than the live epochs), the
/// slots' epochs, places taken, waiters let in.
pub const TALLY_KEYS: [&str; 9] = [
    "e0", "e1", "e2", "e3", "e4", "e5", "epochs", "placed", "let_in",
];

/// Width of an arrival bucket.
pub const BUCKET_MS: u64 = 1000;
/// Epochs a stamp stays counted after its own: a window of `WINDOW_EPOCHS` whole epochs and the
/// current one, `presence` to `presence` and a quarter when an epoch is a quarter of it.
pub const WINDOW_EPOCHS: u64 = 4;

/// The epochs and buckets of a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// Length of an epoch (ms): a quarter of `presence`, the ticket's renewal.
    pub epoch_ms: u64,
}

impl Clock {
    pub fn new(presence_ms: u64) -> Clock {
        Clock {
            epoch_ms: super::ticket_renew_ms(presence_ms),
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
    /// The script's arguments after its keys (tally.lua's ARGV), for a call at `now`.
    pub fn args(&self, clock: &Clock, now: u64, ttl_ms: u64) -> Vec<String> {
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
        a
    }
}

/// The script's reply: the buckets whose count is above 0, by bucket.
pub fn tally_reply(v: &Value) -> Result<Vec<Bucket>, ReplyError> {
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
    if ints.len() % 4 != 0 {
        return Err(bad);
    }
    Ok(ints
        .chunks_exact(4)
        .map(|r| match *r {
            [bucket, waiting, placed, let_in] => Bucket::of(bucket, waiting, placed, let_in),
            _ => Bucket::of(0, 0, 0, 0),
        })
        .collect())
}

/// A node's counts since its last sync.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    deltas: BTreeMap<(u64, u64), i64>,
    placed: BTreeMap<u64, u64>,
    let_in: BTreeMap<u64, u64>,
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
}

impl Ledger {
    pub fn new(clock: Clock) -> Ledger {
        Ledger {
            clock,
            by_epoch: BTreeMap::new(),
            n: BTreeMap::new(),
            placed: BTreeMap::new(),
            let_in: BTreeMap::new(),
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
        let part = |m: &BTreeMap<u64, u64>, b: u64| m.get(&b).copied().unwrap_or(0);
        Counts::new(
            self.n.iter().map(|(&b, &c)| {
                Bucket::of(
                    b,
                    u64::try_from(c).unwrap_or(0),
                    part(&self.placed, b),
                    part(&self.let_in, b),
                )
            }),
            front,
        )
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
}

impl Bucket {
    /// From the fleet's sums: `waiting` counted, `placed` places taken and `let_in` waiters let
    /// in since the bucket began.
    pub fn of(bucket: u64, waiting: u64, placed: u64, let_in: u64) -> Bucket {
        Bucket {
            bucket,
            waiting,
            let_in_ppm: let_in.min(placed).saturating_mul(1_000_000) / placed.max(1),
        }
    }
}

/// The fleet's counts as a node holds them: buckets in order with the sum before each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// (bucket, sessions waiting in it, from when in it they wait (ms), sessions in the
    /// buckets before it), by bucket.
    rows: Vec<(u64, u64, u64, u64)>,
}

impl Counts {
    /// From (bucket, count) pairs in bucket order, and the arrival of the line's head (0:
    /// unknown). Buckets older than the head's are left out: their counts are sessions let in
    /// or gone that the window still holds.
    pub fn new(buckets: impl IntoIterator<Item = Bucket>, front: u64) -> Counts {
        let mut before = 0u64;
        let first = Clock::bucket(front);
        let rows = buckets
            .into_iter()
            .filter(|k| k.waiting > 0 && k.bucket >= first)
            .map(|k| {
                let start = k.bucket * BUCKET_MS;
                let from = (start + BUCKET_MS * k.let_in_ppm.min(999_999) / 1_000_000).max(front);
                let row = (k.bucket, k.waiting, from, before);
                before = before.saturating_add(k.waiting);
                row
            })
            .collect();
        Counts { rows }
    }

    /// Everyone counted.
    pub fn total(&self) -> u64 {
        self.rows.last().map_or(0, |&(_, c, _, before)| before + c)
    }

    /// The position of a waiter who arrived at `arrival`: everyone in older buckets, and the
    /// part of its own bucket that arrived before it (arrivals taken as even within it), + 1.
    pub fn position(&self, arrival: u64) -> u64 {
        let b = Clock::bucket(arrival);
        let i = self.rows.partition_point(|&(x, _, _, _)| x < b);
        let Some(&(x, c, from, before)) = self.rows.get(i) else {
            return self.total() + 1;
        };
        if x != b {
            return before + 1;
        }
        let span = ((b + 1) * BUCKET_MS).saturating_sub(from);
        let into = arrival.saturating_sub(from);
        before + c.saturating_mul(into) / span.max(1) + 1
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
    fn positions_count_older_buckets_and_a_share_of_their_own() {
        let c = Counts::new([at(10, 100, 0), at(11, 50, 0), at(13, 10, 0)], 0);
        assert_eq!(c.total(), 160);
        assert_eq!(c.position(9_999), 1);
        assert_eq!(c.position(10_000), 1);
        assert_eq!(c.position(10_500), 51);
        assert_eq!(c.position(11_000), 101);
        assert_eq!(c.position(12_400), 151);
        assert_eq!(c.position(13_999), 160);
        assert_eq!(c.position(20_000), 161);
        // The head arrived at 10,600: bucket 9 is left out, bucket 10's 100 are in its last
        // 400 ms.
        let c = Counts::new([at(9, 7, 0), at(10, 100, 0), at(11, 50, 0)], 10_600);
        assert_eq!(c.total(), 150);
        assert_eq!(c.position(10_600), 1);
        assert_eq!(c.position(10_800), 51);
        assert_eq!(c.position(11_000), 101);
        // A quarter of bucket 11's places were let in: its 50 wait in its last 750 ms; one of
        // its first quarter still waiting counts as the bucket's first.
        let c = Counts::new([at(10, 100, 0), at(11, 50, 250_000)], 0);
        assert_eq!(c.position(11_100), 101);
        assert_eq!(c.position(11_250), 101);
        assert_eq!(c.position(11_625), 126);
    }

    fn at(bucket: u64, waiting: u64, let_in_ppm: u64) -> Bucket {
        Bucket {
            bucket,
            waiting,
            let_in_ppm,
        }
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
