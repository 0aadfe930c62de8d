//! `store=redis`: one room shared by a fleet of nginx nodes through Redis.
//!
//! Every decision is one call of the room script (core/src/redis/room.lua) over the worker's
//! pipelined connection ([`crate::redis::Client`]): `EVALSHA`, or `EVAL` with the text in
//! the rare case the server lost its script cache. The script's reply becomes the verdict, and
//! its figures are mirrored into this node's shared-memory room so metrics and the mode in
//! force stay in step with the fleet.
//!
//! When Redis cannot answer in time (timeout, refused, reset, garbage, an error reply, a reply
//! of the wrong shape), the zone's `on_error` policy decides, and the error is counted
//! (`store_errors`):
//! - `open`: admitted;
//! - `closed`: the waiting answer, position unknown (the client keeps its place in Redis);
//! - `local`: this node's shared-memory room decides by the same rules, alone, until Redis
//!   answers again.
//!
//! Admitted tickets need no round trip: a session seen on an admitted ticket is written to the
//! room's active set at most once per half active window per worker, without waiting for the
//! reply (see [`TouchLog`]).

use core::cell::RefCell;

use ngx::ffi::{ngx_conf_t, NGX_LOG_ERR};
use ngx::ngx_log_error;
use smart_limit_core::capacity::control::Load;
use smart_limit_core::capacity::fleet::TELL_MS;
use smart_limit_core::challenge::Bits;
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::steer::{argument, SteerCall};
use smart_limit_core::redis::{self, EventArgs, Form, Keys, Outcome, Script, SpentProof};
use smart_limit_core::redis::{Telling, TouchLog};
use smart_limit_core::room::rules::{Limits, Mode};
use smart_limit_core::room::{Counted, Mirror, Place, Verdict, Visit};
use smart_limit_core::zone::{OnError, ZoneParams};

use super::{Answer, Decision, StoreError, Zone};
use crate::clock::now_ms;
use crate::redis::{Client, ClientConfig, ConfigError};

/// The Redis side of a zone. Per worker after fork: the connection, the touch log.
pub struct RedisStore {
    client: Client,
    script: Script,
    /// `max_active=auto`'s pin, on the room's state hash (visits steer in the room script).
    steer: SteerCall,
    touches: RefCell<TouchLog>,
}

impl RedisStore {
    /// Resolves the Redis addresses (at configuration time, like upstream servers), reads
    /// the password file and makes the TLS context.
    pub fn new(
        cf: &mut ngx_conf_t,
        params: &ZoneParams,
        limits: Limits,
    ) -> Result<RedisStore, ConfigError> {
        let policy = match params.on_error {
            OnError::Open => "on_error=open (admitted)",
            OnError::Closed => "on_error=closed (told to wait)",
            OnError::Local => "on_error=local (this node decides alone)",
        };
        let cfg = ClientConfig::new(
            cf,
            &params.redis,
            params.timeout_ms,
            // (The steering's own script only pins: loaded where there is something to pin.)
            match params.auto {
                Some(_) => vec![Script::load_command(), SteerCall::load_command()],
                None => vec![Script::load_command()],
            },
            &format!("smart_limit zone \"{}\"", params.name),
            policy,
        )?;
        Ok(RedisStore {
            client: Client::new(cfg),
            script: Script::new(&params.prefix, &params.name, limits, params.max_line)
                .with_pressure(params.challenge == Some(Bits::Auto)),
            touches: RefCell::new(TouchLog::default()),
            steer: SteerCall::new(Keys::new(&params.prefix, &params.name).state),
        })
    }

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    pub(super) fn steer_call(&self) -> &SteerCall {
        &self.steer
    }
}

impl Zone {
    pub(super) fn redis_visit(
        &'static self,
        rs: &'static RedisStore,
        v: Visit,
        spent: Option<SpentProof>,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>> {
        // Flood control is paid in the script call, from the fleet's budget (a visit with a
        // flood key carries its bucket); this node's budget only when Redis does not answer.
        if !rs.client.available(now) {
            // Backing off after a failure: decide now, without the network.
            return Answer::Now(self.store_failed(v, now, None));
        }
        let ev = self.event_now(now);
        let limits = self.limits_in(ev.as_ref());
        let event_rules = ev
            .as_ref()
            .is_some_and(|(e, now)| now.started && e.spec.max_active.is_some());
        let tell = self.steer_tell(event_rules, now, TELL_MS);
        let ev = ev.map(|(e, now)| EventArgs {
            id: now.id,
            started: now.started,
            key: match (now.started, e.spec.shuffle) {
                (false, true) => EventArgs::draw_key().unwrap_or(0),
                _ => 0,
            },
        });
        let challenges = match (rs.script.pressure, self.pressure.try_borrow_mut()) {
            (true, Ok(mut p)) => p.take_untold(),
            _ => 0,
        };
        let telling = Telling {
            challenges,
            steer: self
                .params
                .auto
                .zip(tell.as_ref())
                .map(|(auto, t)| argument(&auto, t)),
        };
        Answer::Later(Box::pin(async move {
            let le = (&limits, ev);
            let reply = rs
                .client
                .eval(|form| rs.script.visit_telling(form, &v, 0, le, spent, &telling))
                .await;
            let now = now_ms();
            let outcome = reply.map(|value| redis::visit_outcome(&value, &v));
            match (&outcome, tell) {
                (Ok(Ok(o)), _) => {
                    if let Some(f) = &o.steer {
                        let load = Load {
                            active: o.active,
                            waiting: o.queue_len,
                        };
                        self.steer_heard(f, load);
                    }
                }
                (_, Some(t)) => self.steer_told_back(t),
                (_, None) => {}
            }
            match outcome {
                Ok(Ok(o)) => {
                    rs.client.reply_was_good();
                    if let (Some(d), Ok(mut p)) = (o.pressure, self.pressure.try_borrow_mut()) {
                        p.note_fleet(now, d);
                    }
                    self.mirror(rs, &o, v.sid, now);
                    self.remember(&o.verdict, v.sid, now);
                    Ok(o.verdict.into())
                }
                // A reply, but not one the script gives: Redis is not well (logged here, and
                // the client backs off as after any failure).
                Ok(Err(e)) => {
                    rs.client.reply_was_bad(&e.to_string());
                    self.store_failed(v, now, Some(&e))
                }
                // No reply: the client has logged the failure burst.
                Err(_) => self.store_failed(v, now, None),
            }
        }))
    }

    /// A script reply: this node's share of the counters, and the room's figures.
    fn mirror(&self, rs: &RedisStore, o: &Outcome, sid: u64, now: u64) {
        let _ = self.shm.with_room(|room| {
            room.mirror_remote(&o.mirror(), now);
            // A session let in again as it is (one person, one place: [S29]) is no new
            // admission, here as in the shared-memory room.
            let again = room.is_admitted(sid, now, &self.limits);
            if let Verdict::Admit { .. } = o.verdict {
                // Also known locally, for decisions taken here while Redis is away.
                room.touch(sid, now);
            }
            let c = room.counters_mut();
            match o.verdict {
                Verdict::Admit { .. } if again => {}
                Verdict::Admit { .. } => c.admitted += 1,
                Verdict::Wait(_) => c.waited += 1,
                Verdict::Refuse(_) => c.rejected += 1,
                Verdict::Throttled { .. } => c.throttled += 1,
            }
            if o.joined {
                c.queued += 1;
            }
            c.expired += o.expired;
        });
        if let Verdict::Admit { .. } = o.verdict {
            // The admission itself put the session in the active set.
            if let Ok(mut t) = rs.touches.try_borrow_mut() {
                t.note(sid, now);
            }
        }
    }

    /// [S10]: Redis did not decide; the zone's policy does. A visit that still has its flood
    /// key (Redis took no payment for its place) pays from this node's budget first.
    pub(super) fn store_failed(
        &self,
        v: Visit,
        now: u64,
        bad_reply: Option<&redis::ReplyError>,
    ) -> Result<Decision, StoreError> {
        let _ = self
            .shm
            .with_room(|room| room.counters_mut().store_errors += 1);
        // Connection problems are logged by the client, once per burst; bad replies here,
        // once per burst too.
        if let Some(e) = bad_reply {
            if let Some(repeats) = self.problems.admit(now) {
                ngx_log_error!(
                    NGX_LOG_ERR,
                    crate::log::cycle_log(),
                    "smart_limit zone \"{}\": {}; the decision followed on_error ({} more \
                     since the last report)",
                    self.params.name,
                    e,
                    repeats
                );
            }
        }
        if self.params.on_error != OnError::Local {
            // (Under on_error=local the node's room pays, as it decides the place itself.)
            if let Some(throttled) = self.flood_refused(&v, now) {
                return Ok(throttled.into());
            }
        }
        match self.params.on_error {
            OnError::Open => {
                let _ = self.shm.with_room(|room| {
                    room.touch(v.sid, now);
                    room.counters_mut().admitted += 1;
                });
                Ok(Decision {
                    verdict: Verdict::Admit { sid: v.sid },
                    by_policy: true,
                })
            }
            OnError::Closed => {
                let _ = self.shm.with_room(|room| room.counters_mut().waited += 1);
                Ok(Decision {
                    verdict: Verdict::Wait(Place {
                        sid: v.sid,
                        // The ticket keeps its place in Redis for when it answers again.
                        qnum: v.qnum,
                        position: 0,
                        queue_len: 0,
                        eta_secs: None,
                        resumed: false,
                        counted: Counted::All,
                    }),
                    by_policy: true,
                })
            }
            // The node's room decides, flood control included (a key still there was not
            // paid for in Redis).
            OnError::Local => Ok(Decision {
                verdict: self.shm.with_room(|room| self.room_visit(room, v, now))?,
                by_policy: true,
            }),
        }
    }

    /// A valid admitted ticket: counted locally, and in Redis at most once per half window.
    /// The request does not wait: the write goes out with the round's other commands and its
    /// reply (the room's active count) only refreshes the mirrored figures. Returns when Redis
    /// last heard of the session from this worker (`now` while Redis is away: the node's room
    /// counts then), the furthest its ticket may be renewed.
    pub(super) fn redis_pass(&'static self, rs: &'static RedisStore, sid: u64, now: u64) -> u64 {
        if !rs.client.available(now) {
            return now;
        }
        let every = (self.limits.active_window_ms / 2).max(1);
        if let Ok(mut t) = rs.touches.try_borrow_mut() {
            if !t.due(sid, now, every) {
                return t.written_at(sid).unwrap_or(now);
            }
        }
        let cmd = rs.script.touch(Form::Sha, sid, 0);
        ngx::async_::spawn(async move {
            if let Ok(m) = rs
                .client
                .request(cmd)
                .await
                .map(|v| redis::touch_outcome(&v))
            {
                self.mirror_figures(rs, m);
            }
        })
        .detach();
        now
    }

    /// The origin ended a session: out of the room's active set at once (without waiting).
    pub(super) fn redis_revoke(&'static self, rs: &'static RedisStore, sid: u64) {
        if !rs.client.available(now_ms()) {
            return;
        }
        let cmd = rs.script.revoke(Form::Sha, sid, 0);
        ngx::async_::spawn(async move {
            if let Ok(r) = rs
                .client
                .request(cmd)
                .await
                .map(|v| redis::revoke_outcome(&v))
            {
                self.mirror_figures(rs, r.map(|(_, m)| m));
            }
        })
        .detach();
    }

    fn mirror_figures(&self, rs: &RedisStore, m: Result<Mirror, redis::ReplyError>) {
        match m {
            Ok(m) => {
                rs.client.reply_was_good();
                let _ = self.shm.with_room(|room| room.mirror_remote(&m, now_ms()));
            }
            // NOSCRIPT is normal after a script flush (the next decision loads it again).
            Err(redis::ReplyError::NoScript) => {}
            Err(e) => rs.client.reply_was_bad(&e.to_string()),
        }
    }

    pub(super) fn redis_set_mode(
        &'static self,
        rs: &'static RedisStore,
        mode: Option<Mode>,
    ) -> Answer<Result<(), StoreError>> {
        if !rs.client.available(now_ms()) {
            return Answer::Now(Err(StoreError::Redis(format!(
                "{} is not answering",
                rs.client.label()
            ))));
        }
        Answer::Later(Box::pin(async move {
            let reply = rs.client.eval(|form| rs.script.set_mode(form, mode)).await;
            match reply {
                Ok(Value::Array(_)) => {
                    rs.client.reply_was_good();
                    let code = mode.map_or(0, Mode::code);
                    self.shm.with_room(|room| room.set_mode_override(code))?;
                    Ok(())
                }
                Ok(other) => Err(StoreError::Redis(match other.error_text() {
                    Some(e) => e,
                    None => format!("unexpected {} reply", other.kind()),
                })),
                Err(e) => Err(StoreError::Redis(e.to_string())),
            }
        }))
    }
}
