//! Where a room's state lives, behind one decision interface.
//!
//! Every room keeps an nginx shared-memory zone: it is the whole store for `store=shm`, shared
//! by all workers of the node. The decision functions here are what the handler calls; they
//! answer at once for the shared-memory store.

use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;

use ngx::core::Pool;
use ngx::ffi::ngx_conf_t;
use smart_limit_core::parse::{AdmitMode, StoreKind, ZoneParams};
use smart_limit_core::room::{Snapshot, Verdict, Visit};
use smart_limit_core::rules::{Admission, Limits, Mode};
use smart_limit_core::ticket::Keyring;

pub mod redis;
pub mod shm;

/// One `smart_limit_zone`: its parameters, keys and store. Allocated in the configuration's
/// pool; after fork each worker has its own copy of the per-worker fields (`Cell`s).
pub struct Zone {
    pub params: ZoneParams,
    /// The ticket cookie: `smart_limit_<room>`, so rooms on one host never overwrite each
    /// other's tickets.
    pub cookie: String,
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
pub unsafe fn add_zone(cf: *mut ngx_conf_t, params: ZoneParams) -> Result<NonNull<Zone>, String> {
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
    let pool = Pool::from_ngx_pool((*cf).pool);
    let zone = pool.allocate(Zone {
        cookie: format!("smart_limit_{name}"),
        params,
        limits,
        admission,
        keys: None,
        shm: shm::ShmRoom::default(),
        problems: LogThrottle::default(),
        redis,
    });
    let mut zone = NonNull::new(zone).ok_or_else(|| "out of memory".to_string())?;
    shm::register(cf, zone.as_mut(), &name, size)?;
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

impl Zone {
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

    /// A valid admitted ticket passes; the session counts as active. Returns false when the
    /// zone had no memory left to count it.
    pub fn pass(&'static self, sid: u64, now: u64) -> Result<bool, StoreError> {
        if let Some(rs) = &self.redis {
            self.redis_pass(rs, sid, now);
        }
        self.shm.with_room(|room| room.pass(sid, now, &self.limits))
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

    /// The mode in force on this node: the run-time override in the shm room, else the
    /// configured one. Read on the admitted path (a closed room turns admitted users away).
    pub fn mode_now(&self) -> Mode {
        self.shm
            .with_room(|room| Mode::from_code(room.mode_override()))
            .ok()
            .flatten()
            .unwrap_or(self.limits.mode)
    }

    pub fn count_bypass(&self) {
        let _ = self.shm.with_room(|room| room.counters_mut().bypassed += 1);
    }
}

/// Per-worker rate limit for error-log lines: one line per burst of the same problem, with
/// the number of repeats that were not logged.
#[derive(Default)]
pub struct LogThrottle {
    next_ms: Cell<u64>,
    suppressed: Cell<u64>,
}

impl LogThrottle {
    const QUIET_MS: u64 = 10_000;

    /// Some(repeats since the last line) when a line should be written now.
    pub fn admit(&self, now: u64) -> Option<u64> {
        if now >= self.next_ms.get() {
            self.next_ms.set(now + Self::QUIET_MS);
            Some(self.suppressed.replace(0))
        } else {
            self.suppressed.set(self.suppressed.get() + 1);
            None
        }
    }
}

/// Unix time in milliseconds from nginx's cached clock (no system call).
pub fn now_ms() -> u64 {
    // SAFETY: ngx_cached_time always points at a valid ngx_time_t in a running nginx.
    unsafe {
        let tp = ngx::ffi::ngx_cached_time;
        if tp.is_null() {
            return 0;
        }
        ((*tp).sec as u64) * 1000 + (*tp).msec as u64
    }
}
