//! The time, as nginx caches it: no system call per request, and one clock for the handler,
//! the stores and the Redis client.

/// Unix time in milliseconds from nginx's cached clock.
pub fn now_ms() -> u64 {
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
