//! Values of any size in one deployment (issue 41): each value class is a
//! data table of its own on every node, a PUT writes its entry in the
//! smallest class its value fits, the index word names the class, and every
//! reader reads an entry with its class's geometry. The story, class by
//! class: where a value goes, what an update across classes leaves behind,
//! what a full class says, and what a value past the largest says.

use std::time::Duration;

use nessie_protocol::layout::ValueClass;
use nessie_protocol::{Config, Error, IndexEntry, IteAddr, NodeId};
use nessie_tests::{find_key, SimCluster};

/// Main class 256 B; smaller classes of 16 and 64 B.
fn classes() -> Config {
    Config {
        clients_per_node: 2,
        cache_capacity: 0,
        value_classes: vec![
            ValueClass {
                max_value_len: 16,
                dtes_per_node: 64,
            },
            ValueClass {
                max_value_len: 64,
                dtes_per_node: 32,
            },
        ],
        ..Config::default()
    }
}

/// The word that links `key` now (its first present candidate).
fn linked(cluster: &SimCluster, key: &[u8]) -> IndexEntry {
    cluster
        .cfg
        .hasher()
        .candidates(key)
        .into_iter()
        .map(|a| {
            let r = a.remote();
            IndexEntry(
                cluster
                    .fabric
                    .read_word(r.node, r.region, r.offset)
                    .unwrap(),
            )
        })
        .find(|w| w.is_present())
        .expect("the key is linked")
}

#[test]
fn a_value_is_written_in_the_smallest_class_it_fits_and_read_back_whole() {
    let cluster = SimCluster::new(classes());
    let mut writer = cluster.client(0, 0);
    let mut reader = cluster.client(2, 1);
    for (len, class) in [(0, 1), (16, 1), (17, 2), (64, 2), (65, 0), (256, 0)] {
        let key = format!("k{len}").into_bytes();
        let value = vec![len as u8 ^ 0x5a; len];
        writer.put(&key, &value).unwrap();
        let w = linked(&cluster, &key);
        assert_eq!(w.dte().unwrap().class(), class, "{len} B");
        assert_eq!(reader.get(&key).unwrap(), Some(value), "{len} B");
    }
}

#[test]
fn an_update_across_classes_reads_back_and_recycles_the_entry_it_replaced() {
    let cluster = SimCluster::new(classes());
    let mut c = cluster.client(1, 0);
    let key = b"moves".to_vec();
    c.put(&key, b"small").unwrap();
    let small = linked(&cluster, &key);
    c.put(&key, &[7; 200]).unwrap();
    let big = linked(&cluster, &key);
    assert_eq!(
        (small.dte().unwrap().class(), big.dte().unwrap().class()),
        (1, 0)
    );
    assert!(cluster.marked_for_recycling(small));
    assert_eq!(cluster.client(0, 1).get(&key).unwrap(), Some(vec![7; 200]));
    c.put(&key, &[9; 40]).unwrap();
    let mid = linked(&cluster, &key);
    assert_eq!(mid.dte().unwrap().class(), 2);
    assert!(cluster.marked_for_recycling(big));
    assert_eq!(cluster.client(2, 0).get(&key).unwrap(), Some(vec![9; 40]));
    assert!(c.delete(&key).unwrap());
    assert_eq!(cluster.client(2, 0).get(&key).unwrap(), None);
}

/// A class's share that runs out says which class; the client's other
/// classes still take writes (each is a table of its own).
#[test]
fn a_full_class_says_which_and_the_other_classes_still_write() {
    let mut cfg = classes();
    cfg.value_classes[0].dtes_per_node = 4; // 2 per client
    cfg.expiration = Duration::from_secs(3600);
    cfg.retry.max_attempts = 3;
    let cluster = SimCluster::manual_clock(cfg);
    let mut c = cluster.client(0, 0);
    c.put(b"a", b"1").unwrap();
    c.put(b"b", b"2").unwrap();
    assert_eq!(
        c.put(b"c", b"3"),
        Err(Error::DataTableFull {
            node: NodeId(0),
            class: 1,
        })
    );
    c.put(b"c", &[3; 30]).unwrap();
    assert_eq!(c.get(b"c").unwrap(), Some(vec![3; 30]));
}

#[test]
fn a_value_past_the_largest_class_is_refused_with_the_limit() {
    let cluster = SimCluster::new(classes());
    let mut c = cluster.client(0, 0);
    assert_eq!(
        c.put(b"huge", &[0; 257]),
        Err(Error::ValueTooLarge { len: 257, max: 256 })
    );
    assert_eq!(c.get(b"huge").unwrap(), None);
}

/// A remote GET of a small value reads one index word and its class's
/// entry, not the main class's: two round trips, 8 + 32 + key + 16 bytes.
#[test]
fn a_remote_get_reads_exactly_its_class_entry() {
    let cluster = SimCluster::new(classes());
    let key = find_key(&cluster.cfg, "g", |c: &[IteAddr]| c[0].node == NodeId(1));
    cluster.client(2, 0).put(&key, b"tiny").unwrap();
    let mut reader = cluster.client(0, 0);
    assert_eq!(reader.get(&key).unwrap(), Some(b"tiny".to_vec()));
    let s = reader.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.round_trips),
        (1, 1, 2),
        "{s}"
    );
    let entry = cluster.cfg.data_tables().layout(1).entry_bytes();
    assert_eq!(entry, 32 + 128 + 16);
    assert_eq!(s.fabric_bytes, 8 + entry, "{s}");
}

/// Configurations the index word cannot name, or classes out of order, are
/// refused before anything runs, naming the field.
#[test]
fn classes_out_of_order_too_many_or_too_large_are_refused() {
    let bad = |f: fn(&mut Config)| {
        let mut c = classes();
        f(&mut c);
        c.validate().unwrap_err().to_string()
    };
    assert!(bad(|c| c.value_classes.swap(0, 1)).contains("value_classes"));
    assert!(bad(|c| c.value_classes[1].max_value_len = 256).contains("value_classes"));
    assert!(bad(|c| c.value_classes[0].dtes_per_node = 3).contains("value_classes"));
    assert!(bad(|c| {
        c.value_classes = (1..=64)
            .map(|n| ValueClass {
                max_value_len: n,
                dtes_per_node: 8,
            })
            .collect()
    })
    .contains("value_classes"));
    assert!(bad(|c| c.nodes = 1023).contains("nodes"));
}
