//! # nessie-check
//!
//! What Nessie's checkers share, without the model checker (so that the
//! simulator, the CLI and the node binary link no stateright):
//! At the crate root:
//! - recorded concurrent histories ([`Event`], [`Recorder`], [`Ret`]) and a
//!   Wing-Gong-Lowe checker (the algorithm of Porcupine and Knossos) that
//!   decides whether one is linearizable against a map, one key at a time
//!   ([`check`], [`check_history`], [`CheckReport`]: a [`Violation`], or
//!   [`Inconclusive`] when the search ran out, never a pass);
//! - values unique to each write ([`unique_value`], [`min_unique_size`]),
//!   so that a read of a history names the write it read;
//! - a time limit for a test ([`time_limit`]), so that a hang fails with
//!   the test's name and seed ([`SCALE_VAR`], [`REPORT_VAR`]).
//!
//! Namespaces reached into on purpose, each a checker's part:
//! - [`wgl`]: the one generic linearizability search (Wing-Gong-Lowe over
//!   any sequential specification); [`ordered`]: the range-aware checker
//!   of an ordered store's histories (Cell's), keys that range scans tie
//!   together checked as one map, a specification of it. The per-key
//!   checker is the same search specialised to a register, held to it (and
//!   to brute force) by its differential test.
//! - [`synthetic`]: generated histories with a planted violation, for
//!   showing a checker catches one.
//! - [`memory`]: word-granular fabric memory, with the transfers in flight
//!   over it, that the stateright model (`nessie-model`) and the cluster
//!   simulator (`nessie-sim`) both run the protocol against; [`pure`]: a
//!   node's agent and a client without storage's start on that memory.

#![warn(missing_docs)]

mod history;
mod linearizability;
pub mod memory;
pub mod ordered;
pub mod pure;
pub mod synthetic;
mod values;
mod watchdog;
pub mod wgl;

pub use history::{ret_of, Event, Failure, Recorder, Ret};
pub use linearizability::{
    check, check_history, check_history_with, CheckConfig, CheckError, CheckReport, Inconclusive,
    Verdict, Violation,
};
pub use values::{min_unique_size, unique_value, write_unique_value, MIN_RECORDED_VALUE_SIZE};
pub use watchdog::{time_limit, TimeLimit, REPORT_VAR, SCALE_VAR};
