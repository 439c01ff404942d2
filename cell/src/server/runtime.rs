//! Where Cell's server machines run: the server workers (`nessie-exec`'s
//! [`ServerPool`](nessie_exec::ServerPool) polling the same
//! request slots as NessieSD, NessieHY and Pilaf, with [`CellHandler`] as
//! their handler: each request's server logic runs inside the worker's
//! machine) and one maintenance thread per server node, which runs
//! meganode splits and their follow-ups and talks to other servers through
//! its own request slot. Workers never wait for another server, so two
//! servers splitting into each other cannot deadlock.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nessie_exec::mailbox::{Request, Status};
use nessie_exec::thread_cpu_time;
use nessie_exec::Driver;
use nessie_exec::Handler;
use nessie_exec::RpcClient;
use nessie_protocol::{ClientId, CorruptionKind, Endpoint, Error};
use tracing::Instrument;

use super::split::SplitOutcome;
use super::{Job, ServerNode, Srv};
use crate::machine::{machine, BaseIo, CellExt, Channel, Effect, Io, Machine, Resolution};
use crate::wire::{CellRequest, CellResponse, Refusal};

impl Srv {
    /// Serves one request.
    pub async fn handle(&self, req: CellRequest) -> Result<CellResponse, Error> {
        match req {
            CellRequest::Search { start, key, value } => self.search(start, &key, value).await,
            CellRequest::Write { start, key, value } => {
                self.write(start, &key, value.as_deref()).await
            }
            CellRequest::Scan {
                start,
                from,
                to,
                limit,
                contiguous,
            } => {
                let limit = (limit as usize).min(self.st.cfg.scan_page as usize).max(1);
                self.scan(start, &from, to.as_deref(), limit, contiguous)
                    .await
            }
            CellRequest::Validate { leaves } => {
                Ok(CellResponse::Valid(self.validate(&leaves).await?))
            }
            CellRequest::CopyMeganode {
                source,
                split,
                new,
                slot,
            } => self.copy_meganode(source, &split, new, slot).await,
            CellRequest::NewRoot {
                left,
                split,
                right,
                new,
                slot,
            } => self.new_root(left, &split, right, new, slot).await,
            CellRequest::SetRoot { expect, new } => self.set_root(expect, new).await,
            CellRequest::InsertChild {
                start,
                key,
                child,
                below,
            } => self.insert_child(start, &key, child, below).await,
            CellRequest::OpenRegion { region } => self.open_region(region).await,
            CellRequest::DropRegion { region } => self.drop_region(region).await,
        }
    }

    /// Runs one maintenance job.
    pub async fn run_job(&self, job: Job) -> Result<(), Error> {
        match job {
            Job::Split(x) => {
                if let SplitOutcome::Split { split, new } = self.split_meganode(x, None).await? {
                    self.link_parent(x, &split, new).await?;
                }
                Ok(())
            }
            Job::LinkParent { below, key, child } => self.link_parent(below, &key, child).await,
            Job::Open(r) => self.open_remote(r).await,
            Job::Drop(r) => self.drop_remote(r).await,
            Job::SetRoot { below, root } => self
                .set_root_to(crate::ptr::NodePtr::root_of(below), root)
                .await
                .map(|_| ()),
        }
    }
}

/// Recovery without region logs.
fn no_logs() -> Error {
    Error::corrupt(
        CorruptionKind::Setup,
        "recovery needs region logs (log_dir)",
    )
}

/// Performs Cell's own effects of a server machine (log appends,
/// directory snapshots), for every driver.
pub fn local_effect(st: &ServerNode, e: Effect) -> Resolution {
    match e {
        Effect::Log { region, records } => Resolution::Logged(match &st.log {
            Some(l) => l.append(region, &records),
            None => Ok(()),
        }),
        Effect::ReadLog { region } => Resolution::Records(match &st.log {
            Some(l) => l.read(region),
            None => Err(no_logs()),
        }),
        Effect::RemoveLog { region } => Resolution::Logged(match &st.log {
            Some(l) => l.remove(region),
            None => Ok(()),
        }),
        Effect::Regions => Resolution::Regions(st.dir.last()),
    }
}

/// The handler of a server node's workers: each request runs as Cell's
/// server logic inside the worker's machine.
#[derive(Debug)]
pub struct CellHandler {
    /// The node's state.
    pub st: Arc<ServerNode>,
    requests: AtomicU64,
}

impl CellHandler {
    /// The handler of `st`.
    pub fn new(st: Arc<ServerNode>) -> CellHandler {
        CellHandler {
            st,
            requests: AtomicU64::new(0),
        }
    }
}

impl Handler for CellHandler {
    type Ext = CellExt;

    async fn handle(&self, io: &BaseIo, req: Request) -> Result<(Status, Vec<u8>), Error> {
        let Some(creq) = CellRequest::decode(&req.value) else {
            return Ok((Status::BadRequest, Vec::new()));
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        let span = tracing::debug_span!("cell-server", op = creq.name(), node = %self.st.node);
        let srv = Srv::new(Io::new(io.clone(), None), self.st.clone());
        let resp = match srv.handle(creq).instrument(span).await {
            Ok(r) => r,
            Err(Error::Conflict) => CellResponse::Busy,
            Err(e) => CellResponse::Failed(Refusal::Server(e.to_string())),
        };
        Ok((Status::Found, resp.encode()))
    }

    fn ext(&self, e: Effect) -> Resolution {
        local_effect(&self.st, e)
    }

    /// An eighth of the clients' operation timeout, at most
    /// [`CLAIM_WAIT`](nessie_exec::CLAIM_WAIT): a lost claim
    /// completion holds the worker a fraction of what its clients wait.
    fn claim_wait(&self) -> Duration {
        nessie_exec::claim_wait(self.st.cfg.op_timeout)
    }
}

/// A server node's maintenance thread.
#[derive(Debug)]
pub struct Maintenance {
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    parked: Arc<AtomicBool>,
    cpu_ns: Arc<AtomicU64>,
    busy: Arc<AtomicBool>,
    errors: Arc<std::sync::Mutex<Vec<Error>>>,
    thread: Option<JoinHandle<()>>,
}

/// The maintenance context: a driver on an endpoint of the node and the
/// node's maintenance request slot.
pub struct MaintenanceIo<E: Endpoint> {
    /// The threaded driver on the node's endpoint.
    pub driver: Driver<E>,
    /// The node's maintenance request channel.
    pub chan: Channel,
    timeout: Duration,
}

impl<E: Endpoint> MaintenanceIo<E> {
    /// The maintenance context of `st`'s node on `ep`.
    pub fn new(st: &ServerNode, ep: E) -> MaintenanceIo<E> {
        let timeout = st.cfg.server_rpc_wait();
        MaintenanceIo {
            driver: Driver::new(ep),
            chan: maintenance_channel(st),
            timeout,
        }
    }

    /// Runs `m` to completion, performing its effects for `st`.
    pub fn run<T: 'static>(&mut self, st: &ServerNode, m: &mut Machine<T>) -> Result<T, Error> {
        self.driver.run_machine(m, &mut |e| local_effect(st, e))
    }

    /// A machine of `st`'s node running `make`'s logic with this context's
    /// request channel.
    pub fn machine<T: 'static, F>(
        &self,
        st: &Arc<ServerNode>,
        make: impl FnOnce(Srv) -> F,
    ) -> Machine<T>
    where
        F: Future<Output = Result<T, Error>> + 'static,
    {
        let s = st.clone();
        let limit = self.timeout;
        machine(
            st.node,
            self.driver.next_id(),
            Some(self.chan.clone()),
            move |io| {
                io.base().set_limit(Some(limit));
                make(Srv::new(io, s))
            },
        )
    }

    /// Runs `job` on `st`.
    pub fn run_job(&mut self, st: &Arc<ServerNode>, job: Job) -> Result<(), Error> {
        let mut m = self.machine(st, move |srv| async move { srv.run_job(job).await });
        self.run(st, &mut m)
    }
}

/// The machine of maintenance job `job` on `st`'s node, its RPCs going
/// through `chan` (the node's maintenance slot), its work requests
/// numbered from `first_id`, its rounds giving up on missing completions
/// after `limit`.
pub fn job_machine(
    st: &Arc<ServerNode>,
    chan: Channel,
    first_id: u64,
    limit: Duration,
    job: Job,
) -> Machine<()> {
    let s = st.clone();
    machine(st.node, first_id, Some(chan), move |io| async move {
        io.base().set_limit(Some(limit));
        Srv::new(io, s).run_job(job).await
    })
}

/// The machine of a recovery ([`Srv::recover`]) run by `st`'s node, its
/// work requests numbered from `first_id`, its rounds giving up on
/// missing completions after `limit`. It sends no request (it needs no
/// request slot), so it runs beside the node's maintenance thread, never
/// queued behind a job that waits for the regions it recovers.
pub fn recovery_machine(st: &Arc<ServerNode>, first_id: u64, limit: Duration) -> Machine<()> {
    let s = st.clone();
    machine(st.node, first_id, None, move |io| async move {
        io.base().set_limit(Some(limit));
        Srv::new(io, s).recover().await.map(|_| ())
    })
}

/// A request channel on `st`'s node's maintenance slot (the slot after its
/// clients').
pub fn maintenance_channel(st: &ServerNode) -> Channel {
    let id = ClientId {
        node: st.node,
        index: st.cfg.clients_per_node,
    };
    let timeout = st.cfg.server_rpc_wait();
    Channel::new(
        RpcClient::new(
            st.layout.mailbox,
            id,
            st.cfg.slots_per_node(),
            timeout,
            st.cfg.landing_margin,
        ),
        true,
    )
    .with_claimed_server_requests(!st.cfg.faults.unclaimed_server_requests)
}

/// [`maintenance_channel`] whose sequence numbers are drawn from `entropy`
/// (a deterministic driver passes its seed) instead of the clock.
pub fn maintenance_channel_seeded(st: &ServerNode, entropy: u64) -> Channel {
    let g = u32::from(st.node.0) * u32::from(st.cfg.slots_per_node())
        + u32::from(st.cfg.clients_per_node);
    let timeout = st.cfg.server_rpc_wait();
    Channel::new(
        RpcClient::with_first_seq(
            st.layout.mailbox,
            g,
            entropy,
            timeout,
            st.cfg.landing_margin,
        ),
        true,
    )
    .with_claimed_server_requests(!st.cfg.faults.unclaimed_server_requests)
}

impl Maintenance {
    /// Starts the maintenance thread of `st` on endpoint `ep`.
    pub fn start<E: Endpoint + 'static>(st: Arc<ServerNode>, ep: E) -> Result<Maintenance, Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let parked = Arc::new(AtomicBool::new(false));
        let cpu_ns = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
        let busy = Arc::new(AtomicBool::new(false));
        let (s2, p2, k2, c2, e2, b2) = (
            stop.clone(),
            paused.clone(),
            parked.clone(),
            cpu_ns.clone(),
            errors.clone(),
            busy.clone(),
        );
        let thread = std::thread::Builder::new()
            .name(format!("cell-maint-{}", st.node.0))
            .spawn(move || {
                let mut mio = MaintenanceIo::new(&st, ep);
                let mut mark = thread_cpu_time();
                while !s2.load(Ordering::Relaxed) {
                    if p2.load(Ordering::Relaxed) {
                        if !k2.load(Ordering::SeqCst) {
                            let now = thread_cpu_time();
                            c2.fetch_add((now - mark).as_nanos() as u64, Ordering::Relaxed);
                            k2.store(true, Ordering::SeqCst);
                        }
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    if k2.swap(false, Ordering::SeqCst) {
                        mark = thread_cpu_time();
                    }
                    let Some(job) = st.next_job(Duration::from_millis(20)) else {
                        continue;
                    };
                    b2.store(true, Ordering::SeqCst);
                    let span = tracing::debug_span!("cell-maintenance", node = %st.node, ?job);
                    let _g = span.enter();
                    if let Err(e) = mio.run_job(&st, job.clone()) {
                        tracing::warn!(error = %e, ?job, "cell maintenance job failed");
                        let mut errs = e2.lock().unwrap_or_else(|e| e.into_inner());
                        if errs.len() < 64 {
                            errs.push(e);
                        }
                    }
                    b2.store(false, Ordering::SeqCst);
                    let now = thread_cpu_time();
                    c2.fetch_add((now - mark).as_nanos() as u64, Ordering::Relaxed);
                    mark = now;
                }
            })
            .map_err(|e| {
                Error::corrupt(
                    CorruptionKind::Resource,
                    format!("cannot spawn a maintenance thread: {e}"),
                )
            })?;
        Ok(Maintenance {
            stop,
            paused,
            parked,
            cpu_ns,
            busy,
            errors,
            thread: Some(thread),
        })
    }

    /// Pauses the thread (after its current job) and waits until it parks (at most 1 s).
    pub fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
        let t = std::time::Instant::now();
        while !self.parked.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(1) {
            std::thread::yield_now();
        }
    }

    /// Resumes it.
    pub fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Whether it is running a job (or taking one).
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// CPU time it consumed.
    pub fn cpu_time(&self) -> Duration {
        Duration::from_nanos(self.cpu_ns.load(Ordering::Relaxed))
    }

    /// Errors its jobs met.
    pub fn errors(&self) -> Vec<Error> {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops it and waits for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Maintenance {
    fn drop(&mut self) {
        self.stop();
    }
}
