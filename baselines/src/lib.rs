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
//!
//! [`nessie_protocol::KvClient`] is the one interface over these and Nessie's own client, and
//! [`Deployment`] starts any of the four systems (with its server workers) on
//! a fabric.
//!
//! **Sans-IO.** Clients and server workers are async logic over a machine's
//! [`machine::Io`] handle, run by one executor ([`machine`], shared with
//! Cell): one attempt of a client operation ([`client::ClientLogic`]), the
//! request channel with its honest outcomes ([`rpc::RpcCall`]), a worker's
//! wait for requests and its handling of each ([`server::Worker`]), the
//! handlers on the node's tables. The blocking drivers ([`blocking`],
//! [`client::BlockingClient`], [`server::ServerPool`]) run them in threads
//! on any fabric; the cluster simulator (`nessie-sim`) runs the same
//! machines in virtual time.

#![warn(missing_docs)]

pub mod blocking;
pub mod bytes;
pub mod client;
pub mod coupled;
pub mod cpu;
pub mod cuckoo;
pub mod deployment;
pub mod hy;
pub mod lock;
pub mod machine;
pub mod mailbox;
pub mod pilaf;
pub mod retry;
pub mod rpc;
pub mod sd;
pub mod server;

pub use deployment::{Deployment, HyOptions, KvSystem, SystemConfig};
