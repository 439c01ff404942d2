//! Reports: the serialisable result of every system at every point, and the
//! readable tables (with ratios against the first system).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::stats::{add_failures, KindReport, SysAcc};
use crate::system::Started;

/// One system's result at one point.
#[derive(Clone, Debug, Serialize)]
pub struct SystemResult {
    /// The variant's label.
    pub label: String,
    /// The system.
    pub system: String,
    /// Why it was not measured (its preload failed).
    pub error: Option<String>,
    /// Measured seconds (sum of its slices).
    pub seconds: f64,
    /// Operations issued.
    pub ops: u64,
    /// Operations per second.
    pub throughput: f64,
    /// Value bytes per second of successful GETs that found a value and PUTs.
    pub goodput_bytes_per_s: f64,
    /// Throughput divided by the first system's.
    pub ratio: Option<f64>,
    /// GETs.
    pub get: Option<KindReport>,
    /// PUTs.
    pub put: Option<KindReport>,
    /// Range scans.
    pub scan: Option<KindReport>,
    /// Share of meganode searches done by servers (Cell), in percent.
    pub server_share_pct: Option<f64>,
    /// Operations that needed more than one attempt.
    pub retried: u64,
    /// Failed operations by error kind.
    pub failures: BTreeMap<&'static str, u64>,
    /// Client cache hits per GET.
    pub cache_hit_rate: f64,
    /// CPU seconds of the client threads.
    pub client_cpu_s: f64,
    /// CPU seconds of the server workers.
    pub server_cpu_s: f64,
    /// Client plus server CPU microseconds per operation.
    pub cpu_us_per_op: f64,
    /// Client plus server CPU seconds per measured second (cores busy).
    pub cores_busy: f64,
    /// Requests the server workers served.
    pub server_requests: u64,
    /// Errors the server workers met.
    pub server_errors: Vec<String>,
    /// What Nessie's store held after the point (`None` for the other
    /// systems): keys, bytes stored, bytes of their entries, bytes reserved.
    pub memory: Option<MemoryUse>,
}

/// A store's memory per byte of keys and values it holds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct MemoryUse {
    /// Keys held.
    pub keys: u64,
    /// Bytes of their keys and values.
    pub stored_bytes: u64,
    /// Bytes of the data table entries holding them, per byte stored.
    pub entry_overhead: f64,
    /// Bytes of index and data regions reserved, per byte stored.
    pub reserved_overhead: f64,
}

impl SystemResult {
    /// The result of `sys` from `acc`; `value_bytes` (the mean value
    /// length) for the goodput.
    pub fn new(sys: &Started, acc: &SysAcc, value_bytes: f64) -> SystemResult {
        let secs = acc.wall.as_secs_f64();
        let ops = acc.get.ops + acc.put.ops + acc.scan.ops;
        let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let mut failures = acc.get.failures.clone();
        add_failures(&mut failures, &acc.put.failures);
        add_failures(&mut failures, &acc.scan.failures);
        let searches = acc.server_searches + acc.client_searches;
        let cpu = (acc.client_cpu + acc.server_cpu).as_secs_f64();
        SystemResult {
            label: sys.variant.label.clone(),
            system: sys.variant.system_name().to_string(),
            error: sys.failed.clone(),
            seconds: secs,
            ops,
            throughput: per_s(ops as f64),
            goodput_bytes_per_s: per_s((acc.get.found + acc.put.ok) as f64 * value_bytes),
            ratio: None,
            get: acc.get.report(),
            put: acc.put.report(),
            scan: acc.scan.report(),
            server_share_pct: (searches > 0)
                .then(|| 100.0 * acc.server_searches as f64 / searches as f64),
            retried: acc.get.retried + acc.put.retried + acc.scan.retried,
            failures,
            cache_hit_rate: acc.cache_hits as f64 / acc.get.ops.max(1) as f64,
            client_cpu_s: acc.client_cpu.as_secs_f64(),
            server_cpu_s: acc.server_cpu.as_secs_f64(),
            cpu_us_per_op: if ops > 0 { cpu * 1e6 / ops as f64 } else { 0.0 },
            cores_busy: per_s(cpu),
            server_requests: acc.server_requests,
            server_errors: sys.deployment.server_errors(),
            memory: sys.deployment.footprint().map(|f| MemoryUse {
                keys: f.keys,
                stored_bytes: f.stored,
                entry_overhead: f.entry_overhead(),
                reserved_overhead: f.reserved_overhead(),
            }),
        }
    }
}

/// The results of every system at one point of an experiment.
#[derive(Clone, Debug, Serialize)]
pub struct PointResult {
    /// What varies, e.g. `value=4096 get=50%`.
    pub label: String,
    /// The varying parameters.
    pub params: BTreeMap<String, f64>,
    /// One result per system, the reference first.
    pub systems: Vec<SystemResult>,
}

impl PointResult {
    /// Fills in the throughput ratios against the first measured system.
    pub fn with_ratios(mut self) -> PointResult {
        let base = self
            .systems
            .iter()
            .find(|s| s.error.is_none())
            .map(|s| s.throughput);
        for s in &mut self.systems {
            s.ratio = match base {
                Some(b) if b > 0.0 && s.error.is_none() => Some(s.throughput / b),
                _ => None,
            };
        }
        self
    }
}

fn kops(x: f64) -> String {
    format!("{:.1}", x / 1000.0)
}

fn opt<T>(
    k: &Option<KindReport>,
    f: impl Fn(&KindReport) -> T,
    fmt: impl Fn(T) -> String,
) -> String {
    k.as_ref().map_or_else(|| "-".into(), |r| fmt(f(r)))
}

/// The compact table of one point: throughput, ratio, latency, fabric work, CPU.
pub fn compact(p: &PointResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "-- {}", p.label);
    // Columns only ordered stores have: scans, and Cell's server-side share.
    let scans = p.systems.iter().any(|r| r.scan.is_some());
    let share = p.systems.iter().any(|r| r.server_share_pct.is_some());
    let memory = p.systems.iter().any(|r| r.memory.is_some());
    let _ = write!(
        s,
        "{:<18} {:>8} {:>6} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>7} {:>6}",
        "system",
        "kops/s",
        "ratio",
        "MB/s",
        "GET p50",
        "GET p99",
        "PUT p50",
        "ops/GET",
        "ops/PUT",
        "CPU us/op",
        "cores",
        "fail"
    );
    if scans {
        let _ = write!(s, " {:>9} {:>9}", "SCAN p50", "SCAN p99");
    }
    if share {
        let _ = write!(s, " {:>7}", "srv %");
    }
    if memory {
        let _ = write!(s, " {:>9} {:>9}", "entry B/B", "rsvd B/B");
    }
    let _ = writeln!(s);
    for r in &p.systems {
        if let Some(e) = &r.error {
            let _ = writeln!(s, "{:<18} not measured: {e}", r.label);
            continue;
        }
        let fails: u64 = r.failures.values().sum();
        let _ = write!(
            s,
            "{:<18} {:>8} {:>6} {:>8.1} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8.2} {:>7.2} {:>6}",
            r.label,
            kops(r.throughput),
            r.ratio.map_or("-".into(), |x| format!("{x:.2}")),
            r.goodput_bytes_per_s / 1e6,
            opt(&r.get, |k| k.latency_us.p50, |x| format!("{x:.1}")),
            opt(&r.get, |k| k.latency_us.p99, |x| format!("{x:.1}")),
            opt(&r.put, |k| k.latency_us.p50, |x| format!("{x:.1}")),
            opt(&r.get, |k| k.mean.fabric_ops, |x| format!("{x:.2}")),
            opt(&r.put, |k| k.mean.fabric_ops, |x| format!("{x:.2}")),
            r.cpu_us_per_op,
            r.cores_busy,
            fails
        );
        if scans {
            let _ = write!(
                s,
                " {:>9} {:>9}",
                opt(&r.scan, |k| k.latency_us.p50, |x| format!("{x:.1}")),
                opt(&r.scan, |k| k.latency_us.p99, |x| format!("{x:.1}"))
            );
        }
        if share {
            let _ = write!(
                s,
                " {:>7}",
                r.server_share_pct.map_or("-".into(), |x| format!("{x:.0}"))
            );
        }
        if memory {
            let (e, r) = r.memory.map_or(("-".into(), "-".into()), |m| {
                (
                    format!("{:.2}", m.entry_overhead),
                    format!("{:.1}", m.reserved_overhead),
                )
            });
            let _ = write!(s, " {e:>9} {r:>9}");
        }
        let _ = writeln!(s);
    }
    s
}

fn hist_line(h: &[f64]) -> String {
    let last = h.iter().rposition(|&f| f > 0.0005).unwrap_or(0);
    h[..=last]
        .iter()
        .enumerate()
        .map(|(i, f)| {
            format!(
                "{i}{}:{:.0}%",
                if i + 1 == h.len() { "+" } else { "" },
                f * 100.0
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The detailed tables of one point: latency percentiles, fabric work per
/// GET and per PUT with their distributions, retries, failures, cache, CPU.
pub fn detailed(p: &PointResult) -> String {
    let mut s = compact(p);
    let _ = writeln!(
        s,
        "\n{:<18} {:<4} {:>9} {:>8} {:>8} {:>8} | per op: {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>5} {:>7}",
        "system", "op", "count", "p50 us", "p99 us", "p99.9", "idxRD", "dtaRD", "WRITE", "srvWR", "CAS", "cpuRD", "cpuWR", "bytes", "RTs", "retry%"
    );
    for r in p.systems.iter().filter(|r| r.error.is_none()) {
        for (name, k) in [("GET", &r.get), ("PUT", &r.put), ("SCAN", &r.scan)] {
            let Some(k) = k else { continue };
            let m = &k.mean;
            let _ = writeln!(
                s,
                "{:<18} {:<4} {:>9} {:>8.1} {:>8.1} {:>8.1} |         {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>9.0} {:>5.2} {:>7.3}",
                r.label, name, k.ops, k.latency_us.p50, k.latency_us.p99, k.latency_us.p999,
                m.index_reads, m.data_reads, m.writes, m.server_writes, m.index_cas + m.data_cas,
                m.local_reads, m.local_writes, m.fabric_bytes, m.round_trips,
                100.0 * k.retried as f64 / k.ops.max(1) as f64
            );
        }
    }
    let _ = writeln!(
        s,
        "\nRDMA operations per operation (share of operations with 0, 1, 2, ... of each):"
    );
    for r in p.systems.iter().filter(|r| r.error.is_none()) {
        for (name, k) in [("GET", &r.get), ("PUT", &r.put), ("SCAN", &r.scan)] {
            let Some(k) = k else { continue };
            let _ = writeln!(
                s,
                "{:<18} {:<4} READ {} | WRITE {} | CAS {}",
                r.label,
                name,
                hist_line(&k.reads_hist),
                hist_line(&k.writes_hist),
                hist_line(&k.cas_hist)
            );
        }
    }
    let _ = writeln!(
        s,
        "\n{:<18} {:>10} {:>10} {:>10} {:>9} {:>10}  failures",
        "system", "client CPU", "server CPU", "server req", "cache hit", "retried"
    );
    for r in p.systems.iter().filter(|r| r.error.is_none()) {
        let fails = if r.failures.is_empty() {
            "none".to_string()
        } else {
            r.failures
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            s,
            "{:<18} {:>9.3}s {:>9.3}s {:>10} {:>8.1}% {:>10}  {fails}",
            r.label,
            r.client_cpu_s,
            r.server_cpu_s,
            r.server_requests,
            100.0 * r.cache_hit_rate,
            r.retried
        );
        for e in &r.server_errors {
            let _ = writeln!(s, "{:<18} server error: {e}", r.label);
        }
    }
    s
}
