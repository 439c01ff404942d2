//! Concurrent clients in every search mode on hot keys, with range scans,
//! while filler inserts split nodes and meganodes underneath them: the
//! recorded history is linearizable, by the project's per-key checker (point
//! operations) and by Cell's range-aware checker (everything).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use nessie_cell::SearchMode;

fn run(ops: usize, seed: u64, workers: u16) -> (usize, nessie_cell::TreeShape) {
    let mut cfg = tiny();
    cfg.clients_per_node = 3;
    cfg.server_workers = workers;
    let d = Arc::new(start(cfg));
    let modes = [
        SearchMode::ServerOnly,
        SearchMode::ClientOnly,
        SearchMode::Selector,
    ];
    let mut players = Vec::new();
    let mut fillers = Vec::new();
    for n in 0..3u16 {
        for i in 0..2u16 {
            let me = (n * 2 + i) as usize;
            players.push((me, client(&d, n, i, modes[me % 3])));
        }
        fillers.push((n, client(&d, n, 2, modes[n as usize])));
    }
    let events = islands(players, fillers, ops, seed);
    assert!(d.server_errors().is_empty(), "{:?}", d.server_errors());
    (check_both(&events), d.shape())
}

fn seed() -> u64 {
    std::env::var("CELL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xce11)
}

#[test]
fn concurrent_gets_puts_deletes_and_scans_across_splits_are_linearizable() {
    let _limit = time_limit(
        "concurrent_gets_puts_deletes_and_scans_across_splits_are_linearizable",
        seed(),
        Duration::from_secs(120),
    );
    let (n, shape) = run(250, seed(), 1);
    assert!(n >= 6 * 250, "{n}");
    // The history ran across node and meganode splits.
    assert!(
        shape.meganode_splits >= 2 && shape.node_splits >= 10,
        "{shape:?}"
    );
}

#[test]
fn with_several_workers_per_server_too() {
    let _limit = time_limit(
        "with_several_workers_per_server_too",
        seed() ^ 0x77,
        Duration::from_secs(120),
    );
    // Two workers per node write into one meganode at once: the server's
    // node locks, not one thread, keep them apart (and node 0 changes level
    // under a writer that read it as a leaf).
    let (n, shape) = run(250, seed() ^ 0x77, 2);
    assert!(n >= 6 * 250, "{n}");
    assert!(
        shape.meganode_splits >= 2 && shape.node_splits >= 10,
        "{shape:?}"
    );
}
