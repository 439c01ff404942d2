//! Exact interleavings of the races the protocol's passes exist for, each
//! told twice: with the protocol as documented (correct) and with the one rule
//! switched off (caught).

use std::time::Duration;

use nessie_check::{check_history, Event, Failure, Recorder};
use nessie_protocol::{Config, Error, GetMachine, PutMachine, Request, Response};
use nessie_tests::step::{is_index_read, is_state_flip};
use nessie_tests::{find_key, slot, tiny_config, SimCluster};

/// K sits at its second candidate (slot 1) with its first (slot 0) empty; a
/// GET of K reads slot 0, then a MIGRATE moves K from slot 1 into slot 0, then
/// the GET reads slot 1. Its forward pass saw K nowhere.
fn get_races_a_migrate(skip_reverse_pass: bool) -> Result<Option<Vec<u8>>, Error> {
    let cluster = SimCluster::new(tiny_config());
    let c = cluster.cfg.clone();
    let g = find_key(&c, "g", |k| k == [slot(2), slot(3)]);
    let f = find_key(&c, "f", |k| k == [slot(0), slot(3)]);
    let k = find_key(&c, "k", |k| k == [slot(0), slot(1)]);
    let k2 = find_key(&c, "q", |k| k == [slot(1), slot(2)]);
    let mut w = cluster.client(0, 1);
    w.put(&g, b"g").unwrap();
    w.put(&f, b"f").unwrap();
    w.put(&k, b"present").unwrap();
    w.delete(&f).unwrap();

    let mut get = cluster.stepper(0, 0, GetMachine::get(&k));
    get.state.faults.skip_get_reverse_pass = skip_reverse_pass;
    assert!(get.run_until(is_index_read));
    assert!(get.step(), "slot 0 read: empty");

    // PUT of k2 must free slot 1: K moves to slot 0.
    w.put(&k2, b"k2").unwrap();
    assert_eq!(w.last_stats().migrations, 1);
    assert_eq!(w.last_stats().deep_migrations, 0, "a move at depth 1");

    let (r, _, _) = get.finish();
    r
}

#[test]
fn reverse_pass_turns_a_missed_key_into_a_retry() {
    assert_eq!(get_races_a_migrate(false), Err(Error::Conflict));
}

#[test]
fn without_the_reverse_pass_a_present_key_is_reported_missing() {
    assert_eq!(
        get_races_a_migrate(true),
        Ok(None),
        "the broken variant answers not-found"
    );
}

/// One node, three entries, three candidates: every key shares the same
/// three index table entries, so any MIGRATE visits every entry.
fn crowded() -> Config {
    Config {
        nodes: 1,
        index_slots_per_node: 3,
        candidates: 3,
        clients_per_node: 3,
        ..Config::default()
    }
}

/// A stalls before committing PUT(k, v2), overruns its deadline, and a
/// MIGRATE by C reclaims its entry (restoring v1). Then A resumes and flips
/// its state. Returns the history: A's PUT, then a GET of k.
fn overrunning_owner(cpu_state_flip: bool) -> Vec<Event> {
    let cluster = SimCluster::manual_clock(crowded());
    let rec = Recorder::new();
    let mut b = cluster.client(0, 1);
    for (k, v) in [(&b"k"[..], &b"v1"[..]), (b"x", b"x"), (b"y", b"y")] {
        assert!(!b.put(k, v).unwrap());
        rec.push(Event {
            client: 1,
            request: Request::Put(k.to_vec(), v.to_vec()),
            ret: Ok(Response::Put(false)),
            invoke: rec.tick(),
            response: rec.tick(),
        });
    }
    let a_invoke = rec.tick();
    let mut a = cluster.stepper(0, 0, PutMachine::put(b"k", b"v2"));
    a.state.faults.ignore_deadline = true;
    a.state.faults.cpu_state_flip = cpu_state_flip;
    assert!(a.run_until(is_state_flip));

    cluster
        .fabric
        .advance(cluster.cfg.expiration + cluster.cfg.clock_skew + Duration::from_millis(1));
    let mut c = cluster.client(0, 2);
    assert_eq!(
        c.put(b"z", b"z"),
        Err(Error::TableFull {
            depth: cluster.cfg.max_migrate_depth
        })
    );
    assert!(
        c.last_stats().recoveries >= 1,
        "C's MIGRATE reclaimed A's entry on the way"
    );

    let (r, _, _) = a.finish();
    // A failure recorded by what its error promises.
    let ret = r.map(Response::Put).map_err(|e| Failure::of(&e));
    rec.push(Event {
        client: 0,
        request: Request::Put(b"k".to_vec(), b"v2".to_vec()),
        ret,
        invoke: a_invoke,
        response: rec.tick(),
    });
    let got = b.get(b"k").unwrap();
    rec.push(Event {
        client: 1,
        request: Request::Get(b"k".to_vec()),
        ret: Ok(Response::Get(got)),
        invoke: rec.tick(),
        response: rec.tick(),
    });
    rec.events()
}

#[test]
fn nic_cas_commit_keeps_a_late_owner_from_resurrecting_its_entry() {
    let h = overrunning_owner(false);
    // Recorded by what its error promises (it was recorded as an unknown
    // outcome before, which excused more).
    assert_eq!(
        h[3].ret,
        Err(Failure::NotCommitted),
        "A's commit CAS fails: A is told nothing was committed"
    );
    assert!(check_history(&h, 1_000_000).is_ok());
}

#[test]
fn cpu_store_commit_loses_an_acknowledged_write_and_the_checker_says_so() {
    let h = overrunning_owner(true);
    assert_eq!(
        h[3].ret,
        Ok(Response::Put(true)),
        "A's CPU store 'commits' and A is told so"
    );
    assert_eq!(
        h[4].ret,
        Ok(Response::Get(Some(b"v1".to_vec()))),
        "but readers see the restored old value"
    );
    let e = check_history(&h, 1_000_000).expect_err("lost acknowledged write");
    let v = e
        .violation()
        .expect("a violation, not an inconclusive search");
    assert_eq!(v.key, b"k".to_vec());
}
