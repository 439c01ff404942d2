//! Clients without storage (docs/protocol.md §2.4): the lease block each
//! one has on the node that hosts its share, the generations of its memory
//! windows, and the node's agent that binds them.
//!
//! A client without storage writes its entries over the fabric, through one
//! memory window per size class bound over exactly its share
//! ([`Config::window_of`]). A WRITE can land late or twice, so an entry
//! written under one key is never reused until the window is bound again
//! (a new *generation*): the bind revokes the old key, and nothing posted
//! under it lands after the bind completes, however long the fabric held
//! it. Safety rests on that, not on any clock.
//!
//! The client takes its share and asks for generations in its lease block:
//! a [`LeaseWord`] (the holder's nonce and the generations requested and
//! granted, which it CASes to take the share and to ask for the next), a
//! heartbeat it advances by CAS while it writes, and one [`KeyWord`] per
//! class, which the agent writes after binding. The agent ([`Agent`]) is
//! the node's CPU, off every request's path: it binds the windows of each
//! request, stores the keys and grants it, and takes back a share whose
//! heartbeat stood still for the lease term (binding its windows again, so
//! nothing of the old holder lands after). A client adopts keys only when
//! the lease word names it and every key word names the generation it
//! grants, so a READ torn across the agent's stores is never taken for a
//! grant.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::addr::{ClientId, NodeId, RemoteAddr};
use crate::config::Config;
use crate::fabric::{
    Completion, Endpoint, FabricError, Op, OpId, OpOutput, WindowKey, WorkRequest,
};

/// The first word of a lease block: who holds the share (a nonce the
/// client drew, 0: nobody) and the generations of its windows it requested
/// and the agent granted. One word, so that one READ sees the three
/// together: a client adopts keys only while the word names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LeaseWord {
    /// The holder's nonce (24 bits; 0: free).
    pub holder: u32,
    /// The newest generation the holder asked for (20 bits).
    pub requested: u32,
    /// The newest generation the agent bound (20 bits).
    pub granted: u32,
}

/// Largest generation a lease word holds (they wrap past it).
pub const MAX_GENERATION: u32 = (1 << 20) - 1;

/// Largest holder nonce.
pub const MAX_NONCE: u32 = (1 << 24) - 1;

impl LeaseWord {
    /// The word as stored: holder in the top 24 bits, then requested, then
    /// granted (20 bits each).
    pub fn encode(self) -> u64 {
        (u64::from(self.holder & MAX_NONCE) << 40)
            | (u64::from(self.requested & MAX_GENERATION) << 20)
            | u64::from(self.granted & MAX_GENERATION)
    }

    /// The lease word `w` encodes.
    pub fn decode(w: u64) -> LeaseWord {
        LeaseWord {
            holder: (w >> 40) as u32,
            requested: ((w >> 20) as u32) & MAX_GENERATION,
            granted: (w as u32) & MAX_GENERATION,
        }
    }

    /// Whether a request is waiting for the agent.
    pub fn pending(self) -> bool {
        self.holder != 0 && self.requested != self.granted
    }
}

/// A key word of a lease block: the generation it was bound in and the
/// window's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyWord {
    /// The generation.
    pub generation: u32,
    /// The window's key in it.
    pub key: WindowKey,
}

impl KeyWord {
    /// The word as stored: the generation in the high half.
    pub fn encode(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.key.0)
    }

    /// The key word `w` encodes.
    pub fn decode(w: u64) -> KeyWord {
        KeyWord {
            generation: (w >> 32) as u32,
            key: WindowKey(w as u32),
        }
    }
}

/// A lease block as read: the lease word, the holder's heartbeat and each
/// class's key word.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseBlock {
    /// The lease word.
    pub lease: LeaseWord,
    /// The heartbeat: a count the holder advances by CAS while it runs
    /// (the agent takes the share back when it stands still for the lease
    /// term).
    pub beat: u64,
    /// One key word per size class.
    pub keys: Vec<KeyWord>,
}

impl LeaseBlock {
    /// The block in `bytes` (8 per word), if they hold at least the lease
    /// word.
    pub fn decode(bytes: &[u8]) -> Option<LeaseBlock> {
        let mut words = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        let lease = LeaseWord::decode(words.next()?);
        let beat = words.next()?;
        Some(LeaseBlock {
            lease,
            beat,
            keys: words.map(KeyWord::decode).collect(),
        })
    }

    /// The block's bytes.
    pub fn encode(&self) -> Vec<u8> {
        [self.lease.encode(), self.beat]
            .into_iter()
            .chain(self.keys.iter().map(|k| k.encode()))
            .flat_map(u64::to_le_bytes)
            .collect()
    }

    /// The keys of the granted generation for holder `nonce`, if the lease
    /// word names it and every key word names that generation (a block read
    /// while the agent stored it may mix two).
    pub fn granted_keys(&self, nonce: u32) -> Option<Vec<WindowKey>> {
        let g = self.lease.granted;
        (nonce != 0
            && self.lease.holder == nonce
            && g > 0
            && self.keys.iter().all(|k| k.generation == g))
        .then(|| self.keys.iter().map(|k| k.key).collect())
    }
}

/// What a client without storage knows of its lease and windows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PureWindows {
    /// Its nonce: what its lease word holds while it holds the share (drawn
    /// when the client is made; never 0).
    pub nonce: u32,
    /// Whether it took the share (its nonce was seen in the lease word).
    pub held: bool,
    /// Its heartbeat count as it last set or saw it.
    pub beat: u64,
    /// When its next heartbeat is due (its clock).
    pub beat_due: u64,
    /// The generation its keys belong to (0: none yet).
    pub generation: u32,
    /// The key of each size class's window in that generation (empty: none
    /// yet, or revoked).
    pub keys: Vec<WindowKey>,
    /// A newer generation it waits for (it asks for one when it starts,
    /// so that no key of an earlier holder of its share stays good, and
    /// when its share has nothing left to reuse in this one).
    pub want: Option<u32>,
}

impl PureWindows {
    /// The state of a client that drew `nonce` (made non-zero and 24 bits).
    pub fn new(nonce: u32) -> PureWindows {
        PureWindows {
            nonce: (nonce & MAX_NONCE).max(1),
            ..PureWindows::default()
        }
    }

    /// Whether the client must get (newer) keys before it writes.
    pub fn needs_keys(&self) -> bool {
        self.keys.is_empty() || self.want.is_some()
    }

    /// Whether its heartbeat is overdue at `now` (its clock): it holds keys
    /// and two thirds of the lease term `term_ns` passed since its last
    /// beat (a write's data round beats from a third on, so only a client
    /// that has not written for that long beats at the start of an
    /// operation: docs/protocol.md §2.4).
    pub fn beat_overdue(&self, now: u64, term_ns: u64) -> bool {
        self.holds_keys() && now >= self.beat_due.saturating_add(term_ns / 3)
    }

    /// Whether it holds its share and keys of a generation: a lease whose
    /// heartbeat it must keep.
    pub fn holds_keys(&self) -> bool {
        self.held && !self.keys.is_empty()
    }

    /// The keys are dead (a window refused them): wait for a newer
    /// generation.
    pub fn revoked(&mut self) {
        self.want = Some(self.want.unwrap_or(0).max(self.generation + 1));
    }
}

/// A node's agent: the node's CPU, off every request's path. Each pass
/// ([`Agent::start`], [`Agent::advance`]) reads the node's lease blocks (one
/// CPU read); binds the windows of every block whose holder asked for a
/// newer generation, stores their keys (a CPU store of the key words) and
/// grants it (a loopback CAS of the lease word: clients CAS it too); and
/// takes back every share whose heartbeat stood still for the lease term by
/// the agent's own clock: binds its windows again (revoking the holder's
/// keys, whatever its requests' landing delays) and frees it (loopback CASes
/// of the lease and heartbeat words). Sans-IO: each step takes the results
/// of the requests it gave last, in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Agent {
    node: NodeId,
    /// Per held share: the heartbeat last seen and since when (ns, the
    /// agent's clock).
    beats: BTreeMap<u16, (u64, u64)>,
    stage: Stage,
}

/// What a pass does for one share.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Plan {
    share: u16,
    lease: LeaseWord,
    beat: u64,
    reclaim: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Stage {
    /// The lease blocks were read at this instant (the agent's clock).
    Read(u64),
    Bind(Vec<Plan>),
    Keys(Vec<Plan>),
    Words,
    Done,
}

impl Agent {
    /// The agent of node `node`.
    pub fn new(node: NodeId) -> Agent {
        Agent {
            node,
            beats: BTreeMap::new(),
            stage: Stage::Done,
        }
    }

    /// Starts a pass at `now` (the node's clock): the CPU read of every
    /// lease block (none when the node hosts no client without storage).
    pub fn start(&mut self, cfg: &Config, now: u64) -> Vec<Op> {
        let first = self.client(cfg, 0);
        match cfg.lease_block(first) {
            Some(offset) if cfg.pure_clients_per_node > 0 => {
                self.stage = Stage::Read(now);
                vec![Op::LocalRead {
                    offset,
                    len: (u64::from(cfg.pure_clients_per_node) * cfg.lease_block_bytes()) as u32,
                }]
            }
            _ => {
                self.stage = Stage::Done;
                Vec::new()
            }
        }
    }

    /// Takes the results of the requests given last (in order) and gives
    /// the next ones; empty once the pass is over. A failed access ends the
    /// pass (the next pass starts over).
    pub fn advance(&mut self, cfg: &Config, results: &[Result<OpOutput, FabricError>]) -> Vec<Op> {
        let (ops, next) = match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Read(now) => match results.first() {
                Some(Ok(OpOutput::Read(bytes))) => {
                    let plans = self.plan(cfg, bytes, now);
                    (self.binds(cfg, &plans), Stage::Bind(plans))
                }
                _ => (Vec::new(), Stage::Done),
            },
            Stage::Bind(plans) => self.store_keys(cfg, plans, results),
            Stage::Keys(plans) => (self.words(cfg, &plans), Stage::Words),
            Stage::Words | Stage::Done => (Vec::new(), Stage::Done),
        };
        self.stage = if ops.is_empty() { Stage::Done } else { next };
        ops
    }

    /// The agent's node.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The heartbeats it recorded: per share, the count and since when.
    pub fn records(&self) -> &BTreeMap<u16, (u64, u64)> {
        &self.beats
    }

    fn client(&self, cfg: &Config, share: u16) -> ClientId {
        ClientId {
            node: self.node,
            index: cfg.clients_per_node + share,
        }
    }

    /// What to do for each share, its blocks read at `now`: grant a
    /// pending request, take back a share whose heartbeat stood still for
    /// the lease term.
    fn plan(&mut self, cfg: &Config, bytes: &[u8], now: u64) -> Vec<Plan> {
        let term = crate::time::duration_nanos(cfg.lease_term);
        let mut plans = Vec::new();
        for (j, b) in bytes.chunks(cfg.lease_block_bytes() as usize).enumerate() {
            let share = j as u16;
            let Some(block) = LeaseBlock::decode(b) else {
                continue;
            };
            if block.lease.holder == 0 {
                self.beats.remove(&share);
                continue;
            }
            let since = match self.beats.get(&share) {
                Some(&(beat, since)) if beat == block.beat => since,
                _ => {
                    self.beats.insert(share, (block.beat, now));
                    now
                }
            };
            let reclaim = now.saturating_sub(since) >= term;
            if reclaim || block.lease.pending() {
                plans.push(Plan {
                    share,
                    lease: block.lease,
                    beat: block.beat,
                    reclaim,
                });
            }
        }
        plans
    }

    /// Binds every window of every planned share again.
    fn binds(&self, cfg: &Config, plans: &[Plan]) -> Vec<Op> {
        let mut ops = Vec::new();
        for p in plans {
            let id = self.client(cfg, p.share);
            for class in 0..cfg.data_tables().len() as u8 {
                if let (Some(w), Some((offset, len))) =
                    (cfg.window_of(id, class), cfg.share_range(id, class))
                {
                    ops.push(Op::BindWindow {
                        index: w.index,
                        offset,
                        len,
                    });
                }
            }
        }
        ops
    }

    /// Stores the keys of every granted share (a reclaimed one keeps its
    /// revoked keys: no grant names them).
    fn store_keys(
        &mut self,
        cfg: &Config,
        plans: Vec<Plan>,
        results: &[Result<OpOutput, FabricError>],
    ) -> (Vec<Op>, Stage) {
        let classes = cfg.data_tables().len();
        let mut keys = results.iter().map(|r| match r {
            Ok(OpOutput::Bound { key }) => Some(*key),
            _ => None,
        });
        let mut ops = Vec::new();
        let mut bound = Vec::new();
        for p in plans {
            // Each share's binds, in order, whether or not one failed (a
            // short-circuiting collect would hand the next share the rest).
            let mine: Vec<Option<WindowKey>> = keys.by_ref().take(classes).collect();
            let Some(got) = mine.into_iter().collect::<Option<Vec<WindowKey>>>() else {
                continue;
            };
            if !p.reclaim {
                let g = p.lease.requested;
                let words: Vec<u8> = got
                    .into_iter()
                    .flat_map(|key| KeyWord { generation: g, key }.encode().to_le_bytes())
                    .collect();
                let offset = cfg.lease_block(self.client(cfg, p.share)).unwrap_or(0) + 16;
                ops.push(Op::LocalWrite {
                    offset,
                    data: words,
                });
            }
            bound.push(p);
        }
        if ops.is_empty() && !bound.is_empty() {
            // Only take-backs: straight to the words.
            return (self.words(cfg, &bound), Stage::Words);
        }
        (ops, Stage::Keys(bound))
    }

    /// The lease (and heartbeat) words of every planned share, by loopback
    /// CAS: a grant names the generation the holder asked for; a take-back
    /// frees the share.
    fn words(&mut self, cfg: &Config, plans: &[Plan]) -> Vec<Op> {
        let mut ops = Vec::new();
        for p in plans {
            let at = cfg.lease_block(self.client(cfg, p.share)).unwrap_or(0);
            let lease = if p.reclaim {
                self.beats.remove(&p.share);
                ops.push(Op::Cas {
                    addr: RemoteAddr::data(self.node, at + 8),
                    expect: p.beat,
                    new: 0,
                });
                LeaseWord {
                    holder: 0,
                    requested: p.lease.granted,
                    granted: p.lease.granted,
                }
            } else {
                LeaseWord {
                    granted: p.lease.requested,
                    ..p.lease
                }
            };
            ops.push(Op::Cas {
                addr: RemoteAddr::data(self.node, at),
                expect: p.lease.encode(),
                new: lease.encode(),
            });
        }
        ops
    }
}

/// A nonce for a client without storage made in this process: the
/// process, the wall clock and a counter, mixed (never 0).
pub fn draw_nonce() -> u32 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut seed = t ^ (u64::from(std::process::id()) << 32) ^ NEXT.fetch_add(1, Ordering::Relaxed);
    ((crate::rng::splitmix64(&mut seed) as u32) & MAX_NONCE).max(1)
}

/// Runs one pass of `agent` on `ep` (an endpoint of the agent's node: the
/// node's CPU and its loopback), waiting at most `within` for each step.
/// Returns how many requests it made.
///
/// # Errors
///
/// The fabric's error if a request could not be posted.
pub fn serve_once<E: Endpoint>(
    agent: &mut Agent,
    cfg: &Config,
    ep: &mut E,
    within: Duration,
) -> Result<usize, FabricError> {
    let mut ops = agent.start(cfg, ep.now().0);
    let mut made = 0;
    while !ops.is_empty() {
        let n = ops.len();
        made += n;
        for (i, op) in ops.into_iter().enumerate() {
            ep.post(WorkRequest {
                id: OpId(i as u64),
                op,
            })?;
        }
        let mut got: Vec<Completion> = Vec::new();
        let start = std::time::Instant::now();
        while got.len() < n && start.elapsed() < within {
            ep.wait(&mut got, within.saturating_sub(start.elapsed()));
        }
        got.sort_by_key(|c| c.id.0);
        let results: Vec<_> = got.into_iter().map(|c| c.result).collect();
        ops = agent.advance(cfg, &results);
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_a_mixed_block_grants_nothing() {
        let lease = LeaseWord {
            holder: 77,
            requested: 3,
            granted: 2,
        };
        assert_eq!(LeaseWord::decode(lease.encode()), lease);
        assert!(lease.pending());
        let key = KeyWord {
            generation: 2,
            key: WindowKey(9),
        };
        assert_eq!(KeyWord::decode(key.encode()), key);
        let block = LeaseBlock {
            lease,
            beat: 5,
            keys: vec![key, key],
        };
        assert_eq!(LeaseBlock::decode(&block.encode()), Some(block.clone()));
        assert_eq!(block.granted_keys(77), Some(vec![WindowKey(9); 2]));
        assert_eq!(block.granted_keys(78), None, "another holder's keys");
        let torn = LeaseBlock {
            keys: vec![
                key,
                KeyWord {
                    generation: 1,
                    key: WindowKey(4),
                },
            ],
            ..block
        };
        assert_eq!(torn.granted_keys(77), None, "a READ torn across the store");
    }
}

#[cfg(test)]
mod agent_tests {
    use super::*;
    use crate::layout::SizeClass;

    /// Two clients without storage on node 0, two size classes.
    fn cfg() -> Config {
        Config {
            nodes: 1,
            index_slots_per_node: 16,
            dtes_per_node: 16,
            clients_per_node: 1,
            pure_clients_per_node: 2,
            size_classes: vec![SizeClass {
                entry_bytes: 64,
                dtes_per_node: 16,
            }],
            ..Config::default()
        }
    }

    /// A bind of the first share that fails leaves the second share its own
    /// keys: each share takes exactly its classes' results.
    #[test]
    fn a_failed_bind_does_not_shift_the_next_shares_keys() {
        let cfg = cfg();
        let mut agent = Agent::new(NodeId(0));
        let read = agent.start(&cfg, 5);
        assert_eq!(read.len(), 1);
        let pending = LeaseBlock {
            lease: LeaseWord {
                holder: 9,
                requested: 1,
                granted: 0,
            },
            beat: 0,
            keys: vec![
                KeyWord {
                    generation: 0,
                    key: WindowKey(0)
                };
                2
            ],
        };
        let bytes: Vec<u8> = [pending.encode(), pending.encode()].concat();
        let binds = agent.advance(&cfg, &[Ok(OpOutput::Read(bytes))]);
        assert_eq!(binds.len(), 4, "two classes for each of two shares");
        let bound = |k| Ok(OpOutput::Bound { key: WindowKey(k) });
        let stores = agent.advance(
            &cfg,
            &[Err(FabricError::Timeout), bound(11), bound(21), bound(22)],
        );
        assert_eq!(stores.len(), 1, "only the second share is granted");
        let Op::LocalWrite { data, .. } = &stores[0] else {
            panic!("{stores:?}");
        };
        let keys: Vec<u32> = data
            .chunks(8)
            .map(|c| {
                KeyWord::decode(u64::from_le_bytes(c.try_into().unwrap()))
                    .key
                    .0
            })
            .collect();
        assert_eq!(keys, vec![21, 22]);
    }
}
