//! How long the values a workload writes are ([`ValueMix`]), drawn per
//! write from the run's seed without taking from any generator's stream
//! ([`size_bits`]), so that a run with fixed sizes draws exactly the keys
//! and operations it drew before sizes could vary.
//!
//! The realistic mix is Facebook's ETC memcached pool (Atikoglu et al.,
//! "Workload Analysis of a Large-Scale Key-Value Store", SIGMETRICS 2012,
//! §5.1 and Table 5): value sizes follow a Generalized Pareto distribution
//! with location 0, scale 214.476 and shape 0.348238 (median about 168 B,
//! mean about 330 B, one value in 350 past 4 KiB), cut at the run's largest
//! value (memcached's item limit is 1 MiB).

use clap::ValueEnum;

/// The distribution of value sizes of a run (at most `--value-size`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ValueMix {
    /// Every value exactly `--value-size` bytes (the default).
    #[default]
    Fixed,
    /// Uniform from the smallest allowed size to `--value-size`.
    Uniform,
    /// Facebook's ETC pool: Generalized Pareto (0, 214.476, 0.348238), cut
    /// at `--value-size`.
    Etc,
}

/// ETC's Generalized Pareto scale (bytes) and shape (SIGMETRICS'12 Table 5).
const ETC_SCALE: f64 = 214.476;
const ETC_SHAPE: f64 = 0.348_238;

impl ValueMix {
    /// A value size between `min` and `max` (inclusive; `min` is raised to
    /// at most `max`) for 64 random bits `bits`.
    pub fn size(self, max: u32, min: u32, bits: u64) -> u32 {
        let min = min.min(max);
        let u = (bits >> 11) as f64 / (1u64 << 53) as f64;
        let drawn = match self {
            ValueMix::Fixed => return max,
            ValueMix::Uniform => u64::from(min) + (bits % (u64::from(max - min) + 1)),
            ValueMix::Etc => {
                // Inverse CDF of the Generalized Pareto distribution.
                let x = ETC_SCALE * ((1.0 - u).powf(-ETC_SHAPE) - 1.0) / ETC_SHAPE;
                if x.is_finite() {
                    x.round() as u64
                } else {
                    u64::from(max)
                }
            }
        };
        drawn.clamp(u64::from(min), u64::from(max)) as u32
    }

    /// The mean size of `samples` draws (deterministic: the first
    /// `samples` of seed 0), for sizing and reports.
    pub fn mean(self, max: u32, min: u32, samples: u64) -> f64 {
        let total: u64 = (0..samples)
            .map(|i| u64::from(self.size(max, min, size_bits(0, i))))
            .sum();
        total as f64 / samples.max(1) as f64
    }
}

impl std::fmt::Display for ValueMix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ValueMix::Fixed => "fixed",
            ValueMix::Uniform => "uniform",
            ValueMix::Etc => "etc",
        })
    }
}

/// How one writer sizes its values: a mix, the largest and smallest size,
/// and the writer's seed, so that each write's size follows from its write
/// number alone (the workload's threads, the simulator's clients and the
/// bench's threads all draw through it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueDraw {
    /// The distribution.
    pub mix: ValueMix,
    /// The largest size, bytes.
    pub max: u32,
    /// The smallest size, bytes (raised to at most `max`).
    pub min: u32,
    /// The writer's seed.
    pub seed: u64,
}

impl ValueDraw {
    /// The size of write number `n`, bytes.
    pub fn size(&self, n: u64) -> usize {
        self.mix.size(self.max, self.min, size_bits(self.seed, n)) as usize
    }
}

/// 64 random bits for write number `n` of the writer seeded `seed`
/// (splitmix64 of the two).
pub fn size_bits(seed: u64, n: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(n)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_is_the_largest_and_uniform_spans_the_range() {
        assert_eq!(ValueMix::Fixed.size(256, 8, 12345), 256);
        let sizes: Vec<u32> = (0..10_000)
            .map(|i| ValueMix::Uniform.size(64, 8, size_bits(1, i)))
            .collect();
        assert_eq!(sizes.iter().min(), Some(&8));
        assert_eq!(sizes.iter().max(), Some(&64));
    }

    /// ETC's median and mean as the paper's distribution has them (median
    /// 214.476 (2^0.348 - 1) / 0.348 = 168 B; mean 214.476 / (1 - 0.348) =
    /// 329 B uncut), and its tail.
    #[test]
    fn etc_has_the_papers_median_mean_and_tail() {
        let mut sizes: Vec<u32> = (0..200_000)
            .map(|i| ValueMix::Etc.size(1 << 20, 1, size_bits(7, i)))
            .collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        assert!((160..=176).contains(&median), "median {median}");
        let mean = ValueMix::Etc.mean(1 << 20, 1, 200_000);
        assert!((300.0..360.0).contains(&mean), "mean {mean}");
        let past_4k = sizes.iter().filter(|&&s| s > 4096).count();
        assert!(
            (300..900).contains(&past_4k),
            "{past_4k} of 200,000 past 4 KiB"
        );
        assert_eq!(ValueMix::Etc.size(100, 8, u64::MAX), 100);
    }
}
