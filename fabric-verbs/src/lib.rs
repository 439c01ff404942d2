//! # nessie-fabric-verbs
//!
//! The real RDMA backend of Nessie: the protocol's [`nessie_protocol::Fabric`]
//! over libibverbs and librdmacm (the `rdma-sys` 0.3 bindings).
//!
//! The API is at the crate root:
//! - [`VerbsFabric`]: the nodes this process hosts (or none: a client host,
//!   a process running clients without storage), their registered regions,
//!   listeners and agents; [`NodeReport`] what start-up found out.
//! - [`VerbsEndpoint`]: a client's queue pairs to every node, loopback
//!   included, and its completion queue.
//! - [`ClusterFile`]: the TOML cluster file ([`ClusterError`]; its sections
//!   [`NodeEntry`], [`Regions`], [`Store`], [`ClassShare`], [`Tuning`],
//!   [`SkewAction`], and the transport [`Timing`] they imply), and
//!   [`check_fingerprint`] ([`WireError`]): the handshake's check that two
//!   processes run one cluster file.
//! - [`VerbsError`]: what the device and the connection manager can refuse.
//! - For the operator: [`NicCounters`] (the device's own counters from
//!   sysfs), [`device_fatal`] over [`EventCounts`] (the device's
//!   asynchronous events), the process's deadline [`Watchdog`]
//!   ([`WatchdogStats`]), and its file and queue-pair limits
//!   ([`ConnectionBudget`], [`open_file_limit`], [`open_fds`],
//!   [`process_qps`]); [`AtomicCap`], the device's atomic capability; the
//!   periodic checks of the peers' clocks ([`ClockLedger`], [`PeerClock`],
//!   [`ClockSample`]).
//!
//! Namespaces reached into on purpose: [`transport_stats`] (queue pairs
//! failed, dials failed, re-dials: the process's counters) and, for the
//! device tests, [`lossy_link`] (two devices joined by a link the tests
//! disturb with `tc netem`). The safe wrappers over the C objects (`ffi`)
//! are public for the device tests only, with no stability promise.
//!
//! Inside, pure and unit-tested policy (the cluster file, queue-pair sizing
//! and fences, work requests, completion statuses, the NIC's atomic byte
//! order, rkeys, the wire's private data, the staging allocator, the
//! clock) is apart from the running fabric (a hosted node and its
//! listener, its memory windows, the dialers, the periodic clock check,
//! the endpoint, the watchdog).
//!
//! This crate is the fabric and nothing else: which system a node process
//! runs, its workload and its reports live in `nessie-cli` (`nessie node`,
//! built with its `verbs` feature). Deployment, the cluster file and
//! troubleshooting: `docs/deploy.md`.

#![warn(missing_docs)]

mod byteorder;
mod clock;
mod clock_check;
mod cluster;
mod connect;
mod dialer;
mod endpoint;
mod error;
mod events;
mod fabric;
#[doc(hidden)]
pub mod ffi;
pub mod lossy_link;
mod nic_counters;
mod node;
mod policy;
mod remote;
mod staging;
mod status;
pub mod transport_stats;
mod watchdog;
mod windows;
mod wire;
mod wr;

pub use clock_check::{ClockLedger, ClockSample, PeerClock};
pub use cluster::{
    ClassShare, ClusterError, ClusterFile, NodeEntry, Regions, SkewAction, Store, Timing, Tuning,
};
pub use endpoint::VerbsEndpoint;
pub use error::VerbsError;
pub use events::{device_fatal, EventCounts};
pub use fabric::{NodeReport, VerbsFabric};
pub use ffi::device::AtomicCap;
pub use nic_counters::NicCounters;
pub use policy::{open_fds, open_file_limit, process_qps, ConnectionBudget};
pub use watchdog::{Watchdog, WatchdogStats};
pub use wire::{check_fingerprint, WireError};
