//! Fabric-operation counts of the quiet cases, asserted exactly. These are
//! the figures docs/protocol.md states ("Costs") and compares with the paper.

use nessie_protocol::{Config, Fabric, IteAddr, NodeId, OpStats};
use nessie_tests::{find_key, SimCluster};

/// Client under test runs on node 0; keys are chosen so that none of their
/// candidates is on node 0 (every index access is remote).
fn remote_key(cfg: &Config, prefix: &str) -> Vec<u8> {
    find_key(cfg, prefix, |c: &[IteAddr]| {
        c.iter().all(|a| a.node != NodeId(0))
    })
}

fn cfg(cache: usize) -> Config {
    Config {
        cache_capacity: cache,
        clients_per_node: 2,
        ..Config::default()
    }
}

/// A warmed client on node 0 that has stored `v1` under a fresh remote key.
fn stored(
    cluster: &SimCluster,
    prefix: &str,
) -> (
    Vec<u8>,
    nessie_protocol::Client<nessie_fabric_sim::SimEndpoint>,
) {
    let key = remote_key(&cluster.cfg, prefix);
    let mut c = cluster.client(0, 0);
    warm(&mut c);
    c.put(&key, b"v1").unwrap();
    (key, c)
}

/// Warms the client's allocator (its first write sweeps its share by CPU).
fn warm(c: &mut nessie_protocol::Client<nessie_fabric_sim::SimEndpoint>) {
    c.put(b"warm-up", b"x").unwrap();
}

/// What a GET costs a client on node 0 of a key whose first candidate is
/// on node 1, written by a client on node 2 (its entry remote too).
fn remote_get_cost(cfg: Config) -> OpStats {
    let cluster = SimCluster::new(cfg);
    let key = find_key(&cluster.cfg, "g", |c| c[0].node == NodeId(1));
    let mut writer = cluster.client(2, 0);
    writer.put(&key, b"value").unwrap();
    let mut reader = cluster.client(0, 0);
    assert_eq!(reader.get(&key).unwrap(), Some(b"value".to_vec()));
    reader.last_stats()
}

#[test]
fn remote_get_is_one_index_read_and_one_data_read() {
    let s = remote_get_cost(cfg(0));
    assert_eq!(
        (s.index_reads, s.data_reads, s.writes, s.cas()),
        (1, 1, 0, 0),
        "{s}"
    );
    assert_eq!(s.round_trips, 2);
    assert_eq!(s.fabric_bytes, 8 + cfg(0).layout().entry_bytes());
}

#[test]
fn cached_and_local_gets_skip_the_data_read() {
    let cluster = SimCluster::new(cfg(64));
    let key = find_key(&cluster.cfg, "g", |c| c[0].node == NodeId(1));
    let mut writer = cluster.client(2, 0);
    writer.put(&key, b"value").unwrap();
    let mut reader = cluster.client(0, 0);
    reader.get(&key).unwrap();
    assert_eq!(reader.get(&key).unwrap(), Some(b"value".to_vec()));
    let s = reader.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.round_trips),
        (1, 0, 1),
        "cache hit: {s}"
    );
    // The writer's own entry is local: read by CPU.
    assert_eq!(writer.get(&key).unwrap(), Some(b"value".to_vec()));
    let s = writer.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.local_reads, s.round_trips),
        (1, 0, 1, 1),
        "local: {s}"
    );
}

/// What a GET of an absent remote key costs a client on node 0.
fn absent_get_cost(cfg: Config) -> OpStats {
    let cluster = SimCluster::new(cfg);
    let key = remote_key(&cluster.cfg, "absent");
    let mut c = cluster.client(0, 0);
    assert_eq!(c.get(&key).unwrap(), None);
    c.last_stats()
}

#[test]
fn get_of_an_absent_key_reads_every_candidate_twice() {
    let s = absent_get_cost(cfg(0));
    assert_eq!(
        (s.index_reads, s.data_reads, s.round_trips),
        (6, 0, 4),
        "{s}"
    );
}

fn insert_cost(cluster: &SimCluster) -> OpStats {
    let key = remote_key(&cluster.cfg, "new");
    let mut c = cluster.client(0, 0);
    warm(&mut c);
    assert!(!c.put(&key, b"v").unwrap());
    c.last_stats()
}

#[test]
fn quiet_insert_is_five_reads_one_index_cas_in_three_round_trips_plus_a_local_commit() {
    let cluster = SimCluster::new(cfg(0));
    let s = insert_cost(&cluster);
    assert_eq!((s.index_reads, s.data_reads, s.writes), (5, 0, 0), "{s}");
    assert_eq!((s.index_cas, s.data_cas), (1, 1), "{s}");
    assert_eq!((s.local_reads, s.local_writes), (0, 1), "{s}");
    assert_eq!((s.round_trips, s.loopback_rounds), (3, 1), "{s}");
}

/// An update needs no verification: its install CAS lands only on the
/// key's one committed version (docs/protocol.md §5.2, step 6), so it is
/// the scan, the install and the loopback commit: two remote round trips.
#[test]
fn quiet_update_of_a_local_entry_is_two_round_trips_a_cpu_read_and_a_recycle_mark() {
    let cluster = SimCluster::new(cfg(0));
    let (key, mut c) = stored(&cluster, "upd");
    assert!(c.put(&key, b"v2").unwrap());
    let s = c.last_stats();
    assert_eq!(
        (
            s.index_reads,
            s.data_reads,
            s.writes,
            s.index_cas,
            s.data_cas
        ),
        (3, 0, 0, 1, 1),
        "{s}"
    );
    assert_eq!(
        (s.local_reads, s.local_writes),
        (1, 2),
        "header+key by CPU; entry and mark by CPU: {s}"
    );
    assert_eq!((s.round_trips, s.loopback_rounds), (2, 1), "{s}");
}

/// The one update that still verifies: its holder is a committed MIGRATE
/// copy, whose source the scan may have read before the key was written
/// there (the model's `insert-migrate-update`). One node of four entries,
/// N = 2: `m` (entries 0 and 1) is moved from 0 to 1 by the insert of `p`
/// (0 and 2, with `g` at 2); its next update re-reads entry 0, the one
/// after that (over its own PUT entry) does not.
#[test]
fn an_update_over_a_migrate_copy_verifies_and_the_next_one_does_not() {
    let cluster = SimCluster::new(nessie_tests::tiny_config());
    let c = cluster.cfg.clone();
    let [m, g, p] = nessie_tests::one_move(&c);
    let mut w = cluster.client(0, 0);
    w.put(&g, b"g").unwrap();
    w.put(&m, b"m1").unwrap();
    w.put(&p, b"p").unwrap();
    assert_eq!(w.last_stats().migrations, 1, "m moved to entry 1");
    assert!(w.put(&m, b"m2").unwrap());
    let s = w.last_stats();
    assert_eq!(
        (s.index_reads, s.index_cas),
        (3, 1),
        "scan 2, verify 1: {s}"
    );
    assert!(w.put(&m, b"m3").unwrap());
    let s = w.last_stats();
    assert_eq!((s.index_reads, s.index_cas), (2, 1), "scan only: {s}");
    assert_eq!(w.get(&m).unwrap(), Some(b"m3".to_vec()));
}

#[test]
fn quiet_update_of_a_remote_entry_reads_its_header_and_marks_it_remotely() {
    let cluster = SimCluster::new(cfg(0));
    let key = remote_key(&cluster.cfg, "rupd");
    cluster.client(1, 0).put(&key, b"v1").unwrap();
    let mut c = cluster.client(0, 0);
    warm(&mut c);
    assert!(c.put(&key, b"v2").unwrap());
    let s = c.last_stats();
    assert_eq!(
        (
            s.index_reads,
            s.data_reads,
            s.writes,
            s.index_cas,
            s.data_cas
        ),
        (3, 1, 0, 1, 2),
        "{s}"
    );
    // Scan, header read, install (no verification: an update), then the
    // recycle mark of the old
    // remote entry (a CAS that names the entry's incarnation, so that it
    // cannot mark a reused entry however late it lands; it must follow the
    // commit). Until issue 24 the mark was a WRITE: same round trips.
    assert_eq!((s.round_trips, s.loopback_rounds), (4, 1), "{s}");
}

/// A DELETE of a present key installs its tombstone over the holder with no
/// verification (as an update), commits it, then unlinks it.
#[test]
fn quiet_delete_installs_a_tombstone_then_unlinks_it() {
    let cluster = SimCluster::new(cfg(0));
    let (key, mut c) = stored(&cluster, "del");
    assert!(c.delete(&key).unwrap());
    let s = c.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.index_cas, s.data_cas),
        (3, 0, 2, 1),
        "{s}"
    );
    assert_eq!((s.round_trips, s.loopback_rounds), (3, 1), "{s}");
    // By CPU: the tombstone, the previous version's recycle mark, the
    // tombstone's own mark once it is unlinked; nothing leaked.
    assert_eq!((s.local_writes, s.leaked), (3, 0), "{s}");
}

/// With `multiple_reads`, a remote GET reads the entry's header and the
/// longest key; a short value right after a short key is in that read
/// already, so the GET ends there: one index READ, one data READ, two
/// round trips, fewer bytes than the whole entry (a value past that read
/// takes a READ of exactly its bytes: `size_classes.rs`).
#[test]
fn multiple_reads_get_of_a_short_value_is_one_header_and_key_read() {
    let cluster = SimCluster::new(Config {
        multiple_reads: true,
        ..cfg(0)
    });
    let key = find_key(&cluster.cfg, "g", |c| c[0].node == NodeId(1));
    cluster.client(2, 0).put(&key, b"value").unwrap();
    let mut reader = cluster.client(0, 0);
    assert_eq!(reader.get(&key).unwrap(), Some(b"value".to_vec()));
    let s = reader.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.round_trips),
        (1, 1, 2),
        "{s}"
    );
    let header_and_key = cluster.cfg.layout().header_and_key_bytes();
    assert_eq!(header_and_key, 32 + 128);
    assert!(header_and_key < cluster.cfg.layout().entry_bytes());
    assert_eq!(s.fabric_bytes, 8 + header_and_key, "{s}");
}

/// The cache holds remote entries only: a GET of the reader's own (local)
/// entry, read by CPU, does not take the place of the one remote entry a
/// cache of capacity 1 holds, so reading that remote key again is a hit.
#[test]
fn a_local_get_does_not_evict_a_cached_remote_entry() {
    let cluster = SimCluster::new(cfg(1));
    let remote = find_key(&cluster.cfg, "r", |c| c[0].node == NodeId(1));
    let local = find_key(&cluster.cfg, "l", |c| c[0].node == NodeId(1));
    cluster.client(2, 0).put(&remote, b"rv").unwrap();
    let mut reader = cluster.client(0, 0);
    reader.put(&local, b"lv").unwrap();
    assert_eq!(reader.get(&remote).unwrap(), Some(b"rv".to_vec()));
    assert_eq!(reader.get(&local).unwrap(), Some(b"lv".to_vec()));
    assert_eq!(reader.last_stats().local_reads, 1, "the reader's own entry");
    assert_eq!(reader.get(&remote).unwrap(), Some(b"rv".to_vec()));
    let s = reader.last_stats();
    assert_eq!((s.index_reads, s.data_reads), (1, 0), "a cache hit: {s}");
}

/// A GET of an absent key whose candidate holds another key's entry: the
/// index word's filter bits (a hash of the key) differ from the wanted
/// key's, so the GET never reads that entry.
#[test]
fn get_of_an_absent_key_skips_another_keys_entry_by_its_filter_bits() {
    let cluster = SimCluster::new(cfg(0));
    let h = cluster.cfg.hasher();
    let present = remote_key(&cluster.cfg, "x");
    let first = h.candidates(&present)[0];
    let absent = find_key(&cluster.cfg, "absent", |c| {
        c[0] == first && c.iter().all(|a| a.node != NodeId(0))
    });
    assert_ne!(h.filter(&absent), h.filter(&present));
    let mut c = cluster.client(0, 0);
    c.put(&present, b"v").unwrap();
    assert_eq!(c.get(&absent).unwrap(), None);
    let s = c.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.local_reads),
        (6, 0, 0),
        "{s}"
    );
}

/// Two candidate buckets of four entries (`bucket_slots` 4): every figure of
/// a one-entry index's quiet case holds with a bucket READ (32 B) where a
/// word READ was.
fn bucketed() -> Config {
    Config {
        candidates: 2,
        bucket_slots: 4,
        ..cfg(0)
    }
}

#[test]
fn in_buckets_a_remote_get_is_one_bucket_read_and_one_data_read() {
    let s = remote_get_cost(bucketed());
    assert_eq!((s.index_reads, s.data_reads, s.cas()), (1, 1, 0), "{s}");
    assert_eq!(s.round_trips, 2);
    assert_eq!(s.fabric_bytes, 32 + bucketed().layout().entry_bytes());
}

#[test]
fn in_buckets_an_absent_get_reads_each_bucket_twice_in_three_round_trips() {
    let s = absent_get_cost(bucketed());
    assert_eq!(
        (s.index_reads, s.data_reads, s.round_trips),
        (4, 0, 3),
        "{s}"
    );
}

#[test]
fn in_buckets_a_quiet_insert_is_four_bucket_reads_one_cas_in_three_round_trips() {
    let cluster = SimCluster::new(bucketed());
    let s = insert_cost(&cluster);
    assert_eq!((s.index_reads, s.data_reads, s.writes), (4, 0, 0), "{s}");
    assert_eq!((s.index_cas, s.data_cas), (1, 1), "{s}");
    assert_eq!((s.round_trips, s.loopback_rounds), (3, 1), "{s}");
}

/// A client without storage of node 0 (its share on node 0, every index
/// access remote): its GET costs what a node's client's remote GET does;
/// its insert adds one round, the data round through its window (two CASes
/// claiming the entry's state and recycle words, two WRITEs), and its
/// commit is a remote CAS, not a loopback one: five remote round trips
/// against three and a loopback commit (docs/protocol.md §5.4).
#[test]
fn a_client_without_storage_pays_one_data_round_more_per_write() {
    let mut c = cfg(0);
    c.pure_clients_per_node = 1;
    let cluster = SimCluster::new(c);
    let pure_id = nessie_protocol::ClientId {
        node: NodeId(0),
        index: 2,
    };
    let _agent = cluster.agent(0);
    let ep = cluster.fabric.open(NodeId(0)).unwrap();
    let mut pure = nessie_protocol::Client::new(cluster.cfg.clone(), pure_id, ep).unwrap();
    // Its first write gets its keys and sweeps its share.
    pure.put(b"warm-up", b"x").unwrap();
    let key = remote_key(&cluster.cfg, "new");
    assert!(!pure.put(&key, b"v").unwrap());
    let s = pure.last_stats();
    assert_eq!((s.index_reads, s.data_reads, s.writes), (5, 0, 2), "{s}");
    assert_eq!((s.index_cas, s.data_cas), (1, 3), "{s}");
    assert_eq!((s.local_reads, s.local_writes), (0, 0), "{s}");
    assert_eq!((s.round_trips, s.loopback_rounds), (5, 0), "{s}");
    let mut writer = cluster.client(2, 0);
    let gkey = find_key(&cluster.cfg, "g", |c| c[0].node == NodeId(1));
    writer.put(&gkey, b"value").unwrap();
    assert_eq!(pure.get(&gkey).unwrap(), Some(b"value".to_vec()));
    let s = pure.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.round_trips),
        (1, 1, 2),
        "{s}"
    );
}
