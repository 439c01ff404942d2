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
//! Layers:
//! - [`ptr`], [`node`], [`extent`], [`config`], [`region`]: pointers,
//!   the node and extent formats, configuration and layout, the region
//!   directory; [`directory`]: the region directory over the fabric, for
//!   node processes that share nothing else.
//! - [`machine`]: the sans-IO executor every operation runs in; [`wire`]:
//!   the messages.
//! - [`server`]: server-side B-link tree operations, meganode splits, the
//!   server workers and maintenance threads; [`log`], [`recovery`].
//! - [`client`]: client-side search, the caches, the locality selector and
//!   [`CellClient`].
//! - [`cluster`]: [`CellNode`], one server node running (what a node
//!   process starts); [`deployment`]: [`CellDeployment`], a store started
//!   on a fabric in one process. Its histories, range scans included, are
//!   checked by `nessie_check::ordered`.
//!
//! `docs/cell.md` in the repository describes the design as built and every
//! departure from the paper.

#![warn(missing_docs)]

pub mod client;
pub mod cluster;
pub mod config;
pub mod deployment;
pub mod directory;
pub mod extent;
pub mod log;
pub mod machine;
pub mod node;
pub mod ptr;
pub mod recovery;
pub mod region;
pub mod server;
pub mod wire;

pub use client::{CellClient, CellMachines, CellStats, Entries};
pub use cluster::CellNode;
pub use config::{CacheConfig, CellConfig, CellFaults, DirectoryPlace, SearchMode, SelectorConfig};
pub use deployment::{bootstrap_machine, CellDeployment, TreeShape};
pub use ptr::{NodePtr, RegionId};
pub use recovery::{RecoveryReport, RecoveryStage};
pub use server::split::{SplitAbort, SplitOutcome};
