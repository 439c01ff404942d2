//! A client stalls in the middle of a write; the others carry on without any
//! server: they read the previous version, back off until the owner's deadline
//! has passed, then reclaim the abandoned entry. No acknowledged write is lost
//! and the owner never makes a reclaimed entry valid.

use std::time::Duration;

use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::Client;
use nessie_protocol::{Config, DteState, Error, Machine, NodeId, PutMachine, Region};
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
