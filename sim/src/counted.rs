//! The arrival-bucket count of the line (`core::fleet::tally`), run beside the room: each node
//! tallies the waiting tickets it answers (once an epoch each, by the stamp the ticket
//! carries) and syncs its tally into the fleet's ledger (the script's twin) with its report;
//! the ledger's buckets go back to the node (`FleetNode::set_counts`), whose answers come from
//! them in a line too long for the picture to carry whole, as the module's do.

use smart_limit_core::fleet::tally::{Caller, Clock, Ledger, Tallied, Tally};

pub struct Counted {
    clock: Clock,
    ledger: Ledger,
    /// Per node slot: what it tallied since its last sync.
    tallies: Vec<Tally>,
    /// Per client: its ticket's stamp (when a node last counted it).
    stamps: Vec<Option<u64>>,
}

impl Counted {
    pub fn new(presence_ms: u64, clients: usize) -> Counted {
        let clock = Clock::new(presence_ms);
        Counted {
            clock,
            ledger: Ledger::new(clock),
            tallies: Vec::new(),
            stamps: vec![None; clients],
        }
    }

    fn slot(&mut self, n: usize) {
        if self.tallies.len() <= n {
            self.tallies.resize_with(n + 1, Tally::default);
        }
    }

    /// Client `c` (arrived at `arrival`) is told to wait by node `n` at `now`: counted if its
    /// ticket is not stamped in this epoch.
    pub fn waiting(&mut self, n: usize, c: usize, arrival: u64, now: u64) {
        self.slot(n);
        let stamp = self.stamps.get(c).copied().flatten();
        if self.tallies[n].seen(&self.clock, arrival, stamp, now) {
            self.stamps[c] = Some(now);
        }
    }

    /// Client `c` is admitted by node `n`.
    pub fn admitted(&mut self, n: usize, c: usize, arrival: u64, now: u64) {
        self.slot(n);
        if let Some(s) = self.stamps.get(c).copied().flatten() {
            self.tallies[n].left(&self.clock, arrival, s, now);
        }
    }

    /// Node `n`'s sync went through: its tally into the ledger, and the fleet's buckets back,
    /// with what they lack (the other nodes' time since their last calls).
    pub fn synced(&mut self, n: usize, now: u64, interval_ms: u64) -> Tallied {
        self.slot(n);
        let deltas = self.tallies[n].take();
        self.ledger.apply(&deltas, now);
        let by = Caller {
            node: n as u64,
            interval_ms,
            fleet_now: now,
        };
        let behind = self.ledger.called(&by, deltas.let_ins());
        Tallied {
            buckets: self.ledger.buckets(),
            behind,
        }
    }

    /// Node `n` lost its zone (a restart).
    pub fn lost(&mut self, n: usize) {
        self.slot(n);
        self.tallies[n] = Tally::default();
    }
}
