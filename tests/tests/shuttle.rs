//! Whole-cluster scenarios under shuttle's schedulers: 3 to 6 client threads,
//! every fabric word access a scheduling point (the simulator's
//! `schedule_point` hook), thousands of seeded schedules, each history checked
//! for linearizability. A failing schedule panics with shuttle's replay string
//! (replay it with `shuttle::replay`).
//!
//! Deeper runs on demand: `NESSIE_SHUTTLE_ITERATIONS=100000 cargo test --release
//! -p nessie-tests --test shuttle`.

use std::time::Duration;

use nessie_protocol::{Faults, IteAddr, NodeId};
use nessie_tests::schedules::{base, iterations, pct, random, Scenario, Step};
use nessie_tests::{find_key, time_limit};

fn slot(s: u32) -> IteAddr {
    IteAddr {
        node: NodeId(0),
        slot: s,
    }
}

/// Three nodes, one client each, two hot keys, an index of 2 entries per node
/// with N = 3: PUTs, GETs and DELETEs on the same keys, MIGRATEs likely.
fn three_clients_hot_keys() -> Scenario {
    let cfg = base(3, 2, 3, 2);
    let (a, b) = (b"a".to_vec(), b"b".to_vec());
    Scenario {
        cfg,
        clients: vec![
            (
                0,
                0,
                vec![
                    Step::Put(a.clone(), "a0"),
                    Step::Get(b.clone()),
                    Step::Delete(a.clone()),
                ],
                Faults::default(),
            ),
            (
                1,
                0,
                vec![
                    Step::Put(b.clone(), "b1"),
                    Step::Get(a.clone()),
                    Step::Put(a.clone(), "a1"),
                ],
                Faults::default(),
            ),
            (
                2,
                0,
                vec![
                    Step::Get(a.clone()),
                    Step::Put(b.clone(), "b2"),
                    Step::Get(b.clone()),
                ],
                Faults::default(),
            ),
        ],
        preload: vec![(b"c".to_vec(), "c"), (b"d".to_vec(), "d")],
    }
}

/// Six clients on three nodes, three keys, a crowded index.
fn six_clients() -> Scenario {
    let cfg = base(3, 3, 3, 3);
    let keys: Vec<Vec<u8>> = [b"p", b"q", b"r"].iter().map(|k| k.to_vec()).collect();
    let mut clients = Vec::new();
    for id in 0..6u16 {
        let k = &keys[usize::from(id) % 3];
        let other = &keys[usize::from(id + 1) % 3];
        let v: &'static str = ["v0", "v1", "v2", "v3", "v4", "v5"][usize::from(id)];
        clients.push((
            id % 3,
            id / 3,
            vec![Step::Put(k.clone(), v), Step::Get(other.clone())],
            Faults::default(),
        ));
    }
    Scenario {
        cfg,
        clients,
        preload: vec![],
    }
}

/// Two PUTs of an absent key while a third client deletes the key occupying
/// its first candidate (the race the PUT reverse pass exists for).
fn puts_race_a_delete(faults: Faults) -> Scenario {
    let cfg = base(1, 3, 2, 4);
    let k = find_key(&cfg, "k", |c| c == [slot(0), slot(1)]);
    let x = find_key(&cfg, "x", |c| c == [slot(0), slot(2)]);
    Scenario {
        cfg,
        clients: vec![
            (
                0,
                0,
                vec![Step::Put(k.clone(), "A"), Step::Get(k.clone())],
                faults,
            ),
            (
                0,
                1,
                vec![Step::Put(k.clone(), "B"), Step::Get(k.clone())],
                faults,
            ),
            (0, 2, vec![Step::Delete(x.clone())], Faults::default()),
        ],
        preload: vec![(x, "x")],
    }
}

#[test]
fn three_clients_on_hot_keys_random_schedules() {
    let _limit = time_limit(
        "three_clients_on_hot_keys_random_schedules",
        1,
        Duration::from_secs(120),
    );
    random(three_clients_hot_keys(), 1, iterations(3000));
}

#[test]
fn three_clients_on_hot_keys_pct_schedules() {
    let _limit = time_limit(
        "three_clients_on_hot_keys_pct_schedules",
        2,
        Duration::from_secs(120),
    );
    pct(three_clients_hot_keys(), 2, iterations(3000), 3);
}

#[test]
fn six_clients_random_and_pct_schedules() {
    let _limit = time_limit(
        "six_clients_random_and_pct_schedules",
        "3, 4",
        Duration::from_secs(120),
    );
    random(six_clients(), 3, iterations(1000));
    pct(six_clients(), 4, iterations(1000), 3);
}

#[test]
fn racing_puts_stay_linearizable() {
    let _limit = time_limit("racing_puts_stay_linearizable", 5, Duration::from_secs(120));
    random(puts_race_a_delete(Faults::default()), 5, iterations(3000));
}

/// A writer updates one key four times with a share of two data table entries
/// while two clients on another node read it through their caches. Nothing
/// expires (manual clock): correctly, the writer's third PUT finds no free
/// entry and fails; with hasty reuse it rewrites the first entry, and the
/// index word naming it is the same as when the readers cached it.
fn cached_readers(faults: Faults) -> Scenario {
    let mut cfg = base(2, 4, 2, 2);
    cfg.cache_capacity = 8;
    cfg.dtes_per_node = 4;
    let k = b"k".to_vec();
    let writes = vec![
        Step::Put(k.clone(), "a"),
        Step::Put(k.clone(), "b"),
        Step::Put(k.clone(), "c"),
        Step::Put(k.clone(), "d"),
    ];
    // Readers keep reading for as long as the writer writes.
    let reads = vec![Step::Get(k.clone()); 12];
    Scenario {
        cfg,
        clients: vec![
            (0, 0, writes, faults),
            (1, 0, reads.clone(), Faults::default()),
            (1, 1, reads, Faults::default()),
        ],
        preload: vec![],
    }
}

#[test]
fn cached_readers_stay_linearizable() {
    let _limit = time_limit(
        "cached_readers_stay_linearizable",
        6,
        Duration::from_secs(120),
    );
    random(cached_readers(Faults::default()), 6, iterations(2000));
}

#[test]
fn shuttle_and_the_history_checker_catch_reuse_before_expiry() {
    let _limit = time_limit(
        "shuttle_and_the_history_checker_catch_reuse_before_expiry",
        6,
        Duration::from_secs(120),
    );
    // With the incarnation tags off too, as every checker hunts a switch
    // they cover (`Faults::for_catching`).
    let broken = cached_readers(
        Faults {
            reuse_before_expiry: true,
            ..Faults::default()
        }
        .for_catching(),
    );
    // Shuttle's panic hook reports this expected failure with a replay string.
    let caught = std::panic::catch_unwind(move || random(broken, 6, 1000)).is_err();
    assert!(caught, "no schedule exposed the early reuse");
}
