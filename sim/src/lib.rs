//! # nessie-sim
//!
//! A deterministic discrete-event cluster simulator: the real sans-IO
//! machines of Nessie (the same `GetMachine` and `PutMachine` users run),
//! NessieSD, NessieHY, Pilaf and Cell (their clients, and their server
//! workers polling on cores of their own) driven in virtual time over a
//! hardware model ([`profile`]), with no threads and no sleeps, so that a
//! run is a function of its specification and a cluster of the papers'
//! size (15 nodes x 12 client threads) runs on a laptop.
//!
//! - [`spec`]: what to simulate (which system: `nessie_systems::SystemKind`)
//!   and what a run reports.
//! - [`profile`]: the hardware constants, each with its source.
//! - [`engine`]: the event loop and the clients (crashes, restarts, pauses),
//!   over the engine's owned parts (events, cluster, network, chaos, server
//!   side, workload, checks: each a type in a file of its own); its other
//!   event handlers are `impl Engine` blocks in files of their own:
//!   [`network`] (the NIC and wire model, and the network's faults, moving
//!   the `nic` module's requests), `chain` (ordered chains),
//!   `server_failure` (Cell servers failing for good and their recovery,
//!   over `failures`' state), `kv` and `servers` (the other systems'
//!   clients and server workers, set up by `systems`), `engine_audit` and
//!   `cell_audit` (the audits' side in the engine).
//! - [`checks`]: the checkers' typed findings and [`CaseFailure`], the one
//!   failure a swarm case's verdict names.
//! - [`audit`]: the data-table audit at quiescence (no entry leaks beyond
//!   what the protocol admits).
//! - [`chaos`]: the injected faults, within the protocol's timing assumptions.
//! - [`swarm`](mod@swarm): the fault swarm: seeded cases, checked, replayed, shrunk.
//! - [`zipf`]: YCSB's Zipfian key generators (`SimSpec::zipf_theta`), the
//!   workload crate's, re-exported.
//!
//! What it does not do (docs/simulation.md): torn multi-word transfers,
//! power (CPU under load is busy cores), and the swarm's faults for the
//! server-driven systems.

#![warn(missing_docs)]

pub mod audit;
mod cell_audit;
mod chain;
pub mod chaos;
pub mod checks;
pub mod engine;
mod engine_audit;
mod failures;
mod kv;
pub mod network;
mod nic;
pub mod profile;
mod server_failure;
mod server_side;
mod servers;
pub mod spec;
pub mod swarm;
mod systems;
pub use nessie_workload::zipf;
pub use nessie_workload::Ycsb;

#[cfg(test)]
mod accounting_tests;
#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod window_tests;

pub use audit::DteAudit;
pub use chaos::Chaos;
pub use checks::CaseFailure;
pub use engine::{simulate, stamp_ns};
pub use engine::{GrowthPhase, PhaseFigures};
pub use profile::{Profile, MODERN, PROFILES, TPDS};
pub use spec::{
    config, CellRun, CellShape, ChaosCounts, ServerFaults, SimError, SimReport, SimSpec, Spike,
    Tuning,
};
pub use swarm::{
    shrink, swarm, swarm_system, swarm_with, verdict_of, HySwitches, SwarmCase, SwarmSummary,
    Verdict,
};
