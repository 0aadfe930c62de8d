//! Rate limits kept in one number: the generic cell rate algorithm (GCRA), the algorithm
//! behind `limit_req` (its "excess" is the same idea). A bucket is its theoretical arrival
//! time `tat` in microseconds: a request at `now` conforms when `tat - burst * interval <=
//! now`, and then moves `tat` on by one interval. A bucket whose `tat` is in the past is full,
//! so an all-zero bucket is a fresh one, and forgetting a full bucket loses nothing.
//!
//! Used for flood control (places taken per client address), and the request rate of one
//! admitted session.

/// `N` requests per second with a burst of `B` more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Microseconds between two requests at the sustained rate.
    pub interval_us: u64,
    /// Requests allowed at once above the sustained rate.
    pub burst: u64,
}

impl Rate {
    /// `per_sec` requests per second (at least 1 per 1000 s), `burst` more at once.
    pub fn per_sec(per_sec: f64, burst: u64) -> Rate {
        let per_sec = if per_sec.is_finite() && per_sec > 0.001 {
            per_sec
        } else {
            0.001
        };
        Rate {
            interval_us: ((1_000_000.0 / per_sec) as u64).max(1),
            burst,
        }
    }

    /// Takes one request from bucket `tat` at `now_us`: Ok with the new `tat`, or Err with
    /// how long until a request would conform (microseconds).
    pub fn take(&self, tat: u64, now_us: u64) -> Result<u64, u64> {
        let tat = tat.max(now_us);
        let allowed_from = tat.saturating_sub(self.burst.saturating_mul(self.interval_us));
        if allowed_from <= now_us {
            Ok(tat.saturating_add(self.interval_us))
        } else {
            Err(allowed_from - now_us)
        }
    }

    /// Whether bucket `tat` is full at `now_us` (as good as no bucket).
    pub fn is_full(&self, tat: u64, now_us: u64) -> bool {
        tat <= now_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let r = Rate::per_sec(2.0, 3);
        let mut tat = 0;
        let now = 10_000_000;
        // 1 + burst at once.
        for _ in 0..4 {
            tat = r.take(tat, now).unwrap();
        }
        let wait = r.take(tat, now).unwrap_err();
        assert_eq!(wait, 500_000);
        assert!(r.take(tat, now + 499_999).is_err());
        tat = r.take(tat, now + 500_000).unwrap();
        assert!(r.take(tat, now + 500_000).is_err());
        // Long after, the bucket is full again.
        assert!(r.is_full(tat, now + 10_000_000));
        for _ in 0..4 {
            tat = r.take(tat, now + 10_000_000).unwrap();
        }
        assert!(r.take(tat, now + 10_000_000).is_err());
    }

    #[test]
    fn sustained_rate_is_exact() {
        let r = Rate::per_sec(10.0, 0);
        let mut tat = 0;
        let mut passed = 0;
        for ms in 0..10_000u64 {
            if let Ok(t) = r.take(tat, ms * 1000) {
                tat = t;
                passed += 1;
            }
        }
        assert_eq!(passed, 100);
    }
}
