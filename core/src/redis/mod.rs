//! Redis without I/O: the RESP reply parser, how to reach a server (addresses, AUTH, TLS,
//! Sentinel, Cluster), the server version a connection needs (`version`), scripts by SHA, the
//! central room's keys, script and replies, and the reconnect backoff. The network client that
//! carries these bytes lives in the module (`src/redis/`); this part is covered by `cargo test`,
//! and `tests/redis_script.rs` runs the room script against a real `redis-server` side by side
//! with [`Room`](crate::room::Room).
//!
//! Uses `config` (parameter parsing) and `room` (the central room follows the same rules).

mod conn;
mod events;
mod room;
mod script;
pub mod steer;

panic_free! {
    pub mod params;
    pub mod version;
}
pub mod resp;

#[cfg(test)]
mod tests;

/// The least a room's keys outlive its last call, whatever its own times: a minute (the
/// central room's keys, room.lua, and a synced room's, `FleetConfig::key_ttl_ms`).
pub const KEY_TTL_FLOOR_MS: u64 = 60_000;

pub use conn::*;
pub use events::*;
pub use room::*;
pub use script::*;
