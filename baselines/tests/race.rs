//! RACE hashing (ATC'21) as a system of this workspace: its story as tests.
//! Fully client-driven: no server workers; it must behave like a map,
//! stay linearizable under concurrency (the WGL checker), cost what the
//! paper says its operations cost, free what it unlinks, fail with typed
//! errors, and answer honestly under a fault at every step.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::faulty::{Arm, FaultyFabric, SUPPORTED};
use common::*;
use nessie_baselines::race::RaceClient;
use nessie_baselines::race::RaceLayout;
use nessie_baselines::Deployment;
use nessie_baselines::{KvSystem, SystemConfig};
use nessie_check::time_limit;
use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::{ClientId, Config, Error, Fabric, KvClient, NodeId};
use nessie_protocol::{OpKind, Outcome, TransportFault};

fn small(nodes: u16, slots: u32, blocks: u32) -> Config {
    Config {
        nodes,
        index_slots_per_node: slots,
        dtes_per_node: blocks,
        clients_per_node: 2,
        max_key_len: 32,
        max_value_len: 64,
        expiration: Duration::from_millis(50),
        ..Config::default()
    }
}

#[test]
fn race_behaves_like_a_map_and_has_no_servers() {
    let d = start_kind(KvSystem::Race, small(2, 84, 4096));
    assert_eq!(d.server_requests(), 0);
    matches_btreemap(&d, 3000, 40, 31);
    assert_eq!(d.server_requests(), 0, "nothing but one-sided requests");
}

#[test]
fn race_is_linearizable_on_hot_keys() {
    let _limit = time_limit(
        "race_is_linearizable_on_hot_keys",
        "-",
        Duration::from_secs(120),
    );
    // Four hot keys, concurrent inserts of one key after its deletes: the
    // duplicate check runs.
    let d = start_kind(KvSystem::Race, small(3, 84, 4096));
    assert!(linearizable_workload(&d, 300, 4, 50, 41) >= 1800);
}

fn race_client(
    cfg: &Config,
    fabric: &SimFabric,
    node: u16,
) -> RaceClient<nessie_fabric_sim::SimEndpoint> {
    let id = ClientId {
        node: NodeId(node),
        index: 0,
    };
    RaceClient::new(
        std::sync::Arc::new(cfg.clone()),
        id,
        fabric.open(id.node).unwrap(),
    )
    .unwrap()
}

/// The next key (counting on from `n`) whose home is `node`.
fn key_homed_on(cfg: &Config, node: NodeId, n: &mut u32) -> Vec<u8> {
    let layout = RaceLayout::new(cfg);
    loop {
        *n += 1;
        let k = format!("key-{n}").into_bytes();
        if layout.place(&k).home == node {
            return k;
        }
    }
}

fn fabric(cfg: &Config) -> SimFabric {
    let sys = SystemConfig::new(KvSystem::Race, cfg.clone());
    SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap()
}

#[test]
fn an_insert_is_three_round_trips_and_an_update_two_when_the_blocks_are_local() {
    let cfg = small(2, 84, 256);
    let f = fabric(&cfg);
    // A key whose home is the other node: every bucket READ is remote.
    let mut c = race_client(&cfg, &f, 0);
    let key = key_homed_on(&cfg, NodeId(1), &mut 0);
    assert!(!c.put(&key, b"one").unwrap());
    let s = c.last_stats();
    // Buckets (and a CPU write of the block), CAS, buckets again.
    assert_eq!(
        (s.round_trips, s.index_reads, s.index_cas),
        (3, 4, 1),
        "{s:?}"
    );
    assert_eq!(s.local_writes, 1);
    assert_eq!(c.get(&key).unwrap().as_deref(), Some(&b"one"[..]));
    let s = c.last_stats();
    // Buckets, then the block (on our own node: a CPU read).
    assert_eq!(
        (s.round_trips, s.index_reads, s.local_reads),
        (1, 2, 1),
        "{s:?}"
    );
    assert!(c.put(&key, b"two").unwrap());
    let s = c.last_stats();
    // Buckets, the old block, the slot CAS, the old block's free mark.
    assert_eq!((s.round_trips, s.index_cas, s.data_cas), (2, 1, 1), "{s:?}");
    assert!(c.delete(&key).unwrap());
    assert_eq!(c.get(&key).unwrap(), None);
    assert!(!c.delete(&key).unwrap());
}

#[test]
fn a_remote_get_reads_its_block_with_one_more_round_trip() {
    let cfg = small(2, 84, 256);
    let f = fabric(&cfg);
    let mut writer = race_client(&cfg, &f, 1);
    let mut reader = race_client(&cfg, &f, 0);
    let key = key_homed_on(&cfg, NodeId(1), &mut 0);
    writer.put(&key, b"v").unwrap();
    assert_eq!(reader.get(&key).unwrap().as_deref(), Some(&b"v"[..]));
    let s = reader.last_stats();
    assert_eq!(
        (s.round_trips, s.index_reads, s.data_reads),
        (2, 2, 1),
        "{s:?}"
    );
}

#[test]
fn freed_blocks_come_back_after_the_hold_and_a_full_share_says_so() {
    // Two blocks per client: every update frees one, which is reused only
    // after T plus the skew.
    let cfg = small(1, 84, 4);
    let f = fabric(&cfg);
    let mut c = race_client(&cfg, &f, 0);
    c.put(b"k", b"0").unwrap();
    c.put(b"k", b"1").unwrap();
    // Both blocks are out (one linked, one in quarantine).
    assert_eq!(
        c.put(b"k", b"2"),
        Err(Error::DataTableFull {
            node: NodeId(0),
            class: 0
        })
    );
    std::thread::sleep(cfg.expiration + cfg.clock_skew + Duration::from_millis(20));
    for i in 0..20u8 {
        assert!(c.put(b"k", &[i]).unwrap());
        std::thread::sleep(cfg.expiration + cfg.clock_skew + Duration::from_millis(5));
    }
    assert_eq!(c.get(b"k").unwrap(), Some(vec![19]));
    assert_eq!(c.counters().leaked, 0);
}

#[test]
fn bad_input_gets_typed_errors() {
    let d = start_kind(KvSystem::Race, small(2, 84, 256));
    let mut c = client(&d, 0, 0);
    assert!(matches!(c.put(b"", b"v"), Err(Error::EmptyKey { .. })));
    assert!(matches!(
        c.put(&[1; 33], b"v"),
        Err(Error::KeyTooLarge { .. })
    ));
    assert_eq!(
        c.put(b"k", &[0; 65]),
        Err(Error::ValueTooLarge { len: 65, max: 64 })
    );
    assert_eq!(c.get(b"k").unwrap(), None);
}

#[test]
fn a_full_table_is_table_full() {
    // Two groups on one node: 42 slots, a key's 28 candidates among them.
    let d = start_kind(KvSystem::Race, small(1, 42, 4096));
    let mut c = client(&d, 0, 0);
    let mut full = None;
    for i in 0..60u32 {
        match c.put(&i.to_le_bytes(), b"v") {
            Ok(false) => {}
            Err(e) => {
                full = Some((i, e));
                break;
            }
            Ok(true) => panic!("key {i} was new"),
        }
    }
    let (i, e) = full.expect("42 slots take at most 42 keys");
    assert_eq!(e, Error::TableFull { depth: 0 });
    assert!(i >= 28, "filled to {i}");
}

/// What a client's operation did to the key, in honesty's terms: `Ok` means
/// committed; `OutcomeUnknown` may be either; every other error means
/// nothing was committed, now or later.
fn honest(
    what: &str,
    outcome: Outcome,
    committed_now: bool,
    committed_later: bool,
) -> Option<String> {
    match outcome {
        Outcome::Committed if !committed_now => Some(format!("{what}: Ok but not in effect")),
        Outcome::NotCommitted if committed_now || committed_later => {
            Some(format!("{what}: reported not committed, but in effect"))
        }
        _ => None,
    }
}

/// RACE's operations with a fault at each of their fabric operations in
/// turn (each of the wrapper's faults: not executed, executed then failed,
/// completion lost, vanished; CPU accesses only fail, before or after):
/// an insert, an update and a DELETE, each of a key homed on the other
/// node, so every bucket READ and slot CAS crosses the fabric. Each result's
/// class is checked against what the key holds right after and a while
/// later, and all three classes are seen.
#[test]
fn every_fault_at_every_step_gives_an_honest_outcome() {
    let _limit = time_limit(
        "every_fault_at_every_step_gives_an_honest_outcome",
        "-",
        Duration::from_secs(120),
    );
    let (seen, lies) = fault_matrix(false);
    assert!(lies.is_empty(), "dishonest outcomes:\n{}", lies.join("\n"));
    for c in ["committed", "not committed", "unknown"] {
        assert!(seen.contains_key(c), "no {c} outcome in {seen:?}");
    }
}

/// The matrix has teeth: a client that reports a slot CAS of unknown
/// outcome as a `Timeout` (the test-only switch
/// `RaceCore::set_unknown_as_timeout`) is caught lying.
#[test]
fn teeth_a_race_client_that_reports_unknown_outcomes_as_timeouts_is_caught() {
    let _limit = time_limit(
        "teeth_a_race_client_that_reports_unknown_outcomes_as_timeouts_is_caught",
        "-",
        Duration::from_secs(120),
    );
    let (_, lies) = fault_matrix(true);
    assert!(
        !lies.is_empty(),
        "a Timeout after a linked CAS must be caught"
    );
}

/// Runs the matrix; what outcome classes it saw, and the lies it found.
fn fault_matrix(unknown_as_timeout: bool) -> (BTreeMap<&'static str, usize>, Vec<String>) {
    let mut cfg = small(2, 4200, 4096);
    cfg.retry.op_timeout = Duration::from_millis(120);
    let sys = SystemConfig::new(KvSystem::Race, cfg.clone());
    let fabric =
        FaultyFabric::new(SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap());
    let d = Deployment::start(sys, fabric.clone()).unwrap();
    let mut reader = d
        .client(ClientId {
            node: NodeId(0),
            index: 1,
        })
        .unwrap();
    let id = ClientId {
        node: NodeId(0),
        index: 0,
    };
    let mut writer = RaceClient::new(
        std::sync::Arc::new(cfg.clone()),
        id,
        fabric.open(id.node).unwrap(),
    )
    .unwrap();
    writer.core_mut().set_unknown_as_timeout(unknown_as_timeout);
    let ctl = fabric.endpoints(NodeId(0))[1].clone();
    let mut n = 0u32;
    let mut fresh = || key_homed_on(&cfg, NodeId(1), &mut n);
    let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut lies = Vec::new();
    for op in ["insert", "update", "delete"] {
        // The operation's steps, traced on a clean run.
        let key = fresh();
        if op != "insert" {
            writer.put(&key, b"old").unwrap();
        }
        ctl.start_trace();
        match op {
            "delete" => assert!(writer.delete(&key).unwrap()),
            _ => {
                writer.put(&key, b"new").unwrap();
            }
        }
        let steps = ctl.take_trace();
        assert!(steps.len() >= 3, "{op}: {steps:?}");
        for (i, step) in steps.iter().enumerate() {
            let faults: &[TransportFault] =
                if matches!(step.kind, OpKind::LocalRead | OpKind::LocalWrite) {
                    &[
                        TransportFault::FailBeforeExecuting,
                        TransportFault::FailAfterExecuting,
                    ]
                } else {
                    &SUPPORTED
                };
            for &fault in faults {
                let key = fresh();
                if op != "insert" {
                    writer.put(&key, b"old").unwrap();
                }
                ctl.arm(Arm {
                    trigger: None,
                    nth: i as u64 + 1,
                    fault,
                })
                .unwrap();
                let r = match op {
                    "delete" => writer.delete(&key).map(|_| ()),
                    _ => writer.put(&key, b"new").map(|_| ()),
                };
                ctl.disarm();
                let in_effect = |v: Option<Vec<u8>>| match op {
                    "delete" => v.is_none(),
                    _ => v.as_deref() == Some(&b"new"[..]),
                };
                let now = in_effect(reader.get(&key).unwrap());
                std::thread::sleep(Duration::from_millis(30));
                let later = in_effect(reader.get(&key).unwrap());
                let outcome = Outcome::of(&r);
                *seen
                    .entry(match outcome {
                        Outcome::Committed => "committed",
                        Outcome::NotCommitted => "not committed",
                        Outcome::Unknown => "unknown",
                    })
                    .or_default() += 1;
                let what = format!("{op}, step {} ({:?}), {fault:?}: {r:?}", i + 1, step.kind);
                lies.extend(honest(&what, outcome, now, later));
            }
        }
    }
    (seen, lies)
}

/// Where RACE's data lives, with a node down: a key's slots are all on its
/// home node and a PUT's block on the writer's own, so with node 2 of three
/// down a client on node 0 writes every key homed on a live node, and a key
/// homed on node 2 fails with `Unreachable` naming node 2, before anything
/// was written (a READ of its buckets). (Nessie's candidates spread over the
/// nodes: the same 60 keys are measured beside, for the docs.)
#[test]
fn with_a_node_down_every_key_homed_on_a_live_node_is_written() {
    let cfg = small(3, 840, 1024);
    let layout = RaceLayout::new(&cfg);
    let d = start_kind(KvSystem::Race, cfg.clone());
    let nessie = start_kind(KvSystem::Nessie, cfg);
    let mut c = client(&d, 0, 0);
    let mut n = client(&nessie, 0, 0);
    d.fabric().set_node_down(NodeId(2), true).unwrap();
    nessie.fabric().set_node_down(NodeId(2), true).unwrap();
    let (mut written, mut nessie_written) = (0, 0);
    for i in 0..60u32 {
        let key = format!("down-{i}").into_bytes();
        let home = layout.place(&key).home;
        match c.put(&key, b"v") {
            Ok(false) => {
                assert_ne!(home, NodeId(2), "key {i}");
                written += 1;
            }
            Err(Error::Unreachable(node, _)) => {
                assert_eq!((home, node), (NodeId(2), NodeId(2)), "key {i}");
            }
            other => panic!("key {i} homed on {home}: {other:?}"),
        }
        nessie_written += usize::from(n.put(&key, b"v").is_ok());
    }
    eprintln!("node 2 of 3 down: RACE wrote {written} of 60 keys, Nessie {nessie_written}");
    assert!(written >= 30, "{written} of 60");
}

/// A store whose blocks do not fit RACE's slot words (a block of more than
/// 255 units of 64 bytes) is refused before anything starts, by every way
/// in: the system's validation, a deployment, a client made by hand. (The
/// check ran on every operation before; now it runs once.)
#[test]
fn a_layout_beyond_the_slot_words_is_refused_before_anything_starts() {
    let cfg = Config {
        max_value_len: 20_000,
        ..small(2, 64, 16)
    };
    let sys = SystemConfig::new(KvSystem::Race, cfg.clone());
    let layout_refused = |r: &Error| matches!(r, Error::Config(nessie_protocol::ConfigError::OutOfRange { field, .. }) if *field == "race layout");
    assert!(layout_refused(&sys.validate().unwrap_err()));
    let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology())).unwrap();
    let started = Deployment::start(sys, fabric.clone());
    assert!(started.as_ref().is_err_and(layout_refused), "a deployment");
    let id = ClientId {
        node: NodeId(0),
        index: 0,
    };
    let client = RaceClient::new(
        std::sync::Arc::new(cfg),
        id,
        fabric.open(NodeId(0)).unwrap(),
    );
    assert!(client.as_ref().is_err_and(layout_refused), "a client");
    // The same store with small values runs.
    let fine = SystemConfig::new(KvSystem::Race, small(2, 64, 16));
    assert!(fine.validate().is_ok());
}
