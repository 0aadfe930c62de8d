//! `store=redis sync=TIME`: the fleet's room, decided on every node's shared memory ([S12]).
//!
//! Cloudflare's design: each location decides on its own counters, the fleet's state is
//! gathered in the background, and a global pool covers what a location's share cannot.
//! - **The request path** never waits for Redis. It is this node's shared memory: the room
//!   (mode, admitted sessions, counters, flood control: the node's own budget, the fleet's
//!   settled in the sync, see `Zone::fleet_flood_refused`) and, beside it in the same zone and
//!   under the same lock, the node's side of the fleet's room ([`FleetNode`]: cursor, share,
//!   positions, what to report). A client whose turn it is (it arrived at or before the
//!   fleet's cursor) when this node's share of the interval's admissions is used up is told to
//!   come back in a moment, and the node asks the fleet's pool for places in the background
//!   (one atomic script call, "draw", at most one in flight per node).
//! - **The sync**, through the one sync driver (`crate::sync`, the rate zones' too): every
//!   worker ticks on the wall clock's multiples of the interval; the one that leads (elected
//!   in the zone) sends what the node saw since its last sync in one script call ("sync") and
//!   applies the fleet's picture that comes back. A sync is abandoned at `timeout=` (shorter
//!   than the interval), so two never overlap; a failed one gives its report back for the next
//!   and lets the node's picture age (its share moving toward an equal split, its cursor
//!   moving on at the speed the line last moved).
//! - **Before the first picture** (a node that has not met the fleet since its zone was made:
//!   a start, a restart, a binary upgrade, a node added) the node decides nothing alone
//!   ([S21]): a request that needs a decision sends the node's first sync at once (or finds
//!   one out) and waits for its picture, suspended, at most `timeout=`. Only a sync that fails
//!   hands it to the zone's `on_error` policy, under which a node that never met the fleet
//!   lets nobody in alone (`on_error=local` queues). A worker's crash or a reload keeps the
//!   zone, and with it the picture.
//!
//! The rules are `smart_limit_core::fleet` (pure, unit-tested, simulated in `sim/`) and its
//! script `core/src/fleet/script.lua`.

use core::future::Future;
use core::task::Poll;
use core::time::Duration;

use ngx::ffi::ngx_conf_t;
use smart_limit_core::challenge::FLEET_FRESH_MS;
use smart_limit_core::fleet::tally::TallyScript;
use smart_limit_core::fleet::MAX_SYNCS_PER_INTERVAL;
use smart_limit_core::fleet::{
    draw_reply, picture_reply, Ask, Drawn, Fence, FleetConfig, FleetNode, FleetScript,
    FleetSnapshot, FleetVerdict, Report, RoomPicture, SyncAnswer, Waiter,
};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::steer::SteerCall;
use smart_limit_core::redis::{Form, ReplyError, SpentProof};
use smart_limit_core::room::rules::{Limits, Mode};
use smart_limit_core::room::{Counted, Mirror, PassVerdict, Refusal, Verdict, Visit};
use smart_limit_core::sync::leader::Leader;
use smart_limit_core::ticket::Ticket;
use smart_limit_core::util::time::window_end;
use smart_limit_core::zone::{OnError, ZoneParams};

use super::{Answer, Decision, StoreError, Zone};
use crate::clock::now_ms;
use crate::redis::{Client, ClientConfig, ConfigError};
use crate::sync::{Driver, Synced};

mod picture;
mod steer;
mod tally;
mod verdict;

use tally::TallyCalls;
use verdict::{step, visited, waiting};

/// How often a request waiting for the node's first picture looks whether it came (another
/// worker may have sent the sync, so there is nothing to wake this one: it looks).
const FIRST_PICTURE_LOOK: Duration = Duration::from_millis(5);

/// How long a request waits for the pool draw it sent, at most (Redis answers a draw in well
/// under a millisecond; a hung Redis must not hold the request for the whole `timeout=`).
pub(super) const DRAW_WAIT: Duration = Duration::from_millis(50);

/// The fleet side of a zone with `sync=`: the script, and the driver (per worker after
/// fork: the connection, the timer, the sync in flight).
pub struct FleetStore {
    script: FleetScript,
    /// The arrival-bucket counts' calls ([S22]).
    tally: TallyCalls,
    /// `max_active=auto`'s calls: the fleet's value ([S26]).
    steer: SteerCall,
    /// Per worker: the interval (its end) of the last steering call, one an interval.
    steered: core::cell::Cell<u64>,
    pub cfg: FleetConfig,
    pub sync: Driver,
}

impl FleetStore {
    /// Resolves the Redis addresses (at configuration time, like upstream servers), reads the
    /// password file and makes the TLS context.
    pub fn new(
        cf: &mut ngx_conf_t,
        params: &ZoneParams,
        interval_ms: u64,
    ) -> Result<FleetStore, ConfigError> {
        let label = format!("smart_limit zone \"{}\"", params.name);
        let client = ClientConfig::new(
            cf,
            &params.redis,
            params.timeout_ms,
            [FleetScript::load_command(), TallyScript::load_command()]
                .into_iter()
                .chain(params.auto.map(|_| SteerCall::load_command()))
                .collect(),
            &label,
            "the node's last picture of the fleet (its part of the sessions leaving)",
        )?
        .retry_within(interval_ms);
        let cfg = FleetConfig {
            interval_ms,
            max_active: params.max_active,
            active_window_ms: params.active_window_ms,
            presence_ms: params.presence_ms,
            keep_ms: params.effective_keep_ms(),
            max_line: params.max_line,
        };
        let sync = Driver::new(
            Some(Client::new(client)),
            interval_ms,
            MAX_SYNCS_PER_INTERVAL,
            label,
        );
        let flood = params.flood.map(|f| f.rate());
        Ok(FleetStore {
            script: FleetScript::new(&params.prefix, &params.name, cfg).with_flood(flood),
            tally: TallyCalls::new(&params.prefix, &params.name),
            steer: SteerCall::synced(&params.prefix, &params.name),
            steered: core::cell::Cell::new(0),
            cfg,
            sync,
        })
    }

    /// The fleet's settings under the room's limits of the moment (a running event's
    /// `max_active`, see [`Zone::limits_at`]).
    fn cfg_under(&self, limits: &Limits) -> FleetConfig {
        FleetConfig {
            max_active: limits.max_active,
            ..self.cfg
        }
    }

    pub(super) fn steer_call(&self) -> &SteerCall {
        &self.steer
    }

    /// The connection (a synced room always has one).
    pub(super) fn client(&self) -> Option<&Client> {
        self.sync.client()
    }
}

/// What the node's side of the fleet said.
enum Step {
    Done(Verdict),
    /// No picture yet: the zone's on_error policy.
    Unknown,
}

/// A pool draw to send: for this node (after its last sync sent), this many places.
#[derive(Clone, Copy)]
struct Draw {
    node_id: u64,
    seq: u64,
    /// The places wanted, and the oldest arrival among the clients they are for.
    ask: Ask,
}

/// A visit under the zone's lock: decided, perhaps with a pool draw to send for clients turned
/// away earlier; or turned away itself, its request to wait for the draw it sent.
enum Visited {
    Decided(Step, Option<Draw>),
    Drawing(Draw),
    /// Its turn as the node's picture ends: it waits for the next (the window it saw).
    NextPicture(u64),
    /// Its turn, turned away while another request's pool draw is out: it waits for that
    /// draw's answer.
    AwaitDraw,
}

impl Zone {
    /// A client without a valid admitted ticket, decided on this node. Only a client whose
    /// turn it is, when the node's share of the interval is used up, waits for Redis: for the
    /// draw from the fleet's pool its visit sent (one atomic call, bounded by `timeout=`).
    pub(super) fn fleet_visit(
        &'static self,
        fs: &'static FleetStore,
        v: Visit,
        spent: Option<SpentProof>,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>> {
        let limits = self.limits_at(now);
        // Flood control: paid here, once (the rest of the visit carries no key).
        let v = match self.fleet_flood_refused(&v, now) {
            Some(throttled) => return Answer::Now(Ok(throttled.into())),
            None => Visit {
                flood_key: None,
                ..v
            },
        };
        let w = Waiter {
            sid: v.sid,
            arrival: v.arrival,
            new_place: v.qnum == 0,
        };
        let cfg = fs.cfg_under(&limits);
        let visited = self.shm.with_fleet(|room, node| {
            if let Some(admit) = room.admitted_already(&v, now, &limits) {
                return Visited::Decided(Step::Done(admit), None);
            }
            let (verdict, draw) = match room.mode(&limits) {
                Mode::Reject => {
                    room.counters_mut().rejected += 1;
                    return Visited::Decided(Step::Done(Verdict::Refuse(Refusal::Closed)), None);
                }
                Mode::Passthrough => (FleetVerdict::Admit, None),
                // Everyone waits: the line is still reported, so positions stay true.
                Mode::QueueAll => (node.hold(w, now, &cfg), None),
                // The fleet's line is by arrival; the lottery has no fleet-wide form.
                Mode::Fifo | Mode::Random => match node.visit(w, now, &cfg) {
                    // (Its draw, if any, goes by the next picture.)
                    FleetVerdict::NextPicture => (FleetVerdict::NextPicture, None),
                    verdict => (verdict, self.draw_to_send(fs, node, now, &cfg)),
                },
            };
            // A proof that took a new place: the other nodes refuse it from their next
            // picture on.
            if let (Some(p), true) = (spent, w.new_place) {
                if matches!(
                    verdict,
                    FleetVerdict::Admit | FleetVerdict::Wait { .. } | FleetVerdict::NextPicture
                ) {
                    node.spent_here(p.key, now.saturating_add(p.ttl_ms));
                }
            }
            if verdict == FleetVerdict::NextPicture {
                return Visited::NextPicture(node.picture_window());
            }
            let turned_away = matches!(
                verdict,
                FleetVerdict::Wait {
                    eta_secs: Some(0),
                    ..
                }
            );
            if turned_away && draw.is_none() && node.draw_out(now, &cfg) {
                return Visited::AwaitDraw;
            }
            visited(room, &v, verdict, draw, now)
        });
        let (step, draw) = match visited {
            Ok(Visited::Decided(step, draw)) => (step, draw),
            Ok(Visited::Drawing(draw)) => return self.fleet_drawing(fs, v, draw, now),
            Ok(Visited::NextPicture(window)) => {
                return self.fleet_next_picture(fs, v, w, window, now);
            }
            Ok(Visited::AwaitDraw) => return self.fleet_await_draw(fs, v, now),
            Err(e) => return Answer::Now(Err(e)),
        };
        if let Some(d) = draw {
            // Drawn for clients turned away earlier, while another draw was out.
            self.draw_for_later(fs, d, now);
        }
        if let Step::Unknown = step {
            return self.fleet_first_picture(fs, v, w, now);
        }
        Answer::Now(self.fleet_decided(step, v, now))
    }

    /// Flood control ([S15]) on a synced node, without Redis: a client taking its place is
    /// refused one if the fleet said its key is over the fleet's budget (until the time it
    /// said), or if the node's own budget (the room's, as on one node) is spent; otherwise it
    /// pays from the node's budget and the place is counted for the fleet's, which the next
    /// syncs settle (`smart_limit_core::fleet`'s `flood.rs`). Redis away: the node's own
    /// budget decides, and the fleet's refusals lapse at their time.
    fn fleet_flood_refused(&self, v: &Visit, now: u64) -> Option<Verdict> {
        let key = v.flood_key?;
        self.limits.flood?;
        let refused = self.shm.with_fleet(|room, node| {
            let retry_ms = match node.flood_over(key, now) {
                Some(ms) => {
                    room.counters_mut().throttled += 1;
                    ms
                }
                None => match room.flood_check(key, now, &self.limits) {
                    Err(ms) => ms,
                    Ok(()) => {
                        node.flood_took(key);
                        return None;
                    }
                },
            };
            Some(Verdict::Throttled {
                retry_ms,
                queue_len: room.snapshot(now, &self.limits).queue_len,
            })
        });
        refused.ok().flatten()
    }

    /// The pool draw this node should send now, if any (none while the client backs off).
    fn draw_to_send(
        &self,
        fs: &FleetStore,
        node: &mut FleetNode,
        now: u64,
        cfg: &FleetConfig,
    ) -> Option<Draw> {
        if !fs.client()?.available(now) {
            return None;
        }
        let ask = node.take_draw(now, cfg)?;
        Some(Draw {
            node_id: node.node_id(),
            seq: node.seq(),
            ask,
        })
    }

    /// The request of a client turned away for want of share waits for the pool's answer (at
    /// most [`DRAW_WAIT`]) and claims a place it brought.
    fn fleet_drawing(
        &'static self,
        fs: &'static FleetStore,
        v: Visit,
        d: Draw,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>> {
        let want = d.ask.want;
        let draw = self.fleet_draw(fs, d, now);
        Answer::Later(Box::pin(self.claim_drawn(fs, v, want, draw)))
    }

    /// The pool's answer to a draw of `want` places waited for (at most [`DRAW_WAIT`]), then
    /// the client's claim.
    async fn claim_drawn(
        &'static self,
        fs: &'static FleetStore,
        v: Visit,
        want: u64,
        draw: impl Future<Output = Option<Drawn>> + 'static,
    ) -> Result<Decision, StoreError> {
        let mut draw = Box::pin(draw);
        let mut limit = Box::pin(ngx::async_::sleep(DRAW_WAIT));
        let answered = core::future::poll_fn(|cx| {
            if let Poll::Ready(granted) = draw.as_mut().poll(cx) {
                return Poll::Ready(Some(granted));
            }
            limit.as_mut().poll(cx).map(|()| None)
        })
        .await;
        if answered.is_none() {
            // Redis is slow: the client is told to come back in a moment; the places the
            // draw brings, if any, go to the next clients whose turn it is.
            self.drawn_later(want, draw);
        }
        let now = now_ms();
        // The places and this client's claim under one lock: no other worker takes them in
        // between.
        let step = self.shm.with_fleet(|room, node| {
            if let Some(granted) = answered {
                node.drawn(want, granted);
            }
            let limits = self.limits_at(now);
            if let Some(admit) = room.admitted_already(&v, now, &limits) {
                return Step::Done(admit);
            }
            let verdict = node.claim(v.sid, v.arrival, now, &fs.cfg_under(&limits));
            step(room, &v, verdict, now)
        })?;
        self.fleet_decided(step, v, now)
    }

    fn fleet_decided(&self, step: Step, v: Visit, now: u64) -> Result<Decision, StoreError> {
        match step {
            Step::Done(verdict) => {
                self.remember(&verdict, v.sid, now);
                Ok(verdict.into())
            }
            // A node that never met the fleet has no idea what it holds: under on_error=local
            // it lets nobody in alone, and tells each newcomer its place in this node's own
            // line; the places keep their arrival for the fleet's line when Redis answers.
            Step::Unknown if self.params.on_error == OnError::Local => {
                let verdict = self.shm.with_fleet(|room, node| {
                    room.counters_mut().store_errors += 1;
                    let (position, queue_len) = node.place_alone(v.arrival);
                    // (All it counts was seen taken here; the fleet's are not counted.)
                    let counted = Counted::Estimate { seen: position };
                    waiting(room, &v, position, queue_len, None, counted)
                })?;
                Ok(Decision {
                    verdict,
                    by_policy: true,
                })
            }
            Step::Unknown => {
                let d = self.store_failed(v, now, None)?;
                if let Verdict::Admit { sid } = d.verdict {
                    // Let in by on_error=open: the fleet counts the session and its place
                    // leaves the line at the next sync (no ghost place held for presence).
                    let _ = self
                        .shm
                        .with_fleet(|_, node| node.admitted_alone(sid, v.arrival, now));
                }
                Ok(d)
            }
        }
    }

    /// Sends a pool draw no request waits for (see [`Zone::drawn_later`]).
    fn draw_for_later(&'static self, fs: &'static FleetStore, d: Draw, now: u64) {
        self.drawn_later(d.ask.want, self.fleet_draw(fs, d, now));
    }

    /// A draw no request waits for: its places go to the next clients whose turn it is.
    fn drawn_later(&'static self, want: u64, draw: impl Future<Output = Option<Drawn>> + 'static) {
        ngx::async_::spawn(async move {
            let granted = draw.await;
            let _ = self.shm.with_fleet(|_, node| node.drawn(want, granted));
        })
        .detach();
    }

    /// The node's share is used up and clients whose turn it is were turned away: places from
    /// the fleet's pool (one atomic script call, at most one in flight per node), for
    /// [`FleetNode::drawn`]. No answer (None) is no places, and no more draws this interval.
    fn fleet_draw(
        &'static self,
        fs: &'static FleetStore,
        d: Draw,
        now: u64,
    ) -> impl Future<Output = Option<Drawn>> + 'static {
        let fence = Fence {
            node_id: d.node_id,
            generation: fs.sync.generation(),
            window: window_end(now, fs.cfg.interval_ms),
            seq: d.seq,
        };
        let ask = d.ask;
        let max_active = self.limits_at(now).max_active;
        async move {
            let client = fs.client()?;
            let reply = client
                .eval(|form| fs.script.draw(form, fence, 0, ask, max_active))
                .await;
            match reply.map(|value| draw_reply(&value)) {
                Ok(Ok(drawn)) => {
                    client.reply_was_good();
                    Some(drawn)
                }
                Ok(Err(e)) => {
                    fs.sync.bad_reply(&e);
                    None
                }
                // No reply: the client has logged the failure burst.
                Err(_) => None,
            }
        }
    }

    /// A valid admitted ticket: the room's look (mode, request rate, counted as active here),
    /// and the session reported to the fleet as active (once per half active window).
    pub(super) fn fleet_pass(
        &self,
        fs: &FleetStore,
        t: &Ticket,
        now: u64,
    ) -> Result<PassVerdict, StoreError> {
        let limits = self.limits_at(now);
        let sid = t.sid;
        self.shm.with_fleet(|room, node| {
            let pass = room.pass(sid, t.accepted_at, now, &limits);
            if matches!(pass, PassVerdict::Counted | PassVerdict::Uncounted) {
                node.saw_admitted(sid, now, &fs.cfg);
            }
            pass
        })
    }

    /// `sync=`: this node's side of the fleet's room, for metrics.
    pub fn fleet_snapshot(&self, now: u64) -> Option<FleetSnapshot> {
        self.synced()?;
        self.shm.with_fleet(|_, node| node.snapshot(now)).ok()
    }

    /// `sync=` with `challenge_bits=auto`: the fleet's pressure in the picture, in doublings,
    /// while the picture is fresh (at most three intervals old, and [`FLEET_FRESH_MS`]); a
    /// node without one (Redis away) falls back on its own view.
    pub fn fleet_pressure(&self, now: u64) -> Option<u8> {
        let fs = self.synced()?;
        let s = self.fleet_snapshot(now)?;
        let fresh = fs.cfg.interval_ms.saturating_mul(3).max(FLEET_FRESH_MS);
        s.pressure
            .filter(|_| s.sync_age_ms.is_some_and(|age| age <= fresh))
    }

    /// The fleet's picture came back for the sync of `seq`: the node decides by it (unless a
    /// newer sync was sent meanwhile), and its metrics show the fleet's line and active
    /// sessions.
    fn apply_picture(&self, p: &RoomPicture, seq: u64, now: u64) {
        let Some(fs) = self.synced() else {
            return;
        };
        let _ = self.shm.with_fleet(|room, node| {
            if !node.apply(p, seq, now, &fs.cfg) {
                return;
            }
            // Proofs spent on other nodes: refused here from now on.
            for s in &p.spent {
                room.spend_proof(s.key, now.saturating_add(s.ms), now);
            }
            room.mirror_remote(
                &Mirror {
                    queue_len: Some(p.queue_len),
                    active: Some(p.fleet_active),
                    mode_override: None,
                    version: now.saturating_mul(1000),
                },
                now,
            );
        });
    }
}

// ------------------------------------------------------------------------------ the sync

/// One sync of a synced room: the node's report, its fence, and when it was built (the
/// sightings' ages are counted from then, on the node's own clock).
pub struct SyncJob {
    fs: &'static FleetStore,
    fence: Fence,
    report: Report,
    /// The report was capped (it left sightings in the batches): the next sync follows at
    /// once. (Following any sighting since, a crowd sent up to [`MAX_SYNCS_PER_INTERVAL`] an
    /// interval, and each refused the pool draw out: a sync gives the node's draws back.)
    capped: bool,
    built_at: u64,
    /// The room's limit at `built_at` (a running event's, see [`Zone::limits_at`]).
    max_active: u64,
}

/// A synced room meets the fleet through the one sync driver: its job is the node's report
/// (at most [`smart_limit_core::fleet::REPORT_CAP`] sightings) with its fence; while a capped
/// report left sightings in the batch, the driver sends the next sync at once (up to
/// [`MAX_SYNCS_PER_INTERVAL`] an interval), so a long line's sightings keep up while no script
/// call grows long.
impl Synced for Zone {
    const LAST_SYNC: bool = true;
    type Job = SyncJob;
    type Answer = SyncAnswer;

    fn driver(&self) -> Option<&Driver> {
        self.synced().map(|fs| &fs.sync)
    }

    fn lead(&self, me: Leader, now: u64) -> bool {
        let Some(fs) = self.synced() else {
            return false;
        };
        let stale = fs.cfg.stale_ms();
        let leads = self
            .shm
            .with_fleet(|_, node| node.leadership().lead(me, now, stale));
        matches!(leads, Ok(true))
    }

    fn resign(&self, me: Leader) {
        let _ = self.shm.with_fleet(|_, node| node.leadership().resign(me));
    }

    fn take(&'static self, now: u64, generation: u32) -> Option<SyncJob> {
        let fs = self.synced()?;
        self.send_tally(fs, now);
        self.send_steer(fs, now);
        let (fence, report, capped) = self
            .shm
            .with_fleet(|_, node| {
                let report = node.take_report();
                let capped = node.backlog();
                (node.next_sync(now, generation, &fs.cfg), report, capped)
            })
            .ok()?;
        Some(SyncJob {
            fs,
            fence,
            report,
            capped,
            built_at: now,
            max_active: self.limits_at(now).max_active,
        })
    }

    fn request(&self, job: &SyncJob, form: Form) -> Vec<u8> {
        // `now` 0: the script reads Redis's own clock.
        job.fs.script.sync(
            form,
            job.fence,
            (0, job.built_at),
            &job.report,
            job.max_active,
        )
    }

    fn answer(value: &Value) -> Result<SyncAnswer, ReplyError> {
        picture_reply(value)
    }

    fn apply(&self, job: SyncJob, answer: SyncAnswer, now: u64) -> bool {
        match answer {
            SyncAnswer::Picture(p) => {
                self.apply_picture(&p, job.fence.seq, now);
                job.capped
            }
            // The script had taken a newer sync of this node (one sent by another worker
            // while this one stalled): this report never counted, it goes with the next.
            SyncAnswer::Stale => {
                let _ = self.shm.with_fleet(|_, node| node.give_back(&job.report));
                false
            }
        }
    }

    fn look_again(&self, now: u64) -> bool {
        let Some(fs) = self.synced() else {
            return false;
        };
        let cfg = fs.cfg_under(&self.limits_at(now));
        let again = self.shm.with_fleet(|_, node| node.look_again(now, &cfg));
        matches!(again, Ok(true))
    }

    fn failed(&self, job: Option<SyncJob>, now: u64) {
        let Some(fs) = self.synced() else { return };
        let _ = self.shm.with_fleet(|_, node: &mut FleetNode| {
            if let Some(job) = &job {
                node.sync_failed();
                node.give_back(&job.report);
            }
            node.age(now, &fs.cfg_under(&self.limits_at(now)));
        });
    }
}
