//! Failures (RCuckoo §4): noticing a stranded lock (a holder's word that
//! stands past the failure timeout), taking it over by CAS, and repairing
//! the rows under it that a writer that died left torn.

use std::collections::HashMap;

use nessie_protocol::{ChainLink, Nanos, NodeId, Op, RemoteAddr};

use super::super::layout::{extent_of, Entry, EntryRead, Row};
use super::{Held, RcuckooCore, Take};
use crate::race::layout::{split_block_word, BlockRead, RaceLayout, LIVE};
use nessie_exec::{cas_previous, read_bytes, Io, OpClass};

impl RcuckooCore {
    /// A GET met `row` torn. A row stays torn only if its writer died
    /// mid-WRITE holding its lock; a live writer's WRITE lands within a
    /// margin. Once the row has been torn for a margin, this client looks
    /// at its lock: taking it (free, or stranded past
    /// [`RcuckooCore::repair_after`]) repairs the rows under it, and a
    /// holder's word is noted, which starts the failure timeout.
    pub(super) async fn torn_row(&mut self, io: &Io, home: NodeId, row: u32, deadline: Nanos) {
        let now = io.now();
        let since = *self.torn_since.entry((home, row)).or_insert(now);
        if now.since(since) < self.cfg.deadline_margin {
            self.wake_by(since.plus(self.cfg.deadline_margin));
            return;
        }
        let lock = self.layout.lock_of(row);
        let rows: Vec<u32> = self.layout.rows_of(lock).collect();
        // Taking the lock notes a holder's word, and takes it over once it
        // has been stranded long enough.
        if let Take::Held(held) = self.take(io, home, &[lock], &rows, deadline).await {
            self.release(io, home, &held.locks).await;
        }
    }

    /// The next attempt is to come by `due` at the latest.
    fn wake_by(&mut self, due: Nanos) {
        self.wake_at = Some(self.wake_at.map_or(due, |w| w.min(due)));
    }

    /// Lock `lock` was found held with `word`: remembered, and taken over
    /// (with its rows repaired) once the same word has stood for
    /// [`RcuckooCore::repair_after`] (the holder died, or is too slow ever
    /// to write again).
    pub(super) async fn note_holder(
        &mut self,
        io: &Io,
        home: NodeId,
        lock: u32,
        word: u64,
        deadline: Nanos,
    ) {
        let now = io.now();
        let seen = self.stuck.entry((home, lock)).or_insert((word, now));
        if seen.0 != word {
            *seen = (word, now);
        }
        let first = seen.1;
        if now.since(first) < self.repair_after() || now > deadline {
            self.wake_by(first.plus(self.repair_after()));
            return;
        }
        // Take it over: a CAS from the stranded word, so one waiter wins.
        let ours = self.next_word(io.now());
        let addr = self.layout.lock_addr(home, lock);
        let rows: Vec<u32> = self.layout.rows_of(lock).collect();
        let reads = self.row_reads(home, &rows);
        let mut chain = vec![(
            Op::Cas {
                addr,
                expect: word,
                new: ours,
            },
            ChainLink::Ordered,
        )];
        chain.extend(
            reads
                .iter()
                .map(|(_, _, op)| (op.clone(), ChainLink::Fenced)),
        );
        let r = io.chain_by(chain, OpClass::Index, deadline).await;
        self.stuck.remove(&(home, lock));
        match cas_previous(&r[0]) {
            Ok(prev) if prev == word => {}
            // Another waiter took it over, or it moved on.
            Ok(_) => return,
            Err(_) => {
                self.release(io, home, &[(lock, ours)]).await;
                return;
            }
        }
        self.counters.repairs += 1;
        io.count(|s| s.recoveries += 1);
        let mut held = Held {
            locks: vec![(lock, ours)],
            rows: HashMap::new(),
        };
        self.repair(io, home, &mut held, &reads, &r[1..], deadline)
            .await;
    }

    /// Repairs the rows under `held`, read by `reads` (§4.3). A row whose
    /// CRC fails was torn by a writer that died mid-WRITE, in the one entry
    /// that WRITE changed ([`EntryRead`]): an entry whose header or key was
    /// being written (an insert, or a move into it) held nothing committed
    /// that is not elsewhere (a moved entry is still in its other row) and
    /// is emptied; an entry torn between its type and value words, or whose
    /// extent's header is not its type word, is restored to the entry the
    /// WRITE replaced, from what its value word still names (an inline
    /// value, or the old extent, which stays live until its replacement
    /// committed). The rows are written back whole, then the locks
    /// released. Duplicates an interrupted move left are removed by the
    /// next update or DELETE of their key.
    pub(super) async fn repair(
        &mut self,
        io: &Io,
        home: NodeId,
        held: &mut Held,
        reads: &[(u32, u32, Op)],
        results: &[Result<nessie_protocol::OpOutput, nessie_protocol::FabricError>],
        deadline: Nanos,
    ) {
        let rb = self.layout.row_bytes() as usize;
        let mut torn: Vec<(u32, Vec<EntryRead>, u8)> = Vec::new();
        for ((first, last, _), r) in reads.iter().zip(results) {
            let Ok(bytes) = read_bytes(r) else {
                self.release(io, home, &held.locks).await;
                return;
            };
            for (k, row) in (*first..=*last).enumerate() {
                let b = bytes.get(k * rb..(k + 1) * rb).unwrap_or_default();
                if self.layout.decode_row(b).is_none() {
                    let (entries, version) = self.layout.decode_row_lenient(b);
                    torn.push((row, entries, version));
                }
            }
        }
        if torn.is_empty() {
            self.release(io, home, &held.locks).await;
            return;
        }
        // The extents the torn rows' entries name, read in one round.
        let mut named: Vec<(NodeId, u64)> = Vec::new();
        for (_, entries, _) in &torn {
            for e in entries {
                match e {
                    EntryRead::Whole(Entry::Extent { node, offset, .. }) => {
                        named.push((*node, *offset));
                    }
                    EntryRead::Split { value, .. } if value >> 63 == 0 => {
                        named.push(extent_of(*value));
                    }
                    _ => {}
                }
            }
        }
        named.sort_unstable();
        named.dedup();
        let len = self.layout.extents.block_bytes as u32;
        let ops = named
            .iter()
            .map(|&(node, offset)| Op::Read {
                addr: RemoteAddr::data(node, offset),
                len,
            })
            .collect();
        let r = io.round_by(ops, OpClass::Data, deadline).await;
        let mut live: HashMap<(NodeId, u64), (u64, Vec<u8>)> = HashMap::new();
        for (at, r) in named.iter().zip(&r) {
            let Ok(bytes) = read_bytes(r) else {
                self.release(io, home, &held.locks).await;
                return;
            };
            if let BlockRead::Whole { header, key, .. } = RaceLayout::decode_block(bytes) {
                if split_block_word(header).1 == LIVE {
                    live.insert(*at, (header, key.to_vec()));
                }
            }
        }
        let restore = |key: &[u8], at: (NodeId, u64)| match live.get(&at) {
            Some((header, k)) if k == key => Entry::Extent {
                key: key.to_vec(),
                node: at.0,
                offset: at.1,
                header: *header,
            },
            _ => Entry::Empty,
        };
        let empties = self.repair_empties_torn;
        let mut fixed = Vec::new();
        for (row, entries, version) in torn {
            let entries = entries
                .into_iter()
                .map(|e| match e {
                    // An extent entry whose type word is not its extent's
                    // header: torn between its words (the paper's repair,
                    // `repair-empties-torn`, empties it).
                    EntryRead::Whole(Entry::Extent {
                        node,
                        offset,
                        header,
                        ..
                    }) if empties && live.get(&(node, offset)).map(|l| l.0) != Some(header) => {
                        Entry::Empty
                    }
                    EntryRead::Whole(Entry::Extent {
                        key, node, offset, ..
                    }) => restore(&key, (node, offset)),
                    EntryRead::Whole(e) => e,
                    EntryRead::Broken => Entry::Empty,
                    EntryRead::Split { .. } if empties => Entry::Empty,
                    EntryRead::Split { key, value, .. } if value >> 63 == 1 => {
                        let len = ((value >> 56) & 0x7) as usize;
                        Entry::Inline {
                            key,
                            value: value.to_le_bytes()[..len].to_vec(),
                        }
                    }
                    EntryRead::Split { key, value, .. } => restore(&key, extent_of(value)),
                })
                .collect();
            self.counters.repaired_rows += 1;
            fixed.push((row, Row { entries, version }));
        }
        let _ = self.write_rows(io, home, held, fixed, deadline).await;
    }
}
