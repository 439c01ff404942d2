//! Sequential behaviour equals a `BTreeMap`, for any sequence of operations
//! from any clients, on index tables small enough to force MIGRATEs.

use std::collections::BTreeMap;
use std::time::Duration;

use nessie_protocol::layout::SizeClass;
use nessie_protocol::{Config, Error};
use nessie_tests::{time_limit, SimCluster};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Get(u8),
    Put(u8, Vec<u8>),
    Delete(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..10;
    prop_oneof![
        key.clone().prop_map(Op::Get),
        (key.clone(), proptest::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(k, v)| Op::Put(k, v)),
        key.prop_map(Op::Delete),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn behaves_like_a_map(ops in proptest::collection::vec((0usize..4, op()), 1..120),
                          slots in 4u32..8, candidates in 2u8..4, classes in any::<bool>()) {
        let _limit = time_limit("behaves_like_a_map", "-", Duration::from_secs(60));
        // With size classes of 48 and 64 B entries besides the main 200 B
        // (32 + 128 + 40), updates move keys between tables
        // and MIGRATE copies each in its class.
        let size_classes = if classes {
            [48, 64].map(|entry_bytes| SizeClass { entry_bytes, dtes_per_node: 64 }).to_vec()
        } else {
            Vec::new()
        };
        let cfg = Config {
            nodes: 2, index_slots_per_node: slots, candidates, clients_per_node: 2,
            max_value_len: 40, size_classes, max_migrate_depth: 6, ..Config::default()
        };
        let cluster = SimCluster::new(cfg);
        let mut clients = cluster.all_clients();
        let mut model: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
        for (who, op) in ops {
            let c = &mut clients[who];
            match op {
                Op::Get(k) => prop_assert_eq!(c.get(&[b'k', k]).unwrap(), model.get(&k).cloned()),
                Op::Put(k, v) => match c.put(&[b'k', k], &v) {
                    Ok(existed) => {
                        prop_assert_eq!(existed, model.contains_key(&k));
                        model.insert(k, v);
                    }
                    Err(Error::TableFull { .. }) => prop_assert!(!model.contains_key(&k)),
                    Err(e) => prop_assert!(false, "unexpected {e}"),
                },
                Op::Delete(k) => prop_assert_eq!(c.delete(&[b'k', k]).unwrap(), model.remove(&k).is_some()),
            }
        }
        for (k, v) in &model {
            prop_assert_eq!(clients[0].get(&[b'k', *k]).unwrap(), Some(v.clone()));
        }
    }
}
