//! Running one of the compared systems (Nessie, NessieSD, NessieHY, Pilaf;
//! see `nessie-baselines`) from one node's process, as `nessie-node --system`
//! does: the fabric's regions are checked against what the system needs
//! before that node's server workers start.
//!
//! On hardware the cluster file is turned into the system's deployment by
//! [`crate::ClusterFile::for_system`], which sizes the regions; the check here
//! catches a fabric built any other way (and is what the simulator tests use).

use nessie_baselines::server::ServerPool;
use nessie_baselines::SystemConfig;
use nessie_protocol::{Error, Fabric, NodeId, Topology};

/// Why a system cannot run on a fabric.
#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    /// The fabric's cluster or regions do not fit the system.
    #[error(
        "{system} needs {needed_nodes} nodes with regions of at least {needed_index} index \
         slots and {needed_data} data bytes per node; the fabric has {have_nodes} nodes with \
         {have_index} index slots and {have_data} data bytes per node (start every node with \
         the same --system so that the regions are sized for it)"
    )]
    RegionsTooSmall {
        /// The system (its name and layout options).
        system: String,
        /// Nodes the system is shaped for.
        needed_nodes: u16,
        /// Index slots per node it needs.
        needed_index: u32,
        /// Data bytes per node it needs.
        needed_data: u64,
        /// Nodes of the fabric.
        have_nodes: u16,
        /// Index slots per node of the fabric.
        have_index: u32,
        /// Data bytes per node of the fabric.
        have_data: u64,
    },
    /// The store failed (invalid shape, a fabric error, a worker that could
    /// not be spawned).
    #[error(transparent)]
    Store(#[from] Error),
}

/// Checks that a fabric of topology `have` can host `sys`: the same number
/// of nodes, and regions at least as large as [`SystemConfig::topology`].
pub fn check_regions(sys: &SystemConfig, have: Topology) -> Result<(), SystemError> {
    let need = sys.topology();
    if have.nodes != need.nodes
        || have.index_slots_per_node < need.index_slots_per_node
        || have.data_bytes_per_node < need.data_bytes_per_node
    {
        return Err(SystemError::RegionsTooSmall {
            system: sys.kind.to_string(),
            needed_nodes: need.nodes,
            needed_index: need.index_slots_per_node,
            needed_data: need.data_bytes_per_node,
            have_nodes: have.nodes,
            have_index: have.index_slots_per_node,
            have_data: have.data_bytes_per_node,
        });
    }
    Ok(())
}

/// Checks `fabric` against `sys` ([`check_regions`], and the store shape)
/// and starts `node`'s server workers: `None` for Nessie, which has none.
/// Dropping the pool stops them.
pub fn start_node_servers<F>(
    sys: &SystemConfig,
    fabric: &F,
    node: NodeId,
) -> Result<Option<ServerPool>, SystemError>
where
    F: Fabric,
    F::Endpoint: 'static,
{
    sys.store.validate().map_err(Error::Config)?;
    check_regions(sys, fabric.topology())?;
    Ok(sys.start_node_servers(fabric, node)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_baselines::SystemKind;
    use nessie_fabric_sim::{SimConfig, SimFabric};
    use nessie_protocol::Config;

    fn store() -> Config {
        Config {
            nodes: 2,
            index_slots_per_node: 256,
            dtes_per_node: 512,
            clients_per_node: 2,
            max_key_len: 16,
            max_value_len: 32,
            ..Config::default()
        }
    }

    #[test]
    fn a_fabric_smaller_than_the_system_needs_is_refused_naming_the_size() {
        for kind in SystemKind::ALL {
            let sys = SystemConfig::new(kind, store());
            let need = sys.topology();
            let short = SimFabric::new(SimConfig::from_topology(Topology {
                data_bytes_per_node: need.data_bytes_per_node - 8,
                ..need
            }))
            .unwrap();
            let err = start_node_servers(&sys, &short, NodeId(0)).expect_err("too small");
            match &err {
                SystemError::RegionsTooSmall {
                    system,
                    needed_data,
                    have_data,
                    ..
                } => {
                    assert_eq!(system, kind.name());
                    assert_eq!(*needed_data, need.data_bytes_per_node);
                    assert_eq!(*have_data, need.data_bytes_per_node - 8);
                }
                other => panic!("{other:?}"),
            }
            let msg = err.to_string();
            assert!(
                msg.contains(kind.name())
                    && msg.contains(&need.data_bytes_per_node.to_string())
                    && msg.contains("--system"),
                "{msg}"
            );
            // Exactly the size needed: servers start for the server-driven
            // systems, none for Nessie.
            let fits = SimFabric::new(SimConfig::from_topology(need)).unwrap();
            let pool = start_node_servers(&sys, &fits, NodeId(1)).unwrap();
            assert_eq!(pool.is_some(), kind.has_servers(), "{kind}");
        }
    }

    #[test]
    fn a_fabric_of_another_cluster_size_is_refused() {
        let sys = SystemConfig::new(SystemKind::NessieSd, store());
        let three = Topology {
            nodes: 3,
            ..sys.topology()
        };
        assert!(matches!(
            check_regions(&sys, three),
            Err(SystemError::RegionsTooSmall {
                needed_nodes: 2,
                have_nodes: 3,
                ..
            })
        ));
        assert!(check_regions(&sys, sys.topology()).is_ok());
    }

    #[test]
    fn nodes_started_with_different_systems_refuse_each_other_at_connect() {
        use crate::wire::{check_fingerprint, WireError};
        use crate::ClusterFile;
        let file = ClusterFile::parse(include_str!("../examples/cluster.toml")).unwrap();
        let node_a = file.clone();
        let sd = file
            .system_config(SystemKind::NessieSd, 1, Default::default())
            .unwrap();
        let node_b = file.for_system(&sd).unwrap();
        // What the acceptor and the dialer check against each other's hello.
        assert!(matches!(
            check_fingerprint(node_b.fingerprint(), node_a.fingerprint()),
            Err(WireError::Fingerprint { .. })
        ));
    }
}
