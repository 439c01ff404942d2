//! Seeded, stable hashing: the key's cuckoo candidates and filter bits.
//!
//! The hash is defined here (FNV-1a over the bytes, then the MurmurHash3
//! 64-bit finaliser) rather than taken from `std`, whose hashers may change
//! between Rust releases: every client of a deployment, whatever it was built
//! with, must compute the same candidates.

use crate::addr::{IteAddr, NodeId};

const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
const FILTER_SEED: u64 = 0x5f1e_7e2b_1715_c0de;

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The stable 64-bit hash of `bytes` under `seed`.
pub fn stable_hash(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET ^ fmix64(seed);
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    fmix64(h ^ (bytes.len() as u64).wrapping_mul(GOLDEN))
}

/// The first slot of index generation `generation` in every node's index
/// region, whose generation 0 has `slots_per_node` entries: each generation
/// doubles the one before, laid end to end.
pub fn generation_base(slots_per_node: u32, generation: u8) -> u32 {
    slots_per_node.wrapping_mul((1u32 << generation).wrapping_sub(1))
}

/// Entries per node of index generation `generation`, whose generation 0 has
/// `slots_per_node`.
pub fn generation_slots(slots_per_node: u32, generation: u8) -> u32 {
    slots_per_node << generation
}

/// Where a key's index table entries may live, and its filter bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hasher {
    /// Deployment-wide seed.
    pub seed: u64,
    /// Number of cuckoo candidates (N): buckets per key.
    pub candidates: u8,
    /// Index table entries per bucket (B); `slots_per_node` is a multiple.
    pub bucket_slots: u8,
    /// Nodes in the cluster.
    pub nodes: u16,
    /// Index table entries per node.
    pub slots_per_node: u32,
    /// Filter bits kept in index table entries (0 disables filtering).
    pub filter_bits: u8,
}

impl Hasher {
    /// Total index table entries in the cluster.
    pub fn total_slots(&self) -> u64 {
        u64::from(self.nodes) * u64::from(self.slots_per_node)
    }

    /// Slots per bucket (B), at least 1.
    pub fn bucket_len(&self) -> usize {
        usize::from(self.bucket_slots.max(1))
    }

    /// Total buckets in the cluster.
    pub fn total_buckets(&self) -> u64 {
        self.total_slots() / u64::from(self.bucket_slots.max(1))
    }

    fn slot_of(&self, global: u64) -> IteAddr {
        let per = u64::from(self.slots_per_node);
        IteAddr {
            node: NodeId((global / per) as u16),
            slot: (global % per) as u32,
        }
    }

    /// The key's candidate index table entries, in the order the protocol
    /// visits them: its N distinct buckets, each as its B slots in address
    /// order (so positions `b*B .. b*B+B` are bucket `b`, one READ). With
    /// B = 1 these are the paper's N candidates. Requires `total_buckets() >=
    /// candidates` (checked by configuration validation).
    pub fn candidates(&self, key: &[u8]) -> Vec<IteAddr> {
        let b = u64::from(self.bucket_slots.max(1));
        self.candidate_buckets(key)
            .into_iter()
            .flat_map(|g| (0..b).map(move |j| g * b + j))
            .map(|g| self.slot_of(g))
            .collect()
    }

    /// The key's candidates in index generation `generation` (docs/protocol.md
    /// §2.5): generation *g* is a table of `slots_per_node · 2^g` entries per
    /// node, laid after the generations before it in every node's index
    /// region (at slot `slots_per_node · (2^g - 1)`), and a key's buckets in
    /// it are drawn as in generation 0 over its larger number of buckets.
    /// Generation 0 is [`Hasher::candidates`].
    pub fn candidates_in(&self, key: &[u8], generation: u8) -> Vec<IteAddr> {
        if generation == 0 {
            return self.candidates(key);
        }
        let grown = Hasher {
            slots_per_node: generation_slots(self.slots_per_node, generation),
            ..*self
        };
        let base = generation_base(self.slots_per_node, generation);
        grown
            .candidates(key)
            .into_iter()
            .map(|a| IteAddr {
                node: a.node,
                slot: a.slot + base,
            })
            .collect()
    }

    /// Whether candidate positions `i` and `j` are slots of one bucket.
    pub fn same_bucket(&self, i: usize, j: usize) -> bool {
        i / self.bucket_len() == j / self.bucket_len()
    }

    /// The key's N distinct buckets, by global bucket number.
    fn candidate_buckets(&self, key: &[u8]) -> Vec<u64> {
        let total = self.total_buckets().max(1);
        let mut globals: Vec<u64> = Vec::with_capacity(usize::from(self.candidates));
        for i in 0..u64::from(self.candidates) {
            let mut g = stable_hash(self.seed.wrapping_add(i.wrapping_mul(GOLDEN)), key) % total;
            let mut attempt = 1u64;
            while globals.contains(&g) {
                g = if attempt < 8 {
                    stable_hash(self.seed ^ (i << 32) ^ attempt.wrapping_mul(GOLDEN), key) % total
                } else {
                    (g + 1) % total
                };
                attempt += 1;
            }
            globals.push(g);
        }
        globals
    }

    /// The key's filter bits (its hash's low `filter_bits` bits).
    pub fn filter(&self, key: &[u8]) -> u16 {
        if self.filter_bits == 0 {
            return 0;
        }
        (stable_hash(self.seed ^ FILTER_SEED, key) & ((1u64 << self.filter_bits) - 1)) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hasher() -> Hasher {
        Hasher {
            seed: 42,
            candidates: 3,
            bucket_slots: 1,
            nodes: 3,
            slots_per_node: 64,
            filter_bits: 7,
        }
    }

    #[test]
    fn hashes_are_stable_across_builds() {
        // Pinned values: a change here breaks every deployed table.
        assert_eq!(stable_hash(0, b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(stable_hash(42, b"key-1"), 0x58dd_7730_5a8f_681f);
        let c = hasher().candidates(b"key-1");
        let pinned: Vec<(u16, u32)> = c.iter().map(|a| (a.node.0, a.slot)).collect();
        assert_eq!(pinned, vec![(0, 31), (1, 2), (1, 62)]);
        assert_eq!(hasher().filter(b"key-1"), 0x6d);
    }

    #[test]
    fn candidates_are_distinct_even_in_tiny_tables() {
        let h = Hasher {
            seed: 7,
            candidates: 3,
            bucket_slots: 1,
            nodes: 1,
            slots_per_node: 3,
            filter_bits: 0,
        };
        for k in 0..500u32 {
            let mut c = h.candidates(&k.to_le_bytes());
            c.sort();
            c.dedup();
            assert_eq!(c.len(), 3);
        }
    }

    #[test]
    fn buckets_are_aligned_runs_of_slots_on_one_node() {
        let h = Hasher {
            bucket_slots: 4,
            ..hasher()
        };
        for k in 0..300u32 {
            let c = h.candidates(&k.to_le_bytes());
            assert_eq!(c.len(), 12);
            for bucket in c.chunks(4) {
                assert_eq!(bucket[0].slot % 4, 0);
                for (j, s) in bucket.iter().enumerate() {
                    assert_eq!(
                        (s.node, s.slot),
                        (bucket[0].node, bucket[0].slot + j as u32)
                    );
                }
            }
            let mut firsts: Vec<_> = c.chunks(4).map(|b| b[0]).collect();
            firsts.sort();
            firsts.dedup();
            assert_eq!(firsts.len(), 3, "distinct buckets");
            assert!(h.same_bucket(1, 3) && !h.same_bucket(3, 4));
        }
    }

    #[test]
    fn seeds_change_placement() {
        let a = hasher().candidates(b"k");
        let b = Hasher {
            seed: 43,
            ..hasher()
        }
        .candidates(b"k");
        assert_ne!(a, b);
    }

    #[test]
    fn filter_fits_its_width() {
        for bits in [0u8, 1, 7, 15] {
            let h = Hasher {
                filter_bits: bits,
                ..hasher()
            };
            for k in 0..200u32 {
                assert!(u32::from(h.filter(&k.to_le_bytes())) < (1u32 << bits));
            }
        }
    }

    #[test]
    fn candidates_spread_over_all_nodes() {
        let h = hasher();
        let mut per_node = [0u32; 3];
        for k in 0..3000u32 {
            for c in h.candidates(&k.to_le_bytes()) {
                per_node[usize::from(c.node.0)] += 1;
            }
        }
        for n in per_node {
            assert!((2500..3500).contains(&n), "{per_node:?}");
        }
    }
}
