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
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nessie_protocol::{Error, Fabric, NodeId, Op, OpStats, RemoteAddr};

use crate::blocking::Driver;
use crate::cpu::thread_cpu_time;
use crate::machine::{cas_previous, Effect, Exec, Ext, Io, OpClass, Resolution, Step};
use crate::mailbox::{
    encode, read_message, split_ctrl, tag_of, tagged_claim_word, MailboxLayout, Request, RpcOp,
    Status, CANCELLED, CLAIMED,
};

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

/// The request slots one worker serves, and the sequence number it last
/// served in each. Shared by the worker's logic (which marks requests
/// served) and its driver (which looks for new ones).
#[derive(Debug)]
pub struct SlotWatch {
    layout: MailboxLayout,
    slots: Vec<u32>,
    seen: Vec<AtomicU32>,
}

impl SlotWatch {
    /// The slots of worker `worker` of `workers` under `layout`.
    pub fn new(layout: MailboxLayout, worker: u16, workers: u16) -> SlotWatch {
        let workers = u32::from(workers.max(1));
        let slots: Vec<u32> = (0..layout.clients_total)
            .filter(|g| g % workers == u32::from(worker))
            .collect();
        SlotWatch {
            layout,
            seen: slots.iter().map(|_| AtomicU32::new(0)).collect(),
            slots,
        }
    }

    /// The slots (global client numbers), in scan order.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// The slot layout.
    pub fn layout(&self) -> &MailboxLayout {
        &self.layout
    }

    /// Offset of the control word of the slot at position `i`.
    pub fn ctrl_offset(&self, i: usize) -> u64 {
        self.layout.request_end(self.slots[i]) - 8
    }

    /// The position of global slot `g` in this watch, if the worker serves it.
    pub fn position(&self, g: u32) -> Option<usize> {
        self.slots.binary_search(&g).ok()
    }

    /// Whether control word `ctrl` of the slot at position `i` announces a
    /// request the worker has not served.
    pub fn is_new(&self, i: usize, ctrl: u64) -> bool {
        let (seq, _) = split_ctrl(ctrl);
        seq != 0 && seq != self.seen[i].load(Ordering::Relaxed)
    }

    /// Records that request `seq` of the slot at position `i` was served
    /// (or skipped for good).
    pub fn mark_seen(&self, i: usize, seq: u32) {
        self.seen[i].store(seq, Ordering::Relaxed);
    }
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
        let watch = Arc::new(SlotWatch::new(layout, worker, workers));
        Worker {
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
        let layout = *self.watch.layout();
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
        let at = self.watch.layout().served_offset(g);
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
    /// position `i` by loopback CAS of
    /// its claim word, from whatever older decision the word holds. An
    /// error leaves the request unserved; the next scan tries again and the
    /// word tells whether the earlier CAS landed.
    ///
    /// A word that holds the decision of a request of the same incarnation
    /// *newer* than `seq` means the client has moved past `seq`, settling it
    /// first: `seq` is lost, even if it is still in the slot (the client
    /// cancelled `seq`, then cancelled its next request, whose request WRITE
    /// never landed: the word no longer says `seq` was cancelled, but the
    /// slot still holds it).
    async fn claim(
        &mut self,
        io: &Io<H::Ext>,
        i: usize,
        seq: u32,
        tag: u32,
    ) -> Result<Claim, Error> {
        let g = self.watch.slots()[i];
        let layout = *self.watch.layout();
        let addr = RemoteAddr::data(io.own(), layout.claim_offset(g));
        let mine = tagged_claim_word(seq, CLAIMED, tag);
        let slot_end = layout.request_end(g);
        if self.inherited[i] == mine {
            // Claimed by a worker before this one, which may have run it
            // (its client learns an unknown outcome): never again.
            return Ok(Claim::Lost);
        }
        for _ in 0..4 {
            // What the worker last saw of the word: if it still holds that,
            // nothing newer happened (a restarted client's first request is
            // claimed from its predecessor's last decision).
            let expect = self.claims[i];
            let (known, state) = split_ctrl(expect);
            let decided = match self.counters.rerun_duplicates.load(Ordering::Relaxed) {
                true => known == seq && state == CANCELLED,
                false => known == seq,
            };
            if tag_of(expect) == tag && (decided || newer(known, seq)) {
                // The word was seen to decide this request (or a newer one)
                // already: never claim from it. Claimed, it was this
                // worker's own claim, and the request ran: seen again in
                // its slot, it is a duplicate of its message (a WRITE the
                // fabric executed twice, `TransportFault::DuplicateWrite`,
                // landing after a later GET of the client), not a new one.
                return Ok(Claim::Lost);
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
            let same_process = tag_of(previous) == tag;
            if same_process && s == seq {
                return Ok(if state == CANCELLED {
                    Claim::Lost
                } else {
                    Claim::Won // our earlier CAS landed, its completion did not
                });
            }
            if same_process && newer(s, seq) {
                return Ok(Claim::Lost);
            }
            // The word is older than `seq` (the client cancelled requests this
            // worker never saw), or of another process of the client: a
            // restarted client's request over its predecessor's word, or a
            // predecessor's request still in the slot under its successor's
            // word. (Open: if the predecessor had cancelled that request and
            // the successor's cancel of a request that never landed here
            // overwrote the word, the cancelled request runs; see
            // docs/baselines.md.) If `seq` is no longer in the slot the
            // client has moved on (so it settled `seq` already); otherwise
            // try again from the word.
            let (in_slot, _) = split_ctrl(io.local_word(slot_end - 8).await?);
            if in_slot != seq {
                return Ok(Claim::Lost);
            }
        }
        Err(Error::Conflict)
    }

    /// Serves the slot at position `i`, whose control word read `ctrl`, if
    /// it holds a new request; whether it did.
    async fn serve_slot(&mut self, io: &Io<H::Ext>, i: usize, ctrl: u64) -> Result<bool, Error> {
        let g = self.watch.slots()[i];
        let layout = *self.watch.layout();
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
                .map_err(|e| Error::Corrupt(format!("cannot spawn a server worker: {e}")))?;
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
        match exec.poll(fut.as_mut(), driver.now()) {
            Step::Done(r) => {
                if let Err(e) = r {
                    shared.workers.record(e);
                }
                break;
            }
            Step::Post(wrs) => driver.post(&mut exec, wrs),
            Step::PostDetached(wrs) => driver.post_detached(&mut exec, wrs),
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
    use super::*;
    use crate::coupled::{CoupledLayout, CoupledTable};
    use crate::machine::{Machine, Plain};
    use crate::mailbox::claim_word;
    use nessie_protocol::{Completion, Config, Nanos, OpOutput};

    /// One node, one client (slot 0), one worker, an operation timeout of
    /// 4 ms.
    fn setup() -> (Config, CoupledLayout, Vec<u8>) {
        let mut cfg = Config {
            nodes: 1,
            index_slots_per_node: 8,
            dtes_per_node: 8,
            clients_per_node: 1,
            max_key_len: 8,
            max_value_len: 8,
            ..Config::default()
        };
        cfg.retry.op_timeout = Duration::from_millis(4);
        let layout = CoupledLayout::new(&cfg, cfg.filter_bits);
        let mem = vec![0u8; layout.region_bytes() as usize];
        (cfg, layout, mem)
    }

    /// Puts client 0's PUT number `seq` in its request slot; its control word.
    fn put_request(layout: &CoupledLayout, mem: &mut [u8], seq: u32) -> u64 {
        request(layout, mem, seq, RpcOp::Put)
    }

    /// Puts client 0's request number `seq` (`op` of "key") in its request
    /// slot; its control word.
    fn request(layout: &CoupledLayout, mem: &mut [u8], seq: u32, op: RpcOp) -> u64 {
        let value: &[u8] = if op == RpcOp::Put { b"value" } else { b"" };
        let msg = encode(seq, op as u8, b"key", value);
        let end = layout.mailbox.request_end(0) as usize;
        mem[end - msg.len()..end].copy_from_slice(&msg);
        crate::bytes::word(mem, end - 8)
    }

    /// What a worker did with the requests it was handed.
    #[derive(Debug, Default)]
    struct Served {
        /// Each claim CAS: when it was posted, its deadline, what it
        /// expected.
        claims: Vec<(Nanos, Nanos, u64)>,
        /// The requests it answered.
        answered: Vec<u32>,
    }

    /// Runs one worker on the coupled tables of `cfg` over `mem` (its
    /// node's data region), handing it client 0's PUTs `hand` in order (each
    /// written into the slot first), until it waits for a request with none
    /// left. CPU accesses execute at once; claim CASes execute on `mem`, the
    /// first one's completion lost if `lose_first_claim`.
    fn serve(
        cfg: &Config,
        layout: CoupledLayout,
        mem: &mut [u8],
        hand: &[u32],
        lose_first_claim: bool,
    ) -> Served {
        let puts: Vec<(u32, RpcOp)> = hand.iter().map(|&seq| (seq, RpcOp::Put)).collect();
        serve_requests(cfg, layout, mem, &puts, lose_first_claim, false)
    }

    /// [`serve`], handing client 0's requests `hand` (any operations), with
    /// the `rerun-duplicates` switch if `rerun_duplicates`.
    fn serve_requests(
        cfg: &Config,
        layout: CoupledLayout,
        mem: &mut [u8],
        hand: &[(u32, RpcOp)],
        lose_first_claim: bool,
        rerun_duplicates: bool,
    ) -> Served {
        let table = Arc::new(CoupledTable::new(layout, NodeId(0), cfg));
        let counters = Arc::new(WorkerCounters::default());
        counters
            .rerun_duplicates
            .store(rerun_duplicates, Ordering::Relaxed);
        let worker = Worker::new(table, layout.mailbox, 0, 1, 1, counters);
        let mut m: Machine<(), Plain> = Machine::new(NodeId(0), 1, move |io| worker.run(io));
        let response_end = layout.mailbox.response_end(0);
        let mut now = Nanos(1_000_000);
        let mut out = Served::default();
        let mut hand = hand.iter();
        for _ in 0..1000 {
            match m.poll(now) {
                Step::Effect(Effect::AwaitRequest(w)) => {
                    // A driver hands a worker only requests its watch says
                    // it has not taken.
                    let index = w.position(0).expect("the worker serves slot 0");
                    let next = hand.find_map(|&(seq, op)| {
                        let ctrl = request(&layout, mem, seq, op);
                        w.is_new(index, ctrl).then_some(ctrl)
                    });
                    let Some(ctrl) = next else {
                        return out;
                    };
                    m.resolve(Resolution::Request { index, ctrl });
                }
                Step::Effect(Effect::AwaitLock(_)) => m.resolve(Resolution::Waited),
                Step::Effect(e) => panic!("unexpected effect {e:?}"),
                Step::Post(wrs) | Step::PostDetached(wrs) => {
                    for wr in wrs {
                        let result = match &wr.op {
                            Op::LocalRead { offset, len } => {
                                let o = *offset as usize;
                                OpOutput::Read(mem[o..o + *len as usize].to_vec())
                            }
                            Op::LocalWrite { offset, data } => {
                                let o = *offset as usize;
                                mem[o..o + data.len()].copy_from_slice(data);
                                if offset + data.len() as u64 == response_end {
                                    let ctrl = crate::bytes::word(data, data.len() - 8);
                                    out.answered.push(split_ctrl(ctrl).0);
                                }
                                OpOutput::Written
                            }
                            Op::Cas { addr, expect, new } => {
                                let deadline = m.exec().deadline().expect("a claim's deadline");
                                out.claims.push((now, deadline, *expect));
                                let at = addr.offset as usize;
                                let previous = crate::bytes::word(mem, at);
                                if previous == *expect {
                                    mem[at..at + 8].copy_from_slice(&new.to_le_bytes());
                                }
                                if lose_first_claim && out.claims.len() == 1 {
                                    now = deadline.plus(Duration::from_nanos(1));
                                    continue;
                                }
                                OpOutput::Cas { previous }
                            }
                            other => panic!("unexpected {other:?}"),
                        };
                        m.complete(Completion {
                            id: wr.id,
                            result: Ok(result),
                        });
                    }
                }
                Step::Pending => now = now.plus(Duration::from_nanos(100)),
                Step::Done(r) => panic!("the worker ended: {r:?}"),
            }
        }
        panic!("the worker never waited for another request: {out:?}")
    }

    fn claim_word_of(layout: &CoupledLayout, mem: &[u8]) -> u64 {
        crate::bytes::word(mem, layout.mailbox.claim_offset(0) as usize)
    }

    /// Regression (a liveness bug the fault swarm found): a worker whose
    /// claim CAS completion was lost waited a fixed 50 ms before trying
    /// again, whatever the clients' timeout. With the swarm's operation
    /// timeouts of 1-80 ms, one lost completion made the worker, and every
    /// client it serves, unavailable for up to 40 timeouts, and the lone
    /// writer after the faults found keys it could not write. The wait is
    /// now an eighth of the clients' timeout (at most 50 ms): the worker
    /// claims again then, and the word tells it the first CAS landed.
    #[test]
    fn a_lost_claim_completion_holds_the_worker_an_eighth_of_the_timeout() {
        let (cfg, layout, mut mem) = setup();
        assert_eq!(claim_wait(cfg.retry.op_timeout), Duration::from_micros(500));
        assert_eq!(claim_wait(Duration::from_secs(10)), CLAIM_WAIT);
        // The first claim fails (its completion is lost): the worker is
        // handed the request again.
        let served = serve(&cfg, layout, &mut mem, &[5, 5], true);
        assert_eq!(served.claims.len(), 2, "{served:?}");
        let (posted, deadline, _) = served.claims[0];
        assert_eq!(deadline.since(posted), Duration::from_micros(500));
        // The second claim finds the first one's mark and serves the PUT.
        assert_eq!(served.answered, [5], "{served:?}");
        assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
    }

    /// Regression (a safety bug the fault swarm found, Pilaf seed 1,128):
    /// the client cancelled its PUT 5 (claim word `5 | CANCELLED`), then
    /// sent PUT 6, whose request WRITE was refused at its landing deadline
    /// (it never landed: the slot still holds PUT 5), and cancelled it too
    /// (`6 | CANCELLED`). A late worker then found PUT 5 in the slot and a
    /// word that is not PUT 5's, took the word for an older decision and
    /// claimed PUT 5 from it: a PUT its client reported as not committed
    /// committed. A word newer than the request means the client settled
    /// the request already: the worker skips it.
    #[test]
    fn a_request_the_client_cancelled_before_a_newer_cancel_never_runs() {
        let (cfg, layout, mut mem) = setup();
        let at = layout.mailbox.claim_offset(0) as usize;
        mem[at..at + 8].copy_from_slice(&claim_word(6, CANCELLED).to_le_bytes());
        let served = serve(&cfg, layout, &mut mem, &[5], false);
        assert!(served.answered.is_empty(), "{served:?}");
        assert_eq!(claim_word_of(&layout, &mem), claim_word(6, CANCELLED));
        // Nothing was written: the key's candidates are all empty.
        for slot in layout.candidates(b"key") {
            let ite = crate::bytes::word(&mem, layout.index_offset(slot) as usize);
            assert_eq!(ite, 0, "the cancelled PUT was stored");
        }
        // An older decision in the word (the client's PUT 4, settled before
        // it sent PUT 5) is claimed from, and the PUT runs. (Each scenario
        // starts with no request taken from the slot.)
        let served_at = layout.mailbox.served_offset(0) as usize;
        mem[served_at..served_at + 8].copy_from_slice(&0u64.to_le_bytes());
        mem[at..at + 8].copy_from_slice(&claim_word(4, CANCELLED).to_le_bytes());
        let served = serve(&cfg, layout, &mut mem, &[5], false);
        assert_eq!(served.answered, [5], "{served:?}");
        assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
        // A word of another process of the client (a restarted client: its
        // own tag) says nothing about the order: the request is claimed,
        // however its number compares.
        mem[served_at..served_at + 8].copy_from_slice(&0u64.to_le_bytes());
        mem[at..at + 8].copy_from_slice(&tagged_claim_word(6, CANCELLED, 7).to_le_bytes());
        let served = serve(&cfg, layout, &mut mem, &[5], false);
        assert_eq!(served.answered, [5], "{served:?}");
        assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
        // Sequence numbers wrap (and skip 0): 1 comes after u32::MAX.
        assert!(newer(1, u32::MAX) && !newer(u32::MAX, 1));
        assert!(!newer(0, 5) && !newer(5, 5) && newer(6, 5) && !newer(4, 5));
    }

    /// Regression (a safety bug the fault swarm found as soon as it drew
    /// duplicated WRITEs, `TransportFault::DuplicateWrite`, in every
    /// server-driven system): a worker claimed and ran client 0's PUT 5,
    /// then served its GET 6 (a GET is not claimed), and then a copy of
    /// PUT 5's request WRITE, held in the fabric, landed in the slot again.
    /// The slot's control word differs from GET 6's, so the worker took it
    /// for a new request, and the claim word, which it had itself set to
    /// `5 | CLAIMED`, did not stop it: it claimed PUT 5 from that word and
    /// ran it a second time, after whatever writes of the key came since. A
    /// word that names the request as decided, claimed or cancelled, means
    /// the request was settled: never claimed again.
    /// (`rerun-duplicates` reinstates the bug.)
    #[test]
    fn a_duplicate_of_a_put_after_the_clients_next_get_never_runs_again() {
        let hand = [(5, RpcOp::Put), (6, RpcOp::Get), (5, RpcOp::Put)];
        let (cfg, layout, mut mem) = setup();
        let served = serve_requests(&cfg, layout, &mut mem, &hand, false, false);
        assert_eq!(served.answered, [5, 6], "{served:?}");
        assert_eq!(served.claims.len(), 1, "{served:?}");
        assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
        // With the switch, the copy is claimed from the worker's own claim
        // and PUT 5 runs (and is answered) twice.
        let (cfg, layout, mut mem) = setup();
        let served = serve_requests(&cfg, layout, &mut mem, &hand, false, true);
        assert_eq!(served.answered, [5, 6, 5], "{served:?}");
    }

    /// Regression (a safety bug the fault swarm found once it crashed server
    /// workers, all three systems at seed 2): a worker claimed a PUT, ran
    /// it, answered and crashed; its replacement, which knows nothing of
    /// what its predecessor served, found the PUT still in the slot, read
    /// the claim word `seq | CLAIMED`, took it for its own earlier claim
    /// whose completion was lost, and ran the PUT a second time, after
    /// later writes of the key. A claim word names the request, not the
    /// worker: a worker reads its slots' claim words when it starts, and
    /// never runs a request claimed before (by A2 its predecessor's claim
    /// CASes have all landed by then), even when a claim CAS of its own
    /// for that request failed first (NessieSD seed 18: it could not tell
    /// whose claim it then found).
    #[test]
    fn a_replacement_worker_never_reruns_a_request_its_predecessor_claimed() {
        let (cfg, layout, mut mem) = setup();
        let at = layout.mailbox.claim_offset(0) as usize;
        mem[at..at + 8].copy_from_slice(&claim_word(5, CLAIMED).to_le_bytes());
        let served = serve(&cfg, layout, &mut mem, &[5, 5], false);
        assert!(served.answered.is_empty(), "{served:?}");
        assert!(served.claims.is_empty(), "{served:?}");
        assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
        // The client's next PUT is claimed and runs.
        let served = serve(&cfg, layout, &mut mem, &[5, 6], false);
        assert_eq!(served.answered, [6], "{served:?}");
    }

    /// Regression (a safety bug the fault swarm found once it crashed server
    /// workers, NessieSD seed 104): a worker served client 0's PUT 5 (which
    /// stays in the slot), the client crashed, and its new process cancelled
    /// a request whose WRITE never reached this node, overwriting the claim
    /// word with its own decision. A worker that then replaced a crashed
    /// one knew neither that PUT 5 was served nor that it was claimed, and
    /// ran it again. Workers record each request they take in the slot's
    /// served word, which a replacement reads when it starts.
    #[test]
    fn a_replacement_worker_never_takes_a_request_its_predecessor_took() {
        let (cfg, layout, mut mem) = setup();
        let served = serve(&cfg, layout, &mut mem, &[5], false);
        assert_eq!(served.answered, [5], "{served:?}");
        let ctrl = put_request(&layout, &mut mem, 5);
        let at = layout.mailbox.served_offset(0) as usize;
        assert_eq!(crate::bytes::word(&mem, at), ctrl);
        // The client's next process (its own tag) cancels a request of its
        // own over the word.
        let claim = layout.mailbox.claim_offset(0) as usize;
        mem[claim..claim + 8].copy_from_slice(&tagged_claim_word(9, CANCELLED, 7).to_le_bytes());
        let served = serve(&cfg, layout, &mut mem, &[5], false);
        assert!(served.answered.is_empty(), "{served:?}");
        assert!(served.claims.is_empty(), "{served:?}");
        // Without the served word, the replacement runs PUT 5 again.
        mem[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
        let served = serve(&cfg, layout, &mut mem, &[5], false);
        assert_eq!(served.answered, [5], "{served:?}");
    }

    /// Regression (a safety bug the fault swarm found, Pilaf seed 5,032;
    /// older than the claim words' tags): the client cancelled its PUT 5 and
    /// then its DELETE 6 (both request WRITEs failed after landing). A late
    /// worker, handed PUT 5, learnt the word `6 | CANCELLED` from its failed
    /// claim and skipped PUT 5; handed DELETE 6 next, it claimed "from what
    /// it last saw", `6 | CANCELLED` itself, and won: a DELETE its client
    /// reported as not committed ran. A word the worker knows to decide the
    /// request (or a newer one) is not claimed from.
    #[test]
    fn a_worker_never_claims_from_the_cancel_of_the_request_itself() {
        let (cfg, layout, mut mem) = setup();
        let at = layout.mailbox.claim_offset(0) as usize;
        mem[at..at + 8].copy_from_slice(&claim_word(6, CANCELLED).to_le_bytes());
        let served = serve(&cfg, layout, &mut mem, &[5, 6], false);
        assert!(served.answered.is_empty(), "{served:?}");
        assert_eq!(claim_word_of(&layout, &mem), claim_word(6, CANCELLED));
        // Its next request, 7, is claimed from the cancel of 6.
        let served = serve(&cfg, layout, &mut mem, &[5, 6, 7], false);
        assert_eq!(served.answered, [7], "{served:?}");
        assert_eq!(claim_word_of(&layout, &mem), claim_word(7, CLAIMED));
    }
}
