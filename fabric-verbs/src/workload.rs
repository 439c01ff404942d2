//! The mixed GET/PUT/DELETE workload `nessie-node run` drives, generic over
//! any [`Fabric`] (so it is tested on the simulator) and over the compared
//! systems (its clients are [`KvClient`]s of a [`SystemConfig`]), with
//! per-operation fabric accounting (the client's operations and the server
//! workers' response WRITEs) and the CPU time of client threads and server
//! workers. GET misses are counted apart from GETs that found a value, and
//! failures by error kind. With [`WorkloadSpec::record`] every operation is
//! recorded ([`HistoryRecord`], stamped with `CLOCK_MONOTONIC`, which all
//! processes of a machine share), so that the histories of several node
//! processes can be merged and checked for linearizability.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nessie_baselines::cpu::thread_cpu_time;
use nessie_baselines::server::ServerPool;
use nessie_baselines::{KvClient, SystemConfig};
use nessie_protocol::{ClientId, Config, Error, Fabric, NodeId, OpStats};

use crate::clock::monotonic_ns;
use crate::system::{check_regions, SystemError};

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// Client threads on this node.
    pub clients: u16,
    /// Distinct keys.
    pub keys: u32,
    /// Key size in bytes (at least 8).
    pub key_size: u32,
    /// Value size in bytes.
    pub value_size: u32,
    /// Percent of GETs.
    pub get_pct: u32,
    /// Percent of DELETEs.
    pub delete_pct: u32,
    /// Duration of the measured phase.
    pub duration: Duration,
    /// PUT every key once before measuring.
    pub preload: bool,
    /// Seed of the generators.
    pub seed: u64,
    /// Most operations per client (0: as many as fit the duration).
    pub max_ops: u64,
    /// Pause of each client between two operations (zero: none).
    pub think: Duration,
    /// Record every operation of the measured phase ([`WorkloadReport::history`]).
    pub record: bool,
    /// The wall-clock instant at which to start measuring, the same on every
    /// node of a run (their clocks agree within the cluster's `clock_skew`,
    /// checked when they connect): a start barrier across nodes that needs
    /// no messages. The run fails if the instant passed more than
    /// [`START_LATE_LIMIT`] before this node was ready (its preload or
    /// connections took longer: choose a later instant).
    pub start_at: Option<SystemTime>,
}

/// How late a node may be ready for [`WorkloadSpec::start_at`] and still run.
pub const START_LATE_LIMIT: Duration = Duration::from_millis(100);

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// What a recorded operation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryOp {
    /// GET.
    Get,
    /// PUT of a value.
    Put(Vec<u8>),
    /// DELETE.
    Delete,
}

/// What a recorded operation returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryRet {
    /// A GET's value (`None`: not found).
    Get(Option<Vec<u8>>),
    /// A PUT's or DELETE's "the key existed".
    Existed(bool),
    /// It failed, with the error's kind ([`error_kind`]).
    Failed(String),
}

/// One recorded operation: which client (node x 1000 + index), the key,
/// the operation, its result, and when it was invoked and returned
/// (`CLOCK_MONOTONIC` ns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRecord {
    /// Node x 1000 + client index.
    pub client: u64,
    /// The key.
    pub key: Vec<u8>,
    /// The operation.
    pub op: HistoryOp,
    /// Its result.
    pub ret: HistoryRet,
    /// Invocation time.
    pub invoke: u64,
    /// Response time.
    pub response: u64,
}

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "=".into();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s == "=" {
        return Some(Vec::new());
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

impl HistoryRecord {
    /// One line of text: `client invoke response key op value result`
    /// (bytes in hex, `-` where there is none, error kinds with `_` for spaces).
    pub fn to_line(&self) -> String {
        let (op, value) = match &self.op {
            HistoryOp::Get => ("get", "-".to_string()),
            HistoryOp::Put(v) => ("put", hex(v)),
            HistoryOp::Delete => ("delete", "-".to_string()),
        };
        let ret = match &self.ret {
            HistoryRet::Get(Some(v)) => format!("value:{}", hex(v)),
            HistoryRet::Get(None) => "missing".into(),
            HistoryRet::Existed(e) => format!("existed:{e}"),
            HistoryRet::Failed(k) => format!("failed:{}", k.replace(' ', "_")),
        };
        format!(
            "{} {} {} {} {op} {value} {ret}",
            self.client,
            self.invoke,
            self.response,
            hex(&self.key)
        )
    }

    /// Parses [`HistoryRecord::to_line`]'s output.
    pub fn parse_line(line: &str) -> Option<HistoryRecord> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 7 {
            return None;
        }
        let op = match (f[4], f[5]) {
            ("get", _) => HistoryOp::Get,
            ("put", v) => HistoryOp::Put(unhex(v)?),
            ("delete", _) => HistoryOp::Delete,
            _ => return None,
        };
        let ret = if let Some(v) = f[6].strip_prefix("value:") {
            HistoryRet::Get(Some(unhex(v)?))
        } else if f[6] == "missing" {
            HistoryRet::Get(None)
        } else if let Some(e) = f[6].strip_prefix("existed:") {
            HistoryRet::Existed(e.parse().ok()?)
        } else {
            HistoryRet::Failed(f[6].strip_prefix("failed:")?.replace('_', " "))
        };
        Some(HistoryRecord {
            client: f[0].parse().ok()?,
            invoke: f[1].parse().ok()?,
            response: f[2].parse().ok()?,
            key: unhex(f[3])?,
            op,
            ret,
        })
    }
}

/// The kind of an error as reports and histories name it: the variant, and
/// the node for an unreachable one (`unreachable node2`).
pub fn error_kind(e: &Error) -> String {
    match e {
        Error::Unreachable(n) => format!("unreachable {n}"),
        Error::OutcomeUnknown(_) => "outcome unknown".into(),
        Error::Timeout => "timeout".into(),
        Error::Conflict => "conflict".into(),
        Error::Fabric(f) => {
            let s = f.to_string();
            let s = s.split(':').take(2).collect::<Vec<_>>().join(":");
            format!("fabric {}", s.chars().take(60).collect::<String>())
        }
        other => {
            let d = format!("{other:?}");
            d.split(['(', ' ', '{'])
                .next()
                .unwrap_or("error")
                .to_string()
        }
    }
}

/// Why the workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A bad option.
    #[error("invalid workload: {0}")]
    Arg(String),
    /// The store failed for good (opening a client, preloading).
    #[error(transparent)]
    Store(#[from] Error),
    /// The fabric does not fit the system.
    #[error(transparent)]
    System(#[from] SystemError),
}

/// Counts of one operation kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindReport {
    /// Operations completed.
    pub ops: u64,
    /// Operations that returned an error.
    pub failures: u64,
    /// GETs that found no value (not counted as failures, but not as GETs
    /// that returned a value either).
    pub misses: u64,
    /// Fabric work summed.
    pub fabric: OpStats,
    /// Latencies in nanoseconds, sorted.
    pub latencies_ns: Vec<u64>,
}

impl KindReport {
    fn merge(&mut self, o: KindReport) {
        self.ops += o.ops;
        self.failures += o.failures;
        self.misses += o.misses;
        self.fabric += o.fabric;
        self.latencies_ns.extend(o.latencies_ns);
    }

    /// The `p` quantile of the latencies in microseconds.
    pub fn quantile_us(&self, p: f64) -> f64 {
        if self.latencies_ns.is_empty() {
            return 0.0;
        }
        let i = ((self.latencies_ns.len() as f64 - 1.0) * p).round() as usize;
        self.latencies_ns[i] as f64 / 1000.0
    }
}

/// The result: GET, PUT and DELETE reports, the measured time and the CPU
/// time spent on it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadReport {
    /// The system run (its command-line name).
    pub system: String,
    /// GET, PUT, DELETE.
    pub kinds: [KindReport; 3],
    /// Seconds measured.
    pub seconds: f64,
    /// CPU time of the client threads during the measured phase.
    pub client_cpu: Duration,
    /// CPU time of the server workers given to [`run`] during the measured
    /// phase (zero for Nessie, which has none).
    pub server_cpu: Duration,
    /// Requests those server workers served during the measured phase.
    pub server_requests: u64,
    /// Failures by error kind ([`error_kind`]).
    pub errors: BTreeMap<String, u64>,
    /// Every operation, when [`WorkloadSpec::record`] asked for it.
    pub history: Vec<HistoryRecord>,
    /// [`WorkloadSpec::start_at`], ns since the Unix epoch.
    pub start_at_unix_ns: Option<u64>,
    /// When measuring started, ns since the Unix epoch.
    pub started_unix_ns: u64,
}

/// The key of number `i`, padded to `size` bytes.
pub fn key_of(i: u64, size: u32) -> Vec<u8> {
    let mut k = format!("key-{i:012}").into_bytes();
    k.resize(size as usize, b'.');
    k
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Checks `spec` against the cluster's protocol configuration.
pub fn check(spec: &WorkloadSpec, cfg: &Config) -> Result<(), WorkloadError> {
    let bad = |m: String| Err(WorkloadError::Arg(m));
    if spec.clients == 0 || spec.clients > cfg.clients_per_node {
        return bad(format!(
            "--clients must be 1..={} ([store] clients_per_node)",
            cfg.clients_per_node
        ));
    }
    if spec.keys == 0 || spec.duration.is_zero() {
        return bad("--keys and --seconds must be positive".into());
    }
    if spec.key_size < 8 || spec.key_size > cfg.max_key_len {
        return bad(format!(
            "--key-size must be 8..={} ([store] max_key_len)",
            cfg.max_key_len
        ));
    }
    if spec.value_size > cfg.max_value_len {
        return bad(format!(
            "--value-size must be at most {} ([store] max_value_len)",
            cfg.max_value_len
        ));
    }
    if spec.get_pct + spec.delete_pct > 100 {
        return bad("--get-pct plus --delete-pct exceeds 100".into());
    }
    Ok(())
}

/// Runs `spec` with `spec.clients` clients of `sys` on `node` of `fabric`
/// (client ids `node.0` to `node.(clients-1)`).
///
/// The server-driven systems need their server workers running on every
/// node holding keys (started with [`crate::system::start_node_servers`], in
/// this process or another); `servers` are those of this process, whose CPU
/// time and requests during the measured phase enter the report.
pub fn run<F: Fabric>(
    fabric: &F,
    node: NodeId,
    sys: &SystemConfig,
    spec: &WorkloadSpec,
    servers: &[&ServerPool],
) -> Result<WorkloadReport, WorkloadError>
where
    F::Endpoint: 'static,
{
    check(spec, &sys.store)?;
    check_regions(sys, fabric.topology())?;
    let mut clients: Vec<Box<dyn KvClient>> = Vec::new();
    for index in 0..spec.clients {
        clients.push(sys.client(fabric, ClientId { node, index })?);
    }
    if spec.preload {
        let n = u64::from(spec.clients);
        let value = vec![b'v'; spec.value_size as usize];
        clients = std::thread::scope(|s| {
            let hs: Vec<_> = clients
                .into_iter()
                .enumerate()
                .map(|(ci, mut c)| {
                    let value = value.clone();
                    s.spawn(move || -> Result<_, Error> {
                        let mut k = ci as u64;
                        while k < u64::from(spec.keys) {
                            c.put(&key_of(k, spec.key_size), &value)?;
                            k += n;
                        }
                        Ok(c)
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(Error::Timeout)))
                .collect::<Result<Vec<_>, _>>()
        })?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(clients.len() + 1));
    let handles: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(ci, mut c)| {
            let (stop, barrier, spec) = (stop.clone(), barrier.clone(), spec.clone());
            std::thread::spawn(move || {
                let mut rng = spec.seed ^ ((ci as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
                let mut kinds: [KindReport; 3] = Default::default();
                let mut errors: BTreeMap<String, u64> = BTreeMap::new();
                let mut history = Vec::new();
                let client = u64::from(node.0) * 1000 + ci as u64;
                let mut n = 0u64;
                barrier.wait();
                let cpu = thread_cpu_time();
                while !stop.load(Ordering::Relaxed) && (spec.max_ops == 0 || n < spec.max_ops) {
                    let key = key_of(xorshift(&mut rng) % u64::from(spec.keys), spec.key_size);
                    let dice = (xorshift(&mut rng) % 100) as u32;
                    let t = Instant::now();
                    let invoke = monotonic_ns();
                    let (kind, op, ret) = if dice < spec.get_pct {
                        let r = c.get(&key);
                        if matches!(r, Ok(None)) {
                            kinds[0].misses += 1;
                        }
                        (0, HistoryOp::Get, r.map(HistoryRet::Get))
                    } else if dice < spec.get_pct + spec.delete_pct {
                        (
                            2,
                            HistoryOp::Delete,
                            c.delete(&key).map(HistoryRet::Existed),
                        )
                    } else {
                        let mut v = vec![b'w'; spec.value_size as usize];
                        let tag = format!("{}:{ci}:{n}", node.0);
                        let len = tag.len().min(v.len());
                        v[..len].copy_from_slice(&tag.as_bytes()[..len]);
                        let r = c.put(&key, &v).map(HistoryRet::Existed);
                        (1, HistoryOp::Put(v), r)
                    };
                    let response = monotonic_ns();
                    let k = &mut kinds[kind];
                    k.ops += 1;
                    k.fabric += c.last_stats();
                    k.latencies_ns.push(t.elapsed().as_nanos() as u64);
                    let ret = match ret {
                        Ok(r) => r,
                        Err(e) => {
                            k.failures += 1;
                            let kind = error_kind(&e);
                            *errors.entry(kind.clone()).or_default() += 1;
                            HistoryRet::Failed(kind)
                        }
                    };
                    if spec.record {
                        history.push(HistoryRecord {
                            client,
                            key,
                            op,
                            ret,
                            invoke,
                            response,
                        });
                    }
                    n += 1;
                    if !spec.think.is_zero() {
                        std::thread::sleep(spec.think);
                    }
                }
                (
                    kinds,
                    thread_cpu_time().saturating_sub(cpu),
                    errors,
                    history,
                )
            })
        })
        .collect();
    let server_cpu = || servers.iter().map(|p| p.cpu_time()).sum::<Duration>();
    let server_requests = || servers.iter().map(|p| p.requests()).sum::<u64>();
    if let Some(at) = spec.start_at {
        let now = SystemTime::now();
        match at.duration_since(now) {
            Ok(wait) => std::thread::sleep(wait),
            Err(late) if late.duration() > START_LATE_LIMIT => {
                stop.store(true, Ordering::Relaxed);
                barrier.wait();
                for h in handles {
                    let _ = h.join();
                }
                return Err(WorkloadError::Arg(format!(
                    "the start instant passed {:.3} s before this node was ready \
                     (connections and preload took longer): choose a later --start-at",
                    late.duration().as_secs_f64()
                )));
            }
            Err(_) => {}
        }
    }
    let (cpu0, req0) = (server_cpu(), server_requests());
    barrier.wait();
    let start = Instant::now();
    let started = SystemTime::now();
    while start.elapsed() < spec.duration && !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(5).min(spec.duration));
    }
    stop.store(true, Ordering::Relaxed);
    let mut report = WorkloadReport {
        system: sys.kind.to_string(),
        start_at_unix_ns: spec.start_at.map(unix_ns),
        started_unix_ns: unix_ns(started),
        ..WorkloadReport::default()
    };
    for h in handles {
        let (kinds, cpu, errors, history) = h
            .join()
            .map_err(|_| WorkloadError::Arg("a client thread panicked".into()))?;
        for (t, k) in report.kinds.iter_mut().zip(kinds) {
            t.merge(k);
        }
        report.client_cpu += cpu;
        for (e, c) in errors {
            *report.errors.entry(e).or_default() += c;
        }
        report.history.extend(history);
    }
    report.seconds = start.elapsed().as_secs_f64();
    report.server_cpu = server_cpu().saturating_sub(cpu0);
    report.server_requests = server_requests().saturating_sub(req0);
    for k in &mut report.kinds {
        k.latencies_ns.sort_unstable();
    }
    Ok(report)
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
            "{system}: {ops} operations in {:.2} s: {:.0} ops/s",
            self.seconds,
            ops as f64 / secs
        )?;
        writeln!(
            f,
            "{:<7} {:>9} {:>8} {:>8} {:>8} | per operation: {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>6} {:>7}",
            "op", "count", "p50 us", "p99 us", "failed", "idxRD", "dtaRD", "WRITE", "srvWR", "CAS", "local", "bytes", "RTs", "retries"
        )?;
        for (name, k) in ["GET", "PUT", "DELETE"].iter().zip(&self.kinds) {
            if k.ops == 0 {
                continue;
            }
            let n = k.ops as f64;
            let s = &k.fabric;
            writeln!(
                f,
                "{:<7} {:>9} {:>8.1} {:>8.1} {:>8} |                {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>9.0} {:>6.2} {:>7.3}",
                name,
                k.ops,
                k.quantile_us(0.5),
                k.quantile_us(0.99),
                k.failures,
                s.index_reads as f64 / n,
                s.data_reads as f64 / n,
                s.writes as f64 / n,
                s.server_writes as f64 / n,
                s.cas() as f64 / n,
                (s.local_reads + s.local_writes) as f64 / n,
                s.fabric_bytes as f64 / n,
                s.round_trips as f64 / n,
                (s.attempts as f64 - n) / n,
            )?;
        }
        let gets = &self.kinds[0];
        writeln!(
            f,
            "GETs: {} returned a value, {} found no value, {} failed",
            gets.ops - gets.misses - gets.failures,
            gets.misses,
            gets.failures
        )?;
        for (e, c) in &self.errors {
            writeln!(f, "errors: {c} x {e}")?;
        }
        let per_op = |d: Duration| d.as_secs_f64() * 1e6 / (ops.max(1) as f64);
        writeln!(
            f,
            "CPU: client threads {:.3} s ({:.2} us/op), server workers of this node {:.3} s ({:.2} us/op, {} requests served)",
            self.client_cpu.as_secs_f64(),
            per_op(self.client_cpu),
            self.server_cpu.as_secs_f64(),
            per_op(self.server_cpu),
            self.server_requests
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::start_node_servers;
    use nessie_baselines::SystemKind;
    use nessie_fabric_sim::{SimConfig, SimFabric};
    use nessie_protocol::Topology;

    fn spec() -> WorkloadSpec {
        WorkloadSpec {
            clients: 2,
            keys: 200,
            key_size: 16,
            value_size: 32,
            get_pct: 80,
            delete_pct: 5,
            duration: Duration::from_millis(200),
            preload: true,
            seed: 3,
            max_ops: 0,
            think: Duration::ZERO,
            record: false,
            start_at: None,
        }
    }

    fn store(nodes: u16) -> Config {
        Config {
            nodes,
            index_slots_per_node: 1024,
            dtes_per_node: 2048,
            clients_per_node: 2,
            max_key_len: 16,
            max_value_len: 32,
            // Replaced entries are reused after T: a short T keeps the
            // small tables from running out under a PUT-heavy test.
            expiration: Duration::from_millis(50),
            ..Config::default()
        }
    }

    /// `kind` on a simulated cluster of 3 nodes sized by its topology, with
    /// each node's server workers started as its own process would, and the
    /// workload run from node 1 (reporting node 1's servers).
    fn run_system(kind: SystemKind) -> (WorkloadReport, Vec<ServerPool>) {
        let sys = SystemConfig::new(kind, store(3));
        let f = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let mut pools = Vec::new();
        for n in 0..3 {
            pools.extend(start_node_servers(&sys, &f, NodeId(n)).unwrap());
        }
        assert_eq!(pools.len(), if kind.has_servers() { 3 } else { 0 });
        let mine: Vec<&ServerPool> = pools.iter().skip(1).take(1).collect();
        let r = run(&f, NodeId(1), &sys, &spec(), &mine).unwrap();
        (r, pools)
    }

    #[test]
    fn the_workload_runs_on_the_simulator_and_counts_fabric_work() {
        let (r, _) = run_system(SystemKind::Nessie);
        let gets = &r.kinds[0];
        assert!(gets.ops > 0 && r.kinds[1].ops > 0);
        assert_eq!(gets.failures, 0);
        assert!(
            gets.fabric.index_reads >= gets.ops,
            "every GET reads index entries"
        );
        assert!(r.kinds.iter().all(|k| k.fabric.server_writes == 0));
        assert_eq!((r.server_requests, r.server_cpu), (0, Duration::ZERO));
        assert!(r.client_cpu > Duration::ZERO);
        let text = r.to_string();
        assert!(
            text.contains("nessie: ") && text.contains("ops/s") && text.contains("GET"),
            "{text}"
        );
        assert!(
            text.contains("srvWR") && text.contains("CPU: client threads"),
            "{text}"
        );
    }

    /// Asserts what every server-driven run shares: no failures, work done,
    /// this node's servers busy, their errors none.
    fn served_cleanly(kind: SystemKind, r: &WorkloadReport, pools: &[ServerPool]) {
        for (name, k) in ["GET", "PUT", "DELETE"].iter().zip(&r.kinds) {
            assert_eq!(
                k.failures, 0,
                "{kind} {name}: {} of {} failed ({:?})",
                k.failures, k.ops, k.fabric
            );
        }
        assert!(r.kinds[0].ops > 0 && r.kinds[1].ops > 0, "{kind}: {r}");
        assert!(r.server_requests > 0, "{kind}: node 1's servers served");
        assert!(r.client_cpu > Duration::ZERO && r.server_cpu > Duration::ZERO);
        for p in pools {
            assert!(p.errors().is_empty(), "{kind}: {:?}", p.errors());
        }
        assert!(r.to_string().starts_with(kind.name()), "{r}");
    }

    #[test]
    fn nessie_sd_runs_with_per_node_servers_one_write_each_way() {
        let kind = SystemKind::NessieSd;
        let (r, pools) = run_system(kind);
        served_cleanly(kind, &r, &pools);
        for k in &r.kinds {
            let s = &k.fabric;
            // A remote key: 1 request WRITE + 1 response WRITE; a key of
            // node 1: CPU writes only. No READ, no CAS, ever.
            assert_eq!(s.writes, s.server_writes, "{kind}: {s:?}");
            assert!(
                s.writes <= k.ops && s.reads() == 0 && s.cas() == 0,
                "{kind}: {s:?}"
            );
        }
        // About two thirds of the keys live on nodes 0 and 2.
        let puts = &r.kinds[1];
        assert!(puts.fabric.writes * 3 >= puts.ops, "{:?}", puts.fabric);
    }

    #[test]
    fn nessie_hy_and_pilaf_read_by_rdma_and_write_through_servers() {
        for kind in [SystemKind::NessieHy, SystemKind::Pilaf] {
            let (r, pools) = run_system(kind);
            served_cleanly(kind, &r, &pools);
            let (gets, puts) = (&r.kinds[0].fabric, &r.kinds[1].fabric);
            assert_eq!(
                (gets.writes, gets.server_writes),
                (0, 0),
                "{kind}: {gets:?}"
            );
            assert!(gets.reads() > 0, "{kind}: client-driven GETs");
            assert_eq!(puts.writes, puts.server_writes, "{kind}: {puts:?}");
            assert!(
                puts.writes > 0 && puts.writes <= r.kinds[1].ops,
                "{kind}: {puts:?}"
            );
        }
    }

    #[test]
    fn the_workload_refuses_a_fabric_too_small_for_the_system() {
        let sys = SystemConfig::new(SystemKind::Pilaf, store(2));
        let need = sys.topology();
        let short = SimFabric::new(SimConfig::from_topology(Topology {
            data_bytes_per_node: need.data_bytes_per_node / 2,
            ..need
        }))
        .unwrap();
        let err = run(&short, NodeId(0), &sys, &spec(), &[]).unwrap_err();
        assert!(
            matches!(
                err,
                WorkloadError::System(SystemError::RegionsTooSmall { .. })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn nodes_given_one_start_instant_start_measuring_together_and_a_late_one_is_refused() {
        let sys = SystemConfig::new(SystemKind::Nessie, store(2));
        let f = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let at = SystemTime::now() + Duration::from_millis(300);
        let s = WorkloadSpec {
            start_at: Some(at),
            duration: Duration::from_millis(50),
            ..spec()
        };
        // Two "nodes" of one cluster, started 100 ms apart, given one instant.
        let (a, b) = std::thread::scope(|scope| {
            let a = scope.spawn(|| run(&f, NodeId(0), &sys, &s, &[]).unwrap());
            std::thread::sleep(Duration::from_millis(100));
            let b = scope.spawn(|| run(&f, NodeId(1), &sys, &s, &[]).unwrap());
            (a.join().unwrap(), b.join().unwrap())
        });
        let at_ns = unix_ns(at);
        for r in [&a, &b] {
            assert_eq!(r.start_at_unix_ns, Some(at_ns));
            assert!(r.started_unix_ns >= at_ns, "started before the instant");
            // Generous: test threads share this machine's cores.
            assert!(
                r.started_unix_ns - at_ns < 500_000_000,
                "started late: {r:?}"
            );
        }
        // A node ready after the instant refuses (on a fresh cluster: the
        // runs above used node 0's data table).
        let fresh = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let late = WorkloadSpec {
            start_at: Some(SystemTime::now() - Duration::from_secs(1)),
            preload: false,
            ..spec()
        };
        let e = run(&fresh, NodeId(0), &sys, &late, &[]).unwrap_err();
        assert!(e.to_string().contains("choose a later --start-at"), "{e}");
    }

    #[test]
    fn recorded_histories_round_trip_as_text_and_are_linearizable_on_the_simulator() {
        let sys = SystemConfig::new(SystemKind::Nessie, store(2));
        let f = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let s = WorkloadSpec {
            keys: 4,
            max_ops: 150,
            record: true,
            preload: false,
            duration: Duration::from_secs(20),
            ..spec()
        };
        let r = run(&f, NodeId(1), &sys, &s, &[]).unwrap();
        assert_eq!(r.history.len(), 300, "max_ops per client");
        assert!(r.kinds[0].misses > 0 || r.kinds[1].ops > 0);
        for h in &r.history {
            assert_eq!(HistoryRecord::parse_line(&h.to_line()).as_ref(), Some(h));
            assert!(h.invoke <= h.response);
            assert!(h.client == 1000 || h.client == 1001);
        }
        let failed = HistoryRecord {
            ret: HistoryRet::Failed("unreachable node2".into()),
            key: Vec::new(),
            ..r.history[0].clone()
        };
        assert_eq!(HistoryRecord::parse_line(&failed.to_line()), Some(failed));
        assert_eq!(
            error_kind(&Error::Unreachable(NodeId(2))),
            "unreachable node2"
        );
        assert_eq!(error_kind(&Error::Timeout), "timeout");
    }

    #[test]
    fn bad_specs_are_refused() {
        let cfg = Config {
            clients_per_node: 2,
            max_key_len: 16,
            max_value_len: 32,
            ..Config::default()
        };
        assert!(check(&spec(), &cfg).is_ok());
        for s in [
            WorkloadSpec {
                clients: 3,
                ..spec()
            },
            WorkloadSpec {
                clients: 0,
                ..spec()
            },
            WorkloadSpec {
                key_size: 17,
                ..spec()
            },
            WorkloadSpec {
                key_size: 4,
                ..spec()
            },
            WorkloadSpec {
                value_size: 33,
                ..spec()
            },
            WorkloadSpec {
                get_pct: 99,
                delete_pct: 2,
                ..spec()
            },
            WorkloadSpec { keys: 0, ..spec() },
        ] {
            assert!(
                matches!(check(&s, &cfg), Err(WorkloadError::Arg(_))),
                "{s:?}"
            );
        }
    }
}
