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

use std::sync::Mutex;

use nessie_protocol::{Config, Endpoint, Error, NodeId};

use super::layout::{encode_extent, EntryRead, HashEntry, PilafLayout, ENTRY_BYTES};
use crate::coupled::Allocator;
use crate::cuckoo::{self, CuckooTable};
use crate::io::Io;
use crate::mailbox::{Request, RpcOp, Status};
use crate::server::Handler;

/// One node's Pilaf hash table and extents, shared by its server workers.
#[derive(Debug)]
pub struct PilafTable {
    layout: PilafLayout,
    node: NodeId,
    max_depth: u8,
    state: Mutex<Allocator>,
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
            state: Mutex::new(Allocator::new(
                layout.extents,
                cfg.expiration + cfg.clock_skew,
            )),
        }
    }

    /// The entry in `slot`. Only this node's workers write the table, under
    /// the lock, so a torn entry here is corruption, not a race.
    fn entry<E: Endpoint>(&self, io: &mut Io<E>, slot: u32) -> Result<Option<HashEntry>, Error> {
        let bytes = io.local_read(self.layout.entry_offset(slot), ENTRY_BYTES as u32)?;
        match self.layout.decode_entry(&bytes, true) {
            EntryRead::Empty => Ok(None),
            EntryRead::Used(e) => Ok(Some(e)),
            EntryRead::Torn => Err(Error::Corrupt(format!(
                "hash table entry {slot} on {} fails its checksum",
                self.node
            ))),
        }
    }

    /// The key and value of `e`'s extent.
    fn extent<E: Endpoint>(
        &self,
        io: &mut Io<E>,
        e: &HashEntry,
    ) -> Result<(Vec<u8>, Vec<u8>), Error> {
        let bytes = io.local_read(e.extent, e.extent_read_len())?;
        match e.verify_extent(&bytes, true) {
            Some((k, v)) => Ok((k.to_vec(), v.to_vec())),
            None => Err(Error::Corrupt(format!(
                "extent at {} on {} fails its checksum",
                e.extent, self.node
            ))),
        }
    }

    fn find<E: Endpoint>(&self, io: &mut Io<E>, key: &[u8]) -> Result<Option<Found>, Error> {
        for slot in self.layout.candidates(key) {
            let Some(entry) = self.entry(io, slot)? else {
                continue;
            };
            if entry.key_len as usize != key.len() {
                continue;
            }
            let k = io.local_read(entry.extent, key.len() as u32)?;
            if k == key {
                return Ok(Some(Found { slot, entry }));
            }
        }
        Ok(None)
    }

    fn write_entry<E: Endpoint>(
        &self,
        io: &mut Io<E>,
        slot: u32,
        bytes: Vec<u8>,
    ) -> Result<(), Error> {
        io.local_write(self.layout.entry_offset(slot), bytes)
    }

    fn get<E: Endpoint>(&self, io: &mut Io<E>, key: &[u8]) -> Result<(Status, Vec<u8>), Error> {
        match self.find(io, key)? {
            Some(f) => Ok((Status::Found, self.extent(io, &f.entry)?.1)),
            None => Ok((Status::Absent, Vec::new())),
        }
    }

    fn put<E: Endpoint>(
        &self,
        io: &mut Io<E>,
        extents: &mut Allocator,
        key: &[u8],
        value: &[u8],
    ) -> Result<(Status, Vec<u8>), Error> {
        let found = self.find(io, key)?;
        let Some(x) = extents.take() else {
            return Ok((Status::DataTableFull, Vec::new()));
        };
        let at = self.layout.extent_offset(x);
        io.local_write(at, encode_extent(key, value))?;
        let entry = HashEntry::new(at, key, value).encode();
        if let Some(f) = found {
            self.write_entry(io, f.slot, entry)?;
            if let Some(old) = self.layout.extent_index(f.entry.extent) {
                extents.retire(old);
            }
            return Ok((Status::Found, Vec::new()));
        }
        let cands = self.layout.candidates(key);
        if cuckoo::insert(self, io, &cands, entry, self.max_depth)? {
            Ok((Status::Absent, Vec::new()))
        } else {
            extents.release_unpublished(x);
            Ok((Status::TableFull, Vec::new()))
        }
    }

    fn delete<E: Endpoint>(
        &self,
        io: &mut Io<E>,
        extents: &mut Allocator,
        key: &[u8],
    ) -> Result<(Status, Vec<u8>), Error> {
        let Some(f) = self.find(io, key)? else {
            return Ok((Status::Absent, Vec::new()));
        };
        self.write_entry(io, f.slot, vec![0; ENTRY_BYTES as usize])?;
        if let Some(old) = self.layout.extent_index(f.entry.extent) {
            extents.retire(old);
        }
        Ok((Status::Found, Vec::new()))
    }
}

impl<E: Endpoint> CuckooTable<E> for PilafTable {
    fn occupant(&self, io: &mut Io<E>, slot: u32) -> Result<Option<Vec<u8>>, Error> {
        match self.entry(io, slot)? {
            Some(e) => Ok(Some(io.local_read(e.extent, e.key_len)?)),
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

impl<E: Endpoint> Handler<E> for PilafTable {
    fn handle(&self, io: &mut Io<E>, req: &Request) -> Result<(Status, Vec<u8>), Error> {
        let too_big = req.key.is_empty()
            || req.key.len() > self.layout.max_key as usize
            || req.value.len() > self.layout.max_value as usize;
        if too_big {
            return Ok((Status::BadRequest, Vec::new()));
        }
        let mut extents = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let span = tracing::debug_span!("pilaf-server", op = ?req.op, node = %self.node);
        let _g = span.enter();
        match req.op {
            RpcOp::Get => self.get(io, &req.key),
            RpcOp::Put => self.put(io, &mut extents, &req.key, &req.value),
            RpcOp::Delete => self.delete(io, &mut extents, &req.key),
        }
    }
}
