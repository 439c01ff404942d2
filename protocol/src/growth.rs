//! Online growth of the index: generations, the directory word, a client's
//! view of them, and the growth seal (docs/protocol.md §2.5).
//!
//! Every node's index region holds up to `Config::index_generations` index
//! tables, each twice the one before, laid end to end
//! ([`crate::hash::generation_base`]). One 64-bit **directory word**, on node
//! 0 after the last generation, names the generations in use, oldest to
//! newest: one (*stable*: every key's candidates are its entries there), or
//! several while the index *grows* (a key's candidates are its entries in
//! each, oldest first; keys go only into the newest, and the older ones are
//! being sealed). The word only moves forward: stable *g*, *g* to *g+1*,
//! possibly extended to *g* to *g+2* (the new generation filled before the
//! old one was swept), then stable at the newest.
//!
//! A client keeps the directory it last read as its [`IndexView`] and reads
//! the word again only when what it meets says its view is behind: a
//! **growth seal** ([`IndexEntry::GROWTH_SEAL`](crate::layout::IndexEntry::GROWTH_SEAL)) in an entry its view counts
//! as current. A growth seals every entry of its old generations, one by one
//! (an empty one by CAS, a linked key's by a MIGRATE into the newest
//! generation whose finish leaves the seal), and a key is linked in the
//! newest generation only once it has a sealed entry in each old one. A seal
//! is never removed, so a client whose view is behind meets one among the
//! key's candidates whenever the key has moved on, and learns the truth
//! from the directory before it answers anything.

use crate::addr::{ClientId, IteAddr, NodeId};
use crate::config::Config;
use crate::fabric::Op;
use crate::hash::{generation_base, generation_slots, Hasher};

/// Most index generations a node's index region can hold.
pub const MAX_GENERATIONS: u8 = 16;

/// Most candidate entries per key (N x B) when the index grows: a MIGRATE
/// copy records a position in 4 bits and its generation modulo 4 in two
/// more.
pub const MAX_GROWING_POSITIONS: usize = 16;

/// Most generations a view spans at once: the new one and up to three old
/// ones (a growth extended twice because its new generation filled before
/// the old ones were swept).
pub const MAX_SPAN: u8 = 4;

/// Index table entries after the last generation on every node that belong
/// to the directory (only node 0's is used).
pub const DIRECTORY_SLOTS: u32 = 1;

const GENERATION_SHIFT: u8 = 4;
const GENERATION_BITS: u8 = 3 << GENERATION_SHIFT;
const SLOT_MASK: u8 = (1 << GENERATION_SHIFT) - 1;

/// Entries of the old generations one step of a growth's sweep seals: a
/// *chunk*, within one node (rounded to whole buckets, and at most the
/// node's whole generation).
pub const CHUNK_SLOTS: u32 = 8;

const CURSOR_SHIFT: u32 = 16;

/// The index generations in use, as the directory word says (or as a client
/// last read it): generations `oldest ..= newest`, the newest the one keys
/// go into, the others *old* ones a growth is sealing. Stable when they are
/// one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IndexView {
    /// The oldest generation a key may still be found in.
    pub oldest: u8,
    /// The generation keys are put in.
    pub newest: u8,
}

impl IndexView {
    /// The stable view of generation `g`.
    pub fn stable(g: u8) -> IndexView {
        IndexView {
            oldest: g,
            newest: g,
        }
    }

    /// Whether the index grows: some key may still be in an old generation.
    pub fn growing(self) -> bool {
        self.newest > self.oldest
    }

    /// The directory word of this view, its sweep at chunk 0.
    pub fn encode(self) -> u64 {
        self.with_cursor(0)
    }

    /// The directory word of this view with its growth's sweep at chunk
    /// `cursor`: every chunk before it is sealed.
    pub fn with_cursor(self, cursor: u64) -> u64 {
        (cursor << CURSOR_SHIFT) | (u64::from(self.newest) << 8) | u64::from(self.oldest)
    }

    /// The chunk a directory word's growth has swept up to.
    pub fn cursor(word: u64) -> u64 {
        word >> CURSOR_SHIFT
    }

    /// The view a directory word names (the never-written word 0 is
    /// generation 0, stable).
    pub fn decode(word: u64) -> IndexView {
        let oldest = (word & 0xff) as u8;
        IndexView {
            oldest,
            newest: (((word >> 8) & 0xff) as u8).max(oldest),
        }
    }

    /// The view a growth starts from this one with: from stable, growing
    /// into the next generation; while growing, its new generation is
    /// sealed too and keys go into the one after (an *extended* growth,
    /// whose new generation filled before its old ones were swept).
    pub fn grown(self) -> IndexView {
        IndexView {
            newest: self.newest + 1,
            ..self
        }
    }

    /// The view once every old generation is sealed: the newest, stable.
    pub fn settled(self) -> IndexView {
        IndexView::stable(self.newest)
    }

    /// Generations the view spans.
    pub fn span(self) -> u8 {
        self.newest - self.oldest + 1
    }

    /// The key's candidate entries in this view: its entries in each
    /// generation from the oldest to the newest.
    pub fn candidates(self, hasher: &Hasher, key: &[u8]) -> Vec<IteAddr> {
        (self.oldest..=self.newest)
            .flat_map(|g| hasher.candidates_in(key, g))
            .collect()
    }

    /// Whether candidate position `pos` (of a key with `per_generation`
    /// candidates per generation) is in an old generation of a growing
    /// index: a key may be found there and moved out, never put there.
    pub fn is_old(self, pos: usize, per_generation: usize) -> bool {
        pos < usize::from(self.newest - self.oldest) * per_generation
    }

    /// The generation of candidate position `pos`.
    pub fn generation_of(self, pos: usize, per_generation: usize) -> u8 {
        self.oldest + (pos / per_generation.max(1)) as u8
    }

    /// The 6-bit form a MIGRATE copy records candidate position `pos` in:
    /// the position within its generation, and that generation modulo 4
    /// (positions as they are when the index never grows).
    pub fn stored_position(self, pos: usize, per_generation: usize, grows: bool) -> u8 {
        if !grows {
            return pos as u8;
        }
        let g = self.generation_of(pos, per_generation);
        ((g & 3) << GENERATION_SHIFT) | ((pos % per_generation.max(1)) as u8 & SLOT_MASK)
    }

    /// The candidate position, in this view, that a MIGRATE copy's recorded
    /// position names: `None` when it names a generation this view does not
    /// hold (the copy's other end lies in a generation the view has left,
    /// or not reached).
    pub fn position_of(self, stored: u8, per_generation: usize, grows: bool) -> Option<usize> {
        if !grows {
            return Some(usize::from(stored));
        }
        let within = usize::from(stored & SLOT_MASK);
        if within >= per_generation {
            return None;
        }
        let modulo = (stored & GENERATION_BITS) >> GENERATION_SHIFT;
        (self.oldest..=self.newest)
            .find(|g| g & 3 == modulo)
            .map(|g| usize::from(g - self.oldest) * per_generation + within)
    }
}

/// Whether a MIGRATE copy's recorded positions lie in two generations: a
/// move of a growth, whose source is sealed when it finishes rather than
/// emptied.
pub fn crosses_generations(src: u8, dst: u8, grows: bool) -> bool {
    grows && (src ^ dst) & GENERATION_BITS != 0
}

/// The chunks a growth sweeps: those of each old generation of its view,
/// oldest first, each generation's taking the nodes in turn (chunk *i* of
/// a generation is on node *i* mod the nodes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Chunks {
    /// Per old generation: its first slot on every node, its entries per
    /// node, and entries per chunk.
    generations: Vec<(u32, u32, u32)>,
    nodes: u16,
}

impl Chunks {
    /// The chunks of `view`'s old generations under `cfg`.
    pub fn of(cfg: &Config, view: IndexView) -> Chunks {
        let b = u32::from(cfg.bucket_slots.max(1));
        let generations = (view.oldest..view.newest)
            .map(|g| {
                let per = generation_slots(cfg.index_slots_per_node, g);
                let slots = CHUNK_SLOTS.div_ceil(b).saturating_mul(b).min(per).max(1);
                (generation_base(cfg.index_slots_per_node, g), per, slots)
            })
            .collect();
        Chunks {
            generations,
            nodes: cfg.nodes,
        }
    }

    fn per_node(per: u32, slots: u32) -> u64 {
        u64::from(per.div_ceil(slots))
    }

    /// Chunks in all.
    pub fn total(&self) -> u64 {
        self.generations
            .iter()
            .map(|&(_, per, slots)| Chunks::per_node(per, slots) * u64::from(self.nodes))
            .sum()
    }

    /// Chunk `c`'s first entry and its length (`None` past the last).
    pub fn chunk(&self, mut c: u64) -> Option<(IteAddr, u32)> {
        for &(base, per, slots) in &self.generations {
            let per_node = Chunks::per_node(per, slots);
            let here = per_node * u64::from(self.nodes);
            if c < here {
                // Node by node in turn, so that the sweep's helpers, each
                // near the cursor, spread over every node's NIC.
                let nodes = u64::from(self.nodes);
                let node = (c % nodes) as u16;
                let within = (c / nodes) as u32 * slots;
                let len = slots.min(per - within);
                return Some((
                    IteAddr {
                        node: NodeId(node),
                        slot: base + within,
                    },
                    len,
                ));
            }
            c -= here;
        }
        None
    }
}

/// The chunk a write of key `key` by client `id` sweeps while the
/// directory's cursor is at `cursor`: `cursor` plus this offset, drawn from
/// the id, the cursor and the key (below `window`, the chunks from the
/// cursor on over which writes spread; 0 for a window of one), so that
/// concurrent writers, and one client's successive writes, sweep different
/// chunks.
pub fn sweep_offset(id: ClientId, cursor: u64, key: &[u8], window: u64) -> u64 {
    if window <= 1 {
        return 0;
    }
    crate::rng::below(sweep_draw(id, cursor, key), window)
}

/// The random word [`sweep_offset`] scales (also picking among the chunks
/// a step finds unsealed when it reads ahead).
pub fn sweep_draw(id: ClientId, cursor: u64, key: &[u8]) -> u64 {
    let mut seed = (u64::from(id.node.0) << 16 | u64::from(id.index)) ^ cursor.rotate_left(24);
    for b in key {
        seed = crate::rng::splitmix64(&mut seed) ^ u64::from(*b);
    }
    crate::rng::splitmix64(&mut seed)
}

/// Where the directory word lives: node 0, right after the last generation.
pub fn directory_slot(cfg: &Config) -> IteAddr {
    IteAddr {
        node: NodeId(0),
        slot: generation_base(cfg.index_slots_per_node, cfg.index_generations),
    }
}

/// The READ of the directory word.
pub fn read_directory(cfg: &Config) -> Op {
    Op::Read {
        addr: directory_slot(cfg).remote(),
        len: 8,
    }
}

/// The CAS of the directory word from `expect` to `new`.
pub fn cas_directory(cfg: &Config, expect: u64, new: u64) -> Op {
    Op::Cas {
        addr: directory_slot(cfg).remote(),
        expect,
        new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_word_moves_forward_and_round_trips() {
        let mut v = IndexView::decode(0);
        assert_eq!(
            v,
            IndexView::default(),
            "the never-written word is generation 0"
        );
        let mut seen = vec![v];
        for extend in [false, true, false, false, true, true] {
            v = if !v.growing() || extend {
                v.grown()
            } else {
                v.settled()
            };
            assert_eq!(IndexView::decode(v.with_cursor(7)), v);
            seen.push(v);
        }
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert_eq!(
            v,
            IndexView {
                oldest: 2,
                newest: 5
            }
        );
    }

    #[test]
    fn recorded_positions_name_the_same_entry_in_every_view_that_holds_it() {
        let n = 6;
        let wide = IndexView {
            oldest: 4,
            newest: 7,
        };
        for pos in 0..4 * n {
            let s = wide.stored_position(pos, n, true);
            assert_eq!(wide.position_of(s, n, true), Some(pos));
            let g = wide.generation_of(pos, n);
            // A stable view holds exactly its own generation's positions
            // (among generations closer than 4: they count modulo 4).
            for h in 4..=7 {
                let got = IndexView::stable(h).position_of(s, n, true);
                assert_eq!(got.is_some(), h == g, "{pos} in {h}");
            }
        }
        let old = wide.stored_position(1, n, true);
        let new = wide.stored_position(3 * n + 1, n, true);
        assert!(crosses_generations(old, new, true));
        assert!(!crosses_generations(
            old,
            wide.stored_position(2, n, true),
            true
        ));
        assert!(
            !crosses_generations(old, new, false),
            "no growth, no crossing"
        );
        assert_eq!(IndexView::default().stored_position(40, 48, false), 40);
    }

    #[test]
    fn the_chunks_cover_every_old_entry_once() {
        let cfg = Config {
            nodes: 3,
            index_slots_per_node: 12,
            bucket_slots: 4,
            index_generations: 4,
            ..Config::default()
        };
        let view = IndexView {
            oldest: 0,
            newest: 2,
        };
        let chunks = Chunks::of(&cfg, view);
        let mut covered = std::collections::BTreeSet::new();
        for c in 0..chunks.total() {
            let (first, len) = chunks.chunk(c).unwrap();
            assert_eq!(first.slot % 4, 0, "whole buckets");
            for s in first.slot..first.slot + len {
                assert!(covered.insert((first.node, s)));
            }
        }
        assert_eq!(chunks.chunk(chunks.total()), None);
        let nodes: Vec<_> = (0..6).map(|c| chunks.chunk(c).unwrap().0.node.0).collect();
        assert_eq!(nodes, [0, 1, 2, 0, 1, 2], "the nodes in turn");
        // Generations 0 and 1: 12 + 24 entries on each of 3 nodes.
        assert_eq!(covered.len(), 3 * 36);
        assert!(covered.iter().all(|&(_, s)| s < 36));
    }
}
