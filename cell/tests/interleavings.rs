//! Exact interleavings of client reads with a meganode split: the split is
//! driven one round (or effect) at a time, and between any two of its steps
//! (and with a client search paused before any of its READs while the split
//! runs) every search, get and scan, in every mode, answers as if the split
//! were not happening.

mod common;

use std::time::Duration;

use common::*;
use nessie_cell::{NodePtr, RegionId, SearchMode, SplitOutcome};
use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::Fabric;

const KEYS: u64 = 60;

fn check_all(
    d: &Cell,
    clients: &mut [nessie_cell::CellClient<SimEndpoint>],
    split: &[u8],
    at: &str,
) {
    for c in clients.iter_mut() {
        for i in (0..KEYS).step_by(3) {
            assert_eq!(c.get(&key(i)).unwrap(), Some(value_of(i)), "{at}: get {i}");
        }
        assert!(c.contains(&key(KEYS - 1)).unwrap(), "{at}: search");
        assert!(!c.contains(b"k000000x").unwrap(), "{at}: absent search");
        // A scan across the split key.
        let got = c.scan(&key(20), Some(&key(50)), 30).unwrap();
        let want: Vec<_> = (20..50).map(|i| (key(i), value_of(i))).collect();
        assert_eq!(got, want, "{at}: scan across {split:?}");
    }
    assert!(
        d.server_errors().is_empty(),
        "{at}: {:?}",
        d.server_errors()
    );
}

fn loaded() -> (Cell, Vec<u8>) {
    let d = start(manual());
    load(&d, KEYS);
    let split = split_key_of(&d, RegionId(1));
    assert!(
        key(20) < split && split < key(50),
        "the split key {split:?} must fall inside the scan"
    );
    (d, split)
}

#[test]
fn reads_between_every_step_of_a_meganode_split_see_every_key() {
    let _limit = time_limit(
        "reads_between_every_step_of_a_meganode_split_see_every_key",
        "-",
        Duration::from_secs(120),
    );
    let (d, split) = loaded();
    let modes = [
        SearchMode::ClientOnly,
        SearchMode::ServerOnly,
        SearchMode::Selector,
    ];
    // Warm clients (caches filled before the split) and one fresh client per step.
    let mut warm: Vec<_> = modes
        .iter()
        .enumerate()
        // Each a client id of its own (two live clients never share one).
        .map(|(i, m)| {
            let (node, index) = [(1, 0), (1, 1), (0, 0)][i];
            client(&d, node, index, *m)
        })
        .collect();
    check_all(&d, &mut warm, &split, "before");
    let d = std::sync::Arc::new(d);
    let mut s = SplitStepper::new(&d, RegionId(1));
    let mut steps = 0;
    let mut torn_seen = 0;
    while let Some(did) = s.step() {
        steps += 1;
        let at = format!("after step {steps} ({did:?})");
        let mut fresh = vec![client(&d, 0, 1, SearchMode::ClientOnly)];
        if s.mid_write {
            // A node is half written: the reads must wait for the writer (they
            // see its versions odd or different), so they run while the
            // split goes on to the end of that node write.
            let d2 = d.clone();
            let split2 = split.clone();
            let t = std::thread::spawn(move || {
                check_all(&d2, &mut fresh, &split2, &at);
                fresh
            });
            // Give the reader time to meet the half-written node.
            std::thread::sleep(std::time::Duration::from_millis(3));
            while s.mid_write && s.step().is_some() {
                steps += 1;
            }
            let fresh = t.join().expect("reader");
            torn_seen += fresh[0].stats().torn_reads;
        } else {
            check_all(&d, &mut warm, &split, &at);
            check_all(&d, &mut fresh, &split, &at);
        }
    }
    assert!(torn_seen > 0, "no read ever met a half-written node");
    let Some(Ok(SplitOutcome::Split { new, .. })) = s.finished.clone() else {
        panic!("split failed: {:?}", s.finished)
    };
    assert!(steps > 20, "the split took only {steps} steps");
    // X now ends at the split key and links to the new meganode.
    let root = node_at(&d, NodePtr::root_of(RegionId(1)));
    assert_eq!(root.max.as_deref(), Some(split.as_slice()));
    assert_eq!(root.right, NodePtr::root_of(new));
}

/// The steps a split of the loaded tree takes.
fn split_steps() -> usize {
    let (d, _) = loaded();
    let mut s = SplitStepper::new(&d, RegionId(1));
    s.finish();
    s.steps
}

#[test]
fn a_client_search_paused_before_any_read_survives_the_split() {
    let _limit = time_limit(
        "a_client_search_paused_before_any_read_survives_the_split",
        "-",
        Duration::from_secs(120),
    );
    let total = split_steps();
    // Points of the split at which the paused search resumes.
    let points = [0, total / 4, total / 2, 3 * total / 4, total];
    for mode in [SearchMode::ClientOnly, SearchMode::Selector] {
        for pause_at in 1..=6 {
            for &upto in &points {
                let (d, split) = loaded();
                let (ep, gate) = PredicateEndpoint::new(
                    d.fabric().open(nessie_protocol::NodeId(1)).unwrap(),
                    move |n, _| n == pause_at,
                );
                let mut c = d.client_on(id(1, 0), ep).unwrap();
                c.set_mode(mode);
                let target = KEYS - 5; // in X_right
                let reader = std::thread::spawn(move || {
                    let got = c.get(&key(target));
                    let scan = c.scan(&key(20), Some(&key(50)), 30);
                    (got, scan)
                });
                let mut s = SplitStepper::new(&d, RegionId(1));
                let paused = gate.at_pause(|_| {
                    for _ in 0..upto {
                        s.step();
                    }
                });
                // Later posts (if any) go on without pausing.
                let (got, scan) = reader.join().expect("reader");
                s.finish();
                let at = format!("{mode:?}, paused before post {pause_at} (paused: {paused}), split resumed at {upto}/{total}");
                assert_eq!(got.unwrap(), Some(value_of(target)), "{at}");
                let want: Vec<_> = (20..50).map(|i| (key(i), value_of(i))).collect();
                assert_eq!(scan.unwrap(), want, "{at}: scan across {split:?}");
            }
        }
    }
}
