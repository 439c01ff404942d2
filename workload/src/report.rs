//! What a mixed-workload run measured: per operation kind the count,
//! failures, GET misses, fabric work and its latencies ([`KindReport`]),
//! and for the run the measured time, CPU time of the client threads and
//! of this process's server workers, failures by kind and, when asked, the
//! history ([`WorkloadReport`]); its flat form ([`KindSummary`]) and the
//! table every report prints ([`write_kinds`]).

use std::collections::BTreeMap;
use std::time::Duration;

use nessie_protocol::OpStats;
use serde::{Deserialize, Serialize};

use super::history::HistoryRecord;
use super::latency::Latencies;

/// Counts of one operation kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindReport {
    /// Operations completed.
    pub ops: u64,
    /// Operations that returned an error.
    pub failures: u64,
    /// GETs that found no value, scans that found no entry (not counted as
    /// failures, but not as operations that returned something either).
    pub misses: u64,
    /// Fabric work summed.
    pub fabric: OpStats,
    /// Value bytes returned by GETs that found their key (and by scans).
    pub value_bytes: u64,
    /// Latencies.
    pub latencies: Latencies,
}

impl KindReport {
    /// Adds another thread's counts.
    pub fn merge(&mut self, o: KindReport) {
        self.ops += o.ops;
        self.failures += o.failures;
        self.misses += o.misses;
        self.fabric += o.fabric;
        self.value_bytes += o.value_bytes;
        self.latencies.merge(&o.latencies);
    }

    /// The `p` quantile of the latencies in microseconds.
    pub fn quantile_us(&self, p: f64) -> f64 {
        self.latencies.quantile_us(p)
    }
}

/// One operation kind's results as a flat record (what node reports store
/// as JSON, and what the tables print).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KindSummary {
    /// Operations completed.
    pub ops: u64,
    /// Operations that returned an error.
    pub failures: u64,
    /// GETs that found no value.
    pub misses: u64,
    /// Index table READs.
    pub index_reads: u64,
    /// Data table READs.
    pub data_reads: u64,
    /// Client WRITEs.
    pub writes: u64,
    /// Server response WRITEs.
    pub server_writes: u64,
    /// CASes.
    pub cas: u64,
    /// CPU reads and writes of the node's own memory.
    pub local: u64,
    /// Bytes on the fabric.
    pub fabric_bytes: u64,
    /// Remote round trips.
    pub round_trips: u64,
    /// Attempts (retries are attempts beyond one per operation).
    pub attempts: u64,
    /// Latencies (an HDR histogram; JSON: its V2 encoding in base64).
    pub latencies: Latencies,
}

impl KindSummary {
    /// The summary of `k`.
    pub fn of(k: &KindReport) -> KindSummary {
        let s = &k.fabric;
        KindSummary {
            ops: k.ops,
            failures: k.failures,
            misses: k.misses,
            index_reads: s.index_reads,
            data_reads: s.data_reads,
            writes: s.writes,
            server_writes: s.server_writes,
            cas: s.cas(),
            local: s.local_reads + s.local_writes,
            fabric_bytes: s.fabric_bytes,
            round_trips: s.round_trips,
            attempts: s.attempts,
            latencies: k.latencies.clone(),
        }
    }

    /// Adds another node's results.
    pub fn merge(&mut self, o: &KindSummary) {
        self.ops += o.ops;
        self.failures += o.failures;
        self.misses += o.misses;
        self.index_reads += o.index_reads;
        self.data_reads += o.data_reads;
        self.writes += o.writes;
        self.server_writes += o.server_writes;
        self.cas += o.cas;
        self.local += o.local;
        self.fabric_bytes += o.fabric_bytes;
        self.round_trips += o.round_trips;
        self.attempts += o.attempts;
        self.latencies.merge(&o.latencies);
    }

    /// The `p` quantile of the latencies, µs.
    pub fn quantile_us(&self, p: f64) -> f64 {
        self.latencies.quantile_us(p)
    }
}

/// Writes the per-kind table (GET, PUT, DELETE, SCAN: count, latency
/// quantiles, failures and the fabric work per operation; kinds without
/// operations left out) and the GET line (values returned, misses,
/// failures).
pub fn write_kinds(f: &mut std::fmt::Formatter<'_>, kinds: &[KindSummary; 4]) -> std::fmt::Result {
    writeln!(
        f,
        "{:<7} {:>9} {:>8} {:>8} {:>8} {:>8} | per operation: {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>6} {:>7}",
        "op", "count", "p50 us", "p99 us", "p99.9 us", "failed", "idxRD", "dtaRD", "WRITE", "srvWR", "CAS", "local", "bytes", "RTs", "retries"
    )?;
    for (name, k) in ["GET", "PUT", "DELETE", "SCAN"].iter().zip(kinds) {
        if k.ops == 0 {
            continue;
        }
        let n = k.ops as f64;
        writeln!(
            f,
            "{:<7} {:>9} {:>8.1} {:>8.1} {:>8.1} {:>8} |                {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>9.0} {:>6.2} {:>7.3}",
            name,
            k.ops,
            k.quantile_us(0.5),
            k.quantile_us(0.99),
            k.quantile_us(0.999),
            k.failures,
            k.index_reads as f64 / n,
            k.data_reads as f64 / n,
            k.writes as f64 / n,
            k.server_writes as f64 / n,
            k.cas as f64 / n,
            k.local as f64 / n,
            k.fabric_bytes as f64 / n,
            k.round_trips as f64 / n,
            (k.attempts as f64 - n) / n,
        )?;
    }
    let gets = &kinds[0];
    writeln!(
        f,
        "GETs: {} returned a value, {} found no value, {} failed",
        gets.ops - gets.misses - gets.failures,
        gets.misses,
        gets.failures
    )
}

/// The result: GET, PUT, DELETE and SCAN reports, the measured time and the CPU
/// time spent on it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadReport {
    /// The system run (its command-line name).
    pub system: String,
    /// GET, PUT, DELETE, SCAN.
    pub kinds: [KindReport; 4],
    /// Seconds measured.
    pub seconds: f64,
    /// CPU time of the client threads during the measured phase.
    pub client_cpu: Duration,
    /// CPU time of the server workers given to
    /// [`run_workers`](super::run_workers) during the measured phase (zero
    /// for Nessie, which has none).
    pub server_cpu: Duration,
    /// Requests those server workers served during the measured phase.
    pub server_requests: u64,
    /// Failures by error kind ([`error_kind`](super::error_kind)).
    pub errors: BTreeMap<String, u64>,
    /// Every operation, when [`WorkloadSpec::record`](super::WorkloadSpec::record)
    /// asked for it.
    pub history: Vec<HistoryRecord>,
    /// [`WorkloadSpec::start_at`](super::WorkloadSpec::start_at), ns since
    /// the Unix epoch.
    pub start_at_unix_ns: Option<u64>,
    /// When measuring started, ns since the Unix epoch.
    pub started_unix_ns: u64,
}

impl WorkloadReport {
    /// Writes [`WorkloadReport::history`] to `path`, one
    /// [`HistoryRecord::to_line`] per line (what `--history FILE` keeps, for
    /// a linearizability check across processes).
    pub fn write_history(&self, path: &std::path::Path) -> std::io::Result<()> {
        let text: String = self
            .history
            .iter()
            .map(|h| format!("{}\n", h.to_line()))
            .collect();
        std::fs::write(path, text)
    }
}

impl std::fmt::Display for WorkloadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ops: u64 = self.kinds.iter().map(|k| k.ops).sum();
        let secs = self.seconds.max(1e-9);
        let system = if self.system.is_empty() {
            "nessie"
        } else {
            &self.system
        };
        writeln!(
            f,
            "{system}: {ops} operations in {:.2} s: {:.0} ops/s, goodput {:.1} MB/s of values read",
            self.seconds,
            ops as f64 / secs,
            self.kinds[0].value_bytes as f64 / secs / 1e6
        )?;
        write_kinds(f, &self.kinds.each_ref().map(KindSummary::of))?;
        for (e, c) in &self.errors {
            writeln!(f, "errors: {c} x {e}")?;
        }
        let all = self.kinds.iter().fold(OpStats::default(), |mut a, k| {
            a += k.fabric;
            a
        });
        writeln!(
            f,
            "protocol events: {} migrations ({} recursive), {} recoveries, {} helps",
            all.migrations, all.deep_migrations, all.recoveries, all.helps
        )?;
        let per_op = |d: Duration| d.as_secs_f64() * 1e6 / (ops.max(1) as f64);
        write!(
            f,
            "CPU: client threads {:.3} s ({:.2} us/op)",
            self.client_cpu.as_secs_f64(),
            per_op(self.client_cpu),
        )?;
        if system != "nessie" {
            write!(
                f,
                ", server workers of this node {:.3} s ({:.2} us/op, {} requests served)",
                self.server_cpu.as_secs_f64(),
                per_op(self.server_cpu),
                self.server_requests
            )?;
        }
        writeln!(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_counts_misses_apart_and_names_failures() {
        let mut r = WorkloadReport {
            system: "pilaf".into(),
            seconds: 2.0,
            ..WorkloadReport::default()
        };
        r.kinds[0] = KindReport {
            ops: 10,
            failures: 1,
            misses: 3,
            value_bytes: 4_000_000,
            latencies: Latencies::of([1_000; 10]),
            ..KindReport::default()
        };
        r.errors.insert("unreachable node2".into(), 1);
        let text = r.to_string();
        assert!(
            text.starts_with("pilaf: 10 operations in 2.00 s: 5 ops/s, goodput 2.0 MB/s"),
            "{text}"
        );
        assert!(
            text.contains("GETs: 6 returned a value, 3 found no value, 1 failed"),
            "{text}"
        );
        assert!(text.contains("errors: 1 x unreachable node2"), "{text}");
        assert!(
            !text.contains("\nPUT"),
            "kinds without operations are left out: {text}"
        );
    }
}
