//! The workspace's one seeded random generator, in two steps:
//! [`xorshift64`] (Marsaglia's 13-7-17 triple) for every stream of draws
//! (the simulator's dice, the clients' back-off jitter, the tests' workload
//! loops, the checker's generated histories) and [`splitmix64`] for seeding and for streams that must not
//! start from a poor seed (the benchmark's keys, shuffled word orders).
//!
//! Hand-written, not a crate (`rand_xoshiro`, `fastrand`), on purpose: the
//! simulator's and the swarm's seeds must replay bit for bit on every
//! platform and release (pinned seeds in `cargo test` name the case that
//! catches each fault switch), and a crate may change its algorithm or its
//! seeding in a release. Both steps are a few lines, tested against their
//! published reference values.

use std::time::Duration;

/// One step of xorshift64 on `state` (never zero: zero is its fixed
/// point; seed with [`splitmix64`] or set the low bit).
pub fn xorshift64(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// One step of SplitMix64 on `state` (any value).
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in `[0, 1)` from 64 random `bits` (their top 53, the
/// precision of an `f64`).
pub fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A uniform draw in `[0, n)` from 64 random `bits` (their product with
/// `n`, top 64 bits: no modulo bias worth the name, and 0 for `n` 0).
pub fn below(bits: u64, n: u64) -> u64 {
    ((u128::from(bits) * u128::from(n)) >> 64) as u64
}

/// A duration in `[base/2, base]`, drawn from the xorshift64 `state`: a
/// back-off with jitter.
pub fn jittered(state: &mut u64, base: Duration) -> Duration {
    let n = base.as_nanos() as u64;
    Duration::from_nanos(n / 2 + xorshift64(state) % (n / 2 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `below` spans [0, n): 0 bits give 0, all ones n - 1, half of them
    /// n / 2, and n = 0 gives 0.
    #[test]
    fn below_draws_span_zero_to_n_minus_one() {
        assert_eq!(below(0, 7), 0);
        assert_eq!(below(u64::MAX, 7), 6);
        assert_eq!(below(1 << 63, 8), 4);
        assert_eq!(below(u64::MAX, 0), 0);
    }

    /// `unit` spans [0, 1): 0 bits give 0, all ones the largest draw
    /// below 1, and the low 11 bits do not count.
    #[test]
    fn unit_draws_span_zero_to_below_one() {
        assert_eq!(unit(0), 0.0);
        assert!(unit(u64::MAX) < 1.0 && unit(u64::MAX) > 0.999_999);
        assert_eq!(unit(1 << 63), 0.5);
        assert_eq!(unit((1 << 63) | 0x7ff), 0.5);
    }

    #[test]
    fn the_steps_give_their_reference_values() {
        // SplitMix64 from 0: the reference implementation's first outputs.
        let mut s = 0;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
        // xorshift64 (13, 7, 17) from 1.
        let mut x = 1;
        assert_eq!(xorshift64(&mut x), 0x4082_2041);
        assert_ne!(xorshift64(&mut x), 0);
    }

    #[test]
    fn jitter_stays_within_half_the_base_and_the_base() {
        let mut s = 0x9e37_79b9_7f4a_7c15 | 1;
        let base = Duration::from_millis(10);
        for _ in 0..1_000 {
            let d = jittered(&mut s, base);
            assert!(d >= base / 2 && d <= base, "{d:?}");
        }
        assert_eq!(jittered(&mut s, Duration::ZERO), Duration::ZERO);
    }
}
