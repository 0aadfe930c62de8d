//! The pure logic of smart_limit, free of nginx symbols so `cargo test` covers it.

// Waiting answer bodies: HTML page, JSON, content negotiation.
pub mod page;
// Configuration value parsers and the `smart_limit_zone` parameters.
pub mod parse;
// Session tickets: AES-256-GCM sealed cookie values, key files, cookie helpers.
pub mod ticket;
