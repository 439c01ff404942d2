//! The verbs fabric's cluster file shaped for one of the five systems: the
//! system built with the file's `[store]` shape ([`system_config`]; Cell's
//! by [`nessie_systems::cell::cell_config`]) and the file set up to register what it
//! needs and to carry it in the fingerprint ([`deployment`],
//! [`cell_deployment`]), so that nodes started with different `--system`s
//! (or NessieHY layouts, or Cell shapes) refuse each other at connect.

use nessie_baselines::{HyOptions, KvSystem, SystemConfig};
use nessie_cell::CellConfig;
use nessie_fabric_verbs::{ClusterError, ClusterFile};

use nessie_systems::cell::CellShape;

/// `kind` shaped by `file` ([`ClusterFile::protocol_config`]), with
/// `server_workers` per node and NessieHY's options `hy`.
pub fn system_config(
    file: &ClusterFile,
    kind: KvSystem,
    server_workers: u16,
    hy: HyOptions,
) -> Result<SystemConfig, ClusterError> {
    if server_workers == 0 {
        return Err(ClusterError::Zero("server workers"));
    }
    Ok(SystemConfig {
        server_workers,
        hy,
        ..SystemConfig::new(kind, file.protocol_config()?)
    })
}

/// The tag of `sys` in the fingerprint: the system and the options that
/// change its memory layout (NessieHY's filter bits; its cache and multiple
/// reads are client-side).
pub fn system_tag(sys: &SystemConfig) -> String {
    match sys.kind {
        KvSystem::NessieHy if sys.hy.filter_bits => format!("{}+filter-bits", sys.kind),
        k => k.to_string(),
    }
}

/// `file` running `sys` (built by [`system_config`]): Nessie leaves the
/// file as it is; a baseline registers the larger of the file's regions
/// and what it needs ([`SystemConfig::topology`]) and joins the
/// fingerprint ([`ClusterFile::for_system`]). Refused when `sys` was shaped
/// by another file.
pub fn deployment(file: ClusterFile, sys: &SystemConfig) -> Result<ClusterFile, ClusterError> {
    if sys.store != file.protocol_config()? {
        return Err(ClusterError::SystemShape {
            system: sys.kind.to_string(),
        });
    }
    if sys.kind == KvSystem::Nessie {
        return Ok(file);
    }
    file.for_system(&system_tag(sys), sys.topology())
}

/// `file` running Cell as `cfg` (built by
/// [`nessie_systems::cell::cell_config`] from this file's store) and `shape`
/// describe: the regions grown to what Cell needs, the shape's tag in the
/// fingerprint. Refused when `cfg` was shaped by another file.
pub fn cell_deployment(
    file: ClusterFile,
    cfg: &CellConfig,
    shape: &CellShape,
) -> Result<ClusterFile, ClusterError> {
    let store = file.protocol_config()?;
    if (store.nodes, store.max_key_len, store.max_value_len)
        != (cfg.nodes, cfg.max_key_len, cfg.max_value_len)
    {
        return Err(ClusterError::SystemShape {
            system: shape.tag(),
        });
    }
    file.for_system(&shape.tag(), cfg.topology())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = include_str!("../../../fabric-verbs/examples/cluster.toml");

    #[test]
    fn a_baseline_grows_the_regions_keeps_the_store_and_joins_the_fingerprint() {
        let file = ClusterFile::parse(GOOD).unwrap();
        let store = file.protocol_config().unwrap();
        let nessie = system_config(&file, KvSystem::Nessie, 1, HyOptions::default()).unwrap();
        let same = deployment(file.clone(), &nessie).unwrap();
        assert_eq!(same, file, "Nessie leaves the file as it is");
        assert_eq!(same.system_tag(), None);
        let mut prints = vec![file.fingerprint()];
        for (kind, filter_bits) in [
            (KvSystem::NessieSd, false),
            (KvSystem::NessieHy, false),
            (KvSystem::NessieHy, true),
            (KvSystem::Pilaf, false),
        ] {
            let hy = HyOptions {
                filter_bits,
                ..HyOptions::default()
            };
            let sys = system_config(&file, kind, 2, hy).unwrap();
            assert_eq!(sys.store, store);
            let c = deployment(file.clone(), &sys).unwrap();
            let (need, have) = (sys.topology(), c.topology());
            assert_eq!(
                have.data_bytes_per_node,
                need.data_bytes_per_node
                    .next_multiple_of(8)
                    .max(file.regions.data_bytes_per_node)
            );
            assert_eq!(have.index_slots_per_node, file.regions.index_slots_per_node);
            assert_eq!(have.nodes, 3);
            assert_eq!(
                c.protocol_config().unwrap(),
                store,
                "the shape stays the file's"
            );
            assert!(c.system_tag().unwrap().starts_with(kind.name()));
            assert_eq!(c.system_tag().unwrap().contains("filter-bits"), filter_bits);
            prints.push(c.fingerprint());
        }
        let mut unique = prints.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            prints.len(),
            "every system has its own fingerprint"
        );
    }

    #[test]
    fn cell_grows_the_regions_and_its_shape_joins_the_fingerprint() {
        let file = ClusterFile::parse(GOOD).unwrap();
        let store = file.protocol_config().unwrap();
        let shape = CellShape::default();
        let cfg = nessie_systems::cell::cell_config(&store, &shape);
        let c = cell_deployment(file.clone(), &cfg, &shape).unwrap();
        assert_eq!(c.system_tag(), Some("cell+m64+r16"));
        assert!(c.topology().data_bytes_per_node >= cfg.topology().data_bytes_per_node);
        let bigger = CellShape {
            regions_per_node: 32,
            ..shape
        };
        let cfg2 = nessie_systems::cell::cell_config(&store, &bigger);
        let c2 = cell_deployment(file.clone(), &cfg2, &bigger).unwrap();
        assert_ne!(
            c.fingerprint(),
            c2.fingerprint(),
            "shapes refuse each other"
        );
        let mut other = store.clone();
        other.max_key_len /= 2;
        let cfg3 = nessie_systems::cell::cell_config(&other, &shape);
        assert!(cell_deployment(file, &cfg3, &shape).is_err());
    }

    #[test]
    fn a_system_shaped_by_another_file_or_with_no_workers_is_rejected() {
        let file = ClusterFile::parse(GOOD).unwrap();
        let mut other = file.protocol_config().unwrap();
        other.dtes_per_node /= 2;
        let sys = SystemConfig::new(KvSystem::Pilaf, other);
        assert_eq!(
            deployment(file.clone(), &sys),
            Err(ClusterError::SystemShape {
                system: "pilaf".into()
            })
        );
        assert_eq!(
            system_config(&file, KvSystem::NessieSd, 0, Default::default()),
            Err(ClusterError::Zero("server workers"))
        );
    }

    #[test]
    fn nodes_started_with_different_systems_refuse_each_other_at_connect() {
        use nessie_fabric_verbs::wire::{check_fingerprint, WireError};
        let file = ClusterFile::parse(GOOD).unwrap();
        let node_a = file.clone();
        let sd = system_config(&file, KvSystem::NessieSd, 1, Default::default()).unwrap();
        let node_b = deployment(file, &sd).unwrap();
        // What the acceptor and the dialer check against each other's hello.
        assert!(matches!(
            check_fingerprint(node_b.fingerprint(), node_a.fingerprint()),
            Err(WireError::Fingerprint { .. })
        ));
        assert!(check_fingerprint(node_a.fingerprint(), node_a.fingerprint()).is_ok());
    }
}
