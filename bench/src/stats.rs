//! What one system did during the measured slices: per-operation counts,
//! latency histograms, fabric work (means and per-operation histograms of
//! READs, WRITEs and CASes, as the papers' Figs 8-11 show them), retries,
//! failures by kind, cache hits and CPU time; and its serialisable summary.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use nessie_protocol::{Error, OpStats};
use serde::Serialize;

/// Buckets of the per-operation count histograms (the last one is "or more").
pub const COUNT_BUCKETS: usize = 16;

/// The short name of an error kind, as reports list failures
/// ([`Error::kind`]).
pub fn error_kind(e: &Error) -> &'static str {
    e.kind()
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Counters of one kind of operation (GET or PUT).
#[derive(Clone, Debug)]
pub struct KindAcc {
    /// Operations issued.
    pub ops: u64,
    /// Operations that succeeded.
    pub ok: u64,
    /// GETs that found a value (PUTs: same as `ok`).
    pub found: u64,
    /// Failures by error kind.
    pub failures: BTreeMap<&'static str, u64>,
    /// Latency in nanoseconds.
    pub latency: Histogram<u64>,
    /// Fabric bytes per operation.
    pub bytes: Histogram<u64>,
    /// Sum of the fabric work.
    pub fabric: OpStats,
    /// Operations by number of RDMA READs.
    pub reads: [u64; COUNT_BUCKETS],
    /// Operations by number of RDMA WRITEs (client's and servers').
    pub writes: [u64; COUNT_BUCKETS],
    /// Operations by number of RDMA CASes.
    pub cas: [u64; COUNT_BUCKETS],
    /// Operations that needed more than one attempt.
    pub retried: u64,
}

impl Default for KindAcc {
    fn default() -> Self {
        KindAcc {
            ops: 0,
            ok: 0,
            found: 0,
            failures: BTreeMap::new(),
            latency: histogram(),
            bytes: histogram(),
            fabric: OpStats::default(),
            reads: [0; COUNT_BUCKETS],
            writes: [0; COUNT_BUCKETS],
            cas: [0; COUNT_BUCKETS],
            retried: 0,
        }
    }
}

/// Adds the failure counts of `from` to `into`.
pub fn add_failures(into: &mut BTreeMap<&'static str, u64>, from: &BTreeMap<&'static str, u64>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

fn bucket(n: u64) -> usize {
    (n as usize).min(COUNT_BUCKETS - 1)
}

impl KindAcc {
    /// Records one operation.
    pub fn record(&mut self, s: &OpStats, latency: Duration, result: Result<bool, &Error>) {
        self.ops += 1;
        match result {
            Ok(found) => {
                self.ok += 1;
                self.found += u64::from(found);
            }
            Err(e) => *self.failures.entry(error_kind(e)).or_default() += 1,
        }
        self.latency.saturating_record(latency.as_nanos() as u64);
        self.bytes.saturating_record(s.fabric_bytes);
        self.fabric += *s;
        self.reads[bucket(s.reads())] += 1;
        self.writes[bucket(s.writes + s.server_writes)] += 1;
        self.cas[bucket(s.cas())] += 1;
        self.retried += u64::from(s.attempts > 1);
    }

    /// Adds another accumulator.
    pub fn merge(&mut self, o: &KindAcc) {
        self.ops += o.ops;
        self.ok += o.ok;
        self.found += o.found;
        add_failures(&mut self.failures, &o.failures);
        self.latency.add(&o.latency).expect("same histogram bounds");
        self.bytes.add(&o.bytes).expect("same histogram bounds");
        self.fabric += o.fabric;
        for i in 0..COUNT_BUCKETS {
            self.reads[i] += o.reads[i];
            self.writes[i] += o.writes[i];
            self.cas[i] += o.cas[i];
        }
        self.retried += o.retried;
    }
}

/// Everything measured for one system at one point.
#[derive(Clone, Debug, Default)]
pub struct SysAcc {
    /// GETs.
    pub get: KindAcc,
    /// PUTs.
    pub put: KindAcc,
    /// Range scans.
    pub scan: KindAcc,
    /// Meganode searches done by servers (Cell).
    pub server_searches: u64,
    /// Meganode searches done by clients (Cell).
    pub client_searches: u64,
    /// Measured wall time (sum of the slices).
    pub wall: Duration,
    /// CPU time of the client threads while measured.
    pub client_cpu: Duration,
    /// CPU time of the server workers while measured.
    pub server_cpu: Duration,
    /// Requests the server workers served.
    pub server_requests: u64,
    /// Client cache hits.
    pub cache_hits: u64,
    /// Slices measured.
    pub slices: u32,
}

/// Latency percentiles in microseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
}

/// Means of the fabric work per operation.
#[derive(Clone, Debug, Serialize)]
pub struct Means {
    /// RDMA READs of index table entries.
    pub index_reads: f64,
    /// RDMA READs of data table entries.
    pub data_reads: f64,
    /// Client RDMA WRITEs.
    pub writes: f64,
    /// Server RDMA WRITEs (responses).
    pub server_writes: f64,
    /// RDMA CASes on index table entries.
    pub index_cas: f64,
    /// RDMA CASes on data table entries.
    pub data_cas: f64,
    /// CPU reads of local memory.
    pub local_reads: f64,
    /// CPU writes of local memory.
    pub local_writes: f64,
    /// All NIC operations.
    pub fabric_ops: f64,
    /// Bytes moved by RDMA.
    pub fabric_bytes: f64,
    /// Remote round trips.
    pub round_trips: f64,
    /// Attempts.
    pub attempts: f64,
}

/// The summary of one kind of operation.
#[derive(Clone, Debug, Serialize)]
pub struct KindReport {
    /// Operations issued.
    pub ops: u64,
    /// Operations that succeeded.
    pub ok: u64,
    /// Latency.
    pub latency_us: Latency,
    /// Mean fabric work.
    pub mean: Means,
    /// Fabric bytes per operation: p50 and p99.
    pub bytes_p50: u64,
    /// See `bytes_p50`.
    pub bytes_p99: u64,
    /// Fraction of operations with 0, 1, .. 15+ RDMA READs.
    pub reads_hist: Vec<f64>,
    /// Same for RDMA WRITEs (client and server).
    pub writes_hist: Vec<f64>,
    /// Same for RDMA CASes.
    pub cas_hist: Vec<f64>,
    /// Operations that needed more than one attempt (aborts/retries).
    pub retried: u64,
    /// Failures by error kind.
    pub failures: BTreeMap<&'static str, u64>,
}

fn frac(h: &[u64; COUNT_BUCKETS], n: u64) -> Vec<f64> {
    h.iter().map(|&c| c as f64 / n.max(1) as f64).collect()
}

impl KindAcc {
    /// The summary, or `None` without operations.
    pub fn report(&self) -> Option<KindReport> {
        if self.ops == 0 {
            return None;
        }
        let n = self.ops as f64;
        let f = &self.fabric;
        let us = |q: f64| self.latency.value_at_quantile(q) as f64 / 1000.0;
        Some(KindReport {
            ops: self.ops,
            ok: self.ok,
            latency_us: Latency {
                p50: us(0.5),
                p99: us(0.99),
                p999: us(0.999),
                mean: self.latency.mean() / 1000.0,
            },
            mean: Means {
                index_reads: f.index_reads as f64 / n,
                data_reads: f.data_reads as f64 / n,
                writes: f.writes as f64 / n,
                server_writes: f.server_writes as f64 / n,
                index_cas: f.index_cas as f64 / n,
                data_cas: f.data_cas as f64 / n,
                local_reads: f.local_reads as f64 / n,
                local_writes: f.local_writes as f64 / n,
                fabric_ops: f.fabric_ops() as f64 / n,
                fabric_bytes: f.fabric_bytes as f64 / n,
                round_trips: f.round_trips as f64 / n,
                attempts: f.attempts as f64 / n,
            },
            bytes_p50: self.bytes.value_at_quantile(0.5),
            bytes_p99: self.bytes.value_at_quantile(0.99),
            reads_hist: frac(&self.reads, self.ops),
            writes_hist: frac(&self.writes, self.ops),
            cas_hist: frac(&self.cas, self.ops),
            retried: self.retried,
            failures: self.failures.clone(),
        })
    }
}
