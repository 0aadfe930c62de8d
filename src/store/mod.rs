//! Where a room's state lives, behind one decision interface.
//!
//! Every room keeps an nginx shared-memory zone: it is the whole store for `store=shm`, shared
//! by all workers of the node. With `store=redis` the fleet's room is in Redis and the zone
//! mirrors its figures (metrics, the mode in force) and decides alone under `on_error=local`.
//! The decision functions here are what the handler calls; they answer at once for the
//! shared-memory store, or later (a future on nginx's event loop) for Redis.

use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;
use std::rc::Rc;

use ngx::core::Pool;
use ngx::ffi::{ngx_conf_t, ngx_http_complex_value_t};
use smart_limit_core::challenge::{Bits, Pressure};
pub use smart_limit_core::redis::SpentProof;
use smart_limit_core::room::gcra::Rate;
use smart_limit_core::room::poll::{Poll, PollCache};
use smart_limit_core::room::rules::{self, Admission, Limits, Mode};
use smart_limit_core::room::{EventNow, PassVerdict, Place, Room, Snapshot, Verdict, Visit};
use smart_limit_core::ticket::{CookieName, Floor, Keyring, OpenCache, Sealed, Ticket};
use smart_limit_core::token::{InviteKey, TokenCache, Tokens};
use smart_limit_core::zone::{AdmitMode, StoreKind, ZoneParams};

use crate::log::LogThrottle;
use crate::shared_zone::ZoneError;

pub mod event;
pub mod fleet;
pub mod redis;
pub mod shm;
mod steer;
mod waiting;

/// How fresh the central room's figures must be for [`Zone::admits_at_once`] to trust them.
const AT_ONCE_FRESH_MS: u64 = 1000;
/// Tickets each worker keeps opened per zone (see [`OpenCache`]).
const OPEN_CACHE_SLOTS: usize = 4096;
/// Waiting tickets each worker remembers per zone (see [`PollCache`]).
const POLL_CACHE_SLOTS: usize = 16384;

/// One `smart_limit_zone`: its parameters, keys and store. Allocated in the configuration's
/// pool; after fork each worker has its own copy of the per-worker fields (`Cell`s).
pub struct Zone {
    pub params: ZoneParams,
    /// The ticket cookie: `smart_limit_<room>`, so rooms on one host never overwrite each
    /// other's tickets.
    pub cookie: CookieName,
    pub limits: Limits,
    pub admission: Admission,
    /// Ticket keys: from `smart_limit_secret`, or the zone's random key (set at zone init).
    pub keys: Option<Keyring>,
    /// `smart_limit_token_key` ([S28]): admission tokens issued and accepted as bearer.
    pub tokens: Option<Tokens>,
    /// `invite=` ([S28]): the key enqueue tokens are checked with (None: anyone takes a place).
    pub invite: Option<InviteKey>,
    /// Per worker: admission tokens signed and verified recently (`crate::token`).
    pub token_cache: RefCell<Option<TokenCache>>,
    pub shm: shm::ShmRoom,
    /// Per worker: when a store problem was last logged, so a burst logs once.
    pub problems: LogThrottle,
    /// Per worker: when flood control was last logged.
    pub floods: LogThrottle,
    /// Where the room's state lives beyond this node's shared memory ([`Store`]). Only this
    /// module looks at it: the handler and the endpoints ask the zone.
    store: Store,
    /// Per worker: tickets opened recently, by their cookie bytes.
    opened: RefCell<Option<OpenCache>>,
    /// Per worker: places of waiting tickets answered recently, and their poll budgets.
    polls: RefCell<Option<PollCache>>,
    /// `poll=`: how often one waiting ticket is answered by the store, per worker.
    pub poll_budget: Option<Rate>,
    /// The room's scheduled events: `smart_limit_event`s (set once the http block is read)
    /// and those made at run time.
    pub events: event::ZoneEvents,
    /// `flood_key=`: compiled at configuration time (null: the client address).
    pub flood_key: Cell<*mut ngx_http_complex_value_t>,
    /// `one_place_per=`: compiled at configuration time (null: none).
    pub one_place_per: Cell<*mut ngx_http_complex_value_t>,
    /// `challenge=pow`: the proof cookie (`smart_limit_<room>_proof`).
    pub proof_cookie: CookieName,
    /// [S29] The page pass cookie (`smart_limit_<room>_page`), and the name its passes are
    /// sealed for (`<room>#page`, never a room's: a ticket and a pass cannot stand in for
    /// each other).
    pub page_cookie: CookieName,
    page_room: String,
    /// Per worker: `challenge_bits=auto`'s view of the room's pressure.
    pub pressure: RefCell<Pressure>,
    /// Per worker, on a fleet: the value this worker's rule gave `max_active=auto` for the
    /// window its last call to Redis closed, for its next call to bring.
    steer_answer: Cell<Option<smart_limit_core::capacity::fleet::Answer>>,
    /// Per worker, on a fleet: when it last told the fleet's steering (wall ms).
    steer_told_at: Cell<u64>,
    /// Mixes flood keys: the same in every worker (set at zone init, before the fork) and,
    /// with `smart_limit_secret`, on every node (derived from the ticket keys), so that one
    /// address names one flood bucket in Redis whichever node it reaches.
    pub flood_seed: Cell<u64>,
}

// Zones are allocated in nginx's configuration pool, which aligns to the word size only:
// a field that needs more (SIMD types, u128) would make the compiler emit aligned loads that
// fault on such an address.
const _: () = assert!(core::mem::align_of::<Zone>() <= core::mem::align_of::<usize>());

/// The three stores of a room, behind the zone's one decision interface: each operation of
/// [`Zone`] is one `match` over them.
// One per room, built once while the configuration is read: the shared-memory variant's
// being smaller costs nothing, and a box would put the store outside the configuration's
// pool.
#[allow(clippy::large_enum_variant)]
pub enum Store {
    /// `store=shm`: the room is this node's shared memory.
    Shm,
    /// `store=redis`: the fleet's room in Redis, one script call per decision (this node's shm
    /// room then serves metrics and `on_error=local`).
    Central(redis::RedisStore),
    /// `store=redis sync=TIME`: the fleet's room decided on this node's shared memory, met in
    /// Redis once an interval.
    Synced(fleet::FleetStore),
}

/// Why the store could not decide.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the zone's shared memory does not hold a room: {0}")]
    Layout(#[from] smart_limit_core::room::LayoutError),
    #[error("{0}")]
    Fleet(#[from] smart_limit_core::fleet::NotAFleetNode),
    #[error("{0}")]
    Redis(String),
}

/// Why a room could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Redis(#[from] crate::redis::ConfigError),
    #[error(transparent)]
    Zone(#[from] ZoneError),
}

/// Creates a zone from its parsed parameters and registers its shared memory.
pub fn add_zone(cf: &mut ngx_conf_t, params: ZoneParams) -> Result<NonNull<Zone>, SetupError> {
    let limits = Limits {
        max_active: params.max_active,
        new_per_minute: params.new_per_minute,
        presence_ms: params.presence_ms,
        keep_ms: params.effective_keep_ms(),
        active_window_ms: params.active_window_ms,
        mode: Mode::Fifo,
        flood: params.flood.map(|f| f.rate()),
        session_rate: params.session_rate.map(|r| r.rate()),
    };
    let poll_budget = params.poll.map(|p| p.rate());
    let admission = match params.admit {
        AdmitMode::Grant(ms) => Admission::Grant { ms },
        AdmitMode::Session(ms) => Admission::Session { ms },
    };
    let store = match (params.store, params.sync_ms) {
        (StoreKind::Redis, Some(ms)) => Store::Synced(fleet::FleetStore::new(cf, &params, ms)?),
        (StoreKind::Redis, None) => Store::Central(redis::RedisStore::new(cf, &params, limits)?),
        (StoreKind::Shm, _) => Store::Shm,
    };
    let size = params.size;
    let name = params.name.clone();
    // SAFETY: the configuration's pool lives as long as the configuration (and the zone).
    let pool = unsafe { Pool::from_ngx_pool(cf.pool) };
    let zone = pool.allocate(Zone {
        cookie: CookieName::new(&format!("smart_limit_{name}")),
        proof_cookie: CookieName::new(&format!("smart_limit_{name}_proof")),
        page_cookie: CookieName::new(&format!("smart_limit_{name}_page")),
        page_room: format!("{name}#page"),
        pressure: RefCell::new(Pressure::default()),
        steer_answer: Cell::new(None),
        steer_told_at: Cell::new(0),
        params,
        limits,
        admission,
        keys: None,
        tokens: None,
        invite: None,
        token_cache: RefCell::new(None),
        shm: shm::ShmRoom::default(),
        problems: LogThrottle::default(),
        floods: LogThrottle::default(),
        store,
        opened: RefCell::new(None),
        polls: RefCell::new(None),
        poll_budget,
        events: event::ZoneEvents::default(),
        flood_key: Cell::new(core::ptr::null_mut()),
        one_place_per: Cell::new(core::ptr::null_mut()),
        flood_seed: Cell::new(0),
    });
    let mut zone = NonNull::new(zone).ok_or(ZoneError::NoMemory)?;
    // SAFETY: just allocated and initialised; nothing else refers to it yet.
    shm::register(cf, unsafe { zone.as_mut() }, &name, size)?;
    Ok(zone)
}

/// A store's answer: at once (shared memory), or later (a network round trip on nginx's event
/// loop; the handler suspends the request until it resolves).
pub enum Answer<T> {
    Now(T),
    Later(Pin<Box<dyn Future<Output = T>>>),
}

/// A mode switch's answer as a control change's (see `event::EventsError`).
impl From<Answer<Result<(), StoreError>>> for Answer<Result<(), event::EventsError>> {
    fn from(a: Answer<Result<(), StoreError>>) -> Self {
        match a {
            Answer::Now(r) => Answer::Now(r.map_err(Into::into)),
            Answer::Later(f) => Answer::Later(Box::pin(async move { f.await.map_err(Into::into) })),
        }
    }
}

/// The room's verdict, and whether the store's failure policy gave it instead of the room
/// (`on_error=`: then `$smart_limit_status` says ERROR).
#[derive(Debug, Clone, Copy)]
pub struct Decision {
    pub verdict: Verdict,
    pub by_policy: bool,
}

impl From<Verdict> for Decision {
    fn from(verdict: Verdict) -> Decision {
        Decision {
            verdict,
            by_policy: false,
        }
    }
}

/// What the room said of a valid admitted ticket, and the latest moment the store that counts
/// the session has it seen: in session mode the ticket is renewed no further, so it stops
/// admitting when the room stops counting it.
#[derive(Debug, Clone, Copy)]
pub struct Passed {
    pub verdict: PassVerdict,
    pub seen_at: u64,
}

/// The room's scheduled event in force at a moment, and what the room needs to know of it
/// (whether its pre-queue is open or it runs).
pub type EventInForce = (Rc<event::ZoneEvent>, EventNow);

impl Zone {
    /// The synced store, for its own code (`fleet.rs` and the zone's shared memory).
    fn synced(&self) -> Option<&fleet::FleetStore> {
        match &self.store {
            Store::Synced(fs) => Some(fs),
            Store::Shm | Store::Central(_) => None,
        }
    }

    /// The room is a fleet's (`store=redis`, central or synced): Redis holds what the nodes
    /// share, `max_active=auto`'s value among it.
    pub fn on_fleet(&self) -> bool {
        !matches!(self.store, Store::Shm)
    }

    /// The store as `store=` names it, for metrics and the control endpoint.
    pub fn store_label(&self) -> &'static str {
        match self.store {
            Store::Shm => "shm",
            Store::Central(_) | Store::Synced(_) => "redis",
        }
    }

    /// Whether the room is decided in Redis on every request (`store=redis` without `sync=`).
    pub fn is_central(&self) -> bool {
        matches!(self.store, Store::Central(_))
    }

    /// The event in its pre-queue or running at `now` (wall clock, ms), if any. Events of one
    /// room never overlap (`nginx -t` and the control endpoint refuse it), so at most one is.
    pub fn event_now(&self, now: u64) -> Option<EventInForce> {
        self.events()
            .iter()
            .find_map(|e| e.now(now).map(|ev| (e.clone(), ev)))
    }

    /// The `Redis` key of the room's table of events made at run time (a Redis store).
    pub fn events_key(params: &ZoneParams) -> Option<smart_limit_core::redis::EventsKey> {
        (params.store == StoreKind::Redis)
            .then(|| smart_limit_core::redis::EventsKey::new(&params.prefix, &params.name))
    }

    /// The room's limits while `ev` is in force: its pre-queue holds everyone in line
    /// (`queue_all`: places are taken, nobody is let in); while it runs, its overrides.
    pub fn limits_in(&self, ev: Option<&EventInForce>) -> Limits {
        let mut l = self.limits;
        // [S26] The value max_active=auto moved to (an event's own max_active still rules).
        if let Some(auto) = self.params.auto {
            l.max_active = self.shm.steering().map_or(auto.min, |st| st.value(&auto));
        }
        match ev {
            Some((_, ev)) if !ev.started => l.mode = Mode::QueueAll,
            Some((e, _)) => {
                l.max_active = e.spec.max_active.unwrap_or(l.max_active);
                l.new_per_minute = e.spec.new_per_minute.or(l.new_per_minute);
            }
            None => {}
        }
        l
    }

    /// The room's limits at `now` (wall clock, ms): [`Zone::limits_in`] the event in force.
    pub fn limits_at(&self, now: u64) -> Limits {
        self.limits_in(self.event_now(now).as_ref())
    }

    /// How long an admitted ticket admits at `now`: a running event's `grant=`/`session=`,
    /// else the room's.
    pub fn admission_at(&self, now: u64) -> Admission {
        match self.event_now(now) {
            Some((e, ev)) if ev.started => match (e.spec.grant_ms, self.admission) {
                (Some(ms), Admission::Grant { .. }) => Admission::Grant { ms },
                (Some(ms), Admission::Session { .. }) => Admission::Session { ms },
                (None, a) => a,
            },
            _ => self.admission,
        }
    }

    /// Opens the ticket cookie value of this room (answered from the worker's cache when the
    /// same bytes opened before). None: not a ticket of this room.
    pub fn open_ticket(&self, value: &[u8]) -> Option<Ticket> {
        let keys = self.keys.as_ref()?;
        let mut opened = self.opened.try_borrow_mut().ok()?;
        let cache = opened.get_or_insert_with(|| OpenCache::new(OPEN_CACHE_SLOTS));
        cache.open(keys, value, &self.params.name).ok()
    }

    /// Seals a ticket of this room into a cookie value.
    pub fn seal_ticket(&self, t: &Ticket) -> Option<Sealed> {
        let sealed = self.keys.as_ref()?.seal_fixed(&self.params.name, t).ok()?;
        if let Ok(mut opened) = self.opened.try_borrow_mut() {
            if let Some(cache) = opened.as_mut() {
                cache.remember(sealed.as_str().as_bytes(), *t);
            }
        }
        Some(sealed)
    }

    /// [S29] A page pass for a document served now under the rate limit: sealed like a
    /// ticket, for the room's page-pass name. It names the person the page is for (a new
    /// session id): the page's sub-resources that reach the room on it take one place for
    /// that person while the room has one free.
    pub fn seal_page_pass(&self, now: u64) -> Option<Sealed> {
        let pass = Ticket {
            sid: smart_limit_core::ticket::random_sid().ok()?,
            qnum: 0,
            issued_at: now,
            accepted_at: 0,
            last_seen: now,
            told: Floor::NONE,
        };
        self.keys.as_ref()?.seal_fixed(&self.page_room, &pass).ok()
    }

    /// [S29] The session a page pass cookie value names, if it opens and still lets its
    /// page's sub-resources through at `now` (`page_pass=`). Not cached: only sub-resources
    /// that overflow the rate limit while the page loads ask.
    pub fn page_pass(&self, value: &[u8], now: u64) -> Option<u64> {
        let pass = self.keys.as_ref()?.open(value, &self.page_room).ok()?;
        rules::page_pass_valid(pass.issued_at, now, self.params.page_pass_ms)
            .then_some(pass.sid)
            .filter(|&sid| sid != 0)
    }

    /// [S29] Whether the room is engaged at `now`: a line, no free place, or a mode that holds
    /// newcomers back (see `Room::engaged`). A synced room's node also reads its picture of
    /// the fleet; before its first picture it counts as engaged (it decides nothing alone
    /// before it has met the fleet, [S21]). A zone that cannot be read counts as engaged:
    /// the room then decides, and says what is wrong.
    pub fn engaged(&self, now: u64) -> bool {
        self.refresh_events(now);
        let limits = self.limits_at(now);
        if let Store::Synced(_) = self.store {
            let fleet_engaged = self.fleet_snapshot(now).is_none_or(|s| {
                s.sync_age_ms.is_none() || s.queue_len > 0 || s.fleet_active >= limits.max_active
            });
            if fleet_engaged {
                return true;
            }
        }
        self.shm
            .with_room(|room| room.engaged(now, &limits))
            .unwrap_or(true)
    }

    /// Whether this node counts `sid` as an admitted session still active at `now` (every
    /// store notes its admissions in the zone's shared memory).
    pub fn is_admitted(&self, sid: u64, now: u64) -> bool {
        let limits = self.limits_at(now);
        self.shm
            .with_room(|room| room.is_admitted(sid, now, &limits))
            .unwrap_or(false)
    }

    /// A client without a ticket: counted as an arrival; the mode in force tells what to do
    /// with it.
    pub fn arrival(&self, now: u64) -> Mode {
        self.refresh_events(now);
        let limits = self.limits_at(now);
        self.shm
            .with_room(|room| room.arrival(&limits))
            .unwrap_or(limits.mode)
    }

    /// A client without a valid admitted ticket asks for its turn; `spent`: the proof of work
    /// it brings to take a new place, which the central room records spent in the same call,
    /// and a synced node reports with its next sync (this node has recorded it already:
    /// `Zone::spend_proof`).
    pub fn visit(
        &'static self,
        v: Visit,
        spent: Option<SpentProof>,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>> {
        self.refresh_events(now);
        self.keep_events_fresh(now);
        if v.qnum != 0 {
            if let Some(place) = self.poll_answer(&v, now) {
                return Answer::Now(Ok(Verdict::Wait(place).into()));
            }
        }
        match &self.store {
            Store::Synced(fs) => self.fleet_visit(fs, v, spent, now),
            Store::Central(rs) => self.redis_visit(rs, v, spent, now),
            Store::Shm => Answer::Now(self.shm.with_room(|room| {
                let verdict = self.room_visit(room, v, now);
                self.remember(&verdict, v.sid, now);
                verdict.into()
            })),
        }
    }

    /// This node's room decides a visit (the shm store; a Redis store's `on_error=local`),
    /// under the scheduled event in force, if any.
    fn room_visit(&self, room: &mut Room, v: Visit, now: u64) -> Verdict {
        let ev = self.event_now(now);
        match &ev {
            Some((_, e)) => room.event_step(*e),
            // An event cancelled (or over) while the start's shuffle ran: it finishes.
            None => room.event_settle(),
        }
        room.visit(v, now, &self.limits_in(ev.as_ref()))
    }

    /// Flood control ([S15]) from this node's budget (its shared memory): a client taking a
    /// place faster than its address's budget allows gets no place this time. The central
    /// room pays from the fleet's budget in its script call, and falls back on this when Redis
    /// does not answer; a synced room pays here always and settles the fleet's budget in its
    /// syncs (`Zone::fleet_flood_refused`).
    fn flood_refused(&self, v: &Visit, now: u64) -> Option<Verdict> {
        let key = v.flood_key?;
        let allowed = self
            .shm
            .with_room(|room| room.flood_check(key, now, &self.limits));
        match allowed {
            Ok(Err(retry_ms)) => Some(Verdict::Throttled {
                retry_ms,
                queue_len: self.snapshot(now).map_or(0, |s| s.queue_len),
            }),
            _ => None,
        }
    }

    /// A waiting ticket polled faster than its budget (or, for Redis, far back and asked a
    /// moment ago): its last answer, without the store.
    fn poll_answer(&self, v: &Visit, now: u64) -> Option<Place> {
        let mut polls = self.polls.try_borrow_mut().ok()?;
        let recent = match self.store {
            Store::Central(_) => PollCache::recent_ms(self.limits.presence_ms),
            Store::Shm | Store::Synced(_) => 0,
        };
        let cache = polls.as_mut()?;
        match cache.check(v.sid, v.qnum, now, self.poll_budget, recent) {
            Poll::Ask => None,
            Poll::Recent(place) => {
                let _ = self.shm.with_room(|room| room.counters_mut().waited += 1);
                Some(place)
            }
            Poll::TooFast(place) => {
                let _ = self.shm.with_room(|room| {
                    let c = room.counters_mut();
                    c.waited += 1;
                    c.fast_polls += 1;
                });
                Some(place)
            }
        }
    }

    /// Remembers the store's answer to a waiting client (for [`Zone::poll_answer`]).
    /// An event's pre-queue answers no position (the order is drawn at the start): nothing
    /// to remember, and nothing remembered from it may answer after the start.
    fn remember(&self, verdict: &Verdict, sid: u64, now: u64) {
        let Ok(mut polls) = self.polls.try_borrow_mut() else {
            return;
        };
        let cache = polls.get_or_insert_with(|| PollCache::new(POLL_CACHE_SLOTS));
        let prequeue = matches!(self.event_now(now), Some((_, e)) if !e.started);
        match verdict {
            Verdict::Wait(place) if !prequeue => cache.put(*place, now),
            _ => cache.forget(sid),
        }
    }

    /// A valid admitted ticket: one look at the room (under one lock) for its mode and the
    /// session's request rate, and the session counted as active.
    pub fn pass(&'static self, t: &Ticket, now: u64) -> Result<Passed, StoreError> {
        self.refresh_events(now);
        self.keep_events_fresh(now);
        let (sid, admitted_at) = (t.sid, t.accepted_at);
        let on_this_node = || {
            let limits = self.limits_at(now);
            self.shm
                .with_room(|room| room.pass(sid, admitted_at, now, &limits))
        };
        let (verdict, seen_at) = match &self.store {
            Store::Synced(fs) => (self.fleet_pass(fs, t, now)?, now),
            Store::Central(rs) => match on_this_node()? {
                v @ (PassVerdict::Counted | PassVerdict::Uncounted) => {
                    (v, self.redis_pass(rs, sid, now))
                }
                v => (v, now),
            },
            Store::Shm => (on_this_node()?, now),
        };
        Ok(Passed { verdict, seen_at })
    }

    pub fn snapshot(&self, now: u64) -> Result<Snapshot, StoreError> {
        self.shm.with_room(|room| room.snapshot(now, &self.limits))
    }

    /// Ends an admitted session at once (the origin said so); its place frees immediately.
    /// With the admission's time (the ticket or token the request came with), that ticket
    /// or token is refused on this node if replayed, until it would have ended anyway.
    pub fn revoke(&'static self, sid: u64, admitted_at: Option<u64>, now: u64) {
        match &self.store {
            Store::Central(rs) => self.redis_revoke(rs, sid),
            // The next sync takes it off the fleet's active sessions.
            Store::Synced(_) => {
                let _ = self.shm.with_fleet(|_, node| node.revoked_here(sid));
            }
            Store::Shm => {}
        }
        // (An event's grant may be longer than the room's own: the longer one holds.)
        let hold = [self.admission, self.admission_at(now)]
            .map(|a| match a {
                Admission::Grant { ms } | Admission::Session { ms } => ms,
            })
            .into_iter()
            .max()
            .unwrap_or(0);
        let _ = self.shm.with_room(|room| {
            room.revoke(sid);
            if let Some(at) = admitted_at.filter(|&at| at != 0) {
                room.refuse_replays(sid, at, now.saturating_add(hold), now);
            }
        });
    }

    /// Switches the room's mode at run time (None: back to the configured one).
    pub fn set_mode(&'static self, mode: Option<Mode>) -> Answer<Result<(), StoreError>> {
        match &self.store {
            Store::Central(rs) => self.redis_set_mode(rs, mode),
            Store::Shm | Store::Synced(_) => {
                let code = mode.map_or(0, Mode::code);
                Answer::Now(self.shm.with_room(|room| room.set_mode_override(code)))
            }
        }
    }

    /// `challenge=pow`: the difficulty in force at `now` (None: no challenge). `auto` follows
    /// the room's pressure (see [`Pressure`]): on a Redis room, at least the fleet's (the
    /// script's last look at every node's arrivals, from the central room's last reply or the
    /// synced room's picture), so a flood spread over the fleet, or aimed at its calmest
    /// node, raises every node alike; and at least this node's own view from its counters,
    /// which sees a flood of its own at once, before the fleet is told.
    pub fn challenge_bits(&self, now: u64) -> Option<u8> {
        match self.params.challenge? {
            Bits::Fixed(n) => Some(n),
            Bits::Auto => {
                let own = self.own_bits(now)?;
                let fleet = self.pressure.try_borrow().ok()?.fleet_bits(now);
                Some(fleet.map_or(own, |f| f.max(own)))
            }
        }
    }

    /// `challenge_bits=auto` from this node's counters alone. At the same look, a synced
    /// room's picture gives the worker the fleet's pressure (a central room's replies give it
    /// with every visit).
    fn own_bits(&self, now: u64) -> Option<u8> {
        let mut p = self.pressure.try_borrow_mut().ok()?;
        // (The room is read once a look, not on every challenge: this runs on every poll of
        // a waiting ticket.)
        if !p.due(now) {
            return Some(p.current());
        }
        if let Some(d) = self.fleet_pressure(now) {
            p.note_fleet(now, d);
        }
        let s = self.snapshot(now).ok()?;
        let c = &s.counters;
        let asked = c.queued.max(c.challenged);
        Some(p.bits(now, asked, c.admitted, s.queue_len))
    }

    /// Whether a newcomer would be let in at once (nobody waits, there is room, no pre-queue):
    /// it then needs no proof of work. Only where this node knows: its own room, or the
    /// central room's figures from a reply of the last [`AT_ONCE_FRESH_MS`]. A synced node
    /// never knows the fleet's state of this instant (its picture is an interval old), so
    /// there every newcomer brings a proof.
    pub fn admits_at_once(&self, now: u64) -> bool {
        if let Store::Synced(_) = self.store {
            return false;
        }
        let limits = self.limits_at(now);
        let Ok((s, age)) = self.shm.with_room(|room| {
            let age = room.remote_age(now);
            (room.snapshot(now, &self.limits), age)
        }) else {
            return false;
        };
        if matches!(self.store, Store::Central(_)) && age.is_none_or(|a| a > AT_ONCE_FRESH_MS) {
            return false;
        }
        let mode = Mode::from_code(s.mode_override).unwrap_or(limits.mode);
        matches!(mode, Mode::Fifo | Mode::Random)
            && s.queue_len == 0
            && s.active < limits.max_active
    }

    /// `challenge=pow`: records a proof as spent on this node (see `Room::spend_proof`); false:
    /// spent already. A zone that cannot be read records nothing and takes the proof.
    pub fn spend_proof(&self, key: u64, until: u64, now: u64) -> bool {
        self.shm
            .with_room(|room| room.spend_proof(key, until, now))
            .unwrap_or(true)
    }

    /// Forgets a proof recorded spent by a visit that gave no place.
    pub fn unspend_proof(&self, key: u64) {
        let _ = self.shm.with_room(|room| room.unspend_proof(key));
    }

    /// Counts in the room's counters.
    pub fn count(&self, f: impl FnOnce(&mut smart_limit_core::room::Counters)) {
        let _ = self.shm.with_room(|room| f(room.counters_mut()));
    }

    /// A challenge given: counted for metrics and `challenge_bits=auto` on this node, and for
    /// the fleet's pressure (a synced node's next sync reports it; on a central Redis room,
    /// the worker's next visit tells it).
    pub fn challenge_given(&self) {
        self.count(|c| c.challenged += 1);
        if self.params.challenge != Some(Bits::Auto) {
            return;
        }
        match self.store {
            Store::Synced(_) => {
                let _ = self.shm.with_fleet(|_, node| node.challenged());
            }
            Store::Central(_) => {
                if let Ok(mut p) = self.pressure.try_borrow_mut() {
                    p.challenged();
                }
            }
            Store::Shm => {}
        }
    }

    pub fn count_bypass(&self) {
        let _ = self.shm.with_room(|room| room.counters_mut().bypassed += 1);
    }
}
