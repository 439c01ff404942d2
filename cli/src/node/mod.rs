//! A node process of a deployment, serving and driving one of the five
//! systems: what `nessie node` (feature `verbs`) is made of.
//!
//! Running a system on one node of any fabric (its regions checked, its
//! server workers started, its clients driving the workload) is the
//! systems floor's (`nessie_systems::NodeSetup` and Cell's node,
//! tested on the simulator); this module adds what a process needs:
//!
//! - [`report`]: each node's results as JSON and the merged cluster report.
//! - `cluster` (feature `verbs`): the cluster file of the verbs fabric
//!   shaped for a system (its regions and fingerprint).
//! - `cmd` (feature `verbs`): the `nessie node info|serve|run|report`
//!   subcommands.
//! - `metrics` (feature `verbs`): the node's Prometheus metrics endpoint
//!   and the transport counters its reports and status lines show.
//! - `without_storage` (feature `verbs`): `run --without-storage`, a
//!   process hosting no node running clients without storage.

#[cfg(feature = "verbs")]
pub mod cluster;
#[cfg(feature = "verbs")]
pub mod cmd;
#[cfg(feature = "verbs")]
pub mod metrics;
pub mod report;
#[cfg(feature = "verbs")]
pub mod without_storage;
