//! Where a room's state lives, behind one decision interface.
//!
//! Every room keeps an nginx shared-memory zone: it is the whole store for `store=shm`, shared
//! by all workers of the node. With `store=redis` the fleet's room is in Redis and the zone
//! mirrors its figures (metrics, the mode in force) and decides alone under `on_error=local`.
//! The decision functions here are what the handler calls; they answer at once for the
//! shared-memory store, or later (a future on nginx's event loop) for Redis.

use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;

use ngx::core::Pool;
use ngx::ffi::ngx_conf_t;
use smart_limit_core::parse::{AdmitMode, StoreKind, ZoneParams};
use smart_limit_core::room::{Snapshot, Verdict, Visit};
use smart_limit_core::rules::{Admission, Limits, Mode};
use smart_limit_core::ticket::{CookieName, Keyring, OpenCache, Sealed, Ticket};

use crate::log::LogThrottle;

pub mod redis;
pub mod shm;

/// Tickets each worker keeps opened per zone (see [`OpenCache`]).
const OPEN_CACHE_SLOTS: usize = 4096;

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
    pub shm: shm::ShmRoom,
    /// Per worker: when a store problem was last logged, so a burst logs once.
    pub problems: LogThrottle,
    /// `store=redis`: the fleet's room in Redis (this node's shm room then serves metrics and
    /// `on_error=local`).
    pub redis: Option<redis::RedisStore>,
    /// Per worker: tickets opened recently, by their cookie bytes.
    opened: RefCell<Option<OpenCache>>,
}

/// Why the store could not decide.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the zone's shared memory does not hold a room: {0}")]
    Layout(#[from] smart_limit_core::room::LayoutError),
    #[error("{0}")]
    Redis(String),
}

/// Creates a zone from its parsed parameters and registers its shared memory.
pub fn add_zone(cf: &mut ngx_conf_t, params: ZoneParams) -> Result<NonNull<Zone>, String> {
    let limits = Limits {
        max_active: params.max_active,
        new_per_minute: params.new_per_minute,
        presence_ms: params.presence_ms,
        active_window_ms: params.active_window_ms,
        mode: Mode::Fifo,
    };
    let admission = match params.admit {
        AdmitMode::Grant(ms) => Admission::Grant { ms },
        AdmitMode::Session(ms) => Admission::Session { ms },
    };
    let redis = match params.store {
        StoreKind::Redis => Some(redis::RedisStore::new(cf, &params, limits)?),
        StoreKind::Shm => None,
    };
    let size = params.size;
    let name = params.name.clone();
    // SAFETY: the configuration's pool lives as long as the configuration (and the zone).
    let pool = unsafe { Pool::from_ngx_pool(cf.pool) };
    let zone = pool.allocate(Zone {
        cookie: CookieName::new(&format!("smart_limit_{name}")),
        params,
        limits,
        admission,
        keys: None,
        shm: shm::ShmRoom::default(),
        problems: LogThrottle::default(),
        redis,
        opened: RefCell::new(None),
    });
    let mut zone = NonNull::new(zone).ok_or_else(|| "out of memory".to_string())?;
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

/// What became of a valid admitted ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// It passes, and its session counts as active.
    Counted,
    /// It passes, but the zone has no memory left to count it.
    Uncounted,
    /// The room is closed (mode `reject`): admitted tickets are turned away too.
    Closed,
}

impl Zone {
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

    /// A client without a valid admitted ticket asks for its turn.
    pub fn visit(&'static self, v: Visit, now: u64) -> Answer<Result<Decision, StoreError>> {
        match &self.redis {
            Some(rs) => self.redis_visit(rs, v, now),
            None => Answer::Now(
                self.shm
                    .with_room(|room| room.visit(v, now, &self.limits).into()),
            ),
        }
    }

    /// A valid admitted ticket: one look at the room (under one lock) for its mode, and the
    /// session counted as active.
    pub fn pass(&'static self, sid: u64, now: u64) -> Result<Pass, StoreError> {
        let pass = self.shm.with_room(|room| {
            let mode = Mode::from_code(room.mode_override()).unwrap_or(self.limits.mode);
            if mode == Mode::Reject {
                Pass::Closed
            } else if room.pass(sid, now, &self.limits) {
                Pass::Counted
            } else {
                Pass::Uncounted
            }
        })?;
        if let (Some(rs), Pass::Counted | Pass::Uncounted) = (&self.redis, pass) {
            self.redis_pass(rs, sid, now);
        }
        Ok(pass)
    }

    pub fn snapshot(&self, now: u64) -> Result<Snapshot, StoreError> {
        self.shm.with_room(|room| room.snapshot(now, &self.limits))
    }

    /// Ends an admitted session at once (the origin said so); its place frees immediately.
    pub fn revoke(&'static self, sid: u64) {
        if let Some(rs) = &self.redis {
            self.redis_revoke(rs, sid);
        }
        let _ = self.shm.with_room(|room| room.revoke(sid));
    }

    /// Switches the room's mode at run time (None: back to the configured one).
    pub fn set_mode(&'static self, mode: Option<Mode>) -> Answer<Result<(), StoreError>> {
        if let Some(rs) = &self.redis {
            return self.redis_set_mode(rs, mode);
        }
        let code = mode.map_or(0, Mode::code);
        Answer::Now(self.shm.with_room(|room| room.set_mode_override(code)))
    }

    pub fn count_bypass(&self) {
        let _ = self.shm.with_room(|room| room.counters_mut().bypassed += 1);
    }
}
