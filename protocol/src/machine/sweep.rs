//! One step of a growth's sweep: sealing one chunk of the old generation
//! and moving the directory's cursor past it (docs/protocol.md §2.5).
//!
//! While the index grows, every write helps the growth by one step before
//! its own scan, and `Client::grow` takes steps until the growth is done, so
//! a growth finishes whoever started it, and a sweeper that stalls or
//! crashes blocks nobody: the next one sweeps the same chunk again. A step:
//! 1. Read the directory word: the view (stable: nothing to do) and the
//!    cursor, the first chunk not known to be sealed.
//! 2. Cursor past the last chunk: every entry of the old generation is
//!    sealed. CAS the directory to the next generation, stable.
//! 3. Otherwise read the chunk (one READ). Seal each empty entry (CAS to the
//!    growth seal, one round), then move each linked key into the new
//!    generation with a MIGRATE frame, whose finish seals its source (a
//!    tombstone is unlinked instead, and sealed on the next pass). Read the
//!    chunk again, up to [`PASSES`] times, until every entry is sealed.
//! 4. CAS the cursor past the chunk, only then: the cursor never passes an
//!    entry that is not sealed, and seals are never removed.
//!
//! A step gives up (a conflict, changing nothing that matters) when a key of
//! the chunk is being written within its owner's deadline, or a move finds
//! no room; another step tries again.

use crate::addr::IteAddr;
use crate::error::Error;
use crate::fabric::Op;
use crate::growth::{directory_slot, Chunks, IndexView};
use crate::layout::IndexEntry;
use crate::machine::context::Cx;
use crate::machine::io::{bytes, cas_previous, word, Results};
use crate::machine::migrate::Migrate;

/// Reads of one chunk a step makes before it gives up.
pub const PASSES: u8 = 3;

/// What a step of the sweep did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Swept {
    /// The index does not grow (the view the directory names).
    Idle(IndexView),
    /// One chunk is sealed, and the cursor past it (by this step or
    /// another).
    Chunk,
    /// The growth is over: this step moved the directory to the next
    /// generation (or found it moved).
    Grown(IndexView),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Start,
    AwaitDir,
    AwaitChunk,
    AwaitSeals,
    Moving(Box<Migrate>),
    AwaitAdvance,
    AwaitSwitch,
}

/// The sweep sub-machine: one step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Sweep {
    phase: Phase,
    /// The directory word read.
    dir: u64,
    /// The chunk: its first entry and length.
    first: Option<(IteAddr, u32)>,
    /// The chunk's words as last read.
    words: Vec<IndexEntry>,
    /// Chunk entries still to move this pass.
    moves: Vec<u32>,
    passes: u8,
    /// Start a growth if the index is stable (an operator's `Client::grow`).
    start: bool,
}

type Out = Option<Result<Swept, Error>>;

impl Sweep {
    /// A fresh step.
    pub fn new() -> Sweep {
        Sweep {
            phase: Phase::Start,
            dir: 0,
            first: None,
            words: Vec::new(),
            moves: Vec::new(),
            passes: 0,
            start: false,
        }
    }

    fn view(&self) -> IndexView {
        IndexView::decode(self.dir)
    }

    fn read_chunk(&mut self, cx: &mut Cx<'_>) -> Out {
        let (first, len) = self.first?;
        self.passes += 1;
        if self.passes > PASSES {
            return Some(Err(Error::Conflict));
        }
        cx.io.issue(Op::Read {
            addr: first.remote(),
            len: 8 * len,
        });
        self.phase = Phase::AwaitChunk;
        None
    }

    fn on_dir(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        self.dir = match word(&results[0]) {
            Ok(w) => w,
            Err(e) => return Some(Err(e)),
        };
        let view = self.view();
        cx.client.view = cx.client.view.max(view);
        if !view.growing {
            let generations = cx.cfg().index_generations;
            if !self.start {
                return Some(Ok(Swept::Idle(view)));
            }
            if view.generation + 1 >= generations {
                return Some(Err(Error::IndexAtLimit {
                    generation: view.generation,
                    generations,
                }));
            }
            if !cx.may_mutate() {
                return Some(Err(Error::Timeout));
            }
            // Stable: start the growth (the switch's CAS, one step earlier).
            cx.io.issue(Op::Cas {
                addr: directory_slot(cx.cfg()).remote(),
                expect: self.dir,
                new: view.next().encode(),
            });
            self.phase = Phase::AwaitSwitch;
            return None;
        }
        let chunks = Chunks::of(cx.cfg(), view.generation);
        let cursor = IndexView::cursor(self.dir);
        if cursor >= chunks.total() {
            // Every chunk is sealed: the new generation is the index.
            if !cx.may_mutate() {
                return Some(Err(Error::Timeout));
            }
            cx.io.issue(Op::Cas {
                addr: directory_slot(cx.cfg()).remote(),
                expect: self.dir,
                new: view.next().encode(),
            });
            self.phase = Phase::AwaitSwitch;
            return None;
        }
        self.first = Some(chunks.chunk(cursor));
        self.read_chunk(cx)
    }

    fn on_chunk(&mut self, cx: &mut Cx<'_>, results: &Results) -> Out {
        let raw = match bytes(&results[0]) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        self.words = raw
            .chunks_exact(8)
            .map(|w| IndexEntry(u64::from_le_bytes(w.try_into().unwrap_or_default())))
            .collect();
        let (first, len) = self.first?;
        if self.words.len() < len as usize {
            return Some(Err(Error::Conflict));
        }
        if self.words.iter().all(|w| w.is_growth_seal()) {
            if !cx.may_mutate() {
                return Some(Err(Error::Timeout));
            }
            let view = self.view();
            cx.io.issue(Op::Cas {
                addr: directory_slot(cx.cfg()).remote(),
                expect: self.dir,
                new: view.with_cursor(IndexView::cursor(self.dir) + 1),
            });
            self.phase = Phase::AwaitAdvance;
            return None;
        }
        if !cx.may_mutate() {
            return Some(Err(Error::Timeout));
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
            // No room, or an entry in progress: another step tries again.
            Err(Error::TableFull { .. }) => Some(Err(Error::Conflict)),
            Err(e) => Some(Err(e)),
        }
    }

    /// Advances the step; `Some` once it is done.
    pub fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        match std::mem::replace(&mut self.phase, Phase::Start) {
            Phase::Start => {
                cx.io.issue(Op::Read {
                    addr: directory_slot(cx.cfg()).remote(),
                    len: 8,
                });
                self.phase = Phase::AwaitDir;
                None
            }
            Phase::AwaitDir => self.on_dir(cx, &results),
            Phase::AwaitChunk => {
                if cx.overran() {
                    return Some(Err(Error::Timeout));
                }
                self.on_chunk(cx, &results)
            }
            Phase::AwaitSeals => self.on_seals(cx, &results),
            p @ Phase::Moving(_) => {
                self.phase = p;
                self.step_move(cx, results)
            }
            Phase::AwaitAdvance => match cas_previous(&results[0]) {
                // Whoever moved the cursor, this chunk is sealed.
                Ok(_) => Some(Ok(Swept::Chunk)),
                Err(e) => Some(Err(e)),
            },
            Phase::AwaitSwitch => match cas_previous(&results[0]) {
                Ok(p) => {
                    let now = if p == self.dir {
                        self.view().next()
                    } else {
                        IndexView::decode(p)
                    };
                    cx.client.view = cx.client.view.max(now);
                    Some(Ok(match (self.view().growing, now.growing) {
                        // Moved from stable to growing (by us or another).
                        (false, true) => Swept::Chunk,
                        (_, false) => Swept::Grown(now),
                        (true, true) => Swept::Idle(now),
                    }))
                }
                Err(e) => Some(Err(e)),
            },
        }
    }
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
        let mut sweep = Sweep::new();
        sweep.start = true;
        GrowLogic { sweep }
    }
}

impl crate::machine::Logic for GrowLogic {
    type Output = Swept;

    fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Option<Result<Swept, Error>> {
        self.sweep.advance(cx, results)
    }
}
