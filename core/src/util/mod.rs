//! Pure helpers every layer may use; they use nothing else of the crate: the one source of
//! random bytes, time helpers, output buffers, a Fenwick tree, and the tables' hashing.

pub mod fenwick;
pub mod hash;
panic_free! {
    pub mod out;
}
pub mod random;
pub mod time;
