//! The protocol's basic story on a 3-node simulated cluster, one client at a time.

use nessie_protocol::Config;
use nessie_tests::SimCluster;

#[test]
fn put_get_update_delete() {
    let cluster = SimCluster::new(Config::default());
    let mut a = cluster.client(0, 0);
    let mut b = cluster.client(1, 0);
    assert_eq!(a.get(b"k").unwrap(), None);
    assert!(!a.put(b"k", b"one").unwrap());
    assert_eq!(b.get(b"k").unwrap(), Some(b"one".to_vec()));
    assert!(b.put(b"k", b"two").unwrap());
    assert_eq!(a.get(b"k").unwrap(), Some(b"two".to_vec()));
    assert!(a.delete(b"k").unwrap());
    assert_eq!(b.get(b"k").unwrap(), None);
    assert!(!b.delete(b"k").unwrap());
    assert!(!a.put(b"k", b"three").unwrap());
    assert_eq!(b.get(b"k").unwrap(), Some(b"three".to_vec()));
}

#[test]
fn filling_a_tiny_index_migrates_recursively_and_keeps_every_key() {
    // 3 nodes x 4 entries = 12 index table entries, N = 3: filling it to the
    // brim needs MIGRATEs of MIGRATEs.
    let cfg = Config {
        index_slots_per_node: 4,
        max_migrate_depth: 8,
        ..Config::default()
    };
    let cluster = SimCluster::new(cfg);
    let mut c = cluster.client(0, 0);
    let mut stored = Vec::new();
    let mut stats = nessie_protocol::OpStats::default();
    for i in 0..40u32 {
        let key = format!("fill-{i}").into_bytes();
        match c.put(&key, &key) {
            Ok(_) => stored.push(key),
            Err(nessie_protocol::Error::TableFull { .. }) => {}
            Err(e) => panic!("unexpected {e}"),
        }
        stats += c.last_stats();
    }
    assert!(
        stored.len() >= 10,
        "load factor reached: {}/12",
        stored.len()
    );
    assert!(stats.deep_migrations >= 1, "{stats:?}");
    for k in &stored {
        assert_eq!(c.get(k).unwrap().as_deref(), Some(&k[..]));
    }
}
