//! What the swarm's test files share: a fault switch caught at a pinned
//! seed (and only through the fault that reaches it), and a summary with no
//! failing case.

use nessie_protocol::Faults;
use nessie_sim::{ServerFaults, SwarmCase, SwarmSummary, Verdict};
use nessie_systems::SystemKind;

/// Panics with the first failing case of `s` (`what` names the run) and the
/// JSON that replays it, if there is one.
pub fn no_failure(s: &SwarmSummary, what: &str) {
    if let Some(f) = &s.failure {
        panic!(
            "{what}: case {} fails: {:?}\nreplay: {}",
            f.case.seed,
            f.verdict,
            serde_json::to_string(&f.case).unwrap()
        );
    }
}

/// [`switch_caught_at`], and the same case with the fault kind `fault` (a
/// name from `Chaos::kinds`, which the case must draw) turned off passes
/// with the switch on: that fault is what reaches the switch's bug.
pub fn switch_caught_only_with(
    system: SystemKind,
    name: &str,
    seed: u64,
    fault: &str,
    shows: &str,
) {
    switch_caught_at(system, name, seed, shows);
    let mut without = SwarmCase::for_system(seed, system).with_paired_workload_seeds();
    assert!(
        without.chaos.kinds().contains(&fault),
        "{system} {seed}: no {fault}"
    );
    without.chaos = without.chaos.without(fault);
    without.server_faults = ServerFaults::named(&[name]).unwrap();
    let run = without.run(Faults::default()).unwrap();
    assert!(
        matches!(run.verdict, Verdict::Pass(_)),
        "{system} {name} at {seed} without {fault}: {:?}",
        run.verdict
    );
}

/// Case `seed` of `system`, as pinned before 2026-11-30 (its workload drawn
/// with that day's seeding: `SwarmCase::with_paired_workload_seeds`), fails
/// with the server-driven systems' switch `name` on, the verdict saying
/// `shows`, and passes with it off.
pub fn switch_caught_at(system: SystemKind, name: &str, seed: u64, shows: &str) {
    switch_caught_in(
        SwarmCase::for_system(seed, system).with_paired_workload_seeds(),
        name,
        shows,
    );
}

/// `case` fails with the server-driven systems' switch `name` on, the
/// verdict saying `shows`, and passes with it off.
pub fn switch_caught_in(case: SwarmCase, name: &str, shows: &str) {
    let (system, seed) = (case.system, case.seed);
    let mut broken = case.clone();
    broken.server_faults = ServerFaults::named(&[name]).unwrap();
    let run = broken.run(Faults::default()).unwrap();
    assert!(
        matches!(run.verdict, Verdict::Fail(ref m) if m.to_string().contains(shows)),
        "{system} {name} at {seed}, expected {shows:?}: {:?}",
        run.verdict
    );
    let correct = case.run(Faults::default()).unwrap();
    assert!(
        matches!(correct.verdict, Verdict::Pass(_)),
        "{system} at {seed}: {:?}",
        correct.verdict
    );
}
