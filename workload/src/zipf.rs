//! YCSB's Zipfian key generators: `ZipfianGenerator` (Gray et al.'s fast
//! approximate method, "Quickly Generating Billion-Record Synthetic
//! Databases", SIGMOD 1994) and `ScrambledZipfianGenerator`, which draws a rank
//! from a Zipfian over 10^10 items and scatters it over the key space with
//! FNV-1a-64, so that the hot keys are not neighbours (and land on different
//! nodes). Both follow YCSB's Java code (`site.ycsb.generator`) step by step.

/// YCSB's default Zipfian constant (theta).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// Items of the Zipfian behind YCSB's scrambled generator.
pub const SCRAMBLED_ITEMS: u64 = 10_000_000_000;

/// YCSB's precomputed zeta(10^10, 0.99).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// `sum_{i=1..n} i^-theta`, exactly for small `n` and by Euler-Maclaurin past
/// the first million terms (YCSB sums all terms, which is too slow for 10^10).
pub fn zeta(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 1_000_000;
    let m = n.min(EXACT);
    let mut sum: f64 = (1..=m).map(|i| (i as f64).powf(-theta)).sum();
    if n > m {
        // sum_{i=m+1..n} f(i) ~ integral_m^n f + (f(n) - f(m)) / 2 + (f'(n) - f'(m)) / 12
        let (a, b) = (m as f64, n as f64);
        let f = |x: f64| x.powf(-theta);
        let df = |x: f64| -theta * x.powf(-theta - 1.0);
        let integral = if (theta - 1.0).abs() < 1e-12 {
            (b / a).ln()
        } else {
            (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta)
        };
        sum += integral + (f(b) - f(a)) / 2.0 + (df(b) - df(a)) / 12.0;
    }
    sum
}

/// YCSB's `ZipfianGenerator`: rank 0 is the most popular item; ranks 0 and 1
/// are drawn with their exact probabilities `1/zetan` and `2^-theta/zetan`.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    /// A Zipfian over `items` items (at least 2) with exponent `theta` in (0, 1).
    pub fn new(items: u64, theta: f64) -> Zipfian {
        Self::with_zetan(items, theta, zeta(items, theta))
    }

    /// As [`Zipfian::new`] with a precomputed `zeta(items, theta)`.
    pub fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = items.max(2);
        let zeta2 = zeta(2, theta);
        Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }

    /// The rank drawn for a uniform `u` in [0, 1).
    pub fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.items - 1)
    }

    /// The probability of rank 0 (the hottest item).
    pub fn p_hottest(&self) -> f64 {
        1.0 / self.zetan
    }
}

/// YCSB's `Utils.fnvhash64` (FNV-1a over the 8 little-end bytes, then abs).
pub fn fnvhash64(mut val: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= val & 0xff;
        val >>= 8;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    (h as i64).unsigned_abs()
}

/// YCSB's `ScrambledZipfianGenerator` over `0..keys`.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    keys: u64,
    zipf: Zipfian,
}

impl ScrambledZipfian {
    /// Keys `0..keys`, exponent `theta` (YCSB's precomputed zeta for 0.99).
    pub fn new(keys: u64, theta: f64) -> ScrambledZipfian {
        let zetan = if theta == ZIPFIAN_CONSTANT {
            SCRAMBLED_ZETAN
        } else {
            zeta(SCRAMBLED_ITEMS, theta)
        };
        ScrambledZipfian {
            keys: keys.max(1),
            zipf: Zipfian::with_zetan(SCRAMBLED_ITEMS, theta, zetan),
        }
    }

    /// The key drawn for a uniform `u` in [0, 1).
    pub fn key(&self, u: f64) -> u64 {
        fnvhash64(self.zipf.rank(u)) % self.keys
    }

    /// The key rank 0 maps to (the hottest key, up to collisions).
    pub fn hottest_key(&self) -> u64 {
        fnvhash64(0) % self.keys
    }

    /// The underlying Zipfian over 10^10 ranks.
    pub fn zipfian(&self) -> &Zipfian {
        &self.zipf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64, uniform in [0, 1).
    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Rng {
            Rng(seed ^ 0x5851_f42d_4c95_7f2d)
        }

        fn unit(&mut self) -> f64 {
            nessie_protocol::rng::unit(nessie_protocol::rng::splitmix64(&mut self.0))
        }
    }

    #[test]
    fn zeta_matches_ycsb_constant() {
        let z = zeta(SCRAMBLED_ITEMS, 0.99);
        assert!((z - SCRAMBLED_ZETAN).abs() < 1e-6, "{z}");
        let exact: f64 = (1..=1000u32).map(|i| f64::from(i).powf(-0.99)).sum();
        assert!((zeta(1000, 0.99) - exact).abs() < 1e-9);
    }

    #[test]
    fn hottest_items_have_theoretical_frequency() {
        let z = Zipfian::new(1000, 0.99);
        let mut rng = Rng::new(7);
        let n = 400_000;
        let mut counts = vec![0u64; 1000];
        for _ in 0..n {
            counts[z.rank(rng.unit()) as usize] += 1;
        }
        let zetan = zeta(1000, 0.99);
        let p0 = 1.0 / zetan;
        let p1 = 0.5f64.powf(0.99) / zetan;
        let f0 = counts[0] as f64 / n as f64;
        let f1 = counts[1] as f64 / n as f64;
        // Standard error at these sizes is about 0.0004.
        assert!((f0 - p0).abs() < 0.003, "hottest {f0} vs {p0}");
        assert!((f1 - p1).abs() < 0.003, "second {f1} vs {p1}");
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn scrambled_hottest_key_matches_theory() {
        let keys = 10_000;
        let s = ScrambledZipfian::new(keys, 0.99);
        let mut rng = Rng::new(11);
        let n = 300_000;
        let mut counts = vec![0u64; keys as usize];
        for _ in 0..n {
            counts[s.key(rng.unit()) as usize] += 1;
        }
        let (hot, &max) = counts.iter().enumerate().max_by_key(|(_, c)| **c).unwrap();
        assert_eq!(hot as u64, s.hottest_key());
        let f = max as f64 / n as f64;
        let p = s.zipfian().p_hottest(); // about 0.0378
                                         // Other ranks colliding on the hottest key add at most ~1/keys.
        assert!(
            f >= p - 0.003 && f <= p + 0.003 + 1.0 / keys as f64,
            "{f} vs {p}"
        );
        // Skew: the 100 most popular keys draw far more than 1 % of accesses.
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = counts[..100].iter().sum();
        assert!(top as f64 / n as f64 > 0.15);
    }

    #[test]
    fn fnv_is_ycsbs() {
        // Values computed independently (FNV-1a-64 over 8 little-end bytes, abs).
        assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnvhash64(12345), 1_792_800_413_050_876_852);
    }
}
