//! # nessie-cell
//!
//! Cell (Mitchell, Montgomery, Nelson, Sen and Li, "Balancing CPU and
//! Network in the Cell Distributed B-Tree Store", USENIX ATC 2016), the
//! seeds' ordered store, on the same `Fabric` as Nessie and its baselines.
//!
//! Cell is a B-link tree of *meganodes* spread over the servers, each
//! meganode itself a B-link tree of small fixed-size nodes (§2.1-2.2). A
//! client searches each meganode either on its server (one RPC through the
//! request slots of `nessie-exec`) or itself, by RDMA READs of the nodes,
//! protected by a version number at both ends of every node, min and max
//! keys, and a CRC64 in every leaf's pointer to a key-value extent (§2.3).
//! The locality selector (§2.5) chooses per meganode and server by
//! inequality (1), from moving averages of measured latencies. Servers log
//! every write per region, and the survivors of a failure rebuild its
//! regions from the logs (§2.6).
//!
//! At the crate root: the client ([`CellClient`]), a node of a deployment
//! ([`CellNode`]), a store started in one process ([`CellDeployment`]),
//! their configuration ([`CellConfig`]), the pointers and region ids
//! ([`NodePtr`], [`RegionId`]), the region directory over the fabric
//! ([`FabricDirectory`]), the region logs ([`LogSink`]), recovery's report
//! and the answers a server gives ([`Refusal`], [`SplitOutcome`]).
//!
//! Five namespaces stay public, because the cluster simulator (`nessie-sim`)
//! and the fault tests drive or audit them as they do Nessie's machines:
//! - [`machine`]: the sans-IO executor every operation runs in, with Cell's
//!   effects;
//! - [`server`]: server-side B-link tree operations, meganode splits, the
//!   server workers' and maintenance threads' machines;
//! - [`node`] and [`extent`]: the formats of nodes and key-value extents
//!   (the simulator audits the nodes in memory, the tests forge extents);
//! - [`region`]: the region map and its updates.
//!
//! The rest (the client's search, caches and locality selector, the wire
//! messages, logs, recovery, the deployment) is private behind the
//! root. Histories, range scans included, are checked by
//! `nessie_check::ordered`.
//!
//! `docs/cell.md` in the repository describes the design as built and every
//! departure from the paper.

#![warn(missing_docs)]

mod client;
mod cluster;
mod config;
mod deployment;
mod directory;
pub mod extent;
mod log;
pub mod machine;
pub mod node;
mod ptr;
mod recovery;
pub mod region;
pub mod server;
mod wire;

pub use client::{client_effect, CellClient, CellMachines, CellStats, Entries};
pub use cluster::CellNode;
pub use config::{
    CacheConfig, CellConfig, CellFaults, DirectoryPlace, SearchMode, SelectorConfig, Sizing,
    ROOT_WORD_OFFSET,
};
pub use deployment::{bootstrap_machine, CellDeployment, TreeShape};
pub use directory::FabricDirectory;
pub use log::{LogError, LogRecord, LogSink};
pub use ptr::{ExtentPtr, NodePtr, RegionId, ROOT_REGION};
pub use recovery::{RecoveryReport, RecoveryStage};
pub use server::split::{SplitAbort, SplitOutcome};
pub use wire::{CellRequest, CellResponse, Refusal, RestartCause};
