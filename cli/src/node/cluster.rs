//! The verbs fabric's cluster file shaped for one of the five systems
//! ([`deployment`]): the file set up to register what the system needs and
//! to carry its tag in the fingerprint, so that nodes started with
//! different `--system`s (or NessieHY layouts, or Cell shapes) refuse each
//! other at connect. The system itself is a [`NodeSetup`] built from the
//! file's `[store]` ([`ClusterFile::protocol_config`]).

use nessie_fabric_verbs::{ClusterError, ClusterFile};
use nessie_systems::NodeSetup;

/// `file` running `sys`: Nessie leaves the file as it is; any other system
/// registers the larger of the file's regions and what it needs
/// ([`NodeSetup::topology`]) and joins the fingerprint with its tag
/// ([`NodeSetup::tag`], [`ClusterFile::for_system`]). Refused when `sys` was
/// shaped by another file's store.
pub fn deployment(file: ClusterFile, sys: &NodeSetup) -> Result<ClusterFile, ClusterError> {
    let store = file.protocol_config()?;
    let same = match sys {
        NodeSetup::Kv(s) => s.store == store,
        NodeSetup::Cell(c, _) => {
            (store.nodes, store.max_key_len, store.max_value_len)
                == (c.nodes, c.max_key_len, c.max_value_len)
        }
    };
    if !same {
        return Err(ClusterError::SystemShape {
            system: sys.tag().unwrap_or_else(|| sys.kind().to_string()),
        });
    }
    match sys.tag() {
        None => Ok(file),
        Some(tag) => file.for_system(&tag, sys.topology()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_baselines::HyOptions;
    use nessie_systems::CellShape;
    use nessie_systems::SystemKind;

    const GOOD: &str = include_str!("../../../fabric-verbs/examples/cluster.toml");

    fn setup(file: &ClusterFile, kind: SystemKind, hy: HyOptions, shape: CellShape) -> NodeSetup {
        NodeSetup::new(kind, file.protocol_config().unwrap(), 2, hy, shape).unwrap()
    }

    #[test]
    fn a_baseline_grows_the_regions_keeps_the_store_and_joins_the_fingerprint() {
        let file = ClusterFile::parse(GOOD).unwrap();
        let store = file.protocol_config().unwrap();
        let shape = CellShape::default();
        let nessie = setup(&file, SystemKind::Nessie, HyOptions::default(), shape);
        let same = deployment(file.clone(), &nessie).unwrap();
        assert_eq!(same, file, "Nessie leaves the file as it is");
        assert_eq!(same.system_tag(), None);
        let mut prints = vec![file.fingerprint()];
        for (kind, filter_bits) in [
            (SystemKind::NessieSd, false),
            (SystemKind::NessieHy, false),
            (SystemKind::NessieHy, true),
            (SystemKind::Pilaf, false),
        ] {
            let hy = HyOptions {
                filter_bits,
                ..HyOptions::default()
            };
            let sys = setup(&file, kind, hy, shape);
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
        let shape = CellShape {
            server_workers: 2,
            ..CellShape::default()
        };
        let cell = setup(&file, SystemKind::Cell, HyOptions::default(), shape);
        let c = deployment(file.clone(), &cell).unwrap();
        assert_eq!(c.system_tag(), Some("cell+m64+r16"));
        assert!(c.topology().data_bytes_per_node >= cell.topology().data_bytes_per_node);
        let bigger = CellShape {
            regions_per_node: 32,
            ..shape
        };
        let c2 = deployment(
            file.clone(),
            &setup(&file, SystemKind::Cell, HyOptions::default(), bigger),
        )
        .unwrap();
        assert_ne!(
            c.fingerprint(),
            c2.fingerprint(),
            "shapes refuse each other"
        );
        let mut other = store.clone();
        other.max_key_len /= 2;
        let elsewhere =
            NodeSetup::new(SystemKind::Cell, other, 2, HyOptions::default(), shape).unwrap();
        assert!(deployment(file, &elsewhere).is_err());
    }

    #[test]
    fn a_system_shaped_by_another_file_is_rejected() {
        let file = ClusterFile::parse(GOOD).unwrap();
        let mut other = file.protocol_config().unwrap();
        other.dtes_per_node /= 2;
        let sys = NodeSetup::new(
            SystemKind::Pilaf,
            other,
            1,
            HyOptions::default(),
            CellShape::default(),
        )
        .unwrap();
        assert_eq!(
            deployment(file.clone(), &sys),
            Err(ClusterError::SystemShape {
                system: "pilaf".into()
            })
        );
    }

    #[test]
    fn nodes_started_with_different_systems_refuse_each_other_at_connect() {
        use nessie_fabric_verbs::{check_fingerprint, WireError};
        let file = ClusterFile::parse(GOOD).unwrap();
        let node_a = file.clone();
        let sd = setup(
            &file,
            SystemKind::NessieSd,
            HyOptions::default(),
            CellShape::default(),
        );
        let node_b = deployment(file, &sd).unwrap();
        // What the acceptor and the dialer check against each other's hello.
        assert!(matches!(
            check_fingerprint(node_b.fingerprint(), node_a.fingerprint()),
            Err(WireError::Fingerprint { .. })
        ));
        assert!(check_fingerprint(node_a.fingerprint(), node_a.fingerprint()).is_ok());
    }
}
