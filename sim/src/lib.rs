//! # nessie-sim
//!
//! A deterministic discrete-event cluster simulator: the real sans-IO
//! machines of Nessie (the same `GetMachine` and `PutMachine` users run),
//! NessieSD, NessieHY, Pilaf and Cell (their clients, and their server
//! workers polling on cores of their own) driven in virtual time over a
//! hardware model ([`Profile`]), with no threads and no sleeps, so that a
//! run is a function of its specification and a cluster of the papers'
//! size (15 nodes x 12 client threads) runs on a laptop.
//!
//! Everything is at the crate root:
//! - what to simulate ([`SimSpec`]; which system: `nessie_systems::SystemKind`)
//!   and what a run reports ([`SimReport`]); [`simulate`] runs it;
//! - the hardware constants, each with its source ([`Profile`], [`TPDS`],
//!   [`MODERN`]);
//! - the injected faults, within the protocol's timing assumptions
//!   ([`Chaos`]);
//! - the checkers' typed findings, of which [`CaseFailure`] is the one
//!   failure a swarm case's verdict names, and the data-table audit at
//!   quiescence ([`DteAudit`]: no entry leaks beyond what the protocol
//!   admits);
//! - the fault swarm ([`swarm`](fn@swarm), [`SwarmCase`], [`Verdict`],
//!   [`shrink`]): seeded cases, checked, replayed, shrunk;
//! - [`zipf`]: YCSB's Zipfian key generators (`SimSpec::zipf_theta`), the
//!   workload crate's, re-exported.
//!
//! Inside, the engine's event loop and clients (crashes, restarts, pauses)
//! run over its owned parts (events, cluster, network, chaos, server side,
//! workload, checks: each a type in a file of its own); its other event
//! handlers are `impl Engine` blocks in files of their own: `network` (the
//! NIC and wire model, and the network's faults, moving the `nic` module's
//! requests), `chain` (ordered chains), `server_failure` (Cell servers
//! failing for good and their recovery, over `failures`' state), `kv` and
//! `servers` (the other systems' clients and server workers, set up by
//! `systems`), `engine_audit` and `cell_audit` (the audits' side in the
//! engine).
//!
//! What it does not do (docs/simulation.md): torn multi-word transfers,
//! power (CPU under load is busy cores), and the swarm's faults for the
//! server-driven systems.

#![warn(missing_docs)]

mod audit;
mod cell_audit;
mod chain;
mod chaos;
mod checks;
mod engine;
mod engine_audit;
mod failures;
mod kv;
mod network;
mod nic;
mod profile;
mod server_failure;
mod server_side;
mod servers;
mod spec;
mod swarm;
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

pub use audit::{leaks_per_crash, DteAudit};
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
    shrink, swarm, swarm_system, swarm_with, verdict_of, CaseRun, HySwitches, SwarmCase,
    SwarmSummary, Verdict, CHECK_STEPS, RANGE_CHECK_STEPS,
};
