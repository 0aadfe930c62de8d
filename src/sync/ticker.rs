//! A zone's periodic work in every worker: a timer on nginx's event loop that fires on the
//! wall clock's multiples of an interval (the same instants on every node), runs the zone's
//! tick, and stops when the worker shuts down. The timer is cancelable: a pending tick does
//! not keep a worker that is shutting down alive. The tick itself decides whether this worker
//! leads (`smart_limit_core::sync::leader`).

use core::cell::{Cell, UnsafeCell};
use core::ffi::c_void;
use core::panic::AssertUnwindSafe;

use ngx::ffi::{
    ngx_add_timer, ngx_del_timer, ngx_event_t, ngx_exiting, ngx_pid, ngx_process, ngx_quit,
    ngx_terminate, NGX_PROCESS_SINGLE, NGX_PROCESS_WORKER,
};
use smart_limit_core::sync::leader::Leader;
use smart_limit_core::util::time::next_tick_in;

use crate::clock::now_ms;

/// Whether this process may do the module's background work (tick, lead a node's syncs, open
/// Redis connections): a worker, or the only process with `master_process off`. nginx also
/// runs every module's `init_process` in its helpers (the cache manager and the cache loader,
/// which exist as soon as a `proxy_cache_path` is configured) and fires their timers; a helper
/// that ticked could win the node's leader election and hold the node's Redis connection, and
/// the loader exits after its run without `exit_process`, so without resigning.
pub fn in_worker() -> bool {
    // SAFETY: a plain global nginx sets once per process, before init_process.
    let process: ngx::ffi::ngx_uint_t = unsafe { ngx_process };
    process == NGX_PROCESS_WORKER as ngx::ffi::ngx_uint_t
        || process == NGX_PROCESS_SINGLE as ngx::ffi::ngx_uint_t
}

/// This worker as a candidate to lead its node's syncs, under the configuration of
/// `generation`.
pub fn this_worker(generation: u32) -> Leader {
    Leader {
        // SAFETY: a plain global nginx sets once per process.
        pid: unsafe { ngx_pid } as u32,
        generation,
    }
}

/// What a tick runs: the zone (a `&'static` in the cycle pool) and whether the worker is
/// shutting down (then the work resigns and the timer stops).
pub type Tick = fn(owner: *const c_void, shutting_down: bool);

/// One zone's timer in one worker. Lives in the zone (cycle pool): it must not move once
/// started.
pub struct Ticker {
    ev: UnsafeCell<ngx_event_t>,
    job: Cell<Option<(*const c_void, Tick, u64)>>,
}

impl Default for Ticker {
    fn default() -> Self {
        Ticker {
            // SAFETY: an all-zero ngx_event_t is an idle event; it is set up in start().
            ev: UnsafeCell::new(unsafe { core::mem::zeroed() }),
            job: Cell::new(None),
        }
    }
}

/// First tick after a worker starts: soon, so a fresh node measures at once.
const FIRST_TICK_MS: u64 = 100;

impl Ticker {
    /// Starts ticking every `interval_ms` (the first tick soon), running `tick(owner, _)`.
    /// Never in a helper process ([`in_worker`]): the process hooks do not start tickers
    /// there, and this guard keeps it so for any other caller.
    pub fn start(&self, owner: *const c_void, tick: Tick, interval_ms: u64) {
        if !in_worker() {
            return;
        }
        self.job.set(Some((owner, tick, interval_ms)));
        let ev = self.ev.get();
        // SAFETY: the ticker lives in the zone for the worker's life and does not move; the
        // event is idle until added here; the worker's only thread.
        unsafe {
            (*ev).data = (self as *const Ticker).cast_mut().cast::<c_void>();
            (*ev).handler = Some(on_tick);
            (*ev).log = crate::log::cycle_log();
            (*ev).set_cancelable(1);
            ngx_add_timer(ev, FIRST_TICK_MS.min(interval_ms) as _);
        }
    }

    /// Stops the timer (a worker exiting).
    pub fn stop(&self) {
        let ev = self.ev.get();
        // SAFETY: the ticker's own event, on the worker's thread.
        unsafe {
            if (*ev).timer_set() != 0 {
                ngx_del_timer(ev);
            }
        }
    }
}

/// A timer that keeps a worker that shuts down gracefully alive: nginx lets such a worker exit
/// once no timer but cancelable ones is left, and work spawned on its loop runs from posted
/// events, which do not count. Armed while a last sync is on its way; when it fires it runs
/// its step, if it was given one (a step deferred out of a caller that must not re-enter).
pub struct Hold {
    ev: UnsafeCell<ngx_event_t>,
    then: Cell<Option<(*const c_void, Step)>>,
    /// A timer that runs a step later but holds no worker (a sync's second look): nginx
    /// cancels it when the worker shuts down.
    cancelable: bool,
}

/// A step the hold runs for its owner (a zone).
pub type Step = fn(owner: *const c_void);

impl Default for Hold {
    fn default() -> Self {
        Hold {
            // SAFETY: an all-zero ngx_event_t is an idle event; it is set up in arm().
            ev: UnsafeCell::new(unsafe { core::mem::zeroed() }),
            then: Cell::new(None),
            cancelable: false,
        }
    }
}

impl Hold {
    /// A timer for a step later that does not keep a shutting-down worker.
    pub fn cancelable() -> Hold {
        Hold {
            cancelable: true,
            ..Hold::default()
        }
    }

    /// Keeps the worker for `ms` at most (until [`Hold::release`]), then runs `then`.
    pub fn arm(&self, ms: u64, then: Option<(*const c_void, Step)>) {
        self.then.set(then);
        let ev = self.ev.get();
        // SAFETY: the hold lives in the zone for the worker's life and does not move; the
        // worker's only thread.
        unsafe {
            (*ev).data = (self as *const Hold).cast_mut().cast::<c_void>();
            (*ev).handler = Some(on_hold_end);
            (*ev).log = crate::log::cycle_log();
            (*ev).set_cancelable(u32::from(self.cancelable) as _);
            ngx_add_timer(ev, ms as _);
        }
    }

    pub fn release(&self) {
        self.then.set(None);
        let ev = self.ev.get();
        // SAFETY: the hold's own event, on the worker's thread.
        unsafe {
            if (*ev).timer_set() != 0 {
                ngx_del_timer(ev);
            }
        }
    }
}

unsafe extern "C" fn on_hold_end(ev: *mut ngx_event_t) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the event's data is the Hold arm() armed, which outlives it.
        let Some(hold) = (unsafe { (*ev).data.cast::<Hold>().as_ref() }) else {
            return;
        };
        if let Some((owner, step)) = hold.then.take() {
            step(owner);
        }
    }));
}

pub fn shutting_down() -> bool {
    // SAFETY: plain globals of the worker, read on its only thread.
    unsafe { ngx_exiting != 0 || ngx_quit != 0 || ngx_terminate != 0 }
}

unsafe extern "C" fn on_tick(ev: *mut ngx_event_t) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the event's data is the Ticker start() armed, which outlives it.
        let Some(ticker) = (unsafe { (*ev).data.cast::<Ticker>().as_ref() }) else {
            return;
        };
        let Some((owner, tick, interval_ms)) = ticker.job.get() else {
            return;
        };
        if shutting_down() {
            tick(owner, true);
            return;
        }
        tick(owner, false);
        // SAFETY: the cycle of this worker, set before any timer fires.
        if let Some(cycle) = unsafe { ngx::ffi::ngx_cycle.as_ref() } {
            crate::clock::notice_step(cycle.log);
        }
        let delay = next_tick_in(now_ms(), interval_ms);
        // SAFETY: the ticker's own event, on the worker's thread.
        unsafe { ngx_add_timer(ev, delay as _) };
    }));
}
