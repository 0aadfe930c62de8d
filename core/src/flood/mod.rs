//! Flood control met in Redis, for a fleet ([S15]): one client key's budget of places (a GCRA
//! bucket) shared by every node, so one address gets `1 + flood_burst` places at once on the
//! whole fleet, then one per `flood=` interval, however many nodes it spreads over.
//!
//! - The central room (`store=redis`) pays inside its own script call (the room script's
//!   fifth key, [`crate::redis::Script::visit`]).
//! - The synced room (`store=redis sync=`) pays on the node (its own budget) and settles the
//!   fleet's in the background sync: the fleet script charges the buckets of the client keys
//!   a node reports and answers the keys over their budget (`crate::fleet`, its `flood.rs`).
//!   No request waits for Redis.
//!
//! The bucket's key ([`crate::redis::Keys::flood`]) is the client key's hash under the room's
//! hash tag; the hash's seed is derived from the ticket keys
//! ([`crate::ticket::Keyring::derive_u64`]), the same on every node that shares the key file.

#[cfg(test)]
mod tests;

/// What [`crate::ticket::Keyring::derive_u64`] derives the flood hash's seed for.
pub const SEED_PURPOSE: &str = "smart_limit flood seed";
