//! # nessie-workload
//!
//! The one workload driver of every command and test that drives clients
//! (`nessie run`, `nessie bench`'s slices, `nessie node run`, the node
//! tests): what a run is asked to do, the loop of its client threads over
//! any system's client, and what it measured and recorded.
//!
//! - [`driver`]: the loop of one client thread ([`client_loop`]), generic
//!   over the client ([`Issuer`]: a blocking client of any system over any
//!   fabric, or a pipeline of Nessie clients), where its operations come
//!   from ([`Source`]) and what is kept of them ([`Recorder`]). `nessie
//!   bench`'s measured slices run it too, with their own key distributions,
//!   open-loop arrivals and histograms.
//! - [`mix`]: keys, the preload and the mixed GET/PUT/DELETE source.
//! - [`value_mix`]: how long its values are ([`ValueMix`]: fixed, uniform or
//!   Facebook's ETC mix).
//! - [`spec`]: what a run is asked to do ([`WorkloadSpec`]), checked first.
//! - [`run`](mod@run): a run over client threads ([`run_workers`]):
//!   preload, start barrier (optionally one wall-clock instant on every
//!   node), measured phase, one report. `nessie run` (Nessie on the
//!   simulated fabric) and `nessie node run` (any system on RDMA) both are
//!   this.
//! - [`report`]: what a run measured ([`WorkloadReport`]), as one table;
//!   [`latency`]: its latencies as HDR histograms ([`Latencies`]).
//! - [`cell`]: Cell's server node in the driver (every system's client,
//!   Cell's with its range scans, comes through `KvClient`).
//! - [`ycsb`]: YCSB's core workloads A to F as named mixes
//!   (`--workload ycsb-a`).
//! - [`zipf`]: YCSB's Zipfian key generators, for every command that draws
//!   keys by popularity (the bench's slices, the cluster simulator).
//! - [`history`]: recorded operations ([`HistoryRecord`]) for
//!   linearizability checks across processes.
//! - [`metrics`](mod@metrics): every finished operation, live, through the
//!   `metrics` facade (counted, timed, its retries), for a process that
//!   exports them (`nessie node --metrics`).

pub mod cell;
pub mod driver;
pub mod history;
pub mod latency;
pub mod metrics;
pub mod mix;
pub mod report;
pub mod run;
pub mod spec;
pub mod testing;
pub mod value_mix;
pub mod ycsb;
pub mod zipf;

pub use driver::{client_loop, Blocking, Done, Issuer, Limits, Next, Pipelined, Recorder, Source};
pub use history::{error_kind, history_client, monotonic_ns, Failed, HistoryRecord, SLOT_STRIDE};
pub use latency::Latencies;
pub use report::{KindReport, KindSummary, WorkloadReport};
pub use run::{run_workers, ServerLoad, Worker};
pub use spec::{
    check, Announcer, MixArgs, StartAt, StoreLimits, WorkloadError, WorkloadSpec, START_LATE_LIMIT,
};
pub use value_mix::{ValueDraw, ValueMix};
pub use ycsb::Ycsb;
