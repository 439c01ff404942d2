//! Cell's sans-IO machines.
//!
//! Every Cell operation (a client's get, put, delete, scan or search; a
//! server's handling of one request; a meganode split) is a [`Machine`]:
//! the driver polls it with the current time, and it answers with work
//! requests to post ([`Step::Post`]), another effect to perform
//! ([`Step::Effect`]: an RPC to a server, a log append, a back-off, a fresh
//! directory snapshot), `Pending` while completions are outstanding, or its
//! result. Completions go back through [`Machine::complete`], effect results
//! through [`Machine::resolve`]. A machine never blocks, sleeps, reads a clock
//! or touches a socket, so the same code runs under the blocking drivers
//! ([`drive`]), under a test that steps it one effect at a time, and in a
//! deterministic simulator.
//!
//! Unlike Nessie's hand-written machines (`nessie_protocol::machine`), the
//! logic here is written as `async` code against an [`Io`] handle: each
//! `.await` on the handle is one round or one effect, and [`Machine`] is the
//! tiny executor that turns the future into the poll/complete interface
//! (no runtime, no threads, a no-op waker). Cell's operations (B-link tree
//! descents with right-link moves, node and meganode splits, multi-part
//! scans) have too many states to write out by hand legibly.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::Duration;

use nessie_baselines::io::Io as BlockingIo;
use nessie_protocol::{
    Completion, Endpoint, Error, FabricError, Nanos, NodeId, Op, OpId, OpOutput, OpStats,
    WorkRequest,
};

use crate::log::LogRecord;
use crate::ptr::RegionId;
use crate::region::RegionMap;
use crate::wire::{CellRequest, CellResponse};

/// Results of one round, in the order the operations were issued.
pub type Results = Vec<Result<OpOutput, FabricError>>;

/// What a round's operations touch, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// B-link tree nodes (counted as index READs).
    Node,
    /// Key-value extents (counted as data READs).
    Extent,
    /// Anything else (root word, version words, writes).
    Other,
}

/// An effect other than fabric work.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Send `request` to a server worker of node `to` and wait for its reply.
    Rpc {
        /// The server's node.
        to: NodeId,
        /// The request.
        request: CellRequest,
    },
    /// Append `records` to `region`'s log (§2.6).
    Log {
        /// The region.
        region: RegionId,
        /// The records, in order.
        records: Vec<LogRecord>,
    },
    /// Wait before retrying.
    Backoff(Duration),
    /// Fetch a fresh directory snapshot.
    Regions,
}

/// The result of an [`Effect`].
#[derive(Clone, Debug)]
pub enum Resolution {
    /// The server's reply (or why there was none).
    Rpc(Result<CellResponse, Error>),
    /// The log append.
    Logged(Result<(), Error>),
    /// The back-off passed.
    Waited,
    /// A directory snapshot.
    Regions(Arc<RegionMap>),
}

/// What a machine wants next.
#[derive(Debug)]
pub enum Step<T> {
    /// Post these work requests (one round).
    Post(Vec<WorkRequest>),
    /// Perform this effect and [`Machine::resolve`] it before polling again.
    Effect(Effect),
    /// Waiting for completions already posted.
    Pending,
    /// Finished.
    Done(T),
}

enum Want {
    Round(Vec<Op>, OpClass),
    Effect(Effect),
}

enum Got {
    Round(Results),
    Effect(Resolution),
}

struct Chan {
    now: Nanos,
    want: Option<Want>,
    got: Option<Got>,
    stats: OpStats,
}

fn lock(c: &Mutex<Chan>) -> MutexGuard<'_, Chan> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// The handle the async logic of a machine does its I/O through.
#[derive(Clone)]
pub struct Io {
    chan: Arc<Mutex<Chan>>,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io").field("now", &self.now()).finish()
    }
}

struct Await {
    chan: Arc<Mutex<Chan>>,
    want: Option<Want>,
}

impl Future for Await {
    type Output = Got;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Got> {
        let chan = self.chan.clone();
        let mut ch = lock(&chan);
        if let Some(w) = self.want.take() {
            ch.want = Some(w);
            return Poll::Pending;
        }
        match ch.got.take() {
            Some(g) => Poll::Ready(g),
            None => Poll::Pending,
        }
    }
}

impl Io {
    /// The time passed in by the driver at the current step.
    pub fn now(&self) -> Nanos {
        lock(&self.chan).now
    }

    /// Adds to the operation's counters.
    pub fn count(&self, f: impl FnOnce(&mut OpStats)) {
        f(&mut lock(&self.chan).stats);
    }

    /// Runs `ops` as one round (posted together, all awaited); results in order.
    pub async fn round(&self, ops: Vec<Op>, class: OpClass) -> Results {
        if ops.is_empty() {
            return Vec::new();
        }
        let n = ops.len();
        match (Await {
            chan: self.chan.clone(),
            want: Some(Want::Round(ops, class)),
        })
        .await
        {
            Got::Round(r) => r,
            Got::Effect(_) => vec![Err(FabricError::Transport("mismatched resolution".into())); n],
        }
    }

    async fn effect(&self, e: Effect) -> Resolution {
        match (Await {
            chan: self.chan.clone(),
            want: Some(Want::Effect(e)),
        })
        .await
        {
            Got::Effect(r) => r,
            Got::Round(_) => Resolution::Rpc(Err(Error::Corrupt("mismatched resolution".into()))),
        }
    }

    /// Sends `request` to node `to`'s server workers and awaits the reply.
    pub async fn rpc(&self, to: NodeId, request: CellRequest) -> Result<CellResponse, Error> {
        match self.effect(Effect::Rpc { to, request }).await {
            Resolution::Rpc(r) => r,
            other => Err(Error::Corrupt(format!(
                "expected an RPC reply, got {other:?}"
            ))),
        }
    }

    /// Appends `records` to `region`'s log.
    pub async fn log(&self, region: RegionId, records: Vec<LogRecord>) -> Result<(), Error> {
        match self.effect(Effect::Log { region, records }).await {
            Resolution::Logged(r) => r,
            other => Err(Error::Corrupt(format!(
                "expected a log result, got {other:?}"
            ))),
        }
    }

    /// Waits `d`.
    pub async fn backoff(&self, d: Duration) {
        self.effect(Effect::Backoff(d)).await;
    }

    /// A fresh directory snapshot.
    pub async fn regions(&self) -> Option<Arc<RegionMap>> {
        match self.effect(Effect::Regions).await {
            Resolution::Regions(m) => Some(m),
            _ => None,
        }
    }
}

fn noop_waker() -> Waker {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(
        |_| RawWaker::new(std::ptr::null(), &VTABLE),
        |_| {},
        |_| {},
        |_| {},
    );
    // SAFETY: every vtable function ignores the (null) data pointer, so the
    // waker is trivially valid and thread-safe.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>;

/// First work request id of a machine: far from the ids the baselines'
/// blocking `Io` uses on the same endpoint.
const ID_BASE: u64 = 1 << 62;

/// A sans-IO Cell operation (see the module documentation).
pub struct Machine<T> {
    fut: Option<BoxFuture<T>>,
    chan: Arc<Mutex<Chan>>,
    own: NodeId,
    next_id: u64,
    base: u64,
    results: Vec<Option<Result<OpOutput, FabricError>>>,
    outstanding: usize,
    awaiting_effect: bool,
}

impl<T> std::fmt::Debug for Machine<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machine")
            .field("own", &self.own)
            .field("outstanding", &self.outstanding)
            .field("done", &self.fut.is_none())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Machine<T> {
    /// A machine running on node `own` whose logic `make` builds from its
    /// [`Io`] handle.
    pub fn new<F>(own: NodeId, make: impl FnOnce(Io) -> F) -> Machine<T>
    where
        F: Future<Output = Result<T, Error>> + Send + 'static,
    {
        let chan = Arc::new(Mutex::new(Chan {
            now: Nanos::ZERO,
            want: None,
            got: None,
            stats: OpStats {
                attempts: 1,
                ..OpStats::default()
            },
        }));
        let fut = make(Io { chan: chan.clone() });
        Machine {
            fut: Some(Box::pin(fut)),
            chan,
            own,
            next_id: ID_BASE,
            base: ID_BASE,
            results: Vec::new(),
            outstanding: 0,
            awaiting_effect: false,
        }
    }

    /// Takes one step at time `now`.
    pub fn poll(&mut self, now: Nanos) -> Step<Result<T, Error>> {
        lock(&self.chan).now = now;
        if self.outstanding > 0 || self.awaiting_effect {
            return Step::Pending;
        }
        if !self.results.is_empty() {
            let r = std::mem::take(&mut self.results)
                .into_iter()
                .map(|r| r.unwrap_or(Err(FabricError::Transport("missing completion".into()))))
                .collect();
            lock(&self.chan).got = Some(Got::Round(r));
        }
        let Some(fut) = self.fut.as_mut() else {
            return Step::Done(Err(Error::Corrupt(
                "machine polled after it finished".into(),
            )));
        };
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(r) => {
                self.fut = None;
                Step::Done(r)
            }
            Poll::Pending => {
                let want = lock(&self.chan).want.take();
                match want {
                    Some(Want::Round(ops, class)) => Step::Post(self.issue(ops, class)),
                    Some(Want::Effect(e)) => {
                        self.awaiting_effect = true;
                        Step::Effect(e)
                    }
                    None => {
                        self.fut = None;
                        Step::Done(Err(Error::Corrupt("machine made no progress".into())))
                    }
                }
            }
        }
    }

    fn issue(&mut self, ops: Vec<Op>, class: OpClass) -> Vec<WorkRequest> {
        self.base = self.next_id;
        let mut ch = lock(&self.chan);
        let (mut remote, mut nic) = (false, false);
        let mut wrs = Vec::with_capacity(ops.len());
        for op in ops {
            let s = &mut ch.stats;
            match (&op, class) {
                (Op::Read { .. }, OpClass::Node) => s.index_reads += 1,
                (Op::Read { .. }, _) => s.data_reads += 1,
                (Op::Write { .. }, _) => s.writes += 1,
                (Op::Cas { .. }, _) => s.data_cas += 1,
                (Op::LocalRead { .. }, _) => s.local_reads += 1,
                (Op::LocalWrite { .. }, _) => s.local_writes += 1,
            }
            match op.remote_addr() {
                Some(a) => {
                    s.fabric_bytes += op.bytes();
                    nic = true;
                    remote |= a.node != self.own;
                }
                None => s.local_bytes += op.bytes(),
            }
            wrs.push(WorkRequest {
                id: OpId(self.next_id),
                op,
            });
            self.next_id += 1;
        }
        if remote {
            ch.stats.round_trips += 1;
        } else if nic {
            ch.stats.loopback_rounds += 1;
        }
        self.results = vec![None; wrs.len()];
        self.outstanding = wrs.len();
        wrs
    }

    /// Hands the machine the completion of one of its work requests (others
    /// are ignored).
    pub fn complete(&mut self, c: Completion) {
        let Some(i) = c.id.0.checked_sub(self.base) else {
            return;
        };
        if let Some(slot) = self.results.get_mut(i as usize) {
            if slot.is_none() {
                *slot = Some(c.result);
                self.outstanding -= 1;
            }
        }
    }

    /// Hands the machine the result of the effect it asked for.
    pub fn resolve(&mut self, r: Resolution) {
        if self.awaiting_effect {
            self.awaiting_effect = false;
            lock(&self.chan).got = Some(Got::Effect(r));
        }
    }

    /// What the operation issued so far.
    pub fn stats(&self) -> OpStats {
        lock(&self.chan).stats
    }
}

/// How long one wait for completions blocks before the machine sees the
/// time again.
const WAIT_SLICE: Duration = Duration::from_millis(5);

/// Runs `m` to completion on the blocking `io` (an endpoint with the
/// baselines' accounting), performing its effects with `effects`.
pub fn drive<T: Send + 'static, E: Endpoint>(
    m: &mut Machine<T>,
    io: &mut BlockingIo<E>,
    effects: &mut dyn FnMut(&mut BlockingIo<E>, Effect) -> Resolution,
) -> Result<T, Error> {
    let mut buf = Vec::new();
    loop {
        let now = io.endpoint().now();
        match m.poll(now) {
            Step::Done(r) => return r,
            Step::Post(wrs) => {
                for wr in wrs {
                    let id = wr.id;
                    if let Err(e) = io.endpoint().post(wr) {
                        m.complete(Completion { id, result: Err(e) });
                    }
                }
            }
            Step::Pending => {
                io.endpoint().wait(&mut buf, WAIT_SLICE);
                for c in buf.drain(..) {
                    m.complete(c);
                }
            }
            Step::Effect(e) => {
                let r = effects(io, e);
                m.resolve(r);
            }
        }
    }
}

/// Reads the bytes of a READ result.
pub fn read_bytes(r: &Result<OpOutput, FabricError>) -> Result<&[u8], Error> {
    match r {
        Ok(OpOutput::Read(b)) => Ok(b),
        Ok(other) => Err(Error::Corrupt(format!("expected a read, got {other:?}"))),
        Err(e) => Err(e.clone().into()),
    }
}

/// Checks a write result.
pub fn written(r: &Result<OpOutput, FabricError>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(e) => Err(e.clone().into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_protocol::RemoteAddr;

    #[test]
    fn a_machine_posts_rounds_and_effects_in_order_and_sees_time() {
        let mut m: Machine<(u64, Nanos)> = Machine::new(NodeId(0), |io: Io| async move {
            let r = io
                .round(
                    vec![Op::Read {
                        addr: RemoteAddr::data(NodeId(1), 0),
                        len: 8,
                    }],
                    OpClass::Node,
                )
                .await;
            let b = read_bytes(&r[0])?;
            io.backoff(Duration::from_micros(1)).await;
            Ok((u64::from_le_bytes(b.try_into().unwrap()), io.now()))
        });
        let Step::Post(wrs) = m.poll(Nanos(5)) else {
            panic!("expected a round")
        };
        assert_eq!(wrs.len(), 1);
        assert!(matches!(m.poll(Nanos(6)), Step::Pending));
        m.complete(Completion {
            id: wrs[0].id,
            result: Ok(OpOutput::Read(7u64.to_le_bytes().to_vec())),
        });
        assert!(matches!(m.poll(Nanos(7)), Step::Effect(Effect::Backoff(_))));
        assert!(matches!(m.poll(Nanos(8)), Step::Pending));
        m.resolve(Resolution::Waited);
        match m.poll(Nanos(9)) {
            Step::Done(Ok((7, Nanos(9)))) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(m.stats().index_reads, 1);
        assert_eq!(m.stats().round_trips, 1);
    }
}
