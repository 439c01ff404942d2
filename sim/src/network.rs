//! The simulated fabric: how a client's work requests travel, execute and
//! complete (NIC queues per direction, link speed, wire, atomics, loopback,
//! the CPU path), and the network faults of [`Chaos`](crate::Chaos), each a
//! [`TransportFault`] of the project's one vocabulary or a delay: extra
//! delays (hence reordering), requests that fail before or after executing,
//! lost completions, requests that report an error first and land later
//! (the request travels on as an *orphan*: it executes at its responder
//! and nobody hears of it), completions held until the round waiting for
//! them was given up, unreachable nodes, and the requester's landing
//! deadline that enforces A2.

use nessie_model::memory::{InFlight, WordOrder};
use nessie_protocol::{FabricError, NodeId, Op, OpOutput, TransportFault, WorkRequest};

use crate::engine::{Engine, Ev};
use crate::spec::System;
use crate::systems::Actor;

/// A NIC request on its way through the simulated fabric.
pub(crate) struct NicRequest {
    /// Who posted it.
    pub(crate) actor: Actor,
    /// The poster's round it belongs to.
    pub(crate) round: u64,
    /// The posting client's incarnation (its process: a restarted client's
    /// new queue pairs never see its predecessor's completions).
    pub(crate) incarnation: u64,
    pub(crate) wr: WorkRequest,
    src: usize,
    dst: usize,
    resp_bytes: u64,
    /// When it was handed to the NIC (virtual time).
    posted: u64,
    /// The fault that hits it, if any.
    fate: Option<TransportFault>,
    /// The request of an error-then-land fault travelling on after its
    /// error completion: it executes, and completes nowhere.
    orphan: bool,
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
        let (src, round, incarnation) = match actor {
            Actor::Client(c) => (
                usize::from(self.clients[c].state.id.node.0),
                self.clients[c].round,
                self.clients[c].incarnation,
            ),
            Actor::Worker(w) => {
                let (src, round) = self.worker_src(w);
                (src, round, 0)
            }
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
            let watched = crate::audit::watched(&self.cfg, src, &wr.op);
            let result = InFlight::new(wr, 0).run_to_end(
                &mut self.mem,
                NodeId(src as u16),
                WordOrder::Ascending,
            );
            self.watch_marked_linked(watched, &result, t);
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
                incarnation,
                wr: done,
                src,
                dst,
                resp_bytes: 0,
                posted: t,
                fate: None,
                orphan: false,
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
        let mut fate = self.dice.fate(&self.spec.chaos);
        let margin = u64::try_from(self.cfg.deadline_margin.as_nanos()).unwrap_or(u64::MAX);
        let delay = self.dice.delay_out(&self.spec.chaos, margin);
        if delay > 0 {
            self.counts.delayed += 1;
        }
        let arrives = self.transmit(src, dst, t, req_bytes) + delay;
        let mutation = matches!(wr.op, Op::Write { .. } | Op::Cas { .. });
        if fate == Some(TransportFault::ErrorThenLand) && !mutation {
            // A READ executed after its error completion changes nothing.
            fate = Some(TransportFault::FailBeforeExecuting);
        }
        let mut req = NicRequest {
            actor,
            round,
            incarnation,
            wr,
            src,
            dst,
            resp_bytes,
            posted: t,
            fate,
            orphan: false,
            result: None,
        };
        if fate == Some(TransportFault::ErrorThenLand) {
            // The requester hears of an error; the request travels on, to
            // land by its landing deadline (or, A2 dropped, whenever).
            let chaos = self.spec.chaos;
            let late = chaos.late_landing.then_some(chaos.max_delay_ns.max(margin));
            let (error_at, land_at) =
                self.dice
                    .error_then_land(t, arrives, t + margin, self.reaction_ns(), late);
            self.counts.error_then_land += 1;
            let orphan = self.store(NicRequest {
                wr: req.wr.clone(),
                fate: None,
                orphan: true,
                ..req
            });
            self.schedule(land_at, Ev::Arrive(orphan));
            req.wr = placeholder(&req.wr);
            req.result = Some(Err(FabricError::Transport(
                "injected: failed (the request may still land)".into(),
            )));
            let r = self.store(req);
            self.schedule(error_at, Ev::Complete(r));
            return;
        }
        let r = self.store(req);
        self.schedule(arrives, Ev::Arrive(r));
    }

    /// About how long a client takes to react to an error completion with
    /// a request of its own landing at the same responder: a few steps and
    /// round trips (the window in which an error-then-land request may
    /// land between the requester's fence tries, issue 24 hole 1).
    fn reaction_ns(&self) -> u64 {
        let p = &self.p;
        let round_trip = 2 * (2 * p.nic_op_ns + p.wire_ns) + p.atomic_ns + p.cpu_step_ns;
        4 * round_trip
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
    /// the requester at `at` (an orphan's goes nowhere: it is dropped).
    fn fail(&mut self, r: usize, at: u64, err: FabricError) {
        if self.reqs[r].as_ref().is_some_and(|q| q.orphan) {
            self.reqs[r] = None;
            self.free_reqs.push(r);
            return;
        }
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
        if req.fate == Some(TransportFault::FailBeforeExecuting) {
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
        let watched = crate::audit::watched(&self.cfg, dst, &wr.op);
        let result = InFlight::new(wr, 0).run_to_end(
            &mut self.mem,
            NodeId(src as u16),
            WordOrder::Ascending,
        );
        self.watch_marked_linked(watched, &result, now);
        if let (Some((offset, len)), Ok(_)) = (written, &result) {
            self.landed(dst, offset, len, now);
        }
        if self.reqs[r].as_ref().is_some_and(|q| q.orphan) {
            // An error-then-land request landed: nobody hears of it.
            self.counts.orphans_landed += 1;
            self.reqs[r] = None;
            self.free_reqs.push(r);
            return;
        }
        let Some(req) = self.reqs[r].as_mut() else {
            return;
        };
        req.result = Some(if req.fate == Some(TransportFault::FailAfterExecuting) {
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
        if self.hold_late(r) {
            return;
        }
        let Some(req) = self.reqs[r].take() else {
            return;
        };
        self.free_reqs.push(r);
        if req.fate == Some(TransportFault::LoseCompletion) {
            self.counts.lost_completions += 1;
            return;
        }
        self.deliver(req, now);
    }

    /// A completion a [`TransportFault::LateCompletion`] hits reaches its
    /// Nessie client: held (true) while the round waiting for it still
    /// runs, until the client posts a later round
    /// ([`Engine::release_late`]); delivered as it is if that round is
    /// already over. From then on it is an ordinary completion, which the
    /// client core routes (or drops). A baseline's client or server worker
    /// runs no such routing (its engine drops completions by round): for it
    /// the completion is lost.
    fn hold_late(&mut self, r: usize) -> bool {
        let nessie = self.spec.system == System::Nessie;
        let Some(req) = self.reqs[r].as_mut() else {
            return false;
        };
        if req.fate != Some(TransportFault::LateCompletion) {
            return false;
        }
        let c = match req.actor {
            Actor::Client(c) if nessie => c,
            _ => {
                req.fate = Some(TransportFault::LoseCompletion);
                return false;
            }
        };
        req.fate = None;
        let cl = &mut self.clients[c];
        if cl.down_since.is_some() || req.incarnation != cl.incarnation {
            return false;
        }
        self.counts.late_completions += 1;
        if req.round != cl.round {
            return false;
        }
        cl.late.push(r);
        true
    }

    /// Client `c` posted a new round at `t`: the completions held back
    /// since an earlier round are handed in, each soon after (in half the
    /// cases before this round's own completions can come back, otherwise
    /// within a deadline margin).
    pub(crate) fn release_late(&mut self, c: usize, t: u64) {
        if self.clients[c].late.is_empty() {
            return;
        }
        let margin = u64::try_from(self.cfg.deadline_margin.as_nanos()).unwrap_or(u64::MAX);
        let soon = 2 * self.p.nic_op_ns + self.p.wire_ns;
        for r in std::mem::take(&mut self.clients[c].late) {
            let d = if self.dice.chance(500) {
                self.dice.below(soon)
            } else {
                self.dice.below(margin)
            };
            self.schedule(t + d, Ev::Complete(r));
        }
    }

    /// Client `c`'s process is gone: the completions it held back will
    /// never reach anyone.
    pub(crate) fn drop_late(&mut self, c: usize) {
        for r in std::mem::take(&mut self.clients[c].late) {
            self.reqs[r] = None;
            self.free_reqs.push(r);
        }
    }
}
