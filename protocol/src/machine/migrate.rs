//! MIGRATE: freeing a candidate index table entry by moving its key to one of
//! that key's other candidates, recursively up to a depth limit.
//!
//! One move of key K2 from source entry S (holding committed entry Y) to an
//! empty destination D (docs/protocol.md, "MIGRATE"):
//! 1. Read S and Y (with value), then K2's other candidates; pick the first
//!    empty one as D. None empty: free one of them first (a deeper frame).
//! 2. Write a copy Y' of Y into the local data table: state `Writing`, kind
//!    MIGRATE, previous version = S's word, source and destination positions.
//! 3. Lock: CAS S from Y to Y'. PUTs of K2 now back off; GETs fall back to Y,
//!    which stays the current value because nothing else can commit K2.
//! 4. Install: CAS D from empty to Y' (only while the deadline margin allows,
//!    like every mutation). On failure roll back (state CAS to `Aborted`, S
//!    back to Y) and report a conflict. If the install's completion fails (it
//!    may or may not have landed), roll back fencing D first (recover.rs).
//! 5. Commit: CAS Y'.state `Writing -> Valid` (no change to the key's value).
//! 6. Finish: CAS S from Y' to empty (anyone may do this once Y' is valid,
//!    from either side: a MIGRATE that meets the copy at D helps too), and
//!    mark Y for recycling.
//!
//! Locking the source before installing the copy is a departure from the
//! paper (which installs at the destination first): it keeps a GET that falls
//! back to Y from returning a value a concurrent PUT has already replaced.
//!
//! Past the attempt's deadline only reads are discarded (they may have read
//! a reused entry); the result of a CAS is still the truth, so a CAS phase
//! goes on to its own handler, which posts nothing more and ends the
//! attempt, counting what it leaves unmarked. Every entry a frame unlinked
//! (or may have: a CAS of unknown outcome) and does not mark, and its own
//! copy when it gives up not knowing whether the lock linked it, is counted
//! in `OpStats::leaked`.

use crate::addr::{DteAddr, IteAddr};
use crate::error::{CorruptionKind, Error};
use crate::layout::{DataEntryHeader, DteKind, DteState, IndexEntry, RecycleWord, StateWord};
use crate::machine::alloc_step::AllocStep;
use crate::machine::context::{Cx, DteView};
use crate::machine::io::{bucket_words, cas_previous, commit_won, word, written, Results};
use crate::machine::recover::{Destination, Recover};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Frame {
    slot: IteAddr,
    depth: u8,
    /// Which of the slot's key's alternatives (not on the path) to free next
    /// when none is empty; advanced when freeing one fails (backtracking).
    next_alt: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Start,
    AwaitSrcIte,
    AwaitSrcDte,
    Recovering(Recover),
    /// Clearing the source; the tombstone to mark then, with the recycle
    /// word read with its header.
    AwaitClear(Option<(DteAddr, RecycleWord)>),
    AwaitAlt,
    AwaitHelp,
    AwaitAllocScan,
    AwaitCopy,
    AwaitLock,
    AwaitInstall,
    Aborting(Recover),
    AwaitCommit,
    AwaitFinish,
    AwaitMark,
}

/// The state of one frame's move.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Move {
    w: IndexEntry,
    y: Option<DteView>,
    cands: Vec<IteAddr>,
    src: usize,
    alt: Vec<usize>,
    alt_words: Vec<IndexEntry>,
    dst: usize,
    copy: Option<DteAddr>,
    header: Option<DataEntryHeader>,
}

/// The MIGRATE sub-machine of a PUT.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Migrate {
    frames: Vec<Frame>,
    path: Vec<IteAddr>,
    phase: Phase,
    mv: Move,
    alloc: AllocStep,
    /// What an owner abort reports once done (see `WriteLogic`).
    abort_reason: Option<Error>,
    /// Following a path the breadth-first search found: no search of its
    /// own, and no backtracking (a path that no longer works is a conflict).
    planned: bool,
}

type Out = Option<Result<(), Error>>;

impl Migrate {
    /// Frees `slot`, one of `avoid` (the PUT's candidates, which are all full).
    pub fn new(slot: IteAddr, avoid: Vec<IteAddr>) -> Migrate {
        Migrate {
            frames: vec![Frame {
                slot,
                depth: 1,
                next_alt: 0,
            }],
            path: avoid,
            phase: Phase::Start,
            mv: Move::default(),
            alloc: AllocStep::default(),
            abort_reason: None,
            planned: false,
        }
    }

    /// Frees `path[0]` (one of `avoid`, the PUT's candidates) along a chain
    /// the breadth-first search found: the deepest entry's key moves first
    /// (into an empty alternative), then each entry's key into the entry
    /// freed below it. A step that finds no empty alternative any more (the
    /// table changed since the search) ends in `Conflict`.
    pub fn along(path: &[IteAddr], avoid: Vec<IteAddr>) -> Migrate {
        let mut m = Migrate::new(path[0], avoid);
        m.frames = path
            .iter()
            .enumerate()
            .map(|(i, &slot)| Frame {
                slot,
                depth: u8::try_from(i + 1).unwrap_or(u8::MAX),
                next_alt: 0,
            })
            .collect();
        for &s in &path[1..] {
            if !m.path.contains(&s) {
                m.path.push(s);
            }
        }
        m.planned = true;
        m
    }

    fn top(&self) -> Option<Frame> {
        self.frames.last().copied()
    }

    fn begin_frame(&mut self, cx: &mut Cx<'_>) -> Out {
        if cx.overran() {
            // Its reads would be discarded: the attempt is over.
            return Some(Err(Error::Timeout));
        }
        let f = self.top()?;
        self.mv = Move::default();
        cx.read_ite(f.slot);
        self.phase = Phase::AwaitSrcIte;
        None
    }

    fn frame_done(&mut self, cx: &mut Cx<'_>) -> Out {
        if let Some(f) = self.frames.pop() {
            if !self.frames.is_empty() {
                self.path.retain(|&p| p != f.slot);
            }
        }
        if self.frames.is_empty() {
            Some(Ok(()))
        } else {
            self.begin_frame(cx)
        }
    }

    /// The top frame cannot free its slot within the depth limit: drop it and
    /// let its parent try its next alternative; at the root, the table is full.
    fn frame_failed(&mut self, cx: &mut Cx<'_>) -> Out {
        let max = cx.cfg().max_migrate_depth;
        let failed = self.frames.pop()?;
        match self.frames.last_mut() {
            None => Some(Err(Error::TableFull { depth: max })),
            Some(parent) => {
                self.path.retain(|&p| p != failed.slot);
                parent.next_alt += 1;
                self.begin_frame(cx)
            }
        }
    }

    /// Unlinks the source's word: to `to` (its emptied word, or a growth
    /// seal when finishing a growth's move); `mark`: the tombstone to mark
    /// then, with the recycle word read with its header.
    fn clear_src(
        &mut self,
        cx: &mut Cx<'_>,
        to: IndexEntry,
        mark: Option<(DteAddr, RecycleWord)>,
    ) -> Out {
        if !cx.may_mutate() {
            return Some(Err(Error::Timeout));
        }
        let f = self.top()?;
        cx.cas_ite(f.slot, self.mv.w, to);
        self.phase = Phase::AwaitClear(mark);
        None
    }

    fn on_src_dte(&mut self, cx: &mut Cx<'_>, y: DteView) -> Out {
        let f = self.top()?;
        let st = y.header.state;
        match st.state {
            DteState::Writing if !cx.owner_expired(y.header.deadline) => Some(Err(Error::Conflict)),
            DteState::Writing | DteState::Aborted => {
                self.phase = Phase::Recovering(Recover::reclaim(f.slot, self.mv.w, &y));
                self.step_recover(cx, Vec::new())
            }
            DteState::Free => Some(Err(Error::Conflict)),
            // A committed tombstone left linked: unlink it instead of moving it.
            DteState::Deleted => {
                let emptied = self.mv.w.emptied();
                self.clear_src(cx, emptied, Some((y.addr, y.header.recycle)))
            }
            DteState::Valid => {
                let cands = cx.candidates(&y.key);
                let Some(src) = cands.iter().position(|&c| c == f.slot) else {
                    return Some(Err(Error::Conflict));
                };
                if cx.copy_at_source(&st, src) {
                    // A committed copy still linked at its source: finish that move.
                    cx.io.stats.helps += 1;
                    let done = cx.finished_source(&st, self.mv.w);
                    return self.clear_src(cx, done, None);
                }
                // Every other candidate of Y's, read by bucket: each bucket
                // holding one (Y's own too, unless Y's entry is all of it).
                let buckets = cx.buckets_beside(&cands, src, false);
                self.mv.alt = alternatives(&buckets, cx.bucket_len(), src);
                cx.read_buckets(&cands, &buckets);
                self.mv.cands = cands;
                self.mv.src = src;
                self.mv.y = Some(y);
                self.phase = Phase::AwaitAlt;
                None
            }
        }
    }

    fn on_alt(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let f = self.top()?;
        let b = cx.bucket_len();
        let buckets = cx.buckets_beside(&self.mv.cands, self.mv.src, false);
        let words = match bucket_words(results, b) {
            Ok(ws) => ws,
            Err(e) => return Some(Err(e)),
        };
        let src = self.mv.src;
        self.mv.alt_words = buckets
            .iter()
            .flat_map(|&k| k * b..k * b + b)
            .zip(words)
            .filter(|&(pos, _)| pos != src)
            .map(|(_, w)| w)
            .collect();
        if self.mv.alt_words.len() != self.mv.alt.len() {
            return Some(Err(Error::corrupt(
                CorruptionKind::Completion,
                "short bucket read",
            )));
        }
        if let Some(k) = self.mv.alt_words.iter().position(|&w| w == self.mv.w) {
            // Two of the key's entries name Y: Y is a committed MIGRATE copy
            // whose mover stopped before clearing its source, and we met it
            // from its destination side. Finish that move (clear its source)
            // and start this frame again.
            let st = self.mv.y.as_ref()?.header.state;
            let at_source = cx.copy_at_source(&st, self.mv.alt[k]);
            if !at_source || cx.client.faults.conflict_ends_put {
                return Some(Err(Error::Conflict));
            }
            if !cx.may_mutate() {
                return Some(Err(Error::Timeout));
            }
            cx.io.stats.helps += 1;
            let src = self.mv.cands[self.mv.alt[k]];
            let done = cx.finished_source(&st, self.mv.w);
            cx.cas_ite(src, self.mv.w, done);
            self.phase = Phase::AwaitHelp;
            return None;
        }
        let mut behind = false;
        for (&pos, &w) in self.mv.alt.iter().zip(&self.mv.alt_words) {
            behind |= cx.behind(pos, w);
        }
        if behind {
            // The index grew past this client's view.
            return Some(Err(Error::Conflict));
        }
        if let Some(out) = self.seal_between(cx) {
            return out;
        }
        // A key moves only to an empty entry it may be put in: while the
        // index grows, one of its newest generation.
        let empty = (0..self.mv.alt.len())
            .find(|&k| self.mv.alt_words[k].is_empty() && cx.is_target(self.mv.alt[k]));
        if let Some(k) = empty {
            self.mv.dst = self.mv.alt[k];
            return self.copy(cx);
        }
        if self.planned {
            return Some(Err(Error::Conflict));
        }
        if f.depth >= cx.cfg().max_migrate_depth {
            return self.frame_failed(cx);
        }
        // Deeper through Y's other buckets only: a slot of its own bucket is
        // full (the bucket was read whole) and frees nothing the PUT could
        // not use directly.
        let next = self
            .mv
            .alt
            .iter()
            .filter(|&&j| !cx.same_bucket(j, self.mv.src) && cx.is_target(j))
            .map(|&j| self.mv.cands[j])
            .filter(|c| !self.path.contains(c))
            .nth(usize::from(f.next_alt));
        let Some(slot) = next else {
            return self.frame_failed(cx);
        };
        self.frames.push(Frame {
            slot,
            depth: f.depth + 1,
            next_alt: 0,
        });
        self.path.push(slot);
        self.begin_frame(cx)
    }

    /// A key moved out of an old generation into the newest must first have
    /// a sealed entry in every generation between them, as an insert must
    /// in every old one (docs/protocol.md §2.5): a client whose view ends
    /// in such a generation would otherwise read none of the key's entries
    /// there, no seal either, and answer "not found". (With one old
    /// generation there is none between.) For the first such generation
    /// without a seal among the key's entries: seal an empty one, or move
    /// the key of the first one out (into the newest generation, which
    /// seals it) with a frame of its own; then redo this frame.
    fn seal_between(&mut self, cx: &mut Cx<'_>) -> Option<Out> {
        let view = cx.client.view;
        if !cx.is_old(self.mv.src) || cx.client.faults.grow_insert_unsealed {
            return None;
        }
        let per = cx.per_generation();
        let from = view.generation_of(self.mv.src, per);
        let missing = (from + 1..view.newest).find_map(|g| {
            let here: Vec<usize> = (0..self.mv.alt.len())
                .filter(|&k| view.generation_of(self.mv.alt[k], per) == g)
                .collect();
            let sealed = here.iter().any(|&k| self.mv.alt_words[k].is_growth_seal());
            (!sealed).then_some(here)
        })?;
        if !cx.may_mutate() {
            return Some(Some(Err(Error::Timeout)));
        }
        if let Some(&k) = missing.iter().find(|&&k| self.mv.alt_words[k].is_empty()) {
            let at = self.mv.cands[self.mv.alt[k]];
            cx.cas_ite(at, self.mv.alt_words[k], IndexEntry::GROWTH_SEAL);
            cx.io.stats.growth_seals += 1;
            self.phase = Phase::AwaitHelp;
            return Some(None);
        }
        let (Some(f), Some(&k)) = (self.top(), missing.first()) else {
            return Some(Some(Err(Error::Conflict)));
        };
        if f.next_alt > 0 {
            // That key's move found no room in the newest generation.
            return Some(Some(Err(Error::TableFull {
                depth: cx.cfg().max_migrate_depth,
            })));
        }
        let slot = self.mv.cands[self.mv.alt[k]];
        if self.path.contains(&slot) {
            return Some(Some(Err(Error::Conflict)));
        }
        self.frames.push(Frame {
            slot,
            depth: f.depth.saturating_add(1),
            next_alt: 0,
        });
        self.path.push(slot);
        Some(self.begin_frame(cx))
    }

    fn copy(&mut self, cx: &mut Cx<'_>) -> Out {
        let y = self.mv.y.as_ref()?;
        let Some(value) = y.value.as_ref() else {
            return Some(Err(Error::corrupt(
                CorruptionKind::Memory,
                format!("{}: a MIGRATE's source read without its value", y.addr),
            )));
        };
        let class = match cx.class_for(y.key.len(), value.len()) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        match self.alloc.start(cx, class) {
            Ok(Some(d)) => self.write_copy(cx, d),
            Ok(None) => {
                self.phase = Phase::AwaitAllocScan;
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    fn write_copy(&mut self, cx: &mut Cx<'_>, d: DteAddr) -> Out {
        let y = self.mv.y.as_ref()?;
        let value = y.value.clone().unwrap_or_default();
        let header = DataEntryHeader {
            state: StateWord {
                state: DteState::Writing,
                kind: Some(DteKind::Migrate),
                src: cx.stored_position(self.mv.src),
                dst: cx.stored_position(self.mv.dst),
                incarnation: cx.incarnation(d),
                key_len: y.key.len() as u16,
                value_len: value.len() as u32,
            },
            deadline: cx.deadline.0,
            recycle: RecycleWord::unmarked(cx.deadline.0),
            prev: self.mv.w.0,
        };
        let bytes = cx.encode_entry(d, &header, &y.key, &value);
        if let Err(e) = cx.write_dte(d, bytes) {
            return Some(Err(e));
        }
        self.mv.copy = Some(d);
        self.mv.header = Some(header);
        self.phase = Phase::AwaitCopy;
        None
    }

    fn copy_word(&self, cx: &Cx<'_>) -> Option<IndexEntry> {
        let y = self.mv.y.as_ref()?;
        let incarnation = self.mv.header?.state.incarnation;
        Some(IndexEntry::new(
            self.mv.copy?,
            incarnation,
            cx.filter(&y.key),
        ))
    }

    fn lock(&mut self, cx: &mut Cx<'_>) -> Out {
        let (f, cw, d) = (self.top()?, self.copy_word(cx)?, self.mv.copy?);
        if !cx.may_mutate() {
            cx.client.alloc.release_unpublished(d);
            return Some(Err(Error::Timeout));
        }
        cx.cas_ite(f.slot, self.mv.w, cw);
        self.phase = Phase::AwaitLock;
        None
    }

    fn on_lock(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let d = self.mv.copy?;
        match cas_previous(&results[0]) {
            Ok(p) if p == self.mv.w.0 => {}
            Ok(_) => {
                cx.client.alloc.release_unpublished(d);
                return Some(Err(Error::Conflict));
            }
            // The lock may or may not have landed: roll it back ourselves.
            Err(e) => return self.abort(cx, Destination::NotInstalled, e, true),
        }
        // The install is a mutation like any other: only inside the margin,
        // so that it lands before our deadline (A2). The broken variant
        // checks only the deadline itself.
        let in_time = if cx.client.faults.unfenced_migrate_install {
            !cx.overran()
        } else {
            cx.may_mutate()
        };
        if !in_time {
            return self.abort(cx, Destination::NotInstalled, Error::Timeout, false);
        }
        let cw = self.copy_word(cx)?;
        let k = self.mv.alt.iter().position(|&j| j == self.mv.dst)?;
        cx.cas_ite(self.mv.cands[self.mv.dst], self.mv.alt_words[k], cw);
        self.phase = Phase::AwaitInstall;
        None
    }

    fn on_install(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let (d, h) = (self.mv.copy?, self.mv.header?);
        let k = self.mv.alt.iter().position(|&j| j == self.mv.dst)?;
        match cas_previous(&results[0]) {
            Ok(p) if p == self.mv.alt_words[k].0 => {
                if !cx.may_mutate() {
                    // Too late to commit: reclaimers roll the copy back.
                    return Some(Err(Error::Timeout));
                }
                cx.cas_state(
                    d,
                    h.state.encode(),
                    h.state.with_state(DteState::Valid).encode(),
                );
                self.phase = Phase::AwaitCommit;
                None
            }
            Ok(_) if cx.client.faults.skip_migrate_rollback => {
                // Broken variant: forget that the copy is linked at the source.
                cx.client.alloc.release_unpublished(d);
                Some(Err(Error::Conflict))
            }
            Ok(_) => self.abort(cx, Destination::NotInstalled, Error::Conflict, false),
            // The install may or may not have landed: roll back, fencing the
            // destination so that it cannot land later.
            Err(e) => self.abort(cx, Destination::MayHoldCopy, e, false),
        }
    }

    /// Rolls our uncommitted copy back (we own it), then reports `reason`
    /// (`link_unknown`: the lock's outcome is unknown).
    fn abort(
        &mut self,
        cx: &mut Cx<'_>,
        dst: Destination,
        reason: Error,
        link_unknown: bool,
    ) -> Out {
        let (d, h, cw) = (self.mv.copy?, self.mv.header?, self.copy_word(cx)?);
        let key = self.mv.y.as_ref()?.key.clone();
        let f = self.top()?;
        self.abort_reason = Some(reason);
        let rec = Recover::owner_abort(f.slot, cw, d, h, key, dst, link_unknown);
        self.phase = Phase::Aborting(rec);
        self.step_abort(cx, Vec::new())
    }

    fn on_commit(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let (f, h, cw) = (self.top()?, self.mv.header?, self.copy_word(cx)?);
        // An error here leaves the copy committed or not; either way others
        // settle it (helpers finish a committed copy, reclaimers roll back an
        // uncommitted one) and the PUT itself has committed nothing.
        let committed = match commit_won(&results[0], h.state.encode()) {
            Ok(c) => c,
            Err(e) => {
                // If the copy committed, Y is unlinked for good and we will
                // not mark it: counted as leaked.
                cx.io.stats.leaked += 1;
                return Some(Err(e));
            }
        };
        if !committed {
            return Some(Err(Error::Timeout));
        }
        cx.io.stats.migrations += 1;
        if f.depth >= 2 {
            cx.io.stats.deep_migrations += 1;
        }
        if !cx.may_mutate() {
            // Helpers clear the source; Y is left unmarked (leaked).
            cx.io.stats.leaked += 1;
            return Some(Err(Error::Timeout));
        }
        let done = cx.finished_source(&h.state, cw);
        cx.io.stats.growth_seals += u64::from(done.is_growth_seal());
        cx.cas_ite(f.slot, cw, done);
        self.phase = Phase::AwaitFinish;
        None
    }

    fn step_recover(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Recovering(rec) = &mut self.phase else {
            return Some(Err(Error::Conflict));
        };
        match rec.advance(cx, results)? {
            Ok(()) => self.begin_frame(cx),
            Err(e) => Some(Err(e)),
        }
    }

    fn step_abort(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Aborting(rec) = &mut self.phase else {
            return Some(Err(Error::Conflict));
        };
        let done = rec.advance(cx, results)?;
        match self.abort_reason.take() {
            None | Some(Error::Conflict) => Some(done.and(Err(Error::Conflict))),
            Some(reason) => Some(Err(reason)),
        }
    }

    /// Advances the MIGRATE; `Some(Ok(()))` once the PUT's slot was freed (or
    /// found free).
    pub fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        // Reads whose results come after the deadline may have seen reused
        // entries: discarded. CAS results stay true (their phases end the
        // attempt themselves, counting what they cannot mark).
        let reading = matches!(
            self.phase,
            Phase::AwaitSrcIte | Phase::AwaitSrcDte | Phase::AwaitAlt | Phase::AwaitAllocScan
        );
        if reading && cx.overran() {
            return Some(Err(Error::Timeout));
        }
        match std::mem::replace(&mut self.phase, Phase::Start) {
            Phase::Start => self.begin_frame(cx),
            Phase::AwaitSrcIte => {
                let w = match word(&results[0]) {
                    Ok(w) => IndexEntry(w),
                    Err(e) => return Some(Err(e)),
                };
                self.mv.w = w;
                match w.dte() {
                    None => self.frame_done(cx),
                    Some(d) => {
                        cx.read_dte(d, true);
                        self.phase = Phase::AwaitSrcDte;
                        None
                    }
                }
            }
            Phase::AwaitSrcDte => {
                let d = self.mv.w.dte()?;
                match cx.view(d, &results[0]) {
                    Ok(y) => self.on_src_dte(cx, y),
                    Err(e) => Some(Err(e)),
                }
            }
            p @ Phase::Recovering(_) => {
                self.phase = p;
                self.step_recover(cx, results)
            }
            p @ Phase::Aborting(_) => {
                self.phase = p;
                self.step_abort(cx, results)
            }
            Phase::AwaitClear(mark) => match cas_previous(&results[0]) {
                Ok(p) if p == self.mv.w.0 => match mark {
                    Some((d, seen)) if cx.may_mutate() => {
                        cx.mark_recycle(d, seen);
                        self.phase = Phase::AwaitMark;
                        None
                    }
                    Some(_) => {
                        // A tombstone unlinked too late to mark it: leaked.
                        cx.io.stats.leaked += 1;
                        self.frame_done(cx)
                    }
                    None => self.frame_done(cx),
                },
                Ok(_) => self.begin_frame(cx),
                Err(e) => {
                    // The tombstone may have been unlinked: leaked if so.
                    cx.io.stats.leaked += u64::from(mark.is_some());
                    Some(Err(e))
                }
            },
            Phase::AwaitAlt => self.on_alt(cx, &results),
            Phase::AwaitHelp => match cas_previous(&results[0]) {
                // Whoever cleared the source, the move is finished: redo the frame.
                Ok(_) => self.begin_frame(cx),
                Err(e) => Some(Err(e)),
            },
            Phase::AwaitAllocScan => match self.alloc.finish(cx, results) {
                Ok(Some(d)) => self.write_copy(cx, d),
                Ok(None) => {
                    self.phase = Phase::AwaitAllocScan;
                    None
                }
                Err(e) => Some(Err(e)),
            },
            Phase::AwaitCopy => match self.mv.copy.map(|d| cx.dte_written(d, &results)) {
                Some(Ok(())) => self.lock(cx),
                None => Some(Err(Error::Conflict)),
                Some(Err(e)) => Some(Err(e)),
            },
            Phase::AwaitLock => self.on_lock(cx, &results),
            Phase::AwaitInstall => self.on_install(cx, &results),
            Phase::AwaitCommit => self.on_commit(cx, &results),
            Phase::AwaitFinish => {
                // Whoever cleared the source (if our CAS failed, a helper did,
                // or will), the old entry Y is unlinked for good now that the
                // copy committed; the owner marks it.
                match self.mv.y.as_ref() {
                    Some(y) if cx.may_mutate() => {
                        cx.mark_recycle(y.addr, y.header.recycle);
                        self.phase = Phase::AwaitMark;
                        None
                    }
                    _ => {
                        cx.io.stats.leaked += 1;
                        self.frame_done(cx)
                    }
                }
            }
            Phase::AwaitMark => {
                if written(&results[0]).is_err() {
                    cx.io.stats.leaked += 1;
                }
                self.frame_done(cx)
            }
        }
    }
}

/// The candidate positions other than `src` in `buckets`, in order.
fn alternatives(buckets: &[usize], b: usize, src: usize) -> Vec<usize> {
    buckets
        .iter()
        .flat_map(|&k| k * b..k * b + b)
        .filter(|&j| j != src)
        .collect()
}
