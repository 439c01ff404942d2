//! Bad input and hostile conditions give typed errors and leave the store as
//! it was: oversized keys and values, a full index table, a full data table,
//! an unreachable node, an invalid configuration.

use std::time::Duration;

use nessie_protocol::{Client, ClientId, Config, ConfigError, Error, Fabric, NodeId, Region};
use nessie_tests::{find_key, SimCluster};

fn snapshot(cluster: &SimCluster) -> Vec<Vec<u64>> {
    (0..cluster.cfg.nodes)
        .flat_map(|n| {
            [Region::Index, Region::Data].map(|r| cluster.fabric.region_words(NodeId(n), r))
        })
        .collect()
}

#[test]
fn oversized_or_empty_keys_and_oversized_values_are_refused_untouched() {
    let cluster = SimCluster::new(Config {
        max_key_len: 16,
        max_value_len: 32,
        ..Config::default()
    });
    let mut c = cluster.client(0, 0);
    c.put(b"k", b"v").unwrap();
    let before = snapshot(&cluster);
    let long_key = [b'x'; 17];
    assert_eq!(
        c.put(&long_key, b"v"),
        Err(Error::KeyTooLarge { len: 17, max: 16 })
    );
    assert_eq!(
        c.get(&long_key),
        Err(Error::KeyTooLarge { len: 17, max: 16 })
    );
    assert_eq!(
        c.delete(&long_key),
        Err(Error::KeyTooLarge { len: 17, max: 16 })
    );
    assert_eq!(c.put(b"", b"v"), Err(Error::EmptyKey { max: 16 }));
    assert_eq!(c.get(b""), Err(Error::EmptyKey { max: 16 }));
    assert_eq!(c.delete(b""), Err(Error::EmptyKey { max: 16 }));
    assert_eq!(
        c.put(b"k", &[0u8; 33]),
        Err(Error::ValueTooLarge { len: 33, max: 32 })
    );
    assert_eq!(snapshot(&cluster), before, "nothing was written");
    assert_eq!(c.get(b"k").unwrap(), Some(b"v".to_vec()));
    // The limits themselves are fine.
    c.put(&[b'y'; 16], &[7u8; 32]).unwrap();
    assert_eq!(c.get(&[b'y'; 16]).unwrap(), Some(vec![7u8; 32]));
}

#[test]
fn full_index_table_reports_table_full_and_keeps_every_key() {
    // One node, three entries, three candidates: three keys fill it.
    let cfg = Config {
        nodes: 1,
        index_slots_per_node: 3,
        candidates: 3,
        clients_per_node: 1,
        ..Config::default()
    };
    let cluster = SimCluster::new(cfg);
    let mut c = cluster.client(0, 0);
    for k in [b"a", b"b", b"c"] {
        c.put(k, k).unwrap();
    }
    assert_eq!(
        c.put(b"d", b"d"),
        Err(Error::TableFull {
            depth: cluster.cfg.max_migrate_depth
        })
    );
    for k in [b"a", b"b", b"c"] {
        assert_eq!(c.get(k).unwrap(), Some(k.to_vec()));
    }
    assert_eq!(c.get(b"d").unwrap(), None);
    // Updates of present keys still work; deleting one makes room.
    c.put(b"a", b"a2").unwrap();
    assert!(c.delete(b"b").unwrap());
    c.put(b"d", b"d").unwrap();
    assert_eq!(c.get(b"d").unwrap(), Some(b"d".to_vec()));
}

#[test]
fn full_data_table_reports_data_table_full_until_entries_expire() {
    let cfg = Config {
        nodes: 1,
        dtes_per_node: 4,
        clients_per_node: 1,
        ..Config::default()
    };
    let cluster = SimCluster::manual_clock(cfg);
    let mut c = cluster.client(0, 0);
    for v in [b"v1", b"v2", b"v3", b"v4"] {
        c.put(b"k", v).unwrap();
    }
    // Three old versions are unlinked but not expired; the fourth is live.
    assert_eq!(
        c.put(b"k", b"v5"),
        Err(Error::DataTableFull { node: NodeId(0) })
    );
    assert_eq!(
        c.put(b"other", b"x"),
        Err(Error::DataTableFull { node: NodeId(0) })
    );
    assert_eq!(c.get(b"k").unwrap(), Some(b"v4".to_vec()));
    cluster.fabric.advance(cluster.cfg.expiration / 2);
    assert_eq!(
        c.put(b"k", b"v5"),
        Err(Error::DataTableFull { node: NodeId(0) }),
        "not before expiration"
    );
    cluster
        .fabric
        .advance(cluster.cfg.expiration / 2 + cluster.cfg.clock_skew + Duration::from_millis(1));
    c.put(b"k", b"v5").unwrap();
    assert_eq!(c.get(b"k").unwrap(), Some(b"v5".to_vec()));
}

#[test]
fn unreachable_node_is_named_and_nothing_changes() {
    let cluster = SimCluster::new(Config::default());
    let key = find_key(&cluster.cfg, "n", |c| {
        c.iter().any(|a| a.node == NodeId(1)) && c[0].node != NodeId(1)
    });
    let mut c = cluster.client(0, 0);
    c.put(&key, b"before").unwrap();
    let before = snapshot(&cluster);
    cluster.fabric.set_node_down(NodeId(1), true).unwrap();
    assert_eq!(c.put(&key, b"after"), Err(Error::Unreachable(NodeId(1))));
    assert_eq!(c.delete(&key), Err(Error::Unreachable(NodeId(1))));
    assert_eq!(snapshot(&cluster), before);
    // A client on the down node cannot post at all.
    let mut d = cluster.client(2, 0);
    cluster.fabric.set_node_down(NodeId(2), true).unwrap();
    assert_eq!(d.get(&key), Err(Error::Unreachable(NodeId(2))));
    cluster.fabric.set_node_down(NodeId(1), false).unwrap();
    cluster.fabric.set_node_down(NodeId(2), false).unwrap();
    assert_eq!(c.get(&key).unwrap(), Some(b"before".to_vec()));
    assert_eq!(d.get(&key).unwrap(), Some(b"before".to_vec()));
}

#[test]
fn invalid_configuration_is_refused_with_the_field_named() {
    let cluster = SimCluster::new(Config::default());
    let ep = cluster.fabric.open(NodeId(0)).unwrap();
    let bad = Config {
        candidates: 0,
        ..Config::default()
    };
    match Client::new(
        bad.into(),
        ClientId {
            node: NodeId(0),
            index: 0,
        },
        ep,
    ) {
        Err(Error::Config(ConfigError::OutOfRange { field, .. })) => {
            assert_eq!(field, "candidates")
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("accepted"),
    }
    let ep = cluster.fabric.open(NodeId(0)).unwrap();
    let id = ClientId {
        node: NodeId(0),
        index: cluster.cfg.clients_per_node,
    };
    assert!(matches!(
        Client::new(cluster.cfg.clone(), id, ep),
        Err(Error::Config(_))
    ));
}
