//! The key-value vocabulary every system shares: [`KvClient`], GET, PUT and
//! DELETE as every system offers them (Nessie's [`Client`] here; the
//! baselines' and Cell's clients in their crates), and range scans where
//! the store is ordered (Cell), so that the benchmark, the workload driver,
//! the histories and the checkers speak of operations alike: one operation
//! enum ([`Request`]: owning its key and value, or [`KvRequest`] borrowing
//! them) and what it returned ([`Response`]).

use crate::client::Client;
use crate::error::Error;
use crate::fabric::Endpoint;
use crate::stats::OpStats;

/// One operation of a key-value store, its key and value held as `B`:
/// owned bytes ([`Request`], the default: a pipeline's queue, a recorded
/// history), or borrowed ones ([`KvRequest`]: one attempt of a client, a
/// workload's next operation, allocating nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request<B = Vec<u8>> {
    /// GET this key.
    Get(B),
    /// PUT this key and value.
    Put(B, B),
    /// DELETE this key.
    Delete(B),
    /// The entries with `from <= key < to` (`to = None`: to the end of the
    /// key space), at most `limit` of them, in key order, as of one instant.
    /// Only an ordered store offers it (Cell); every other system refuses it
    /// with [`Error::Unsupported`] before doing anything.
    Scan {
        /// The first key.
        from: B,
        /// The bound (exclusive), if any.
        to: Option<B>,
        /// The most entries.
        limit: usize,
    },
}

/// One operation borrowing its key and value.
pub type KvRequest<'a> = Request<&'a [u8]>;

/// A range scan's entries, (key, value) in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

impl<B: AsRef<[u8]>> Request<B> {
    /// The same operation, borrowing its key and value from `self`.
    pub fn borrowed(&self) -> KvRequest<'_> {
        match self {
            Request::Get(k) => Request::Get(k.as_ref()),
            Request::Put(k, v) => Request::Put(k.as_ref(), v.as_ref()),
            Request::Delete(k) => Request::Delete(k.as_ref()),
            Request::Scan { from, to, limit } => Request::Scan {
                from: from.as_ref(),
                to: to.as_ref().map(AsRef::as_ref),
                limit: *limit,
            },
        }
    }

    /// The same operation owning copies of its key and value.
    pub fn owned(&self) -> Request {
        match self.borrowed() {
            Request::Get(k) => Request::Get(k.to_vec()),
            Request::Put(k, v) => Request::Put(k.to_vec(), v.to_vec()),
            Request::Delete(k) => Request::Delete(k.to_vec()),
            Request::Scan { from, to, limit } => Request::Scan {
                from: from.to_vec(),
                to: to.map(<[u8]>::to_vec),
                limit,
            },
        }
    }

    /// Its key (a scan's first key).
    pub fn key(&self) -> &[u8] {
        match self {
            Request::Get(k) | Request::Put(k, _) | Request::Delete(k) => k.as_ref(),
            Request::Scan { from, .. } => from.as_ref(),
        }
    }

    /// Whether it may change the store (a PUT or a DELETE).
    pub fn is_write(&self) -> bool {
        matches!(self, Request::Put(..) | Request::Delete(_))
    }

    /// Its name, for spans, reports and history lines.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Get(_) => "get",
            Request::Put(..) => "put",
            Request::Delete(_) => "delete",
            Request::Scan { .. } => "scan",
        }
    }
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Response {
    /// A GET's value, if the key was present.
    Get(Option<Vec<u8>>),
    /// A PUT: whether the key existed.
    Put(bool),
    /// A DELETE: whether the key existed.
    Delete(bool),
    /// A scan's entries, in key order.
    Scan(Entries),
}

/// A key-value client of any of the compared systems.
pub trait KvClient: Send {
    /// Reads `key`: its value, or `None` if absent.
    ///
    /// # Errors
    ///
    /// Never [`Error::OutcomeUnknown`] (a read changes nothing); otherwise
    /// as each system says ([`crate::Client::get`] for Nessie): refused
    /// keys, [`Error::Unreachable`], [`Error::Timeout`], fabric and
    /// corruption errors.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error>;
    /// Stores `value` under `key`; returns whether the key existed before
    /// (RACE cannot tell: `KvSystem::put_answers_existence` of
    /// `nessie-baselines`).
    ///
    /// # Errors
    ///
    /// Every error but [`Error::OutcomeUnknown`] promises that nothing was
    /// written and nothing will be ([`Error::outcome`]);
    /// [`Error::OutcomeUnknown`] says which step may have landed
    /// ([`crate::UnknownStep`]): read the key to learn the write's fate
    /// ([`crate::Client::put`] for Nessie, and the `outcome_unknown` example
    /// of `nessie-fabric-sim`).
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error>;
    /// Deletes `key`; returns whether it existed.
    ///
    /// # Errors
    ///
    /// As [`KvClient::put`].
    fn delete(&mut self, key: &[u8]) -> Result<bool, Error>;
    /// The entries with `from <= key < to`, at most `limit`, in key order,
    /// as of one instant ([`Request::Scan`]): the optional capability of an
    /// ordered store. The default refuses it ([`Error::Unsupported`]).
    fn scan(&mut self, from: &[u8], to: Option<&[u8]>, limit: usize) -> Result<Entries, Error> {
        let _ = (from, to, limit);
        Err(Error::Unsupported("scan"))
    }
    /// Whether [`KvClient::scan`] is offered.
    fn has_scans(&self) -> bool {
        false
    }
    /// Runs one operation of the shared vocabulary.
    fn call(&mut self, req: KvRequest<'_>) -> Result<Response, Error> {
        match req {
            Request::Get(k) => self.get(k).map(Response::Get),
            Request::Put(k, v) => self.put(k, v).map(Response::Put),
            Request::Delete(k) => self.delete(k).map(Response::Delete),
            Request::Scan { from, to, limit } => self.scan(from, to, limit).map(Response::Scan),
        }
    }
    /// Fabric work of the last call (all its attempts).
    fn last_stats(&self) -> OpStats;
    /// A client without storage takes its share now rather than on its
    /// first write ([`crate::Client::take_share`]); the default, for every
    /// other client, has nothing to take.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::take_share`]: [`Error::ClientIdInUse`] when a
    /// client of any process holds the share.
    fn take_share(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// A client without storage renews its lease if it is due
    /// ([`crate::Client::renew_lease`]: for a client that may run nothing
    /// for two thirds of the lease term); the default, for every other
    /// client, has nothing to renew.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::renew_lease`]: [`Error::LeaseLost`] when the
    /// share was taken back.
    fn renew_lease(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// A client without storage gives its share back, for the next process
    /// to take at once rather than after the lease term
    /// ([`crate::Client::release_share`]); the default, for every other
    /// client, has nothing to give back.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::release_share`]: [`Error::OutcomeUnknown`] when
    /// the CAS giving it back may or may not have landed (release again).
    fn release_share(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// Cache hits so far, for systems with a client cache (0 otherwise).
    fn cache_hits(&self) -> u64 {
        0
    }
}

impl<E: Endpoint> KvClient for Client<E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Client::get(self, key)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        Client::put(self, key, value)
    }
    fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        Client::delete(self, key)
    }
    fn last_stats(&self) -> OpStats {
        Client::last_stats(self)
    }
    fn cache_hits(&self) -> u64 {
        self.state().cache.hit_miss().0
    }
    fn take_share(&mut self) -> Result<(), Error> {
        Client::take_share(self)
    }
    fn renew_lease(&mut self) -> Result<(), Error> {
        Client::renew_lease(self)
    }
    fn release_share(&mut self) -> Result<(), Error> {
        Client::release_share(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A map in memory, as a client of a store without scans.
    #[derive(Default)]
    struct MapClient(BTreeMap<Vec<u8>, Vec<u8>>);

    impl KvClient for MapClient {
        fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
            Ok(self.0.get(key).cloned())
        }
        fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
            Ok(self.0.insert(key.to_vec(), value.to_vec()).is_some())
        }
        fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
            Ok(self.0.remove(key).is_some())
        }
        fn last_stats(&self) -> OpStats {
            OpStats::default()
        }
    }

    #[test]
    fn one_operation_owned_or_borrowed() {
        let scan = Request::Scan {
            from: b"a".to_vec(),
            to: Some(b"c".to_vec()),
            limit: 2,
        };
        let put = Request::Put(b"k".to_vec(), b"v".to_vec());
        for r in [&scan, &put, &Request::Get(b"k".to_vec())] {
            assert_eq!(&r.borrowed().owned(), r);
            assert_eq!(r.borrowed().key(), r.key());
        }
        assert_eq!(scan.key(), b"a");
        assert_eq!(scan.name(), "scan");
        assert!(put.is_write() && !scan.is_write());
    }

    #[test]
    fn a_client_without_scans_refuses_one_and_runs_the_rest() {
        let mut c = MapClient::default();
        assert!(!c.has_scans());
        assert_eq!(c.call(Request::Put(b"k", b"v")), Ok(Response::Put(false)));
        assert_eq!(
            c.call(Request::Get(b"k")),
            Ok(Response::Get(Some(b"v".to_vec())))
        );
        assert_eq!(
            c.call(Request::Scan {
                from: b"a",
                to: None,
                limit: 1
            }),
            Err(Error::Unsupported("scan"))
        );
        assert_eq!(c.call(Request::Delete(b"k")), Ok(Response::Delete(true)));
        assert_eq!(c.call(Request::Get(b"k")), Ok(Response::Get(None)));
    }
}
