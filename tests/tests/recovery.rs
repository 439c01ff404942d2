//! A client stalls in the middle of a write; the others carry on without any
//! server: they read the previous version, back off until the owner's deadline
//! has passed, then reclaim the abandoned entry. No acknowledged write is lost
//! and the owner never makes a reclaimed entry valid.

use std::time::Duration;

use nessie_fabric_sim::{Injection, SimEndpoint};
use nessie_protocol::Client;
use nessie_protocol::{
    Config, DteState, Error, GetMachine, IndexEntry, Machine, NodeId, Op, OpKind, PutMachine,
    Region, TransportFault,
};
use nessie_tests::step::{is_index_cas, is_state_flip, Stepper};
use nessie_tests::{find_key, slot, time_limit, tiny_config, SimCluster};

fn cfg() -> Config {
    Config {
        nodes: 3,
        clients_per_node: 2,
        ..Config::default()
    }
}

fn past_deadline(cluster: &SimCluster) {
    let c = &cluster.cfg;
    cluster
        .fabric
        .advance(c.expiration + c.clock_skew + Duration::from_millis(1));
}

/// The state of the data table entry the owner of `stepper` wrote last.
fn owner_entry_state<M: Machine>(cluster: &SimCluster, s: &Stepper<M>) -> DteState {
    let layout = cluster.cfg.layout();
    let dte = s.state.alloc.owned().next().expect("owner has entries");
    let w = cluster
        .fabric
        .read_word(dte.node(), Region::Data, layout.entry_offset(dte.index))
        .unwrap();
    nessie_protocol::layout::StateWord::decode(w).state
}

#[test]
fn stalled_put_is_reclaimed_after_its_deadline() {
    let _limit = time_limit(
        "stalled_put_is_reclaimed_after_its_deadline",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut b = cluster.client(1, 0);
    b.put(b"k", b"v1").unwrap();

    // A installs its entry and verifies, then stalls before its commit.
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"k", b"v2"));
    assert!(a.run_until(is_state_flip), "A reaches its commit");

    // Readers fall back to the previous version; writers back off.
    assert_eq!(b.get(b"k").unwrap(), Some(b"v1".to_vec()));
    assert_eq!(
        b.run_once(PutMachine::put(b"k", b"v3")),
        Err(Error::Conflict)
    );

    // After A's deadline, B reclaims A's entry and writes.
    past_deadline(&cluster);
    assert_eq!(b.put(b"k", b"v3"), Ok(true));
    assert_eq!(b.last_stats().recoveries, 1);
    assert_eq!(b.get(b"k").unwrap(), Some(b"v3".to_vec()));

    // A resumes: past its deadline it does not commit.
    let (r, _, _) = a.finish();
    assert_eq!(r, Err(Error::Timeout));
    assert_eq!(b.get(b"k").unwrap(), Some(b"v3".to_vec()));
}

#[test]
fn an_owner_that_overruns_its_deadline_still_cannot_commit_a_reclaimed_entry() {
    let _limit = time_limit(
        "an_owner_that_overruns_its_deadline_still_cannot_commit_a_reclaimed_entry",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut b = cluster.client(1, 0);
    b.put(b"k", b"v1").unwrap();
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"k", b"v2"));
    a.state.faults.ignore_deadline = true;
    assert!(a.run_until(is_state_flip));
    past_deadline(&cluster);
    assert!(
        b.delete(b"k").unwrap(),
        "B reclaims A's entry, then deletes v1"
    );
    // A's commit is a NIC CAS Writing -> Valid; B's abort won, so it fails.
    let state_before = owner_entry_state(&cluster, &a);
    assert_eq!(state_before, DteState::Aborted);
    let (r, _, _) = a.finish();
    assert_eq!(r, Err(Error::Timeout));
    assert_eq!(b.get(b"k").unwrap(), None);
}

#[test]
fn stalled_delete_is_reclaimed_and_the_value_survives() {
    let _limit = time_limit(
        "stalled_delete_is_reclaimed_and_the_value_survives",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut b = cluster.client(2, 1);
    b.put(b"k", b"v1").unwrap();
    let mut a = cluster.stepper(0, 1, PutMachine::delete(b"k"));
    assert!(a.run_until(is_state_flip));
    assert_eq!(
        b.get(b"k").unwrap(),
        Some(b"v1".to_vec()),
        "the delete has not taken effect"
    );
    past_deadline(&cluster);
    assert_eq!(b.put(b"k", b"v2"), Ok(true));
    let (r, _, _) = a.finish();
    assert_eq!(r, Err(Error::Timeout));
    assert_eq!(b.get(b"k").unwrap(), Some(b"v2".to_vec()));
}

#[test]
fn a_client_that_stalls_right_after_its_cas_blocks_nobody_forever() {
    let _limit = time_limit(
        "a_client_that_stalls_right_after_its_cas_blocks_nobody_forever",
        "-",
        Duration::from_secs(60),
    );
    // Stall between the install CAS and the verification reads.
    let cluster = SimCluster::manual_clock(cfg());
    let mut b = cluster.client(1, 1);
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"fresh", b"x"));
    assert!(a.run_until(is_index_cas));
    assert!(a.step(), "the install CAS lands; A stalls");
    assert_eq!(
        b.get(b"fresh").unwrap(),
        None,
        "an in-progress insert is not visible"
    );
    past_deadline(&cluster);
    assert_eq!(b.put(b"fresh", b"y"), Ok(false));
    let (r, _, _) = a.finish();
    assert_eq!(r, Err(Error::Timeout));
    assert_eq!(b.get(b"fresh").unwrap(), Some(b"y".to_vec()));
}

/// Keys for a MIGRATE story, stored by the returned client: `m` lives at slot 0
/// and can move to slot 1; `g` fills slot 2; a PUT of `p` (candidates 0 and 2)
/// must move `m` away.
fn migrate_story(cluster: &SimCluster) -> (Vec<u8>, Vec<u8>, Vec<u8>, Client<SimEndpoint>) {
    let c = &cluster.cfg;
    let m = find_key(c, "m", |k| k == [slot(0), slot(1)]);
    let g = find_key(c, "g", |k| {
        k[0] == slot(2) && k[1] != slot(0) && k[1] != slot(1)
    });
    let p = find_key(c, "p", |k| k == [slot(0), slot(2)]);
    let mut b = cluster.client(0, 1);
    b.put(&m, b"mv").unwrap();
    b.put(&g, b"gv").unwrap();
    (m, g, p, b)
}

#[test]
fn migrate_stalled_after_locking_its_source_is_rolled_back_by_a_reclaimer() {
    let _limit = time_limit(
        "migrate_stalled_after_locking_its_source_is_rolled_back_by_a_reclaimer",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, g, p, mut b) = migrate_story(&cluster);

    // A's PUT of p must MIGRATE m from slot 0 to slot 1. Stall it after the
    // lock CAS on slot 0, before the install CAS on slot 1.
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_index_cas));
    assert!(a.step(), "lock lands");
    assert!(
        a.peek().iter().any(|wr| is_index_cas(&wr.op)),
        "next is the install"
    );

    assert_eq!(
        b.get(&m).unwrap(),
        Some(b"mv".to_vec()),
        "readers fall back to the source entry"
    );
    assert_eq!(
        b.run_once(PutMachine::put(&m, b"mv2")),
        Err(Error::Conflict)
    );
    past_deadline(&cluster);
    assert_eq!(
        b.put(&m, b"mv2"),
        Ok(true),
        "after the deadline the move is rolled back"
    );
    assert!(b.last_stats().recoveries >= 1);
    // Two fence CASes (the first finds the destination's empty word, the
    // second seals it), the restore of the source, B's own install.
    assert_eq!(b.last_stats().index_cas, 4);

    let (r, _, _) = a.finish();
    assert_eq!(r, Err(Error::Timeout));
    assert_eq!(b.get(&m).unwrap(), Some(b"mv2".to_vec()));
    assert_eq!(b.get(&g).unwrap(), Some(b"gv".to_vec()));
    assert_eq!(b.get(&p).unwrap(), None);
    assert_eq!(b.put(&p, b"pv"), Ok(false));
    for (k, v) in [(&m, &b"mv2"[..]), (&g, b"gv"), (&p, b"pv")] {
        assert_eq!(b.get(k).unwrap().as_deref(), Some(v));
    }
}

#[test]
fn migrate_stalled_after_its_commit_is_finished_by_the_next_writer() {
    let _limit = time_limit(
        "migrate_stalled_after_its_commit_is_finished_by_the_next_writer",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, g, p, mut b) = migrate_story(&cluster);

    // Stall A after the copy committed, before it unlinks the source: both
    // slot 0 and slot 1 now name the same valid copy.
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_state_flip));
    assert!(a.step(), "the copy commits");

    assert_eq!(b.get(&m).unwrap(), Some(b"mv".to_vec()));
    // A PUT of m (no waiting for any deadline) unlinks the stale source first.
    assert_eq!(b.put(&m, b"mv2"), Ok(true));
    assert_eq!(b.last_stats().helps, 1);
    assert_eq!(b.get(&m).unwrap(), Some(b"mv2".to_vec()));

    // A resumes: its unlink CAS finds the work done and it completes its PUT.
    let (r, _, _) = a.finish();
    assert_eq!(r, Ok(false));
    for (k, v) in [(&m, &b"mv2"[..]), (&g, b"gv"), (&p, b"pv")] {
        assert_eq!(b.get(k).unwrap().as_deref(), Some(v));
    }
}

#[test]
fn crashed_client_leaves_keys_writable_after_the_deadline() {
    let _limit = time_limit(
        "crashed_client_leaves_keys_writable_after_the_deadline",
        "-",
        Duration::from_secs(60),
    );
    // A crash is a stall that never resumes: drop the stepper mid-operation.
    let cluster = SimCluster::manual_clock(cfg());
    let mut b = cluster.client(1, 0);
    for i in 0..20u32 {
        let key = format!("k{i}").into_bytes();
        b.put(&key, b"old").unwrap();
        let mut a = cluster.stepper(0, 0, PutMachine::put(&key, b"lost"));
        assert!(a.run_until(is_state_flip));
        drop(a);
    }
    past_deadline(&cluster);
    for i in 0..20u32 {
        let key = format!("k{i}").into_bytes();
        assert_eq!(b.get(&key).unwrap(), Some(b"old".to_vec()));
        assert_eq!(b.put(&key, b"new"), Ok(true));
        assert_eq!(b.get(&key).unwrap(), Some(b"new".to_vec()));
    }
}

#[test]
fn reclaimers_allow_for_clock_skew() {
    let _limit = time_limit(
        "reclaimers_allow_for_clock_skew",
        "-",
        Duration::from_secs(60),
    );
    // The reclaimer's clock runs ahead of the owner's by the full skew
    // allowance: it must still wait until the owner's deadline has passed on
    // its own clock plus the skew.
    let cluster = SimCluster::manual_clock(cfg());
    let skew = cluster.cfg.clock_skew;
    cluster
        .fabric
        .set_clock_skew(NodeId(1), skew.as_nanos() as i64)
        .unwrap();
    let mut b = cluster.client(1, 0);
    b.put(b"k", b"v1").unwrap();
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"k", b"v2"));
    assert!(a.run_until(is_state_flip));
    // Owner's deadline is T after its start; move to exactly the deadline on
    // the owner's clock: B's clock reads deadline + skew, not past it.
    cluster.fabric.advance(cluster.cfg.expiration);
    assert_eq!(
        b.run_once(PutMachine::put(b"k", b"v3")),
        Err(Error::Conflict)
    );
    cluster.fabric.advance(Duration::from_nanos(1));
    assert_eq!(b.put(b"k", b"v3"), Ok(true));
    assert_eq!(b.last_stats().recoveries, 1);
}

// ----- found by mutation testing (docs/verification.md, "Mutation testing") --

/// A reclaimer that aborts an expired entry and stops before restoring the
/// index leaves it `Aborted` and linked: the next writer unlinks it at once
/// (no deadline to wait for) and counts the recovery.
#[test]
fn an_aborted_entry_left_linked_is_unlinked_by_the_next_writer() {
    let _limit = time_limit(
        "an_aborted_entry_left_linked_is_unlinked_by_the_next_writer",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let (mut c, a) = owner_at_its_commit(&cluster);
    past_deadline(&cluster);
    let mut b = cluster.stepper(1, 0, PutMachine::put(b"k", b"v3"));
    assert!(
        b.run_until(is_state_flip),
        "B reaches its abort of A's entry"
    );
    assert!(b.step(), "the abort lands");
    assert_eq!(owner_entry_state(&cluster, &a), DteState::Aborted);
    drop(b); // B crashes before its restore
    assert_eq!(c.put(b"k", b"v4"), Ok(true));
    assert_eq!(c.last_stats().recoveries, 1);
    assert_eq!(c.get(b"k").unwrap(), Some(b"v4".to_vec()));
}

/// An owner that overruns its deadline commits just before a reclaimer's
/// abort CAS: the abort finds the entry committed and the reclaimer leaves
/// it linked (no recovery), so the acknowledged write stays visible.
#[test]
fn a_reclaimer_whose_abort_finds_the_entry_committed_leaves_it_linked() {
    let _limit = time_limit(
        "a_reclaimer_whose_abort_finds_the_entry_committed_leaves_it_linked",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut c = cluster.client(2, 0);
    c.put(b"k", b"v1").unwrap();
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"k", b"v2"));
    a.state.faults.ignore_deadline = true;
    assert!(a.run_until(is_state_flip), "A reaches its commit");
    past_deadline(&cluster);
    let mut b = cluster.stepper(1, 0, PutMachine::put(b"k", b"v3"));
    assert!(
        b.run_until(is_state_flip),
        "B reaches its abort of A's entry"
    );
    let (r, _, _) = a.finish();
    assert_eq!(r, Ok(true), "A's commit lands first");
    // B's abort fails; its next index CAS must not unlink A's entry.
    assert!(b.step());
    assert!(b.run_until(is_index_cas));
    assert!(b.step());
    drop(b);
    assert_eq!(c.get(b"k").unwrap(), Some(b"v2".to_vec()));
}

/// A reclaimer whose abort CAS fails (the NIC reports an error, nothing
/// executed) stops with that error instead of going on as if the entry were
/// recovered; the next attempt recovers it.
#[test]
fn a_reclaimer_whose_abort_fails_stops_with_the_error() {
    let _limit = time_limit(
        "a_reclaimer_whose_abort_fails_stops_with_the_error",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let (_c, _a) = owner_at_its_commit(&cluster); // A stalls at its commit
    past_deadline(&cluster);
    // A's entry is on node 0; B's first CAS is its abort.
    cluster
        .fabric
        .inject(
            NodeId(0),
            Injection::next(TransportFault::FailBeforeExecuting, 1).only(OpKind::Cas),
        )
        .unwrap();
    let mut b = cluster.client(1, 0);
    let r = b.run_once(PutMachine::put(b"k", b"v3"));
    assert!(
        !cluster.fabric.injection_pending(NodeId(0)),
        "the abort was hit"
    );
    assert!(matches!(r, Err(Error::Fabric(_))), "{r:?}");
    assert_eq!(b.put(b"k", b"v3"), Ok(true));
    assert_eq!(b.last_stats().recoveries, 1);
}

/// C (node 2) writes k = v1; A (node 0) PUTs k = v2 and is stepped to its
/// commit CAS (not posted yet).
fn owner_at_its_commit(cluster: &SimCluster) -> (Client<SimEndpoint>, Stepper<PutMachine>) {
    let mut c = cluster.client(2, 0);
    c.put(b"k", b"v1").unwrap();
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"k", b"v2"));
    assert!(a.run_until(is_state_flip), "A reaches its commit");
    (c, a)
}

/// C wrote v1; A stalls before its commit; past A's deadline B (node 1; A's
/// entry is on node 0) starts a PUT of v3, returned at its abort of A's entry.
fn reclaimer_at_its_abort(cluster: &SimCluster) -> Stepper<PutMachine> {
    let (_c, a) = owner_at_its_commit(cluster);
    drop(a); // A crashes
    past_deadline(cluster);
    let mut b = cluster.stepper(1, 0, PutMachine::put(b"k", b"v3"));
    assert!(
        b.run_until(is_state_flip),
        "B reaches its abort of A's entry"
    );
    assert!(b.step(), "the abort lands");
    assert!(b.run_until(is_index_cas), "next: B's restore of the index");
    b
}

/// The index CAS `s` posts next will execute, then complete with an error.
fn fail_next_index_cas_after_executing<M: Machine>(cluster: &SimCluster, s: &mut Stepper<M>) {
    fail_next_cas_after_executing(cluster, s, Region::Index);
}

/// The CAS on `region` that `s` posts next will execute, then complete with
/// an error.
fn fail_next_cas_after_executing<M: Machine>(
    cluster: &SimCluster,
    s: &mut Stepper<M>,
    region: Region,
) {
    let node = s
        .peek()
        .iter()
        .find_map(|wr| match &wr.op {
            Op::Cas { addr, .. } if addr.region == region => Some(addr.node),
            _ => None,
        })
        .expect("a CAS on the region");
    cluster
        .fabric
        .inject(
            node,
            Injection::next(TransportFault::FailAfterExecuting, 1).only(OpKind::Cas),
        )
        .unwrap();
}

/// A reclaimer's restore CAS executes but its completion reports an error:
/// the entry may be unlinked with nobody to mark it, so it is counted as
/// leaked, and the error ends the attempt.
#[test]
fn a_reclaimer_whose_restore_fails_counts_a_leak() {
    let _limit = time_limit(
        "a_reclaimer_whose_restore_fails_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut b = reclaimer_at_its_abort(&cluster);
    fail_next_index_cas_after_executing(&cluster, &mut b);
    let (r, m, _) = b.finish();
    assert!(matches!(r, Err(Error::Fabric(_))), "{r:?}");
    assert_eq!(m.stats().leaked, 1);
}

/// A reclaimer's restore unlinks the entry but its completion is processed
/// past the reclaimer's deadline (less the margin): too late to mark it, so
/// it is counted as leaked and not marked.
#[test]
fn a_reclaimer_too_late_to_mark_what_it_unlinked_counts_a_leak() {
    let _limit = time_limit(
        "a_reclaimer_too_late_to_mark_what_it_unlinked_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut b = reclaimer_at_its_abort(&cluster);
    assert!(b.deliver(), "the restore lands");
    cluster.fabric.advance(cluster.cfg.expiration);
    let (_, m, _) = b.finish();
    assert_eq!(m.stats().leaked, 1);
}

/// A reclaimer's remote recycle mark fails: the entry is unlinked and
/// unmarked, counted as leaked; the PUT itself succeeds.
#[test]
fn a_reclaimer_whose_mark_fails_counts_a_leak() {
    let _limit = time_limit(
        "a_reclaimer_whose_mark_fails_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut b = reclaimer_at_its_abort(&cluster);
    assert!(b.step(), "the restore lands");
    assert!(b.run_until(is_state_flip), "next: the mark of A's entry");
    cluster
        .fabric
        .inject(
            NodeId(0),
            Injection::next(TransportFault::FailBeforeExecuting, 1).only(OpKind::Cas),
        )
        .unwrap();
    let (r, m, _) = b.finish();
    assert!(
        !cluster.fabric.injection_pending(NodeId(0)),
        "the mark was hit"
    );
    assert_eq!(r, Ok(true));
    assert_eq!(m.stats().leaked, 1);
}

/// A DELETE stalls after committing its tombstone, before unlinking it; a
/// PUT of the key then stalls before its commit, its previous version being
/// the tombstone. A GET meets the PUT's uncommitted entry, reads the
/// previous version and answers "not found" (not a conflict).
#[test]
fn a_get_over_a_put_whose_previous_version_is_a_tombstone_answers_not_found() {
    let _limit = time_limit(
        "a_get_over_a_put_whose_previous_version_is_a_tombstone_answers_not_found",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut c = cluster.client(2, 0);
    c.put(b"k", b"v1").unwrap();
    let mut d = cluster.stepper(1, 0, PutMachine::delete(b"k"));
    assert!(d.run_until(is_state_flip), "D reaches its commit");
    assert!(d.step(), "the tombstone commits");
    assert!(d.run_until(is_index_cas), "next: D unlinks its tombstone");
    drop(d); // D crashes
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"k", b"v2"));
    assert!(a.run_until(is_state_flip), "A reaches its commit");
    assert_eq!(c.run_once(GetMachine::get(b"k")), Ok(None));
    let (r, _, _) = a.finish();
    assert_eq!(r, Ok(false));
    assert_eq!(c.get(b"k").unwrap(), Some(b"v2".to_vec()));
}

/// A GET's forward pass skips an uncommitted insert of its key (no previous
/// version); the insert commits before the GET's reverse pass. The index
/// words have not changed, but the state re-read sees the commit: conflict
/// (docs/protocol.md §5.1, step 2.1), not "not found".
#[test]
fn a_get_whose_skipped_insert_commits_before_its_reverse_pass_conflicts() {
    let _limit = time_limit(
        "a_get_whose_skipped_insert_commits_before_its_reverse_pass_conflicts",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"k", b"v"));
    assert!(a.run_until(is_state_flip), "A's insert reaches its commit");
    let mut g = cluster.stepper(2, 0, GetMachine::get(b"k"));
    let state_read =
        |op: &Op| matches!(op, Op::Read { addr, len: 8 } if addr.region == Region::Data);
    assert!(g.run_until(state_read), "next: G re-reads A's state");
    let (r, _, _) = a.finish();
    assert_eq!(r, Ok(false), "A's insert commits");
    let (r, _, _) = g.finish();
    assert_eq!(r, Err(Error::Conflict));
}

/// B's PUT of k scans while x fills k's first candidate, so it picks the
/// second; x is deleted and A inserts k at the first candidate and commits;
/// B's install then lands on the second, still empty. B's verification
/// re-reads the first candidate, finds it changed and aborts: k never has
/// two committed versions (docs/protocol.md §5.2, the reverse pass).
#[test]
fn a_put_whose_verification_meets_a_rival_insert_aborts() {
    let _limit = time_limit(
        "a_put_whose_verification_meets_a_rival_insert_aborts",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let c = &cluster.cfg;
    let k = find_key(c, "k", |k| k == [slot(0), slot(1)]);
    let x = find_key(c, "x", |k| k == [slot(0), slot(2)]);
    let mut other = cluster.client(0, 2);
    other.put(&x, b"xv").unwrap();
    let mut b = cluster.stepper(0, 1, PutMachine::put(&k, b"vb"));
    assert!(
        b.run_until(is_index_cas),
        "B scanned; next: its install at slot 1"
    );
    assert!(other.delete(&x).unwrap());
    let mut a = cluster.client(0, 0);
    assert_eq!(a.put(&k, b"va"), Ok(false));
    let (r, _, _) = b.finish();
    assert_eq!(r, Err(Error::Conflict));
    assert_eq!(a.get(&k).unwrap(), Some(b"va".to_vec()));
    assert_eq!(a.put(&k, b"va2"), Ok(true), "one holder: k stays writable");
}

/// A's commit vanishes (never executed, never completed); past A's deadline
/// C reclaims A's entry and writes. A's settling CAS (an abort, past its
/// margin) finds the entry aborted by C: A reports a timeout, not success.
#[test]
fn an_owner_whose_vanished_commit_was_reclaimed_reports_a_timeout() {
    let _limit = time_limit(
        "an_owner_whose_vanished_commit_was_reclaimed_reports_a_timeout",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let (mut c, mut a) = owner_at_its_commit(&cluster);
    cluster
        .fabric
        .inject(
            NodeId(0),
            Injection::next(TransportFault::Vanish, 1).only(OpKind::Cas),
        )
        .unwrap();
    assert!(a.deliver(), "the commit vanishes");
    past_deadline(&cluster);
    assert_eq!(c.put(b"k", b"v3"), Ok(true), "C reclaims A's entry");
    assert_eq!(c.last_stats().recoveries, 1);
    let (r, m, _) = a.finish();
    assert_eq!(r, Err(Error::Timeout));
    assert_eq!(m.stats().settled_commits, 1);
    assert_eq!(c.get(b"k").unwrap(), Some(b"v3".to_vec()));
}

/// A's update commits, but A processes the commit's completion past its
/// deadline: too late to mark the previous version, which is counted as
/// leaked; the PUT has succeeded.
#[test]
fn an_update_committed_too_late_to_mark_its_previous_version_counts_a_leak() {
    let _limit = time_limit(
        "an_update_committed_too_late_to_mark_its_previous_version_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let (mut c, mut a) = owner_at_its_commit(&cluster);
    assert!(a.deliver(), "the commit lands");
    cluster.fabric.advance(cluster.cfg.expiration);
    let (r, m, _) = a.finish();
    assert_eq!(r, Ok(true));
    assert_eq!(m.stats().leaked, 1);
    assert_eq!(c.get(b"k").unwrap(), Some(b"v2".to_vec()));
}

/// A DELETE stepped to the CAS that unlinks its committed tombstone.
fn delete_at_its_cleanup(cluster: &SimCluster) -> Stepper<nessie_protocol::DeleteMachine> {
    let mut c = cluster.client(2, 0);
    c.put(b"k", b"v1").unwrap();
    let mut d = cluster.stepper(0, 0, PutMachine::delete(b"k"));
    assert!(d.run_until(is_state_flip), "D reaches its commit");
    assert!(d.step(), "the tombstone commits");
    assert!(d.run_until(is_index_cas), "next: D unlinks its tombstone");
    d
}

/// The tombstone's unlink lands but is processed past D's deadline: too
/// late to mark the tombstone or the previous version, both counted as
/// leaked; the DELETE has succeeded.
#[test]
fn a_tombstone_unlinked_too_late_to_mark_counts_a_leak() {
    let _limit = time_limit(
        "a_tombstone_unlinked_too_late_to_mark_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut d = delete_at_its_cleanup(&cluster);
    assert!(d.deliver(), "the unlink lands");
    cluster.fabric.advance(cluster.cfg.expiration);
    let (r, m, _) = d.finish();
    assert_eq!(r, Ok(true));
    assert_eq!(m.stats().leaked, 2);
}

/// The tombstone's unlink executes but completes with an error: maybe
/// unlinked, never marked, counted as leaked; the DELETE has succeeded.
#[test]
fn a_tombstone_unlink_that_fails_counts_a_leak() {
    let _limit = time_limit(
        "a_tombstone_unlink_that_fails_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(cfg());
    let mut d = delete_at_its_cleanup(&cluster);
    fail_next_index_cas_after_executing(&cluster, &mut d);
    let (r, m, _) = d.finish();
    assert_eq!(r, Ok(true));
    assert_eq!(m.stats().leaked, 1);
}

// ----- MIGRATE's own races and cleanup ---------------------------------------

/// A's MIGRATE (freeing slot 0 for p) has read m's entry and written its
/// copy; before its lock CAS (slot 0: m's entry -> the copy) goes out, B
/// updates m in place. The lock fails: A installs nothing (a copy of the old
/// value at slot 1 would give m two committed values), searches again and
/// moves B's entry instead.
#[test]
fn a_migrate_whose_lock_finds_its_source_replaced_moves_nothing() {
    let _limit = time_limit(
        "a_migrate_whose_lock_finds_its_source_replaced_moves_nothing",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, g, p, mut b) = migrate_story(&cluster);
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_index_cas), "next: A's lock of slot 0");
    assert_eq!(b.put(&m, b"mv2"), Ok(true), "B replaces m's entry");

    let (r, machine, _) = a.finish();
    assert_eq!(r, Ok(false));
    assert_eq!(machine.stats().migrations, 1, "B's entry moved, once");
    for (k, v) in [(&m, &b"mv2"[..]), (&g, b"gv"), (&p, b"pv")] {
        assert_eq!(b.get(k).unwrap().as_deref(), Some(v));
    }
    assert_eq!(b.put(&m, b"mv3"), Ok(true), "one holder: m stays writable");
    assert_eq!(b.get(&m).unwrap(), Some(b"mv3".to_vec()));
}

/// A's MIGRATE locks m's source (slot 0) with its copy and stalls before
/// installing it at slot 1; C inserts q into slot 1 meanwhile. A's install
/// fails well inside its deadline: A rolls its move back itself (aborts the
/// copy, puts m's entry back at slot 0) and frees a slot for p another way
/// (g moves to slot 3). m keeps its value and stays writable at once: nobody
/// waits for A's deadline.
#[test]
fn a_migrate_whose_install_finds_its_destination_taken_rolls_its_lock_back() {
    let _limit = time_limit(
        "a_migrate_whose_install_finds_its_destination_taken_rolls_its_lock_back",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, g, p, mut b) = migrate_story(&cluster);
    let q = find_key(&cluster.cfg, "q", |k| k == [slot(1), slot(3)]);
    let y = cluster.index_word(0);
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_index_cas));
    assert!(a.step(), "the lock lands");
    assert!(
        a.peek().iter().any(|wr| is_index_cas(&wr.op)),
        "next: the install at slot 1"
    );
    let mut c = cluster.client(0, 2);
    assert_eq!(c.put(&q, b"qv"), Ok(false), "q takes slot 1");

    let (r, machine, _) = a.finish();
    assert_eq!(r, Ok(false));
    assert_eq!(machine.stats().migrations, 1, "g's move, not m's");
    assert_eq!(cluster.index_word(0), y, "m's entry is back at slot 0");
    for (k, v) in [(&m, &b"mv"[..]), (&g, b"gv"), (&p, b"pv"), (&q, b"qv")] {
        assert_eq!(b.get(k).unwrap().as_deref(), Some(v));
    }
    assert_eq!(b.put(&m, b"mv2"), Ok(true));
    assert_eq!(b.last_stats().recoveries, 0, "nothing left to reclaim");
}

/// A moves m from slot 0 to slot 1 and crashes right after its copy
/// commits: both slots name the committed copy. B's PUT of p must free slot
/// 0: its MIGRATE meets the copy at its source and finishes A's move (one
/// CAS unlinks the source: a help, no move of its own), and p takes slot 0.
#[test]
fn a_migrate_that_meets_a_committed_copy_at_its_source_finishes_that_move() {
    let _limit = time_limit(
        "a_migrate_that_meets_a_committed_copy_at_its_source_finishes_that_move",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, g, p, mut b) = migrate_story(&cluster);
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_state_flip));
    assert!(a.step(), "the copy commits");
    assert!(
        a.peek().iter().any(|wr| is_index_cas(&wr.op)),
        "next: clear the source"
    );
    drop(a); // crash
    assert_eq!(cluster.index_word(0), cluster.index_word(1));

    assert_eq!(b.put(&p, b"pv"), Ok(false));
    let s = b.last_stats();
    assert_eq!((s.helps, s.migrations), (1, 0));
    // Index reads: the scan (2), the MIGRATE's read of slot 0 (1; the copy
    // at its source ended the search at once), the rescan (2), the
    // verification (1). Slot 0 is not read again once its unlink succeeded.
    assert_eq!(s.index_reads, 6, "{s:?}");
    assert!(
        !cluster.index_word(1).is_empty(),
        "the copy stays at slot 1"
    );
    for (k, v) in [(&m, &b"mv"[..]), (&g, b"gv"), (&p, b"pv")] {
        assert_eq!(b.get(k).unwrap().as_deref(), Some(v));
    }
}

/// D deletes m (slot 0) and crashes after its tombstone commits, before
/// unlinking it; returns the tombstone's index word, still at slot 0.
fn crashed_delete(cluster: &SimCluster, m: &[u8]) -> IndexEntry {
    let mut d = cluster.stepper(0, 2, PutMachine::delete(m));
    assert!(d.run_until(is_state_flip), "D reaches its commit");
    assert!(d.step(), "the tombstone commits");
    assert!(d.run_until(is_index_cas), "next: D unlinks its tombstone");
    drop(d); // crash
    cluster.index_word(0)
}

/// m's DELETE left its committed tombstone linked at slot 0. B's PUT of p
/// must free slot 0: its MIGRATE unlinks the tombstone (nothing to move) and
/// marks it for recycling, as the DELETE would have; p takes slot 0.
#[test]
fn a_migrate_that_meets_a_linked_tombstone_unlinks_and_marks_it() {
    let _limit = time_limit(
        "a_migrate_that_meets_a_linked_tombstone_unlinks_and_marks_it",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, g, p, mut b) = migrate_story(&cluster);
    let tombstone = crashed_delete(&cluster, &m);

    assert_eq!(b.put(&p, b"pv"), Ok(false));
    let s = b.last_stats();
    assert_eq!((s.migrations, s.leaked), (0, 0), "{s:?}");
    assert!(cluster.marked_for_recycling(tombstone));
    assert_ne!(cluster.index_word(0), tombstone, "p took slot 0");
    for (k, v) in [(&m, None), (&g, Some(&b"gv"[..])), (&p, Some(b"pv"))] {
        assert_eq!(b.get(k).unwrap().as_deref(), v);
    }
}

/// As above, but B's unlink of the tombstone completes past B's margin: too
/// late to mark it (it could be reused while a late mark lands), so B leaves
/// it unmarked and counts it as leaked.
#[test]
fn a_migrate_that_unlinks_a_tombstone_too_late_to_mark_it_counts_a_leak() {
    let _limit = time_limit(
        "a_migrate_that_unlinks_a_tombstone_too_late_to_mark_it_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, _g, p, _b) = migrate_story(&cluster);
    let tombstone = crashed_delete(&cluster, &m);
    let mut b = cluster.stepper(0, 1, PutMachine::put(&p, b"pv"));
    assert!(b.run_until(is_index_cas), "next: B unlinks the tombstone");
    assert!(b.deliver(), "the unlink lands");
    cluster.fabric.advance(cluster.cfg.expiration);
    let (r, machine, _) = b.finish();
    assert_eq!(r, Err(Error::Timeout));
    assert_eq!(machine.stats().leaked, 1);
    assert!(cluster.index_word(0).is_empty(), "unlinked");
    assert!(!cluster.marked_for_recycling(tombstone));
}

/// As above, but B's unlink of the tombstone executes and completes with an
/// error: maybe unlinked, never marked, counted as leaked; the error ends
/// the attempt.
#[test]
fn a_migrate_whose_tombstone_unlink_fails_counts_a_leak() {
    let _limit = time_limit(
        "a_migrate_whose_tombstone_unlink_fails_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, _g, p, _b) = migrate_story(&cluster);
    let tombstone = crashed_delete(&cluster, &m);
    let mut b = cluster.stepper(0, 1, PutMachine::put(&p, b"pv"));
    assert!(b.run_until(is_index_cas), "next: B unlinks the tombstone");
    fail_next_index_cas_after_executing(&cluster, &mut b);
    let (r, machine, _) = b.finish();
    assert!(matches!(r, Err(Error::Fabric(_))), "{r:?}");
    assert_eq!(machine.stats().leaked, 1);
    assert!(!cluster.marked_for_recycling(tombstone));
}

/// A's MIGRATE commit CAS (the copy's state, `Writing -> Valid`) executes
/// and completes with an error: if it committed, m's old entry is unlinked
/// for good once someone clears the source, and A will not mark it: counted
/// as leaked. The error ends the attempt; m keeps its value.
#[test]
fn a_migrate_whose_commit_fails_counts_a_leak() {
    let _limit = time_limit(
        "a_migrate_whose_commit_fails_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, _g, p, mut b) = migrate_story(&cluster);
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_state_flip), "next: the copy's commit");
    fail_next_cas_after_executing(&cluster, &mut a, Region::Data);
    let (r, machine, _) = a.finish();
    assert!(matches!(r, Err(Error::Fabric(_))), "{r:?}");
    assert_eq!(machine.stats().leaked, 1);
    assert_eq!(b.get(&m).unwrap(), Some(b"mv".to_vec()));
}

/// A's MIGRATE commit lands, but A processes it past its margin: the move is
/// made (a migration, at depth 1: not a deep one) and others will clear the
/// source, but it is too late for A to mark m's old entry: counted as
/// leaked, and the attempt ends in a timeout.
#[test]
fn a_migrate_committed_too_late_to_finish_counts_a_leak() {
    let _limit = time_limit(
        "a_migrate_committed_too_late_to_finish_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, _g, p, mut b) = migrate_story(&cluster);
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_state_flip), "next: the copy's commit");
    assert!(a.deliver(), "the commit lands");
    cluster.fabric.advance(cluster.cfg.expiration);
    let (r, machine, _) = a.finish();
    assert_eq!(r, Err(Error::Timeout));
    let s = machine.stats();
    assert_eq!((s.migrations, s.deep_migrations, s.leaked), (1, 0, 1));
    assert_eq!(b.get(&m).unwrap(), Some(b"mv".to_vec()));
}

/// A's MIGRATE unlinks m's old entry from the source, but processes that
/// past its margin: too late to mark the old entry, counted as leaked.
#[test]
fn a_migrate_that_clears_its_source_too_late_to_mark_counts_a_leak() {
    let _limit = time_limit(
        "a_migrate_that_clears_its_source_too_late_to_mark_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, _g, p, mut b) = migrate_story(&cluster);
    let y = cluster.index_word(0);
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_state_flip));
    assert!(a.step(), "the copy commits");
    assert!(a.run_until(is_index_cas), "next: clear the source");
    assert!(a.deliver(), "the source is cleared");
    cluster.fabric.advance(cluster.cfg.expiration);
    let (_, machine, _) = a.finish();
    assert_eq!(machine.stats().leaked, 1);
    assert!(!cluster.marked_for_recycling(y));
    assert_eq!(b.get(&m).unwrap(), Some(b"mv".to_vec()));
}

/// m's entry lives on node 1 and A (node 0) moves it: A's recycle mark of
/// the old entry is a CAS to node 1, which fails. The move is done and the
/// PUT succeeds; the old entry is unlinked and unmarked, counted as leaked.
#[test]
fn a_migrate_whose_mark_of_the_old_entry_fails_counts_a_leak() {
    let _limit = time_limit(
        "a_migrate_whose_mark_of_the_old_entry_fails_counts_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(Config {
        nodes: 2,
        ..tiny_config()
    });
    let c = &cluster.cfg;
    let [m, g, p] = nessie_tests::one_move(c);
    let mut b = cluster.client(1, 0);
    b.put(&m, b"mv").unwrap();
    b.put(&g, b"gv").unwrap();
    // The index entries are all on node 0: the only CAS to node 1 is the mark.
    cluster
        .fabric
        .inject(
            NodeId(1),
            Injection::next(TransportFault::FailBeforeExecuting, 1).only(OpKind::Cas),
        )
        .unwrap();
    let a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    let (r, machine, _) = a.finish();
    assert!(
        !cluster.fabric.injection_pending(NodeId(1)),
        "the mark was hit"
    );
    assert_eq!(r, Ok(false));
    let s = machine.stats();
    assert_eq!((s.migrations, s.leaked), (1, 1));
    for (k, v) in [(&m, &b"mv"[..]), (&g, b"gv"), (&p, b"pv")] {
        assert_eq!(b.get(k).unwrap().as_deref(), Some(v));
    }
}

/// As above, but A is only stalled: B's MIGRATE (freeing slot 0 for r) is
/// about to unlink the copy's source when A resumes, unlinks it itself and
/// puts p into slot 0. B's unlink fails; B does not take slot 0 for free but
/// reads it again, meets p's entry (whose other candidate is full: this
/// path is broken) and searches again: g moves to slot 3 and r takes slot 2.
#[test]
fn a_migrate_whose_unlink_of_a_copys_source_loses_reads_the_slot_again() {
    let _limit = time_limit(
        "a_migrate_whose_unlink_of_a_copys_source_loses_reads_the_slot_again",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, g, p, _) = migrate_story(&cluster);
    let r = find_key(&cluster.cfg, "r", |k| k == [slot(0), slot(2)]);
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_state_flip));
    assert!(a.step(), "the copy commits");
    let mut b = cluster.stepper(0, 1, PutMachine::put(&r, b"rv"));
    assert!(
        b.run_until(is_index_cas),
        "next: B unlinks the copy's source"
    );
    assert_eq!(a.finish().0, Ok(false), "A unlinks it and p takes slot 0");

    let (res, machine, _) = b.finish();
    assert_eq!(res, Ok(false));
    let s = machine.stats();
    assert_eq!((s.helps, s.migrations), (1, 1), "{s:?}");
    // Taking slot 0 as freed would end in the same state, found out only at
    // the rescan: it shows in the count (11 index reads: not slot 0 again,
    // nor p's other candidate).
    assert_eq!(s.index_reads, 13, "{s:?}");
    let mut c = cluster.client(0, 2);
    for (k, v) in [(&m, &b"mv"[..]), (&g, b"gv"), (&p, b"pv"), (&r, b"rv")] {
        assert_eq!(c.get(k).unwrap().as_deref(), Some(v));
    }
}
