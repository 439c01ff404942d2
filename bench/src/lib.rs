//! The side-by-side benchmark behind `nessie bench`: Nessie, NessieSD,
//! NessieHY, Pilaf and Cell on the simulated fabric.
//!
//! Every selected system (each *variant*: a system and its options) is
//! started on its own `SimFabric` and preloaded once; then each point of
//! the experiment measures all of them in alternating short slices (system
//! A, system B, ..., A, B, ...), with the server workers of every system but
//! the measured one paused, so that every comparison is a ratio of
//! measurements taken side by side in one run.
//!
//! - [`args`]: what a run is asked for (the command line's options).
//! - [`workload`]: what the clients do (keys, values, mix, distribution);
//!   [`pipe`]: Nessie with several operations in flight per client thread.
//! - [`system`]: starting and preloading a variant, and its clients;
//!   [`cell`]: how a Cell variant is sized and searches.
//! - [`driver`]: slices and points; [`affinity`]: which cores the clients
//!   and the server workers run on.
//! - [`stats`] and [`report`]: what is measured, and its text rendering.
//! - [`experiments`]: the papers' figures as groups of points and variants.
//! - [`error`]: the typed errors.
//!
//! The command (`nessie-cli`) adds the progress bar, the printing and the
//! SVG charts.

#![warn(missing_docs)]

pub mod affinity;
pub mod args;
pub mod cell;
pub mod driver;
pub mod error;
pub mod experiments;
pub mod pipe;
pub mod report;
pub mod stats;
pub mod system;
pub mod workload;

pub use args::{BenchArgs, Experiment};
pub use error::BenchError;
