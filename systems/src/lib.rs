//! The systems floor: the six systems (Nessie, NessieSD, NessieHY, Pilaf, RACE,
//! Cell) behind one [`SystemKind`], between the crates that build them
//! (`nessie-baselines`, `nessie-cell`) and the ones that run them
//! (`nessie-sim`, the `nessie` command).
//!
//! The API is at the crate root:
//! - [`Connect`] and [`Cluster`], the front door: any system as a whole
//!   cluster in this process or as the nodes this process hosts on any
//!   fabric, handing out clients whose ids no live client holds.
//! - [`SystemKind`]: the one name of "which system", parsed from the
//!   command line and printed in reports ([`UnknownSystem`] when not).
//! - [`NodeSetup`]: any of the systems shaped for a cluster's store,
//!   started on one node of any fabric ([`NodeServers`], [`ServerSummary`])
//!   and running the workload there: what `nessie node` runs;
//!   [`SystemError`] for what can go wrong.
//! - [`AgentThread`]: the agent of a Nessie node hosting clients without
//!   storage, on a thread of its own.
//! - [`CellShape`]: Cell's shape beside the cluster's store, and what a
//!   Cell node reports ([`cell_tree_line`], [`report_cell_meganodes`]).
//!
//! One namespace is reached into on purpose: [`sizing`], how a store is
//! sized for a number of keys, values and clients (index slots for a load
//! factor, data table entries with the quarantine's headroom, size class
//! ladders, a run's memory footprint).

#![warn(missing_docs)]

mod agent;
mod cell;
mod connect;
mod kind;
mod node;
mod setup;
pub mod sizing;

pub use agent::{AgentThread, AGENT_PERIOD};
pub use cell::{cell_tree_line, report_cell_meganodes, CellShape};
pub use connect::{Cluster, Connect};
pub use kind::{SystemKind, UnknownSystem};
pub use node::SystemError;
pub use setup::{NodeServers, NodeSetup, ServerSummary};

/// What the crate's tests share.
#[cfg(test)]
pub(crate) mod testing {
    use nessie_protocol::Config;

    /// A two-node store small enough for every system's tests.
    pub(crate) fn small_store() -> Config {
        Config {
            nodes: 2,
            index_slots_per_node: 256,
            dtes_per_node: 512,
            clients_per_node: 2,
            max_key_len: 32,
            max_value_len: 64,
            ..Config::default()
        }
    }
}
