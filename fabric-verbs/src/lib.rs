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
//! - The running fabric: [`node`] (a hosted node: its registered regions,
//!   its `rdma_cm` listener and the start-up probe; or a client host, a
//!   process hosting no node that runs clients without storage),
//!   [`windows`] (a node's type-1 memory windows, bound by its agent),
//!   [`connect`] (dialling,
//!   with the clock check), [`dialer`] (one dialer per peer, shared by a
//!   node's endpoints), [`clock_check`] (the peers' clocks checked
//!   again periodically), [`endpoint`] (a client's queue pairs to every
//!   node, loopback included, and its completion queue), [`fabric`]
//!   ([`VerbsFabric`]), [`nic_counters`] (the device's own counters from
//!   sysfs, for the reports) and [`events`] (the device's asynchronous
//!   events: ports down and up, fatal queue pairs) and [`watchdog`] (the
//!   process's deadline watchdog, which fails a queue pair at a request's
//!   deadline whether or not its endpoint is polled), and
//!   [`transport_stats`] (queue pairs failed, dials failed, re-dials: the
//!   process's counters for the operator).
//! - For the device tests: [`lossy_link`] (two devices joined by a link the
//!   tests disturb with `tc netem`).
//!
//! This crate is the fabric and nothing else: which system a node process
//! runs, its workload and its reports live in `nessie-cli` (`nessie node`,
//! built with its `verbs` feature). Deployment, the cluster file and
//! troubleshooting: `docs/deploy.md`.

#![warn(missing_docs)]

pub mod byteorder;
pub mod clock;
pub mod clock_check;
pub mod cluster;
pub mod connect;
pub mod dialer;
pub mod endpoint;
pub mod error;
pub mod events;
pub mod fabric;
pub mod ffi;
pub mod lossy_link;
pub mod nic_counters;
pub mod node;
pub mod policy;
pub mod remote;
pub mod staging;
pub mod status;
pub mod transport_stats;
pub mod watchdog;
pub mod windows;
pub mod wire;
pub mod wr;

pub use cluster::{ClusterError, ClusterFile};
pub use endpoint::VerbsEndpoint;
pub use error::VerbsError;
pub use fabric::{NodeReport, VerbsFabric};
pub use ffi::device::AtomicCap;
pub use nic_counters::NicCounters;
