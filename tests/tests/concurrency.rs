//! Many clients on a 3-node simulated cluster, every history checked for
//! linearizability: no lost acknowledged write, no value that was never
//! written, deletes stay deleted, every read explained by one total order.

use std::time::Duration;

use nessie_fabric_sim::{LatencyModel, TransferOrder};
use nessie_protocol::Config;
use nessie_tests::{assert_linearizable, run_workload, time_limit, SimCluster, Workload};

fn cfg() -> Config {
    Config {
        clients_per_node: 4,
        dtes_per_node: 4096,
        ..Config::default()
    }
}

fn check(cluster: &SimCluster, w: Workload) -> nessie_protocol::OpStats {
    let report = run_workload(cluster, &w);
    eprintln!(
        "{w:?}: {} ops, stats {} | attempts {} migrations {} recoveries {} helps {}",
        report.history.len(),
        report.stats,
        report.stats.attempts,
        report.stats.migrations,
        report.stats.recoveries,
        report.stats.helps
    );
    let unexpected: Vec<_> = report
        .errors
        .iter()
        .filter(|e| !e.contains("table full"))
        .collect();
    assert!(unexpected.is_empty(), "unexpected errors: {unexpected:?}");
    let n = assert_linearizable(&report.history);
    assert!(n > 0);
    report.stats
}

#[test]
fn hot_keys_under_contention() {
    let _limit = time_limit("hot_keys_under_contention", 1, Duration::from_secs(60));
    let cluster = SimCluster::new(cfg());
    check(&cluster, Workload::new(300, 3, 50, 10, 1));
}

#[test]
fn hot_keys_with_fabric_latency() {
    let _limit = time_limit("hot_keys_with_fabric_latency", 2, Duration::from_secs(60));
    let cluster = SimCluster::with_sim(cfg(), |s| {
        s.with_latency(LatencyModel::per_op(Duration::from_micros(20)))
    });
    check(&cluster, Workload::new(150, 2, 60, 10, 2));
}

#[test]
fn hot_keys_with_wide_cas_windows() {
    let _limit = time_limit("hot_keys_with_wide_cas_windows", 3, Duration::from_secs(60));
    let cluster = SimCluster::with_sim(cfg(), |s| s.with_yield_inside_cas(true));
    check(&cluster, Workload::new(300, 4, 40, 20, 3));
}

#[test]
fn large_key_set() {
    let _limit = time_limit("large_key_set", 4, Duration::from_secs(60));
    let cluster = SimCluster::new(cfg());
    check(&cluster, Workload::new(500, 2000, 50, 5, 4));
}

#[test]
fn tiny_index_tables_force_recursive_migrates() {
    let _limit = time_limit(
        "tiny_index_tables_force_recursive_migrates",
        5,
        Duration::from_secs(60),
    );
    // 3 nodes x 6 entries = 18 index table entries for up to 12 keys (load up
    // to 0.67 with N = 3): most PUTs of a new key must MIGRATE, often recursively.
    let small = Config {
        index_slots_per_node: 6,
        max_migrate_depth: 6,
        ..cfg()
    };
    let cluster = SimCluster::new(small);
    let stats = check(&cluster, Workload::new(250, 12, 40, 15, 5));
    assert!(stats.migrations > 0, "{stats:?}");
}

#[test]
fn tiny_index_tables_with_two_candidates() {
    let _limit = time_limit(
        "tiny_index_tables_with_two_candidates",
        6,
        Duration::from_secs(60),
    );
    let small = Config {
        index_slots_per_node: 5,
        candidates: 2,
        max_migrate_depth: 8,
        ..cfg()
    };
    let cluster = SimCluster::new(small);
    check(&cluster, Workload::new(200, 8, 40, 15, 6));
}

/// Multi-word transfers landing highest word first, or in a random order per
/// transfer (a NIC may split a transfer into packets that land in any
/// order), with CAS windows widened: readers see other tears than the
/// ascending order shows.
#[test]
fn hot_keys_with_transfers_landing_in_any_word_order() {
    let _limit = time_limit(
        "hot_keys_with_transfers_landing_in_any_word_order",
        "7, 8",
        Duration::from_secs(60),
    );
    for (order, seed) in [(TransferOrder::Descending, 7), (TransferOrder::Random, 8)] {
        let cluster = SimCluster::with_sim(cfg(), |s| {
            s.with_transfer_order(order).with_yield_inside_cas(true)
        });
        check(&cluster, Workload::new(200, 3, 50, 10, seed));
    }
}

#[test]
fn recursive_migrates_with_transfers_landing_in_random_word_order() {
    let _limit = time_limit(
        "recursive_migrates_with_transfers_landing_in_random_word_order",
        9,
        Duration::from_secs(60),
    );
    let small = Config {
        index_slots_per_node: 6,
        max_migrate_depth: 6,
        ..cfg()
    };
    let cluster = SimCluster::with_sim(small, |s| s.with_transfer_order(TransferOrder::Random));
    let stats = check(&cluster, Workload::new(200, 12, 40, 15, 9));
    assert!(stats.migrations > 0, "{stats:?}");
}
