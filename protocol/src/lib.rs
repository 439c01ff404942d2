//! # nessie-protocol
//!
//! Nessie, the fully client-driven, decoupled RDMA key-value store, as sans-IO
//! state machines.
//!
//! Clients perform GET, PUT, DELETE and MIGRATE using only one-sided RDMA
//! operations (READ, WRITE and 64-bit compare-and-swap) against index tables
//! (an N-way cuckoo hash of 64-bit index table entries spread over all nodes)
//! and data tables (immutable data table entries, placed in the client's own
//! node's data table). No server process takes part in serving a request.
//!
//! The API is at the crate root:
//! - [`Client`] (GET, PUT, DELETE with retries, blocking on one endpoint)
//!   and [`KvClient`], the face every system's client shows; [`Pipeline`]
//!   and [`AsyncPipeline`]: many operations in flight per thread over one
//!   endpoint (batches, a non-blocking API and runtime-agnostic futures).
//! - [`Config`] (validated), [`Error`] and [`Outcome`]: what each failure
//!   promises about the write.
//! - [`Fabric`], [`Endpoint`], [`Op`], [`Completion`], [`FabricError`]:
//!   what the protocol asks of a network (one-sided READ, WRITE, CAS,
//!   memory windows), with addresses ([`NodeId`], [`RemoteAddr`]) and time
//!   ([`Nanos`]).
//!
//! Namespaces reached into on purpose:
//! - [`layout`]: the bit-exact index table entry and data table entry formats.
//! - [`machine`]: the GET, PUT/DELETE, MIGRATE and recovery state machines
//!   (sans-IO: operations out, completions in, time passed in).
//! - [`pipeline`]: the pipeline's machines and futures.
//! - [`pure`]: clients without storage's lease blocks and the node's agent.
//! - [`registry`]: the client registry, where every system's client of a
//!   node takes its id by a one-sided CAS.
//! - [`growth`]: the index directory and online growth.
//! - [`hash`]: cuckoo candidates (other systems hash keys alike).
//!
//! The precise protocol, with every departure from the papers, is in
//! `docs/protocol.md` of the repository.
//!
//! # A first PUT and GET
//!
//! A three-node cluster on the in-process simulated fabric
//! (`nessie-fabric-sim`; the verbs backend, `nessie-fabric-verbs`, hands out
//! endpoints of a real RDMA cluster the same way), a client on each of two
//! nodes:
//!
//! ```
//! use std::sync::Arc;
//! use nessie_fabric_sim::{SimConfig, SimFabric};
//! use nessie_protocol::{Client, ClientId, Config, Fabric, NodeId};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cfg = Arc::new(Config { nodes: 3, ..Config::default() });
//! cfg.validate()?;
//! let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology()))?;
//! let id = |node| ClientId { node: NodeId(node), index: 0 };
//! let mut alice = Client::new(cfg.clone(), id(0), fabric.open(NodeId(0))?)?;
//! let mut bob = Client::new(cfg.clone(), id(2), fabric.open(NodeId(2))?)?;
//!
//! assert!(!alice.put(b"greeting", b"hello")?, "the key was new");
//! assert_eq!(bob.get(b"greeting")?.as_deref(), Some(&b"hello"[..]));
//! assert!(bob.delete(b"greeting")?, "it existed");
//! assert_eq!(alice.get(b"greeting")?, None);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

// The API is the root's re-exports below; the modules behind them are
// private, so that they can be rearranged without breaking a user. The
// public modules are namespaces a user reaches into on purpose.
mod addr;
mod alloc;
mod cache;
mod client;
mod config;
mod driver;
mod error;
mod fabric;
mod faults;
mod kv;
mod refusal;
mod route;
mod stats;
mod time;

pub mod growth;
pub mod hash;
pub mod layout;
pub mod machine;
pub mod pipeline;
pub mod pure;
pub mod registry;
#[doc(hidden)]
pub mod rng;

pub use client::Client;
pub use config::{Config, MigrateSearch, RetryPolicy};
pub use error::{
    ConfigError, Corruption, CorruptionKind, Error, Needed, Outcome, UnknownOutcome, UnknownStep,
};
pub use faults::{Faults, UnknownFault};
pub use kv::{Entries, KvClient, KvRequest, Request, Response};
pub use layout::{DataEntryHeader, DteKind, DteState, IndexEntry};
pub use machine::{ClientState, DeleteMachine, GetMachine, Machine, Poll, PutMachine};
pub use stats::OpStats;

pub use addr::{ClientId, DteAddr, IteAddr, NodeId, Region, RemoteAddr};
pub use fabric::{
    chain_node, window_carries, BoundWindow, ChainLink, ClientClaim, Completion, DeviceStatus,
    Endpoint, Fabric, FabricError, Op, OpId, OpKind, OpOutput, Topology, TransportError,
    TransportFault, WindowId, WindowKey, WorkRequest,
};
pub use refusal::{BackendError, EndpointRefusal};
pub use time::Nanos;

pub use cache::DteCache;
pub use pipeline::{AsyncPipeline, Pipeline};

/// Pieces this workspace's drivers and checkers share with the protocol
/// (the simulator's allocator audit and retry rule, the model's request
/// routing, the drivers' waits): not part of the API, no stability promise.
#[doc(hidden)]
pub mod internals {
    pub use crate::alloc::{Allocator, DteAllocator, SWEEP_BATCH};
    pub use crate::client::retries;
    pub use crate::driver::run;
    pub use crate::route::{Router, LANE_BITS, MAX_LANES};
    pub use crate::time::{duration_nanos, wait_for};
}
