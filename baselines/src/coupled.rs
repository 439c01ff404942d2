//! The partially-coupled tables of NessieSD and NessieHY: each key has a home
//! node, and both its index table entry (one of N cuckoo candidates on that
//! node) and its data table entry live there, in the node's data region:
//!
//! ```text
//! data region: | request/response slots | move epoch | index table | data table |
//! index table entry: Nessie's 64-bit IndexEntry (present, filter bits, DTE number)
//! data table entry:  | key_len u32 | value_len u32 | key | value | pad |
//! ```
//!
//! Only the home node's server workers change the tables, by CPU, under one
//! lock per node; NessieHY's clients read them by RDMA READ. A PUT writes a
//! fresh data table entry and then replaces the 8-byte index table entry (an
//! aligned store, atomic against a NIC READ); the old entry is quarantined for
//! the expiration period T before reuse, and every client GET attempt ends
//! within T, so a client never reads a reused entry. A cuckoo move copies index
//! table entries from the end of the path backwards (the key is never
//! invisible) between two increments of the node's *move epoch*, which a
//! client GET that found nothing checks before it reports the key absent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nessie_protocol::{
    hash::{stable_hash, Hasher},
    Config, CorruptionKind, DteAddr, Error, IndexEntry, Nanos, NodeId,
};

use crate::cuckoo::{self, CuckooTable};
use nessie_exec::mailbox::{MailboxLayout, Request, RpcOp, Status};
use nessie_exec::Handler;
use nessie_exec::TableLock;
use nessie_exec::{round8, word};
use nessie_exec::{Io, Plain};

const HOME_SEED: u64 = 0x686f_6d65_6e6f_6465;

/// The home node of `key` among `nodes` under hash seed `seed`: where a
/// partially-coupled design (NessieSD, NessieHY, Pilaf) keeps its entries.
pub fn home_node(seed: u64, nodes: u16, key: &[u8]) -> NodeId {
    NodeId((stable_hash(seed ^ HOME_SEED, key) % u64::from(nodes.max(1))) as u16)
}

/// The candidate entries of `key` on its home node (`hasher` spans one node).
pub fn home_slots(hasher: &Hasher, key: &[u8]) -> Vec<u32> {
    hasher.candidates(key).into_iter().map(|a| a.slot).collect()
}

/// Where everything lives in a node's data region, and how keys hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoupledLayout {
    /// The request and response slots.
    pub mailbox: MailboxLayout,
    /// Offset of the move-epoch word.
    pub epoch: u64,
    /// Offset of the first index table entry.
    pub index_base: u64,
    /// Index table entries per node.
    pub slots: u32,
    /// Offset of the first data table entry.
    pub data_base: u64,
    /// Data table entries per node.
    pub dtes: u32,
    /// Bytes per data table entry.
    pub entry_bytes: u64,
    /// Largest key.
    pub max_key: u32,
    /// Largest value.
    pub max_value: u32,
    /// Nodes.
    pub nodes: u16,
    /// Candidates per key, filter bits and seed.
    pub hasher: Hasher,
}

impl CoupledLayout {
    /// The layout for `cfg` (nodes, clients, index slots, data table entries,
    /// sizes, candidates; `filter_bits` as given). The candidates are at
    /// most the index table entries of one node (all of a key's are on its
    /// home node).
    pub fn new(cfg: &Config, filter_bits: u8) -> CoupledLayout {
        let clients_total = u32::from(cfg.nodes) * u32::from(cfg.clients_per_node);
        let mailbox = MailboxLayout::new(0, clients_total, cfg.max_key_len, cfg.max_value_len);
        let epoch = mailbox.bytes();
        let index_base = epoch + 8;
        let data_base = index_base + 8 * u64::from(cfg.index_slots_per_node);
        CoupledLayout {
            mailbox,
            epoch,
            index_base,
            slots: cfg.index_slots_per_node,
            data_base,
            dtes: cfg.dtes_per_node,
            entry_bytes: 8 + round8(u64::from(cfg.max_key_len) + u64::from(cfg.max_value_len)),
            max_key: cfg.max_key_len,
            max_value: cfg.max_value_len,
            nodes: cfg.nodes,
            hasher: Hasher {
                seed: cfg.hash_seed,
                // A key's candidates are distinct entries of its home node:
                // no more of them than the node has (as Pilaf's ways). A
                // Nessie configuration counts the slots of every node, so
                // it may ask for more.
                candidates: u32::from(cfg.candidates).min(cfg.index_slots_per_node.max(1)) as u8,
                bucket_slots: 1,
                nodes: 1,
                slots_per_node: cfg.index_slots_per_node,
                filter_bits,
            },
        }
    }

    /// Bytes of data region each node needs.
    pub fn region_bytes(&self) -> u64 {
        self.data_base + u64::from(self.dtes) * self.entry_bytes
    }

    /// The key's home node.
    pub fn home(&self, key: &[u8]) -> NodeId {
        home_node(self.hasher.seed, self.nodes, key)
    }

    /// The key's candidate index table entries (slot numbers on its home node).
    pub fn candidates(&self, key: &[u8]) -> Vec<u32> {
        self.hasher
            .candidates(key)
            .into_iter()
            .map(|a| a.slot)
            .collect()
    }

    /// The key's filter bits (0 when filtering is off).
    pub fn filter(&self, key: &[u8]) -> u16 {
        self.hasher.filter(key)
    }

    /// Offset of index table entry `slot`.
    pub fn index_offset(&self, slot: u32) -> u64 {
        self.index_base + 8 * u64::from(slot)
    }

    /// Offset of data table entry `i`.
    pub fn entry_offset(&self, i: u32) -> u64 {
        self.data_base + u64::from(i) * self.entry_bytes
    }

    /// Bytes of a data table entry's header and key (what a first READ of
    /// "multiple reads" fetches).
    pub fn header_and_key(&self) -> u64 {
        8 + u64::from(self.max_key)
    }

    /// Encodes a data table entry.
    pub fn encode_entry(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut b = Vec::with_capacity(8 + round8((key.len() + value.len()) as u64) as usize);
        b.extend_from_slice(&((key.len() as u64) | ((value.len() as u64) << 32)).to_le_bytes());
        b.extend_from_slice(key);
        b.extend_from_slice(value);
        b.resize(8 + round8((key.len() + value.len()) as u64) as usize, 0);
        b
    }

    /// `(key_len, value_len)` of an entry's header word, if plausible.
    pub fn lens(&self, header: u64) -> Option<(usize, usize)> {
        let (k, v) = ((header & 0xffff_ffff) as usize, (header >> 32) as usize);
        (k > 0 && k <= self.max_key as usize && v <= self.max_value as usize).then_some((k, v))
    }

    /// The key of an entry read from its start (at least header and key).
    pub fn entry_key<'a>(&self, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let (k, _) = self.lens(word(bytes, 0))?;
        bytes.get(8..8 + k)
    }

    /// The value of an entry read whole.
    pub fn entry_value<'a>(&self, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let (k, v) = self.lens(word(bytes, 0))?;
        bytes.get(8 + k..8 + k + v)
    }
}

/// Data table entries (or Pilaf's extents) free for reuse, and the ones
/// waiting out the expiration period before reuse (on the node's clock, as
/// the machines see it).
#[derive(Debug)]
pub(crate) struct Allocator {
    free: Vec<u32>,
    quarantine: VecDeque<(u32, Nanos)>,
    expiration: Duration,
    /// Entries retired at least once (a take of one is a reuse).
    retired: Vec<bool>,
    /// Entries handed out again after their quarantine.
    reused: u64,
}

impl Allocator {
    /// Entries `0..count`, all free; freed entries wait `expiration`.
    pub(crate) fn new(count: u32, expiration: Duration) -> Allocator {
        Allocator {
            free: (0..count).rev().collect(),
            quarantine: VecDeque::new(),
            expiration,
            retired: vec![false; count as usize],
            reused: 0,
        }
    }

    /// A free entry at time `now`, if any (entries whose quarantine ended
    /// are freed first).
    pub(crate) fn take(&mut self, now: Nanos) -> Option<u32> {
        while let Some(&(i, at)) = self.quarantine.front() {
            if now.since(at) < self.expiration {
                break;
            }
            self.quarantine.pop_front();
            self.free.push(i);
        }
        let i = self.free.pop()?;
        if self.retired.get(i as usize).copied().unwrap_or(false) {
            self.reused += 1;
        }
        Some(i)
    }

    /// Entries handed out again after their quarantine, so far.
    pub(crate) fn reused(&self) -> u64 {
        self.reused
    }

    /// Unlinks entry `i` at time `now`: reusable after the expiration period.
    pub(crate) fn retire(&mut self, i: u32, now: Nanos) {
        if let Some(r) = self.retired.get_mut(i as usize) {
            *r = true;
        }
        self.quarantine.push_back((i, now));
    }

    /// Returns entry `i`, which was never published, for immediate reuse.
    pub(crate) fn release_unpublished(&mut self, i: u32) {
        self.free.push(i);
    }
}

/// A table's lock and allocator: what a node's workers share. The lock is
/// held across a request's rounds; the allocator's mutex only ever briefly
/// (under the lock, so it is never contended).
#[derive(Debug)]
pub(crate) struct Guarded {
    pub(crate) lock: Arc<TableLock>,
    alloc: Mutex<Allocator>,
}

impl Guarded {
    pub(crate) fn new(alloc: Allocator) -> Guarded {
        Guarded {
            lock: Arc::new(TableLock::new()),
            alloc: Mutex::new(alloc),
        }
    }

    pub(crate) fn alloc(&self) -> MutexGuard<'_, Allocator> {
        self.alloc.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One node's partially-coupled tables, as its server workers see them.
#[derive(Debug)]
pub struct CoupledTable {
    layout: CoupledLayout,
    node: NodeId,
    max_depth: u8,
    /// See [`Handler::claim_wait`].
    claim_wait: Duration,
    state: Guarded,
}

/// A key found in the table.
struct Found {
    slot: u32,
    ite: IndexEntry,
    dte: u32,
}

impl CoupledTable {
    /// The (zeroed, hence empty) tables of `node`.
    pub fn new(layout: CoupledLayout, node: NodeId, cfg: &Config) -> CoupledTable {
        CoupledTable {
            layout,
            node,
            max_depth: cfg.max_migrate_depth.max(1),
            claim_wait: nessie_exec::claim_wait(cfg.retry.op_timeout),
            state: Guarded::new(Allocator::new(layout.dtes, cfg.expiration + cfg.clock_skew)),
        }
    }

    /// The node's table lock.
    pub fn lock(&self) -> &Arc<TableLock> {
        &self.state.lock
    }

    /// Data table entries handed out again after their quarantine (written,
    /// unlinked, expired, reused), so far.
    pub fn reused(&self) -> u64 {
        self.state.alloc().reused()
    }

    async fn find(&self, io: &Io, key: &[u8]) -> Result<Option<Found>, Error> {
        let filter = self.layout.filter(key);
        for slot in self.layout.candidates(key) {
            let ite = IndexEntry(io.local_word(self.layout.index_offset(slot)).await?);
            let Some(dte) = ite.dte().filter(|_| ite.filter_matches(filter)) else {
                continue;
            };
            let head = io
                .local_read(
                    self.layout.entry_offset(dte.index),
                    self.layout.header_and_key() as u32,
                )
                .await?;
            if self.layout.entry_key(&head) == Some(key) {
                return Ok(Some(Found {
                    slot,
                    ite,
                    dte: dte.index,
                }));
            }
        }
        Ok(None)
    }

    async fn get(&self, io: &Io, key: &[u8]) -> Result<(Status, Vec<u8>), Error> {
        let Some(f) = self.find(io, key).await? else {
            return Ok((Status::Absent, Vec::new()));
        };
        let bytes = io
            .local_read(
                self.layout.entry_offset(f.dte),
                self.layout.entry_bytes as u32,
            )
            .await?;
        match self.layout.entry_value(&bytes) {
            Some(v) => Ok((Status::Found, v.to_vec())),
            None => Err(Error::corrupt(
                CorruptionKind::Memory,
                format!("data table entry {} on {} is malformed", f.dte, self.node),
            )),
        }
    }

    async fn put(&self, io: &Io, key: &[u8], value: &[u8]) -> Result<(Status, Vec<u8>), Error> {
        let found = self.find(io, key).await?;
        let Some(dte) = self.state.alloc().take(io.now()) else {
            return Ok((Status::DataTableFull, Vec::new()));
        };
        io.local_write(
            self.layout.entry_offset(dte),
            CoupledLayout::encode_entry(key, value),
        )
        .await?;
        // Incarnation 0: only the home node's server changes these tables,
        // by CPU under its lock, so no posted CAS can expect a word of an
        // earlier incarnation.
        let ite = IndexEntry::new(
            DteAddr {
                table: self.node.0,
                index: dte,
            },
            0,
            self.layout.filter(key),
        );
        if let Some(f) = found {
            io.local_write(
                self.layout.index_offset(f.slot),
                ite.0.to_le_bytes().to_vec(),
            )
            .await?;
            self.state.alloc().retire(f.dte, io.now());
            return Ok((Status::Found, Vec::new()));
        }
        let cands = self.layout.candidates(key);
        let entry = ite.0.to_le_bytes().to_vec();
        if cuckoo::insert(self, io, &cands, entry, self.max_depth).await? {
            Ok((Status::Absent, Vec::new()))
        } else {
            self.state.alloc().release_unpublished(dte);
            Ok((Status::TableFull, Vec::new()))
        }
    }

    async fn delete(&self, io: &Io, key: &[u8]) -> Result<(Status, Vec<u8>), Error> {
        let Some(f) = self.find(io, key).await? else {
            return Ok((Status::Absent, Vec::new()));
        };
        io.local_write(
            self.layout.index_offset(f.slot),
            f.ite.emptied().0.to_le_bytes().to_vec(),
        )
        .await?;
        self.state.alloc().retire(f.dte, io.now());
        Ok((Status::Found, Vec::new()))
    }
}

impl CuckooTable for CoupledTable {
    async fn occupant(&self, io: &Io, slot: u32) -> Result<Option<Vec<u8>>, Error> {
        let ite = IndexEntry(io.local_word(self.layout.index_offset(slot)).await?);
        let Some(dte) = ite.dte() else {
            return Ok(None);
        };
        let head = io
            .local_read(
                self.layout.entry_offset(dte.index),
                self.layout.header_and_key() as u32,
            )
            .await?;
        match self.layout.entry_key(&head) {
            Some(k) => Ok(Some(k.to_vec())),
            None => Err(Error::corrupt(
                CorruptionKind::Memory,
                format!(
                    "data table entry {} on {} is malformed",
                    dte.index, self.node
                ),
            )),
        }
    }

    fn candidates(&self, key: &[u8]) -> Vec<u32> {
        self.layout.candidates(key)
    }

    fn entry_range(&self, slot: u32) -> (u64, u32) {
        (self.layout.index_offset(slot), 8)
    }

    fn epoch_offset(&self) -> u64 {
        self.layout.epoch
    }
}

impl Handler for CoupledTable {
    type Ext = Plain;

    async fn handle(&self, io: &Io, req: Request) -> Result<(Status, Vec<u8>), Error> {
        let too_big = req.key.is_empty()
            || req.key.len() > self.layout.max_key as usize
            || req.value.len() > self.layout.max_value as usize;
        if too_big {
            return Ok((Status::BadRequest, Vec::new()));
        }
        let _held = io.lock(&self.state.lock).await;
        match req.op {
            RpcOp::Get => self.get(io, &req.key).await,
            RpcOp::Put => self.put(io, &req.key, &req.value).await,
            RpcOp::Delete => self.delete(io, &req.key).await,
        }
    }

    fn ext(&self, e: nessie_exec::Never) -> nessie_exec::Never {
        match e {}
    }

    fn claim_wait(&self) -> Duration {
        self.claim_wait
    }
}

impl crate::design::NodeTable for CoupledTable {
    fn reused(&self) -> u64 {
        CoupledTable::reused(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (a liveness bug the fault swarm found): a configuration
    /// with fewer index table entries per node than cuckoo candidates is
    /// valid for Nessie (its candidates span every node), but the coupled
    /// tables place all of a key's candidates on its home node, and the
    /// search for distinct candidates never ended: a NessieSD worker (or a
    /// NessieHY GET) hung on the first key. The candidates are now capped at
    /// the node's entries, as Pilaf's ways are.
    #[test]
    fn a_node_with_fewer_entries_than_candidates_still_hashes_every_key() {
        let cfg = Config {
            nodes: 3,
            index_slots_per_node: 1,
            candidates: 2,
            ..Config::default()
        };
        cfg.validate().expect("a valid Nessie configuration");
        let layout = CoupledLayout::new(&cfg, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(layout.candidates(b"some key"));
        });
        let candidates = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the candidates of a key are found");
        assert_eq!(candidates, vec![0]);
    }
}
