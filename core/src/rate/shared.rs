//! A rate zone's state in shared memory: the node's cumulative counters and its `p` (atomics
//! only on the request path), the leader's tick, and the fleet's picture applied.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::*;
use crate::redis::BACKOFF_MAX_MS;
use crate::sync::leader::Leadership;
use crate::util::time::window_end;

const MAGIC: u64 = 0x534c_5241_5445_0001; // "SLRATE", version 1

/// How the leader's tick should reach the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncArgs {
    pub node_id: u64,
    pub seq: u64,
    pub offered: u64,
    pub passed: u64,
    /// The node's own offered rate, as it measured it (milli r/s).
    pub own_rate_milli: u64,
    /// The end of the window the counters close: the tick's instant rounded to a multiple of
    /// the interval (the same on every node).
    pub window_ms: u64,
    /// When the counters were read (the node's clock, ms).
    pub at_ms: u64,
}

/// The fleet as one sync reply shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetPicture {
    /// The fleet's offered and passed rates (milli r/s): the sum of the live nodes' rates.
    pub offered_milli: u64,
    pub passed_milli: u64,
    /// Live nodes (this one included).
    pub nodes: u64,
    /// The fleet's cumulative totals, for metrics.
    pub offered_total: u64,
    pub passed_total: u64,
    /// This node's own offered rate over the same window (milli r/s).
    pub own_offered_milli: u64,
    /// The end of the window the fleet's rates are for.
    pub window_ms: u64,
    /// Whether this node's report was taken (false: not newer than the one stored).
    pub accepted: bool,
}

/// A rate zone's state in the node's shared memory: every field an atomic, written by any
/// worker without a lock (the counters) or by the leader (the rest).
#[repr(C)]
#[derive(Debug)]
pub struct RateShared {
    magic: AtomicU64,
    /// Random per zone (kept across reloads): the node's name in Redis.
    node_id: AtomicU64,
    /// Requests offered to the zone and passed, since the zone was created.
    pub(super) offered: AtomicU64,
    passed: AtomicU64,
    /// The probability every request is drawn against (ppm).
    p_ppm: AtomicU64,
    /// The last fleet picture, and when it came (0: none yet).
    fleet_ppm: AtomicU64,
    fleet_offered_milli: AtomicU64,
    fleet_passed_milli: AtomicU64,
    fleet_nodes: AtomicU64,
    fleet_offered_total: AtomicU64,
    fleet_passed_total: AtomicU64,
    /// The totals as the last picture gave them (to see them restart from 0).
    fleet_offered_raw: AtomicU64,
    fleet_passed_raw: AtomicU64,
    synced_at_ms: AtomicU64,
    /// The node's own offered rate, and the counter reading it was measured from.
    local_offered_milli: AtomicU64,
    sample_count: AtomicU64,
    sample_at_ms: AtomicU64,
    /// The passed counter at that reading (the budget since the tick counts from it).
    passed_at_tick: AtomicU64,
    /// Grows with every sync sent (lets Redis ignore a late, older report).
    seq: AtomicU64,
    /// The last window reported (a window is reported once).
    window_ms: AtomicU64,
    /// Since when pictures show fewer nodes than the last one applied (0: they do not).
    shrink_since_ms: AtomicU64,
    /// Which worker syncs for the node.
    leadership: Leadership,
    /// Syncs answered, failed (no reply, bad reply), and ignored (a report Redis found older
    /// than the one it had, or an answer that came after a newer sync was sent).
    syncs: AtomicU64,
    sync_errors: AtomicU64,
    ignored: AtomicU64,
}

/// The shared state is not what it should be (another module's zone, an older layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("zone memory does not hold a rate zone of this module's layout")]
pub struct NotARateZone;

/// A reading of the shared state, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateSnapshot {
    pub offered: u64,
    pub passed: u64,
    pub p_ppm: u32,
    pub fleet_offered_milli: u64,
    pub fleet_passed_milli: u64,
    pub nodes: u64,
    pub fleet_offered_total: u64,
    pub fleet_passed_total: u64,
    pub local_offered_milli: u64,
    /// Since the last fleet picture (None: never had one).
    pub sync_age_ms: Option<u64>,
    pub syncs: u64,
    pub sync_errors: u64,
    pub ignored: u64,
}

impl RateShared {
    /// A fresh zone: nothing counted, everything passes until the first tick measures.
    pub fn new(node_id: u64, now: u64) -> RateShared {
        let a = AtomicU64::new;
        RateShared {
            magic: a(MAGIC),
            node_id: a(node_id.max(1)),
            offered: a(0),
            passed: a(0),
            p_ppm: a(u64::from(PPM)),
            fleet_ppm: a(u64::from(PPM)),
            fleet_offered_milli: a(0),
            fleet_passed_milli: a(0),
            fleet_nodes: a(0),
            fleet_offered_total: a(0),
            fleet_passed_total: a(0),
            fleet_offered_raw: a(0),
            fleet_passed_raw: a(0),
            synced_at_ms: a(0),
            local_offered_milli: a(0),
            sample_count: a(0),
            sample_at_ms: a(now),
            passed_at_tick: a(0),
            seq: a(0),
            window_ms: a(0),
            shrink_since_ms: a(0),
            leadership: Leadership::new(),
            syncs: a(0),
            sync_errors: a(0),
            ignored: a(0),
        }
    }

    /// Checks a zone an earlier configuration set up.
    pub fn check(&self) -> Result<(), NotARateZone> {
        if self.magic.load(Relaxed) == MAGIC {
            Ok(())
        } else {
            Err(NotARateZone)
        }
    }

    /// Which worker syncs for the node (see [`Leadership`]).
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    pub fn node_id(&self) -> u64 {
        self.node_id.load(Relaxed)
    }

    /// One request at `now`: counted as offered, drawn against `p`, counted as passed when it
    /// passes. Every [`SURGE_CHECK`]th request of the node also checks for a surge.
    #[inline]
    pub fn record(&self, draw: u32, now: u64, cfg: &RateConfig) -> bool {
        let offered = self.offered.fetch_add(1, Relaxed).wrapping_add(1);
        if offered.is_multiple_of(SURGE_CHECK) {
            self.surge_guard(offered, now, cfg);
        }
        let pass = passes(self.p_ppm.load(Relaxed) as u32, draw) && self.within_budget(now, cfg);
        if pass {
            self.passed.fetch_add(1, Relaxed);
        }
        pass
    }

    /// The backstop under the draw: since the last tick the node has passed less than
    /// [`RateConfig::budget`] per interval (at least one interval). It does not bind while `p`
    /// is right (the node passes its share of the rate, give or take the draw's spread); it
    /// holds a spike from idle to about the rate itself until the surge guard and the next tick
    /// catch up.
    fn within_budget(&self, now: u64, cfg: &RateConfig) -> bool {
        let since = now
            .saturating_sub(self.sample_at_ms.load(Relaxed))
            .max(cfg.interval_ms);
        let allowed =
            u128::from(cfg.budget) * u128::from(since) / u128::from(cfg.interval_ms.max(1));
        let passed = self
            .passed
            .load(Relaxed)
            .saturating_sub(self.passed_at_tick.load(Relaxed));
        u128::from(passed) < allowed
    }

    /// Between two ticks `p` rests on the rates measured over the last interval; a node whose
    /// own offer jumps (a spike from idle) would pass nearly all of it until the next tick. So
    /// now and then a worker compares the node's offer since the last tick with the one `p` was
    /// set from and, when it is more than [`SURGE_FACTOR`] times higher, lowers `p` at once to
    /// what the fleet's rate with this node's new offer allows. Only ever lowers `p`; the next
    /// tick sets it from fresh measurements.
    fn surge_guard(&self, offered: u64, now: u64, cfg: &RateConfig) {
        let since = Sample {
            count: self.sample_count.load(Relaxed),
            at_ms: self.sample_at_ms.load(Relaxed),
        };
        if now.saturating_sub(since.at_ms) < (cfg.interval_ms / 10).max(SURGE_MIN_MS)
            || offered.saturating_sub(since.count) < SURGE_MIN_COUNT
        {
            return;
        }
        let Some(own_now) = rate_milli(
            since,
            Sample {
                count: offered,
                at_ms: now,
            },
        ) else {
            return;
        };
        let own_then = self.local_offered_milli.load(Relaxed);
        if own_now <= own_then.saturating_mul(SURGE_FACTOR) {
            return;
        }
        let fleet = self
            .fleet_offered_milli
            .load(Relaxed)
            .saturating_sub(own_then)
            .saturating_add(own_now);
        let p = u64::from(pass_ppm(cfg.rate_milli, fleet));
        self.p_ppm.fetch_min(p, Relaxed);
    }

    /// The leader's whole step as the sync driver runs it when a sync goes out: [`measure`],
    /// then [`next_sync`] (for tests; the driver calls the two apart).
    ///
    /// [`measure`]: RateShared::measure
    /// [`next_sync`]: RateShared::next_sync
    #[cfg(test)]
    pub fn tick(&self, now: u64, cfg: &RateConfig) -> Option<SyncArgs> {
        self.measure(now, cfg);
        self.next_sync(now, cfg)
    }

    /// The leader's own step, once an interval: measures the node's own offered rate and sets
    /// `p` from the freshest picture (or the local cap); alone, the node's rate is the fleet's.
    pub fn measure(&self, now: u64, cfg: &RateConfig) {
        let offered = self.offered.load(Relaxed);
        let earlier = Sample {
            count: self.sample_count.load(Relaxed),
            at_ms: self.sample_at_ms.load(Relaxed),
        };
        let later = Sample {
            count: offered,
            at_ms: now,
        };
        if let Some(r) = rate_milli(earlier, later) {
            self.local_offered_milli.store(r, Relaxed);
            self.sample_count.store(offered, Relaxed);
            self.passed_at_tick
                .store(self.passed.load(Relaxed), Relaxed);
            self.sample_at_ms.store(now, Relaxed);
        }
        let own = self.local_offered_milli.load(Relaxed);
        if !cfg.fleet {
            // Alone: the node's own rate is the fleet's.
            let p = pass_ppm(cfg.rate_milli, own);
            self.fleet_offered_milli.store(own, Relaxed);
            self.fleet_nodes.store(1, Relaxed);
            self.fleet_ppm.store(u64::from(p), Relaxed);
            self.synced_at_ms.store(now, Relaxed);
            self.p_ppm.store(u64::from(p), Relaxed);
            return;
        }
        let local_cap = cfg
            .local_milli
            .unwrap_or(cfg.rate_milli / self.fleet_nodes.load(Relaxed).max(1));
        let local = pass_ppm(local_cap, own);
        let synced_at = self.synced_at_ms.load(Relaxed);
        let p = if synced_at == 0 {
            local
        } else {
            aged_ppm(
                self.fleet_ppm.load(Relaxed) as u32,
                local,
                now.saturating_sub(synced_at),
                cfg.interval_ms.saturating_mul(FRESH_INTERVALS),
                cfg.fallback_ms,
            )
        };
        self.p_ppm.store(u64::from(p), Relaxed);
    }

    /// What the leader sends the fleet for the window that ends at or before `now` (None
    /// without a fleet, or when that window was reported already).
    pub fn next_sync(&self, now: u64, cfg: &RateConfig) -> Option<SyncArgs> {
        if !cfg.fleet {
            return None;
        }
        let window_ms = window_end(now, cfg.interval_ms);
        if self.window_ms.fetch_max(window_ms, Relaxed) >= window_ms {
            // This window was reported already (a tick a moment early, then on time).
            return None;
        }
        Some(SyncArgs {
            node_id: self.node_id(),
            seq: self.seq.fetch_add(1, Relaxed).wrapping_add(1),
            offered: self.offered.load(Relaxed),
            passed: self.passed.load(Relaxed),
            own_rate_milli: self.local_offered_milli.load(Relaxed),
            window_ms,
            at_ms: now,
        })
    }

    /// The picture came back for the sync of `seq`: applied, unless a newer sync of the node
    /// was sent since (a stalled worker's late answer must not undo a fresher one); false
    /// when it was not.
    pub fn apply_answer(
        &self,
        picture: &FleetPicture,
        seq: u64,
        now: u64,
        cfg: &RateConfig,
    ) -> bool {
        if seq != self.seq.load(Relaxed) {
            self.ignored.fetch_add(1, Relaxed);
            return false;
        }
        self.apply(picture, now, cfg);
        true
    }

    /// The fleet's picture came back: `p` follows it at once.
    ///
    /// Pictures with fewer nodes than the last one applied wait until they have shown it for
    /// the longest reconnect delay and two intervals ([`RateShared::shrink_confirm_ms`]):
    /// right after Redis lost its data (a restart) the nodes come back one by one as their
    /// reconnect delays run out, and the first would see itself alone and pass the whole rate.
    /// A node that really left stays gone, and its traffic, moved to the others, is still in
    /// the fleet's rate, so waiting costs little. Meanwhile the last applied picture ages as
    /// without Redis (toward the local cap).
    pub fn apply(&self, picture: &FleetPicture, now: u64, cfg: &RateConfig) {
        self.syncs.fetch_add(1, Relaxed);
        if !picture.accepted {
            self.ignored.fetch_add(1, Relaxed);
        }
        if picture.nodes < self.fleet_nodes.load(Relaxed) {
            let since = match self.shrink_since_ms.load(Relaxed) {
                0 => {
                    self.shrink_since_ms.store(now.max(1), Relaxed);
                    now
                }
                t => t,
            };
            if now.saturating_sub(since) < Self::shrink_confirm_ms(cfg) {
                return;
            }
        }
        self.shrink_since_ms.store(0, Relaxed);
        let p = pass_ppm(cfg.rate_milli, picture.offered_milli);
        self.fleet_ppm.store(u64::from(p), Relaxed);
        self.fleet_offered_milli
            .store(picture.offered_milli, Relaxed);
        self.fleet_passed_milli.store(picture.passed_milli, Relaxed);
        self.fleet_nodes.store(picture.nodes.max(1), Relaxed);
        // The fleet's totals as counters that never go backwards on this node: Redis may
        // lose them (a restart), and then they start again from 0 there.
        let grow = |raw: &AtomicU64, total: &AtomicU64, now_raw: u64| {
            let before = raw.swap(now_raw, Relaxed);
            let delta = now_raw.checked_sub(before).unwrap_or(now_raw);
            total.fetch_add(delta, Relaxed);
        };
        grow(
            &self.fleet_offered_raw,
            &self.fleet_offered_total,
            picture.offered_total,
        );
        grow(
            &self.fleet_passed_raw,
            &self.fleet_passed_total,
            picture.passed_total,
        );
        self.synced_at_ms.store(now.max(1), Relaxed);
        self.p_ppm.store(u64::from(p), Relaxed);
    }

    /// How long pictures must show a smaller fleet before the node believes it.
    pub fn shrink_confirm_ms(cfg: &RateConfig) -> u64 {
        BACKOFF_MAX_MS.saturating_add(cfg.interval_ms.saturating_mul(2))
    }

    /// A sync got no usable reply.
    pub fn sync_failed(&self) {
        self.sync_errors.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self, now: u64) -> RateSnapshot {
        let synced_at = self.synced_at_ms.load(Relaxed);
        RateSnapshot {
            offered: self.offered.load(Relaxed),
            passed: self.passed.load(Relaxed),
            p_ppm: self.p_ppm.load(Relaxed) as u32,
            fleet_offered_milli: self.fleet_offered_milli.load(Relaxed),
            fleet_passed_milli: self.fleet_passed_milli.load(Relaxed),
            nodes: self.fleet_nodes.load(Relaxed),
            fleet_offered_total: self.fleet_offered_total.load(Relaxed),
            fleet_passed_total: self.fleet_passed_total.load(Relaxed),
            local_offered_milli: self.local_offered_milli.load(Relaxed),
            sync_age_ms: (synced_at != 0).then(|| now.saturating_sub(synced_at)),
            syncs: self.syncs.load(Relaxed),
            sync_errors: self.sync_errors.load(Relaxed),
            ignored: self.ignored.load(Relaxed),
        }
    }
}

// ------------------------------------------------------------------------------ Redis
