//! The systems other than Nessie as the simulator runs them: their real
//! sans-IO machines (`nessie_exec::Machine`) behind a few enums, so
//! that one engine drives any of them.
//!
//! - A **client** of a baseline (NessieSD, NessieHY, Pilaf) keeps its
//!   sans-IO core ([`AnyCore`], made by the baselines'
//!   [`SystemConfig::core`]: this file names no baseline) between
//!   operations; each attempt is a machine that owns
//!   the core and hands it back with its outcome, retried outside the
//!   machine by the baselines' [`RetryBudget`]. A Cell client runs one
//!   machine per operation (Cell's operations retry inside).
//! - A **server worker** is `nessie-exec`'s [`Worker`] machine over the node's
//!   handler (a baseline's [`nessie_baselines::AnyTable`], from
//!   [`SystemConfig::node_table`], or Cell's server logic).
//! - [`Servers`] holds what the server side shares: the slot layout, who
//!   owns each slot, the workers, the node's table lock.
//!
//! [`poll_kv`] and [`poll_worker`] take one step of such a machine and
//! resolve the effects that need no time (Cell's directory snapshots and
//! log appends), so the engine sees only posts, waits and results.

use std::sync::Arc;
use std::time::Duration;

use nessie_baselines::RetryBudget;
use nessie_baselines::{AnyCore, AnyTable};
use nessie_baselines::{Attempt, ClientLogic, CoreSwitches};
use nessie_baselines::{HyOptions, SystemConfig};
use nessie_exec::mailbox::MailboxLayout;
use nessie_exec::RpcClient;
use nessie_exec::SlotWatch;
use nessie_exec::TableLock;
use nessie_exec::{Effect, Ext, Io, Machine, Plain, Resolution, Step};
use nessie_exec::{Handler, Worker, WorkerCounters};
use nessie_protocol::Request;
use nessie_protocol::{
    ChainLink, Config, CorruptionKind, Error, Nanos, NodeId, Topology, WorkRequest,
};

use nessie_cell::machine::{CellExt, Channel};
use nessie_cell::region::Directory;
use nessie_cell::server::runtime::{
    job_machine, local_effect, maintenance_channel_seeded, CellHandler,
};
use nessie_cell::server::ServerNode;
use nessie_cell::Sizing;
use nessie_cell::{CellConfig, CellMachines};
use nessie_check::memory::{InFlight, Memory, WordOrder};
use nessie_protocol::Completion;
use nessie_protocol::Response;

use crate::spec::{ServerFaults, SimSpec};
use nessie_systems::SystemKind;

/// Who posted a work request: a client thread's operation, or a server
/// worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Actor {
    /// Client `c` (index into the engine's clients).
    Client(usize),
    /// Worker `w` (index into [`Servers::workers`]).
    Worker(usize),
}

/// What a finished client machine hands back.
pub(crate) enum KvDone {
    /// An attempt of a baseline: the core, the operation's budget, the outcome.
    Attempt(Box<(AnyCore, RetryBudget, Attempt)>),
    /// A Cell operation's response, a range scan's entries among them (all
    /// its attempts done).
    Cell(Response),
}

/// A client machine of a system other than Nessie.
pub(crate) enum KvMachine {
    Attempt(Machine<KvDone, Plain>),
    /// A Cell operation (a range scan among them), and the directory its
    /// snapshots come from.
    Cell(Machine<Response, CellExt>, Arc<Directory>),
}

impl KvMachine {
    /// One attempt of `req` by `core` on node `own`, its rounds giving up
    /// on missing completions after `limit` (`None`: never, the
    /// `unbounded-rounds` switch).
    pub(crate) fn attempt(
        own: NodeId,
        core: AnyCore,
        budget: RetryBudget,
        req: Request,
        limit: Option<Duration>,
    ) -> KvMachine {
        KvMachine::Attempt(Machine::new(own, 1, move |io: Io| async move {
            io.set_limit(limit);
            io.count(|s| s.attempts = 1);
            let (mut core, mut budget) = (core, budget);
            let a = core.attempt(&io, req.borrowed(), &mut budget).await;
            Ok(KvDone::Attempt(Box::new((core, budget, a))))
        }))
    }

    pub(crate) fn complete(&mut self, c: nessie_protocol::Completion) -> bool {
        match self {
            KvMachine::Attempt(m) => m.complete(c),
            KvMachine::Cell(m, _) => m.complete(c),
        }
    }

    pub(crate) fn stats(&self) -> nessie_protocol::OpStats {
        match self {
            KvMachine::Attempt(m) => m.stats(),
            KvMachine::Cell(m, _) => m.stats(),
        }
    }

    /// When its round in flight gives up on missing completions (its own
    /// clock), if it has a round in flight with a deadline.
    pub(crate) fn deadline(&mut self) -> Option<Nanos> {
        match self {
            KvMachine::Attempt(m) => m.exec().deadline(),
            KvMachine::Cell(m, _) => m.exec().deadline(),
        }
    }

    /// Resolves the shared wait the machine asked for.
    pub(crate) fn resolve(&mut self, r: Shared) {
        match self {
            KvMachine::Attempt(m) => m.resolve(r.resolution()),
            KvMachine::Cell(m, _) => m.resolve(r.resolution()),
        }
    }
}

/// What a machine waits for, that takes time.
#[derive(Debug)]
pub(crate) enum Wait {
    /// A back-off.
    Backoff(Duration),
    /// The control word at `ctrl` of the own node to carry `seq`.
    Response {
        ctrl: u64,
        seq: u32,
        deadline: Nanos,
    },
    /// A request in the watched slots (workers).
    Request(Arc<SlotWatch>),
    /// The table lock (workers).
    Lock(Arc<TableLock>),
}

/// A resolution of a [`Wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shared {
    /// A back-off passed, a lock was released.
    Waited,
    /// The response landed (`false`: the deadline passed).
    Landed(bool),
    /// A request in the slot at this position of the watch, with this
    /// control word.
    Request(usize, u64),
}

impl Shared {
    fn resolution<X: Ext>(self) -> Resolution<X> {
        match self {
            Shared::Waited => Resolution::Waited,
            Shared::Landed(b) => Resolution::Landed(b),
            Shared::Request(index, ctrl) => Resolution::Request { index, ctrl },
        }
    }
}

/// One step of a machine, as the engine needs it.
pub(crate) enum Stepped<T> {
    /// Post these (one round).
    Post(Vec<WorkRequest>),
    /// Post these as one ordered chain to one node (one round).
    PostChain(Vec<(WorkRequest, ChainLink)>),
    /// Post these without awaiting them (a server's unsignaled response).
    PostDetached(Vec<WorkRequest>),
    /// Completions outstanding.
    Pending,
    /// Waiting for something that takes time.
    Wait(Wait),
    /// Finished.
    Done(Result<T, Error>),
}

/// Takes one step of `m` at `now`, resolving the system's own effects at
/// once with `ext`.
fn step<T: 'static, X: Ext>(
    m: &mut Machine<T, X>,
    now: Nanos,
    ext: &mut dyn FnMut(X::Effect) -> X::Resolution,
) -> Stepped<T> {
    loop {
        return match m.poll(now) {
            Step::Post(wrs) => Stepped::Post(wrs),
            Step::PostChain(chain) => match nessie_protocol::chain_node(&chain) {
                Ok(_) => Stepped::PostChain(chain),
                Err(refusal) => {
                    // Not one remote node: refused, nothing posted, as an
                    // endpoint refuses it.
                    for (wr, _) in chain {
                        m.refuse(wr.id, refusal.clone());
                    }
                    continue;
                }
            },
            Step::PostDetached(wrs) => Stepped::PostDetached(wrs),
            Step::Pending => Stepped::Pending,
            Step::Done(r) => Stepped::Done(r),
            Step::Effect(Effect::Ext(e)) => {
                let r = ext(e);
                m.resolve(Resolution::Ext(r));
                continue;
            }
            Step::Effect(Effect::Backoff(d)) => Stepped::Wait(Wait::Backoff(d)),
            Step::Effect(Effect::AwaitResponse {
                ctrl,
                seq,
                deadline,
            }) => Stepped::Wait(Wait::Response {
                ctrl,
                seq,
                deadline,
            }),
            Step::Effect(Effect::AwaitRequest(w)) => Stepped::Wait(Wait::Request(w)),
            Step::Effect(Effect::AwaitLock(l)) => Stepped::Wait(Wait::Lock(l)),
        };
    }
}

/// One step of a client machine.
pub(crate) fn poll_kv(m: &mut KvMachine, now: Nanos) -> Stepped<KvDone> {
    match m {
        KvMachine::Attempt(m) => step(m, now, &mut |e| match e {}),
        KvMachine::Cell(m, dir) => poll_cell(m, dir, now),
    }
}

/// One step of a Cell client machine (any operation, scans included).
fn poll_cell(m: &mut Machine<Response, CellExt>, dir: &Directory, now: Nanos) -> Stepped<KvDone> {
    let mut ext = |e| nessie_cell::client_effect(e, || dir.snapshot());
    match step(m, now, &mut ext) {
        Stepped::Post(w) => Stepped::Post(w),
        Stepped::PostChain(w) => Stepped::PostChain(w),
        Stepped::PostDetached(w) => Stepped::PostDetached(w),
        Stepped::Pending => Stepped::Pending,
        Stepped::Wait(w) => Stepped::Wait(w),
        Stepped::Done(r) => Stepped::Done(r.map(KvDone::Cell)),
    }
}

/// A server worker's machine (or a Cell maintenance job's).
pub(crate) enum WorkerMachine {
    Plain(Machine<(), Plain>),
    /// Cell's, and the server node whose own effects it resolves.
    Cell(Machine<(), CellExt>, Arc<ServerNode>),
}

impl WorkerMachine {
    pub(crate) fn complete(&mut self, c: nessie_protocol::Completion) -> bool {
        match self {
            WorkerMachine::Plain(m) => m.complete(c),
            WorkerMachine::Cell(m, _) => m.complete(c),
        }
    }

    pub(crate) fn outstanding(&mut self) -> usize {
        match self {
            WorkerMachine::Plain(m) => m.exec().outstanding(),
            WorkerMachine::Cell(m, _) => m.exec().outstanding(),
        }
    }

    /// When its round in flight gives up on missing completions, if it
    /// has a round in flight with a deadline.
    pub(crate) fn deadline(&mut self) -> Option<Nanos> {
        match self {
            WorkerMachine::Plain(m) => m.exec().deadline(),
            WorkerMachine::Cell(m, _) => m.exec().deadline(),
        }
    }

    pub(crate) fn take_stats(&mut self) -> nessie_protocol::OpStats {
        match self {
            WorkerMachine::Plain(m) => m.exec().take_stats(),
            WorkerMachine::Cell(m, _) => m.exec().take_stats(),
        }
    }

    pub(crate) fn resolve(&mut self, r: Shared) {
        match self {
            WorkerMachine::Plain(m) => m.resolve(r.resolution()),
            WorkerMachine::Cell(m, _) => m.resolve(r.resolution()),
        }
    }
}

/// One step of a worker machine. `fail_at_log` is asked at each region
/// log append (a durable point) whether the worker's server fails right
/// after it: if it says so, the step's later log appends never happen and
/// the second value is true (the caller drops what the step posts).
pub(crate) fn poll_worker(
    m: &mut WorkerMachine,
    now: Nanos,
    fail_at_log: &mut dyn FnMut() -> bool,
) -> (Stepped<()>, bool) {
    match m {
        WorkerMachine::Plain(m) => (step(m, now, &mut |e| match e {}), false),
        WorkerMachine::Cell(m, st) => {
            let mut failed = false;
            let stepped = step(m, now, &mut |e| {
                let log = matches!(e, nessie_cell::machine::Effect::Log { .. });
                if failed && log {
                    return nessie_cell::machine::Resolution::Logged(Err(Error::Unreachable(
                        st.node,
                        nessie_protocol::Needed::Request,
                    )));
                }
                let r = local_effect(st, e);
                failed |= log && fail_at_log();
                r
            });
            (stepped, failed)
        }
    }
}

/// What a worker is doing.
#[derive(Debug)]
pub(crate) enum WorkerState {
    /// Stepping (or about to).
    Running,
    /// Its round's completions are outstanding.
    Completions,
    /// Polling its slots for a request.
    Idle(Arc<SlotWatch>),
    /// Waiting for its node's table lock.
    Lock(Arc<TableLock>),
    /// Backing off, or its wait is resolved and due (the event carries it).
    Due,
    /// Cell's maintenance thread with no job.
    Jobs,
    /// Crashed, until its replacement starts.
    Down,
}

/// What makes a [`SimWorker`] Cell's maintenance thread: the node's state
/// (its job queue) and the node's maintenance request slot.
pub(crate) struct Maint {
    pub(crate) st: Arc<ServerNode>,
    pub(crate) chan: Channel,
}

/// A server worker: a polling thread on a core of its own.
pub(crate) struct SimWorker {
    pub(crate) node: NodeId,
    /// Its core in the engine's core table.
    pub(crate) core: usize,
    pub(crate) machine: Option<WorkerMachine>,
    pub(crate) state: WorkerState,
    /// Numbers its waits and rounds (stale events are ignored).
    pub(crate) round: u64,
    /// Slots it polls (for its detection delay).
    pub(crate) slots: u64,
    /// Where its scan of the slots continues.
    pub(crate) cursor: usize,
    /// Positions (in its watch) of the slots a request write landed in
    /// that may still hold one it has not served.
    pub(crate) landed: std::collections::BTreeSet<usize>,
    /// The slots it serves (known once it first waits for a request).
    pub(crate) watch: Option<Arc<SlotWatch>>,
    /// The resolution its next wake-up delivers.
    pub(crate) due: Option<Shared>,
    /// CPU charged for requests in the measured window.
    pub(crate) busy_ns: u64,
    /// Time spent in the measured window finding a waiting request (the
    /// scan of its slots between a request's landing, or its own return
    /// from the previous request, and taking it).
    pub(crate) scan_ns: u64,
    /// The next step starts with the CPU of a request taken.
    pub(crate) charge: u64,
    /// Cell's maintenance thread (not a request worker).
    pub(crate) maint: Option<Maint>,
    /// A maintenance job's wait for its response: control word and sequence.
    pub(crate) awaiting: Option<(u64, u32)>,
    /// Makes a fresh machine of this worker (a replacement after a crash:
    /// nothing of its predecessor's memory), for the baselines' workers.
    pub(crate) remake: Option<Box<dyn Fn() -> WorkerMachine>>,
    /// The round of its claim CAS in flight, if one is (a crash point).
    pub(crate) claim_round: Option<u64>,
    /// The job Cell's maintenance thread runs, if it runs one.
    pub(crate) job: Option<nessie_cell::server::Job>,
    /// Cell's recovery thread of this node (crate::server_failure), not a
    /// request worker.
    pub(crate) recovery: bool,
}

impl SimWorker {
    /// The worker dies (a crash, or its server's failure): its machine,
    /// its job and everything it knew are gone; its stale events are
    /// ignored from now on.
    pub(crate) fn go_down(&mut self) {
        self.machine = None;
        self.job = None;
        self.state = WorkerState::Down;
        self.round += 1;
        self.due = None;
        self.awaiting = None;
        self.charge = 0;
        self.claim_round = None;
    }

    fn new(node: NodeId, slots: usize, machine: Option<WorkerMachine>) -> SimWorker {
        SimWorker {
            node,
            core: 0,
            machine,
            state: WorkerState::Running,
            round: 0,
            slots: slots as u64,
            cursor: 0,
            landed: std::collections::BTreeSet::new(),
            watch: None,
            due: None,
            busy_ns: 0,
            scan_ns: 0,
            charge: 0,
            maint: None,
            awaiting: None,
            remake: None,
            claim_round: None,
            job: None,
            recovery: false,
        }
    }
}

/// The server side of a server-driven system.
pub(crate) struct Servers {
    /// The request and response slots.
    pub(crate) mailbox: MailboxLayout,
    /// The actor owning each global slot `g` (its response slot).
    pub(crate) slot_owner: Vec<Option<Actor>>,
    /// The worker serving each global request slot `g`, per node.
    pub(crate) slot_worker: Vec<usize>,
    /// Request workers per node.
    pub(crate) workers_per_node: usize,
    /// Cell's maintenance thread of each node (an index into `workers`).
    pub(crate) maint: Vec<Option<usize>>,
    pub(crate) workers: Vec<SimWorker>,
    /// Workers waiting for their node's table lock, per node.
    pub(crate) lock_waiters: Vec<Vec<usize>>,
    /// Counters the workers of all nodes share.
    pub(crate) counters: Arc<WorkerCounters>,
    /// The claim CASes and responses of the workers in the measured window.
    pub(crate) stats: nessie_protocol::OpStats,
    /// Requests the workers took in the measured window.
    pub(crate) requests: u64,
    /// Times a worker found its node's table lock held and waited.
    pub(crate) lock_waits: u64,
    /// Each node's count of table entries reused after their quarantine
    /// (the baselines).
    pub(crate) reuse: Vec<Arc<AnyTable>>,
    /// Offset of each node's move-epoch word (the baselines: two increments
    /// per cuckoo path moved).
    pub(crate) epoch: Option<u64>,
}

fn system_config(
    system: SystemKind,
    cfg: &Config,
    workers: u16,
    hy: HyOptions,
) -> Result<SystemConfig, Error> {
    let kind = system
        .kv()
        .filter(|k| *k != nessie_baselines::KvSystem::Nessie)
        .ok_or_else(|| {
            Error::corrupt(
                CorruptionKind::Setup,
                format!("{system} is not one of the baselines"),
            )
        })?;
    let sys = SystemConfig {
        kind,
        store: cfg.clone(),
        server_workers: workers.max(1),
        hy,
    };
    sys.validate()?;
    Ok(sys)
}

impl Servers {
    /// Entries the baselines' tables reused after their quarantine so far.
    pub(crate) fn reused(&self) -> u64 {
        self.reuse.iter().map(|t| t.reused()).sum()
    }

    /// The server side over `mailbox`'s slots, whose response slots
    /// `slot_owner` maps to their actors, with `workers_per_node` request
    /// workers per node (then Cell's maintenance threads, `maint`, in
    /// `workers`).
    fn new(
        mailbox: MailboxLayout,
        slot_owner: Vec<Option<Actor>>,
        workers_per_node: usize,
        maint: Vec<Option<usize>>,
        workers: Vec<SimWorker>,
        counters: Arc<WorkerCounters>,
    ) -> Servers {
        let nodes = workers
            .iter()
            .map(|w| usize::from(w.node.0) + 1)
            .max()
            .unwrap_or(0);
        Servers {
            mailbox,
            slot_worker: (0..slot_owner.len())
                .map(|g| g % workers_per_node)
                .collect(),
            slot_owner,
            workers_per_node,
            maint,
            workers,
            lock_waiters: vec![Vec::new(); nodes],
            counters,
            stats: nessie_protocol::OpStats::default(),
            requests: 0,
            lock_waits: 0,
            reuse: Vec::new(),
            epoch: None,
        }
    }
}

/// A system other than Nessie, set up for a run.
pub(crate) struct Setup {
    /// The server side (`None`: RACE, which has none).
    pub(crate) servers: Option<Servers>,
    /// Each client's core (client `c` is id `(c / cpn, c % cpn)`), for the
    /// baselines.
    pub(crate) cores: Vec<AnyCore>,
    /// Makes a baseline client's core afresh (a restarted client's).
    pub(crate) maker: Option<CoreMaker>,
    /// Each client's machines, for Cell.
    pub(crate) cell: Vec<CellMachines>,
    /// Makes a Cell client's machines afresh (a restarted client's).
    pub(crate) cell_maker: Option<CellMaker>,
    /// Cell's directory (its clients' snapshots come from it).
    pub(crate) dir: Option<Arc<Directory>>,
    /// The regions the fabric must provide.
    pub(crate) topology: Topology,
    /// Cell's server nodes, to bootstrap (the first) once memory exists.
    pub(crate) cell_servers: Vec<Arc<ServerNode>>,
}

/// What a NessieSD, NessieHY or Pilaf client's core is made of, to make one
/// at the start and again for a restarted client (a fresh process: nothing
/// of its predecessor's state survives but its slots on the nodes).
pub(crate) struct CoreMaker {
    sys: SystemConfig,
    /// The request slots (`None`: a system without servers, RACE).
    mailbox: Option<MailboxLayout>,
    faults: ServerFaults,
}

impl CoreMaker {
    /// The core of the client with global slot `g`, its sequence numbers
    /// drawn from `entropy` (the threaded client draws them from its clock,
    /// so that a restarted client is not taken for its predecessor);
    /// `restarted`: a process that replaces a crashed one (it opens its
    /// claim words before its first PUT or DELETE on each node).
    pub(crate) fn core(&self, g: u32, entropy: u64, restarted: bool) -> AnyCore {
        let cfg = &self.sys.store;
        let rpc = self.mailbox.map(|mailbox| {
            rpc_channel(
                RpcClient::with_first_seq(
                    mailbox,
                    g,
                    entropy,
                    cfg.retry.op_timeout,
                    cfg.deadline_margin,
                ),
                restarted,
                self.faults.settle_by_landing_bound,
            )
        });
        let switches = CoreSwitches {
            skip_epoch_check: self.faults.skip_epoch_check,
            skip_checksums: self.faults.skip_checksums,
            reuse_without_hold: self.faults.reuse_without_hold,
            unfenced_writes: self.faults.unfenced_writes,
            repair_empties_torn: self.faults.repair_empties_torn,
            skip_miss_check: self.faults.skip_miss_check,
        };
        let cpn = u32::from(cfg.clients_per_node.max(1));
        let id = nessie_protocol::ClientId {
            node: NodeId((g / cpn) as u16),
            index: (g % cpn) as u16,
        };
        self.sys.core(id, rpc, switches).expect(
            "baseline() made a CoreMaker only for a system with a core: a server-driven one \
             with its mailbox, or RACE",
        )
    }
}

fn worker_machine<H: Handler<Ext = Plain>>(node: NodeId, worker: Worker<H>) -> WorkerMachine {
    WorkerMachine::Plain(Machine::new(node, 1, move |io: Io| {
        io.set_limit(Some(Duration::from_secs(5)));
        worker.run(io)
    }))
}

/// Sets up NessieSD, NessieHY, Pilaf or RACE shaped by `cfg` (Nessie's
/// configuration for the spec) with `workers` server workers per node (RACE
/// has none).
pub(crate) fn baseline(
    system: SystemKind,
    cfg: &Config,
    workers: u16,
    hy: HyOptions,
    faults: ServerFaults,
    seed: u64,
) -> Result<Setup, Error> {
    let sys = system_config(system, cfg, workers, hy)?;
    let cpn = cfg.clients_per_node;
    let w = usize::from(sys.server_workers);
    let counters = Arc::new(WorkerCounters::default());
    counters
        .skip_claims
        .store(faults.skip_claims, std::sync::atomic::Ordering::Relaxed);
    counters.skip_message_checks.store(
        faults.skip_message_checks,
        std::sync::atomic::Ordering::Relaxed,
    );
    counters.rerun_duplicates.store(
        faults.rerun_duplicates,
        std::sync::atomic::Ordering::Relaxed,
    );
    let topology = sys.topology();
    let mailbox = sys.mailbox();
    let servers = match (mailbox, sys.epoch()) {
        (Some(mailbox), Some(epoch)) => {
            let (workers_list, reuse) = shared_tables(&sys, &counters, mailbox);
            let clients_total = usize::from(cfg.nodes) * usize::from(cpn);
            let mut servers = Servers::new(
                mailbox,
                (0..clients_total).map(|c| Some(Actor::Client(c))).collect(),
                w,
                Vec::new(),
                workers_list,
                counters,
            );
            servers.reuse = reuse;
            servers.epoch = Some(epoch);
            Some(servers)
        }
        // A fully client-driven system (RACE): no server side.
        _ => None,
    };
    let maker = CoreMaker {
        sys,
        mailbox,
        faults,
    };
    let mut cores = Vec::new();
    for n in 0..cfg.nodes {
        for i in 0..cpn {
            let g = u32::from(n) * u32::from(cpn) + u32::from(i);
            cores.push(maker.core(g, seed, false));
        }
    }
    Ok(Setup {
        servers,
        cores,
        maker: Some(maker),
        cell: Vec::new(),
        cell_maker: None,
        dir: None,
        topology,
        cell_servers: Vec::new(),
    })
}

/// The workers of every node over one table per node.
fn shared_tables(
    sys: &SystemConfig,
    counters: &Arc<WorkerCounters>,
    mailbox: MailboxLayout,
) -> (Vec<SimWorker>, Vec<Arc<AnyTable>>) {
    let mut out = Vec::new();
    let mut reuse = Vec::new();
    let cpn = sys.store.clients_per_node;
    let workers = sys.server_workers;
    for n in 0..sys.store.nodes {
        let node = NodeId(n);
        let Some(table) = sys.node_table(node).map(Arc::new) else {
            continue;
        };
        reuse.push(table.clone());
        for i in 0..workers {
            let (table, counters) = (table.clone(), counters.clone());
            let remake: Box<dyn Fn() -> WorkerMachine> = Box::new(move || {
                let w = Worker::new(table.clone(), mailbox, i, workers, cpn, counters.clone());
                worker_machine(node, w)
            });
            let slots = mailbox.watch(i, workers).slots().len();
            let m = remake();
            let mut sw = SimWorker::new(node, slots, Some(m));
            sw.remake = Some(remake);
            out.push(sw);
        }
    }
    (out, reuse)
}

/// What a Cell client is made of, to make one at the start and again for a
/// restarted client (a fresh process: empty caches, a fresh selector, and a
/// request channel whose sequence numbers are drawn afresh).
pub(crate) struct CellMaker {
    cfg: Arc<CellConfig>,
    dir: Arc<Directory>,
    mailbox: MailboxLayout,
    settle_by_landing_bound: bool,
}

impl CellMaker {
    /// The machines of client `id`, its sequence numbers drawn from
    /// `entropy`; `restarted`: a process that replaces a crashed one (it
    /// opens its claim words before its first PUT or DELETE on each node).
    pub(crate) fn machines(
        &self,
        id: nessie_protocol::ClientId,
        entropy: u64,
        restarted: bool,
    ) -> Result<CellMachines, Error> {
        let g = u32::from(id.node.0) * u32::from(self.cfg.slots_per_node()) + u32::from(id.index);
        let rpc = rpc_channel(
            RpcClient::with_first_seq(
                self.mailbox,
                g,
                entropy,
                self.cfg.rpc_timeout,
                self.cfg.landing_margin,
            ),
            restarted,
            self.settle_by_landing_bound,
        );
        CellMachines::new(self.cfg.clone(), &self.dir, id, rpc)
    }
}

/// A client's request channel `rpc` as a process of the run has it: one
/// that replaces a crashed one (`restarted`) opens its claim words before
/// its first PUT or DELETE on each node, a first process (on zeroed memory)
/// need not; with the `settle-by-landing-bound` switch, a request whose
/// WRITE failed is settled by the landing bound instead of a cancel.
fn rpc_channel(rpc: RpcClient, restarted: bool, settle_by_landing_bound: bool) -> RpcClient {
    let rpc = if restarted {
        rpc
    } else {
        rpc.without_predecessor()
    };
    rpc.faults
        .set_settle_by_landing_bound(settle_by_landing_bound);
    rpc
}

/// Cell's configuration for `spec`: every node a server, sized for the
/// spec's keys and sizes, its client seeds from the spec's.
pub(crate) fn cell_config(spec: &SimSpec, cfg: &Config) -> CellConfig {
    let run = spec.cell_run;
    let mut c = CellConfig::sized(&Sizing {
        nodes: spec.nodes,
        server_nodes: run.server_nodes.unwrap_or(spec.nodes).clamp(1, spec.nodes),
        clients: cfg.clients_per_node,
        workers: spec.server_workers.max(1),
        keys: spec.keys,
        key_size: spec.key_size.max(8),
        value_size: spec.value_size.max(1),
        one_meganode: run.one_meganode,
        caches: run.caches,
    });
    c.seed = spec.seed;
    c.mode = run.mode;
    if spec.cell.small_nodes || spec.cell.small_meganodes {
        c.node_bytes = CellConfig::smallest_node_bytes(c.max_key_len);
        if run.one_meganode {
            // Leaves at least half full (two of four entries), and the
            // inner nodes above them.
            c.meganode_nodes = u32::try_from(spec.keys * 2 + 64).unwrap_or(u32::MAX);
        }
    }
    if spec.cell.small_meganodes {
        c.meganode_nodes = 16;
        c.heap_bytes = 8 * c.max_extent_bytes().div_ceil(8) * 8;
        // Every split takes a region slot; a survivor of a failure takes
        // over the failed node's.
        c.regions_per_node = c.regions_per_node.max(32);
    }
    // Cell's clocks on the spec's time scale (its own defaults are a real
    // cluster's: seconds to give up, half a second of unreachability), so
    // that a Cell operation gives up when a Nessie one would and the
    // simulator's horizon covers it: one reply is waited for an expiration
    // period, an operation gives up after Nessie's operation timeout (or
    // half of it while its node stays unreachable), a search attempt
    // restarts after an expiration period and an invalidated node waits
    // two before reuse, and a posted WRITE or CAS lands within the
    // deadline margin (A2).
    c.op_timeout = cfg.retry.op_timeout;
    c.rpc_timeout = cfg.expiration;
    c.server_rpc_timeout = 2 * cfg.expiration;
    c.unreachable_grace = cfg.retry.op_timeout / 2;
    c.attempt_deadline = cfg.expiration;
    c.node_reuse_grace = 2 * cfg.expiration;
    c.landing_margin = cfg.deadline_margin.min(c.op_timeout);
    c.backoff = cfg.retry.initial_backoff;
    c.max_backoff = cfg.retry.max_backoff;
    // The server-driven systems' switches, as they read for Cell.
    let f = spec.server_faults;
    c.faults.unclaimed_writes = f.skip_claims;
    c.faults.skip_crc_check = f.skip_checksums;
    c.faults.unbounded_rounds = f.unbounded_rounds;
    c.faults.skip_scan_validation = f.skip_scan_validation;
    c.faults.recovery_opens_early = f.recovery_opens_early;
    c.faults.recovery_forgets_finished_splits = f.recovery_forgets_finished_splits;
    c.faults.recovery_undoes_copied_splits = f.recovery_undoes_copied_splits;
    c.faults.recovery_ignores_live_splitter = f.recovery_ignores_live_splitter;
    c.faults.recovery_keeps_orphans = f.recovery_keeps_orphans;
    c.faults.unclaimed_server_requests = f.unclaimed_server_requests;
    c
}

/// Sets up Cell for `spec` (`cfg`: Nessie's configuration for it, whose
/// clients per node count the spec's depth).
pub(crate) fn cell(spec: &SimSpec, cfg: &Config) -> Result<Setup, Error> {
    let ccfg = Arc::new(cell_config(spec, cfg));
    ccfg.validate()?;
    let layout = ccfg.layout();
    let dir = Arc::new(Directory::new(ccfg.regions_per_node));
    let spn = ccfg.slots_per_node();
    let cpn = ccfg.clients_per_node;
    let w = usize::from(ccfg.server_workers.max(1));
    let counters = Arc::new(WorkerCounters::default());
    counters.skip_message_checks.store(
        spec.server_faults.skip_message_checks,
        std::sync::atomic::Ordering::Relaxed,
    );
    counters.rerun_duplicates.store(
        spec.server_faults.rerun_duplicates,
        std::sync::atomic::Ordering::Relaxed,
    );
    let mut workers = Vec::new();
    let mut states = Vec::new();
    // Region logs on shared storage that outlives a server, when servers
    // fail (crate::server_failure).
    let logs = (spec.chaos.server_failure_permille > 0 || spec.chaos.split_failure_permille > 0)
        .then(|| Arc::new(nessie_cell::LogSink::in_memory()));
    for n in 0..ccfg.server_nodes {
        let st = Arc::new(ServerNode::new(
            NodeId(n),
            ccfg.clone(),
            dir.clone(),
            logs.clone(),
        ));
        let handler = Arc::new(CellHandler::new(st.clone()));
        for i in 0..ccfg.server_workers.max(1) {
            let worker = Worker::new(
                handler.clone(),
                layout.mailbox,
                i,
                ccfg.server_workers.max(1),
                spn,
                counters.clone(),
            );
            let slots = worker.watch().slots().len();
            let s = st.clone();
            // A round whose completion is lost gives up after the longest
            // wait for one reply (the threaded pool's 5 s is Cell's default
            // `rpc_timeout`).
            let limit = ccfg.rpc_timeout;
            let m = Machine::new(NodeId(n), 1, move |io: Io<CellExt>| {
                io.set_limit(Some(limit));
                worker.run(io)
            });
            workers.push(SimWorker::new(
                NodeId(n),
                slots,
                Some(WorkerMachine::Cell(m, s)),
            ));
        }
        states.push(st);
    }
    // One maintenance thread per server node, after the request workers.
    let first_maint = workers.len();
    for st in &states {
        let mut m = SimWorker::new(st.node, 0, None);
        m.state = WorkerState::Jobs;
        m.maint = Some(Maint {
            st: st.clone(),
            chan: maintenance_channel_seeded(st, spec.seed),
        });
        workers.push(m);
    }
    // A recovery thread per server node when servers fail, after the
    // maintenance threads.
    if logs.is_some() {
        for st in &states {
            let mut r = SimWorker::new(st.node, 0, None);
            r.state = WorkerState::Jobs;
            r.recovery = true;
            workers.push(r);
        }
    }
    let cell_maker = CellMaker {
        cfg: ccfg.clone(),
        dir: dir.clone(),
        mailbox: layout.mailbox,
        settle_by_landing_bound: spec.server_faults.settle_by_landing_bound,
    };
    let mut cell = Vec::new();
    for n in 0..ccfg.nodes {
        for i in 0..cpn {
            let id = nessie_protocol::ClientId {
                node: NodeId(n),
                index: i,
            };
            cell.push(cell_maker.machines(id, spec.seed, false)?);
        }
    }
    let total = usize::from(ccfg.nodes) * usize::from(spn);
    let slot_owner = (0..total)
        .map(|g| {
            let (n, i) = (g / usize::from(spn), g % usize::from(spn));
            if i < usize::from(cpn) {
                Some(Actor::Client(n * usize::from(cpn) + i))
            } else if n < usize::from(ccfg.server_nodes) {
                Some(Actor::Worker(first_maint + n))
            } else {
                None
            }
        })
        .collect();
    let maint = (0..usize::from(ccfg.nodes))
        .map(|n| (n < usize::from(ccfg.server_nodes)).then_some(first_maint + n))
        .collect();
    let servers = Servers::new(layout.mailbox, slot_owner, w, maint, workers, counters);
    Ok(Setup {
        servers: Some(servers),
        cores: Vec::new(),
        maker: None,
        cell,
        cell_maker: Some(cell_maker),
        dir: Some(dir),
        topology: ccfg.topology(),
        cell_servers: states,
    })
}

/// Runs `m` (a server machine of `st`) to its end at once, executing its
/// work on `mem` immediately: Cell's bootstrap, before time starts.
pub(crate) fn run_at_once(
    mem: &mut Memory,
    st: &ServerNode,
    m: &mut Machine<(), CellExt>,
    now: Nanos,
) -> Result<(), Error> {
    loop {
        match step(m, now, &mut |e| local_effect(st, e)) {
            Stepped::Post(wrs) => {
                for wr in wrs {
                    let id = wr.id;
                    let result =
                        InFlight::new(wr, 0).run_to_end(mem, st.node, WordOrder::Ascending);
                    m.complete(Completion { id, result });
                }
            }
            Stepped::PostChain(chain) => {
                // At once, in order: every link executes behind the one
                // before it.
                for (wr, _) in chain {
                    let id = wr.id;
                    let result =
                        InFlight::new(wr, 0).run_to_end(mem, st.node, WordOrder::Ascending);
                    m.complete(Completion { id, result });
                }
            }
            Stepped::PostDetached(wrs) => {
                for wr in wrs {
                    InFlight::new(wr, 0)
                        .run_to_end(mem, st.node, WordOrder::Ascending)
                        .map_err(Error::from)?;
                }
            }
            Stepped::Wait(Wait::Backoff(_)) => m.resolve(Resolution::Waited),
            Stepped::Done(r) => return r,
            Stepped::Pending | Stepped::Wait(_) => {
                return Err(Error::corrupt(
                    CorruptionKind::Bug,
                    "a machine run at once waited for another",
                ))
            }
        }
    }
}

/// A maintenance job machine of `m`'s node for `job`.
pub(crate) fn maintenance_job(m: &Maint, job: nessie_cell::server::Job) -> WorkerMachine {
    let limit = m.st.cfg.server_rpc_wait();
    let machine = job_machine(&m.st, m.chan.clone(), 1, limit, job);
    WorkerMachine::Cell(machine, m.st.clone())
}
