//! Pilaf, told as a story: a single client's operations agree with a map
//! (through cuckoo moves, value sizes and full tables); concurrent clients on
//! a few hot keys produce linearizable histories, also while GETs race cuckoo
//! moves in tiny tables, and a stored key that cuckoo inserts keep moving is
//! never reported absent; a GET that reads a hash table entry or extent
//! while the server rewrites it (or memory corrupted by hand) detects the
//! checksum mismatch and retries instead of returning torn data. Turning the
//! checksums off, or the move-epoch check (test-only fault switches), makes
//! the same tests return torn values or miss moving keys, which shows they
//! can fail.

mod common;

use nessie_protocol::rng::xorshift64;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nessie_baselines::pilaf::{EntryRead, PilafClient, PilafLayout};
use nessie_baselines::{Deployment, KvSystem, SystemConfig};
use nessie_check::{time_limit, unique_value, Recorder};
use nessie_fabric_sim::{SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::{ClientId, Config, Error, Fabric, NodeId, OpStats, Region};
use nessie_protocol::{KvClient, Request, Response};

type Pilaf = Deployment<SimFabric>;

fn start(cfg: &Config) -> Pilaf {
    start_with(cfg, |s| s)
}

fn start_with(cfg: &Config, tweak: impl FnOnce(SimConfig) -> SimConfig) -> Pilaf {
    let sys = SystemConfig::new(KvSystem::Pilaf, cfg.clone());
    let fabric = SimFabric::new(tweak(SimConfig::from_topology(sys.topology()))).expect("fabric");
    Deployment::start(sys, fabric).expect("pilaf starts")
}

fn id(node: u16, index: u16) -> ClientId {
    ClientId {
        node: NodeId(node),
        index,
    }
}

/// A client with Pilaf's own API (torn-read counter, fault switch).
fn pilaf_client(dep: &Pilaf, cfg: &Config, who: ClientId) -> PilafClient<SimEndpoint> {
    let ep = dep.fabric().open(who.node).expect("node is up");
    PilafClient::new(Arc::new(cfg.clone()), PilafLayout::new(cfg), who, ep).expect("a free id")
}

/// Cuckoo moves made so far on every node (the move epoch rises by 2 each).
fn moves(dep: &Pilaf, cfg: &Config) -> u64 {
    let l = PilafLayout::new(cfg);
    (0..cfg.nodes)
        .map(|n| {
            dep.fabric()
                .read_word(NodeId(n), Region::Data, l.epoch)
                .expect("epoch word")
                / 2
        })
        .sum()
}

/// Short expiration so that quarantined extents come back within a test.
fn quick(cfg: Config) -> Config {
    Config {
        expiration: Duration::from_millis(100),
        deadline_margin: Duration::from_millis(5),
        clock_skew: Duration::from_millis(1),
        ..cfg
    }
}

// ----- 1. one client against a map ----------------------------------------------

#[test]
fn a_single_client_agrees_with_a_map_through_cuckoo_moves() {
    let cfg = quick(Config {
        nodes: 2,
        index_slots_per_node: 150,
        dtes_per_node: 4096,
        clients_per_node: 1,
        max_key_len: 16,
        max_value_len: 64,
        ..Config::default()
    });
    let dep = start(&cfg);
    let mut c = dep.client(id(0, 0)).expect("client");
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut s = 0x5eed_u64;
    // READs of GETs that hit and of GETs that missed, and how many of each.
    let (mut hit, mut miss) = ((OpStats::default(), 0u64), (OpStats::default(), 0u64));
    for n in 0..4000 {
        let key = format!("key-{}", xorshift64(&mut s) % 200).into_bytes();
        match xorshift64(&mut s) % 10 {
            0..=3 => {
                let got = c.get(&key).expect("get");
                assert_eq!(got, model.get(&key).cloned(), "op {n}: GET {key:?}");
                let kind = if got.is_some() { &mut hit } else { &mut miss };
                kind.0 += c.last_stats();
                kind.1 += 1;
            }
            4 => {
                let existed = c.delete(&key).expect("delete");
                assert_eq!(existed, model.remove(&key).is_some(), "op {n}: DELETE");
            }
            _ => {
                let len = (xorshift64(&mut s) % 65) as usize;
                let value: Vec<u8> = (0..len).map(|i| (n + i) as u8).collect();
                let existed = c.put(&key, &value).expect("put");
                assert_eq!(existed, model.insert(key, value).is_some(), "op {n}: PUT");
            }
        }
    }
    for (k, v) in &model {
        assert_eq!(c.get(k).expect("get").as_ref(), Some(v));
    }
    assert!(moves(&dep, &cfg) > 0, "the load must force cuckoo moves");
    assert!(dep.server_errors().is_empty(), "{:?}", dep.server_errors());
    let per = |(s, n): (OpStats, u64)| {
        let n = n.max(1) as f64;
        format!(
            "{:.2} entry/epoch READs, {:.2} extent READs, {:.2} attempts",
            s.index_reads as f64 / n,
            s.data_reads as f64 / n,
            s.attempts as f64 / n
        )
    };
    println!(
        "{} keys, {} cuckoo moves; {} hits: {}; {} misses: {}",
        model.len(),
        moves(&dep, &cfg),
        hit.1,
        per(hit),
        miss.1,
        per(miss)
    );
}

#[test]
fn values_of_every_size_round_trip_and_limits_are_typed_errors() {
    let cfg = Config {
        nodes: 2,
        max_key_len: 16,
        max_value_len: 64,
        ..Config::default()
    };
    let dep = start(&cfg);
    let mut c = dep.client(id(1, 0)).expect("client");
    for len in [0usize, 1, 7, 8, 9, 63, 64] {
        let key = format!("size-{len}").into_bytes();
        let value = vec![0xa5; len];
        assert!(!c.put(&key, &value).expect("put"));
        assert_eq!(c.get(&key).expect("get"), Some(value));
        let stats = c.last_stats();
        assert_eq!(stats.data_reads, 1, "a hit READs exactly one extent");
        assert!((1..=3).contains(&stats.index_reads));
    }
    let max_key = vec![b'k'; 16];
    assert!(!c.put(&max_key, b"v").expect("put"));
    assert_eq!(c.get(&max_key).expect("get"), Some(b"v".to_vec()));

    assert_eq!(
        c.put(&[b'k'; 17], b"v"),
        Err(Error::KeyTooLarge { len: 17, max: 16 })
    );
    assert_eq!(
        c.get(&[b'k'; 17]),
        Err(Error::KeyTooLarge { len: 17, max: 16 })
    );
    assert_eq!(c.delete(b""), Err(Error::EmptyKey { max: 16 }));
    assert_eq!(
        c.put(b"k", &[0; 65]),
        Err(Error::ValueTooLarge { len: 65, max: 64 })
    );

    // A miss reads all three entries twice around the move epoch.
    assert_eq!(c.get(b"never-stored").expect("get"), None);
    let miss = c.last_stats();
    assert_eq!((miss.index_reads, miss.data_reads), (8, 0));
}

#[test]
fn a_full_table_and_a_full_extent_area_are_typed_errors() {
    let cfg = Config {
        nodes: 1,
        index_slots_per_node: 4,
        dtes_per_node: 64,
        clients_per_node: 1,
        ..Config::default()
    };
    let dep = start(&cfg);
    let mut c = dep.client(id(0, 0)).expect("client");
    let mut stored = Vec::new();
    let err = loop {
        let key = format!("full-{}", stored.len()).into_bytes();
        match c.put(&key, &key) {
            Ok(false) => stored.push(key),
            Ok(true) => panic!("{key:?} is new"),
            Err(e) => break e,
        }
        assert!(stored.len() <= 4, "only 4 entries exist");
    };
    assert!(matches!(err, Error::TableFull { .. }), "{err:?}");
    for k in &stored {
        assert_eq!(
            c.get(k).expect("get").as_ref(),
            Some(k),
            "a failed PUT moves no key out"
        );
    }

    // Extents: 2 per node, quarantined for T after being replaced.
    let cfg = Config {
        nodes: 1,
        dtes_per_node: 2,
        clients_per_node: 1,
        ..Config::default()
    };
    let dep = start(&cfg);
    let mut c = dep.client(id(0, 0)).expect("client");
    assert!(!c.put(b"a", b"1").expect("put"));
    assert!(!c.put(b"b", b"2").expect("put"));
    assert_eq!(
        c.put(b"a", b"3"),
        Err(Error::DataTableFull {
            node: NodeId(0),
            class: 0
        })
    );
    assert_eq!(c.get(b"a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(
        c.put(b"c", b"4"),
        Err(Error::DataTableFull {
            node: NodeId(0),
            class: 0
        })
    );
}

// ----- 2. concurrent clients are linearizable ----------------------------------

/// What a concurrent run did.
struct Run {
    events: Vec<nessie_check::Event>,
    errors: Vec<Error>,
    gets: OpStats,
    get_count: u64,
}

/// A mix of operations on a few hot keys.
#[derive(Clone, Copy)]
struct Mix {
    keys: u64,
    ops_per_client: usize,
    get_pct: u64,
    delete_pct: u64,
    /// Percent of operations that PUT a fresh key and DELETE it again: in a
    /// tiny table these inserts keep moving the hot keys around.
    churn_pct: u64,
    seed: u64,
}

/// Every client of `dep` (`clients_per_node` on each node) runs `mix` in its
/// own thread; values are unique per write. Failed operations are recorded
/// by their outcome class (`Recorder::record_result`): unknown outcomes may
/// have happened, the others must not have.
fn stress(dep: &Pilaf, cfg: &Config, mix: Mix) -> Run {
    let recorder = Arc::new(Recorder::new());
    let mut handles = Vec::new();
    for n in 0..cfg.nodes {
        for i in 0..cfg.clients_per_node {
            let mut c = dep.client(id(n, i)).expect("client");
            let r = recorder.clone();
            let who = usize::from(n) * usize::from(cfg.clients_per_node) + usize::from(i);
            handles.push(thread::spawn(move || {
                let mut s = mix.seed ^ (who as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let (mut errors, mut gets, mut get_count) = (Vec::new(), OpStats::default(), 0);
                for k in 0..mix.ops_per_client {
                    let key = format!("hot-{}", xorshift64(&mut s) % mix.keys).into_bytes();
                    let dice = xorshift64(&mut s) % 100;
                    // Recorded by outcome class: a not-committed failure is
                    // left out by the checker, an unknown one may have happened.
                    let res = if dice < mix.get_pct {
                        let res = r.record_result(
                            who,
                            Request::Get(key.to_vec()),
                            || c.get(&key),
                            |v| Response::Get(v.clone()),
                        );
                        gets += c.last_stats();
                        get_count += 1;
                        res.map(|_| ())
                    } else if dice < mix.get_pct + mix.delete_pct {
                        r.record_result(
                            who,
                            Request::Delete(key.to_vec()),
                            || c.delete(&key),
                            |&e| Response::Delete(e),
                        )
                        .map(|_| ())
                    } else if dice < mix.get_pct + mix.delete_pct + mix.churn_pct {
                        let fresh = format!("churn-{who}-{k}").into_bytes();
                        let value = unique_value(&fresh, who as u64, k as u64, 16);
                        r.record_result(
                            who,
                            Request::Put(fresh.to_vec(), value.clone()),
                            || c.put(&fresh, &value),
                            |&e| Response::Put(e),
                        )
                        .and_then(|_| {
                            r.record_result(
                                who,
                                Request::Delete(fresh.to_vec()),
                                || c.delete(&fresh),
                                |&e| Response::Delete(e),
                            )
                        })
                        .map(|_| ())
                    } else {
                        let value = unique_value(&key, who as u64, k as u64, 16);
                        r.record_result(
                            who,
                            Request::Put(key.to_vec(), value.clone()),
                            || c.put(&key, &value),
                            |&e| Response::Put(e),
                        )
                        .map(|_| ())
                    };
                    if let Err(e) = res {
                        errors.push(e);
                    }
                }
                (errors, gets, get_count)
            }));
        }
    }
    let mut run = Run {
        events: Vec::new(),
        errors: Vec::new(),
        gets: OpStats::default(),
        get_count: 0,
    };
    for h in handles {
        let (e, g, n) = h.join().expect("client thread");
        run.errors.extend(e);
        run.gets += g;
        run.get_count += n;
    }
    run.events = recorder.events();
    run
}

#[test]
fn concurrent_clients_on_hot_keys_are_linearizable() {
    let _limit = time_limit(
        "concurrent_clients_on_hot_keys_are_linearizable",
        "-",
        Duration::from_secs(120),
    );
    let cfg = Config {
        nodes: 3,
        clients_per_node: 2,
        index_slots_per_node: 64,
        dtes_per_node: 4096,
        ..Config::default()
    };
    let dep = start(&cfg);
    let run = stress(
        &dep,
        &cfg,
        Mix {
            keys: 6,
            ops_per_client: 400,
            get_pct: 50,
            delete_pct: 20,
            churn_pct: 0,
            seed: 1,
        },
    );
    assert!(run.errors.is_empty(), "{:?}", run.errors);
    let checked = nessie_tests::assert_linearizable(&run.events);
    assert!(dep.server_errors().is_empty(), "{:?}", dep.server_errors());
    println!(
        "{checked} operations linearizable; {:.2} attempts per GET",
        run.gets.attempts as f64 / run.get_count as f64
    );
}

#[test]
fn gets_racing_cuckoo_moves_in_tiny_tables_are_linearizable() {
    let _limit = time_limit(
        "gets_racing_cuckoo_moves_in_tiny_tables_are_linearizable",
        "-",
        Duration::from_secs(120),
    );
    // One node, 8 entries, 4 hot keys mostly present and 4 clients inserting
    // fresh keys: many inserts find all three candidates taken and move the
    // hot keys while other clients GET them.
    let cfg = quick(Config {
        nodes: 1,
        clients_per_node: 4,
        index_slots_per_node: 8,
        dtes_per_node: 4096,
        max_migrate_depth: 6,
        ..Config::default()
    });
    let dep = start(&cfg);
    let run = stress(
        &dep,
        &cfg,
        Mix {
            keys: 4,
            ops_per_client: 600,
            get_pct: 50,
            delete_pct: 10,
            churn_pct: 25,
            seed: 7,
        },
    );
    // A PUT may find no cuckoo path in so small a table: a typed error,
    // recorded as an operation with unknown effect.
    let unexpected: Vec<_> = run
        .errors
        .iter()
        .filter(|e| !matches!(e, Error::TableFull { .. }))
        .collect();
    assert!(unexpected.is_empty(), "{unexpected:?}");
    let checked = nessie_tests::assert_linearizable(&run.events);
    let moved = moves(&dep, &cfg);
    assert!(moved > 10, "only {moved} cuckoo moves");
    println!(
        "{checked} operations linearizable across {moved} cuckoo moves ({} full-table PUTs); {:.2} attempts per GET",
        run.errors.len(),
        run.gets.attempts as f64 / run.get_count as f64
    );
}

/// Stable keys stay stored while churn keys come and go in a tiny table,
/// forcing cuckoo moves of the stable keys; two readers GET the stable keys.
/// Returns (GETs, GETs that missed or returned a wrong value, cuckoo moves,
/// GETs whose first scan missed the key and whose epoch-checked second scan
/// found it) once `enough` says so or 10 s have passed.
fn moving_keys(
    skip_epoch_check: bool,
    enough: impl Fn(u64, u64) -> bool + Sync,
) -> (u64, u64, u64, u64) {
    let cfg = quick(Config {
        nodes: 1,
        clients_per_node: 4,
        index_slots_per_node: 8,
        dtes_per_node: 8192,
        max_migrate_depth: 6,
        ..Config::default()
    });
    let dep = start_with(&cfg, |s| s.with_schedule_point(slow_words));
    let stable: Vec<Vec<u8>> = (0..5).map(|i| format!("stable-{i}").into_bytes()).collect();
    let mut setup = dep.client(id(0, 0)).expect("client");
    for k in &stable {
        setup.put(k, k).expect("put");
    }
    drop(setup);
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let (gets, bad, rescued) = thread::scope(|sc| {
        for t in 0..2u16 {
            let mut c = dep.client(id(0, t)).expect("client");
            let stop = &stop;
            sc.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("churn-{t}-{n}").into_bytes();
                    match c.put(&key, b"x") {
                        Ok(_) | Err(Error::TableFull { .. }) => {}
                        Err(e) => panic!("churn: {e}"),
                    }
                    c.delete(&key).expect("delete");
                    n += 1;
                }
            });
        }
        let readers: Vec<_> = (2..4u16)
            .map(|r| {
                let mut c = pilaf_client(&dep, &cfg, id(0, r));
                c.set_skip_epoch_check(skip_epoch_check);
                let (stable, stop, enough) = (&stable, &stop, &enough);
                sc.spawn(move || {
                    let (mut gets, mut bad, mut rescued) = (0u64, 0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let k = &stable[(gets % 5) as usize];
                        let torn_before = c.torn_reads().entries;
                        let got = c.get(k).expect("get");
                        gets += 1;
                        // A hit in the first scan READs at most 3 entries
                        // (plus any torn entry read again).
                        let first_scan = 3 + c.torn_reads().entries - torn_before;
                        if got.is_some() && c.last_stats().index_reads > first_scan {
                            rescued += 1;
                        }
                        if got.as_ref() != Some(k) {
                            bad += 1;
                        }
                        if enough(gets, bad) || start.elapsed() > Duration::from_secs(10) {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    (gets, bad, rescued)
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|h| h.join().expect("reader"))
            .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
    });
    let moved = moves(&dep, &cfg);
    println!(
        "skip_epoch_check={skip_epoch_check}: {gets} GETs of stored keys across {moved} cuckoo moves, {bad} missed, {rescued} found only after a first scan missed them"
    );
    (gets, bad, moved, rescued)
}

#[test]
fn keys_moved_by_cuckoo_inserts_are_never_missed() {
    let _limit = time_limit(
        "keys_moved_by_cuckoo_inserts_are_never_missed",
        "-",
        Duration::from_secs(120),
    );
    let (gets, bad, moved, _) = moving_keys(false, |gets, _| gets >= 1500);
    assert_eq!(bad, 0, "a stored key was reported absent in {gets} GETs");
    assert!(moved >= 20, "only {moved} cuckoo moves");
}

#[test]
fn teeth_without_the_move_epoch_a_moving_key_is_missed() {
    let _limit = time_limit(
        "teeth_without_the_move_epoch_a_moving_key_is_missed",
        "-",
        Duration::from_secs(120),
    );
    let (gets, bad, _, _) = moving_keys(true, |_, bad| bad >= 1);
    assert!(
        bad >= 1,
        "{gets} GETs never missed a moving key without the epoch check"
    );
}

// ----- 3. torn reads are detected, never returned -------------------------------

const SHORT: [u8; 24] = [b'A'; 24];
const LONG: [u8; 56] = [b'B'; 56];

/// Every word the simulated NIC or CPU moves takes a short sleep, so the
/// server's 4-word entry writes and the client's entry READs overlap often
/// even on a machine with few cores.
fn slow_words() {
    thread::sleep(Duration::from_micros(10));
}

/// One writer alternating [`SHORT`] and [`LONG`] under one key while a
/// [`PilafClient`] GETs it. Only hash table entries can tear here: extents
/// are written out of place and quarantined before reuse. Different lengths
/// make an entry torn between the two PUTs point at the wrong bytes.
/// Returns (GETs, GETs that returned neither value, the client's torn reads)
/// once `enough` says so or 10 s have passed.
fn race(skip_checksums: bool, enough: impl Fn(u64, u64, u64) -> bool) -> (u64, u64, u64) {
    let cfg = quick(Config {
        nodes: 1,
        clients_per_node: 2,
        dtes_per_node: 8192,
        retry: nessie_protocol::RetryPolicy {
            op_timeout: Duration::from_secs(2),
            ..Default::default()
        },
        ..Config::default()
    });
    let dep = start_with(&cfg, |s| s.with_schedule_point(slow_words));
    let mut writer = dep.client(id(0, 0)).expect("client");
    writer.put(b"torn", &SHORT).expect("put");
    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let v: &[u8] = [&LONG[..], &SHORT[..]][(n & 1) as usize];
                match writer.put(b"torn", v) {
                    Ok(_) | Err(Error::DataTableFull { .. }) => n += 1,
                    Err(e) => panic!("writer: {e}"),
                }
            }
            n
        })
    };
    let mut reader = pilaf_client(&dep, &cfg, id(0, 1));
    reader.set_skip_checksums(skip_checksums);
    let (mut gets, mut bad) = (0u64, 0u64);
    let start = Instant::now();
    while !enough(gets, bad, reader.torn_reads().total())
        && start.elapsed() < Duration::from_secs(10)
    {
        let got = reader.get(b"torn").expect("get").expect("present");
        gets += 1;
        if got[..] != SHORT[..] && got[..] != LONG[..] {
            bad += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let puts = w.join().expect("writer");
    let torn = reader.torn_reads();
    println!(
        "skip_checksums={skip_checksums}: {gets} GETs against {puts} PUTs, {bad} torn values returned, torn reads detected: {} entries, {} extents",
        torn.entries, torn.extents
    );
    (gets, bad, torn.total())
}

#[test]
fn gets_racing_puts_detect_torn_entries_and_return_only_written_values() {
    let _limit = time_limit(
        "gets_racing_puts_detect_torn_entries_and_return_only_written_values",
        "-",
        Duration::from_secs(120),
    );
    let (gets, bad, torn) = race(false, |gets, _, torn| gets >= 2000 && torn >= 5);
    assert_eq!(bad, 0, "a GET returned a torn value");
    assert!(
        torn >= 1,
        "no torn read in {gets} GETs: the race did not happen"
    );
}

#[test]
fn teeth_without_checksums_the_same_race_returns_torn_values() {
    let _limit = time_limit(
        "teeth_without_checksums_the_same_race_returns_torn_values",
        "-",
        Duration::from_secs(120),
    );
    let (gets, bad, _) = race(true, |_, bad, _| bad >= 1);
    assert!(
        bad >= 1,
        "{gets} GETs returned no torn value even without checksums"
    );
}

/// Stores `key`, returning its client and where its entry lives.
fn stored(
    dep: &Pilaf,
    cfg: &Config,
    key: &[u8],
    value: &[u8],
) -> (PilafClient<SimEndpoint>, NodeId, u64) {
    let mut c = pilaf_client(dep, cfg, id(0, 0));
    c.put(key, value).expect("put");
    let l = PilafLayout::new(cfg);
    let home = l.home(key);
    let at = l
        .candidates(key)
        .into_iter()
        .map(|s| l.entry_offset(s))
        .find(|&at| {
            let b = dep
                .fabric()
                .read_bytes(home, Region::Data, at, 32)
                .expect("read");
            matches!(l.decode_entry(&b, true), EntryRead::Used(_))
        })
        .expect("the key has an entry");
    (c, home, at)
}

fn corruption_config() -> Config {
    Config {
        nodes: 2,
        clients_per_node: 1,
        retry: nessie_protocol::RetryPolicy {
            op_timeout: Duration::from_millis(200),
            ..Default::default()
        },
        ..Config::default()
    }
}

#[test]
fn a_corrupt_entry_is_retried_until_repaired_never_returned() {
    let _limit = time_limit(
        "a_corrupt_entry_is_retried_until_repaired_never_returned",
        "-",
        Duration::from_secs(120),
    );
    let cfg = corruption_config();
    let dep = start(&cfg);
    let (mut c, home, at) = stored(&dep, &cfg, b"victim", b"the good value");
    let f = dep.fabric().clone();
    let good = f.read_bytes(home, Region::Data, at, 32).expect("read");
    // A torn entry: the new value length of a PUT in flight, the rest old.
    let mut torn = good.clone();
    torn[4] ^= 0x03;
    f.write_bytes(home, Region::Data, at, &torn).expect("write");

    assert_eq!(c.get(b"victim"), Err(Error::Timeout));
    let seen = c.torn_reads().entries;
    assert!(seen >= 1, "the torn entry was never detected");

    // Another thread repairs it while the client is retrying.
    let repair = {
        let f = f.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            f.write_bytes(home, Region::Data, at, &good).expect("write");
        })
    };
    assert_eq!(
        c.get(b"victim").expect("get"),
        Some(b"the good value".to_vec())
    );
    repair.join().expect("repair");
    assert!(c.torn_reads().entries > seen);
    println!(
        "torn entry: {} reads detected and retried",
        c.torn_reads().entries
    );

    // Teeth: without checksums the torn length is believed.
    f.write_bytes(home, Region::Data, at, &torn).expect("write");
    c.set_skip_checksums(true);
    let got = c.get(b"victim").expect("get");
    assert_ne!(
        got,
        Some(b"the good value".to_vec()),
        "the fault switch must matter"
    );
}

#[test]
fn a_corrupt_extent_times_out_and_is_returned_only_without_checksums() {
    let _limit = time_limit(
        "a_corrupt_extent_times_out_and_is_returned_only_without_checksums",
        "-",
        Duration::from_secs(120),
    );
    let cfg = corruption_config();
    let dep = start(&cfg);
    let (mut c, home, at) = stored(&dep, &cfg, b"victim", b"the good value");
    let f = dep.fabric().clone();
    let l = PilafLayout::new(&cfg);
    let EntryRead::Used(e) = l.decode_entry(
        &f.read_bytes(home, Region::Data, at, 32).expect("read"),
        true,
    ) else {
        panic!("entry in use");
    };
    // A word of the extent (value bytes 2-9) is overwritten, as by a reuse
    // of the extent under a reader.
    let value_at = e.extent + 8;
    f.write_bytes(home, Region::Data, value_at, b"GARBAGE!")
        .expect("write");

    assert_eq!(c.get(b"victim"), Err(Error::Timeout));
    assert!(
        c.torn_reads().extents >= 1,
        "the torn extent was never detected"
    );
    let attempts = c.last_stats().attempts;
    assert!(
        attempts >= 2,
        "each extent mismatch retries the attempt ({attempts})"
    );

    c.set_skip_checksums(true);
    let got = c.get(b"victim").expect("get").expect("present");
    assert_ne!(
        got,
        b"the good value".to_vec(),
        "the fault switch must matter"
    );
    println!(
        "extent corruption: returned {:?} without checksums",
        String::from_utf8_lossy(&got)
    );
}

// ----- 4. a cuckoo move at every point of a GET, deterministically ----------

/// A GET of a key that sits in its second candidate while, just before the
/// GET's `pause_before`-th fabric operation, a server-style cuckoo move puts
/// it back into its first candidate. Returns what the GET answered.
fn get_across_a_move(pause_before: usize, skip_epoch_check: bool) -> Option<Vec<u8>> {
    let cfg = quick(Config {
        nodes: 1,
        index_slots_per_node: 16,
        ..Config::default()
    });
    let dep = start(&cfg);
    let l = PilafLayout::new(&cfg);
    let key = b"moving-key";
    dep.client(id(0, 0))
        .expect("client")
        .put(key, b"here")
        .expect("put");
    let cands = l.candidates(key);
    let f = dep.fabric();
    let relocate = |from: u32, to: u32| {
        let (n, r) = (NodeId(0), Region::Data);
        let epoch = f.read_word(n, r, l.epoch).expect("epoch");
        let entry = f.read_bytes(n, r, l.entry_offset(from), 32).expect("entry");
        f.write_word(n, r, l.epoch, epoch + 1).expect("epoch");
        f.write_bytes(n, r, l.entry_offset(to), &entry)
            .expect("copy");
        f.write_bytes(n, r, l.entry_offset(from), &[0; 32])
            .expect("clear");
        f.write_word(n, r, l.epoch, epoch + 2).expect("epoch");
    };
    relocate(cands[0], cands[1]);
    let (ep, pause) = common::PausingEndpoint::new(f.open(NodeId(0)).expect("open"), pause_before);
    let mut reader = PilafClient::new(Arc::new(cfg.clone()), l, id(0, 1), ep).expect("a free id");
    reader.set_skip_epoch_check(skip_epoch_check);
    thread::scope(|sc| {
        let get = sc.spawn(move || reader.get(key).expect("get"));
        pause.at_pause(|| relocate(cands[1], cands[0]));
        get.join().expect("reader")
    })
}

#[test]
fn a_key_moved_at_any_point_of_a_get_is_found() {
    let _limit = time_limit(
        "a_key_moved_at_any_point_of_a_get_is_found",
        "-",
        Duration::from_secs(120),
    );
    for pause_before in 1..=9 {
        assert_eq!(
            get_across_a_move(pause_before, false).as_deref(),
            Some(&b"here"[..]),
            "move before operation {pause_before}"
        );
    }
}

#[test]
fn teeth_deterministic_without_the_move_epoch_a_relocated_key_is_missed() {
    let _limit = time_limit(
        "teeth_deterministic_without_the_move_epoch_a_relocated_key_is_missed",
        "-",
        Duration::from_secs(120),
    );
    // Candidate 0 read empty, then the move fills it and empties candidate 1.
    assert_eq!(get_across_a_move(2, true), None);
}
