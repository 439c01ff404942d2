//! The simulated fabric: how a client's work requests travel, execute and
//! complete (NIC queues per direction, link speed, wire, atomics, loopback,
//! the CPU path), and the network faults of [`Chaos`](crate::Chaos): extra
//! delays (hence reordering), requests that fail before or after executing,
//! lost completions, unreachable nodes, and the requester's landing deadline
//! that enforces A2.

use nessie_model::memory::{InFlight, WordOrder};
use nessie_protocol::{FabricError, NodeId, Op, OpOutput, WorkRequest};

use crate::chaos::Fate;
use crate::engine::{Engine, Ev};
use crate::systems::Actor;

/// A NIC request on its way through the simulated fabric.
pub(crate) struct NicRequest {
    /// Who posted it.
    pub(crate) actor: Actor,
    /// The poster's round it belongs to.
    pub(crate) round: u64,
    pub(crate) wr: WorkRequest,
    src: usize,
    dst: usize,
    resp_bytes: u64,
    /// When it was handed to the NIC (virtual time).
    posted: u64,
    fate: Fate,
    pub(crate) result: Option<Result<OpOutput, FabricError>>,
}

fn placeholder(wr: &WorkRequest) -> WorkRequest {
    WorkRequest {
        id: wr.id,
        op: Op::LocalRead { offset: 0, len: 0 },
    }
}

impl Engine {
    /// Hands one work request of `actor` to its NIC (or CPU) at `t`.
    pub(crate) fn post(&mut self, actor: Actor, wr: WorkRequest, t: u64) {
        let (src, round) = match actor {
            Actor::Client(c) => (
                usize::from(self.clients[c].state.id.node.0),
                self.clients[c].round,
            ),
            Actor::Worker(w) => self.worker_src(w),
        };
        let (dst, req_bytes, resp_bytes, cpu_bytes) = match &wr.op {
            Op::LocalRead { len, .. } => (src, 0, 0, Some(u64::from(*len))),
            Op::LocalWrite { data, .. } => (src, 0, 0, Some(data.len() as u64)),
            Op::Read { addr, len } => (usize::from(addr.node.0), 16, u64::from(*len), None),
            Op::Write { addr, data } => (usize::from(addr.node.0), data.len() as u64, 0, None),
            Op::Cas { addr, .. } => (usize::from(addr.node.0), 24, 8, None),
        };
        if let Some(bytes) = cpu_bytes {
            // The CPU path: the poster's own memory, executed now, complete
            // after the copy, which the thread makes on its own core (after
            // the step that issued it and any copy before it in the round,
            // and only while it has the core); a server worker's access to
            // its tables also pays a cache miss.
            let done = placeholder(&wr);
            let written = match &wr.op {
                Op::LocalWrite { offset, data } => Some((*offset, data.len() as u64)),
                _ => None,
            };
            let result = InFlight::new(wr, 0).run_to_end(
                &mut self.mem,
                NodeId(src as u16),
                WordOrder::Ascending,
            );
            let cost = self.p.copy_time(bytes)
                + match actor {
                    Actor::Worker(_) => self.p.local_access_ns,
                    Actor::Client(_) => 0,
                };
            if let Some((offset, len)) = written {
                self.landed(src, offset, len, t);
            }
            let r = self.store(NicRequest {
                actor,
                round,
                wr: done,
                src,
                dst,
                resp_bytes: 0,
                posted: t,
                fate: Fate::Normal,
                result: Some(result),
            });
            let core = match actor {
                Actor::Client(c) => self.clients[c].core,
                Actor::Worker(w) => self.servers.as_ref().expect("servers").workers[w].core,
            };
            let begin = self.running_at(core, t.max(self.cores[core]));
            let at = begin + cost;
            self.cores[core] = at;
            if let Actor::Worker(w) = actor {
                self.worker_cpu(w, cost, begin);
            }
            self.schedule(at, Ev::Complete(r));
            return;
        }
        let fate = self.dice.fate(&self.spec.chaos);
        let margin = u64::try_from(self.cfg.deadline_margin.as_nanos()).unwrap_or(u64::MAX);
        let delay = self.dice.delay_out(&self.spec.chaos, margin);
        if delay > 0 {
            self.counts.delayed += 1;
        }
        let arrives = self.transmit(src, dst, t, req_bytes) + delay;
        let r = self.store(NicRequest {
            actor,
            round,
            wr,
            src,
            dst,
            resp_bytes,
            posted: t,
            fate,
            result: None,
        });
        self.schedule(arrives, Ev::Arrive(r));
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

    /// Whether an instant lies in the measured window (after any preload).
    pub(crate) fn measuring(&self, at: u64) -> bool {
        self.preloading == 0 && at >= self.measure_from && at < self.end
    }

    /// Sends `bytes` out of `from`'s NIC (its transmit queue) at `at` towards
    /// `to`; returns when they arrive there.
    pub(crate) fn transmit(&mut self, from: usize, to: usize, at: u64, bytes: u64) -> u64 {
        let measuring = self.measuring(at);
        let nic = &mut self.nics[from];
        let start = at.max(nic.tx_free);
        let wire = self.p.wire_time(bytes);
        let done = start + self.p.nic_op_ns + wire;
        nic.tx_free = done;
        if measuring {
            nic.tx_op_ns += self.p.nic_op_ns;
            nic.tx_wire_ns += wire;
        }
        done + if from == to {
            self.p.loopback_ns
        } else {
            self.p.wire_ns
        }
    }

    /// Fails request `r` without executing it; its error completion reaches
    /// the requester at `at`.
    fn fail(&mut self, r: usize, at: u64, err: FabricError) {
        if let Some(req) = self.reqs[r].as_mut() {
            req.result = Some(Err(err));
            req.wr = placeholder(&req.wr);
        }
        self.schedule(at, Ev::Complete(r));
    }

    pub(crate) fn on_arrive(&mut self, r: usize, now: u64) {
        let Some(req) = self.reqs[r].as_ref() else {
            return;
        };
        if self.node_down[req.dst] {
            // The transport retries, then gives up: nothing executed.
            self.counts.unreachable += 1;
            let at = now + self.spec.chaos.unreachable_after_ns;
            self.fail(r, at, FabricError::Timeout);
            return;
        }
        let atomic = matches!(req.wr.op, Op::Cas { .. });
        let measuring = self.measuring(now);
        let nic = &mut self.nics[req.dst];
        let start = now.max(nic.rx_free);
        let cost = self.p.nic_op_ns + if atomic { self.p.atomic_ns } else { 0 };
        let done = start + cost;
        nic.rx_free = done;
        if measuring {
            nic.rx_ns += cost;
        }
        self.schedule(done, Ev::Land(r));
    }

    pub(crate) fn on_land(&mut self, r: usize, now: u64) {
        let margin = u64::try_from(self.cfg.deadline_margin.as_nanos()).unwrap_or(u64::MAX);
        let Some(req) = self.reqs[r].as_mut() else {
            return;
        };
        let mutation = matches!(req.wr.op, Op::Write { .. } | Op::Cas { .. });
        let (dst, src, resp) = (req.dst, req.src, req.resp_bytes);
        if self.node_down[dst] {
            self.counts.unreachable += 1;
            let at = now + self.spec.chaos.unreachable_after_ns;
            self.fail(r, at, FabricError::Timeout);
            return;
        }
        let late = mutation && now > req.posted + margin;
        if late && self.spec.chaos.late_landing {
            // A2 dropped (negative control): it executes all the same.
            self.counts.late_landings += 1;
        } else if late {
            // A2, enforced by the requester: past its landing deadline the
            // queue pair was moved to the error state, so the request never
            // executes; the requester learns only that it failed.
            self.counts.landing_deadline_refusals += 1;
            self.fail(
                r,
                now,
                FabricError::Transport("landing deadline passed: queue pair flushed".into()),
            );
            return;
        }
        if req.fate == Fate::FailBeforeExec {
            self.counts.failed_before_exec += 1;
            self.fail(r, now, FabricError::Transport("injected: failed".into()));
            return;
        }
        let wr = placeholder(&req.wr);
        let wr = std::mem::replace(&mut req.wr, wr);
        let written = match &wr.op {
            Op::Write { addr, data } => Some((addr.offset, data.len() as u64)),
            _ => None,
        };
        let result = InFlight::new(wr, 0).run_to_end(
            &mut self.mem,
            NodeId(src as u16),
            WordOrder::Ascending,
        );
        if let (Some((offset, len)), Ok(_)) = (written, &result) {
            self.landed(dst, offset, len, now);
        }
        let Some(req) = self.reqs[r].as_mut() else {
            return;
        };
        req.result = Some(if req.fate == Fate::FailAfterExec {
            self.counts.failed_after_exec += 1;
            Err(FabricError::Transport(
                "injected: failed after executing".into(),
            ))
        } else {
            result
        });
        let delay = self.dice.delay(&self.spec.chaos);
        if delay > 0 {
            self.counts.delayed += 1;
        }
        let arrives = self.transmit(dst, src, now, resp) + delay;
        self.schedule(arrives, Ev::Back(r));
    }

    pub(crate) fn on_back(&mut self, r: usize, now: u64) {
        let Some(req) = self.reqs[r].as_ref() else {
            return;
        };
        let measuring = self.measuring(now);
        let nic = &mut self.nics[req.src];
        let start = now.max(nic.rx_free);
        let done = start + self.p.nic_op_ns;
        nic.rx_free = done;
        if measuring {
            nic.rx_ns += self.p.nic_op_ns;
        }
        self.schedule(done, Ev::Complete(r));
    }

    pub(crate) fn on_complete(&mut self, r: usize, now: u64) {
        let Some(req) = self.reqs[r].take() else {
            return;
        };
        self.free_reqs.push(r);
        if req.fate == Fate::LoseCompletion {
            self.counts.lost_completions += 1;
            return;
        }
        self.deliver(req, now);
    }
}
