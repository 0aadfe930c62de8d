//! What the run measures, kept apart from the engine so each rule can be tested on its own:
//! the true active count, order inversions, and what the per-interval samples say.

use std::collections::VecDeque;

/// The true number of active sessions: admitted and not yet left, or left less than the active
/// window after their last request (what the room is meant to count). Each client is counted
/// once, whichever nodes it spoke to.
#[derive(Debug, Default)]
pub struct TrueActive {
    admitted: u64,
    expired: u64,
    /// When each client that left stops counting. Leaves are seen in time order and the window
    /// is one length, so this is sorted: a queue, O(1) per client.
    ends: VecDeque<u64>,
}

impl TrueActive {
    pub fn admit(&mut self) {
        self.admitted += 1;
    }

    /// A client made its last request at `last` and left.
    pub fn leave(&mut self, last: u64, window_ms: u64) {
        debug_assert!(self.ends.back().is_none_or(|&b| b <= last + window_ms));
        self.ends.push_back(last + window_ms);
    }

    /// The count at `now` (times must not go back).
    pub fn at(&mut self, now: u64) -> u64 {
        while self.ends.front().is_some_and(|&e| e <= now) {
            self.ends.pop_front();
            self.expired += 1;
        }
        self.admitted - self.expired
    }
}

/// Admissions out of arrival order: a client admitted after one that arrived more than
/// `slack_ms` later. O(1) per admission: only the latest arrival admitted so far is kept.
#[derive(Debug, Default)]
pub struct Inversions {
    latest: Option<u64>,
    pub count: u64,
    pub worst_gap_ms: u64,
    /// Inversions of more than three intervals (the rehearsal's checker tolerates up to
    /// two intervals and a second).
    pub far: u64,
}

impl Inversions {
    pub fn admit(&mut self, arrival: u64, slack_ms: u64) -> bool {
        let inverted = match self.latest {
            Some(l) if l > arrival.saturating_add(slack_ms) => {
                self.count += 1;
                self.far += u64::from(l - arrival > slack_ms.saturating_mul(3));
                self.worst_gap_ms = self.worst_gap_ms.max(l - arrival);
                true
            }
            _ => false,
        };
        self.latest = Some(self.latest.map_or(arrival, |l| l.max(arrival)));
        inverted
    }
}

/// The fleet at one tick (before its syncs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tick {
    /// Ms from the start of the run.
    pub t: u64,
    pub true_active: u64,
    /// Clients truly waiting (arrived, neither admitted nor gone).
    pub waiting: u64,
    /// The fleet's own count ("Redis").
    pub room_active: u64,
    /// The fleet's line ("Redis").
    pub line: u64,
    pub arrived: u64,
    pub admitted: u64,
    pub abandoned: u64,
    /// Order inversions so far.
    pub inversions: u64,
    /// This tick's pictures: the interval's free places, the sum of the nodes' shares of
    /// them, and the true waiters at or before the cursor (whose turn it is).
    pub free: u64,
    pub granted: u64,
    pub eligible: u64,
    /// Redis was unreachable at this tick.
    pub outage: bool,
}

/// The accuracy of the fleet's count, from the ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Accuracy {
    /// Ticks with people waiting (after the first two intervals).
    pub ticks: usize,
    pub max_ratio: f64,
    pub min_ratio: f64,
    pub mean_ratio: f64,
    /// Ticks with at least max_active/10 waiting.
    pub busy_ticks: usize,
    pub above: f64,
    pub below: f64,
    pub room_max_ratio: f64,
    pub room_min_ratio: f64,
}

/// Within ±2 % of the target.
pub const BAND: (f64, f64) = (0.98, 1.02);

/// True active / max_active over `ticks`, while people wait and from the third tick on (the
/// room starts empty); the shares above and below [`BAND`] only while at least a tenth of
/// max_active wait (a handful of waiters cannot fill the room). `keep` selects the ticks.
pub fn accuracy(ticks: &[Tick], max_active: u64, keep: impl Fn(&Tick) -> bool) -> Accuracy {
    let m = max_active.max(1) as f64;
    let mut a = Accuracy {
        min_ratio: f64::INFINITY,
        room_min_ratio: f64::INFINITY,
        ..Accuracy::default()
    };
    let (mut sum, mut above, mut below) = (0.0, 0, 0);
    for t in ticks.iter().skip(2).filter(|t| t.waiting > 0 && keep(t)) {
        let r = t.true_active as f64 / m;
        let room = t.room_active as f64 / m;
        a.ticks += 1;
        sum += r;
        a.max_ratio = a.max_ratio.max(r);
        a.min_ratio = a.min_ratio.min(r);
        a.room_max_ratio = a.room_max_ratio.max(room);
        a.room_min_ratio = a.room_min_ratio.min(room);
        if t.waiting >= max_active / 10 {
            a.busy_ticks += 1;
            above += usize::from(r > BAND.1);
            below += usize::from(r < BAND.0);
        }
    }
    if a.ticks == 0 {
        a.min_ratio = 0.0;
        a.room_min_ratio = 0.0;
    } else {
        a.mean_ratio = sum / a.ticks as f64;
    }
    if a.busy_ticks > 0 {
        a.above = above as f64 / a.busy_ticks as f64;
        a.below = below as f64 / a.busy_ticks as f64;
    }
    a
}

/// After `from` (ms), how long until true active / max_active is within `band` while people
/// wait: `first` the first such tick, `settled` the first one after which it stays within for
/// `hold_ms` (or to the end of the run, if that is sooner). None: not within the run.
pub fn reconverge(
    ticks: &[Tick],
    max_active: u64,
    from: u64,
    band: (f64, f64),
    hold_ms: u64,
) -> (Option<u64>, Option<u64>) {
    let m = max_active.max(1) as f64;
    let inside = |t: &Tick| {
        let r = t.true_active as f64 / m;
        t.waiting == 0 || (band.0..=band.1).contains(&r)
    };
    let after: Vec<&Tick> = ticks.iter().filter(|t| t.t >= from).collect();
    let first = after
        .iter()
        .find(|t| t.waiting > 0 && inside(t))
        .map(|t| t.t - from);
    let mut settled = None;
    for (i, t) in after.iter().enumerate() {
        if t.waiting == 0 || !inside(t) {
            continue;
        }
        let holds = after[i..]
            .iter()
            .take_while(|u| u.t <= t.t + hold_ms)
            .all(|u| inside(u));
        if holds {
            settled = Some(t.t - from);
            break;
        }
    }
    (first, settled)
}

/// Inversions and admissions over the intervals whose tick `keep` selects (each interval from
/// its tick to the next).
pub fn counted(ticks: &[Tick], keep: impl Fn(&Tick) -> bool) -> (u64, u64) {
    let (mut inversions, mut admitted) = (0, 0);
    for w in ticks.windows(2) {
        if keep(&w[0]) {
            inversions += w[1].inversions - w[0].inversions;
            admitted += w[1].admitted - w[0].admitted;
        }
    }
    (inversions, admitted)
}

/// The `q`-quantile (0..=1) of `v`, which it sorts; 0 for nothing.
pub fn quantile(v: &mut [u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    v[i]
}

/// How well the nodes' answered positions match the true line.
#[derive(Debug, Default, Clone)]
pub struct Positions {
    pub samples: u64,
    pub sum_abs: f64,
    /// Answered minus true: positive, the node says the client is further back than it is.
    pub sum_signed: f64,
    pub sum_true: f64,
    /// Each sample's (true position, answered - true); the report's quantiles come from these.
    pub pairs: Vec<(u64, i64)>,
}

/// Positions up to this many are the head: past it the line moves by less than 2 % between two
/// polls ([`Positions::rel_ppm`]'s `past`).
pub const HEAD: u64 = 1000;

impl Positions {
    /// One answer against the truth.
    pub fn add(&mut self, answered: u64, truth: u64) {
        let err = answered as f64 - truth as f64;
        self.samples += 1;
        self.sum_abs += err.abs();
        self.sum_signed += err;
        self.sum_true += truth as f64;
        self.pairs.push((truth, answered as i64 - truth as i64));
    }

    /// Each sample's absolute error, of those whose true position is in `band`.
    pub fn abs(&self, band: std::ops::RangeInclusive<u64>) -> Vec<u64> {
        self.inside(band).map(|(_, e)| e.unsigned_abs()).collect()
    }

    /// Each sample's error relative to its true position, in millionths, of those whose true
    /// position is in `band`.
    pub fn rel_ppm(&self, band: std::ops::RangeInclusive<u64>) -> Vec<u64> {
        self.inside(band)
            .map(|(t, e)| e.unsigned_abs().saturating_mul(1_000_000) / t.max(1))
            .collect()
    }

    fn inside(&self, band: std::ops::RangeInclusive<u64>) -> impl Iterator<Item = (u64, i64)> + '_ {
        self.pairs
            .iter()
            .copied()
            .filter(move |(t, _)| band.contains(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_left_counts_for_the_window_after_its_last_request() {
        let mut a = TrueActive::default();
        a.admit();
        a.admit();
        a.admit();
        assert_eq!(a.at(1000), 3);
        a.leave(1000, 20_000);
        a.leave(5000, 20_000);
        assert_eq!(a.at(20_999), 3);
        assert_eq!(a.at(21_000), 2);
        assert_eq!(a.at(25_000), 1);
        a.admit();
        assert_eq!(a.at(100_000), 2);
    }

    #[test]
    fn inversions_need_more_than_the_slack() {
        let mut inv = Inversions::default();
        assert!(!inv.admit(5000, 1000));
        // Arrived 1 s before the latest admitted: within the slack.
        assert!(!inv.admit(4000, 1000));
        assert!(inv.admit(3999, 1000));
        assert!(!inv.admit(9000, 1000));
        assert!(inv.admit(1000, 1000));
        assert_eq!((inv.count, inv.worst_gap_ms), (2, 8000));
    }

    fn tick(t: u64, true_active: u64, waiting: u64) -> Tick {
        Tick {
            t,
            true_active,
            waiting,
            room_active: true_active,
            ..Tick::default()
        }
    }

    #[test]
    fn accuracy_skips_the_start_and_the_idle_ticks() {
        let ticks = [
            tick(0, 0, 50),
            tick(1000, 10, 50),
            tick(2000, 100, 50),
            tick(3000, 95, 5),
            tick(4000, 200, 0),
            tick(5000, 103, 10),
        ];
        let a = accuracy(&ticks, 100, |_| true);
        assert_eq!(a.ticks, 3);
        assert_eq!((a.max_ratio, a.min_ratio), (1.03, 0.95));
        // Only 2000 and 5000 have at least 10 waiting: one in band, one above.
        assert_eq!(a.busy_ticks, 2);
        assert_eq!((a.above, a.below), (0.5, 0.0));
        assert!((a.mean_ratio - (1.0 + 0.95 + 1.03) / 3.0).abs() < 1e-9);
    }

    #[test]
    fn reconvergence_first_and_settled() {
        let ticks: Vec<Tick> = [80, 90, 99, 110, 101, 100, 99, 100]
            .iter()
            .enumerate()
            .map(|(i, &a)| tick(i as u64 * 1000, a, 50))
            .collect();
        assert_eq!(
            reconverge(&ticks, 100, 1000, BAND, 2000),
            (Some(1000), Some(3000))
        );
        assert_eq!(reconverge(&ticks, 100, 0, (2.0, 3.0), 0), (None, None));
    }

    #[test]
    fn counted_over_the_intervals_kept() {
        let t = |t, inversions, admitted| Tick {
            t,
            inversions,
            admitted,
            ..Tick::default()
        };
        let ticks = [t(0, 0, 0), t(1000, 2, 10), t(2000, 5, 30), t(3000, 5, 31)];
        assert_eq!(counted(&ticks, |t| t.t >= 1000), (3, 21));
        assert_eq!(counted(&ticks, |t| t.t != 1000), (2, 11));
        assert_eq!(counted(&ticks, |_| false), (0, 0));
    }

    #[test]
    fn quantiles() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(quantile(&mut v, 0.5), 3);
        assert_eq!(quantile(&mut v, 1.0), 5);
        assert_eq!(quantile(&mut [], 0.5), 0);
    }
}
