//! # nessie-fabric-verbs
//!
//! The real RDMA backend of Nessie: the protocol's [`nessie_protocol::Fabric`]
//! over libibverbs and librdmacm (the `rdma-sys` 0.3 bindings).
//!
//! - Pure, unit-tested policy: [`cluster`] (the TOML cluster file),
//!   [`policy`] (access flags, queue-pair sizing, fences), [`wr`] (work
//!   requests), [`status`] (completion statuses to typed errors),
//!   [`byteorder`] (atomic byte-order detection and normalisation),
//!   [`remote`] (address and rkey bookkeeping), [`wire`] (connection private
//!   data), [`staging`] (the local buffer allocator), [`clock`].
//! - Safe wrappers over the C objects: [`ffi`].
//! - The running system: [`system`] (which of the compared systems a node
//!   runs, and its server workers), [`workload`] (what `nessie-node run`
//!   drives, through any system's `KvClient`), [`report`] (the nodes'
//!   results merged into one report), [`node`] (a hosted node: its registered regions, its
//!   `rdma_cm` listener and the start-up probe), [`endpoint`] (a client's
//!   queue pairs to every node, loopback included, and its completion queue),
//!   [`fabric`] ([`VerbsFabric`]).
//!
//! Deployment, the cluster file and troubleshooting: `docs/deploy.md`.

#![warn(missing_docs)]

pub mod byteorder;
pub mod clock;
pub mod cluster;
pub mod connect;
pub mod endpoint;
pub mod error;
pub mod fabric;
pub mod ffi;
pub mod node;
pub mod policy;
pub mod remote;
pub mod report;
pub mod staging;
pub mod status;
pub mod system;
pub mod wire;
pub mod workload;
pub mod wr;

pub use cluster::{ClusterError, ClusterFile};
pub use endpoint::VerbsEndpoint;
pub use error::VerbsError;
pub use fabric::{NodeReport, VerbsFabric};
pub use ffi::device::AtomicCap;
