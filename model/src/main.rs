//! `nessie-model`: explore the named worlds (bigger than CI can afford, with
//! broken variants on demand) and report verdicts, states and speed, with a
//! step-by-step trace for every counterexample; optionally serve stateright's
//! Explorer web UI on localhost.

/// The checker clones and drops a world state per transition: mimalloc
/// makes those allocations markedly cheaper than the system allocator
/// (`--features mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use nessie_model::{explore, trace, worlds, Bounds, Mode, World};
use nessie_protocol::Faults;
use stateright::Model;

/// Model checking of the Nessie protocol's real state machines.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the worlds, each with the fault switches it catches.
    List,
    /// Explore one world (or `all` for the CI worlds) and report.
    Check {
        /// World name (see `list`), or `all` for the CI worlds.
        world: String,
        /// Broken variants to switch on for every client, comma separated:
        /// any of `Faults::NAMES` (protocol/src/faults.rs), e.g.
        /// skip-put-verify, cache-time-from-completion,
        /// get-hit-time-from-completion.
        #[arg(long, value_delimiter = ',')]
        faults: Vec<String>,
        /// Let posted CASes and WRITEs land after the clock passed their
        /// posting time plus the margin (violate A2).
        #[arg(long)]
        late_landing: bool,
        /// Override the world's clock offsets, one per node in ns (node 0
        /// first; missing nodes read 0), e.g. `0,3`. Offsets further apart
        /// than the world's `clock_skew` (1 ns in every named world) violate
        /// timing assumption A1 (docs/protocol.md §4).
        #[arg(long, value_delimiter = ',')]
        clock_offsets: Option<Vec<u64>>,
        /// Drop A2 for a weaker landing bound (implies `--late-landing`):
        /// every posted CAS or WRITE lands within this many ns of being
        /// posted, e.g. 4 (the worlds' T) to test a bound of T after
        /// posting (A2′, docs/protocol.md §4).
        #[arg(long)]
        landing_bound: Option<u64>,
        /// Override the world's expiration period T (ns; 4 in every named
        /// world), e.g. to land a CAS later than the margin yet within T.
        #[arg(long)]
        expiration: Option<u64>,
        /// Checker threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Breadth first (shortest counterexamples) instead of depth first
        /// (far less memory).
        #[arg(long)]
        bfs: bool,
        /// Random walks for this many seconds instead of exhausting the world.
        #[arg(long)]
        simulate: Option<u64>,
        /// Seed of the random walks.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Stop after generating this many states (0: no limit).
        #[arg(long, default_value_t = 0)]
        max_states: usize,
        /// Override the world's number of clock ticks.
        #[arg(long)]
        ticks: Option<u8>,
        /// Override the world's bound on clock jumps per path (0: none).
        #[arg(long)]
        delays: Option<u8>,
        /// MIGRATE search by depth first with backtracking
        /// (`MigrateSearch::DepthFirst`) instead of the default breadth first.
        #[arg(long)]
        depth_first: bool,
        /// Override the world's attempts per operation.
        #[arg(long)]
        attempts: Option<u8>,
        /// Override the world's number of injected faults.
        #[arg(long)]
        max_faults: Option<u8>,
        /// Stop as soon as one of these properties (comma separated, e.g.
        /// `linearizable`) has a counterexample or example: hunt a broken
        /// variant's counterexample without exhausting the world.
        #[arg(long, value_delimiter = ',')]
        stop_at: Vec<String>,
    },
    /// Serve stateright's Explorer for a world on a local address.
    Explore {
        /// World name.
        world: String,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:3000")]
        addr: String,
        /// Broken variants, as for `check`.
        #[arg(long, value_delimiter = ',')]
        faults: Vec<String>,
    },
}

fn faults(names: &[String]) -> Result<Faults, String> {
    Faults::named(names).map_err(|e| e.to_string())
}

fn world(name: &str, f: Faults, late_landing: bool) -> Result<World, String> {
    let mut w = worlds::by_name(name)
        .ok_or_else(|| format!("unknown world {name:?}; try `nessie-model list`"))?;
    if f != Faults::default() {
        w = worlds::with_faults(w, f);
    }
    // A world that drops A2 itself keeps it dropped.
    w.late_landing |= late_landing;
    Ok(w)
}

fn check(w: &World, mode: Mode, bounds: &Bounds) -> bool {
    println!(
        "== {}: {} clients, {} nodes, N = {}, {} ticks in {} jumps, {} faults, \
         T = {} ns, clock offsets {:?} ns (skew {} ns){}",
        w.name,
        w.clients.len(),
        w.cfg.nodes,
        w.cfg.candidates,
        w.max_ticks,
        if w.max_delays == 0 {
            "any".to_string()
        } else {
            format!("at most {}", w.max_delays)
        },
        w.max_faults,
        w.cfg.expiration.as_nanos(),
        w.clock_offsets,
        w.cfg.clock_skew.as_nanos(),
        match (w.late_landing, w.landing_bound) {
            (false, _) => String::new(),
            (true, None) => ", late landing".to_string(),
            (true, Some(b)) => format!(", landing within {} ns of posting", b.as_nanos()),
        }
    );
    let e = explore(w, mode, bounds);
    for v in &e.verdicts {
        match (&v.path, v.sometimes) {
            (None, true) => println!("   {:<48} NO EXAMPLE FOUND", v.property),
            (None, false) => println!("   {:<48} holds", v.property),
            (Some(_), true) => println!("   {:<48} example found", v.property),
            (Some(path), false) => {
                println!("   {:<48} VIOLATED; counterexample:", v.property);
                print!("{}", trace(w, path));
            }
        }
    }
    println!("   {}", e.summary());
    e.failures().is_empty()
}

fn run(cli: Cli) -> Result<bool, String> {
    match cli.command {
        Command::List => {
            for w in worlds::WORLDS {
                let catches: Vec<&str> = w.catches.iter().map(|c| c.switch).collect();
                if catches.is_empty() {
                    println!("{}", w.name);
                } else {
                    println!("{:<32} catches {}", w.name, catches.join(", "));
                }
            }
            Ok(true)
        }
        Command::Check {
            world: name,
            faults: fs,
            late_landing,
            clock_offsets,
            landing_bound,
            expiration,
            threads,
            bfs,
            simulate,
            seed,
            max_states,
            ticks,
            attempts,
            max_faults,
            stop_at,
            delays,
            depth_first,
        } => {
            let f = faults(&fs)?;
            let mut list = if name == "all" {
                worlds::ci_worlds()
            } else {
                vec![world(&name, f, late_landing)?]
            };
            if depth_first {
                list = list.into_iter().map(worlds::depth_first).collect();
            }
            for w in &mut list {
                w.max_ticks = ticks.unwrap_or(w.max_ticks);
                w.max_attempts = attempts.unwrap_or(w.max_attempts);
                w.max_delays = delays.unwrap_or(w.max_delays);
                w.max_faults = max_faults.unwrap_or(w.max_faults);
                if let Some(o) = &clock_offsets {
                    w.clock_offsets.clone_from(o);
                }
                if let Some(ns) = expiration {
                    let mut c = (*w.cfg).clone();
                    c.expiration = Duration::from_nanos(ns);
                    c.validate().map_err(|e| e.to_string())?;
                    w.cfg = Arc::new(c);
                }
                if let Some(ns) = landing_bound {
                    w.late_landing = true;
                    w.landing_bound = Some(Duration::from_nanos(ns));
                }
            }
            let mode = match (simulate, bfs) {
                (Some(secs), _) => Mode::Simulation {
                    seed,
                    budget: Duration::from_secs(secs),
                },
                (None, true) => Mode::BreadthFirst,
                (None, false) => Mode::Exhaustive,
            };
            // Property names are 'static in the world; match the given ones.
            let names: Vec<&'static str> = list
                .first()
                .map(|w| w.properties().iter().map(|p| p.name).collect())
                .unwrap_or_default();
            let mut stop: Vec<&'static str> = Vec::new();
            for s in &stop_at {
                match names.iter().find(|n| **n == s.as_str()) {
                    Some(n) => stop.push(n),
                    None => return Err(format!("unknown property {s:?}; one of {names:?}")),
                }
            }
            let bounds = Bounds {
                threads,
                max_states,
                stop_at: stop,
            };
            // Check every world, even after one fails.
            let results: Vec<bool> = list.iter().map(|w| check(w, mode, &bounds)).collect();
            Ok(results.into_iter().all(|ok| ok))
        }
        Command::Explore {
            world: name,
            addr,
            faults: fs,
        } => {
            let w = world(&name, faults(&fs)?, false)?;
            println!("Explorer for {name} on http://{addr}/ (Ctrl-C to stop)");
            w.checker().serve(addr.as_str());
            Ok(true)
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
