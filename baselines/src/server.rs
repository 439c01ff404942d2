//! Server workers of the server-driven designs: threads on a node that poll
//! the request slots of that node, run each request through a [`Handler`]
//! (the node's tables) and write the response into the client's response
//! slot, by RDMA WRITE or, for a client on the same node, by CPU.
//!
//! Worker `w` of `W` serves the slots of clients `g` with `g % W == w`, so a
//! client's requests are handled in order by one worker. Before it runs a
//! PUT or DELETE, a worker claims it by a loopback compare-and-swap of the
//! client's claim word ([`crate::mailbox`]); a request its client cancelled
//! first is skipped, so a client that gave up waiting can truthfully report
//! that nothing was committed. GETs are not claimed (they commit nothing). Workers poll without
//! sleeping (as HERD's do); between empty scans they yield the CPU so that a
//! machine with fewer cores than threads still makes progress. The CPU time
//! they burn is measured ([`ServerPool::cpu_time`]): the papers' energy proxy.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nessie_protocol::{Endpoint, Error, Fabric, NodeId, OpStats};

use crate::cpu::thread_cpu_time;
use crate::io::Io;
use crate::mailbox::{
    claim_word, encode, split_ctrl, MailboxLayout, Request, RpcOp, Status, CANCELLED, CLAIMED,
};

/// Executes requests on one node's tables. Shared by that node's workers.
pub trait Handler<E: Endpoint>: Send + Sync {
    /// Runs `req` (using `io`, an endpoint on the node, for the tables' memory)
    /// and returns the status and, for a GET that found its key, the value.
    fn handle(&self, io: &mut Io<E>, req: &Request) -> Result<(Status, Vec<u8>), Error>;
}

/// Counters a pool's workers share.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    paused: AtomicBool,
    /// Test-only fault switch: run PUT and DELETE requests without claiming them.
    skip_claims: AtomicBool,
    /// Workers that have seen the pause and accounted their CPU time.
    parked: AtomicU64,
    cpu_ns: AtomicU64,
    requests: AtomicU64,
    stats: Mutex<OpStats>,
    errors: Mutex<Vec<Error>>,
}

/// The server workers of one node.
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
        H: Handler<F::Endpoint> + ?Sized + 'static,
    {
        let shared = Arc::new(Shared::default());
        let workers = workers.max(1);
        let mut threads = Vec::new();
        for w in 0..workers {
            let ep = fabric.open(node)?;
            let shared = shared.clone();
            let handler = handler.clone();
            let t = std::thread::Builder::new()
                .name(format!("server-{}-{w}", node.0))
                .spawn(move || {
                    let mut worker = Worker {
                        io: Io::new(ep, Duration::from_secs(5)),
                        layout,
                        clients_per_node,
                        slots: (0..layout.clients_total)
                            .filter(|g| g % u32::from(workers) == u32::from(w))
                            .collect(),
                        seen: vec![0; layout.clients_total as usize],
                        claims: vec![0; layout.clients_total as usize],
                        stats: OpStats::default(),
                    };
                    worker.run(&*handler, &shared);
                })
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
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// Fabric work of the responses written so far.
    pub fn stats(&self) -> OpStats {
        *self.shared.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Errors the handler reported (the client then saw no response and timed out).
    pub fn errors(&self) -> Vec<Error> {
        self.shared
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
        self.shared.skip_claims.store(on, Ordering::SeqCst);
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

struct Worker<E: Endpoint> {
    io: Io<E>,
    layout: MailboxLayout,
    clients_per_node: u16,
    slots: Vec<u32>,
    seen: Vec<u32>,
    /// What the worker last knew of each slot's claim word.
    claims: Vec<u64>,
    stats: OpStats,
}

/// What a worker's claim of a request decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    /// The worker won: it runs the request.
    Won,
    /// The client cancelled the request, or has moved on past it.
    Lost,
}

impl<E: Endpoint> Worker<E> {
    fn run<H: Handler<E> + ?Sized>(&mut self, handler: &H, shared: &Shared) {
        let mut cpu_mark = thread_cpu_time();
        let mut scans = 0u64;
        let mut parked = false;
        while !shared.stop.load(Ordering::Relaxed) {
            if shared.paused.load(Ordering::Relaxed) {
                if !parked {
                    // Account the CPU up to the pause before acknowledging
                    // it, so that it is charged to the slice that ran.
                    let now = thread_cpu_time();
                    shared
                        .cpu_ns
                        .fetch_add((now - cpu_mark).as_nanos() as u64, Ordering::Relaxed);
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
            let mut served = 0;
            for i in 0..self.slots.len() {
                let g = self.slots[i];
                let claims = !shared.skip_claims.load(Ordering::Relaxed);
                match self.serve_slot(g, handler, claims) {
                    Ok(true) => served += 1,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, slot = g, "server worker: request failed");
                        let mut errs = shared.errors.lock().unwrap_or_else(|e| e.into_inner());
                        if errs.len() < 64 {
                            errs.push(e);
                        }
                    }
                }
            }
            if served > 0 {
                shared.requests.fetch_add(served, Ordering::Relaxed);
                let mut s = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
                *s += std::mem::take(&mut self.stats);
            } else {
                std::thread::yield_now();
            }
            scans += 1;
            if scans.is_multiple_of(256) {
                let now = thread_cpu_time();
                shared
                    .cpu_ns
                    .fetch_add((now - cpu_mark).as_nanos() as u64, Ordering::Relaxed);
                cpu_mark = now;
            }
        }
        if !parked {
            let now = thread_cpu_time();
            shared
                .cpu_ns
                .fetch_add((now - cpu_mark).as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Claims request `seq` of slot `g` by loopback CAS of its claim word,
    /// from whatever older decision the word holds. An error leaves the
    /// request unserved; the next scan tries again and the word tells
    /// whether the earlier CAS landed.
    fn claim(&mut self, g: u32, seq: u32) -> Result<Claim, Error> {
        let addr = nessie_protocol::RemoteAddr::data(self.io.node(), self.layout.claim_offset(g));
        let mine = claim_word(seq, CLAIMED);
        let slot_end = self.layout.request_end(g);
        for _ in 0..4 {
            let expect = self.claims[g as usize];
            // A loopback CAS takes microseconds; a lost completion must not
            // hold the worker for long.
            let limit = Duration::from_millis(50);
            let previous = self
                .io
                .cas(addr, expect, mine, &mut self.stats, limit)
                .map_err(|e| e.error)?;
            self.claims[g as usize] = previous;
            if previous == expect {
                self.claims[g as usize] = mine;
                return Ok(Claim::Won);
            }
            let (s, state) = split_ctrl(previous);
            if s == seq {
                return Ok(if state == CANCELLED {
                    Claim::Lost
                } else {
                    Claim::Won // our earlier CAS landed, its completion did not
                });
            }
            // The client cancelled requests this worker never saw. If `seq`
            // is no longer in the slot the client has moved on (so it
            // settled `seq` already); otherwise the word is older than
            // `seq`: try again from it.
            let (in_slot, _) = split_ctrl(self.io.local_word(slot_end - 8)?);
            if in_slot != seq {
                return Ok(Claim::Lost);
            }
        }
        Err(Error::Conflict)
    }

    /// Serves client `g`'s slot if it holds a new request; whether it did.
    fn serve_slot<H: Handler<E> + ?Sized>(
        &mut self,
        g: u32,
        handler: &H,
        claims: bool,
    ) -> Result<bool, Error> {
        let end = self.layout.request_end(g);
        let (seq, _) = split_ctrl(self.io.local_word(end - 8)?);
        if seq == 0 || seq == self.seen[g as usize] {
            return Ok(false);
        }
        let Some((msg, _)) = self.io.read_message(end, self.layout.slot_bytes)? else {
            return Ok(false); // torn or still landing: read again on the next scan
        };
        if msg.seq != seq {
            return Ok(false);
        }
        let req = Request::from_message(&msg);
        let mutation = req.as_ref().is_some_and(|r| r.op != RpcOp::Get);
        if mutation && claims && self.claim(g, seq)? == Claim::Lost {
            self.seen[g as usize] = seq;
            return Ok(false);
        }
        self.seen[g as usize] = seq;
        let (status, value) = match req {
            Some(req) => handler.handle(&mut self.io, &req)?,
            None => (Status::BadRequest, Vec::new()),
        };
        let response = encode(seq, status as u8, &[], &value);
        let client_node = NodeId((g / u32::from(self.clients_per_node)) as u16);
        let resp_end = self.layout.response_end(g);
        if client_node == self.io.node() {
            self.io
                .local_write(resp_end - response.len() as u64, response)?;
        } else {
            let addr = MailboxLayout::placed(client_node, resp_end, response.len());
            // An earlier response that failed (its client's node went down)
            // must not cost this client its response.
            if let Err(e) = self.io.reap() {
                tracing::warn!(error = %e, "server worker: a response WRITE failed");
            }
            self.io.post_detached(
                nessie_protocol::Op::Write {
                    addr,
                    data: response,
                },
                &mut self.stats,
            )?;
        }
        Ok(true)
    }
}
