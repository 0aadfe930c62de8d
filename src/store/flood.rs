//! Flood control for a synced room (`store=redis sync=`): the fleet's budget, in Redis.
//!
//! A synced room decides on this node's shared memory, so a budget kept there would give one
//! address a budget per node. A client taking its place (its first return with a ticket: the
//! only visit with a flood key) is the one moment the node asks Redis: one small script call
//! ([`smart_limit_core::flood`]) pays for the place from the address's bucket shared by the
//! fleet, and the visit goes on to the node's room without a key (paid once). The request
//! waits for that call (the handler suspends it; the worker goes on), at most `timeout=`.
//! When Redis cannot answer (backing off, timeout, refused, a bad reply), the visit keeps its
//! key and this node's budget pays instead (`Zone::flood_refused` in the room's first step),
//! as before the fleet had one.
//!
//! The connection is this store's own (one per worker, opened on the first place taken), so
//! the fleet's sync and pool draws keep theirs: a slow flood call never delays a sync.
//!
//! The central room (`store=redis` without `sync=`) pays inside its own script call
//! (`store::redis`): no connection here.

use ngx::ffi::{ngx_conf_t, NGX_LOG_ERR};
use ngx::ngx_log_error;
use smart_limit_core::flood::{take_reply, FloodScript, Take};
use smart_limit_core::redis::ReplyError;
use smart_limit_core::room::gcra::Rate;
use smart_limit_core::room::{Verdict, Visit};
use smart_limit_core::zone::ZoneParams;

use super::fleet::FleetStore;
use super::{Answer, Decision, StoreError, Zone};
use crate::clock::now_ms;
use crate::redis::{Client, ClientConfig};

/// The fleet's flood budget of a synced zone. Per worker after fork: the connection.
pub struct FloodStore {
    client: Client,
    script: FloodScript,
}

impl FloodStore {
    /// Resolves the Redis addresses (at configuration time, like upstream servers), reads the
    /// password file and makes the TLS context, as the zone's other Redis connection does.
    pub fn new(cf: &mut ngx_conf_t, params: &ZoneParams, rate: Rate) -> Result<FloodStore, String> {
        let cfg = ClientConfig::new(
            cf,
            &params.redis,
            params.timeout_ms,
            vec![FloodScript::load_command()],
            &format!("smart_limit zone \"{}\" (flood control)", params.name),
            "this node's flood budget",
        )?;
        Ok(FloodStore {
            client: Client::new(cfg),
            script: FloodScript::new(&params.prefix, &params.name, rate),
        })
    }
}

impl Zone {
    /// `sync=`: a client taking its place pays from the fleet's budget first; then the node's
    /// room decides (without the key when Redis took the payment, with it when Redis could
    /// not answer).
    pub(super) fn fleet_flood_visit(
        &'static self,
        fs: &'static FleetStore,
        v: Visit,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>> {
        let (Some(ff), Some(key)) = (&self.fleet_flood, v.flood_key) else {
            return self.fleet_visit(fs, v, now);
        };
        if !ff.client.available(now) {
            // Backing off after a failure: the node's budget, without the network.
            self.count_flood_failure();
            return self.fleet_visit(fs, v, now);
        }
        Answer::Later(Box::pin(async move {
            let reply = ff.client.eval(|form| ff.script.take(form, key, 0)).await;
            let now = now_ms();
            let v = match reply.map(|value| take_reply(&value)) {
                Ok(Ok(Take::Paid)) => {
                    ff.client.reply_was_good();
                    Visit {
                        flood_key: None,
                        ..v
                    }
                }
                Ok(Ok(Take::Refused { retry_ms })) => {
                    ff.client.reply_was_good();
                    return Ok(self.fleet_throttled(retry_ms, now).into());
                }
                // A reply, but not one the script gives: Redis is not well (the client backs
                // off as after any failure); the node's budget decides.
                Ok(Err(e)) => {
                    ff.client.reply_was_bad(&e.to_string());
                    self.flood_bad_reply(&e, now);
                    self.count_flood_failure();
                    v
                }
                // No reply: the client has logged the failure burst.
                Err(_) => {
                    self.count_flood_failure();
                    v
                }
            };
            match self.fleet_visit(fs, v, now) {
                Answer::Now(result) => result,
                Answer::Later(decision) => decision.await,
            }
        }))
    }

    /// The fleet's budget refused the place: counted on this node, as its own budget would.
    fn fleet_throttled(&self, retry_ms: u64, now: u64) -> Verdict {
        let queue_len = self
            .shm
            .with_room(|room| {
                room.counters_mut().throttled += 1;
                room.snapshot(now, &self.limits).queue_len
            })
            .unwrap_or(0);
        Verdict::Throttled {
            retry_ms,
            queue_len,
        }
    }

    fn count_flood_failure(&self) {
        let _ = self
            .shm
            .with_room(|room| room.counters_mut().store_errors += 1);
    }

    fn flood_bad_reply(&self, e: &ReplyError, now: u64) {
        if let Some(repeats) = self.problems.admit(now) {
            ngx_log_error!(
                NGX_LOG_ERR,
                crate::log::cycle_log(),
                "smart_limit zone \"{}\": flood control: {}; this node's flood budget decided \
                 ({} more since the last report)",
                self.params.name,
                e,
                repeats
            );
        }
    }
}
