//! `max_active=auto` on a fleet ([S26], `smart_limit_core::capacity::fleet`): what this node
//! tells Redis with the calls it makes anyway (a central room's visits, a synced node's call
//! beside its sync), what it does with the answer, and the operator's pin on every store.

use ngx::ffi::NGX_LOG_NOTICE;
use ngx::ngx_log_error;
use smart_limit_core::capacity::control::{Load, Stepped, Window};
use smart_limit_core::capacity::fleet::{Fleet, PinOp, Tell};
use smart_limit_core::capacity::Auto;
use smart_limit_core::redis::steer::{steer_reply, SteerCall};
use smart_limit_core::redis::KEY_TTL_FLOOR_MS;

use super::{Answer, Store, StoreError, Zone};
use crate::clock::now_ms;
use crate::redis::Client;

impl Zone {
    /// What a call to Redis tells the fleet's steering: this node's counts since its last call
    /// and the value its rule gave for the window its last call closed. None: the room is not
    /// `auto`, a running event's own `max_active` rules now (the counts wait), or this worker
    /// told the fleet less than `every_ms` ago (a central room's visits:
    /// [`TELL_MS`](smart_limit_core::capacity::fleet::TELL_MS)).
    pub(super) fn steer_tell(&self, event_rules: bool, now: u64, every_ms: u64) -> Option<Tell> {
        let st = self.params.auto.and(self.shm.steering())?;
        if event_rules || now.saturating_sub(self.steer_told_at.get()) < every_ms {
            return None;
        }
        self.steer_told_at.set(now);
        Some(Tell {
            told: st.take_told(),
            answer: self.steer_answer.take(),
            pin: PinOp::Keep,
        })
    }

    /// The call that carried `t` got no answer: its counts go with the next one, and so does
    /// its value unless a newer one came meanwhile.
    pub(super) fn steer_told_back(&self, t: Tell) {
        self.steer_told_at.set(0);
        if let Some(st) = self.shm.steering() {
            st.give_back(t.told);
        }
        if self.steer_answer.get().is_none() {
            self.steer_answer.set(t.answer);
        }
    }

    /// The fleet's answer: its value is this node's from now on (its decisions, and its own
    /// while Redis is away); a window the call closed is this node's to judge, with the room's
    /// `load` as the call saw it.
    pub(super) fn steer_heard(&self, f: &Fleet, load: Load) {
        let (Some(auto), Some(st)) = (self.params.auto, self.shm.steering()) else {
            return;
        };
        st.mirror(f);
        let Some((answer, moved)) = f.settle(load, &auto) else {
            return;
        };
        self.steer_answer.set(Some(answer));
        // Brought with this worker's next call, whatever TELL_MS says.
        self.steer_told_at.set(0);
        if let Some((_, window)) = f.closed {
            self.log_auto_move(&moved, &window, &auto);
        }
    }

    /// Pins `max_active=auto` (Some) or gives it back to the controller (None): for the whole
    /// fleet on a Redis store (one call; every node reads the pin with its next call).
    pub fn pin_max_active(&'static self, pin: Option<u64>) -> Answer<Result<(), StoreError>> {
        let (Some(auto), Some(st)) = (self.params.auto, self.shm.steering()) else {
            return Answer::Now(Err(StoreError::Redis("max_active is not auto".into())));
        };
        let (client, call, ttl): (&Client, &SteerCall, u64) = match &self.store {
            Store::Shm => {
                st.pin(pin);
                return Answer::Now(Ok(()));
            }
            Store::Central(rs) => (rs.client(), rs.steer_call(), KEY_TTL_FLOOR_MS),
            Store::Synced(fs) => match fs.client() {
                Some(c) => (c, fs.steer_call(), fs.cfg.key_ttl_ms()),
                None => return Answer::Now(Err(StoreError::Redis("no Redis".into()))),
            },
        };
        if !client.available(now_ms()) {
            return Answer::Now(Err(StoreError::Redis(format!(
                "{} is not answering",
                client.label()
            ))));
        }
        let t = Tell {
            pin: pin.map_or(PinOp::Release, PinOp::Pin),
            ..Tell::default()
        };
        Answer::Later(Box::pin(async move {
            let reply = client.eval(|form| call.call(form, &auto, &t, 0, ttl)).await;
            let value = reply.map_err(|e| StoreError::Redis(e.to_string()))?;
            match steer_reply(&value) {
                Ok(f) => {
                    client.reply_was_good();
                    st.mirror(&f);
                    Ok(())
                }
                Err(e) => Err(StoreError::Redis(e.to_string())),
            }
        }))
    }

    /// A step that changed the value: logged at `notice` when it changed direction.
    pub(crate) fn log_auto_move(&self, moved: &Stepped, window: &Window, auto: &Auto) {
        if moved.turned {
            ngx_log_error!(
                NGX_LOG_NOTICE,
                crate::log::cycle_log(),
                "smart_limit_zone \"{}\": max_active=auto {} from {} to {} ({}: {} of {} \
                 responses over {} ms, {} failed)",
                self.params.name,
                if moved.why.up() { "rises" } else { "falls" },
                moved.from,
                moved.to,
                moved.why.reason(),
                window.slow,
                window.n,
                auto.target_ms,
                window.errors
            );
        }
    }
}
