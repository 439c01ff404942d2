//! The simulator is a function of its specification: the same seed gives
//! the same run event for event, another seed another run; and its figures
//! follow the hardware (a faster profile, lower latencies).

use nessie_sim::{simulate, SimSpec, MODERN, TPDS};

fn spec(seed: u64) -> SimSpec {
    SimSpec {
        profile: TPDS,
        nodes: 3,
        clients_per_node: 3,
        keys: 500,
        key_size: 16,
        value_size: 1024,
        get_pct: 50,
        seconds: 0.01,
        load_factor: 0.5,
        seed,
    }
}

#[test]
fn the_same_seed_replays_exactly() {
    let a = simulate(&spec(7)).unwrap();
    let b = simulate(&spec(7)).unwrap();
    assert!(a.ops > 1_000, "{a:?}");
    assert_eq!(a.failures, 0, "{a:?}");
    assert_eq!(a.fingerprint(), b.fingerprint());
    let c = simulate(&spec(8)).unwrap();
    assert_ne!(a.fingerprint(), c.fingerprint());
}

#[test]
fn a_faster_fabric_gives_lower_latencies_and_more_operations() {
    let tpds = simulate(&spec(1)).unwrap();
    let modern = simulate(&SimSpec {
        profile: MODERN,
        ..spec(1)
    })
    .unwrap();
    assert!(
        modern.get_avg_us < tpds.get_avg_us,
        "{modern:?} vs {tpds:?}"
    );
    assert!(modern.ops > tpds.ops, "{modern:?} vs {tpds:?}");
    // A quiet GET costs about one or two round trips, a PUT about three.
    assert!(
        tpds.round_trips_per_op > 1.0 && tpds.round_trips_per_op < 5.0,
        "{tpds:?}"
    );
}

#[test]
fn bad_specifications_are_typed_errors() {
    assert!(simulate(&SimSpec {
        nodes: 0,
        ..spec(1)
    })
    .is_err());
    assert!(simulate(&SimSpec {
        load_factor: 0.99,
        ..spec(1)
    })
    .is_err());
    assert!(simulate(&SimSpec {
        keys: 10_000_000,
        value_size: 1 << 20,
        ..spec(1)
    })
    .is_err());
}
