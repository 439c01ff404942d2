//! # nessie-sim
//!
//! A deterministic discrete-event cluster simulator: Nessie's real sans-IO
//! machines (the same `GetMachine` and `PutMachine` users run) driven in
//! virtual time over a hardware model ([`profile`]), with no threads and no
//! sleeps, so that a run is a function of its specification and a cluster
//! of the papers' size (15 nodes x 12 client threads) runs on a laptop.
//!
//! - [`profile`]: the hardware constants, each with its source.
//! - [`engine`]: the event loop, the NIC and wire model, the clients.
//!
//! What it does not do yet (docs/simulation.md): the baselines (they are
//! blocking RPC code, not sans-IO machines), server CPU, background load,
//! faults, and torn multi-word transfers.

#![warn(missing_docs)]

pub mod engine;
pub mod profile;

pub use engine::{config, simulate, SimError, SimReport, SimSpec};
pub use profile::{Profile, MODERN, PROFILES, TPDS};
