//! [`Io`]: blocking READ, WRITE and CPU access over an [`Endpoint`], with the
//! per-operation accounting of [`OpStats`]. The baselines' clients and server
//! workers are written as plain blocking code on top of it (the sans-IO state
//! machines are Nessie's; the baselines only need to be faithful and
//! measurable).

use std::time::Duration;

use nessie_protocol::{
    Completion, Endpoint, Error, FabricError, NodeId, Op, OpId, OpOutput, OpStats, RemoteAddr,
    WorkRequest,
};

/// Why a round failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundError {
    /// The failure.
    pub error: Error,
    /// Whether any of the round's operations was posted (and so may have
    /// executed).
    pub posted: bool,
}

/// Blocking fabric access with accounting.
pub struct Io<E: Endpoint> {
    ep: E,
    next_id: u64,
    out: Vec<Completion>,
    /// How long one batch may wait for its completions.
    pub timeout: Duration,
}

impl<E: Endpoint> Io<E> {
    /// Wraps `ep`; a batch of operations fails with [`Error::Timeout`] when its
    /// completions take longer than `timeout`.
    pub fn new(ep: E, timeout: Duration) -> Io<E> {
        Io {
            ep,
            next_id: 1,
            out: Vec::new(),
            timeout,
        }
    }

    /// The node this endpoint runs on.
    pub fn node(&self) -> NodeId {
        self.ep.node()
    }

    /// The endpoint.
    pub fn endpoint(&mut self) -> &mut E {
        &mut self.ep
    }

    /// Runs `ops` as one round (all posted, then all awaited) and returns
    /// their outputs in order. NIC operations are counted in `stats` as the
    /// protocol counts them, with `index` telling whether READs and CASes
    /// address an index structure (the baselines keep theirs in the data
    /// region, so the region alone does not say).
    pub fn round(
        &mut self,
        ops: Vec<Op>,
        index: bool,
        stats: &mut OpStats,
    ) -> Result<Vec<OpOutput>, Error> {
        let limit = self.timeout;
        self.try_round(ops, index, stats, limit)
            .map_err(|e| e.error)
    }

    /// [`Io::round`] waiting at most `limit` for the completions, and saying
    /// on failure whether any operation was posted (one that was not posted
    /// never executes; one that was may have executed whatever its
    /// completion says, or if none arrived).
    pub fn try_round(
        &mut self,
        ops: Vec<Op>,
        index: bool,
        stats: &mut OpStats,
        limit: Duration,
    ) -> Result<Vec<OpOutput>, RoundError> {
        let n = ops.len();
        let first = self.next_id;
        let mut remote = false;
        let mut nic = false;
        for (i, op) in ops.into_iter().enumerate() {
            count(stats, &op, index);
            if let Some(a) = op.remote_addr() {
                nic = true;
                remote |= a.node != self.ep.node();
            }
            let id = OpId(self.next_id);
            self.next_id += 1;
            if let Err(e) = self.ep.post(WorkRequest { id, op }) {
                return Err(RoundError {
                    error: Error::from(e),
                    posted: i > 0,
                });
            }
        }
        if remote {
            stats.round_trips += 1;
        } else if nic {
            stats.loopback_rounds += 1;
        }
        let posted = |error| RoundError {
            error,
            posted: true,
        };
        let mut results: Vec<Option<Result<OpOutput, FabricError>>> = vec![None; n];
        let mut got = 0;
        let start = std::time::Instant::now();
        while got < n {
            self.out.clear();
            self.ep.wait(&mut self.out, Duration::from_millis(5));
            if self.out.is_empty() {
                // A lost completion leaves nothing to wait for: do not spin.
                std::thread::yield_now();
            }
            for c in self.out.drain(..) {
                let i = c.id.0.wrapping_sub(first) as usize;
                if i < n && results[i].is_none() {
                    results[i] = Some(c.result);
                    got += 1;
                }
            }
            if got < n && start.elapsed() > limit {
                return Err(posted(Error::Timeout));
            }
        }
        results
            .into_iter()
            .map(|r| match r {
                Some(Ok(o)) => Ok(o),
                Some(Err(e)) => Err(posted(Error::from(e))),
                None => Err(posted(Error::Timeout)),
            })
            .collect()
    }

    /// One compare-and-swap of the 8-byte word at `addr` (counted as a data
    /// CAS), waiting at most `limit`: the word's previous value.
    pub fn cas(
        &mut self,
        addr: RemoteAddr,
        expect: u64,
        new: u64,
        stats: &mut OpStats,
        limit: Duration,
    ) -> Result<u64, RoundError> {
        let mut out = self.try_round(vec![Op::Cas { addr, expect, new }], false, stats, limit)?;
        match out.pop() {
            Some(OpOutput::Cas { previous }) => Ok(previous),
            other => Err(RoundError {
                error: unexpected(other),
                posted: true,
            }),
        }
    }

    /// One READ (counted as an index read when `index`).
    pub fn read(
        &mut self,
        addr: RemoteAddr,
        len: u32,
        index: bool,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, Error> {
        let mut out = self.round(vec![Op::Read { addr, len }], index, stats)?;
        match out.pop() {
            Some(OpOutput::Read(b)) => Ok(b),
            other => Err(unexpected(other)),
        }
    }

    /// One WRITE.
    pub fn write(
        &mut self,
        addr: RemoteAddr,
        data: Vec<u8>,
        stats: &mut OpStats,
    ) -> Result<(), Error> {
        self.round(vec![Op::Write { addr, data }], false, stats)?;
        Ok(())
    }

    /// A CPU read of this node's data region (not counted: the callers count
    /// what the papers count).
    pub fn local_read(&mut self, offset: u64, len: u32) -> Result<Vec<u8>, Error> {
        let mut scratch = OpStats::default();
        let mut out = self.round(vec![Op::LocalRead { offset, len }], false, &mut scratch)?;
        match out.pop() {
            Some(OpOutput::Read(b)) => Ok(b),
            other => Err(unexpected(other)),
        }
    }

    /// A CPU read of one 8-byte word of this node's data region.
    pub fn local_word(&mut self, offset: u64) -> Result<u64, Error> {
        let b = self.local_read(offset, 8)?;
        Ok(word(&b, 0))
    }

    /// A CPU write into this node's data region (not counted).
    pub fn local_write(&mut self, offset: u64, data: Vec<u8>) -> Result<(), Error> {
        let mut scratch = OpStats::default();
        self.round(vec![Op::LocalWrite { offset, data }], false, &mut scratch)?;
        Ok(())
    }

    /// Posts one NIC operation without waiting for its completion (as a
    /// server posts its responses unsignaled); its completion is reaped by a
    /// later [`Io::reap`] or discarded by the next round. Counted in `stats`.
    pub fn post_detached(&mut self, op: Op, stats: &mut OpStats) -> Result<(), Error> {
        count(stats, &op, false);
        let id = OpId(self.next_id);
        self.next_id += 1;
        self.ep.post(WorkRequest { id, op }).map_err(Error::from)
    }

    /// Drains arrived completions of detached operations; returns the first
    /// error among them, if any.
    pub fn reap(&mut self) -> Result<(), Error> {
        self.out.clear();
        self.ep.poll(&mut self.out);
        match self.out.drain(..).find_map(|c| c.result.err()) {
            Some(e) => Err(Error::from(e)),
            None => Ok(()),
        }
    }

    /// Reads back, by CPU, the message (see [`crate::mailbox`]) that ends at
    /// byte `end` of this node's data region in a slot of `slot_bytes`:
    /// trailer first, then payload and trailer, checked by its CRC64 and by
    /// an unchanged control word. `None` if it is torn or still landing (read
    /// it again later). Returns the message and the bytes read.
    pub fn read_message(
        &mut self,
        end: u64,
        slot_bytes: u64,
    ) -> Result<Option<(crate::mailbox::Message, u64)>, Error> {
        use crate::mailbox::{decode, payload_len, TRAILER_BYTES};
        let trailer = self.local_read(end - TRAILER_BYTES, TRAILER_BYTES as u32)?;
        let Some((_, _, payload)) = payload_len(&trailer, slot_bytes) else {
            return Ok(None);
        };
        let total = payload + TRAILER_BYTES;
        let bytes = self.local_read(end - total, total as u32)?;
        let ctrl_unchanged = word(&bytes, bytes.len() - 8) == word(&trailer, 16);
        Ok(decode(&bytes)
            .filter(|_| ctrl_unchanged)
            .map(|m| (m, total)))
    }

    /// Waits `d` between attempts.
    pub fn backoff(&mut self, d: Duration) {
        self.ep.backoff(d);
    }
}

fn count(stats: &mut OpStats, op: &Op, index: bool) {
    match op {
        Op::Read { .. } if index => stats.index_reads += 1,
        Op::Read { .. } => stats.data_reads += 1,
        Op::Write { .. } => stats.writes += 1,
        Op::Cas { .. } if index => stats.index_cas += 1,
        Op::Cas { .. } => stats.data_cas += 1,
        Op::LocalRead { .. } => stats.local_reads += 1,
        Op::LocalWrite { .. } => stats.local_writes += 1,
    }
    match op {
        Op::LocalRead { .. } | Op::LocalWrite { .. } => stats.local_bytes += op.bytes(),
        _ => stats.fabric_bytes += op.bytes(),
    }
}

fn unexpected(o: Option<OpOutput>) -> Error {
    Error::Fabric(FabricError::Transport(format!(
        "unexpected completion output {o:?}"
    )))
}

/// The little-endian word at byte `at` of `b` (0 past the end).
pub fn word(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Rounds `n` up to a multiple of 8.
pub fn round8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}
