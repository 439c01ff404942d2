//! [`KvClient`]: GET, PUT and DELETE as every system offers them (Nessie's
//! [`Client`] here; the baselines' and Cell's clients in their crates), so
//! that the benchmark, the workload driver and the tests drive them alike.

use crate::client::Client;
use crate::error::Error;
use crate::fabric::Endpoint;
use crate::stats::OpStats;

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
