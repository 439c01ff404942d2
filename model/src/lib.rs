//! # nessie-model
//!
//! The stateright model of the Nessie protocol. At the crate root:
//! - [`World`]: a small cluster whose clients run the real state machines
//!   of `nessie-protocol` over word-granular fabric memory
//!   (`nessie_check::memory`), with time at the protocol's own granularity,
//!   skewed clocks, crashes, failed and lost completions, and an exact
//!   linearizability check of its history ([`WorldHistory`]);
//! - [`explore`]: exhaustive, bounded and random-walk exploration of a
//!   world ([`Mode`], [`Bounds`], [`Exploration`]); [`trace`]: a
//!   counterexample's story, step by step.
//!
//! [`worlds`] stays a namespace: the catalogue of named worlds
//! ([`worlds::WORLDS`], [`worlds::by_name`]) and their constructors.
//!
//! What the checkers share (recorded histories and their linearizability
//! checker, unique values, the memory, a test time limit) is
//! `nessie-check`, which links no stateright: only this crate's tests and
//! the `nessie-model` binary do.

#![warn(missing_docs)]

mod explore;
mod report;
mod world;
mod world_history;
pub mod worlds;

pub use explore::{explore, Bounds, Exploration, Mode, Verdict};
pub use report::{describe, trace};
pub use world::{
    expect_name, Action, ClientRun, ClientSpec, Expect, Flags, Run, World, WorldState,
    CLASSIC_FAULTS, START,
};
pub use world_history::{linearizable, CheckedOp, Record, Status, WorldHistory};
