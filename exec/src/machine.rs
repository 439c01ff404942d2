//! The sans-IO executor of every system but Nessie: NessieSD, NessieHY,
//! Pilaf and Cell write their client and server logic as `async` code
//! against an [`Io`] handle, and an [`Exec`] turns such a future into a
//! machine with Nessie's shape: the driver polls it with the current time,
//! and it answers with work requests to post ([`Step::Post`]), an effect to
//! perform ([`Step::Effect`]), `Pending` while completions are outstanding,
//! or its result. Completions go back through [`Exec::complete`], effect
//! results through [`Exec::resolve`]. The logic never blocks, sleeps, reads
//! a clock or touches memory itself, so the same code runs under the
//! threaded driver ([`crate::blocking`]) on fabric-sim or verbs, under a
//! test that steps it one round at a time, and in the deterministic cluster
//! simulator (`nessie-sim`).
//!
//! Each `.await` on the handle is one round of work requests (posted
//! together, all awaited, optionally with a deadline in the machine's time
//! after which missing completions count as [`FabricError::Timeout`]), a
//! detached post ([`Step::PostDetached`]: a server's response, posted
//! unsignaled), or one effect:
//!
//! - [`Effect::Backoff`]: wait before trying again;
//! - [`Effect::AwaitResponse`]: a client waits for its response slot to
//!   receive message `seq`, until a deadline;
//! - [`Effect::AwaitRequest`]: a server worker waits for a new request in
//!   one of its slots ([`SlotWatch`]);
//! - [`Effect::AwaitLock`]: a worker waits for its node's table lock
//!   ([`TableLock`]), which another worker holds;
//! - [`Effect::Ext`]: an effect of the system's own ([`Ext`]; Cell's log
//!   appends and directory snapshots).
//!
//! Each driver implements the waits its own way: the threaded one polls
//! local memory (yielding the CPU between polls), the simulator resolves
//! them when the write lands, plus a modelled detection delay.
//!
//! [`Exec::poll`] takes the future by `Pin<&mut F>`, so a blocking driver
//! keeps it on its stack (no allocation, and it may borrow the client);
//! [`Machine`] owns a boxed one, for drivers that keep machines across
//! events. The executor is a no-op-waker loop: no runtime, no threads.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use nessie_protocol::{
    ChainLink, Completion, CorruptionKind, Error, FabricError, Nanos, NodeId, Op, OpId, OpOutput,
    OpStats, TransportError, WorkRequest,
};

use crate::lock::{TableGuard, TableLock};
use crate::watch::SlotWatch;

/// Results of one round, in the order the operations were issued.
pub type Results = Vec<Result<OpOutput, FabricError>>;

/// How a round's operations are counted in the machine's [`OpStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// READs and CASes of an index structure (index reads, index CASes).
    Index,
    /// Anything else that the papers count (data reads, data CASes, writes,
    /// CPU reads and writes), with round trips.
    Data,
    /// Not counted at all: polling reads, a server's own table accesses, a
    /// message read back whose cost the caller counts itself.
    Uncounted,
}

/// A system's own effects beyond the shared ones (Cell's log appends and
/// directory snapshots); [`Plain`] for systems without any.
pub trait Ext: 'static {
    /// The effect a machine asks for.
    type Effect: fmt::Debug;
    /// What performing it returns.
    type Resolution: fmt::Debug;
}

/// No effects of a system's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Plain;

/// The effect (and resolution) of [`Plain`]: none can exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Never {}

impl Ext for Plain {
    type Effect = Never;
    type Resolution = Never;
}

/// An effect other than fabric work (module documentation).
pub enum Effect<X: Ext> {
    /// Wait this long before trying again.
    Backoff(Duration),
    /// Wait until the 8-byte control word at offset `ctrl` of the machine's
    /// own node's data region carries sequence number `seq` (bits 0-31), or
    /// until `deadline` (machine time) has passed.
    AwaitResponse {
        /// Offset of the control word (the last word of the response slot).
        ctrl: u64,
        /// The sequence number awaited.
        seq: u32,
        /// When to stop waiting.
        deadline: Nanos,
    },
    /// Wait until one of the watched request slots holds a request the
    /// worker has not served yet.
    AwaitRequest(Arc<SlotWatch>),
    /// Wait until the lock (held by another worker) is released.
    AwaitLock(Arc<TableLock>),
    /// The system's own effect.
    Ext(X::Effect),
}

impl<X: Ext> fmt::Debug for Effect<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Effect::Backoff(d) => f.debug_tuple("Backoff").field(d).finish(),
            Effect::AwaitResponse {
                ctrl,
                seq,
                deadline,
            } => f
                .debug_struct("AwaitResponse")
                .field("ctrl", ctrl)
                .field("seq", seq)
                .field("deadline", deadline)
                .finish(),
            Effect::AwaitRequest(w) => f.debug_tuple("AwaitRequest").field(w).finish(),
            Effect::AwaitLock(l) => f.debug_tuple("AwaitLock").field(l).finish(),
            Effect::Ext(e) => f.debug_tuple("Ext").field(e).finish(),
        }
    }
}

/// The result of an [`Effect`].
pub enum Resolution<X: Ext> {
    /// A back-off passed, or a lock was released.
    Waited,
    /// [`Effect::AwaitResponse`]: whether the response landed (`false`: the
    /// deadline passed first).
    Landed(bool),
    /// [`Effect::AwaitRequest`]: the slot (its position in the watch) and
    /// the control word seen there.
    Request {
        /// Position of the slot in [`SlotWatch::slots`].
        index: usize,
        /// Its control word.
        ctrl: u64,
    },
    /// The system's own resolution.
    Ext(X::Resolution),
}

impl<X: Ext> fmt::Debug for Resolution<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resolution::Waited => f.write_str("Waited"),
            Resolution::Landed(b) => f.debug_tuple("Landed").field(b).finish(),
            Resolution::Request { index, ctrl } => f
                .debug_struct("Request")
                .field("index", index)
                .field("ctrl", ctrl)
                .finish(),
            Resolution::Ext(r) => f.debug_tuple("Ext").field(r).finish(),
        }
    }
}

/// What a machine wants next.
pub enum Step<T, X: Ext> {
    /// Post these work requests (one round, all awaited).
    Post(Vec<WorkRequest>),
    /// Post these work requests as one chain to one node, in order, each
    /// after its predecessor as its link says (`Endpoint::post_chain`), all
    /// awaited as one round.
    PostChain(Vec<(WorkRequest, ChainLink)>),
    /// Post these work requests without awaiting them (a detached post: a
    /// server's response). Drivers post them unsignaled
    /// (`Endpoint::post_unsignaled`): a success need not complete, and a
    /// completion that does come is not the machine's.
    PostDetached(Vec<WorkRequest>),
    /// Perform this effect and [`Exec::resolve`] it before polling again.
    Effect(Effect<X>),
    /// Waiting for completions already posted.
    Pending,
    /// Finished.
    Done(T),
}

impl<T: fmt::Debug, X: Ext> fmt::Debug for Step<T, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Post(w) => f.debug_tuple("Post").field(w).finish(),
            Step::PostChain(w) => f.debug_tuple("PostChain").field(w).finish(),
            Step::PostDetached(w) => f.debug_tuple("PostDetached").field(w).finish(),
            Step::Effect(e) => f.debug_tuple("Effect").field(e).finish(),
            Step::Pending => f.write_str("Pending"),
            Step::Done(t) => f.debug_tuple("Done").field(t).finish(),
        }
    }
}

enum Want<X: Ext> {
    Round {
        ops: Vec<Op>,
        class: OpClass,
        deadline: Option<Nanos>,
        detached: bool,
        /// A chain: each request's link to its predecessor.
        links: Option<Vec<ChainLink>>,
    },
    Effect(Effect<X>),
}

enum Got<X: Ext> {
    Round(Results),
    Posted,
    Effect(Resolution<X>),
}

struct Chan<X: Ext> {
    own: NodeId,
    now: Nanos,
    /// Rounds without a deadline of their own get `now + limit`.
    limit: Option<Duration>,
    want: Option<Want<X>>,
    got: Option<Got<X>>,
    stats: OpStats,
    /// Operations of the last round the driver could not post.
    unposted: usize,
}

/// The handle the async logic of a machine does its I/O through (cheap to
/// clone; every clone talks to the same machine).
pub struct Io<X: Ext = Plain> {
    chan: Rc<RefCell<Chan<X>>>,
}

impl<X: Ext> Clone for Io<X> {
    fn clone(&self) -> Self {
        Io {
            chan: self.chan.clone(),
        }
    }
}

impl<X: Ext> fmt::Debug for Io<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.chan.borrow();
        f.debug_struct("Io")
            .field("own", &c.own)
            .field("now", &c.now)
            .finish()
    }
}

struct Await<X: Ext> {
    chan: Rc<RefCell<Chan<X>>>,
    want: Option<Want<X>>,
}

// Nothing in `Await` is pinned structurally: it only moves values in and out.
impl<X: Ext> Unpin for Await<X> {}

impl<X: Ext> Future for Await<X> {
    type Output = Got<X>;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Got<X>> {
        let want = self.want.take();
        let mut ch = self.chan.borrow_mut();
        if let Some(w) = want {
            ch.want = Some(w);
            return Poll::Pending;
        }
        match ch.got.take() {
            Some(g) => Poll::Ready(g),
            None => Poll::Pending,
        }
    }
}

fn mismatched<T>(what: &str) -> Result<T, Error> {
    Err(Error::corrupt(
        CorruptionKind::Completion,
        format!("mismatched resolution: expected {what}"),
    ))
}

impl<X: Ext> Io<X> {
    /// The node the machine runs on.
    pub fn own(&self) -> NodeId {
        self.chan.borrow().own
    }

    /// The time passed in by the driver at the current step.
    pub fn now(&self) -> Nanos {
        self.chan.borrow().now
    }

    /// Adds to the machine's counters.
    pub fn count(&self, f: impl FnOnce(&mut OpStats)) {
        f(&mut self.chan.borrow_mut().stats);
    }

    /// What the machine issued so far.
    pub fn stats(&self) -> OpStats {
        self.chan.borrow().stats
    }

    /// How many operations of the last round the driver could not post
    /// (they never execute; their results carry the refusal).
    pub fn unposted(&self) -> usize {
        self.chan.borrow().unposted
    }

    /// Rounds issued without a deadline of their own give up on missing
    /// completions `limit` after they were issued (`None`: never).
    pub fn set_limit(&self, limit: Option<Duration>) {
        self.chan.borrow_mut().limit = limit;
    }

    async fn want(&self, w: Want<X>) -> Got<X> {
        Await {
            chan: self.chan.clone(),
            want: Some(w),
        }
        .await
    }

    /// Runs `chain`, requests to one node, as one round posted as a chain:
    /// they execute in order, each after its predecessor as its [`ChainLink`]
    /// says (`Endpoint::post_chain`: what a fault of one does to those
    /// behind it), all awaited; missing completions count as
    /// [`FabricError::Timeout`] once `deadline` has passed. One round trip.
    pub async fn chain_by(
        &self,
        chain: Vec<(Op, ChainLink)>,
        class: OpClass,
        deadline: Nanos,
    ) -> Results {
        let (ops, links) = chain.into_iter().unzip();
        self.round_linked(ops, Some(links), class, Some(deadline))
            .await
    }

    /// One round of `ops` (a chain if `links` is given), awaited.
    async fn round_linked(
        &self,
        ops: Vec<Op>,
        links: Option<Vec<ChainLink>>,
        class: OpClass,
        deadline: Option<Nanos>,
    ) -> Results {
        if ops.is_empty() {
            return Vec::new();
        }
        let n = ops.len();
        match self
            .want(Want::Round {
                ops,
                class,
                deadline,
                detached: false,
                links,
            })
            .await
        {
            Got::Round(r) => r,
            _ => vec![Err(FabricError::Transport(TransportError::Mismatch)); n],
        }
    }

    /// Runs `ops` as one round (posted together, all awaited; missing
    /// completions time out after the handle's limit, if it has one);
    /// results in order.
    pub async fn round(&self, ops: Vec<Op>, class: OpClass) -> Results {
        self.round_linked(ops, None, class, None).await
    }

    /// [`Io::round`] whose missing completions count as
    /// [`FabricError::Timeout`] once `deadline` has passed.
    pub async fn round_by(&self, ops: Vec<Op>, class: OpClass, deadline: Nanos) -> Results {
        self.round_linked(ops, None, class, Some(deadline)).await
    }

    /// [`Io::round_by`] with the deadline `within` from now.
    pub async fn round_within(&self, ops: Vec<Op>, class: OpClass, within: Duration) -> Results {
        let deadline = self.now().plus(within);
        self.round_linked(ops, None, class, Some(deadline)).await
    }

    /// Posts `ops` without waiting for their completions (a server's
    /// unsignaled responses): counted, but never a round trip.
    pub async fn post(&self, ops: Vec<Op>, class: OpClass) {
        if ops.is_empty() {
            return;
        }
        self.want(Want::Round {
            ops,
            class,
            deadline: None,
            detached: true,
            links: None,
        })
        .await;
    }

    /// Performs `e` and returns its resolution.
    pub async fn effect(&self, e: Effect<X>) -> Resolution<X> {
        match self.want(Want::Effect(e)).await {
            Got::Effect(r) => r,
            // The executor never answers an effect with anything else.
            _ => Resolution::Waited,
        }
    }

    /// Performs the system's own effect `e`.
    pub async fn ext(&self, e: X::Effect) -> Result<X::Resolution, Error> {
        match self.effect(Effect::Ext(e)).await {
            Resolution::Ext(r) => Ok(r),
            _ => mismatched("the system's own resolution"),
        }
    }

    /// Waits `d`.
    pub async fn backoff(&self, d: Duration) {
        self.effect(Effect::Backoff(d)).await;
    }

    /// Waits until the control word at `ctrl` (own data region) carries
    /// `seq`; `false` if `deadline` passed first.
    pub async fn await_response(&self, ctrl: u64, seq: u32, deadline: Nanos) -> bool {
        matches!(
            self.effect(Effect::AwaitResponse {
                ctrl,
                seq,
                deadline
            })
            .await,
            Resolution::Landed(true)
        )
    }

    /// Waits for a request the worker watching `watch` has not served: its
    /// position in the watch and its control word.
    pub async fn await_request(&self, watch: &Arc<SlotWatch>) -> Result<(usize, u64), Error> {
        match self.effect(Effect::AwaitRequest(watch.clone())).await {
            Resolution::Request { index, ctrl } => Ok((index, ctrl)),
            _ => mismatched("a request"),
        }
    }

    /// Takes `lock`, waiting ([`Effect::AwaitLock`]) while another worker
    /// holds it.
    pub async fn lock<'a>(&self, lock: &'a Arc<TableLock>) -> TableGuard<'a> {
        loop {
            if let Some(guard) = lock.try_lock() {
                return guard;
            }
            self.effect(Effect::AwaitLock(lock.clone())).await;
        }
    }

    /// A CPU read of the own node's data region, not counted.
    pub async fn local_read(&self, offset: u64, len: u32) -> Result<Vec<u8>, Error> {
        read_one(
            self.round(vec![Op::LocalRead { offset, len }], OpClass::Uncounted)
                .await,
        )
    }

    /// A CPU read of one 8-byte word of the own node's data region.
    pub async fn local_word(&self, offset: u64) -> Result<u64, Error> {
        Ok(crate::bytes::word(&self.local_read(offset, 8).await?, 0))
    }

    /// A CPU write into the own node's data region, not counted.
    pub async fn local_write(&self, offset: u64, data: Vec<u8>) -> Result<(), Error> {
        let r = self
            .round(vec![Op::LocalWrite { offset, data }], OpClass::Uncounted)
            .await;
        r.into_iter().try_for_each(|r| written(&r))
    }
}

fn read_output(r: Option<Result<OpOutput, FabricError>>) -> Result<Vec<u8>, Error> {
    match r {
        Some(Ok(OpOutput::Read(b))) => Ok(b),
        Some(Err(e)) => Err(e.into()),
        other => Err(unexpected(other)),
    }
}

/// The error of a completion whose output is not what the operation returns.
pub fn unexpected(o: Option<Result<OpOutput, FabricError>>) -> Error {
    tracing::debug!(output = ?o, "a completion that does not answer its request");
    Error::Fabric(FabricError::Transport(TransportError::Mismatch))
}

/// The bytes of the single READ of a round's results (taken, not copied).
pub fn read_one(mut r: Results) -> Result<Vec<u8>, Error> {
    read_output(r.pop())
}

/// Reads the bytes of a READ result.
pub fn read_bytes(r: &Result<OpOutput, FabricError>) -> Result<&[u8], Error> {
    match r {
        Ok(OpOutput::Read(b)) => Ok(b),
        Ok(other) => Err(Error::corrupt(
            CorruptionKind::Completion,
            format!("expected a read, got {other:?}"),
        )),
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

/// The previous word a CAS result reports.
pub fn cas_previous(r: &Result<OpOutput, FabricError>) -> Result<u64, Error> {
    match r {
        Ok(OpOutput::Cas { previous }) => Ok(*previous),
        Ok(other) => Err(unexpected(Some(Ok(other.clone())))),
        Err(e) => Err(e.clone().into()),
    }
}

/// The executor state of one machine: its work request ids, the round in
/// flight and the effect awaited (module documentation).
pub struct Exec<X: Ext = Plain> {
    chan: Rc<RefCell<Chan<X>>>,
    own: NodeId,
    next_id: u64,
    base: u64,
    results: Vec<Option<Result<OpOutput, FabricError>>>,
    outstanding: usize,
    deadline: Option<Nanos>,
    awaiting_effect: bool,
}

impl<X: Ext> fmt::Debug for Exec<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exec")
            .field("own", &self.own)
            .field("outstanding", &self.outstanding)
            .field("awaiting_effect", &self.awaiting_effect)
            .finish_non_exhaustive()
    }
}

impl<X: Ext> Exec<X> {
    /// The executor of a machine on node `own` whose work requests are
    /// numbered from `first_id` (ids must not repeat on one endpoint: a
    /// driver running one machine after another continues from
    /// [`Exec::next_id`]), and the handle its logic is given.
    pub fn new(own: NodeId, first_id: u64) -> (Exec<X>, Io<X>) {
        let chan = Rc::new(RefCell::new(Chan {
            own,
            now: Nanos::ZERO,
            limit: None,
            want: None,
            got: None,
            stats: OpStats::default(),
            unposted: 0,
        }));
        let exec = Exec {
            chan: chan.clone(),
            own,
            next_id: first_id,
            base: first_id,
            results: Vec::new(),
            outstanding: 0,
            deadline: None,
            awaiting_effect: false,
        };
        (exec, Io { chan })
    }

    /// When the machine, having answered [`Step::Pending`], wants to be
    /// polled again even if no completion arrives: the first instant past
    /// its round's deadline, at which the missing completions count as
    /// timed out. `None`: only a completion or an effect's resolution moves
    /// it (as quinn-proto's `Connection::poll_timeout`).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.awaiting_effect || self.outstanding == 0 {
            return None;
        }
        // `poll` gives up once `now` is past the deadline.
        self.deadline.map(|d| Nanos(d.0.saturating_add(1)))
    }

    /// Takes one step of `fut` (the machine's logic, built on this
    /// executor's [`Io`]) at time `now`.
    pub fn poll<T, F>(&mut self, fut: Pin<&mut F>, now: Nanos) -> Step<Result<T, Error>, X>
    where
        F: Future<Output = Result<T, Error>> + ?Sized,
    {
        self.chan.borrow_mut().now = now;
        if self.awaiting_effect {
            return Step::Pending;
        }
        if self.outstanding > 0 {
            match self.deadline {
                // Give up on the missing completions: they count as timed out.
                Some(d) if now > d => self.outstanding = 0,
                _ => return Step::Pending,
            }
        }
        if !self.results.is_empty() {
            let r = std::mem::take(&mut self.results)
                .into_iter()
                .map(|r| r.unwrap_or(Err(FabricError::Timeout)))
                .collect();
            self.deadline = None;
            self.chan.borrow_mut().got = Some(Got::Round(r));
        }
        // The executor is polled by its driver, never woken.
        let mut cx = Context::from_waker(Waker::noop());
        match fut.poll(&mut cx) {
            Poll::Ready(r) => Step::Done(r),
            Poll::Pending => {
                let want = self.chan.borrow_mut().want.take();
                match want {
                    Some(Want::Round {
                        ops,
                        class,
                        deadline,
                        detached,
                        links,
                    }) => {
                        let wrs = self.issue(ops, class, deadline, detached, now);
                        match links {
                            Some(links) => Step::PostChain(wrs.into_iter().zip(links).collect()),
                            None if detached => Step::PostDetached(wrs),
                            None => Step::Post(wrs),
                        }
                    }
                    Some(Want::Effect(e)) => {
                        self.awaiting_effect = true;
                        Step::Effect(e)
                    }
                    None => Step::Done(Err(Error::corrupt(CorruptionKind::Bug, "machine made no progress (it awaited something the executor does not drive)"))),
                }
            }
        }
    }

    fn issue(
        &mut self,
        ops: Vec<Op>,
        class: OpClass,
        deadline: Option<Nanos>,
        detached: bool,
        now: Nanos,
    ) -> Vec<WorkRequest> {
        self.base = self.next_id;
        let mut ch = self.chan.borrow_mut();
        ch.unposted = 0;
        let (mut remote, mut nic) = (false, false);
        let mut wrs = Vec::with_capacity(ops.len());
        for op in ops {
            if class != OpClass::Uncounted {
                count(&mut ch.stats, &op, class == OpClass::Index);
            }
            if let Some(a) = op.remote_addr() {
                nic = true;
                remote |= a.node != self.own;
            }
            wrs.push(WorkRequest {
                id: OpId(self.next_id),
                op,
            });
            self.next_id += 1;
        }
        if class != OpClass::Uncounted && !detached {
            if remote {
                ch.stats.round_trips += 1;
            } else if nic {
                ch.stats.loopback_rounds += 1;
            }
        }
        if detached {
            self.results.clear();
            self.outstanding = 0;
            self.deadline = None;
            ch.got = Some(Got::Posted);
        } else {
            self.results = vec![None; wrs.len()];
            self.outstanding = wrs.len();
            self.deadline = deadline.or(ch.limit.map(|l| now.plus(l)));
        }
        wrs
    }

    /// Hands the machine the completion of one of its work requests;
    /// `false` if it was not one the machine awaits (a detached post's, or
    /// one of a round it gave up on).
    pub fn complete(&mut self, c: Completion) -> bool {
        let Some(i) = c.id.0.checked_sub(self.base) else {
            return false;
        };
        match self.results.get_mut(i as usize) {
            Some(slot) if slot.is_none() && self.outstanding > 0 => {
                *slot = Some(c.result);
                self.outstanding -= 1;
                true
            }
            _ => false,
        }
    }

    /// Tells the machine that work request `id` of its round could not be
    /// posted (it never executes); `false` if the machine does not await it
    /// (a detached post).
    pub fn refuse(&mut self, id: OpId, e: FabricError) -> bool {
        let mine = self.complete(Completion { id, result: Err(e) });
        if mine {
            self.chan.borrow_mut().unposted += 1;
        }
        mine
    }

    /// Hands the machine the result of the effect it asked for.
    pub fn resolve(&mut self, r: Resolution<X>) {
        if self.awaiting_effect {
            self.awaiting_effect = false;
            self.chan.borrow_mut().got = Some(Got::Effect(r));
        }
    }

    /// Whether the machine waits for an effect's resolution.
    pub fn awaiting_effect(&self) -> bool {
        self.awaiting_effect
    }

    /// Completions the current round still awaits.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// When the current round gives up on its missing completions, if it
    /// has a deadline (a driver that may lose completions polls again then).
    pub fn deadline(&self) -> Option<Nanos> {
        (self.outstanding > 0).then_some(self.deadline).flatten()
    }

    /// The id the next work request gets.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// What the machine issued so far.
    pub fn stats(&self) -> OpStats {
        self.chan.borrow().stats
    }

    /// Takes (and zeroes) the machine's counters, for machines that never
    /// finish (server workers).
    pub fn take_stats(&mut self) -> OpStats {
        std::mem::take(&mut self.chan.borrow_mut().stats)
    }
}

/// Counts one operation as the protocol counts it (`index`: an index
/// structure's READ or CAS).
pub fn count(stats: &mut OpStats, op: &Op, index: bool) {
    match op {
        Op::Read { .. } if index => stats.index_reads += 1,
        Op::Read { .. } => stats.data_reads += 1,
        Op::Write { .. } => stats.writes += 1,
        Op::Cas { .. } if index => stats.index_cas += 1,
        Op::Cas { .. } => stats.data_cas += 1,
        Op::LocalRead { .. } => stats.local_reads += 1,
        Op::LocalWrite { .. } | Op::BindWindow { .. } => stats.local_writes += 1,
        Op::Windowed { op, .. } => return count(stats, op, index),
    }
    match op {
        Op::LocalRead { .. } | Op::LocalWrite { .. } | Op::BindWindow { .. } => {
            stats.local_bytes += op.bytes()
        }
        _ => stats.fabric_bytes += op.bytes(),
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Error>>>>;

/// A machine that owns its logic: an [`Exec`] and a boxed future, for
/// drivers that keep machines across events (the simulator, a test that
/// steps one by hand).
pub struct Machine<T, X: Ext = Plain> {
    exec: Exec<X>,
    fut: Option<BoxFuture<T>>,
}

impl<T, X: Ext> fmt::Debug for Machine<T, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Machine")
            .field("exec", &self.exec)
            .field("done", &self.fut.is_none())
            .finish()
    }
}

impl<T: 'static, X: Ext> Machine<T, X> {
    /// A machine on node `own` whose work requests are numbered from
    /// `first_id`, running the logic `make` builds from its [`Io`] handle.
    pub fn new<F>(own: NodeId, first_id: u64, make: impl FnOnce(Io<X>) -> F) -> Machine<T, X>
    where
        F: Future<Output = Result<T, Error>> + 'static,
    {
        let (exec, io) = Exec::new(own, first_id);
        Machine {
            exec,
            fut: Some(Box::pin(make(io))),
        }
    }

    /// Takes one step at time `now`.
    pub fn poll(&mut self, now: Nanos) -> Step<Result<T, Error>, X> {
        let Some(fut) = self.fut.as_mut() else {
            return Step::Done(Err(Error::corrupt(
                CorruptionKind::Bug,
                "machine polled after it finished",
            )));
        };
        let step = self.exec.poll(fut.as_mut(), now);
        if matches!(step, Step::Done(_)) {
            self.fut = None;
        }
        step
    }

    /// The executor (completions, resolutions, counters).
    pub fn exec(&mut self) -> &mut Exec<X> {
        &mut self.exec
    }

    /// The executor and the logic, for a driver that runs the machine to
    /// its end itself ([`crate::blocking::Driver::run_machine`]); `None`
    /// once it finished.
    #[allow(clippy::type_complexity)]
    pub fn parts(
        &mut self,
    ) -> Option<(
        &mut Exec<X>,
        Pin<&mut (dyn Future<Output = Result<T, Error>> + 'static)>,
    )> {
        let fut = self.fut.as_mut()?;
        Some((&mut self.exec, fut.as_mut()))
    }

    /// Marks the machine finished (its driver saw it return).
    pub fn finish(&mut self) {
        self.fut = None;
    }

    /// See [`Exec::complete`].
    pub fn complete(&mut self, c: Completion) -> bool {
        self.exec.complete(c)
    }

    /// See [`Exec::refuse`].
    pub fn refuse(&mut self, id: OpId, e: FabricError) -> bool {
        self.exec.refuse(id, e)
    }

    /// See [`Exec::resolve`].
    pub fn resolve(&mut self, r: Resolution<X>) {
        self.exec.resolve(r)
    }

    /// What the machine issued so far.
    pub fn stats(&self) -> OpStats {
        self.exec.stats()
    }

    /// Whether it finished.
    pub fn is_done(&self) -> bool {
        self.fut.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_protocol::RemoteAddr;

    #[test]
    fn a_round_with_a_deadline_asks_to_be_polled_the_instant_past_it() {
        let read = || {
            vec![Op::Read {
                addr: RemoteAddr::data(NodeId(1), 0),
                len: 8,
            }]
        };
        let mut m: Machine<bool> = Machine::new(NodeId(0), 1, move |io: Io| async move {
            let r = io.round_by(read(), OpClass::Data, Nanos(100)).await;
            io.backoff(Duration::from_micros(1)).await;
            Ok(matches!(r[0], Err(FabricError::Timeout)))
        });
        assert_eq!(m.exec().poll_timeout(), None, "not started");
        assert!(matches!(m.poll(Nanos(5)), Step::Post(_)));
        assert_eq!(m.exec().poll_timeout(), Some(Nanos(101)));
        assert!(matches!(m.poll(Nanos(100)), Step::Pending));
        // At that instant the missing completion counts as timed out and
        // the logic moves on, to an effect: no timeout while it waits on one.
        assert!(matches!(
            m.poll(Nanos(101)),
            Step::Effect(Effect::Backoff(_))
        ));
        assert_eq!(m.exec().poll_timeout(), None);
        m.exec().resolve(Resolution::Waited);
        assert!(matches!(m.poll(Nanos(2_000)), Step::Done(Ok(true))));
    }

    #[test]
    fn a_machine_posts_rounds_and_effects_in_order_and_sees_time() {
        let mut m: Machine<(u64, Nanos)> = Machine::new(NodeId(0), 1, |io: Io| async move {
            let r = io
                .round(
                    vec![Op::Read {
                        addr: RemoteAddr::data(NodeId(1), 0),
                        len: 8,
                    }],
                    OpClass::Index,
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
        assert!(m.complete(Completion {
            id: wrs[0].id,
            result: Ok(OpOutput::Read(7u64.to_le_bytes().to_vec())),
        }));
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

    #[test]
    fn a_round_past_its_deadline_times_out_its_missing_completions() {
        let mut m: Machine<(bool, bool)> = Machine::new(NodeId(0), 10, |io: Io| async move {
            let read = |n| Op::Read {
                addr: RemoteAddr::data(NodeId(n), 0),
                len: 8,
            };
            let r = io
                .round_by(vec![read(1), read(2)], OpClass::Data, Nanos(100))
                .await;
            Ok((r[0].is_ok(), r[1] == Err(FabricError::Timeout)))
        });
        let Step::Post(wrs) = m.poll(Nanos(5)) else {
            panic!("expected a round")
        };
        assert_eq!(m.exec().deadline(), Some(Nanos(100)));
        m.complete(Completion {
            id: wrs[0].id,
            result: Ok(OpOutput::Read(vec![0; 8])),
        });
        assert!(matches!(m.poll(Nanos(100)), Step::Pending));
        match m.poll(Nanos(101)) {
            Step::Done(Ok((true, true))) => {}
            other => panic!("{other:?}"),
        }
        // The late completion is not the machine's any more.
        assert!(!m.complete(Completion {
            id: wrs[1].id,
            result: Ok(OpOutput::Read(vec![0; 8])),
        }));
    }

    #[test]
    fn a_detached_post_is_counted_without_a_round_trip_and_not_awaited() {
        let mut m: Machine<()> = Machine::new(NodeId(0), 1, |io: Io| async move {
            io.post(
                vec![Op::Write {
                    addr: RemoteAddr::data(NodeId(1), 0),
                    data: vec![1; 16],
                }],
                OpClass::Data,
            )
            .await;
            Ok(())
        });
        assert!(matches!(m.poll(Nanos(1)), Step::PostDetached(_)));
        assert!(matches!(m.poll(Nanos(2)), Step::Done(Ok(()))));
        let s = m.stats();
        assert_eq!((s.writes, s.fabric_bytes, s.round_trips), (1, 16, 0));
    }
}
