//! [`SystemKind`]: the one name of "which system" (Nessie, NessieSD,
//! NessieHY, Pilaf, Cell) on the command line, in specifications and in
//! reports. The four key-value systems that `nessie-baselines` deploys are
//! its [`KvSystem`]s; Cell is `nessie-cell`'s.

use std::fmt;
use std::str::FromStr;

use nessie_baselines::KvSystem;
use serde::{Deserialize, Serialize};

/// The systems compared: Nessie, the papers' baselines and Cell.
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
    /// Cell: a B-link tree of meganodes, searched by clients or servers.
    Cell,
}

impl SystemKind {
    /// Every system, in the order reports list them.
    pub const ALL: [SystemKind; 5] = [
        SystemKind::Nessie,
        SystemKind::NessieSd,
        SystemKind::NessieHy,
        SystemKind::Pilaf,
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
        match self {
            SystemKind::Nessie => Some(KvSystem::Nessie),
            SystemKind::NessieSd => Some(KvSystem::NessieSd),
            SystemKind::NessieHy => Some(KvSystem::NessieHy),
            SystemKind::Pilaf => Some(KvSystem::Pilaf),
            SystemKind::Cell => None,
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self.kv() {
            Some(kv) => kv.name(),
            None => "cell",
        }
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
        match kv {
            KvSystem::Nessie => SystemKind::Nessie,
            KvSystem::NessieSd => SystemKind::NessieSd,
            KvSystem::NessieHy => SystemKind::NessieHy,
            KvSystem::Pilaf => SystemKind::Pilaf,
        }
    }
}

impl fmt::Display for SystemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A system name that is none of [`SystemKind::ALL`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown system {0:?} (expected one of: nessie, nessie-sd, nessie-hy, pilaf, cell)")]
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
        }
        assert_eq!("sd".parse::<SystemKind>(), Ok(SystemKind::NessieSd));
        assert_eq!("HY".parse::<SystemKind>(), Ok(SystemKind::NessieHy));
        let e = "btree".parse::<SystemKind>().unwrap_err();
        assert!(e.to_string().contains("\"btree\"") && e.to_string().contains("cell"));
        assert_eq!(SystemKind::FAMILY, SystemKind::ALL[..4]);
        assert!(SystemKind::ALL
            .iter()
            .all(|k| k.has_servers() == (*k != SystemKind::Nessie)));
    }
}
