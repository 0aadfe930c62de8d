//! A room's scheduled events as its requests see them (`smart_limit_event`, read in
//! `conf::event`): which one is in force at a moment, and what the room needs to know of it.

use core::ops::Range;

use smart_limit_core::event::{EventSpec, Phase};
use smart_limit_core::room::{flood_hash, EventNow};

/// One event of a room, as the room's requests see it.
pub struct ZoneEvent {
    pub spec: EventSpec,
    /// Names this event's pre-queue in the room's memory (its name and start).
    pub id: u64,
}

impl ZoneEvent {
    pub fn new(spec: EventSpec) -> ZoneEvent {
        // The room's key hash (never 0) over the name, seeded by the start: a new start is a
        // new pre-queue.
        let id = flood_hash(spec.start, spec.name.as_bytes());
        ZoneEvent { id, spec }
    }

    /// A synced room's lottery moments (ms): the pre-queue, with `shuffle=on` (see
    /// `fleet::lottery_arrival`).
    pub fn lottery_ms(&self) -> Option<Range<u64>> {
        let s = &self.spec;
        (s.shuffle && s.prequeue < s.start)
            .then(|| s.prequeue.saturating_mul(1000)..s.start.saturating_mul(1000))
    }

    /// What the room needs to know for a decision at `now_ms` (wall clock), if the event is
    /// in its pre-queue or running.
    pub fn now(&self, now_ms: u64) -> Option<EventNow> {
        let started = match self.spec.phase(now_ms / 1000) {
            Phase::Prequeue => false,
            Phase::Running => true,
            Phase::Before | Phase::Over => return None,
        };
        Some(EventNow {
            id: self.id,
            started,
            shuffle: self.spec.shuffle,
        })
    }
}
