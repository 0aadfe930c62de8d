//! The fleet's counts as a node answers from them: the buckets in order, each with the sum of
//! the buckets before it, so a position is one binary search.
//!
//! The newest arrivals are not all counted yet when the counts come: each node reports what
//! it counted once an interval, so the arrivals of the last interval reached the fleet only
//! from the nodes that synced since. Counted as they stand, a newcomer would not count those
//! who came in the same second before it (at a million arriving in a minute, tens of
//! thousands: the simulator's p99 error was 6 %). So the counts are *settled* at the moment
//! they were taken: each bucket of the last `settle_ms` counts at least the fleet's recent
//! pace of arrivals (from the buckets before it, which every node has reported), and an
//! arrival after that moment stands behind everyone counted, plus that pace since.

use super::{Bucket, Clock, BUCKET_MS};

/// Complete buckets the pace of arrivals is taken over.
const PACE_BUCKETS: u64 = 5;

/// One bucket of the counts: its sessions waiting, over which arrivals (ms) they are spread,
/// from the first still waiting (a bucket's first arrivals are let in first) to just past the
/// last, and the sessions of the buckets before it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Row {
    pub bucket: u64,
    pub waiting: u64,
    pub from: u64,
    pub to: u64,
    pub before: u64,
}

/// The fleet's counts as a node holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    rows: Vec<Row>,
    /// When they were taken (0: not settled), and the fleet's arrivals a second then.
    at: u64,
    per_s: u64,
}

/// Counts borrowed from wherever they are kept (the zone keeps its rows in shared memory).
#[derive(Debug, Clone, Copy)]
pub struct CountsView<'a> {
    pub rows: &'a [Row],
    pub at: u64,
    pub per_s: u64,
}

impl Counts {
    /// From the fleet's buckets in bucket order, and the arrival of the line's head (0:
    /// unknown). Buckets older than the head's are left out: their counts are sessions let in
    /// or gone that the window still holds.
    pub fn new(buckets: impl IntoIterator<Item = Bucket>, front: u64) -> Counts {
        let first = Clock::bucket(front);
        let mut rows: Vec<Row> = buckets
            .into_iter()
            .filter(|k| k.waiting > 0 && k.bucket >= first)
            .map(|k| {
                // The arrivals the bucket's places came at: the whole bucket when not known.
                let (first, end) = match (k.first, k.last) {
                    (0, 0) => (k.bucket * BUCKET_MS, (k.bucket + 1) * BUCKET_MS),
                    (first, last) => (first, last + 1),
                };
                let let_in = (end - first) * k.let_in_ppm.min(999_999) / 1_000_000;
                let from = (first + let_in).max(front).min(end - 1);
                Row {
                    bucket: k.bucket,
                    waiting: k.waiting,
                    from,
                    to: end,
                    before: 0,
                }
            })
            .collect();
        sum_before(&mut rows);
        Counts {
            rows,
            at: 0,
            per_s: 0,
        }
    }

    /// The same, settled at `at` (see the module's comment): the buckets that ended more than
    /// `settle_ms` before it are complete; the later ones count at least the pace of the
    /// complete ones before them.
    pub fn settled(
        buckets: impl IntoIterator<Item = Bucket>,
        front: u64,
        at: u64,
        settle_ms: u64,
    ) -> Counts {
        let mut c = Counts::new(buckets, front);
        let cut = Clock::bucket(at.saturating_sub(settle_ms));
        let split = c.rows.partition_point(|r| r.bucket < cut);
        // The pace: the complete buckets before the cut, after the head's (partly let in).
        let lo = cut
            .saturating_sub(PACE_BUCKETS)
            .max(Clock::bucket(front) + 1);
        let complete = c.rows.get(..split).unwrap_or_default();
        let counted: u64 = complete
            .iter()
            .filter(|r| r.bucket >= lo)
            .map(|r| r.waiting)
            .sum();
        let per_s = match cut.saturating_sub(lo) {
            0 => 0,
            secs => counted / secs,
        };
        if per_s > 0 {
            let recent = c.rows.split_off(split);
            let mut recent = recent.into_iter().peekable();
            for b in cut..=Clock::bucket(at) {
                let start = (b * BUCKET_MS).max(front);
                let end = ((b + 1) * BUCKET_MS).min(at);
                let est = per_s * end.saturating_sub(start) / BUCKET_MS;
                let row = match recent.next_if(|r| r.bucket == b) {
                    Some(r) if est > r.waiting => Row {
                        waiting: est,
                        to: r.to.max(end),
                        ..r
                    },
                    Some(r) => r,
                    None if est > 0 => Row {
                        bucket: b,
                        waiting: est,
                        from: start,
                        to: end,
                        before: 0,
                    },
                    None => continue,
                };
                c.rows.push(row);
            }
            // (Buckets past `at`: a node whose clock is behind another's.)
            c.rows.extend(recent);
            sum_before(&mut c.rows);
        }
        c.at = at;
        c.per_s = per_s;
        c
    }

    pub fn view(&self) -> CountsView<'_> {
        CountsView {
            rows: &self.rows,
            at: self.at,
            per_s: self.per_s,
        }
    }

    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// When the counts were taken (0: not settled), and the pace of arrivals then.
    pub fn at(&self) -> u64 {
        self.at
    }

    pub fn per_s(&self) -> u64 {
        self.per_s
    }

    /// Everyone counted.
    pub fn total(&self) -> u64 {
        self.view().total()
    }

    /// See [`CountsView::position`].
    pub fn position(&self, arrival: u64) -> u64 {
        self.view().position(arrival)
    }
}

fn sum_before(rows: &mut [Row]) {
    let mut before = 0u64;
    for r in rows {
        r.before = before;
        before = before.saturating_add(r.waiting);
    }
}

impl CountsView<'_> {
    /// Everyone counted.
    pub fn total(&self) -> u64 {
        self.rows.last().map_or(0, |r| r.before + r.waiting)
    }

    /// The position of a waiter who arrived at `arrival`: everyone in older buckets, and the
    /// part of its own bucket that arrived before it (arrivals taken as even within it), + 1.
    /// One who arrived after the counts were settled: behind everyone counted, and the
    /// fleet's pace of arrivals since.
    pub fn position(&self, arrival: u64) -> u64 {
        let b = Clock::bucket(arrival);
        let i = self.rows.partition_point(|r| r.bucket < b);
        let Some(r) = self.rows.get(i) else {
            let since = arrival.saturating_sub(self.at.max(1));
            let later = if self.at == 0 {
                0
            } else {
                self.per_s.saturating_mul(since) / BUCKET_MS
            };
            return self.total() + later + 1;
        };
        if r.bucket != b {
            return r.before + 1;
        }
        // Its waiters taken as even over the arrivals they came at; one who came after the
        // last of them stands behind them all.
        let span = r.to.saturating_sub(r.from).max(1);
        let into = arrival.saturating_sub(r.from).min(span);
        r.before + r.waiting.saturating_mul(into) / span + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(bucket: u64, waiting: u64, let_in_ppm: u64) -> Bucket {
        Bucket {
            bucket,
            waiting,
            let_in_ppm,
            first: 0,
            last: 0,
        }
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

    #[test]
    fn a_bucket_filled_in_part_spreads_its_waiters_over_their_arrivals() {
        // 17 who came 3 ms apart from 10,000, and a bucket filled over its whole second.
        let c = Counts::new(
            [
                Bucket::of(10, 17, 17, 0).spanning(10_000, 10_048),
                Bucket::of(11, 10, 10, 0),
            ],
            0,
        );
        assert_eq!(c.position(10_000), 1);
        assert_eq!(c.position(10_024), 9);
        assert_eq!(c.position(10_048), 17);
        // One who came after the last counted: behind them all.
        assert_eq!(c.position(10_700), 18);
        assert_eq!(c.position(11_500), 23);
        // Four of the 17 were let in: the 13 left came from 10,011 on.
        let c = Counts::new([Bucket::of(10, 13, 17, 4).spanning(10_000, 10_048)], 0);
        assert_eq!((c.position(10_011), c.position(10_048)), (1, 13));
        // A span outside its bucket is not believed.
        assert_eq!(Bucket::of(10, 1, 1, 0).spanning(9_999, 10_010).first, 0);
    }

    #[test]
    fn the_newest_buckets_count_at_least_the_pace_of_arrivals() {
        // 100 a second from bucket 10 to 19, reported in full; the last interval (bucket 20,
        // to 20,600) only by some nodes (30), bucket 21 not yet (settled at 21,500, 1 s).
        let mut buckets: Vec<Bucket> = (10..20).map(|b| at(b, 100, 0)).collect();
        buckets.push(at(20, 30, 0));
        let raw = Counts::new(buckets.clone(), 10_000);
        let c = Counts::settled(buckets, 10_000, 21_500, 1_000);
        assert_eq!(c.per_s(), 100);
        assert_eq!(raw.total(), 1_030);
        // Bucket 20 counts 100, bucket 21 its first half second: 50.
        assert_eq!(c.total(), 1_150);
        assert_eq!(c.position(20_000), 1_001);
        assert_eq!(c.position(21_000), 1_101);
        assert_eq!(c.position(21_250), 1_126);
        // After the counts were taken: behind everyone, and 100 a second since.
        assert_eq!(c.position(22_500), 1_251);
        // Without the settling, a newcomer of bucket 21 was told 1,031.
        assert_eq!(raw.position(21_250), 1_031);
        // Older buckets are as counted.
        assert_eq!(c.position(15_500), raw.position(15_500));
    }

    #[test]
    fn a_count_above_the_pace_stands_and_no_pace_adds_nothing() {
        // Bucket 20 counted more than the pace: kept.
        let mut buckets: Vec<Bucket> = (10..20).map(|b| at(b, 100, 0)).collect();
        buckets.push(at(20, 400, 0));
        let c = Counts::settled(buckets, 10_000, 20_900, 1_000);
        assert_eq!(c.total(), 1_400);
        // A line that began within the settling time has no pace: counted as it stands.
        let c = Counts::settled([at(20, 30, 0)], 20_100, 20_900, 1_000);
        assert_eq!((c.per_s(), c.total(), c.position(25_000)), (0, 30, 31));
    }
}
