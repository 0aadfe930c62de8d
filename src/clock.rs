//! The module's clock: nginx's cached monotonic milliseconds (`ngx_current_msec`, no system
//! call per request), anchored once to the wall clock so that its values are Unix times in
//! milliseconds and can cross nodes (tickets, arrivals in the fleet's line, sync windows).
//!
//! A step of the wall clock (an NTP correction, an operator's `date -s`) does not move it: a
//! session's window, a place's presence, a flood bucket and a leader's staleness are durations,
//! and a step back of an hour must not turn admitted clients away nor a step forward end every
//! session at once. The anchor is taken in the master when it first reads the configuration
//! and is inherited by every process it forks; it stays across reloads (the module stays
//! loaded) and is taken again at the next start. A worker that sees the wall clock move away
//! from this clock by more than a second says so once per step ([`notice_step`]).

use core::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use ngx::ffi::{ngx_log_t, NGX_LOG_WARN};
use ngx::ngx_log_error;

/// Wall minus monotonic milliseconds at the anchor, plus one (0: not anchored yet).
static ANCHOR: AtomicU64 = AtomicU64::new(0);
/// The wall clock's offset from this clock last reported, in milliseconds.
static REPORTED_STEP_MS: AtomicI64 = AtomicI64::new(0);
/// A wall clock this far from the module's clock is worth a line in the log.
const STEP_NOTICE_MS: i64 = 1000;

fn monotonic_ms() -> u64 {
    // SAFETY: a plain global nginx updates with its cached time, on this thread.
    unsafe { ngx::ffi::ngx_current_msec as u64 }
}

/// Unix time in milliseconds from nginx's cached wall clock (it follows steps).
pub fn wall_ms() -> u64 {
    // SAFETY: `ngx_cached_time` is set by nginx before any module code runs and always points
    // at a valid `ngx_time_t` (nginx updates it in place, on this thread).
    unsafe {
        let tp = ngx::ffi::ngx_cached_time;
        if tp.is_null() {
            return 0;
        }
        ((*tp).sec as u64) * 1000 + (*tp).msec as u64
    }
}

/// Anchors the clock to the wall clock, once per process tree (the master calls this when it
/// reads a configuration; later calls keep the first anchor).
pub fn anchor() -> u64 {
    match ANCHOR.load(Relaxed) {
        0 => {
            let a = wall_ms().wrapping_sub(monotonic_ms()).wrapping_add(1);
            match ANCHOR.compare_exchange(0, a, Relaxed, Relaxed) {
                Ok(_) => a,
                Err(first) => first,
            }
        }
        a => a,
    }
}

/// The module's time: Unix milliseconds that never step (see the module comment).
pub fn now_ms() -> u64 {
    monotonic_ms().wrapping_add(anchor()).wrapping_sub(1)
}

/// Logs once (per step, per process) that the wall clock moved away from the module's clock,
/// and that the module keeps its own.
pub fn notice_step(log: *mut ngx_log_t) {
    let step = wall_ms() as i64 - now_ms() as i64;
    let reported = REPORTED_STEP_MS.load(Relaxed);
    if (step - reported).abs() < STEP_NOTICE_MS || log.is_null() {
        return;
    }
    REPORTED_STEP_MS.store(step, Relaxed);
    if step.abs() < STEP_NOTICE_MS {
        ngx_log_error!(
            NGX_LOG_WARN,
            log,
            "smart_limit: the wall clock is back in step with the monotonic clock"
        );
        return;
    }
    ngx_log_error!(
        NGX_LOG_WARN,
        log,
        "smart_limit: the wall clock is {:+} ms from the time nginx started with, as the \
         monotonic clock counts it; tickets, places and sessions keep the monotonic time \
         until nginx restarts",
        step
    );
}
