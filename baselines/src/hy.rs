//! NessieHY, the hybrid baseline (FaRM-like): GETs are client-driven, by RDMA
//! READ of the key's home node's partially-coupled tables
//! ([`crate::coupled`]); PUT and DELETE are requests served by the home
//! node's workers, as in NessieSD.
//!
//! A GET reads the key's candidate index table entries one at a time and, for
//! an entry that may hold the key, its data table entry. As in the paper the
//! optimisations are off by default and each can be switched on
//! ([`HyOptions`]): filter bits (skip entries whose filter differs), a cache
//! of remote data table entries (keyed by the index table entry word, valid
//! for T), and multiple reads (header and key first, the value only on a
//! match). Nessie's fourth optimisation, previous versions, has no
//! counterpart: a server-driven PUT never leaves an uncommitted entry for a
//! reader to step back from.
//!
//! A GET that finds nothing scans again between two READs of the home node's
//! move epoch; only an unchanged, even epoch (no cuckoo move overlapped the
//! scan) lets it report the key absent. Every attempt ends within T of its
//! start (else it retries), so the data table entries it reads are never
//! reused under it.

use std::sync::Arc;

use nessie_protocol::{
    cache::DteCache, ClientId, Config, Endpoint, Error, IndexEntry, NodeId, OpStats, RemoteAddr,
};

use crate::coupled::CoupledLayout;
use crate::deployment::HyOptions;
use crate::io::{word, Io};
use crate::kv::KvClient;
use crate::mailbox::{RpcOp, Status};
use crate::retry::{Jitter, RetryBudget};
use crate::rpc::RpcClient;

/// A NessieHY client.
pub struct HyClient<E: Endpoint> {
    cfg: Arc<Config>,
    layout: CoupledLayout,
    opts: HyOptions,
    io: Io<E>,
    pub(crate) rpc: RpcClient,
    cache: DteCache,
    last: OpStats,
    jitter: Jitter,
    skip_epoch_check: bool,
}

/// Why a GET attempt must be retried.
struct Retry;

impl<E: Endpoint> HyClient<E> {
    /// Client `id` on endpoint `ep` (an endpoint on `id.node`).
    pub fn new(
        cfg: Arc<Config>,
        layout: CoupledLayout,
        opts: HyOptions,
        id: ClientId,
        ep: E,
    ) -> HyClient<E> {
        let timeout = cfg.retry.op_timeout;
        HyClient {
            rpc: RpcClient::new(layout.mailbox, id, cfg.clients_per_node, timeout),
            io: Io::new(ep, timeout),
            cache: DteCache::new(if opts.cache { cfg.cache_capacity } else { 0 }),
            jitter: Jitter::new(id),
            cfg,
            layout,
            opts,
            last: OpStats::default(),
            skip_epoch_check: false,
        }
    }

    /// Test-only fault switch: report a key absent after one scan, without
    /// the move-epoch check (a broken variant the tests must catch).
    pub fn set_skip_epoch_check(&mut self, on: bool) {
        self.skip_epoch_check = on;
    }

    fn call(&mut self, op: RpcOp, key: &[u8], value: &[u8]) -> Result<Status, Error> {
        let home = self.layout.home(key);
        let r = self.rpc.request(
            &mut self.io,
            "nessie-hy",
            &self.cfg,
            home,
            op,
            key,
            value,
            &mut self.last,
        )?;
        Ok(r.status)
    }

    /// Reads `len` bytes at `offset` of `home`'s data region: by CPU when
    /// `home` is the client's own node (as the paper's NessieHY does for
    /// same-node data; the server also writes by CPU, so nothing relies on
    /// NIC atomicity here), by RDMA READ otherwise.
    fn fetch(
        &mut self,
        home: NodeId,
        offset: u64,
        len: u64,
        index: bool,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, Error> {
        if home == self.io.node() {
            stats.local_reads += 1;
            stats.local_bytes += len;
            return self.io.local_read(offset, len as u32);
        }
        self.io
            .read(RemoteAddr::data(home, offset), len as u32, index, stats)
    }

    fn read_word(&mut self, home: NodeId, offset: u64, stats: &mut OpStats) -> Result<u64, Error> {
        Ok(word(&self.fetch(home, offset, 8, true, stats)?, 0))
    }

    /// One pass over the candidates; `Some(value)` if the key was found.
    fn scan(
        &mut self,
        key: &[u8],
        home: NodeId,
        start: nessie_protocol::Nanos,
        use_cache: bool,
        stats: &mut OpStats,
    ) -> Result<Result<Option<Vec<u8>>, Retry>, Error> {
        let filter = self.layout.filter(key);
        let expiration = self.cfg.expiration;
        for slot in self.layout.candidates(key) {
            let read_at = self.io.endpoint().now();
            let ite = IndexEntry(self.read_word(home, self.layout.index_offset(slot), stats)?);
            let Some(dte) = ite.dte() else { continue };
            if self.opts.filter_bits && !ite.filter_matches(filter) {
                continue;
            }
            if use_cache {
                let now = self.io.endpoint().now();
                if let Some(bytes) = self.cache.get(ite.0, now, read_at.plus(expiration)) {
                    if self.layout.entry_key(bytes) == Some(key) {
                        return Ok(Ok(self.layout.entry_value(bytes).map(<[u8]>::to_vec)));
                    }
                    continue;
                }
            }
            let at = self.layout.entry_offset(dte.index);
            let entry = if self.opts.multiple_reads {
                let head = self.fetch(home, at, self.layout.header_and_key(), false, stats)?;
                if self.layout.entry_key(&head) != Some(key) {
                    continue;
                }
                let (k, v) = self.layout.lens(word(&head, 0)).unwrap_or((0, 0));
                let mut entry = head[..8 + k].to_vec();
                if v > 0 {
                    let value = self.fetch(home, at + 8 + k as u64, v as u64, false, stats)?;
                    entry.extend_from_slice(&value);
                }
                entry
            } else {
                self.fetch(home, at, self.layout.entry_bytes, false, stats)?
            };
            if self.layout.entry_key(&entry) != Some(key) {
                continue;
            }
            // The entry is only safe if it cannot have been reused under us.
            let now = self.io.endpoint().now();
            if now.since(start) + self.cfg.deadline_margin >= expiration {
                return Ok(Err(Retry));
            }
            let value = self.layout.entry_value(&entry).map(<[u8]>::to_vec);
            if value.is_none() {
                return Ok(Err(Retry));
            }
            if use_cache {
                self.cache.insert(ite.0, entry, read_at.plus(expiration));
            }
            return Ok(Ok(value));
        }
        Ok(Ok(None))
    }

    fn get_attempt(
        &mut self,
        key: &[u8],
        stats: &mut OpStats,
    ) -> Result<Result<Option<Vec<u8>>, Retry>, Error> {
        let home = self.layout.home(key);
        let start = self.io.endpoint().now();
        match self.scan(key, home, start, true, stats)? {
            Ok(Some(v)) => return Ok(Ok(Some(v))),
            Err(Retry) => return Ok(Err(Retry)),
            Ok(None) if self.skip_epoch_check => return Ok(Ok(None)),
            Ok(None) => {}
        }
        let before = self.read_word(home, self.layout.epoch, stats)?;
        if !before.is_multiple_of(2) {
            return Ok(Err(Retry));
        }
        match self.scan(key, home, start, false, stats)? {
            Ok(Some(v)) => return Ok(Ok(Some(v))),
            Err(Retry) => return Ok(Err(Retry)),
            Ok(None) => {}
        }
        let after = self.read_word(home, self.layout.epoch, stats)?;
        if after != before {
            return Ok(Err(Retry));
        }
        Ok(Ok(None))
    }
}

impl<E: Endpoint> KvClient for HyClient<E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.cfg.check_key(key)?;
        let span = tracing::debug_span!("hy-get", key_len = key.len());
        let _g = span.enter();
        let mut stats = OpStats::default();
        let mut budget = RetryBudget::new(self.io.endpoint().now(), &self.cfg.retry);
        let result = loop {
            stats.attempts += 1;
            match self.get_attempt(key, &mut stats) {
                Ok(Ok(v)) => break Ok(v),
                Ok(Err(Retry)) => {
                    if let Err(e) = budget.pause(&mut self.io, &self.cfg.retry, &mut self.jitter) {
                        break Err(e);
                    }
                }
                Err(e) => break Err(e),
            }
        };
        self.last = stats;
        result
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        Ok(self.call(RpcOp::Put, key, value)? == Status::Found)
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        Ok(self.call(RpcOp::Delete, key, &[])? == Status::Found)
    }

    fn last_stats(&self) -> OpStats {
        self.last
    }

    fn cache_hits(&self) -> u64 {
        self.cache.hit_miss().0
    }
}
