//! YCSB's core workloads A to F (Cooper et al., "Benchmarking Cloud
//! Serving Systems with YCSB", SoCC 2010, Table 2; the `workloads/workloada`
//! ... `workloadf` files of YCSB), as named mixes (`--workload ycsb-a`):
//! `nessie run` and `nessie node run` (through `Mix`), `nessie
//! bench` and `nessie sim` (each simulated client its own generator) run
//! all six with [`YcsbGen`] (E's scans on Cell).
//!
//! | workload | operations | keys |
//! |---|---|---|
//! | A (update heavy) | 50 % read, 50 % update | Zipfian |
//! | B (read mostly) | 95 % read, 5 % update | Zipfian |
//! | C (read only) | 100 % read | Zipfian |
//! | D (read latest) | 95 % read, 5 % insert | latest |
//! | E (short ranges) | 95 % scan (1 to 100 entries, uniform), 5 % insert | Zipfian |
//! | F (read-modify-write) | 50 % read, 50 % read-modify-write | Zipfian |
//!
//! Zipfian is YCSB's scrambled Zipfian, constant 0.99 ([`crate::zipf`]),
//! over the preloaded keys. Latest draws a Zipfian rank over the keys this
//! client can name, newest first: its own inserts (newest first), then the
//! preloaded keys from the last one down (YCSB counts every client's
//! inserts; a client here knows only its own, across node processes
//! there is no shared counter). An insert PUTs a key no client has
//! written: the client's own block of key numbers above the preloaded ones
//! (2^19 per client; past that its inserts update its oldest ones). A
//! read-modify-write is a GET of the key followed by a PUT of it, recorded
//! and counted as the two operations it is. Scans need a store with range
//! scans (Cell).

use clap::ValueEnum;

use crate::zipf::{ScrambledZipfian, Zipfian, ZIPFIAN_CONSTANT};

/// One of YCSB's core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
pub enum Ycsb {
    /// 50 % reads, 50 % updates, Zipfian.
    #[value(name = "ycsb-a")]
    A,
    /// 95 % reads, 5 % updates, Zipfian.
    #[value(name = "ycsb-b")]
    B,
    /// Reads only, Zipfian.
    #[value(name = "ycsb-c")]
    C,
    /// 95 % reads, 5 % inserts, the latest keys most popular.
    #[value(name = "ycsb-d")]
    D,
    /// 95 % short range scans, 5 % inserts, Zipfian.
    #[value(name = "ycsb-e")]
    E,
    /// 50 % reads, 50 % read-modify-writes, Zipfian.
    #[value(name = "ycsb-f")]
    F,
}

/// How a YCSB workload picks keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyChoice {
    /// YCSB's scrambled Zipfian (constant 0.99) over the preloaded keys.
    Zipfian,
    /// The newest keys most popular (a Zipfian over recency).
    Latest,
}

/// A YCSB workload's proportions, percent of operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YcsbMix {
    /// Reads (GET).
    pub read: u32,
    /// Updates (PUT of an existing key).
    pub update: u32,
    /// Inserts (PUT of a new key).
    pub insert: u32,
    /// Range scans.
    pub scan: u32,
    /// Read-modify-writes (a GET, then a PUT of its key).
    pub rmw: u32,
    /// How keys are picked.
    pub keys: KeyChoice,
}

/// The longest scan of workload E (YCSB's `maxscanlength`).
pub const MAX_SCAN_LEN: u32 = 100;

impl Ycsb {
    /// Every workload, A to F.
    pub const ALL: [Ycsb; 6] = [Ycsb::A, Ycsb::B, Ycsb::C, Ycsb::D, Ycsb::E, Ycsb::F];

    /// Its name (`ycsb-a`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Ycsb::A => "ycsb-a",
            Ycsb::B => "ycsb-b",
            Ycsb::C => "ycsb-c",
            Ycsb::D => "ycsb-d",
            Ycsb::E => "ycsb-e",
            Ycsb::F => "ycsb-f",
        }
    }

    /// Its proportions (YCSB's `workloads/` files).
    pub fn mix(self) -> YcsbMix {
        let m = |read, update, insert, scan, rmw, keys| YcsbMix {
            read,
            update,
            insert,
            scan,
            rmw,
            keys,
        };
        match self {
            Ycsb::A => m(50, 50, 0, 0, 0, KeyChoice::Zipfian),
            Ycsb::B => m(95, 5, 0, 0, 0, KeyChoice::Zipfian),
            Ycsb::C => m(100, 0, 0, 0, 0, KeyChoice::Zipfian),
            Ycsb::D => m(95, 0, 5, 0, 0, KeyChoice::Latest),
            Ycsb::E => m(0, 0, 5, 95, 0, KeyChoice::Zipfian),
            Ycsb::F => m(50, 0, 0, 0, 50, KeyChoice::Zipfian),
        }
    }

    /// Whether it needs range scans (E).
    pub fn scans(self) -> bool {
        self.mix().scan > 0
    }
}

/// Inserts one client makes before its later ones update its first ones
/// (its block of key numbers above the preloaded keys).
pub const INSERT_BLOCK: u64 = 1 << 19;

/// What a YCSB generator drew.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YcsbDraw {
    /// A GET of this key (a read, or a read-modify-write's read).
    Read(u64),
    /// A PUT of this key (an update, an insert, or a read-modify-write's
    /// write).
    Write(u64),
    /// A scan of this many entries from this key.
    Scan(u64, u32),
}

/// One client's generator of a YCSB workload: its key distributions, its
/// inserts so far, and the write half of a read-modify-write it read the
/// key for.
#[derive(Clone, Debug)]
pub struct YcsbGen {
    mix: YcsbMix,
    preloaded: u64,
    max_scan: u32,
    zipf: ScrambledZipfian,
    /// Ranks over the newest keys first (workload D).
    latest: Option<Zipfian>,
    /// The first key number of this client's inserts.
    block: u64,
    inserted: u64,
    pending_write: Option<u64>,
}

impl YcsbGen {
    /// The generator of workload `w` over `preloaded` keys for the client
    /// numbered `owner` (distinct per client of a run, below 2^20: its
    /// inserts take key numbers `preloaded + owner x INSERT_BLOCK ..`),
    /// whose scans ask for 1 to `max_scan` entries.
    pub fn new(w: Ycsb, preloaded: u64, owner: u64, max_scan: u32) -> YcsbGen {
        let mix = w.mix();
        let preloaded = preloaded.max(1);
        YcsbGen {
            mix,
            preloaded,
            max_scan: max_scan.max(1),
            zipf: ScrambledZipfian::new(preloaded, ZIPFIAN_CONSTANT),
            latest: (mix.keys == KeyChoice::Latest)
                .then(|| Zipfian::new(preloaded + INSERT_BLOCK, ZIPFIAN_CONSTANT)),
            block: preloaded + (owner % (1 << 20)) * INSERT_BLOCK,
            inserted: 0,
            pending_write: None,
        }
    }

    /// A key by the workload's distribution (`u`: uniform draws in [0, 1)).
    fn choose(&self, u: &mut dyn FnMut() -> f64) -> u64 {
        let Some(latest) = &self.latest else {
            return self.zipf.key(u());
        };
        // A Zipfian over every key this client can name, newest first:
        // ranks past them are drawn again, which leaves exactly the
        // Zipfian over the keys that exist.
        let mine = self.inserted.min(INSERT_BLOCK);
        let known = self.preloaded + mine;
        let mut r = latest.rank(u());
        for _ in 0..64 {
            if r < known {
                break;
            }
            r = latest.rank(u());
        }
        let r = r % known;
        if r < mine {
            self.block + (self.inserted - 1 - r) % INSERT_BLOCK
        } else {
            self.preloaded - 1 - (r - mine)
        }
    }

    /// The next operation (`u`: uniform draws in [0, 1)).
    pub fn next(&mut self, u: &mut dyn FnMut() -> f64) -> YcsbDraw {
        if let Some(k) = self.pending_write.take() {
            return YcsbDraw::Write(k);
        }
        let dice = (u() * 100.0) as u32;
        let m = self.mix;
        if dice < m.read {
            YcsbDraw::Read(self.choose(u))
        } else if dice < m.read + m.update {
            YcsbDraw::Write(self.choose(u))
        } else if dice < m.read + m.update + m.insert {
            let k = self.block + self.inserted % INSERT_BLOCK;
            self.inserted += 1;
            YcsbDraw::Write(k)
        } else if dice < m.read + m.update + m.insert + m.scan {
            let k = self.choose(u);
            let len = 1 + (u() * f64::from(self.max_scan)) as u32;
            YcsbDraw::Scan(k, len.min(self.max_scan))
        } else {
            let k = self.choose(u);
            self.pending_write = Some(k);
            YcsbDraw::Read(k)
        }
    }
}

impl std::fmt::Display for Ycsb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mix_adds_up_and_names_parse_back() {
        for w in Ycsb::ALL {
            let m = w.mix();
            assert_eq!(m.read + m.update + m.insert + m.scan + m.rmw, 100, "{w}");
            assert_eq!(Ycsb::from_str(w.name(), true), Ok(w));
        }
        assert!(Ycsb::E.scans() && !Ycsb::A.scans());
        assert_eq!(Ycsb::D.mix().keys, KeyChoice::Latest);
    }
}
