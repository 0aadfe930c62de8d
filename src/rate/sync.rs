//! Once an interval, per node: measure, and meet the fleet.
//!
//! Every worker starts a ticker per rate zone (`crate::ticker`); ticks fall on multiples of the
//! interval on the wall clock, the same instants on every node. At each tick the worker asks the
//! zone whether it leads ([`RateShared::lead`]: one worker per node, taken over when the
//! leader stops beating or when a reload brings newer workers). The leader measures the node's
//! offered rate and sets the probability from the freshest picture ([`RateShared::tick`]);
//! with `redis=` it then sends the node's cumulative counters in one script call on the zone's
//! connection (the same client as the room's Redis store) and applies the fleet's picture
//! when the reply comes. A sync gets `timeout=` (below the interval) to answer, or it is
//! abandoned (the client fails it and closes the connection), and the next one is not sent
//! while one is in flight: two syncs of a node never overlap. An exiting worker resigns.

use core::ffi::c_void;

use ngx::ffi::{ngx_conf_t, NGX_LOG_ERR};
use ngx::ngx_log_error;
use smart_limit_core::rate::{sync_reply, RateZoneParams, SyncScript};
use smart_limit_core::redis::ReplyError;
use smart_limit_core::sync::leader::Leader;

use super::RateZone;
use crate::clock::now_ms;
use crate::redis::{Client, ClientConfig};

/// A rate zone's way to the fleet: the connection (per worker) and the script.
pub struct Fleet {
    client: Client,
    script: SyncScript,
}

impl Fleet {
    /// Resolves the Redis addresses (at configuration time, like upstream servers), reads
    /// the password file and makes the TLS context.
    pub fn new(cf: &mut ngx_conf_t, p: &RateZoneParams) -> Result<Fleet, String> {
        let cfg = ClientConfig::new(
            cf,
            &p.redis,
            p.timeout_ms,
            vec![SyncScript::load_command()],
            &format!("smart_limit_rate_zone \"{}\"", p.name),
            "the node's last fleet picture, aging toward its local cap",
        )?
        .retry_within(p.interval_ms);
        Ok(Fleet {
            client: Client::new(cfg),
            script: SyncScript::new(p),
        })
    }
}

/// A worker starts: seeds the zone's generator and starts its ticker (the process hooks call
/// this for every rate zone).
pub fn start_worker(zone: &'static RateZone) {
    zone.rng
        .set(smart_limit_core::util::random::u64().unwrap_or(0x9e37_79b9_7f4a_7c15) | 1);
    let owner = (zone as *const RateZone).cast::<c_void>();
    zone.ticker.start(owner, on_tick, zone.params.interval_ms);
}

/// A worker exits: it leads no more, so another one syncs at its next tick.
pub fn stop_worker(zone: &'static RateZone) {
    if let Some(s) = zone.shared() {
        s.leadership().resign(me(zone));
    }
    zone.ticker.stop();
}

fn me(zone: &RateZone) -> Leader {
    crate::ticker::this_worker(zone.generation.get())
}

fn on_tick(owner: *const c_void, shutting_down: bool) {
    // SAFETY: the ticker's owner is the zone start_worker gave it, in the cycle pool.
    let Some(zone) = (unsafe { owner.cast::<RateZone>().as_ref() }) else {
        return;
    };
    if shutting_down {
        if let Some(s) = zone.shared() {
            s.leadership().resign(me(zone));
        }
        return;
    }
    tick(zone);
}

/// One tick of one worker.
fn tick(zone: &'static RateZone) {
    let Some(shared) = zone.shared() else { return };
    let now = now_ms();
    if !shared
        .leadership()
        .lead(me(zone), now, zone.params.stale_ms())
    {
        return;
    }
    let Some(args) = shared.tick(now, &zone.cfg) else {
        return;
    };
    let Some(fleet) = &zone.redis else { return };
    if zone.in_flight.get() {
        // Cannot happen while timeout < interval; never overlap anyway.
        return;
    }
    if !fleet.client.available(now) {
        // Backing off after a failure (the client logged it): the picture ages meanwhile.
        shared.sync_failed();
        return;
    }
    zone.in_flight.set(true);
    ngx::async_::spawn(async move {
        let reply = fleet
            .client
            .eval(|form| fleet.script.call(form, &args))
            .await;
        zone.in_flight.set(false);
        let picture = match reply {
            Ok(v) => sync_reply(&v),
            // No reply (timeout, refused, reset): the client has logged the burst.
            Err(_) => {
                shared.sync_failed();
                return;
            }
        };
        match picture {
            Ok(p) => {
                fleet.client.reply_was_good();
                shared.apply(&p, now_ms(), &zone.cfg);
            }
            Err(e) => bad_reply(zone, fleet, &e),
        }
    })
    .detach();
}

/// A reply that is not the script's: logged once per burst, and the client backs off.
fn bad_reply(zone: &RateZone, fleet: &Fleet, e: &ReplyError) {
    if let Some(s) = zone.shared() {
        s.sync_failed();
    }
    fleet.client.reply_was_bad(&e.to_string());
    if let Some(repeats) = zone.problems.admit(now_ms()) {
        ngx_log_error!(
            NGX_LOG_ERR,
            crate::log::cycle_log(),
            "smart_limit_rate_zone \"{}\": sync failed: {}; the node keeps its last fleet \
             picture, aging toward its local cap ({} more since the last report)",
            zone.params.name,
            e,
            repeats
        );
    }
}
