//! The model's fabric: every node's index and data regions as one flat vector
//! of 64-bit words, and the execution of work requests one unit at a time
//! (one word of a multi-word transfer, or a whole CAS or CPU access), with
//! the same semantics as `fabric-sim` (word-atomic, transfers not atomic).

use nessie_protocol::layout::{DataEntryHeader, IndexEntry};
use nessie_protocol::{
    Config, DteAddr, FabricError, IteAddr, NodeId, Op, OpOutput, Region, Topology,
};

/// The order in which the words of one modelled transfer land.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WordOrder {
    /// Lowest address first.
    Ascending,
    /// Highest address first.
    Descending,
}

/// Fabric memory: node 0's index region, node 0's data region, node 1's ...
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Memory {
    words: Vec<u64>,
    nodes: u16,
    index_words: u32,
    data_words: u32,
}

impl Memory {
    /// Zeroed memory shaped by `cfg`.
    pub fn new(cfg: &Config) -> Memory {
        Memory::with_topology(cfg.topology())
    }

    /// Zeroed memory of `topo`'s nodes and regions (the baselines and Cell
    /// lay out their own regions).
    pub fn with_topology(topo: Topology) -> Memory {
        let index_words = topo.index_slots_per_node;
        let data_words = topo.data_bytes_per_node.div_ceil(8) as u32;
        Memory {
            words: vec![0; usize::from(topo.nodes) * (index_words + data_words) as usize],
            nodes: topo.nodes,
            index_words,
            data_words,
        }
    }

    fn base(&self, node: NodeId, region: Region) -> usize {
        let per = (self.index_words + self.data_words) as usize;
        usize::from(node.0) * per
            + match region {
                Region::Index => 0,
                Region::Data => self.index_words as usize,
            }
    }

    fn slot(&self, node: NodeId, region: Region, byte: u64) -> Result<usize, FabricError> {
        let limit = match region {
            Region::Index => self.index_words,
            Region::Data => self.data_words,
        };
        let w = byte / 8;
        if w >= u64::from(limit) || node.0 >= self.nodes {
            return Err(FabricError::OutOfRange {
                node,
                region,
                offset: byte,
                len: 8,
                size: u64::from(limit) * 8,
            });
        }
        Ok(self.base(node, region) + w as usize)
    }

    /// The word at `byte` of a region.
    pub fn word(&self, node: NodeId, region: Region, byte: u64) -> Result<u64, FabricError> {
        Ok(self.words[self.slot(node, region, byte)?])
    }

    fn set(&mut self, node: NodeId, region: Region, byte: u64, w: u64) -> Result<(), FabricError> {
        let i = self.slot(node, region, byte)?;
        self.words[i] = w;
        Ok(())
    }

    /// `len` bytes at `offset` (atomically: only for inspection and preloads).
    pub fn read(
        &self,
        node: NodeId,
        region: Region,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, FabricError> {
        let mut out = Vec::with_capacity(len as usize);
        let mut b = offset;
        while b < offset + len {
            out.extend_from_slice(&self.word(node, region, b)?.to_le_bytes());
            b += 8;
        }
        out.truncate(len as usize);
        Ok(out)
    }

    /// Writes the 8-byte chunk `i` of `data` at `offset`.
    fn write_chunk(
        &mut self,
        node: NodeId,
        region: Region,
        offset: u64,
        data: &[u8],
        i: usize,
    ) -> Result<(), FabricError> {
        let end = (8 * (i + 1)).min(data.len());
        let mut w = [0u8; 8];
        w[..end - 8 * i].copy_from_slice(&data[8 * i..end]);
        self.set(node, region, offset + 8 * i as u64, u64::from_le_bytes(w))
    }

    /// The index table entry at `ite`.
    pub fn ite(&self, ite: IteAddr) -> IndexEntry {
        IndexEntry(
            self.word(ite.node, Region::Index, u64::from(ite.slot) * 8)
                .unwrap_or(0),
        )
    }

    /// Every index table entry word of every node.
    pub fn index_words(&self) -> impl Iterator<Item = IndexEntry> + '_ {
        let per = (self.index_words + self.data_words) as usize;
        self.words
            .chunks(per)
            .flat_map(move |node| node[..self.index_words as usize].iter())
            .map(|&w| IndexEntry(w))
    }

    /// A data table entry as stored: header, key, value.
    pub fn entry(&self, cfg: &Config, d: DteAddr) -> Option<(DataEntryHeader, Vec<u8>, Vec<u8>)> {
        let tables = cfg.data_tables();
        let l = tables.layout_of(d);
        let raw = self
            .read(
                d.node(),
                Region::Data,
                tables.entry_offset(d),
                l.entry_bytes(),
            )
            .ok()?;
        let h = DataEntryHeader::decode(&raw)?;
        Some((
            h,
            l.key(&h, &raw)?.to_vec(),
            l.value(&h, &raw).unwrap_or_default().to_vec(),
        ))
    }

    /// Whether an index table entry names `d`, or names an uncommitted entry
    /// whose previous version is `d` (readers may still fall back to it).
    pub fn entry_in_use(&self, cfg: &Config, d: DteAddr) -> bool {
        self.index_words()
            .filter_map(IndexEntry::dte)
            .any(|linked| {
                linked == d
                    || self.entry(cfg, linked).is_some_and(|(h, _, _)| {
                        h.state.state.is_uncommitted() && IndexEntry(h.prev).dte() == Some(d)
                    })
            })
    }
}

/// How many 8-byte words a READ or WRITE moves (1 for a CAS or anything
/// else): the units in which a transfer lands when it tears.
pub fn transfer_words(op: &Op) -> u32 {
    let len = match op {
        Op::Read { len, .. } => u64::from(*len),
        Op::Write { data, .. } => data.len() as u64,
        _ => 8,
    };
    u32::try_from(len.div_ceil(8).max(1)).unwrap_or(u32::MAX)
}

/// A posted work request and how much of it has landed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    /// The work request.
    pub wr: nessie_protocol::WorkRequest,
    /// Words done so far.
    pub words: u32,
    /// Bytes read so far (in address order).
    pub buf: Vec<u8>,
    /// The global time it was posted (A2: a mutation lands by this plus the margin).
    pub posted_at: u64,
}

impl InFlight {
    /// A freshly posted request.
    pub fn new(wr: nessie_protocol::WorkRequest, posted_at: u64) -> InFlight {
        InFlight {
            wr,
            words: 0,
            buf: Vec::new(),
            posted_at,
        }
    }

    /// Whether it changes memory (timing assumption A2 bounds when).
    pub fn is_mutation(&self) -> bool {
        matches!(
            self.wr.op,
            Op::Cas { .. } | Op::Write { .. } | Op::LocalWrite { .. }
        )
    }

    /// Whether it goes through the NIC (and can fail or lose its completion).
    pub fn is_nic(&self) -> bool {
        self.wr.op.remote_addr().is_some()
    }

    fn words_total(&self) -> u32 {
        transfer_words(&self.wr.op)
    }

    /// Executes one unit (all of it unless `torn`); returns the completion's
    /// result once the request is done.
    pub fn step(
        &mut self,
        mem: &mut Memory,
        own: NodeId,
        torn: bool,
        order: WordOrder,
    ) -> Option<Result<OpOutput, FabricError>> {
        match self.wr.op.clone() {
            Op::Cas { addr, expect, new } => Some((|| {
                let prev = mem.word(addr.node, addr.region, addr.offset)?;
                if prev == expect {
                    mem.set(addr.node, addr.region, addr.offset, new)?;
                }
                Ok(OpOutput::Cas { previous: prev })
            })()),
            Op::LocalRead { offset, len } => Some(
                mem.read(own, Region::Data, offset, u64::from(len))
                    .map(OpOutput::Read),
            ),
            Op::LocalWrite { offset, data } => Some((|| {
                for i in 0..data.len().div_ceil(8) {
                    mem.write_chunk(own, Region::Data, offset, &data, i)?;
                }
                Ok(OpOutput::Written)
            })()),
            Op::Read { addr, len } => {
                let total = self.words_total();
                if self.buf.is_empty() {
                    self.buf = vec![0; 8 * total as usize];
                }
                let n = if torn { 1 } else { total - self.words };
                for _ in 0..n {
                    let i = self.word_index(order, total);
                    match mem.word(addr.node, addr.region, addr.offset + 8 * u64::from(i)) {
                        Ok(w) => self.buf[8 * i as usize..8 * i as usize + 8]
                            .copy_from_slice(&w.to_le_bytes()),
                        Err(e) => return Some(Err(e)),
                    }
                    self.words += 1;
                }
                (self.words >= total).then(|| {
                    let mut b = std::mem::take(&mut self.buf);
                    b.truncate(len as usize);
                    Ok(OpOutput::Read(b))
                })
            }
            Op::Write { addr, data } => {
                let total = self.words_total();
                let n = if torn { 1 } else { total - self.words };
                for _ in 0..n {
                    let i = self.word_index(order, total);
                    if let Err(e) =
                        mem.write_chunk(addr.node, addr.region, addr.offset, &data, i as usize)
                    {
                        return Some(Err(e));
                    }
                    self.words += 1;
                }
                (self.words >= total).then_some(Ok(OpOutput::Written))
            }
        }
    }

    /// Executes whatever has not landed yet, at once.
    pub fn run_to_end(
        &mut self,
        mem: &mut Memory,
        own: NodeId,
        order: WordOrder,
    ) -> Result<OpOutput, FabricError> {
        loop {
            if let Some(r) = self.step(mem, own, false, order) {
                return r;
            }
        }
    }

    fn word_index(&self, order: WordOrder, total: u32) -> u32 {
        match order {
            WordOrder::Ascending => self.words,
            WordOrder::Descending => total - 1 - self.words,
        }
    }
}
