//! Shared support of Cell's tests: tiny deployments on the simulator (small
//! nodes and meganodes, so that a few hundred keys split nodes and
//! meganodes), clients, a pausing endpoint, and a sequential model.

#![allow(dead_code)]

use nessie_protocol::rng::xorshift64;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use nessie_cell::{CellClient, CellConfig, CellDeployment, SearchMode};
use nessie_check::check_history;
use nessie_check::ordered::check;
/// Every story's time limit (`nessie_check::watchdog`).
#[allow(unused_imports)]
pub use nessie_check::time_limit;
use nessie_check::{Event, Recorder};
use nessie_fabric_sim::{SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::{
    ClientId, Completion, Endpoint, FabricError, Nanos, NodeId, Request, Response, WorkRequest,
};

pub type Cell = CellDeployment<SimFabric>;

/// A configuration small enough that splits happen within a few hundred keys.
pub fn tiny() -> CellConfig {
    CellConfig {
        nodes: 3,
        server_nodes: 3,
        clients_per_node: 2,
        server_workers: 1,
        max_key_len: 16,
        max_value_len: 32,
        node_bytes: 256,
        meganode_nodes: 24,
        heap_bytes: 8 << 10,
        regions_per_node: 24,
        op_timeout: Duration::from_secs(20),
        ..CellConfig::default()
    }
}

pub fn start(cfg: CellConfig) -> Cell {
    let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology())).expect("sim config");
    CellDeployment::start(cfg, fabric).expect("cell starts")
}

pub fn id(node: u16, index: u16) -> ClientId {
    ClientId {
        node: NodeId(node),
        index,
    }
}

pub fn client(d: &Cell, node: u16, index: u16, mode: SearchMode) -> CellClient<SimEndpoint> {
    let mut c = d.client(id(node, index)).expect("client");
    c.set_mode(mode);
    c
}

pub fn key(i: u64) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

/// Islands of hot keys: key `island * 40 + j`, j < 6; scans stay inside one.
pub const ISLANDS: u64 = 10;
pub const PER_ISLAND: u64 = 6;

pub fn hot(island: u64, j: u64) -> Vec<u8> {
    key(island * 40 + j)
}

/// The concurrent workload of the linearizability tests: each of `players`
/// (history id, client) runs `ops` gets, puts, deletes and scans of hot
/// keys, one thread each; each of `fillers` (node, client) inserts `ops /
/// 2` keys between the islands, splitting nodes and meganodes underneath.
/// Every operation must succeed; the recorded history is returned.
pub fn islands(
    players: Vec<(usize, CellClient<SimEndpoint>)>,
    fillers: Vec<(u16, CellClient<SimEndpoint>)>,
    ops: usize,
    seed: u64,
) -> Vec<Event> {
    let h = std::sync::Arc::new(Recorder::new());
    let mut threads = Vec::new();
    for (me, mut c) in players {
        let h = h.clone();
        threads.push(std::thread::spawn(move || {
            let mut s = seed ^ (me as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            for op in 0..ops {
                let isl = xorshift64(&mut s) % ISLANDS;
                let k = hot(isl, xorshift64(&mut s) % PER_ISLAND);
                match xorshift64(&mut s) % 20 {
                    0..=6 => h.record(me, Request::Get(k.clone()), || {
                        let r = c.get(&k);
                        (
                            r.as_ref().ok().map(|v| Ok(Response::Get(v.clone()))),
                            r.map(|_| ()),
                        )
                    }),
                    7..=11 => {
                        let v = format!("v{me}-{op}").into_bytes();
                        h.record(me, Request::Put(k.clone(), v.clone()), || {
                            let r = c.put(&k, &v);
                            (
                                r.as_ref().ok().map(|e| Ok(Response::Put(*e))),
                                r.map(|_| ()),
                            )
                        })
                    }
                    12..=14 => h.record(me, Request::Delete(k.clone()), || {
                        let r = c.delete(&k);
                        (
                            r.as_ref().ok().map(|e| Ok(Response::Delete(*e))),
                            r.map(|_| ()),
                        )
                    }),
                    _ => {
                        let to = hot(isl, PER_ISLAND);
                        let limit = 1 + (xorshift64(&mut s) % 6) as usize;
                        let call = Request::Scan {
                            from: k.clone(),
                            to: Some(to.clone()),
                            limit,
                        };
                        h.record(me, call, || {
                            let r = c.scan(&k, Some(&to), limit);
                            (
                                r.as_ref().ok().map(|v| Ok(Response::Scan(v.clone()))),
                                r.map(|_| ()),
                            )
                        })
                    }
                }
                .unwrap_or_else(|e| panic!("client {me} op {op}: {e}"));
            }
        }));
    }
    for (n, mut c) in fillers {
        let h = h.clone();
        threads.push(std::thread::spawn(move || {
            for f in 0..(ops as u64 / 2) {
                let isl = (f * 7 + u64::from(n)) % ISLANDS;
                let k = key(isl * 40 + PER_ISLAND + 1 + (f / ISLANDS) * 3 + u64::from(n));
                let me = 100 + n as usize;
                // A value of its own per write, as every recorded write.
                let v = nessie_check::unique_value(&k, me as u64, f, 16);
                h.record(me, Request::Put(k.clone(), v.clone()), || {
                    let r = c.put(&k, &v);
                    (
                        r.as_ref().ok().map(|e| Ok(Response::Put(*e))),
                        r.map(|_| ()),
                    )
                })
                .unwrap_or_else(|e| panic!("filler {n}: {e}"));
            }
        }));
    }
    for t in threads {
        t.join().expect("client thread");
    }
    h.events()
}

/// Checks `events` with the project's per-key checker (point operations)
/// and with Cell's range-aware checker (everything); panics on a
/// violation, returns how many operations the range-aware check took.
pub fn check_both(events: &[Event]) -> usize {
    let kv: Vec<Event> = events
        .iter()
        .filter(|e| !matches!(e.request, Request::Scan { .. }))
        .cloned()
        .collect();
    if let Err(v) = check_history(&kv, 50_000_000) {
        panic!("per-key checker: {v}");
    }
    match check(events, 50_000_000) {
        Ok(n) => n,
        Err(v) => panic!("range-aware checker: {v}"),
    }
}

/// Runs `ops` random operations (get, put, delete, scan) of one client
/// against a `BTreeMap` and checks every answer; returns the model.
pub fn against_model(
    c: &mut CellClient<SimEndpoint>,
    ops: usize,
    keys: u64,
    seed: u64,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut s = seed | 1;
    for n in 0..ops {
        let k = key(xorshift64(&mut s) % keys);
        match xorshift64(&mut s) % 20 {
            0..=5 => assert_eq!(
                c.get(&k).unwrap(),
                model.get(&k).cloned(),
                "op {n}: get {k:?}"
            ),
            6..=13 => {
                let v = format!("v{n}-{}", xorshift64(&mut s) % 1000).into_bytes();
                let existed = c.put(&k, &v).unwrap();
                assert_eq!(
                    existed,
                    model.insert(k.clone(), v).is_some(),
                    "op {n}: put {k:?}"
                );
            }
            14..=16 => assert_eq!(
                c.delete(&k).unwrap(),
                model.remove(&k).is_some(),
                "op {n}: delete {k:?}"
            ),
            _ => {
                let limit = 1 + (xorshift64(&mut s) % 20) as usize;
                let to = key(xorshift64(&mut s) % keys);
                let got = c.scan(&k, Some(&to), limit).unwrap();
                let want: Vec<_> = model
                    .range(k.clone()..)
                    .take_while(|(x, _)| **x < to)
                    .take(limit)
                    .map(|(a, b)| (a.clone(), b.clone()))
                    .collect();
                assert_eq!(got, want, "op {n}: scan {k:?}..{to:?} limit {limit}");
            }
        }
    }
    model
}

/// An endpoint that stops before its `n`-th post until the test lets it go.
pub struct PausingEndpoint {
    inner: SimEndpoint,
    posts: usize,
    pause_before: usize,
    paused: mpsc::Sender<()>,
    resume: mpsc::Receiver<()>,
}

/// The test's side of a [`PausingEndpoint`].
pub struct Pause {
    paused: mpsc::Receiver<()>,
    resume: mpsc::Sender<()>,
}

impl PausingEndpoint {
    pub fn new(inner: SimEndpoint, pause_before: usize) -> (PausingEndpoint, Pause) {
        let (paused_tx, paused_rx) = mpsc::channel();
        let (resume_tx, resume_rx) = mpsc::channel();
        (
            PausingEndpoint {
                inner,
                posts: 0,
                pause_before,
                paused: paused_tx,
                resume: resume_rx,
            },
            Pause {
                paused: paused_rx,
                resume: resume_tx,
            },
        )
    }
}

impl Pause {
    /// Waits (up to 10 s) for the client to reach the pause, runs `f`, and
    /// lets the client go on; false if the operation ended before the pause.
    pub fn at_pause(&self, f: impl FnOnce()) -> bool {
        if self.paused.recv_timeout(Duration::from_secs(10)).is_ok() {
            f();
            let _ = self.resume.send(());
            true
        } else {
            false
        }
    }
}

impl Endpoint for PausingEndpoint {
    fn node(&self) -> NodeId {
        self.inner.node()
    }
    fn claim_client(&self, id: nessie_protocol::ClientId) -> Option<nessie_protocol::ClientClaim> {
        self.inner.claim_client(id)
    }
    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        if nessie_protocol::registry::is_claim_request(wr.id) {
            // A client's claim of its id, before the story starts.
            return self.inner.post(wr);
        }
        self.posts += 1;
        if self.posts == self.pause_before {
            let _ = self.paused.send(());
            let _ = self.resume.recv();
        }
        self.inner.post(wr)
    }
    fn poll(&mut self, out: &mut Vec<Completion>) {
        self.inner.poll(out)
    }
    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
        self.inner.wait(out, timeout)
    }
    fn now(&self) -> Nanos {
        self.inner.now()
    }
}

/// When a [`PredicateEndpoint`] pauses: post number and work request.
pub type Predicate = Box<dyn FnMut(usize, &WorkRequest) -> bool + Send>;

/// A pausing endpoint that stops before every post for which `when` holds
/// (counting from 1), with the test's side in [`Pause`].
pub struct PredicateEndpoint {
    inner: SimEndpoint,
    when: Predicate,
    posts: usize,
    paused: mpsc::Sender<usize>,
    resume: mpsc::Receiver<()>,
}

/// The test's side of a [`PredicateEndpoint`].
pub struct Gate {
    paused: mpsc::Receiver<usize>,
    resume: mpsc::Sender<()>,
}

impl PredicateEndpoint {
    pub fn new(
        inner: SimEndpoint,
        when: impl FnMut(usize, &WorkRequest) -> bool + Send + 'static,
    ) -> (PredicateEndpoint, Gate) {
        let (paused_tx, paused_rx) = mpsc::channel();
        let (resume_tx, resume_rx) = mpsc::channel();
        (
            PredicateEndpoint {
                inner,
                when: Box::new(when),
                posts: 0,
                paused: paused_tx,
                resume: resume_rx,
            },
            Gate {
                paused: paused_rx,
                resume: resume_tx,
            },
        )
    }
}

impl Gate {
    /// Waits (up to 10 s) for the next pause; runs `f` with the post number
    /// and lets the client go on. False if no pause came.
    pub fn at_pause(&self, f: impl FnOnce(usize)) -> bool {
        match self.paused.recv_timeout(Duration::from_secs(10)) {
            Ok(n) => {
                f(n);
                let _ = self.resume.send(());
                true
            }
            Err(_) => false,
        }
    }
}

impl Gate {
    /// Waits (up to 10 s) for the next pause and leaves the client paused
    /// there (until [`Gate::resume`]); the post number, or `None` if no
    /// pause came.
    pub fn paused(&self) -> Option<usize> {
        self.paused.recv_timeout(Duration::from_secs(10)).ok()
    }

    /// The post number if the client is paused (or pauses within `wait`),
    /// leaving it paused.
    pub fn try_paused(&self, wait: Duration) -> Option<usize> {
        self.paused.recv_timeout(wait).ok()
    }

    /// Lets a client paused by [`Gate::paused`] go on.
    pub fn resume(&self) {
        let _ = self.resume.send(());
    }
}

impl Endpoint for PredicateEndpoint {
    fn node(&self) -> NodeId {
        self.inner.node()
    }
    fn claim_client(&self, id: nessie_protocol::ClientId) -> Option<nessie_protocol::ClientClaim> {
        self.inner.claim_client(id)
    }
    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        if nessie_protocol::registry::is_claim_request(wr.id) {
            // A client's claim of its id, before the story starts.
            return self.inner.post(wr);
        }
        self.posts += 1;
        if (self.when)(self.posts, &wr) {
            let _ = self.paused.send(self.posts);
            let _ = self.resume.recv();
        }
        self.inner.post(wr)
    }
    fn poll(&mut self, out: &mut Vec<Completion>) {
        self.inner.poll(out)
    }
    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
        self.inner.wait(out, timeout)
    }
    fn now(&self) -> Nanos {
        self.inner.now()
    }
}

use std::sync::Arc;

use nessie_cell::machine::{Effect, Machine, Step};
use nessie_cell::server::runtime::{local_effect, MaintenanceIo};
use nessie_cell::server::ServerNode;
use nessie_cell::SplitOutcome;
use nessie_exec::{Effect as Shared, Resolution as SharedResolution};

/// What one step of a hand-driven server machine did.
#[derive(Debug)]
pub enum Did {
    /// A round of work requests.
    Round(usize),
    /// One of Cell's own effects.
    Effect(Effect),
    /// A shared effect (a back-off, a wait for a response).
    Wait(String),
    /// The machine finished (its result is in [`Stepper::finished`]).
    Done,
}

/// Drives a server machine (a meganode split, a maintenance job) one round
/// or effect at a time, on its node's maintenance request slot.
pub struct Stepper<T> {
    pub st: Arc<ServerNode>,
    pub m: Machine<T>,
    pub mio: MaintenanceIo<SimEndpoint>,
    pub finished: Option<Result<T, nessie_protocol::Error>>,
    pub steps: usize,
    /// A node write is half done (its versions are odd).
    pub mid_write: bool,
}

/// A meganode split, stepped.
pub type SplitStepper = Stepper<SplitOutcome>;

impl SplitStepper {
    pub fn new(d: &Cell, region: nessie_cell::RegionId) -> SplitStepper {
        SplitStepper::onto(d, region, None)
    }

    /// A split of `region` copying to server `onto` (`None`: as servers choose).
    pub fn onto(d: &Cell, region: nessie_cell::RegionId, onto: Option<NodeId>) -> SplitStepper {
        let (st, m) = d.split_machine_onto(region, onto).expect("split machine");
        let (_, mio) = d.maintenance_io(st.node).expect("maintenance io");
        Stepper {
            st,
            m,
            mio,
            finished: None,
            steps: 0,
            mid_write: false,
        }
    }

    /// Runs to the end; the outcome.
    pub fn finish(&mut self) -> SplitOutcome {
        while self.step().is_some() {}
        self.finished
            .clone()
            .expect("finished")
            .expect("split succeeds")
    }
}

impl Stepper<()> {
    /// Maintenance job `job` on server `node`'s maintenance slot (its
    /// maintenance thread must be idle meanwhile).
    pub fn job(d: &Cell, node: NodeId, job: nessie_cell::server::Job) -> Stepper<()> {
        let (st, mio) = d.maintenance_io(node).expect("maintenance io");
        let m = nessie_cell::server::runtime::job_machine(
            &st,
            nessie_cell::server::runtime::maintenance_channel(&st),
            nessie_cell::machine::ID_BASE,
            Duration::from_secs(10),
            job,
        );
        Stepper {
            st,
            m,
            mio,
            finished: None,
            steps: 0,
            mid_write: false,
        }
    }
}

impl<T: Clone + 'static> Stepper<T> {
    /// Performs the next round or effect; `None` once finished.
    pub fn step(&mut self) -> Option<Did> {
        if self.finished.is_some() {
            return None;
        }
        loop {
            let now = self.mio.driver.now();
            match self.m.poll(now) {
                Step::Done(r) => {
                    self.finished = Some(r);
                    return Some(Did::Done);
                }
                Step::Pending => self.mio.driver.wait(self.m.exec()),
                Step::PostChain(_) => panic!("Cell's machines post no chains"),
                Step::PostDetached(wrs) => {
                    let now = self.mio.driver.now();
                    self.mio.driver.post_detached(self.m.exec(), wrs, now);
                    self.steps += 1;
                    return Some(Did::Round(0));
                }
                Step::Post(wrs) => {
                    let n = wrs.len();
                    let versions: Vec<u64> = wrs
                        .iter()
                        .filter_map(|wr| match &wr.op {
                            nessie_protocol::Op::LocalWrite { data, .. } if data.len() == 8 => {
                                Some(u64::from_le_bytes(data.as_slice().try_into().unwrap()))
                            }
                            _ => None,
                        })
                        .collect();
                    if versions.len() == 2 && versions[0] == versions[1] {
                        self.mid_write = versions[0] % 2 == 1;
                    }
                    let now = self.mio.driver.now();
                    self.mio.driver.post(self.m.exec(), wrs, now);
                    // Collect the completions so the round is over.
                    let start = std::time::Instant::now();
                    while self.m.exec().outstanding() > 0
                        && start.elapsed() < Duration::from_secs(10)
                    {
                        self.mio.driver.wait(self.m.exec());
                    }
                    self.steps += 1;
                    return Some(Did::Round(n));
                }
                Step::Effect(Shared::Ext(e)) => {
                    let r = local_effect(&self.st, e.clone());
                    self.m.resolve(SharedResolution::Ext(r));
                    self.steps += 1;
                    return Some(Did::Effect(e));
                }
                Step::Effect(e) => {
                    let what = format!("{e:?}");
                    let r = self
                        .mio
                        .driver
                        .perform(e, &mut |e| local_effect(&self.st, e));
                    self.m.resolve(r);
                    self.steps += 1;
                    return Some(Did::Wait(what));
                }
            }
        }
    }
}

/// Loads keys `0..n` (value = "v" + key) through a server-side client.
pub fn load(d: &Cell, n: u64) {
    let mut c = client(d, 0, 0, SearchMode::ServerOnly);
    for i in 0..n {
        c.put(&key(i), &value_of(i)).expect("load");
    }
}

pub fn value_of(i: u64) -> Vec<u8> {
    format!("v{i}").into_bytes()
}

/// A node as it is in memory now (read through the simulator, no NIC).
pub fn node_at(d: &Cell, p: nessie_cell::NodePtr) -> nessie_cell::node::Node {
    let m = d.directory().snapshot();
    let info = m.get(p.region).expect("region");
    let l = d.config().layout();
    let b = d
        .fabric()
        .read_bytes(
            info.node,
            nessie_protocol::Region::Data,
            l.slot_base(info.slot) + l.node_offset(p.index),
            l.node_bytes,
        )
        .expect("read");
    nessie_cell::node::Node::decode(&b, true).expect("node")
}

/// Where node `p` is in the simulator's memory.
pub fn node_addr(d: &Cell, p: nessie_cell::NodePtr) -> (NodeId, u64) {
    let m = d.directory().snapshot();
    let info = m.get(p.region).expect("region");
    let l = d.config().layout();
    (info.node, l.slot_base(info.slot) + l.node_offset(p.index))
}

/// The split key a split of `region` will choose.
pub fn split_key_of(d: &Cell, region: nessie_cell::RegionId) -> Vec<u8> {
    let root = node_at(d, nessie_cell::NodePtr::root_of(region));
    root.entries[root.entries.len() / 2].key.clone()
}

/// A configuration for driving splits by hand: 2 server nodes, no
/// automatic splits, meganodes large enough to hold every test key.
pub fn manual() -> CellConfig {
    CellConfig {
        nodes: 2,
        server_nodes: 2,
        auto_split: false,
        meganode_nodes: 64,
        heap_bytes: 16 << 10,
        ..tiny()
    }
}

/// The root word (held in region 1), as it is in memory now.
pub fn root_word(d: &Cell) -> nessie_cell::NodePtr {
    let m = d.directory().snapshot();
    let info = m.get(nessie_cell::RegionId(1)).expect("region 1");
    let l = d.config().layout();
    let b = d
        .fabric()
        .read_bytes(
            info.node,
            nessie_protocol::Region::Data,
            l.slot_base(info.slot) + nessie_cell::ROOT_WORD_OFFSET,
            8,
        )
        .expect("read the root word");
    nessie_cell::NodePtr::decode(u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// What a walk of the whole tree (every valid node reachable from the root
/// word by child and right links, read from memory as it is now) found.
#[derive(Debug, Default)]
pub struct TreeAudit {
    /// Meganodes reached.
    pub reached: std::collections::BTreeSet<nessie_cell::RegionId>,
    /// Meganodes some other meganode's node has a child entry for (a parent
    /// link, not only a right link).
    pub parented: std::collections::BTreeSet<nessie_cell::RegionId>,
    /// The meganode of the root.
    pub root: Option<nessie_cell::RegionId>,
}

/// Walks the tree (see [`TreeAudit`]).
pub fn audit(d: &Cell) -> TreeAudit {
    let mut a = TreeAudit::default();
    let root = root_word(d);
    a.root = Some(root.region);
    let mut todo = vec![root];
    let mut seen = std::collections::HashSet::new();
    while let Some(p) = todo.pop() {
        if p.is_null() || !seen.insert(p) || d.directory().snapshot().get(p.region).is_none() {
            continue;
        }
        let n = node_at(d, p);
        if !n.valid {
            continue;
        }
        a.reached.insert(p.region);
        todo.push(n.right);
        for e in &n.entries {
            if let Some(c) = e.child() {
                if c.region != p.region {
                    a.parented.insert(c.region);
                }
                todo.push(c);
            }
        }
    }
    a
}
