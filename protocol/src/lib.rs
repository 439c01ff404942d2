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
//! The crate is organised in layers:
//! - [`addr`], [`time`], [`fabric`]: what the protocol asks of a network.
//! - [`layout`]: the bit-exact index table entry and data table entry formats.
//! - [`hash`], [`config`], [`error`]: cuckoo candidates, validated configuration, typed errors.
//! - [`alloc`], [`cache`]: the data table entry allocator/recycler and the local cache.
//! - [`machine`]: the GET, PUT/DELETE, MIGRATE and recovery state machines.
//! - [`driver`], [`client`]: a blocking driver and the `Client` API with retries.
//! - [`route`]: work request ids unique per endpoint (a late completion of one
//!   machine never answers the next), shared by the driver and the pipeline.
//! - [`pipeline`]: many operations in flight per thread over one endpoint
//!   (batches, a non-blocking API and runtime-agnostic futures).
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

pub mod addr;
pub mod alloc;
pub mod cache;
pub mod client;
pub mod config;
pub mod driver;
pub mod error;
pub mod fabric;
pub mod faults;
pub mod growth;
pub mod hash;
pub mod kv;
pub mod layout;
pub mod machine;
pub mod pipeline;
pub mod pure;
pub mod rng;
pub mod route;
pub mod stats;
pub mod time;

pub use client::Client;
pub use config::{Config, MigrateSearch, RetryPolicy};
pub use error::{
    ConfigError, Corruption, CorruptionKind, Error, Outcome, UnknownOutcome, UnknownStep,
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
pub use time::Nanos;
