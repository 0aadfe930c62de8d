//! Once an interval, per node: measure, and meet the fleet (through the one sync driver,
//! `crate::sync`, which the synced rooms use too).
//!
//! The leader's step measures the node's offered rate and sets the pass probability from the
//! freshest picture ([`RateShared::measure`]); with `redis=` its sync sends the node's
//! cumulative counters in one script call on the zone's connection and applies the fleet's
//! picture when the reply comes ([`RateShared::apply_answer`]: not when a newer sync was sent
//! meanwhile). The script ignores a report not newer than the one it holds (its `seq`).

use ngx::ffi::ngx_conf_t;
use smart_limit_core::rate::{sync_reply, FleetPicture, RateShared, RateZoneParams, SyncArgs};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{Form, ReplyError};
use smart_limit_core::sync::leader::Leader;

use super::RateZone;
use crate::redis::{Client, ClientConfig, ConfigError};
use crate::sync::{Driver, Synced};

/// The zone's driver: a connection when `redis=` is set (resolved at configuration time, like
/// upstream servers, with the password file read and the TLS context made); without it the
/// zone only ticks, measuring the node alone.
pub fn driver(cf: &mut ngx_conf_t, p: &RateZoneParams) -> Result<Driver, ConfigError> {
    let label = format!("smart_limit_rate_zone \"{}\"", p.name);
    let client = match p.redis.configured() {
        true => {
            let cfg = ClientConfig::new(
                cf,
                &p.redis,
                p.timeout_ms,
                vec![smart_limit_core::rate::SyncScript::load_command()],
                &label,
                "the node's last fleet picture, aging toward its local cap",
            )?
            .retry_within(p.interval_ms);
            Some(Client::new(cfg))
        }
        false => None,
    };
    Ok(Driver::new(client, p.interval_ms, 1, label))
}

impl Synced for RateZone {
    type Job = SyncArgs;
    type Answer = FleetPicture;

    fn driver(&self) -> Option<&Driver> {
        Some(&self.sync)
    }

    fn lead(&self, me: Leader, now: u64) -> bool {
        let stale = self.params.stale_ms();
        self.locked(|s| s.leadership().lead(me, now, stale))
            .unwrap_or(false)
    }

    fn resign(&self, me: Leader) {
        let _ = self.locked(|s| s.leadership().resign(me));
    }

    fn step(&self, now: u64) {
        if let Some(s) = self.shared() {
            s.measure(now, &self.cfg);
        }
    }

    fn take(&'static self, now: u64, _generation: u32) -> Option<SyncArgs> {
        // The script fences a node's reports by their sequence number, which grows across
        // reloads (the zone's memory carries it): no generation needed.
        self.shared()?.next_sync(now, &self.cfg)
    }

    fn request(&self, job: &SyncArgs, form: Form) -> Vec<u8> {
        self.script.call(form, job)
    }

    fn answer(value: &Value) -> Result<FleetPicture, ReplyError> {
        sync_reply(value)
    }

    fn apply(&self, job: SyncArgs, picture: FleetPicture, now: u64) -> bool {
        let _ = self.locked(|s| s.apply_answer(&picture, job.seq, now, &self.cfg));
        false
    }

    fn failed(&self, _job: Option<SyncArgs>, _now: u64) {
        // Cumulative counters: the next report covers what this one would have. The picture
        // ages at the next step.
        if let Some(s) = self.shared() {
            s.sync_failed();
        }
    }
}

impl RateZone {
    /// Runs `f` on the zone's state under the zone's lock (nginx's slab mutex): the election
    /// and the applied pictures, so two workers never both lead and a late answer never
    /// lands between another's check and apply. The request path reads atomics, no lock.
    fn locked<R>(&self, f: impl FnOnce(&RateShared) -> R) -> Option<R> {
        let shared = self.shared()?;
        let slab = self.slab()?;
        let _locked = slab.lock();
        Some(f(shared))
    }
}
