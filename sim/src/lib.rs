//! # nessie-sim
//!
//! A deterministic discrete-event cluster simulator: Nessie's real sans-IO
//! machines (the same `GetMachine` and `PutMachine` users run) driven in
//! virtual time over a hardware model ([`profile`]), with no threads and no
//! sleeps, so that a run is a function of its specification and a cluster
//! of the papers' size (15 nodes x 12 client threads) runs on a laptop.
//!
//! - [`spec`]: what to simulate and what a run reports.
//! - [`profile`]: the hardware constants, each with its source.
//! - [`engine`]: the event loop and the clients (crashes, restarts, pauses).
//! - [`network`]: the NIC and wire model, and the network's faults.
//! - [`chaos`]: the injected faults, within the protocol's timing assumptions.
//! - [`swarm`]: the fault swarm: seeded cases, checked, replayed, shrunk.
//!
//! What it does not do yet (docs/simulation.md): the baselines (they are
//! blocking RPC code, not sans-IO machines), server CPU, and torn
//! multi-word transfers.

#![warn(missing_docs)]

pub mod chaos;
pub mod engine;
pub mod network;
pub mod profile;
pub mod spec;
pub mod swarm;

#[cfg(test)]
mod accounting_tests;

pub use chaos::Chaos;
pub use engine::simulate;
pub use profile::{Profile, MODERN, PROFILES, TPDS};
pub use spec::{config, ChaosCounts, SimError, SimReport, SimSpec, Tuning};
pub use swarm::{shrink, swarm, SwarmCase, SwarmSummary, Verdict};
