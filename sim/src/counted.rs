//! The arrival-bucket count of the line (`core::fleet::tally`), run beside the room's own
//! positions: each node tallies the waiting tickets it answers (once an epoch each, by the
//! stamp the ticket carries), syncs its tally into the fleet's ledger with its report, and
//! answers positions from the counts its last sync brought back, moved on since by the
//! fleet's recent pace of admissions. The engine checks both answers against the true line.

use smart_limit_core::fleet::tally::{Clock, Counts, Ledger, Tally};

pub struct Counted {
    clock: Clock,
    ledger: Ledger,
    /// Per node slot: what it tallied since its last sync, and the counts that sync brought.
    tallies: Vec<Tally>,
    counts: Vec<Counts>,
    /// Per client: its ticket's stamp (when a node last counted it).
    stamps: Vec<Option<u64>>,
    /// Waiters let in, as the syncs told the fleet: (when, how many so far), the last 5 s.
    let_in: std::collections::VecDeque<(u64, u64)>,
    let_in_total: u64,
    /// Per node slot: when its counts came, and the fleet's admissions per 1,000 s then.
    moved: Vec<(u64, u64)>,
    /// How long after an arrival every node has reported it (an interval: each node syncs
    /// once an interval): the counts are settled over it (`Counts::settled`).
    settle_ms: u64,
}

impl Counted {
    pub fn new(presence_ms: u64, clients: usize, settle_ms: u64) -> Counted {
        let clock = Clock::new(presence_ms);
        Counted {
            clock,
            ledger: Ledger::new(clock),
            tallies: Vec::new(),
            counts: Vec::new(),
            stamps: vec![None; clients],
            let_in: Default::default(),
            let_in_total: 0,
            moved: Vec::new(),
            settle_ms,
        }
    }

    fn slot(&mut self, n: usize) {
        if self.tallies.len() <= n {
            self.tallies.resize_with(n + 1, Tally::default);
            self.counts.resize_with(n + 1, Counts::default);
            self.moved.resize(n + 1, (0, 0));
        }
    }

    /// Client `c` (arrived at `arrival`) is told to wait by node `n` at `now`: counted if its
    /// ticket is not stamped in this epoch. Returns the position the counts give.
    pub fn waiting(&mut self, n: usize, c: usize, arrival: u64, now: u64) -> u64 {
        self.slot(n);
        let stamp = self.stamps.get(c).copied().flatten();
        if self.tallies[n].seen(&self.clock, arrival, stamp, now) {
            self.stamps[c] = Some(now);
        }
        let told = self.counts[n].position(arrival);
        // The line moves on between pictures: by the fleet's admissions of the last 5 s.
        let (at, per_ks) = self.moved[n];
        let moved = per_ks * now.saturating_sub(at) / 1_000_000;
        told.saturating_sub(moved).max(1)
    }

    /// Client `c` is admitted by node `n`.
    pub fn admitted(&mut self, n: usize, c: usize, arrival: u64, now: u64) {
        self.slot(n);
        if let Some(s) = self.stamps.get(c).copied().flatten() {
            self.tallies[n].left(&self.clock, arrival, s, now);
        }
    }

    /// Node `n`'s sync went through; `front` is the arrival of the line's head in its picture.
    pub fn synced(&mut self, n: usize, now: u64, front: u64) {
        self.slot(n);
        let deltas = self.tallies[n].take();
        self.let_in_total += deltas.let_in.iter().map(|&(_, k)| k).sum::<u64>();
        self.let_in.push_back((now, self.let_in_total));
        while self.let_in.front().is_some_and(|&(t, _)| t + 5000 < now) {
            self.let_in.pop_front();
        }
        let per_ks = match self.let_in.front() {
            Some(&(t, k)) if now > t => (self.let_in_total - k) * 1_000_000 / (now - t),
            _ => 0,
        };
        self.moved[n] = (now, per_ks);
        self.ledger.apply(&deltas, now);
        self.counts[n] = self.ledger.settled(front, now, self.settle_ms);
    }

    /// Node `n` lost its zone (a restart).
    pub fn lost(&mut self, n: usize) {
        self.slot(n);
        self.tallies[n] = Tally::default();
        self.counts[n] = Counts::default();
    }
}
