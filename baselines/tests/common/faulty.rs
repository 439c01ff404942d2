//! A fabric wrapper that injects faults into one endpoint's operations: the
//! `n`-th operation (counted from a trigger) fails without executing,
//! executes but completes with an error, executes and never completes, or
//! neither executes nor completes. Every endpoint it opens is recorded (node
//! and order), so a test can aim at a server worker or a client, and can
//! trace an endpoint's operations to learn the steps of a request.

#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nessie_fabric_sim::{SimEndpoint, SimFabric};
use nessie_protocol::{
    Completion, Endpoint, Fabric, FabricError, Nanos, NodeId, Op, OpId, OpKind, Topology,
    WorkRequest,
};

/// What happens to the operation a fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Not executed; completes with a transport error.
    FailUnexecuted,
    /// Executed; its completion carries a transport error.
    FailAfterExecuting,
    /// Executed; its completion is never delivered.
    LoseCompletion,
    /// Not executed, and no completion is ever delivered.
    Vanish,
}

impl Fault {
    /// All four.
    pub const ALL: [Fault; 4] = [
        Fault::FailUnexecuted,
        Fault::FailAfterExecuting,
        Fault::LoseCompletion,
        Fault::Vanish,
    ];

    fn executes(self) -> bool {
        matches!(self, Fault::FailAfterExecuting | Fault::LoseCompletion)
    }
}

/// A pending fault: counting starts at the first operation of kind
/// `trigger` (at once if `None`); the `nth` operation counted (1-based) is hit.
#[derive(Clone, Copy, Debug)]
pub struct Arm {
    /// Where counting starts.
    pub trigger: Option<OpKind>,
    /// Which counted operation is hit.
    pub nth: u64,
    /// What happens to it.
    pub fault: Fault,
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
    hit: Option<(Fault, Traced)>,
    tracing: bool,
    trace: Vec<Traced>,
}

/// The test's handle on one opened endpoint.
#[derive(Clone, Debug, Default)]
pub struct Control(Arc<Mutex<State>>);

impl Control {
    /// Arms a fault (replacing any pending one).
    pub fn arm(&self, arm: Arm) {
        let mut s = self.0.lock().unwrap();
        s.arm = Some(arm);
        s.counting = arm.trigger.is_none();
        s.counted = 0;
        s.hit = None;
    }

    /// Disarms; returns the fault that hit, if one did.
    pub fn disarm(&self) -> Option<(Fault, Traced)> {
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
    fn decide(&self, op: &Traced) -> Option<Fault> {
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
                c.result = Err(FabricError::Transport(
                    "injected fault: failed after executing".into(),
                ));
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

    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        let me = self.inner.node();
        let traced = Traced {
            kind: wr.op.kind(),
            node: wr.op.remote_addr().map_or(me, |a| a.node),
            offset: match &wr.op {
                Op::Read { addr, .. } | Op::Write { addr, .. } | Op::Cas { addr, .. } => {
                    addr.offset
                }
                Op::LocalRead { offset, .. } | Op::LocalWrite { offset, .. } => *offset,
            },
        };
        let Some(fault) = self.control.decide(&traced) else {
            return self.inner.post(wr);
        };
        let id = wr.id;
        if fault.executes() {
            self.inner.post(wr)?;
        }
        match fault {
            Fault::FailUnexecuted => self.made_up.push(Completion {
                id,
                result: Err(FabricError::Transport(
                    "injected fault: not executed".into(),
                )),
            }),
            Fault::FailAfterExecuting => {
                self.failed.insert(id);
            }
            Fault::LoseCompletion => {
                self.lost.insert(id);
            }
            Fault::Vanish => {}
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
