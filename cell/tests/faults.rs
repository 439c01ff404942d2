//! Each check of client-side search (§2.3-2.4) is shown necessary: with its
//! test-only fault switch on, a deterministic interleaving makes the client
//! return a wrong answer; with the check on, the same interleaving is
//! detected and the answer is right.
//!
//! - versions: a READ that overlapped the server's write of a leaf;
//! - min/max: a scan holding a pointer into X_right across a meganode split
//!   whose invalidated nodes are reused at once (`reuse_at_once`), with the
//!   scan's double collect off (it would catch the same scan: the relink
//!   changes the leaf read before the stale link). A point search needs
//!   neither: a reused node's range lies left of the key (X_right's keys
//!   never return to X), so it moves right, out of the reused node, to Y;
//! - CRC: an extent READ that overlapped the rewrite of a reused extent;
//! - scan validation (double collect): a scan across two leaves while a
//!   delete and a later insert land between its leaf READs, caught by the
//!   range-aware linearizability checker.

mod common;

use std::thread;
use std::time::Duration;

use common::*;
use nessie_cell::node::Node;
use nessie_cell::{extent, CellFaults, NodePtr, RegionId, SearchMode};
use nessie_check::ordered::check;
use nessie_check::Recorder;
use nessie_protocol::{Fabric, NodeId, Op, Region, Request, Response, WorkRequest};

fn is_read_of(wr: &WorkRequest, node: NodeId, offset: u64) -> bool {
    matches!(&wr.op, Op::Read { addr, .. } if addr.node == node && addr.offset == offset)
}

/// A leaf READ that overlapped the server's insert into that leaf, for
/// every word the server's body write could have reached.
fn torn_leaf_reads(skip_version_check: bool) -> (usize, usize) {
    let d = start(tiny());
    let mut w = client(&d, 0, 1, SearchMode::ServerOnly);
    for k in [1u64, 2, 4] {
        w.put(&key(k), &value_of(k)).unwrap();
    }
    let leaf = NodePtr::root_of(RegionId(1));
    let (host, at) = node_addr(&d, leaf);
    let nb = d.config().node_bytes as usize;
    let a = d
        .fabric()
        .read_bytes(host, Region::Data, at, nb as u64)
        .unwrap();
    w.put(&key(3), &value_of(3)).unwrap();
    let b = d
        .fabric()
        .read_bytes(host, Region::Data, at, nb as u64)
        .unwrap();
    assert!(
        Node::decode(&a, true).unwrap().leaf && Node::decode(&b, true).unwrap().entries.len() == 4
    );
    let old_v = u64::from_le_bytes(a[..8].try_into().unwrap());
    let (mut wrong, mut torn) = (0, 0);
    for cut in (16..nb - 8).step_by(8) {
        // Start version read before the write began, words below `cut`
        // already new, the rest still old, end version already odd.
        let mut t = a.clone();
        t[8..cut].copy_from_slice(&b[8..cut]);
        t[nb - 8..].copy_from_slice(&(old_v + 1).to_le_bytes());
        let (ep, gate) =
            PredicateEndpoint::new(d.fabric().open(NodeId(1)).unwrap(), move |_, wr| {
                is_read_of(wr, host, at)
            });
        let mut c = d.client_on(id(1, 0), ep).unwrap();
        c.set_mode(SearchMode::ClientOnly);
        c.set_faults(CellFaults {
            skip_version_check,
            ..CellFaults::default()
        });
        let reader = thread::spawn(move || {
            let got = c.get(&key(4));
            (got, c.stats().torn_reads)
        });
        let f = d.fabric();
        assert!(gate.at_pause(|_| f.write_bytes(host, Region::Data, at, &t).unwrap()));
        // Any later READ of the leaf (a re-read) finds the write finished.
        while gate.at_pause(|_| f.write_bytes(host, Region::Data, at, &b).unwrap()) {}
        let (got, t) = reader.join().unwrap();
        torn += t as usize;
        f.write_bytes(host, Region::Data, at, &b).unwrap();
        if got.ok().flatten() != Some(value_of(4)) {
            wrong += 1;
        }
    }
    (wrong, torn)
}

#[test]
fn version_check_rejects_every_torn_leaf_read() {
    let _limit = time_limit(
        "version_check_rejects_every_torn_leaf_read",
        "-",
        Duration::from_secs(120),
    );
    let (wrong, torn) = torn_leaf_reads(false);
    assert_eq!(wrong, 0);
    assert!(torn >= 20, "{torn} torn reads detected");
}

#[test]
fn teeth_without_the_version_check_a_torn_leaf_read_gives_a_wrong_answer() {
    let _limit = time_limit(
        "teeth_without_the_version_check_a_torn_leaf_read_gives_a_wrong_answer",
        "-",
        Duration::from_secs(120),
    );
    let (wrong, _) = torn_leaf_reads(true);
    assert!(wrong > 0, "no torn image fooled the client");
}

/// A scan paused before it follows X_left's last leaf into X_right; the
/// split runs and, with `reuse_at_once`, X_left's growth reuses X_right's
/// first leaf. Returns the scan's result and whether that node was reused.
fn scan_across_reused_node(
    reuse_at_once: bool,
    skip_minmax_check: bool,
) -> (nessie_cell::Entries, bool) {
    let mut cfg = manual();
    cfg.faults.reuse_at_once = reuse_at_once;
    // The scan stays paused across the whole split: no attempt deadline
    // (nor, without `reuse_at_once`, reuse grace) runs out meanwhile, so
    // only the node's own checks can save it.
    cfg.attempt_deadline = std::time::Duration::from_secs(60);
    cfg.node_reuse_grace = std::time::Duration::from_secs(60);
    let d = start(cfg);
    load(&d, 60);
    let split = split_key_of(&d, RegionId(1));
    // X_right's first leaf: the first child, level by level, of the root's
    // entry at the split key.
    let root = node_at(&d, NodePtr::root_of(RegionId(1)));
    let mut p = root
        .entries
        .iter()
        .find(|e| e.key == split)
        .unwrap()
        .child()
        .unwrap();
    loop {
        let n = node_at(&d, p);
        if n.leaf {
            break;
        }
        p = n.entries[0].child().unwrap();
    }
    let target = p;
    let (host, at) = node_addr(&d, target);
    let (ep, gate) = PredicateEndpoint::new(d.fabric().open(NodeId(1)).unwrap(), move |_, wr| {
        is_read_of(wr, host, at)
    });
    let mut c = d.client_on(id(1, 0), ep).unwrap();
    c.set_mode(SearchMode::ClientOnly);
    // The relink changes the leaf the scan read just before the stale link,
    // so the double collect alone would catch the scan too: it is off here,
    // to show what the min/max check catches by itself.
    c.set_faults(CellFaults {
        skip_minmax_check,
        skip_scan_validation: true,
        ..CellFaults::default()
    });
    let reader = thread::spawn(move || c.scan(&key(20), Some(&key(50)), 30));
    let mut reused = false;
    assert!(gate.at_pause(|_| {
        SplitStepper::new(&d, RegionId(1)).finish();
        // Grow X_left (keys below the scan) until X_right's first leaf is
        // reused as a leaf of X_left.
        let mut w = client(&d, 0, 0, SearchMode::ServerOnly);
        'grow: for i in 0..19u64 {
            for s in b'a'..=b'd' {
                let mut k = key(i);
                k.push(s);
                w.put(&k, b"x").unwrap();
                let n = node_at(&d, target);
                if n.valid && n.leaf && n.min != split {
                    reused = true;
                    break 'grow;
                }
            }
        }
    }));
    while gate.at_pause(|_| {}) {}
    (reader.join().unwrap().unwrap(), reused)
}

fn expected_scan() -> nessie_cell::Entries {
    (20..50).map(|i| (key(i), value_of(i))).collect()
}

#[test]
fn min_max_check_detects_a_reused_node_behind_a_stale_pointer() {
    let _limit = time_limit(
        "min_max_check_detects_a_reused_node_behind_a_stale_pointer",
        "-",
        Duration::from_secs(120),
    );
    let (got, reused) = scan_across_reused_node(true, false);
    assert!(reused, "the node was not reused");
    assert_eq!(got, expected_scan());
}

#[test]
fn teeth_without_the_min_max_check_a_reused_node_corrupts_a_scan() {
    let _limit = time_limit(
        "teeth_without_the_min_max_check_a_reused_node_corrupts_a_scan",
        "-",
        Duration::from_secs(120),
    );
    let (got, reused) = scan_across_reused_node(true, true);
    assert!(reused, "the node was not reused");
    assert_ne!(got, expected_scan());
}

#[test]
fn the_reuse_grace_alone_keeps_the_stale_pointer_on_an_invalid_node() {
    let _limit = time_limit(
        "the_reuse_grace_alone_keeps_the_stale_pointer_on_an_invalid_node",
        "-",
        Duration::from_secs(120),
    );
    // With the grace (the default), the node behind the stale pointer is
    // still invalid when the scan reads it: even without the min/max check
    // the valid flag restarts the scan. `reuse_at_once` is what exposes the
    // reincarnated node (previous two tests).
    let (got, reused) = scan_across_reused_node(false, true);
    assert!(!reused);
    assert_eq!(got, expected_scan());
}

/// An extent READ that overlapped the rewrite of the extent (reused for a
/// new value of the same key): half new, half old bytes.
fn torn_extent_read(skip_crc_check: bool) -> Option<Vec<u8>> {
    let d = start(tiny());
    let mut w = client(&d, 0, 1, SearchMode::ServerOnly);
    let (v1, v2) = (b"first-value-0001".to_vec(), b"other-value-0002".to_vec());
    w.put(&key(7), &v1).unwrap();
    let leaf = node_at(&d, NodePtr::root_of(RegionId(1)));
    let e = leaf.find(&key(7)).unwrap().extent().unwrap();
    let l = d.config().layout();
    let info = d.directory().snapshot().get(e.region).unwrap();
    let (host, at) = (info.node, l.slot_base(info.slot) + l.heap_offset(e.offset));
    let old = extent::encode(&key(7), &v1);
    let new = extent::encode(&key(7), &v2);
    let mut t = new.clone();
    t[16..].copy_from_slice(&old[16..]);
    let (ep, gate) = PredicateEndpoint::new(d.fabric().open(NodeId(1)).unwrap(), move |_, wr| {
        is_read_of(wr, host, at)
    });
    let mut c = d.client_on(id(1, 0), ep).unwrap();
    c.set_mode(SearchMode::ClientOnly);
    c.set_faults(CellFaults {
        skip_crc_check,
        ..CellFaults::default()
    });
    let reader = thread::spawn(move || c.get(&key(7)).unwrap());
    let f = d.fabric();
    assert!(gate.at_pause(|_| f.write_bytes(host, Region::Data, at, &t).unwrap()));
    while gate.at_pause(|_| f.write_bytes(host, Region::Data, at, &old).unwrap()) {}
    reader.join().unwrap()
}

#[test]
fn crc_check_rejects_a_torn_extent() {
    let _limit = time_limit(
        "crc_check_rejects_a_torn_extent",
        "-",
        Duration::from_secs(120),
    );
    assert_eq!(torn_extent_read(false), Some(b"first-value-0001".to_vec()));
}

#[test]
fn teeth_without_the_crc_check_a_torn_extent_is_returned() {
    let _limit = time_limit(
        "teeth_without_the_crc_check_a_torn_extent_is_returned",
        "-",
        Duration::from_secs(120),
    );
    let got = torn_extent_read(true).unwrap();
    assert_ne!(got, b"first-value-0001".to_vec());
    assert_ne!(got, b"other-value-0002".to_vec());
}

/// A client-side scan of two leaves; between its two leaf READs, another
/// client deletes a key of the first leaf and then inserts one into the
/// second. Returns whether the recorded history is linearizable.
fn scan_racing_a_delete_then_insert(skip_scan_validation: bool) -> bool {
    let d = start(tiny());
    let mut w = client(&d, 0, 1, SearchMode::ServerOnly);
    for i in (0..40).step_by(2) {
        w.put(&key(i), &value_of(i)).unwrap();
    }
    // The leaf holding key 20 and its right neighbour.
    let mut c0 = client(&d, 2, 0, SearchMode::ClientOnly);
    assert!(c0.contains(&key(20)).unwrap());
    let mut p = NodePtr::root_of(RegionId(1));
    let mut n = node_at(&d, p);
    while !n.leaf {
        let (c, _, _) = n.child_for(&key(20)).unwrap();
        p = c;
        n = node_at(&d, p);
    }
    let second = n.right;
    assert!(!second.is_null() && second.region == p.region);
    let first_key = n.entries.first().unwrap().key.clone();
    let second_leaf = node_at(&d, second);
    let mut inserted = second_leaf.entries[0].key.clone();
    inserted.push(b'+');
    let to = second_leaf.max.clone().unwrap_or_else(|| key(999));
    let (host, at) = node_addr(&d, second);
    let h = Recorder::new();
    let (ep, gate) = PredicateEndpoint::new(d.fabric().open(NodeId(1)).unwrap(), move |_, wr| {
        is_read_of(wr, host, at)
    });
    let mut c = d.client_on(id(1, 0), ep).unwrap();
    c.set_mode(SearchMode::ClientOnly);
    c.set_faults(CellFaults {
        skip_scan_validation,
        ..CellFaults::default()
    });
    let limit = 30;
    thread::scope(|s| {
        let from = first_key.clone();
        let to2 = to.clone();
        let h2 = &h;
        let reader = s.spawn(move || {
            h2.record(
                1,
                Request::Scan {
                    from: from.clone(),
                    to: Some(to2.clone()),
                    limit,
                },
                || {
                    let r = c.scan(&from, Some(&to2), limit).unwrap();
                    (Some(Ok(Response::Scan(r))), ())
                },
            )
        });
        assert!(gate.at_pause(|_| {
            h.record(0, Request::Delete(first_key.clone()), || {
                (
                    Some(Ok(Response::Delete(w.delete(&first_key).unwrap()))),
                    (),
                )
            });
            h.record(0, Request::Put(inserted.clone(), b"new".to_vec()), || {
                (
                    Some(Ok(Response::Put(w.put(&inserted, b"new").unwrap()))),
                    (),
                )
            });
        }));
        while gate.at_pause(|_| {}) {}
        reader.join().unwrap();
    });
    // The writes before the history: the preload, as one client's puts.
    let mut events = Vec::new();
    let mut t = 0;
    for i in (0..40).step_by(2) {
        events.push(nessie_check::Event {
            client: 9,
            request: Request::Put(key(i), value_of(i)),
            ret: Ok(Response::Put(false)),
            invoke: t,
            response: t + 1,
        });
        t += 2;
    }
    for mut e in h.events() {
        e.invoke += t;
        e.response += t;
        events.push(e);
    }
    check(&events, 10_000_000).is_ok()
}

#[test]
fn scan_validation_keeps_a_racing_scan_linearizable() {
    let _limit = time_limit(
        "scan_validation_keeps_a_racing_scan_linearizable",
        "-",
        Duration::from_secs(120),
    );
    assert!(scan_racing_a_delete_then_insert(false));
}

#[test]
fn teeth_without_scan_validation_the_checker_catches_a_torn_scan() {
    let _limit = time_limit(
        "teeth_without_scan_validation_the_checker_catches_a_torn_scan",
        "-",
        Duration::from_secs(120),
    );
    assert!(!scan_racing_a_delete_then_insert(true));
}
