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
//! At the crate root: what a run is asked for ([`BenchArgs`],
//! [`Experiment`], [`SystemChoice`]), the papers' figures as groups of
//! points and variants ([`groups`], [`Group`], [`Point`], [`Variant`]), a
//! variant started and preloaded ([`Started`]), the measurement of a point
//! in alternating slices ([`measure`], [`PointPlan`]), which cores the
//! clients and the server workers run on ([`CoreSplit`]), the results
//! ([`PointResult`], [`SystemResult`]) and the typed errors
//! ([`BenchError`]). [`report`] (the results' text rendering) stays a
//! namespace; the workload generator, Cell's variants, Nessie's pipelined
//! clients and the accumulators are private.
//!
//! The command (`nessie-cli`) adds the progress bar, the printing and the
//! SVG charts.

#![warn(missing_docs)]

mod affinity;
mod args;
mod cell;
mod driver;
mod error;
mod experiments;
mod pipe;
pub mod report;
mod stats;
mod system;
mod workload;

pub use affinity::CoreSplit;
pub use args::{BenchArgs, Experiment, SystemChoice};
pub use driver::{measure, rounds, Budget, PointPlan};
pub use error::BenchError;
pub use experiments::{groups, Group, Point, SWEEP_GETS};
pub use report::{PointResult, SystemResult};
pub use stats::SysAcc;
pub use system::{Started, Variant};
