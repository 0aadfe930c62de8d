//! Pure helpers every layer may use; they use nothing else of the crate: the one source of
//! random bytes, time helpers, output buffers, a Fenwick tree, and the tables' hashing.

pub mod fenwick;
pub mod hash;
panic_free! {
    pub mod out;
}
pub mod random;
pub mod time;

/// One whole in parts per million (a probability of 1, a share of all): the rooms' shares,
/// the flood and rate probabilities, and the scripts' (in their preambles).
pub const PPM: u32 = 1_000_000;
