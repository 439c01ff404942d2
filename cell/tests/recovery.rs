//! Failure recovery (§2.6): a failed server's regions are rebuilt by the
//! survivors from the per-region logs; every acknowledged write survives.
//! Splits cut short by the failure are rolled forward once their copy is
//! logged (`SplitCopied`) and undone before (the new meganode is an orphan
//! and is dropped). Issue 25's holes 1 and 2 as exact interleavings: a
//! write through a stale path while recovery is stopped after its rebuild
//! (`recovery_opens_early`), and X's server dying between `SplitFinish`
//! and opening Y (`recovery_forgets_finished_splits`); every cut point is
//! in `recovery_stories.rs`. Without recovery, operations that need the
//! dead node's meganodes fail with `Unreachable` after a grace period.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::*;
use nessie_cell::{CellConfig, NodePtr, RecoveryStage, RegionId, SearchMode};
use nessie_fabric_sim::SimFabric;
use nessie_protocol::{Error, Fabric, NodeId, Op, Outcome};

fn logged(dir: &std::path::Path, base: CellConfig) -> CellConfig {
    CellConfig {
        log_dir: Some(dir.to_path_buf()),
        ..base
    }
}

/// Three servers, logged to `dir`, splits by hand ([`manual`]).
fn three_logged_servers(dir: &std::path::Path) -> CellConfig {
    CellConfig {
        nodes: 3,
        server_nodes: 3,
        ..logged(dir, manual())
    }
}

fn fail(d: &mut Cell, node: u16) {
    d.fail_node(NodeId(node));
    d.fabric().set_node_down(NodeId(node), true).unwrap();
}

fn all_present(d: &Cell, n: u64, node: u16, mode: SearchMode) {
    let mut c = client(d, node, 0, mode);
    for i in 0..n {
        assert_eq!(
            c.get(&key(i)).unwrap(),
            Some(value_of(i)),
            "key {i} ({mode:?})"
        );
    }
    let got = c.scan(&key(0), None, 40).unwrap();
    assert_eq!(
        got,
        (0..40).map(|i| (key(i), value_of(i))).collect::<Vec<_>>()
    );
}

#[test]
fn a_failed_servers_regions_are_rebuilt_from_their_logs() {
    let _limit = time_limit(
        "a_failed_servers_regions_are_rebuilt_from_their_logs",
        "-",
        Duration::from_secs(120),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut d = start(logged(dir.path(), tiny()));
    load(&d, 300);
    assert!(d.wait_idle(Duration::from_secs(10)));
    let before = d.shape();
    assert!(before.per_node[1] >= 1, "{before:?}");
    fail(&mut d, 1);
    let report = d.recover(NodeId(1)).unwrap();
    assert_eq!(report.moved.len(), before.per_node[1]);
    assert!(report.moved.iter().all(|(_, n)| *n != NodeId(1)));
    assert!(d.directory().snapshot().held_by(NodeId(1)).is_empty());
    for mode in [SearchMode::ServerOnly, SearchMode::ClientOnly] {
        all_present(&d, 300, 2, mode);
    }
    // The rebuilt meganodes take writes (and split) again.
    let mut c = client(&d, 0, 1, SearchMode::Selector);
    for i in 300..450 {
        c.put(&key(i), &value_of(i)).unwrap();
    }
    assert!(d.wait_idle(Duration::from_secs(10)));
    all_present(&d, 450, 0, SearchMode::ClientOnly);
}

/// Splits region 1 (held by node 0) by hand up to `stop` (a predicate on
/// the effect just performed), then fails node 0 and recovers it.
fn split_cut_short(
    stop: impl Fn(&Cell, &Did) -> bool,
) -> (Cell, nessie_cell::RecoveryReport, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut d = start(three_logged_servers(dir.path()));
    load(&d, 60);
    {
        let mut s = SplitStepper::new(&d, RegionId(1));
        while let Some(did) = s.step() {
            if stop(&d, &did) {
                break;
            }
        }
    }
    fail(&mut d, 0);
    let report = d.recover(NodeId(0)).unwrap();
    (d, report, dir)
}

fn logs(did: &Did, what: &str) -> bool {
    matches!(did, Did::Effect(nessie_cell::machine::Effect::Log { records, .. })
        if records.iter().any(|r| format!("{r:?}").starts_with(what)))
}

#[test]
fn a_split_cut_short_before_its_copy_is_logged_is_undone_and_its_orphan_dropped() {
    let _limit = time_limit(
        "a_split_cut_short_before_its_copy_is_logged_is_undone_and_its_orphan_dropped",
        "-",
        Duration::from_secs(120),
    );
    // Stop once the copy has answered (Y complete and listed on a
    // survivor), before X logs `SplitCopied`.
    let (d, report, _dir) = split_cut_short(|_, did| matches!(did, Did::Wait(_)));
    assert_eq!(report.undone_splits, vec![RegionId(1)], "{report:?}");
    assert_eq!(report.orphans.len(), 1, "{report:?}");
    let orphan = report.orphans[0];
    assert!(d.directory().snapshot().get(orphan).is_none());
    assert!(
        (0..3).all(|n| d
            .server(NodeId(n))
            .is_none_or(|st| st.hosted(orphan).is_none())),
        "the orphan is no longer held anywhere"
    );
    // X (region 1) still holds everything and takes writes.
    let root = node_at(&d, NodePtr::root_of(RegionId(1)));
    assert_eq!(root.max, None);
    all_present(&d, 60, 1, SearchMode::ClientOnly);
    let mut c = client(&d, 2, 0, SearchMode::ServerOnly);
    c.put(&key(1000), b"after").unwrap();
    assert_eq!(c.get(&key(1000)).unwrap(), Some(b"after".to_vec()));
}

#[test]
fn a_split_cut_short_after_its_copy_is_logged_is_rolled_forward() {
    let _limit = time_limit(
        "a_split_cut_short_after_its_copy_is_logged_is_rolled_forward",
        "-",
        Duration::from_secs(120),
    );
    let (d, report, _dir) = split_cut_short(|_, did| logs(did, "SplitCopied"));
    assert_eq!(report.finished_splits, vec![RegionId(1)], "{report:?}");
    assert!(report.orphans.is_empty(), "{report:?}");
    assert!(d.wait_idle(Duration::from_secs(10)));
    let root = node_at(&d, NodePtr::root_of(RegionId(1)));
    assert!(root.max.is_some(), "X ends at the split key");
    all_present(&d, 60, 1, SearchMode::ClientOnly);
    all_present(&d, 60, 2, SearchMode::ServerOnly);
    let mut c = client(&d, 2, 0, SearchMode::ServerOnly);
    for i in [1u64, 59] {
        c.put(&key(i), b"again").unwrap();
        assert_eq!(c.get(&key(i)).unwrap(), Some(b"again".to_vec()));
    }
}

/// Whether X's (region 1's) root, as it is in memory now, ends at a split
/// key: the relink's last write has been made.
fn x_relinked(d: &Cell) -> bool {
    let (n, at) = node_addr(d, NodePtr::root_of(RegionId(1)));
    let l = d.config().layout();
    let b = d
        .fabric()
        .read_bytes(n, nessie_protocol::Region::Data, at, l.node_bytes)
        .unwrap();
    nessie_cell::node::Node::decode(&b, true).is_ok_and(|r| r.max.is_some())
}

/// What became of a write sent through a stale path while a recovery was
/// rebuilding the meganode it went to.
#[derive(Debug)]
struct StaleWrite {
    /// The write was acknowledged while the recovery was paused after its
    /// rebuild (before it settled the split).
    acked_before_settling: bool,
    /// The value a fresh client reads afterwards.
    read_after: Option<Vec<u8>>,
}

/// Issue 25 hole 1 as an exact interleaving. Meganode X (region 1, on node
/// 0) splits at s into Y (on node 1 or 2); the split is cut after the
/// relink (X's root ends at s, its right link to Y's root), before X_right
/// is invalidated, and node 0 fails. A client-side client has X's root in
/// its node cache from before the split. Recovery rebuilds X on a survivor
/// and stops ([`RecoveryStage::Rebuilt`]); there the client, told where X
/// now lives, walks its cached root into an X_right leaf (still valid) and
/// sends a write of key 59 (above s) to X's new holder; the test holds the
/// client before each write request it posts and waits until the first is
/// either acknowledged or refused (the client posts it again). Recovery
/// then settles the split, and the write is read back.
fn write_through_a_stale_path_during_recovery(recovery_opens_early: bool) -> StaleWrite {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = three_logged_servers(dir.path());
    cfg.faults.recovery_opens_early = recovery_opens_early;
    let mut d = start(cfg);
    load(&d, 60);
    let split = split_key_of(&d, RegionId(1));
    let k = key(59);
    assert!(k > split, "key 59 must be in X_right ({split:?})");
    let armed = Arc::new(AtomicBool::new(false));
    let a2 = armed.clone();
    let (ep, gate) = PredicateEndpoint::new(d.fabric().open(NodeId(2)).unwrap(), move |_, wr| {
        a2.load(Ordering::SeqCst) && matches!(wr.op, Op::Write { .. })
    });
    let mut c = d.client_on(id(2, 1), ep).unwrap();
    c.set_mode(SearchMode::ClientOnly);
    assert_eq!(c.get(&k).unwrap(), Some(value_of(59)));
    let x_root = NodePtr::root_of(RegionId(1));
    assert!(
        c.with_core(|core| core.nodes.contains(x_root)),
        "the client caches X's root"
    );
    {
        let mut s = SplitStepper::new(&d, RegionId(1));
        let mut relinked = false;
        while let Some(did) = s.step() {
            if matches!(did, Did::Effect(nessie_cell::machine::Effect::Log { .. }))
                && x_relinked(&d)
            {
                relinked = true;
                break;
            }
        }
        assert!(relinked, "the split never relinked X");
    }
    fail(&mut d, 0);
    let (done_tx, done_rx) = mpsc::channel();
    let mut writer = Some(c);
    let mut acked = None;
    let report = d
        .recover_nodes(&[NodeId(0)], |stage, _| {
            assert_eq!(stage, RecoveryStage::Rebuilt);
            let mut c = writer.take().expect("one stage");
            // The client learns where X lives now; its node cache still
            // holds X's root from before the split.
            c.refresh_directory();
            armed.store(true, Ordering::SeqCst);
            let (tx, k) = (done_tx.clone(), k.clone());
            std::thread::spawn(move || {
                let r = c.put(&k, b"new");
                let _ = tx.send(r);
            });
            assert!(gate.paused().is_some(), "the client never sent its write");
            gate.resume();
            let t = Instant::now();
            acked = Some(loop {
                if let Ok(r) = done_rx.try_recv() {
                    r.expect("the write");
                    break true;
                }
                if gate.try_paused(Duration::from_millis(1)).is_some() {
                    // Answered `Busy`: the client sends it again (held).
                    break false;
                }
                assert!(t.elapsed() < Duration::from_secs(10), "no answer");
            });
        })
        .unwrap();
    assert_eq!(report.finished_splits, vec![RegionId(1)], "{report:?}");
    armed.store(false, Ordering::SeqCst);
    let acked_before_settling = acked.expect("the recovery stopped at Rebuilt");
    if !acked_before_settling {
        gate.resume();
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the write ends")
            .expect("the write succeeds once the split is settled");
    }
    assert!(d.wait_idle(Duration::from_secs(10)));
    let read_after = client(&d, 1, 0, SearchMode::ServerOnly).get(&k).unwrap();
    StaleWrite {
        acked_before_settling,
        read_after,
    }
}

#[test]
fn a_region_with_an_open_split_takes_no_write_until_recovery_settles_it() {
    let _limit = time_limit(
        "a_region_with_an_open_split_takes_no_write_until_recovery_settles_it",
        "-",
        Duration::from_secs(120),
    );
    let w = write_through_a_stale_path_during_recovery(false);
    assert!(
        !w.acked_before_settling,
        "X took a write before its split was settled: {w:?}"
    );
    assert_eq!(w.read_after, Some(b"new".to_vec()), "{w:?}");
}

#[test]
fn teeth_recovery_opening_early_loses_an_acknowledged_write() {
    let _limit = time_limit(
        "teeth_recovery_opening_early_loses_an_acknowledged_write",
        "-",
        Duration::from_secs(120),
    );
    let w = write_through_a_stale_path_during_recovery(true);
    assert!(w.acked_before_settling, "{w:?}");
    assert_eq!(
        w.read_after,
        Some(value_of(59)),
        "the acknowledged write should be lost with the switch on: {w:?}"
    );
}

/// What became of the new meganode Y of a split whose server died between
/// `SplitFinish` and opening Y.
#[derive(Debug)]
struct LateDeath {
    /// Y.
    y: RegionId,
    /// A put of key 59 (in Y) after the recovery.
    put: Result<bool, Error>,
    /// Y has a parent entry in some other meganode.
    y_parented: bool,
    report: nessie_cell::RecoveryReport,
}

/// Issue 25 hole 2 as an exact interleaving: X (region 1, on node 0) splits
/// into Y on a survivor; the split stops right after X logged
/// `SplitFinish`, before it opened Y or linked Y's parent, and node 0
/// fails. After recovery, a put of a key at or above the split key must
/// go through (within a 3 s operation timeout) and Y must get its parent
/// entry.
fn server_dies_between_split_finish_and_open(forget: bool) -> LateDeath {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = three_logged_servers(dir.path());
    cfg.op_timeout = Duration::from_secs(3);
    cfg.faults.recovery_forgets_finished_splits = forget;
    let mut d = start(cfg);
    load(&d, 60);
    let split = split_key_of(&d, RegionId(1));
    assert!(key(59) > split);
    let mut y = None;
    {
        let mut s = SplitStepper::new(&d, RegionId(1));
        while let Some(did) = s.step() {
            if let Did::Effect(nessie_cell::machine::Effect::Log { records, .. }) = &did {
                if let Some(nessie_cell::LogRecord::SplitFinish { new }) = records.first() {
                    y = Some(*new);
                    break;
                }
            }
        }
        assert!(s.finished.is_none());
    }
    let y = y.expect("the split logged its finish");
    assert_ne!(d.holder(y), Some(NodeId(0)), "Y is on a survivor");
    fail(&mut d, 0);
    let report = d.recover(NodeId(0)).unwrap();
    let mut c = client(&d, 2, 0, SearchMode::ServerOnly);
    let put = c.put(&key(59), b"new");
    assert!(d.wait_idle(Duration::from_secs(10)));
    // X_left takes writes either way.
    c.put(&key(1), b"left").unwrap();
    let y_parented = audit(&d).parented.contains(&y);
    LateDeath {
        y,
        put,
        y_parented,
        report,
    }
}

#[test]
fn recovery_opens_and_links_the_new_meganode_of_a_split_finished_before_the_failure() {
    let _limit = time_limit(
        "recovery_opens_and_links_the_new_meganode_of_a_split_finished_before_the_failure",
        "-",
        Duration::from_secs(120),
    );
    let r = server_dies_between_split_finish_and_open(false);
    assert_eq!(r.put, Ok(true), "{r:?}");
    assert!(r.y_parented, "{r:?}");
    assert_eq!(r.report.opened, vec![r.y], "{r:?}");
    assert_eq!(r.report.linked, vec![r.y], "{r:?}");
}

#[test]
fn teeth_recovery_forgetting_finished_splits_leaves_the_new_meganode_frozen() {
    let _limit = time_limit(
        "teeth_recovery_forgetting_finished_splits_leaves_the_new_meganode_frozen",
        "-",
        Duration::from_secs(120),
    );
    let r = server_dies_between_split_finish_and_open(true);
    assert_eq!(r.put, Err(Error::Timeout), "{r:?}");
    assert!(!r.y_parented, "{r:?}");
}

#[test]
fn a_split_cut_short_after_the_relink_is_finished() {
    let _limit = time_limit(
        "a_split_cut_short_after_the_relink_is_finished",
        "-",
        Duration::from_secs(120),
    );
    // Stop once X's root has been rewritten to end at the split key (the
    // relink's last write) and logged, before X_right is invalidated.
    let (d, report, _dir) = split_cut_short(|d, did| {
        // (A write is durable once its log record is appended.)
        if !matches!(did, Did::Effect(nessie_cell::machine::Effect::Log { .. })) {
            return false;
        }
        let (n, at) = node_addr(d, NodePtr::root_of(RegionId(1)));
        let l = d.config().layout();
        let b = d
            .fabric()
            .read_bytes(n, nessie_protocol::Region::Data, at, l.node_bytes)
            .unwrap();
        nessie_cell::node::Node::decode(&b, true).is_ok_and(|r| r.max.is_some())
    });
    assert_eq!(report.finished_splits, vec![RegionId(1)], "{report:?}");
    assert!(report.orphans.is_empty());
    assert!(d.wait_idle(Duration::from_secs(10)));
    all_present(&d, 60, 1, SearchMode::ClientOnly);
    all_present(&d, 60, 2, SearchMode::ServerOnly);
    // Writes to both halves go through (the new meganode was opened).
    let mut c = client(&d, 2, 0, SearchMode::ServerOnly);
    for i in [1u64, 59] {
        c.put(&key(i), b"again").unwrap();
        assert_eq!(c.get(&key(i)).unwrap(), Some(b"again".to_vec()));
    }
    let _: Option<SimFabric> = None;
}

#[test]
fn without_recovery_a_key_on_the_dead_node_fails_unreachable_after_the_grace() {
    let _limit = time_limit(
        "without_recovery_a_key_on_the_dead_node_fails_unreachable_after_the_grace",
        "-",
        Duration::from_secs(120),
    );
    // No logs, no recovery: the directory still names the dead node for its
    // meganodes. Operations that need them fail with `Unreachable(node)`
    // once it has stayed unreachable for `unreachable_grace` (500 ms), not
    // after the 10 s operation timeout; the other keys are served as before.
    let mut d = start(tiny());
    load(&d, 300);
    assert!(d.wait_idle(Duration::from_secs(10)));
    let shape = d.shape();
    assert!(shape.per_node[1] >= 1, "{shape:?}");
    let cfg = d.config().as_ref().clone();
    assert!(cfg.unreachable_grace * 4 < cfg.op_timeout);
    fail(&mut d, 1);
    let mut c = client(&d, 2, 0, SearchMode::ClientOnly);
    let (mut served, mut unreachable) = (0, 0);
    let mut on_dead_node = None;
    for i in 0..300 {
        let t = Instant::now();
        match c.get(&key(i)) {
            Ok(v) => {
                assert_eq!(v, Some(value_of(i)), "key {i}");
                served += 1;
            }
            Err(Error::Unreachable(n, _)) => {
                assert_eq!(n, NodeId(1), "key {i}");
                let took = t.elapsed();
                assert!(
                    took >= cfg.unreachable_grace
                        && took < 2 * cfg.unreachable_grace + Duration::from_millis(500),
                    "key {i}: {took:?}"
                );
                unreachable += 1;
                on_dead_node.get_or_insert(i);
                if unreachable == 3 {
                    break;
                }
            }
            Err(e) => panic!("key {i}: {e:?}"),
        }
    }
    assert!(
        unreachable >= 1 && served >= 1,
        "{served} served, {unreachable} unreachable"
    );
    // A write of such a key fails the same way (its request never reached
    // the dead node: nothing executed, `NotCommitted`).
    let i = on_dead_node.expect("a key on the dead node");
    let t = Instant::now();
    let r = c.put(&key(i), b"new");
    assert!(matches!(r, Err(Error::Unreachable(NodeId(1), _))), "{r:?}");
    assert_eq!(r.unwrap_err().outcome(), Outcome::NotCommitted);
    assert!(t.elapsed() < 2 * cfg.unreachable_grace + Duration::from_millis(500));
}

/// A server that dies between allocating a region for a creation and
/// the log record that would name it (a splitter before `SplitStart`, a
/// recovery before its region moves into its placeholder) leaves a region
/// `Creating` on a survivor that nothing names. The recovery of the dead
/// server drops it (the directory records each creation's creator until it
/// is published): before, its slot stayed taken for good. A creation of a
/// live server is left alone. With `recovery_keeps_orphans` (the test-only
/// switch) it stays.
fn unnamed_creations_after_recovery(keep: bool) -> (Vec<RegionId>, Vec<RegionId>) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = three_logged_servers(dir.path());
    cfg.faults.recovery_keeps_orphans = keep;
    let mut d = start(cfg);
    load(&d, 40);
    // Node 0 began two creations on node 1 and node 2 and logged neither;
    // node 2 began one on node 1 (it lives: its own to settle).
    let (by_dead_1, _) = d.directory().allocate_for(NodeId(1), NodeId(0)).unwrap();
    let (by_dead_2, _) = d.directory().allocate_for(NodeId(2), NodeId(0)).unwrap();
    let (by_live, _) = d.directory().allocate_for(NodeId(1), NodeId(2)).unwrap();
    fail(&mut d, 0);
    let report = d.recover(NodeId(0)).unwrap();
    // A region another survivor holds is dropped by a queued job.
    assert!(d.wait_idle(Duration::from_secs(10)));
    let map = d.directory().snapshot();
    let listed: Vec<RegionId> = [by_dead_1, by_dead_2, by_live]
        .into_iter()
        .filter(|r| map.get(*r).is_some())
        .collect();
    assert!(
        map.get(by_live).is_some(),
        "a live server's creation is its own"
    );
    all_present(&d, 40, 1, SearchMode::ClientOnly);
    (listed, report.orphans)
}

#[test]
fn a_creation_no_log_names_is_dropped_by_the_recovery_of_its_creator() {
    let (listed, orphans) = unnamed_creations_after_recovery(false);
    assert_eq!(
        listed.len(),
        1,
        "only the live server's creation stays: {listed:?}"
    );
    assert_eq!(orphans.len(), 2, "{orphans:?}");
    let (kept, orphans) = unnamed_creations_after_recovery(true);
    assert_eq!(kept.len(), 3, "the switch keeps them: {kept:?}");
    assert!(orphans.is_empty(), "{orphans:?}");
}
