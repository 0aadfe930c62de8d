//! Periodic work of a zone, done by one worker per node: the leader, elected through the
//! zone's shared memory (rate zones and synced rooms). Uses nothing else of the crate.

pub mod leader;

/// A node unheard of for this many intervals is gone: the fleet rate's sum drops it
/// (`rate`), the synced room releases its grants (`fleet`), the line's counts stop reckoning
/// its let-ins (`fleet::tally`, and `tally.lua` through its preamble). The one definition.
pub const STALE_INTERVALS: u64 = 3;
