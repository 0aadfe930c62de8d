//! Locations the module answers itself, each with its own directive:
//! `smart_limit_metrics` (Prometheus text), `smart_limit_control` (rooms as JSON, run-time
//! mode switch) and `smart_limit_poll` (a status URL for apps that also answers admitted
//! visitors).

pub mod control;
pub mod metrics;
pub mod poll;
