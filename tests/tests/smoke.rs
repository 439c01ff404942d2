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
