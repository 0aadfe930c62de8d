//! `max_active=auto` on a synced room ([S26]): once an interval, beside its sync and on the
//! same connection, the leader tells the fleet's steering what the node measured
//! (`smart_limit_core::redis::steer`, its own small script: the sync's script and its Rust
//! twin stay as they are); the answer is the fleet's value, and now and then a window for
//! this node to judge. The sync itself then shares out that value's places.

use smart_limit_core::capacity::control::Load;
use smart_limit_core::redis::steer::steer_reply;
use smart_limit_core::util::time::window_end;

use super::FleetStore;
use crate::store::Zone;

impl Zone {
    pub(super) fn send_steer(&'static self, fs: &'static FleetStore, now: u64) {
        let Some(auto) = self.params.auto else { return };
        let Some(client) = fs.client() else { return };
        // (A capped report's rest follows its sync within the interval: once is enough.)
        let interval = window_end(now, fs.cfg.interval_ms);
        if fs.steered.replace(interval) == interval {
            return;
        }
        let event_rules = self
            .event_now(now)
            .is_some_and(|(e, now)| now.started && e.spec.max_active.is_some());
        let Some(tell) = self.steer_tell(event_rules, now, 0) else {
            return;
        };
        let ttl = fs.cfg.key_ttl_ms();
        ngx::async_::spawn(async move {
            let reply = client
                .eval(|form| fs.steer.call(form, &auto, &tell, 0, ttl))
                .await;
            match reply.map(|v| steer_reply(&v)) {
                Ok(Ok(f)) => {
                    client.reply_was_good();
                    // The room as the node's last picture showed the fleet's.
                    let now = crate::clock::now_ms();
                    let load = self.snapshot(now).map_or(Load::default(), |s| Load {
                        active: s.active,
                        waiting: s.queue_len,
                    });
                    self.steer_heard(&f, load);
                }
                Ok(Err(e)) => {
                    client.reply_was_bad(&format!("the steering script: {e}"));
                    self.steer_told_back(tell);
                }
                // No reply: the client has logged the burst.
                Err(_) => self.steer_told_back(tell),
            }
        })
        .detach();
    }
}
