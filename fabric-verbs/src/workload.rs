//! The mixed GET/PUT/DELETE workload `nessie-node run` drives, generic over
//! any [`Fabric`] (so it is tested on the simulator), with per-operation
//! fabric accounting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use nessie_protocol::{Client, ClientId, Config, Error, Fabric, NodeId, OpStats};

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
}

/// Counts of one operation kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindReport {
    /// Operations completed.
    pub ops: u64,
    /// Operations that returned an error.
    pub failures: u64,
    /// Fabric work summed.
    pub fabric: OpStats,
    /// Latencies in nanoseconds, sorted.
    pub latencies_ns: Vec<u64>,
}

impl KindReport {
    fn merge(&mut self, o: KindReport) {
        self.ops += o.ops;
        self.failures += o.failures;
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

/// The result: GET, PUT and DELETE reports and the measured time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadReport {
    /// GET, PUT, DELETE.
    pub kinds: [KindReport; 3],
    /// Seconds measured.
    pub seconds: f64,
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

/// Runs `spec` with `spec.clients` clients on `node` of `fabric`.
pub fn run<F: Fabric>(
    fabric: &F,
    node: NodeId,
    cfg: Arc<Config>,
    spec: &WorkloadSpec,
) -> Result<WorkloadReport, WorkloadError>
where
    F::Endpoint: 'static,
{
    check(spec, &cfg)?;
    let mut clients = Vec::new();
    for index in 0..spec.clients {
        let ep = fabric.open(node).map_err(Error::from)?;
        clients.push(Client::new(cfg.clone(), ClientId { node, index }, ep)?);
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
                let mut n = 0u64;
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    let key = key_of(xorshift(&mut rng) % u64::from(spec.keys), spec.key_size);
                    let dice = (xorshift(&mut rng) % 100) as u32;
                    let t = Instant::now();
                    let (kind, ok) = if dice < spec.get_pct {
                        (0, c.get(&key).is_ok())
                    } else if dice < spec.get_pct + spec.delete_pct {
                        (2, c.delete(&key).is_ok())
                    } else {
                        let mut v = vec![b'w'; spec.value_size as usize];
                        let tag = format!("{ci}:{n}");
                        let len = tag.len().min(v.len());
                        v[..len].copy_from_slice(&tag.as_bytes()[..len]);
                        (1, c.put(&key, &v).is_ok())
                    };
                    let k = &mut kinds[kind];
                    k.ops += 1;
                    k.failures += u64::from(!ok);
                    k.fabric += c.last_stats();
                    k.latencies_ns.push(t.elapsed().as_nanos() as u64);
                    n += 1;
                }
                kinds
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    std::thread::sleep(spec.duration);
    stop.store(true, Ordering::Relaxed);
    let mut report = WorkloadReport::default();
    for h in handles {
        let kinds = h
            .join()
            .map_err(|_| WorkloadError::Arg("a client thread panicked".into()))?;
        for (t, k) in report.kinds.iter_mut().zip(kinds) {
            t.merge(k);
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    for k in &mut report.kinds {
        k.latencies_ns.sort_unstable();
    }
    Ok(report)
}

impl std::fmt::Display for WorkloadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ops: u64 = self.kinds.iter().map(|k| k.ops).sum();
        let secs = self.seconds.max(1e-9);
        writeln!(
            f,
            "{ops} operations in {:.2} s: {:.0} ops/s",
            self.seconds,
            ops as f64 / secs
        )?;
        writeln!(
            f,
            "{:<7} {:>9} {:>8} {:>8} {:>8} | per operation: {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>6} {:>7}",
            "op", "count", "p50 us", "p99 us", "failed", "idxRD", "dtaRD", "WRITE", "CAS", "local", "bytes", "RTs", "retries"
        )?;
        for (name, k) in ["GET", "PUT", "DELETE"].iter().zip(&self.kinds) {
            if k.ops == 0 {
                continue;
            }
            let n = k.ops as f64;
            let s = &k.fabric;
            writeln!(
                f,
                "{:<7} {:>9} {:>8.1} {:>8.1} {:>8} |                {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>9.0} {:>6.2} {:>7.3}",
                name,
                k.ops,
                k.quantile_us(0.5),
                k.quantile_us(0.99),
                k.failures,
                s.index_reads as f64 / n,
                s.data_reads as f64 / n,
                s.writes as f64 / n,
                s.cas() as f64 / n,
                (s.local_reads + s.local_writes) as f64 / n,
                s.fabric_bytes as f64 / n,
                s.round_trips as f64 / n,
                (s.attempts as f64 - n) / n,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_fabric_sim::{SimConfig, SimFabric};

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
        }
    }

    #[test]
    fn the_workload_runs_on_the_simulator_and_counts_fabric_work() {
        let cfg = Config {
            nodes: 2,
            index_slots_per_node: 1024,
            dtes_per_node: 2048,
            clients_per_node: 2,
            max_key_len: 16,
            max_value_len: 32,
            ..Config::default()
        };
        let f = SimFabric::new(SimConfig::from_topology(cfg.topology())).unwrap();
        let r = run(&f, NodeId(1), Arc::new(cfg), &spec()).unwrap();
        let gets = &r.kinds[0];
        assert!(gets.ops > 0 && r.kinds[1].ops > 0);
        assert_eq!(gets.failures, 0);
        assert!(
            gets.fabric.index_reads >= gets.ops,
            "every GET reads index entries"
        );
        let text = r.to_string();
        assert!(text.contains("ops/s") && text.contains("GET"), "{text}");
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
