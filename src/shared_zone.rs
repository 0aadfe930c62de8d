//! A shared memory zone of this module, declared while the configuration is read: the rooms'
//! zones (`store/shm.rs`) and the rate zones (`rate/mod.rs`) differ only in what they keep
//! there.

use core::ffi::c_void;
use core::panic::AssertUnwindSafe;

use ngx::core::Status;
use ngx::ffi::{ngx_conf_t, ngx_int_t, ngx_shared_memory_add, ngx_shm_zone_t, ngx_str_t};

/// What a zone's init does, given whether the memory is an earlier configuration's (then it
/// holds what that configuration's init placed there).
pub type Init = fn(&mut ngx_shm_zone_t, bool) -> Status;

/// Why a zone's shared memory could not be declared (configuration time) or laid out (its
/// init, in the master).
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    #[error("out of memory")]
    NoMemory,
    #[error("cannot add shared memory zone \"{0}\"")]
    CannotAdd(String),
    /// The name is declared already (the message says by what).
    #[error("{0}")]
    Taken(String),
    #[error("no shared memory")]
    NoSharedMemory,
    #[error("zone is too small")]
    TooSmall,
    #[error("zone is too small: a room needs at least {0} bytes")]
    TooSmallForRoom(usize),
    #[error("zone is too small for sync=: it needs at least {0} bytes more")]
    TooSmallForSync(usize),
    /// A reload gave a zone without `sync=` the fleet's side (it needs a restart).
    #[error("sync= was added")]
    SyncAdded,
    #[error("{0}")]
    Room(#[from] smart_limit_core::room::LayoutError),
    #[error("{0}")]
    Fleet(#[from] smart_limit_core::fleet::NotAFleetNode),
    #[error("{0}")]
    Random(#[from] smart_limit_core::util::random::RandomError),
}

/// Declares the zone `name` of `size` bytes, tagged with this module so nginx hands the same
/// memory back on reload; `data` is what its init finds in `shm_zone.data`, `init_zone` its
/// init (an `extern "C"` shell around [`guarded_init`]). `taken`: the message when the name is
/// declared already.
pub fn add(
    cf: &mut ngx_conf_t,
    name: &str,
    size: usize,
    data: *mut c_void,
    init_zone: unsafe extern "C" fn(*mut ngx_shm_zone_t, *mut c_void) -> ngx_int_t,
    taken: impl FnOnce() -> String,
) -> Result<&'static mut ngx_shm_zone_t, ZoneError> {
    // SAFETY: the configuration's pool is live while the configuration is parsed.
    let mut shm_name =
        unsafe { ngx_str_t::from_bytes(cf.pool, name.as_bytes()) }.ok_or(ZoneError::NoMemory)?;
    // SAFETY: a configuration being parsed; the tag is this module's static.
    let shm_zone = unsafe {
        ngx_shared_memory_add(
            cf,
            &mut shm_name,
            size,
            &raw mut crate::ngx_http_smart_limit_module as *mut c_void,
        )
    };
    // SAFETY: null or the zone nginx keeps for this configuration (its cycle's lifetime).
    let shm_zone =
        unsafe { shm_zone.as_mut() }.ok_or_else(|| ZoneError::CannotAdd(name.to_string()))?;
    if !shm_zone.data.is_null() {
        return Err(ZoneError::Taken(taken()));
    }
    shm_zone.init = Some(init_zone);
    shm_zone.data = data;
    Ok(shm_zone)
}

/// The body of a zone's `extern "C"` init: nginx calls it in the master for every
/// (re)configuration, `old` set when the memory is reused. A panic refuses the zone instead of
/// aborting nginx.
///
/// # Safety
/// `shm_zone` is the zone nginx is initialising.
pub unsafe fn guarded_init(
    shm_zone: *mut ngx_shm_zone_t,
    old: *mut c_void,
    init: Init,
) -> ngx_int_t {
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller's contract.
        let shm_zone = unsafe { &mut *shm_zone };
        // Memory an earlier configuration had: handed back on reload, or (Windows) mapped again.
        let reused = !old.is_null() || shm_zone.shm.exists != 0;
        init(shm_zone, reused)
    }))
    .unwrap_or(Status::NGX_ERROR)
    .into()
}
