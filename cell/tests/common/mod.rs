//! Shared support of Cell's tests: tiny deployments on the simulator (small
//! nodes and meganodes, so that a few hundred keys split nodes and
//! meganodes), clients, a pausing endpoint, and a sequential model.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use nessie_cell::{CellClient, CellConfig, CellDeployment, SearchMode};
use nessie_fabric_sim::{SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::{ClientId, Completion, Endpoint, FabricError, Nanos, NodeId, WorkRequest};

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

pub fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

pub fn key(i: u64) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

/// Runs `ops` random operations (get, put, delete, scan) of one client
/// against a `BTreeMap` and checks every answer; returns the model.
pub fn against_model(c: &mut CellClient<SimEndpoint>, ops: usize, keys: u64, seed: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut s = seed | 1;
    for n in 0..ops {
        let k = key(xorshift(&mut s) % keys);
        match xorshift(&mut s) % 20 {
            0..=5 => assert_eq!(c.get(&k).unwrap(), model.get(&k).cloned(), "op {n}: get {k:?}"),
            6..=13 => {
                let v = format!("v{n}-{}", xorshift(&mut s) % 1000).into_bytes();
                let existed = c.put(&k, &v).unwrap();
                assert_eq!(existed, model.insert(k.clone(), v).is_some(), "op {n}: put {k:?}");
            }
            14..=16 => assert_eq!(c.delete(&k).unwrap(), model.remove(&k).is_some(), "op {n}: delete {k:?}"),
            _ => {
                let limit = 1 + (xorshift(&mut s) % 20) as usize;
                let to = key(xorshift(&mut s) % keys);
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
    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
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
