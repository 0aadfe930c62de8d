//! Hashing for the zone's tables: a 64-bit finaliser, and the set of a set-associative table
//! a key belongs to.

/// Mixes every bit of `x` into every bit of the result (MurmurHash3's 64-bit finaliser), so
/// that keys differing in a few bits land far apart.
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

/// The set of `ways` entries that `key` is kept in, in a set-associative `table` (whole sets;
/// a table shorter than one set is one set). The high bits of a multiplicative hash pick the
/// set: the product mixes them best.
pub fn set_of<T>(table: &mut [T], key: u64, ways: usize) -> &mut [T] {
    let ways = ways.max(1);
    let sets = (table.len() / ways).max(1);
    let set = ((key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize) % sets;
    let len = table.len();
    let from = (set * ways).min(len);
    let to = (from + ways).min(len);
    &mut table[from..to]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_keeps_to_one_whole_set() {
        let mut t = [0u8; 64];
        for key in [0u64, 1, 42, u64::MAX] {
            let s = set_of(&mut t, key, 8);
            assert_eq!(s.len(), 8);
        }
        let mut short = [0u8; 5];
        assert_eq!(set_of(&mut short, 7, 8).len(), 5);
        assert_ne!(mix64(1), mix64(2));
        assert_eq!(mix64(0), 0);
    }
}
