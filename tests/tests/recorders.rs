//! The recorders' teeth: what the recorded helpers of `nessie_tests`
//! (`rec_get`, `rec_put`, `rec_delete`, used by the shuttle, proptest and
//! stress suites) write into a history must let the checker catch two kinds
//! of broken client that the old recording let pass.
//!
//! - A client that answers `Conflict` (or `Timeout`) after its PUT
//!   committed: errors other than `OutcomeUnknown` promise that nothing was
//!   written, and the helpers now record them as such (`Failure::of`);
//!   recorded as unknown outcomes, as they were, the write read back was
//!   excused.
//! - A client whose GET reads another key's entry: every write now stores a
//!   value of its own (`nessie_check::unique_value`); with one value shared
//!   by the preloaded keys, as the simulator's preload had, the wrong entry
//!   looked right.

use std::time::Duration;

use nessie_check::{check_history, unique_value, Event, Failure, Recorder};
use nessie_protocol::{Config, Error, Request, Response};
use nessie_protocol::{KvClient, OpStats};
use nessie_tests::{rec_get, rec_put, time_limit, SimCluster};

fn cluster() -> SimCluster {
    SimCluster::new(Config {
        nodes: 2,
        clients_per_node: 2,
        ..Config::default()
    })
}

/// A broken client: its PUTs commit, then it answers `error` (which
/// promises that nothing was written).
struct LiesAfterCommit<C> {
    inner: C,
    error: Error,
}

impl<C: KvClient> KvClient for LiesAfterCommit<C> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.inner.get(key)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        self.inner.put(key, value)?;
        Err(self.error.clone())
    }
    fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        self.inner.delete(key)
    }
    fn last_stats(&self) -> OpStats {
        self.inner.last_stats()
    }
}

/// The helpers' recording of a PUT before: every error an unknown outcome.
fn old_rec_put(r: &Recorder, id: usize, c: &mut impl KvClient, key: &[u8], value: &[u8]) {
    r.record(id, Request::Put(key.to_vec(), value.to_vec()), || {
        let res = c.put(key, value);
        (res.as_ref().ok().map(|&e| Ok(Response::Put(e))), ())
    });
}

/// A lying PUT, then an honest GET that reads its value back.
fn lie_then_read(error: Error, old_recording: bool) -> Vec<Event> {
    let cluster = cluster();
    let mut liar = LiesAfterCommit {
        inner: cluster.client(0, 0),
        error,
    };
    let mut reader = cluster.client(1, 0);
    let rec = Recorder::new();
    let (k, v) = (b"key".to_vec(), unique_value(b"key", 0, 0, 16));
    if old_recording {
        old_rec_put(&rec, 0, &mut liar, &k, &v);
    } else {
        assert!(rec_put(&rec, 0, &mut liar, &k, &v).is_err());
    }
    assert_eq!(rec_get(&rec, 1, &mut reader, &k), Ok(Some(v)));
    rec.events()
}

#[test]
fn an_error_after_a_committed_write_is_caught_by_what_the_error_promises() {
    let _limit = time_limit(
        "an_error_after_a_committed_write_is_caught_by_what_the_error_promises",
        "-",
        Duration::from_secs(60),
    );
    for error in [Error::Conflict, Error::Timeout] {
        // The old recording: the lie is an unknown outcome, and the read
        // of its write is explained by it.
        let old = lie_then_read(error.clone(), true);
        assert_eq!(old[0].ret, Err(Failure::Unknown));
        assert!(
            check_history(&old, 100_000).is_ok(),
            "{error}: the old recording passed it"
        );
        // The helpers now: "nothing committed", and the read shows it was.
        let new = lie_then_read(error.clone(), false);
        assert_eq!(new[0].ret, Err(Failure::NotCommitted));
        let e = check_history(&new, 100_000).expect_err("the lie is caught");
        assert!(e.is_violation(), "{error}: {e}");
    }
}

/// A broken client: its GETs read the entry of `other` instead of the key
/// asked for.
struct ReadsAnotherKey<C> {
    inner: C,
    other: Vec<u8>,
}

impl<C: KvClient> KvClient for ReadsAnotherKey<C> {
    fn get(&mut self, _key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.inner.get(&self.other)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        self.inner.put(key, value)
    }
    fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        self.inner.delete(key)
    }
    fn last_stats(&self) -> OpStats {
        self.inner.last_stats()
    }
}

/// Preloads keys `a` and `b` (values by `value`), then GETs `a` through a
/// client that reads `b`'s entry.
fn wrong_key_read(value: impl Fn(&[u8], u64) -> Vec<u8>) -> Vec<Event> {
    let cluster = cluster();
    let mut loader = cluster.client(0, 0);
    let rec = Recorder::new();
    for (i, k) in [b"a", b"b"].into_iter().enumerate() {
        let v = value(k, i as u64);
        assert_eq!(rec_put(&rec, 0, &mut loader, k, &v), Ok(false));
    }
    let mut broken = ReadsAnotherKey {
        inner: cluster.client(1, 0),
        other: b"b".to_vec(),
    };
    assert!(rec_get(&rec, 1, &mut broken, b"a").unwrap().is_some());
    rec.events()
}

#[test]
fn a_read_of_another_keys_entry_is_caught_when_every_write_has_its_own_value() {
    let _limit = time_limit(
        "a_read_of_another_keys_entry_is_caught_when_every_write_has_its_own_value",
        "-",
        Duration::from_secs(60),
    );
    // One value for every preloaded key (the simulator's old preload): the
    // wrong entry reads as the right one.
    let shared = wrong_key_read(|_, _| vec![b'v'; 16]);
    assert!(check_history(&shared, 100_000).is_ok());
    // A value of its own per write: caught.
    let unique = wrong_key_read(|k, seq| unique_value(k, 0, seq, 16));
    let e = check_history(&unique, 100_000).expect_err("the wrong key's value is caught");
    assert!(e.is_violation(), "{e}");
    assert_eq!(e.violation().unwrap().key, b"a".to_vec());
}
