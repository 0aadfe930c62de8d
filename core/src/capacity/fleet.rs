//! `max_active=auto` on a fleet (`store=redis`, central or `sync=`): one value for every node,
//! kept in Redis (core/src/redis/steer.lua). Each node measures the origin for its own
//! admitted requests and tells Redis the counts with a call it already makes (a central room's
//! visits; a synced node's call beside its sync). Redis adds them up a window at a time and
//! gives each closed window to the one node whose call closed it; that node steps the rule
//! ([`control::next`], the same as one node's) on the fleet's counts and the fleet's load, and
//! brings the value with its next call. So ten nodes steer like one controller: one window,
//! one step, one value.

use super::control::{self, Load, Move, Stepped, Window};
use super::{Auto, STEP_MS};

/// How often a worker of a central room's node tells the fleet its counts, at most: a tenth
/// of a window. The room script's steering part costs about a third of a poll's script time
/// (docs/benchmarks.md), so it goes with one visit in many, not each; the other visits carry
/// the fleet's value as this node last heard it, at most this much older.
pub const TELL_MS: u64 = STEP_MS / 10;

/// What a node sends with a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tell {
    /// The counts it measured since its last call.
    pub told: Window,
    /// The value its rule gave for the window its last call closed.
    pub answer: Option<Answer>,
    pub pin: PinOp,
}

/// The value a node's rule gave for the window Redis closed on its call: it holds from that
/// window on, unless another window closed first (then it is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// When the window it is for began (Redis's clock, ms): the window the closed one made.
    pub window: u64,
    pub to: u64,
    pub why: Move,
}

/// An operator's pin, through the control endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PinOp {
    #[default]
    Keep,
    /// Back to the controller.
    Release,
    Pin(u64),
}

impl PinOp {
    /// As the script reads it: 0 nothing, 1 back to auto, 1 + the value pinned.
    pub fn code(self) -> u64 {
        match self {
            PinOp::Keep => 0,
            PinOp::Release => 1,
            PinOp::Pin(v) => v.max(1).saturating_add(1),
        }
    }
}

/// What Redis says back: the fleet's value and, when the call closed a window, that window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fleet {
    /// The value in force (pinned or the controller's).
    pub value: u64,
    pub pinned: bool,
    /// The window this call closed: when the one that follows it began, and its counts.
    pub closed: Option<(u64, Window)>,
    /// The value was cut before (the slow start is over).
    pub cut_before: bool,
    pub last_move: Option<Move>,
    pub moved_at: u64,
}

impl Fleet {
    /// The rule on the window this call closed, with the fleet's `load` (the room's sessions
    /// active and people waiting, as the call saw them). Some: the answer the node brings with
    /// its next call, and the step (logged at a change of direction).
    pub fn settle(&self, load: Load, auto: &Auto) -> Option<(Answer, Stepped)> {
        let (window, w) = self.closed?;
        if self.pinned {
            return None;
        }
        let (to, why) = control::next(self.value, w, load, self.cut_before, auto)?;
        let turned = self.last_move.is_none_or(|l| l.up() != why.up());
        let stepped = Stepped {
            from: self.value,
            to,
            why,
            turned,
        };
        Some((Answer { window, to, why }, stepped))
    }
}
