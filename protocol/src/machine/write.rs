//! PUT and DELETE: candidate choice, install, verification, commit.
//!
//! Steps (docs/protocol.md, "PUT" and "DELETE"):
//! 1. Read all N candidate buckets (B index table entries each, one READ per
//!    bucket) in one round; read the header and key of every entry whose
//!    filter bits match (cache, CPU or RDMA READ).
//! 2. Help or back off: an in-progress entry of the key whose owner is past its
//!    deadline is reclaimed, an aborted one is restored, a committed MIGRATE
//!    copy still linked at its source has its source cleared (then restart);
//!    an in-progress entry of the key within its deadline means conflict.
//! 3. Choose the candidate: the one holding the key if any (never more than one),
//!    else the first empty one, else MIGRATE to free one (then restart).
//!    DELETE of an absent key certifies absence by re-reading all candidates,
//!    and so does a PUT before it answers `TableFull`.
//! 4. Write the new entry (state `Writing`, previous version = the candidate's
//!    word) into the client's own data table by CPU.
//! 5. CAS the candidate from the word read to the new entry.
//! 6. Verify (inserts, and updates of a committed MIGRATE copy): re-read the
//!    other candidates (every bucket holding one); any change means a
//!    concurrent operation may have created a second entry for the key:
//!    abort (state CAS `Writing -> Aborted`, restore the candidate) and
//!    report a conflict. An update of any other holder skips it: its install
//!    CAS landed on the key's one committed version.
//! 7. Commit: CAS the state word `Writing -> Valid` (PUT) or `-> Deleted`
//!    (DELETE) through the NIC. This is the linearization point. If its
//!    completion fails or never arrives, the owner settles the outcome with
//!    one more CAS on the same word (the commit again while the margin
//!    allows, else `Writing -> Aborted`): its result says whether the entry
//!    committed. Only if that completion fails too is the outcome unknown.
//! 8. DELETE unlinks its tombstone (CAS to empty); both mark the entries they
//!    unlinked for recycling. Nothing after the commit can fail the
//!    operation: a failed mark leaks the entry (counted), a failed unlink
//!    leaves a harmless tombstone.
//!
//! Every entry the attempt unlinked (or may have: a CAS of unknown outcome)
//! and does not mark, and its own entry when it gives up not knowing whether
//! the install linked it, is counted in `OpStats::leaked`: the simulator's
//! data-table audit holds the protocol to that count.
//!
//! Errors before the commit mean nothing was committed; where the last CAS's
//! outcome is unknown (its completion failed), the owner aborts its entry
//! before reporting the error, so that the key is not blocked until the
//! deadline.

use crate::addr::{DteAddr, IteAddr};
use crate::config::MigrateSearch;
use crate::error::{Error, UnknownOutcome, UnknownStep};
use crate::layout::{DataEntryHeader, DteKind, DteState, IndexEntry, RecycleWord, StateWord};
use crate::machine::alloc_step::AllocStep;
use crate::machine::context::{Cx, DteView};
use crate::machine::io::{
    bucket_words, buckets_unchanged, cas_previous, commit_won, written, Results,
};
use crate::machine::migrate::Migrate;
use crate::machine::recover::{Destination, Recover};
use crate::machine::search::{CuckooSearch, Found};
use crate::machine::sweep::Sweep;
use crate::machine::Logic;
use crate::time::Nanos;

/// Whether a write stores a value or deletes the key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WriteKind {
    /// PUT this value.
    Put(Vec<u8>),
    /// DELETE the key.
    Delete,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Start,
    /// Helping the growth of the index by one step of its sweep, before
    /// anything of the write (docs/protocol.md §2.5).
    Helping(Box<Sweep>),
    AwaitScan,
    AwaitScanDtes(Vec<usize>),
    Recovering(Recover),
    AwaitHelp,
    /// Re-reading every candidate bucket to certify the key absent: for a
    /// DELETE that found no holder (answers `false`), or for a PUT whose
    /// search found no chain (`refusal`: answers `TableFull`).
    AwaitCertify {
        refusal: bool,
    },
    /// Growing the index: the directory word from stable to growing, or a
    /// growth extended by a generation.
    Growing(Box<Sweep>, GrowFor),
    Searching(Box<CuckooSearch>),
    Migrating(Box<Migrate>),
    AwaitAllocScan,
    AwaitWrite,
    AwaitInstall,
    AwaitVerify(Vec<usize>),
    AwaitCommit,
    AwaitSettle,
    Aborting(Recover),
    AwaitCleanup,
    AwaitMarks(bool),
}

/// Why a write grows the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum GrowFor {
    /// It found no room for its own key (certified absent): it answers
    /// what came of the growth.
    Refusal,
    /// An earlier write found no room and had no time left to grow: this
    /// one grows first, then does its own work.
    Earlier,
}

/// The logic of one PUT or DELETE attempt.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriteLogic {
    key: Vec<u8>,
    kind: WriteKind,
    cands: Vec<IteAddr>,
    filter: u16,
    words: Vec<IndexEntry>,
    views: Vec<Option<DteView>>,
    phase: Phase,
    restarts: u32,
    scan_posted_at: Nanos,
    migrate_source: usize,
    migrate_conflicts: u32,
    /// The MIGRATE running moves a key out of an old generation so that
    /// this insert may go into the newest ([`WriteLogic::seal_before_insert`]).
    sealing: bool,
    /// What an owner abort reports once it is done (`Conflict` after a failed
    /// verification; the error that made the outcome of a CAS unknown).
    abort_reason: Option<Error>,
    /// Whether the commit CAS has been posted again to settle its outcome.
    settling: bool,
    target: usize,
    existed: bool,
    /// Whether the install is verified (step 6): always for an insert (no
    /// holder) and after a holder that is a committed MIGRATE copy; an
    /// update of any other holder commits on its install alone.
    verify: bool,
    alloc: AllocStep,
    new_dte: Option<DteAddr>,
    new_header: Option<DataEntryHeader>,
}

type Out = Option<Result<bool, Error>>;

/// Broken paths (the table changed under a planned chain of moves) after
/// which a breadth-first PUT gives the attempt up as a conflict.
const MAX_PATH_CONFLICTS: u32 = 2;

#[track_caller]
fn conflict() -> Out {
    tracing::debug!(at = %std::panic::Location::caller(), "write: conflict");
    Some(Err(Error::Conflict))
}

impl WriteLogic {
    /// A PUT or DELETE of `key`.
    pub fn new(key: Vec<u8>, kind: WriteKind) -> WriteLogic {
        WriteLogic {
            key,
            kind,
            cands: Vec::new(),
            filter: 0,
            words: Vec::new(),
            views: Vec::new(),
            phase: Phase::Start,
            restarts: 0,
            scan_posted_at: Nanos::ZERO,
            migrate_source: 0,
            migrate_conflicts: 0,
            sealing: false,
            abort_reason: None,
            settling: false,
            target: 0,
            existed: false,
            verify: true,
            alloc: AllocStep::default(),
            new_dte: None,
            new_header: None,
        }
    }

    fn is_delete(&self) -> bool {
        matches!(self.kind, WriteKind::Delete)
    }

    fn scan(&mut self, cx: &mut Cx<'_>) -> Out {
        self.restarts += 1;
        if self.restarts > 4 + 4 * u32::from(cx.cfg().max_migrate_depth) {
            return conflict();
        }
        self.scan_posted_at = cx.now;
        let buckets: Vec<usize> = cx.all_buckets(&self.cands).collect();
        cx.read_buckets(&self.cands, &buckets);
        self.phase = Phase::AwaitScan;
        None
    }

    fn on_scan(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        match bucket_words(results, cx.bucket_len()) {
            Ok(ws) => self.words = ws,
            Err(e) => return Some(Err(e)),
        }
        if cx.any_behind(&self.words) {
            // The index grew past this client's view: nothing was written;
            // the next attempt reads the directory first.
            return conflict();
        }
        self.views = vec![None; self.cands.len()];
        // A cached entry stays valid for T from when its index entry was read,
        // i.e. from when that READ was posted (not when we got to process it).
        let read_at = if cx.client.faults.cache_time_from_completion {
            cx.now
        } else {
            self.scan_posted_at
        };
        let mut reads = Vec::new();
        for (i, &w) in self.words.iter().enumerate() {
            let Some(dte) = w.dte().filter(|_| w.filter_matches(self.filter)) else {
                continue;
            };
            match cx.cached_view(w, read_at) {
                Some(v) => self.views[i] = Some(v),
                None => {
                    cx.read_dte(dte, false);
                    reads.push(i);
                }
            }
        }
        if reads.is_empty() {
            self.decide(cx)
        } else {
            self.phase = Phase::AwaitScanDtes(reads);
            None
        }
    }

    fn decide(&mut self, cx: &mut Cx<'_>) -> Out {
        let mut holders = Vec::new();
        for i in 0..self.cands.len() {
            let Some(v) = self.views[i].as_ref().filter(|v| v.key == self.key) else {
                continue;
            };
            let st = v.header.state;
            match st.state {
                DteState::Writing if !cx.owner_expired(v.header.deadline) => return conflict(),
                DteState::Writing | DteState::Aborted => {
                    self.phase =
                        Phase::Recovering(Recover::reclaim(self.cands[i], self.words[i], v));
                    return self.step_recover(cx, Vec::new());
                }
                DteState::Free => return conflict(),
                DteState::Valid | DteState::Deleted => {
                    if cx.copy_at_source(&st, i) {
                        // A committed MIGRATE copy still linked at its source:
                        // finish the move for its owner (sealing the source
                        // if the move was a growth's).
                        if !cx.may_mutate() {
                            return Some(Err(Error::Timeout));
                        }
                        let done = cx.finished_source(&st, self.words[i]);
                        cx.cas_ite(self.cands[i], self.words[i], done);
                        cx.io.stats.helps += 1;
                        self.phase = Phase::AwaitHelp;
                        return None;
                    }
                    holders.push(i);
                }
            }
        }
        if holders.len() > 1 {
            return conflict();
        }
        if let Some(&c) = holders.first() {
            let committed = self.views[c].as_ref().map(|v| v.header.state.state);
            self.existed = committed == Some(DteState::Valid);
            if self.is_delete() && !self.existed {
                // The key's committed state is a tombstone: already absent.
                return Some(Ok(false));
            }
            self.target = c;
            // An update's install CAS is its own check: it lands only on the
            // holder's word, the key's one committed version at that instant
            // (I1), linked nowhere else unless it is a MIGRATE copy whose
            // source the scan may have read before the key was there.
            let copy =
                self.views[c].as_ref().and_then(|v| v.header.state.kind) == Some(DteKind::Migrate);
            self.verify = copy && !cx.client.faults.skip_copy_update_verify;
            return self.prepare(cx);
        }
        self.existed = false;
        self.verify = true;
        if self.is_delete() {
            return self.certify_absence(cx, false);
        }
        if let Some(out) = self.seal_before_insert(cx) {
            return out;
        }
        let empty = (0..self.words.len()).find(|&i| self.words[i].is_empty() && cx.is_target(i));
        if let Some(e) = empty {
            self.target = e;
            return self.prepare(cx);
        }
        if cx.cfg().migrate_search == MigrateSearch::BreadthFirst {
            if self.migrate_conflicts > MAX_PATH_CONFLICTS {
                return conflict();
            }
            let roots: Vec<usize> = (0..self.cands.len()).filter(|&i| cx.is_target(i)).collect();
            let cands: Vec<IteAddr> = roots.iter().map(|&i| self.cands[i]).collect();
            let words: Vec<IndexEntry> = roots.iter().map(|&i| self.words[i]).collect();
            let (s, out) = CuckooSearch::start(cx, &cands, &words);
            self.phase = Phase::Searching(Box::new(s));
            return self.on_search(cx, out);
        }
        if self.migrate_source >= self.cands.len() {
            if self.migrate_conflicts > 0 {
                // Some source met interference: worth another attempt.
                return conflict();
            }
            return self.refuse(cx);
        }
        if !cx.is_target(self.migrate_source) {
            self.migrate_source += 1;
            return self.decide(cx);
        }
        let m = Migrate::new(self.cands[self.migrate_source], self.cands.clone());
        self.phase = Phase::Migrating(Box::new(m));
        self.step_migrate(cx, Vec::new())
    }

    /// While the index grows, an insert goes into the newest generation, and
    /// only once the key has an entry holding the growth seal in each old
    /// one (G1: so that a client whose view ends in any of them meets a seal
    /// and learns of the growth before it answers): in the oldest old
    /// generation without one, the PUT seals an empty entry of the key's, or
    /// moves the key of one into the newest generation (a growth's move,
    /// which seals its source), then scans again (docs/protocol.md §2.5).
    fn seal_before_insert(&mut self, cx: &mut Cx<'_>) -> Option<Out> {
        if !cx.client.view.growing() || cx.client.faults.grow_insert_unsealed {
            return None;
        }
        // The oldest old generation in which none of the key's entries is
        // sealed, if any: its positions.
        let per = cx.per_generation();
        let old = (0..usize::from(cx.client.view.span()) - 1)
            .map(|g| (g * per..(g + 1) * per).collect::<Vec<usize>>())
            .find(|ps| !ps.iter().any(|&i| self.words[i].is_growth_seal()))?;
        if !cx.may_mutate() {
            return Some(Some(Err(Error::Timeout)));
        }
        if let Some(&e) = old.iter().find(|&&i| self.words[i].is_empty()) {
            cx.cas_ite(self.cands[e], self.words[e], IndexEntry::GROWTH_SEAL);
            cx.io.stats.growth_seals += 1;
            self.phase = Phase::AwaitHelp;
            return Some(None);
        }
        let source = old.get(self.migrate_source.min(old.len().saturating_sub(1)))?;
        let m = Migrate::new(self.cands[*source], self.cands.clone());
        self.phase = Phase::Migrating(Box::new(m));
        self.sealing = true;
        Some(self.step_migrate(cx, Vec::new()))
    }

    /// Re-reads every candidate bucket, so that an answer resting on the
    /// key's absence (a DELETE's `false`, a PUT's `TableFull`) holds at an
    /// instant: the scan's reads may straddle a MIGRATE of the key (one
    /// bucket read before the copy landed there, the other after its
    /// source was cleared), and then saw the key nowhere.
    fn certify_absence(&mut self, cx: &mut Cx<'_>, refusal: bool) -> Out {
        let buckets = cx.all_buckets_reversed(&self.cands);
        cx.read_buckets(&self.cands, &buckets);
        self.phase = Phase::AwaitCertify { refusal };
        None
    }

    /// No chain of moves frees a candidate: `TableFull`, once the key's
    /// absence is certified (a refused insert of a key that was present
    /// would be a wrong answer, never retried).
    fn refuse(&mut self, cx: &mut Cx<'_>) -> Out {
        if cx.client.faults.table_full_uncertified {
            return Some(Err(Error::TableFull {
                depth: cx.cfg().max_migrate_depth,
            }));
        }
        self.certify_absence(cx, true)
    }

    /// No chain of moves frees a candidate, the key certified absent: the
    /// index grows if it can (the PUT moves the directory word from stable
    /// to growing, and its next attempt inserts in the new generation),
    /// else the insert is refused: `TableFull` for an index that never
    /// grows, `IndexAtLimit` for one in its last generation. While the
    /// index already grows, its new generation fills only as the growth
    /// goes on: a retryable conflict.
    fn grow_or_refuse(&mut self, cx: &mut Cx<'_>) -> Out {
        if cx.cfg().index_generations <= 1 {
            return Some(Err(Error::TableFull {
                depth: cx.cfg().max_migrate_depth,
            }));
        }
        if !cx.may_mutate() {
            // The search took the attempt's time: the next write grows the
            // index before anything else (a search would take it again).
            cx.client.growth_wanted = true;
            return Some(Err(Error::Timeout));
        }
        let sweep = Sweep::grow(cx.client.view);
        self.phase = Phase::Growing(Box::new(sweep), GrowFor::Refusal);
        self.step_grow(cx, Vec::new())
    }

    /// The growth a PUT that found no room asked for: whoever moved the
    /// directory, the client's view follows it, and the PUT tries again in
    /// it (a retryable conflict; nothing of the PUT was written).
    fn step_grow(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Growing(sweep, why) = &mut self.phase else {
            return conflict();
        };
        let why = *why;
        let out = sweep.advance(cx, results)?;
        if !matches!(out, Err(Error::Timeout)) {
            cx.client.growth_wanted = false;
        }
        match (out, why) {
            (Ok(_), GrowFor::Refusal) => conflict(),
            (Err(e @ Error::IndexAtLimit { .. }), GrowFor::Refusal) => Some(Err(e)),
            // Nothing of the PUT was written: whatever stopped the growth
            // (a transport error, a lost completion of the directory's
            // CAS, which anyone may retry), a fresh attempt may go on.
            (Err(_), GrowFor::Refusal) => Some(Err(Error::Timeout)),
            // A growth an earlier write asked for: whatever came of it,
            // this write goes on (its own key was never looked at, so an
            // `IndexAtLimit` here says nothing about it).
            (Err(Error::Timeout), GrowFor::Earlier) => Some(Err(Error::Timeout)),
            (_, GrowFor::Earlier) => self.begin(cx),
        }
    }

    /// The write proper: its candidates in the client's view (which a
    /// step of the sweep may have moved on), then its scan.
    fn begin(&mut self, cx: &mut Cx<'_>) -> Out {
        self.cands = cx.candidates(&self.key);
        self.filter = cx.filter(&self.key);
        self.scan(cx)
    }

    /// The step of the sweep a write takes while the index grows (its moves
    /// early in its attempt only: `Sweep::help`). Whatever it
    /// achieves, the write goes on: a step that gives up leaves nothing half
    /// done that the sweep's next step does not finish.
    fn step_help(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Helping(sweep) = &mut self.phase else {
            return conflict();
        };
        // Whatever came of it (a step that ran out of time too), the write
        // goes on: its own steps check their own time. A step that took
        // the attempt's time (its reads slow, or its moves) spares the
        // next write: otherwise a client could spend every attempt helping.
        let out = sweep.advance(cx, results)?;
        if matches!(out, Err(Error::Timeout)) || !crate::machine::sweep::early(cx) {
            cx.client.skip_next_help = true;
        }
        self.begin(cx)
    }

    fn step_recover(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Recovering(rec) = &mut self.phase else {
            return conflict();
        };
        match rec.advance(cx, results) {
            None => None,
            Some(Ok(())) => self.scan(cx),
            Some(Err(e)) => Some(Err(e)),
        }
    }

    fn step_search(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Searching(s) = &mut self.phase else {
            return conflict();
        };
        let out = s.advance(cx, results);
        self.on_search(cx, out)
    }

    fn on_search(&mut self, cx: &mut Cx<'_>, out: Option<Result<Found, Error>>) -> Out {
        match out? {
            Ok(Found::Path(path)) => {
                let m = Migrate::along(&path, self.cands.clone());
                self.phase = Phase::Migrating(Box::new(m));
                self.step_migrate(cx, Vec::new())
            }
            // An entry in progress kept the search from exploring all it
            // could: another attempt may find a path.
            Ok(Found::NoPath { blocked: true, .. }) => conflict(),
            Ok(Found::NoPath { .. }) => self.refuse(cx),
            // The table may have room; this attempt could not afford to look
            // (issue 24, hole 3): nothing was written, a fresh attempt may.
            Ok(Found::Unaffordable) => Some(Err(Error::Timeout)),
            Err(e) => Some(Err(e)),
        }
    }

    fn step_migrate(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Migrating(m) = &mut self.phase else {
            return conflict();
        };
        let sealing = std::mem::take(&mut self.sealing);
        match m.advance(cx, results) {
            None => {
                self.sealing = sealing;
                None
            }
            Some(Ok(())) => self.scan(cx),
            // The newest generation has no room for the key that had to
            // move out of the old one: the index must grow further, as
            // for a key with no room of its own (once this one is
            // certified absent).
            Some(Err(Error::TableFull { .. })) if sealing => self.refuse(cx),
            Some(Err(Error::Conflict))
                if cx.cfg().migrate_search == MigrateSearch::BreadthFirst
                    && !cx.client.faults.conflict_ends_put =>
            {
                // The path the search found broke (the table changed since,
                // or a move is in progress on it): search again.
                self.migrate_conflicts += 1;
                self.scan(cx)
            }
            Some(Err(Error::TableFull { .. })) => {
                // Try freeing the next candidate instead.
                self.migrate_source += 1;
                self.scan(cx)
            }
            Some(Err(Error::Conflict)) if !cx.client.faults.conflict_ends_put => {
                // Interference at this source (e.g. a move in progress there)
                // says nothing about the others: try the next one.
                self.migrate_conflicts += 1;
                self.migrate_source += 1;
                self.scan(cx)
            }
            Some(Err(e)) => Some(Err(e)),
        }
    }

    fn prepare(&mut self, cx: &mut Cx<'_>) -> Out {
        let len = match &self.kind {
            WriteKind::Put(v) => v.len(),
            WriteKind::Delete => 0,
        };
        let class = match cx.class_for(self.key.len(), len) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        match self.alloc.start(cx, class) {
            Ok(Some(d)) => self.write_entry(cx, d),
            Ok(None) => {
                self.phase = Phase::AwaitAllocScan;
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    fn write_entry(&mut self, cx: &mut Cx<'_>, d: DteAddr) -> Out {
        let (kind, value): (DteKind, &[u8]) = match &self.kind {
            WriteKind::Put(v) => (DteKind::Put, v),
            WriteKind::Delete => (DteKind::Delete, &[]),
        };
        let header = DataEntryHeader {
            state: StateWord {
                state: DteState::Writing,
                kind: Some(kind),
                src: 0,
                dst: 0,
                incarnation: cx.incarnation(d),
                key_len: self.key.len() as u16,
                value_len: value.len() as u32,
            },
            deadline: cx.deadline.0,
            recycle: RecycleWord::unmarked(cx.deadline.0),
            prev: self.words[self.target].0,
        };
        let bytes = cx.encode_entry(d, &header, &self.key, value);
        if let Err(e) = cx.write_dte(d, bytes) {
            return Some(Err(e));
        }
        self.new_dte = Some(d);
        self.new_header = Some(header);
        self.phase = Phase::AwaitWrite;
        None
    }

    fn new_word(&self) -> Option<IndexEntry> {
        let incarnation = self.new_header?.state.incarnation;
        Some(IndexEntry::new(self.new_dte?, incarnation, self.filter))
    }

    fn install(&mut self, cx: &mut Cx<'_>) -> Out {
        let (Some(d), Some(new)) = (self.new_dte, self.new_word()) else {
            return conflict();
        };
        if !cx.may_mutate() {
            cx.client.alloc.release_unpublished(d);
            return Some(Err(Error::Timeout));
        }
        cx.cas_ite(self.cands[self.target], self.words[self.target], new);
        self.phase = Phase::AwaitInstall;
        None
    }

    fn on_install(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let d = self.new_dte?;
        let prev = match cas_previous(&results[0]) {
            Ok(p) => p,
            Err(e) => {
                // Unknown whether the install landed: nothing is committed,
                // but the entry may be linked. Abort it ourselves (the owner
                // may, at any time) rather than block the key until our
                // deadline; then report the error.
                return self.abort(cx, e, true);
            }
        };
        if prev != self.words[self.target].0 {
            cx.client.alloc.release_unpublished(d);
            return conflict();
        }
        if !self.verify || cx.client.faults.skip_put_verify {
            return self.commit(cx);
        }
        // Every bucket holding a candidate other than the target, last first
        // (the target's own bucket too, unless the target is all of it).
        let skip_own = cx.client.faults.verify_other_buckets_only;
        let mut others = cx.buckets_beside(&self.cands, self.target, skip_own);
        others.reverse();
        if others.is_empty() {
            return self.commit(cx);
        }
        cx.read_buckets(&self.cands, &others);
        self.phase = Phase::AwaitVerify(others);
        None
    }

    fn on_verify(&mut self, cx: &mut Cx<'_>, others: &[usize], results: &Results) -> Out {
        let b = cx.bucket_len();
        match buckets_unchanged(others, results, &self.words, b, Some(self.target)) {
            Ok(true) => self.commit(cx),
            Ok(false) => self.abort(cx, Error::Conflict, false),
            Err(e) => self.abort(cx, e, false),
        }
    }

    /// Aborts our installed, uncommitted entry, then reports `reason`
    /// (`link_unknown`: the install's outcome is unknown).
    fn abort(&mut self, cx: &mut Cx<'_>, reason: Error, link_unknown: bool) -> Out {
        let (Some(d), Some(h), Some(new)) = (self.new_dte, self.new_header, self.new_word()) else {
            return conflict();
        };
        tracing::debug!(dte = %d, %reason, "aborting our entry");
        let rec = Recover::owner_abort(
            self.cands[self.target],
            new,
            d,
            h,
            self.key.clone(),
            Destination::NotInstalled,
            link_unknown,
        );
        self.abort_reason = Some(reason);
        self.phase = Phase::Aborting(rec);
        self.step_abort(cx, Vec::new())
    }

    fn step_abort(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Aborting(rec) = &mut self.phase else {
            return conflict();
        };
        let done = rec.advance(cx, results)?;
        match self.abort_reason.take() {
            // A failed verification: a conflict, unless the abort itself failed.
            None | Some(Error::Conflict) => Some(done.and(Err(Error::Conflict))),
            // The outcome of our CAS was unknown; the abort settled it as "not
            // committed" (or could not, which changes nothing: the entry is
            // uncommitted either way). Report what went wrong first.
            Some(reason) => Some(Err(reason)),
        }
    }

    fn commit(&mut self, cx: &mut Cx<'_>) -> Out {
        let (Some(d), Some(h)) = (self.new_dte, self.new_header) else {
            return conflict();
        };
        if !cx.may_mutate() {
            // Too late to commit safely; a reclaimer will abort the entry.
            return Some(Err(Error::Timeout));
        }
        let to = if self.is_delete() {
            DteState::Deleted
        } else {
            DteState::Valid
        };
        cx.cas_state(d, h.state.encode(), h.state.with_state(to).encode());
        self.phase = Phase::AwaitCommit;
        None
    }

    fn on_commit(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let h = self.new_header?;
        match commit_won(&results[0], h.state.encode()) {
            Ok(true) => self.committed(cx),
            Ok(false) if self.settling => {
                // Our second commit found the word changed: by the first
                // commit (committed) or by a reclaimer's abort (not).
                match cas_previous(&results[0]).map(StateWord::decode) {
                    Ok(w) if w.state.is_committed() => self.committed(cx),
                    _ => Some(Err(Error::Timeout)),
                }
            }
            // Reclaimed after our deadline: the attempt did not take effect.
            Ok(false) => Some(Err(Error::Timeout)),
            Err(e) if cx.client.faults.errors_after_commit_retryable => Some(Err(e)),
            Err(e) => self.settle(cx, e),
        }
    }

    /// The commit's completion failed or never came: the commit may or may
    /// not have executed. One more CAS on the state word settles it: the
    /// commit again while the margin allows (it fails harmlessly if the first
    /// one landed), else `Writing -> Aborted`, which is safe at any time for
    /// the owner and makes any late commit fail.
    fn settle(&mut self, cx: &mut Cx<'_>, e: Error) -> Out {
        let (Some(d), Some(h)) = (self.new_dte, self.new_header) else {
            return conflict();
        };
        if self.settling {
            self.unknown_commit(cx);
            tracing::debug!(dte = %d, error = %e, "the settling CAS failed too");
            return Some(Err(UnknownOutcome::new(UnknownStep::Commit, e).into()));
        }
        self.settling = true;
        cx.io.stats.settled_commits += 1;
        tracing::debug!(dte = %d, error = %e, "commit completion failed: settling its outcome");
        let to = if self.is_delete() {
            DteState::Deleted
        } else {
            DteState::Valid
        };
        if cx.may_mutate() {
            cx.cas_state(d, h.state.encode(), h.state.with_state(to).encode());
            self.phase = Phase::AwaitCommit;
        } else {
            let aborted = h.state.with_state(DteState::Aborted).encode();
            cx.cas_state(d, h.state.encode(), aborted);
            self.phase = Phase::AwaitSettle;
        }
        None
    }

    /// The result of the settling abort: the state word as it was.
    fn on_settle(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let h = self.new_header?;
        match cas_previous(&results[0]) {
            Ok(p) if p == h.state.encode() => {
                // We aborted it: it never committed. Reclaimers unlink it.
                Some(Err(Error::Timeout))
            }
            Ok(p) if StateWord::decode(p).state.is_committed() => self.committed(cx),
            Ok(_) => Some(Err(Error::Timeout)),
            Err(e) => {
                self.unknown_commit(cx);
                Some(Err(UnknownOutcome::new(UnknownStep::Commit, e).into()))
            }
        }
    }

    /// The commit's outcome stays unknown: if it executed, the previous
    /// version is unlinked for good and nobody marks it (counted as leaked).
    fn unknown_commit(&mut self, cx: &mut Cx<'_>) {
        if self.words[self.target].dte().is_some() {
            cx.io.stats.leaked += 1;
        }
    }

    /// The commit took effect: from here on the operation has succeeded, and
    /// nothing that follows may report otherwise.
    fn committed(&mut self, cx: &mut Cx<'_>) -> Out {
        let new = self.new_word()?;
        tracing::trace!(existed = self.existed, "committed");
        if self.is_delete() && cx.may_mutate() {
            cx.cas_ite(self.cands[self.target], new, new.emptied());
            self.phase = Phase::AwaitCleanup;
            return None;
        }
        self.mark_old(cx);
        self.finish(cx)
    }

    fn mark_old(&mut self, cx: &mut Cx<'_>) {
        if let Some(old) = self.words[self.target].dte() {
            if cx.client.faults.skip_recycle_mark {
                // Broken variant: the previous version leaks, uncounted.
                return;
            }
            // The header we read of the previous version (we verified its
            // key before replacing it): its incarnation's recycle word.
            let seen = self.views[self.target]
                .as_ref()
                .filter(|v| v.addr == old)
                .map(|v| v.header.recycle);
            match seen {
                Some(seen) if cx.may_mutate() => {
                    cx.mark_recycle(old, seen);
                }
                _ => {
                    // Too late to mark it (or never read): leaked (counted).
                    cx.io.stats.leaked += 1;
                }
            }
        }
    }

    fn finish(&mut self, cx: &mut Cx<'_>) -> Out {
        if cx.io.has_outbox() {
            self.phase = Phase::AwaitMarks(self.existed);
            None
        } else {
            Some(Ok(self.existed))
        }
    }

    fn on_cleanup(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        // A failed unlink leaves the tombstone linked, which is harmless
        // (docs/protocol.md §5.3): the DELETE has succeeded either way.
        let new = self.new_word()?;
        match cas_previous(&results[0]) {
            Ok(p) if p == new.0 && cx.may_mutate() => {
                if let (Some(d), Some(h)) = (self.new_dte, self.new_header) {
                    cx.mark_recycle(d, h.recycle);
                }
            }
            // The tombstone unlinked too late to mark it, or maybe unlinked
            // (the CAS's outcome is unknown): leaked (counted).
            Ok(p) if p == new.0 => cx.io.stats.leaked += 1,
            Err(_) => cx.io.stats.leaked += 1,
            Ok(_) => {}
        }
        self.mark_old(cx);
        self.finish(cx)
    }

    /// The recycle marks after the commit: a failed one leaks its entry (it
    /// is never reused), never the operation's result.
    fn on_marks(&mut self, cx: &mut Cx<'_>, existed: bool, results: &Results) -> Out {
        let failed = results.iter().filter(|r| written(r).is_err()).count();
        if failed > 0 {
            if cx.client.faults.errors_after_commit_retryable {
                return results.iter().try_for_each(written).err().map(Err);
            }
            cx.io.stats.leaked += failed as u64;
            tracing::warn!(failed, "recycle mark failed after the commit: entry leaked");
        }
        Some(Ok(existed))
    }
}

impl Logic for WriteLogic {
    fn key(&self) -> Option<&[u8]> {
        Some(&self.key)
    }

    type Output = bool;

    fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Option<Result<bool, Error>> {
        match std::mem::replace(&mut self.phase, Phase::Start) {
            Phase::Start => {
                if let Err(e) = cx.client.check_key(&self.key) {
                    return Some(Err(e));
                }
                if let WriteKind::Put(v) = &self.kind {
                    if let Err(e) = cx.client.check_value(v) {
                        return Some(Err(e));
                    }
                }
                if cx.client.growth_wanted && cx.cfg().index_generations > 1 {
                    let sweep = Sweep::grow(cx.client.view);
                    self.phase = Phase::Growing(Box::new(sweep), GrowFor::Earlier);
                    return self.step_grow(cx, Vec::new());
                }
                let skip = std::mem::take(&mut cx.client.skip_next_help);
                if cx.client.view.growing() && !cx.client.faults.skip_growth_help && !skip {
                    self.phase = Phase::Helping(Box::new(Sweep::help(&self.key)));
                    return self.step_help(cx, Vec::new());
                }
                self.begin(cx)
            }
            p @ Phase::Helping(_) => {
                self.phase = p;
                self.step_help(cx, results)
            }
            Phase::AwaitScan => {
                if cx.overran() {
                    return Some(Err(Error::Timeout));
                }
                self.on_scan(cx, &results)
            }
            Phase::AwaitScanDtes(reads) => {
                for (&i, r) in reads.iter().zip(&results) {
                    let Some(d) = self.words[i].dte() else {
                        continue;
                    };
                    match cx.view(d, r) {
                        Ok(v) => self.views[i] = Some(v),
                        Err(e) => return Some(Err(e)),
                    }
                }
                if cx.overran() {
                    return Some(Err(Error::Timeout));
                }
                self.decide(cx)
            }
            p @ Phase::Recovering(_) => {
                self.phase = p;
                self.step_recover(cx, results)
            }
            p @ Phase::Searching(_) => {
                self.phase = p;
                self.step_search(cx, results)
            }
            p @ Phase::Migrating(_) => {
                self.phase = p;
                self.step_migrate(cx, results)
            }
            p @ Phase::Aborting(_) => {
                self.phase = p;
                self.step_abort(cx, results)
            }
            Phase::AwaitHelp => match cas_previous(&results[0]) {
                Ok(_) => self.scan(cx),
                Err(e) => Some(Err(e)),
            },
            p @ Phase::Growing(..) => {
                self.phase = p;
                self.step_grow(cx, results)
            }
            Phase::AwaitCertify { refusal } => {
                if cx.overran() {
                    return Some(Err(Error::Timeout));
                }
                let buckets = cx.all_buckets_reversed(&self.cands);
                let b = cx.bucket_len();
                match buckets_unchanged(&buckets, &results, &self.words, b, None) {
                    Ok(true) if refusal => self.grow_or_refuse(cx),
                    Ok(true) => Some(Ok(false)),
                    Ok(false) | Err(_) => conflict(),
                }
            }
            Phase::AwaitAllocScan => match self.alloc.finish(cx, results) {
                Ok(Some(d)) => self.write_entry(cx, d),
                Ok(None) => {
                    self.phase = Phase::AwaitAllocScan;
                    None
                }
                Err(e) => Some(Err(e)),
            },
            Phase::AwaitWrite => match self.new_dte.map(|d| cx.dte_written(d, &results)) {
                Some(Ok(())) => self.install(cx),
                None => conflict(),
                Some(Err(e)) => Some(Err(e)),
            },
            Phase::AwaitInstall => self.on_install(cx, &results),
            Phase::AwaitVerify(others) => self.on_verify(cx, &others, &results),
            Phase::AwaitCommit => self.on_commit(cx, &results),
            Phase::AwaitSettle => self.on_settle(cx, &results),
            Phase::AwaitCleanup => self.on_cleanup(cx, &results),
            Phase::AwaitMarks(existed) => self.on_marks(cx, existed, &results),
        }
    }
}
