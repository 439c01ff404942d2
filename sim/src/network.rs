//! The simulated fabric: how a client's work requests travel, execute and
//! complete (NIC queues per direction, link speed, wire, atomics, loopback,
//! the CPU path), and the network faults of [`Chaos`](crate::Chaos), each a
//! [`TransportFault`] of the project's one vocabulary or a delay: extra
//! delays (hence reordering), requests that fail before or after executing,
//! lost completions, requests that report an error first and land later
//! (the request travels on as an *orphan*: it executes at its responder
//! and nobody hears of it), completions held until the round waiting for
//! them was given up, requests that vanish, WRITEs executed twice (the copy
//! another orphan), unreachable nodes, and the requester's landing
//! deadline that enforces A2.

use nessie_check::memory::{transfer_words, InFlight, WordOrder};
use nessie_protocol::{
    FabricError, NodeId, Op, OpOutput, TransportError, TransportFault, WorkRequest,
};

use crate::chain::Gate;
use crate::engine::{Engine, Ev};
use crate::nic::{ChainSlot, NicRequest};
use crate::systems::Actor;
use nessie_systems::SystemKind;

fn placeholder(wr: &WorkRequest) -> WorkRequest {
    WorkRequest {
        id: wr.id,
        op: Op::LocalRead { offset: 0, len: 0 },
    }
}

impl Engine {
    /// Hands one work request of `actor` to its NIC (or CPU) at `t`.
    pub(crate) fn post(&mut self, actor: Actor, wr: WorkRequest, t: u64) {
        self.post_linked(actor, wr, t, None);
    }

    /// What every request of `actor` starts as at `t`: nothing executed, no
    /// fault, the work request's id kept (its operation goes to whoever
    /// executes it); with where it goes and the bytes it moves each way
    /// (`None` for the wire: the CPU path, its bytes copied).
    fn request(
        &self,
        actor: Actor,
        wr: &WorkRequest,
        t: u64,
        chain: Option<ChainSlot>,
    ) -> (NicRequest, u64, u64, Option<u64>) {
        let (src, round, incarnation) = self.poster(actor);
        // A link of a chain answers the round the chain was posted in.
        let (round, incarnation) = chain
            .and_then(|s| self.net.chains.get(&s.chain))
            .map_or((round, incarnation), |ch| (ch.round, ch.incarnation));
        let (dst, req_bytes, resp_bytes, cpu_bytes) = match wr.op.unwindowed() {
            Op::LocalRead { len, .. } => (src, 0, 0, Some(u64::from(*len))),
            Op::LocalWrite { data, .. } => (src, 0, 0, Some(data.len() as u64)),
            Op::BindWindow { .. } => (src, 0, 0, Some(0)),
            // A window's key travels in the request's header.
            Op::Windowed { .. } => unreachable!("unwindowed"),
            Op::Read { addr, len } => (usize::from(addr.node.0), 16, u64::from(*len), None),
            Op::Write { addr, data } => (usize::from(addr.node.0), data.len() as u64, 0, None),
            Op::Cas { addr, .. } => (usize::from(addr.node.0), 24, 8, None),
        };
        let base = NicRequest {
            actor,
            round,
            incarnation,
            wr: placeholder(wr),
            src,
            dst,
            resp_bytes: 0,
            posted: t,
            fate: None,
            orphan: false,
            torn: false,
            placing: None,
            place_only: None,
            link_error: false,
            cpu: false,
            chain,
            result: None,
        };
        (base, req_bytes, resp_bytes, cpu_bytes)
    }

    /// Where `actor` posts from, and its current round and incarnation.
    pub(crate) fn poster(&self, actor: Actor) -> (usize, u64, u64) {
        match actor {
            Actor::Client(c) => (
                self.client_nic(c),
                self.clients[c].round,
                self.clients[c].incarnation,
            ),
            Actor::Worker(w) => {
                let (src, round) = self.worker_src(w);
                (src, round, 0)
            }
        }
    }

    /// The NIC client `c`'s requests leave from and come back to: its
    /// node's, or for a client without storage on a host of its own
    /// (`Tuning::pure_client_hosts`), the host of its share's node, whose
    /// NIC follows the nodes'.
    pub(crate) fn client_nic(&self, c: usize) -> usize {
        let node = usize::from(self.clients[c].state.id.node.0);
        let nodes = usize::from(self.spec.nodes);
        if self.clients[c].state.pure.is_some() && self.net.nics.len() > nodes {
            nodes + node
        } else {
            node
        }
    }

    /// A link of a chain that is never sent (flushed behind a failed
    /// predecessor), stored so that it can complete with its error.
    pub(crate) fn unsent_request(
        &mut self,
        actor: Actor,
        wr: WorkRequest,
        t: u64,
        slot: ChainSlot,
    ) -> usize {
        let (base, ..) = self.request(actor, &wr, t, Some(slot));
        self.net.store(base)
    }

    /// Hands one work request of `actor` to its NIC (or CPU) at `t`, as
    /// link `chain` of an ordered chain if it is one ([`crate::chain`]).
    pub(crate) fn post_linked(
        &mut self,
        actor: Actor,
        wr: WorkRequest,
        t: u64,
        chain: Option<ChainSlot>,
    ) {
        let (base, req_bytes, resp_bytes, cpu_bytes) = self.request(actor, &wr, t, chain);
        // A chain's links meet the faults of the instant it was posted (a
        // fenced link leaves later, but was posted then).
        let chaos = chain
            .and_then(|s| self.net.chains.get(&s.chain))
            .map_or(self.spec.chaos, |ch| ch.chaos);
        let src = base.src;
        let dst = base.dst;
        if let Some(bytes) = cpu_bytes {
            // The CPU path: the poster's own memory, executed now, complete
            // after the copy, which the thread makes on its own core (after
            // the step that issued it and any copy before it in the round,
            // and only while it has the core); a server worker's access to
            // its tables also pays a cache miss.
            let written = match &wr.op {
                Op::LocalWrite { offset, data } => Some((*offset, data.len() as u64)),
                _ => None,
            };
            let watched = crate::audit::watched(&self.cfg, src, &wr.op);
            let result = InFlight::new(wr, 0).run_to_end(
                &mut self.cluster.mem,
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
            let r = self.net.store(NicRequest {
                cpu: true,
                result: Some(result),
                ..base
            });
            let core = match actor {
                Actor::Client(c) => self.clients[c].core,
                Actor::Worker(w) => {
                    self.server_side.servers.as_ref().expect("servers").workers[w].core
                }
            };
            let begin = self.running_at(core, t.max(self.cluster.cores[core]));
            let at = begin + cost;
            self.cluster.cores[core] = at;
            if let Actor::Worker(w) = actor {
                self.worker_cpu(w, cost, begin);
            }
            self.events.schedule(at, Ev::Complete(r));
            return;
        }
        if self.net.link_down(actor, dst, t) {
            // Posted to a queue pair in the error state: refused at once,
            // nothing executes.
            self.chaos.counts.link_errors += 1;
            let r = self.net.store(NicRequest {
                result: Some(Err(FabricError::Transport(TransportError::Flushed))),
                ..base
            });
            if let Some(slot) = chain {
                self.link_not_executed(slot, t);
            }
            self.events.schedule(t + self.p.nic_op_ns, Ev::Complete(r));
            return;
        }
        let mut fate = match self.chaos.dice.fate(&chaos) {
            None => self.chaos.rare_dice.rare_fate(&chaos),
            fate => fate,
        };
        #[cfg(test)]
        if let Some(forced) = self.net.forced_fates.pop_front() {
            fate = forced;
        }
        let margin = u64::try_from(self.cfg.deadline_margin.as_nanos()).unwrap_or(u64::MAX);
        let delay = self.chaos.dice.delay_out(&chaos, margin);
        if delay > 0 {
            self.chaos.counts.delayed += 1;
        }
        let arrives = self.transmit(src, dst, t, req_bytes) + delay;
        let mutation = matches!(wr.op.unwindowed(), Op::Write { .. } | Op::Cas { .. });
        if fate == Some(TransportFault::ErrorThenLand) && !mutation {
            // A READ executed after its error completion changes nothing.
            fate = Some(TransportFault::FailBeforeExecuting);
        }
        if fate == Some(TransportFault::Vanish) {
            // Never executes, never completes: the round gives it up at its
            // deadline.
            self.chaos.counts.vanished += 1;
            if let Some(slot) = chain {
                // Its queue pair gives it up: every link behind is flushed.
                self.link_not_executed(slot, t);
                self.link_completed(slot, false, t);
            }
            return;
        }
        if fate == Some(TransportFault::DuplicateWrite)
            && !matches!(wr.op.unwindowed(), Op::Write { .. })
        {
            // A READ repeated changes nothing; a duplicate atomic is answered
            // from the responder's replay cache.
            fate = None;
        }
        let torn = transfer_words(&wr.op) > 1 && self.chaos.dice.chance(chaos.torn_permille);
        let mut req = NicRequest {
            wr,
            resp_bytes,
            fate,
            torn,
            ..base
        };
        if fate == Some(TransportFault::ErrorThenLand) {
            // The requester hears of an error; the request travels on, to
            // land by its landing deadline (or, A2 dropped, whenever).
            let late = self.late_landing_bound(margin);
            let (error_at, land_at) =
                self.chaos
                    .dice
                    .error_then_land(t, arrives, t + margin, self.reaction_ns(), late);
            self.chaos.counts.error_then_land += 1;
            let orphan = self.net.store(req.orphan(None));
            self.events.schedule(land_at, Ev::Arrive(orphan));
            req.wr = placeholder(&req.wr);
            req.result = Some(Err(FabricError::Transport(TransportError::Injected(
                TransportFault::ErrorThenLand,
            ))));
            let r = self.net.store(req);
            self.events.schedule(error_at, Ev::Complete(r));
            return;
        }
        if fate == Some(TransportFault::DuplicateWrite) {
            // The original executes and completes as usual; a copy travels
            // on as an orphan and lands once more, after the original could
            // (by the landing deadline, or whenever with A2 dropped): a
            // retransmission the fabric held.
            let (late, soon) = (self.late_landing_bound(margin), self.reaction_ns());
            let (_, land_at) =
                self.chaos
                    .rare_dice
                    .error_then_land(t, arrives, t + margin, soon, late);
            self.chaos.counts.duplicate_writes += 1;
            let copy = self.net.store(NicRequest {
                torn: false,
                ..req.orphan(req.fate)
            });
            self.events.schedule(land_at, Ev::Arrive(copy));
        }
        let r = self.net.store(req);
        self.events.schedule(arrives, Ev::Arrive(r));
    }

    /// How long after its earliest instant an orphan may land with A2
    /// dropped ([`Chaos::late_landing`](crate::Chaos::late_landing): up to
    /// `max_delay_ns`, at least a margin); `None` while A2 holds.
    fn late_landing_bound(&self, margin: u64) -> Option<u64> {
        let chaos = self.spec.chaos;
        chaos.late_landing.then_some(chaos.max_delay_ns.max(margin))
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

    /// Whether an instant lies in the measured window (after any preload).
    pub(crate) fn measuring(&self, at: u64) -> bool {
        self.workload.preloading == 0 && at >= self.workload.measure_from && at < self.events.end
    }

    /// How much of the busy interval `[from, to)` lies in the measured
    /// window: a resource's busy share counts the time it served in the
    /// window, not the work that arrived there (a saturated queue's backlog
    /// past the window's end made the receive queue of a TPDS node report
    /// 111 % busy).
    fn in_window(&self, from: u64, to: u64) -> u64 {
        if self.workload.preloading > 0 {
            return 0;
        }
        to.min(self.events.end)
            .saturating_sub(from.max(self.workload.measure_from))
    }

    /// Sends `bytes` out of `from`'s NIC (its transmit queue) at `at` towards
    /// `to`; returns when they arrive there.
    pub(crate) fn transmit(&mut self, from: usize, to: usize, at: u64, bytes: u64) -> u64 {
        let units = self.p.nic_units as usize;
        let op = self.p.nic_op_ns;
        let wire = self.p.wire_time(bytes);
        let nic = &mut self.net.nics[from];
        let (processed, done) = if units <= 1 {
            // One server for processing and wire together.
            let done = serve_on_a_unit(&mut nic.tx_units, 1, at, op + wire);
            (done - wire, done)
        } else {
            // A processing unit, then the link, one transfer at a time.
            let processed = serve_on_a_unit(&mut nic.tx_units, units, at, op);
            nic.link_free = processed.max(nic.link_free) + wire;
            (processed, nic.link_free)
        };
        let (op_busy, wire_busy) = (
            self.in_window(processed - op, processed),
            self.in_window(done - wire, done),
        );
        let nic = &mut self.net.nics[from];
        nic.tx_op_ns += op_busy;
        nic.tx_wire_ns += wire_busy;
        done + if from == to {
            self.p.loopback_ns
        } else {
            self.p.wire_ns
        }
    }

    /// Fails request `r` without executing it; its error completion reaches
    /// the requester at `at` (an orphan's goes nowhere: it is dropped). A
    /// link of a chain that never executes flushes the link waiting behind
    /// it.
    pub(crate) fn fail_request(&mut self, r: usize, at: u64, err: FabricError) {
        if let Some(slot) = self.net.reqs[r].as_ref().and_then(|q| q.chain) {
            self.link_not_executed(slot, at);
        }
        if self.net.reqs[r].as_ref().is_some_and(|q| q.orphan) {
            self.net.release(r);
            return;
        }
        if let Some(req) = self.net.reqs[r].as_mut() {
            req.result = Some(Err(err));
            req.wr = placeholder(&req.wr);
        }
        self.events.schedule(at, Ev::Complete(r));
    }

    pub(crate) fn on_arrive(&mut self, r: usize, now: u64) {
        let Some(req) = self.net.reqs[r].as_ref() else {
            return;
        };
        if let Some(slot) = req.chain {
            // A link waits for its predecessor (flushed if it never
            // executes), at a node up or down.
            match self.chain_gate(slot, r) {
                Gate::Go { errored } => {
                    if errored {
                        if let Some(q) = self.net.reqs[r].as_mut() {
                            q.link_error = true;
                        }
                    }
                }
                Gate::Park => return,
                Gate::Flush => return self.flush_link(r, now),
            }
        }
        let Some(req) = self.net.reqs[r].as_ref() else {
            return;
        };
        if self.cluster.node_down[req.dst] {
            // The transport retries, then gives up: nothing executed.
            self.chaos.counts.unreachable += 1;
            let at = now + self.spec.chaos.unreachable_after_ns;
            self.fail_request(r, at, FabricError::Timeout);
            return;
        }
        let atomic = match *req.wr.op.unwindowed() {
            Op::Cas { addr, .. } => Some((req.dst, addr.region, addr.offset)),
            _ => None,
        };
        let units = self.p.nic_units as usize;
        let nic = &mut self.net.nics[req.dst];
        let done = if units <= 1 {
            // One server, which a CAS holds for its atomic too.
            let cost = self.p.nic_op_ns
                + if atomic.is_some() {
                    self.p.atomic_ns
                } else {
                    0
                };
            let done = serve_on_a_unit(&mut nic.rx_units, 1, now, cost);
            let busy = self.in_window(done - cost, done);
            self.net.nics[req.dst].rx_ns += busy;
            done
        } else {
            let op = self.p.nic_op_ns;
            let processed = serve_on_a_unit(&mut nic.rx_units, units, now, op);
            let busy = self.in_window(processed - op, processed);
            let nic = &mut self.net.nics[req.dst];
            nic.rx_ns += busy;
            match atomic {
                // The atomic unit, and the word's last CAS, then the PCIe
                // round trip to host memory; the processing unit is free.
                Some(word) => {
                    let word_free = self.net.atomic_words.get(&word).copied().unwrap_or(0);
                    let start = processed.max(nic.atomic_free).max(word_free);
                    nic.atomic_free = start + self.p.atomic_unit_ns;
                    self.net
                        .atomic_words
                        .insert(word, start + self.p.atomic_word_ns);
                    start + self.p.atomic_ns
                }
                None => processed,
            }
        };
        self.events.schedule(done, Ev::Land(r));
    }

    pub(crate) fn on_land(&mut self, r: usize, now: u64) {
        let margin = u64::try_from(self.cfg.deadline_margin.as_nanos()).unwrap_or(u64::MAX);
        let Some(req) = self.net.reqs[r].as_mut() else {
            return;
        };
        let mutation = matches!(req.wr.op.unwindowed(), Op::Write { .. } | Op::Cas { .. })
            || req
                .placing
                .as_ref()
                .is_some_and(|p| matches!(p.wr.op.unwindowed(), Op::Write { .. }));
        let (dst, actor, posted, orphan) = (req.dst, req.actor, req.posted, req.orphan);
        let placed = req.placing.is_some();
        if self.cluster.node_down[dst] {
            self.chaos.counts.unreachable += 1;
            self.chaos.counts.partly_placed += u64::from(placed);
            let at = now + self.spec.chaos.unreachable_after_ns;
            self.fail_request(r, at, FabricError::Timeout);
            return;
        }
        let late = mutation && now > posted + margin;
        if late && self.spec.chaos.late_landing {
            // A2 dropped (negative control): it executes all the same.
            if !placed {
                self.chaos.counts.late_landings += 1;
            }
        } else if late {
            // A2, enforced by the requester: past its landing deadline the
            // queue pair was moved to the error state, so the request (or
            // the rest of a torn one) never executes; the requester learns
            // only that it failed.
            self.chaos.counts.landing_deadline_refusals += 1;
            self.chaos.counts.partly_placed += u64::from(placed);
            self.fail_request(
                r,
                now,
                FabricError::Transport(TransportError::LandingWindowPassed),
            );
            return;
        }
        if !orphan && self.net.link_failed_since(actor, dst, posted, now) {
            // The requester's queue pair failed while this was outstanding:
            // flushed before it executes (or before the rest of a torn
            // transfer does), or, already on the wire, it executes and its
            // completion reports an error. Decided once.
            let decided = self.net.reqs[r].as_ref().is_some_and(|q| q.link_error);
            if !decided {
                let on_the_wire = !placed && self.chaos.dice.chance(500);
                let Some(req) = self.net.reqs[r].as_mut() else {
                    return;
                };
                req.link_error = true;
                self.chaos.counts.link_errors += 1;
                if !on_the_wire {
                    self.chaos.counts.partly_placed += u64::from(placed);
                    self.fail_request(r, now, FabricError::Transport(TransportError::Flushed));
                    return;
                }
            }
        }
        let Some(req) = self.net.reqs[r].as_mut() else {
            return;
        };
        if !placed && req.fate == Some(TransportFault::FailBeforeExecuting) {
            self.chaos.counts.failed_before_exec += 1;
            self.fail_request(
                r,
                now,
                FabricError::Transport(TransportError::Injected(
                    TransportFault::FailBeforeExecuting,
                )),
            );
            return;
        }
        if req.torn {
            return self.land_one_word(r, now);
        }
        let wr = placeholder(&req.wr);
        let wr = std::mem::replace(&mut req.wr, wr);
        let src = req.src;
        let written = match wr.op.unwindowed() {
            Op::Write { addr, data } => Some((addr.offset, data.len() as u64)),
            _ => None,
        };
        let watched = crate::audit::watched(&self.cfg, dst, &wr.op);
        let result = InFlight::new(wr, 0).run_to_end(
            &mut self.cluster.mem,
            NodeId(src as u16),
            WordOrder::Ascending,
        );
        self.watch_marked_linked(watched, &result, now);
        if let (Some((offset, len)), Ok(_)) = (written, &result) {
            self.landed(dst, offset, len, now);
        }
        self.executed(r, result, now);
    }

    /// One word of torn transfer `r` lands at `now` (ascending address
    /// order); the next one later, unless this was the last or a failure
    /// after executing stops the transfer here, part placed.
    fn land_one_word(&mut self, r: usize, now: u64) {
        let Some(mut req) = self.net.reqs[r].take() else {
            return;
        };
        if req.placing.is_none() {
            self.chaos.counts.torn += 1;
            let wr = placeholder(&req.wr);
            let wr = std::mem::replace(&mut req.wr, wr);
            let n = transfer_words(&wr.op);
            if req.fate == Some(TransportFault::FailAfterExecuting) && n > 1 {
                req.place_only = Some(1 + self.chaos.dice.below(u64::from(n - 1)) as u32);
            }
            req.placing = Some(InFlight::new(wr, req.posted));
        }
        let placing = req.placing.as_mut().expect("set above");
        let word = u64::from(placing.words);
        let write_at = match placing.wr.op.unwindowed() {
            Op::Write { addr, .. } => Some(addr.offset + 8 * word),
            _ => None,
        };
        let step = placing.step(
            &mut self.cluster.mem,
            NodeId(req.src as u16),
            true,
            WordOrder::Ascending,
        );
        let placed = placing.words;
        let (dst, stop) = (req.dst, req.place_only);
        self.net.reqs[r] = Some(req);
        if let (Some(offset), None | Some(Ok(_))) = (write_at, &step) {
            self.landed(dst, offset, 8, now);
        }
        match step {
            Some(result) => self.executed(r, result, now),
            None if stop == Some(placed) => {
                // A failure after executing met the transfer part placed:
                // the rest never lands.
                self.chaos.counts.failed_after_exec += 1;
                self.chaos.counts.partly_placed += 1;
                self.fail_request(
                    r,
                    now,
                    FabricError::Transport(TransportError::Injected(
                        TransportFault::FailBeforeExecuting,
                    )),
                );
            }
            None => {
                let gap = 1 + self.chaos.dice.below(2 * self.p.nic_op_ns + self.p.wire_ns);
                self.events.schedule(now + gap, Ev::Land(r));
            }
        }
    }

    /// Request `r` executed at its responder at `now` with `result`: an
    /// orphan is done; anything else sends its completion back (an error if
    /// a fault says so).
    fn executed(&mut self, r: usize, result: Result<OpOutput, FabricError>, now: u64) {
        if let Some(q) = self.net.reqs[r].as_ref() {
            // A link of a chain: the links behind it may go on (behind an
            // error-then-land link, whose error came first, or a failure
            // after executing, reporting the queue pair's failure), unless
            // the responder refused it (a remote access error executes
            // nothing).
            let errored = q.orphan
                || q.link_error
                || matches!(
                    q.fate,
                    Some(TransportFault::FailAfterExecuting | TransportFault::LoseCompletion)
                );
            match (q.chain, result.is_ok()) {
                (Some(slot), true) => self.link_executed(slot, errored, now),
                (Some(slot), false) => self.link_not_executed(slot, now),
                (None, _) => {}
            }
        }
        if let Some(q) = self.net.reqs[r].as_ref().filter(|q| q.orphan) {
            // An error-then-land request or a duplicate's copy landed:
            // nobody hears of it.
            if q.fate == Some(TransportFault::DuplicateWrite) {
                self.chaos.counts.duplicates_landed += 1;
            } else {
                self.chaos.counts.orphans_landed += 1;
            }
            self.net.release(r);
            return;
        }
        let Some(req) = self.net.reqs[r].as_mut() else {
            return;
        };
        req.placing = None;
        let (dst, src, resp) = (req.dst, req.src, req.resp_bytes);
        req.result = Some(if req.fate == Some(TransportFault::FailAfterExecuting) {
            self.chaos.counts.failed_after_exec += 1;
            Err(FabricError::Transport(TransportError::Injected(
                TransportFault::FailAfterExecuting,
            )))
        } else if req.link_error {
            Err(FabricError::Transport(TransportError::QueuePairFailed))
        } else {
            result
        });
        let delay = self.chaos.dice.delay(&self.spec.chaos);
        if delay > 0 {
            self.chaos.counts.delayed += 1;
        }
        let arrives = self.transmit(dst, src, now, resp) + delay;
        self.events.schedule(arrives, Ev::Back(r));
    }

    pub(crate) fn on_back(&mut self, r: usize, now: u64) {
        let Some(req) = self.net.reqs[r].as_ref() else {
            return;
        };
        let units = self.p.nic_units as usize;
        let op = self.p.nic_op_ns;
        let src = req.src;
        let done = serve_on_a_unit(&mut self.net.nics[src].rx_units, units.max(1), now, op);
        self.net.nics[src].rx_ns += self.in_window(done - op, done);
        self.events.schedule(done, Ev::Complete(r));
    }

    pub(crate) fn on_complete(&mut self, r: usize, now: u64) {
        if let Some((slot, ok)) = self.net.reqs[r].as_ref().and_then(|q| {
            let lost = q.fate == Some(TransportFault::LoseCompletion);
            q.chain
                .map(|s| (s, !lost && matches!(q.result, Some(Ok(_)))))
        }) {
            // The requester's NIC has the completion (a late one is late to
            // its software only): a fenced link behind it goes, or is
            // flushed. A lost completion is the queue pair's failure: the
            // fenced link is flushed.
            let failed_since = self.net.reqs[r].as_ref().is_some_and(|q| {
                !q.link_error && self.net.link_failed_since(q.actor, q.dst, q.posted, now)
            });
            let ok = ok && !failed_since;
            self.link_completed(slot, ok, now);
        }
        if self.hold_late(r) {
            return;
        }
        let Some(mut req) = self.net.reqs[r].take() else {
            return;
        };
        if !req.cpu
            && !req.link_error
            && matches!(req.result, Some(Ok(_)))
            && self
                .net
                .link_failed_since(req.actor, req.dst, req.posted, now)
        {
            // Executed, and the queue pair failed before its completion
            // came back: the completion reports an error.
            self.chaos.counts.link_errors += 1;
            req.result = Some(Err(FabricError::Transport(TransportError::QueuePairFailed)));
        }
        self.net.free_reqs.push(r);
        if req.fate == Some(TransportFault::LoseCompletion) {
            self.chaos.counts.lost_completions += 1;
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
        let nessie = self.spec.system == SystemKind::Nessie;
        let Some(req) = self.net.reqs[r].as_mut() else {
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
        self.chaos.counts.late_completions += 1;
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
            let d = if self.chaos.dice.chance(500) {
                self.chaos.dice.below(soon)
            } else {
                self.chaos.dice.below(margin)
            };
            self.events.schedule(t + d, Ev::Complete(r));
        }
    }

    /// Client `c`'s process is gone: the completions it held back will
    /// never reach anyone.
    pub(crate) fn drop_late(&mut self, c: usize) {
        for r in std::mem::take(&mut self.clients[c].late) {
            self.net.release(r);
        }
    }
}

/// Serves `cost` ns on the first of `units` processing units (their next
/// free instants) to be free at or after `at`; returns when it is done.
fn serve_on_a_unit(free: &mut [u64], units: usize, at: u64, cost: u64) -> u64 {
    let n = units.min(free.len());
    let units = &mut free[..n];
    let Some(next) = units.iter_mut().min_by_key(|f| **f) else {
        return at + cost;
    };
    *next = at.max(*next) + cost;
    *next
}
