//! YCSB's core workloads A to F (Cooper et al., "Benchmarking Cloud
//! Serving Systems with YCSB", SoCC 2010, Table 2; the `workloads/workloada`
//! ... `workloadf` files of YCSB), as named mixes every command that drives
//! clients through [`crate::Mix`] takes (`--workload ycsb-a`):
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
