//! The sans-IO plumbing shared by every state machine.
//!
//! A machine works in rounds: it issues a batch of independent fabric
//! operations (one round trip when they are NIC operations), then waits for all
//! of their completions before deciding what to do next. [`Io`] collects the
//! batch, matches completions to it by id, and counts what was issued.

use crate::addr::NodeId;
use crate::error::{CorruptionKind, Error};
use crate::fabric::{Completion, FabricError, Op, OpId, OpOutput, WorkRequest};
use crate::layout::IndexEntry;
use crate::stats::OpStats;

/// What a machine wants from its driver next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll<T> {
    /// Post these work requests (their completions go back through `complete`).
    Post(Vec<WorkRequest>),
    /// Waiting for completions already posted.
    Pending,
    /// Finished.
    Done(T),
}

/// Results of one round, in the order the operations were issued.
pub type Results = Vec<Result<OpOutput, FabricError>>;

/// Collects one round of operations and its completions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Io {
    next_id: u64,
    round_base: u64,
    outbox: Vec<WorkRequest>,
    results: Vec<Option<Result<OpOutput, FabricError>>>,
    outstanding: usize,
    pub stats: OpStats,
    /// Where each operation of the round went (`None`: a CPU access).
    targets: NotState<Vec<Option<Target>>>,
    /// Where the first operation of the attempt that found each node
    /// unreachable went (for what the node was needed:
    /// [`Io::unreachable_because`]).
    unreachable: NotState<Vec<Target>>,
}

/// Where an operation went: its node, region and offset, and whether it
/// went through a memory window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Target {
    pub node: NodeId,
    pub region: crate::addr::Region,
    pub offset: u64,
    pub windowed: bool,
}

/// Diagnostic data kept beside a machine's state but not part of it: equal
/// and hashed alike whatever it holds, so that the model's exploration
/// (which hashes machines) counts the states it did before.
#[derive(Clone, Debug, Default)]
pub(crate) struct NotState<T>(pub T);

impl<T> PartialEq for NotState<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for NotState<T> {}

impl<T> std::hash::Hash for NotState<T> {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl Io {
    /// Adds an operation to the current round; returns its position.
    pub fn issue(&mut self, op: Op) -> usize {
        if self.results.is_empty() {
            self.round_base = self.next_id;
            self.targets.0.clear();
        }
        self.targets.0.push(op.remote_addr().map(|a| Target {
            node: a.node,
            region: a.region,
            offset: a.offset,
            windowed: matches!(op, Op::Windowed { .. }),
        }));
        self.stats.count(&op);
        let id = OpId(self.next_id);
        self.next_id += 1;
        self.outbox.push(WorkRequest { id, op });
        self.results.push(None);
        self.outstanding += 1;
        self.results.len() - 1
    }

    /// The work requests to post, once; `own` is the client's node (NIC
    /// operations to it are loopback; `None` for a client without storage,
    /// which is on no node).
    pub fn take_outbox(&mut self, own: Option<NodeId>) -> Vec<WorkRequest> {
        let nodes = || {
            self.outbox
                .iter()
                .filter_map(|wr| wr.op.remote_addr())
                .map(|a| a.node)
        };
        if nodes().any(|n| Some(n) != own) {
            self.stats.round_trips += 1;
        } else if nodes().next().is_some() {
            self.stats.loopback_rounds += 1;
        }
        std::mem::take(&mut self.outbox)
    }

    /// Whether operations are waiting to be posted.
    pub fn has_outbox(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Records a completion of the current round (others are ignored).
    pub fn complete(&mut self, c: Completion) {
        let Some(pos) = c.id.0.checked_sub(self.round_base) else {
            return;
        };
        if let Some(slot) = self.results.get_mut(pos as usize) {
            if slot.is_none() {
                *slot = Some(c.result);
                self.outstanding -= 1;
            }
        }
    }

    /// Whether every operation of the round has completed.
    pub fn round_complete(&self) -> bool {
        self.outstanding == 0
    }

    /// Takes the round's results and starts a new round. Operations whose
    /// completion never arrived (the round was abandoned at the deadline)
    /// report [`FabricError::NoCompletion`]: they may or may not have executed.
    pub fn take_results(&mut self) -> Results {
        self.outstanding = 0;
        let results: Results = std::mem::take(&mut self.results)
            .into_iter()
            .map(|r| r.unwrap_or(Err(FabricError::NoCompletion)))
            .collect();
        for (r, t) in results.iter().zip(&self.targets.0) {
            let down = r.as_ref().err().and_then(FabricError::unreachable_node);
            if let (Some(node), Some(t)) = (down, t) {
                if !self.unreachable.0.iter().any(|u| u.node == node) {
                    self.unreachable.0.push(Target { node, ..*t });
                }
            }
        }
        results
    }

    /// `e`, and when it is an [`Error::Unreachable`] its node told apart by
    /// what the attempt's first request that found it down needed of it,
    /// seen by `client` (its own node, its share and lease block) for an
    /// operation about `key` (its candidate buckets), else by region (the
    /// directory, other index entries, data table entries).
    pub fn unreachable_because(
        &self,
        client: &crate::machine::ClientState,
        key: Option<&[u8]>,
        e: Error,
    ) -> Error {
        let Error::Unreachable(node, crate::error::Needed::Request) = e else {
            return e;
        };
        use crate::addr::Region;
        use crate::error::Needed;
        let cfg = &client.cfg;
        let pure = cfg.is_pure(client.id);
        let share = pure && node == client.id.node;
        let candidate =
            key.is_some_and(|k| cfg.hasher().candidates(k).iter().any(|a| a.node == node));
        let lease = |t: &Target| {
            share
                && t.region == Region::Data
                && cfg
                    .lease_block(client.id)
                    .is_some_and(|at| (at..at + cfg.lease_block_bytes()).contains(&t.offset))
        };
        let needed = match self.unreachable.0.iter().find(|t| t.node == node) {
            _ if !pure && node == client.id.node => Needed::OwnNode,
            None => Needed::Request,
            Some(t) if t.windowed => Needed::Share,
            Some(t) if lease(t) => Needed::Lease,
            Some(t) if t.region == Region::Index => {
                let dir = crate::growth::directory_slot(cfg);
                if t.node == dir.node
                    && t.offset == u64::from(dir.slot) * 8
                    && cfg.index_generations > 1
                {
                    Needed::Directory
                } else if candidate {
                    Needed::Candidate
                } else if share {
                    // The sweep of its share reads the index entries its
                    // entries name.
                    Needed::Share
                } else {
                    Needed::Index
                }
            }
            Some(_) if share => Needed::Share,
            Some(_) => Needed::Entry,
        };
        Error::Unreachable(node, needed)
    }

    /// Operations of the current round still waiting for their completion.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }
}

/// Reads a result as one little-endian word.
pub(crate) fn word(r: &Result<OpOutput, FabricError>) -> Result<u64, Error> {
    match r {
        Ok(OpOutput::Read(b)) if b.len() >= 8 => {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[..8]);
            Ok(u64::from_le_bytes(w))
        }
        Ok(other) => Err(Error::corrupt(
            CorruptionKind::Completion,
            format!("expected an 8-byte read, got {other:?}"),
        )),
        Err(e) => Err(e.clone().into()),
    }
}

/// The `b` index words of one bucket READ's completion.
pub(crate) fn bucket_of(
    r: &Result<OpOutput, FabricError>,
    b: usize,
) -> Result<impl Iterator<Item = IndexEntry> + '_, Error> {
    let raw = bytes(r)?;
    if raw.len() < 8 * b {
        return Err(Error::corrupt(
            CorruptionKind::Completion,
            format!(
                "expected a {}-byte bucket read, got {} bytes",
                8 * b,
                raw.len()
            ),
        ));
    }
    Ok(index_words(&raw[..8 * b]))
}

/// The index words of `raw` bytes read from an index region (a trailing
/// part word is dropped).
pub(crate) fn index_words(raw: &[u8]) -> impl Iterator<Item = IndexEntry> + '_ {
    raw.chunks_exact(8).map(|c| {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        IndexEntry(u64::from_le_bytes(w))
    })
}

/// Reads the results of [`Cx::read_buckets`](crate::machine::context::Cx):
/// the `b` index words of each READ, one READ after the other.
pub(crate) fn bucket_words(
    results: &[Result<OpOutput, FabricError>],
    b: usize,
) -> Result<Vec<IndexEntry>, Error> {
    let mut words = Vec::with_capacity(results.len() * b);
    for r in results {
        words.extend(bucket_of(r, b)?);
    }
    Ok(words)
}

/// Whether the buckets re-read (`buckets`, bucket numbers in the order they
/// were read, and `results`, their completions) still hold the words first
/// read (`seen`, in candidate order), every slot but `skip` compared. The
/// results are taken in order: the first changed word answers `Ok(false)`,
/// the first failed READ before it `Err`.
pub(crate) fn buckets_unchanged(
    buckets: &[usize],
    results: &[Result<OpOutput, FabricError>],
    seen: &[IndexEntry],
    b: usize,
    skip: Option<usize>,
) -> Result<bool, Error> {
    for (&k, r) in buckets.iter().zip(results) {
        for (j, w) in bucket_of(r, b)?.enumerate() {
            let pos = k * b + j;
            if Some(pos) != skip && seen.get(pos) != Some(&w) {
                return Ok(false);
            }
        }
    }
    Ok(results.len() >= buckets.len())
}

/// Reads a result as bytes.
pub(crate) fn bytes(r: &Result<OpOutput, FabricError>) -> Result<&[u8], Error> {
    match r {
        Ok(OpOutput::Read(b)) => Ok(b),
        Ok(other) => Err(Error::corrupt(
            CorruptionKind::Completion,
            format!("expected a read, got {other:?}"),
        )),
        Err(e) => Err(e.clone().into()),
    }
}

/// Reads a CAS result: the word the NIC found.
pub(crate) fn cas_previous(r: &Result<OpOutput, FabricError>) -> Result<u64, Error> {
    match r {
        Ok(OpOutput::Cas { previous }) => Ok(*previous),
        Ok(other) => Err(Error::corrupt(
            CorruptionKind::Completion,
            format!("expected a CAS completion, got {other:?}"),
        )),
        Err(e) => Err(e.clone().into()),
    }
}

/// Whether a commit of a data table entry's state word (expected to hold
/// `expect`) took effect. Only the broken CPU-store variant completes as a write.
pub(crate) fn commit_won(r: &Result<OpOutput, FabricError>, expect: u64) -> Result<bool, Error> {
    match r {
        Ok(OpOutput::Written) => Ok(true),
        r => cas_previous(r).map(|p| p == expect),
    }
}

/// Checks a write result.
pub(crate) fn written(r: &Result<OpOutput, FabricError>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(e) => Err(e.clone().into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_read_is_corrupt_not_a_panic() {
        assert!(matches!(
            word(&Ok(OpOutput::Read(vec![1, 2, 3]))),
            Err(Error::Corrupt(_))
        ));
    }
}
