//! The pure logic of smart_limit, free of nginx symbols so `cargo test` covers it.
//!
//! Data flows one way: a cookie becomes a [`ticket::Ticket`], the ticket and the room's
//! [`room::rules`] give a decision (from a [`room::Room`] in shared memory, from the Redis
//! script that follows the same rules, or from a [`fleet::FleetNode`] synced through Redis),
//! and the decision becomes an answer ([`page`]).
//!
//! Modules in layers, each using only the ones above it in this list (`scripts/check-layout`
//! fails on an import cycle):
//!
//! - [`util`]: pure helpers (time, random, output buffers, Fenwick tree);
//! - [`config`]: value parsers shared by the directives, and their errors;
//! - [`sync`]: one worker per node for a zone's periodic work (the leader);
//! - [`ticket`], [`page`]: the sealed cookie and the waiting answer;
//! - [`room`]: the line, positions, sessions, flood control and the rules;
//! - [`capacity`]: `max_active=auto`, the rule that moves it from the origin's measurements;
//! - [`redis`]: RESP, connection parameters, scripts, the central room in Redis;
//! - [`fleet`], [`rate`], [`flood`]: the synced room, the fleet-wide rate and the fleet's
//!   flood budget, each met through Redis;
//! - [`token`]: signed admission and enqueue tokens (JWS), checked against the room's rules;
//! - [`zone`]: the `smart_limit_zone` parameters (naming a store);
//! - [`metrics`]: Prometheus text and the control JSON, from every snapshot.
//!
//! Modules that read untrusted input (cookies, headers, Redis replies, configuration) are
//! declared [`panic_free!`]: outside tests, clippy refuses `unwrap`, `expect`, `panic!` and
//! indexing in them, since a panic in an nginx worker's callback aborts the worker.

/// Declares modules in which nothing may panic (see the crate comment).
macro_rules! panic_free {
    ($($vis:vis mod $name:ident;)*) => {
        $(
            #[cfg_attr(
                not(test),
                deny(
                    clippy::unwrap_used,
                    clippy::expect_used,
                    clippy::panic,
                    clippy::indexing_slicing
                )
            )]
            $vis mod $name;
        )*
    };
}

panic_free! {
    pub mod capacity;
    pub mod challenge;
    pub mod config;
    pub mod event;
    pub mod fleet;
    pub mod flood;
    pub mod metrics;
    pub mod page;
    pub mod rate;
    pub mod ticket;
    pub mod token;
    pub mod zone;
}
pub mod redis;
pub mod room;
pub mod sync;
pub mod util;
