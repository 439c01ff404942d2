//! Honest outcomes of Nessie's public `Client`: a fault is injected at every
//! NIC operation of a PUT (an update whose previous version is remote, so
//! the recycle mark is an RDMA WRITE) and of a DELETE, in each of the ways
//! of the project's fault vocabulary (`TransportFault::ALL`: failed before
//! or after executing, failed and landed later, completion lost with or
//! without execution, completion handed in after the round was given up,
//! a WRITE executed twice). Requests a fault parked land before the check.
//! Whatever the caller is told must match what memory says afterwards:
//! - success: the write took effect;
//! - an error of the "not committed" class (`Conflict`, `Timeout`, a fabric
//!   error before the commit...): it did not;
//! - `OutcomeUnknown`: either, and the `Client` did not retry it.
//!
//! In particular every fault at or after the commit CAS ends in success
//! (the commit is settled, a failed recycle mark is a counted leak) or in
//! `OutcomeUnknown`, never in a retryable error (issue: honest outcomes).

use std::time::Duration;

use nessie_fabric_sim::Injection;
use nessie_protocol::{Config, Error, Faults, IteAddr, NodeId, Outcome, TransportFault};
use nessie_tests::{find_key, time_limit, SimCluster};

const FAULTS: [TransportFault; 7] = TransportFault::ALL;

/// A real clock with a short expiration, so that a lost completion ends its
/// round at the deadline quickly.
fn cfg() -> Config {
    Config {
        clients_per_node: 2,
        expiration: Duration::from_millis(40),
        deadline_margin: Duration::from_millis(5),
        ..Config::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Write {
    Put,
    Delete,
}

/// What the caller was told, per class, over every injected fault that hit.
#[derive(Debug, Default)]
struct Tally {
    hits: usize,
    /// The faults that hit at least once.
    faults_hit: Vec<TransportFault>,
    committed: usize,
    not_committed: usize,
    unknown: usize,
    lies: Vec<String>,
}

/// The result of `op`, tried again while it fails: the set-up and the check
/// run on a real clock with a 40 ms expiration, and on a loaded machine one
/// of their rounds can outlive its attempt (issue 40 item 6: the set-up PUT
/// of a DELETE case once ended `NoCompletion`, failing CI for nothing).
/// Neither is under test, and both are idempotent (the same value written
/// again; a read).
fn until_ok<T>(what: &str, mut op: impl FnMut() -> Result<T, Error>) -> T {
    let mut last = None;
    for _ in 0..20 {
        match op() {
            Ok(v) => return v,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{what} kept failing: {last:?}")
}

/// One run: node 1 has written k = "old"; client (0, 0) then updates or
/// deletes k with `fault` armed on `count` NIC operations targeting `node`
/// from the `skip`-th on (two in a row: the commit and the CAS that settles
/// it). Returns `None` if the operation never reached those steps.
fn one(
    faults: Faults,
    write: Write,
    node: u16,
    skip: u64,
    fault: TransportFault,
    count: u64,
) -> Option<(Outcome, String, bool)> {
    let cluster = SimCluster::new(cfg());
    let k = find_key(&cluster.cfg, "k", |c: &[IteAddr]| {
        c.iter().all(|a| a.node != NodeId(0))
    });
    let mut writer = cluster.client(1, 0);
    until_ok("the set-up PUT", || writer.put(&k, b"old"));
    drop(writer);
    let mut c = cluster.client(0, 0);
    c.state_mut().faults = faults;
    cluster
        .fabric
        .inject(NodeId(node), Injection::next(fault, count).after(skip))
        .unwrap();
    let r = match write {
        Write::Put => c.put(&k, b"new").map(|_| ()),
        Write::Delete => c.delete(&k).map(|_| ()),
    };
    if cluster.fabric.injection_pending(NodeId(node)) {
        cluster
            .fabric
            .inject(NodeId(node), Injection::next(fault, 0))
            .unwrap();
        return None;
    }
    let attempts = c.last_stats().attempts;
    if matches!(r, Err(Error::OutcomeUnknown(_))) {
        assert_eq!(attempts, 1, "an unknown outcome was retried");
    }
    // What an error completion left in flight lands now (within A2).
    cluster.fabric.land_parked();
    let mut reader = cluster.client(2, 0);
    let now = until_ok("the check's GET", || reader.get(&k));
    let took_effect = match write {
        Write::Put => now.as_deref() == Some(&b"new"[..]),
        Write::Delete => now.is_none(),
    };
    let left_old = now.as_deref() == Some(&b"old"[..]);
    assert!(took_effect || left_old, "k is now {now:?}");
    Some((Outcome::of(&r), format!("{r:?}"), took_effect))
}

fn matrix(faults: Faults, write: Write) -> Tally {
    let mut t = Tally::default();
    for node in 0..3 {
        for skip in 0..8 {
            for (count, fault) in [1, 2].into_iter().flat_map(|n| FAULTS.map(|f| (n, f))) {
                let Some((class, told, took_effect)) = one(faults, write, node, skip, fault, count)
                else {
                    continue;
                };
                t.hits += 1;
                if !t.faults_hit.contains(&fault) {
                    t.faults_hit.push(fault);
                }
                let honest = match class {
                    Outcome::Committed => {
                        t.committed += 1;
                        took_effect
                    }
                    Outcome::NotCommitted => {
                        t.not_committed += 1;
                        !took_effect
                    }
                    Outcome::Unknown => {
                        t.unknown += 1;
                        true
                    }
                };
                if !honest {
                    t.lies.push(format!(
                        "node {node}, operations {skip}..+{count}, {fault:?}: told {told}, took effect: {took_effect}"
                    ));
                }
            }
        }
    }
    eprintln!("{write:?}: {t:?}");
    t
}

/// Every fault of the vocabulary but the duplicated WRITE (a PUT or DELETE
/// posts no remote WRITE).
fn without_duplicates() -> Vec<TransportFault> {
    FAULTS
        .iter()
        .copied()
        .filter(|&f| f != TransportFault::DuplicateWrite)
        .collect()
}

#[test]
fn a_put_tells_the_truth_whatever_nic_operation_fails() {
    let _limit = time_limit(
        "a_put_tells_the_truth_whatever_nic_operation_fails",
        "-",
        Duration::from_secs(120),
    );
    let t = matrix(Faults::default(), Write::Put);
    assert!(t.lies.is_empty(), "{:#?}", t.lies);
    // Scan, install, verification, commit and the remote recycle mark were
    // all hit, by every fault but a duplicate: it hits only WRITEs, and a
    // PUT posts none since remote recycle marks became CASes naming the
    // entry's incarnation (issue 24).
    assert!(t.hits >= 6 * FAULTS.len(), "{t:?}");
    assert_eq!(t.faults_hit, without_duplicates(), "{t:?}");
    assert!(t.committed > 0 && t.not_committed > 0, "{t:?}");
    // The commit and the CAS settling it both failed: only then is the
    // outcome unknown.
    assert!(t.unknown > 0, "{t:?}");
}

#[test]
fn a_delete_tells_the_truth_whatever_nic_operation_fails() {
    let _limit = time_limit(
        "a_delete_tells_the_truth_whatever_nic_operation_fails",
        "-",
        Duration::from_secs(120),
    );
    let t = matrix(Faults::default(), Write::Delete);
    assert!(t.lies.is_empty(), "{:#?}", t.lies);
    assert!(t.hits >= 6 * FAULTS.len(), "{t:?}");
    assert_eq!(t.faults_hit, without_duplicates(), "{t:?}");
    assert!(t.committed > 0, "{t:?}");
}

/// Teeth: with errors after the commit passed up as they come (hole 3 of the
/// review reinstated), the same matrix finds callers told "not committed"
/// about writes that took effect.
#[test]
fn the_matrix_catches_committed_writes_reported_as_not_committed() {
    let _limit = time_limit(
        "the_matrix_catches_committed_writes_reported_as_not_committed",
        "-",
        Duration::from_secs(120),
    );
    let hole3 = Faults {
        errors_after_commit_retryable: true,
        ..Faults::default()
    };
    let t = matrix(hole3, Write::Put);
    assert!(!t.lies.is_empty(), "{t:?}");
}
