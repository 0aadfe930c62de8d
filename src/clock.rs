//! The module's clock: the monotonic clock (`CLOCK_MONOTONIC`, the clock nginx times its
//! timers and `limit_req`'s buckets on), anchored once to the wall clock so that its values
//! are Unix times in milliseconds and can cross nodes (tickets, arrivals in the fleet's line,
//! sync windows).
//!
//! A step of the wall clock (an NTP correction, an operator's `date -s`) does not move it: a
//! session's window, a place's presence, a flood bucket and a leader's staleness are durations,
//! and a step back of an hour must not turn admitted clients away nor a step forward end every
//! session at once. The anchor is taken in the master when it first reads the configuration
//! and is inherited by every process it forks; it stays across reloads (the module stays
//! loaded) and is taken again at the next start. A worker that sees the wall clock move away
//! from this clock by more than a second says so once per step ([`notice_step`]).

use core::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ngx::ffi::{ngx_log_t, NGX_LOG_WARN};
use ngx::ngx_log_error;

/// The monotonic instant of the anchor and the wall clock then, in microseconds.
static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
/// The wall clock's offset from this clock last reported, in milliseconds.
static REPORTED_STEP_MS: AtomicI64 = AtomicI64::new(0);
/// A wall clock this far from the module's clock is worth a line in the log.
const STEP_NOTICE_MS: i64 = 1000;

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
/// reads a configuration; later calls keep the first anchor). Both readings are precise (not
/// nginx's cached ones, whose monotonic part is coarse, a few milliseconds): the nodes of a
/// fleet order arrivals a millisecond apart by them.
pub fn anchor() -> (Instant, u64) {
    *ANCHOR.get_or_init(|| {
        let wall_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        (Instant::now(), wall_us)
    })
}

/// The module's time: Unix milliseconds that never step (see the module comment). One read of
/// the monotonic clock (vDSO, no system call).
pub fn now_ms() -> u64 {
    let (at, wall_us) = anchor();
    let since_us = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
    wall_us.saturating_add(since_us) / 1000
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
