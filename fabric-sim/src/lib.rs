//! # nessie-fabric-sim
//!
//! An in-process simulated RDMA fabric implementing
//! [`nessie_protocol::Fabric`]: every node's registered regions live in
//! memory as 64-bit atomic words, and endpoints perform READ, WRITE and CAS
//! (and the CPU path to their own data table) against them.
//!
//! What it models, deliberately:
//! - **Word-by-word transfers**: multi-word READs and WRITEs move one word at
//!   a time (ascending by default; descending or a random order per transfer
//!   with [`TransferOrder`]), so concurrent readers can see torn buffers
//!   (never a torn word).
//! - **NIC-atomic CAS**: a per-node atomic unit makes CASes atomic against
//!   each other but *not* against CPU stores or RDMA WRITEs, which can be lost
//!   inside a CAS window ([`SimConfig::yield_inside_cas`] widens it).
//! - **Latency**: completions become ready after
//!   [`LatencyModel`] delays, so posted operations overlap.
//! - **Faults**: nodes down, frozen clients ([`Gate`]), and every fault of
//!   the project's one vocabulary of transport faults
//!   ([`TransportFault`](nessie_protocol::TransportFault)), armed per node by
//!   an [`Injection`]: operations that fail without executing, that execute
//!   but complete with an error, that complete with an error and land later
//!   (parked until a [`Later`]), whose completion is lost or held back past
//!   the requester's deadline, that never execute nor complete, and WRITEs
//!   that execute twice.
//! - **Clocks**: real or manual time, with per-node skew.
//! - **Counters**: per node and per endpoint ([`OpCounters`]).
//! - **Client ids**: a registry of the ids live clients hold
//!   ([`SimFabric::claim_client`], behind `Endpoint::claim_client`), so that a
//!   second client with an id in use is refused at construction; one per
//!   process, and [`SimFabric::another_process`] is another process's handle
//!   on the same cluster (its own registry, its own name in the nodes'
//!   registry words).
//!
//! The API is at the crate root: [`SimFabric`] and its [`SimConfig`],
//! [`SimEndpoint`], the fault controls ([`Injection`], [`Later`], [`Gate`])
//! and the counters. All concurrency primitives come from one internal shim
//! (`sync`) that a model checker (loom, shuttle) swaps out.

#![warn(missing_docs)]

mod config;
mod counters;
mod endpoint;
mod fabric;
mod memory;
mod sync;
mod window;

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod window_tests;

pub use config::{
    ClockMode, LatencyModel, SimConfig, SimConfigError, TransferOrder, MANUAL_CLOCK_START,
};
pub use counters::OpCounters;
pub use endpoint::{Gate, SimEndpoint};
pub use fabric::{InjectError, Injection, Landed, Later, SimFabric};
