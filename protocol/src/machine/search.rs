//! The cuckoo search of a PUT whose candidates are all taken: breadth first
//! for the shortest chain of moves that frees one of them (as MemC3 and
//! libcuckoo search), bounded by what one attempt can afford.
//!
//! Level by level, in two rounds per level whatever its width:
//! 1. read the header and key of the data table entry each frontier index
//!    table entry names (one round);
//! 2. read every not yet visited alternative candidate of those keys, in
//!    their other buckets, one READ per bucket (one round). An empty one
//!    ends the search: the path from the PUT's candidate down to its parent
//!    is the chain of moves to make, deepest first (docs/protocol.md §5.5).
//!
//! An entry that its own MIGRATE step can free without moving anything (a
//! tombstone, a committed copy still linked at its source, an abandoned
//! entry to reclaim, or an entry whose alternative names the same data table
//! entry: a copy met from its destination side) ends the search too: the
//! path leads to it.
//!
//! Before each level the search checks what the attempt can still afford,
//! from the costs it measured so far (elapsed time per round and per
//! request): the level's requests plus executing a path of that length
//! (about [`ROUNDS_PER_MOVE`] rounds a move) plus the PUT's own install,
//! verify and commit must fit before the deadline minus the margin; the
//! frontier is cut to the width that fits. When `max_migrate_depth` is
//! reached (`growth_depth` while the index can still grow:
//! `Cx::insert_depth`) or no entry is left to expand, the search ends
//! without a path and the PUT reports `TableFull` (or grows the index) at
//! once: no chain within the depth limit exists, and retrying would repeat
//! the same search. A level is read whole:
//! one wider than [`MAX_FRONTIER`] entries is read in several rounds of at
//! most that many (issue 39: the level used to be truncated there without
//! the search saying so, and a chain among the dropped entries was answered
//! `TableFull`). When the budget cut entries the search
//! would otherwise have expanded, that says nothing about the table, only
//! about this attempt (its remaining time, and its prices, measured from as
//! few as two rounds: one descheduled round prices a short chain at
//! seconds): the search ends [`Found::Unaffordable`], which the PUT reports
//! as the retryable `Timeout` (issue 24, hole 3; nothing was written).

use std::collections::{BTreeSet, HashSet};

use crate::addr::IteAddr;
use crate::error::Error;
use crate::layout::{DteState, IndexEntry};
use crate::machine::context::Cx;
use crate::machine::io::{bucket_of, Results};
use crate::time::{duration_nanos, Nanos};

/// Rounds one move of a path costs when executed (read the source entry and
/// its data table entry, read the key's alternatives, write the copy, lock,
/// install, commit, finish, mark).
pub const ROUNDS_PER_MOVE: u64 = 9;

/// Rounds the PUT needs after its search (scan again, install, verify,
/// commit).
const ROUNDS_AFTER: u64 = 4;

/// Most entries read in one round: a wider level (of data table entries or
/// of alternatives) is read in several rounds, so that a round's bytes and
/// work requests stay bounded on wide, full tables while the level is still
/// read whole.
pub const MAX_FRONTIER: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Node {
    slot: IteAddr,
    word: IndexEntry,
    parent: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Reading the data table entries of `frontier` (a round's share of the
    /// level); `rest`: the level's entries still to read, `children`: the
    /// alternatives found so far.
    AwaitKeys {
        rest: Vec<usize>,
        children: Vec<usize>,
    },
    /// Reading the index table entries of `children` (a round's share of
    /// the frontier's alternatives) by bucket, one READ for each of
    /// `buckets` (first entries); `rest`: those still to read.
    AwaitAlternatives {
        children: Vec<usize>,
        rest: Vec<usize>,
        buckets: Vec<IteAddr>,
    },
}

impl Phase {
    const KEYS: Phase = Phase::AwaitKeys {
        rest: Vec::new(),
        children: Vec::new(),
    };
}

/// The first entry of the bucket (of `b` entries) holding `slot`.
fn bucket_start(slot: IteAddr, b: usize) -> IteAddr {
    IteAddr {
        node: slot.node,
        slot: slot.slot - slot.slot % b as u32,
    }
}

/// The breadth-first search sub-machine.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CuckooSearch {
    nodes: Vec<Node>,
    /// Entries already on some level (a set: a search near full visits
    /// thousands).
    visited: BTreeSet<IteAddr>,
    frontier: Vec<usize>,
    depth: u8,
    started: Nanos,
    rounds: u64,
    requests: u64,
    blocked: bool,
    /// The budget cut entries the search would have expanded.
    cut: bool,
    phase: Phase,
}

/// How a search ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Free these entries, deepest last in the list (each one's key moves
    /// into the next one's freed entry; the last is freed by its own move).
    Path(Vec<IteAddr>),
    /// No path within the depth limit. `blocked`: an entry in progress (or
    /// torn under the read) was left unexplored, so another attempt may find
    /// a path; otherwise the table is full as far as the search reaches.
    NoPath { blocked: bool },
    /// No path found among the entries the attempt could afford to expand
    /// before its deadline; a fresh attempt (with its own deadline and
    /// prices) may find one.
    Unaffordable,
}

type Out = Option<Result<Found, Error>>;

impl CuckooSearch {
    /// Starts from the PUT's candidates and the words its scan read (all
    /// present).
    pub fn start(cx: &mut Cx<'_>, cands: &[IteAddr], words: &[IndexEntry]) -> (CuckooSearch, Out) {
        let nodes: Vec<Node> = cands
            .iter()
            .zip(words)
            .map(|(&slot, &word)| Node {
                slot,
                word,
                parent: None,
            })
            .collect();
        let mut s = CuckooSearch {
            frontier: (0..nodes.len()).collect(),
            visited: cands.iter().copied().collect(),
            nodes,
            depth: 1,
            started: cx.now,
            rounds: 0,
            requests: 0,
            blocked: false,
            cut: false,
            phase: Phase::KEYS,
        };
        let out = s.read_keys(cx);
        (s, out)
    }

    fn path_to(&self, mut i: usize) -> Vec<IteAddr> {
        let mut path = vec![self.nodes[i].slot];
        while let Some(p) = self.nodes[i].parent {
            path.push(self.nodes[p].slot);
            i = p;
        }
        path.reverse();
        path
    }

    /// How many frontier entries the attempt can afford to expand in the
    /// next level, and still execute a path of that level's length, at the
    /// costs measured so far: a round trip (elapsed time per round) for each
    /// round of the path, and the elapsed time per request for the level's
    /// own requests (one per entry plus its N - 1 other buckets), whichever
    /// is dearer.
    fn affordable_width(&self, cx: &Cx<'_>) -> usize {
        if self.rounds == 0 {
            return usize::MAX;
        }
        let elapsed = cx.now.0.saturating_sub(self.started.0);
        let rtt = elapsed / self.rounds;
        let per_request = elapsed / self.requests.max(1);
        let path = rtt.saturating_mul(ROUNDS_PER_MOVE * u64::from(self.depth) + ROUNDS_AFTER);
        let margin = duration_nanos(cx.cfg().deadline_margin);
        let left = cx
            .deadline
            .0
            .saturating_sub(cx.now.0)
            .saturating_sub(margin)
            .saturating_sub(path)
            .saturating_sub(2 * rtt);
        let per_entry = per_request.saturating_mul(u64::from(cx.cfg().candidates).max(1));
        if per_entry == 0 {
            return usize::MAX;
        }
        usize::try_from(left / per_entry).unwrap_or(usize::MAX)
    }

    fn no_path(&self, cx: &Cx<'_>) -> Out {
        if self.cut && !cx.client.faults.unaffordable_search_table_full {
            return Some(Ok(Found::Unaffordable));
        }
        Some(Ok(Found::NoPath {
            blocked: self.blocked,
        }))
    }

    fn read_keys(&mut self, cx: &mut Cx<'_>) -> Out {
        if self.depth > cx.insert_depth() {
            return self.no_path(cx);
        }
        let width = self.affordable_width(cx);
        if width < self.frontier.len() {
            self.cut = true;
            self.frontier.truncate(width);
        }
        if self.frontier.is_empty() {
            return self.no_path(cx);
        }
        let level = std::mem::take(&mut self.frontier);
        self.read_key_round(cx, level, Vec::new())
    }

    /// Reads the data table entries of a round's share of `level` (the
    /// frontier entries of this level still to read), `children` being the
    /// alternatives found so far at this level.
    fn read_key_round(
        &mut self,
        cx: &mut Cx<'_>,
        mut level: Vec<usize>,
        children: Vec<usize>,
    ) -> Out {
        let rest = level.split_off(level.len().min(MAX_FRONTIER));
        self.frontier = level;
        for &i in &self.frontier {
            let d = self.nodes[i].word.dte()?;
            cx.read_dte(d, false);
        }
        self.requests += self.frontier.len() as u64;
        self.phase = Phase::AwaitKeys { rest, children };
        None
    }

    /// Reads the index table entries of a round's share of `children` (the
    /// alternatives of this level still to read).
    fn read_alternative_round(&mut self, cx: &mut Cx<'_>, mut children: Vec<usize>) -> Out {
        let rest = children.split_off(children.len().min(MAX_FRONTIER));
        // One READ per bucket holding alternatives (with one-entry buckets,
        // one per alternative).
        let b = cx.bucket_len();
        let mut buckets: Vec<IteAddr> = Vec::new();
        for &c in &children {
            let start = bucket_start(self.nodes[c].slot, b);
            if !buckets.contains(&start) {
                buckets.push(start);
                cx.read_bucket(start);
            }
        }
        self.requests += buckets.len() as u64;
        self.phase = Phase::AwaitAlternatives {
            children,
            rest,
            buckets,
        };
        None
    }

    fn on_keys(
        &mut self,
        cx: &mut Cx<'_>,
        results: &Results,
        rest: Vec<usize>,
        mut children: Vec<usize>,
    ) -> Out {
        let frontier = std::mem::take(&mut self.frontier);
        for (&i, r) in frontier.iter().zip(results) {
            let d = self.nodes[i].word.dte()?;
            let y = match cx.view(d, r) {
                Ok(y) => y,
                // Torn or reused under us: not a way forward this time.
                Err(Error::Corrupt(_)) => {
                    self.blocked = true;
                    continue;
                }
                Err(e) => return Some(Err(e)),
            };
            let st = y.header.state;
            let cands = cx.candidates(&y.key);
            let Some(pos) = cands.iter().position(|&c| c == self.nodes[i].slot) else {
                self.blocked = true;
                continue;
            };
            let freeable = match st.state {
                DteState::Deleted => true,
                DteState::Valid => cx.copy_at_source(&st, pos),
                DteState::Aborted => true,
                DteState::Writing => cx.owner_expired(y.header.deadline),
                DteState::Free => false,
            };
            if freeable {
                return Some(Ok(Found::Path(self.path_to(i))));
            }
            if st.state != DteState::Valid {
                // In progress within its owner's deadline (or never written):
                // it may be movable later.
                self.blocked = true;
                continue;
            }
            for (j, &c) in cands.iter().enumerate() {
                // Through the key's other buckets: its own bucket's slots are
                // full (read whole) and a move within it frees nothing new.
                // Only where the key may be put (while the index grows, its
                // new generation).
                if cx.same_bucket(j, pos) || !cx.is_target(j) || !self.visited.insert(c) {
                    continue;
                }
                self.nodes.push(Node {
                    slot: c,
                    word: IndexEntry::NEVER_USED,
                    parent: Some(i),
                });
                children.push(self.nodes.len() - 1);
            }
        }
        if !rest.is_empty() {
            // The level's next round of data table entries.
            return self.read_key_round(cx, rest, children);
        }
        if cx.client.faults.capped_search_table_full {
            // The switch: the level's alternatives past one round's reads
            // dropped, and nothing said.
            children.truncate(MAX_FRONTIER);
        }
        if children.is_empty() {
            return self.no_path(cx);
        }
        self.read_alternative_round(cx, children)
    }

    fn on_alternatives(
        &mut self,
        cx: &mut Cx<'_>,
        children: Vec<usize>,
        buckets: &[IteAddr],
        results: &Results,
    ) -> Out {
        // Two frontier entries naming one data table entry would read it
        // twice (within this round, or against an earlier round's share).
        let mut seen: HashSet<IndexEntry> =
            self.frontier.iter().map(|&f| self.nodes[f].word).collect();
        let b = cx.bucket_len();
        for &c in &children {
            let slot = self.nodes[c].slot;
            let start = bucket_start(slot, b);
            let k = buckets.iter().position(|&s| s == start)?;
            let w = match bucket_of(results.get(k)?, b) {
                Ok(mut words) => words.nth((slot.slot - start.slot) as usize)?,
                Err(e) => return Some(Err(e)),
            };
            self.nodes[c].word = w;
            let parent = self.nodes[c].parent?;
            if w.is_growth_seal() {
                // A sealed entry where keys may be put (only the newest
                // generation's are searched): the index grew past this
                // client's view, whose next attempt reads the directory.
                cx.fell_behind();
                self.blocked = true;
                continue;
            }
            if w.is_empty() || w == self.nodes[parent].word {
                // Empty: the parent's key moves here. Or the same entry as
                // the parent's: a committed copy met from its destination
                // side, which the parent's move finishes first.
                return Some(Ok(Found::Path(self.path_to(parent))));
            }
            // Expand each data table entry once.
            if seen.insert(w) {
                self.frontier.push(c);
            }
        }
        None
    }

    /// Takes the completions of the last round.
    pub fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Out {
        self.rounds += 1;
        match std::mem::replace(&mut self.phase, Phase::KEYS) {
            Phase::AwaitKeys { rest, children } => self.on_keys(cx, &results, rest, children),
            Phase::AwaitAlternatives {
                children,
                rest,
                buckets,
            } => {
                if let Some(out) = self.on_alternatives(cx, children, &buckets, &results) {
                    return Some(out);
                }
                if !rest.is_empty() {
                    return self.read_alternative_round(cx, rest);
                }
                self.depth += 1;
                self.read_keys(cx)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The search's budget at measured prices: a level 2 search whose first
    //! two rounds (4 requests) took 400 µs, with 17.1 ms left before its
    //! deadline. A round trip is 200 µs and a request 100 µs, so an entry of
    //! the next level (1 + N - 1 requests, N = 2) costs 200 µs; executing a
    //! two-move path costs 200 µs x (9 x 2 + 4) = 4.4 ms; the margin (10 ms)
    //! and two more round trips come off too: 2.3 ms left, 11 entries.

    use std::sync::Arc;

    use super::*;
    use crate::addr::ClientId;
    use crate::addr::{DteAddr, NodeId};
    use crate::config::Config;
    use crate::machine::context::ClientState;
    use crate::machine::io::Io;

    fn client() -> ClientState {
        let cfg = Config {
            candidates: 2,
            ..Config::default()
        };
        ClientState::new(
            Arc::new(cfg),
            ClientId {
                node: NodeId(0),
                index: 0,
            },
        )
        .unwrap()
    }

    /// A level 2 search with `frontier` entries, after 2 rounds and 4
    /// requests started at 1 ms.
    fn searched(frontier: usize) -> CuckooSearch {
        CuckooSearch {
            nodes: (0..frontier as u32)
                .map(|i| Node {
                    slot: IteAddr {
                        node: NodeId(0),
                        slot: i,
                    },
                    word: IndexEntry::new(DteAddr { table: 0, index: i }, 0, 0),
                    parent: None,
                })
                .collect(),
            visited: BTreeSet::new(),
            frontier: (0..frontier).collect(),
            depth: 2,
            started: Nanos(1_000_000),
            rounds: 2,
            requests: 4,
            blocked: false,
            cut: false,
            phase: Phase::KEYS,
        }
    }

    fn cx<'a>(io: &'a mut Io, client: &'a mut ClientState) -> Cx<'a> {
        Cx {
            io,
            client,
            now: Nanos(1_400_000),
            deadline: Nanos(18_500_000),
        }
    }

    #[test]
    fn the_budget_prices_the_level_and_the_path_at_the_measured_costs() {
        let (mut io, mut client) = (Io::default(), client());
        let cx = cx(&mut io, &mut client);
        assert_eq!(searched(0).affordable_width(&cx), 11);
        // Nothing measured yet (the first level): the widest level.
        let fresh = CuckooSearch {
            rounds: 0,
            ..searched(0)
        };
        assert_eq!(fresh.affordable_width(&cx), usize::MAX);
    }

    #[test]
    fn a_frontier_the_budget_just_affords_is_read_whole_and_not_cut() {
        let (mut io, mut client) = (Io::default(), client());
        let mut cx = cx(&mut io, &mut client);
        let mut s = searched(11);
        assert!(s.read_keys(&mut cx).is_none());
        assert!(!s.cut, "nothing was cut");
        assert_eq!(s.frontier.len(), 11);
        assert_eq!(s.requests, 4 + 11);
        // One entry more than it affords: cut to 11, and said so.
        let mut s = searched(12);
        assert!(s.read_keys(&mut cx).is_none());
        assert!(s.cut);
        assert_eq!(s.frontier.len(), 11);
    }

    #[test]
    fn a_search_past_the_depth_limit_ends_without_a_path() {
        let (mut io, mut client) = (Io::default(), client());
        let mut cx = cx(&mut io, &mut client);
        // A second to go: the budget affords every level.
        cx.deadline = Nanos(1_000_000_000);
        let depth = cx.cfg().max_migrate_depth;
        let mut at_limit = CuckooSearch {
            depth,
            ..searched(1)
        };
        assert!(
            at_limit.read_keys(&mut cx).is_none(),
            "the last level is read"
        );
        let mut past = CuckooSearch {
            depth: depth + 1,
            ..searched(1)
        };
        assert_eq!(
            past.read_keys(&mut cx),
            Some(Ok(Found::NoPath { blocked: false }))
        );
    }
}
