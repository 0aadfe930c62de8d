//! What the module tells operators about its rooms: Prometheus text exposition (format 0.0.4)
//! for `smart_limit_metrics`, and the JSON status of `smart_limit_control`. Both are rendered
//! from [`RoomFigures`]: a room's configuration plus a [`Snapshot`] of its state, taken from
//! the node's shared-memory room, so counters are the sum over every worker of the node.
//!
//! Counters are cumulative (they only grow while the zone lives; a reload keeps them, a
//! restart or a new `size=` starts them at zero), so a collector computes rates from
//! differences, as the AJA article does. Nothing here panics, whatever the input.
//!
//! The top of the crate: it reads snapshots of rooms, synced rooms and rate zones.

mod control;
mod rate;
mod room;
mod text;

#[cfg(test)]
mod tests;

use crate::capacity::steering::View;
use crate::capacity::Auto;
use crate::event::runtime::Source;
use crate::event::{EventSpec, Phase};
use crate::fleet::FleetSnapshot;
use crate::room::rules::{Admission, Mode};
use crate::room::Snapshot;

pub use control::{parse_control_query, render_control_json, render_error_json, ControlQuery};
pub use rate::{render_rate_prometheus, RateFigures};
pub use room::render_prometheus;
pub use text::render_build_info;

/// One room as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomFigures<'a> {
    /// Room (zone) name.
    pub room: &'a str,
    /// "shm" or "redis".
    pub store: &'a str,
    /// The mode configured for the room (fifo unless changed).
    pub configured_mode: Mode,
    /// The mode switched at run time through the control endpoint, if any.
    pub override_mode: Option<Mode>,
    pub max_active: u64,
    pub new_per_minute: Option<u64>,
    pub admission: Admission,
    /// The room's times, for a program that checks the room from outside (the rehearsal's
    /// `--control`): `presence=`, `active_window=`, `timeout=`, and `sync=` (None: not synced).
    pub times: RoomTimes,
    /// The room's state; None when the store could not be read (reported as `up 0`).
    pub snapshot: Option<Snapshot>,
    /// `sync=`: this node's side of the fleet's room.
    pub fleet: Option<FleetSnapshot>,
    /// The room's scheduled events ([S18]), each with where it stands now.
    pub events: Vec<EventFigures>,
    /// `max_active=auto` ([S26]): its bounds and target, and what it measured.
    pub origin: Option<(Auto, View)>,
}

/// A room's configured times, in ms (see [`RoomFigures::times`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoomTimes {
    pub presence_ms: u64,
    /// `keep=` in force ([S27]): `presence_ms` when places go with their presence.
    pub keep_ms: u64,
    pub active_window_ms: u64,
    pub timeout_ms: u64,
    pub sync_ms: Option<u64>,
}

/// A scheduled event of a room ([S18]), where it stands, and where it comes from (the
/// configuration or the control endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFigures {
    pub spec: EventSpec,
    pub phase: Phase,
    pub source: Source,
}

impl RoomFigures<'_> {
    /// The mode in force: the run-time one, else the configured one.
    pub fn mode(&self) -> Mode {
        self.override_mode.unwrap_or(self.configured_mode)
    }
}

/// Content type of the exposition.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
