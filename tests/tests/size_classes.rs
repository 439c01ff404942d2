//! Values of any size in one deployment (issue 41): each size class is a
//! data table of its own on every node, a PUT writes its entry in the
//! smallest class its key and value fit, the index word names the class,
//! and every reader reads an entry with its class's geometry. The story,
//! class by class: where a value goes, what an update across classes leaves
//! behind, what a full class says, and what a value past the largest says.

use std::time::Duration;

use nessie_protocol::layout::SizeClass;
use nessie_protocol::{Config, Error, IndexEntry, IteAddr, NodeId};
use nessie_tests::{find_key, SimCluster};

/// Main class of 416 B entries (128 B keys, 256 B values); smaller classes
/// of 64 and 128 B entries (32 and 96 B for key and value).
fn classes() -> Config {
    Config {
        clients_per_node: 2,
        cache_capacity: 0,
        size_classes: vec![
            SizeClass {
                entry_bytes: 64,
                dtes_per_node: 64,
            },
            SizeClass {
                entry_bytes: 128,
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
    // Keys of 4 B (8 with padding): 24 B of value fit 64 B entries, 88 B
    // fit 128 B ones.
    for (len, class) in [(0, 1), (24, 1), (25, 2), (88, 2), (89, 0), (256, 0)] {
        let key = format!("k{len:03}").into_bytes();
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
    c.put(&key, &[9; 60]).unwrap();
    let mid = linked(&cluster, &key);
    assert_eq!(mid.dte().unwrap().class(), 2);
    assert!(cluster.marked_for_recycling(big));
    assert_eq!(cluster.client(2, 0).get(&key).unwrap(), Some(vec![9; 60]));
    assert!(c.delete(&key).unwrap());
    assert_eq!(cluster.client(2, 0).get(&key).unwrap(), None);
}

/// A class's share that runs out says which class; the client's other
/// classes still take writes (each is a table of its own).
#[test]
fn a_full_class_says_which_and_the_other_classes_still_write() {
    let mut cfg = classes();
    cfg.size_classes[0].dtes_per_node = 4; // 2 per client
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
/// entry, not the main class's: two round trips, 8 + 64 bytes. With
/// `multiple_reads`, the header and key, then exactly the value.
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
    assert_eq!(entry, 64);
    assert_eq!(s.fabric_bytes, 8 + entry, "{s}");
}

/// With `multiple_reads`, a GET of a 200 B value in the main class reads
/// the header and the longest key, then exactly the value's 200 B after
/// its own key.
#[test]
fn with_multiple_reads_the_value_read_is_exactly_the_value() {
    let cfg = Config {
        multiple_reads: true,
        ..classes()
    };
    let cluster = SimCluster::new(cfg);
    let key = find_key(&cluster.cfg, "m", |c: &[IteAddr]| c[0].node == NodeId(1));
    cluster.client(2, 0).put(&key, &[5; 200]).unwrap();
    let mut reader = cluster.client(0, 0);
    assert_eq!(reader.get(&key).unwrap(), Some(vec![5; 200]));
    let s = reader.last_stats();
    assert_eq!(
        (s.index_reads, s.data_reads, s.round_trips),
        (1, 2, 3),
        "{s}"
    );
    assert_eq!(s.fabric_bytes, 8 + (32 + 128) + 200, "{s}");
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
    assert!(bad(|c| c.size_classes.swap(0, 1)).contains("size_classes"));
    assert!(bad(|c| c.size_classes[1].entry_bytes = 416).contains("size_classes"));
    assert!(bad(|c| c.size_classes[1].entry_bytes = 100).contains("size_classes"));
    assert!(bad(|c| c.size_classes[0].entry_bytes = 32).contains("size_classes"));
    assert!(bad(|c| c.size_classes[0].dtes_per_node = 3).contains("size_classes"));
    assert!(bad(|c| {
        c.size_classes = (0..64)
            .map(|n| SizeClass {
                entry_bytes: 40 + 8 * n,
                dtes_per_node: 8,
            })
            .collect()
    })
    .contains("size_classes"));
    assert!(bad(|c| c.nodes = 1024).contains("nodes"));
    let mut most = classes();
    most.nodes = 1023;
    most.validate().unwrap();
}

/// Several MiB and a few bytes in one deployment: a 3 MiB value in the
/// main class of 4 MiB entries, a 10-byte one in a 64-byte class, each read
/// back whole by a remote client; the 4 MiB class is not paid by the small
/// value.
#[test]
fn mebibytes_and_bytes_live_side_by_side() {
    let cfg = Config {
        nodes: 2,
        clients_per_node: 1,
        dtes_per_node: 4,
        max_value_len: 4 << 20,
        size_classes: vec![SizeClass {
            entry_bytes: 64,
            dtes_per_node: 64,
        }],
        ..Config::default()
    };
    let cluster = SimCluster::new(cfg);
    let mut writer = cluster.client(0, 0);
    let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    writer.put(b"big", &big).unwrap();
    writer.put(b"small", b"ten bytes!").unwrap();
    let mut reader = cluster.client(1, 0);
    assert_eq!(reader.get(b"big").unwrap(), Some(big));
    assert_eq!(reader.get(b"small").unwrap(), Some(b"ten bytes!".to_vec()));
    assert_eq!(linked(&cluster, b"big").dte().unwrap().class(), 0);
    assert_eq!(linked(&cluster, b"small").dte().unwrap().class(), 1);
}
