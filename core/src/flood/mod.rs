//! Flood control met in Redis, for a fleet ([S15]): one client key's budget of places (a GCRA
//! bucket) shared by every node, so one address gets `1 + flood_burst` places at once on the
//! whole fleet, then one per `flood=` interval, however many nodes it spreads over.
//!
//! - The central room (`store=redis`) pays inside its own script call (the room script's
//!   fifth key, [`crate::redis::Script::visit`]): nothing here.
//! - The synced room (`store=redis sync=`) decides on each node's shared memory; a client
//!   taking its place is the one moment it asks Redis, with this folder's small script
//!   (`script.lua`): its call built and its reply read fallibly ([`FloodScript`],
//!   [`take_reply`]).
//!
//! The bucket's key ([`crate::redis::Keys::flood`]) is the client key's hash under the room's
//! hash tag; the hash's seed is derived from the ticket keys
//! ([`crate::ticket::Keyring::derive_u64`]), the same on every node that shares the key file.
//! `core/tests/flood_script.rs` runs the script against a real `redis-server`, beside
//! [`crate::room::gcra::Rate::take`].

mod script;

#[cfg(test)]
mod tests;

pub use script::*;

/// What [`crate::ticket::Keyring::derive_u64`] derives the flood hash's seed for.
pub const SEED_PURPOSE: &str = "smart_limit flood seed";
