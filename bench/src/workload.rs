//! What the client threads do: keys, values, the GET/PUT mix and the key
//! distributions.
//!
//! Keys are `key-<12 digits>` padded with `.` to the key size. The three
//! distributions:
//!
//! - **uniform**: every key equally likely.
//! - **zipf**: YCSB's scrambled Zipfian (theta 0.99 by default), see `nessie_workload::zipf`.
//! - **locality** (the tech report's per-node working set): key `k` belongs
//!   to the working set of node `k mod N`, and is preloaded by a client of
//!   that node, so under Nessie its data table entry is on that node. A
//!   client on node `n` picks, with probability `locality_pct` %, a key of
//!   its own node's working set (uniformly), and otherwise any key
//!   (uniformly). Under uniform and zipf, key `k` is preloaded by client
//!   `k mod (N x T)` (round robin over all clients).
//!
//! PUTs of existing keys keep a key's data table entry with the writer (the
//! PUT allocates it), so locality persists when a node's clients update their
//! own working set.

use nessie_workload::ycsb::{YcsbDraw, YcsbGen};
use nessie_workload::zipf::ScrambledZipfian;
use nessie_workload::{ValueDraw, ValueMix, Ycsb};

/// A small, fast, seedable generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        nessie_protocol::rng::splitmix64(&mut self.0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        nessie_protocol::rng::unit(self.next_u64())
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }
}

/// How clients pick keys.
#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    /// Every key equally likely.
    Uniform,
    /// YCSB's scrambled Zipfian.
    Zipf,
    /// Per-node working sets (see the module documentation).
    Locality,
}

/// One workload, as every system runs it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Workload {
    /// Distinct keys (all preloaded).
    pub keys: u64,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes (the largest, when sizes vary).
    pub value_size: u32,
    /// How value sizes are drawn (fixed: every value `value_size` bytes).
    pub value_mix: ValueMix,
    /// Percent of GETs; the rest are PUTs of existing keys.
    pub get_pct: f64,
    /// Key distribution.
    pub distribution: Distribution,
    /// Zipf exponent.
    pub zipf_theta: f64,
    /// Percent of a client's accesses to its node's working set (locality).
    pub locality_pct: f64,
    /// Seed of every generator.
    pub seed: u64,
    /// Percent of range scans (ordered stores); GETs take `get_pct`, PUTs
    /// the rest.
    pub scan_pct: f64,
    /// Entries a scan asks for (from a key drawn like any other).
    pub scan_len: u32,
    /// PUTs insert fresh keys instead of updating preloaded ones.
    pub inserts: bool,
    /// GETs are searches (presence only) where a system has them (Cell).
    pub searches: bool,
    /// One of YCSB's core workloads instead of the mix above
    /// (`nessie_workload::ycsb`: its own operations and key distribution;
    /// `scan_len` is then the longest scan).
    pub ycsb: Option<Ycsb>,
}

impl Workload {
    /// The length of write number `n` of a writer seeded `seed`: drawn from
    /// [`Workload::value_mix`], at most `value_size`.
    pub fn value_len(&self, seed: u64, n: u64) -> usize {
        ValueDraw {
            mix: self.value_mix,
            max: self.value_size,
            min: 1,
            seed,
        }
        .size(n)
    }

    /// The mean value length (for goodput), over 10,000 draws.
    pub fn mean_value_len(&self) -> f64 {
        self.value_mix.mean(self.value_size, 1, 10_000)
    }

    /// The key generator of a Zipf workload (`None` for the others).
    pub fn zipf(&self) -> Option<ScrambledZipfian> {
        (self.distribution == Distribution::Zipf)
            .then(|| ScrambledZipfian::new(self.keys, self.zipf_theta))
    }
}

pub use nessie_workload::{key_of, write_key};

/// Which client (node, index) preloads key `k`.
pub fn preloader(w: &Workload, k: u64, nodes: u16, clients: u16) -> (u16, u16) {
    let (n, t) = (u64::from(nodes), u64::from(clients));
    match w.distribution {
        Distribution::Locality => ((k % n) as u16, ((k / n) % t) as u16),
        _ => {
            let c = k % (n * t);
            ((c / t) as u16, (c % t) as u16)
        }
    }
}

/// What the generator drew for a client's next operation, before its key's
/// bytes and its value: the bench's source makes it a
/// `nessie_protocol::KvRequest` (a scan only for a client that has them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draw {
    /// A GET.
    Get,
    /// A PUT (an update of a preloaded key, or an insert of a fresh one).
    Put,
    /// A range scan of `scan_len` entries.
    Scan,
}

/// One client thread's generator of operations.
#[derive(Clone, Debug)]
pub struct OpGen {
    /// The YCSB workload's generator, if one runs, and the length of the
    /// scan it drew last.
    ycsb: Option<(YcsbGen, u32)>,
    w: Workload,
    node: u64,
    nodes: u64,
    rng: Rng,
    zipf: Option<ScrambledZipfian>,
    fresh: u64,
}

impl OpGen {
    /// As [`OpGen::with_zipf`], building the workload's Zipf constants.
    #[cfg(test)]
    pub fn new(w: &Workload, nodes: u16, node: u16, index: u16, stream: u64) -> OpGen {
        Self::with_zipf(w, w.zipf(), nodes, node, index, stream)
    }

    /// The generator of the client `index` on `node` in a cluster of `nodes`,
    /// seeded from the workload seed, the client and `stream` (the slice),
    /// with the workload's prebuilt [`Workload::zipf`] (whose constants cost
    /// a million powers for a theta other than YCSB's).
    pub fn with_zipf(
        w: &Workload,
        zipf: Option<ScrambledZipfian>,
        nodes: u16,
        node: u16,
        index: u16,
        stream: u64,
    ) -> OpGen {
        let seed = w.seed
            ^ (u64::from(node) << 48)
            ^ (u64::from(index) << 32)
            ^ stream.wrapping_mul(0x2545_f491_4f6c_dd1d);
        debug_assert_eq!(zipf.is_some(), w.distribution == Distribution::Zipf);
        let mut rng = Rng::new(seed);
        // Fresh keys of this client and stream: a random block of 2^18
        // numbers above the preloaded ones (below 10^12, the key format's limit).
        let fresh = w.keys + (rng.below(1 << 20) << 18);
        // A YCSB client's inserts take a block of its own: a number drawn
        // per client and slice (two that draw one share their inserts).
        let ycsb = w
            .ycsb
            .map(|y| (YcsbGen::new(y, w.keys, rng.below(1 << 20), w.scan_len), 0));
        OpGen {
            ycsb,
            zipf,
            w: w.clone(),
            node: u64::from(node),
            nodes: u64::from(nodes.max(1)),
            rng,
            fresh,
        }
    }

    /// The next key number.
    pub fn key(&mut self) -> u64 {
        match (self.w.distribution, &self.zipf) {
            (Distribution::Zipf, Some(z)) => z.key(self.rng.unit()),
            (Distribution::Locality, _)
                if self.rng.unit() * 100.0 < self.w.locality_pct && self.w.keys > self.node =>
            {
                // Keys node, node + N, node + 2N, ... below `keys`.
                let own = (self.w.keys - self.node).div_ceil(self.nodes);
                self.node + self.rng.below(own) * self.nodes
            }
            _ => self.rng.below(self.w.keys),
        }
    }

    /// The next operation and key.
    pub fn next_op(&mut self) -> (Draw, u64) {
        if let Some((y, scan)) = self.ycsb.as_mut() {
            let rng = &mut self.rng;
            return match y.next(&mut || rng.unit()) {
                YcsbDraw::Read(k) => (Draw::Get, k),
                YcsbDraw::Write(k) => (Draw::Put, k),
                YcsbDraw::Scan(k, len) => {
                    *scan = len;
                    (Draw::Scan, k)
                }
            };
        }
        let dice = self.rng.unit() * 100.0;
        let kind = if dice < self.w.get_pct {
            Draw::Get
        } else if dice < self.w.get_pct + self.w.scan_pct {
            Draw::Scan
        } else {
            Draw::Put
        };
        if kind == Draw::Put && self.w.inserts {
            self.fresh += 1;
            return (kind, self.fresh);
        }
        (kind, self.key())
    }

    /// The length of the last scan drawn: the YCSB workload's draw, else
    /// the workload's `scan_len`.
    pub fn scan_len(&self) -> u32 {
        match &self.ycsb {
            Some((_, len)) => *len,
            None => self.w.scan_len,
        }
    }

    /// The generator's random source (for arrival times).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(d: Distribution) -> Workload {
        Workload {
            keys: 1000,
            key_size: 32,
            value_size: 8,
            value_mix: ValueMix::Fixed,
            get_pct: 90.0,
            distribution: d,
            zipf_theta: 0.99,
            locality_pct: 90.0,
            seed: 3,
            scan_pct: 0.0,
            scan_len: 1,
            inserts: false,
            searches: false,
            ycsb: None,
        }
    }

    #[test]
    fn locality_keys_are_mostly_the_nodes_own_and_preloaded_there() {
        let w = w(Distribution::Locality);
        let mut g = OpGen::new(&w, 3, 1, 0, 0);
        let n = 10_000;
        let own = (0..n).filter(|_| g.key() % 3 == 1).count();
        // 90 % own plus a third of the other 10 %.
        let f = own as f64 / n as f64;
        assert!((f - 0.933).abs() < 0.02, "{f}");
        for k in 0..30 {
            assert_eq!(preloader(&w, k, 3, 2).0, (k % 3) as u16);
        }
    }

    #[test]
    fn a_ycsb_workload_draws_its_own_operations() {
        let y = Workload {
            ycsb: Some(Ycsb::F),
            ..w(Distribution::Uniform)
        };
        let mut g = OpGen::new(&y, 3, 0, 0, 0);
        let ops: Vec<(Draw, u64)> = (0..2_000).map(|_| g.next_op()).collect();
        // A read-modify-write's PUT follows its GET of the same key.
        for i in 1..ops.len() {
            if ops[i].0 == Draw::Put {
                assert_eq!(ops[i - 1], (Draw::Get, ops[i].1), "at {i}");
            }
        }
        let e = Workload {
            ycsb: Some(Ycsb::E),
            scan_len: 50,
            ..w(Distribution::Uniform)
        };
        let mut g = OpGen::new(&e, 3, 0, 0, 0);
        let mut lens = Vec::new();
        for _ in 0..2_000 {
            if g.next_op().0 == Draw::Scan {
                lens.push(g.scan_len());
            }
        }
        assert!(lens.len() > 1_800 && lens.iter().all(|l| (1..=50).contains(l)));
    }

    #[test]
    fn get_ratio_and_key_range() {
        let w = w(Distribution::Uniform);
        let mut g = OpGen::new(&w, 3, 0, 0, 0);
        let gets = (0..10_000)
            .filter(|_| {
                let (k, key) = g.next_op();
                assert!(key < 1000);
                k == Draw::Get
            })
            .count();
        assert!((gets as f64 / 10_000.0 - 0.9).abs() < 0.02);
        assert_eq!(key_of(7, 20), b"key-000000000007....".to_vec());
        let mut buf = key_of(123_456, 40);
        write_key(&mut buf, 7, 20);
        assert_eq!(buf, key_of(7, 20));
    }
}
