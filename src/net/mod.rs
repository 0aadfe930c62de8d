//! Networking on nginx's event loop: a peer connection ([`peer`]) and TLS on it with nginx's
//! SSL ([`tls`]). No threads, no blocking calls: everything is driven by nginx events and
//! timers. The Redis client (`crate::redis`) is built on them.

pub mod peer;
pub mod tls;
