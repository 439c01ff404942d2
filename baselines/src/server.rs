//! Server workers of the server-driven designs: threads on a node that poll
//! the request slots of that node, run each request through a [`Handler`]
//! (the node's tables) and write the response into the client's response
//! slot, by RDMA WRITE or, for a client on the same node, by CPU.
//!
//! Worker `w` of `W` serves the slots of clients `g` with `g % W == w`, so a
//! client's requests are handled in order by one worker. Workers poll without
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
use crate::mailbox::{encode, split_ctrl, MailboxLayout, Request, Status};

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
    stats: OpStats,
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
                match self.serve_slot(g, handler) {
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

    /// Serves client `g`'s slot if it holds a new request; whether it did.
    fn serve_slot<H: Handler<E> + ?Sized>(&mut self, g: u32, handler: &H) -> Result<bool, Error> {
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
        self.seen[g as usize] = seq;
        let (status, value) = match Request::from_message(&msg) {
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
