//! The discrete-event engine: the clients as their real machines (Nessie's
//! here; the other systems' clients in `kv.rs` and their server workers in
//! `servers.rs`), in virtual time, over a hardware
//! [`Profile`].
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
//! With [`Chaos`] the same engine injects the environment's
//! faults (the fault swarm, [`crate::swarm`](mod@crate::swarm)): the network side lives in
//! [`crate::network`], the clients' side (pauses, crashes, restarts,
//! outages) here.
//!
//! Simplifications, stated: a transfer executes whole at one instant (the
//! torn reads of multi-word transfers are the model checker's business, not
//! a performance question); each client thread has a core of its own (no
//! CPU contention between client threads; the operations in flight of one
//! thread, its CPU copies and background threads do share it).
//!
//! The engine is owned parts, each a type in a file of its own: the
//! `Events` (virtual time and the queue, `events.rs`), the `Cluster`
//! (memory, nodes up or down, cores, `cluster.rs`), the clients (`SimClient`,
//! here), the `Network` (NICs and what travels between them, `nic.rs`), the
//! `ChaosState` (the faults' dice and counts, `chaos_state.rs`), the
//! `ServerSide` (a server-driven system's workers, Cell's servers and their
//! failures, `server_side.rs`), the `Workload` (what is drawn and how it
//! ended, `workload.rs`) and the `Checks` (the watches, each recording a
//! typed finding, `checks.rs`). The event handlers are `impl Engine` blocks,
//! one file per concern: this one holds the event loop; `setup` builds a
//! cluster, `workload` draws operations (and runs the preload and the final
//! sweep), `attempt` runs an operation's attempts, `client_faults` the
//! clients' faults and `report` what a run reports; the network's, chains',
//! other systems' and servers' handlers are in the crate root (`network`,
//! `chain`, `kv`, `servers`, `server_failure`).

use nessie_protocol::rng::{unit, xorshift64};
use std::sync::Arc;
use std::time::Instant;

use nessie_baselines::{Jitter, RetryBudget};
use nessie_check::memory::{InFlight, Memory, WordOrder};
use nessie_check::{ret_of, Event, Failure, Ret};
use nessie_protocol::internals::retries;
use nessie_protocol::internals::Router;
use nessie_protocol::layout::StateWord;
use nessie_protocol::pipeline::RequestMachine;
use nessie_protocol::{
    ClientId, ClientState, Config, DteState, Error, Machine, Nanos, NodeId, Op, OpStats, Poll,
    PutMachine, Region, RemoteAddr, WorkRequest,
};
use nessie_protocol::{Request, Response};

use crate::chaos::{Chaos, Dice};
use crate::checks::Checks;
use crate::nic::{Network, Nic, NicRequest};
use crate::profile::Profile;
use crate::server_side::ServerSide;
use crate::spec::{config, ChaosCounts, SimError, SimReport, SimSpec};
use crate::systems::{Actor, KvMachine};
use crate::zipf::ScrambledZipfian;
use nessie_baselines::AnyCore;
use nessie_systems::SystemKind;
use nessie_workload::ycsb::{YcsbDraw, YcsbGen, MAX_SCAN_LEN};

mod attempt;
mod chaos_state;
mod client_faults;
mod cluster;
mod events;
mod phases;
mod report;
mod setup;
mod workload;

pub(crate) use chaos_state::ChaosState;
pub(crate) use cluster::Cluster;
pub(crate) use events::{Ev, Events};
pub use phases::{GrowthPhase, PhaseFigures};
pub(crate) use workload::Workload;

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

pub(crate) struct Engine {
    /// The hardware the run simulates.
    pub(crate) p: Profile,
    /// What the run simulates (its faults held back during a preload).
    pub(crate) spec: SimSpec,
    /// The protocol's configuration.
    pub(crate) cfg: Arc<Config>,
    /// Virtual time and the events to come.
    pub(crate) events: Events,
    /// The machines: memory, nodes up or down, cores.
    pub(crate) cluster: Cluster,
    /// The client threads, each running its system's machines.
    pub(crate) clients: Vec<SimClient>,
    /// The NICs and what travels between them.
    pub(crate) net: Network,
    /// The faults injected, and their dice.
    pub(crate) chaos: ChaosState,
    /// A server-driven system's servers (and Cell's failed ones).
    pub(crate) server_side: ServerSide,
    /// The operations drawn, and how they ended.
    pub(crate) workload: Workload,
    /// The checkers watching the run.
    pub(crate) checks: Checks,
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

/// Runs a simulation.
pub fn simulate(spec: &SimSpec) -> Result<SimReport, SimError> {
    let wall = Instant::now();
    let mut e = Engine::new(spec)?;
    if e.spec.system != SystemKind::Nessie {
        e.start_servers();
    } else {
        e.preload()?;
    }
    for c in 0..e.clients.len() {
        e.events.schedule(EPOCH, Ev::Poll(c));
    }
    e.start_agents();
    if e.workload.preloading > 0 {
        // A server-driven system preloads by its clients' own PUTs, in
        // virtual time: without faults, as Nessie's preload (at once, before
        // time starts) is. The faults start with the measured workload.
        e.chaos.held = Some(e.spec.chaos);
        e.spec.chaos = Chaos {
            skew: e.spec.chaos.skew,
            ..Chaos::NONE
        };
    } else {
        e.plan_faults();
    }
    e.events.horizon = if e.workload.preloading > 0 {
        // The measured workload starts once the preload is done; a preload
        // that takes longer than every operation's longest is a failure.
        let per_client = spec.keys.div_ceil(e.clients.len() as u64) + 1;
        EPOCH.saturating_add(e.drain_ns().saturating_mul(per_client))
    } else {
        e.events.end + e.drain_ns()
    };
    loop {
        match e.next_event() {
            Some((at, ev)) => e.handle(at, ev),
            None => {
                e.give_up_on_stuck();
                if e.spec.final_sweep && !e.workload.sweep.running {
                    e.start_sweep();
                    continue;
                }
                break;
            }
        }
    }
    // At quiescence, no data table entry leaked beyond what the protocol
    // admits (crate::audit).
    let dtes = e.audit_dtes(
        e.events.now,
        e.workload.stats.leaked,
        e.chaos.counts.crashes + e.chaos.counts.lease_losses + e.workload.tally.stuck,
    );
    let mut report = e.report(wall.elapsed());
    report.dtes = dtes;
    Ok(report)
}

impl Engine {
    /// The next event due by the horizon (`None`: the queue is empty or the
    /// horizon has come; an event past it stays queued: the final sweep
    /// keeps a CPU access's completion).
    pub(crate) fn next_event(&mut self) -> Option<(u64, Ev)> {
        self.events.next()
    }

    /// The earliest time from `t` at which the thread of `core` has its
    /// core ([`Cluster::running_at`]).
    pub(crate) fn running_at(&self, core: usize, t: u64) -> u64 {
        self.cluster.running_at(core, t, self.p.time_slice_ns)
    }

    /// Processes one event.
    pub(crate) fn handle(&mut self, at: u64, ev: Ev) {
        self.events.advance(at);
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
            Ev::Agent(n) => self.on_agent(n, at),
        }
    }

    /// Node `n`'s agent makes a pass (atomically: its CPU and loopback, off
    /// every request's path) unless the node is down, and the next one is
    /// due a period later while anything but the agents is still to happen.
    fn on_agent(&mut self, n: usize, now: u64) {
        if !self.cluster.node_down[n] {
            if let Some(agent) = self.cluster.agents.get_mut(n) {
                nessie_check::pure::agent_pass(&self.cfg, &mut self.cluster.mem, agent, now);
            }
        }
        if self.events.any_but(|ev| matches!(ev, Ev::Agent(_))) {
            self.events
                .schedule(now + cluster::AGENT_PERIOD_NS, Ev::Agent(n));
        }
    }

    /// Schedules every node's agent now (at the start, and when the final
    /// sweep has dropped what was scheduled), if it has clients without
    /// storage to serve.
    pub(crate) fn start_agents(&mut self) {
        if self.cfg.pure_clients_per_node > 0 {
            for n in 0..usize::from(self.cfg.nodes) {
                self.events.schedule(self.events.now, Ev::Agent(n));
            }
        }
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
        let descheduled =
            self.cluster.background.iter().max().copied().unwrap_or(0) * self.p.time_slice_ns;
        let attempt = expiration
            .saturating_add(2 * self.margin_ns())
            .saturating_add(self.max_backoff_ns())
            .saturating_add(self.spec.chaos.max_pause_ns)
            .saturating_add(descheduled);
        nanos(self.cfg.retry.op_timeout).saturating_add(attempt.saturating_mul(4))
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
