//! # nessie-model
//!
//! The stateright model of the Nessie protocol:
//! - [`world`] and [`worlds`]: a small cluster whose clients run the real
//!   state machines of `nessie-protocol` over word-granular fabric memory
//!   (`nessie_check::memory`), with time at the protocol's own granularity,
//!   skewed clocks, crashes, failed and lost completions, and an exact
//!   linearizability check of its history ([`world_history`]), and the named
//!   worlds it explores.
//! - [`explore`]: exhaustive, bounded and random-walk exploration of a
//!   world; [`report`]: a counterexample's story, step by step.
//!
//! What the checkers share (recorded histories and their linearizability
//! checker, unique values, the memory, a test time limit) is
//! `nessie-check`, which links no stateright: only this crate's tests and
//! the `nessie-model` binary do.

#![warn(missing_docs)]

pub mod explore;
pub mod report;
pub mod world;
pub mod world_history;
pub mod worlds;
