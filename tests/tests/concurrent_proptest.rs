//! Concurrent random workloads are linearizable: proptest generates three
//! clients' programs (keys biased toward a few hot keys, tiny index tables)
//! and a shuttle seed; shuttle runs the schedules deterministically, so a
//! failure shrinks to a minimal program and seed.

use std::time::Duration;

use nessie_protocol::Faults;
use nessie_tests::schedules::{base, random, Scenario, Step};
use nessie_tests::time_limit;
use proptest::prelude::*;
use proptest::test_runner::{
    Config as PropConfig, RngAlgorithm, TestCaseError, TestRng, TestRunner,
};

const VALUES: [&str; 16] = [
    "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14",
    "v15",
];

/// (op kind, key) per step; three clients of up to four steps.
type Programs = Vec<Vec<(u8, usize)>>;

fn programs() -> impl Strategy<Value = Programs> {
    let key = prop::sample::select(vec![0usize, 0, 0, 0, 0, 1, 1, 1, 2, 3]);
    let step = (0u8..3, key);
    prop::collection::vec(prop::collection::vec(step, 1..=4), 3)
}

/// Client 0 only writes (three to five PUTs); the others mostly read.
fn writer_and_readers() -> impl Strategy<Value = Programs> {
    let key = prop::sample::select(vec![0usize, 0, 0, 1]);
    let write = (Just(1u8), key.clone());
    let read_mostly = (prop::sample::select(vec![0u8, 0, 0, 1]), key);
    (
        prop::collection::vec(write, 3..=4),
        prop::collection::vec(prop::collection::vec(read_mostly, 2..=4), 2),
    )
        .prop_map(|(w, mut r)| {
            r.insert(0, w);
            r
        })
}

fn scenario(progs: &Programs, cache: bool, faults: Faults) -> Scenario {
    let mut cfg = base(3, 2, 3, 2);
    if cache {
        cfg.cache_capacity = 8;
        cfg.dtes_per_node = 4;
    }
    let clients = progs
        .iter()
        .enumerate()
        .map(|(c, prog)| {
            let steps = prog
                .iter()
                .enumerate()
                .map(|(i, &(kind, key))| {
                    let k = format!("k{key}").into_bytes();
                    match kind {
                        0 => Step::Get(k),
                        1 => Step::Put(k, VALUES[c * 4 + i]),
                        _ => Step::Delete(k),
                    }
                })
                .collect();
            (
                c as u16,
                0,
                steps,
                if c == 0 { faults } else { Faults::default() },
            )
        })
        .collect();
    Scenario {
        cfg,
        clients,
        preload: vec![],
    }
}

fn check(
    progs: &Programs,
    seed: u64,
    cache: bool,
    faults: Faults,
    schedules: usize,
) -> Result<(), TestCaseError> {
    let s = scenario(progs, cache, faults);
    std::panic::catch_unwind(move || random(s, seed, schedules)).map_err(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(msg)
    })
}

proptest! {
    #![proptest_config(PropConfig { cases: 48, failure_persistence: None, ..PropConfig::default() })]

    #[test]
    fn random_concurrent_workloads_are_linearizable(progs in programs(), seed in any::<u64>()) {
        let _limit = time_limit("random_concurrent_workloads_are_linearizable", seed, Duration::from_secs(60));
        check(&progs, seed, false, Faults::default(), 8)?;
    }

    #[test]
    fn random_concurrent_workloads_with_caches_are_linearizable(progs in programs(), seed in any::<u64>()) {
        let _limit = time_limit("random_concurrent_workloads_with_caches_are_linearizable", seed, Duration::from_secs(60));
        check(&progs, seed, true, Faults::default(), 8)?;
    }
}

#[test]
fn a_broken_variant_fails_and_shrinks_to_a_small_counterexample() {
    let _limit = time_limit(
        "a_broken_variant_fails_and_shrinks_to_a_small_counterexample",
        "ChaCha deterministic",
        Duration::from_secs(300),
    );
    // Hunted as every checker hunts a switch the incarnation tags cover:
    // with the tags off too (with them a reused entry's word is new, so an
    // early reuse is harmless short of their wrap).
    let faults = Faults {
        reuse_before_expiry: true,
        ..Faults::default()
    }
    .for_catching();
    let config = PropConfig {
        cases: 256,
        failure_persistence: None,
        ..PropConfig::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let result = runner.run(&(writer_and_readers(), any::<u64>()), |(progs, seed)| {
        check(&progs, seed, true, faults, 64)
    });
    match result {
        Err(proptest::test_runner::TestError::Fail(_, (progs, seed))) => {
            let steps: usize = progs.iter().map(Vec::len).sum();
            eprintln!("minimal counterexample ({steps} steps, seed {seed}): {progs:?}");
            // The generator's floor is 7 steps (3 writes, 2 + 2 reads).
            assert!(steps <= 9, "shrinking left {steps} steps");
        }
        other => panic!("the early-reuse variant was not caught: {other:?}"),
    }
}
