//! # nessie-model
//!
//! Checkers for the Nessie protocol. Today: [`history`], concurrent key-value
//! histories as recorded by tests, and [`linearizability`], a
//! Wing-Gong-Lowe checker (the algorithm of Porcupine and Knossos) that decides
//! whether a history is linearizable against a map, one key at a time.

#![warn(missing_docs)]

pub mod history;
pub mod linearizability;

pub use history::{Event, KvOp, KvRet, Recorder};
pub use linearizability::{check_history, Violation};
