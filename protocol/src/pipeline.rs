//! Many operations in flight per client thread: a [`Pipeline`] keeps up to
//! `depth` operation machines in flight over one endpoint, polls the
//! completions and advances whichever machine each belongs to, with the
//! retry, back-off and deadline rules of [`Client`](crate::Client).
//!
//! The machines are sans-IO already, so nothing in the protocol changes:
//! each in-flight operation runs as its own client (its own [`ClientState`]:
//! data table share, allocator and cache), so that the pipeline is, to the
//! protocol, exactly `depth` independent clients that happen to share one
//! endpoint. That is what the model checker and the other checkers explore,
//! so no new interleaving is introduced; it costs `depth` client ids (and
//! data table shares) on the node: configure `clients_per_node` for it.
//!
//! Work request ids are renumbered on the way out (each machine numbers its
//! own requests from zero) and mapped back on the way in by the same
//! [`Router`] the `Client`'s driver uses: an endpoint id carries its slot in
//! its low 16 bits, and the slot's lane keeps its attempt's posted requests
//! in a reused list, so no map is consulted per request; a completion that
//! arrives after its machine gave the round up (or finished) is dropped.
//!
//! The pipeline holds its client ids on the endpoint's fabric while it lives
//! ([`Endpoint::claim_client`]), as a `Client` does, and refuses an endpoint
//! on another node or a fabric smaller than the configuration addresses.
//!
//! Three ways to use it:
//! - [`Pipeline::run`]: a batch of [`Request`]s, results in request order;
//! - [`Pipeline::submit`] and [`Pipeline::progress`]: non-blocking, for a
//!   caller's own event loop;
//! - [`AsyncPipeline`]: futures driven by completions, on any executor (each
//!   poll makes progress without blocking and asks to be polled again, as an
//!   RDMA polling loop does).
//!
//! **Every handle answers for its own operation only.** The three faces
//! number their operations in three tag spaces that never meet (the
//! caller's tags, a batch's positions, the futures' own numbers), and the
//! faces do not mix on one pipeline: [`AsyncPipeline::new`] takes the
//! pipeline by value and refuses, with [`BusyPipeline`] (which hands it back
//! untouched), one that still holds operations of the other faces (queued,
//! in flight, or answers stashed by a [`Pipeline::run`]); once wrapped, the
//! pipeline is reachable only through its futures.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll as TaskPoll};
use std::time::Duration;

use crate::addr::NodeId;
use crate::client::{check_endpoint, given_up, retries};
use crate::config::Config;
use crate::error::ConfigError;
use crate::error::{Error, UnknownOutcome, UnknownStep};
use crate::fabric::{ClientClaim, Completion, Endpoint};
use crate::kv::{Request, Response};
use crate::machine::{ClientId, ClientState, GetMachine, Machine, Poll, PutMachine};
use crate::rng::jittered;
use crate::route::Router;
use crate::stats::OpStats;
use crate::time::{wait_for, Nanos};

/// How long one wait for completions may block before every machine is
/// polled again (so that deadlines and back-offs are noticed).
const WAIT_SLICE: Duration = Duration::from_millis(1);

/// An operation that finished: the caller's tag, its result, and the fabric
/// work of all its attempts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    /// The tag it was submitted under.
    pub tag: u64,
    /// Its result.
    pub result: Result<Response, Error>,
    /// What its attempts issued.
    pub stats: OpStats,
}

/// The machine of one [`Request`] (a GET, PUT or DELETE machine behind one
/// type), for drivers that run mixed operations side by side: this
/// pipeline, the cluster simulator and the model's worlds (whose state it
/// is part of, hence its comparisons and hash).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RequestMachine {
    /// A GET.
    Get(GetMachine),
    /// A PUT (`false`) or DELETE (`true`).
    Write(PutMachine, bool),
    /// A range scan, which Nessie's hash index does not offer: refused with
    /// [`Error::Unsupported`] at the first poll, having posted nothing.
    Refused,
}

impl RequestMachine {
    /// A fresh attempt of `req`.
    pub fn new(req: &Request) -> RequestMachine {
        match req {
            Request::Get(k) => RequestMachine::Get(GetMachine::get(k)),
            Request::Put(k, v) => RequestMachine::Write(PutMachine::put(k, v), false),
            Request::Delete(k) => RequestMachine::Write(PutMachine::delete(k), true),
            Request::Scan { .. } => RequestMachine::Refused,
        }
    }

    /// When its round in flight gives up on missing completions, with
    /// `margin` ([`crate::machine::OpMachine::gives_up_after`]).
    pub fn gives_up_after(&self, margin: Duration) -> Option<Nanos> {
        match self {
            RequestMachine::Get(m) => m.gives_up_after(margin),
            RequestMachine::Write(m, _) => m.gives_up_after(margin),
            RequestMachine::Refused => None,
        }
    }
}

impl Machine for RequestMachine {
    type Output = Response;

    fn poll(&mut self, st: &mut ClientState, now: Nanos) -> Poll<Result<Response, Error>> {
        match self {
            RequestMachine::Get(m) => match m.poll(st, now) {
                Poll::Post(w) => Poll::Post(w),
                Poll::Pending => Poll::Pending,
                Poll::Done(r) => Poll::Done(r.map(Response::Get)),
            },
            RequestMachine::Write(m, delete) => match m.poll(st, now) {
                Poll::Post(w) => Poll::Post(w),
                Poll::Pending => Poll::Pending,
                Poll::Done(r) if *delete => Poll::Done(r.map(Response::Delete)),
                Poll::Done(r) => Poll::Done(r.map(Response::Put)),
            },
            RequestMachine::Refused => Poll::Done(Err(Error::Unsupported("scan"))),
        }
    }

    fn complete(&mut self, c: Completion) {
        match self {
            RequestMachine::Get(m) => m.complete(c),
            RequestMachine::Write(m, _) => m.complete(c),
            RequestMachine::Refused => {}
        }
    }

    fn stats(&self) -> OpStats {
        match self {
            RequestMachine::Get(m) => m.stats(),
            RequestMachine::Write(m, _) => m.stats(),
            RequestMachine::Refused => OpStats::default(),
        }
    }

    fn poll_timeout(&self, st: &ClientState) -> Option<Nanos> {
        match self {
            RequestMachine::Get(m) => m.poll_timeout(st),
            RequestMachine::Write(m, _) => m.poll_timeout(st),
            RequestMachine::Refused => None,
        }
    }
}

/// Who submitted an operation: the caller, under its tag, [`Pipeline::run`],
/// at this position of its batch, or an [`AsyncPipeline`]'s future, under
/// its number. The three are separate tag spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Caller(u64),
    Batch(usize),
    Future(u64),
}

impl Origin {
    fn tag(self) -> u64 {
        match self {
            Origin::Caller(tag) | Origin::Future(tag) => tag,
            Origin::Batch(i) => i as u64,
        }
    }
}

struct InFlight {
    origin: Origin,
    req: Request,
    machine: RequestMachine,
    attempts: u32,
    start: Nanos,
    backoff: Duration,
    /// Backing off: the next attempt starts at this time.
    ready_at: Option<Nanos>,
    stats: OpStats,
    span: tracing::Span,
}

struct Slot {
    state: ClientState,
    op: Option<InFlight>,
}

/// Up to `depth` operations in flight over one endpoint (module docs).
pub struct Pipeline<E: Endpoint> {
    slots: Vec<Slot>,
    ep: E,
    queue: VecDeque<(Origin, Request)>,
    /// Slot `i` is lane `i`.
    router: Router,
    /// Operations of the caller that finished while [`Pipeline::run`] ran
    /// its batch: the next [`Pipeline::progress`] hands them out.
    stash: Vec<Finished>,
    rng: u64,
    completions: Vec<Completion>,
    total: OpStats,
    /// The slots' client ids, held on the fabric while the pipeline lives.
    _claims: Vec<ClientClaim>,
}

impl<E: Endpoint> Pipeline<E> {
    /// A pipeline of `depth` operations in flight on `ep` (an endpoint on
    /// `node`), running as the clients `first_index .. first_index + depth`
    /// of `node`. Refused at once, as [`Client::new`](crate::Client::new)
    /// refuses: an invalid configuration or depth ([`Error::Config`]), an
    /// endpoint on another node ([`Error::EndpointNode`]), a fabric smaller
    /// than the configuration ([`Error::TopologyMismatch`]), or a client id
    /// a live client or pipeline already holds, in this process or another
    /// ([`Error::ClientIdInUse`]; the registry words as for a client, with
    /// the same errors when the node does not answer).
    pub fn new(
        cfg: Arc<Config>,
        node: NodeId,
        first_index: u16,
        depth: u16,
        mut ep: E,
    ) -> Result<Pipeline<E>, Error> {
        cfg.validate()?;
        check_endpoint(&ep, node, &cfg)?;
        let end = u32::from(first_index) + u32::from(depth);
        if depth == 0 || end > u32::from(cfg.clients_per_node) {
            return Err(Error::Config(ConfigError::OutOfRange {
                field: "pipeline depth",
                value: format!("{first_index} + {depth}"),
                reason: "a pipeline needs depth >= 1 client ids below clients_per_node",
            }));
        }
        let slots = (first_index..first_index + depth)
            .map(|index| {
                ClientState::new(cfg.clone(), ClientId { node, index })
                    .map(|state| Slot { state, op: None })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (registry, within) = (cfg.registry(), cfg.retry.op_timeout);
        let claims = slots
            .iter()
            .map(|s| crate::registry::claim_id(&mut ep, s.state.id, registry, within))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pipeline {
            router: Router::new(slots.len()),
            slots,
            ep,
            queue: VecDeque::new(),
            stash: Vec::new(),
            _claims: claims,
            rng: 0x9e37_79b9_7f4a_7c15 ^ (u64::from(node.0) << 32) ^ u64::from(first_index),
            completions: Vec::new(),
            total: OpStats::default(),
        })
    }

    /// Operations in flight at most.
    pub fn depth(&self) -> usize {
        self.slots.len()
    }

    /// Operations submitted and not yet handed out by
    /// [`Pipeline::progress`]: queued, in flight, or finished while
    /// [`Pipeline::run`] ran a batch.
    pub fn outstanding(&self) -> usize {
        self.unfinished() + self.stash.len()
    }

    /// Operations queued or in flight.
    fn unfinished(&self) -> usize {
        self.queue.len() + self.slots.iter().filter(|s| s.op.is_some()).count()
    }

    /// Fabric work of every operation finished so far.
    pub fn total_stats(&self) -> OpStats {
        self.total
    }

    /// Cache hits of the pipeline's clients so far.
    pub fn cache_hits(&self) -> u64 {
        self.slots.iter().map(|s| s.state.cache.hit_miss().0).sum()
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &E {
        &self.ep
    }

    /// Queues `req` under the caller's `tag` (returned with its result by
    /// [`Pipeline::progress`]); it starts as soon as a slot is free.
    pub fn submit(&mut self, tag: u64, req: Request) {
        self.queue.push_back((Origin::Caller(tag), req));
    }

    /// Runs `requests` with up to `depth` in flight and returns their
    /// results in request order, once all of them have finished.
    ///
    /// Each result is what [`Client`](crate::Client)'s method of that
    /// operation returns, with the same errors and the same promises (its
    /// "Errors" sections), and one more: an operation the pipeline could not
    /// finish answers [`Error::OutcomeUnknown`] with
    /// [`UnknownStep::Unfinished`], never an error that promises nothing
    /// happened.
    ///
    /// Operations the caller [submitted](Pipeline::submit) before keep their
    /// place in the queue and their tags (which need not differ from batch
    /// positions): those that finish meanwhile are kept for the next
    /// [`Pipeline::progress`], never mixed into the batch's results.
    pub fn run(
        &mut self,
        requests: impl IntoIterator<Item = Request>,
    ) -> Vec<Result<Response, Error>> {
        let mut results: Vec<Option<Result<Response, Error>>> = Vec::new();
        for (i, r) in requests.into_iter().enumerate() {
            self.queue.push_back((Origin::Batch(i), r));
            results.push(None);
        }
        let mut left = results.len();
        let mut done = Vec::new();
        while left > 0 && self.unfinished() > 0 {
            self.step(&mut done, WAIT_SLICE);
            for (origin, f) in done.drain(..) {
                match origin {
                    Origin::Batch(i) => {
                        if let Some(slot) = results.get_mut(i) {
                            left -= usize::from(slot.is_none());
                            *slot = Some(f.result);
                        }
                    }
                    Origin::Caller(_) => self.stash.push(f),
                    // A wrapped pipeline runs no batch (its owner is the
                    // `AsyncPipeline`), so no future's operation is here.
                    Origin::Future(_) => {}
                }
            }
        }
        batch_results(results)
    }

    /// Makes all the progress it can: starts queued operations in free
    /// slots, polls every machine (posting its next round), delivers the
    /// completions that arrived and, if nothing moved, waits for one at most
    /// `wait` (0: never blocks). Finished operations are appended to `done`.
    pub fn progress(&mut self, done: &mut Vec<Finished>, wait: Duration) {
        let stashed = !self.stash.is_empty();
        done.append(&mut self.stash);
        let mut finished = Vec::new();
        self.step(&mut finished, if stashed { Duration::ZERO } else { wait });
        // Batch operations finish inside `run`, which returns only once all
        // of them have.
        done.extend(
            finished
                .into_iter()
                .filter(|(o, _)| matches!(o, Origin::Caller(_)))
                .map(|(_, f)| f),
        );
    }

    /// [`Pipeline::progress`], reporting each finished operation with its
    /// origin.
    fn step(&mut self, done: &mut Vec<(Origin, Finished)>, wait: Duration) {
        let before = done.len();
        self.start_queued();
        let posted = self.poll_all(done);
        self.ep.poll(&mut self.completions);
        if self.completions.is_empty() && !posted && done.len() == before && !wait.is_zero() {
            let wait = wait_for(self.ep.now(), self.next_poll(), wait);
            self.ep.wait(&mut self.completions, wait);
        }
        self.deliver();
    }

    fn start_queued(&mut self) {
        let now = self.ep.now();
        for slot in &mut self.slots {
            if slot.op.is_some() {
                continue;
            }
            let Some((origin, req)) = self.queue.pop_front() else {
                break;
            };
            let span = tracing::debug_span!("pipelined", client = %slot.state.id, ?origin);
            slot.op = Some(InFlight {
                origin,
                machine: RequestMachine::new(&req),
                req,
                attempts: 1,
                start: now,
                backoff: slot.state.cfg.retry.initial_backoff,
                ready_at: None,
                stats: OpStats::default(),
                span,
            });
        }
    }

    /// The earliest instant a machine wants to be polled at without a
    /// completion: the next attempt of one backing off, or the instant one
    /// gives up the completions its round misses.
    fn next_poll(&self) -> Option<Nanos> {
        self.slots
            .iter()
            .filter_map(|s| {
                let op = s.op.as_ref()?;
                op.ready_at.or_else(|| op.machine.poll_timeout(&s.state))
            })
            .min()
    }

    /// Polls every machine until it waits; returns whether anything was
    /// posted.
    fn poll_all(&mut self, done: &mut Vec<(Origin, Finished)>) -> bool {
        let mut posted = false;
        for i in 0..self.slots.len() {
            loop {
                let now = self.ep.now();
                let slot = &mut self.slots[i];
                let Some(op) = slot.op.as_mut() else {
                    break;
                };
                if let Some(t) = op.ready_at {
                    if now < t {
                        break;
                    }
                    op.ready_at = None;
                    op.attempts += 1;
                    op.machine = RequestMachine::new(&op.req);
                }
                let _g = op.span.clone().entered();
                match op.machine.poll(&mut slot.state, now) {
                    Poll::Pending => break,
                    Poll::Post(wrs) => {
                        posted = true;
                        for wr in wrs {
                            let wr = self.router.outbound(i, wr);
                            let id = wr.id;
                            if let Err(e) = self.ep.post_issued(wr, now) {
                                let refused = Completion { id, result: Err(e) };
                                if let Some((_, c)) = self.router.inbound(refused) {
                                    op.machine.complete(c);
                                }
                            }
                        }
                    }
                    Poll::Done(r) => {
                        self.router.retire(i);
                        op.stats += op.machine.stats();
                        if let Some(retry_at) =
                            Self::retry_at(&slot.state, op, &r, now, &mut self.rng)
                        {
                            tracing::debug!(error = ?r.as_ref().err(), "attempt failed; backing off");
                            op.ready_at = Some(retry_at);
                            continue;
                        }
                        let op = slot.op.take().expect("in flight");
                        self.total += op.stats;
                        let r = r.map_err(given_up);
                        done.push((
                            op.origin,
                            Finished {
                                tag: op.origin.tag(),
                                result: r,
                                stats: op.stats,
                            },
                        ));
                        break;
                    }
                }
            }
        }
        posted
    }

    /// When a failed attempt is retried (the `Client`'s rules: retryable
    /// errors only, within the attempt limit and the operation timeout, after
    /// an exponential, jittered back-off), or `None` to report it.
    fn retry_at(
        state: &ClientState,
        op: &mut InFlight,
        r: &Result<Response, Error>,
        now: Nanos,
        rng: &mut u64,
    ) -> Option<Nanos> {
        let e = r.as_ref().err()?;
        let policy = state.cfg.retry;
        if !retries(&policy, e, op.attempts, now.since(op.start)) {
            return None;
        }
        let wait = jittered(rng, op.backoff);
        op.backoff = (op.backoff * 2).min(policy.max_backoff);
        Some(now.plus(wait))
    }

    fn deliver(&mut self) {
        for c in self.completions.drain(..) {
            // `None`: its machine gave the round up at the deadline, or
            // finished.
            let Some((i, c)) = self.router.inbound(c) else {
                continue;
            };
            if let Some(op) = self.slots.get_mut(i).and_then(|s| s.op.as_mut()) {
                op.machine.complete(c);
            }
        }
    }
}

/// The results of a batch in request order: an operation that never
/// finished (which `run` does not let happen) may have committed, so it is
/// reported as [`Error::OutcomeUnknown`], never as an error that promises
/// nothing happened.
fn batch_results(results: Vec<Option<Result<Response, Error>>>) -> Vec<Result<Response, Error>> {
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| Err(UnknownOutcome::new(UnknownStep::Unfinished, None).into()))
        })
        .collect()
}

/// A [`Pipeline`] whose operations are futures, for one thread (not
/// `Send`): each future, when polled, makes progress on the whole pipeline
/// without blocking and, until its own operation has finished, asks its
/// executor to poll it again. No particular runtime is needed.
///
/// It owns its pipeline: the caller's blocking and non-blocking faces
/// ([`Pipeline::run`], [`Pipeline::submit`], [`Pipeline::progress`]) cannot
/// reach it any more, so an [`OpFuture`] resolves to its own operation's
/// result and no other.
pub struct AsyncPipeline<E: Endpoint> {
    inner: Rc<RefCell<Shared<E>>>,
}

struct Shared<E: Endpoint> {
    pipeline: Pipeline<E>,
    next_tag: u64,
    results: HashMap<u64, Result<Response, Error>>,
    /// Futures dropped before their operation finished: its result is
    /// discarded when it comes (the operation still runs to its end).
    abandoned: HashSet<u64>,
}

/// [`AsyncPipeline::new`] refused a pipeline that still holds operations of
/// its other faces: their answers would have no future to go to. The
/// pipeline is handed back untouched; drain it with [`Pipeline::progress`]
/// (until [`Pipeline::outstanding`] is 0) and wrap it then.
pub struct BusyPipeline<E: Endpoint> {
    /// The pipeline, as it was.
    pub pipeline: Box<Pipeline<E>>,
}

impl<E: Endpoint> std::fmt::Debug for BusyPipeline<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BusyPipeline")
            .field("outstanding", &self.pipeline.outstanding())
            .finish()
    }
}

impl<E: Endpoint> std::fmt::Display for BusyPipeline<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the pipeline still holds {} operation(s) submitted through its other faces",
            self.pipeline.outstanding()
        )
    }
}

impl<E: Endpoint> std::error::Error for BusyPipeline<E> {}

impl<E: Endpoint> AsyncPipeline<E> {
    /// Wraps `pipeline`, which must hold no operation: one submitted with
    /// [`Pipeline::submit`] and not yet handed out by
    /// [`Pipeline::progress`], or stashed while [`Pipeline::run`] ran, is
    /// refused with [`BusyPipeline`] (the pipeline comes back untouched).
    pub fn new(pipeline: Pipeline<E>) -> Result<AsyncPipeline<E>, BusyPipeline<E>> {
        if pipeline.outstanding() > 0 {
            return Err(BusyPipeline {
                pipeline: Box::new(pipeline),
            });
        }
        Ok(AsyncPipeline::wrap(pipeline))
    }

    fn wrap(pipeline: Pipeline<E>) -> AsyncPipeline<E> {
        AsyncPipeline {
            inner: Rc::new(RefCell::new(Shared {
                pipeline,
                next_tag: 0,
                results: HashMap::new(),
                abandoned: HashSet::new(),
            })),
        }
    }

    /// A fresh pipeline of `depth` operations in flight on `ep`, wrapped
    /// ([`Pipeline::new`], whose errors it returns).
    pub fn open(
        cfg: Arc<Config>,
        node: NodeId,
        first_index: u16,
        depth: u16,
        ep: E,
    ) -> Result<AsyncPipeline<E>, Error> {
        Pipeline::new(cfg, node, first_index, depth, ep).map(AsyncPipeline::wrap)
    }

    /// Starts `req`; the future resolves to its result, and to no other
    /// operation's: a future answers for its own operation only. The result
    /// carries the errors, and the promises, of
    /// [`Client`](crate::Client)'s method of that operation. A dropped
    /// future's operation still runs to its end (it may take effect); its
    /// answer is discarded.
    pub fn call(&self, req: Request) -> OpFuture<E> {
        let mut s = self.inner.borrow_mut();
        let tag = s.next_tag;
        s.next_tag += 1;
        s.pipeline.queue.push_back((Origin::Future(tag), req));
        OpFuture {
            inner: self.inner.clone(),
            tag,
            done: false,
        }
    }

    /// GET `key`.
    pub fn get(&self, key: &[u8]) -> OpFuture<E> {
        self.call(Request::Get(key.to_vec()))
    }

    /// PUT `key` = `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> OpFuture<E> {
        self.call(Request::Put(key.to_vec(), value.to_vec()))
    }

    /// DELETE `key`.
    pub fn delete(&self, key: &[u8]) -> OpFuture<E> {
        self.call(Request::Delete(key.to_vec()))
    }

    /// Operations started and not yet taken by their futures (or, for a
    /// dropped future, not yet finished).
    pub fn outstanding(&self) -> usize {
        let s = self.inner.borrow();
        s.pipeline.unfinished() + s.results.len()
    }
}

impl<E: Endpoint> Shared<E> {
    /// One non-blocking step of the pipeline; files the futures' results.
    fn step(&mut self) {
        let mut done = Vec::new();
        self.pipeline.step(&mut done, Duration::ZERO);
        for (origin, f) in done {
            // Only futures submit to a wrapped pipeline.
            if let Origin::Future(tag) = origin {
                if !self.abandoned.remove(&tag) {
                    self.results.insert(tag, f.result);
                }
            }
        }
    }
}

/// The future of one pipelined operation: it resolves to that operation's
/// result, once.
pub struct OpFuture<E: Endpoint> {
    inner: Rc<RefCell<Shared<E>>>,
    tag: u64,
    done: bool,
}

impl<E: Endpoint> Future for OpFuture<E> {
    type Output = Result<Response, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> TaskPoll<Self::Output> {
        let tag = self.tag;
        let ready = {
            let mut s = self.inner.borrow_mut();
            match s.results.remove(&tag) {
                Some(r) => Some(r),
                None => {
                    s.step();
                    s.results.remove(&tag)
                }
            }
        };
        match ready {
            Some(r) => {
                self.done = true;
                TaskPoll::Ready(r)
            }
            None => {
                cx.waker().wake_by_ref();
                TaskPoll::Pending
            }
        }
    }
}

impl<E: Endpoint> Drop for OpFuture<E> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Ok(mut s) = self.inner.try_borrow_mut() {
            if s.results.remove(&self.tag).is_none() {
                s.abandoned.insert(self.tag);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Outcome;

    #[test]
    fn an_unfinished_batch_operation_is_reported_as_of_unknown_outcome() {
        let r = batch_results(vec![Some(Ok(Response::Put(false))), None]);
        assert_eq!(r[0], Ok(Response::Put(false)));
        assert!(matches!(r[1], Err(Error::OutcomeUnknown(_))), "{:?}", r[1]);
        assert_eq!(Outcome::of(&r[1]), Outcome::Unknown);
    }

    /// Nessie's hash index has no order: a range scan is refused at the
    /// first poll, having posted nothing (so it committed nothing), and the
    /// refusal is not retried.
    #[test]
    fn a_scan_is_refused_before_anything_is_posted() {
        let cfg = Arc::new(crate::config::Config::default());
        let id = ClientId {
            node: NodeId(0),
            index: 0,
        };
        let mut st = ClientState::new(cfg, id).unwrap();
        let mut m = RequestMachine::new(&Request::Scan {
            from: b"a".to_vec(),
            to: None,
            limit: 3,
        });
        assert_eq!(m.poll_timeout(&st), None);
        match m.poll(&mut st, Nanos(1_000_000_000)) {
            Poll::Done(Err(e)) => {
                assert_eq!(e, Error::Unsupported("scan"));
                assert_eq!(e.outcome(), Outcome::NotCommitted);
                assert!(!e.is_retryable());
            }
            other => panic!("a scan must be refused at once, got {other:?}"),
        }
        assert_eq!(m.stats(), OpStats::default());
    }
}
