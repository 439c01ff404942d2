//! The systems floor: the six systems (Nessie, NessieSD, NessieHY, Pilaf, RACE,
//! Cell) behind one [`SystemKind`], between the crates that build them
//! (`nessie-baselines`, `nessie-cell`) and the ones that run them
//! (`nessie-sim`, the `nessie` command).
//!
//! - [`kind`]: [`SystemKind`], the one name of "which system", parsed from
//!   the command line and printed in reports.
//! - [`sizing`]: how a store is sized for a number of keys, values and
//!   clients (index slots for a load factor, data table entries with the
//!   quarantine's headroom).
//! - [`node`]: a key-value system on one node of any fabric: its regions
//!   checked, its server workers started, its clients running the workload.
//! - [`setup`]: [`NodeSetup`], any of the six systems shaped for a
//!   cluster's store, started on one node of any fabric and running the
//!   workload there: what `nessie node` runs.
//! - [`connect`]: [`Connect`], the front door: any system as a whole
//!   cluster in this process or as the nodes this process hosts on any
//!   fabric, handing out clients with ids no live client holds.
//! - [`agent`]: the agent of a Nessie node hosting clients without
//!   storage, on a thread of its own.
//! - [`cell`]: Cell on one node of any fabric: its configuration from the
//!   cluster's store, its server node, its clients running the workload with
//!   range scans.

#![warn(missing_docs)]

pub mod agent;
pub mod cell;
pub mod connect;
pub mod kind;
pub mod node;
pub mod setup;
pub mod sizing;

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
