//! `nessie node --cluster FILE --node N run --without-storage ADDR`: a
//! process hosting no node of a running cluster runs its workload through
//! clients without storage whose shares node `N` holds (docs/protocol.md
//! §2.4, docs/deploy.md "Clients without storage").
//!
//! The process registers no region and serves nothing: it dials every node
//! from `ADDR` (this host's address on the RDMA interface and an `rdma_cm`
//! port free there), takes its clients' shares by lease (skipping shares a
//! live client of another process holds), and writes its entries through
//! the memory windows node `N`'s agent binds. Killed, its shares are taken
//! back by that agent once their lease term passes.

use std::net::SocketAddr;
use std::path::Path;

use nessie_fabric_verbs::{ClusterFile, VerbsFabric};
use nessie_protocol::NodeId;
use nessie_systems::{Connect, SystemError, SystemKind};
use nessie_workload::{WorkloadReport, WorkloadSpec};

/// Why a run without storage could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum WithoutStorageError {
    /// The cluster file gives no client without storage a share, or names
    /// another system.
    #[error("{0}")]
    Refused(String),
    /// The verbs fabric (device, dials, cluster file).
    #[error(transparent)]
    Verbs(#[from] nessie_fabric_verbs::VerbsError),
    /// The system (its shares, the workload).
    #[error(transparent)]
    System(#[from] SystemError),
    /// The history file.
    #[error("cannot write {path}: {source}")]
    History {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs `spec` from a process hosting no node of `file`'s cluster, through
/// clients without storage of node `node`, dialling from `addr`; writes
/// the operations to `history` when given.
pub fn run(
    file: ClusterFile,
    system: SystemKind,
    node: NodeId,
    addr: SocketAddr,
    spec: &WorkloadSpec,
    history: Option<&Path>,
) -> Result<WorkloadReport, WithoutStorageError> {
    if system != SystemKind::Nessie {
        return Err(WithoutStorageError::Refused(format!(
            "--without-storage runs clients without storage, which only nessie has (not {system})"
        )));
    }
    let store = file
        .protocol_config()
        .map_err(nessie_fabric_verbs::VerbsError::from)?;
    if store.pure_clients_per_node == 0 {
        return Err(WithoutStorageError::Refused(
            "--without-storage needs [store] pure_clients_per_node above 0 in the cluster file (the shares the nodes hold for such clients)".into(),
        ));
    }
    if node.0 >= store.nodes {
        return Err(WithoutStorageError::Refused(format!(
            "--node {}: the cluster has {} nodes",
            node.0, store.nodes
        )));
    }
    let fabric = VerbsFabric::client_only(file, addr, None)?;
    let fingerprint = fabric.cluster().fingerprint();
    println!(
        "hosting no node: {} clients without storage of {node}, dialling a cluster of {} nodes from {addr} (fingerprint {fingerprint:#018x})",
        spec.clients, store.nodes
    );
    let cluster = Connect::new(SystemKind::Nessie)
        .store(store)
        .hosting(fabric, &[])?;
    let report = cluster.run_without_storage(node, spec)?;
    if let Some(path) = history {
        report
            .write_history(path)
            .map_err(|source| WithoutStorageError::History {
                path: path.display().to_string(),
                source,
            })?;
    }
    Ok(report)
}
