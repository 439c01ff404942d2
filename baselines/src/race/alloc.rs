//! A RACE client's KV blocks: its share of its node's blocks, handed out
//! for out-of-place writes and taken back after a quarantine.
//!
//! RACE (§3, "out-of-place KV blocks") leaves reclamation to the memory
//! allocator and says nothing of when a block unlinked by one client may be
//! reused under another's READ. Here, as for Pilaf's extents and NessieHY's
//! entries, a block is reused only after the expiration period T plus the
//! clock skew has passed since it was freed, and every RACE attempt acts on
//! nothing it read after T − margin from its start: a reader that read a
//! slot before the unlink has finished with the block before it is reused.
//!
//! Freeing: the client whose CAS unlinked a block marks it freed with a CAS
//! on its header word (`LIVE(seq) -> FREED(seq)`, so a late or duplicated
//! mark cannot free the block's next incarnation). Its owner learns of the
//! mark when its sweep reads the header, and counts T plus the skew from
//! that first sighting on its own clock; a block it freed itself it counts
//! from its own mark. A block whose linking CAS failed was never published
//! and is free at once. A sweep trusts only headers it read: a restarted
//! client (whose allocator is new) reuses only never-written and freed
//! blocks, never a live one.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use nessie_protocol::{Config, Error, Nanos, NodeId, Op, RemoteAddr};

use super::layout::{
    block_word, split_block_word, BlockArea, RaceLayout, FREED, LIVE, NEVER_WRITTEN,
};
use nessie_exec::word;
use nessie_exec::{Io, OpClass};

/// Headers read per sweep step.
const SWEEP_BATCH: u32 = 256;
/// Headers each allocation sweeps ahead.
const AHEAD: u32 = 32;

/// How long a freed block waits before reuse: T plus the clock skew.
pub fn quarantine(cfg: &Config) -> Duration {
    cfg.expiration + cfg.clock_skew
}

/// The READ of `len` bytes of a block at `addr` by a client on `own`: a CPU
/// read of its own node's memory, a NIC READ of another's.
pub fn block_read(own: NodeId, addr: RemoteAddr, len: u32) -> Op {
    if addr.node == own {
        Op::LocalRead {
            offset: addr.offset,
            len,
        }
    } else {
        Op::Read { addr, len }
    }
}

/// A block handed out: where it is and the header word it is written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Index within the share.
    pub index: u32,
    /// Offset in the node's data region.
    pub offset: u64,
    /// Its sequence number in this use.
    pub seq: u32,
}

impl Block {
    /// The header word the block is written with.
    pub fn live_word(&self) -> u64 {
        block_word(self.seq, LIVE)
    }
}

/// One client's share of its node's KV blocks.
#[derive(Debug)]
pub struct BlockAlloc {
    area: BlockArea,
    node: NodeId,
    index: u16,
    /// Blocks free now, with the sequence number of their next use.
    ready: VecDeque<(u32, u32)>,
    /// Blocks this client freed itself: reusable at the instant given.
    quarantine: VecDeque<(u32, u32, Nanos)>,
    /// Which blocks are in `quarantine`.
    held: Vec<bool>,
    /// Blocks another client marked freed: when the sweep first saw it.
    sighted: HashMap<u32, Nanos>,
    /// Blocks handed out or found live: not free until a sweep says so.
    out: Vec<bool>,
    cursor: u32,
    hold: Duration,
}

impl BlockAlloc {
    /// The share of client `index` on `node` in `area`; freed blocks wait
    /// `hold` (T plus the clock skew).
    pub fn new(area: BlockArea, node: NodeId, index: u16, hold: Duration) -> BlockAlloc {
        BlockAlloc {
            area,
            node,
            index,
            ready: VecDeque::new(),
            quarantine: VecDeque::new(),
            held: vec![false; area.blocks_per_client as usize],
            sighted: HashMap::new(),
            out: vec![true; area.blocks_per_client as usize],
            cursor: 0,
            hold,
        }
    }

    fn block(&mut self, index: u32, seq: u32) -> Block {
        self.out[index as usize] = true;
        Block {
            index,
            offset: self.area.block_offset(self.index, index),
            seq,
        }
    }

    /// A block to write, sweeping the share's headers (CPU reads) when none
    /// is known free; [`Error::DataTableFull`] when a whole sweep finds none.
    pub async fn take(&mut self, io: &Io) -> Result<Block, Error> {
        let now = io.now();
        if let Some(&(i, seq, at)) = self.quarantine.front() {
            if at <= now {
                self.quarantine.pop_front();
                self.held[i as usize] = false;
                return Ok(self.block(i, seq));
            }
        }
        let n = self.area.blocks_per_client;
        // Sweep ahead, a few headers per allocation, while blocks are still
        // free: the sighting of a remote free mark starts its hold, so a
        // share swept only when dry would wait out a whole hold with
        // nothing to write.
        self.sweep_batch(io, AHEAD).await;
        if let Some((i, seq)) = self.ready.pop_front() {
            return Ok(self.block(i, seq));
        }
        let mut swept = 0;
        while swept < n {
            swept += self.sweep_batch(io, SWEEP_BATCH).await;
            if let Some((i, seq)) = self.ready.pop_front() {
                return Ok(self.block(i, seq));
            }
        }
        Err(Error::DataTableFull {
            node: self.node,
            class: 0,
        })
    }

    /// Reads the share's next `batch` headers (CPU reads, one round) and
    /// learns from them; how many it read. A free mark is sighted when the
    /// round's completions are in, not when the allocation began: a mark
    /// that lands between an earlier instant and the READ must not have its
    /// hold counted from before it landed (the swarm found that at seed
    /// 4,988 of RACE's `without_inserts` family: a sweep's later batch,
    /// posted after a pause, dated its sightings at the allocation's start,
    /// and a block was reused under a reader's READ).
    async fn sweep_batch(&mut self, io: &Io, batch: u32) -> u32 {
        let n = self.area.blocks_per_client;
        let batch = batch.min(n);
        let start = self.cursor;
        let ops = (0..batch)
            .map(|k| Op::LocalRead {
                offset: self.area.block_offset(self.index, (start + k) % n),
                len: 8,
            })
            .collect();
        let results = io.round(ops, OpClass::Data).await;
        let now = io.now();
        for (k, r) in results.iter().enumerate() {
            let i = (start + k as u32) % n;
            if let Ok(bytes) = nessie_exec::read_bytes(r) {
                self.classify(i, word(bytes, 0), now);
            }
        }
        self.cursor = (start + batch) % n;
        batch
    }

    /// What a sweep learns from block `i`'s header word `w` at `now`.
    fn classify(&mut self, i: u32, w: u64, now: Nanos) {
        let (seq, state) = split_block_word(w);
        if !self.out[i as usize] || self.held[i as usize] {
            return;
        }
        match state {
            NEVER_WRITTEN if w == 0 => {
                self.out[i as usize] = false;
                self.ready.push_back((i, 0));
            }
            FREED => {
                let first = *self.sighted.entry(i).or_insert(now);
                if now.since(first) >= self.hold {
                    self.sighted.remove(&i);
                    self.out[i as usize] = false;
                    self.ready.push_back((i, seq.wrapping_add(1)));
                }
            }
            _ => {
                self.sighted.remove(&i);
            }
        }
    }

    /// `b` was never published (its linking CAS failed): free at once.
    pub fn unpublished(&mut self, b: Block) {
        self.out[b.index as usize] = false;
        self.ready.push_back((b.index, b.seq));
    }

    /// This client freed its own block `offset` (seq `seq`) at `now`: free
    /// after the hold. `false` if the offset is not one of the share's.
    pub fn freed_own(&mut self, offset: u64, seq: u32, now: Nanos) -> bool {
        let base = self.area.block_offset(self.index, 0);
        let end = self
            .area
            .block_offset(self.index, self.area.blocks_per_client);
        if offset < base || offset >= end || !(offset - base).is_multiple_of(self.area.block_bytes)
        {
            return false;
        }
        let i = ((offset - base) / self.area.block_bytes) as u32;
        if !self.held[i as usize] {
            self.held[i as usize] = true;
            self.quarantine
                .push_back((i, seq.wrapping_add(1), now.plus(self.hold)));
        }
        true
    }

    /// Marks the block at `offset` on `node` freed (its unlinker's duty): a
    /// CAS on its header word from `header`, the live word it was linked
    /// with, to the same sequence number freed, so a late or duplicated
    /// mark cannot free its next use. The mark is harmless whenever it
    /// lands, so it is given `within`. `false` if its outcome is unknown
    /// (the block stays out of circulation: leaked).
    pub async fn mark_freed(
        &mut self,
        io: &Io,
        (node, offset): (NodeId, u64),
        header: u64,
        within: Duration,
    ) -> bool {
        let (seq, _) = split_block_word(header);
        let addr = nessie_protocol::RemoteAddr::data(node, offset);
        let r = io
            .round_within(
                vec![Op::Cas {
                    addr,
                    expect: header,
                    new: block_word(seq, FREED),
                }],
                OpClass::Data,
                within,
            )
            .await;
        match nessie_exec::cas_previous(&r[0]) {
            Ok(prev) if prev == header => {
                if node == self.node {
                    self.freed_own(offset, seq, io.now());
                }
                true
            }
            Ok(_) => true,
            Err(_) => false,
        }
    }

    /// Sets the hold before a freed block is reused (test-only: zero under
    /// the `reuse-without-hold` switch).
    pub fn set_hold(&mut self, hold: Duration) {
        self.hold = hold;
    }

    /// Test-only fault switch: freed blocks are reused at once (`on`) or
    /// after `cfg`'s [`quarantine`].
    pub fn reuse_without_hold(&mut self, on: bool, cfg: &Config) {
        self.set_hold(if on { Duration::ZERO } else { quarantine(cfg) });
    }

    /// A block written out of place with `key` and `value` under its live
    /// header word (a CPU write into this client's share), before anything
    /// links it.
    ///
    /// # Errors
    ///
    /// [`Error::DataTableFull`] when the share has no free block, or the
    /// write's error.
    pub async fn write_block(&mut self, io: &Io, key: &[u8], value: &[u8]) -> Result<Block, Error> {
        let b = self.take(io).await?;
        let data = RaceLayout::encode_block(b.live_word(), key, value);
        let r = io
            .round(
                vec![Op::LocalWrite {
                    offset: b.offset,
                    data,
                }],
                OpClass::Data,
            )
            .await;
        nessie_exec::written(&r[0])?;
        Ok(b)
    }
}
