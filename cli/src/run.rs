//! `nessie run`: a mixed workload on a simulated Nessie cluster, with
//! per-operation fabric accounting: the workload driver of every command
//! ([`nessie_workload`]) over Nessie clients (or pipelines of them, with
//! `--depth`) on the simulated fabric.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use nessie_fabric_sim::{LatencyModel, SimConfig, SimFabric};
use nessie_protocol::pipeline::Pipeline;
use nessie_protocol::{Client, ClientId, Config, Error, Fabric, NodeId};

use nessie_systems::sizing::Footprint;
use nessie_workload::{self as workload, Blocking, MixArgs, Pipelined, Worker, WorkloadError};

/// Options of `nessie run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 3)]
    nodes: u16,
    /// The mix.
    #[command(flatten)]
    mix: MixArgs,
    /// Seconds to run after the preload.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Index load factor after the preload (sizes the index tables).
    #[arg(long, default_value_t = 0.4)]
    load_factor: f64,
    /// Recursive MIGRATE depth before a PUT reports the index table full.
    #[arg(long, default_value_t = 6)]
    migrate_depth: u8,
    /// Cuckoo candidates (buckets) per key (default: the protocol's, 3).
    #[arg(long)]
    candidates: Option<u8>,
    /// Index entries per candidate bucket (default 1; 4 with `--candidates
    /// 2` fills the index past 0.95). The index tables are rounded up to
    /// whole buckets.
    #[arg(long)]
    bucket_slots: Option<u8>,
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
    /// Size classes: a ladder of data tables of entry sizes from 64 B up by
    /// a quarter, each provisioned for its share of `--value-mix`,
    /// instead of every entry sized for `--value-size` (docs/protocol.md
    /// §2.3).
    #[arg(long)]
    size_classes: bool,
    /// Half of each node's client threads (at least one) are clients
    /// without storage: they write their shares through memory windows
    /// their node's agent binds (docs/protocol.md §2.4). Not with
    /// `--depth` above 1.
    #[arg(long)]
    pure_clients: bool,
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
    /// The workload was refused or failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
}

fn check(args: &RunArgs) -> Result<Config, RunError> {
    if args.mix.get_pct + args.mix.delete_pct > 100 {
        return Err(RunError::Arg(
            "--get-pct plus --delete-pct exceeds 100".into(),
        ));
    }
    if !(args.load_factor > 0.0 && args.load_factor <= 0.95) {
        return Err(RunError::Arg("--load-factor must be in (0, 0.95]".into()));
    }
    if args.depth == 0 || u32::from(args.mix.clients) * u32::from(args.depth) > u32::from(u16::MAX)
    {
        return Err(RunError::Arg(
            "--depth must be at least 1 (and clients x depth fit in 16 bits)".into(),
        ));
    }
    if args.mix.keys == 0 || args.mix.clients == 0 || args.seconds <= 0.0 || args.mix.key_size < 8 {
        return Err(RunError::Arg(
            "--keys, --clients and --seconds must be positive, --key-size at least 8".into(),
        ));
    }
    let cfg = nessie_systems::sizing::store_config(&nessie_systems::sizing::Shape {
        nodes: args.nodes,
        clients: args.mix.clients * args.depth.max(1),
        keys: u64::from(args.mix.keys),
        key_size: args.mix.key_size,
        value_size: args.mix.value_size,
        value_mix: args.mix.value_mix,
        size_classes: args.size_classes,
        load_factor: args.load_factor,
        migrate_depth: args.migrate_depth,
        expiration: Duration::from_millis(200),
    })
    .map_err(Error::from)?;
    if args.pure_clients && args.depth > 1 {
        return Err(RunError::Arg(
            "--pure-clients runs blocking clients: not with --depth above 1".into(),
        ));
    }
    let pure = if args.pure_clients {
        (cfg.clients_per_node / 2).max(1)
    } else {
        0
    };
    let candidates = args.candidates.unwrap_or(cfg.candidates);
    let bucket_slots = args.bucket_slots.unwrap_or(cfg.bucket_slots);
    let cfg = Config {
        clients_per_node: cfg.clients_per_node - pure,
        pure_clients_per_node: pure,
        migrate_search: args.migrate_search.config(),
        candidates,
        bucket_slots,
        index_slots_per_node: cfg
            .index_slots_per_node
            .next_multiple_of(u32::from(bucket_slots.max(1))),
        ..cfg
    };
    cfg.validate().map_err(Error::from)?;
    Ok(cfg)
}

/// Runs the workload and prints the report.
pub fn run(args: &RunArgs) -> Result<(), RunError> {
    let cfg = Arc::new(check(args)?);
    let latency = LatencyModel::per_op(Duration::from_nanos((args.latency_us * 1000.0) as u64));
    let sim = SimConfig::from_topology(cfg.topology()).with_latency(latency);
    let fabric = SimFabric::new(sim).map_err(|e| RunError::Sim(e.to_string()))?;
    let m = &args.mix;
    let spec = m.spec(Duration::from_secs_f64(args.seconds));
    workload::check(&spec, &*cfg)?;
    println!(
        "nessie run: {} nodes x {} client threads ({} in flight each{}) on the simulated fabric, {} keys of {} B, {}, {}, index load {:.2}, N = {}, B = {}, {}",
        cfg.nodes, m.clients, args.depth,
        match cfg.pure_clients_per_node {
            0 => String::new(),
            p => format!("; {p} per node without storage"),
        },
        m.keys, m.key_size,
        match m.value_mix {
            nessie_workload::ValueMix::Fixed => format!("values of {} B", m.value_size),
            mix => format!("{mix} values up to {} B", m.value_size),
        },
        m.describe(),
        args.load_factor, cfg.candidates, cfg.bucket_slots,
        match cfg.size_classes.len() {
            0 => format!("one size class ({} B entries)", cfg.layout().entry_bytes()),
            n => format!("{} size classes ({} to {} B entries)", n + 1, cfg.size_classes[0].entry_bytes, cfg.layout().entry_bytes()),
        }
    );
    // Each client thread is a Nessie client, or a pipeline of `depth` of
    // them (client ids `t x depth ..`); both preload their share of the keys
    // and run the mix through the one workload driver.
    let threads = || {
        (0..cfg.nodes).flat_map(|n| {
            (0..m.clients).map(move |t| ClientId {
                node: NodeId(n),
                index: t * args.depth,
            })
        })
    };
    let report = if args.depth > 1 {
        let mut workers = Vec::new();
        for id in threads() {
            let ep = fabric.open(id.node).map_err(Error::from)?;
            let p = Pipeline::new(cfg.clone(), id.node, id.index, args.depth, ep)?;
            workers.push(Worker {
                id,
                issuer: Pipelined::new(p),
            });
        }
        workload::run_workers("nessie", workers, &spec, &[])?
    } else {
        // Each node's agent serves its clients without storage (none
        // without them).
        let _agents: Vec<_> = (0..cfg.nodes)
            .filter(|_| cfg.pure_clients_per_node > 0)
            .map(|n| {
                let ep = fabric.open(NodeId(n)).map_err(Error::from)?;
                Ok(nessie_systems::AgentThread::start(
                    cfg.clone(),
                    ep,
                    nessie_systems::AGENT_PERIOD,
                ))
            })
            .collect::<Result<_, RunError>>()?;
        let mut workers = Vec::new();
        for id in threads() {
            let ep = fabric.open(id.node).map_err(Error::from)?;
            workers.push(Worker {
                id,
                issuer: Blocking::new(Box::new(Client::new(cfg.clone(), id, ep)?)),
            });
        }
        workload::run_workers("nessie", workers, &spec, &[])?
    };
    println!("\n{report}");
    let footprint = Footprint::measure(&cfg, |node, region, offset, len| {
        fabric.read_bytes(node, region, offset, len).ok()
    });
    println!("memory: {footprint}");
    Ok(())
}
