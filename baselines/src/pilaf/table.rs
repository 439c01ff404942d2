//! [`PilafTable`]: one node's hash table and extents as its server workers
//! see them. Every request runs by CPU on the node's own memory, under one
//! lock per node (Pilaf's single server thread does the same: section 4).
//!
//! - PUT writes the key and value into a fresh extent (out of place), then
//!   writes the 32-byte hash table entry pointing at it, with the extent's
//!   CRC64 and the entry's own CRC64. A client READ that overlaps the entry
//!   write sees a checksum mismatch and reads again.
//! - A new key takes an empty candidate entry or, when all three are full, a
//!   cuckoo path found breadth-first (at most `max_migrate_depth` moves).
//!   The moves run from the end of the path backwards, so every moved key is
//!   in one or two entries at any time, never zero (section 3.4), inside an
//!   odd *move epoch* that lets a client GET tell a true miss from a scan
//!   that raced a move.
//! - DELETE zeroes the entry.
//! - A replaced or deleted extent is quarantined for the expiration period T
//!   (plus the clock skew) before reuse; clients end every GET attempt within
//!   T of its start, so an extent is never rewritten under a client's READ.

use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{Config, CorruptionKind, Error, NodeId};

use super::layout::{encode_extent, EntryRead, HashEntry, PilafLayout, ENTRY_BYTES};
use crate::coupled::{Allocator, Guarded};
use crate::cuckoo::{self, CuckooTable};
use nessie_exec::mailbox::{Request, RpcOp, Status};
use nessie_exec::Handler;
use nessie_exec::TableLock;
use nessie_exec::{Io, Never, Plain};

/// One node's Pilaf hash table and extents, shared by its server workers.
#[derive(Debug)]
pub struct PilafTable {
    layout: PilafLayout,
    node: NodeId,
    max_depth: u8,
    /// See [`Handler::claim_wait`].
    claim_wait: Duration,
    state: Guarded,
}

/// A key found in the table.
struct Found {
    slot: u32,
    entry: HashEntry,
}

impl PilafTable {
    /// The (zeroed, hence empty) table and extents of `node`.
    pub fn new(layout: PilafLayout, node: NodeId, cfg: &Config) -> PilafTable {
        PilafTable {
            layout,
            node,
            max_depth: cfg.max_migrate_depth.max(1),
            claim_wait: nessie_exec::claim_wait(cfg.retry.op_timeout),
            state: Guarded::new(Allocator::new(
                layout.extents,
                cfg.expiration + cfg.clock_skew,
            )),
        }
    }

    /// The node's table lock.
    pub fn lock(&self) -> &Arc<TableLock> {
        &self.state.lock
    }

    /// Extents handed out again after their quarantine (written, unlinked,
    /// expired, reused), so far.
    pub fn reused(&self) -> u64 {
        self.state.alloc().reused()
    }

    /// The entry in `slot`. Only this node's workers write the table, under
    /// the lock, so a torn entry here is corruption, not a race.
    async fn entry(&self, io: &Io, slot: u32) -> Result<Option<HashEntry>, Error> {
        let bytes = io
            .local_read(self.layout.entry_offset(slot), ENTRY_BYTES as u32)
            .await?;
        match self.layout.decode_entry(&bytes, true) {
            EntryRead::Empty => Ok(None),
            EntryRead::Used(e) => Ok(Some(e)),
            EntryRead::Torn => Err(Error::corrupt(
                CorruptionKind::Memory,
                format!(
                    "hash table entry {slot} on {} fails its checksum",
                    self.node
                ),
            )),
        }
    }

    /// The key and value of `e`'s extent.
    async fn extent(&self, io: &Io, e: &HashEntry) -> Result<(Vec<u8>, Vec<u8>), Error> {
        let bytes = io.local_read(e.extent, e.extent_read_len()).await?;
        match e.verify_extent(&bytes, true) {
            Some((k, v)) => Ok((k.to_vec(), v.to_vec())),
            None => Err(Error::corrupt(
                CorruptionKind::Memory,
                format!("extent at {} on {} fails its checksum", e.extent, self.node),
            )),
        }
    }

    async fn find(&self, io: &Io, key: &[u8]) -> Result<Option<Found>, Error> {
        for slot in self.layout.candidates(key) {
            let Some(entry) = self.entry(io, slot).await? else {
                continue;
            };
            if entry.key_len as usize != key.len() {
                continue;
            }
            let k = io.local_read(entry.extent, key.len() as u32).await?;
            if k == key {
                return Ok(Some(Found { slot, entry }));
            }
        }
        Ok(None)
    }

    async fn write_entry(&self, io: &Io, slot: u32, bytes: Vec<u8>) -> Result<(), Error> {
        io.local_write(self.layout.entry_offset(slot), bytes).await
    }

    async fn get(&self, io: &Io, key: &[u8]) -> Result<(Status, Vec<u8>), Error> {
        match self.find(io, key).await? {
            Some(f) => Ok((Status::Found, self.extent(io, &f.entry).await?.1)),
            None => Ok((Status::Absent, Vec::new())),
        }
    }

    async fn put(&self, io: &Io, key: &[u8], value: &[u8]) -> Result<(Status, Vec<u8>), Error> {
        let found = self.find(io, key).await?;
        let Some(x) = self.state.alloc().take(io.now()) else {
            return Ok((Status::DataTableFull, Vec::new()));
        };
        let at = self.layout.extent_offset(x);
        io.local_write(at, encode_extent(key, value)).await?;
        let entry = HashEntry::new(at, key, value).encode();
        if let Some(f) = found {
            self.write_entry(io, f.slot, entry).await?;
            if let Some(old) = self.layout.extent_index(f.entry.extent) {
                self.state.alloc().retire(old, io.now());
            }
            return Ok((Status::Found, Vec::new()));
        }
        let cands = self.layout.candidates(key);
        if cuckoo::insert(self, io, &cands, entry, self.max_depth).await? {
            Ok((Status::Absent, Vec::new()))
        } else {
            self.state.alloc().release_unpublished(x);
            Ok((Status::TableFull, Vec::new()))
        }
    }

    async fn delete(&self, io: &Io, key: &[u8]) -> Result<(Status, Vec<u8>), Error> {
        let Some(f) = self.find(io, key).await? else {
            return Ok((Status::Absent, Vec::new()));
        };
        self.write_entry(io, f.slot, vec![0; ENTRY_BYTES as usize])
            .await?;
        if let Some(old) = self.layout.extent_index(f.entry.extent) {
            self.state.alloc().retire(old, io.now());
        }
        Ok((Status::Found, Vec::new()))
    }
}

impl CuckooTable for PilafTable {
    async fn occupant(&self, io: &Io, slot: u32) -> Result<Option<Vec<u8>>, Error> {
        match self.entry(io, slot).await? {
            Some(e) => Ok(Some(io.local_read(e.extent, e.key_len).await?)),
            None => Ok(None),
        }
    }

    fn candidates(&self, key: &[u8]) -> Vec<u32> {
        self.layout.candidates(key)
    }

    fn entry_range(&self, slot: u32) -> (u64, u32) {
        (self.layout.entry_offset(slot), ENTRY_BYTES as u32)
    }

    fn epoch_offset(&self) -> u64 {
        self.layout.epoch
    }
}

impl Handler for PilafTable {
    type Ext = Plain;

    async fn handle(&self, io: &Io, req: Request) -> Result<(Status, Vec<u8>), Error> {
        let too_big = req.key.is_empty()
            || req.key.len() > self.layout.max_key as usize
            || req.value.len() > self.layout.max_value as usize;
        if too_big {
            return Ok((Status::BadRequest, Vec::new()));
        }
        let _held = io.lock(&self.state.lock).await;
        tracing::debug!(op = ?req.op, node = %self.node, "pilaf-server");
        match req.op {
            RpcOp::Get => self.get(io, &req.key).await,
            RpcOp::Put => self.put(io, &req.key, &req.value).await,
            RpcOp::Delete => self.delete(io, &req.key).await,
        }
    }

    fn ext(&self, e: Never) -> Never {
        match e {}
    }

    fn claim_wait(&self) -> Duration {
        self.claim_wait
    }
}

impl crate::design::NodeTable for PilafTable {
    fn reused(&self) -> u64 {
        PilafTable::reused(self)
    }
}
