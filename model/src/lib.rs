//! # nessie-model
//!
//! Checkers for the Nessie protocol:
//! - [`world`] and [`worlds`]: a stateright model of a small cluster whose
//!   clients run the real state machines of `nessie-protocol` over
//!   word-granular fabric memory ([`memory`]), with time at the protocol's own
//!   granularity, skewed clocks, crashes, failed and lost completions, and an
//!   exact linearizability check of its history ([`world_history`]), and the
//!   named worlds it explores.
//! - [`history`] and [`linearizability`]: recorded concurrent histories and a
//!   Wing-Gong-Lowe checker (the algorithm of Porcupine and Knossos) that
//!   decides whether one is linearizable against a map, one key at a time.
//! - [`values`]: values unique to each write, so that a read of a history
//!   names the write it read.
//! - [`watchdog`]: a time limit for a test, so that a hang fails with the
//!   test's name and seed.

#![warn(missing_docs)]

pub mod explore;
pub mod history;
pub mod linearizability;
pub mod memory;
pub mod report;
pub mod synthetic;
pub mod values;
pub mod watchdog;
pub mod world;
pub mod world_history;
pub mod worlds;

pub use history::{Event, KvOp, KvRet, Recorder};
pub use linearizability::{
    check, check_history, CheckConfig, CheckError, CheckReport, Inconclusive, Verdict, Violation,
};
pub use values::{unique_value, write_unique_value, MIN_RECORDED_VALUE_SIZE};
pub use watchdog::{time_limit, TimeLimit};
