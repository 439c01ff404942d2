//! Online growth of the index: generations, the directory word, a client's
//! view of them, and the growth seal (docs/protocol.md §2.5).
//!
//! Every node's index region holds up to `Config::index_generations` index
//! tables, each twice the one before, laid end to end
//! ([`crate::hash::generation_base`]). One 64-bit **directory word**, on node
//! 0 after the last generation, says which is in use: generation *g*
//! *stable* (every key's candidates are its generation-*g* ones), or *g
//! growing* (its candidates are its generation-*g* ones, the *old*, followed
//! by its generation-*g+1* ones, the *new*). The word only moves forward:
//! stable *g*, growing *g*, stable *g+1*, ...
//!
//! A client keeps the directory it last read as its [`IndexView`] and reads
//! the word again only when what it meets says its view is behind: a
//! **growth seal** ([`IndexEntry::GROWTH_SEAL`]) in an entry its view counts
//! as current. A growth seals every entry of the old generation, one by one
//! (an empty one by CAS, a linked key's by a MIGRATE into the new
//! generation whose finish leaves the seal), and a key is linked in the new
//! generation only once one of its old entries is sealed. A seal is never
//! removed, so a client whose view is behind meets one among the key's
//! candidates whenever the key has moved on, and learns the truth from the
//! directory before it answers anything.

use crate::addr::{IteAddr, NodeId};
use crate::config::Config;
use crate::hash::{generation_base, Hasher};

/// Most index generations a node's index region can hold.
pub const MAX_GENERATIONS: u8 = 16;

/// Most candidate entries per key (N x B) when the index grows: a MIGRATE
/// copy records a position in 5 bits and its generation's parity in a sixth.
pub const MAX_GROWING_POSITIONS: usize = 32;

/// Index table entries after the last generation on every node that belong
/// to the directory (only node 0's is used).
pub const DIRECTORY_SLOTS: u32 = 1;

const PARITY_BIT: u8 = 1 << 5;
const SLOT_MASK: u8 = PARITY_BIT - 1;

/// The index generations in use, as the directory word says (or as a client
/// last read it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IndexView {
    /// The generation every key's candidates are in (the old one while
    /// growing).
    pub generation: u8,
    /// Whether the index grows into `generation + 1`: keys' candidates are
    /// then their old ones followed by their new ones.
    pub growing: bool,
}

/// Entries of the old generation one step of a growth's sweep seals: a
/// *chunk*, within one node (rounded to whole buckets, and at most the
/// node's whole old generation).
pub const CHUNK_SLOTS: u32 = 8;

const CURSOR_SHIFT: u32 = 16;

impl IndexView {
    /// The directory word of this view, its sweep at chunk 0.
    pub fn encode(self) -> u64 {
        self.with_cursor(0)
    }

    /// The directory word of this view with its growth's sweep at chunk
    /// `cursor`: every chunk before it is sealed.
    pub fn with_cursor(self, cursor: u64) -> u64 {
        (cursor << CURSOR_SHIFT) | (u64::from(self.generation) << 1) | u64::from(self.growing)
    }

    /// The chunk a directory word's growth has swept up to.
    pub fn cursor(word: u64) -> u64 {
        word >> CURSOR_SHIFT
    }

    /// The view a directory word names (the never-written word 0 is
    /// generation 0, stable).
    pub fn decode(word: u64) -> IndexView {
        IndexView {
            generation: ((word >> 1) & 0xff) as u8,
            growing: word & 1 == 1,
        }
    }

    /// The view after this one: growing from stable, the next generation
    /// stable from growing.
    pub fn next(self) -> IndexView {
        if self.growing {
            IndexView {
                generation: self.generation + 1,
                growing: false,
            }
        } else {
            IndexView {
                growing: true,
                ..self
            }
        }
    }

    /// The key's candidate entries in this view: its current generation's,
    /// or while growing its old generation's then its new one's.
    pub fn candidates(self, hasher: &Hasher, key: &[u8]) -> Vec<IteAddr> {
        let mut c = hasher.candidates_in(key, self.generation);
        if self.growing {
            c.extend(hasher.candidates_in(key, self.generation + 1));
        }
        c
    }

    /// Whether candidate position `pos` (of a key with `per_generation`
    /// candidates per generation) is in the old generation of a growing
    /// index: a key may be found there and moved out, never put there.
    pub fn is_old(self, pos: usize, per_generation: usize) -> bool {
        self.growing && pos < per_generation
    }

    /// The 6-bit form a MIGRATE copy records candidate position `pos` in:
    /// the position within its generation, and that generation's parity
    /// (positions as they are when the index never grows).
    pub fn stored_position(self, pos: usize, per_generation: usize, grows: bool) -> u8 {
        if !grows {
            return pos as u8;
        }
        let (generation, within) = if self.is_old(pos, per_generation) || !self.growing {
            (self.generation, pos)
        } else {
            (self.generation + 1, pos - per_generation)
        };
        ((generation & 1) << 5) | (within as u8 & SLOT_MASK)
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
        let parity = (stored & PARITY_BIT) >> 5;
        if parity == self.generation & 1 {
            Some(within)
        } else if self.growing {
            Some(per_generation + within)
        } else {
            None
        }
    }
}

/// Whether a MIGRATE copy's recorded positions lie in two generations: a
/// move of a growth, whose source is sealed when it finishes rather than
/// emptied.
pub fn crosses_generations(src: u8, dst: u8, grows: bool) -> bool {
    grows && (src ^ dst) & PARITY_BIT != 0
}

/// The chunks of generation `generation`'s sweep: how many entries each
/// holds, and how many each node has (the sweep goes node by node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Chunks {
    /// Entries per chunk.
    pub slots: u32,
    /// Chunks per node.
    pub per_node: u32,
    /// Nodes.
    pub nodes: u16,
    /// The generation's first slot on every node.
    pub base: u32,
    /// The generation's entries per node.
    pub node_slots: u32,
}

impl Chunks {
    /// The chunks of generation `generation` under `cfg`.
    pub fn of(cfg: &Config, generation: u8) -> Chunks {
        let per = cfg.index_slots_per_node << generation;
        let b = u32::from(cfg.bucket_slots.max(1));
        let slots = CHUNK_SLOTS.div_ceil(b).saturating_mul(b).min(per).max(1);
        Chunks {
            slots,
            per_node: per.div_ceil(slots),
            nodes: cfg.nodes,
            base: generation_base(cfg.index_slots_per_node, generation),
            node_slots: per,
        }
    }

    /// Chunks in all.
    pub fn total(&self) -> u64 {
        u64::from(self.per_node) * u64::from(self.nodes)
    }

    /// Chunk `c`'s first entry and its length.
    pub fn chunk(&self, c: u64) -> (IteAddr, u32) {
        let node = (c / u64::from(self.per_node.max(1))) as u16;
        let within = (c % u64::from(self.per_node.max(1))) as u32 * self.slots;
        let len = self.slots.min(self.node_slots.saturating_sub(within));
        (
            IteAddr {
                node: NodeId(node),
                slot: self.base + within,
            },
            len,
        )
    }
}

/// Where the directory word lives: node 0, right after the last generation.
pub fn directory_slot(cfg: &Config) -> IteAddr {
    IteAddr {
        node: NodeId(0),
        slot: generation_base(cfg.index_slots_per_node, cfg.index_generations),
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
        let mut words = vec![v.encode()];
        for _ in 0..6 {
            v = v.next();
            assert_eq!(IndexView::decode(v.encode()), v);
            words.push(v.encode());
        }
        assert!(words.windows(2).all(|w| w[0] < w[1]), "{words:?}");
        assert_eq!(
            v,
            IndexView {
                generation: 3,
                growing: false
            }
        );
    }

    #[test]
    fn recorded_positions_name_the_same_entry_in_every_view_that_holds_it() {
        let n = 6;
        let growing = IndexView {
            generation: 4,
            growing: true,
        };
        for pos in 0..2 * n {
            let s = growing.stored_position(pos, n, true);
            assert_eq!(growing.position_of(s, n, true), Some(pos));
            // The stable views on either side hold one of the two ends.
            let before = IndexView {
                generation: 4,
                growing: false,
            };
            let after = IndexView {
                generation: 5,
                growing: false,
            };
            if pos < n {
                assert_eq!(before.position_of(s, n, true), Some(pos));
                assert_eq!(after.position_of(s, n, true), None);
            } else {
                assert_eq!(before.position_of(s, n, true), None);
                assert_eq!(after.position_of(s, n, true), Some(pos - n));
            }
        }
        let (old, new) = (
            growing.stored_position(1, n, true),
            growing.stored_position(n + 1, n, true),
        );
        assert!(crosses_generations(old, new, true));
        assert!(!crosses_generations(
            old,
            growing.stored_position(2, n, true),
            true
        ));
        assert!(
            !crosses_generations(old, new, false),
            "no growth, no crossing"
        );
        assert_eq!(IndexView::default().stored_position(40, 48, false), 40);
    }
}
