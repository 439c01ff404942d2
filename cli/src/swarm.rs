//! `nessie swarm`: the simulator's fault swarm from the command line. Runs
//! seeded cases (each its own cluster shape, protocol options and mix of
//! injected faults), checks every history for linearizability, and on a
//! failure shrinks it and prints the case as JSON that `--replay` runs again
//! exactly.

use std::time::Instant;

use clap::Args;
use nessie_protocol::Faults;
use nessie_sim::{shrink, swarm_with as run_swarm, CaseRun, SwarmCase, Verdict};

/// Options of `nessie swarm`.
#[derive(Args, Debug, Clone)]
pub struct SwarmArgs {
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// Number of cases (seeds `first_seed..first_seed + cases`).
    #[arg(long, default_value_t = 200)]
    pub cases: u64,
    /// Broken protocol variants to run instead of the correct protocol
    /// (comma separated; see `Faults::NAMES`), to watch the swarm catch them.
    #[arg(long, value_delimiter = ',')]
    pub faults: Vec<String>,
    /// Replay one case: a JSON case as printed by a failing run.
    #[arg(long)]
    pub replay: Option<String>,
    /// Runs spent shrinking a failure.
    #[arg(long, default_value_t = 200)]
    pub shrink_budget: usize,
    /// The system under test (nessie, nessie-sd, nessie-hy, pilaf, race, cell):
    /// the others take Nessie's shapes, workloads, network faults and client
    /// crashes, and draw server workers and what is their own (NessieHY's
    /// GET optimisations, per-node table sizes, Cell's node and meganode
    /// sizes: `SwarmCase::for_system`). RACE as published fails where
    /// racing inserts of a key meet a DELETE (first at case 484;
    /// docs/baselines.md): `--without-inserts` is the family it holds in.
    #[arg(long, default_value = "nessie")]
    pub system: String,
    /// The server-driven systems' test-only fault switches to run instead
    /// of the correct system (comma separated, `ServerFaults::NAMES`:
    /// skip-claims, skip-epoch-check, settle-by-landing-bound, skip-checksums,
    /// skip-message-checks, unbounded-rounds, skip-scan-validation,
    /// rerun-duplicates, and Cell's recovery-opens-early,
    /// recovery-forgets-finished-splits, recovery-undoes-copied-splits,
    /// recovery-ignores-live-splitter, recovery-keeps-orphans,
    /// unclaimed-server-requests; RACE's reuse-without-hold), to watch
    /// the swarm catch them.
    #[arg(long, value_delimiter = ',')]
    pub server_faults: Vec<String>,
    /// The A2 negative control (`SwarmCase::without_a2`): mutations that
    /// reach their responder after their landing deadline execute anyway
    /// (packets held past the margin), and a quarter of the requests are
    /// delayed by up to three expiration periods. Nessie's incarnation tags
    /// make every case pass (issue 39); with `--faults ignore-incarnations`
    /// some must fail.
    #[arg(long)]
    pub late_landing: bool,
    /// Late landings for the request channels (`SwarmCase::with_late_landings`:
    /// mutations past their landing deadline execute, errors whose requests
    /// land later and duplicated WRITEs land up to four margins late, within
    /// the operation timeout): what `sim/tests/swarm.rs` runs for NessieSD,
    /// NessieHY, Pilaf and Cell, whose outcomes rest on no landing time.
    #[arg(long, conflicts_with = "late_landing")]
    pub late_request_landings: bool,
    /// Nessie's index in associative buckets (`SwarmCase::with_buckets`:
    /// buckets of 2 or 4 entries, tight tables), every other draw of each
    /// case as without it. A baseline's cases are unchanged.
    #[arg(long)]
    pub buckets: bool,
    /// Nessie's data tables in size classes (`SwarmCase::with_size_classes`:
    /// a ladder of classes as large as the main table, values of uniform
    /// sizes up to 24, 64 or 160 B), every other draw of each case as
    /// without it. A baseline's cases are unchanged.
    #[arg(long)]
    pub size_classes: bool,
    /// Half of Nessie's clients without storage (`SwarmCase::with_pure_clients`:
    /// they write their shares through memory windows their node's agent
    /// binds, and hold them by lease), every other draw of each case as
    /// without it. A baseline's cases are unchanged.
    #[arg(long)]
    pub pure_clients: bool,
    /// Nessie's index grows online (`SwarmCase::with_growth`: three or four
    /// generations, the first holding a quarter to a half of the keys), so
    /// that inserts start growths, help their sweeps and meet their seals;
    /// every other draw of each case as without it (with `--buckets`, in
    /// buckets). A baseline's cases are unchanged.
    #[arg(long)]
    pub growth: bool,
    /// Only the faults that change when requests land and steps run
    /// (`SwarmCase::with_timing_faults_only`: delays, pauses, torn
    /// transfers, duplicated WRITEs, skew), none that fails a request or a
    /// process: the family in which RACE, whose published duplicate check
    /// cannot survive an interrupted insert, is checked for the rest.
    #[arg(long)]
    pub timing_faults_only: bool,
    /// Every key preloaded and no DELETE (`SwarmCase::without_inserts`):
    /// no insert races another. The family in which RACE, whose published
    /// duplicate check leaves duplicates that a later DELETE resurrects,
    /// holds under every fault.
    #[arg(long)]
    pub without_inserts: bool,
    /// No duplicated WRITEs (`SwarmCase::without_duplicate_writes`): the
    /// family in which RCuckoo, whose published design writes rows in
    /// place under locks and cannot survive a row WRITE replayed after its
    /// lock was released, is checked for every other fault.
    #[arg(long)]
    pub without_duplicate_writes: bool,
    /// Long pauses (`SwarmCase::with_long_pauses`: one poll in twenty
    /// descheduled for up to four expiration periods): the family in which
    /// RCuckoo's writer, unfenced as published (`--server-faults
    /// unfenced-writes`), writes after its locks were taken over.
    #[arg(long)]
    pub long_pauses: bool,
    /// Draw each case's workload as before 2026-11-30, when seeds 2j and
    /// 2j + 1 drew the same operations (`SwarmCase::with_paired_workload_seeds`):
    /// to reproduce a seed the docs or a test pinned before then.
    #[arg(long)]
    pub paired_workload_seeds: bool,
}

impl SwarmArgs {
    /// `case` in the families these arguments name.
    fn family(&self, mut case: SwarmCase) -> SwarmCase {
        if self.late_landing {
            case = case.without_a2();
        }
        if self.late_request_landings {
            case = case.with_late_landings();
        }
        if self.buckets {
            case = case.with_buckets();
        }
        if self.size_classes {
            case = case.with_size_classes();
        }
        if self.pure_clients {
            case = case.with_pure_clients();
        }
        if self.growth {
            case = case.with_growth();
        }
        if self.timing_faults_only {
            case = case.with_timing_faults_only();
        }
        if self.without_inserts {
            case = case.without_inserts();
        }
        if self.without_duplicate_writes {
            case = case.without_duplicate_writes();
        }
        if self.long_pauses {
            case = case.with_long_pauses();
        }
        if self.paired_workload_seeds {
            case = case.with_paired_workload_seeds();
        }
        case
    }
}

fn describe(run: &CaseRun) {
    let r = &run.report;
    println!(
        "case: {}",
        serde_json::to_string(&run.case).unwrap_or_default()
    );
    println!(
        "  {} operations ({} unknown, {} failed), {} entries recycled while clients raced, \
         faults injected: {:?}",
        r.ops + r.failures,
        r.unknown,
        r.failures,
        r.recycled_in_race,
        r.chaos
    );
    if let Some(a) = &r.dtes {
        println!(
            "  data table entries at quiescence: {} live, {} reusable, {} leaked ({} admitted)",
            a.live, a.reusable, a.leaked, a.admitted
        );
    }
}

/// Runs the swarm (or one replayed case); an error if a case fails.
pub fn swarm(args: &SwarmArgs) -> Result<(), String> {
    let faults = Faults::named(&args.faults).map_err(|e| e.to_string())?;
    if let Some(json) = &args.replay {
        let case: SwarmCase =
            serde_json::from_str(json).map_err(|e| format!("--replay: not a case: {e}"))?;
        let case = args.family(case);
        let run = case.run(faults).map_err(|e| e.to_string())?;
        describe(&run);
        return match &run.verdict {
            Verdict::Pass(n) => {
                println!("  linearizable ({n} operations checked)");
                Ok(())
            }
            Verdict::Inconclusive(m) => Err(format!("no verdict: {m}")),
            Verdict::Fail(m) => Err(format!("the case fails:\n{m}")),
        };
    }
    let started = Instant::now();
    let seeds = args.first_seed..args.first_seed + args.cases;
    let system: nessie_systems::SystemKind = args.system.parse().map_err(|e| format!("{e}"))?;
    let server_faults =
        nessie_sim::ServerFaults::named(&args.server_faults).map_err(|e| e.to_string())?;
    let s = run_swarm(seeds, faults, true, |c| {
        let mut case = SwarmCase::for_system(c.seed, system);
        case.server_faults = server_faults;
        *c = args.family(case);
    })
    .map_err(|e| e.to_string())?;
    println!(
        "nessie swarm: {} cases in {:.1} s: {} linearizable ({} operations checked, at least {} per case), {} inconclusive; \
         {} operations with unknown outcome, {} crashes, {} server worker crashes, {} servers failed for good ({} mid-split; {} recoveries), {} lost completions, \
         {} errors then landings ({} landed), {} late completions held back, {} completions after their round (routed or dropped), \
         {} requests vanished, {} WRITEs duplicated ({} copies landed), \
         {} mutations refused at their landing deadline, {} landed after it; \
         {} torn transfers ({} stopped part placed), {} requests failed with their queue pair; \
         {} MIGRATEs (the baselines: cuckoo moves; Cell: meganode splits), {} Cell node splits, {} cases with range scans ({} checked whole by the range-aware checker), {} entries of crashed or overrunning owners recovered; \
         {} entries recycled while clients raced (in {} cases); \
         index growth: {} entries sealed, {} seals met by a view behind; \
         data table entries at quiescence: {} live, {} reusable, {} leaked ({} admitted: {} counted by the operations, {} crashes)",
        s.cases,
        started.elapsed().as_secs_f64(),
        s.passed,
        s.checked_ops,
        s.min_checked.unwrap_or(0),
        s.inconclusive,
        s.unknown_ops,
        s.crashes,
        s.server_crashes,
        s.server_failures,
        s.mid_split_failures,
        s.server_recoveries,
        s.lost_completions,
        s.error_then_land,
        s.orphans_landed,
        s.late_completions,
        s.stale_completions,
        s.vanished,
        s.duplicate_writes,
        s.duplicates_landed,
        s.landing_deadline_refusals,
        s.late_landings,
        s.torn,
        s.partly_placed,
        s.link_errors,
        s.migrations,
        s.node_splits,
        s.scan_cases,
        s.scan_cases_whole,
        s.recoveries,
        s.recycled_in_race,
        s.cases_with_reuse,
        s.growth.seals,
        s.growth.stale_views,
        s.dtes.live,
        s.dtes.reusable,
        s.dtes.leaked,
        s.dtes.admitted,
        s.dtes.counted,
        s.dtes.crashes
    );
    let Some(failure) = s.failure else {
        // No verdict is not a pass: a case the checker could not decide
        // fails the run (raise CHECK_STEPS or shrink the case).
        if s.inconclusive > 0 {
            return Err(format!(
                "{} case(s) inconclusive: the checker ran out of steps, so the run proves \
                 nothing about them",
                s.inconclusive
            ));
        }
        return Ok(());
    };
    println!("FAILED: seed {}", failure.case.seed);
    describe(&failure);
    let small = shrink(failure, faults, args.shrink_budget);
    println!("shrunk to:");
    describe(&small);
    let why = match &small.verdict {
        Verdict::Fail(m) => m.to_string(),
        other => format!("{other:?}"),
    };
    println!("{why}");
    Err(format!(
        "a swarm case fails; replay it with: nessie swarm{} --replay '{}'",
        if args.faults.is_empty() {
            String::new()
        } else {
            format!(" --faults {}", args.faults.join(","))
        },
        serde_json::to_string(&small.case).unwrap_or_default()
    ))
}
