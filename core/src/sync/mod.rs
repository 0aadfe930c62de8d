//! Periodic work of a zone, done by one worker per node: the leader, elected through the
//! zone's shared memory (rate zones and synced rooms). Uses nothing else of the crate.

pub mod leader;
