//! A fabric wrapper that injects faults into one endpoint's operations: the
//! `n`-th operation (counted from a trigger) meets one of the faults of the
//! project's one vocabulary ([`TransportFault`]) that this wrapper
//! implements ([`SUPPORTED`]: fails without executing, executes but
//! completes with an error, executes and never completes, or neither
//! executes nor completes; arming another is refused with [`Unsupported`]).
//! Unlike the simulated fabric's own injections, it can also hit an
//! endpoint's CPU accesses (a test's choice: `TransportFault::applies_to`
//! says no transport does). Every endpoint it opens is recorded (node and
//! order), so a test can aim at a server worker or a client, and can trace
//! an endpoint's operations to learn the steps of a request.

#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nessie_fabric_sim::{SimEndpoint, SimFabric};
use nessie_protocol::{
    BackendError, Completion, Endpoint, EndpointRefusal, Fabric, FabricError, Nanos, NodeId, Op,
    OpId, OpKind, Topology, TransportError, TransportFault, WorkRequest,
};

/// The faults this wrapper implements.
pub const SUPPORTED: [TransportFault; 4] = [
    TransportFault::FailBeforeExecuting,
    TransportFault::FailAfterExecuting,
    TransportFault::LoseCompletion,
    TransportFault::Vanish,
];

/// A fault this wrapper does not implement was armed (the simulated
/// fabric's own `Injection`s implement every one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the faulty endpoint wrapper cannot inject {0}")]
pub struct Unsupported(pub TransportFault);

/// A pending fault: counting starts at the first operation of kind
/// `trigger` (at once if `None`); the `nth` operation counted (1-based) is hit.
#[derive(Clone, Copy, Debug)]
pub struct Arm {
    /// Where counting starts.
    pub trigger: Option<OpKind>,
    /// Which counted operation is hit.
    pub nth: u64,
    /// What happens to it (one of [`SUPPORTED`]).
    pub fault: TransportFault,
}

/// An operation as the trace records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traced {
    /// Its kind.
    pub kind: OpKind,
    /// Its target node (the endpoint's own for CPU access).
    pub node: NodeId,
    /// Byte offset it addresses.
    pub offset: u64,
}

#[derive(Debug, Default)]
struct State {
    arm: Option<Arm>,
    counting: bool,
    counted: u64,
    /// The fault that hit, and the operation it hit.
    hit: Option<(TransportFault, Traced)>,
    tracing: bool,
    trace: Vec<Traced>,
}

/// The test's handle on one opened endpoint.
#[derive(Clone, Debug, Default)]
pub struct Control(Arc<Mutex<State>>);

impl Control {
    /// Arms a fault (replacing any pending one); one this wrapper does not
    /// implement is refused, and nothing is armed.
    pub fn arm(&self, arm: Arm) -> Result<(), Unsupported> {
        if !SUPPORTED.contains(&arm.fault) {
            return Err(Unsupported(arm.fault));
        }
        let mut s = self.0.lock().unwrap();
        s.arm = Some(arm);
        s.counting = arm.trigger.is_none();
        s.counted = 0;
        s.hit = None;
        Ok(())
    }

    /// Disarms; returns the fault that hit, if one did.
    pub fn disarm(&self) -> Option<(TransportFault, Traced)> {
        let mut s = self.0.lock().unwrap();
        s.arm = None;
        s.hit.take()
    }

    /// Starts recording operations (clearing earlier ones).
    pub fn start_trace(&self) {
        let mut s = self.0.lock().unwrap();
        s.tracing = true;
        s.trace.clear();
    }

    /// Stops recording and returns what was recorded.
    pub fn take_trace(&self) -> Vec<Traced> {
        let mut s = self.0.lock().unwrap();
        s.tracing = false;
        std::mem::take(&mut s.trace)
    }

    /// Decides the fate of one operation.
    fn decide(&self, op: &Traced) -> Option<TransportFault> {
        let mut s = self.0.lock().unwrap();
        if s.tracing {
            s.trace.push(op.clone());
        }
        let arm = s.arm?;
        if !s.counting && arm.trigger == Some(op.kind) {
            s.counting = true;
        }
        if !s.counting {
            return None;
        }
        s.counted += 1;
        if s.counted != arm.nth {
            return None;
        }
        s.arm = None;
        s.hit = Some((arm.fault, op.clone()));
        Some(arm.fault)
    }
}

/// A [`SimFabric`] whose endpoints can be made to fail.
#[derive(Clone)]
pub struct FaultyFabric {
    inner: SimFabric,
    opened: Arc<Mutex<Vec<(NodeId, Control)>>>,
}

impl FaultyFabric {
    /// Wraps `inner`.
    pub fn new(inner: SimFabric) -> FaultyFabric {
        FaultyFabric {
            inner,
            opened: Arc::default(),
        }
    }

    /// The wrapped simulator.
    pub fn sim(&self) -> &SimFabric {
        &self.inner
    }

    /// The controls of the endpoints opened on `node`, in opening order.
    pub fn endpoints(&self, node: NodeId) -> Vec<Control> {
        self.opened
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| *n == node)
            .map(|(_, c)| c.clone())
            .collect()
    }
}

impl Fabric for FaultyFabric {
    type Endpoint = FaultyEndpoint;

    fn topology(&self) -> Topology {
        self.inner.topology()
    }

    fn open(&self, node: NodeId) -> Result<FaultyEndpoint, FabricError> {
        let inner = self.inner.open(node)?;
        let control = Control::default();
        self.opened.lock().unwrap().push((node, control.clone()));
        Ok(FaultyEndpoint {
            inner,
            control,
            lost: HashSet::new(),
            failed: HashSet::new(),
            made_up: Vec::new(),
        })
    }
}

/// An endpoint of a [`FaultyFabric`].
pub struct FaultyEndpoint {
    inner: SimEndpoint,
    control: Control,
    lost: HashSet<OpId>,
    failed: HashSet<OpId>,
    made_up: Vec<Completion>,
}

impl FaultyEndpoint {
    fn filter(&mut self, out: &mut Vec<Completion>, from: usize) {
        let mut kept = Vec::new();
        for mut c in out.drain(from..) {
            if self.lost.remove(&c.id) {
                continue;
            }
            if self.failed.remove(&c.id) {
                c.result = Err(FabricError::Transport(TransportError::Injected(
                    TransportFault::FailAfterExecuting,
                )));
            }
            kept.push(c);
        }
        out.extend(kept);
        out.append(&mut self.made_up);
    }
}

impl Endpoint for FaultyEndpoint {
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
        let me = self.inner.node();
        let traced = Traced {
            kind: wr.op.kind(),
            node: wr.op.remote_addr().map_or(me, |a| a.node),
            offset: match wr.op.unwindowed() {
                Op::Read { addr, .. } | Op::Write { addr, .. } | Op::Cas { addr, .. } => {
                    addr.offset
                }
                Op::LocalRead { offset, .. }
                | Op::LocalWrite { offset, .. }
                | Op::BindWindow { offset, .. } => *offset,
                Op::Windowed { .. } => unreachable!("unwindowed"),
            },
        };
        let Some(fault) = self.control.decide(&traced) else {
            return self.inner.post(wr);
        };
        let id = wr.id;
        if fault.executes_now() && SUPPORTED.contains(&fault) {
            self.inner.post(wr)?;
        }
        match fault {
            TransportFault::FailBeforeExecuting => self.made_up.push(Completion {
                id,
                result: Err(FabricError::Transport(TransportError::Injected(
                    TransportFault::FailBeforeExecuting,
                ))),
            }),
            TransportFault::FailAfterExecuting => {
                self.failed.insert(id);
            }
            TransportFault::LoseCompletion => {
                self.lost.insert(id);
            }
            TransportFault::Vanish => {}
            // `Control::arm` refuses these; should one get here, its request
            // (not posted unless it executes now) reports why.
            TransportFault::ErrorThenLand
            | TransportFault::LateCompletion
            | TransportFault::DuplicateWrite => self.made_up.push(Completion {
                id,
                result: Err(FabricError::Transport(TransportError::Endpoint(
                    EndpointRefusal::Backend(BackendError::new(Unsupported(fault))),
                ))),
            }),
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) {
        let from = out.len();
        self.inner.poll(out);
        self.filter(out, from);
    }

    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
        let from = out.len();
        if self.made_up.is_empty() {
            self.inner.wait(out, timeout);
        } else {
            self.inner.poll(out);
        }
        self.filter(out, from);
    }

    fn now(&self) -> Nanos {
        self.inner.now()
    }

    fn backoff(&mut self, d: Duration) {
        self.inner.backoff(d);
    }
}
