//! `nessie run`: a mixed workload on a simulated cluster, with per-operation
//! fabric accounting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use nessie_fabric_sim::{LatencyModel, SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::pipeline::{Pipeline, Request, Response};
use nessie_protocol::{Client, ClientId, Config, Error, Fabric, NodeId, OpStats};

use crate::bench::workload::key_of;

/// Options of `nessie run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 3)]
    nodes: u16,
    /// Client threads per node.
    #[arg(long, default_value_t = 2)]
    clients: u16,
    /// Distinct keys (preloaded before the run).
    #[arg(long, default_value_t = 10_000)]
    keys: u32,
    /// Key size in bytes.
    #[arg(long, default_value_t = 32)]
    key_size: u32,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    value_size: u32,
    /// Percent of GETs (the rest are PUTs, minus DELETEs).
    #[arg(long, default_value_t = 90)]
    get_pct: u32,
    /// Percent of DELETEs (deleted keys are re-inserted by later PUTs).
    #[arg(long, default_value_t = 0)]
    delete_pct: u32,
    /// Seconds to run after the preload.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Index load factor after the preload (sizes the index tables).
    #[arg(long, default_value_t = 0.4)]
    load_factor: f64,
    /// Recursive MIGRATE depth before a PUT reports the index table full.
    #[arg(long, default_value_t = 6)]
    migrate_depth: u8,
    /// How a PUT searches for a chain of MIGRATEs when its candidates are
    /// all taken.
    #[arg(long, value_enum, default_value = "breadth-first")]
    migrate_search: crate::inserts::SearchArg,
    /// Simulated per-operation fabric latency in microseconds (0: none).
    #[arg(long, default_value_t = 0.0)]
    latency_us: f64,
    /// Operations each client thread keeps in flight (a pipeline of this
    /// depth; each in-flight operation runs as its own protocol client).
    #[arg(long, default_value_t = 1)]
    depth: u16,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// What went wrong before the run could start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A bad command-line value.
    #[error("invalid argument: {0}")]
    Arg(String),
    /// The store refused the configuration or an operation failed for good.
    #[error(transparent)]
    Store(#[from] Error),
    /// The simulator refused its configuration.
    #[error("simulator: {0}")]
    Sim(String),
}

#[derive(Clone, Default)]
struct KindStats {
    ops: u64,
    fabric: OpStats,
    latencies_ns: Vec<u64>,
    failures: u64,
    /// Value bytes returned by GETs that found their key.
    value_bytes: u64,
}

impl KindStats {
    fn add(&mut self, stats: OpStats, latency: Duration, ok: bool) {
        self.ops += 1;
        self.fabric += stats;
        self.latencies_ns.push(latency.as_nanos() as u64);
        if !ok {
            self.failures += 1;
        }
    }

    fn merge(&mut self, o: KindStats) {
        self.ops += o.ops;
        self.fabric += o.fabric;
        self.latencies_ns.extend(o.latencies_ns);
        self.failures += o.failures;
        self.value_bytes += o.value_bytes;
    }
}

fn check(args: &RunArgs) -> Result<Config, RunError> {
    if args.get_pct + args.delete_pct > 100 {
        return Err(RunError::Arg(
            "--get-pct plus --delete-pct exceeds 100".into(),
        ));
    }
    if !(args.load_factor > 0.0 && args.load_factor <= 0.95) {
        return Err(RunError::Arg("--load-factor must be in (0, 0.95]".into()));
    }
    if args.depth == 0 || u32::from(args.clients) * u32::from(args.depth) > u32::from(u16::MAX) {
        return Err(RunError::Arg(
            "--depth must be at least 1 (and clients x depth fit in 16 bits)".into(),
        ));
    }
    if args.keys == 0 || args.clients == 0 || args.seconds <= 0.0 || args.key_size < 8 {
        return Err(RunError::Arg(
            "--keys, --clients and --seconds must be positive, --key-size at least 8".into(),
        ));
    }
    let cfg = crate::sizing::store_config(&crate::sizing::Shape {
        nodes: args.nodes,
        clients: args.clients * args.depth.max(1),
        keys: u64::from(args.keys),
        key_size: args.key_size,
        value_size: args.value_size,
        load_factor: args.load_factor,
        migrate_depth: args.migrate_depth,
        expiration: Duration::from_millis(200),
    })
    .map_err(Error::from)?;
    Ok(Config {
        migrate_search: args.migrate_search.config(),
        ..cfg
    })
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Runs the workload and prints the report.
pub fn run(args: &RunArgs) -> Result<(), RunError> {
    let cfg = Arc::new(check(args)?);
    let latency = LatencyModel::per_op(Duration::from_nanos((args.latency_us * 1000.0) as u64));
    let sim = SimConfig::from_topology(cfg.topology()).with_latency(latency);
    let fabric = SimFabric::new(sim).map_err(|e| RunError::Sim(e.to_string()))?;
    let mut clients = Vec::new();
    for n in 0..cfg.nodes {
        for i in (0..cfg.clients_per_node).step_by(usize::from(args.depth.max(1))) {
            let ep = fabric.open(NodeId(n)).map_err(Error::from)?;
            clients.push(Client::new(
                cfg.clone(),
                ClientId {
                    node: NodeId(n),
                    index: i,
                },
                ep,
            )?);
        }
    }
    println!(
        "nessie run: {} nodes x {} clients on the simulated fabric, {} keys of {} B, values of {} B, {}% GET / {}% DELETE, index load {:.2}, N = {}",
        cfg.nodes, cfg.clients_per_node, args.keys, args.key_size, args.value_size, args.get_pct, args.delete_pct,
        args.load_factor, cfg.candidates
    );

    // Preload: every key once, spread over the clients.
    let t0 = Instant::now();
    let nclients = clients.len() as u64;
    let value = vec![b'v'; args.value_size as usize];
    clients = thread::scope(|s| {
        let handles: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(ci, mut c)| {
                let value = value.clone();
                s.spawn(move || -> Result<_, Error> {
                    let mut k = ci as u64;
                    while k < u64::from(args.keys) {
                        c.put(&key_of(k, args.key_size), &value)?;
                        k += nclients;
                    }
                    Ok(c)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("preload thread"))
            .collect::<Result<Vec<_>, _>>()
    })?;
    println!("preloaded {} keys in {:.2?}", args.keys, t0.elapsed());

    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(clients.len() + 1));
    let handles: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(ci, mut c)| {
            let (stop, barrier, args) = (stop.clone(), barrier.clone(), args.clone());
            let fabric = fabric.clone();
            thread::spawn(move || {
                let mut rng = args.seed ^ ((ci as u64 + 1) * 0x9e37_79b9_7f4a_7c15) | 1;
                let mut kinds = [
                    KindStats::default(),
                    KindStats::default(),
                    KindStats::default(),
                ];
                let mut n = 0u64;
                if args.depth > 1 {
                    let id = c.state().id;
                    let cfg = c.state().cfg.clone();
                    let ep = fabric.open(id.node).expect("node is up");
                    let mut p = Pipeline::new(cfg, id.node, id.index, args.depth, ep)
                        .expect("clients_per_node sized for the depth");
                    barrier.wait();
                    pipelined(&mut p, &args, ci, &mut rng, &stop, &mut kinds);
                    return kinds;
                }
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    let key = key_of(xorshift(&mut rng) % u64::from(args.keys), args.key_size);
                    let dice = (xorshift(&mut rng) % 100) as u32;
                    let t = Instant::now();
                    let (kind, ok) = if dice < args.get_pct {
                        let r = c.get(&key);
                        if let Ok(Some(v)) = &r {
                            kinds[0].value_bytes += v.len() as u64;
                        }
                        (0, r.is_ok())
                    } else if dice < args.get_pct + args.delete_pct {
                        (2, c.delete(&key).is_ok())
                    } else {
                        let mut v = vec![b'w'; args.value_size as usize];
                        let tag = format!("{ci}:{n}");
                        let len = tag.len().min(v.len());
                        v[..len].copy_from_slice(&tag.as_bytes()[..len]);
                        (1, c.put(&key, &v).is_ok())
                    };
                    kinds[kind].add(c.last_stats(), t.elapsed(), ok);
                    n += 1;
                }
                kinds
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    thread::sleep(Duration::from_secs_f64(args.seconds));
    stop.store(true, Ordering::Relaxed);
    let mut total = [
        KindStats::default(),
        KindStats::default(),
        KindStats::default(),
    ];
    for h in handles {
        for (t, k) in total.iter_mut().zip(h.join().expect("client thread")) {
            t.merge(k);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    report(&mut total, elapsed);
    Ok(())
}

/// The workload loop of one client thread with `--depth` above 1: twice the
/// depth submitted, results taken as they come.
fn pipelined(
    p: &mut Pipeline<SimEndpoint>,
    args: &RunArgs,
    ci: usize,
    rng: &mut u64,
    stop: &AtomicBool,
    kinds: &mut [KindStats; 3],
) {
    let mut started: HashMap<u64, (usize, Instant)> = HashMap::new();
    let mut done = Vec::new();
    let mut tag = 0u64;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        while !stopping && p.outstanding() < 2 * p.depth() {
            let key = key_of(xorshift(rng) % u64::from(args.keys), args.key_size);
            let dice = (xorshift(rng) % 100) as u32;
            let (kind, req) = if dice < args.get_pct {
                (0, Request::Get(key))
            } else if dice < args.get_pct + args.delete_pct {
                (2, Request::Delete(key))
            } else {
                let mut v = vec![b'w'; args.value_size as usize];
                let t = format!("{ci}:{tag}");
                let len = t.len().min(v.len());
                v[..len].copy_from_slice(&t.as_bytes()[..len]);
                (1, Request::Put(key, v))
            };
            started.insert(tag, (kind, Instant::now()));
            p.submit(tag, req);
            tag += 1;
        }
        if stopping && p.outstanding() == 0 {
            return;
        }
        p.progress(&mut done, Duration::from_millis(1));
        for f in done.drain(..) {
            let Some((kind, t)) = started.remove(&f.tag) else {
                continue;
            };
            if let Ok(Response::Get(Some(v))) = &f.result {
                kinds[0].value_bytes += v.len() as u64;
            }
            kinds[kind].add(f.stats, t.elapsed(), f.result.is_ok());
        }
    }
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn report(total: &mut [KindStats; 3], elapsed: f64) {
    let ops: u64 = total.iter().map(|k| k.ops).sum();
    println!(
        "\n{ops} operations in {elapsed:.2} s: {:.0} ops/s, goodput {:.1} MB/s of values read",
        ops as f64 / elapsed,
        total[0].value_bytes as f64 / elapsed / 1e6
    );
    println!(
        "\n{:<7} {:>9} {:>8} {:>8} {:>8} | per operation: {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>6} {:>7}",
        "op", "count", "p50 us", "p99 us", "p99.9", "idxRD", "dtaRD", "WRITE", "CAS", "local", "bytes", "RTs", "retries"
    );
    for (name, k) in ["GET", "PUT", "DELETE"].iter().zip(total.iter_mut()) {
        if k.ops == 0 {
            continue;
        }
        k.latencies_ns.sort_unstable();
        let n = k.ops as f64;
        let f = &k.fabric;
        println!(
            "{:<7} {:>9} {:>8.1} {:>8.1} {:>8.1} |                {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>9.0} {:>6.2} {:>7.3}",
            name,
            k.ops,
            pct(&k.latencies_ns, 0.5),
            pct(&k.latencies_ns, 0.99),
            pct(&k.latencies_ns, 0.999),
            f.index_reads as f64 / n,
            f.data_reads as f64 / n,
            f.writes as f64 / n,
            f.cas() as f64 / n,
            (f.local_reads + f.local_writes) as f64 / n,
            f.fabric_bytes as f64 / n,
            f.round_trips as f64 / n,
            (f.attempts as f64 - n) / n,
        );
    }
    let all = total.iter().fold(OpStats::default(), |mut a, k| {
        a += k.fabric;
        a
    });
    let failures: u64 = total.iter().map(|k| k.failures).sum();
    println!(
        "\nprotocol events: {} migrations ({} recursive), {} recoveries, {} helps, {} failed operations",
        all.migrations, all.deep_migrations, all.recoveries, all.helps, failures
    );
}
