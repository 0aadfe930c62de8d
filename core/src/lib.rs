//! The pure logic of smart_limit, free of nginx symbols so `cargo test` covers it.
//!
//! Data flows one way: a cookie becomes a [`ticket::Ticket`], the ticket and the [`rules`]
//! give a decision (from a [`room::Room`] in shared memory, or from the Redis script that
//! follows the same rules), and the decision becomes an answer ([`page`]).

/// A Fenwick tree of live places, for positions in O(log n).
pub mod fenwick;
/// The synced room's script rules in Rust (simulator, equivalence tests).
pub mod fleet_model;
/// A fleet-wide request rate (AJA): probabilistic admission from cumulative counters.
pub mod fleet_rate;
/// A room decided locally by every node of a fleet, synced through Redis (Cloudflare).
pub mod fleet_room;
/// One worker per node for a zone's periodic work, elected through shared memory.
pub mod leader;
/// Prometheus text exposition and the control endpoint's JSON, from room snapshots.
pub mod metrics;
/// Waiting answer bodies: HTML page, JSON, content negotiation.
pub mod page;
/// Configuration value parsers and the `smart_limit_zone` parameters.
pub mod parse;
/// What a worker remembers of the waiting clients it answered (replay limits, reuse).
pub mod poll;
/// The one source of random bytes (the operating system's), buffered per process.
pub mod random;
/// Rate limits as one number per bucket (GCRA): flood control, session request rate.
pub mod rate;
/// The Redis store without I/O: keys, the room script, replies, backoff.
pub mod redis;
/// How to reach Redis: addresses, AUTH, TLS, Sentinel (shared by rooms and rate zones).
pub mod redis_params;
/// A fallible, bounded RESP2 reply parser.
pub mod resp;
/// One room's queue and admitted sessions in a flat block of shared memory.
pub mod room;
/// The room's rules as plain functions: capacity, ticket validity, lottery.
pub mod rules;
/// Session tickets: AES-256-GCM sealed cookie values, key files, cookie helpers.
pub mod ticket;
