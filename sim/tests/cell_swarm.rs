//! Cell in the fault swarm (issue 25): its clients, server workers and
//! maintenance threads (meganode splits, with their requests to other
//! servers) run as the same sans-IO machines the threaded deployment runs,
//! under the swarm's network faults, client crashes, pauses, outages and
//! skew, with trees small enough that a handful of keys split leaves and
//! meganodes while the faults strike; every history goes through the
//! linearizability checker, every operation must end, and a lone writer
//! after the faults must find every key writable. Each switch that breaks
//! what the swarm can see is caught from seed 0 (`nessie swarm --system
//! cell --server-faults NAME` stops at the seed pinned here).
//!
//! What the swarm does not do for Cell: crash a server (a Cell server's
//! failure is its node's, recovered by the survivors from the region logs,
//! which the simulator does not run; `cell/tests/recovery_stories.rs`
//! cuts a split at every durable step instead), or run range scans.

use std::time::Duration;

use nessie_model::time_limit;
use nessie_protocol::Faults;
use nessie_sim::{swarm_system, ServerFaults, SwarmCase, System, Verdict};

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
        System::Cell,
        0..CELL_CASES,
        Faults::default(),
        ServerFaults::default(),
        false,
    )
    .unwrap();
    if let Some(f) = &s.failure {
        panic!(
            "case {} fails: {:?}\nreplay: {}",
            f.case.seed,
            f.verdict,
            serde_json::to_string(&f.case).unwrap()
        );
    }
    assert_eq!(s.inconclusive, 0, "{s:?}");
    assert_eq!(s.passed, CELL_CASES as usize);
    assert!(s.ok());
    assert!(s.min_checked.is_some_and(|m| m >= 4), "{s:?}");
    // Measured: 529,097 operations checked; 9,306 client crashes; 3,712
    // lost completions; 3,776 errors whose requests were left to land
    // (3,581 landed); 4,727 mutations refused at their landing deadline;
    // 12,024 unknown outcomes; 90,578 torn transfers (864 stopped part
    // placed); 58,749 requests failed with their queue pair; 560 node
    // splits and 200 meganode splits.
    assert!(s.checked_ops > 400_000, "{s:?}");
    assert!(s.crashes > 7_000, "{s:?}");
    assert!(s.lost_completions > 2_500, "{s:?}");
    assert!(s.orphans_landed > 2_500, "{s:?}");
    assert!(s.landing_deadline_refusals > 3_000, "{s:?}");
    assert!(s.unknown_ops > 8_000, "{s:?}");
    assert!(s.torn > 60_000, "{s:?}");
    assert!(s.partly_placed > 500, "{s:?}");
    assert!(s.link_errors > 40_000, "{s:?}");
    assert!(s.node_splits > 400, "{s:?}");
    assert!(s.migrations > 150, "meganode splits: {s:?}");
    assert_eq!(s.late_completions, 0, "Nessie's only");
    assert_eq!(s.server_crashes, 0, "not drawn for Cell");
}

/// Cell's switches the swarm catches, and the first seed that shows each
/// (searching from seed 0), with what the oracle reports there:
/// - `skip-claims` (Cell's `unclaimed_writes`): a write its client gave up
///   on and reported as not committed still runs; a GET returns its value.
/// - `skip-checksums` (`skip_crc_check`): a GET returns a torn extent.
/// - `skip-message-checks`: a server takes a slot two torn request WRITEs
///   mixed and answers a write with a GET's reply (a corrupt state).
/// - `unbounded-rounds` (`unbounded_rounds`): a client round whose
///   completion is lost waits for good; operations never finish. Found by
///   this swarm before it had a switch: Cell's client machines had no bound
///   on a round, in the simulator and in the threaded client alike.
/// - `cancel-before-landing`: a restarted client's first request and a
///   cancel that does not wait out the landing bound; at seed 4,645 the
///   lone writer's PUT is never answered (not traced further: the switch is
///   the only difference between the failing and the passing run).
const CELL_TEETH: [(&str, u64); 5] = [
    ("skip-claims", 1),
    ("skip-checksums", 105),
    ("skip-message-checks", 130),
    ("unbounded-rounds", 3),
    ("cancel-before-landing", 4_645),
];

#[test]
fn the_swarm_catches_each_cell_switch_at_the_seed_that_shows_it() {
    let _limit = time_limit(
        "the_swarm_catches_each_cell_switch_at_the_seed_that_shows_it",
        "CELL_TEETH",
        Duration::from_secs(120),
    );
    for (name, seed) in CELL_TEETH {
        let case = SwarmCase::for_system(seed, System::Cell);
        let mut broken = case.clone();
        broken.server_faults = ServerFaults::named(&[name]).unwrap();
        let run = broken.run(Faults::default()).unwrap();
        assert!(
            matches!(run.verdict, Verdict::Fail(_)),
            "{name} at {seed}: {:?}",
            run.verdict
        );
        let correct = case.run(Faults::default()).unwrap();
        assert!(
            matches!(correct.verdict, Verdict::Pass(_)),
            "{name}: the correct Cell at {seed}: {:?}",
            correct.verdict
        );
    }
}

/// The cheapest switches are caught from seed 0 by the swarm itself (the
/// others' seeds are checked one by one above: a search from 0 to 4,645
/// would cost most of a minute).
#[test]
fn a_search_from_seed_zero_stops_at_the_pinned_seed() {
    for (name, first) in CELL_TEETH.into_iter().filter(|&(_, s)| s < 200) {
        let f = ServerFaults::named(&[name]).unwrap();
        let s = swarm_system(System::Cell, 0..first + 1, Faults::default(), f, true).unwrap();
        let failure = s
            .failure
            .unwrap_or_else(|| panic!("{name}: not caught in seeds 0..={first}"));
        assert_eq!(failure.case.seed, first, "{name}");
    }
}
