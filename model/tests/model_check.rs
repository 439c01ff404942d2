//! Exhaustive model checking of the real protocol state machines in small
//! worlds (stateright), and the broken protocol variants each world catches.

use std::sync::Mutex;
use std::time::Instant;

use nessie_model::world::World;
use nessie_model::worlds;
use nessie_protocol::Faults;
use stateright::{Checker, Model};

/// Explores `w` exhaustively (breadth first, 2 threads; one world at a time) and returns the
/// properties for which a counterexample (or, for `sometimes`, an example) exists.
/// Explorations run one at a time: each uses both cores and its own memory.
static EXCLUSIVE: Mutex<()> = Mutex::new(());

fn explore(w: World) -> (usize, Vec<&'static str>) {
    let name = w.name.clone();
    let _one_at_a_time = EXCLUSIVE.lock().unwrap_or_else(|e| e.into_inner());
    let t = Instant::now();
    let c = w.checker().threads(2).spawn_bfs().join();
    assert!(c.is_done(), "{name}: exploration did not finish");
    let secs = t.elapsed().as_secs_f64();
    let n = c.unique_state_count();
    eprintln!(
        "{name}: {n} unique states, max depth {}, {secs:.2} s, {:.0} states/s",
        c.max_depth(),
        c.state_count() as f64 / secs.max(1e-9)
    );
    let found = c
        .model()
        .properties()
        .iter()
        .map(|p| p.name)
        .filter(|&p| c.discovery(p).is_some())
        .collect();
    (n, found)
}

fn holds(w: World) -> usize {
    let name = w.name.clone();
    let expected_examples: Vec<&str> = w
        .properties()
        .iter()
        .filter(|p| matches!(p.expectation, stateright::Expectation::Sometimes))
        .map(|p| p.name)
        .collect();
    let (n, found) = explore(w);
    assert_eq!(found, expected_examples, "{name}: a property failed");
    n
}

#[test]
fn ci_worlds_hold_every_property_and_their_sizes_are_pinned() {
    // Unique state counts: a change means the protocol or the model changed;
    // update them deliberately (and docs/verification.md).
    let pinned = [
        ("two-writers-one-key", 8_359),
        ("three-candidates", 4_067),
        ("migrate", 2_836),
        ("recursive-migrate", 252),
        ("crash-and-reclaim", 133_881),
        ("three-clients-two-keys", 1_173_105),
    ];
    let worlds = worlds::ci_worlds();
    assert_eq!(worlds.len(), pinned.len());
    for (w, (name, count)) in worlds.into_iter().zip(pinned) {
        assert_eq!(w.name, name);
        assert_eq!(holds(w), count, "{name}: unique state count changed");
    }
}

fn broken(w: World, expected: &str) {
    let name = w.name.clone();
    let (_, found) = explore(w);
    assert!(
        found.contains(&expected),
        "{name}: the broken variant was not caught ({found:?})"
    );
}

#[test]
fn get_without_its_reverse_pass_is_caught() {
    holds(worlds::get_races_migrate(Faults::default()));
    broken(
        worlds::get_races_migrate(Faults {
            skip_get_reverse_pass: true,
            ..Faults::default()
        }),
        "linearizable",
    );
}

#[test]
fn put_without_its_reverse_pass_is_caught() {
    holds(worlds::puts_race_a_delete(Faults::default()));
    let w = worlds::puts_race_a_delete(Faults {
        skip_put_verify: true,
        ..Faults::default()
    });
    broken(w.clone(), "one committed version per key");
    broken(w, "linearizable");
}

#[test]
fn migrate_without_its_rollback_is_caught() {
    holds(worlds::migrate_install_fails(Faults::default()));
    broken(
        worlds::migrate_install_fails(Faults {
            skip_migrate_rollback: true,
            ..Faults::default()
        }),
        "no linked entry is reused",
    );
}

#[test]
fn reusing_an_entry_before_it_expires_is_caught() {
    holds(worlds::cached_reader(Faults::default()));
    broken(
        worlds::cached_reader(Faults {
            reuse_before_expiry: true,
            ..Faults::default()
        }),
        "linearizable",
    );
}

#[test]
fn commit_by_nic_cas_survives_an_overrunning_owner_but_a_cpu_store_does_not() {
    let overrun = Faults {
        ignore_deadline: true,
        ..Faults::default()
    };
    holds(worlds::late_owner_commit(Faults::default()));
    holds(worlds::late_owner_commit(overrun));
    broken(
        worlds::late_owner_commit(Faults {
            cpu_state_flip: true,
            ..overrun
        }),
        "linearizable",
    );
}

#[test]
fn what_the_timing_assumptions_buy() {
    // A2 held and deadlines respected: safe.
    holds(worlds::late_migrate_install(Faults::default(), false));
    // A2 violated: an install CAS posted in time lands after a reclaim.
    broken(
        worlds::late_migrate_install(Faults::default(), true),
        "linearizable",
    );
    // The owner ignores its deadline and installs after a reclaim.
    broken(
        worlds::late_migrate_install(
            Faults {
                ignore_deadline: true,
                ..Faults::default()
            },
            false,
        ),
        "linearizable",
    );
}
