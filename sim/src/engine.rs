//! The discrete-event engine: Nessie's clients as their real machines, in
//! virtual time, over a hardware [`Profile`].
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
//! from a seeded generator).
//!
//! Simplifications, stated: a transfer executes whole at one instant (the
//! torn reads of multi-word transfers are the model checker's business, not
//! a performance question); each client thread has a core of its own (no
//! CPU contention between clients); no faults.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nessie_model::memory::{InFlight, Memory, WordOrder};
use nessie_model::{Event, KvOp, KvRet};
use nessie_protocol::pipeline::{Request, RequestMachine, Response};
use nessie_protocol::{
    ClientId, ClientState, Completion, Config, Error, Faults, Machine, Nanos, NodeId, Op, OpStats,
    Poll, PutMachine, WorkRequest,
};
use serde::Serialize;

use crate::profile::Profile;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimSpec {
    /// The hardware.
    pub profile: Profile,
    /// Nodes.
    pub nodes: u16,
    /// Client threads per node.
    pub clients_per_node: u16,
    /// Distinct keys (preloaded).
    pub keys: u64,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes.
    pub value_size: u32,
    /// Percentage of GETs (the rest are PUTs of existing keys).
    pub get_pct: u32,
    /// Simulated seconds of measured workload.
    pub seconds: f64,
    /// Index load factor after the preload.
    pub load_factor: f64,
    /// Seed of every generator.
    pub seed: u64,
    /// Record every operation's invocation and response (in virtual time)
    /// for the linearizability checker ([`SimReport::history`]).
    pub record_history: bool,
    /// Test-only protocol fault switches for every client.
    pub faults: Faults,
    /// Data table entries per client (`None`: the preload share twice over
    /// plus room for one expiration period of updates).
    pub entries_per_client: Option<u32>,
}

/// What a run measured (all figures in simulated time except the last two).
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    /// Operations completed.
    pub ops: u64,
    /// GETs completed.
    pub gets: u64,
    /// PUTs completed.
    pub puts: u64,
    /// Operations that ended in an error.
    pub failures: u64,
    /// Operations per simulated second.
    pub ops_per_sec: f64,
    /// Average GET latency, µs.
    pub get_avg_us: f64,
    /// 99th-percentile GET latency, µs.
    pub get_p99_us: f64,
    /// Average PUT latency, µs.
    pub put_avg_us: f64,
    /// 99th-percentile PUT latency, µs.
    pub put_p99_us: f64,
    /// Fabric bytes per operation (requests and responses' payloads).
    pub bytes_per_op: f64,
    /// Remote round trips per operation.
    pub round_trips_per_op: f64,
    /// Events processed.
    pub events: u64,
    /// Wall-clock seconds the simulation took (not deterministic).
    pub wall_seconds: f64,
    /// Events per wall-clock second (not deterministic).
    pub events_per_wall_sec: f64,
    /// The history, if recorded (each PUT writes a value unique to it).
    #[serde(skip)]
    pub history: Vec<Event>,
}

impl SimReport {
    /// The deterministic part, for comparing runs.
    pub fn fingerprint(&self) -> (u64, u64, u64, u64, u64, String) {
        (
            self.ops,
            self.gets,
            self.puts,
            self.failures,
            self.events,
            format!(
                "{:.6} {:.6} {:.6} {:.6} {:.6}",
                self.get_avg_us,
                self.get_p99_us,
                self.put_avg_us,
                self.put_p99_us,
                self.bytes_per_op
            ),
        )
    }
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The specification is out of range.
    #[error("invalid simulation: {0}")]
    Spec(String),
    /// The protocol refused the configuration or the preload failed.
    #[error("protocol: {0}")]
    Protocol(#[from] Error),
}

/// Virtual time starts here (ns), so that no deadline is near zero.
const EPOCH: u64 = 1_000_000_000;

struct CurrentOp {
    get: bool,
    key: u64,
    value: Vec<u8>,
    started: u64,
    attempts: u32,
    backoff_ns: u64,
    stats: OpStats,
}

struct SimClient {
    state: ClientState,
    machine: Option<RequestMachine>,
    op: Option<CurrentOp>,
    outstanding: usize,
    rng: u64,
}

/// A NIC request on its way through the simulated fabric.
struct NicRequest {
    client: usize,
    wr: WorkRequest,
    src: usize,
    dst: usize,
    resp_bytes: u64,
    result: Option<Result<nessie_protocol::OpOutput, nessie_protocol::FabricError>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    Poll(usize),
    Arrive(usize),
    Land(usize),
    Back(usize),
    Complete(usize),
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
struct Nic {
    tx_free: u64,
    rx_free: u64,
}

struct Engine {
    p: Profile,
    spec: SimSpec,
    mem: Memory,
    clients: Vec<SimClient>,
    nics: Vec<Nic>,
    reqs: Vec<Option<NicRequest>>,
    free_reqs: Vec<usize>,
    queue: BinaryHeap<Scheduled>,
    seq: u64,
    events: u64,
    end: u64,
    get_lat: Vec<u64>,
    put_lat: Vec<u64>,
    failures: u64,
    stats: OpStats,
    history: Vec<Event>,
    next_value: u64,
}

fn key_of(k: u64, size: u32) -> Vec<u8> {
    let mut v = format!("k{k:015}").into_bytes();
    v.resize(size.max(8) as usize, b'.');
    v
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// The configuration a spec implies.
pub fn config(spec: &SimSpec) -> Result<Config, SimError> {
    if spec.nodes == 0 || spec.clients_per_node == 0 || spec.keys == 0 || spec.seconds <= 0.0 {
        return Err(SimError::Spec(
            "nodes, clients, keys and seconds must be positive".into(),
        ));
    }
    if !(spec.load_factor > 0.0 && spec.load_factor <= 0.9) {
        return Err(SimError::Spec("the load factor must be in (0, 0.9]".into()));
    }
    let clients = u64::from(spec.nodes) * u64::from(spec.clients_per_node);
    let slots = (spec.keys as f64 / spec.load_factor / f64::from(spec.nodes)).ceil() as u32;
    // Each client writes locally: its preload share, plus the entries its
    // updates allocate within one expiration period (recycled after it).
    // Spare entries for updates within one expiration period: plenty for
    // small values, fewer for large ones (each update takes far longer).
    let spare = ((4u32 << 20) / spec.value_size.max(1)).clamp(32, 1024);
    let per_client = spec
        .entries_per_client
        .unwrap_or((spec.keys.div_ceil(clients) as u32) * 2 + spare);
    let cfg = Config {
        nodes: spec.nodes,
        index_slots_per_node: slots.max(16),
        dtes_per_node: per_client * u32::from(spec.clients_per_node),
        clients_per_node: spec.clients_per_node,
        max_key_len: spec.key_size.max(8),
        max_value_len: spec.value_size.max(1),
        expiration: Duration::from_millis(20),
        clock_skew: Duration::from_micros(10),
        deadline_margin: Duration::from_millis(1),
        ..Config::default()
    };
    cfg.validate().map_err(Error::from)?;
    let topo = cfg.topology();
    let bytes = u64::from(topo.nodes)
        * (u64::from(topo.index_slots_per_node) * 8 + topo.data_bytes_per_node);
    if bytes > 8 << 30 {
        return Err(SimError::Spec(format!(
            "the simulated memory would take {} MiB: fewer keys, clients or a smaller value size",
            bytes >> 20
        )));
    }
    Ok(cfg)
}

/// Runs a simulation.
pub fn simulate(spec: &SimSpec) -> Result<SimReport, SimError> {
    let wall = Instant::now();
    let cfg = Arc::new(config(spec)?);
    let mut clients = Vec::new();
    for n in 0..spec.nodes {
        for i in 0..spec.clients_per_node {
            let id = ClientId {
                node: NodeId(n),
                index: i,
            };
            let mut state = ClientState::new(cfg.clone(), id)?;
            state.faults = spec.faults;
            clients.push(SimClient {
                state,
                machine: None,
                op: None,
                outstanding: 0,
                rng: spec.seed ^ (clients.len() as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            });
        }
    }
    let mut e = Engine {
        p: spec.profile.clone(),
        spec: spec.clone(),
        mem: Memory::new(&cfg),
        nics: vec![Nic::default(); usize::from(spec.nodes)],
        clients,
        reqs: Vec::new(),
        free_reqs: Vec::new(),
        queue: BinaryHeap::new(),
        seq: 0,
        events: 0,
        end: EPOCH + (spec.seconds * 1e9) as u64,
        get_lat: Vec::new(),
        put_lat: Vec::new(),
        failures: 0,
        stats: OpStats::default(),
        history: Vec::new(),
        next_value: 0,
    };
    e.preload()?;
    for c in 0..e.clients.len() {
        e.schedule(EPOCH, Ev::Poll(c));
    }
    while let Some(s) = e.queue.pop() {
        e.events += 1;
        match s.ev {
            Ev::Poll(c) => e.on_poll(c, s.at),
            Ev::Arrive(r) => e.on_arrive(r, s.at),
            Ev::Land(r) => e.on_land(r, s.at),
            Ev::Back(r) => e.on_back(r, s.at),
            Ev::Complete(r) => e.on_complete(r, s.at),
        }
    }
    Ok(e.report(wall.elapsed()))
}

impl Engine {
    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// Writes every key once, executing each request at once (no time).
    fn preload(&mut self) -> Result<(), SimError> {
        let n = self.clients.len() as u64;
        let value = vec![b'v'; self.spec.value_size as usize];
        for k in 0..self.spec.keys {
            let c = &mut self.clients[(k % n) as usize];
            let own = c.state.id.node;
            let mut m = PutMachine::put(&key_of(k, self.spec.key_size), &value);
            let now = Nanos(EPOCH / 2);
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
                            m.complete(Completion { id, result });
                        }
                    }
                    Poll::Pending => {
                        return Err(SimError::Spec(
                            "preload: a machine waits with nothing posted".into(),
                        ))
                    }
                    Poll::Done(r) => {
                        r?;
                        break;
                    }
                }
            }
            if self.spec.record_history {
                self.history.push(Event {
                    client: (k % n) as usize,
                    key: key_of(k, self.spec.key_size),
                    op: KvOp::Put(value.clone()),
                    ret: KvRet::Put(false),
                    invoke: 2 * k,
                    response: 2 * k + 1,
                });
            }
        }
        Ok(())
    }

    fn next_op(&mut self, c: usize, now: u64) -> bool {
        if now >= self.end {
            return false;
        }
        let spec = &self.spec;
        let cl = &mut self.clients[c];
        let key = xorshift(&mut cl.rng) % spec.keys;
        let get = (xorshift(&mut cl.rng) % 100) < u64::from(spec.get_pct);
        // Every PUT writes a value of its own, so that a stale read shows.
        let mut value = vec![b'w'; spec.value_size as usize];
        let tag = format!("{c}:{}", self.next_value);
        self.next_value += 1;
        let n = tag.len().min(value.len());
        value[..n].copy_from_slice(&tag.as_bytes()[..n]);
        cl.op = Some(CurrentOp {
            get,
            key,
            value,
            started: now,
            attempts: 0,
            backoff_ns: 1_000,
            stats: OpStats::default(),
        });
        self.start_attempt(c);
        true
    }

    fn start_attempt(&mut self, c: usize) {
        let ks = self.spec.key_size;
        let cl = &mut self.clients[c];
        let Some(op) = cl.op.as_mut() else {
            return;
        };
        op.attempts += 1;
        let key = key_of(op.key, ks);
        cl.machine = Some(RequestMachine::new(&if op.get {
            Request::Get(key)
        } else {
            Request::Put(key, op.value.clone())
        }));
    }

    fn on_poll(&mut self, c: usize, now: u64) {
        if self.clients[c].op.is_none() && !self.next_op(c, now) {
            return;
        }
        // One protocol step of CPU before anything goes out.
        let t = now + self.p.cpu_step_ns;
        loop {
            let cl = &mut self.clients[c];
            let Some(m) = cl.machine.as_mut() else {
                return;
            };
            match m.poll(&mut cl.state, Nanos(now)) {
                Poll::Pending => return,
                Poll::Post(wrs) => {
                    cl.outstanding += wrs.len();
                    for wr in wrs {
                        self.post(c, wr, t);
                    }
                }
                Poll::Done(r) => {
                    let stats = m.stats();
                    cl.machine = None;
                    self.finish_attempt(c, r, stats, t);
                    return;
                }
            }
        }
    }

    fn finish_attempt(&mut self, c: usize, r: Result<Response, Error>, stats: OpStats, now: u64) {
        let cl = &mut self.clients[c];
        let Some(op) = cl.op.as_mut() else {
            return;
        };
        op.stats += stats;
        if let Err(e) = &r {
            if e.is_retryable() && op.attempts < 64 {
                let jitter = xorshift(&mut cl.rng) % (op.backoff_ns / 2 + 1);
                let at = now + op.backoff_ns / 2 + jitter;
                op.backoff_ns = (op.backoff_ns * 2).min(1_000_000);
                self.start_attempt(c);
                self.schedule(at, Ev::Poll(c));
                return;
            }
        }
        let op = cl.op.take().expect("current op");
        self.stats += op.stats;
        if self.spec.record_history {
            let ret = match (&r, nessie_protocol::Outcome::of(&r)) {
                (Ok(Response::Get(v)), _) => KvRet::Get(v.clone()),
                (Ok(Response::Put(e)), _) => KvRet::Put(*e),
                (Ok(Response::Delete(e)), _) => KvRet::Delete(*e),
                (Err(_), nessie_protocol::Outcome::Unknown) => KvRet::Unknown,
                (Err(_), _) => KvRet::NotCommitted,
            };
            self.history.push(Event {
                client: c,
                key: key_of(op.key, self.spec.key_size),
                op: if op.get {
                    KvOp::Get
                } else {
                    KvOp::Put(op.value.clone())
                },
                ret,
                invoke: op.started,
                response: now,
            });
        }
        match r {
            Ok(_) if op.get => self.get_lat.push(now - op.started),
            Ok(_) => self.put_lat.push(now - op.started),
            Err(_) => self.failures += 1,
        }
        self.schedule(now, Ev::Poll(c));
    }

    fn post(&mut self, c: usize, wr: WorkRequest, t: u64) {
        let src = usize::from(self.clients[c].state.id.node.0);
        let own = NodeId(src as u16);
        match &wr.op {
            Op::LocalRead { len, .. } => {
                let cost = self.p.copy_time(u64::from(*len));
                let id = wr.id;
                let result =
                    InFlight::new(wr, 0).run_to_end(&mut self.mem, own, WordOrder::Ascending);
                let r = self.new_req(c, id, src, src, 0, Some(result));
                self.schedule(t + cost, Ev::Complete(r));
            }
            Op::LocalWrite { data, .. } => {
                let cost = self.p.copy_time(data.len() as u64);
                let id = wr.id;
                let result =
                    InFlight::new(wr, 0).run_to_end(&mut self.mem, own, WordOrder::Ascending);
                let r = self.new_req(c, id, src, src, 0, Some(result));
                self.schedule(t + cost, Ev::Complete(r));
            }
            Op::Read { addr, len } => {
                let dst = usize::from(addr.node.0);
                let resp = u64::from(*len);
                self.send(c, wr, src, dst, 16, resp, t);
            }
            Op::Write { addr, data } => {
                let dst = usize::from(addr.node.0);
                let req = data.len() as u64;
                self.send(c, wr, src, dst, req, 0, t);
            }
            Op::Cas { addr, .. } => {
                let dst = usize::from(addr.node.0);
                self.send(c, wr, src, dst, 24, 8, t);
            }
        }
    }

    fn new_req(
        &mut self,
        client: usize,
        id: nessie_protocol::OpId,
        src: usize,
        dst: usize,
        resp_bytes: u64,
        result: Option<Result<nessie_protocol::OpOutput, nessie_protocol::FabricError>>,
    ) -> usize {
        let req = NicRequest {
            client,
            wr: WorkRequest {
                id,
                op: Op::LocalRead { offset: 0, len: 0 },
            },
            src,
            dst,
            resp_bytes,
            result,
        };
        self.store(req)
    }

    fn store(&mut self, req: NicRequest) -> usize {
        match self.free_reqs.pop() {
            Some(i) => {
                self.reqs[i] = Some(req);
                i
            }
            None => {
                self.reqs.push(Some(req));
                self.reqs.len() - 1
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        client: usize,
        wr: WorkRequest,
        src: usize,
        dst: usize,
        req_bytes: u64,
        resp_bytes: u64,
        t: u64,
    ) {
        let arrives = self.transmit(src, dst, t, req_bytes);
        let r = self.store(NicRequest {
            client,
            wr,
            src,
            dst,
            resp_bytes,
            result: None,
        });
        self.schedule(arrives, Ev::Arrive(r));
    }

    /// Sends `bytes` out of `from`'s NIC (its transmit queue) at `at` towards
    /// `to`; returns when they arrive there.
    fn transmit(&mut self, from: usize, to: usize, at: u64, bytes: u64) -> u64 {
        let nic = &mut self.nics[from];
        let start = at.max(nic.tx_free);
        let done = start + self.p.nic_op_ns + self.p.wire_time(bytes);
        nic.tx_free = done;
        done + if from == to {
            self.p.loopback_ns
        } else {
            self.p.wire_ns
        }
    }

    fn on_arrive(&mut self, r: usize, now: u64) {
        let Some(req) = self.reqs[r].as_ref() else {
            return;
        };
        let atomic = matches!(req.wr.op, Op::Cas { .. });
        let nic = &mut self.nics[req.dst];
        let start = now.max(nic.rx_free);
        let done = start + self.p.nic_op_ns + if atomic { self.p.atomic_ns } else { 0 };
        nic.rx_free = done;
        self.schedule(done, Ev::Land(r));
    }

    fn on_land(&mut self, r: usize, now: u64) {
        let Some(req) = self.reqs[r].as_mut() else {
            return;
        };
        let own = NodeId(req.src as u16);
        let id = req.wr.id;
        let wr = std::mem::replace(
            &mut req.wr,
            WorkRequest {
                id,
                op: Op::LocalRead { offset: 0, len: 0 },
            },
        );
        req.result =
            Some(InFlight::new(wr, 0).run_to_end(&mut self.mem, own, WordOrder::Ascending));
        let (dst, src, resp) = (req.dst, req.src, req.resp_bytes);
        let arrives = self.transmit(dst, src, now, resp);
        self.schedule(arrives, Ev::Back(r));
    }

    fn on_back(&mut self, r: usize, now: u64) {
        let Some(req) = self.reqs[r].as_ref() else {
            return;
        };
        let nic = &mut self.nics[req.src];
        let start = now.max(nic.rx_free);
        let done = start + self.p.nic_op_ns;
        nic.rx_free = done;
        self.schedule(done, Ev::Complete(r));
    }

    fn on_complete(&mut self, r: usize, now: u64) {
        let Some(req) = self.reqs[r].take() else {
            return;
        };
        self.free_reqs.push(r);
        let c = req.client;
        let cl = &mut self.clients[c];
        if let Some(m) = cl.machine.as_mut() {
            m.complete(Completion {
                id: req.wr.id,
                result: req
                    .result
                    .unwrap_or(Err(nessie_protocol::FabricError::Transport(
                        "simulator: no result".into(),
                    ))),
            });
        }
        cl.outstanding = cl.outstanding.saturating_sub(1);
        if cl.outstanding == 0 {
            self.schedule(now, Ev::Poll(c));
        }
    }

    fn report(&mut self, wall: Duration) -> SimReport {
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
        let ops = (self.get_lat.len() + self.put_lat.len()) as u64;
        let n = ops.max(1) as f64;
        SimReport {
            ops,
            gets: self.get_lat.len() as u64,
            puts: self.put_lat.len() as u64,
            failures: self.failures,
            ops_per_sec: ops as f64 / self.spec.seconds,
            get_avg_us: avg(&self.get_lat),
            get_p99_us: p99(&mut self.get_lat),
            put_avg_us: avg(&self.put_lat),
            put_p99_us: p99(&mut self.put_lat),
            bytes_per_op: self.stats.fabric_bytes as f64 / n,
            round_trips_per_op: self.stats.round_trips as f64 / n,
            events: self.events,
            wall_seconds: wall.as_secs_f64(),
            events_per_wall_sec: self.events as f64 / wall.as_secs_f64().max(1e-9),
            history: std::mem::take(&mut self.history),
        }
    }
}
