//! One step of a growth's sweep: sealing one chunk of the old generations
//! and moving the directory's cursor past it (docs/protocol.md §2.5).
//!
//! While the index grows, every write helps the growth by one step before
//! its own scan, and `Client::grow` takes steps until the growth is done, so
//! a growth finishes whoever started it, and a sweeper that stalls or
//! crashes blocks nobody: the next one sweeps the same chunk again. A step:
//! 1. Read the directory word: the view (stable: nothing to do) and the
//!    cursor, the first chunk of the old generations not known to be sealed.
//! 2. Cursor past the last chunk: every entry of the old generations is
//!    sealed. CAS the directory to the newest generation, stable.
//! 3. Otherwise read the chunk (one READ). Seal each empty entry (CAS to the
//!    growth seal, one round), then move each linked key into the newest
//!    generation with a MIGRATE frame, whose finish seals its source (a
//!    tombstone is unlinked instead, and sealed on the next pass). Read the
//!    chunk again, up to [`PASSES`] times, until every entry is sealed.
//! 4. CAS the cursor past the chunk, only then: the cursor never passes an
//!    entry that is not sealed, and seals are never removed.
//!
//! The writes' steps spread over the [`WINDOW`] chunks a node from the
//! cursor on (each write's chunk drawn from its client's id, the cursor and
//! the key it writes), so that many writers sweep many chunks at once
//! rather than all racing on the cursor's. A helper whose chunk is sealed
//! (by it or another) moves the cursor: it reads up to [`LOOKAHEAD`]
//! chunks from the cursor's on in one round and CASes the cursor past
//! those sealed in a row; if the cursor's own chunk is not sealed, it
//! sweeps one of those read that is not, drawn the same way. An operator's step
//! (`Client::grow`) and a step that grows the index take the cursor's
//! chunk. The chunks take the nodes in turn, so that the helpers spread
//! over every node.
//!
//! A step gives up (a conflict, changing nothing that matters) when a key of
//! the chunk is being written within its owner's deadline; another step
//! tries again. A move that finds no room in the newest generation (it
//! filled before the old ones were swept) *extends* the growth: the
//! directory names one generation more, and the old ones, the full newest
//! included, are swept into it.

use crate::addr::IteAddr;
use crate::error::Error;
use crate::fabric::Op;
use crate::growth::{
    cas_directory, read_directory, sweep_draw, sweep_offset, Chunks, IndexView, MAX_SPAN,
};
use crate::layout::IndexEntry;
use crate::machine::context::Cx;
use crate::machine::io::{bytes, cas_previous, index_words, word, Results};
use crate::machine::migrate::Migrate;

/// Reads of one chunk a step makes before it gives up.
pub const PASSES: u8 = 3;

/// Most keys a write's step of the sweep moves (a chunk's worth: the
/// growth then lasts about as many writes as its old generations have
/// chunks).
pub const HELP_MOVES: u8 = 8;

/// Chunks a node, from the cursor on, over which the writes' steps spread
/// (the chunks take the nodes in turn: 32 of each node's).
pub const WINDOW: u64 = 32;

/// Chunks a step reads in one round to move the cursor past those sealed.
pub const LOOKAHEAD: u64 = 8;

/// What a step of the sweep did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Swept {
    /// The index does not grow (the view the directory names).
    Idle(IndexView),
    /// One chunk is sealed and the cursor past it, or a growth started or
    /// was extended (by this step or another).
    Chunk,
    /// Part of a chunk: a write's step stops moving keys once a quarter
    /// of its attempt's time has passed (or after `HELP_MOVES`), so that
    /// helping leaves the write the time for its own work.
    Partial,
    /// The growth is over: this step moved the directory to its newest
    /// generation, stable (or found it moved).
    Grown(IndexView),
}

/// What a step is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mode {
    /// Sweep a chunk of a growth under way, if any.
    Step,
    /// Start a growth on a stable index, else sweep (`Client::grow`).
    Start,
    /// Grow the index out of `seen`, the view in which a write found no
    /// room: start a growth, or extend one whose newest generation is full.
    Grow(IndexView),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Start,
    AwaitDir,
    AwaitChunk,
    AwaitSeals,
    Moving(Box<Migrate>),
    /// The READs of the chunks from `from` on, to move the cursor past
    /// those sealed.
    AwaitAhead {
        from: u64,
    },
    AwaitAdvance,
    /// The directory CAS to `to`.
    AwaitSwitch {
        to: IndexView,
    },
}

/// The sweep sub-machine: one step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Sweep {
    mode: Mode,
    phase: Phase,
    /// The directory word read.
    dir: u64,
    /// The chunk: its number, its first entry and length.
    at: u64,
    first: Option<(IteAddr, u32)>,
    /// The chunk's words as last read.
    words: Vec<IndexEntry>,
    /// Chunk entries still to move this pass.
    moves: Vec<u32>,
    passes: u8,
    /// Moves this step may still make (`None`: as many as the chunk needs).
    budget: Option<u8>,
    /// A write's step: the key it writes, from which (with the client's
    /// id and the cursor) it draws its chunk (`growth::sweep_offset`).
    key: Option<Vec<u8>>,
    /// The step went on from its sealed chunk to another (once a step).
    redirected: bool,
}

type Out = Option<Result<Swept, Error>>;

impl Sweep {
    fn with_mode(mode: Mode) -> Sweep {
        Sweep {
            mode,
            phase: Phase::Start,
            dir: 0,
            at: 0,
            first: None,
            words: Vec::new(),
            moves: Vec::new(),
            passes: 0,
            budget: None,
            key: None,
            redirected: false,
        }
    }

    /// One step of the sweep of a growth under way.
    pub fn new() -> Sweep {
        Sweep::with_mode(Mode::Step)
    }

    /// A write's step of the sweep: it seals the chunk's empty entries and
    /// moves keys only while a quarter of the attempt's time has not
    /// passed, and at most [`HELP_MOVES`], so that the write keeps the time
    /// for its own work; the writes after it go on with the chunk.
    pub fn help(key: &[u8]) -> Sweep {
        Sweep {
            budget: Some(HELP_MOVES),
            key: Some(key.to_vec()),
            ..Sweep::with_mode(Mode::Step)
        }
    }

    /// A step that grows the index out of `seen`, the view in which a write
    /// found no room for its key.
    pub fn grow(seen: IndexView) -> Sweep {
        Sweep::with_mode(Mode::Grow(seen))
    }

    fn view(&self) -> IndexView {
        IndexView::decode(self.dir)
    }

    fn read_chunk(&mut self, cx: &mut Cx<'_>) -> Out {
        let (first, len) = self.first?;
        self.passes += 1;
        if self.passes > PASSES {
            tracing::debug!(?first, words = ?self.words, "sweep: the chunk is not sealed yet");
            return Some(Err(Error::Conflict));
        }
        cx.io.issue(Op::Read {
            addr: first.remote(),
            len: 8 * len,
        });
        self.phase = Phase::AwaitChunk;
        None
    }

    /// CASes the directory from the word read to `to`'s (keeping the
    /// sweep's cursor when `to` still grows the same old generations).
    fn switch(&mut self, cx: &mut Cx<'_>, to: IndexView) -> Out {
        if !cx.may_mutate() {
            return Some(Err(Error::Timeout));
        }
        let cursor = if to.oldest == self.view().oldest && to.growing() {
            IndexView::cursor(self.dir)
        } else {
            0
        };
        cx.io
            .issue(cas_directory(cx.cfg(), self.dir, to.with_cursor(cursor)));
        self.phase = Phase::AwaitSwitch { to };
        None
    }

    /// Grows the index out of the view the directory names: a growth into
    /// the next generation, started or extended.
    fn grow_from(&mut self, cx: &mut Cx<'_>, view: IndexView) -> Out {
        let generations = cx.cfg().index_generations;
        if view.newest + 1 >= generations {
            return Some(Err(Error::IndexAtLimit {
                generation: view.newest,
                generations,
            }));
        }
        if view.span() >= MAX_SPAN {
            // The old generations must be swept first.
            return Some(Err(Error::Conflict));
        }
        self.switch(cx, view.grown())
    }

    fn on_dir(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        self.dir = match word(&results[0]) {
            Ok(w) => w,
            Err(e) => return Some(Err(e)),
        };
        let view = self.view();
        cx.client.view = cx.client.view.max(view);
        match self.mode {
            Mode::Grow(seen) if view == seen => return self.grow_from(cx, view),
            // Someone moved the directory since: the write tries again in
            // the view it names.
            Mode::Grow(_) => return Some(Ok(Swept::Idle(view))),
            Mode::Start if !view.growing() => return self.grow_from(cx, view),
            Mode::Step if !view.growing() => return Some(Ok(Swept::Idle(view))),
            Mode::Start | Mode::Step => {}
        }
        let chunks = Chunks::of(cx.cfg(), view);
        let cursor = IndexView::cursor(self.dir);
        let left = chunks.total().saturating_sub(cursor);
        if left == 0 {
            // Every chunk is sealed: the newest generation is the index.
            return self.switch(cx, view.settled());
        }
        self.at = cursor;
        if let Some(key) = &self.key {
            let window = WINDOW * u64::from(cx.cfg().nodes.max(1));
            self.at += sweep_offset(cx.client.id, cursor, key, left.min(window));
        }
        self.first = chunks.chunk(self.at);
        self.read_chunk(cx)
    }

    /// The step's chunk is sealed: moves the cursor past the chunks sealed
    /// in a row from it, read in one round (none to read when the step's
    /// chunk is the cursor's and the last: the cursor goes past it).
    fn advance_cursor(&mut self, cx: &mut Cx<'_>) -> Out {
        let cursor = IndexView::cursor(self.dir);
        let from = if self.at == cursor {
            cursor + 1
        } else {
            cursor
        };
        let chunks = Chunks::of(cx.cfg(), self.view());
        let reads: Vec<Op> = (from..chunks.total().min(from + LOOKAHEAD))
            .filter_map(|c| chunks.chunk(c))
            .map(|(first, len)| Op::Read {
                addr: first.remote(),
                len: 8 * len,
            })
            .collect();
        if reads.is_empty() {
            return self.cas_cursor(cx, from);
        }
        for op in reads {
            cx.io.issue(op);
        }
        self.phase = Phase::AwaitAhead { from };
        None
    }

    /// The chunks from `from` on as read: the cursor goes past those sealed
    /// in a row; if the cursor's own is not sealed, this step sweeps one of
    /// those read that is not (drawn like its first chunk, so that the
    /// writes whose chunks were sealed do not all crowd on the cursor's).
    fn on_ahead(&mut self, cx: &mut Cx<'_>, from: u64, results: &Results) -> Out {
        let mut sealed = 0;
        let mut unsealed = Vec::new();
        for (k, r) in results.iter().enumerate() {
            match bytes(r) {
                Ok(b) if !b.is_empty() && all_sealed(b) => {
                    if unsealed.is_empty() {
                        sealed += 1;
                    }
                }
                Ok(_) if cx.client.faults.growth_cursor_unchecked && unsealed.is_empty() => {
                    sealed += 1
                }
                Ok(_) => unsealed.push(from + k as u64),
                Err(e) => return Some(Err(e)),
            }
        }
        let cursor = IndexView::cursor(self.dir);
        let to = from + sealed;
        if to > cursor {
            return self.cas_cursor(cx, to);
        }
        if self.redirected {
            // One chunk swept past its own is this step's share.
            return Some(Ok(Swept::Chunk));
        }
        self.redirected = true;
        let pick = match &self.key {
            Some(key) => {
                let draw = sweep_draw(cx.client.id, cursor, key);
                crate::rng::below(draw, unsealed.len() as u64) as usize
            }
            None => 0,
        };
        self.at = unsealed.get(pick).copied().unwrap_or(cursor);
        self.first = Chunks::of(cx.cfg(), self.view()).chunk(self.at);
        self.passes = 0;
        self.read_chunk(cx)
    }

    /// CASes the directory's cursor from the word read to `to` (every
    /// chunk before `to` is sealed).
    fn cas_cursor(&mut self, cx: &mut Cx<'_>, to: u64) -> Out {
        if !cx.may_mutate() {
            return Some(Err(Error::Timeout));
        }
        let next = self.view().with_cursor(to);
        cx.io.issue(cas_directory(cx.cfg(), self.dir, next));
        self.phase = Phase::AwaitAdvance;
        None
    }

    fn on_chunk(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let raw = match bytes(&results[0]) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        self.words = index_words(raw).collect();
        let (first, len) = self.first?;
        if self.words.len() < len as usize {
            return Some(Err(Error::Conflict));
        }
        if !cx.may_mutate() {
            return Some(Err(Error::Timeout));
        }
        if self.words.iter().all(|w| w.is_growth_seal()) {
            tracing::debug!(
                view = ?self.view(),
                ?first,
                chunk = self.at,
                cursor = IndexView::cursor(self.dir),
                "sweep: chunk sealed"
            );
            return self.advance_cursor(cx);
        }
        let mut sealing = false;
        self.moves.clear();
        for (j, &w) in self.words.iter().enumerate() {
            let at = IteAddr {
                node: first.node,
                slot: first.slot + j as u32,
            };
            if w.is_empty() {
                cx.cas_ite(at, w, IndexEntry::GROWTH_SEAL);
                sealing = true;
            } else if w.is_present() {
                self.moves.push(j as u32);
            }
        }
        self.moves.reverse();
        if sealing {
            self.phase = Phase::AwaitSeals;
            return None;
        }
        self.next_move(cx)
    }

    fn on_seals(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let mut k = 0;
        for w in &self.words {
            if w.is_empty() {
                match results.get(k).map(cas_previous) {
                    Some(Ok(p)) if p == w.0 => cx.io.stats.growth_seals += 1,
                    Some(Err(e)) => return Some(Err(e)),
                    _ => {}
                }
                k += 1;
            }
        }
        self.next_move(cx)
    }

    /// Moves the next linked key of the chunk, or reads the chunk again.
    fn next_move(&mut self, cx: &mut Cx<'_>) -> Out {
        let Some(j) = self.moves.pop() else {
            return self.read_chunk(cx);
        };
        match &mut self.budget {
            Some(0) => return Some(Ok(Swept::Partial)),
            // A write helps only early in its attempt: the rest of the
            // attempt's time is its own work's.
            Some(_) if !early(cx) => return Some(Ok(Swept::Partial)),
            Some(b) => *b -= 1,
            None => {}
        }
        let (first, _) = self.first?;
        let slot = IteAddr {
            node: first.node,
            slot: first.slot + j,
        };
        let m = Migrate::new(slot, Vec::new());
        self.phase = Phase::Moving(Box::new(m));
        self.step_move(cx, Vec::new())
    }

    fn step_move(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        let Phase::Moving(m) = &mut self.phase else {
            return Some(Err(Error::Conflict));
        };
        match m.advance(cx, results)? {
            Ok(()) => self.next_move(cx),
            // The newest generation has no room for the key: it filled
            // before the old ones were swept. Grow it again (the old ones
            // are then swept into the generation after it).
            Err(Error::TableFull { .. }) => {
                let view = self.view();
                self.grow_from(cx, view)
            }
            Err(e) => {
                tracing::debug!(error = %e, "sweep: a move gave up");
                Some(Err(e))
            }
        }
    }

    /// Advances the step; `Some` once it is done.
    pub fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        match std::mem::replace(&mut self.phase, Phase::Start) {
            Phase::Start => {
                cx.io.issue(read_directory(cx.cfg()));
                self.phase = Phase::AwaitDir;
                None
            }
            Phase::AwaitDir => {
                if cx.overran() {
                    return Some(Err(Error::Timeout));
                }
                self.on_dir(cx, &results)
            }
            Phase::AwaitChunk => {
                if cx.overran() {
                    return Some(Err(Error::Timeout));
                }
                self.on_chunk(cx, &results)
            }
            Phase::AwaitSeals => self.on_seals(cx, &results),
            Phase::AwaitAhead { from } => {
                if cx.overran() {
                    return Some(Err(Error::Timeout));
                }
                self.on_ahead(cx, from, &results)
            }
            p @ Phase::Moving(_) => {
                self.phase = p;
                self.step_move(cx, results)
            }
            Phase::AwaitAdvance => match cas_previous(&results[0]) {
                // Whoever moved the cursor, this chunk is sealed.
                Ok(_) => Some(Ok(Swept::Chunk)),
                Err(e) => Some(Err(e)),
            },
            Phase::AwaitSwitch { to } => match cas_previous(&results[0]) {
                Ok(p) => {
                    let now = if p == self.dir {
                        if to.growing() {
                            tracing::info!(?to, "the index grows");
                        } else {
                            tracing::info!(?to, "the growth is over");
                        }
                        to
                    } else {
                        IndexView::decode(p)
                    };
                    cx.client.view = cx.client.view.max(now);
                    Some(Ok(if now.growing() {
                        Swept::Chunk
                    } else {
                        Swept::Grown(now)
                    }))
                }
                Err(e) => Some(Err(e)),
            },
        }
    }
}

/// Whether every index word of a chunk read is a growth seal.
fn all_sealed(raw: &[u8]) -> bool {
    index_words(raw).all(|w| w.is_growth_seal())
}

/// Whether at most a quarter of the attempt's time has passed.
pub(crate) fn early(cx: &Cx<'_>) -> bool {
    let t = crate::time::duration_nanos(cx.cfg().expiration);
    let left = cx.deadline.0.saturating_sub(cx.now.0);
    left.saturating_mul(4) >= t.saturating_mul(3)
}

/// One step of a growth's sweep as an operation of its own (the steps that
/// `Client::grow` takes until the growth is over).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GrowLogic {
    sweep: Sweep,
}

impl GrowLogic {
    /// One step of the sweep of a growth under way (`Swept::Idle` if none
    /// is).
    pub fn step() -> GrowLogic {
        GrowLogic {
            sweep: Sweep::new(),
        }
    }

    /// One step that, on a stable index, starts a growth into the next
    /// generation (`Error::IndexAtLimit` in the last one).
    pub fn start() -> GrowLogic {
        GrowLogic {
            sweep: Sweep::with_mode(Mode::Start),
        }
    }
}

impl crate::machine::Logic for GrowLogic {
    type Output = Swept;

    fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Option<Result<Swept, Error>> {
        self.sweep.advance(cx, results)
    }
}
