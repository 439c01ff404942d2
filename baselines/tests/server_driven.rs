//! NessieSD and NessieHY: their story as tests. Both keep a key's index and
//! data table entries on its home node; NessieSD serves everything by server
//! workers through request slots, NessieHY reads by RDMA READ and writes
//! through the servers. Each must behave like a map, stay linearizable under
//! concurrency (checked by the WGL checker), account its fabric work as the
//! papers count it, and fail with typed errors.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use nessie_baselines::coupled::CoupledLayout;
use nessie_baselines::hy::HyClient;
use nessie_baselines::{HyOptions, KvSystem, SystemConfig};
use nessie_check::time_limit;
use nessie_protocol::KvClient;
use nessie_protocol::{ClientId, Config, Error, Fabric, NodeId, Region};

fn small(nodes: u16, slots: u32) -> Config {
    Config {
        nodes,
        index_slots_per_node: slots,
        dtes_per_node: 4096,
        clients_per_node: 2,
        max_key_len: 32,
        max_value_len: 64,
        expiration: Duration::from_millis(100),
        ..Config::default()
    }
}

fn hy_all_on() -> HyOptions {
    HyOptions {
        filter_bits: true,
        cache: true,
        multiple_reads: true,
    }
}

fn hy(cfg: Config, opts: HyOptions) -> SystemConfig {
    SystemConfig {
        hy: opts,
        ..SystemConfig::new(KvSystem::NessieHy, cfg)
    }
}

#[test]
fn sd_behaves_like_a_map_with_cuckoo_moves() {
    // 40 keys in 2 x 32 index table entries: inserts need cuckoo moves.
    let d = start_kind(KvSystem::NessieSd, small(2, 32));
    matches_btreemap(&d, 3000, 40, 11);
}

#[test]
fn hy_behaves_like_a_map_with_and_without_its_optimisations() {
    matches_btreemap(&start(hy(small(2, 32), HyOptions::default())), 3000, 40, 12);
    matches_btreemap(&start(hy(small(2, 32), hy_all_on())), 3000, 40, 13);
}

#[test]
fn sd_is_linearizable_on_hot_keys() {
    let _limit = time_limit(
        "sd_is_linearizable_on_hot_keys",
        "-",
        Duration::from_secs(120),
    );
    let d = start_kind(KvSystem::NessieSd, small(3, 64));
    assert!(linearizable_workload(&d, 300, 4, 50, 21) >= 1800);
}

#[test]
fn hy_is_linearizable_on_hot_keys() {
    let _limit = time_limit(
        "hy_is_linearizable_on_hot_keys",
        "-",
        Duration::from_secs(120),
    );
    let d = start(hy(small(3, 64), hy_all_on()));
    assert!(linearizable_workload(&d, 300, 4, 60, 22) >= 1800);
    let d = start(hy(small(3, 64), HyOptions::default()));
    linearizable_workload(&d, 300, 4, 60, 23);
}

#[test]
fn hy_gets_stay_linearizable_while_cuckoo_moves_run() {
    let _limit = time_limit(
        "hy_gets_stay_linearizable_while_cuckoo_moves_run",
        "-",
        Duration::from_secs(120),
    );
    // 12 keys in 16 index table entries on one node: inserts after deletes
    // keep moving keys under concurrent client GETs.
    let d = start(hy(
        Config {
            candidates: 3,
            ..small(1, 16)
        },
        HyOptions::default(),
    ));
    linearizable_workload(&d, 400, 12, 50, 24);
}

#[test]
fn sd_costs_one_request_write_and_one_response_write() {
    let d = start_kind(KvSystem::NessieSd, small(2, 64));
    let layout = CoupledLayout::new(&d.system().store, d.system().store.filter_bits);
    let mut c0 = client(&d, 0, 0);
    // A key homed on node 1 (remote for client 0.0) and one homed on node 0.
    let remote = (0..)
        .map(|i| format!("r{i}").into_bytes())
        .find(|k| layout.home(k) == NodeId(1))
        .unwrap();
    let local = (0..)
        .map(|i| format!("l{i}").into_bytes())
        .find(|k| layout.home(k) == NodeId(0))
        .unwrap();
    c0.put(&remote, b"value").unwrap();
    let s = c0.last_stats();
    assert_eq!(
        (s.writes, s.server_writes, s.reads(), s.cas(), s.round_trips),
        (1, 1, 0, 0, 1)
    );
    assert_eq!(c0.get(&remote).unwrap().as_deref(), Some(&b"value"[..]));
    assert_eq!(
        (c0.last_stats().writes, c0.last_stats().server_writes),
        (1, 1)
    );
    // Same node: a CPU write and a CPU read, no fabric operation at all.
    c0.put(&local, b"v").unwrap();
    let s = c0.last_stats();
    assert_eq!(
        (s.fabric_ops(), s.local_writes, s.local_reads, s.round_trips),
        (0, 1, 1, 0)
    );
    // A restarted process of the same id (a second client of it on this
    // deployment) opens its claim word on a node before its first PUT
    // there (docs/baselines.md), once per process and node: two CASes
    // here, the first (expecting a word never used) learning the word its
    // predecessor left.
    drop(c0);
    let mut again = client(&d, 0, 0);
    again.put(&remote, b"again").unwrap();
    let s = again.last_stats();
    assert_eq!(
        (s.writes, s.server_writes, s.reads(), s.cas(), s.round_trips),
        (1, 1, 0, 2, 3)
    );
    again.put(&remote, b"value").unwrap();
    assert_eq!(again.last_stats().cas(), 0);
}

#[test]
fn hy_get_costs_one_index_read_and_one_data_read() {
    let d = start(hy(small(2, 64), HyOptions::default()));
    let layout = CoupledLayout::new(&d.system().store, 0);
    let mut c = client(&d, 0, 0);
    let key = (0..)
        .map(|i| format!("k{i}").into_bytes())
        .find(|k| layout.home(k) == NodeId(1))
        .unwrap();
    // The table is empty, so the key lands in its first candidate.
    c.put(&key, b"abc").unwrap();
    assert_eq!(c.get(&key).unwrap().as_deref(), Some(&b"abc"[..]));
    let s = c.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.writes, s.cas()),
        (1, 1, 0, 0)
    );
    assert_eq!(s.round_trips, 2);
    // A key homed on the client's own node is read by CPU, as in the paper.
    let local = (0..)
        .map(|i| format!("l{i}").into_bytes())
        .find(|k| layout.home(k) == NodeId(0))
        .unwrap();
    c.put(&local, b"here").unwrap();
    assert_eq!(c.get(&local).unwrap().as_deref(), Some(&b"here"[..]));
    let s = c.last_stats();
    assert_eq!((s.fabric_ops(), s.local_reads, s.round_trips), (0, 2, 0));
    // An absent key: N index READs, then the epoch-bracketed second scan.
    assert_eq!(c.get(b"absent").unwrap(), None);
    let n = u64::from(d.system().store.candidates);
    assert_eq!(c.last_stats().index_reads, n + 1 + n + 1);
}

#[test]
fn hy_cache_turns_a_repeated_get_into_one_read() {
    let d = start(hy(small(2, 64), hy_all_on()));
    let mut c = client(&d, 0, 0);
    c.put(b"cached", b"value").unwrap();
    c.get(b"cached").unwrap();
    assert_eq!(c.get(b"cached").unwrap().as_deref(), Some(&b"value"[..]));
    assert_eq!(
        (c.last_stats().index_reads, c.last_stats().data_reads),
        (1, 0)
    );
    assert!(c.cache_hits() >= 1);
    // An update changes the index table entry: the cached entry is not used.
    c.put(b"cached", b"newer").unwrap();
    assert_eq!(c.get(b"cached").unwrap().as_deref(), Some(&b"newer"[..]));
}

#[test]
fn bad_input_gets_typed_errors_and_a_full_table_says_so() {
    for kind in [KvSystem::NessieSd, KvSystem::NessieHy] {
        let d = start_kind(kind, small(1, 8));
        let mut c = client(&d, 0, 0);
        assert!(matches!(
            c.put(&[7; 33], b"v"),
            Err(Error::KeyTooLarge { len: 33, max: 32 })
        ));
        assert!(matches!(c.get(b""), Err(Error::EmptyKey { .. })));
        assert!(matches!(
            c.put(b"k", &[0; 65]),
            Err(Error::ValueTooLarge { len: 65, max: 64 })
        ));
        let mut full = None;
        for i in 0..64 {
            match c.put(format!("key-{i}").as_bytes(), b"v") {
                Ok(_) => {}
                Err(e) => {
                    full = Some((i, e));
                    break;
                }
            }
        }
        let (stored, e) = full.expect("8 index table entries fill up");
        assert!(matches!(e, Error::TableFull { .. }), "{kind}: {e}");
        assert!(
            stored >= 6,
            "{kind}: cuckoo moves fill most of the table, stored {stored}"
        );
        for i in 0..stored {
            assert!(
                c.get(format!("key-{i}").as_bytes()).unwrap().is_some(),
                "{kind}: key-{i} survives"
            );
        }
    }
}

#[test]
fn a_client_that_reuses_a_slot_is_served() {
    let d = start_kind(KvSystem::NessieSd, small(2, 64));
    for round in 0..3u8 {
        let mut c = client(&d, 1, 0);
        c.put(b"again", &[round]).unwrap();
        assert_eq!(c.get(b"again").unwrap(), Some(vec![round]));
    }
}

#[test]
fn a_stopped_server_means_a_timeout_not_a_hang() {
    let _limit = time_limit(
        "a_stopped_server_means_a_timeout_not_a_hang",
        "-",
        Duration::from_secs(120),
    );
    let mut cfg = small(2, 64);
    cfg.retry.op_timeout = Duration::from_millis(200);
    let mut d = start_kind(KvSystem::NessieSd, cfg);
    d.stop();
    let mut c = client(&d, 0, 0);
    let started = Instant::now();
    assert!(matches!(c.put(b"k", b"v"), Err(Error::Timeout)));
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Moves the index table entry at `from` to `to` as a server's cuckoo move
/// does: inside an odd move epoch, new place first, then the old one cleared.
fn server_move(d: &Sim, layout: &CoupledLayout, from: u32, to: u32) {
    let f = d.fabric();
    let (n, data) = (NodeId(0), Region::Data);
    let epoch = f.read_word(n, data, layout.epoch).unwrap();
    let word = f.read_word(n, data, layout.index_offset(from)).unwrap();
    f.write_word(n, data, layout.epoch, epoch + 1).unwrap();
    f.write_word(n, data, layout.index_offset(to), word)
        .unwrap();
    f.write_word(n, data, layout.index_offset(from), 0).unwrap();
    f.write_word(n, data, layout.epoch, epoch + 2).unwrap();
}

/// A GET of key `k` that sits in its second candidate while, just before the
/// GET's `pause_before`-th fabric operation, a cuckoo move puts it back into
/// its first candidate (which the GET may already have read). Returns what
/// the GET answered.
fn get_across_a_move(pause_before: usize, skip_epoch_check: bool) -> Option<Vec<u8>> {
    let cfg = small(1, 16);
    let d = start(hy(cfg.clone(), HyOptions::default()));
    let layout = CoupledLayout::new(&cfg, 0);
    let key = b"moving-key";
    client(&d, 0, 0).put(key, b"here").unwrap();
    let cands = layout.candidates(key);
    server_move(&d, &layout, cands[0], cands[1]);
    let (ep, pause) = PausingEndpoint::new(d.fabric().open(NodeId(0)).unwrap(), pause_before);
    let mut reader = HyClient::new(
        Arc::new(cfg),
        layout,
        HyOptions::default(),
        ClientId {
            node: NodeId(0),
            index: 1,
        },
        ep,
    )
    .expect("a free id");
    reader.set_skip_epoch_check(skip_epoch_check);
    let get = thread::spawn(move || reader.get(key).unwrap());
    pause.at_pause(|| server_move(&d, &layout, cands[1], cands[0]));
    get.join().unwrap()
}

#[test]
fn hy_gets_never_miss_a_key_that_a_cuckoo_move_relocates() {
    let _limit = time_limit(
        "hy_gets_never_miss_a_key_that_a_cuckoo_move_relocates",
        "-",
        Duration::from_secs(120),
    );
    // The move lands before each of the GET's fabric operations in turn:
    // before its first READ, between the two candidates of the first scan,
    // around the epoch READs and inside the second scan.
    for pause_before in 1..=9 {
        assert_eq!(
            get_across_a_move(pause_before, false).as_deref(),
            Some(&b"here"[..]),
            "move before operation {pause_before}"
        );
    }
}

#[test]
fn teeth_without_the_epoch_check_a_relocated_key_goes_missing() {
    let _limit = time_limit(
        "teeth_without_the_epoch_check_a_relocated_key_goes_missing",
        "-",
        Duration::from_secs(120),
    );
    // The first scan reads candidate 0 (empty), the move puts the key there
    // and clears candidate 1, the scan reads candidates 1 and 2: a miss.
    assert_eq!(
        get_across_a_move(2, true),
        None,
        "the broken variant must be caught"
    );
    assert_eq!(get_across_a_move(2, false).as_deref(), Some(&b"here"[..]));
}

#[test]
fn hy_gets_of_always_present_keys_never_miss_under_churn() {
    let _limit = time_limit(
        "hy_gets_of_always_present_keys_never_miss_under_churn",
        "-",
        Duration::from_secs(120),
    );
    let cfg = Config {
        candidates: 3,
        ..small(1, 12)
    };
    let layout = CoupledLayout::new(&cfg, 0);
    let d = start(hy(cfg, HyOptions::default()));
    let mut writer = client(&d, 0, 0);
    let stable: Vec<Vec<u8>> = (0..5).map(|i| format!("stable-{i}").into_bytes()).collect();
    for k in &stable {
        writer.put(k, b"here").unwrap();
    }
    let mut reader = client(&d, 0, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = writer.put(format!("churn-{}", i % 6).as_bytes(), b"c");
                let _ = writer.delete(format!("churn-{}", (i + 3) % 6).as_bytes());
                i += 1;
            }
            i
        })
    };
    let started = Instant::now();
    let mut gets = 0;
    while started.elapsed() < Duration::from_secs(1) {
        for k in &stable {
            assert!(reader.get(k).unwrap().is_some(), "GET {gets} missed {k:?}");
            gets += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let churned = churn.join().unwrap();
    assert!(churned > 10 && gets > 100, "churn {churned}, gets {gets}");
    let epoch = d
        .fabric()
        .read_word(NodeId(0), Region::Data, layout.epoch)
        .unwrap();
    assert!(
        epoch >= 2,
        "the churn must have moved keys (move epoch {epoch})"
    );
}

#[test]
fn a_fabric_too_small_for_the_system_is_a_typed_error() {
    let sys = SystemConfig::new(KvSystem::NessieSd, small(2, 64));
    let tiny = nessie_fabric_sim::SimFabric::new(nessie_fabric_sim::SimConfig::new(2, 8, 4096))
        .expect("sim");
    let e = nessie_baselines::Deployment::start(sys, tiny).expect_err("too small");
    assert!(matches!(e, Error::Config(_)), "{e}");
    assert!(
        e.to_string().contains("smaller than the system needs"),
        "{e}"
    );
}

#[test]
fn paused_servers_account_their_cpu_up_to_the_pause_and_burn_none_after() {
    let mut d = start_kind(KvSystem::NessieSd, small(2, 64));
    let mut c = client(&d, 0, 0);
    let work = |c: &mut Box<dyn KvClient>| {
        for i in 0..300u32 {
            c.put(format!("k{}", i % 40).as_bytes(), b"v").unwrap();
        }
    };
    work(&mut c);
    d.pause_servers();
    d.resume_servers();
    work(&mut c);
    d.pause_servers();
    let at_pause = d.server_cpu_time();
    assert!(at_pause > Duration::ZERO, "the workers polled and served");
    thread::sleep(Duration::from_millis(50));
    assert_eq!(
        d.server_cpu_time(),
        at_pause,
        "no CPU is charged while paused"
    );
    // Everything the workers burnt was accounted when they parked: stopping
    // them adds nothing.
    d.stop();
    assert_eq!(d.server_cpu_time(), at_pause);
}

/// The four systems of this crate, all hash stores.
const HASH_STORES: [KvSystem; 4] = [
    KvSystem::Nessie,
    KvSystem::NessieSd,
    KvSystem::NessieHy,
    KvSystem::Pilaf,
];

/// No hash index is ordered: a range scan through the one operation
/// vocabulary is refused before anything is sent (nothing committed, not
/// retried), and the client goes on serving the rest.
#[test]
fn every_hash_store_refuses_a_scan_before_sending_anything() {
    use nessie_protocol::{OpStats, Request, Response};
    for kind in HASH_STORES {
        let d = start_kind(kind, small(2, 32));
        let mut c = client(&d, 0, 0);
        assert!(!c.has_scans(), "{kind:?}");
        let scan = Request::Scan {
            from: &b"a"[..],
            to: None,
            limit: 4,
        };
        assert_eq!(c.call(scan), Err(Error::Unsupported("scan")), "{kind:?}");
        assert_eq!(c.last_stats(), OpStats::default(), "{kind:?}: nothing sent");
        assert_eq!(c.call(Request::Put(b"a", b"v")), Ok(Response::Put(false)));
    }
}

/// Two live clients with one id would share request and response slots
/// (and, for Nessie, a data table share): every system refuses the second
/// with `ClientIdInUse`, in one process, and gives the id back when the
/// first is dropped. Before, only Nessie's clients refused it.
#[test]
fn every_system_refuses_a_second_live_client_with_one_id() {
    for kind in HASH_STORES {
        let d = start_kind(kind, small(2, 32));
        let id = ClientId {
            node: NodeId(1),
            index: 0,
        };
        let mut first = d.client(id).expect("a free id");
        match d.client(id) {
            Err(Error::ClientIdInUse(i)) => assert_eq!(i, id, "{kind:?}"),
            Err(e) => panic!("{kind:?}: {e}"),
            Ok(_) => panic!("{kind:?}: a second live client with {id}"),
        }
        assert_eq!(
            first.put(b"k", b"v"),
            Ok(false),
            "{kind:?}: the first goes on"
        );
        drop(first);
        let mut again = d.client(id).expect("released on drop");
        assert_eq!(again.get(b"k"), Ok(Some(b"v".to_vec())), "{kind:?}");
    }
}
