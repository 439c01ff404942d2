//! The discrete-event engine: the clients as their real machines (Nessie's
//! here; the other systems' clients in `kv.rs` and their server workers in
//! `servers.rs`), in virtual time, over a hardware
//! [`Profile`](crate::Profile).
//!
//! One event queue ordered by (time, sequence number): nothing depends on
//! wall-clock time, threads or hash-map order, so a run is a function of
//! its [`SimSpec`] (a test asserts it). A NIC request travels as four
//! events: it is serialised out of the sender's NIC (queue, processing cost,
//! bytes at link speed), crosses the wire, is processed by the responder's
//! NIC (plus an atomic's extra cost) and **executes on memory at that
//! instant**, then the response travels back the same way and completes at
//! the sender. The CPU path (a client's own data table) costs a copy. Each
//! poll of a machine costs one protocol step of CPU before its requests go
//! out. Clients retry like `Client` (back-off doubling from 1 µs, jittered
//! from a seeded generator), and a Nessie client routes its completions by
//! request id like `Client` (the client core's [`Router`]), so a completion
//! that comes after its round was given up reaches the client core, which
//! drops it.
//!
//! With [`Chaos`](crate::Chaos) the same engine injects the environment's
//! faults (the fault swarm, [`crate::swarm`]): the network side lives in
//! [`crate::network`], the clients' side (pauses, crashes, restarts,
//! outages) here.
//!
//! Simplifications, stated: a transfer executes whole at one instant (the
//! torn reads of multi-word transfers are the model checker's business, not
//! a performance question); each client thread has a core of its own (no
//! CPU contention between client threads; the operations in flight of one
//! thread, its CPU copies and background threads do share it).

use nessie_protocol::rng::{unit, xorshift64};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Instant;

use nessie_baselines::retry::{Jitter, RetryBudget};
use nessie_check::memory::{InFlight, Memory, WordOrder};
use nessie_check::{ret_of, Event, Failure, Ret};
use nessie_protocol::client::retries;
use nessie_protocol::layout::StateWord;
use nessie_protocol::pipeline::RequestMachine;
use nessie_protocol::route::Router;
use nessie_protocol::{
    ClientId, ClientState, Config, DteState, Error, Machine, Nanos, NodeId, Op, OpStats, Poll,
    PutMachine, Region, RemoteAddr, WorkRequest,
};
use nessie_protocol::{Request, Response};

use crate::chaos::{Chaos, Dice};
use crate::nic::NicRequest;
use crate::profile::Profile;
use crate::spec::{config, ChaosCounts, SimError, SimReport, SimSpec};
use crate::systems::{Actor, KvMachine, Servers};
use crate::zipf::ScrambledZipfian;
use nessie_baselines::AnyCore;
use nessie_systems::SystemKind;
use nessie_workload::ycsb::{YcsbDraw, YcsbGen, MAX_SCAN_LEN};

/// The virtual time (ns) of a history stamp ([`SimReport::history`]'s
/// stamps are picoseconds, raised where needed to keep them strictly
/// increasing; this is their nanosecond, which may lie a little after the
/// event's own when over a thousand events share one instant).
///
/// [`SimReport::history`]: crate::SimReport::history
pub fn stamp_ns(stamp: u64) -> u64 {
    stamp / 1000
}

/// Virtual time starts here (ns), so that no deadline is near zero.
pub(crate) const EPOCH: u64 = 1_000_000_000;

pub(crate) struct CurrentOp {
    /// The operation, its key and value as bytes.
    pub(crate) request: Request,
    /// Its key's number.
    pub(crate) key: u64,
    pub(crate) started: u64,
    /// The history's stamp of the invocation ([`Engine::stamp`]).
    invoked: u64,
    /// Virtual time of the current attempt's first step (its deadline is
    /// one expiration period later, on the client's own clock).
    attempt_started: Option<u64>,
    pub(crate) attempts: u32,
    backoff_ns: u64,
    pub(crate) stats: OpStats,
    /// An operation of the final sweep.
    sweep: bool,
    /// A baseline's retry budget, between its attempts.
    pub(crate) budget: Option<RetryBudget>,
    /// An operation of the preload of a server-driven system (not measured).
    pub(crate) preload: bool,
}

/// What the workload (or the final sweep) drew for an operation, by key
/// number, before its bytes: [`Draw::request`] makes it the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Draw {
    Get,
    Put,
    Delete,
    /// A Cell range scan from the operation's key up to (not including)
    /// key `to`, at most `limit` entries.
    Scan {
        to: u64,
        limit: usize,
    },
}

impl Draw {
    /// The operation on key number `key` (keys of `key_size` bytes), a PUT
    /// storing `value`.
    fn request(self, key: u64, value: Vec<u8>, key_size: u32) -> Request {
        let k = key_of(key, key_size);
        match self {
            Draw::Get => Request::Get(k),
            Draw::Put => Request::Put(k, value),
            Draw::Delete => Request::Delete(k),
            Draw::Scan { to, limit } => Request::Scan {
                from: k,
                to: Some(key_of(to, key_size)),
                limit,
            },
        }
    }
}

/// A client's machine of the operation in flight.
pub(crate) enum ClientMachine {
    /// Nessie's.
    Nessie(Box<RequestMachine>),
    /// Another system's.
    Kv(KvMachine),
}

pub(crate) struct SimClient {
    /// The client thread (core) whose CPU its polls take.
    pub(crate) core: usize,
    /// Open loop: when its next operation arrives (0: not drawn yet).
    next_arrival: u64,
    pub(crate) state: ClientState,
    pub(crate) machine: Option<ClientMachine>,
    pub(crate) op: Option<CurrentOp>,
    /// A baseline's sans-IO core, between attempts (`None` while an
    /// attempt's machine holds it, and for Nessie).
    pub(crate) kv_core: Option<AnyCore>,
    /// A baseline client's back-off jitter, between operations.
    pub(crate) jitter: Option<Jitter>,
    /// A Cell client's machines (caches, selector, request slot).
    pub(crate) cell: Option<nessie_cell::CellMachines>,
    /// What its machine waits for: the response slot's control word to
    /// carry `seq` (a write landing there wakes it), until `deadline`.
    pub(crate) awaiting: Option<(u64, u32)>,
    /// The resolution its next wake-up delivers.
    pub(crate) due: Option<crate::systems::Shared>,
    /// Keys it still preloads (a server-driven system's preload, in
    /// virtual time), last first.
    pub(crate) preload: Vec<u64>,
    /// Its last round was CPU accesses only (a baseline client's next poll
    /// costs no protocol step: the copy was charged).
    pub(crate) local_round: bool,
    /// Requests of the current round still to complete.
    pub(crate) outstanding: usize,
    /// Numbers the client's rounds (and incarnations): completions and
    /// wake-ups of an older round are not counted against the current one.
    pub(crate) round: u64,
    rng: u64,
    /// Its YCSB generator, when the spec runs one of YCSB's workloads
    /// ([`SimSpec::ycsb`]).
    ycsb: Option<YcsbGen>,
    /// How far this client's clock runs ahead of virtual time (A1).
    pub(crate) clock_offset: u64,
    /// Crashed (or its node is out), since this time.
    pub(crate) down_since: Option<u64>,
    /// A straggler (see [`Chaos::straggler_step_ns`]).
    straggler: bool,
    /// The straggler's slowness before its next step has been spent.
    slowed: bool,
    /// State words the current attempt has posted a commit CAS to: the
    /// margin rule lets it settle those by aborting at any time.
    commits: Vec<RemoteAddr>,
    /// Numbers the client's processes: a restart is a new process, whose
    /// new queue pairs never see a completion of its predecessor's.
    pub(crate) incarnation: u64,
    /// A Nessie client's request-id routing (the client core's, as `Client`
    /// runs it on its endpoint): posted requests carry ids unique to the
    /// process, and a completion that comes after its round was given up
    /// is routed to the machine that posted it, or dropped if that machine
    /// is done (the test-only switch `machine_local_request_ids` reinstates
    /// issue 24's hole 2).
    pub(crate) router: Router,
    /// Completions held back by a late-completion fault until the client
    /// posts a later round (requests' slots).
    pub(crate) late: Vec<usize>,
}

impl SimClient {
    /// The client's clock at virtual time `now`.
    pub(crate) fn clock(&self, now: u64) -> Nanos {
        Nanos(now + self.clock_offset)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    Poll(usize),
    /// Look again at a round whose completions may never come (client,
    /// round).
    Wake(usize, u64),
    Restart(usize),
    NodeDown(usize),
    NodeUp(usize),
    Arrive(usize),
    Land(usize),
    Back(usize),
    Complete(usize),
    /// A client's wait (back-off, response) is over (client, round).
    KvDue(usize, u64),
    /// A server worker steps.
    WorkerPoll(usize),
    /// A server worker's wait is over (worker, round).
    WorkerDue(usize, u64),
    /// A server worker's round may be past its deadline with completions
    /// missing (worker, round).
    WorkerWake(usize, u64),
    /// A crashed server worker's replacement starts.
    WorkerRestart(usize),
    /// The preload of a server-driven system is done: the measured
    /// workload starts.
    Measure,
    /// A Cell server node fails for good.
    ServerFail(usize),
    /// A Cell server node's failure is detected: a survivor recovers.
    Detect(usize),
}

#[derive(Debug, PartialEq, Eq)]
struct Scheduled {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> Ordering {
        // A min-heap on (time, sequence).
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Nic {
    pub(crate) tx_free: u64,
    pub(crate) rx_free: u64,
    /// Transmit-queue time in the measured window spent on per-request
    /// processing, and on serialising bytes at link speed.
    pub(crate) tx_op_ns: u64,
    pub(crate) tx_wire_ns: u64,
    /// Receive-queue time in the measured window.
    pub(crate) rx_ns: u64,
}

pub(crate) struct Engine {
    pub(crate) p: Profile,
    pub(crate) spec: SimSpec,
    pub(crate) cfg: Arc<Config>,
    pub(crate) mem: Memory,
    pub(crate) clients: Vec<SimClient>,
    pub(crate) nics: Vec<Nic>,
    /// When each core (client threads', then server workers') is next free.
    pub(crate) cores: Vec<u64>,
    /// Busy background threads sharing each core.
    background: Vec<u64>,
    /// The server side of a server-driven system.
    pub(crate) servers: Option<Servers>,
    /// Makes a baseline client's core afresh, for a restarted client.
    pub(crate) core_maker: Option<crate::systems::CoreMaker>,
    /// Makes a restarted Cell client's machines.
    pub(crate) cell_maker: Option<crate::systems::CellMaker>,
    /// Cell's server nodes (their counters).
    pub(crate) cell_servers: Vec<Arc<nessie_cell::server::ServerNode>>,
    /// Cell's meganode searches (server-side, client-side) when the
    /// measured workload started.
    pub(crate) cell_searches_before: (u64, u64),
    /// Cell's region directory.
    pub(crate) dir: Option<Arc<nessie_cell::region::Directory>>,
    /// When the measured workload started (after a server-driven system's
    /// preload; [`EPOCH`] otherwise).
    pub(crate) measure_from: u64,
    /// Clients still preloading.
    pub(crate) preloading: usize,
    /// The faults of the measured workload, held back during a preload.
    pub(crate) held_chaos: Option<Chaos>,
    pub(crate) node_down: Vec<bool>,
    /// The queue pairs that fail during the run, drawn in advance
    /// ([`Chaos::link_failure_permille`]).
    pub(crate) link_failures: Vec<crate::nic::LinkFailure>,
    pub(crate) reqs: Vec<Option<NicRequest>>,
    pub(crate) free_reqs: Vec<usize>,
    queue: BinaryHeap<Scheduled>,
    seq: u64,
    events: u64,
    pub(crate) end: u64,
    pub(crate) horizon: u64,
    pub(crate) get_lat: Vec<u64>,
    put_lat: Vec<u64>,
    deletes: u64,
    failures: u64,
    unknown: u64,
    stuck: u64,
    /// The final sweep's operations still to run (last first) and whether
    /// it has started.
    sweep: Vec<(u64, Draw)>,
    sweeping: bool,
    sweep_failures: Vec<String>,
    /// Virtual time of the last event processed.
    pub(crate) now: u64,
    stats: OpStats,
    history: Vec<Event>,
    history_stats: Vec<OpStats>,
    next_value: u64,
    /// The last stamp given to a history event ([`Engine::stamp`]).
    last_stamp: u64,
    /// Data table entries recycled for reuse by operations of the workload
    /// (not the final sweep): reuse while clients race.
    recycled_in_race: u64,
    /// Operations that ended (however), counted apart from the history, so
    /// that a history that lost operations is seen.
    completed_ops: u64,
    /// Cell's range scans that ended (counted apart from recording).
    completed_scans: u64,
    /// The scans' history (Cell's range-aware checker's vocabulary).
    scans: Vec<Event>,
    pub(crate) dice: Dice,
    /// The dice of the rare fates ([`Dice::rare_fate`]) and of a duplicate's
    /// landing, a stream apart from [`Engine::dice`].
    pub(crate) rare_dice: Dice,
    pub(crate) counts: ChaosCounts,
    /// Cell's failed servers and their recovery.
    pub(crate) lost_servers: crate::failures::Failures,
    /// The client that runs the final sweep (the first on a node that did
    /// not fail for good).
    sweeper: usize,
    corrupt: Vec<String>,
    margin_breaches: Vec<String>,
    /// Breaches of I4's first step ([`crate::audit`]).
    pub(crate) marked_linked: Vec<String>,
    /// The key generator of a Zipf workload (`None`: uniform keys).
    zipf: Option<ScrambledZipfian>,
    /// The client threads' time in the measured window with an operation
    /// under way.
    client_busy_ns: u64,
}

/// The key that key number `k` names, `size` bytes long (at least 8).
pub(crate) fn key_of(k: u64, size: u32) -> Vec<u8> {
    // Keys of 16 bytes or more read `k` and 15 digits; shorter ones (at
    // least 8 bytes) are the number's 8 big-endian bytes, which keep keys
    // distinct and in order where the 16 characters would be cut.
    let mut v = if size >= 16 {
        format!("k{k:015}").into_bytes()
    } else {
        k.to_be_bytes().to_vec()
    };
    v.resize(size.max(8) as usize, b'.');
    v
}

/// How often the sweep's fresh process looks again whether the recovery
/// it waits for has ended.
const SWEEPER_WAIT_NS: u64 = 50_000;

/// A duration in whole nanoseconds (saturating).
pub(crate) fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl SimClient {
    /// Hands `completion` to the running machine: a Nessie machine through
    /// the client core's request-id routing (which drops a completion whose
    /// machine is done), a baseline's directly.
    fn hand_in(&mut self, completion: nessie_protocol::Completion) {
        match self.machine.as_mut() {
            Some(ClientMachine::Nessie(m)) => {
                if let Some((_, completion)) = self.router.inbound(completion) {
                    m.complete(completion);
                }
            }
            Some(ClientMachine::Kv(m)) => {
                m.complete(completion);
            }
            None => {}
        }
    }
}

/// A fresh request-id routing for a client process of `spec`.
fn router(spec: &SimSpec) -> Router {
    let mut r = Router::new(1);
    r.reinstate_machine_local_ids(spec.faults.machine_local_request_ids);
    r
}

impl Engine {
    /// A cluster in its initial state: nothing preloaded, nothing scheduled.
    pub(crate) fn new(spec: &SimSpec) -> Result<Engine, SimError> {
        let cfg = Arc::new(config(spec)?);
        let mut dice = Dice::new(spec.seed);
        let skew = u64::try_from(cfg.clock_skew.as_nanos()).unwrap_or(u64::MAX);
        let mut setup = match spec.system {
            SystemKind::Nessie => None,
            SystemKind::Cell => Some(crate::systems::cell(spec, &cfg)?),
            other => Some(crate::systems::baseline(
                other,
                &cfg,
                spec.server_workers,
                spec.hy,
                spec.server_faults,
                spec.seed,
            )?),
        };
        let mut clients = Vec::new();
        let per_node = cfg.clients_per_node;
        // YCSB's E scans 1 to 100 entries (`maxscanlength`); Cell pages at
        // most its scan page.
        let max_scan = match spec.system {
            SystemKind::Cell => MAX_SCAN_LEN.min(crate::systems::cell_config(spec, &cfg).scan_page),
            _ => MAX_SCAN_LEN,
        };
        for n in 0..spec.nodes {
            for i in 0..per_node {
                let core = usize::from(n) * usize::from(spec.clients_per_node)
                    + usize::from(i / spec.depth);
                let id = ClientId {
                    node: NodeId(n),
                    index: i,
                };
                let mut state = ClientState::new(cfg.clone(), id)?;
                state.faults = spec.faults;
                let kv_core = setup
                    .as_mut()
                    .and_then(|s| (!s.cores.is_empty()).then(|| s.cores.remove(0)));
                let cell = setup
                    .as_mut()
                    .and_then(|s| (!s.cell.is_empty()).then(|| s.cell.remove(0)));
                clients.push(SimClient {
                    next_arrival: 0,
                    state,
                    machine: None,
                    op: None,
                    jitter: kv_core.as_ref().map(|_| Jitter::new(id)),
                    kv_core,
                    cell,
                    awaiting: None,
                    due: None,
                    preload: Vec::new(),
                    local_round: false,
                    outstanding: 0,
                    round: 0,
                    rng: spec.seed ^ (clients.len() as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                        | 1,
                    ycsb: spec
                        .ycsb
                        .map(|w| YcsbGen::new(w, spec.keys, clients.len() as u64, max_scan)),
                    clock_offset: if spec.chaos.skew {
                        dice.below(skew + 1)
                    } else {
                        0
                    },
                    down_since: None,
                    straggler: spec.chaos.straggler_step_ns > 0 && dice.chance(500),
                    slowed: false,
                    commits: Vec::new(),
                    incarnation: 0,
                    router: router(spec),
                    late: Vec::new(),
                    core,
                });
            }
        }
        if spec.chaos.skew && clients.len() > 1 {
            // Reach the full allowance: the first clock is exact, the last one
            // the full skew ahead.
            clients[0].clock_offset = 0;
            let last = clients.len() - 1;
            clients[last].clock_offset = skew;
        }
        // Cores: each node's client threads, then every node's server
        // workers; background threads spread over a node's cores in that
        // order.
        let nodes = usize::from(spec.nodes);
        let cpn = usize::from(spec.clients_per_node);
        let workers = setup.as_ref().map_or(0, |s| s.servers.workers_per_node);
        let node_cores = (cpn + workers) as u64;
        let b = u64::from(spec.background_per_node);
        let share = |pos: usize| b / node_cores + u64::from((pos as u64) < b % node_cores);
        let mut background: Vec<u64> = (0..nodes * cpn).map(|core| share(core % cpn)).collect();
        let mut mem = match &setup {
            Some(s) => Memory::with_topology(s.topology),
            None => Memory::new(&cfg),
        };
        let cell_servers = setup
            .as_ref()
            .map(|s| s.cell_servers.clone())
            .unwrap_or_default();
        if let Some(st) = cell_servers.first() {
            // Cell's first meganode, before time starts.
            let mut m = nessie_cell::bootstrap_machine(st, 1);
            crate::systems::run_at_once(&mut mem, st, &mut m, Nanos(EPOCH / 2))?;
        }
        let dir = setup.as_ref().and_then(|s| s.dir.clone());
        let core_maker = setup.as_mut().and_then(|s| s.maker.take());
        let cell_maker = setup.as_mut().and_then(|s| s.cell_maker.take());
        let mut servers = setup.map(|s| s.servers);
        if let Some(sv) = servers.as_mut() {
            for (w, worker) in sv.workers.iter_mut().enumerate() {
                worker.core = nodes * cpn + w;
                // Request workers share their node's cores with background
                // threads; Cell's maintenance and recovery threads run on
                // cores of their own.
                background.push(if worker.maint.is_some() || worker.recovery {
                    0
                } else {
                    share(cpn + w % workers)
                });
            }
        }
        Ok(Engine {
            p: spec.profile.clone(),
            spec: spec.clone(),
            mem,
            cfg,
            nics: vec![Nic::default(); usize::from(spec.nodes)],
            cores: vec![0; background.len()],
            background,
            servers,
            core_maker,
            cell_maker,
            cell_servers,
            cell_searches_before: (0, 0),
            dir,
            measure_from: EPOCH,
            preloading: 0,
            held_chaos: None,
            node_down: vec![false; usize::from(spec.nodes)],
            link_failures: Vec::new(),
            clients,
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            events: 0,
            end: EPOCH + (spec.seconds * 1e9) as u64,
            horizon: u64::MAX,
            get_lat: Vec::new(),
            put_lat: Vec::new(),
            deletes: 0,
            failures: 0,
            unknown: 0,
            stuck: 0,
            sweep: Vec::new(),
            sweeping: false,
            sweep_failures: Vec::new(),
            now: EPOCH,
            stats: OpStats::default(),
            history: Vec::new(),
            history_stats: Vec::new(),
            next_value: 0,
            last_stamp: 0,
            recycled_in_race: 0,
            completed_ops: 0,
            completed_scans: 0,
            scans: Vec::new(),
            dice,
            rare_dice: Dice::new(spec.seed ^ 0x5eed_0fd0_b1e5),
            counts: ChaosCounts::default(),
            lost_servers: crate::failures::Failures::new(nodes, spec.seed),
            sweeper: 0,
            corrupt: Vec::new(),
            margin_breaches: Vec::new(),
            marked_linked: Vec::new(),
            zipf: spec.zipf_theta.map(|t| ScrambledZipfian::new(spec.keys, t)),
            client_busy_ns: 0,
        })
    }
}

/// Runs a simulation.
pub fn simulate(spec: &SimSpec) -> Result<SimReport, SimError> {
    let wall = Instant::now();
    let mut e = Engine::new(spec)?;
    if e.servers.is_some() {
        e.start_servers();
    } else {
        e.preload()?;
    }
    for c in 0..e.clients.len() {
        e.schedule(EPOCH, Ev::Poll(c));
    }
    if e.preloading > 0 {
        // A server-driven system preloads by its clients' own PUTs, in
        // virtual time: without faults, as Nessie's preload (at once, before
        // time starts) is. The faults start with the measured workload.
        e.held_chaos = Some(e.spec.chaos);
        e.spec.chaos = Chaos {
            skew: e.spec.chaos.skew,
            ..Chaos::NONE
        };
    } else {
        e.plan_faults();
    }
    e.horizon = if e.preloading > 0 {
        // The measured workload starts once the preload is done; a preload
        // that takes longer than every operation's longest is a failure.
        let per_client = spec.keys.div_ceil(e.clients.len() as u64) + 1;
        EPOCH.saturating_add(e.drain_ns().saturating_mul(per_client))
    } else {
        e.end + e.drain_ns()
    };
    loop {
        match e.next_event() {
            Some((at, ev)) => e.handle(at, ev),
            None => {
                e.give_up_on_stuck();
                if e.spec.final_sweep && !e.sweeping {
                    e.start_sweep();
                    continue;
                }
                break;
            }
        }
    }
    // At quiescence, no data table entry leaked beyond what the protocol
    // admits (crate::audit).
    let dtes = e.audit_dtes(e.now, e.stats.leaked, e.counts.crashes + e.stuck);
    let mut report = e.report(wall.elapsed());
    report.dtes = dtes;
    Ok(report)
}

impl Engine {
    /// The next event due by the horizon (`None`: the queue is empty or the
    /// horizon has come).
    pub(crate) fn next_event(&mut self) -> Option<(u64, Ev)> {
        // Peek first: an event past the horizon stays queued (the final
        // sweep keeps a CPU access's completion).
        match self.queue.peek() {
            Some(s) if s.at <= self.horizon => self.queue.pop().map(|s| (s.at, s.ev)),
            Some(_) => {
                self.now = self.horizon;
                None
            }
            None => None,
        }
    }

    /// The earliest time from `t` at which the client thread of `core` has
    /// its core: with b background threads on the core, round robin gives it
    /// the first slice of every b + 1 (each core's rounds offset by its
    /// number, so that cores do not switch in lockstep).
    pub(crate) fn running_at(&self, core: usize, t: u64) -> u64 {
        let b = self.background[core];
        let slice = self.p.time_slice_ns.max(1);
        if b == 0 {
            return t;
        }
        let period = slice * (b + 1);
        let offset = (core as u64 % (b + 1)) * slice;
        let phase = (t + period - offset % period) % period;
        if phase < slice {
            t
        } else {
            t + (period - phase)
        }
    }

    /// Processes one event.
    pub(crate) fn handle(&mut self, at: u64, ev: Ev) {
        self.now = at;
        self.events += 1;
        match ev {
            Ev::Poll(c) => self.on_poll(c, at),
            Ev::Wake(c, round) => self.on_wake(c, round, at),
            Ev::Restart(c) => self.on_restart(c, at),
            Ev::NodeDown(n) => self.on_node_down(n, at),
            Ev::NodeUp(n) => self.on_node_up(n, at),
            Ev::Arrive(r) => self.on_arrive(r, at),
            Ev::Land(r) => self.on_land(r, at),
            Ev::Back(r) => self.on_back(r, at),
            Ev::Complete(r) => self.on_complete(r, at),
            Ev::KvDue(c, round) => self.on_kv_due(c, round, at),
            Ev::WorkerPoll(w) => self.step_worker(w, at),
            Ev::WorkerDue(w, round) => self.on_worker_due(w, round, at),
            Ev::WorkerWake(w, round) => self.on_worker_wake(w, round, at),
            Ev::WorkerRestart(w) => self.restart_worker(w, at),
            Ev::Measure => self.start_measuring(at),
            Ev::ServerFail(n) => self.fail_server(n, at),
            Ev::Detect(n) => self.on_detect(n, at),
        }
    }

    pub(crate) fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// The longest an operation started before the end may legitimately
    /// run past it: its retries stop at the operation timeout, and its last
    /// attempt then runs to its deadline plus a margin, after the longest
    /// back-off, with up to four of the longest pauses and the longest wait
    /// for its core.
    pub(crate) fn drain_ns(&self) -> u64 {
        let expiration = nanos(self.cfg.expiration);
        // A client thread sharing its core with b background threads may wait
        // b slices before it notices its deadline.
        let descheduled = self.background.iter().max().copied().unwrap_or(0) * self.p.time_slice_ns;
        let attempt = expiration
            .saturating_add(2 * self.margin_ns())
            .saturating_add(self.max_backoff_ns())
            .saturating_add(self.spec.chaos.max_pause_ns)
            .saturating_add(descheduled);
        nanos(self.cfg.retry.op_timeout).saturating_add(attempt.saturating_mul(4))
    }

    /// Operations still running at the horizon never finished: recorded as
    /// of unknown outcome (they may have taken effect) and counted.
    fn give_up_on_stuck(&mut self) {
        for c in 0..self.clients.len() {
            self.drop_attempt(c);
            if let Some(op) = self.clients[c].op.take() {
                if op.sweep {
                    self.sweep_failures.push(format!(
                        "{} of key {} by a lone client after the faults stopped never finished",
                        op.request.name(),
                        op.key
                    ));
                }
                self.stuck += 1;
                self.unknown += 1;
                self.failures += 1;
                self.stats += op.stats;
                self.record(c, &op, Err(Failure::Unknown), self.horizon);
            }
        }
    }

    /// Starts the final sweep: the faults and the background threads stop
    /// (clocks stay skewed), any request still in flight at the horizon is
    /// dropped (never landing, which A2 allows), and one client alone
    /// writes and then reads every key (the first client on a node that did
    /// not fail for good; a fresh process if a server did). (A client
    /// thread that background threads deschedule for longer than its
    /// operation timeout times out whatever the protocol's state: the sweep
    /// asks only what a lone client on a core of its own can do.)
    fn start_sweep(&mut self) {
        self.sweeping = true;
        if let Some(sv) = self.servers.as_ref() {
            // The baselines' tables count their reuse themselves.
            self.recycled_in_race += sv.reused();
        }
        // A CPU access in progress still completes (it crosses no network:
        // dropping its completion would leave a server worker waiting for
        // it for good); everything else in flight is dropped. The
        // background threads stop now, so an access whose thread waited for
        // its core behind them (up to a time slice per thread, longer than
        // the lone client's operation timeout) completes now, and every
        // core is free from now on (the copies' own cost, tens of ns, is
        // not charged).
        let now = self.now;
        let cpu: Vec<Scheduled> = std::mem::take(&mut self.queue)
            .into_iter()
            .filter(|s| {
                matches!(s.ev, Ev::Complete(r)
                    if self.reqs[r].as_ref().is_some_and(NicRequest::is_cpu))
            })
            .map(|s| Scheduled {
                at: s.at.min(now),
                ..s
            })
            .collect();
        self.queue.extend(cpu);
        self.cores.iter_mut().for_each(|c| *c = (*c).min(now));
        for c in 0..self.clients.len() {
            // Held completions are dropped with everything in flight.
            self.drop_late(c);
        }
        self.background.iter_mut().for_each(|b| *b = 0);
        self.spec.chaos = Chaos {
            skew: self.spec.chaos.skew,
            ..Chaos::NONE
        };
        for (n, d) in self.node_down.iter_mut().enumerate() {
            *d = self.lost_servers.is_failed(n);
        }
        self.link_failures.clear();
        for k in (0..self.spec.keys).rev() {
            self.sweep.push((k, Draw::Get));
            self.sweep.push((k, Draw::Put));
        }
        self.resume_workers(now);
        self.detect_all_failures(now);
        self.horizon = now.saturating_add(self.drain_ns().saturating_mul(2 * self.spec.keys + 1));
        let lost = &self.lost_servers;
        self.sweeper = (0..self.clients.len())
            .find(|&c| !lost.is_failed(usize::from(self.clients[c].state.id.node.0)))
            .unwrap_or(0);
        let c = self.sweeper;
        if self.lost_servers.any() && self.clients[c].down_since.is_none() {
            // Servers failed for good: the sweeper is a fresh process, whose
            // directory names where their regions went (a process that
            // lived through the failure would first meet the failed server,
            // an unknown outcome for a write, as it would in any client);
            // it starts once the recoveries have ended (`on_restart`).
            self.crash(c, now);
        }
        if self.clients[c].down_since.is_some() {
            self.schedule(now, Ev::Restart(c));
        } else {
            self.schedule(now, Ev::Poll(c));
        }
    }

    /// Cuckoo paths the baselines' servers moved over the run (their
    /// nodes' move epochs advance by two per path).
    /// Meganode searches Cell's clients sent to the server and did
    /// themselves so far ((0, 0) for another system; a restarted client's
    /// count starts again).
    pub(crate) fn cell_searches(&self) -> (u64, u64) {
        self.clients
            .iter()
            .filter_map(|cl| cl.cell.as_ref())
            .map(|m| {
                let s = &m.core().stats;
                (s.server_searches, s.client_searches)
            })
            .fold((0, 0), |(a, b), (s, c)| (a + s, b + c))
    }

    /// The share of the measured workload's meganode searches Cell's
    /// clients sent to the server, % (0 for another system).
    fn server_search_pct(&self) -> f64 {
        let (s, c) = self.cell_searches();
        let (s0, c0) = self.cell_searches_before;
        let (server, client) = (s.saturating_sub(s0), c.saturating_sub(c0));
        100.0 * server as f64 / (server + client).max(1) as f64
    }

    /// A counter of Cell's servers, summed over the nodes (0 for another
    /// system).
    fn cell_count(
        &self,
        counter: impl Fn(&nessie_cell::server::ServerCounters) -> &std::sync::atomic::AtomicU64,
    ) -> u64 {
        self.cell_servers
            .iter()
            .map(|st| counter(&st.counters).load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }

    fn cuckoo_moves(&self) -> u64 {
        let Some(epoch) = self.servers.as_ref().and_then(|sv| sv.epoch) else {
            return 0;
        };
        (0..self.spec.nodes)
            .map(|n| self.mem.word(NodeId(n), Region::Data, epoch).unwrap_or(0) / 2)
            .sum()
    }

    fn margin_ns(&self) -> u64 {
        nanos(self.cfg.deadline_margin)
    }

    /// The longest back-off between two attempts (the configuration's
    /// retry policy), ns.
    fn max_backoff_ns(&self) -> u64 {
        nanos(self.cfg.retry.max_backoff)
    }

    /// Writes the preloaded keys once, executing each request at once (no
    /// time).
    fn preload(&mut self) -> Result<(), SimError> {
        let n = self.clients.len() as u64;
        let preloaded = self.spec.keys * u64::from(self.spec.preload_pct) / 100;
        for k in 0..preloaded {
            // Every key a value of its own (a GET of another key's entry
            // shows), numbered with the workload's writes.
            let value = nessie_check::unique_value(
                &key_of(k, self.spec.key_size),
                k % n,
                self.next_value,
                self.spec.value_size as usize,
            );
            self.next_value += 1;
            let c = &mut self.clients[(k % n) as usize];
            let own = c.state.id.node;
            let mut m = PutMachine::put(&key_of(k, self.spec.key_size), &value);
            let now = Nanos(EPOCH / 2);
            let mut stored = true;
            loop {
                match m.poll(&mut c.state, now) {
                    Poll::Post(wrs) => {
                        for wr in wrs {
                            let id = wr.id;
                            let result = InFlight::new(wr, 0).run_to_end(
                                &mut self.mem,
                                own,
                                WordOrder::Ascending,
                            );
                            m.complete(nessie_protocol::Completion { id, result });
                        }
                    }
                    Poll::Pending => {
                        return Err(SimError::Spec(
                            "preload: a machine waits with nothing posted".into(),
                        ))
                    }
                    Poll::Done(Ok(_)) => break,
                    // A tight index may not take every key: the key starts
                    // absent (nothing of the failed PUT took effect).
                    Poll::Done(Err(Error::TableFull { .. } | Error::DataTableFull { .. })) => {
                        stored = false;
                        break;
                    }
                    Poll::Done(Err(e)) => return Err(e.into()),
                }
            }
            if stored {
                self.completed_ops += 1;
            }
            if self.spec.record_history && stored {
                self.history_stats.push(m.stats());
                let invoke = self.stamp(0);
                let response = self.stamp(0);
                self.history.push(Event {
                    client: (k % n) as usize,
                    request: Request::Put(key_of(k, self.spec.key_size), value.clone()),
                    ret: Ok(Response::Put(false)),
                    invoke,
                    response,
                });
            }
        }
        Ok(())
    }

    fn next_op(&mut self, c: usize, now: u64) -> bool {
        let (key, kind, sweep) = if self.preloading > 0 {
            // A server-driven system's preload: each client PUTs its share
            // of the keys, then waits for the measured workload.
            match self.clients[c].preload.pop() {
                Some(k) => (k, Draw::Put, false),
                None => return false,
            }
        } else if now < self.end {
            let spec = &self.spec;
            let cl = &mut self.clients[c];
            if let (SystemKind::Cell, false, Some(servers)) = (
                spec.system,
                spec.cell_run.clients_beside_servers,
                spec.cell_run.server_nodes,
            ) {
                if cl.state.id.node.0 < servers {
                    return false; // a server node's clients only preload
                }
            }
            if let Some(spike) = spec.spike {
                if cl.state.id.index >= spike.first_index {
                    // A spike client: idle outside the spike's window.
                    let from = self.measure_from + (spike.from_s * 1e9) as u64;
                    let until = self.measure_from + (spike.until_s * 1e9) as u64;
                    if now >= until {
                        return false;
                    }
                    if now < from {
                        self.schedule(from, Ev::Poll(c));
                        return false;
                    }
                    if cl.next_arrival != 0 && cl.next_arrival < from {
                        cl.next_arrival = from;
                    }
                }
            }
            if let Some(rate) = spec.arrival_rate_per_client {
                // Open loop: Poisson arrivals; an idle thread waits for the
                // next one, a busy one takes it as soon as it is free.
                let gap = |rng: &mut u64| {
                    let u = unit(xorshift64(rng));
                    (-(1.0 - u).ln() / rate * 1e9) as u64
                };
                if cl.next_arrival == 0 {
                    cl.next_arrival = now + gap(&mut cl.rng);
                }
                if cl.next_arrival > now {
                    let at = cl.next_arrival;
                    self.schedule(at, Ev::Poll(c));
                    return false;
                }
                cl.next_arrival += gap(&mut cl.rng).max(1);
            }
            if let Some(gen) = cl.ycsb.as_mut() {
                let rng = &mut cl.rng;
                let (key, kind) = match gen.next(&mut || unit(xorshift64(rng))) {
                    YcsbDraw::Read(k) => (k, Draw::Get),
                    YcsbDraw::Write(k) => (k, Draw::Put),
                    // From the key, as many keys on as entries asked for.
                    YcsbDraw::Scan(k, len) => (
                        k,
                        Draw::Scan {
                            to: k + u64::from(len),
                            limit: len as usize,
                        },
                    ),
                };
                (key, kind, false)
            } else {
                let draw = xorshift64(&mut cl.rng);
                let key = match &self.zipf {
                    Some(z) => z.key(unit(draw)),
                    None => draw % spec.keys,
                };
                let roll = xorshift64(&mut cl.rng) % 100;
                let kind = if roll < u64::from(spec.get_pct) {
                    Draw::Get
                } else if roll < u64::from(spec.get_pct + spec.delete_pct) {
                    Draw::Delete
                } else if spec.system == SystemKind::Cell
                    && roll < u64::from(spec.get_pct + spec.delete_pct + spec.scan_pct)
                {
                    // Up to four keys on, at most three entries: short scans
                    // that meet the limit and scans that end at their bound.
                    let span = 1 + xorshift64(&mut cl.rng) % 4;
                    let limit = 1 + (xorshift64(&mut cl.rng) % 3) as usize;
                    Draw::Scan {
                        to: key + span,
                        limit,
                    }
                } else {
                    Draw::Put
                };
                (key, kind, false)
            }
        } else if self.sweeping && c == self.sweeper {
            let Some((key, kind)) = self.sweep.pop() else {
                return false;
            };
            (key, kind, true)
        } else {
            return false;
        };
        let spec = &self.spec;
        // Every PUT writes a value of its own, so that a stale read shows.
        let value = nessie_check::unique_value(
            &key_of(key, spec.key_size),
            c as u64,
            self.next_value,
            spec.value_size as usize,
        );
        self.next_value += 1;
        let request = kind.request(key, value, spec.key_size);
        let preload = self.preloading > 0;
        let invoked = self.stamp(now);
        let cl = &mut self.clients[c];
        let budget = cl
            .jitter
            .clone()
            .map(|j| RetryBudget::new(cl.clock(now), &self.cfg.retry, j));
        cl.op = Some(CurrentOp {
            request,
            key,
            started: now,
            invoked,
            attempt_started: None,
            attempts: 0,
            backoff_ns: nanos(self.cfg.retry.initial_backoff).max(1),
            stats: OpStats::default(),
            sweep,
            budget,
            preload,
        });
        self.start_attempt(c);
        true
    }

    pub(crate) fn start_attempt(&mut self, c: usize) {
        let cl = &mut self.clients[c];
        let Some(op) = cl.op.as_mut() else {
            return;
        };
        op.attempts += 1;
        op.attempt_started = None;
        cl.commits.clear();
        cl.round += 1;
        cl.outstanding = 0;
        cl.awaiting = None;
        cl.due = None;
        let req = op.request.clone();
        if let (Some(cm), Some(dir)) = (cl.cell.as_ref(), self.dir.as_ref()) {
            cl.machine = Some(ClientMachine::Kv(KvMachine::Cell(
                cm.request(&req, 1),
                dir.clone(),
            )));
            return;
        }
        cl.machine = match (cl.kv_core.take(), op.budget.take()) {
            (Some(core), Some(budget)) => Some(ClientMachine::Kv(KvMachine::attempt(
                cl.state.id.node,
                core,
                budget,
                req,
                (!self.spec.server_faults.unbounded_rounds).then_some(self.cfg.retry.op_timeout),
            ))),
            // A baseline client whose core a failed machine took cannot go
            // on (its machines never fail: they report errors as results).
            (None, Some(_)) => None,
            _ => Some(ClientMachine::Nessie(Box::new(RequestMachine::new(&req)))),
        };
    }

    fn on_poll(&mut self, c: usize, now: u64) {
        if self.clients[c].down_since.is_some() {
            return;
        }
        let chaos = self.spec.chaos;
        if self.dice.chance(chaos.pause_permille) {
            // The client thread is descheduled before this step.
            self.counts.pauses += 1;
            let boundary = match self.deadline_boundaries(c) {
                Some(b) if chaos.boundary_pauses && self.dice.chance(500) => {
                    let b = b[self.dice.below(3) as usize];
                    let half = self.margin_ns() / 2;
                    Some(b.saturating_sub(half) + self.dice.below(2 * half + 1))
                        .filter(|&t| t > now)
                }
                _ => None,
            };
            let resume = boundary.unwrap_or_else(|| now + 1 + self.dice.below(chaos.max_pause_ns));
            self.schedule(resume, Ev::Poll(c));
            return;
        }
        if self.clients[c].op.is_some() && self.dice.chance(chaos.crash_permille) {
            self.crash(c, now);
            return;
        }
        if self.clients[c].op.is_none() && !self.next_op(c, now) {
            return;
        }
        self.step(c, now);
    }

    /// The timing boundaries of client `c`'s current attempt, in virtual
    /// time: the deadline less the margin (the last instant the protocol may
    /// post a mutation), the deadline, and the deadline plus the clock skew
    /// (when others may reclaim its entries). `None` before the attempt's
    /// first step.
    fn deadline_boundaries(&self, c: usize) -> Option<[u64; 3]> {
        let start = self.clients[c].op.as_ref()?.attempt_started?;
        let deadline = start.saturating_add(nanos(self.cfg.expiration));
        Some([
            deadline.saturating_sub(self.margin_ns()),
            deadline,
            deadline.saturating_add(nanos(self.cfg.clock_skew)),
        ])
    }

    /// The margin rule (docs/protocol.md §4), watched from outside the
    /// protocol: an attempt posts a mutation (a CAS or WRITE through the NIC:
    /// lock, install, commit, finish, unlink, rollback, recycle mark) only
    /// while its clock, read at `start` for this step, shows more than one
    /// deadline margin left, so that, by A2, it lands within a margin of its
    /// posting, by the deadline (up to the step's CPU time). The one
    /// exception the rule names: the CAS that settles a lost commit may
    /// abort the entry (`Writing -> Aborted`) at any time, i.e. an abort of a
    /// state word this attempt has posted a commit to. Breaches are reported
    /// ([`SimReport::margin_breaches`]).
    fn watch_margin(&mut self, c: usize, start: u64, wrs: &[WorkRequest]) {
        let bounds = self.deadline_boundaries(c);
        for wr in wrs {
            let (what, addr) = match &wr.op {
                Op::Cas { addr, new, .. } if addr.region == Region::Data => {
                    match StateWord::decode(*new).state {
                        DteState::Valid | DteState::Deleted => {
                            self.clients[c].commits.push(*addr);
                            ("a commit CAS", addr)
                        }
                        DteState::Aborted if self.clients[c].commits.contains(addr) => continue,
                        _ => ("a state CAS", addr),
                    }
                }
                Op::Cas { addr, .. } => ("an index CAS", addr),
                Op::Write { addr, .. } => ("a WRITE", addr),
                _ => continue,
            };
            let Some([last, deadline, _]) = bounds else {
                continue;
            };
            if start >= last && self.margin_breaches.len() < 16 {
                self.margin_breaches.push(format!(
                    "client {c} posted {what} to {addr:?} {} ns before its attempt's \
                     deadline (margin {} ns)",
                    deadline as i64 - start as i64,
                    self.margin_ns()
                ));
            }
        }
    }

    /// Polls the client's machine until it waits or finishes.
    pub(crate) fn step(&mut self, c: usize, now: u64) {
        // The thread runs once its core is free (of its other operations'
        // polls and of background threads' time slices), reads its clock
        // then, and spends one protocol step of CPU before anything goes out.
        // (Until then the step waits as an event of its own: a step run
        // early would hand the NICs requests stamped in the future, and a
        // NIC's queue must see its requests in time order.)
        let core = self.clients[c].core;
        let start = self.running_at(core, now.max(self.cores[core]));
        if start > now {
            self.schedule(start, Ev::Poll(c));
            return;
        }
        if self.clients[c].straggler && !self.clients[c].slowed {
            // A straggler is slow to get to its step (it reads its clock
            // only then: the protocol's time checks use the time a request
            // is posted).
            let slow = self.dice.below(self.spec.chaos.straggler_step_ns + 1);
            self.clients[c].slowed = true;
            self.cores[core] = start + slow;
            self.schedule(start + slow, Ev::Poll(c));
            return;
        }
        self.clients[c].slowed = false;
        if matches!(self.clients[c].machine, Some(ClientMachine::Kv(_))) {
            let cl = &mut self.clients[c];
            let t = start
                + if cl.local_round {
                    0
                } else {
                    self.p.cpu_step_ns
                };
            cl.local_round = false;
            self.cores[core] = t;
            self.step_kv(c, start, t);
            return;
        }
        let t = start + self.p.cpu_step_ns;
        self.cores[core] = t;
        if let Some(op) = self.clients[c].op.as_mut() {
            op.attempt_started.get_or_insert(start);
        }
        loop {
            let cl = &mut self.clients[c];
            let clock = cl.clock(start);
            let Some(ClientMachine::Nessie(m)) = cl.machine.as_mut() else {
                return;
            };
            match m.poll(&mut cl.state, clock) {
                Poll::Pending => return,
                Poll::Post(wrs) => {
                    cl.round += 1;
                    cl.outstanding = wrs.len();
                    let round = cl.round;
                    self.watch_margin(c, start, &wrs);
                    for wr in wrs {
                        let wr = self.clients[c].router.outbound(0, wr);
                        self.post(Actor::Client(c), wr, t);
                    }
                    self.release_late(c, t);
                    if self.spec.chaos.any() {
                        // Completions may never come: look again when the
                        // machine says it gives up on them.
                        self.wake_at_poll_timeout(c, round, t);
                    }
                }
                Poll::Done(r) => {
                    let stats = m.stats();
                    cl.machine = None;
                    cl.router.retire(0);
                    self.finish_attempt(c, r, stats, t);
                    return;
                }
            }
        }
    }

    fn on_wake(&mut self, c: usize, round: u64, now: u64) {
        let cl = &self.clients[c];
        if cl.down_since.is_some() || cl.round != round || cl.outstanding == 0 {
            return;
        }
        self.step(c, now);
        let cl = &self.clients[c];
        if cl.round == round && cl.outstanding > 0 && cl.machine.is_some() {
            // Not given up: the step waits for its core (a poll of its own
            // is scheduled, and gives up then), or the instant moved on.
            self.wake_at_poll_timeout(c, round, now);
        }
    }

    /// Schedules a wake-up of client `c`'s round `round` at the instant its
    /// machine gives up the completions the round misses (its
    /// `poll_timeout`, on the client's clock), if that is after `now` (an
    /// instant already passed is met by the poll the step scheduled).
    fn wake_at_poll_timeout(&mut self, c: usize, round: u64, now: u64) {
        let cl = &self.clients[c];
        let Some(ClientMachine::Nessie(m)) = cl.machine.as_ref() else {
            return;
        };
        let at = m
            .poll_timeout(&cl.state)
            .map(|give_up| give_up.0.saturating_sub(cl.clock_offset));
        if let Some(at) = at.filter(|&at| at > now) {
            self.schedule(at, Ev::Wake(c, round));
        }
    }

    fn finish_attempt(&mut self, c: usize, r: Result<Response, Error>, stats: OpStats, now: u64) {
        let max_backoff = self.max_backoff_ns();
        let cl = &mut self.clients[c];
        let Some(op) = cl.op.as_mut() else {
            return;
        };
        op.stats += stats;
        if let Err(e) = &r {
            let elapsed = std::time::Duration::from_nanos(now - op.started);
            if retries(&self.cfg.retry, e, op.attempts, elapsed) {
                let jitter = xorshift64(&mut cl.rng) % (op.backoff_ns / 2 + 1);
                let at = now + op.backoff_ns / 2 + jitter;
                op.backoff_ns = (op.backoff_ns * 2).min(max_backoff);
                self.start_attempt(c);
                self.schedule(at, Ev::Poll(c));
                return;
            }
        }
        self.complete_op(c, r, now);
    }

    /// Ends client `c`'s operation with `r` (all its attempts done): records
    /// it, and starts the client's next one.
    pub(crate) fn complete_op(&mut self, c: usize, r: Result<Response, Error>, now: u64) {
        let cl = &mut self.clients[c];
        let Some(op) = cl.op.take() else {
            return;
        };
        if op.preload {
            // Not measured; in the history all the same.
            self.record(c, &op, ret_of(&r), now);
            if self.clients[c].preload.is_empty() {
                self.preloading -= 1;
                if self.preloading == 0 {
                    self.schedule(now, Ev::Measure);
                }
            }
            self.schedule(now, Ev::Poll(c));
            return;
        }
        if let (true, Err(e)) = (op.sweep, &r) {
            if !matches!(e, Error::TableFull { .. } | Error::DataTableFull { .. }) {
                self.sweep_failures.push(format!(
                    "{} of key {} by a lone client after the faults stopped: {e}",
                    op.request.name(),
                    op.key
                ));
            }
        }
        self.stats += op.stats;
        if !op.sweep {
            self.recycled_in_race += op.stats.recycled;
        }
        let ret = ret_of(&r);
        if ret == Err(Failure::Unknown) && !matches!(op.request, Request::Scan { .. }) {
            self.unknown += 1;
        }
        if let Err(Error::Corrupt(m)) = &r {
            if self.corrupt.len() < 16 {
                self.corrupt
                    .push(format!("{}: {m}", self.clients[c].state.id));
            }
        }
        self.record(c, &op, ret, now);
        if !op.sweep {
            let from = op.started.max(self.measure_from);
            self.client_busy_ns += now.min(self.end).saturating_sub(from);
        }
        match r {
            Ok(_) => match op.request {
                Request::Get(_) => self.get_lat.push(now - op.started),
                Request::Put(..) => self.put_lat.push(now - op.started),
                Request::Delete(_) => self.deletes += 1,
                Request::Scan { .. } => {}
            },
            Err(_) => self.failures += 1,
        }
        self.schedule(now, Ev::Poll(c));
    }

    /// A stamp for the history at virtual time `now`: picoseconds
    /// (`now` x 1000), raised where needed to one more than the last stamp
    /// given, so that stamps follow the order in which the simulator
    /// processed the events. A response therefore precedes every invocation
    /// that follows it, even at one virtual instant (the checker would take
    /// equal stamps for concurrent operations and miss a client's stale read
    /// of its own write).
    fn stamp(&mut self, now: u64) -> u64 {
        self.last_stamp = (now.saturating_mul(1000)).max(self.last_stamp + 1);
        self.last_stamp
    }

    /// Records client `c`'s finished operation `op` with `ret`: a scan in
    /// the history of scans, for Cell's range-aware checker (the per-key
    /// one has no scans), every other operation in the history.
    fn record(&mut self, c: usize, op: &CurrentOp, ret: Ret, now: u64) {
        let scan = matches!(op.request, Request::Scan { .. });
        if scan {
            self.completed_scans += 1;
        } else {
            self.completed_ops += 1;
        }
        if !self.spec.record_history {
            return;
        }
        let response = self.stamp(now);
        let event = Event {
            client: c,
            request: op.request.clone(),
            ret,
            invoke: op.invoked,
            response,
        };
        if scan {
            self.scans.push(event);
        } else {
            self.history_stats.push(op.stats);
            self.history.push(event);
        }
    }

    /// Client `c`'s running attempt is gone (a crash, or given up at the
    /// horizon): its machine is dropped, its outstanding requests and round
    /// forgotten (their completions are stale). Leaks the attempt counted
    /// are leaks all the same (crate::audit).
    fn drop_attempt(&mut self, c: usize) {
        let cl = &mut self.clients[c];
        if let Some(ClientMachine::Nessie(m)) = cl.machine.take() {
            self.stats.leaked += m.stats().leaked;
        }
        cl.router.retire(0);
        cl.outstanding = 0;
        cl.round += 1;
    }

    /// The client crashes: its machine and everything it knew are gone; the
    /// requests it posted still travel (and may land). Its operation's
    /// outcome is unknown.
    pub(crate) fn crash(&mut self, c: usize, now: u64) {
        let cl = &mut self.clients[c];
        if cl.down_since.is_some() {
            return;
        }
        cl.down_since = Some(now);
        cl.incarnation += 1;
        self.drop_attempt(c);
        self.drop_late(c);
        self.counts.crashes += 1;
        if let Some(op) = self.clients[c].op.take() {
            self.stats += op.stats;
            self.unknown += 1;
            self.failures += 1;
            self.record(c, &op, Err(Failure::Unknown), now);
        }
        let after = self.spec.chaos.restart_after_ns.max(self.margin_ns() + 1);
        self.schedule(now + after, Ev::Restart(c));
    }

    /// A crashed client comes back as a fresh process (no sooner than one
    /// deadline margin after its crash, and not while its node is out).
    fn on_restart(&mut self, c: usize, now: u64) {
        let Some(since) = self.clients[c].down_since else {
            return;
        };
        let node = usize::from(self.clients[c].state.id.node.0);
        if self.node_down[node] {
            return; // the node's return restarts it
        }
        let earliest = since + self.margin_ns() + 1;
        if now < earliest {
            self.schedule(earliest, Ev::Restart(c));
            return;
        }
        if self.sweeping && c == self.sweeper && self.lost_servers.recovering() {
            // The sweep's fresh process starts once the faults stopped, and
            // a recovery still moving a failed server's regions is one of
            // them: its directory would name the failed server (Cell's
            // client then meets it: an unknown outcome for a write, as any
            // process that read the directory before the move would).
            self.schedule(now + SWEEPER_WAIT_NS, Ev::Restart(c));
            return;
        }
        let id = self.clients[c].state.id;
        let Ok(mut state) = ClientState::new(self.cfg.clone(), id) else {
            return; // the configuration was validated at the start
        };
        state.faults = self.spec.faults;
        if let Some(maker) = &self.core_maker {
            // A baseline client's core died with its process (it was inside
            // the machine of the operation it crashed in): the new process
            // makes its own, its sequence numbers drawn afresh as the
            // threaded client draws them from its clock.
            let g = u32::try_from(c).unwrap_or(u32::MAX);
            let entropy = self.spec.seed ^ now.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            self.clients[c].kv_core = Some(maker.core(g, entropy, true));
        }
        if let Some(maker) = &self.cell_maker {
            // Likewise a Cell client: caches, selector and request channel
            // died with the process.
            let entropy = self.spec.seed ^ now.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let Ok(machines) = maker.machines(id, entropy, true) else {
                return; // the configuration was validated at the start
            };
            self.clients[c].cell = Some(machines);
        }
        let router = router(&self.spec);
        let cl = &mut self.clients[c];
        cl.state = state;
        cl.router = router;
        cl.down_since = None;
        self.schedule(now, Ev::Poll(c));
    }

    /// Draws the run's node outages and failed queue pairs in advance (once
    /// the measured workload starts).
    pub(crate) fn plan_faults(&mut self) {
        self.plan_outages();
        self.plan_link_failures();
        self.plan_server_failures();
    }

    /// Draws the node outages of the whole run in advance.
    fn plan_outages(&mut self) {
        let chaos = self.spec.chaos;
        if chaos.outage_permille == 0 {
            return;
        }
        let mut at = self.measure_from;
        let mut busy_until = vec![0u64; self.node_down.len()];
        while at < self.end {
            if self.dice.chance(chaos.outage_permille) {
                let n = self.dice.below(self.node_down.len() as u64) as usize;
                if at >= busy_until[n] {
                    let down = at + self.dice.below(1_000_000);
                    let up = down + chaos.outage_ns.max(self.margin_ns() + 1);
                    busy_until[n] = up + 1;
                    self.schedule(down, Ev::NodeDown(n));
                    self.schedule(up, Ev::NodeUp(n));
                }
            }
            at += 1_000_000;
        }
    }

    /// Draws the queue pairs that fail during the run in advance: per
    /// simulated millisecond, at [`Chaos::link_failure_permille`], one
    /// client's or server worker's queue pair to one node, down for
    /// [`Chaos::link_down_ns`].
    fn plan_link_failures(&mut self) {
        let chaos = self.spec.chaos;
        if chaos.link_failure_permille == 0 {
            return;
        }
        let workers = self.servers.as_ref().map_or(0, |s| s.workers.len());
        let actors = (self.clients.len() + workers) as u64;
        let nodes = self.node_down.len() as u64;
        let mut at = self.measure_from;
        while at < self.end {
            if self.dice.chance(chaos.link_failure_permille) {
                let a = self.dice.below(actors) as usize;
                let actor = if a < self.clients.len() {
                    Actor::Client(a)
                } else {
                    Actor::Worker(a - self.clients.len())
                };
                let node = self.dice.below(nodes) as usize;
                let down = at + self.dice.below(1_000_000);
                self.counts.link_failures += 1;
                self.link_failures.push(crate::nic::LinkFailure {
                    actor,
                    node,
                    at: down,
                    until: down + chaos.link_down_ns.max(1),
                });
            }
            at += 1_000_000;
        }
    }

    fn on_node_down(&mut self, n: usize, now: u64) {
        self.node_down[n] = true;
        self.counts.outages += 1;
        self.crash_clients_on(n, now);
    }

    /// Every client of node `n` crashes at `now` (its node went away).
    pub(crate) fn crash_clients_on(&mut self, n: usize, now: u64) {
        for c in 0..self.clients.len() {
            if usize::from(self.clients[c].state.id.node.0) == n {
                self.crash(c, now);
            }
        }
    }

    fn on_node_up(&mut self, n: usize, now: u64) {
        if self.lost_servers.is_failed(n) {
            return; // a server that failed for good never comes back
        }
        self.node_down[n] = false;
        for c in 0..self.clients.len() {
            if usize::from(self.clients[c].state.id.node.0) == n {
                self.schedule(now, Ev::Restart(c));
            }
        }
    }

    /// Delivers a completion to the client that posted it: nothing if the
    /// client crashed since (another incarnation); to the current round,
    /// counted against it; or, if its round was given up, as a stale
    /// completion, which a Nessie client's request-id routing takes to the
    /// machine that posted it or drops (a baseline's client drops it).
    pub(crate) fn deliver(&mut self, req: NicRequest, now: u64) {
        let c = match req.actor {
            Actor::Client(c) => c,
            Actor::Worker(w) => return self.deliver_worker(w, req, now),
        };
        // A completion of an earlier incarnation never reaches the new
        // process (its queue pairs are new).
        let cl = &mut self.clients[c];
        if cl.down_since.is_some() || req.incarnation != cl.incarnation {
            return;
        }
        let completion = nessie_protocol::Completion {
            id: req.wr.id,
            result: req
                .result
                .unwrap_or(Err(nessie_protocol::FabricError::Transport(
                    "simulator: no result".into(),
                ))),
        };
        if req.round != cl.round {
            // A completion of a round given up (at its deadline; late by a
            // delay, or held back by a late-completion fault): not counted
            // against the current round. A Nessie client's core routes it
            // by request id to the machine that posted it (which ignores a
            // request of a round it has left) or drops it if that machine
            // is done; a baseline's client drops it.
            if self.spec.system == SystemKind::Nessie {
                self.counts.stale_completions += 1;
                cl.hand_in(completion);
            }
            return;
        }
        if self.dice.chance(self.spec.chaos.crash_permille) && self.clients[c].op.is_some() {
            self.crash(c, now);
            return;
        }
        let cl = &mut self.clients[c];
        cl.hand_in(completion);
        if cl.outstanding > 0 {
            cl.outstanding -= 1;
            if cl.outstanding == 0 {
                self.schedule(now, Ev::Poll(c));
            }
        }
    }

    fn report(&mut self, wall: std::time::Duration) -> SimReport {
        fn avg(v: &[u64]) -> f64 {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<u64>() as f64 / v.len() as f64 / 1000.0
            }
        }
        fn p99(v: &mut [u64]) -> f64 {
            if v.is_empty() {
                return 0.0;
            }
            v.sort_unstable();
            v[((v.len() - 1) as f64 * 0.99).round() as usize] as f64 / 1000.0
        }
        let ops = (self.get_lat.len() + self.put_lat.len()) as u64 + self.deletes;
        let n = ops.max(1) as f64;
        let lock_waits = self.servers.as_ref().map_or(0, |sv| sv.lock_waits);
        let (server_ops, busy, scan, workers, server_requests, server_errors) = match &self.servers
        {
            Some(sv) => (
                sv.stats.cas(),
                sv.workers.iter().map(|w| w.busy_ns).sum::<u64>(),
                sv.workers.iter().map(|w| w.scan_ns).sum::<u64>(),
                sv.workers.len() as f64,
                sv.requests,
                sv.counters
                    .errors
                    .lock()
                    .map(|e| e.iter().take(16).map(|e| e.to_string()).collect())
                    .unwrap_or_default(),
            ),
            None => (0, 0, 0, 0.0, 0, Vec::new()),
        };
        let window = (self.spec.seconds * 1e9).max(1.0);
        // The busiest node's share of the window, per NIC resource.
        let busiest =
            |f: fn(&Nic) -> u64| 100.0 * self.nics.iter().map(f).max().unwrap_or(0) as f64 / window;
        SimReport {
            system: self.spec.system,
            nic_tx_op_busy_pct: busiest(|n| n.tx_op_ns),
            client_busy_pct: 100.0 * self.client_busy_ns as f64
                / (self.clients.len().max(1) as f64 * window),
            link_busy_pct: busiest(|n| n.tx_wire_ns),
            nic_rx_busy_pct: busiest(|n| n.rx_ns),
            nic_ops_per_op: (self.stats.fabric_ops() + server_ops) as f64 / n,
            server_busy_pct: if workers > 0.0 {
                100.0 * busy as f64 / (workers * window)
            } else {
                0.0
            },
            server_scan_pct: if workers > 0.0 {
                100.0 * scan as f64 / (workers * window)
            } else {
                0.0
            },
            server_requests,
            server_lock_waits: lock_waits,
            server_errors,
            ops,
            gets: self.get_lat.len() as u64,
            puts: self.put_lat.len() as u64,
            deletes: self.deletes,
            failures: self.failures,
            unknown: self.unknown,
            stuck: self.stuck,
            sweep_failures: std::mem::take(&mut self.sweep_failures),
            recovery_failures: self.recovery_failures(),
            unreachable_meganodes: self.unreachable_meganodes(),
            ops_per_sec: ops as f64 / self.spec.seconds,
            get_avg_us: avg(&self.get_lat),
            get_p99_us: p99(&mut self.get_lat),
            put_avg_us: avg(&self.put_lat),
            put_p99_us: p99(&mut self.put_lat),
            bytes_per_op: self.stats.fabric_bytes as f64 / n,
            round_trips_per_op: self.stats.round_trips as f64 / n,
            migrations: self.stats.migrations
                + self.cuckoo_moves()
                + self.cell_count(|c| &c.meganode_splits),
            node_splits: self.cell_count(|c| &c.node_splits),
            measured_from_ns: self.measure_from,
            server_search_pct: self.server_search_pct(),
            recoveries: self.stats.recoveries,
            events: self.events,
            chaos: self.counts,
            corrupt: std::mem::take(&mut self.corrupt),
            margin_breaches: std::mem::take(&mut self.margin_breaches),
            marked_linked: std::mem::take(&mut self.marked_linked),
            wall_seconds: wall.as_secs_f64(),
            events_per_wall_sec: self.events as f64 / wall.as_secs_f64().max(1e-9),
            history: std::mem::take(&mut self.history),
            completed_ops: self.completed_ops,
            completed_scans: self.completed_scans,
            scans: std::mem::take(&mut self.scans),
            recycled_in_race: self.recycled_in_race,
            history_stats: std::mem::take(&mut self.history_stats),
            dtes: None,
        }
    }
}

#[cfg(test)]
mod key_tests {
    use super::key_of;

    /// Key numbers name distinct keys, in their order (Cell's scans), at
    /// every key size the simulator takes, the 8 bytes of RCuckoo's
    /// setting included.
    #[test]
    fn key_numbers_name_distinct_ordered_keys_at_every_size() {
        for size in [1, 8, 12, 16, 32] {
            let keys: Vec<Vec<u8>> = (0..2_000u64)
                .chain([1 << 39, (1 << 39) + 1, 999_999_999_999_999])
                .map(|k| key_of(k, size))
                .collect();
            assert!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "{size} B keys: not distinct and ordered"
            );
            assert!(keys.iter().all(|k| k.len() == size.max(8) as usize));
        }
    }
}
