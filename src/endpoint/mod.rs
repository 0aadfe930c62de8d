//! Locations the module answers itself, each with its own directive:
//! `smart_limit_metrics` (Prometheus text), `smart_limit_control` (rooms as JSON, run-time
//! mode switch), `smart_limit_poll` (a status URL for apps that also answers admitted
//! visitors) and `smart_limit_jwks` (the public keys of the room's admission tokens).

pub mod control;
pub mod jwks;
pub mod metrics;
pub mod poll;
