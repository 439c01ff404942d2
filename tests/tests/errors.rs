//! Bad input and hostile conditions give typed errors and leave the store as
//! it was: empty or oversized keys and oversized values, a full index table,
//! a full data table, an unreachable node, an invalid configuration, and (at
//! construction, before anything is posted) a client id already in use, an
//! endpoint on another node, a fabric of another shape.

use std::sync::Arc;
use std::time::Duration;

use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::pipeline::Pipeline;
use nessie_protocol::{
    Client, ClientId, Config, ConfigError, Error, Fabric, Needed, NodeId, Region, Topology,
};
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
        Err(Error::DataTableFull {
            node: NodeId(0),
            class: 0
        })
    );
    assert_eq!(
        c.put(b"other", b"x"),
        Err(Error::DataTableFull {
            node: NodeId(0),
            class: 0
        })
    );
    assert_eq!(c.get(b"k").unwrap(), Some(b"v4".to_vec()));
    cluster.fabric.advance(cluster.cfg.expiration / 2);
    assert_eq!(
        c.put(b"k", b"v5"),
        Err(Error::DataTableFull {
            node: NodeId(0),
            class: 0
        }),
        "not before expiration"
    );
    cluster
        .fabric
        .advance(cluster.cfg.expiration / 2 + cluster.cfg.clock_skew + Duration::from_millis(1));
    c.put(b"k", b"v5").unwrap();
    assert!(
        c.last_stats().recycled >= 1,
        "the expired old versions are taken back by the sweep"
    );
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
    let candidate = Err(Error::Unreachable(NodeId(1), Needed::Candidate));
    assert_eq!(c.put(&key, b"after"), candidate);
    assert_eq!(c.delete(&key), candidate);
    assert_eq!(snapshot(&cluster), before);
    // A client on the down node cannot post at all.
    let mut d = cluster.client(2, 0);
    cluster.fabric.set_node_down(NodeId(2), true).unwrap();
    assert_eq!(
        d.get(&key),
        Err(Error::Unreachable(NodeId(2), Needed::OwnNode))
    );
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
    // A client id out of range is refused with the id named.
    let ep = cluster.fabric.open(NodeId(0)).unwrap();
    let id = ClientId {
        node: NodeId(0),
        index: cluster.cfg.clients_per_node,
    };
    match Client::new(cluster.cfg.clone(), id, ep) {
        Err(Error::Config(ConfigError::OutOfRange { field, value, .. })) => {
            assert_eq!(field, "client id");
            assert_eq!(value, format!("client 0.{}", cluster.cfg.clients_per_node));
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("accepted"),
    }
}

fn id(node: u16, index: u16) -> ClientId {
    ClientId {
        node: NodeId(node),
        index,
    }
}

#[test]
fn a_client_id_in_use_on_the_fabric_is_refused_until_its_client_drops() {
    let cluster = SimCluster::new(Config::default());
    let cfg = cluster.cfg.clone();
    let open = |n: u16| cluster.fabric.open(NodeId(n)).unwrap();
    let mut first = cluster.client(0, 1);
    first.put(b"k", b"first").unwrap();
    assert!(cluster.fabric.client_in_use(id(0, 1)));
    assert!(matches!(
        Client::new(cfg.clone(), id(0, 1), open(0)),
        Err(Error::ClientIdInUse(i)) if i == id(0, 1)
    ));
    // A pipeline whose slots include the id is refused too, and holds none
    // of the others it would have taken.
    assert!(matches!(
        Pipeline::new(cfg.clone(), NodeId(0), 0, 3, open(0)),
        Err(Error::ClientIdInUse(i)) if i == id(0, 1)
    ));
    assert!(!cluster.fabric.client_in_use(id(0, 0)));
    let p = Pipeline::new(cfg.clone(), NodeId(0), 2, 2, open(0)).unwrap();
    assert!(matches!(
        Client::new(cfg.clone(), id(0, 3), open(0)),
        Err(Error::ClientIdInUse(_))
    ));
    // The same index on another node is another client.
    let mut other = Client::new(cfg.clone(), id(1, 1), open(1)).unwrap();
    assert_eq!(other.get(b"k").unwrap(), Some(b"first".to_vec()));
    drop((first, p));
    assert!(!cluster.fabric.client_in_use(id(0, 1)));
    let mut again = Client::new(cfg.clone(), id(0, 1), open(0)).unwrap();
    assert_eq!(again.put(b"k", b"again"), Ok(true));
    Client::new(cfg, id(0, 3), open(0)).unwrap();
}

#[test]
fn an_endpoint_on_another_node_is_refused_by_client_and_pipeline() {
    let cluster = SimCluster::new(Config::default());
    let ep = cluster.fabric.open(NodeId(1)).unwrap();
    assert!(matches!(
        Client::new(cluster.cfg.clone(), id(0, 0), ep),
        Err(Error::EndpointNode {
            endpoint: NodeId(1),
            node: NodeId(0)
        })
    ));
    let ep = cluster.fabric.open(NodeId(2)).unwrap();
    assert!(matches!(
        Pipeline::new(cluster.cfg.clone(), NodeId(0), 0, 2, ep),
        Err(Error::EndpointNode {
            endpoint: NodeId(2),
            node: NodeId(0)
        })
    ));
    assert!(!cluster.fabric.client_in_use(id(0, 0)), "nothing claimed");
}

#[test]
fn a_fabric_smaller_than_the_configuration_is_refused_at_construction() {
    // The two defaults do not match: 1,024 index entries a node against 4,096.
    let fabric = SimFabric::new(SimConfig::default()).unwrap();
    let cfg = Arc::new(Config::default());
    let open = || fabric.open(NodeId(0)).unwrap();
    let needed = cfg.topology();
    let offered = fabric.topology();
    let e = Client::new(cfg.clone(), id(0, 0), open()).err();
    assert_eq!(e, Some(Error::TopologyMismatch { needed, offered }));
    let e = Pipeline::new(cfg.clone(), NodeId(0), 0, 2, open()).err();
    assert_eq!(e, Some(Error::TopologyMismatch { needed, offered }));
    // A fabric at least as large in every dimension is fine.
    let roomy = Topology {
        nodes: needed.nodes + 1,
        data_bytes_per_node: needed.data_bytes_per_node * 2,
        ..needed
    };
    let fabric = SimFabric::new(SimConfig::from_topology(roomy)).unwrap();
    let mut c = Client::new(cfg, id(0, 0), fabric.open(NodeId(0)).unwrap()).unwrap();
    assert_eq!(c.put(b"k", b"v"), Ok(false));
}
