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
//! The client asks for a generation in its lease block: a [`LeaseWord`]
//! (generations requested and granted, which it CASes to request the
//! next) and one [`KeyWord`] per class, which the agent writes after
//! binding. The agent is the node's CPU, off every request's path: it
//! sweeps its lease blocks ([`AgentPass`]), binds the windows of each
//! request and writes the keys and the grant in one CPU store. A client
//! adopts keys only when every key word names the generation the lease word
//! grants, so a READ torn across the agent's store is never taken for a
//! grant.

use std::time::Duration;

use crate::addr::{ClientId, NodeId};
use crate::config::Config;
use crate::fabric::{
    Completion, Endpoint, FabricError, Op, OpId, OpOutput, WindowKey, WorkRequest,
};

/// The first word of a lease block: the generations of the client's windows
/// it requested and the agent granted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LeaseWord {
    /// The newest generation the client asked for.
    pub requested: u32,
    /// The newest generation the agent bound.
    pub granted: u32,
}

impl LeaseWord {
    /// The word as stored: requested in the high half.
    pub fn encode(self) -> u64 {
        (u64::from(self.requested) << 32) | u64::from(self.granted)
    }

    /// The lease word `w` encodes.
    pub fn decode(w: u64) -> LeaseWord {
        LeaseWord {
            requested: (w >> 32) as u32,
            granted: w as u32,
        }
    }

    /// Whether a request is waiting for the agent.
    pub fn pending(self) -> bool {
        self.requested > self.granted
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

/// A lease block as read: the lease word and each class's key word.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseBlock {
    /// The lease word.
    pub lease: LeaseWord,
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
        Some(LeaseBlock {
            lease,
            keys: words.map(KeyWord::decode).collect(),
        })
    }

    /// The block's bytes.
    pub fn encode(&self) -> Vec<u8> {
        std::iter::once(self.lease.encode())
            .chain(self.keys.iter().map(|k| k.encode()))
            .flat_map(u64::to_le_bytes)
            .collect()
    }

    /// The keys of the granted generation, if every key word names it (a
    /// block read while the agent stored it may mix two).
    pub fn granted_keys(&self) -> Option<Vec<WindowKey>> {
        let g = self.lease.granted;
        (g > 0 && self.keys.iter().all(|k| k.generation == g))
            .then(|| self.keys.iter().map(|k| k.key).collect())
    }
}

/// What a client without storage knows of its windows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PureWindows {
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
    /// Whether the client must get (newer) keys before it writes.
    pub fn needs_keys(&self) -> bool {
        self.keys.is_empty() || self.want.is_some()
    }

    /// The keys are dead (a window refused them): wait for a newer
    /// generation.
    pub fn revoked(&mut self) {
        self.want = Some(self.want.unwrap_or(0).max(self.generation + 1));
    }
}

/// One pass of a node's agent over its lease blocks: reads them (one CPU
/// read), binds the windows of every block whose client asked for a newer
/// generation, and writes the keys and the grant (one CPU store per block).
/// Sans-IO: [`AgentPass::start`] gives the read, [`AgentPass::advance`]
/// takes the results of what it gave last and gives what comes next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AgentPass {
    node: NodeId,
    stage: Stage,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Read,
    Bind(Vec<(u16, LeaseWord)>),
    Store,
    Done,
}

impl AgentPass {
    /// A pass of node `node`'s agent.
    pub fn new(node: NodeId) -> AgentPass {
        AgentPass {
            node,
            stage: Stage::Read,
        }
    }

    /// The pass's first request: the CPU read of every lease block (none
    /// when the node hosts no client without storage).
    pub fn start(&mut self, cfg: &Config) -> Vec<Op> {
        let first = ClientId {
            node: self.node,
            index: cfg.clients_per_node,
        };
        match cfg.lease_block(first) {
            Some(offset) if cfg.pure_clients_per_node > 0 => {
                self.stage = Stage::Read;
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
    /// the next ones; empty once the pass is over. A failed CPU access ends
    /// the pass (the next pass starts over).
    pub fn advance(&mut self, cfg: &Config, results: &[Result<OpOutput, FabricError>]) -> Vec<Op> {
        let classes = cfg.data_tables().len() as u32;
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Read => {
                let Some(Ok(OpOutput::Read(bytes))) = results.first() else {
                    return Vec::new();
                };
                let block = cfg.lease_block_bytes() as usize;
                let pending: Vec<(u16, LeaseWord)> = bytes
                    .chunks(block)
                    .enumerate()
                    .filter_map(|(j, b)| {
                        let lease = LeaseBlock::decode(b)?.lease;
                        lease.pending().then_some((j as u16, lease))
                    })
                    .collect();
                let mut ops = Vec::new();
                for &(j, _) in &pending {
                    let id = self.pure_client(cfg, j);
                    for class in 0..classes as u8 {
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
                if !ops.is_empty() {
                    self.stage = Stage::Bind(pending);
                }
                ops
            }
            Stage::Bind(pending) => {
                let mut keys = results.iter().map(|r| match r {
                    Ok(OpOutput::Bound { key }) => Some(*key),
                    _ => None,
                });
                let mut ops = Vec::new();
                for (j, lease) in pending {
                    let bound: Option<Vec<WindowKey>> =
                        (0..classes).map(|_| keys.next().flatten()).collect();
                    let (Some(bound), Some(offset)) =
                        (bound, cfg.lease_block(self.pure_client(cfg, j)))
                    else {
                        continue;
                    };
                    let g = lease.requested;
                    let block = LeaseBlock {
                        lease: LeaseWord {
                            requested: g,
                            granted: g,
                        },
                        keys: bound
                            .into_iter()
                            .map(|key| KeyWord { generation: g, key })
                            .collect(),
                    };
                    ops.push(Op::LocalWrite {
                        offset,
                        data: block.encode(),
                    });
                }
                if !ops.is_empty() {
                    self.stage = Stage::Store;
                }
                ops
            }
            Stage::Store | Stage::Done => Vec::new(),
        }
    }

    /// Whether the pass is over.
    pub fn done(&self) -> bool {
        self.stage == Stage::Done
    }

    fn pure_client(&self, cfg: &Config, j: u16) -> ClientId {
        ClientId {
            node: self.node,
            index: cfg.clients_per_node + j,
        }
    }
}

/// Runs one pass of node `ep.node()`'s agent on `ep` (an endpoint of that
/// node: every request is the node's CPU), waiting at most `within` for
/// each step. Returns how many requests it made.
///
/// # Errors
///
/// The fabric's error if a request could not be posted.
pub fn serve_once<E: Endpoint>(
    cfg: &Config,
    ep: &mut E,
    within: Duration,
) -> Result<usize, FabricError> {
    let mut pass = AgentPass::new(ep.node());
    let mut ops = pass.start(cfg);
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
        ops = pass.advance(cfg, &results);
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_a_mixed_block_grants_nothing() {
        let lease = LeaseWord {
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
            keys: vec![key, key],
        };
        assert_eq!(LeaseBlock::decode(&block.encode()), Some(block.clone()));
        assert_eq!(block.granted_keys(), Some(vec![WindowKey(9); 2]));
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
        assert_eq!(torn.granted_keys(), None, "a READ torn across the store");
    }
}
