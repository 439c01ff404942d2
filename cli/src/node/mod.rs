//! A node process of a deployment, serving and driving one of the five
//! systems: what `nessie node` (feature `verbs`) is made of.
//!
//! - [`system`]: one system on one node of any fabric: its regions checked,
//!   its server workers started, its clients driving the mixed workload
//!   (tested on the simulator).
//! - [`cell`]: Cell on one node of any fabric: its configuration from the
//!   cluster's store, its server node (node 0 holds the region directory),
//!   its clients over the fabric running the workload with range scans.
//! - [`report`]: each node's results as JSON and the merged cluster report.
//! - `cluster` (feature `verbs`): the cluster file of the verbs fabric
//!   shaped for a system (its regions and fingerprint).
//! - `cmd` (feature `verbs`): the `nessie node info|serve|run|report`
//!   subcommands.

pub mod cell;
#[cfg(feature = "verbs")]
pub mod cluster;
#[cfg(feature = "verbs")]
pub mod cmd;
pub mod report;
pub mod system;
