//! [`SystemKind`]: the one name of "which system" (Nessie, NessieSD,
//! NessieHY, Pilaf, RACE, RCuckoo, Cell) on the command line, in specifications and in
//! reports. The four key-value systems that `nessie-baselines` deploys are
//! its [`KvSystem`]s; Cell is `nessie-cell`'s.

use std::fmt;
use std::str::FromStr;

use nessie_baselines::KvSystem;
use serde::{Deserialize, Serialize};

/// The systems compared: Nessie, the papers' baselines, RACE, RCuckoo and
/// Cell.
///
/// The key-value systems come first, in [`KvSystem`]'s order, so that
/// [`SystemKind::kv`] and `From<KvSystem>` are one index (checked when this
/// crate compiles): a new key-value system is its [`KvSystem`] variant and
/// its variant here, in the same place.
#[repr(u8)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum SystemKind {
    /// Nessie: fully client-driven, decoupled index and data tables.
    #[default]
    Nessie,
    /// NessieSD: server-driven (HERD-like), partially coupled.
    NessieSd,
    /// NessieHY: client-driven GETs, server-driven PUT/DELETE (FaRM-like).
    NessieHy,
    /// Pilaf: self-verifying cuckoo hash, client GETs, server PUT/DELETE.
    Pilaf,
    /// RACE hashing (ATC'21): client-driven, associative buckets with
    /// overflow, lock-free CAS on out-of-place KV blocks.
    Race,
    /// RCuckoo (ATC'25): client-driven, dependent cuckoo hashing over rows
    /// read lock-free, writes under locks taken by CAS.
    Rcuckoo,
    /// Cell: a B-link tree of meganodes, searched by clients or servers.
    Cell,
}

impl SystemKind {
    /// Every system, in the order reports list them.
    pub const ALL: [SystemKind; 7] = [
        SystemKind::Nessie,
        SystemKind::NessieSd,
        SystemKind::NessieHy,
        SystemKind::Pilaf,
        SystemKind::Race,
        SystemKind::Rcuckoo,
        SystemKind::Cell,
    ];

    /// The Nessie family: Nessie and the baselines the Nessie papers compare
    /// it with (`nessie sim`'s default).
    pub const FAMILY: [SystemKind; 4] = [
        SystemKind::Nessie,
        SystemKind::NessieSd,
        SystemKind::NessieHy,
        SystemKind::Pilaf,
    ];

    /// The key-value system of `nessie-baselines` this is (`None`: Cell).
    pub fn kv(self) -> Option<KvSystem> {
        KvSystem::ALL.get(self as usize).copied()
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self.kv() {
            Some(kv) => kv.name(),
            None => "cell",
        }
    }

    /// Whether a PUT's answer (whether the key existed) is one its history
    /// is held to ([`KvSystem::put_answers_existence`]; Cell's is).
    pub fn put_answers_existence(self) -> bool {
        self.kv().is_none_or(KvSystem::put_answers_existence)
    }

    /// Whether the system places keys in rows it reads whole
    /// ([`KvSystem::places_in_rows`]; Cell does not).
    pub fn places_in_rows(self) -> bool {
        self.kv().is_some_and(KvSystem::places_in_rows)
    }

    /// Whether the system runs server workers.
    pub fn has_servers(self) -> bool {
        // Cell's nodes are all servers; the key-value systems say so
        // themselves.
        self.kv().is_none_or(KvSystem::has_servers)
    }
}

impl From<KvSystem> for SystemKind {
    fn from(kv: KvSystem) -> SystemKind {
        SystemKind::ALL[kv as usize]
    }
}

// The index behind `kv` and `From`: both lists in declaration order, and
// every key-value system followed by Cell alone.
const _: () = {
    assert!(SystemKind::ALL.len() == KvSystem::ALL.len() + 1);
    let mut i = 0;
    while i < SystemKind::ALL.len() {
        assert!(SystemKind::ALL[i] as usize == i);
        if i < KvSystem::ALL.len() {
            assert!(KvSystem::ALL[i] as usize == i);
        }
        i += 1;
    }
};

impl fmt::Display for SystemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A system name that is none of [`SystemKind::ALL`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown system {0:?} (expected one of: {names})",
    names = SystemKind::ALL.map(SystemKind::name).join(", ")
)]
pub struct UnknownSystem(pub String);

impl FromStr for SystemKind {
    type Err = UnknownSystem;
    /// A name of [`SystemKind::name`], in any case; `sd` and `hy` name
    /// NessieSD and NessieHY.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SystemKind::ALL
            .into_iter()
            .find(|k| {
                k.name().eq_ignore_ascii_case(s)
                    || (s.eq_ignore_ascii_case("sd") && *k == SystemKind::NessieSd)
                    || (s.eq_ignore_ascii_case("hy") && *k == SystemKind::NessieHy)
            })
            .ok_or_else(|| UnknownSystem(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_the_key_value_systems_round_trip() {
        for k in SystemKind::ALL {
            assert_eq!(k.name().parse::<SystemKind>(), Ok(k));
            assert_eq!(k.name().to_uppercase().parse::<SystemKind>(), Ok(k));
            assert_eq!(
                k.kv().map(SystemKind::from),
                (k != SystemKind::Cell).then_some(k)
            );
            // The index pairs variants of the same name.
            if let Some(kv) = k.kv() {
                assert_eq!(format!("{k:?}"), format!("{kv:?}"));
            }
        }
        assert_eq!("sd".parse::<SystemKind>(), Ok(SystemKind::NessieSd));
        assert_eq!("HY".parse::<SystemKind>(), Ok(SystemKind::NessieHy));
        let e = "btree".parse::<SystemKind>().unwrap_err();
        assert!(e.to_string().contains("\"btree\"") && e.to_string().contains("cell"));
        assert_eq!(SystemKind::FAMILY, SystemKind::ALL[..4]);
        assert!(SystemKind::ALL.iter().all(|k| k.has_servers()
            == !matches!(
                k,
                SystemKind::Nessie | SystemKind::Race | SystemKind::Rcuckoo
            )));
    }
}
