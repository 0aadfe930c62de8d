//! Pure helpers every layer may use; they use nothing else of the crate: the one source of
//! random bytes, time helpers, output buffers, and a Fenwick tree.

pub mod fenwick;
panic_free! {
    pub mod out;
}
pub mod random;
pub mod time;
