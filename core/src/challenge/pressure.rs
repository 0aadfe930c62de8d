//! `challenge_bits=auto`: the difficulty from the room's pressure, the rate clients ask for a
//! place against the rate the room lets clients in.

use super::{AUTO_MAX_BITS, AUTO_MIN_BITS};

/// How often the pressure is looked at (ms); between looks the difficulty stays.
pub const LOOK_MS: u64 = 1000;

/// One worker's view of a room's pressure, from the room's counters (every worker reads the
/// same counters, so every worker comes to about the same difficulty).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pressure {
    at: u64,
    asked: u64,
    admitted: u64,
    /// Clients asking for a place per client let in, smoothed over a few looks.
    ratio: f64,
    bits: u8,
}

impl Default for Pressure {
    fn default() -> Self {
        Pressure {
            at: 0,
            asked: 0,
            admitted: 0,
            ratio: 1.0,
            bits: AUTO_MIN_BITS,
        }
    }
}

impl Pressure {
    /// Whether [`Pressure::bits`] would read the counters at `now`; when not, it answers
    /// [`Pressure::current`] whatever they say, so the caller need not read them.
    pub fn due(&self, now: u64) -> bool {
        self.at == 0 || now < self.at || now - self.at >= LOOK_MS
    }

    /// The difficulty of the last look.
    pub fn current(&self) -> u8 {
        self.bits
    }

    /// The difficulty at `now` (ms), from the room's counters: `asked`, clients that asked
    /// for a place (the larger of places taken and challenges given: a newcomer is challenged
    /// once and takes its place once, a script that does not solve is only challenged),
    /// `admitted`, clients let in, and `queue_len`, those waiting. [`AUTO_MIN_BITS`] while
    /// nobody waits or the line drains as fast as clients come; one bit more for each doubling
    /// of clients asking per client let in, up to [`AUTO_MAX_BITS`]. A quarter of each
    /// look's ratio carries over to the next, so a burst raises the bits within a second or
    /// two and they come down within a few seconds once it passes.
    pub fn bits(&mut self, now: u64, asked: u64, admitted: u64, queue_len: u64) -> u8 {
        if self.at == 0 || now < self.at {
            self.at = now.max(1);
            self.asked = asked;
            self.admitted = admitted;
            return self.bits;
        }
        if !self.due(now) {
            return self.bits;
        }
        let came = asked.saturating_sub(self.asked) as f64;
        let went = admitted.saturating_sub(self.admitted) as f64;
        let ratio = (came + 1.0) / (went + 1.0);
        self.ratio = 0.25 * self.ratio + 0.75 * ratio;
        self.at = now;
        self.asked = asked;
        self.admitted = admitted;
        let span = f64::from(AUTO_MAX_BITS - AUTO_MIN_BITS);
        let extra = self.ratio.max(1.0).log2().floor().clamp(0.0, span) as u8;
        self.bits = if queue_len == 0 {
            AUTO_MIN_BITS
        } else {
            AUTO_MIN_BITS + extra
        };
        self.bits
    }
}
