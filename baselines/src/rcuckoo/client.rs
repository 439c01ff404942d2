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

use nessie_protocol::{
    ChainLink, ClientId, Config, Endpoint, Error, KvRequest, Nanos, NodeId, Op, RemoteAddr,
    Response, UnknownOutcome, UnknownStep,
};

use super::layout::{Entry, KeyRows, RcuckooLayout, Row, INLINE_MAX};
use crate::client::{Attempt, BlockingClient, ClientLogic, CoreSwitches};
use crate::race::alloc::BlockAlloc;
use crate::race::layout::{BlockRead, RaceLayout};
use crate::retry::RetryBudget;
use nessie_exec::machine::{cas_previous, read_bytes, written, Io, OpClass};

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
    /// Locks whose release had an unknown outcome: they may stay held.
    pub locks_leaked: u64,
    /// Extents kept out of circulation (a write or free mark with an
    /// unknown outcome).
    pub extents_leaked: u64,
    /// Entries moved by cuckoo paths.
    pub moved: u64,
    /// Inserts that widened their locked window.
    pub widened: u64,
}

/// A lock set held, with the rows read under it.
struct Held {
    locks: Vec<u32>,
    rows: HashMap<u32, Row>,
}

/// How taking a lock set ended.
enum Take {
    /// Held, with the rows asked for read.
    Held(Held),
    /// Not taken whole (released); try again after a back-off.
    Busy,
    /// Past the attempt's deadline, or a row read under the locks was torn
    /// (released).
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
    /// This client's word in a lock it holds.
    tag: u64,
}

impl RcuckooCore {
    /// The core of client `id` (its extents are its share on its node).
    pub fn new(cfg: Arc<Config>, layout: RcuckooLayout, id: ClientId) -> RcuckooCore {
        RcuckooCore {
            alloc: BlockAlloc::new(layout.extents, id.node, id.index, hold(&cfg)),
            tag: ((u64::from(id.node.0) + 1) << 32) | (u64::from(id.index) + 1),
            cfg,
            layout,
            id,
            counters: RcuckooCounters::default(),
        }
    }

    /// What this client counted so far.
    pub fn counters(&self) -> RcuckooCounters {
        self.counters
    }

    /// The last instant an attempt started at `start` may act on what it
    /// read (an extent it read a pointer to is not reused before T).
    fn deadline(&self, start: Nanos) -> Nanos {
        start.plus(self.cfg.expiration.saturating_sub(self.cfg.deadline_margin))
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

    /// Decodes the rows of `reads` from their results; `None` if one is
    /// torn.
    fn decode_rows(
        &mut self,
        reads: &[(u32, u32, Op)],
        results: &[Result<nessie_protocol::OpOutput, nessie_protocol::FabricError>],
    ) -> Result<Option<HashMap<u32, Row>>, Error> {
        let rb = self.layout.row_bytes() as usize;
        let mut rows = HashMap::new();
        for ((first, last, _), r) in reads.iter().zip(results) {
            let bytes = read_bytes(r)?;
            for (k, row) in (*first..=*last).enumerate() {
                let Some(decoded) = bytes
                    .get(k * rb..(k + 1) * rb)
                    .and_then(|b| self.layout.decode_row(b))
                else {
                    self.counters.torn_rows += 1;
                    return Ok(None);
                };
                rows.insert(row, decoded);
            }
        }
        Ok(Some(rows))
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
        let Some(rows) = self.decode_rows(&reads, &r)? else {
            return Ok(Attempt::Retry);
        };
        let entry = place
            .rows
            .iter()
            .find_map(|row| rows[row].find(key).map(|p| rows[row].entries[p].clone()));
        let value = match entry {
            None => None,
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
            Some(Entry::Empty) => None,
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
        let op = if node == io.own() {
            Op::LocalRead { offset, len }
        } else {
            Op::Read {
                addr: RemoteAddr::data(node, offset),
                len,
            }
        };
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

    /// Takes `locks` (ascending) on `home` in one chain, with READs of
    /// `rows` fenced behind the CASes; releases what it got if it did not
    /// get them all.
    async fn take(
        &mut self,
        io: &Io,
        home: NodeId,
        locks: &[u32],
        rows: &[u32],
        deadline: Nanos,
    ) -> Result<Take, Error> {
        let reads = self.row_reads(home, rows);
        let mut chain: Vec<(Op, ChainLink)> = locks
            .iter()
            .map(|&l| {
                let op = Op::Cas {
                    addr: self.layout.lock_addr(home, l),
                    expect: 0,
                    new: self.tag,
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
        let mut all = true;
        for (&l, r) in locks.iter().zip(&r) {
            match cas_previous(r) {
                Ok(0) => got.push(l),
                Ok(_) => all = false,
                Err(_) => {
                    all = false;
                    got.push(l);
                }
            }
        }
        if !all {
            self.counters.lock_conflicts += 1;
            self.release(io, home, &got).await;
            return Ok(if io.now() > deadline {
                Take::Retry
            } else {
                Take::Busy
            });
        }
        let rows_read = match self.decode_rows(&reads, &r[locks.len()..]) {
            Ok(Some(rows)) if io.now() <= deadline => rows,
            // Torn under the locks (a writer that died mid-write: the
            // repair is not built), a failed READ, or too late.
            _ => {
                self.release(io, home, locks).await;
                return Ok(Take::Retry);
            }
        };
        Ok(Take::Held(Held {
            locks: locks.to_vec(),
            rows: rows_read,
        }))
    }

    /// Releases `locks` on `home` (a CAS from this client's tag each, so a
    /// lock it does not hold is left alone).
    async fn release(&mut self, io: &Io, home: NodeId, locks: &[u32]) {
        if locks.is_empty() {
            return;
        }
        let ops = self.release_ops(home, locks);
        let r = io
            .round_within(ops, OpClass::Index, self.cfg.deadline_margin)
            .await;
        self.counters.locks_leaked += r.iter().filter(|r| cas_previous(r).is_err()).count() as u64;
    }

    fn release_ops(&self, home: NodeId, locks: &[u32]) -> Vec<Op> {
        locks
            .iter()
            .map(|&l| Op::Cas {
                addr: self.layout.lock_addr(home, l),
                expect: self.tag,
                new: 0,
            })
            .collect()
    }

    /// WRITEs `rows` (each with its version bumped) in order, then releases
    /// the held locks behind them, in one ordered chain; an error if a
    /// WRITE's or a release's outcome is unknown.
    async fn write_rows(
        &mut self,
        io: &Io,
        home: NodeId,
        held: &Held,
        rows: Vec<(u32, Row)>,
    ) -> Result<(), Error> {
        let n = rows.len();
        let mut chain: Vec<(Op, ChainLink)> = rows
            .into_iter()
            .map(|(r, mut row)| {
                row.version = row.version.wrapping_add(1);
                let op = Op::Write {
                    addr: self.layout.row_addr(home, r),
                    data: self.layout.encode_row(&row),
                };
                (op, ChainLink::Ordered)
            })
            .collect();
        chain.extend(
            self.release_ops(home, &held.locks)
                .into_iter()
                .map(|op| (op, ChainLink::Ordered)),
        );
        let deadline = io.now().plus(self.cfg.deadline_margin);
        let r = io.chain_by(chain, OpClass::Index, deadline).await;
        let wrote = r[..n].iter().map(written).find_map(Result::err);
        let released = r[n..].iter().map(cas_previous).find_map(Result::err);
        match (wrote, released) {
            (None, None) => Ok(()),
            (Some(e), _) => {
                // The rows may or may not be written, the locks may or may
                // not be released: give back what is still ours.
                self.release(io, home, &held.locks).await;
                Err(UnknownOutcome::new(UnknownStep::Commit, e).into())
            }
            (None, Some(_)) => {
                // Written; a release may not have landed.
                self.release(io, home, &held.locks).await;
                Ok(())
            }
        }
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
                let b = self.alloc.take(io).await?;
                let bytes = RaceLayout::encode_block(b.live_word(), key, value);
                let r = io
                    .round(
                        vec![Op::LocalWrite {
                            offset: b.offset,
                            data: bytes,
                        }],
                        OpClass::Data,
                    )
                    .await;
                written(&r[0])?;
                let e = Entry::Extent {
                    key: key.to_vec(),
                    len: value.len() as u32,
                    node: self.id.node,
                    offset: b.offset,
                    header: b.live_word(),
                };
                (Some(e), Some(b))
            }
            _ => (None, None),
        };
        let outcome = self.write_locked(io, op, entry, deadline).await;
        let linked = matches!(
            outcome,
            Ok(Attempt::Done(
                Ok(Response::Put(_)) | Err(Error::OutcomeUnknown(_))
            ))
        );
        if let (false, Some(b)) = (linked, extent) {
            self.alloc.unpublished(b);
        } else if let (Ok(Attempt::Done(Err(_))), Some(_)) = (&outcome, extent) {
            self.counters.extents_leaked += 1;
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
            .await?
        {
            Take::Held(h) => h,
            Take::Busy | Take::Retry => return Ok(Attempt::Retry),
        };
        let found = place
            .rows
            .iter()
            .find_map(|&r| held.rows[&r].find(key).map(|p| (r, p)));
        match (found, entry) {
            (None, None) => {
                self.release(io, place.home, &held.locks).await;
                Ok(Attempt::Done(Ok(Response::Delete(false))))
            }
            (Some((r, p)), entry) => {
                let mut row = held.rows[&r].clone();
                let old =
                    std::mem::replace(&mut row.entries[p], entry.clone().unwrap_or(Entry::Empty));
                if let Err(e) = self.write_rows(io, place.home, &held, vec![(r, row)]).await {
                    return Ok(Attempt::Done(Err(e)));
                }
                self.free_extent(io, &old).await;
                Ok(Attempt::Done(Ok(match entry {
                    None => Response::Delete(true),
                    Some(_) => Response::Put(true),
                })))
            }
            (None, Some(entry)) => self.insert(io, place, held, entry, deadline).await,
        }
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
        for &r in &place.rows {
            if let Some(p) = held.rows[&r].free() {
                let mut row = held.rows[&r].clone();
                row.entries[p] = entry;
                return Ok(Attempt::Done(
                    self.write_rows(io, place.home, &held, vec![(r, row)])
                        .await
                        .map(|()| Response::Put(false)),
                ));
            }
        }
        let key_locks = held.locks.clone();
        let mut widen = 0u32;
        loop {
            // Every row the held locks cover, read under them.
            let missing: Vec<u32> = held
                .locks
                .iter()
                .flat_map(|&l| self.layout.rows_of(l))
                .filter(|r| !held.rows.contains_key(r))
                .collect();
            if !missing.is_empty() {
                let reads = self.row_reads(place.home, &missing);
                let ops = reads.iter().map(|(_, _, op)| op.clone()).collect();
                let r = io.round_by(ops, OpClass::Index, deadline).await;
                match self.decode_rows(&reads, &r) {
                    Ok(Some(rows)) if io.now() <= deadline => held.rows.extend(rows),
                    _ => {
                        self.release(io, place.home, &held.locks).await;
                        return Ok(Attempt::Retry);
                    }
                }
            }
            if let Some(path) = self.search(&place, &held.rows) {
                let rows = self.apply_path(&held.rows, &path, entry);
                self.counters.moved += path.len() as u64 - 1;
                return Ok(Attempt::Done(
                    self.write_rows(io, place.home, &held, rows)
                        .await
                        .map(|()| Response::Put(false)),
                ));
            }
            self.release(io, place.home, &held.locks).await;
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
                .flat_map(|&l| (0..=2 * widen).map(move |d| (l + all + d - widen) % all))
                .collect();
            locks.sort_unstable();
            locks.dedup();
            let rows: Vec<u32> = locks.iter().flat_map(|&l| self.layout.rows_of(l)).collect();
            held = match self.take(io, place.home, &locks, &rows, deadline).await? {
                Take::Held(h) => h,
                Take::Busy | Take::Retry => return Ok(Attempt::Retry),
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
            for &r in &place.rows {
                if let Some(p) = held.rows[&r].free() {
                    let mut row = held.rows[&r].clone();
                    row.entries[p] = entry;
                    return Ok(Attempt::Done(
                        self.write_rows(io, place.home, &held, vec![(r, row)])
                            .await
                            .map(|()| Response::Put(false)),
                    ));
                }
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

    fn check(&self, op: KvRequest<'_>) -> Result<(), Error> {
        let cfg = &self.cfg;
        match op {
            KvRequest::Get(k) | KvRequest::Delete(k) => cfg.check_key(k),
            KvRequest::Put(k, v) => cfg.check_key(k).and_then(|()| cfg.check_value(v)),
            KvRequest::Scan { .. } => Err(Error::Unsupported("scan")),
        }
    }

    async fn attempt(&mut self, io: &Io, op: KvRequest<'_>, _budget: &mut RetryBudget) -> Attempt {
        let r = match op {
            KvRequest::Get(key) => self.get(io, key).await,
            KvRequest::Put(..) | KvRequest::Delete(_) => self.write(io, op).await,
            KvRequest::Scan { .. } => Err(Error::Unsupported("scan")),
        };
        match r {
            Ok(a) => a,
            // A READ (or the extent's CPU write) failed before anything was
            // written: nothing committed.
            Err(e) => Attempt::Done(Err(e)),
        }
    }

    fn set_switches(&mut self, switches: CoreSwitches) {
        self.alloc.set_hold(if switches.reuse_without_hold {
            Duration::ZERO
        } else {
            hold(&self.cfg)
        });
    }
}

/// How long a freed extent waits before reuse: T plus the clock skew.
fn hold(cfg: &Config) -> Duration {
    cfg.expiration + cfg.clock_skew
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
