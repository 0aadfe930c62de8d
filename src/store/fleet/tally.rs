//! The arrival-bucket counts of a synced room ([S22]; `smart_limit_core::fleet::tally`): the
//! node counts each waiting ticket once an epoch, when the ticket is written again, and once
//! an interval, beside its sync, sends what it counted in one call of the counts' script
//! (`tally.lua`), whose reply is the fleet's counts by arrival bucket. A line too long for
//! the picture to carry whole is told its positions from them. A request only counts, in the
//! zone; no request waits for a call: a failed one gives its counts back for the next, and
//! the node answers from the counts it has.

use core::cell::Cell;

use smart_limit_core::fleet::tally::{tally_reply, Caller, Clock, TallyReport, TallyScript};
use smart_limit_core::util::time::window_end;

use super::FleetStore;
use crate::store::Zone;

/// The counts' side of a synced room: its script, and (per worker) the call out and the
/// interval of the last one.
pub struct TallyCalls {
    pub script: TallyScript,
    out: Cell<bool>,
    last_window: Cell<u64>,
}

impl TallyCalls {
    pub fn new(prefix: &str, room: &str) -> TallyCalls {
        TallyCalls {
            script: TallyScript::new(prefix, room),
            out: Cell::new(false),
            last_window: Cell::new(0),
        }
    }
}

impl Zone {
    /// A waiting ticket written again at `now` (its place's `arrival`; the stamp it came
    /// with, None when it takes its place now): counted in this epoch.
    pub fn tally_seen(&self, arrival: u64, stamp: Option<u64>, now: u64) {
        let Some(fs) = self.synced() else { return };
        let _ = self
            .shm
            .with_fleet(|_, node| node.tally_seen(&fs.cfg, arrival, stamp, now));
    }

    /// A waiting ticket (place `arrival`, stamped at `stamp`) let in at `now`.
    pub fn tally_left(&self, arrival: u64, stamp: u64, now: u64) {
        let Some(fs) = self.synced() else { return };
        let _ = self
            .shm
            .with_fleet(|_, node| node.tally_left(&fs.cfg, arrival, stamp, now));
    }

    /// Beside a sync: the counts' call of this interval, unless one was sent in it or is
    /// still out; none while the node counted nothing and its line comes whole.
    pub(super) fn send_tally(&'static self, fs: &'static FleetStore, now: u64) {
        let calls = &fs.tally;
        let window = window_end(now, fs.cfg.interval_ms);
        // (A worker's last sync, as it goes away, sends them too: a binary upgrade leaves
        // the zone behind. The call goes before the sync on the one connection, so its reply
        // is in before the sync's, which the worker waits for.)
        if calls.out.get() || calls.last_window.get() == window {
            return;
        }
        let Some(client) = fs.client() else { return };
        let taken = self.shm.with_fleet(|_, node| {
            let report = node.take_tally();
            let wanted = !report.is_empty() || node.counts_wanted();
            (report, wanted, node.node_id())
        });
        let (report, by): (TallyReport, _) = match taken {
            Ok((report, true, node)) => (
                report,
                // The fleet's clock is Redis's: the nodes' clocks may differ.
                Caller {
                    node,
                    interval_ms: fs.cfg.interval_ms,
                    fleet_now: 0,
                },
            ),
            _ => return,
        };
        calls.out.set(true);
        calls.last_window.set(window);
        let clock = Clock::new(fs.cfg.kept_ms());
        let ttl = fs.cfg.key_ttl_ms();
        ngx::async_::spawn(async move {
            let reply = client
                .eval(|form| calls.script.call(form, &report, &clock, now, ttl, &by))
                .await;
            calls.out.set(false);
            let tallied = match reply.map(|v| tally_reply(&v)) {
                Ok(Ok(t)) => {
                    client.reply_was_good();
                    Some(t)
                }
                Ok(Err(e)) => {
                    client.reply_was_bad(&format!("the counts' script: {e}"));
                    None
                }
                // No reply: the client has logged the burst.
                Err(_) => None,
            };
            let _ = self.shm.with_fleet(|_, node| match tallied {
                Some(t) => node.set_counts(t, now, &fs.cfg),
                None => node.give_back_tally(&report),
            });
        })
        .detach();
    }
}
