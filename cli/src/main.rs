//! The `nessie` command.
//!
//! `nessie run` starts an in-process cluster on the simulated fabric, drives a
//! concurrent mixed workload from client threads on every node, and prints
//! throughput, latency and what each kind of operation cost on the fabric.
//! `nessie bench` compares Nessie with NessieSD, NessieHY and Pilaf side by
//! side on the same simulated fabric and reproduces the papers' experiments.
//! `nessie inserts` measures round trips per insert as the index fills up;
//! `nessie pipeline` measures what many operations in flight per thread buy;
//! `nessie sim` runs the deterministic cluster simulator, `nessie papers` its
//! predictions next to the papers' numbers; `nessie swarm` its fault swarm. Built with the `verbs` feature, `nessie node` runs one node
//! of a deployment on RDMA (`info`, `serve`, `run`, `report`).

use nessie_cli::{bench, inserts, papers, pipeline, run, sim, swarm};

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// Nessie-rs: a client-driven RDMA key-value store.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// Log lines as JSON objects (one per line, with their fields: for a log
    /// shipper), not text. `RUST_LOG` chooses what is logged (default:
    /// warnings and errors).
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a concurrent mixed workload on a simulated multi-node cluster.
    Run(run::RunArgs),
    /// Compare Nessie, NessieSD, NessieHY and Pilaf side by side (interleaved),
    /// or run one of the papers' experiments (--experiment).
    Bench(bench::BenchArgs),
    /// Round trips per insert against index load factor, for N = 2, 3, 4 and
    /// both MIGRATE searches (the workshop paper's Table 1).
    Inserts(inserts::InsertsArgs),
    /// Operations per second of one client thread against the number of
    /// operations it keeps in flight (a pipeline's depth).
    Pipeline(pipeline::PipelineArgs),
    /// Nessie's machines in the deterministic discrete-event cluster
    /// simulator, in virtual time over a hardware profile.
    Sim(sim::SimArgs),
    /// The simulator's predictions next to the papers' published numbers
    /// (TPDS Table 1, Figs 4-7 and 12-14, the workshop paper's Table 1,
    /// Pilaf's Fig. 6) and the runs beyond them (3 to 1,000 nodes), as the
    /// markdown tables of docs/simulation.md.
    Papers(papers::PapersArgs),
    /// The fault swarm: seeded simulated clusters with injected crashes,
    /// outages, pauses, skew, delayed, failed and lost completions, errors
    /// whose requests land later, completions handed in after their round
    /// was given up, torn transfers and failed queue pairs, each history
    /// checked for linearizability; a
    /// failure is shrunk and printed as a case that replays exactly.
    Swarm(swarm::SwarmArgs),
    /// One node of a deployment on RDMA: `info`, `serve`, `run` a workload
    /// of any of the four systems, merge the nodes' `report`s (see
    /// docs/deploy.md).
    #[cfg(feature = "verbs")]
    Node(nessie_cli::node::cmd::NodeArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // The swarm injects faults on purpose: the warnings they cause are its
    // daily bread, not news.
    let quiet = if matches!(cli.command, Command::Swarm(_)) {
        "error"
    } else {
        "warn"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(quiet));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if cli.log_json {
        logs.json().init();
    } else {
        logs.init();
    }
    let result = match cli.command {
        Command::Run(args) => run::run(&args).map_err(|e| e.to_string()),
        Command::Bench(args) => bench::bench(&args).map_err(|e| e.to_string()),
        Command::Inserts(args) => inserts::inserts(&args).map_err(|e| e.to_string()),
        Command::Pipeline(args) => pipeline::pipeline(&args).map_err(|e| e.to_string()),
        Command::Sim(args) => sim::sim(&args).map_err(|e| e.to_string()),
        Command::Papers(args) => papers::papers(&args).map_err(|e| e.to_string()),
        Command::Swarm(args) => swarm::swarm(&args),
        #[cfg(feature = "verbs")]
        Command::Node(args) => return nessie_cli::node::cmd::node(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
