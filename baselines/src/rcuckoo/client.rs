//! [`RcuckooCore`]: one attempt of an RCuckoo GET, PUT or DELETE, all
//! one-sided (Grant and Snoeren, USENIX ATC 2025, §3.2, Figure 4).
//!
//! - **GET** (§3.2.1): READ the key's two rows in one round (one covering
//!   READ when they are adjacent), accept the first entry holding the key in
//!   a row whose CRC checks, retry on a bad CRC (a torn row). An inlined
//!   value answers in one round trip; an extent's value takes a second READ,
//!   whose block checksum and key are checked.
//! - **Update and delete** (§3.2.2): take the locks of the key's rows and
//!   READ the rows in **one chain**: the lock CASes, then the READs behind
//!   a fence (so they see the rows as the locks left them); then, in one
//!   ordered chain, WRITE the changed row (version bumped, CRC recomputed)
//!   and release the locks behind it. Two round trips. A new value past
//!   [`INLINE_MAX`] is written into an extent of the client's own first (a
//!   CPU write, as RACE's blocks); the old extent is marked freed after the
//!   release.
//! - **Insert** (§3.2.3): as an update when one of the key's rows has a free
//!   entry; else READ every row the held locks cover, search them
//!   breadth-first (depth 5) for a cuckoo path, and WRITE it one row at a
//!   time from its free end back to the key's row, the releases ordered
//!   behind. With no path within the held locks, release, widen the locked
//!   window by a lock on each side, and search again; a window that covers
//!   the whole shard with no path answers [`Error::TableFull`].
//!
//! Locks are taken in increasing order in one chain and are all-or-nothing:
//! a client that did not get every lock of its set releases those it got
//! and backs off (no one waits while holding a lock: no deadlock).
//!
//! What this leaves out (docs/baselines.md, "RCuckoo"): masked CAS (each
//! lock is a word of its own, one CAS each, where RCuckoo sets up to 64 lock
//! bits with one masked CAS), the speculative search over a cache of rows
//! (the window grows around the key instead), virtual locks, and the
//! lease-based repair of a crashed client's locks (§4): a client that dies
//! holding locks blocks their rows, whose operations time out.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::registry::Registry;
use nessie_protocol::{
    ClientId, Config, Endpoint, Error, KvRequest, Nanos, NodeId, Op, RemoteAddr, Response,
};

mod locks;
mod repair;

use super::layout::{Entry, KeyRows, RcuckooLayout, Row, INLINE_MAX};
use crate::client::{check_one_sided, Attempt, BlockingClient, ClientLogic, CoreSwitches};
use crate::race::alloc::{block_read, quarantine, BlockAlloc};
use crate::race::layout::{BlockRead, RaceLayout};
use crate::retry::RetryBudget;
use nessie_exec::{read_bytes, Io, OpClass};

/// How deep the insert's breadth-first search goes (the paper's setting).
const SEARCH_DEPTH: usize = 5;
/// The widest window of locks an insert searches, each side of the key's.
const MAX_WIDEN: u32 = 8;

/// What an RCuckoo client counted beyond [`nessie_protocol::OpStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RcuckooCounters {
    /// Rows that failed their CRC (the attempt was retried).
    pub torn_rows: u64,
    /// Lock sets not taken whole (released and backed off).
    pub lock_conflicts: u64,
    /// Locks whose release had an unknown outcome: they may stay held
    /// until a waiter takes them over.
    pub locks_leaked: u64,
    /// Extents kept out of circulation (a write or free mark with an
    /// unknown outcome).
    pub extents_leaked: u64,
    /// Entries moved by cuckoo paths.
    pub moved: u64,
    /// Inserts that widened their locked window.
    pub widened: u64,
    /// Stranded locks this client took over and repaired (§4).
    pub repairs: u64,
    /// Rows a repair wrote back (torn by a writer that died).
    pub repaired_rows: u64,
    /// Duplicates of a key (left by an interrupted cuckoo move) an update
    /// or DELETE removed.
    pub duplicates_removed: u64,
    /// Writes given up before posting, their attempt's deadline passed.
    pub writes_fenced: u64,
}

/// A lock set held (each lock with this client's acquisition word in it),
/// with the rows read under it.
struct Held {
    locks: Vec<(u32, u64)>,
    rows: HashMap<u32, Row>,
}

/// How taking a lock set ended.
enum Take {
    /// Held, with the rows asked for read.
    Held(Held),
    /// Not taken (what was taken is released); try again after a back-off.
    Retry,
}

/// An RCuckoo client's state between operations.
#[derive(Debug)]
pub struct RcuckooCore {
    cfg: Arc<Config>,
    layout: RcuckooLayout,
    id: ClientId,
    alloc: BlockAlloc,
    counters: RcuckooCounters,
    /// This client's acquisitions so far (each lock word it writes is new).
    acquisitions: u32,
    /// Locks found held, with the word and when this client first saw it:
    /// a word unchanged past [`RcuckooCore::repair_after`] is a stranded
    /// lock (§4.1).
    stuck: HashMap<(NodeId, u32), (u64, Nanos)>,
    /// Rows found torn, and when first (a writer that died mid-WRITE).
    torn_since: HashMap<(NodeId, u32), Nanos>,
    /// The earliest instant a wait this attempt deferred is due (a
    /// stranded lock's takeover, a torn row's repair): the next attempt
    /// comes no later ([`Attempt::RetryAt`]).
    wake_at: Option<Nanos>,
    unfenced_writes: bool,
    repair_empties_torn: bool,
    skip_miss_check: bool,
}

impl RcuckooCore {
    /// The core of client `id` (its extents are its share on its node).
    pub fn new(cfg: Arc<Config>, layout: RcuckooLayout, id: ClientId) -> RcuckooCore {
        RcuckooCore {
            alloc: BlockAlloc::new(layout.extents, id.node, id.index, quarantine(&cfg)),
            cfg,
            layout,
            id,
            counters: RcuckooCounters::default(),
            acquisitions: 0,
            stuck: HashMap::new(),
            torn_since: HashMap::new(),
            wake_at: None,
            unfenced_writes: false,
            repair_empties_torn: false,
            skip_miss_check: false,
        }
    }

    /// What this client counted so far.
    pub fn counters(&self) -> RcuckooCounters {
        self.counters
    }

    /// Test-only fault switch: a repair empties every entry a torn row
    /// WRITE left unreadable, as the paper's repair does, instead of
    /// restoring the one an update was replacing.
    pub fn set_repair_empties_torn(&mut self, on: bool) {
        self.repair_empties_torn = on;
    }

    /// Test-only fault switch: post row WRITEs however late the attempt
    /// runs (RCuckoo as published, §4.4), so that a writer paused past the
    /// takeover of its locks writes over the repairer's and later writers'
    /// rows.
    pub fn set_unfenced_writes(&mut self, on: bool) {
        self.unfenced_writes = on;
    }

    /// The last instant an attempt started at `start` may act on what it
    /// read or post a WRITE (an extent it read a pointer to is not reused
    /// before T; a lock it holds is not taken over before
    /// [`RcuckooCore::repair_after`]).
    fn deadline(&self, start: Nanos) -> Nanos {
        start.plus(self.cfg.expiration.saturating_sub(self.cfg.deadline_margin))
    }

    /// How long a lock word must stay unchanged, as seen by one waiter,
    /// before the waiter takes the lock over (§4.1's failure timeout). A
    /// live holder acquired it after its attempt started and posts nothing
    /// after its deadline (T − margin from the start), and every request it
    /// posted lands within the margin (A2); with the skew between their
    /// clocks, T + skew + 2 margins after the waiter first saw the word the
    /// holder is done or will never write again.
    fn repair_after(&self) -> Duration {
        self.cfg.expiration + self.cfg.clock_skew + 2 * self.cfg.deadline_margin
    }

    /// A fresh acquisition word: this client's node and index, and a number
    /// no earlier acquisition of this client used, in this process or an
    /// earlier one: the count starts at the microseconds of the clock when
    /// the process first takes a lock (an acquisition takes at least a
    /// round trip, so an earlier process never counted that far; the count
    /// wraps after 71 minutes). A waiter that saw a word before its holder
    /// died must never see it again from the holder's next process.
    fn next_word(&mut self, now: Nanos) -> u64 {
        if self.acquisitions == 0 {
            self.acquisitions = (now.0 / 1_000) as u32;
        }
        self.acquisitions = self.acquisitions.wrapping_add(1).max(1);
        ((u64::from(self.id.node.0) + 1) << 48)
            | ((u64::from(self.id.index) + 1) << 32)
            | u64::from(self.acquisitions)
    }

    /// READs of `rows` on `home`: one covering READ per run of adjacent
    /// rows.
    fn row_reads(&self, home: NodeId, rows: &[u32]) -> Vec<(u32, u32, Op)> {
        let mut sorted: Vec<u32> = rows.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut out = Vec::new();
        let mut i = 0;
        while i < sorted.len() {
            let first = sorted[i];
            let mut last = first;
            while i + 1 < sorted.len() && sorted[i + 1] == last + 1 {
                i += 1;
                last = sorted[i];
            }
            let len = (u64::from(last - first + 1) * self.layout.row_bytes()) as u32;
            let addr = self.layout.row_addr(home, first);
            out.push((first, last, Op::Read { addr, len }));
            i += 1;
        }
        out
    }

    /// Decodes the rows of `reads` from their results; `Err(row)` names a
    /// torn one.
    fn decode_rows(
        &mut self,
        home: NodeId,
        reads: &[(u32, u32, Op)],
        results: &[Result<nessie_protocol::OpOutput, nessie_protocol::FabricError>],
    ) -> Result<Result<HashMap<u32, Row>, u32>, Error> {
        let rb = self.layout.row_bytes() as usize;
        let mut rows = HashMap::new();
        for ((first, last, _), r) in reads.iter().zip(results) {
            let bytes = read_bytes(r)?;
            for (k, row) in (*first..=*last).enumerate() {
                let decoded = bytes
                    .get(k * rb..(k + 1) * rb)
                    .and_then(|b| self.layout.decode_row(b));
                let Some(decoded) = decoded else {
                    self.counters.torn_rows += 1;
                    return Ok(Err(row));
                };
                self.torn_since.remove(&(home, row));
                rows.insert(row, decoded);
            }
        }
        Ok(Ok(rows))
    }

    async fn get(&mut self, io: &Io, key: &[u8]) -> Result<Attempt, Error> {
        let place = self.layout.place(key);
        let deadline = self.deadline(io.now());
        let reads = self.row_reads(place.home, &place.rows);
        let ops = reads.iter().map(|(_, _, op)| op.clone()).collect();
        let r = io.round_by(ops, OpClass::Index, deadline).await;
        if io.now() > deadline {
            return Ok(Attempt::Retry);
        }
        let rows = match self.decode_rows(place.home, &reads, &r)? {
            Ok(rows) => rows,
            Err(torn) => {
                self.torn_row(io, place.home, torn, deadline).await;
                return Ok(Attempt::Retry);
            }
        };
        let entry = place
            .rows
            .iter()
            .find_map(|row| rows[row].find(key).map(|p| rows[row].entries[p].clone()));
        if entry.is_none() && !self.skip_miss_check {
            // A miss is certain only if the rows did not change: the two
            // READs may have straddled a cuckoo move of the key (the copy
            // into the second row after its READ, the first row emptied
            // before its READ). Read again: the second READ of each row
            // executes after both first READs, hence after any move they
            // straddled, which changed a row the second round then sees
            // changed. Unchanged rows confirm the miss; changed ones retry.
            let ops = reads.iter().map(|(_, _, op)| op.clone()).collect();
            let again = io.round_by(ops, OpClass::Index, deadline).await;
            if io.now() > deadline {
                return Ok(Attempt::Retry);
            }
            match self.decode_rows(place.home, &reads, &again)? {
                Ok(second) if second == rows => {}
                _ => return Ok(Attempt::Retry),
            }
        }
        let value = match entry {
            None | Some(Entry::Empty) => None,
            Some(Entry::Inline { value, .. }) => Some(value),
            Some(Entry::Extent {
                node,
                offset,
                header,
                ..
            }) => match self
                .read_extent(io, key, (node, offset), header, deadline)
                .await?
            {
                Some(v) => Some(v),
                None => return Ok(Attempt::Retry),
            },
        };
        Ok(Attempt::Done(Ok(Response::Get(value))))
    }

    /// READs the extent an entry of `key` names and checks it is the one
    /// linked (its header word, key and checksum); `None`: torn, reused or
    /// past the deadline (retry).
    async fn read_extent(
        &mut self,
        io: &Io,
        key: &[u8],
        (node, offset): (NodeId, u64),
        header: u64,
        deadline: Nanos,
    ) -> Result<Option<Vec<u8>>, Error> {
        let len = self.layout.extents.block_bytes as u32;
        let op = block_read(io.own(), RemoteAddr::data(node, offset), len);
        let r = io.round_by(vec![op], OpClass::Data, deadline).await;
        if io.now() > deadline {
            return Ok(None);
        }
        Ok(match RaceLayout::decode_block(read_bytes(&r[0])?) {
            BlockRead::Whole {
                header: h,
                key: k,
                value,
            } if h == header && k == key => Some(value.to_vec()),
            _ => None,
        })
    }

    async fn write(&mut self, io: &Io, op: KvRequest<'_>) -> Result<Attempt, Error> {
        let key = op.key();
        let start = io.now();
        let deadline = self.deadline(start);
        // The new entry, its extent written out of place first.
        let (entry, extent) = match op {
            KvRequest::Put(_, value) if value.len() <= INLINE_MAX => (
                Some(Entry::Inline {
                    key: key.to_vec(),
                    value: value.to_vec(),
                }),
                None,
            ),
            KvRequest::Put(_, value) => {
                let b = self.alloc.write_block(io, key, value).await?;
                let e = Entry::Extent {
                    key: key.to_vec(),
                    node: self.id.node,
                    offset: b.offset,
                    header: b.live_word(),
                };
                (Some(e), Some(b))
            }
            _ => (None, None),
        };
        let outcome = self.write_locked(io, op, entry, deadline).await;
        match (&outcome, extent) {
            (Ok(Attempt::Done(Ok(Response::Put(_)))), _) | (_, None) => {}
            (Ok(Attempt::Done(Err(Error::OutcomeUnknown(_)))), Some(_)) => {
                self.counters.extents_leaked += 1;
            }
            // Nothing linked the extent.
            (_, Some(b)) => self.alloc.unpublished(b),
        }
        outcome
    }

    async fn write_locked(
        &mut self,
        io: &Io,
        op: KvRequest<'_>,
        entry: Option<Entry>,
        deadline: Nanos,
    ) -> Result<Attempt, Error> {
        let key = op.key();
        let place = self.layout.place(key);
        let mut locks: Vec<u32> = place.rows.iter().map(|&r| self.layout.lock_of(r)).collect();
        locks.sort_unstable();
        locks.dedup();
        let held = match self
            .take(io, place.home, &locks, &place.rows, deadline)
            .await
        {
            Take::Held(h) => h,
            Take::Retry => return Ok(Attempt::Retry),
        };
        // Where the key is: in its first row, its second, or (a writer died
        // mid-move or mid-update) more than one entry.
        let mut rows = place.rows.to_vec();
        rows.dedup();
        let found: Vec<(u32, Vec<usize>)> = rows
            .iter()
            .map(|&r| (r, held.rows[&r].find_all(key)))
            .filter(|(_, ps)| !ps.is_empty())
            .collect();
        if found.is_empty() {
            let Some(entry) = entry else {
                self.release(io, place.home, &held.locks).await;
                return Ok(Attempt::Done(Ok(Response::Delete(false))));
            };
            return self.insert(io, place, held, entry, deadline).await;
        }
        // The first holder takes the new entry (or is emptied); every other
        // entry of the key is emptied, each row in one image.
        let mut old = Vec::new();
        let mut changed = Vec::new();
        for (i, (r, ps)) in found.iter().enumerate() {
            let mut row = held.rows[r].clone();
            // The first entry of the key is replaced in place (its header
            // and key stay; a torn WRITE of its type and value words is
            // repairable, `RcuckooCore::repair`), every other one emptied.
            let keep = match (&entry, i) {
                (Some(e), 0) => {
                    old.push(std::mem::replace(&mut row.entries[ps[0]], e.clone()));
                    1
                }
                _ => 0,
            };
            for &p in &ps[keep..] {
                old.push(std::mem::replace(&mut row.entries[p], Entry::Empty));
            }
            changed.push((*r, row));
        }
        self.counters.duplicates_removed +=
            found.iter().map(|(_, ps)| ps.len() as u64).sum::<u64>() - 1;
        if let Err(e) = self
            .write_rows(io, place.home, &held, changed, deadline)
            .await
        {
            return Ok(Attempt::Done(Err(e)));
        }
        for o in &old {
            self.free_extent(io, o).await;
        }
        Ok(Attempt::Done(Ok(match entry {
            None => Response::Delete(true),
            Some(_) => Response::Put(true),
        })))
    }

    /// Inserts `entry` (its key absent from both its rows, checked under
    /// `held`): into a free entry of one of its rows, else along a cuckoo
    /// path within a locked window that widens until a path exists.
    async fn insert(
        &mut self,
        io: &Io,
        place: KeyRows,
        mut held: Held,
        entry: Entry,
        deadline: Nanos,
    ) -> Result<Attempt, Error> {
        let key_locks: Vec<u32> = held.locks.iter().map(|&(l, _)| l).collect();
        let mut widen = 0u32;
        loop {
            if let Some(&r) = place.rows.iter().find(|r| held.rows[r].free().is_some()) {
                let mut row = held.rows[&r].clone();
                let p = row.free().unwrap_or_default();
                row.entries[p] = entry;
                return Ok(Attempt::Done(
                    self.write_rows(io, place.home, &held, vec![(r, row)], deadline)
                        .await
                        .map(|()| Response::Put(false)),
                ));
            }
            // Every row the held locks cover, read under them.
            let missing: Vec<u32> = held
                .locks
                .iter()
                .flat_map(|&(l, _)| self.layout.rows_of(l))
                .filter(|r| !held.rows.contains_key(r))
                .collect();
            if !missing.is_empty() {
                let reads = self.row_reads(place.home, &missing);
                let ops = reads.iter().map(|(_, _, op)| op.clone()).collect();
                let r = io.round_by(ops, OpClass::Index, deadline).await;
                match self.decode_rows(place.home, &reads, &r) {
                    Ok(Ok(rows)) if io.now() <= deadline => held.rows.extend(rows),
                    Ok(Err(_)) if io.now() <= deadline => {
                        self.repair(io, place.home, &mut held, &reads, &r, deadline)
                            .await;
                        return Ok(Attempt::Retry);
                    }
                    _ => {
                        self.release(io, place.home, &held.locks).await;
                        return Ok(Attempt::Retry);
                    }
                }
            }
            if let Some(path) = self.search(&place, &held.rows) {
                let rows = self.apply_path(&held.rows, &path, entry);
                let moves = path.len() as u64 - 1;
                self.counters.moved += moves;
                io.count(|s| s.migrations += moves);
                return Ok(Attempt::Done(
                    self.write_rows(io, place.home, &held, rows, deadline)
                        .await
                        .map(|()| Response::Put(false)),
                ));
            }
            self.release(io, place.home, &held.locks).await;
            if io.now() > deadline {
                return Ok(Attempt::Retry);
            }
            let all = self.layout.locks();
            if widen >= MAX_WIDEN || held.locks.len() as u32 >= all {
                return Ok(Attempt::Done(Err(Error::TableFull {
                    depth: SEARCH_DEPTH as u8,
                })));
            }
            widen += 1;
            self.counters.widened += 1;
            let mut locks: Vec<u32> = key_locks
                .iter()
                .flat_map(|&l| {
                    (0..=2 * i64::from(widen)).map(move |d| {
                        (i64::from(l) + d - i64::from(widen)).rem_euclid(i64::from(all)) as u32
                    })
                })
                .collect();
            locks.sort_unstable();
            locks.dedup();
            let rows: Vec<u32> = locks.iter().flat_map(|&l| self.layout.rows_of(l)).collect();
            held = match self.take(io, place.home, &locks, &rows, deadline).await {
                Take::Held(h) => h,
                Take::Retry => return Ok(Attempt::Retry),
            };
            // The key may have been inserted while no lock was held.
            if place
                .rows
                .iter()
                .any(|r| held.rows[r].find(entry_key(&entry)).is_some())
            {
                self.release(io, place.home, &held.locks).await;
                return Ok(Attempt::Retry);
            }
        }
    }

    /// A cuckoo path within `rows` (the locked ones): the positions the new
    /// key and each displaced entry go to, the key's row first and a free
    /// entry last; rows distinct; at most [`SEARCH_DEPTH`] moves.
    fn search(&self, place: &KeyRows, rows: &HashMap<u32, Row>) -> Option<Vec<(u32, usize)>> {
        // Breadth-first over (row, position) of entries to displace.
        let mut queue: VecDeque<Vec<(u32, usize)>> = VecDeque::new();
        let mut seen: HashSet<u32> = HashSet::new();
        for &r in &place.rows {
            if seen.insert(r) {
                for p in 0..rows[&r].entries.len() {
                    queue.push_back(vec![(r, p)]);
                }
            }
        }
        while let Some(path) = queue.pop_front() {
            let &(r, p) = path.last()?;
            let Some(k) = rows[&r].entries[p].key() else {
                continue;
            };
            let alt = self.layout.place(k).rows;
            let next = if alt[0] == r { alt[1] } else { alt[0] };
            if next == r || !rows.contains_key(&next) || path.iter().any(|&(pr, _)| pr == next) {
                continue;
            }
            if let Some(free) = rows[&next].free() {
                let mut done = path.clone();
                done.push((next, free));
                return Some(done);
            }
            if path.len() < SEARCH_DEPTH && seen.insert(next) {
                for q in 0..rows[&next].entries.len() {
                    let mut longer = path.clone();
                    longer.push((next, q));
                    queue.push_back(longer);
                }
            }
        }
        None
    }

    /// The rows a cuckoo `path` writes, in the order to write them: the
    /// free end first, the key's row last, each changed in one entry.
    fn apply_path(
        &self,
        rows: &HashMap<u32, Row>,
        path: &[(u32, usize)],
        entry: Entry,
    ) -> Vec<(u32, Row)> {
        let mut out = Vec::with_capacity(path.len());
        for i in (0..path.len()).rev() {
            let (r, p) = path[i];
            let mut row = rows[&r].clone();
            row.entries[p] = if i == 0 {
                entry.clone()
            } else {
                let (pr, pp) = path[i - 1];
                rows[&pr].entries[pp].clone()
            };
            out.push((r, row));
        }
        out
    }

    /// Marks the extent an unlinked entry named freed.
    async fn free_extent(&mut self, io: &Io, old: &Entry) {
        if let Entry::Extent {
            node,
            offset,
            header,
            ..
        } = old
        {
            let within = self.cfg.deadline_margin;
            if !self
                .alloc
                .mark_freed(io, (*node, *offset), *header, within)
                .await
            {
                self.counters.extents_leaked += 1;
            }
        }
    }
}

fn entry_key(e: &Entry) -> &[u8] {
    e.key().unwrap_or_default()
}

impl ClientLogic for RcuckooCore {
    fn system(&self) -> &'static str {
        "rcuckoo"
    }

    fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    fn registry(&self) -> Registry {
        Registry::after(self.layout.region_bytes(), self.cfg.clients_per_node)
    }

    fn check(&self, op: KvRequest<'_>) -> Result<(), Error> {
        check_one_sided(&self.cfg, op)
    }

    async fn attempt(&mut self, io: &Io, op: KvRequest<'_>, _budget: &mut RetryBudget) -> Attempt {
        self.wake_at = None;
        let r = match op {
            KvRequest::Get(key) => self.get(io, key).await,
            KvRequest::Put(..) | KvRequest::Delete(_) => self.write(io, op).await,
            KvRequest::Scan { .. } => Err(Error::Unsupported("scan")),
        };
        match r {
            // A wait deferred to a later attempt: no back-off past it.
            Ok(Attempt::Retry) => match self.wake_at.take() {
                Some(due) => Attempt::RetryAt(due),
                None => Attempt::Retry,
            },
            Ok(a) => a,
            // A READ (or the extent's CPU write) failed before anything was
            // written: nothing committed.
            Err(e) => Attempt::Done(Err(e)),
        }
    }

    fn set_switches(&mut self, switches: CoreSwitches) {
        self.alloc
            .reuse_without_hold(switches.reuse_without_hold, &self.cfg);
        self.set_unfenced_writes(switches.unfenced_writes);
        self.set_repair_empties_torn(switches.repair_empties_torn);
        self.skip_miss_check = switches.skip_miss_check;
    }
}

/// An RCuckoo client (blocking).
pub type RcuckooClient<E> = BlockingClient<RcuckooCore, E>;

impl<E: Endpoint> BlockingClient<RcuckooCore, E> {
    /// Client `id` on endpoint `ep` (an endpoint on `id.node`).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid store or a layout whose extent
    /// pointers do not fit ([`RcuckooLayout::check`]); otherwise as
    /// [`BlockingClient::from_core`].
    pub fn new(cfg: Arc<Config>, id: ClientId, ep: E) -> Result<RcuckooClient<E>, Error> {
        let layout = RcuckooLayout::new(&cfg);
        layout.check()?;
        BlockingClient::from_core(RcuckooCore::new(cfg, layout, id), id, ep)
    }

    /// What this client counted so far.
    pub fn counters(&self) -> RcuckooCounters {
        self.core.counters()
    }
}
