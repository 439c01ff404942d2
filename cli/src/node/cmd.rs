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
//! The workload is the one every command drives ([`nessie_workload`]),
//! through the system's clients (`nessie_systems::NodeSetup::run`).
//!
//! `serve` and `run` take `--system nessie|nessie-sd|nessie-hy|pilaf|cell`
//! (default `nessie`): every node of a deployment must be started with the
//! same system (nodes with different ones refuse each other's connections).
//! With `cell`, every node is a Cell server, node 0 holds the region
//! directory and bootstraps the tree, and `run` may add range scans
//! (`--scan-pct`, `--scan-len`).
//!
//! Exit codes: 0 success, 1 failure, 2 no usable RDMA device.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use nessie_baselines::HyOptions;
use nessie_fabric_verbs::{ClusterError, ClusterFile, VerbsError, VerbsFabric};
use nessie_protocol::NodeId;

use super::cluster::deployment;
use super::metrics;
use super::report::{ClusterReport, ReportError, RunReport};
use nessie_systems::{CellShape, NodeServers, NodeSetup, SystemError, SystemKind};
use nessie_workload::{self as workload, Announcer, MixArgs, StartAt, WorkloadSpec};

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
                NodeError::WithoutStorage(super::without_storage::WithoutStorageError::Verbs(
                    v,
                )) if v.is_no_device() => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Print the device, atomic capability, byte order and regions, the
    /// operator's checklist (type of service, MTU, descriptors and queue
    /// pairs, clocks, data table sizing), then exit.
    Info(InfoArgs),
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

/// What `info` checks the data table's sizing against.
#[derive(Args, Debug, Default)]
struct InfoArgs {
    /// The PUT rate this node's clients are expected to sustain, per
    /// second: `info` warns when the data table cannot hold it with the
    /// expiration period (docs/deploy.md).
    #[arg(long, default_value_t = 0.0)]
    put_rate: f64,
    /// The keys stored in the whole cluster (their current values hold
    /// entries too).
    #[arg(long, default_value_t = 0)]
    keys: u64,
}

/// The share of a cluster-wide PUT load above which `info` warns: past
/// it, a burst or a slow sweep exhausts a client's entries.
const SIZING_HEADROOM: f64 = 0.8;

/// `info`'s data table sizing lines for Nessie's `cfg`: what each client
/// sustains, and a warning when `args.put_rate` exceeds the headroom.
fn sizing_lines(cfg: &nessie_protocol::Config, args: &InfoArgs) -> Vec<String> {
    let clients = u64::from(cfg.clients_per_node);
    let live = args.keys / (u64::from(cfg.nodes) * clients).max(1);
    let per_client = cfg.sustained_puts_per_client(live);
    let per_node = per_client * clients as f64;
    let mut out = vec![format!(
        "data table sizing: {} entries per client, each reusable {} ms after a PUT replaces it (expiration + skew): with {live} live keys per client a client sustains {per_client:.0} PUTs/s, this node {per_node:.0}",
        cfg.dtes_per_client(),
        cfg.reuse_after().as_millis()
    )];
    if args.put_rate > SIZING_HEADROOM * per_node {
        out.push(format!(
            "WARNING: an expected {:.0} PUTs/s on this node is more than {:.0} % of what its data table sustains: PUTs will fail with DataTableFull; raise [regions] data_bytes_per_node (or lower expiration_ms)",
            args.put_rate,
            SIZING_HEADROOM * 100.0
        ));
    }
    if !cfg.size_classes.is_empty() {
        // Each class is a table of its own: the figures above are the main
        // class's, and each smaller class takes the writes its keys and
        // values fit.
        let clients = u32::from(cfg.clients_per_node.max(1));
        let classes: Vec<String> = cfg
            .data_tables()
            .classes()
            .map(|(c, class)| {
                let per = class.dtes_per_node / clients;
                format!(
                    "class {c} ({} B entries): {per} per client, {:.0} PUTs/s landing in it per client with no live key there",
                    class.entry_bytes,
                    f64::from(per) / cfg.reuse_after().as_secs_f64().max(1e-9)
                )
            })
            .collect();
        out.push(format!(
            "size classes (the figures above are class 0's): {}",
            classes.join("; ")
        ));
    }
    out
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
    /// The system: nessie, nessie-sd, nessie-hy, pilaf or cell (the same on every node).
    #[arg(long, default_value = "nessie")]
    system: SystemKind,
    /// Server worker threads on this node (server-driven systems and cell).
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
    /// Cell: nodes of a meganode (sizes the regions: all nodes alike).
    #[arg(long, default_value_t = CellShape::default().meganode_nodes)]
    cell_meganode_nodes: u32,
    /// Cell: meganodes (region slots) each node can hold (all nodes alike).
    #[arg(long, default_value_t = CellShape::default().regions_per_node)]
    cell_regions: u32,
}

impl Default for SystemArgs {
    fn default() -> Self {
        SystemArgs {
            system: SystemKind::Nessie,
            server_workers: 1,
            hy_filter_bits: false,
            hy_cache: false,
            hy_multiple_reads: false,
            cell_meganode_nodes: CellShape::default().meganode_nodes,
            cell_regions: CellShape::default().regions_per_node,
        }
    }
}

impl SystemArgs {
    /// The system shaped by `cluster`; NessieHY's switches only with
    /// nessie-hy, Cell's only with cell.
    fn config(&self, cluster: &ClusterFile) -> Result<NodeSetup, NodeError> {
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
        let shape = CellShape {
            meganode_nodes: self.cell_meganode_nodes,
            regions_per_node: self.cell_regions,
            server_workers: self.server_workers,
        };
        let default = CellShape::default();
        if self.system != SystemKind::Cell
            && (shape.meganode_nodes, shape.regions_per_node)
                != (default.meganode_nodes, default.regions_per_node)
        {
            return Err(NodeError::Arg(format!(
                "--cell-meganode-nodes and --cell-regions apply to --system cell, not {}",
                self.system
            )));
        }
        Ok(NodeSetup::new(
            self.system,
            cluster.protocol_config()?,
            self.server_workers,
            hy,
            shape,
        )?)
    }
}

/// Where the node serves its metrics.
#[derive(Args, Debug, Clone, Default)]
struct MetricsArgs {
    /// Serve this node's metrics in the Prometheus text format on this
    /// address (e.g. `0.0.0.0:9464`; any path answers): operations,
    /// latencies, unknown outcomes, retries, queue pairs failed, re-dials,
    /// watchdog trips, device events, clock offsets, NIC and flow-control
    /// counters, server requests (docs/deploy.md, "Metrics").
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    system: SystemArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
    /// Do not stop at end of standard input (for nohup or systemd).
    #[arg(long)]
    ignore_stdin: bool,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    system: SystemArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
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
    /// Percent of range scans (cell only; taken from the PUTs' share).
    #[arg(long, default_value_t = 0)]
    scan_pct: u32,
    /// Entries each range scan asks for, from a uniformly drawn key on.
    #[arg(long, default_value_t = 10)]
    scan_len: u32,
    /// Write every operation of the preload and the measured phase to this
    /// file, one line each (client, CLOCK_MONOTONIC invoke and response, key, operation,
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
    /// Fails if the node is ready more than 100 ms after it. `-`: once
    /// ready, print `ready: waiting for the start instant` and read the
    /// instant from the first line of standard input (give every node the
    /// same one once all are ready).
    #[arg(long)]
    start_at: Option<StartArg>,
    /// Write this node's results as JSON to this file (merge the nodes'
    /// files with `nessie node report`).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Host no node: run the workload through clients without storage
    /// whose shares `--node` holds (the cluster file's `[store]
    /// pure_clients_per_node`), from a process that registers no region,
    /// dialling the cluster from this address (this host's IP on the RDMA
    /// interface and an `rdma_cm` port free there, e.g. `192.0.2.9:20900`).
    #[arg(long, value_name = "ADDR")]
    without_storage: Option<std::net::SocketAddr>,
}

/// `--start-at`: an instant, or `-` (announced on standard input).
#[derive(Clone, Copy, Debug, PartialEq)]
enum StartArg {
    /// Seconds since the Unix epoch.
    At(f64),
    /// The first line of standard input, read once the node is ready.
    Stdin,
}

impl FromStr for StartArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "-" {
            return Ok(StartArg::Stdin);
        }
        s.trim().parse().map(StartArg::At).map_err(|_| {
            format!(
                "`{s}`: seconds since the Unix epoch, or - (read from standard input when ready)"
            )
        })
    }
}

impl StartArg {
    /// The start of the measured phase this argument asks for.
    fn start(self) -> Result<StartAt, NodeError> {
        match self {
            StartArg::At(secs) => Ok(StartAt::Instant(start_instant(secs)?)),
            StartArg::Stdin => Ok(StartAt::Announced(Announcer::new(|| {
                println!("ready: waiting for the start instant (seconds since the Unix epoch) on standard input");
                let _ = std::io::Write::flush(&mut std::io::stdout());
                let mut line = String::new();
                match std::io::stdin().read_line(&mut line) {
                    Ok(0) => return Err("standard input closed".into()),
                    Ok(_) => {}
                    Err(e) => return Err(format!("standard input: {e}").into()),
                }
                let secs: f64 = line.trim().parse().map_err(|_| {
                    format!("`{}` is not seconds since the Unix epoch", line.trim())
                })?;
                Ok(start_instant(secs)?)
            }))),
        }
    }
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

/// Blocks until SIGINT/SIGTERM, (unless `ignore_stdin`) end of stdin, or
/// `fatal` names a reason the node cannot go on (returned).
fn wait_for_stop(ignore_stdin: bool, fatal: &dyn Fn() -> Option<String>) -> Option<String> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(signal, stop.clone()) {
            eprintln!("nessie node: cannot watch signal {signal}: {e}");
        }
    }
    if !ignore_stdin {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            stop.store(true, Ordering::Relaxed);
        });
    }
    while !stop.load(Ordering::Relaxed) {
        if let Some(why) = fatal() {
            return Some(why);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
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
    /// A run without storage (`--without-storage`) failed.
    #[error("--without-storage: {0}")]
    WithoutStorage(#[from] super::without_storage::WithoutStorageError),
    /// The device failed as a whole while the node served.
    #[error("{0}: stopping")]
    DeviceFailed(String),
    /// The metrics endpoint could not be set up (the address is taken, ...).
    #[error("the metrics endpoint: {0}")]
    Metrics(#[from] metrics_exporter_prometheus::BuildError),
}

impl From<ClusterError> for NodeError {
    fn from(e: ClusterError) -> Self {
        NodeError::Verbs(VerbsError::Cluster(e))
    }
}

/// Prints what this node's server threads did (CPU time, requests, errors).
fn print_servers(servers: &NodeServers) {
    if let Some(c) = servers.cell() {
        println!("{}", nessie_systems::cell_tree_line(c));
    }
    let Some(s) = servers.summary() else {
        return;
    };
    println!(
        "server workers of this node: {:.3} s CPU, {} requests served, {} errors",
        s.cpu.as_secs_f64(),
        s.requests,
        s.errors.len()
    );
    for e in s.errors.iter().take(5) {
        println!("  server error: {e}");
    }
}

/// Waits for Ctrl-C, SIGTERM or (unless `ignore_stdin`) end of input; an
/// error if node `node`'s device fails as a whole meanwhile (the process
/// exits non-zero, for its supervisor to start it again).
fn serve_until_stopped(
    ignore_stdin: bool,
    fabric: &VerbsFabric,
    node: NodeId,
) -> Result<(), NodeError> {
    println!(
        "serving; Ctrl-C{} stops",
        if ignore_stdin { "" } else { " or end of input" }
    );
    let fatal = || {
        fabric
            .device_events(node)
            .filter(nessie_fabric_verbs::device_fatal)
            .map(|e| format!("the RDMA device failed as a whole (events: {e:?})"))
    };
    match wait_for_stop(ignore_stdin, &fatal) {
        Some(why) => Err(NodeError::DeviceFailed(why)),
        None => Ok(()),
    }
}

fn run(cli: &NodeArgs) -> Result<(), NodeError> {
    let args = match &cli.cmd {
        Cmd::Info(_) => SystemArgs::default(),
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
                start_at: a.start_at.map(StartArg::start).transpose()?,
                scan_pct: a.scan_pct,
                scan_len: a.scan_len,
                ..a.mix.spec(Duration::from_secs_f64(a.seconds.max(0.0)))
            };
            sys.check(&spec)?;
            Some(spec)
        }
        _ => None,
    };
    if let (Cmd::Run(a), Some(spec)) = (&cli.cmd, &spec) {
        if let Some(addr) = a.without_storage {
            let report = super::without_storage::run(
                file,
                sys.kind(),
                node,
                addr,
                spec,
                a.history.as_deref(),
            )?;
            println!("\n{report}\nworkload finished without storage");
            return Ok(());
        }
    }
    // The regions are sized for the system; its tag joins the fingerprint.
    let file = deployment(file, &sys)?;
    let fabric = VerbsFabric::start(file, &[node])?;
    let cluster = fabric.cluster();
    if let Some(r) = fabric.report(node) {
        println!("{r}");
    }
    // The device's own counters since boot, and later their growth over
    // the run (retransmissions, duplicates, sequence errors: issue 26).
    let nic_before = match fabric.nic_counters(node) {
        Ok(c) => Some(c),
        Err(e) => {
            println!("NIC counters not available: {e}");
            None
        }
    };
    let addr = cluster.addr(node).map_err(VerbsError::from)?;
    println!(
        "{node} listening on {addr}, cluster of {} nodes running {} (fingerprint {:#018x})",
        cluster.topology().nodes,
        cluster.system_tag().unwrap_or("nessie"),
        cluster.fingerprint()
    );
    if let Cmd::Info(info) = &cli.cmd {
        return info_checklist(&fabric, node, nic_before.as_ref(), info);
    }
    let servers = sys.start(&fabric, node)?;
    let name = sys.kind();
    if servers.summary().is_some() {
        println!(
            "{} server worker(s) of {name} running on {node}",
            sys.server_workers()
        );
        // The budget start-up printed counts the clients' endpoints; the
        // server threads' add theirs.
        let budget = nessie_fabric_verbs::ConnectionBudget {
            nodes: cluster.topology().nodes.into(),
            endpoints: u64::from(cluster.store.clients_per_node)
                + u64::from(sys.server_endpoints()),
            fd_limit: nessie_fabric_verbs::open_file_limit(),
        };
        println!(
            "with the {} endpoints of {name}'s server threads, {budget}",
            sys.server_endpoints()
        );
    }
    if let Some(c) = servers.cell() {
        nessie_systems::report_cell_meganodes(c, Duration::from_millis(200));
    }
    let metrics_addr = match &cli.cmd {
        Cmd::Serve(a) => a.metrics.metrics,
        Cmd::Run(a) => a.metrics.metrics,
        _ => None,
    };
    if let Some(addr) = metrics_addr {
        metrics::install(addr)?;
        println!("metrics of {node} served on http://{addr}/metrics");
    }
    // The counters are published (and `serve`'s status printed) by a
    // thread of their own while the node serves or runs.
    let stop = AtomicBool::new(false);
    let publisher = metrics::Publisher {
        fabric: &fabric,
        node,
        servers: &servers,
        publish: metrics_addr.is_some(),
        status: matches!(cli.cmd, Cmd::Serve(_)),
    };
    std::thread::scope(|s| {
        if publisher.publish || publisher.status {
            s.spawn(|| publisher.run(&stop));
        }
        let r = serve_or_run(&cli.cmd, spec, &sys, &fabric, node, &servers, nic_before);
        stop.store(true, Ordering::Relaxed);
        r
    })?;
    print_servers(&servers);
    Ok(())
}

/// `info`'s checklist after start-up's report (docs/deploy.md, "The
/// operator's checklist"): the NIC's counters, what the kernel says this
/// process holds, the port's flow control, the deadline watchdog's
/// scheduling, the data table's sizing and the peers' clocks.
fn info_checklist(
    fabric: &VerbsFabric,
    node: NodeId,
    nic_before: Option<&nessie_fabric_verbs::NicCounters>,
    info: &InfoArgs,
) -> Result<(), NodeError> {
    if let Some(c) = nic_before {
        println!("{c} (since the device came up)");
    }
    let host = |v: Option<u64>| v.map_or("unreadable".to_string(), |n| n.to_string());
    println!(
        "kernel: this process holds {} file descriptors (limit {}) and {} queue pairs now (rdma resource)",
        host(nessie_fabric_verbs::open_fds()),
        host(nessie_fabric_verbs::open_file_limit()),
        host(nessie_fabric_verbs::process_qps())
    );
    for line in fabric.pfc_state(node) {
        println!("{line}");
    }
    match nessie_fabric_verbs::Watchdog::global() {
        Ok(dog) => {
            // Its thread sets its scheduling as it starts.
            std::thread::sleep(Duration::from_millis(50));
            println!("deadline watchdog: {}", dog.stats().scheduling);
        }
        Err(e) => println!("deadline watchdog: not started ({e})"),
    }
    match fabric.link_counters(node) {
        Ok(c) if !c.is_empty() => println!("flow control (ethtool -S): {c}"),
        Ok(_) => println!("flow control (ethtool -S): no pause, PFC or ECN counters"),
        Err(e) => println!("flow control: not readable ({e})"),
    }
    for line in sizing_lines(&fabric.cluster().protocol_config()?, info) {
        println!("{line}");
    }
    // The peers' clocks, measured now (those not up answer nothing).
    if let Some(ledger) = fabric.check_clocks_now(node, Duration::from_millis(500)) {
        for l in ledger.lines() {
            println!("clock check: {l}");
        }
    }
    Ok(())
}

/// `serve` until stopped, or `run` the workload `spec` (then serve on if
/// asked), on the started node.
fn serve_or_run(
    cmd: &Cmd,
    spec: Option<WorkloadSpec>,
    sys: &NodeSetup,
    fabric: &VerbsFabric,
    node: NodeId,
    servers: &NodeServers,
    nic_before: Option<nessie_fabric_verbs::NicCounters>,
) -> Result<(), NodeError> {
    let name = sys.kind();
    match (cmd, spec) {
        (Cmd::Run(a), Some(spec)) => {
            println!(
                "running {} clients of {name} on {node}: {} keys of {} B, values of {} B, {}{}, {} s (connecting to every node first)",
                a.mix.clients, a.mix.keys, a.mix.key_size, a.mix.value_size, a.mix.describe(),
                if a.mix.workload.is_none() { format!(" / {}% SCAN", a.scan_pct) } else { String::new() },
                a.seconds
            );
            let transport_before = metrics::read(fabric, node, true);
            let report = sys.run(fabric, node, &spec, servers)?;
            let transport = metrics::read(fabric, node, true).since(&transport_before);
            if let Some(path) = &a.history {
                report
                    .write_history(path)
                    .map_err(|e| NodeError::Arg(format!("cannot write {}: {e}", path.display())))?;
            }
            println!("\n{report}");
            if let (Some(before), Ok(after)) = (&nic_before, fabric.nic_counters(node)) {
                // The whole device's, so other processes on it count too.
                println!("during the run, this node's {}", after.since(before));
            }
            // Ports down or up, fatal queue pairs (fabric-verbs' events).
            match fabric.device_events(node) {
                Some(e) if e.is_empty() => println!("device events since the node started: none"),
                Some(e) => println!("device events since the node started: {e:?}"),
                None => {}
            }
            // The peers' clocks as the periodic check last measured them.
            if let Some(ledger) = fabric.clock_checks(node) {
                let lines = ledger.lines();
                if lines.is_empty() {
                    println!("clock check: no periodic check ran yet");
                }
                for l in lines {
                    println!("clock check: {l}");
                }
            }
            // Queue pairs failed at a deadline by the process's watchdog
            // (not by a client's own poll), and its own lateness.
            if let Ok(dog) = nessie_fabric_verbs::Watchdog::global() {
                let w = dog.stats();
                println!(
                    "deadline watchdog: {} queue pairs failed at a deadline, at most {} us after it ({})",
                    w.trips,
                    w.max_late.as_micros(),
                    w.scheduling
                );
            }
            if let Some(at) = report.start_at_unix_ns {
                println!(
                    "started measuring {} us after --start-at",
                    report.started_unix_ns.saturating_sub(at) / 1000
                );
            }
            println!("transport during the run: {transport}");
            if let Some(path) = &a.report {
                RunReport::of(node.0, &report)
                    .with_transport(transport)
                    .write(path)?;
                println!("results written to {}", path.display());
            }
            println!("workload finished on {node}");
            if a.serve_after {
                serve_until_stopped(a.ignore_stdin, fabric, node)?;
            }
        }
        (Cmd::Serve(a), _) => {
            serve_until_stopped(a.ignore_stdin, fabric, node)?;
            println!("stopping");
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_and_the_start_parse_and_bad_ones_are_named() {
        let e = "btree".parse::<SystemKind>().unwrap_err().to_string();
        assert!(e.contains("\"btree\"") && e.contains("cell"), "{e}");
        assert_eq!("-".parse::<StartArg>(), Ok(StartArg::Stdin));
        assert_eq!("12.5".parse::<StartArg>(), Ok(StartArg::At(12.5)));
        assert!("soon".parse::<StartArg>().is_err());
        assert!(StartArg::At(-1.0).start().is_err());
    }

    #[test]
    fn info_warns_when_the_put_rate_outruns_the_data_table() {
        let cfg = nessie_protocol::Config {
            nodes: 2,
            dtes_per_node: 4000,
            clients_per_node: 4,
            expiration: Duration::from_millis(999),
            clock_skew: Duration::from_millis(1),
            ..nessie_protocol::Config::default()
        };
        let args = |put_rate, keys| InfoArgs { put_rate, keys };
        let ok = sizing_lines(&cfg, &args(3000.0, 0));
        assert_eq!(ok.len(), 1, "{ok:?}");
        assert!(
            ok[0].contains("a client sustains 1000 PUTs/s, this node 4000"),
            "{ok:?}"
        );
        // 800 keys over 8 clients: 100 live entries each.
        let live = sizing_lines(&cfg, &args(3000.0, 800));
        assert!(
            live[0].contains("with 100 live keys per client a client sustains 900"),
            "{live:?}"
        );
        assert!(live[1].starts_with("WARNING"), "{live:?}");
        // A longer expiration period lowers what the table sustains.
        let longer = nessie_protocol::Config {
            expiration: Duration::from_millis(1999),
            ..cfg
        };
        let w = sizing_lines(&longer, &args(3000.0, 0));
        assert!(
            w[0].contains("reusable 2000 ms") && w[1].starts_with("WARNING"),
            "{w:?}"
        );
    }

    #[test]
    fn cell_options_apply_to_cell_only() {
        let file = ClusterFile::parse(include_str!("../../../fabric-verbs/examples/cluster.toml"))
            .unwrap();
        let cell = SystemArgs {
            system: SystemKind::Cell,
            cell_meganode_nodes: 16,
            ..SystemArgs::default()
        };
        assert!(matches!(cell.config(&file), Ok(NodeSetup::Cell(c, _)) if c.meganode_nodes == 16));
        let tiny = SystemArgs {
            cell_meganode_nodes: 4,
            ..cell.clone()
        };
        assert!(
            tiny.config(&file).is_err(),
            "meganodes of 4 nodes are refused"
        );
        let pilaf = SystemArgs {
            system: SystemKind::Pilaf,
            ..cell
        };
        assert!(
            matches!(pilaf.config(&file), Err(NodeError::Arg(m)) if m.contains("--system cell"))
        );
    }
}
