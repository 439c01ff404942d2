//! RCuckoo (ATC'25) as a system of this workspace: its story as tests.
//! Fully client-driven: no server workers; it must behave like a map, stay
//! linearizable under concurrency (the WGL checker), cost what the paper
//! says its operations cost (a GET of an inlined value one round trip, an
//! update two), fill its table past 90 % by cuckoo paths, and fail with
//! typed errors.

mod common;

use std::time::Duration;

use common::*;
use nessie_baselines::rcuckoo::{RcuckooClient, RcuckooLayout};
use nessie_baselines::{KvSystem, SystemConfig};
use nessie_check::time_limit;
use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::{ClientId, Config, Error, Fabric, KvClient, NodeId};

fn small(nodes: u16, slots: u32, extents: u32) -> Config {
    Config {
        nodes,
        index_slots_per_node: slots,
        dtes_per_node: extents,
        clients_per_node: 2,
        max_key_len: 32,
        max_value_len: 64,
        expiration: Duration::from_millis(50),
        ..Config::default()
    }
}

#[test]
fn rcuckoo_behaves_like_a_map_and_has_no_servers() {
    let d = start_kind(KvSystem::Rcuckoo, small(2, 1024, 4096));
    assert_eq!(d.server_requests(), 0);
    matches_btreemap(&d, 3000, 40, 31);
    assert_eq!(d.server_requests(), 0, "nothing but one-sided requests");
}

#[test]
fn rcuckoo_is_linearizable_on_hot_keys() {
    let _limit = time_limit(
        "rcuckoo_is_linearizable_on_hot_keys",
        "-",
        Duration::from_secs(120),
    );
    let d = start_kind(KvSystem::Rcuckoo, small(3, 1024, 4096));
    assert!(linearizable_workload(&d, 300, 4, 50, 41) >= 1800);
}

fn rcuckoo_client(
    cfg: &Config,
    fabric: &SimFabric,
    node: u16,
) -> RcuckooClient<nessie_fabric_sim::SimEndpoint> {
    client_number(cfg, fabric, node, 0)
}

fn client_number(
    cfg: &Config,
    fabric: &SimFabric,
    node: u16,
    index: u16,
) -> RcuckooClient<nessie_fabric_sim::SimEndpoint> {
    let id = ClientId {
        node: NodeId(node),
        index,
    };
    RcuckooClient::new(
        std::sync::Arc::new(cfg.clone()),
        id,
        fabric.open(id.node).unwrap(),
    )
    .unwrap()
}

/// The next key (counting on from `n`) whose home is `node`.
fn key_homed_on(cfg: &Config, node: NodeId, n: &mut u32) -> Vec<u8> {
    let layout = RcuckooLayout::new(cfg);
    loop {
        *n += 1;
        let k = format!("key-{n}").into_bytes();
        if layout.place(&k).home == node {
            return k;
        }
    }
}

fn fabric(cfg: &Config) -> SimFabric {
    let sys = SystemConfig::new(KvSystem::Rcuckoo, cfg.clone());
    SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap()
}

#[test]
fn a_get_of_an_inlined_value_is_one_round_trip_and_an_update_two() {
    let cfg = small(2, 1024, 256);
    let f = fabric(&cfg);
    let mut c = rcuckoo_client(&cfg, &f, 0);
    let key = key_homed_on(&cfg, NodeId(1), &mut 0);
    // An insert into a free entry: the lock CASes with the fenced row
    // READs behind them, then the row WRITE with the releases behind it.
    assert!(!c.put(&key, b"one").unwrap());
    let s = c.last_stats();
    assert_eq!(s.round_trips, 2, "{s:?}");
    assert_eq!(c.get(&key).unwrap().as_deref(), Some(&b"one"[..]));
    let s = c.last_stats();
    assert_eq!(s.round_trips, 1, "both rows in one round: {s:?}");
    assert!(c.put(&key, b"two").unwrap());
    assert_eq!(c.last_stats().round_trips, 2);
    // A value past 16 bytes goes to an extent: a GET reads it in a second
    // round, and the update frees the extent it replaces.
    let long = [7u8; 40];
    assert!(c.put(&key, &long).unwrap());
    assert_eq!(c.get(&key).unwrap().as_deref(), Some(&long[..]));
    assert!(c.put(&key, b"three").unwrap());
    assert!(c.delete(&key).unwrap());
    assert_eq!(c.get(&key).unwrap(), None);
    assert!(!c.delete(&key).unwrap());
    assert_eq!(c.counters().extents_leaked, 0);
    assert_eq!(c.counters().locks_leaked, 0);
}

#[test]
fn cuckoo_paths_fill_the_table_past_ninety_per_cent() {
    // One node, 64 rows of 8: 512 entries.
    let cfg = small(1, 512, 4096);
    let f = fabric(&cfg);
    let mut c = rcuckoo_client(&cfg, &f, 0);
    let mut stored = 0u32;
    for i in 0..600u32 {
        match c.put(format!("k{i}").as_bytes(), b"v") {
            Ok(false) => stored += 1,
            Ok(true) => panic!("key {i} was new"),
            Err(Error::TableFull { .. }) => break,
            Err(e) => panic!("key {i}: {e}"),
        }
    }
    assert!(stored >= 460, "filled {stored} of 512");
    assert!(c.counters().moved > 0, "{:?}", c.counters());
    for i in 0..stored {
        assert_eq!(
            c.get(format!("k{i}").as_bytes()).unwrap().as_deref(),
            Some(&b"v"[..]),
            "key {i}"
        );
    }
}

#[test]
fn bad_input_gets_typed_errors() {
    let d = start_kind(KvSystem::Rcuckoo, small(2, 1024, 256));
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

/// Runs one request on `ep` and returns its result.
fn one(
    ep: &mut nessie_fabric_sim::SimEndpoint,
    op: nessie_protocol::Op,
) -> Result<nessie_protocol::OpOutput, nessie_protocol::FabricError> {
    use nessie_protocol::{Endpoint, OpId, WorkRequest};
    ep.post(WorkRequest { id: OpId(1), op }).unwrap();
    let mut out = Vec::new();
    while out.is_empty() {
        ep.wait(&mut out, Duration::from_millis(10));
    }
    out.remove(0).result
}

/// A writer that died in the middle of an update, holding the key's lock:
/// its row WRITE placed the entry's new type word (the new extent's header)
/// and not its value word, nor the row's CRC. A reader meets the torn row,
/// takes the stranded lock over once its word has stood for the failure
/// timeout (T + skew + 2 margins), and repairs the row to the entry the
/// update was replacing: the old value, still in its extent. The paper's
/// repair, which empties an unreadable entry (`repair-empties-torn`), loses
/// the key instead.
#[test]
fn a_stranded_lock_is_taken_over_and_a_torn_update_repaired_to_the_old_value() {
    use nessie_protocol::{Op, RemoteAddr};
    for empties in [false, true] {
        let cfg = small(1, 1024, 256);
        let f = fabric(&cfg);
        let layout = RcuckooLayout::new(&cfg);
        let mut writer = rcuckoo_client(&cfg, &f, 0);
        let old = [1u8; 40];
        assert!(!writer.put(b"k", &old).unwrap());
        let place = layout.place(b"k");
        let row_at = layout.row_addr(NodeId(0), place.rows[0]);
        let mut raw = f.open(NodeId(0)).unwrap();
        let read = Op::Read {
            addr: row_at,
            len: layout.row_bytes() as u32,
        };
        let Ok(nessie_protocol::OpOutput::Read(mut row)) = one(&mut raw, read) else {
            panic!("row read")
        };
        // The dead writer's lock, and its torn row: the first entry's type
        // word replaced, the CRC not.
        let lock = layout.lock_addr(NodeId(0), layout.lock_of(place.rows[0]));
        let cas = Op::Cas {
            addr: lock,
            expect: 0,
            new: 0xdead,
        };
        assert!(one(&mut raw, cas).is_ok());
        let type_word = 8 + layout.key_field as usize;
        row[type_word..type_word + 8].copy_from_slice(&0x77_01u64.to_le_bytes());
        let write = Op::Write {
            addr: RemoteAddr::data(NodeId(0), row_at.offset),
            data: row,
        };
        assert!(one(&mut raw, write).is_ok());
        let mut reader = client_number(&cfg, &f, 0, 1);
        reader.core_mut().set_repair_empties_torn(empties);
        let got = reader.get(b"k").unwrap();
        assert_eq!(reader.counters().repairs, 1, "{:?}", reader.counters());
        if empties {
            assert_eq!(got, None, "the paper's repair loses the key");
        } else {
            assert_eq!(got.as_deref(), Some(&old[..]));
            assert!(reader.put(b"k", b"new").unwrap());
            assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"new"[..]));
        }
    }
}
