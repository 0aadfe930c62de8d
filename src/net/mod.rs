//! Networking on nginx's event loop: a peer connection ([`peer`]) and the Redis client built
//! on it ([`redis`]). No threads, no blocking calls: everything is driven by nginx events and
//! timers, and callers wait as futures on the `ngx::async_` runtime.

pub mod peer;
pub mod redis;
