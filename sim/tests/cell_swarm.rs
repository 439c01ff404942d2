//! Cell in the fault swarm (issue 25): its clients, server workers and
//! maintenance threads (meganode splits, with their requests to other
//! servers) run as the same sans-IO machines the threaded deployment runs,
//! under the swarm's network faults, client crashes, pauses, outages and
//! skew, with trees small enough that a handful of keys split leaves and
//! meganodes while the faults strike, and range scans in two cases of
//! three; every history goes through the linearizability checkers (the
//! per-key one, each scan's entries as reads, and Cell's range-aware one
//! over the whole history where it decides within its budget), every
//! operation must end, and a lone writer after the faults must find every
//! key writable. Each switch that breaks what the swarm can see is caught
//! from seed 0 (`nessie swarm --system cell --server-faults NAME` stops at
//! the seed pinned here).
//!
//! Servers fail for good (`sim/src/server_failure.rs`): at any instant in
//! a fifth of the cases, and at the crash points of meganode splits (right
//! after each log record, and after each step's posts) in two thirds of
//! the cases whose meganodes split; a survivor recovers their regions from
//! the region logs (Cell's own recovery, run on a thread of its own,
//! descheduled between its steps like any thread) while the clients, with
//! stale node caches, go on. Every failure must be recovered, every
//! acknowledged write must survive it, and at quiescence every meganode the
//! directory lists must be reachable in the tree (`sim/src/cell_audit.rs`).
mod common;

use std::time::Duration;

use nessie_check::time_limit;
use nessie_protocol::Faults;
use nessie_sim::{swarm_system, CaseFailure, ServerFaults, SwarmCase, Verdict};
use nessie_systems::SystemKind;

/// Cell's cases in CI (about 10 ms each).
const CELL_CASES: u64 = 1_000;

#[test]
fn cell_survives_the_fault_mixes_while_its_leaves_and_meganodes_split() {
    let _limit = time_limit(
        "cell_survives_the_fault_mixes_while_its_leaves_and_meganodes_split",
        CELL_CASES,
        Duration::from_secs(300),
    );
    let s = swarm_system(
        SystemKind::Cell,
        0..CELL_CASES,
        Faults::default(),
        ServerFaults::default(),
        false,
    )
    .unwrap();
    common::no_failure(&s, "cell");
    assert_eq!(s.inconclusive, 0, "{s:?}");
    assert_eq!(s.passed, CELL_CASES as usize);
    assert!(s.ok());
    assert!(s.min_checked.is_some_and(|m| m >= 4), "{s:?}");
    // Measured: 337,247 operations checked (scans' reads included); 6,603
    // client crashes; 98 servers failed for good (39 at a split's crash
    // points), 98 recoveries; 2,460 lost completions; 2,241 errors whose
    // requests were left to land (2,090 landed); 608 requests vanished;
    // 7,954 WRITEs duplicated (7,299 copies landed); 3,299 mutations
    // refused at their landing deadline; 8,704 unknown outcomes; 51,470
    // torn transfers (552 stopped part placed); 33,807 requests failed with
    // their queue pair; 564 node splits and 192 meganode splits; 625 cases
    // with range scans, 564 of them decided whole by the range-aware
    // checker.
    assert!(s.checked_ops > 300_000, "{s:?}");
    assert!(s.vanished > 400, "{s:?}");
    assert!(s.duplicates_landed > 5_000, "{s:?}");
    assert!(s.crashes > 5_000, "{s:?}");
    assert!(s.lost_completions > 2_000, "{s:?}");
    assert!(s.orphans_landed > 2_000, "{s:?}");
    assert!(s.landing_deadline_refusals > 2_500, "{s:?}");
    assert!(s.unknown_ops > 6_000, "{s:?}");
    assert!(s.torn > 40_000, "{s:?}");
    assert!(s.partly_placed > 400, "{s:?}");
    assert!(s.link_errors > 30_000, "{s:?}");
    assert!(s.server_failures > 70, "{s:?}");
    assert!(s.mid_split_failures > 25, "{s:?}");
    // One recovery takes over every failure detected before it starts.
    assert!(s.server_recoveries > 60, "{s:?}");
    assert!(s.server_recoveries <= s.server_failures, "{s:?}");
    assert!(s.node_splits > 400, "{s:?}");
    assert!(s.migrations > 150, "meganode splits: {s:?}");
    assert!(s.scan_cases > 500, "{s:?}");
    assert!(s.scan_cases_whole > 450, "{s:?}");
    assert_eq!(s.late_completions, 0, "Nessie's only");
    assert_eq!(s.server_crashes, 0, "not drawn for Cell");
}

/// Cell's switches the swarm catches, and the first seed that shows each
/// (searching from seed 0), with what the oracle reports there:
/// - `skip-claims` (Cell's `unclaimed_writes`): a write its client gave up
///   on and reported as not committed still runs; a GET returns its value.
/// - `skip-checksums` (`skip_crc_check`): a GET returns a torn extent.
/// - `skip-message-checks`: a server takes a slot two torn request WRITEs
///   mixed and serves the mix (at seed 38 as a request it cannot decode:
///   it answers `BadRequest`, a corrupt state; with other draws, as at
///   seed 666, as a request it can decode, run against the wrong key or
///   value: not linearizable).
/// - `unbounded-rounds` (`unbounded_rounds`): a client round whose
///   completion is lost waits for good; operations never finish. Found by
///   this swarm before it had a switch: Cell's client machines had no bound
///   on a round, in the simulator and in the threaded client alike.
/// - `skip-scan-validation` (`skip_scan_validation`): a scan does not read
///   its leaves' versions again, and returns a mix no instant held; only
///   the range-aware checker sees it (each entry alone is a value its key
///   held).
/// - `rerun-duplicates`: a worker claims again a PUT it ran when a
///   duplicate of its request WRITE lands after the client's next request
///   (the request channel's, shared with the baselines: `swarm.rs`).
///
/// The seeds moved when issue 40 changed the request channel (no landing
/// wait, a claim-word opening per process and node): before, 178, 27, 1 and
/// 2,920 for `skip-checksums`, `skip-message-checks` (then not
/// linearizable), `unbounded-rounds` and `skip-scan-validation`.
///
/// `settle-by-landing-bound` (the request channel's, shared with the
/// baselines) needs landings past the margin: `swarm.rs` catches it for
/// Cell at seed 7 of the late-landing family.
///
/// And again on 2026-11-30, when each seed's workload became its own (before,
/// seeds 2j and 2j + 1 drew the same operations): from 2, 61, 38, 8, 607
/// and 2.
const CELL_TEETH: [(&str, u64, &str); 6] = [
    ("skip-claims", 2, "not linearizable"),
    ("skip-checksums", 209, "not linearizable"),
    ("skip-message-checks", 27, "reported a corrupt state"),
    ("unbounded-rounds", 1, "never finished"),
    (
        "skip-scan-validation",
        105,
        "not linearizable with its range scans",
    ),
    ("rerun-duplicates", 2, "not linearizable"),
];

#[test]
fn the_swarm_catches_each_cell_switch_at_the_seed_that_shows_it() {
    let _limit = time_limit(
        "the_swarm_catches_each_cell_switch_at_the_seed_that_shows_it",
        "CELL_TEETH",
        Duration::from_secs(120),
    );
    for (name, seed, shows) in CELL_TEETH {
        common::switch_caught_in(SwarmCase::for_system(seed, SystemKind::Cell), name, shows);
    }
}

/// The switches of Cell's recovery (issue 25's holes) that the swarm
/// reaches through servers failing at a meganode split's crash points, the
/// first seed that shows each (searching from seed 0:
/// `nessie swarm --system cell --server-faults NAME` stops there; the
/// search is left to the CLI, thousands of cases), and what the oracle
/// reports there. Each case passes with the switch on once its split
/// failures are turned off: the failure is what reaches the switch.
/// - `recovery-keeps-orphans`: the splitter's server failed after
///   `SplitStart`, and recovery, undoing the split, keeps the copy Y it had
///   allocated on the survivor; the tree audit at quiescence finds Y
///   listed (`Creating`) and reachable from nothing.
/// - `recovery-forgets-finished-splits` (hole 2): the splitter's server
///   failed after `SplitFinish` and before Y was linked into its parent;
///   recovery forgets the split, and the tree audit at quiescence finds Y
///   listed (`Live`) and reachable from nothing. (At the pin before, 779,
///   Y was left frozen and the lone writer's PUTs to its keys timed out;
///   since Cell's client reads the directory afresh after a server that
///   did not answer in time, 779's split never completes.)
/// - `recovery-undoes-copied-splits`: the splitter's server failed inside
///   the relink; recovery undoes the split and drops Y, to which X_left's
///   lower levels already link, and writes to those keys time out.
/// - `recovery-opens-early` (hole 1): X is rebuilt writable with its split
///   open while the (descheduled) recovery thread has yet to settle it.
///   Since issue 40 changed the request channel's traces the first case
///   that shows it is 9,557, where the history is not linearizable (a PUT
///   answers `existed=true` for a key that no linearization leaves
///   present); at the old pin, 3,267, the lone writer's PUTs timed out.
///   Neither path was traced further.
///
/// The seeds moved with issue 40's request channel (`recovery-opens-early`
/// 3,267 before, `recovery-undoes-copied-splits` 4,187 and then 14,452,
/// `recovery-forgets-finished-splits` 1,966 and then 779) and again when
/// Cell's client learned to read the directory afresh after a timeout
/// (now 511 and 3,267 for the last two).
///
/// Not caught by the swarm (the stories in `cell/tests/` catch them at the
/// exact interleavings): `recovery-ignores-live-splitter` (Y's server must
/// fail and be recovered while a live splitter stands between its copy's
/// answer and logging it; clean in seeds 0-4,999) and
/// `unclaimed-server-requests` (hole 4: a copy must time out at the
/// splitter while its target still runs it; clean in 0-4,999).
const RECOVERY_TEETH: [(&str, u64, &str); 4] = [
    (
        "recovery-keeps-orphans",
        1,
        "listed but unreachable in the tree at quiescence",
    ),
    (
        "recovery-forgets-finished-splits",
        511,
        "listed but unreachable in the tree at quiescence",
    ),
    ("recovery-opens-early", 9_557, "not linearizable"),
    (
        "recovery-undoes-copied-splits",
        3_267,
        "by a lone client after the faults stopped",
    ),
];

#[test]
fn the_swarm_catches_the_recovery_switches_through_failures_mid_split() {
    let _limit = time_limit(
        "the_swarm_catches_the_recovery_switches_through_failures_mid_split",
        "RECOVERY_TEETH",
        Duration::from_secs(120),
    );
    for (name, seed, shows) in RECOVERY_TEETH {
        common::switch_caught_only_with(SystemKind::Cell, name, seed, "split-failure", shows);
    }
}

/// The switches are caught from seed 0 by the swarm itself, at the seeds
/// pinned above. CI searches those pinned within the first [`CELL_CASES`]
/// seeds (all of them today); a search to a later pin would be the CLI's
/// (`nessie swarm --system cell --server-faults NAME --cases N` stops
/// there), and CI would run its pinned case above.
#[test]
fn a_search_from_seed_zero_stops_at_the_pinned_seed() {
    for (name, first, _) in CELL_TEETH.into_iter().filter(|t| t.1 < CELL_CASES) {
        let f = ServerFaults::named(&[name]).unwrap();
        let s = swarm_system(SystemKind::Cell, 0..first + 1, Faults::default(), f, true).unwrap();
        let failure = s
            .failure
            .unwrap_or_else(|| panic!("{name}: not caught in seeds 0..={first}"));
        assert_eq!(failure.case.seed, first, "{name}");
    }
}

/// A scan's entries are checked even where the range-aware checker gives
/// up: each entry (and each key in its range it did not return) is a read
/// the per-key checker must place. A value planted into a recorded scan
/// fails the case; the recorded scans as they were pass.
#[test]
fn a_value_planted_in_a_recorded_scan_fails_the_case() {
    use nessie_protocol::Response;
    let seed = (0..50)
        .find(|&s| SwarmCase::for_system(s, SystemKind::Cell).scan_pct > 0)
        .unwrap();
    let run = SwarmCase::for_system(seed, SystemKind::Cell)
        .run(Faults::default())
        .unwrap();
    assert!(matches!(run.verdict, Verdict::Pass(_)), "{:?}", run.verdict);
    let mut report = run.report;
    let scan = report
        .scans
        .iter_mut()
        .find(|e| matches!(&e.ret, Ok(Response::Scan(got)) if !got.is_empty()))
        .expect("a scan that returned entries");
    if let Ok(Response::Scan(got)) = &mut scan.ret {
        got[0].1 = b"a value no PUT wrote".to_vec();
    }
    let verdict = nessie_sim::verdict_of(&report);
    assert!(
        matches!(
            verdict,
            Verdict::Fail(CaseFailure::NotLinearizable(_) | CaseFailure::ScansNotLinearizable(_))
        ),
        "{verdict:?}"
    );
}

/// A simulator gap the scans' cases exposed (Cell's case 4,914): a server
/// worker's local READ, posted just before the final sweep, waited for its
/// core behind four background threads until their next time slice ended,
/// 3 ms on, although the sweep stops them; the lone writer's 2 ms timeout
/// ran out first and the sweep reported a key unwritable. Now the sweep
/// completes such an access at once and frees every core.
#[test]
fn the_final_sweep_frees_the_cores_the_background_threads_held() {
    let case = SwarmCase::for_system(4_914, SystemKind::Cell).with_paired_workload_seeds();
    assert!(case.background_per_node > 0);
    let run = case.run(Faults::default()).unwrap();
    assert!(matches!(run.verdict, Verdict::Pass(_)), "{:?}", run.verdict);
}
