//! [`RaceCore`]: one attempt of a RACE GET, PUT or DELETE, all one-sided
//! (Zuo et al., USENIX ATC 2021, §4: "RDMA-conscious" reads, lock-free
//! writes).
//!
//! - **GET** (§4.1, Figure 6): READ the key's two combined buckets (one
//!   round, two READs), then READ the KV blocks of every slot whose
//!   fingerprint matches (one round), and answer from the first position
//!   whose block holds the key: two round trips.
//! - **PUT** (§4.2): write the new KV block out of place (a CPU write into
//!   the client's own share) and READ the two combined buckets, then READ
//!   the fingerprint matches' blocks. If a position holds the key, CAS its
//!   slot from the old block to the new one (an update: three round trips,
//!   the paper's "read KV, then CAS", and the old block's free mark, a CAS
//!   on its owner's node). Else CAS an empty slot of the less loaded main
//!   bucket (then overflow bucket) to the new block, and READ the two
//!   combined buckets again to find **duplicates** a concurrent insert of
//!   the same key made: the first position holding the key is kept, every
//!   other one is emptied by CAS (an insert: three round trips when no
//!   other slot shares its fingerprint, one more to read those that do).
//! - **DELETE**: find the key as a PUT does and CAS its slot to empty.
//!
//! The client whose CAS unlinked a block marks it freed ([`super::alloc`]).
//! Every attempt ends within `expiration - deadline_margin` of its start
//! (a READ completing later is discarded and the attempt retried; no CAS is
//! posted later), so no block it reads is reused under it and every CAS it
//! posts lands, under A2, before the block its expected word names could be
//! reused and linked again under the same word. That is RACE's own safety:
//! its slot words carry no version, so a CAS landing after such a reuse
//! succeeds against a word that recurred (ABA). `docs/baselines.md` says what
//! the swarm shows without A2.
//!
//! A CAS whose completion reports an error or never arrives may still take
//! effect: the attempt answers [`Error::OutcomeUnknown`] and keeps its block
//! out of circulation (leaked). A READ that fails ends the attempt with its
//! error before anything was linked (the block goes back).

use std::sync::Arc;

use nessie_protocol::registry::Registry;
use nessie_protocol::{ClientId, Config, Endpoint, Error, KvRequest, Nanos, Op, Response};

use super::alloc::{block_read, quarantine, Block, BlockAlloc};
use super::layout::{
    block_len, BlockRead, KeyPlace, RaceLayout, Slot, BLOCK_UNIT, COMBINED_BYTES, POSITIONS,
    SLOTS_PER_BUCKET,
};
use crate::client::{check_one_sided, Attempt, BlockingClient, ClientLogic, CoreSwitches};
use crate::retry::RetryBudget;
use nessie_exec::{cas_previous, read_bytes, Io, OpClass, Results};
use nessie_protocol::{RemoteAddr, UnknownOutcome, UnknownStep};

/// What a RACE client counted beyond [`nessie_protocol::OpStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RaceCounters {
    /// KV blocks that failed their checksum (the attempt was retried).
    pub torn_blocks: u64,
    /// Duplicate slots of a key this client's inserts emptied (its own or
    /// another's).
    pub duplicates_removed: u64,
    /// Inserts that could not finish their duplicate check (an error or the
    /// attempt's deadline after the insert was linked): a duplicate may
    /// remain.
    pub duplicate_checks_skipped: u64,
    /// Blocks kept out of circulation: a CAS linking them, or a free mark,
    /// had an unknown outcome.
    pub leaked: u64,
}

/// The key's candidate slots as read: each position's word.
struct Buckets {
    words: [u64; POSITIONS],
}

impl Buckets {
    /// Positions holding a slot with the key's fingerprint.
    fn matches(&self, fp: u8) -> Vec<(usize, Slot)> {
        self.words
            .iter()
            .enumerate()
            .filter_map(|(p, &w)| Slot::from_word(w).filter(|s| s.fp == fp).map(|s| (p, s)))
            .collect()
    }

    /// The empty position an insert takes: the first empty slot of the
    /// less loaded main bucket, then of the other, then of the overflow
    /// buckets (less loaded first).
    fn empty_position(&self) -> Option<usize> {
        let used = |b: usize| {
            self.words[b * SLOTS_PER_BUCKET..(b + 1) * SLOTS_PER_BUCKET]
                .iter()
                .filter(|&&w| w != 0)
                .count()
        };
        // Buckets 0 and 2 are the main ones, 1 and 3 their overflow.
        let by_load = |a: usize, b: usize| if used(b) < used(a) { [b, a] } else { [a, b] };
        let [m0, m1] = by_load(0, 2);
        let [o0, o1] = by_load(1, 3);
        [m0, m1, o0, o1].into_iter().find_map(|b| {
            (b * SLOTS_PER_BUCKET..(b + 1) * SLOTS_PER_BUCKET).find(|&p| self.words[p] == 0)
        })
    }
}

/// Where the key was found: its position, slot word and block's header.
#[derive(Clone, Copy, Debug)]
struct Found {
    position: usize,
    word: u64,
    header: u64,
}

/// A RACE client's state between operations.
#[derive(Debug)]
pub struct RaceCore {
    cfg: Arc<Config>,
    layout: RaceLayout,
    id: ClientId,
    alloc: BlockAlloc,
    counters: RaceCounters,
    unknown_as_timeout: bool,
}

impl RaceCore {
    /// The core of client `id` (its blocks are its share on its node).
    pub fn new(cfg: Arc<Config>, layout: RaceLayout, id: ClientId) -> RaceCore {
        RaceCore {
            alloc: BlockAlloc::new(layout.blocks(), id.node, id.index, quarantine(&cfg)),
            cfg,
            layout,
            id,
            counters: RaceCounters::default(),
            unknown_as_timeout: false,
        }
    }

    /// What this client counted so far.
    pub fn counters(&self) -> RaceCounters {
        self.counters
    }

    /// Test-only fault switch: a slot CAS whose outcome is unknown is
    /// reported as a retryable [`Error::Timeout`] (which promises nothing
    /// was committed), the lie the honest-outcome matrix must catch.
    pub fn set_unknown_as_timeout(&mut self, on: bool) {
        self.unknown_as_timeout = on;
    }

    /// Test-only fault switch: freed blocks are reused at once, without
    /// waiting out T plus the skew, so a reader that read a slot before its
    /// block was unlinked can read the block's next contents.
    pub fn set_reuse_without_hold(&mut self, on: bool) {
        self.alloc.reuse_without_hold(on, &self.cfg);
    }

    /// The last instant an attempt started at `start` may act on what it
    /// read, or post a CAS.
    fn deadline(&self, start: Nanos) -> Nanos {
        start.plus(self.cfg.expiration.saturating_sub(self.cfg.deadline_margin))
    }

    /// READs the two combined buckets; `Ok(Err(()))`: past the deadline
    /// (retry).
    async fn read_buckets(
        &self,
        io: &Io,
        place: &KeyPlace,
        deadline: Nanos,
    ) -> Result<Result<Buckets, ()>, Error> {
        let ops = place
            .combined
            .iter()
            .map(|&off| Op::Read {
                addr: RemoteAddr::data(place.home, off),
                len: COMBINED_BYTES,
            })
            .collect();
        let r = io.round_by(ops, OpClass::Index, deadline).await;
        if io.now() > deadline {
            return Ok(Err(()));
        }
        let (a, b) = (read_bytes(&r[0])?, read_bytes(&r[1])?);
        Ok(Ok(Buckets {
            words: place.positions([a, b]),
        }))
    }

    /// READs the blocks of `matches` and returns the first position whose
    /// block holds `key`; `Err(())`: a block was torn or the deadline
    /// passed (retry).
    async fn find(
        &mut self,
        io: &Io,
        key: &[u8],
        matches: &[(usize, Slot)],
        deadline: Nanos,
    ) -> Result<Result<Option<(Found, Vec<u8>)>, ()>, Error> {
        if matches.is_empty() {
            return Ok(Ok(None));
        }
        let own = io.own();
        let ops = matches
            .iter()
            .map(|(_, s)| block_read(own, s.addr(), s.read_len()))
            .collect();
        let r: Results = io.round_by(ops, OpClass::Data, deadline).await;
        if io.now() > deadline {
            return Ok(Err(()));
        }
        for ((p, s), r) in matches.iter().zip(&r) {
            let bytes = read_bytes(r)?;
            match RaceLayout::decode_block(bytes) {
                BlockRead::Torn => {
                    self.counters.torn_blocks += 1;
                    return Ok(Err(()));
                }
                BlockRead::Whole {
                    header,
                    key: k,
                    value,
                } if k == key => {
                    let found = Found {
                        position: *p,
                        word: s.word(),
                        header,
                    };
                    return Ok(Ok(Some((found, value.to_vec()))));
                }
                BlockRead::Whole { .. } => {}
            }
        }
        Ok(Ok(None))
    }

    async fn get(&mut self, io: &Io, key: &[u8]) -> Result<Attempt, Error> {
        let place = self.layout.place(key);
        let deadline = self.deadline(io.now());
        let Ok(b) = self.read_buckets(io, &place, deadline).await? else {
            return Ok(Attempt::Retry);
        };
        let matches = b.matches(place.fp);
        Ok(match self.find(io, key, &matches, deadline).await? {
            Ok(found) => Attempt::Done(Ok(Response::Get(found.map(|(_, v)| v)))),
            Err(()) => Attempt::Retry,
        })
    }

    /// One CAS on the home node's slot at `position`, posted before the
    /// attempt's margin and given up at its `deadline` (a completion that
    /// has not come by then is an unknown outcome, as any failed one).
    async fn cas_slot(
        &self,
        io: &Io,
        place: &KeyPlace,
        (position, expect, new): (usize, u64, u64),
        deadline: Nanos,
    ) -> Result<u64, Error> {
        let addr = RemoteAddr::data(place.home, place.slot_offset(position));
        let r = io
            .round_by(
                vec![Op::Cas { addr, expect, new }],
                OpClass::Index,
                deadline,
            )
            .await;
        cas_previous(&r[0])
    }

    /// Marks the block `slot` names freed (its unlinker's duty), from the
    /// live header word read with it.
    async fn free_block(&mut self, io: &Io, slot: Slot, header: u64) {
        let within = self.cfg.deadline_margin;
        if !self
            .alloc
            .mark_freed(io, (slot.node, slot.offset), header, within)
            .await
        {
            self.counters.leaked += 1;
        }
    }

    async fn write(&mut self, io: &Io, op: KvRequest<'_>) -> Result<Attempt, Error> {
        let key = op.key();
        let place = self.layout.place(key);
        let start = io.now();
        let deadline = self.deadline(start);
        // The new block, written out of place before anything links it.
        let block = match op {
            KvRequest::Put(_, value) => {
                let b = self.alloc.write_block(io, key, value).await?;
                Some((b, block_len(key.len(), value.len())))
            }
            _ => None,
        };
        let outcome = self.write_linked(io, op, &place, block, deadline).await;
        let linked = matches!(
            outcome,
            Ok(Attempt::Done(Ok(_) | Err(Error::OutcomeUnknown(_))))
        );
        if let (false, Some((b, _))) = (linked, block) {
            // Nothing linked the block (a READ failed, the attempt ran out
            // of time, lost a race before its CAS or found the table
            // full): free at once. A block whose CAS's outcome is unknown
            // stays out (leaked).
            self.alloc.unpublished(b);
        }
        outcome
    }

    async fn write_linked(
        &mut self,
        io: &Io,
        op: KvRequest<'_>,
        place: &KeyPlace,
        block: Option<(Block, u64)>,
        deadline: Nanos,
    ) -> Result<Attempt, Error> {
        let key = op.key();
        let Ok(b) = self.read_buckets(io, place, deadline).await? else {
            return Ok(Attempt::Retry);
        };
        let matches = b.matches(place.fp);
        let Ok(found) = self.find(io, key, &matches, deadline).await? else {
            return Ok(Attempt::Retry);
        };
        if io.now().plus(self.cfg.deadline_margin) >= deadline {
            return Ok(Attempt::Retry);
        }
        let new = block.map(|(b, len)| {
            Slot {
                fp: place.fp,
                units: (len / BLOCK_UNIT) as u8,
                node: self.id.node,
                offset: b.offset,
            }
            .word()
        });
        match (found.map(|(f, _)| f), new) {
            // DELETE of an absent key.
            (None, None) => Ok(Attempt::Done(Ok(Response::Delete(false)))),
            // Update or delete in place: one CAS on the key's slot.
            (Some(f), new) => {
                let prev = match self
                    .cas_slot(io, place, (f.position, f.word, new.unwrap_or(0)), deadline)
                    .await
                {
                    Ok(prev) => prev,
                    Err(e) => return Ok(self.unknown(block.map(|b| b.0), e)),
                };
                if prev != f.word {
                    return Ok(Attempt::Retry);
                }
                if let Some(old) = Slot::from_word(f.word) {
                    self.free_block(io, old, f.header).await;
                }
                Ok(Attempt::Done(Ok(match op {
                    KvRequest::Delete(_) => Response::Delete(true),
                    _ => Response::Put(true),
                })))
            }
            // Insert: an empty slot, then the duplicate check.
            (None, Some(new)) => {
                let Some(p) = b.empty_position() else {
                    // RACE would resize here (§3.4); not built.
                    return Ok(Attempt::Done(Err(Error::TableFull { depth: 0 })));
                };
                let prev = match self.cas_slot(io, place, (p, 0, new), deadline).await {
                    Ok(prev) => prev,
                    Err(e) => return Ok(self.unknown(block.map(|b| b.0), e)),
                };
                if prev != 0 {
                    return Ok(Attempt::Retry);
                }
                let header = block.map_or(0, |b| b.0.live_word());
                self.remove_duplicates(io, key, place, p, (new, header), deadline)
                    .await;
                Ok(Attempt::Done(Ok(Response::Put(false))))
            }
        }
    }

    /// A linking CAS's outcome is unknown: its block stays out of
    /// circulation.
    fn unknown(&mut self, block: Option<Block>, e: Error) -> Attempt {
        if block.is_some() {
            self.counters.leaked += 1;
        }
        if self.unknown_as_timeout {
            return Attempt::Done(Err(Error::Timeout));
        }
        Attempt::Done(Err(UnknownOutcome::new(UnknownStep::SlotCas, e).into()))
    }

    /// §4.2's duplicate check after an insert linked `ours` at `position`:
    /// re-read the combined buckets; keep the first position holding the
    /// key and empty every other one (ours included, if it is not first).
    /// The insert is linked whatever happens here: a failure leaves a
    /// duplicate, counted.
    async fn remove_duplicates(
        &mut self,
        io: &Io,
        key: &[u8],
        place: &KeyPlace,
        position: usize,
        (ours, ours_header): (u64, u64),
        deadline: Nanos,
    ) {
        let Ok(Ok(b)) = self.read_buckets(io, place, deadline).await else {
            self.counters.duplicate_checks_skipped += 1;
            return;
        };
        // Our slot counts only if it still holds our block: another client
        // may have updated or deleted it since our CAS (and deduplicating
        // on behalf of a slot that is gone would remove the key's current
        // value: the swarm found that at seed 21 of the timing-faults
        // family).
        let still_ours = b.words[position] == ours;
        let others: Vec<(usize, Slot)> = b
            .matches(place.fp)
            .into_iter()
            .filter(|&(p, s)| !(p == position && s.word() == ours))
            .collect();
        if others.is_empty() {
            return;
        }
        // Which of the others hold the key (each READ on its own: a torn
        // or reused block holds no key of ours).
        let own = io.own();
        let ops = others
            .iter()
            .map(|(_, s)| block_read(own, s.addr(), s.read_len()))
            .collect();
        let r = io.round_by(ops, OpClass::Data, deadline).await;
        if io.now().plus(self.cfg.deadline_margin) >= deadline {
            self.counters.duplicate_checks_skipped += 1;
            return;
        }
        let mut holders: Vec<(usize, u64, u64)> = Vec::new();
        if still_ours {
            holders.push((position, ours, ours_header));
        }
        for ((p, s), r) in others.iter().zip(&r) {
            let Ok(bytes) = read_bytes(r) else {
                self.counters.duplicate_checks_skipped += 1;
                return;
            };
            if let BlockRead::Whole { header, key: k, .. } = RaceLayout::decode_block(bytes) {
                if k == key {
                    holders.push((*p, s.word(), header));
                }
            }
        }
        holders.sort_unstable_by_key(|h| h.0);
        for &(p, w, header) in holders.iter().skip(1) {
            if io.now().plus(self.cfg.deadline_margin) >= deadline {
                // No CAS on a word read this attempt after its margin (the
                // word could recur once its block is reused).
                self.counters.duplicate_checks_skipped += 1;
                return;
            }
            match self.cas_slot(io, place, (p, w, 0), deadline).await {
                Ok(prev) if prev == w => {
                    self.counters.duplicates_removed += 1;
                    if let Some(s) = Slot::from_word(w) {
                        self.free_block(io, s, header).await;
                    }
                }
                Ok(_) => {}
                Err(_) => {
                    self.counters.duplicate_checks_skipped += 1;
                    return;
                }
            }
        }
    }
}

impl ClientLogic for RaceCore {
    fn system(&self) -> &'static str {
        "race"
    }

    fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    fn registry(&self) -> Registry {
        Registry::after(self.layout.region_bytes(), self.cfg.clients_per_node)
    }

    fn check(&self, op: KvRequest<'_>) -> Result<(), Error> {
        // The layout was checked when the client or deployment was made
        // (`RaceLayout::check`).
        check_one_sided(&self.cfg, op)
    }

    async fn attempt(&mut self, io: &Io, op: KvRequest<'_>, _budget: &mut RetryBudget) -> Attempt {
        let r = match op {
            KvRequest::Get(key) => self.get(io, key).await,
            KvRequest::Put(..) | KvRequest::Delete(_) => self.write(io, op).await,
            KvRequest::Scan { .. } => Err(Error::Unsupported("scan")),
        };
        match r {
            Ok(a) => a,
            // A READ (or the block's CPU write) failed before anything was
            // linked: nothing committed.
            Err(e) => Attempt::Done(Err(e)),
        }
    }

    fn set_switches(&mut self, switches: CoreSwitches) {
        self.set_reuse_without_hold(switches.reuse_without_hold);
    }
}

/// A RACE client (blocking).
pub type RaceClient<E> = BlockingClient<RaceCore, E>;

impl<E: Endpoint> BlockingClient<RaceCore, E> {
    /// Client `id` on endpoint `ep` (an endpoint on `id.node`).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid store or a layout whose addresses
    /// do not fit a slot word ([`RaceLayout::check`]); otherwise as
    /// [`BlockingClient::from_core`].
    pub fn new(cfg: Arc<Config>, id: ClientId, ep: E) -> Result<RaceClient<E>, Error> {
        let layout = RaceLayout::new(&cfg);
        layout.check()?;
        BlockingClient::from_core(RaceCore::new(cfg, layout, id), id, ep)
    }

    /// What this client counted so far.
    pub fn counters(&self) -> RaceCounters {
        self.core.counters()
    }
}
