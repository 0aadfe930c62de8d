//! The room in this node's shared memory: registration, zone init that survives reloads, and
//! locked access for the decision functions (nginx's slab mutex, through `ngx::core::SlabPool`).

use core::cell::Cell;
use core::ffi::c_void;
use core::ptr;

use ngx::core::{SlabPool, Status};
use ngx::ffi::{
    ngx_conf_t, ngx_int_t, ngx_pagesize, ngx_shm_zone_t, ngx_slab_alloc_locked, ngx_slab_pool_t,
    NGX_LOG_EMERG, NGX_LOG_NOTICE,
};
use ngx::ngx_log_error;
use smart_limit_core::capacity::steering::Steering;
use smart_limit_core::fleet::FleetNode;
use smart_limit_core::room::{LayoutError, Room};
use smart_limit_core::ticket::Keyring;

use super::{StoreError, Zone};
use crate::clock::now_ms;
use crate::shared_zone::ZoneError;

/// What the zone keeps at the start of its slab allocations (`shpool->data` points here).
#[repr(C)]
struct Shared {
    /// Random ticket key for when no `smart_limit_secret` is configured; it lives as long as
    /// the zone, so tickets survive reloads.
    key: [u8; 32],
    room: *mut u8,
    room_len: usize,
    /// `sync=`: this node's side of the fleet's room (null without `sync=`).
    fleet: *mut u8,
    fleet_len: usize,
    /// `max_active=auto` ([S26]): the value and the origin's measurements (atomics, read and
    /// counted without the lock).
    steering: Steering,
}

/// With `sync=`, the part of `size=` that holds the node's side of the fleet's room (its
/// reports between two syncs: about 96 bytes per session reported), within these bounds.
const FLEET_SHARE: usize = 4;
const FLEET_MIN_BYTES: usize = 384 << 10;
const FLEET_MAX_BYTES: usize = 16 << 20;

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

impl ShmRoom {
    fn slab(&self) -> Option<SlabPool> {
        // SAFETY: the shm zone is set up before any worker starts and outlives the
        // configuration that refers to it.
        let zone = unsafe { self.zone.get().as_ref() }?;
        // SAFETY: an initialised zone (init_zone ran in the master), used by a worker.
        unsafe { SlabPool::from_shm_zone(zone) }
    }

    /// `max_active=auto`'s state (None before the zone's init).
    pub fn steering(&self) -> Option<&Steering> {
        // SAFETY: null, or the header init_zone set up, mapped at the same address in every
        // process for the zone's life; Steering is atomics only, shared by design.
        unsafe { self.shared.get().as_ref() }.map(|s| &s.steering)
    }

    /// Runs `f` on the room while holding the zone's lock.
    pub fn with_room<R>(&self, f: impl FnOnce(&mut Room) -> R) -> Result<R, StoreError> {
        let slab = self.slab().ok_or(LayoutError::NotARoom)?;
        let shared = self.shared.get();
        if shared.is_null() {
            return Err(LayoutError::NotARoom.into());
        }
        let _locked = slab.lock();
        // SAFETY: `shared` and the room memory were set up by init_zone in the master and are
        // mapped at the same address in every worker; the lock held makes this the only
        // reference to them until it is dropped (also when `f` unwinds).
        let mem = unsafe { core::slice::from_raw_parts_mut((*shared).room, (*shared).room_len) };
        let mut room = Room::attach(mem)?;
        Ok(f(&mut room))
    }

    /// `sync=`: runs `f` on the room and the node's side of the fleet's room, under the
    /// zone's one lock.
    pub fn with_fleet<R>(
        &self,
        f: impl FnOnce(&mut Room, &mut FleetNode) -> R,
    ) -> Result<R, StoreError> {
        let slab = self.slab().ok_or(LayoutError::NotARoom)?;
        let shared = self.shared.get();
        // SAFETY: null, or the header init_zone set up (see with_room).
        if shared.is_null() || unsafe { (*shared).fleet.is_null() } {
            return Err(LayoutError::NotARoom.into());
        }
        let _locked = slab.lock();
        // SAFETY: as in with_room; the fleet block is another region of the same zone, set up
        // by init_zone, guarded by the same lock.
        let (mem, fleet) = unsafe {
            (
                core::slice::from_raw_parts_mut((*shared).room, (*shared).room_len),
                core::slice::from_raw_parts_mut((*shared).fleet, (*shared).fleet_len),
            )
        };
        let mut room = Room::attach(mem)?;
        let mut node = FleetNode::attach(fleet)?;
        Ok(f(&mut room, &mut node))
    }
}

/// Declares the zone's shared memory (`size=`), tagged with this module so nginx hands the
/// same memory back on reload.
pub fn register(
    cf: &mut ngx_conf_t,
    zone: &mut Zone,
    name: &str,
    size: usize,
) -> Result<(), ZoneError> {
    let data = (zone as *mut Zone).cast();
    let shm_zone = crate::shared_zone::add(cf, name, size, data, init_zone, || {
        format!("shared memory zone \"{name}\" is already used")
    })?;
    zone.shm.zone.set(shm_zone);
    Ok(())
}

/// nginx calls this in the master for every (re)configuration. `old` is the previous
/// configuration's zone when the memory is reused (same name and size): then the room and
/// everyone in it carry on.
unsafe extern "C" fn init_zone(shm_zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    // SAFETY: nginx passes the zone it is initialising, whose data is our Zone.
    unsafe { crate::shared_zone::guarded_init(shm_zone, old, init) }
}

fn init(shm_zone: &mut ngx_shm_zone_t, reused: bool) -> Status {
    // SAFETY: `data` is the Zone `register` stored, in the configuration pool.
    let Some(zone) = (unsafe { shm_zone.data.cast::<Zone>().as_mut() }) else {
        return Status::NGX_ERROR;
    };
    let log = shm_zone.shm.log;
    let name = zone.params.name.as_str();
    let sync = zone.params.sync_ms.is_some();
    let shared = if reused {
        match existing_room(shm_zone.shm.addr.cast(), sync) {
            Ok(s) => s,
            Err(e) => {
                ngx_log_error!(
                    NGX_LOG_EMERG,
                    log,
                    "smart_limit_zone \"{}\" cannot reuse its shared memory ({}); \
                     change its size= to start an empty room, or restart nginx",
                    name,
                    e
                );
                return Status::NGX_ERROR;
            }
        }
    } else {
        match format_zone(shm_zone, sync) {
            Ok((s, capacity)) => {
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
                return Status::NGX_ERROR;
            }
        }
    };
    zone.shm.zone.set(shm_zone);
    zone.shm.shared.set(shared);
    if let (Some(auto), Some(st)) = (zone.params.auto, zone.shm.steering()) {
        st.start(&auto);
    }
    if let Some(fs) = zone.synced() {
        // A reload's workers take the fleet's sync over from the previous configuration's.
        let generation = zone.shm.with_fleet(|_, node| match reused {
            true => node.leadership().next_generation(),
            false => node.leadership().generation(),
        });
        match generation {
            Ok(g) => fs.sync.set_generation(g),
            Err(e) => {
                ngx_log_error!(NGX_LOG_EMERG, log, "smart_limit_zone \"{}\": {}", name, e);
                return Status::NGX_ERROR;
            }
        }
    }
    // SAFETY: `shared` points at the zone's header (checked or written above).
    let key = unsafe { (*shared).key };
    // The flood keys' seed: the same in every worker (they fork from here), and secret. With
    // smart_limit_secret (the zone has its keys already) it is derived from the ticket keys,
    // so every node of a fleet hashes an address alike and one address meets one budget in
    // Redis; without it, from the zone's own random key (one node: tickets, too, are this
    // node's alone).
    let seed = match &zone.keys {
        Some(keys) => keys.derive_u64(smart_limit_core::flood::SEED_PURPOSE, name),
        None => {
            let mut seed = [0u8; 8];
            seed.copy_from_slice(&key[24..]);
            u64::from_le_bytes(seed)
        }
    };
    zone.flood_seed.set(seed);
    if zone.keys.is_none() {
        match Keyring::from_key(&key) {
            Ok(k) => zone.keys = Some(k),
            Err(_) => return Status::NGX_ERROR,
        }
    }
    Status::NGX_OK
}

/// The room an earlier configuration left in the zone, checked (and, with `sync=`, its side of
/// the fleet's room: a zone that had no `sync=` before cannot take it on without a restart).
fn existing_room(pool: *mut ngx_slab_pool_t, sync: bool) -> Result<*mut Shared, ZoneError> {
    // SAFETY: the zone's memory starts with the slab pool nginx set up.
    let shared = unsafe { (*pool).data }.cast::<Shared>();
    if shared.is_null() {
        return Err(LayoutError::NotARoom.into());
    }
    // SAFETY: `data` was set by format_zone of an earlier configuration to its Shared header
    // and room, which stay mapped while the zone is reused; the master is alone here.
    let mem = unsafe { core::slice::from_raw_parts_mut((*shared).room, (*shared).room_len) };
    Room::attach(mem)?;
    // SAFETY: as above.
    let (fleet, fleet_len) = unsafe { ((*shared).fleet, (*shared).fleet_len) };
    match (sync, fleet.is_null()) {
        (true, true) => return Err(ZoneError::SyncAdded),
        (true, false) => {
            // SAFETY: the fleet block format_zone set up in the same zone, as above.
            let block = unsafe { core::slice::from_raw_parts_mut(fleet, fleet_len) };
            FleetNode::attach(block)?;
        }
        // sync= was removed: the block stays unused until the zone is made anew.
        (false, _) => {}
    }
    Ok(shared)
}

/// Lays out a fresh zone: the shared header with a random key, with `sync=` the node's side of
/// the fleet's room (with a random node id), then the room over all the memory that is left.
/// Returns the header and how many sessions the room holds.
fn format_zone(shm_zone: &ngx_shm_zone_t, sync: bool) -> Result<(*mut Shared, usize), ZoneError> {
    let mut key = [0u8; 32];
    smart_limit_core::util::random::fill(&mut key)?;
    // SAFETY: the master initialises the zone alone, after nginx set up its slab pool.
    let slab = unsafe { SlabPool::from_shm_zone(shm_zone) }.ok_or(ZoneError::NoSharedMemory)?;
    let pool = shm_zone.shm.addr.cast::<ngx_slab_pool_t>();
    let _locked = slab.lock();
    // SAFETY: the pool is locked; a block for the header.
    let shared =
        unsafe { ngx_slab_alloc_locked(pool, core::mem::size_of::<Shared>()) }.cast::<Shared>();
    if shared.is_null() {
        return Err(ZoneError::TooSmall);
    }
    let (fleet, fleet_len) = match sync {
        true => fleet_block(pool, shm_zone.shm.size)?,
        false => (ptr::null_mut(), 0),
    };
    let (mem, len) = largest_block(pool)?;
    // SAFETY: `mem` is a fresh slab block of `len` bytes, ours alone.
    let slice = unsafe { core::slice::from_raw_parts_mut(mem, len) };
    Room::format(slice, now_ms())?;
    // SAFETY: `shared` is a fresh slab block of Shared's size; the pool's `data` is the
    // zone's own pointer for its users.
    unsafe {
        ptr::write(
            shared,
            Shared {
                key,
                room: mem,
                room_len: len,
                fleet,
                fleet_len,
                steering: Steering::default(),
            },
        );
        (*pool).data = shared.cast();
    }
    Ok((shared, smart_limit_core::room::capacity_for(len)))
}

/// `sync=`: a block for the node's side of the fleet's room, formatted with a random node id.
/// The pool must be locked.
fn fleet_block(
    pool: *mut ngx_slab_pool_t,
    zone_size: usize,
) -> Result<(*mut u8, usize), ZoneError> {
    let len = (zone_size / FLEET_SHARE).clamp(FLEET_MIN_BYTES, FLEET_MAX_BYTES);
    // SAFETY: the locked pool.
    let mem = unsafe { ngx_slab_alloc_locked(pool, len) }.cast::<u8>();
    if mem.is_null() {
        return Err(ZoneError::TooSmallForSync(FLEET_MIN_BYTES));
    }
    let node_id = smart_limit_core::util::random::u64()?;
    // SAFETY: a fresh slab block of `len` bytes (page-aligned), ours alone.
    let block = unsafe { core::slice::from_raw_parts_mut(mem, len) };
    FleetNode::format(block, node_id)?;
    Ok((mem, len))
}

/// The largest block the slab allocator gives (free pages minus one for its own use),
/// probed downwards. The pool must be locked.
fn largest_block(pool: *mut ngx_slab_pool_t) -> Result<(*mut u8, usize), ZoneError> {
    // SAFETY: the master's own view of the page size and of the locked pool.
    let (page, mut want, log_nomem) = unsafe {
        let p = &mut *pool;
        (
            ngx_pagesize,
            p.pfree.saturating_sub(1) * ngx_pagesize,
            p.log_nomem(),
        )
    };
    // Probing sizes must not log "no memory" as a critical error.
    // SAFETY: the locked pool.
    unsafe { (*pool).set_log_nomem(0) };
    let mut mem = ptr::null_mut();
    while want >= Room::MIN_BYTES {
        // SAFETY: the locked pool.
        mem = unsafe { ngx_slab_alloc_locked(pool, want) }.cast::<u8>();
        if !mem.is_null() {
            break;
        }
        want -= page.max(want / 16);
    }
    // SAFETY: the locked pool.
    unsafe { (*pool).set_log_nomem(log_nomem) };
    if mem.is_null() {
        return Err(ZoneError::TooSmallForRoom(Room::MIN_BYTES + 4 * page));
    }
    Ok((mem, want))
}
