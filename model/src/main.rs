//! `nessie-model`: explore the named worlds (bigger than CI can afford, with
//! broken variants on demand) and report states, speed and counterexamples;
//! optionally serve stateright's Explorer web UI on localhost.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use nessie_model::report;
use nessie_model::world::World;
use nessie_model::worlds;
use nessie_protocol::Faults;
use stateright::{Checker, Model};

/// Model checking of the Nessie protocol's real state machines.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the worlds.
    List,
    /// Explore one world (or `all`) exhaustively and report.
    Check {
        /// World name (see `list`), or `all` for the CI worlds.
        world: String,
        /// Broken variants to switch on for every client, comma separated:
        /// skip-put-verify, skip-migrate-rollback, cpu-state-flip,
        /// reuse-before-expiry, skip-get-reverse-pass, ignore-deadline.
        #[arg(long, value_delimiter = ',')]
        faults: Vec<String>,
        /// Let posted CASes and WRITEs land after the clock moved (violate A2).
        #[arg(long)]
        late_landing: bool,
        /// Checker threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Depth-first instead of breadth-first (less memory).
        #[arg(long)]
        dfs: bool,
        /// Stop after generating this many states (0: no limit).
        #[arg(long, default_value_t = 0)]
        max_states: usize,
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
    let mut f = Faults::default();
    for n in names {
        match n.as_str() {
            "skip-put-verify" => f.skip_put_verify = true,
            "skip-migrate-rollback" => f.skip_migrate_rollback = true,
            "cpu-state-flip" => f.cpu_state_flip = true,
            "reuse-before-expiry" => f.reuse_before_expiry = true,
            "skip-get-reverse-pass" => f.skip_get_reverse_pass = true,
            "ignore-deadline" => f.ignore_deadline = true,
            other => return Err(format!("unknown fault {other:?}")),
        }
    }
    Ok(f)
}

fn world(name: &str, f: Faults, late_landing: bool) -> Result<World, String> {
    let mut w = worlds::by_name(name)
        .ok_or_else(|| format!("unknown world {name:?}; try `nessie-model list`"))?;
    for c in &mut w.clients {
        c.faults = f;
    }
    w.late_landing = late_landing;
    Ok(w)
}

fn check(w: World, threads: usize, dfs: bool, max_states: usize) -> bool {
    let name = w.name.clone();
    println!(
        "== {name}: {} clients, {} nodes, N = {}",
        w.clients.len(),
        w.cfg.nodes,
        w.cfg.candidates
    );
    let t = Instant::now();
    let mut b = w.clone().checker().threads(threads);
    if max_states > 0 {
        b = b.target_state_count(max_states);
    }
    macro_rules! finish {
        ($c:expr) => {{
            let c = $c;
            let secs = t.elapsed().as_secs_f64();
            println!(
                "   {} unique states ({} generated), max depth {}, {:.2} s, {:.0} states/s{}",
                c.unique_state_count(),
                c.state_count(),
                c.max_depth(),
                secs,
                c.state_count() as f64 / secs.max(1e-9),
                if c.is_done() && max_states == 0 {
                    ", exhaustive"
                } else {
                    ", STOPPED EARLY"
                }
            );
            let mut ok = true;
            for p in w.properties() {
                let sometimes = matches!(p.expectation, stateright::Expectation::Sometimes);
                match c.discovery(p.name) {
                    None if sometimes => {
                        ok = false;
                        println!("   {:<45} NO EXAMPLE FOUND", p.name)
                    }
                    None => println!("   {:<45} holds", p.name),
                    Some(_) if sometimes => println!("   {:<45} example found", p.name),
                    Some(path) => {
                        ok = false;
                        println!("   {:<45} VIOLATED; counterexample:", p.name);
                        let steps: Vec<_> = path
                            .into_vec()
                            .into_iter()
                            .filter_map(|(s, a)| a.map(|a| (s, a)))
                            .collect();
                        print!("{}", report::trace(&w, &steps));
                    }
                }
            }
            ok
        }};
    }
    if dfs {
        finish!(b.spawn_dfs().join())
    } else {
        finish!(b.spawn_bfs().join())
    }
}

fn run(cli: Cli) -> Result<bool, String> {
    match cli.command {
        Command::List => {
            for n in worlds::NAMES {
                println!("{n}");
            }
            Ok(true)
        }
        Command::Check {
            world: name,
            faults: fs,
            late_landing,
            threads,
            dfs,
            max_states,
        } => {
            let f = faults(&fs)?;
            let list = if name == "all" {
                worlds::ci_worlds()
            } else {
                vec![world(&name, f, late_landing)?]
            };
            // Check every world, even after one fails.
            let results: Vec<bool> = list
                .into_iter()
                .map(|w| check(w, threads.max(1), dfs, max_states))
                .collect();
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
