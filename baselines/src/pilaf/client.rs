//! [`PilafClient`]: GETs by RDMA READ of the key's home node's self-verifying
//! hash table, PUT and DELETE as requests served by the home node's workers.
//!
//! A GET attempt probes the key's three candidate entries one READ at a time
//! (as Pilaf probes). An entry whose checksum does not match was read while
//! the server rewrote it: the client counts a torn read, backs off and reads
//! that entry again. An empty entry is skipped; for a used one the client
//! READs the extent it points to, and accepts it only if the extent's CRC64
//! matches the one in the entry and its key is the key looked up. An extent
//! that fails its checksum ends the attempt (its pointer may be stale): the
//! client backs off and starts a new attempt.
//!
//! A miss is confirmed by a second scan between two READs of the home node's
//! move epoch (as NessieHY does): only an unchanged, even epoch proves no
//! cuckoo move overlapped the scan, so a key being moved was not skipped.
//! Every attempt ends within T (`expiration - deadline_margin`) of its start
//! or is retried, and the server quarantines freed extents for T, so an
//! extent is never reused under an attempt's READ. The operation as a whole
//! gives up with [`Error::Timeout`] after `retry.op_timeout`.

use std::sync::Arc;

use nessie_protocol::{ClientId, Config, Endpoint, Error, Nanos, NodeId, OpStats, RemoteAddr};

use super::layout::{EntryRead, HashEntry, PilafLayout, ENTRY_BYTES};
use crate::io::{word, Io};
use crate::kv::KvClient;
use crate::mailbox::{RpcOp, Status};
use crate::retry::{Jitter, RetryBudget};
use crate::rpc::RpcClient;

/// Checksum mismatches a client has seen (each one was retried, never
/// returned).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TornReads {
    /// Hash table entries that failed their checksum (read again).
    pub entries: u64,
    /// Extents that failed the checksum in their entry (attempt retried).
    pub extents: u64,
}

impl TornReads {
    /// Entries and extents together.
    pub fn total(&self) -> u64 {
        self.entries + self.extents
    }
}

/// A Pilaf client.
pub struct PilafClient<E: Endpoint> {
    cfg: Arc<Config>,
    layout: PilafLayout,
    io: Io<E>,
    pub(crate) rpc: RpcClient,
    last: OpStats,
    jitter: Jitter,
    torn: TornReads,
    skip_checksums: bool,
    skip_epoch_check: bool,
}

/// Why a GET attempt must be retried.
struct Retry;

impl<E: Endpoint> PilafClient<E> {
    /// Client `id` on endpoint `ep` (an endpoint on `id.node`).
    pub fn new(cfg: Arc<Config>, layout: PilafLayout, id: ClientId, ep: E) -> PilafClient<E> {
        let timeout = cfg.retry.op_timeout;
        PilafClient {
            rpc: RpcClient::new(layout.mailbox, id, cfg.clients_per_node, timeout),
            io: Io::new(ep, timeout),
            jitter: Jitter::new(id),
            cfg,
            layout,
            last: OpStats::default(),
            torn: TornReads::default(),
            skip_checksums: false,
            skip_epoch_check: false,
        }
    }

    /// Checksum mismatches seen so far by this client's GETs (all retried).
    /// [`OpStats::attempts`] of a GET also counts each retried attempt, but
    /// a torn entry is read again within its attempt, so only this counter
    /// sees every torn read.
    pub fn torn_reads(&self) -> TornReads {
        self.torn
    }

    /// Test-only fault switch: when on, GETs do not compare entry and extent
    /// checksums (plausibility checks remain), so torn or corrupt data can
    /// be returned. It exists to show that the tests detect exactly that.
    pub fn set_skip_checksums(&mut self, on: bool) {
        self.skip_checksums = on;
    }

    /// Test-only fault switch: when on, a GET reports a key absent after one
    /// scan, without the move-epoch check, so a key moving between probes
    /// can be missed. It exists to show that the tests detect exactly that.
    pub fn set_skip_epoch_check(&mut self, on: bool) {
        self.skip_epoch_check = on;
    }

    fn call(&mut self, op: RpcOp, key: &[u8], value: &[u8]) -> Result<Status, Error> {
        let home = self.layout.home(key);
        let r = self.rpc.request(
            &mut self.io,
            "pilaf",
            &self.cfg,
            home,
            op,
            key,
            value,
            &mut self.last,
        )?;
        Ok(r.status)
    }

    fn now(&mut self) -> Nanos {
        self.io.endpoint().now()
    }

    /// Backs off before a retry; [`Error::Timeout`] once the operation has
    /// run out of time.
    fn pause(&mut self, op: &mut RetryBudget) -> Result<(), Error> {
        op.pause(&mut self.io, &self.cfg.retry, &mut self.jitter)
    }

    /// Reads hash table entry `slot` of `home` until it is consistent.
    fn read_entry(
        &mut self,
        home: NodeId,
        slot: u32,
        op: &mut RetryBudget,
        stats: &mut OpStats,
    ) -> Result<Option<HashEntry>, Error> {
        let addr = RemoteAddr::data(home, self.layout.entry_offset(slot));
        loop {
            let bytes = self.io.read(addr, ENTRY_BYTES as u32, true, stats)?;
            match self.layout.decode_entry(&bytes, !self.skip_checksums) {
                EntryRead::Empty => return Ok(None),
                EntryRead::Used(e) => return Ok(Some(e)),
                EntryRead::Torn => {
                    self.torn.entries += 1;
                    tracing::debug!(slot, %home, "pilaf: torn hash table entry, reading again");
                    self.pause(op)?;
                }
            }
        }
    }

    /// One pass over the candidates; `Some(value)` if the key was found.
    fn scan(
        &mut self,
        key: &[u8],
        home: NodeId,
        attempt: Nanos,
        op: &mut RetryBudget,
        stats: &mut OpStats,
    ) -> Result<Result<Option<Vec<u8>>, Retry>, Error> {
        let verify = !self.skip_checksums;
        for slot in self.layout.candidates(key) {
            let Some(e) = self.read_entry(home, slot, op, stats)? else {
                continue;
            };
            let bytes = self.io.read(
                RemoteAddr::data(home, e.extent),
                e.extent_read_len(),
                false,
                stats,
            )?;
            // The extent is only safe if it cannot have been reused under us.
            let now = self.now();
            if now.since(attempt) + self.cfg.deadline_margin >= self.cfg.expiration {
                return Ok(Err(Retry));
            }
            let Some((k, v)) = e.verify_extent(&bytes, verify) else {
                self.torn.extents += 1;
                tracing::debug!(slot, %home, "pilaf: extent fails its checksum, retrying");
                return Ok(Err(Retry));
            };
            if k == key {
                return Ok(Ok(Some(v.to_vec())));
            }
        }
        Ok(Ok(None))
    }

    fn read_epoch(&mut self, home: NodeId, stats: &mut OpStats) -> Result<u64, Error> {
        let addr = RemoteAddr::data(home, self.layout.epoch);
        Ok(word(&self.io.read(addr, 8, true, stats)?, 0))
    }

    fn get_attempt(
        &mut self,
        key: &[u8],
        op: &mut RetryBudget,
        stats: &mut OpStats,
    ) -> Result<Result<Option<Vec<u8>>, Retry>, Error> {
        let home = self.layout.home(key);
        let attempt = self.now();
        match self.scan(key, home, attempt, op, stats)? {
            Ok(None) if self.skip_epoch_check => return Ok(Ok(None)),
            Ok(None) => {}
            other => return Ok(other),
        }
        let before = self.read_epoch(home, stats)?;
        if before % 2 == 1 {
            return Ok(Err(Retry));
        }
        match self.scan(key, home, attempt, op, stats)? {
            Ok(None) => {}
            other => return Ok(other),
        }
        let after = self.read_epoch(home, stats)?;
        if after != before {
            return Ok(Err(Retry));
        }
        Ok(Ok(None))
    }
}

impl<E: Endpoint> KvClient for PilafClient<E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.cfg.check_key(key)?;
        let span = tracing::debug_span!("pilaf-get", key_len = key.len());
        let _g = span.enter();
        let mut stats = OpStats::default();
        let mut op = RetryBudget::new(self.now(), &self.cfg.retry);
        let result = loop {
            stats.attempts += 1;
            match self.get_attempt(key, &mut op, &mut stats) {
                Ok(Ok(v)) => break Ok(v),
                Ok(Err(Retry)) => {
                    if let Err(e) = self.pause(&mut op) {
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
}
