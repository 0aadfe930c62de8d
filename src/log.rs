//! Error-log helpers: the cycle's log for code that runs outside any request, and a per-worker
//! throttle so a problem that repeats on every request is logged once per burst.

use core::cell::Cell;

use ngx::ffi::ngx_log_t;

/// The current cycle's log, for messages outside any request (store connections, timers).
pub fn cycle_log() -> *mut ngx_log_t {
    ngx::log::ngx_cycle_log().as_ptr()
}

/// One line per burst of the same problem (per worker), with the number of repeats that
/// were not logged.
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
