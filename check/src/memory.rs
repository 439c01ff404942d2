//! The model's fabric: every node's index and data regions as one flat vector
//! of 64-bit words, and the execution of work requests one unit at a time
//! (one word of a multi-word transfer, or a whole CAS or CPU access), with
//! the same semantics as `fabric-sim` (word-atomic, transfers not atomic).

use nessie_protocol::layout::{DataEntryHeader, IndexEntry};
use std::collections::BTreeMap;

use nessie_protocol::{
    window_carries, BoundWindow, Config, DteAddr, FabricError, IteAddr, NodeId, Op, OpOutput,
    Region, Topology, WindowId, WindowKey,
};

/// The order in which the words of one modelled transfer land.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WordOrder {
    /// Lowest address first.
    Ascending,
    /// Highest address first.
    Descending,
}

/// Fabric memory: node 0's index region, node 0's data region, node 1's ...;
/// and the memory windows every node's agent has bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Memory {
    words: Vec<u64>,
    nodes: u16,
    index_words: u32,
    data_words: u32,
    windows: BTreeMap<WindowId, BoundWindow>,
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
            windows: BTreeMap::new(),
        }
    }

    /// Binds `window` again over `len` bytes at `offset` of its node's data
    /// region, under its next key ([`Op::BindWindow`]).
    pub fn bind_window(
        &mut self,
        window: WindowId,
        offset: u64,
        len: u64,
    ) -> Result<WindowKey, FabricError> {
        let size = u64::from(self.data_words) * 8;
        if window.node.0 >= self.nodes || offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(FabricError::OutOfRange {
                node: window.node,
                region: Region::Data,
                offset,
                len,
                size,
            });
        }
        let w = self.windows.entry(window).or_insert(BoundWindow::UNBOUND);
        *w = w.rebound(offset, len);
        Ok(w.key)
    }

    /// Whether `window` lets a request carrying `key` change the word at
    /// `offset` of its node's data region now.
    pub fn window_admits(&self, window: WindowId, key: WindowKey, offset: u64) -> bool {
        self.windows
            .get(&window)
            .is_some_and(|w| w.admits(key, offset))
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
    let len = match op.unwindowed() {
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
            Op::Cas { .. }
                | Op::Write { .. }
                | Op::LocalWrite { .. }
                | Op::Windowed { .. }
                | Op::BindWindow { .. }
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
        let (op, window) = match self.wr.op.clone() {
            Op::Windowed { window, key, op } if window_carries(window, &op) => {
                (*op, Some((window, key)))
            }
            Op::Windowed { window, key, .. } => {
                return Some(Err(FabricError::WindowRefused { window, key }))
            }
            op => (op, None),
        };
        // A windowed request's word lands only if the window admits it
        // when it lands (a rebind between two words tears the WRITE).
        let admitted = |mem: &Memory, offset: u64| -> Result<(), FabricError> {
            match window {
                Some((w, key)) if !mem.window_admits(w, key, offset) => {
                    Err(FabricError::WindowRefused { window: w, key })
                }
                _ => Ok(()),
            }
        };
        match op {
            Op::Windowed { .. } => unreachable!("a window carries no window"),
            Op::BindWindow { index, offset, len } => Some(
                mem.bind_window(WindowId { node: own, index }, offset, len)
                    .map(|key| OpOutput::Bound { key }),
            ),
            Op::Cas { addr, expect, new } => Some((|| {
                admitted(mem, addr.offset)?;
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
                    if let Err(e) = admitted(mem, addr.offset + 8 * u64::from(i)).and_then(|()| {
                        mem.write_chunk(addr.node, addr.region, addr.offset, &data, i as usize)
                    }) {
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

#[cfg(test)]
mod window_tests {
    //! Memory windows in the model's fabric: a word of a windowed request
    //! lands only if the window admits it when it lands, so a rebind between
    //! two words of a WRITE tears it, and a request that lands after the
    //! rebind changes nothing.

    use super::*;
    use nessie_protocol::{OpId, RemoteAddr, WorkRequest};

    const N1: NodeId = NodeId(1);
    const WINDOW: WindowId = WindowId { node: N1, index: 3 };

    fn memory() -> Memory {
        Memory::with_topology(Topology {
            nodes: 2,
            index_slots_per_node: 8,
            data_bytes_per_node: 1024,
        })
    }

    fn windowed_write(key: WindowKey, words: usize, value: u8) -> InFlight {
        let op = Op::Windowed {
            window: WINDOW,
            key,
            op: Box::new(Op::Write {
                addr: RemoteAddr::data(N1, 256),
                data: vec![value; 8 * words],
            }),
        };
        InFlight::new(WorkRequest { id: OpId(1), op }, 0)
    }

    fn words(mem: &Memory) -> Vec<u64> {
        (0..4)
            .map(|i| mem.word(N1, Region::Data, 256 + 8 * i).unwrap())
            .collect()
    }

    #[test]
    fn a_rebind_between_two_words_tears_the_write_and_refuses_the_rest() {
        let mut mem = memory();
        let k1 = mem.bind_window(WINDOW, 256, 32).unwrap();
        let mut w = windowed_write(k1, 4, 0xAA);
        let a = u64::from_le_bytes([0xAA; 8]);
        assert_eq!(
            w.step(&mut mem, NodeId(0), true, WordOrder::Ascending),
            None
        );
        assert_eq!(
            w.step(&mut mem, NodeId(0), true, WordOrder::Ascending),
            None
        );
        let k2 = mem.bind_window(WINDOW, 256, 32).unwrap();
        assert_ne!(k1, k2);
        assert_eq!(
            w.step(&mut mem, NodeId(0), true, WordOrder::Ascending),
            Some(Err(FabricError::WindowRefused {
                window: WINDOW,
                key: k1
            }))
        );
        assert_eq!(words(&mem), vec![a, a, 0, 0], "the words before the rebind");
        let mut late = windowed_write(k1, 4, 0xBB);
        assert!(late
            .run_to_end(&mut mem, NodeId(0), WordOrder::Descending)
            .is_err());
        assert_eq!(words(&mem), vec![a, a, 0, 0], "nothing after it");
        let mut fresh = windowed_write(k2, 4, 0xCC);
        assert_eq!(
            fresh.run_to_end(&mut mem, NodeId(0), WordOrder::Ascending),
            Ok(OpOutput::Written)
        );
        assert_eq!(words(&mem), vec![u64::from_le_bytes([0xCC; 8]); 4]);
    }

    #[test]
    fn the_agents_bind_runs_on_its_own_node_and_stays_inside_the_region() {
        let mut mem = memory();
        let bind = |index, offset, len| {
            InFlight::new(
                WorkRequest {
                    id: OpId(2),
                    op: Op::BindWindow { index, offset, len },
                },
                0,
            )
        };
        let r = bind(3, 256, 32).run_to_end(&mut mem, N1, WordOrder::Ascending);
        assert!(matches!(r, Ok(OpOutput::Bound { key }) if key != WindowKey(0)));
        assert!(mem.window_admits(WINDOW, WindowKey(1), 256));
        assert!(
            !mem.window_admits(WINDOW, WindowKey(1), 288),
            "past its end"
        );
        assert!(matches!(
            bind(3, 1000, 32).run_to_end(&mut mem, N1, WordOrder::Ascending),
            Err(FabricError::OutOfRange { .. })
        ));
    }
}
