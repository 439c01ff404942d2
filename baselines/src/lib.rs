//! The baselines the Nessie papers compare against, implemented on the same
//! [`Fabric`](nessie_protocol::Fabric) as Nessie so that every comparison is
//! measured side by side:
//!
//! - **NessieSD** ([`sd`]): server-driven, HERD-like. Clients RDMA-WRITE
//!   requests into per-client request slots of the key's home node; server
//!   workers poll them, execute on the node's partially-coupled tables
//!   ([`coupled`]) and RDMA-WRITE the response back.
//! - **NessieHY** ([`hy`]): hybrid, FaRM-like. Client-driven GETs by RDMA
//!   READ of the partially-coupled tables, server-driven PUT and DELETE.
//! - **Pilaf** ([`pilaf`]): a server-side 3-way cuckoo hash of self-verifying
//!   entries (CRC64), client GETs by RDMA READ, server-driven PUT and DELETE.
//! - **RACE hashing** ([`race`], ATC'21): fully client-driven like Nessie;
//!   associative buckets with shared overflow buckets, lock-free CAS on
//!   slots that point to out-of-place KV blocks.
//!
//! [`nessie_protocol::KvClient`] is the one interface over these and Nessie's own client, and
//! [`Deployment`] starts any of the five systems (with its server workers) on
//! a fabric.
//!
//! **Sans-IO.** Clients and server workers are async logic over a machine's
//! `Io` handle, run by the executor of `nessie-exec` (shared with Cell),
//! which also holds the request channel with its honest outcomes, the
//! server workers and the threaded drivers. This crate adds what is each
//! system's own: one attempt of a client operation ([`ClientLogic`]), its
//! retries ([`RetryBudget`], [`BlockingClient`]), and the handlers on the
//! node's tables ([`NodeTable`]). Each system is a namespace of its own
//! ([`sd`], [`hy`], [`coupled`], [`pilaf`], [`race`], [`rcuckoo`]: its
//! layout, client core and tables); what they share is at the crate root. The
//! cluster simulator (`nessie-sim`) runs the same machines in virtual time.
//!
//! # Any system behind one interface
//!
//! A [`Deployment`] starts a system (with its server workers, if it has
//! any) on a fabric and hands out clients; every client is a
//! [`KvClient`](nessie_protocol::KvClient), Nessie's own included:
//!
//! ```
//! use nessie_baselines::{Deployment, KvSystem, SystemConfig};
//! use nessie_fabric_sim::{SimConfig, SimFabric};
//! use nessie_protocol::{ClientId, Config, NodeId};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! for kind in [KvSystem::Nessie, KvSystem::Pilaf, KvSystem::Race] {
//!     let sys = SystemConfig::new(kind, Config { nodes: 3, ..Config::default() });
//!     let fabric = SimFabric::new(SimConfig::from_topology(sys.topology()))?;
//!     let deployment = Deployment::start(sys, fabric)?;
//!     let mut client = deployment.client(ClientId { node: NodeId(1), index: 0 })?;
//!     client.put(b"k", b"v")?;
//!     assert_eq!(client.get(b"k")?.as_deref(), Some(&b"v"[..]), "{kind}");
//! }
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod client;
pub mod coupled;
mod cuckoo;
mod deployment;
mod design;
pub mod hy;
pub mod pilaf;
pub mod race;
pub mod rcuckoo;
mod retry;
pub mod sd;

#[cfg(test)]
mod worker_tests;

pub use client::{
    check_one_sided, get_outcome, rpc_channel, Attempt, BlockingClient, ClientLogic, CoreSwitches,
    Retry,
};
pub use cuckoo::CuckooTable;
pub use deployment::{Deployment, KvSystem, SystemConfig};
pub use design::{AnyCore, AnyTable, DynClientLogic, NodeTable};
pub use hy::HyOptions;
pub use retry::{Jitter, RetryBudget};
