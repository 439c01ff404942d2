//! `nessie-node`: one node of a Nessie deployment on RDMA.
//!
//! Starts node `--node` of the cluster file (registers its regions, listens
//! for connections, probes the NIC's atomic byte order) and then:
//! - `info`: prints what start-up found and exits;
//! - `serve`: keeps the node's memory registered and reachable until Ctrl-C,
//!   SIGTERM or end of standard input;
//! - `run`: runs the Nessie protocol as a client workload from this node
//!   against the whole cluster and prints throughput and per-operation
//!   fabric costs (then serves on with `--serve-after`).
//!
//! Exit codes: 0 success, 1 failure, 2 no usable RDMA device.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use nessie_fabric_verbs::workload::{self, WorkloadSpec};
use nessie_fabric_verbs::{VerbsError, VerbsFabric};
use nessie_protocol::NodeId;

/// One node of a Nessie deployment on RDMA (see docs/deploy.md).
#[derive(Parser, Debug)]
#[command(name = "nessie-node", version)]
struct Cli {
    /// The cluster description file (TOML).
    #[arg(long)]
    cluster: PathBuf,
    /// This node's id in the cluster file.
    #[arg(long)]
    node: u16,
    /// What to do once started.
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Print the device, atomic capability, byte order and regions, then exit.
    Info,
    /// Keep this node's memory registered and reachable until Ctrl-C or end of stdin.
    Serve(ServeArgs),
    /// Run a client workload from this node against the cluster.
    Run(RunArgs),
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// Do not stop at end of standard input (for nohup or systemd).
    #[arg(long)]
    ignore_stdin: bool,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Client threads (at most [store] clients_per_node).
    #[arg(long, default_value_t = 2)]
    clients: u16,
    /// Distinct keys.
    #[arg(long, default_value_t = 10_000)]
    keys: u32,
    /// Key size in bytes (8 to [store] max_key_len).
    #[arg(long, default_value_t = 32)]
    key_size: u32,
    /// Value size in bytes (at most [store] max_value_len).
    #[arg(long, default_value_t = 256)]
    value_size: u32,
    /// Percent of GETs (the rest are PUTs, minus DELETEs).
    #[arg(long, default_value_t = 90)]
    get_pct: u32,
    /// Percent of DELETEs.
    #[arg(long, default_value_t = 0)]
    delete_pct: u32,
    /// Seconds to measure after the preload.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Skip the preload (another node already stored the keys).
    #[arg(long)]
    no_preload: bool,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep serving after the report (other nodes may still read this node's data).
    #[arg(long)]
    serve_after: bool,
    /// With --serve-after: do not stop at end of standard input.
    #[arg(long)]
    ignore_stdin: bool,
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
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nessie-node: error: {e}");
            match e {
                NodeError::Verbs(v) if v.is_no_device() => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

fn run(cli: &Cli) -> Result<(), NodeError> {
    let node = NodeId(cli.node);
    let fabric = VerbsFabric::start_file(&cli.cluster, node)?;
    let cluster = fabric.cluster();
    if let Some(r) = fabric.report(node) {
        println!("{r}");
    }
    let addr = cluster.addr(node).map_err(VerbsError::from)?;
    println!(
        "{node} listening on {addr}, cluster of {} nodes (fingerprint {:#018x})",
        cluster.topology().nodes,
        cluster.fingerprint()
    );
    match &cli.cmd {
        Cmd::Info => Ok(()),
        Cmd::Serve(a) => {
            println!(
                "serving; Ctrl-C{} stops",
                if a.ignore_stdin {
                    ""
                } else {
                    " or end of input"
                }
            );
            wait_for_stop(a.ignore_stdin);
            println!("stopping");
            Ok(())
        }
        Cmd::Run(a) => {
            let cfg = Arc::new(cluster.protocol_config().map_err(VerbsError::from)?);
            let spec = WorkloadSpec {
                clients: a.clients,
                keys: a.keys,
                key_size: a.key_size,
                value_size: a.value_size,
                get_pct: a.get_pct,
                delete_pct: a.delete_pct,
                duration: Duration::from_secs_f64(a.seconds.max(0.0)),
                preload: !a.no_preload,
                seed: a.seed ^ u64::from(cli.node),
            };
            workload::check(&spec, &cfg)?;
            println!(
                "running {} clients on {node}: {} keys of {} B, values of {} B, {}% GET / {}% DELETE, {} s (connecting to every node first)",
                a.clients, a.keys, a.key_size, a.value_size, a.get_pct, a.delete_pct, a.seconds
            );
            let report = workload::run(&fabric, node, cfg, &spec)?;
            println!("\n{report}");
            if a.serve_after {
                println!(
                    "serving; Ctrl-C{} stops",
                    if a.ignore_stdin {
                        ""
                    } else {
                        " or end of input"
                    }
                );
                wait_for_stop(a.ignore_stdin);
            }
            Ok(())
        }
    }
}
