//! What the swarm's test files share: a fault switch caught at a pinned
//! seed.

use nessie_protocol::Faults;
use nessie_sim::{ServerFaults, SwarmCase, System, Verdict};

/// Case `seed` of `system` fails with the server-driven systems' switch
/// `name` on, the verdict saying `shows`, and passes with it off.
pub fn switch_caught_at(system: System, name: &str, seed: u64, shows: &str) {
    let case = SwarmCase::for_system(seed, system);
    let mut broken = case.clone();
    broken.server_faults = ServerFaults::named(&[name]).unwrap();
    let run = broken.run(Faults::default()).unwrap();
    assert!(
        matches!(run.verdict, Verdict::Fail(ref m) if m.contains(shows)),
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
