//! Networking on nginx's event loop: a peer connection ([`peer`]), TLS on it with nginx's SSL
//! ([`tls`]), and the Redis client built on them ([`redis`]). No threads, no blocking calls: everything is driven by nginx events and
//! timers, and callers wait as futures on the `ngx::async_` runtime.

pub mod peer;
pub mod redis;
pub mod tls;
