//! Locks and the writes made under them: taking a lock set in one chain
//! with the rows' READs fenced behind the CASes (all or nothing), releasing,
//! and writing rows in one ordered chain with the releases behind them,
//! settling a chain that reported an error from the lock words and rows read
//! back (RCuckoo §3.2.2, §3.4).

use std::collections::HashMap;
use std::time::Duration;

use nessie_protocol::{ChainLink, Error, Nanos, NodeId, Op, UnknownOutcome, UnknownStep};

use super::super::layout::Row;
use super::{Held, RcuckooCore, Take};
use nessie_exec::{cas_previous, read_bytes, written, Io, OpClass};

impl RcuckooCore {
    /// Takes `locks` (ascending) on `home` in one chain, with READs of
    /// `rows` fenced behind the CASes; releases what it got if it did not
    /// get them all. A lock whose holder's word has not changed for
    /// [`RcuckooCore::repair_after`] is taken over from it and its rows
    /// repaired (§4). A torn row read under the locks (its writer died
    /// mid-WRITE) is repaired in place.
    pub(super) async fn take(
        &mut self,
        io: &Io,
        home: NodeId,
        locks: &[u32],
        rows: &[u32],
        deadline: Nanos,
    ) -> Take {
        if io.now() > deadline {
            // Nothing is posted past the attempt's deadline but releases.
            return Take::Retry;
        }
        let now = io.now();
        let words: Vec<u64> = locks.iter().map(|_| self.next_word(now)).collect();
        let reads = self.row_reads(home, rows);
        let mut chain: Vec<(Op, ChainLink)> = locks
            .iter()
            .zip(&words)
            .map(|(&l, &w)| {
                let op = Op::Cas {
                    addr: self.layout.lock_addr(home, l),
                    expect: 0,
                    new: w,
                };
                (op, ChainLink::Ordered)
            })
            .collect();
        chain.extend(
            reads
                .iter()
                .map(|(_, _, op)| (op.clone(), ChainLink::Fenced)),
        );
        let r = io.chain_by(chain, OpClass::Index, deadline).await;
        // Each lock CAS: taken, held by another, or unknown (an error: it
        // may have taken the lock, which the release then gives back).
        let mut got = Vec::new();
        let mut held_by = Vec::new();
        let mut unknown = false;
        for ((&l, &w), r) in locks.iter().zip(&words).zip(&r) {
            match cas_previous(r) {
                Ok(0) => got.push((l, w)),
                Ok(other) => held_by.push((l, other)),
                Err(_) => {
                    unknown = true;
                    got.push((l, w));
                }
            }
        }
        if unknown || !held_by.is_empty() {
            self.counters.lock_conflicts += u64::from(!held_by.is_empty());
            self.release(io, home, &got).await;
            for (l, word) in held_by {
                self.note_holder(io, home, l, word, deadline).await;
            }
            return Take::Retry;
        }
        for &(l, _) in &got {
            self.stuck.remove(&(home, l));
        }
        let mut held = Held {
            locks: got,
            rows: HashMap::new(),
        };
        match self.decode_rows(home, &reads, &r[locks.len()..]) {
            Ok(Ok(rows)) if io.now() <= deadline => held.rows = rows,
            Ok(Err(_)) if io.now() <= deadline => {
                // Torn under our locks: its writer died mid-WRITE.
                self.repair(io, home, &mut held, &reads, &r[locks.len()..], deadline)
                    .await;
                return Take::Retry;
            }
            _ => {
                self.release(io, home, &held.locks).await;
                return Take::Retry;
            }
        }
        Take::Held(held)
    }

    /// Releases `locks` on `home` (a CAS from this client's word in each,
    /// so a lock it does not hold is left alone).
    pub(super) async fn release(&mut self, io: &Io, home: NodeId, locks: &[(u32, u64)]) {
        if locks.is_empty() {
            return;
        }
        let ops = self.release_ops(home, locks);
        let r = io
            .round_within(ops, OpClass::Index, self.cfg.deadline_margin)
            .await;
        self.counters.locks_leaked += r.iter().filter(|r| cas_previous(r).is_err()).count() as u64;
    }

    pub(super) fn release_ops(&self, home: NodeId, locks: &[(u32, u64)]) -> Vec<Op> {
        locks
            .iter()
            .map(|&(l, w)| Op::Cas {
                addr: self.layout.lock_addr(home, l),
                expect: w,
                new: 0,
            })
            .collect()
    }

    /// WRITEs `rows` (each with its version bumped) in order, then releases
    /// the held locks behind them, in one ordered chain, posted only before
    /// `deadline` (after it the locks may be taken over). If a completion
    /// reports an error, the lock words tell what happened once every
    /// request has landed or never will: a release that took effect ran
    /// after every WRITE had (the chain is ordered), so the rows are
    /// written; locks all still ours mean a WRITE did not run (or ran part
    /// placed), and the rows are read back to post again only the images
    /// that did not land (a row's earlier image posted again after its
    /// later one would undo it under the readers). `Err` if the rows' fate
    /// cannot be learnt.
    pub(super) async fn write_rows(
        &mut self,
        io: &Io,
        home: NodeId,
        held: &Held,
        rows: Vec<(u32, Row)>,
        deadline: Nanos,
    ) -> Result<(), Error> {
        let images: Vec<(u32, Row, Vec<u8>)> = rows
            .into_iter()
            .map(|(r, mut row)| {
                row.version = row.version.wrapping_add(1);
                let bytes = self.layout.encode_row(&row);
                (r, row, bytes)
            })
            .collect();
        let mut pending: Vec<usize> = (0..images.len()).collect();
        let mut last = None;
        for _ in 0..3 {
            if io.now() > deadline && !self.unfenced_writes {
                // Past the deadline a waiter may have taken the locks over:
                // nothing more is written. With nothing written yet the
                // locks are given back (a release CAS leaves a lock taken
                // over alone); after a failed write they are left to a
                // waiter's repair.
                self.counters.writes_fenced += 1;
                return match last {
                    None => {
                        self.release(io, home, &held.locks).await;
                        Err(Error::Timeout)
                    }
                    Some(e) => {
                        self.counters.locks_leaked += held.locks.len() as u64;
                        Err(UnknownOutcome::new(UnknownStep::Commit, e).into())
                    }
                };
            }
            let n = pending.len();
            let mut chain: Vec<(Op, ChainLink)> = pending
                .iter()
                .map(|&i| {
                    let (r, _, data) = &images[i];
                    let op = Op::Write {
                        addr: self.layout.row_addr(home, *r),
                        data: data.clone(),
                    };
                    (op, ChainLink::Ordered)
                })
                .collect();
            chain.extend(
                self.release_ops(home, &held.locks)
                    .into_iter()
                    .map(|op| (op, ChainLink::Ordered)),
            );
            let posted = io.now();
            let within = posted.plus(self.cfg.deadline_margin);
            let r = io.chain_by(chain, OpClass::Index, within).await;
            let failed = r[..n]
                .iter()
                .map(written)
                .chain(r[n..].iter().map(|r| cas_previous(r).map(|_| ())))
                .find_map(Result::err);
            let Some(e) = failed else {
                return Ok(());
            };
            last = Some(e);
            // Which locks are still ours, once every request of the chain
            // has landed or never will (A2: within the margin of posting;
            // a WRITE whose error came first lands later, and the releases
            // ordered behind it run after it)? And, if all are, which rows
            // hold which image?
            let settled = posted.plus(self.cfg.deadline_margin);
            if io.now() < settled {
                io.backoff(Duration::from_nanos(settled.0 - io.now().0))
                    .await;
            }
            // A lock word that is no longer ours says our release ran only
            // while no waiter can have taken the lock over: a read posted by
            // the deadline plus a margin lands (A2) before any waiter's
            // failure timeout has run out (`repair_after`).
            if io.now() > deadline.plus(self.cfg.deadline_margin) {
                break;
            }
            let mut written_rows: Vec<u32> = pending.iter().map(|&i| images[i].0).collect();
            written_rows.sort_unstable();
            written_rows.dedup();
            let reads = self.row_reads(home, &written_rows);
            let ops = held
                .locks
                .iter()
                .map(|&(l, _)| Op::Read {
                    addr: self.layout.lock_addr(home, l),
                    len: 8,
                })
                .chain(reads.iter().map(|(_, _, op)| op.clone()))
                .collect();
            let got = io
                .round_within(ops, OpClass::Index, self.cfg.deadline_margin)
                .await;
            let (words, row_bytes) = got.split_at(held.locks.len());
            let mut ours = Vec::new();
            for (&(l, w), r) in held.locks.iter().zip(words) {
                if read_bytes(r).is_ok_and(|b| nessie_exec::word(b, 0) == w) {
                    ours.push((l, w));
                }
            }
            // Not learnt: the locks stay, for a waiter's repair.
            if words.iter().any(|r| read_bytes(r).is_err())
                || row_bytes.iter().any(|r| read_bytes(r).is_err())
            {
                break;
            }
            if ours.len() < held.locks.len() {
                // A release ran, so every WRITE ran before it.
                self.release(io, home, &ours).await;
                return Ok(());
            }
            pending = self.unlanded(&images, &pending, &reads, row_bytes);
        }
        self.counters.locks_leaked += held.locks.len() as u64;
        Err(UnknownOutcome::new(UnknownStep::Commit, last.unwrap_or(Error::Timeout)).into())
    }

    /// Which of the `pending` images did not land, from the rows read back
    /// by `reads` under our locks: for each row, those after the last of
    /// its images it holds (all of them if it holds none; its last if it
    /// is torn, a WRITE part placed).
    pub(super) fn unlanded(
        &self,
        images: &[(u32, Row, Vec<u8>)],
        pending: &[usize],
        reads: &[(u32, u32, Op)],
        results: &[Result<nessie_protocol::OpOutput, nessie_protocol::FabricError>],
    ) -> Vec<usize> {
        let rb = self.layout.row_bytes() as usize;
        let mut now: HashMap<u32, Option<Row>> = HashMap::new();
        for ((first, last, _), r) in reads.iter().zip(results) {
            let bytes = read_bytes(r).unwrap_or_default();
            for (k, row) in (*first..=*last).enumerate() {
                let b = bytes.get(k * rb..(k + 1) * rb).unwrap_or_default();
                now.insert(row, self.layout.decode_row(b));
            }
        }
        let mut out = Vec::new();
        let rows: Vec<u32> = pending.iter().map(|&i| images[i].0).collect();
        for &i in pending {
            let r = images[i].0;
            let mine: Vec<usize> = pending
                .iter()
                .zip(&rows)
                .filter(|(_, &row)| row == r)
                .map(|(&j, _)| j)
                .collect();
            let keep = match now.get(&r) {
                Some(Some(current)) => match mine.iter().rposition(|&j| images[j].1 == *current) {
                    Some(at) => mine[at + 1..].contains(&i),
                    None => true,
                },
                // Torn: its last image.
                _ => mine.last() == Some(&i),
            };
            if keep {
                out.push(i);
            }
        }
        out
    }
}
