//! The room in this node's shared memory: registration, zone init that survives reloads, and
//! locked access for the decision functions.

use core::cell::Cell;
use core::ffi::c_void;
use core::ptr;

use ngx::core::Status;
use ngx::ffi::{
    ngx_conf_t, ngx_int_t, ngx_pagesize, ngx_shared_memory_add, ngx_shm_zone_t, ngx_shmtx_lock,
    ngx_shmtx_unlock, ngx_slab_alloc_locked, ngx_slab_pool_t, ngx_str_t, NGX_LOG_EMERG,
    NGX_LOG_NOTICE,
};
use ngx::ngx_log_error;
use smart_limit_core::room::{LayoutError, Room};
use smart_limit_core::ticket::Keyring;

use super::{now_ms, StoreError, Zone};

/// What the zone keeps at the start of its slab allocations (`shpool->data` points here).
#[repr(C)]
struct Shared {
    /// Random ticket key for when no `smart_limit_secret` is configured; it lives as long as
    /// the zone, so tickets survive reloads.
    key: [u8; 32],
    room: *mut u8,
    room_len: usize,
}

/// The zone's handle on its shared memory.
pub struct ShmRoom {
    zone: Cell<*mut ngx_shm_zone_t>,
    shared: Cell<*mut Shared>,
}

impl Default for ShmRoom {
    fn default() -> Self {
        ShmRoom {
            zone: Cell::new(ptr::null_mut()),
            shared: Cell::new(ptr::null_mut()),
        }
    }
}

/// Unlocks the zone when dropped, also when unwinding.
struct Locked(*mut ngx_slab_pool_t);

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: created only right after locking the same pool.
        unsafe { ngx_shmtx_unlock(&mut (*self.0).mutex) };
    }
}

impl ShmRoom {
    fn pool(&self) -> *mut ngx_slab_pool_t {
        let z = self.zone.get();
        if z.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: the shm zone outlives the configuration that refers to it.
        unsafe { (*z).shm.addr as *mut ngx_slab_pool_t }
    }

    /// Runs `f` on the room while holding the zone's lock.
    pub fn with_room<R>(&self, f: impl FnOnce(&mut Room) -> R) -> Result<R, StoreError> {
        let pool = self.pool();
        let shared = self.shared.get();
        if pool.is_null() || shared.is_null() {
            return Err(LayoutError::NotARoom.into());
        }
        // SAFETY: the mutex and the room memory were set up by init_zone in the master and
        // are mapped at the same address in every worker.
        unsafe {
            ngx_shmtx_lock(&mut (*pool).mutex);
            let _guard = Locked(pool);
            let mem = core::slice::from_raw_parts_mut((*shared).room, (*shared).room_len);
            let mut room = Room::attach(mem)?;
            Ok(f(&mut room))
        }
    }
}

/// Declares the zone's shared memory (`size=`), tagged with this module so nginx hands the
/// same memory back on reload.
pub unsafe fn register(
    cf: *mut ngx_conf_t,
    zone: &mut Zone,
    name: &str,
    size: usize,
) -> Result<(), String> {
    let mut shm_name = ngx_str_t {
        len: name.len(),
        data: ngx::core::Pool::from_ngx_pool((*cf).pool).alloc_unaligned(name.len()) as *mut u8,
    };
    if shm_name.data.is_null() {
        return Err("out of memory".into());
    }
    ptr::copy_nonoverlapping(name.as_ptr(), shm_name.data, name.len());
    let shm_zone = ngx_shared_memory_add(
        cf,
        &mut shm_name,
        size,
        &raw mut crate::ngx_http_smart_limit_module as *mut c_void,
    );
    if shm_zone.is_null() {
        return Err(format!("cannot add shared memory zone \"{name}\""));
    }
    if !(*shm_zone).data.is_null() {
        return Err(format!("shared memory zone \"{name}\" is already used"));
    }
    (*shm_zone).init = Some(init_zone);
    (*shm_zone).data = zone as *mut Zone as *mut c_void;
    zone.shm.zone.set(shm_zone);
    Ok(())
}

/// nginx calls this in the master for every (re)configuration. `old` is the previous
/// configuration's zone when the memory is reused (same name and size): then the room and
/// everyone in it carry on.
unsafe extern "C" fn init_zone(shm_zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    // Runs in the master, also on reload: a panic must refuse the zone, not abort nginx.
    std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| unsafe {
        init_zone_unguarded(shm_zone, old)
    }))
    .unwrap_or(Status::NGX_ERROR.into())
}

unsafe fn init_zone_unguarded(shm_zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    let zone = &mut *((*shm_zone).data as *mut Zone);
    let pool = (*shm_zone).shm.addr as *mut ngx_slab_pool_t;
    let log = (*shm_zone).shm.log;
    let name = zone.params.name.clone();

    let shared = if !old.is_null() || (*shm_zone).shm.exists != 0 {
        let shared = (*pool).data as *mut Shared;
        let check = if shared.is_null() {
            Err(LayoutError::NotARoom)
        } else {
            let mem = core::slice::from_raw_parts_mut((*shared).room, (*shared).room_len);
            Room::attach(mem).map(|_| ())
        };
        if let Err(e) = check {
            ngx_log_error!(
                NGX_LOG_EMERG,
                log,
                "smart_limit_zone \"{}\" cannot reuse its shared memory ({}); \
                 change its size= to start an empty room, or restart nginx",
                name,
                e
            );
            return Status::NGX_ERROR.into();
        }
        shared
    } else {
        match format_zone(pool) {
            Ok(s) => {
                let capacity = smart_limit_core::room::capacity_for((*s).room_len);
                ngx_log_error!(
                    NGX_LOG_NOTICE,
                    log,
                    "smart_limit_zone \"{}\": room for {} waiting and {} admitted sessions",
                    name,
                    capacity,
                    capacity
                );
                s
            }
            Err(e) => {
                ngx_log_error!(NGX_LOG_EMERG, log, "smart_limit_zone \"{}\": {}", name, e);
                return Status::NGX_ERROR.into();
            }
        }
    };
    zone.shm.zone.set(shm_zone);
    zone.shm.shared.set(shared);
    if zone.keys.is_none() {
        let hex: String = (*shared).key.iter().map(|b| format!("{b:02x}")).collect();
        match Keyring::parse(&hex) {
            Ok(k) => zone.keys = Some(k),
            Err(_) => return Status::NGX_ERROR.into(),
        }
    }
    Status::NGX_OK.into()
}

/// Lays out a fresh zone: the shared header with a random key, then the room over all the
/// memory that is left.
unsafe fn format_zone(pool: *mut ngx_slab_pool_t) -> Result<*mut Shared, String> {
    ngx_shmtx_lock(&mut (*pool).mutex);
    let _guard = Locked(pool);
    let shared = ngx_slab_alloc_locked(pool, core::mem::size_of::<Shared>()) as *mut Shared;
    if shared.is_null() {
        return Err("zone is too small".into());
    }
    let mut key = [0u8; 32];
    fill_random(&mut key)?;
    // Take the largest block the slab allocator gives: free pages minus one for its own use.
    let page = ngx_pagesize;
    let mut want = (*pool).pfree.saturating_sub(1) * page;
    // Probing sizes must not log "no memory" as a critical error.
    let log_nomem = (*pool).log_nomem();
    (*pool).set_log_nomem(0);
    let mut mem = ptr::null_mut();
    while want >= Room::MIN_BYTES {
        mem = ngx_slab_alloc_locked(pool, want) as *mut u8;
        if !mem.is_null() {
            break;
        }
        want -= page.max(want / 16);
    }
    (*pool).set_log_nomem(log_nomem);
    if mem.is_null() {
        return Err(format!(
            "zone is too small: a room needs at least {} bytes",
            Room::MIN_BYTES + 4 * page
        ));
    }
    let slice = core::slice::from_raw_parts_mut(mem, want);
    Room::format(slice, now_ms()).map_err(|e| e.to_string())?;
    ptr::write(
        shared,
        Shared {
            key,
            room: mem,
            room_len: want,
        },
    );
    (*pool).data = shared as *mut c_void;
    Ok(shared)
}

fn fill_random(buf: &mut [u8]) -> Result<(), String> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))
}
