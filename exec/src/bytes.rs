//! Little byte helpers the layouts share: 8-byte little-endian words and
//! rounding to whole words.

/// The little-endian word at byte `at` of `b` (0 past the end).
pub fn word(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Rounds `n` up to a multiple of 8.
pub fn round8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}
