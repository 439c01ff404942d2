//! `nessie node` (feature `verbs`): one node of a Nessie deployment on RDMA.
//!
//! `nessie node --cluster FILE --node N <command>` starts node `N` of the
//! cluster file (registers its regions, listens
//! for connections, probes the NIC's atomic byte order) and then:
//! - `info`: prints what start-up found and exits;
//! - `serve`: keeps the node's memory registered and reachable (and, for a
//!   server-driven system, its server workers running) until Ctrl-C,
//!   SIGTERM or end of standard input;
//! - `run`: runs a client workload from this node against the whole cluster
//!   and prints throughput, per-operation fabric costs and CPU time (then
//!   serves on with `--serve-after`); `--start-at` makes every node start
//!   measuring at one wall-clock instant, `--report FILE` writes the
//!   node's results as JSON;
//! - `report FILE...`: merges the nodes' JSON results into one cluster
//!   report (needs no cluster file and no device).
//!
//! The workload is the one every command drives ([`crate::workload`]),
//! through the system's clients ([`crate::node::system::run_system`]).
//!
//! `serve` and `run` take `--system nessie|nessie-sd|nessie-hy|pilaf`
//! (default `nessie`): every node of a deployment must be started with the
//! same system (nodes with different ones refuse each other's connections).
//!
//! Exit codes: 0 success, 1 failure, 2 no usable RDMA device.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use nessie_baselines::server::ServerPool;
use nessie_baselines::{HyOptions, SystemConfig, SystemKind};
use nessie_fabric_verbs::{ClusterError, ClusterFile, VerbsError, VerbsFabric};
use nessie_protocol::NodeId;

use super::cluster::{deployment, system_config};
use super::report::{ClusterReport, ReportError, RunReport};
use super::system::{self, SystemError};
use crate::workload::{self, MixArgs, WorkloadSpec};

/// Options of `nessie node`: which node of which cluster, and what to do.
#[derive(Args, Debug)]
pub struct NodeArgs {
    /// The cluster description file (TOML; not needed by `report`).
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// This node's id in the cluster file (not needed by `report`).
    #[arg(long)]
    node: Option<u16>,
    /// What to do once started.
    #[command(subcommand)]
    cmd: Cmd,
}

/// Runs `nessie node`; exit codes: 0 success, 1 failure, 2 no usable RDMA
/// device.
pub fn node(args: &NodeArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nessie node: error: {e}");
            match e {
                NodeError::Verbs(v) if v.is_no_device() => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Print the device, atomic capability, byte order and regions, then exit.
    Info,
    /// Keep this node's memory registered and reachable (and its server workers
    /// running, for nessie-sd, nessie-hy and pilaf) until Ctrl-C or end of stdin.
    Serve(ServeArgs),
    /// Run a client workload from this node against the cluster (this node's
    /// server workers run too, for nessie-sd, nessie-hy and pilaf).
    Run(RunArgs),
    /// Merge the JSON results that `run --report` wrote on each node into
    /// one cluster report.
    Report(ReportArgs),
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// The nodes' `--report` files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Warn when the nodes started measuring further apart than this, in
    /// milliseconds.
    #[arg(long, default_value_t = 10)]
    max_spread_ms: u64,
}

/// Which system the node runs (the same on every node).
#[derive(Args, Debug, Clone)]
struct SystemArgs {
    /// The system: nessie, nessie-sd, nessie-hy or pilaf (the same on every node).
    #[arg(long, default_value = "nessie")]
    system: SystemKind,
    /// Server worker threads on this node (server-driven systems).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    server_workers: u16,
    /// NessieHY: filter bits in index entries (changes the layout: all nodes alike).
    #[arg(long)]
    hy_filter_bits: bool,
    /// NessieHY: cache remote data table entries in the clients.
    #[arg(long)]
    hy_cache: bool,
    /// NessieHY: read header and key first, the value only on a match.
    #[arg(long)]
    hy_multiple_reads: bool,
}

impl Default for SystemArgs {
    fn default() -> Self {
        SystemArgs {
            system: SystemKind::Nessie,
            server_workers: 1,
            hy_filter_bits: false,
            hy_cache: false,
            hy_multiple_reads: false,
        }
    }
}

impl SystemArgs {
    /// The system shaped by `cluster`; NessieHY's switches only with nessie-hy.
    fn config(&self, cluster: &ClusterFile) -> Result<SystemConfig, NodeError> {
        let hy = HyOptions {
            filter_bits: self.hy_filter_bits,
            cache: self.hy_cache,
            multiple_reads: self.hy_multiple_reads,
        };
        if hy != HyOptions::default() && self.system != SystemKind::NessieHy {
            return Err(NodeError::Arg(format!(
                "--hy-filter-bits, --hy-cache and --hy-multiple-reads apply to --system nessie-hy, not {}",
                self.system
            )));
        }
        Ok(system_config(
            cluster,
            self.system,
            self.server_workers,
            hy,
        )?)
    }
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    system: SystemArgs,
    /// Do not stop at end of standard input (for nohup or systemd).
    #[arg(long)]
    ignore_stdin: bool,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    system: SystemArgs,
    /// The mix.
    #[command(flatten)]
    mix: MixArgs,
    /// Seconds to measure after the preload.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Skip the preload (another node already stored the keys).
    #[arg(long)]
    no_preload: bool,
    /// Stop each client after this many operations (0: run for --seconds).
    #[arg(long, default_value_t = 0)]
    ops: u64,
    /// Pause of each client between operations, in microseconds.
    #[arg(long, default_value_t = 0)]
    think_us: u64,
    /// Write every operation of the measured phase to this file, one line
    /// each (client, CLOCK_MONOTONIC invoke and response, key, operation,
    /// value, result), for a linearizability check across nodes.
    #[arg(long)]
    history: Option<PathBuf>,
    /// Keep serving after the report (other nodes may still read this node's data).
    #[arg(long)]
    serve_after: bool,
    /// With --serve-after: do not stop at end of standard input.
    #[arg(long)]
    ignore_stdin: bool,
    /// Start measuring at this wall-clock instant, in seconds since the Unix
    /// epoch (e.g. `$(( $(date +%s) + 30 ))`), the same on every node: a
    /// start barrier across nodes (their clocks agree within `clock_skew`).
    /// Fails if the node is ready more than 100 ms after it.
    #[arg(long)]
    start_at: Option<f64>,
    /// Write this node's results as JSON to this file (merge the nodes'
    /// files with `nessie node report`).
    #[arg(long)]
    report: Option<PathBuf>,
}

/// The furthest ahead `--start-at` may be.
const START_AT_HORIZON: Duration = Duration::from_secs(3600);

/// The instant `--start-at` names, checked to be a sane future-ish time.
fn start_instant(secs: f64) -> Result<SystemTime, NodeError> {
    if !(secs.is_finite() && secs > 0.0) {
        return Err(NodeError::Arg(format!(
            "--start-at {secs}: seconds since the Unix epoch"
        )));
    }
    let at = UNIX_EPOCH + Duration::from_secs_f64(secs);
    if at.duration_since(SystemTime::now()).unwrap_or_default() > START_AT_HORIZON {
        return Err(NodeError::Arg(format!(
            "--start-at {secs} is more than an hour ahead of this node's clock"
        )));
    }
    Ok(at)
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Blocks until SIGINT/SIGTERM or (unless `ignore_stdin`) end of stdin.
fn wait_for_stop(ignore_stdin: bool) {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    if !ignore_stdin {
        std::thread::spawn(|| {
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            STOP.store(true, Ordering::Relaxed);
        });
    }
    while !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[derive(Debug, thiserror::Error)]
enum NodeError {
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    #[error(transparent)]
    System(#[from] SystemError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("invalid options: {0}")]
    Arg(String),
}

impl From<ClusterError> for NodeError {
    fn from(e: ClusterError) -> Self {
        NodeError::Verbs(VerbsError::Cluster(e))
    }
}

/// Prints what this node's server workers did (CPU time, requests, errors).
fn print_servers(servers: &Option<ServerPool>) {
    if let Some(p) = servers {
        let errors = p.errors();
        println!(
            "server workers of this node: {:.3} s CPU, {} requests served, {} errors",
            p.cpu_time().as_secs_f64(),
            p.requests(),
            errors.len()
        );
        for e in errors.iter().take(5) {
            println!("  server error: {e}");
        }
    }
}

/// Waits for Ctrl-C, SIGTERM or (unless `ignore_stdin`) end of input.
fn serve_until_stopped(ignore_stdin: bool) {
    println!(
        "serving; Ctrl-C{} stops",
        if ignore_stdin { "" } else { " or end of input" }
    );
    wait_for_stop(ignore_stdin);
}

fn run(cli: &NodeArgs) -> Result<(), NodeError> {
    let args = match &cli.cmd {
        Cmd::Info => SystemArgs::default(),
        Cmd::Serve(a) => a.system.clone(),
        Cmd::Run(a) => a.system.clone(),
        Cmd::Report(r) => {
            let reports = r
                .files
                .iter()
                .map(|f| RunReport::read(f))
                .collect::<Result<Vec<_>, _>>()?;
            let merged = ClusterReport::merge(reports)?.with_max_spread_us(r.max_spread_ms * 1000);
            print!("{merged}");
            return Ok(());
        }
    };
    let (Some(cluster_file), Some(node)) = (&cli.cluster, cli.node) else {
        return Err(NodeError::Arg(
            "--cluster FILE and --node N are required".into(),
        ));
    };
    let node = NodeId(node);
    let file = ClusterFile::load(cluster_file)?;
    let sys = args.config(&file)?;
    // Check the workload options before anything dials the other nodes.
    let spec = match &cli.cmd {
        Cmd::Run(a) => {
            let spec = WorkloadSpec {
                preload: !a.no_preload,
                max_ops: a.ops,
                think: Duration::from_micros(a.think_us),
                record: a.history.is_some(),
                start_at: a.start_at.map(start_instant).transpose()?,
                ..a.mix.spec(Duration::from_secs_f64(a.seconds.max(0.0)))
            };
            workload::check(&spec, &sys.store)?;
            Some(spec)
        }
        _ => None,
    };
    // The regions are sized for the system; its tag joins the fingerprint.
    let fabric = VerbsFabric::start(deployment(file, &sys)?, &[node])?;
    let cluster = fabric.cluster();
    if let Some(r) = fabric.report(node) {
        println!("{r}");
    }
    let addr = cluster.addr(node).map_err(VerbsError::from)?;
    println!(
        "{node} listening on {addr}, cluster of {} nodes running {} (fingerprint {:#018x})",
        cluster.topology().nodes,
        cluster.system_tag().unwrap_or("nessie"),
        cluster.fingerprint()
    );
    if matches!(cli.cmd, Cmd::Info) {
        return Ok(());
    }
    let servers = system::start_node_servers(&sys, &fabric, node)?;
    if servers.is_some() {
        println!(
            "{} server worker(s) of {} running on {node}",
            sys.server_workers, sys.kind
        );
    }
    match (&cli.cmd, spec) {
        (Cmd::Run(a), Some(spec)) => {
            println!(
                "running {} clients of {} on {node}: {} keys of {} B, values of {} B, {}% GET / {}% DELETE, {} s (connecting to every node first)",
                a.mix.clients, sys.kind, a.mix.keys, a.mix.key_size, a.mix.value_size, a.mix.get_pct, a.mix.delete_pct, a.seconds
            );
            let mine: Vec<&ServerPool> = servers.iter().collect();
            let report = system::run_system(&fabric, node, &sys, &spec, &mine)?;
            if let Some(path) = &a.history {
                let mut text = String::new();
                for h in &report.history {
                    text.push_str(&h.to_line());
                    text.push('\n');
                }
                std::fs::write(path, text)
                    .map_err(|e| NodeError::Arg(format!("cannot write {}: {e}", path.display())))?;
            }
            println!("\n{report}");
            if let Some(at) = report.start_at_unix_ns {
                println!(
                    "started measuring {} us after --start-at",
                    report.started_unix_ns.saturating_sub(at) / 1000
                );
            }
            if let Some(path) = &a.report {
                RunReport::of(node.0, &report).write(path)?;
                println!("results written to {}", path.display());
            }
            println!("workload finished on {node}");
            if a.serve_after {
                serve_until_stopped(a.ignore_stdin);
            }
        }
        (Cmd::Serve(a), _) => {
            serve_until_stopped(a.ignore_stdin);
            println!("stopping");
        }
        _ => {}
    }
    print_servers(&servers);
    Ok(())
}
