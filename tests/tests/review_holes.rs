//! The five holes a hostile review found in the landed protocol, and holes 2
//! and 3 of issue 24 ("Checked core, checked edges"), each as an exact
//! interleaving told twice: with the protocol as it is now (correct), and
//! with the test-only switch that reinstates the landed behaviour
//! (`Faults`), where the story ends in the stale read, the twice-applied
//! write, the blocked insert or the false `TableFull` that was described.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use nessie_check::{check_history, Recorder};
use nessie_fabric_sim::{Injection, Later, SimEndpoint};
use nessie_protocol::pipeline::Pipeline;
use nessie_protocol::{
    Client, ClientId, Config, Error, Fabric, FabricError, Faults, GetMachine, IndexEntry, IteAddr,
    Machine, MigrateSearch, NodeId, Op, OpKind, Outcome, PutMachine, Region, TransportFault,
};
use nessie_protocol::{Request, Response};
use nessie_tests::late::LateEndpoint;
use nessie_tests::step::{is_index_cas, is_index_read, is_state_flip, Stepper};
use nessie_tests::{find_key, slot, time_limit, tiny_config, two_move_chain, SimCluster};

// ----- hole 1: a MIGRATE install that lands after a reclaim ---------------

/// m has candidates [slot 1, slot 0] and sits at slot 0 with "mv"; slot 1 is
/// empty; g fills slot 2; a PUT of p (slots 0 and 2) must move m to slot 1.
fn late_install_story(
    cluster: &SimCluster,
) -> (Vec<u8>, Vec<u8>, nessie_protocol::Client<SimEndpoint>) {
    let c = &cluster.cfg;
    let x = find_key(c, "x", |k| k == [slot(1), slot(3)]);
    let m = find_key(c, "m", |k| k == [slot(1), slot(0)]);
    let g = find_key(c, "g", |k| k == [slot(2), slot(3)]);
    let p = find_key(c, "p", |k| k == [slot(0), slot(2)]);
    let mut b = cluster.client(0, 1);
    b.put(&x, b"xv").unwrap();
    b.put(&m, b"mv").unwrap();
    b.put(&g, b"gv").unwrap();
    b.delete(&x).unwrap();
    (m, p, b)
}

/// A locks slot 0 with its copy of m, then processes the lock's completion
/// `left` before its deadline. If it posts the install, the install is held
/// back (it lands late) while B, after A's deadline plus the skew, reclaims
/// and writes "mv2". Returns whether A posted the install, and what a GET of
/// m then answers.
fn late_install(faults: Faults, left: Duration) -> (bool, Option<Vec<u8>>) {
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, p, mut b) = late_install_story(&cluster);
    b.state_mut().faults = faults;
    let start = cluster.fabric.base_now();
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    a.state.faults = faults;
    assert!(a.run_until(is_index_cas), "A reaches its lock");
    assert!(a.deliver(), "the lock lands");
    let t = cluster.cfg.expiration;
    cluster.fabric.advance(t - left);
    assert!(cluster.fabric.base_now() < start.plus(t));
    let posted = a.peek().iter().any(|wr| is_index_cas(&wr.op));
    if posted {
        // The install is in flight; it lands after the reclaim below.
        cluster
            .fabric
            .advance(left + cluster.cfg.clock_skew + Duration::from_millis(1));
        assert_eq!(b.put(&m, b"mv2"), Ok(true), "B reclaims and updates m");
        let (r, _, _) = a.finish();
        assert!(r.is_err(), "A's PUT did not happen: {r:?}");
    } else {
        let (r, _, _) = a.finish();
        assert_eq!(r, Err(Error::Timeout));
        cluster
            .fabric
            .advance(left + cluster.cfg.clock_skew + Duration::from_millis(1));
        assert_eq!(b.put(&m, b"mv2"), Ok(true));
    }
    (posted, b.get(&m).unwrap())
}

#[test]
fn hole1_an_install_posted_in_time_but_landing_after_the_reclaim_is_fenced_off() {
    let _limit = time_limit(
        "hole1_an_install_posted_in_time_but_landing_after_the_reclaim_is_fenced_off",
        "-",
        Duration::from_secs(60),
    );
    // Posted outside the margin (as A2 intends) but held back past the
    // reclaim, i.e. A2 violated on purpose: the fence still makes it fail.
    let (posted, got) = late_install(Faults::default(), Duration::from_millis(20));
    assert!(posted);
    assert_eq!(got, Some(b"mv2".to_vec()));
}

#[test]
fn hole1_inside_the_margin_no_install_is_posted() {
    let _limit = time_limit(
        "hole1_inside_the_margin_no_install_is_posted",
        "-",
        Duration::from_secs(60),
    );
    let (posted, got) = late_install(Faults::default(), Duration::from_millis(5));
    assert!(
        !posted,
        "5 ms before the deadline is inside the 10 ms margin"
    );
    assert_eq!(got, Some(b"mv2".to_vec()));
}

#[test]
fn hole1_reinstated_the_late_install_resurrects_an_overwritten_value() {
    let _limit = time_limit(
        "hole1_reinstated_the_late_install_resurrects_an_overwritten_value",
        "-",
        Duration::from_secs(60),
    );
    let unfenced = Faults {
        unfenced_migrate_install: true,
        ..Faults::default()
    };
    // The landed protocol posts the install 5 ms before the deadline ...
    let (posted, got) = late_install(unfenced, Duration::from_millis(5));
    assert!(posted);
    assert_eq!(got, Some(b"mv".to_vec()), "stale: mv2 was acknowledged");
    // ... and, whenever an install lands late, nothing fences it off.
    let (posted, got) = late_install(unfenced, Duration::from_millis(20));
    assert!(posted);
    assert_eq!(got, Some(b"mv".to_vec()), "stale: mv2 was acknowledged");
}

// ----- issue 24, hole 1: an install landing between two fence tries ---------

/// A locks m's source (slot 0) with its copy Y' and decides to install it
/// at m's destination (slot 1, holding the empty word E0) outside the
/// margin; the install is held back. After A's deadline, R's PUT of m
/// reclaims Y': it aborts it and fences the destination. R's first fence CAS
/// (`[Y'] -> sealed`) finds E0; A's install lands (`E0 -> [Y']`); R's
/// second fence CAS (`E0 -> sealed`) finds `[Y']`. Returns, once R's
/// recovery has restored the source and marked the copy, the source's and
/// the destination's words, whether Y' is marked for recycling, and Y'.
fn install_between_fence_tries(faults: Faults) -> (IndexEntry, IndexEntry, bool, IndexEntry) {
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, p, _b) = late_install_story(&cluster);
    let e0 = cluster.index_word(1);
    assert!(!e0.is_present(), "m's destination holds an empty word");
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_index_cas), "A reaches its lock");
    assert!(a.deliver(), "the lock lands");
    let y = cluster.index_word(0);
    let t = cluster.cfg.expiration;
    cluster.fabric.advance(t - Duration::from_millis(20));
    let install = a.peek().iter().any(|wr| is_index_cas(&wr.op));
    assert!(install, "A posts its install outside the margin");
    // The install is held; A's deadline and the skew pass.
    cluster
        .fabric
        .advance(Duration::from_millis(20) + cluster.cfg.clock_skew + Duration::from_millis(1));
    let mut r = cluster.stepper(0, 1, PutMachine::put(&m, b"mv2"));
    r.state.faults = faults;
    let fences_dst = |op: &nessie_protocol::Op| matches!(op, nessie_protocol::Op::Cas { addr, .. } if *addr == slot(1).remote());
    assert!(r.run_until(fences_dst), "R fences m's destination");
    assert!(
        r.step(),
        "R's first fence CAS finds E0 (the install has not landed)"
    );
    assert!(r.run_until(fences_dst), "R fences the empty word it found");
    assert!(a.deliver(), "A's install lands between R's fence tries");
    assert_eq!(
        cluster.index_word(1),
        y,
        "the copy is linked at the destination"
    );
    // R's recovery goes on to restore the source and mark the copy; the
    // story stops there (R's PUT itself would go on and meet the copy).
    let restores_src = |op: &nessie_protocol::Op| matches!(op, nessie_protocol::Op::Cas { addr, .. } if *addr == slot(0).remote());
    assert!(r.run_until(restores_src), "R restores m's source");
    assert!(r.step(), "the source is restored");
    assert!(r.step(), "the copy is marked for recycling");
    (
        cluster.index_word(0),
        cluster.index_word(1),
        cluster.marked_for_recycling(y),
        y,
    )
}

#[test]
fn issue24_hole1_a_copy_installed_between_fence_tries_is_fenced_before_it_is_marked() {
    let (src, dst, marked, y) = install_between_fence_tries(Faults::default());
    assert_eq!(
        dst,
        y.next_seal(),
        "the destination holds the copy's seal (its emptied word, counted one on)"
    );
    assert_ne!(src, y, "the source was restored too");
    assert!(marked, "the copy, linked nowhere, is marked for recycling");
}

#[test]
fn issue24_hole1_reinstated_the_copy_stays_linked_while_marked_for_recycling() {
    let stops = Faults {
        fence_stops_at_present_word: true,
        ..Faults::default()
    };
    let (_, dst, marked, y) = install_between_fence_tries(stops);
    assert_eq!(dst, y, "the copy is still linked at its destination");
    assert!(
        marked,
        "and marked for recycling: its slot will be reused (I4)"
    );
}

/// Hole 1 through the owner's own error-completion path, with no other
/// client: A locks m's source with its copy Y' and posts the install at m's
/// destination (E0 -> [Y']), well inside its deadline; the fabric reports an
/// error for the install (`TransportFault::ErrorThenLand`) and parks it.
/// Not knowing whether it executed, A aborts Y' and fences the destination
/// itself: its first fence CAS ([Y'] -> sealed) finds E0, the install lands,
/// and its second (E0 -> sealed) finds [Y']. Returns, once A's PUT is done,
/// the destination's word, whether Y' is marked for recycling, and Y'.
fn owner_install_error_then_land(faults: Faults) -> (IndexEntry, bool, IndexEntry) {
    let cluster = SimCluster::manual_clock(tiny_config());
    let (_m, p, _b) = late_install_story(&cluster);
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    a.state.faults = faults;
    assert!(a.run_until(is_index_cas), "A reaches its lock");
    assert!(a.deliver(), "the lock lands");
    let y = cluster.index_word(0);
    let installs = |op: &Op| matches!(op, Op::Cas { addr, .. } if *addr == slot(1).remote());
    assert!(a.run_until(installs), "A posts its install");
    cluster
        .fabric
        .inject(
            NodeId(0),
            Injection::next(TransportFault::ErrorThenLand, 1)
                .only(OpKind::Cas)
                .later(Later::OnRequest)
                .with_error(FabricError::Timeout),
        )
        .unwrap();
    assert!(a.step(), "the install reports an error");
    assert_eq!(cluster.fabric.parked(), 1, "and is parked");
    assert!(a.run_until(installs), "A fences its destination");
    assert!(a.step(), "A's first fence CAS finds E0");
    assert!(!cluster.index_word(1).is_present());
    assert!(a.run_until(installs), "A fences the empty word it found");
    let landed = cluster.fabric.land_parked();
    let Some(Op::Cas { expect, .. }) = landed.first().map(|l| &l.op) else {
        panic!("the install is what was parked: {landed:?}");
    };
    assert_eq!(
        landed[0].result,
        Ok(nessie_protocol::OpOutput::Cas { previous: *expect }),
        "the install lands between A's fence tries"
    );
    assert_eq!(cluster.index_word(1), y, "Y' is linked at the destination");
    let (_r, _, _) = a.finish();
    (cluster.index_word(1), cluster.marked_for_recycling(y), y)
}

#[test]
fn issue24_hole1_an_owners_install_that_errs_then_lands_between_its_fence_tries_is_fenced() {
    let (dst, marked, y) = owner_install_error_then_land(Faults::default());
    assert_eq!(
        dst,
        y.next_seal(),
        "the destination holds the copy's seal (its emptied word, counted one on)"
    );
    assert!(marked, "the copy, linked nowhere, is marked for recycling");
}

#[test]
fn issue24_hole1_reinstated_an_owners_own_late_install_stays_linked_and_marked() {
    let stops = Faults {
        fence_stops_at_present_word: true,
        ..Faults::default()
    };
    let (dst, marked, y) = owner_install_error_then_land(stops);
    assert_eq!(dst, y, "the copy is still linked at its destination");
    assert!(marked, "and marked for recycling (I4)");
}

// ----- hole 2: cache extended from the completion time ---------------------

/// Two nodes, two clients each, two data table entries per client: a
/// writer's third PUT must reuse its first entry once it has expired.
fn two_entry_shares() -> Config {
    Config {
        nodes: 2,
        clients_per_node: 2,
        dtes_per_node: 4,
        ..Config::default()
    }
}

fn run<M: Machine>(
    cluster: &SimCluster,
    state: nessie_protocol::ClientState,
    m: M,
) -> (Result<M::Output, Error>, nessie_protocol::ClientState) {
    let ep = cluster.fabric.open(state.id.node).unwrap();
    let (r, _, state) = Stepper::new(m, state, ep).finish();
    (r, state)
}

/// The end of the cache stories, 100 ms after R processed its late round:
/// once X may be reused, W writes v3 into X, and R reads k. With the
/// incarnation tags off (W's `ignore_incarnations`, as before issue 39)
/// k's index word is X's old word again; with them it names X's next
/// incarnation, which no cache entry answers for.
fn reuse_x_then_read(
    cluster: &SimCluster,
    w: &mut nessie_protocol::Client<SimEndpoint>,
    r: nessie_protocol::ClientState,
    k: &[u8],
) -> Option<Vec<u8>> {
    let c = &cluster.cfg;
    cluster.fabric.advance(
        c.expiration + c.clock_skew + Duration::from_millis(1) - Duration::from_millis(100),
    );
    w.put(k, b"v3").unwrap();
    let (got, _) = run(cluster, r, GetMachine::get(k));
    got.unwrap()
}

/// R caches W's entry X (k = v1). R's PUT of k posts its scan; W replaces X
/// with v2; R processes the scan 100 ms later. Once X may be reused, W
/// writes v3 into X (with the tags off, `faults.ignore_incarnations`, k's
/// index word is X's again). R then reads k.
fn cached_reader_story(faults: Faults) -> Option<Vec<u8>> {
    let cluster = SimCluster::manual_clock(two_entry_shares());
    let k = b"k".to_vec();
    let mut w = cluster.client(0, 0);
    w.state_mut().faults.ignore_incarnations = faults.ignore_incarnations;
    w.put(&k, b"v1").unwrap();
    let (mut r, _) = cluster.parts(1, 0);
    r.faults = faults;
    let (got, r) = run(&cluster, r, GetMachine::get(&k));
    assert_eq!(got, Ok(Some(b"v1".to_vec())));
    assert_eq!(r.cache.len(), 1, "R cached X");

    let ep = cluster.fabric.open(NodeId(1)).unwrap();
    let mut put = Stepper::new(PutMachine::put(&k, b"r"), r, ep);
    assert!(put.deliver(), "R's scan is read ...");
    w.put(&k, b"v2").unwrap();
    cluster.fabric.advance(Duration::from_millis(100));
    let (res, _, r) = put.finish(); // ... and processed 100 ms later.
    assert_eq!(res, Err(Error::Conflict), "X was replaced under R's PUT");

    reuse_x_then_read(&cluster, &mut w, r, &k)
}

#[test]
fn hole2_a_scan_extends_the_cache_from_when_its_reads_were_posted() {
    let _limit = time_limit(
        "hole2_a_scan_extends_the_cache_from_when_its_reads_were_posted",
        "-",
        Duration::from_secs(60),
    );
    assert_eq!(cached_reader_story(Faults::default()), Some(b"v3".to_vec()));
}

#[test]
fn hole2_reinstated_the_cache_returns_a_value_two_writes_old() {
    let _limit = time_limit(
        "hole2_reinstated_the_cache_returns_a_value_two_writes_old",
        "-",
        Duration::from_secs(60),
    );
    let late = Faults {
        cache_time_from_completion: true,
        ignore_incarnations: true,
        ..Faults::default()
    };
    assert_eq!(
        cached_reader_story(late),
        Some(b"v1".to_vec()),
        "stale: v3 was acknowledged"
    );
    // With the tags on, the late stamp is harmless: X's reuse is linked
    // under a new word, which R's cached entry does not answer for.
    let tagged = Faults {
        ignore_incarnations: false,
        ..late
    };
    assert_eq!(cached_reader_story(tagged), Some(b"v3".to_vec()));
}

/// Where a GET stamps its cache entry (hole 2 on the GET's own paths).
#[derive(Clone, Copy, Debug)]
enum GetStamp {
    /// A hit on the entry R cached before (extended, then re-stamped).
    Hit,
    /// The insert after the whole entry's READ.
    Insert,
    /// The insert after the value's READ (`multiple_reads`).
    ValueInsert,
}

/// W writes k = v1 (entry X); for `Hit`, R reads and caches X first. R's
/// GET of k then has its rounds up to the one that reads X delivered (the
/// index entry's READ for a hit; with it the entry's, or its header and key
/// and its value); W replaces X with v2; R processes the last round 100 ms
/// later. Once X may be reused, W writes v3 into X (with the tags off,
/// `faults.ignore_incarnations`, k's index word is X's again), and R reads
/// k.
fn get_cache_story(stamp: GetStamp, faults: Faults) -> Option<Vec<u8>> {
    let mut cfg = two_entry_shares();
    cfg.multiple_reads = matches!(stamp, GetStamp::ValueInsert);
    // Keys of at most 8 B: the value lies past the header-and-key read,
    // which a short value after a short key in a longer key area would not
    // (the GET would end with that read).
    cfg.max_key_len = 8;
    let cluster = SimCluster::manual_clock(cfg);
    let k = b"k".to_vec();
    let mut w = cluster.client(0, 0);
    w.state_mut().faults.ignore_incarnations = faults.ignore_incarnations;
    w.put(&k, b"v1").unwrap();
    let (mut r, _) = cluster.parts(1, 0);
    r.faults = faults;
    let rounds = match stamp {
        GetStamp::Hit => {
            let (got, cached) = run(&cluster, r, GetMachine::get(&k));
            assert_eq!(got, Ok(Some(b"v1".to_vec())));
            assert_eq!(cached.cache.len(), 1, "R cached X");
            r = cached;
            1
        }
        GetStamp::Insert => 2,
        GetStamp::ValueInsert => 3,
    };

    let ep = cluster.fabric.open(NodeId(1)).unwrap();
    let mut get = Stepper::new(GetMachine::get(&k), r, ep);
    for _ in 0..rounds {
        assert!(get.deliver(), "R's reads land ...");
    }
    w.put(&k, b"v2").unwrap();
    cluster.fabric.advance(Duration::from_millis(100));
    let (got, _, r) = get.finish(); // ... and the last is processed 100 ms later.
    assert_eq!(got, Ok(Some(b"v1".to_vec())), "read before W's update");
    assert_eq!(r.cache.len(), 1, "R holds X in its cache");

    reuse_x_then_read(&cluster, &mut w, r, &k)
}

#[test]
fn hole2_a_get_stamps_its_cache_from_when_its_index_read_was_posted() {
    let _limit = time_limit(
        "hole2_a_get_stamps_its_cache_from_when_its_index_read_was_posted",
        "-",
        Duration::from_secs(60),
    );
    for stamp in [GetStamp::Hit, GetStamp::Insert, GetStamp::ValueInsert] {
        assert_eq!(
            get_cache_story(stamp, Faults::default()),
            Some(b"v3".to_vec()),
            "{stamp:?}"
        );
    }
}

#[test]
fn hole2_reinstated_on_a_gets_paths_the_cache_returns_a_value_two_writes_old() {
    let _limit = time_limit(
        "hole2_reinstated_on_a_gets_paths_the_cache_returns_a_value_two_writes_old",
        "-",
        Duration::from_secs(60),
    );
    let untagged = Faults {
        ignore_incarnations: true,
        ..Faults::default()
    };
    let hit = Faults {
        get_hit_time_from_completion: true,
        ..untagged
    };
    let insert = Faults {
        get_insert_time_from_completion: true,
        ..untagged
    };
    let value_insert = Faults {
        get_value_insert_time_from_completion: true,
        ..untagged
    };
    for (stamp, late) in [
        (GetStamp::Hit, hit),
        (GetStamp::Insert, insert),
        (GetStamp::ValueInsert, value_insert),
    ] {
        assert_eq!(
            get_cache_story(stamp, late),
            Some(b"v1".to_vec()),
            "{stamp:?}: stale, v3 was acknowledged"
        );
        // With the tags on, the reused X's new word misses the cache.
        let tagged = Faults {
            ignore_incarnations: false,
            ..late
        };
        assert_eq!(
            get_cache_story(stamp, tagged),
            Some(b"v3".to_vec()),
            "{stamp:?}"
        );
    }
}

// ----- hole 3: outcomes after the commit ------------------------------------

/// A key none of whose candidates is on node 0.
fn remote_key(cfg: &Config, prefix: &str) -> Vec<u8> {
    find_key(cfg, prefix, |c: &[IteAddr]| {
        c.iter().all(|a| a.node != NodeId(0))
    })
}

fn three_nodes() -> Config {
    Config {
        clients_per_node: 2,
        ..Config::default()
    }
}

/// A DELETE of a present key whose commit executes but completes with the
/// NIC's "retries exceeded" timeout. The history (PUT, DELETE, GET) goes
/// through the linearizability checker.
fn delete_with_failed_commit(faults: Faults) -> (Result<bool, Error>, Result<(), String>) {
    let cluster = SimCluster::manual_clock(three_nodes());
    let k = remote_key(&cluster.cfg, "k");
    let rec = Recorder::new();
    let mut c = cluster.client(0, 0);
    c.state_mut().faults = faults;
    nessie_tests::rec_put(&rec, 0, &mut c, &k, b"v").unwrap();
    // Only the commit CAS targets node 0 (loopback): every index entry is remote.
    cluster
        .fabric
        .inject(
            NodeId(0),
            Injection::next(TransportFault::FailAfterExecuting, 1)
                .only(OpKind::Cas)
                .with_error(FabricError::Timeout),
        )
        .unwrap();
    let deleted = nessie_tests::rec_delete(&rec, 0, &mut c, &k);
    assert!(
        !cluster.fabric.injection_pending(NodeId(0)),
        "the commit was hit"
    );
    assert_eq!(nessie_tests::rec_get(&rec, 1, &mut c, &k), Ok(None));
    let verdict = check_history(&rec.events(), 1_000_000)
        .map(|_| ())
        .map_err(|v| v.to_string());
    (deleted, verdict)
}

#[test]
fn hole3_a_commit_whose_completion_failed_is_settled_not_retried() {
    let _limit = time_limit(
        "hole3_a_commit_whose_completion_failed_is_settled_not_retried",
        "-",
        Duration::from_secs(60),
    );
    let (deleted, verdict) = delete_with_failed_commit(Faults::default());
    assert_eq!(
        deleted,
        Ok(true),
        "the commit executed: the key existed and is gone"
    );
    assert_eq!(verdict, Ok(()));
}

#[test]
fn hole3_reinstated_a_committed_delete_is_applied_twice_and_the_checker_says_so() {
    let _limit = time_limit(
        "hole3_reinstated_a_committed_delete_is_applied_twice_and_the_checker_says_so",
        "-",
        Duration::from_secs(60),
    );
    let retry = Faults {
        errors_after_commit_retryable: true,
        ..Faults::default()
    };
    let (deleted, verdict) = delete_with_failed_commit(retry);
    assert_eq!(deleted, Ok(false), "the retry found its own tombstone");
    assert!(
        verdict.is_err(),
        "a DELETE that says the key was absent right after a PUT"
    );
}

/// An update whose previous version is remote: its recycle mark (an RDMA
/// CAS to node 1, after the commit; the key's index entries are all on
/// node 2, so it is the only CAS to node 1) fails.
fn update_with_failed_mark(faults: Faults) -> (Result<bool, Error>, u64, Option<Vec<u8>>) {
    let cluster = SimCluster::manual_clock(three_nodes());
    let k = find_key(&cluster.cfg, "u", |c: &[IteAddr]| {
        c.iter().all(|a| a.node == NodeId(2))
    });
    let mut other = cluster.client(1, 0);
    other.put(&k, b"v1").unwrap();
    let mut c = cluster.client(0, 0);
    c.state_mut().faults = faults;
    cluster
        .fabric
        .inject(
            NodeId(1),
            Injection::next(TransportFault::FailBeforeExecuting, 1).only(OpKind::Cas),
        )
        .unwrap();
    let r = c.put(&k, b"v2");
    assert!(
        !cluster.fabric.injection_pending(NodeId(1)),
        "the mark was hit"
    );
    let leaked = c.last_stats().leaked;
    (r, leaked, c.get(&k).unwrap())
}

#[test]
fn hole3_a_failed_mark_after_the_commit_is_a_counted_leak_not_an_error() {
    let _limit = time_limit(
        "hole3_a_failed_mark_after_the_commit_is_a_counted_leak_not_an_error",
        "-",
        Duration::from_secs(60),
    );
    let (r, leaked, now) = update_with_failed_mark(Faults::default());
    assert_eq!(r, Ok(true));
    assert_eq!(leaked, 1);
    assert_eq!(now, Some(b"v2".to_vec()));
}

#[test]
fn hole3_reinstated_a_committed_put_reports_a_failure() {
    let _limit = time_limit(
        "hole3_reinstated_a_committed_put_reports_a_failure",
        "-",
        Duration::from_secs(60),
    );
    let retry = Faults {
        errors_after_commit_retryable: true,
        ..Faults::default()
    };
    let (r, _, now) = update_with_failed_mark(retry);
    assert!(matches!(r, Err(Error::Fabric(_))), "{r:?}");
    assert_eq!(now, Some(b"v2".to_vec()), "yet the value was written");
}

/// Runs `f` on another thread and fails the test if it takes over 20 s.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the operation hung on a lost completion")
}

/// A PUT on a real clock (T = 50 ms) whose commit's completion is lost,
/// the commit having executed (`LoseCompletion`) or not (`Vanish`).
fn put_with_lost_commit(fault: TransportFault) -> (Result<bool, Error>, u64, Option<Vec<u8>>) {
    bounded(move || {
        let cfg = Config {
            expiration: Duration::from_millis(50),
            deadline_margin: Duration::from_millis(5),
            ..three_nodes()
        };
        let cluster = SimCluster::new(cfg);
        let k = remote_key(&cluster.cfg, "l");
        let mut c = cluster.client(0, 0);
        c.put(b"warm-up", b"x").unwrap();
        cluster
            .fabric
            .inject(NodeId(0), Injection::next(fault, 1).only(OpKind::Cas))
            .unwrap();
        let r = c.put(&k, b"v");
        let settled = c.last_stats().settled_commits;
        (r, settled, c.get(&k).unwrap())
    })
}

#[test]
fn hole3_a_lost_commit_completion_ends_at_the_deadline_with_the_true_outcome() {
    let _limit = time_limit(
        "hole3_a_lost_commit_completion_ends_at_the_deadline_with_the_true_outcome",
        "-",
        Duration::from_secs(60),
    );
    let (r, settled, now) = put_with_lost_commit(TransportFault::LoseCompletion);
    assert_eq!(r, Ok(false), "the commit executed: the PUT succeeded");
    assert_eq!(settled, 1);
    assert_eq!(now, Some(b"v".to_vec()));

    let (r, settled, now) = put_with_lost_commit(TransportFault::Vanish);
    assert_eq!(r, Ok(false), "aborted, settled as not committed, retried");
    assert_eq!(settled, 1);
    assert_eq!(now, Some(b"v".to_vec()));
}

#[test]
fn hole3_when_even_the_settling_cas_fails_the_outcome_is_unknown_and_not_retried() {
    let _limit = time_limit(
        "hole3_when_even_the_settling_cas_fails_the_outcome_is_unknown_and_not_retried",
        "-",
        Duration::from_secs(60),
    );
    let (r, attempts, now) = bounded(|| {
        let cluster = SimCluster::manual_clock(three_nodes());
        let k = remote_key(&cluster.cfg, "n");
        let mut c = cluster.client(0, 0);
        c.put(b"warm-up", b"x").unwrap();
        cluster
            .fabric
            .inject(
                NodeId(0),
                Injection::next(TransportFault::FailAfterExecuting, 2).only(OpKind::Cas),
            )
            .unwrap();
        let r = c.put(&k, b"v");
        let attempts = c.last_stats().attempts;
        (r, attempts, c.get(&k).unwrap())
    });
    assert!(matches!(r, Err(Error::OutcomeUnknown(_))), "{r:?}");
    assert_eq!(Outcome::of(&r), Outcome::Unknown);
    assert_eq!(attempts, 1, "never retried");
    assert_eq!(now, Some(b"v".to_vec()), "(it had in fact committed)");
}

/// As above, for an update: if the commit executed, the previous version
/// is unlinked for good and nobody marks it, so it is counted as leaked.
#[test]
fn hole3_an_update_whose_outcome_stays_unknown_counts_its_previous_version_as_leaked() {
    let _limit = time_limit(
        "hole3_an_update_whose_outcome_stays_unknown_counts_its_previous_version_as_leaked",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(three_nodes());
    let k = remote_key(&cluster.cfg, "n");
    let mut c = cluster.client(0, 0);
    c.put(&k, b"v0").unwrap();
    cluster
        .fabric
        .inject(
            NodeId(0),
            Injection::next(TransportFault::FailAfterExecuting, 2).only(OpKind::Cas),
        )
        .unwrap();
    let r = c.put(&k, b"v");
    assert!(matches!(r, Err(Error::OutcomeUnknown(_))), "{r:?}");
    assert_eq!(c.last_stats().leaked, 1);
}

/// A warmed-up client on node 0 and a key (named from `tag`) with no
/// candidate there; the next CAS to the key's first candidate node (the
/// PUT's install) executes, then completes with an error. Returns that node.
fn install_to_fail_after_executing(
    cluster: &SimCluster,
    tag: &str,
) -> (Vec<u8>, nessie_protocol::Client<SimEndpoint>, NodeId) {
    let k = remote_key(&cluster.cfg, tag);
    let mut c = cluster.client(0, 0);
    c.put(b"warm-up", b"x").unwrap();
    let first = cluster.cfg.hasher().candidates(&k)[0].node;
    cluster
        .fabric
        .inject(
            first,
            Injection::next(TransportFault::FailAfterExecuting, 1).only(OpKind::Cas),
        )
        .unwrap();
    (k, c, first)
}

#[test]
fn hole3_an_install_whose_completion_failed_does_not_block_the_key() {
    let _limit = time_limit(
        "hole3_an_install_whose_completion_failed_does_not_block_the_key",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(three_nodes());
    let (k, mut c, _) = install_to_fail_after_executing(&cluster, "i");
    let r = c.run_once(PutMachine::put(&k, b"v"));
    assert!(matches!(r, Err(Error::Fabric(_))), "{r:?}");
    assert_eq!(Outcome::of(&r), Outcome::NotCommitted);
    assert_eq!(c.get(&k).unwrap(), None);
    // The owner aborted its entry itself: no waiting for its deadline.
    assert_eq!(c.put(&k, b"v"), Ok(false));
    assert_eq!(c.last_stats().attempts, 1);
}

/// As above, and the owner's abort CAS fails too (nothing executed): it
/// stops short of unlinking an entry it does not know was ever linked, so
/// the entry is counted as leaked, and the install's error is reported.
#[test]
fn hole3_an_install_and_an_abort_whose_completions_failed_count_a_leak() {
    let _limit = time_limit(
        "hole3_an_install_and_an_abort_whose_completions_failed_count_a_leak",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(three_nodes());
    let (k, mut c, first) = install_to_fail_after_executing(&cluster, "j");
    // The abort is the first CAS to node 0 (every index entry is remote).
    cluster
        .fabric
        .inject(
            NodeId(0),
            Injection::next(TransportFault::FailBeforeExecuting, 1).only(OpKind::Cas),
        )
        .unwrap();
    let r = c.run_once(PutMachine::put(&k, b"v"));
    assert!(
        !cluster.fabric.injection_pending(first),
        "the install was hit"
    );
    assert!(
        !cluster.fabric.injection_pending(NodeId(0)),
        "the abort was hit"
    );
    assert!(matches!(r, Err(Error::Fabric(_))), "{r:?}");
    assert_eq!(c.last_stats().leaked, 1);
}

// ----- hole 4: inserts blocked by a crashed migrator ------------------------

/// m sits at slot 0 (candidates [0, 1]), g at slot 2 (candidates [2, 3]); a
/// PUT of p (slots 0 and 2) moves m to slot 1 and crashes right after the
/// copy commits: slots 0 and 1 both name the committed copy.
fn crashed_mover(cluster: &SimCluster) -> (Vec<u8>, Vec<u8>, nessie_protocol::Client<SimEndpoint>) {
    let c = &cluster.cfg;
    let [m, g, p] = nessie_tests::one_move(c);
    let mut b = cluster.client(0, 1);
    b.put(&m, b"mv").unwrap();
    b.put(&g, b"gv").unwrap();
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    assert!(a.run_until(is_state_flip));
    assert!(a.step(), "the copy commits");
    assert!(
        a.peek().iter().any(|wr| is_index_cas(&wr.op)),
        "next: clear the source"
    );
    drop(a); // crash
    (m, g, b)
}

fn insert_from_the_destination_side(faults: Faults) -> Result<bool, Error> {
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, g, mut b) = crashed_mover(&cluster);
    b.state_mut().faults = faults;
    // q's candidates: slot 1 (the copy's destination) and slot 2 (g).
    let q = find_key(&cluster.cfg, "q", |k| k == [slot(1), slot(2)]);
    let mut r = b.put(&q, b"qv");
    for _ in 0..3 {
        if r.is_ok() {
            break;
        }
        // Any number of expiration periods changes nothing for the landed code.
        cluster.fabric.advance(cluster.cfg.expiration * 2);
        r = b.put(&q, b"qv");
    }
    if r.is_ok() {
        for (k, v) in [(&m, &b"mv"[..]), (&g, b"gv"), (&q, b"qv")] {
            assert_eq!(b.get(k).unwrap().as_deref(), Some(v));
        }
    }
    r
}

#[test]
fn hole4_a_committed_copy_is_finished_from_its_destination_side() {
    let _limit = time_limit(
        "hole4_a_committed_copy_is_finished_from_its_destination_side",
        "-",
        Duration::from_secs(60),
    );
    assert_eq!(
        insert_from_the_destination_side(Faults::default()),
        Ok(false)
    );
}

/// The finish from the destination side, counted: q's PUT unlinks the
/// crashed mover's source for it (one help), then moves the copy out of
/// slot 1 (one move of its own) and takes slot 1.
#[test]
fn hole4_the_destination_side_finish_is_counted_as_a_help() {
    let _limit = time_limit(
        "hole4_the_destination_side_finish_is_counted_as_a_help",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(tiny_config());
    let (m, _g, mut b) = crashed_mover(&cluster);
    let q = find_key(&cluster.cfg, "q", |k| k == [slot(1), slot(2)]);
    assert_eq!(b.put(&q, b"qv"), Ok(false));
    let s = b.last_stats();
    assert_eq!((s.helps, s.migrations), (1, 1), "{s:?}");
    assert_eq!(b.get(&m).unwrap(), Some(b"mv".to_vec()));
}

#[test]
fn hole4_reinstated_inserts_are_blocked_forever() {
    let _limit = time_limit(
        "hole4_reinstated_inserts_are_blocked_forever",
        "-",
        Duration::from_secs(60),
    );
    let landed = Faults {
        conflict_ends_put: true,
        ..Faults::default()
    };
    assert_eq!(
        insert_from_the_destination_side(landed),
        Err(Error::Timeout)
    );
}

/// q's first source holds an insert in progress (within its owner's
/// deadline); its second source holds g, which can move to the empty slot 3.
/// (The depth-first search meets the sources one after another; the
/// breadth-first one never expands a busy entry.)
fn insert_past_a_busy_source(search: MigrateSearch, faults: Faults) -> Result<bool, Error> {
    let cluster = SimCluster::manual_clock(Config {
        migrate_search: search,
        ..tiny_config()
    });
    let c = &cluster.cfg;
    let m = find_key(c, "m", |k| k == [slot(0), slot(3)]);
    let g = find_key(c, "g", |k| k == [slot(2), slot(3)]);
    let z = find_key(c, "z", |k| k == [slot(1), slot(3)]);
    let q = find_key(c, "q", |k| k == [slot(1), slot(2)]);
    let mut b = cluster.client(0, 1);
    b.put(&m, b"mv").unwrap();
    b.put(&g, b"gv").unwrap();
    let mut z_writer = cluster.stepper(0, 0, PutMachine::put(&z, b"zv"));
    assert!(
        z_writer.run_until(is_state_flip),
        "z installed at slot 1, verified"
    );
    b.state_mut().faults = faults;
    b.put(&q, b"qv")
}

#[test]
fn hole4_a_conflict_at_one_source_lets_the_put_try_the_next() {
    let _limit = time_limit(
        "hole4_a_conflict_at_one_source_lets_the_put_try_the_next",
        "-",
        Duration::from_secs(60),
    );
    assert_eq!(
        insert_past_a_busy_source(MigrateSearch::DepthFirst, Faults::default()),
        Ok(false)
    );
    assert_eq!(
        insert_past_a_busy_source(MigrateSearch::BreadthFirst, Faults::default()),
        Ok(false)
    );
}

#[test]
fn hole4_reinstated_one_busy_source_fails_the_put() {
    let _limit = time_limit(
        "hole4_reinstated_one_busy_source_fails_the_put",
        "-",
        Duration::from_secs(60),
    );
    let landed = Faults {
        conflict_ends_put: true,
        ..Faults::default()
    };
    assert_eq!(
        insert_past_a_busy_source(MigrateSearch::DepthFirst, landed),
        Err(Error::Timeout)
    );
    // Breadth first there is no "next source": the busy entry is not
    // expanded, and the chain through g is found in the same search.
    assert_eq!(
        insert_past_a_busy_source(MigrateSearch::BreadthFirst, landed),
        Ok(false)
    );
}

/// Depth first, with no room anywhere: q's first source is busy (an insert
/// in progress) and its second cannot be freed (g, w and m fill each
/// other's candidates). The attempt ends in a conflict, worth retrying once
/// the busy source settles, not in `TableFull`.
#[test]
fn hole4_a_busy_source_and_a_full_one_make_a_conflict_not_table_full() {
    let _limit = time_limit(
        "hole4_a_busy_source_and_a_full_one_make_a_conflict_not_table_full",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(Config {
        migrate_search: MigrateSearch::DepthFirst,
        ..tiny_config()
    });
    let c = &cluster.cfg;
    let m = find_key(c, "m", |k| k == [slot(0), slot(3)]);
    let w = find_key(c, "w", |k| k == [slot(3), slot(0)]);
    let g = find_key(c, "g", |k| k == [slot(2), slot(3)]);
    let z = find_key(c, "z", |k| k == [slot(1), slot(3)]);
    let q = find_key(c, "q", |k| k == [slot(1), slot(2)]);
    let mut b = cluster.client(0, 1);
    b.put(&m, b"mv").unwrap();
    b.put(&w, b"wv").unwrap();
    b.put(&g, b"gv").unwrap();
    let mut z_writer = cluster.stepper(0, 0, PutMachine::put(&z, b"zv"));
    assert!(
        z_writer.run_until(is_state_flip),
        "z installed at slot 1, verified"
    );
    assert_eq!(b.run_once(PutMachine::put(&q, b"qv")), Err(Error::Conflict));
}

// ----- hole 5: what the documentation promised -------------------------------

#[test]
fn hole5_multiple_reads_keeps_the_cache() {
    let _limit = time_limit(
        "hole5_multiple_reads_keeps_the_cache",
        "-",
        Duration::from_secs(60),
    );
    // Keys of at most 8 B: the value lies past the header-and-key read.
    let cluster = SimCluster::new(Config {
        multiple_reads: true,
        max_key_len: 8,
        ..three_nodes()
    });
    let k = find_key(&cluster.cfg, "c", |c| c[0].node == NodeId(1));
    cluster.client(2, 0).put(&k, b"value").unwrap();
    let mut reader = cluster.client(0, 0);
    assert_eq!(reader.get(&k).unwrap(), Some(b"value".to_vec()));
    assert_eq!(
        reader.last_stats().data_reads,
        2,
        "header and key, then the value"
    );
    assert_eq!(reader.get(&k).unwrap(), Some(b"value".to_vec()));
    let s = reader.last_stats();
    assert_eq!((s.index_reads, s.data_reads), (1, 0), "a cache hit: {s}");
}

#[test]
fn hole5_a_certified_absence_read_after_the_deadline_is_discarded() {
    let _limit = time_limit(
        "hole5_a_certified_absence_read_after_the_deadline_is_discarded",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(three_nodes());
    let mut d = cluster.stepper(0, 0, PutMachine::delete(b"absent"));
    assert!(d.step(), "scan");
    assert!(d.deliver(), "the certifying reads land ...");
    cluster
        .fabric
        .advance(cluster.cfg.expiration + Duration::from_millis(1));
    let (r, _, _) = d.finish(); // ... and are processed after the deadline.
    assert_eq!(r, Err(Error::Timeout));
}

#[test]
fn hole5_no_mutation_after_the_commit_is_posted_inside_the_margin() {
    let _limit = time_limit(
        "hole5_no_mutation_after_the_commit_is_posted_inside_the_margin",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::manual_clock(three_nodes());
    let k = remote_key(&cluster.cfg, "d");
    let mut c = cluster.client(1, 0);
    c.put(&k, b"v").unwrap();
    let mut d = cluster.stepper(0, 0, PutMachine::delete(&k));
    assert!(d.run_until(is_state_flip));
    assert!(d.deliver(), "the commit lands");
    cluster
        .fabric
        .advance(cluster.cfg.expiration - Duration::from_millis(5));
    assert!(
        d.peek().iter().all(|wr| !is_index_cas(&wr.op)),
        "no unlink of the tombstone inside the margin"
    );
    let (r, m, _) = d.finish();
    assert_eq!(r, Ok(true), "the DELETE committed");
    assert_eq!(m.stats().index_cas, 1, "the install only");
    assert_eq!(
        c.get(&k).unwrap(),
        None,
        "a linked tombstone answers not found"
    );
    assert_eq!(c.put(&k, b"again"), Ok(false));
}

// ----- issue 24, hole 2: a late completion answers the next attempt ---------

fn is_data_read(op: &Op) -> bool {
    matches!(op, Op::Read { addr, .. } if addr.region == Region::Data)
}

/// W (node 0) stores k = v1 in its entry X1. R (node 1) GETs k: the READ of
/// X1 is held back past the attempt's deadline, so the attempt gives up
/// (`Timeout`, retried). While R backs off, W's PUT of v2 (entry X2) is
/// acknowledged. R's next attempt reads k's index entry (X2's word) and
/// posts the READ of X2, with the number the READ of X1 had: the READ of X1
/// completes now, ahead of it. Then R GETs k again. Returns both GETs'
/// answers, the first GET's attempts and the second's data reads.
fn late_read_story(faults: Faults) -> (Option<Vec<u8>>, u64, Option<Vec<u8>>, u64) {
    let cluster = SimCluster::manual_clock(three_nodes());
    let mut w = cluster.client(0, 0);
    assert_eq!(w.put(b"k", b"v1"), Ok(false));
    let id = ClientId {
        node: NodeId(1),
        index: 0,
    };
    let ep = LateEndpoint::new(cluster.fabric.open(id.node).unwrap());
    let mut r = Client::new(cluster.cfg.clone(), id, ep).unwrap();
    r.state_mut().faults = faults;
    r.endpoint_mut().hold(is_data_read, is_data_read);
    r.endpoint_mut().on_backoff(move || {
        assert_eq!(w.put(b"k", b"v2"), Ok(true), "W's update is acknowledged");
    });
    let first = r.get(b"k").unwrap();
    let attempts = r.last_stats().attempts;
    assert_eq!(r.endpoint().released, 1, "the READ of X1 came in late");
    // W's PUT of v2 was acknowledged before this GET began.
    let second = r.get(b"k").unwrap();
    (first, attempts, second, r.last_stats().data_reads)
}

#[test]
fn issue24_hole2_a_late_completion_of_an_attempt_is_dropped_not_taken_by_the_next() {
    let (first, attempts, second, reads) = late_read_story(Faults::default());
    assert_eq!(attempts, 2, "the first attempt timed out and was retried");
    assert_eq!(first, Some(b"v2".to_vec()));
    assert_eq!(second, Some(b"v2".to_vec()));
    assert_eq!(reads, 0, "a cache hit, on X2's own bytes");
}

#[test]
fn issue24_hole2_reinstated_the_late_read_is_returned_and_poisons_the_cache() {
    let landed = Faults {
        machine_local_request_ids: true,
        ..Faults::default()
    };
    let (first, attempts, second, reads) = late_read_story(landed);
    assert_eq!(attempts, 2);
    assert_eq!(first, Some(b"v1".to_vec()), "X1's bytes read as X2's");
    assert_eq!(
        second,
        Some(b"v1".to_vec()),
        "stale: v2 was acknowledged before this GET began"
    );
    assert_eq!(
        reads, 0,
        "served from the cache: X1's bytes under X2's word"
    );
}

/// The same late READ in a [`Pipeline`] (which shares the `Client`'s
/// router): R's GET, a pipeline of depth 1, holds the READ of X1; W's PUT
/// of v2 is acknowledged meanwhile; R's retry posts the READ of X2 and the
/// READ of X1 comes in. The GET may answer either value (it overlapped the
/// PUT), but a GET after it must see v2.
#[test]
fn issue24_hole2_a_pipeline_drops_the_late_completion_too() {
    let cluster = SimCluster::manual_clock(three_nodes());
    let mut w = cluster.client(0, 0);
    assert_eq!(w.put(b"k", b"v1"), Ok(false));
    let mut ep = LateEndpoint::new(cluster.fabric.open(NodeId(1)).unwrap());
    ep.hold(is_data_read, is_data_read);
    let mut p = Pipeline::new(cluster.cfg.clone(), NodeId(1), 0, 1, ep).unwrap();
    p.submit(0, Request::Get(b"k".to_vec()));
    let mut done = Vec::new();
    while !p.endpoint().holding() {
        p.progress(&mut done, Duration::from_millis(1));
    }
    assert_eq!(w.put(b"k", b"v2"), Ok(true), "W's update is acknowledged");
    while p.outstanding() > 0 {
        p.progress(&mut done, Duration::from_millis(1));
    }
    assert_eq!(p.endpoint().released, 1, "the READ of X1 came in late");
    assert_eq!(done[0].stats.attempts, 2);
    assert_eq!(done[0].result, Ok(Response::Get(Some(b"v2".to_vec()))));
    let again = p.run([Request::Get(b"k".to_vec())]);
    assert_eq!(again, vec![Ok(Response::Get(Some(b"v2".to_vec())))]);
}

// ----- issue 24, hole 3: one slow round is not a full table -----------------

/// p's candidates (slots 0 and 1) hold m and n; m's other candidate (slot
/// 2) holds g, whose other candidate (slot 3) is empty: moving g to slot 3,
/// then m to slot 2, frees slot 0 for p (a chain of two moves). A's PUT of p
/// searches for it, and the second round of the search's first level is
/// processed `slow` after it was posted (300 ms: a descheduled client).
/// Returns A's answer, then a fresh PUT's of p and its attempts.
fn slow_search_story(
    faults: Faults,
    slow: Duration,
) -> (Result<bool, Error>, Result<bool, Error>, u64) {
    let cluster = SimCluster::manual_clock(tiny_config());
    let [m, g, n, p] = two_move_chain(&cluster.cfg);
    let mut b = cluster.client(0, 1);
    for k in [&m, &g, &n] {
        assert_eq!(b.put(k, b"v"), Ok(false));
    }
    let mut a = cluster.stepper(0, 0, PutMachine::put(&p, b"pv"));
    a.state.faults = faults;
    assert!(a.run_until(is_index_read));
    assert!(a.step(), "the scan: slots 0 and 1 are taken");
    // The search's first level: the keys of m and n, then their other
    // candidates (slot 2).
    assert!(a.run_until(is_index_read));
    assert!(a.deliver());
    cluster.fabric.advance(slow);
    let (r, _, _) = a.finish();
    let again = b.put(&p, b"pv");
    let attempts = b.last_stats().attempts;
    for k in [&m, &g, &n] {
        assert_eq!(b.get(k).unwrap(), Some(b"v".to_vec()));
    }
    (r, again, attempts)
}

#[test]
fn issue24_hole3_a_search_one_attempt_cannot_afford_is_retryable() {
    let quick = slow_search_story(Faults::default(), Duration::ZERO);
    assert_eq!(
        quick.0,
        Ok(false),
        "without the slow round, A moves g and m"
    );
    assert_eq!(quick.1, Ok(true), "(the fresh PUT updates p)");
    let (r, again, attempts) = slow_search_story(Faults::default(), Duration::from_millis(300));
    assert_eq!(r, Err(Error::Timeout), "nothing committed; worth retrying");
    assert!(r.unwrap_err().is_retryable());
    assert_eq!(again, Ok(false), "a fresh attempt inserts p");
    assert_eq!(attempts, 1, "at once");
}

#[test]
fn issue24_hole3_reinstated_one_slow_round_reports_a_roomy_table_full() {
    let landed = Faults {
        unaffordable_search_table_full: true,
        ..Faults::default()
    };
    let (r, again, attempts) = slow_search_story(landed, Duration::from_millis(300));
    assert_eq!(r, Err(Error::TableFull { depth: 4 }), "never retried");
    assert_eq!(again, Ok(false), "yet a fresh attempt inserts p at once");
    assert_eq!(attempts, 1);
}

#[test]
fn the_outcome_of_every_error_class() {
    let _limit = time_limit(
        "the_outcome_of_every_error_class",
        "-",
        Duration::from_secs(60),
    );
    let id = ClientId {
        node: NodeId(0),
        index: 0,
    };
    assert_eq!(id.node, NodeId(0));
    assert_eq!(Outcome::of(&Ok::<(), Error>(())), Outcome::Committed);
    for e in [
        Error::Conflict,
        Error::Timeout,
        Error::TableFull { depth: 1 },
        Error::Unreachable(NodeId(1), nessie_protocol::Needed::Entry),
        Error::Fabric(FabricError::NoCompletion),
    ] {
        assert_eq!(e.outcome(), Outcome::NotCommitted, "{e}");
    }
    assert_eq!(
        nessie_protocol::Error::OutcomeUnknown(nessie_protocol::UnknownOutcome::new(
            nessie_protocol::UnknownStep::Unfinished,
            None
        ))
        .outcome(),
        Outcome::Unknown
    );
    assert!(
        !nessie_protocol::Error::OutcomeUnknown(nessie_protocol::UnknownOutcome::new(
            nessie_protocol::UnknownStep::Unfinished,
            None
        ))
        .is_retryable()
    );
}

// ----- issue 24: recycle marks that need neither A1 nor A2 ------------------

/// The recycle words of every entry `cluster`'s index tables name: (entry,
/// whether it is marked for recycling).
fn linked_entries(cluster: &SimCluster) -> Vec<(nessie_protocol::DteAddr, bool)> {
    let c = &cluster.cfg;
    let mut out = Vec::new();
    for n in 0..c.nodes {
        for s in 0..c.index_slots_per_node {
            let w = cluster
                .fabric
                .read_word(NodeId(n), Region::Index, 8 * u64::from(s))
                .unwrap();
            if let Some(d) = IndexEntry(w).dte().filter(|_| IndexEntry(w).is_present()) {
                let offset = c.layout().entry_offset(d.index) + 16;
                let r = cluster
                    .fabric
                    .read_word(d.node(), Region::Data, offset)
                    .unwrap();
                out.push((d, nessie_protocol::layout::RecycleWord::decode(r).recycle));
            }
        }
    }
    out
}

/// W (node 0, two data table entries) writes k; R (node 1) replaces it, so
/// R marks W's entry X remotely; the mark's packet is duplicated and the
/// copy held in the fabric. W, out of entries, sweeps and sees X marked, is
/// refused (`DataTableFull`: T has not passed since it saw the mark), and
/// once T has passed by its own clock reuses X for k3, linked. Then the held
/// copy lands. Returns the linked entries with their recycle flags, and
/// whether a copy was held.
fn duplicated_mark_story(faults: Faults) -> (Vec<(nessie_protocol::DteAddr, bool)>, bool) {
    let cluster = SimCluster::manual_clock(Config {
        nodes: 2,
        index_slots_per_node: 4,
        candidates: 2,
        clients_per_node: 1,
        dtes_per_node: 2,
        cache_capacity: 0,
        ..Config::default()
    });
    let mut w = cluster.client(0, 0);
    let mut r = cluster.client(1, 0);
    r.state_mut().faults = faults;
    assert_eq!(w.put(b"k", b"a"), Ok(false));
    // R's mark of X is the only NIC WRITE to node 0 (when marks are WRITEs).
    cluster
        .fabric
        .inject(
            NodeId(0),
            Injection::next(TransportFault::DuplicateWrite, 1)
                .only(OpKind::Write)
                .later(Later::OnRequest),
        )
        .unwrap();
    assert_eq!(r.put(b"k", b"r"), Ok(true));
    let held = cluster.fabric.parked() == 1;
    assert_eq!(w.put(b"k2", b"b"), Ok(false));
    assert!(matches!(
        w.put(b"k3", b"c"),
        Err(Error::DataTableFull { .. })
    ));
    cluster.fabric.advance(cluster.cfg.expiration);
    assert_eq!(w.put(b"k3", b"c"), Ok(false), "X reused for k3");
    cluster.fabric.land_parked();
    (linked_entries(&cluster), held)
}

/// A remote recycle mark is a CAS that names the incarnation it read (issue
/// 24): RC transports replay no atomic, and one that lands late finds the
/// next incarnation's word. As a plain WRITE (`blind_recycle_mark`), a
/// duplicated copy landing after the entry was reused marks a linked entry
/// (I4), which the owner would hand out again while k3 still names it.
#[test]
fn a_duplicated_recycle_mark_marks_a_reused_entry_only_when_marks_are_writes() {
    let (linked, held) = duplicated_mark_story(Faults::default());
    assert!(!held, "a CAS is never duplicated");
    assert_eq!(linked.len(), 3, "{linked:?}");
    assert!(linked.iter().all(|&(_, marked)| !marked), "{linked:?}");
    let blind = Faults {
        blind_recycle_mark: true,
        ..Faults::default()
    };
    let (linked, held) = duplicated_mark_story(blind);
    assert!(held);
    assert!(
        linked.iter().any(|&(_, marked)| marked),
        "the late copy marked the reused, linked entry: {linked:?}"
    );
}
