//! The key-value vocabulary every system shares: [`KvClient`], GET, PUT and
//! DELETE as every system offers them (Nessie's [`Client`] here; the
//! baselines' and Cell's clients in their crates), so that the benchmark,
//! the workload driver and the tests drive them alike; one operation
//! ([`Request`], or [`KvRequest`] borrowing its key and value) and what it
//! returned ([`Response`]).

use crate::client::Client;
use crate::error::Error;
use crate::fabric::Endpoint;
use crate::stats::OpStats;

/// One operation, owning its key and value (a pipeline's queue, the
/// simulator's clients).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// GET this key.
    Get(Vec<u8>),
    /// PUT this key and value.
    Put(Vec<u8>, Vec<u8>),
    /// DELETE this key.
    Delete(Vec<u8>),
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// A GET's value, if the key was present.
    Get(Option<Vec<u8>>),
    /// A PUT: whether the key existed.
    Put(bool),
    /// A DELETE: whether the key existed.
    Delete(bool),
}

/// One operation, borrowing its key and value (one attempt of a
/// baseline's client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvRequest<'a> {
    /// GET this key.
    Get(&'a [u8]),
    /// PUT this key and value.
    Put(&'a [u8], &'a [u8]),
    /// DELETE this key.
    Delete(&'a [u8]),
}

impl<'a> KvRequest<'a> {
    /// The operation `r` describes.
    pub fn of(r: &'a Request) -> KvRequest<'a> {
        match r {
            Request::Get(k) => KvRequest::Get(k),
            Request::Put(k, v) => KvRequest::Put(k, v),
            Request::Delete(k) => KvRequest::Delete(k),
        }
    }

    /// Its key.
    pub fn key(&self) -> &'a [u8] {
        match *self {
            KvRequest::Get(k) | KvRequest::Put(k, _) | KvRequest::Delete(k) => k,
        }
    }

    /// Its name, for spans.
    pub fn name(&self) -> &'static str {
        match self {
            KvRequest::Get(_) => "get",
            KvRequest::Put(..) => "put",
            KvRequest::Delete(_) => "delete",
        }
    }
}

/// A key-value client of any of the compared systems.
pub trait KvClient: Send {
    /// Reads `key`: its value, or `None` if absent.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error>;
    /// Stores `value` under `key`; returns whether the key existed before.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error>;
    /// Deletes `key`; returns whether it existed.
    fn delete(&mut self, key: &[u8]) -> Result<bool, Error>;
    /// Fabric work of the last call (all its attempts).
    fn last_stats(&self) -> OpStats;
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
}
