//! `nessie pipeline`: what many operations in flight per client thread buy.
//!
//! One client thread on node 0 of a simulated cluster with a fixed fabric
//! latency drives a mixed GET/PUT workload through a
//! [`Pipeline`](nessie_protocol::pipeline::Pipeline) of each depth in turn
//! (the depths interleaved over several rounds, so that all of them see the
//! same machine), and reports operations per second and the ratio to depth 1.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use nessie_fabric_sim::{LatencyModel, SimConfig, SimFabric};
use nessie_protocol::pipeline::Pipeline;
use nessie_protocol::Request;
use nessie_protocol::{Client, ClientId, Config, CorruptionKind, Error, Fabric, NodeId};
use serde::Serialize;

/// Options of `nessie pipeline`.
#[derive(Args, Debug, Clone)]
pub struct PipelineArgs {
    /// Pipeline depths to compare, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub depths: Vec<u16>,
    /// Simulated fabric latency per operation, in microseconds.
    #[arg(long, default_value_t = 50.0)]
    pub latency_us: f64,
    /// Seconds per depth per round.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Rounds (each runs every depth once, in turn).
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// Keys (preloaded).
    #[arg(long, default_value_t = 1000)]
    pub keys: u32,
    /// Percentage of GETs (the rest are PUTs of existing keys).
    #[arg(long, default_value_t = 50)]
    pub get_pct: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One depth's figures.
#[derive(Debug, Clone, Serialize)]
pub struct DepthFigures {
    /// Operations in flight at most.
    pub depth: u16,
    /// Operations completed over all rounds.
    pub ops: u64,
    /// Operations that failed.
    pub errors: u64,
    /// Operations per second (all rounds).
    pub ops_per_sec: f64,
    /// Ratio to the first depth listed.
    pub ratio: f64,
}

fn key(i: u64) -> Vec<u8> {
    format!("key-{i:08}").into_bytes()
}

/// Runs the comparison.
pub fn compare(args: &PipelineArgs) -> Result<Vec<DepthFigures>, Error> {
    let max_depth = args.depths.iter().copied().max().unwrap_or(1).max(1);
    let cfg = Arc::new(Config {
        clients_per_node: max_depth,
        dtes_per_node: u32::from(max_depth) * 8192,
        max_key_len: 16,
        max_value_len: 64,
        index_slots_per_node: args.keys.max(64) * 2,
        ..Config::default()
    });
    let latency = LatencyModel::per_op(Duration::from_nanos((args.latency_us * 1000.0) as u64));
    let sim = SimConfig::from_topology(cfg.topology()).with_latency(latency);
    let fabric =
        SimFabric::new(sim).map_err(|e| Error::corrupt(CorruptionKind::Setup, e.to_string()))?;
    let id = ClientId {
        node: NodeId(1),
        index: 0,
    };
    let mut loader = Client::new(cfg.clone(), id, fabric.open(NodeId(1))?)?;
    for k in 0..u64::from(args.keys) {
        loader.put(&key(k), b"initial")?;
    }
    let mut figures: Vec<DepthFigures> = args
        .depths
        .iter()
        .map(|&depth| DepthFigures {
            depth,
            ops: 0,
            errors: 0,
            ops_per_sec: 0.0,
            ratio: 0.0,
        })
        .collect();
    let mut elapsed = vec![Duration::ZERO; figures.len()];
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let budget = Duration::from_secs_f64(args.seconds);
    for _ in 0..args.rounds {
        for (f, e) in figures.iter_mut().zip(elapsed.iter_mut()) {
            let ep = fabric.open(NodeId(0))?;
            let mut p = Pipeline::new(cfg.clone(), NodeId(0), 0, f.depth.max(1), ep)?;
            let mut done = Vec::new();
            let t0 = Instant::now();
            let mut tag = 0u64;
            while t0.elapsed() < budget {
                while p.outstanding() < 2 * p.depth() {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let k = key(rng % u64::from(args.keys.max(1)));
                    let req = if (rng >> 32) % 100 < u64::from(args.get_pct) {
                        Request::Get(k)
                    } else {
                        Request::Put(k, b"updated".to_vec())
                    };
                    p.submit(tag, req);
                    tag += 1;
                }
                p.progress(&mut done, Duration::from_millis(1));
                for d in done.drain(..) {
                    f.ops += 1;
                    f.errors += u64::from(d.result.is_err());
                }
            }
            while p.outstanding() > 0 {
                p.progress(&mut done, Duration::from_millis(1));
                for d in done.drain(..) {
                    f.ops += 1;
                    f.errors += u64::from(d.result.is_err());
                }
            }
            *e += t0.elapsed();
        }
    }
    for (f, e) in figures.iter_mut().zip(&elapsed) {
        f.ops_per_sec = f.ops as f64 / e.as_secs_f64().max(1e-9);
    }
    let base = figures.first().map(|f| f.ops_per_sec).unwrap_or(1.0);
    for f in &mut figures {
        f.ratio = f.ops_per_sec / base.max(1e-9);
    }
    Ok(figures)
}

/// Runs the comparison and prints it.
pub fn pipeline(args: &PipelineArgs) -> Result<(), Error> {
    let figures = compare(args)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&figures)
                .map_err(|e| Error::corrupt(CorruptionKind::Bug, e.to_string()))?
        );
        return Ok(());
    }
    println!(
        "one client thread, {} us per fabric operation, {} % GET, {} keys, {} x {:.1} s per depth (interleaved)",
        args.latency_us, args.get_pct, args.keys, args.rounds, args.seconds
    );
    println!(
        "{:>6} {:>10} {:>8} {:>12} {:>10}",
        "depth", "ops", "errors", "ops/s", "ratio"
    );
    for f in &figures {
        println!(
            "{:>6} {:>10} {:>8} {:>12.0} {:>9.2}x",
            f.depth, f.ops, f.errors, f.ops_per_sec, f.ratio
        );
    }
    Ok(())
}
