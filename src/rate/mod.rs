//! `smart_limit_rate_zone`: a fleet-wide request rate, the AJA way ([S13]).
//!
//! Each zone keeps its state ([`RateShared`]: cumulative counters, the pass probability, the
//! fleet's last picture, who syncs) in a small nginx shared-memory zone of its own, so every
//! worker of the node draws against the same probability and counts into the same counters.
//! - [`handler`]: the preaccess handler: each request of a `smart_limit_rate` location passes
//!   with probability p, or gets `smart_limit_rate_status` (which `error_page` can send to a
//!   waiting room, as with `limit_req`);
//! - [`sync`]: once an interval, one worker per node (elected through the zone) measures the
//!   node's rate and, with `redis=`, exchanges the node's cumulative counters with the fleet in
//!   one script call on nginx's event loop (the one sync driver, `crate::sync`).
//!
//! The arithmetic is `smart_limit_core::rate` (pure, unit-tested).

use core::cell::Cell;
use core::ffi::c_void;
use core::ptr::{self, NonNull};

use ngx::core::{Pool, SlabPool, Status};
use ngx::ffi::{
    ngx_conf_t, ngx_int_t, ngx_shm_zone_t, ngx_slab_alloc_locked, ngx_slab_pool_t, NGX_LOG_EMERG,
};
use ngx::ngx_log_error;
use smart_limit_core::rate::{RateConfig, RateShared, RateSnapshot, RateZoneParams, SyncScript};

use crate::clock::now_ms;
use crate::redis::ConfigError;
use crate::shared_zone::ZoneError;
use crate::sync::Driver;

pub mod handler;
pub mod sync;

/// Shared memory of one rate zone: a few pages (the state is a few hundred bytes).
const ZONE_BYTES: usize = 32 << 10;

/// One `smart_limit_rate_zone`. Allocated in the configuration's pool; after fork each worker
/// has its own copy of the per-worker fields (`Cell`s, the timer, the Redis connection).
pub struct RateZone {
    pub params: RateZoneParams,
    pub cfg: RateConfig,
    shared: Cell<*const RateShared>,
    /// The zone's shared memory (set when the zone is initialised): its slab mutex is the
    /// zone's lock.
    shm_zone: Cell<*mut ngx_shm_zone_t>,
    /// Per worker: the state of the fast generator the pass draws come from (seeded at the
    /// worker's first draw).
    rng: Cell<u64>,
    /// The sync call (used with `redis=`).
    script: SyncScript,
    /// The ticks, the election and, with `redis=`, the connection to the fleet.
    sync: Driver,
}

// Allocated in nginx's configuration pool, which aligns to the word size only.
const _: () = assert!(core::mem::align_of::<RateZone>() <= core::mem::align_of::<usize>());

impl RateZone {
    /// The zone's shared state; None before the zone is initialised (never, in a worker).
    pub fn shared(&self) -> Option<&RateShared> {
        // SAFETY: set by init_zone to the RateShared in the zone's shared memory, which is
        // mapped at the same address in every worker and outlives the configuration; its
        // fields are atomics, so shared references are all anyone needs.
        unsafe { self.shared.get().as_ref() }
    }

    fn slab(&self) -> Option<SlabPool> {
        // SAFETY: set by init_zone (in the master) to the zone nginx keeps for the
        // configuration, which outlives it; used in a worker after init.
        let zone = unsafe { self.shm_zone.get().as_ref() }?;
        // SAFETY: an initialised zone (init_zone ran in the master).
        unsafe { SlabPool::from_shm_zone(zone) }
    }

    /// One request: counted, drawn, and counted as passed when it passes.
    pub fn record(&self) -> bool {
        let mut state = self.rng.get();
        if state == 0 {
            // A worker's first draw: its own seed (after the fork, so workers differ).
            state = smart_limit_core::util::random::u64().unwrap_or(0x9e37_79b9_7f4a_7c15) | 1;
        }
        let draw = (smart_limit_core::util::random::fast_next(&mut state) >> 32) as u32;
        self.rng.set(state);
        self.shared()
            .is_none_or(|s| s.record(draw, now_ms(), &self.cfg))
    }

    pub fn snapshot(&self, now: u64) -> Option<RateSnapshot> {
        self.shared().map(|s| s.snapshot(now))
    }
}

/// Why a rate zone could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Redis(#[from] ConfigError),
    #[error(transparent)]
    Zone(#[from] ZoneError),
}

/// Creates a rate zone from its parameters and registers its shared memory.
pub fn add_zone(
    cf: &mut ngx_conf_t,
    params: RateZoneParams,
) -> Result<NonNull<RateZone>, SetupError> {
    let sync = sync::driver(cf, &params)?;
    let name = params.name.clone();
    // SAFETY: the configuration's pool lives as long as the configuration (and the zone).
    let pool = unsafe { Pool::from_ngx_pool(cf.pool) };
    let zone = pool.allocate(RateZone {
        cfg: RateConfig::from(&params),
        script: SyncScript::new(&params),
        params,
        shared: Cell::new(ptr::null()),
        shm_zone: Cell::new(ptr::null_mut()),
        rng: Cell::new(0),
        sync,
    });
    let zone = NonNull::new(zone).ok_or(ZoneError::NoMemory)?;
    register(cf, zone, &name)?;
    Ok(zone)
}

/// Declares the zone's shared memory, named `smart_limit_rate:NAME` (rooms' names cannot hold
/// a colon, so the two never meet).
fn register(cf: &mut ngx_conf_t, zone: NonNull<RateZone>, name: &str) -> Result<(), ZoneError> {
    let shm_name = format!("smart_limit_rate:{name}");
    let data = zone.as_ptr().cast();
    crate::shared_zone::add(cf, &shm_name, ZONE_BYTES, data, init_zone, || {
        format!("rate zone \"{name}\" is already declared")
    })
    .map(|_| ())
}

/// nginx calls this in the master for every (re)configuration; `old` is set when the memory
/// is reused: the counters, the probability and the node's id carry on.
unsafe extern "C" fn init_zone(shm_zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    // SAFETY: nginx passes the zone it is initialising, whose data is our RateZone.
    unsafe { crate::shared_zone::guarded_init(shm_zone, old, init) }
}

fn init(shm_zone: &mut ngx_shm_zone_t, reused: bool) -> Status {
    // SAFETY: `data` is the RateZone `register` stored, in the configuration pool.
    let Some(zone) = (unsafe { shm_zone.data.cast::<RateZone>().as_ref() }) else {
        return Status::NGX_ERROR;
    };
    let log = shm_zone.shm.log;
    let pool = shm_zone.shm.addr.cast::<ngx_slab_pool_t>();
    let shared = if reused {
        // SAFETY: the zone's memory starts with the slab pool; an earlier configuration set
        // its `data` to the RateShared (checked below before use).
        let shared = unsafe { (*pool).data }.cast::<RateShared>();
        // SAFETY: null, or the RateShared an earlier init placed in this mapped memory.
        match unsafe { shared.as_ref() }.map(RateShared::check) {
            Some(Ok(())) => {}
            _ => {
                ngx_log_error!(
                    NGX_LOG_EMERG,
                    log,
                    "smart_limit_rate_zone \"{}\" cannot reuse its shared memory; restart nginx",
                    zone.params.name
                );
                return Status::NGX_ERROR;
            }
        }
        // SAFETY: checked just above.
        let generation = unsafe { &*shared }.leadership().next_generation();
        zone.sync.set_generation(generation);
        shared
    } else {
        match format_zone(shm_zone, pool) {
            Ok(s) => s,
            Err(e) => {
                ngx_log_error!(
                    NGX_LOG_EMERG,
                    log,
                    "smart_limit_rate_zone \"{}\": {}",
                    zone.params.name,
                    e
                );
                return Status::NGX_ERROR;
            }
        }
    };
    zone.shared.set(shared);
    zone.shm_zone.set(shm_zone);
    Status::NGX_OK
}

/// A fresh zone: the shared state with a random node id.
fn format_zone(
    shm_zone: &ngx_shm_zone_t,
    pool: *mut ngx_slab_pool_t,
) -> Result<*const RateShared, ZoneError> {
    let node_id = smart_limit_core::util::random::u64()?;
    // SAFETY: the master initialises the zone alone, after nginx set up its slab pool.
    let slab = unsafe { SlabPool::from_shm_zone(shm_zone) }.ok_or(ZoneError::NoSharedMemory)?;
    let _locked = slab.lock();
    // SAFETY: the pool is locked; a block for the state.
    let shared = unsafe { ngx_slab_alloc_locked(pool, core::mem::size_of::<RateShared>()) }
        .cast::<RateShared>();
    if shared.is_null() {
        return Err(ZoneError::TooSmall);
    }
    // SAFETY: a fresh slab block of RateShared's size (slab blocks are 8-aligned, and
    // RateShared holds only u64 atomics); the pool's `data` is its users' pointer.
    unsafe {
        ptr::write(shared, RateShared::new(node_id, now_ms()));
        (*pool).data = shared.cast();
    }
    Ok(shared)
}
