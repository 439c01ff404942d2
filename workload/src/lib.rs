//! # nessie-workload
//!
//! The one workload driver of every command and test that drives clients
//! (`nessie run`, `nessie bench`'s slices, `nessie node run`, the node
//! tests): what a run is asked to do, the loop of its client threads over
//! any system's client, and what it measured and recorded.
//!
//! The API is at the crate root:
//! - the loop of one client thread ([`client_loop`]), generic over the
//!   client ([`Issuer`]: a blocking client of any system over any fabric
//!   ([`Blocking`]), or a pipeline of Nessie clients ([`Pipelined`])),
//!   where its operations come from ([`Source`]) and what is kept of them
//!   ([`Recorder`]). `nessie bench`'s measured slices run it too, with
//!   their own key distributions, open-loop arrivals and histograms.
//! - what a run is asked to do ([`WorkloadSpec`], checked first by
//!   [`check`]), and how long its values are ([`ValueMix`]: fixed, uniform
//!   or Facebook's ETC mix); keys by number ([`key_of`], [`write_key`]).
//! - a run over client threads ([`run_workers`], [`Worker`]): preload,
//!   start barrier (optionally one wall-clock instant on every node),
//!   measured phase, one report. `nessie run` (Nessie on the simulated
//!   fabric) and `nessie node run` (any system on RDMA) both are this.
//! - what a run measured ([`WorkloadReport`]), as one table, its latencies
//!   as HDR histograms ([`Latencies`]); recorded operations
//!   ([`HistoryRecord`]) for linearizability checks across processes.
//!
//! Namespaces reached into on purpose: [`ycsb`] (YCSB's core workloads A
//! to F as named mixes, `--workload ycsb-a`, and their generator) and
//! [`zipf`] (YCSB's Zipfian key generators, for every command that draws
//! keys by popularity), and [`metrics`](mod@metrics): every finished
//! operation counted and timed live through the `metrics` facade under the
//! names it defines, for a process that exports them (`nessie node
//! --metrics`). Inside, Cell's server node runs in the driver beside every
//! system's client.

mod cell;
mod driver;
mod history;
mod latency;
pub mod metrics;
mod mix;
mod report;
mod run;
mod spec;
#[doc(hidden)]
pub mod testing;
mod value_mix;
pub mod ycsb;
pub mod zipf;

pub use driver::{client_loop, Blocking, Done, Issuer, Limits, Next, Pipelined, Recorder, Source};
pub use history::{error_kind, history_client, monotonic_ns, Failed, HistoryRecord, SLOT_STRIDE};
pub use latency::Latencies;
pub use mix::{key_of, write_key};
pub use report::{write_kinds, KindReport, KindSummary, WorkloadReport};
pub use run::{run_workers, ServerLoad, Worker};
pub use spec::{
    check, AnnounceError, Announcer, BadSpec, MixArgs, StartAt, StoreLimits, WorkloadError,
    WorkloadSpec, START_LATE_LIMIT,
};
pub use value_mix::{size_bits, ValueDraw, ValueMix};
pub use ycsb::Ycsb;
