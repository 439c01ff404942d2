//! Server workers of the server-driven designs: each worker watches the
//! request slots of its node ([`SlotWatch`]), runs each new request through
//! a [`Handler`] (the node's tables) and writes the response into the
//! client's response slot, by RDMA WRITE or, for a client on the same node,
//! by CPU. A worker is a sans-IO machine ([`Worker::run`]: wait for a
//! request, serve it, again), so the same logic runs in the threads of a
//! [`ServerPool`] and in the cluster simulator.
//!
//! Worker `w` of `W` serves the slots of clients `g` with `g % W == w`, so a
//! client's requests are handled in order by one worker. Before it runs a
//! PUT or DELETE, a worker claims it by a loopback compare-and-swap of the
//! client's claim word ([`crate::mailbox`]); a request its client cancelled
//! first is skipped, so a client that gave up waiting can truthfully report
//! that nothing was committed. GETs are not claimed (they commit nothing).
//!
//! The threads of a [`ServerPool`] poll without sleeping (as HERD's do);
//! between empty scans they yield the CPU so that a machine with fewer
//! cores than threads still makes progress. The CPU time they burn is
//! measured ([`ServerPool::cpu_time`]): the papers' energy proxy.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nessie_protocol::{CorruptionKind, Error, Fabric, NodeId, Op, OpStats, RemoteAddr};

use crate::blocking::Driver;
use crate::cpu::thread_cpu_time;
use crate::machine::{cas_previous, Effect, Exec, Ext, Io, OpClass, Resolution, Step};
use crate::mailbox::{
    encode, read_message, split_ctrl, tag_of, tagged_claim_word, MailboxLayout, Request, RpcOp,
    Status, CANCELLED, CLAIMED,
};
use crate::watch::SlotWatch;

/// Executes requests on one node's tables. Shared by that node's workers.
pub trait Handler: Send + Sync + 'static {
    /// The system's own effects the handler's logic asks for.
    type Ext: Ext;

    /// Runs `req` (using `io`, a machine on the node, for the tables'
    /// memory) and returns the status and, for a GET that found its key,
    /// the value.
    fn handle(
        &self,
        io: &Io<Self::Ext>,
        req: Request,
    ) -> impl Future<Output = Result<(Status, Vec<u8>), Error>>;

    /// Performs one of the system's own effects (every driver calls this).
    fn ext(&self, e: <Self::Ext as Ext>::Effect) -> <Self::Ext as Ext>::Resolution;

    /// How long a worker waits for the completion of its claim CAS before
    /// it tries again (the claim word then tells whether the first one
    /// landed). A lost completion holds the worker, and every client whose
    /// slots it serves, this long: [`claim_wait`] of the clients' timeout
    /// for the tables of a configured system, [`CLAIM_WAIT`] by default.
    fn claim_wait(&self) -> Duration {
        CLAIM_WAIT
    }
}

/// The longest a worker waits for its claim CAS's completion (a loopback
/// CAS takes microseconds).
pub const CLAIM_WAIT: Duration = Duration::from_millis(50);

/// How long a worker serving clients whose operation timeout is
/// `op_timeout` waits for its claim CAS's completion: an eighth of that
/// timeout (as a client's cancel CAS), at most [`CLAIM_WAIT`], so that a
/// lost completion costs the waiting clients a fraction of their timeout
/// rather than many timeouts.
pub fn claim_wait(op_timeout: Duration) -> Duration {
    (op_timeout / 8).min(CLAIM_WAIT)
}

/// Counters a node's workers share with whoever runs them.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Test-only fault switch: run PUT and DELETE requests without claiming them.
    pub skip_claims: AtomicBool,
    /// Test-only fault switch: take a request from its slot without checking
    /// its checksum and control word ([`crate::mailbox::read_message`]), so
    /// that a slot two WRITEs landed in word by word is served as if it held
    /// one request.
    pub skip_message_checks: AtomicBool,
    /// Test-only fault switch: a request whose claim word this worker saw
    /// naming it as claimed already is claimed again (and runs again) when
    /// a duplicate of its message lands in its slot
    /// ([`TransportFault::DuplicateWrite`](nessie_protocol::TransportFault::DuplicateWrite)),
    /// as before the swarm drew duplicated WRITEs.
    pub rerun_duplicates: AtomicBool,
    /// Test-only fault switch: claim a request from a claim word of another
    /// incarnation of its client while the request is still in its slot, as
    /// before clients opened their words: a successor's opening (or cancel)
    /// over its predecessor's cancel then lets the predecessor's cancelled
    /// request run (`baselines/tests/outcomes.rs`, a cancel across a
    /// restart).
    pub claim_across_incarnations: AtomicBool,
    /// Requests served.
    pub requests: AtomicU64,
    /// Errors the handler reported (the first 64).
    pub errors: Mutex<Vec<Error>>,
}

impl WorkerCounters {
    fn record(&self, e: Error) {
        let mut errs = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if errs.len() < 64 {
            errs.push(e);
        }
    }
}

/// What a worker's claim of a request decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    /// The worker won: it runs the request.
    Won,
    /// The client cancelled the request, or has moved on past it.
    Lost,
}

/// One server worker's logic (module documentation).
#[derive(Debug)]
pub struct Worker<H: Handler> {
    handler: Arc<H>,
    layout: MailboxLayout,
    watch: Arc<SlotWatch>,
    clients_per_node: u16,
    /// What the worker last knew of each watched slot's claim word.
    claims: Vec<u64>,
    /// Each slot's claim word as this worker found it when it started: a
    /// claim in it is a predecessor's (a worker that crashed, whose claim
    /// CASes have all landed by then, by A2), and the request it names may
    /// have run: this worker never runs it.
    inherited: Vec<u64>,
    counters: Arc<WorkerCounters>,
}

impl<H: Handler> Worker<H> {
    /// Worker `worker` of `workers` serving `layout`'s slots with `handler`.
    pub fn new(
        handler: Arc<H>,
        layout: MailboxLayout,
        worker: u16,
        workers: u16,
        clients_per_node: u16,
        counters: Arc<WorkerCounters>,
    ) -> Worker<H> {
        let watch = Arc::new(layout.watch(worker, workers));
        Worker {
            layout,
            claims: vec![0; watch.slots().len()],
            inherited: vec![0; watch.slots().len()],
            handler,
            watch,
            clients_per_node,
            counters,
        }
    }

    /// The slots it serves.
    pub fn watch(&self) -> &Arc<SlotWatch> {
        &self.watch
    }

    /// Serves requests forever: wait for one, serve it, again. Handler
    /// errors are recorded in the counters (the client then sees no
    /// response and times out).
    pub async fn run(mut self, io: Io<H::Ext>) -> Result<(), Error> {
        self.inherit(&io).await?;
        loop {
            self.serve_next(&io).await?;
        }
    }

    /// Reads the served and claim words of its slots as it starts (it may
    /// replace a worker that crashed): the requests its predecessors took
    /// (never taken again), what it knows of the claim words, and the
    /// claims it inherits (never run).
    pub async fn inherit(&mut self, io: &Io<H::Ext>) -> Result<(), Error> {
        let layout = self.layout;
        for (i, &g) in self.watch.slots().iter().enumerate() {
            let (served, _) = split_ctrl(io.local_word(layout.served_offset(g)).await?);
            if served != 0 {
                self.watch.mark_seen(i, served);
            }
            let word = io.local_word(layout.claim_offset(g)).await?;
            self.claims[i] = word;
            self.inherited[i] = word;
        }
        Ok(())
    }

    /// Records that the request `ctrl` announced in the slot at position
    /// `i` is taken (served or skipped for good): in the slot's served word
    /// first, so that no later worker takes it again, then in the watch.
    async fn taken(&mut self, io: &Io<H::Ext>, i: usize, ctrl: u64) -> Result<(), Error> {
        let g = self.watch.slots()[i];
        let at = self.layout.served_offset(g);
        io.local_write(at, ctrl.to_le_bytes().to_vec()).await?;
        self.watch.mark_seen(i, split_ctrl(ctrl).0);
        Ok(())
    }

    /// Waits for one new request and serves it; whether it was served
    /// (`false`: torn, still landing, or cancelled by its client).
    pub async fn serve_next(&mut self, io: &Io<H::Ext>) -> Result<bool, Error> {
        let (i, ctrl) = io.await_request(&self.watch).await?;
        match self.serve_slot(io, i, ctrl).await {
            Ok(true) => {
                self.counters.requests.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(e) => {
                let g = self.watch.slots()[i];
                tracing::warn!(error = %e, slot = g, "server worker: request failed");
                self.counters.record(e);
                Ok(false)
            }
        }
    }

    /// Claims request `seq` of the client incarnation `tag` in the slot at
    /// position `i` by loopback CAS of its claim word, from an older
    /// decision of the same incarnation, or from a word never used. An error
    /// leaves the request unserved; the next scan tries again and the word
    /// tells whether the earlier CAS landed.
    ///
    /// Lost, never claimed: a request the word already decides, or one older
    /// than the word's decision (the client has moved past it, settling it
    /// first: it cancelled `seq`, then its next request, whose WRITE never
    /// landed), or one of another incarnation than the word's (a
    /// predecessor's request, landing after its successor opened the word:
    /// module docs of [`crate::rpc`]). None of these rests on when the
    /// request landed.
    async fn claim(
        &mut self,
        io: &Io<H::Ext>,
        i: usize,
        seq: u32,
        tag: u32,
    ) -> Result<Claim, Error> {
        let g = self.watch.slots()[i];
        let layout = self.layout;
        let claim_at = layout.claim_offset(g);
        let addr = RemoteAddr::data(io.own(), claim_at);
        let mine = tagged_claim_word(seq, CLAIMED, tag);
        let slot_end = layout.request_end(g);
        if self.inherited[i] == mine {
            // Claimed by a worker before this one, which may have run it
            // (its client learns an unknown outcome): never again.
            return Ok(Claim::Lost);
        }
        let rerun = self.counters.rerun_duplicates.load(Ordering::Relaxed);
        let across = self
            .counters
            .claim_across_incarnations
            .load(Ordering::Relaxed);
        for _ in 0..4 {
            // What the worker last saw of the word. Within one incarnation
            // the word only moves forward, so a decision seen there stands;
            // a word of another incarnation may be stale: read it.
            let mut expect = self.claims[i];
            match claimable(expect, seq, tag, rerun) {
                Claimable::Yes => {}
                Claimable::Decided => return Ok(Claim::Lost),
                Claimable::OtherIncarnation => {
                    expect = io.local_word(claim_at).await?;
                    self.claims[i] = expect;
                    match claimable(expect, seq, tag, rerun) {
                        Claimable::Yes => {}
                        Claimable::OtherIncarnation if across => {
                            // The switch: as before, claim from it while
                            // the request is still in its slot.
                            let (in_slot, _) = split_ctrl(io.local_word(slot_end - 8).await?);
                            if in_slot != seq {
                                return Ok(Claim::Lost);
                            }
                        }
                        _ => return Ok(Claim::Lost),
                    }
                }
            }
            // A loopback CAS takes microseconds; a lost completion must not
            // hold the worker (and the clients it serves) for long.
            let cas = Op::Cas {
                addr,
                expect,
                new: mine,
            };
            let r = io
                .round_within(vec![cas], OpClass::Data, self.handler.claim_wait())
                .await;
            let previous = cas_previous(&r[0])?;
            self.claims[i] = previous;
            if previous == expect {
                self.claims[i] = mine;
                return Ok(Claim::Won);
            }
            let (s, state) = split_ctrl(previous);
            if tag_of(previous) == tag && s == seq {
                return Ok(if state == CANCELLED {
                    Claim::Lost
                } else {
                    Claim::Won // our earlier CAS landed, its completion did not
                });
            }
            // The word moved (the client cancelled or opened meanwhile):
            // judge the request again by it.
        }
        Err(Error::Conflict)
    }

    /// Serves the slot at position `i`, whose control word read `ctrl`, if
    /// it holds a new request; whether it did.
    async fn serve_slot(&mut self, io: &Io<H::Ext>, i: usize, ctrl: u64) -> Result<bool, Error> {
        let g = self.watch.slots()[i];
        let layout = self.layout;
        let (seq, _) = split_ctrl(ctrl);
        let end = layout.request_end(g);
        let verify = !self.counters.skip_message_checks.load(Ordering::Relaxed);
        let Some((msg, _)) = read_message(io, end, layout.slot_bytes, verify).await? else {
            return Ok(false); // torn or still landing: read again on the next scan
        };
        if msg.seq != seq {
            return Ok(false);
        }
        let req = Request::from_message(&msg);
        let mutation = req.as_ref().is_some_and(|r| r.op != RpcOp::Get);
        let claims = !self.counters.skip_claims.load(Ordering::Relaxed);
        if mutation && claims && self.claim(io, i, seq, msg.tag).await? == Claim::Lost {
            self.taken(io, i, ctrl).await?;
            return Ok(false);
        }
        self.taken(io, i, ctrl).await?;
        let (status, value) = match req {
            Some(req) => self.handler.handle(io, req).await?,
            None => (Status::BadRequest, Vec::new()),
        };
        let response = encode(seq, status as u8, &[], &value);
        let client_node = NodeId((g / u32::from(self.clients_per_node)) as u16);
        let resp_end = layout.response_end(g);
        if client_node == io.own() {
            io.local_write(resp_end - response.len() as u64, response)
                .await?;
        } else {
            let addr = MailboxLayout::placed(client_node, resp_end, response.len());
            // HERD's unsignaled response: posted, not awaited.
            io.post(
                vec![Op::Write {
                    addr,
                    data: response,
                }],
                OpClass::Data,
            )
            .await;
        }
        Ok(true)
    }
}

/// Whether request `seq` of incarnation `tag` may be claimed from the claim
/// word `word` ([`Worker::claim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claimable {
    /// From a word never used, or from an older decision of its incarnation.
    Yes,
    /// The word decides it already, or a later request of its incarnation.
    /// (Claimed, it ran: seen again in its slot, it is a duplicate of its
    /// message, a WRITE the fabric executed twice,
    /// `TransportFault::DuplicateWrite`, not a new request.)
    Decided,
    /// The word is of another incarnation of its client.
    OtherIncarnation,
}

/// [`Claimable`] of request `seq` of incarnation `tag` over `word`; with
/// `rerun_duplicates` (the test-only switch), a word naming the request as
/// claimed does not decide it.
fn claimable(word: u64, seq: u32, tag: u32, rerun_duplicates: bool) -> Claimable {
    if word == 0 {
        return Claimable::Yes;
    }
    if tag_of(word) != tag {
        return Claimable::OtherIncarnation;
    }
    let (known, state) = split_ctrl(word);
    let decided = match rerun_duplicates {
        true => known == seq && state == CANCELLED,
        false => known == seq,
    };
    if decided || newer(known, seq) {
        Claimable::Decided
    } else {
        Claimable::Yes
    }
}

/// Whether the claim word's sequence number `s` is of a request the client
/// process sent after `seq` (a process numbers its requests one after
/// another, wrapping and skipping 0; 0 is no decision at all). Only
/// numbers of one process (one incarnation tag) are compared: a restarted
/// client draws a fresh first number.
fn newer(s: u32, seq: u32) -> bool {
    s != 0 && s != seq && (s.wrapping_sub(seq) as i32) > 0
}

/// Counters a pool's threads share.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    paused: AtomicBool,
    /// Workers that have seen the pause and accounted their CPU time.
    parked: AtomicU64,
    cpu_ns: AtomicU64,
    stats: Mutex<OpStats>,
    workers: Arc<WorkerCounters>,
}

/// The server workers of one node, each a thread driving a [`Worker`].
pub struct ServerPool {
    node: NodeId,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for ServerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerPool")
            .field("node", &self.node)
            .field("workers", &self.threads.len())
            .finish_non_exhaustive()
    }
}

impl ServerPool {
    /// Starts `workers` threads on `node` serving the request slots of
    /// `layout` with `handler`. `clients_per_node` maps a slot to its client's
    /// node.
    pub fn start<F, H>(
        fabric: &F,
        node: NodeId,
        workers: u16,
        layout: MailboxLayout,
        clients_per_node: u16,
        handler: Arc<H>,
    ) -> Result<ServerPool, Error>
    where
        F: Fabric,
        F::Endpoint: 'static,
        H: Handler,
    {
        let shared = Arc::new(Shared::default());
        let workers = workers.max(1);
        let mut threads = Vec::new();
        for w in 0..workers {
            let ep = fabric.open(node)?;
            let shared = shared.clone();
            let worker = Worker::new(
                handler.clone(),
                layout,
                w,
                workers,
                clients_per_node,
                shared.workers.clone(),
            );
            let t = std::thread::Builder::new()
                .name(format!("server-{}-{w}", node.0))
                .spawn(move || run_thread(Driver::new(ep), worker, &shared))
                .map_err(|e| {
                    Error::corrupt(
                        CorruptionKind::Resource,
                        format!("cannot spawn a server worker: {e}"),
                    )
                })?;
            threads.push(t);
        }
        Ok(ServerPool {
            node,
            shared,
            threads,
        })
    }

    /// CPU time the workers have consumed (updated every few milliseconds
    /// while they run; exact once they are paused or stopped).
    pub fn cpu_time(&self) -> Duration {
        Duration::from_nanos(self.shared.cpu_ns.load(Ordering::Relaxed))
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.shared.workers.requests.load(Ordering::Relaxed)
    }

    /// Fabric work of the claims and responses so far.
    pub fn stats(&self) -> OpStats {
        *self.shared.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Errors the handler reported (the client then saw no response and timed out).
    pub fn errors(&self) -> Vec<Error> {
        self.shared
            .workers
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Pauses the workers: they stop polling and sleep (1 ms naps) until
    /// [`ServerPool::resume`], so that a paused system burns no CPU while
    /// another system is measured. Requests sent meanwhile wait. Returns once
    /// every worker has parked (or after 1 s), so that [`ServerPool::cpu_time`]
    /// read after it includes all the CPU burnt before the pause.
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
        let all = self.threads.len() as u64;
        let start = std::time::Instant::now();
        while self.shared.parked.load(Ordering::SeqCst) < all
            && start.elapsed() < Duration::from_secs(1)
        {
            std::thread::yield_now();
        }
    }

    /// Test-only fault switch: when on, workers run PUT and DELETE requests
    /// without claiming them, so a request its client cancelled still runs
    /// (the behaviour before claim words). It exists to show that the tests
    /// catch a `Timeout` that committed after all.
    pub fn set_skip_claims(&self, on: bool) {
        self.shared.workers.skip_claims.store(on, Ordering::SeqCst);
    }

    /// Test-only fault switch
    /// ([`WorkerCounters::claim_across_incarnations`]).
    pub fn set_claim_across_incarnations(&self, on: bool) {
        self.shared
            .workers
            .claim_across_incarnations
            .store(on, Ordering::SeqCst);
    }

    /// Resumes polling after [`ServerPool::pause`].
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::SeqCst);
    }

    /// Stops the workers and waits for them.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ServerPool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One worker thread: drives the worker's machine, and while the machine
/// waits for requests, scans its slots, pauses, stops and accounts CPU.
fn run_thread<E, H>(mut driver: Driver<E>, worker: Worker<H>, shared: &Shared)
where
    E: nessie_protocol::Endpoint,
    H: Handler,
{
    let handler = worker.handler.clone();
    let (mut exec, io) = Exec::<H::Ext>::new(driver.endpoint().node(), 1);
    io.set_limit(Some(Duration::from_secs(5)));
    let mut fut = pin!(worker.run(io));
    let mut ext = |e| handler.ext(e);
    let mut cpu_mark = thread_cpu_time();
    let mut scans = 0u64;
    let mut parked = false;
    let mut cursor = 0;
    let account = |mark: &mut Duration| {
        let now = thread_cpu_time();
        shared
            .cpu_ns
            .fetch_add((now - *mark).as_nanos() as u64, Ordering::Relaxed);
        *mark = now;
    };
    'run: while !shared.stop.load(Ordering::Relaxed) {
        let now = driver.now();
        match exec.poll(fut.as_mut(), now) {
            Step::Done(r) => {
                if let Err(e) = r {
                    shared.workers.record(e);
                }
                break;
            }
            Step::Post(wrs) => driver.post(&mut exec, wrs, now),
            Step::PostChain(chain) => driver.post_chain(&mut exec, chain, now),
            Step::PostDetached(wrs) => driver.post_detached(&mut exec, wrs, now),
            Step::Pending => driver.wait(&mut exec),
            Step::Effect(Effect::AwaitRequest(watch)) => {
                let served = exec.take_stats();
                if served != OpStats::default() {
                    let mut s = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
                    *s += served;
                }
                loop {
                    if shared.stop.load(Ordering::Relaxed) {
                        break 'run;
                    }
                    if shared.paused.load(Ordering::Relaxed) {
                        if !parked {
                            // Account the CPU up to the pause before
                            // acknowledging it, so that it is charged to
                            // the slice that ran.
                            account(&mut cpu_mark);
                            parked = true;
                            shared.parked.fetch_add(1, Ordering::SeqCst);
                        }
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    if parked {
                        parked = false;
                        shared.parked.fetch_sub(1, Ordering::SeqCst);
                        cpu_mark = thread_cpu_time();
                    }
                    let found = driver.scan(&watch, &mut cursor);
                    scans += 1;
                    if scans.is_multiple_of(256) {
                        account(&mut cpu_mark);
                    }
                    if let Some((index, ctrl)) = found {
                        exec.resolve(Resolution::Request { index, ctrl });
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            Step::Effect(e) => {
                let r = driver.perform(e, &mut ext);
                exec.resolve(r);
            }
        }
    }
    if !parked {
        account(&mut cpu_mark);
    }
}

#[cfg(test)]
mod tests {
    //! The workers themselves are tested over NessieSD's tables, in
    //! `nessie-baselines` (`worker_tests.rs`).

    use super::*;

    #[test]
    fn sequence_numbers_wrap_and_skip_zero() {
        // 1 comes after u32::MAX.
        assert!(newer(1, u32::MAX) && !newer(u32::MAX, 1));
        assert!(!newer(0, 5) && !newer(5, 5) && newer(6, 5) && !newer(4, 5));
    }
}
