//! The library behind the `nessie` command: `nessie run` ([`run`]) drives a
//! mixed workload on a simulated Nessie cluster; `nessie bench` ([`mod@bench`])
//! compares Nessie with NessieSD, NessieHY and Pilaf side by side on the same
//! simulated fabric and reproduces the papers' experiments (their stores
//! sized by `nessie_systems::sizing`). `nessie inserts` ([`inserts`]) measures what an insert
//! costs as the index fills up; `nessie pipeline` ([`mod@pipeline`]) what
//! many operations in flight per client thread buy; `nessie sim`
//! ([`mod@sim`]) runs the systems' machines in the deterministic cluster
//! simulator, and `nessie papers` ([`papers`]) its predictions next to the
//! papers' published numbers.
//! [`node`] is a node process of a deployment (`nessie node`, on RDMA with
//! the `verbs` feature); the one workload driver all of them share is the
//! `nessie-workload` crate.
//!
//! Each command is a namespace of its own: this crate is the `nessie`
//! binary's (and its tests'), not an application's API, which is
//! `nessie-protocol`'s and `nessie-systems`' (`Connect`).

#![warn(missing_docs)]

pub mod bench;
pub mod growth;
pub mod inserts;
pub mod node;
pub mod papers;
pub mod pipeline;
pub mod run;
pub mod sim;
pub mod swarm;
