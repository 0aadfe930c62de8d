//! `challenge_bits=auto`: the difficulty from the room's pressure, the rate clients ask for a
//! place against the rate the room lets clients in.

use super::{AUTO_MAX_BITS, AUTO_MIN_BITS};

/// How often the pressure is looked at (ms); between looks the difficulty stays. The room
/// scripts look as often: their `LOOK_MS` is this, sent in their preamble.
pub const LOOK_MS: u64 = 1000;

/// How long the fleet's pressure from a reply stands (ms): past it (the worker has not asked
/// Redis since, or Redis is away) the worker's own view decides again.
pub const FLEET_FRESH_MS: u64 = 3 * LOOK_MS;

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
    /// The fleet's pressure from the last reply that carried it: when, and its doublings.
    fleet: Option<(u64, u8)>,
    /// Challenges this worker gave that the central room has not been told of yet.
    untold: u64,
}

impl Default for Pressure {
    fn default() -> Self {
        Pressure {
            at: 0,
            asked: 0,
            admitted: 0,
            ratio: 1.0,
            bits: AUTO_MIN_BITS,
            fleet: None,
            untold: 0,
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
        self.ratio = kept(self.ratio) + (1.0 - keep()) * ratio;
        self.at = now;
        self.asked = asked;
        self.admitted = admitted;
        self.bits = if queue_len == 0 {
            AUTO_MIN_BITS
        } else {
            bits_of(doublings(self.ratio))
        };
        self.bits
    }

    /// A challenge given (a central Redis room tells the fleet with the worker's next visit).
    pub fn challenged(&mut self) {
        self.untold = self.untold.saturating_add(1);
    }

    /// The challenges to tell the central room with this visit (counted as told).
    pub fn take_untold(&mut self) -> u64 {
        core::mem::take(&mut self.untold)
    }

    /// A reply of the room's script carried the fleet's pressure (Redis rooms): `doublings`,
    /// from the script's last look at the whole fleet's arrivals and admissions.
    pub fn note_fleet(&mut self, now: u64, doublings: u8) {
        self.fleet = Some((now, doublings));
    }

    /// The difficulty from the fleet's pressure, while the last figure is fresh
    /// ([`FLEET_FRESH_MS`]): the same on every node, since every node reads the same look.
    pub fn fleet_bits(&self, now: u64) -> Option<u8> {
        let (at, d) = self.fleet?;
        (now >= at && now - at <= FLEET_FRESH_MS).then(|| bits_of(d))
    }
}

/// The percent of the last look's smoothed ratio that carries over to the next (the rest is
/// the new look's). Shared with the Redis scripts (room.lua, fleet/script.lua), which smooth
/// the fleet's ratio the same way.
pub const PRESSURE_KEEP_PCT: u64 = 25;
/// The most doublings a ratio counts (a u32 draw's bits; far past AUTO_MAX_BITS).
pub const MAX_DOUBLINGS: u8 = 31;

/// [`PRESSURE_KEEP_PCT`] as a share.
pub fn keep() -> f64 {
    PRESSURE_KEEP_PCT as f64 / 100.0
}

/// The part of a smoothed ratio that carries over.
pub fn kept(ratio: f64) -> f64 {
    keep() * ratio
}

/// How many times clients asking for a place doubled those let in: `floor(log2(ratio))`,
/// by halving (as the room script counts it, so both give the same number), at most 31.
pub fn doublings(ratio: f64) -> u8 {
    let (mut r, mut d) = (ratio, 0u8);
    while r >= 2.0 && d < MAX_DOUBLINGS {
        r /= 2.0;
        d += 1;
    }
    d
}

/// [`AUTO_MIN_BITS`] and one bit per doubling, up to [`AUTO_MAX_BITS`].
pub fn bits_of(doublings: u8) -> u8 {
    AUTO_MIN_BITS + doublings.min(AUTO_MAX_BITS - AUTO_MIN_BITS)
}
