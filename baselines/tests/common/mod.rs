//! Shared support of the baselines' tests: start a system on the simulator,
//! run a sequential model comparison, and run recorded concurrent workloads
//! whose histories are checked for linearizability.

#![allow(dead_code)]

pub mod faulty;

use nessie_protocol::rng::xorshift64;
use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use nessie_baselines::{Deployment, KvSystem, SystemConfig};
use nessie_check::{unique_value, Recorder};
use nessie_fabric_sim::{SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::{
    ClientId, Completion, Config, Endpoint, FabricError, Nanos, NodeId, WorkRequest,
};
use nessie_protocol::{KvClient, Request, Response};

pub type Sim = Deployment<SimFabric>;

pub fn start(sys: SystemConfig) -> Sim {
    let fabric = SimFabric::new(SimConfig::from_topology(sys.topology())).expect("sim config");
    Deployment::start(sys, fabric).expect("deployment starts")
}

pub fn start_kind(kind: KvSystem, cfg: Config) -> Sim {
    start(SystemConfig::new(kind, cfg))
}

pub fn client(d: &Sim, node: u16, index: u16) -> Box<dyn KvClient> {
    d.client(ClientId {
        node: NodeId(node),
        index,
    })
    .expect("client")
}

/// A single client's random GET/PUT/DELETE sequence agrees with a `BTreeMap`.
pub fn matches_btreemap(d: &Sim, ops: usize, keys: u64, seed: u64) {
    let mut c = client(d, 0, 0);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut s = seed | 1;
    for n in 0..ops {
        let key = format!("k{}", xorshift64(&mut s) % keys).into_bytes();
        match xorshift64(&mut s) % 10 {
            0..=3 => assert_eq!(
                c.get(&key).unwrap(),
                model.get(&key).cloned(),
                "op {n}: GET"
            ),
            4..=7 => {
                let value = vec![n as u8; (xorshift64(&mut s) % 40) as usize];
                let existed = c.put(&key, &value).unwrap();
                assert_eq!(existed, model.insert(key, value).is_some(), "op {n}: PUT");
            }
            _ => assert_eq!(
                c.delete(&key).unwrap(),
                model.remove(&key).is_some(),
                "op {n}: DELETE"
            ),
        }
    }
    for (k, v) in &model {
        assert_eq!(c.get(k).unwrap().as_ref(), Some(v));
    }
}

/// Runs `ops` operations on each of all clients concurrently over `keys`
/// hot keys, records the history and checks it for linearizability.
/// Returns the number of operations checked.
pub fn linearizable_workload(d: &Sim, ops: usize, keys: u64, get_pct: u64, seed: u64) -> usize {
    let cfg = d.system().store.clone();
    let recorder = Arc::new(Recorder::new());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    let mut id = 0usize;
    for n in 0..cfg.nodes {
        for i in 0..cfg.clients_per_node {
            let mut c = client(d, n, i);
            let (r, errors) = (recorder.clone(), errors.clone());
            let me = id;
            id += 1;
            handles.push(thread::spawn(move || {
                let mut s = seed ^ (me as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for k in 0..ops {
                    let key = format!("hot-{}", xorshift64(&mut s) % keys).into_bytes();
                    let dice = xorshift64(&mut s) % 100;
                    // Recorded by outcome class: a not-committed failure is
                    // left out by the checker, an unknown one may have happened.
                    let res = if dice < get_pct {
                        r.record_result(
                            me,
                            Request::Get(key.to_vec()),
                            || c.get(&key),
                            |v| Response::Get(v.clone()),
                        )
                        .map(|_| ())
                    } else if dice < get_pct + (100 - get_pct) / 4 {
                        r.record_result(
                            me,
                            Request::Delete(key.to_vec()),
                            || c.delete(&key),
                            |&e| Response::Delete(e),
                        )
                        .map(|_| ())
                    } else {
                        let value = unique_value(&key, me as u64, k as u64, 16);
                        r.record_result(
                            me,
                            Request::Put(key.to_vec(), value.clone()),
                            || c.put(&key, &value),
                            |&e| Response::Put(e),
                        )
                        .map(|_| ())
                    };
                    if let Err(e) = res {
                        errors.lock().unwrap().push(format!("client {me}: {e}"));
                    }
                }
            }));
        }
    }
    for h in handles {
        h.join().expect("client thread");
    }
    let errors = errors.lock().unwrap().clone();
    assert!(errors.is_empty(), "operations failed: {errors:?}");
    assert!(d.server_errors().is_empty(), "{:?}", d.server_errors());
    nessie_tests::assert_linearizable(&recorder.events())
}

/// An endpoint that stops before its `n`-th post until the test lets it go,
/// so that a test can change memory at an exact point of a client operation.
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
    /// Wraps `inner`, pausing before post number `pause_before` (1-based).
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
    /// Waits (up to 5 s) for the client to reach the pause, runs `f`, and lets
    /// the client go on. If the operation ends before the pause, `f` does not run.
    pub fn at_pause(&self, f: impl FnOnce()) -> bool {
        if self.paused.recv_timeout(Duration::from_secs(5)).is_ok() {
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
