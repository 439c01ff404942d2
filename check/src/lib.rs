//! # nessie-check
//!
//! What Nessie's checkers share, without the model checker (so that the
//! simulator, the CLI and the node binary link no stateright):
//! - [`history`] and [`linearizability`]: recorded concurrent histories and a
//!   Wing-Gong-Lowe checker (the algorithm of Porcupine and Knossos) that
//!   decides whether one is linearizable against a map, one key at a time;
//!   [`synthetic`]: generated histories with a planted violation, for
//!   showing a checker catches one.
//! - [`wgl`]: the one generic linearizability search (Wing-Gong-Lowe over
//!   any sequential specification); [`ordered`]: the range-aware checker
//!   of an ordered store's histories (Cell's), keys that range scans tie
//!   together checked as one map, a specification of it. The per-key
//!   checker is the same search specialised to a register, held to it (and
//!   to brute force) by its differential test.
//! - [`values`]: values unique to each write, so that a read of a history
//!   names the write it read.
//! - [`memory`]: word-granular fabric memory, with the transfers in flight
//!   over it, that the stateright model (`nessie-model`) and the cluster
//!   simulator (`nessie-sim`) both run the protocol against.
//! - [`watchdog`]: a time limit for a test, so that a hang fails with the
//!   test's name and seed.

#![warn(missing_docs)]

pub mod history;
pub mod linearizability;
pub mod memory;
pub mod ordered;
pub mod pure;
pub mod synthetic;
pub mod values;
pub mod watchdog;
pub mod wgl;

pub use history::{ret_of, Event, Failure, Recorder, Ret};
pub use linearizability::{
    check, check_history, check_history_with, CheckConfig, CheckError, CheckReport, Inconclusive,
    Verdict, Violation,
};
pub use values::{unique_value, write_unique_value, MIN_RECORDED_VALUE_SIZE};
pub use watchdog::{time_limit, TimeLimit};
