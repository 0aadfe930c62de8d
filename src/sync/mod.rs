//! One driver for every zone that meets the fleet once an interval: the fleet rate zones
//! (`rate`) and the synced rooms (`store::fleet`). What they send and how they apply the
//! answer differ; everything around it is here, once:
//! - **ticks**: every worker has a timer on the wall clock's multiples of the interval, the
//!   same instants on every node ([`ticker`]); only workers tick (never nginx's helpers);
//! - **one leader per node**: at each tick a worker asks the zone, under the zone's lock,
//!   whether it leads (`smart_limit_core::sync::leader`): one worker per node, taken over when
//!   the leader stops beating or when a reload brings newer workers; an exiting worker resigns;
//! - **one call in flight**: a sync gets `timeout=` (below the interval) to answer, or the
//!   client fails it; the next one is not sent while one is out, so a node's syncs never
//!   overlap in this worker (and, across workers, the fence below keeps a late one harmless);
//! - **fencing**: what a sync sends carries the node's sequence number; the zone applies an
//!   answer only when no newer sync of the node was sent since (the scripts, in Redis, ignore
//!   a report older than the one they hold);
//! - **the failure policy**: no answer, or one that is not the script's: what was taken for
//!   the sync is given back to the zone and its picture ages; a bad answer is logged once per
//!   burst (the client logs connection failures), and the client backs off, during which no
//!   sync is sent and the picture keeps aging;
//! - **a capped report's rest** (rooms): while the zone still holds what did not fit, the next
//!   sync follows at once, up to a number per tick;
//! - **a second look** (rooms): the nodes tick together but sync one after another, a few
//!   milliseconds apart; a zone whose picture lacks some nodes' syncs of this window looks
//!   again [`LOOK_AGAIN_MS`] later, at most [`LOOKS_AGAIN`] times a tick.

use core::cell::Cell;
use core::ffi::c_void;

use ngx::ffi::NGX_LOG_ERR;
use ngx::ngx_log_error;
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{Form, ReplyError};
use smart_limit_core::sync::leader::Leader;

use crate::clock::now_ms;
use crate::log::LogThrottle;
use crate::redis::{Client, ClientError, ShutdownHook};

pub mod ticker;

use ticker::{Hold, Ticker};

/// How long after a picture that lacks some nodes' syncs of its window the zone looks again:
/// the nodes' syncs of one tick reach Redis within a few milliseconds of each other (3 ms on
/// Redis's MONITOR, three nodes on one machine, `t/270` TEST 7).
pub const LOOK_AGAIN_MS: u64 = 5;
/// Second looks a tick at most (the second one 10 ms after the tick's sync, for a node whose
/// timer fired late), within the syncs a tick allows.
pub const LOOKS_AGAIN: u32 = 2;

/// A zone that meets the fleet through a [`Driver`]. Its methods run in the worker that leads
/// the node (or, for `lead`/`resign`, in any worker), each under the zone's lock as it needs.
pub trait Synced: Sized + 'static {
    /// Whether the leader sends one last sync when its worker shuts down gracefully (a
    /// synced room: what the node did since its last sync, admissions above all, would be lost
    /// with a stopped node's zone).
    const LAST_SYNC: bool = false;
    /// What one sync takes from the zone and sends.
    type Job: 'static;
    /// What one sync's reply says, parsed.
    type Answer: 'static;

    /// The zone's driver (None: the zone does not sync).
    fn driver(&self) -> Option<&Driver>;
    /// Under the zone's lock: whether worker `me` leads the node now (it beats when it does).
    fn lead(&self, me: Leader, now: u64) -> bool;
    /// Under the zone's lock: worker `me` exits, another one leads at its next tick.
    fn resign(&self, me: Leader);
    /// The leader's own step at each tick, before any sync (the rate zone measures the node's
    /// rate and sets its pass probability).
    fn step(&self, _now: u64) {}
    /// Takes what the next sync sends (None: nothing to send now).
    fn take(&'static self, now: u64, generation: u32) -> Option<Self::Job>;
    /// The script call for `job`.
    fn request(&self, job: &Self::Job, form: Form) -> Vec<u8>;
    /// The reply, parsed (an error: not the script's answer).
    fn answer(value: &Value) -> Result<Self::Answer, ReplyError>;
    /// Applies the answer to `job`, unless a newer sync was sent since (the fence). True: the
    /// zone holds more to send at once (a capped report's rest).
    fn apply(&self, job: Self::Job, answer: Self::Answer, now: u64) -> bool;
    /// No usable answer to `job` (None: no sync could be sent, the client backs off): what
    /// was taken goes with the next sync, and the zone's picture ages.
    fn failed(&self, job: Option<Self::Job>, now: u64);
    /// After an answer applied: whether the zone wants a second look at the fleet soon (its
    /// picture lacks some nodes' syncs of this window).
    fn look_again(&self, _now: u64) -> bool {
        false
    }
}

/// A zone's side of the fleet in one worker: the connection, the timer, the call in flight.
/// Lives in the zone (configuration pool); after fork each worker has its own copy.
pub struct Driver {
    /// The meeting point (None: the zone works alone, and only ticks).
    client: Option<Client>,
    ticker: Ticker,
    interval_ms: u64,
    /// Syncs sent in one tick at most (1, or more for a report capped per call).
    per_tick: u32,
    /// Start of log lines, e.g. `smart_limit_rate_zone "api"` (the client's names the server).
    label: String,
    /// The generation of this configuration (set when the zone is initialised): a reload's
    /// workers take the sync over from the previous configuration's.
    generation: Cell<u32>,
    /// A sync is waiting for its reply.
    in_flight: Cell<bool>,
    /// Syncs sent since the last tick.
    sent_this_tick: Cell<u32>,
    /// Second looks since the last tick, and their timer (cancelable: it keeps no worker).
    looks: Cell<u32>,
    again: Hold,
    /// Bad replies are logged once per burst.
    problems: LogThrottle,
    /// The worker's graceful shutdown and the last sync ([`last_sync`]).
    closing: Cell<Closing>,
    /// Keeps a shutting-down worker until its last sync has its answer.
    hold: Hold,
}

/// Where a worker's last sync stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Closing {
    Running,
    /// Wanted once the sync in flight has its answer.
    Wanted,
    Sent,
}

impl Driver {
    pub fn new(client: Option<Client>, interval_ms: u64, per_tick: u32, label: String) -> Driver {
        Driver {
            client,
            ticker: Ticker::default(),
            interval_ms,
            per_tick: per_tick.max(1),
            label,
            generation: Cell::new(1),
            in_flight: Cell::new(false),
            sent_this_tick: Cell::new(0),
            looks: Cell::new(0),
            again: Hold::cancelable(),
            problems: LogThrottle::default(),
            closing: Cell::new(Closing::Running),
            hold: Hold::default(),
        }
    }

    /// The connection, for the zone's other calls (a synced room's pool draws).
    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    pub fn generation(&self) -> u32 {
        self.generation.get()
    }

    /// Set by the zone's init, in the master: the configuration's generation.
    pub fn set_generation(&self, generation: u32) {
        self.generation.set(generation);
    }

    /// This worker as a candidate to lead its node.
    pub fn me(&self) -> Leader {
        ticker::this_worker(self.generation.get())
    }

    /// A reply that is not the script's (a sync's, or another call of the zone's): the client
    /// backs off, and the problem is logged once per burst.
    pub fn bad_reply(&self, e: &ReplyError) {
        // Only a zone with a connection gets replies.
        let Some(client) = &self.client else { return };
        client.reply_was_bad(&e.to_string());
        if let Some(repeats) = self.problems.admit(now_ms()) {
            ngx_log_error!(
                NGX_LOG_ERR,
                crate::log::cycle_log(),
                "{}: sync failed: {}; decisions follow {} ({} more since the last report)",
                self.label,
                e,
                client.policy(),
                repeats
            );
        }
    }
}

/// A worker starts: the zone's timer (the process hooks call this for every zone).
pub fn start_worker<Z: Synced>(zone: &'static Z) {
    if let Some(d) = zone.driver() {
        let owner = (zone as *const Z).cast::<c_void>();
        d.ticker.start(owner, on_tick::<Z>, d.interval_ms);
        if let (true, Some(client)) = (Z::LAST_SYNC, &d.client) {
            client.on_shutdown(ShutdownHook {
                run: on_shutdown::<Z>,
                owner,
            });
        }
    }
}

/// The worker shuts down gracefully (`nginx -s quit`, a restart, the old binary of an
/// upgrade, a reload's old workers): its connection was closed for it. The client is busy
/// here (this runs inside its event), so the last sync follows at once from a timer, which
/// also keeps the worker from exiting before it.
fn on_shutdown<Z: Synced>(owner: *const c_void) {
    // SAFETY: the hook's owner is the zone start_worker gave it (a `Z` in the cycle pool).
    if let Some(d) = unsafe { owner.cast::<Z>().as_ref() }.and_then(|z| z.driver()) {
        d.hold.arm(0, Some((owner, on_last_sync::<Z>)));
    }
}

fn on_last_sync<Z: Synced>(owner: *const c_void) {
    // SAFETY: as above.
    if let Some(zone) = unsafe { owner.cast::<Z>().as_ref() } {
        last_sync(zone);
    }
}

/// The leader's last sync, once, as its worker shuts down gracefully: what the node did since
/// its last sync (admissions, places, sightings) reaches the fleet before the zone may go with
/// the node. It is an ordinary sync (the fence, the script's refusal of an older report); the
/// worker stays until its answer or `timeout=` (the call's timer keeps it), and once the
/// connection goes idle nginx lets it exit. After a sync still in flight, it follows that one.
/// A node stopped fast (`nginx -s stop`), or whose connection is down, sends none: the fleet
/// learns of an admitted session again from its next request (docs/fleet.md).
fn last_sync<Z: Synced>(zone: &'static Z) {
    let Some(d) = zone.driver() else { return };
    let Some(client) = &d.client else { return };
    if d.closing.get() != Closing::Running {
        return;
    }
    let now = now_ms();
    if !zone.lead(d.me(), now) {
        d.closing.set(Closing::Sent);
        return;
    }
    // The calls' own timers hold the worker once they are armed, but nginx may look for
    // timers between this moment and theirs (after the sync in flight answers, before the
    // last one is sent): this one holds it meanwhile, for two calls' time at most.
    d.hold.arm(2 * client.timeout_ms() + 100, None);
    if d.in_flight.get() {
        d.closing.set(Closing::Wanted);
        return;
    }
    d.closing.set(Closing::Sent);
    send(zone, d, client, now);
}

/// A worker exits: it leads no more, so another one syncs at its next tick.
pub fn stop_worker<Z: Synced>(zone: &'static Z) {
    if let Some(d) = zone.driver() {
        zone.resign(d.me());
        d.ticker.stop();
    }
}

fn on_tick<Z: Synced>(owner: *const c_void, shutting_down: bool) {
    // SAFETY: the ticker's owner is the zone start_worker gave it (a `Z` in the cycle pool).
    let Some(zone) = (unsafe { owner.cast::<Z>().as_ref() }) else {
        return;
    };
    let Some(d) = zone.driver() else { return };
    if shutting_down {
        if Z::LAST_SYNC {
            last_sync(zone);
        }
        zone.resign(d.me());
        return;
    }
    tick(zone, d);
}

/// One tick of one worker: the leader takes its step and, with a meeting point, sends a sync.
fn tick<Z: Synced>(zone: &'static Z, d: &'static Driver) {
    let now = now_ms();
    if !zone.lead(d.me(), now) {
        return;
    }
    zone.step(now);
    let Some(client) = &d.client else { return };
    if d.in_flight.get() {
        // Only when the last sync is slower than the interval (timeout= is below it).
        return;
    }
    if !client.available(now) {
        // Backing off after a failure (the client logged it): the picture ages meanwhile.
        zone.failed(None, now);
        return;
    }
    d.sent_this_tick.set(0);
    d.looks.set(0);
    send(zone, d, client, now);
}

/// A second look at the fleet, [`LOOK_AGAIN_MS`] after an answer that lacked some nodes'
/// syncs of its window: an ordinary sync, if this worker still leads and none is out.
fn on_look_again<Z: Synced>(owner: *const c_void) {
    // SAFETY: the timer's owner is the zone `conclude` gave it (a `Z` in the cycle pool).
    let Some(zone) = (unsafe { owner.cast::<Z>().as_ref() }) else {
        return;
    };
    let Some(d) = zone.driver() else { return };
    let Some(client) = &d.client else { return };
    let now = now_ms();
    if d.in_flight.get()
        || ticker::shutting_down()
        || !client.available(now)
        || !zone.lead(d.me(), now)
    {
        return;
    }
    send(zone, d, client, now);
}

/// A zone that has never met the fleet sends a sync now, whichever worker leads ([S21]: its
/// requests wait for the picture rather than decide alone). True when a sync of this worker
/// is out (just sent, or already); false when none can be (the client backs off after a
/// failure, or the zone gave nothing to send). Two workers may both send one: the fence keeps
/// only the newer answer, and the script refuses the older report, given back for the next.
pub fn send_now<Z: Synced>(zone: &'static Z) -> bool {
    let Some(d) = zone.driver() else { return false };
    let Some(client) = &d.client else {
        return false;
    };
    if d.in_flight.get() {
        return true;
    }
    let now = now_ms();
    if ticker::shutting_down() || !client.available(now) {
        return false;
    }
    send(zone, d, client, now);
    d.in_flight.get()
}

/// One sync: what the zone gives, sent in one script call; the answer applied, or the job
/// given back.
fn send<Z: Synced>(zone: &'static Z, d: &'static Driver, client: &'static Client, now: u64) {
    let Some(job) = zone.take(now, d.generation.get()) else {
        return;
    };
    d.in_flight.set(true);
    d.sent_this_tick.set(d.sent_this_tick.get() + 1);
    ngx::async_::spawn(async move {
        let reply = client.eval(|form| zone.request(&job, form)).await;
        d.in_flight.set(false);
        // A worker shutting down wanted its last sync once this one answered: it follows now.
        let last = d.closing.get() == Closing::Wanted;
        if last {
            d.closing.set(Closing::Sent);
        }
        conclude(zone, d, client, job, reply, last);
        if d.closing.get() == Closing::Sent && !d.in_flight.get() {
            // The last sync has its answer and nothing follows it: the worker may go.
            d.hold.release();
        }
    })
    .detach();
}

/// A sync's reply: the answer applied (and a capped report's rest, or the last sync, sent at
/// once), or the job given back.
fn conclude<Z: Synced>(
    zone: &'static Z,
    d: &'static Driver,
    client: &'static Client,
    job: Z::Job,
    reply: Result<Value, ClientError>,
    last: bool,
) {
    let now = now_ms();
    let answer = match reply {
        Ok(value) => Z::answer(&value),
        // No reply (timeout, refused, reset): the client has logged the burst.
        Err(_) => {
            zone.failed(Some(job), now);
            return;
        }
    };
    match answer {
        Ok(a) => {
            client.reply_was_good();
            let more = zone.apply(job, a, now);
            let room = d.sent_this_tick.get() < d.per_tick && !ticker::shutting_down();
            if last || (more && room) {
                send(zone, d, client, now);
            } else if room && d.looks.get() < LOOKS_AGAIN && zone.look_again(now) {
                d.looks.set(d.looks.get() + 1);
                let owner = (zone as *const Z).cast::<c_void>();
                d.again
                    .arm(LOOK_AGAIN_MS, Some((owner, on_look_again::<Z>)));
            }
        }
        Err(e) => {
            d.bad_reply(&e);
            zone.failed(Some(job), now);
        }
    }
}
