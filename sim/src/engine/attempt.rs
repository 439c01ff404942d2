//! An operation's attempts in the engine: starting one, polling its
//! machine (the margin monitor watching what it posts), waking it at its
//! machine's `poll_timeout`, delivering completions, finishing attempts and
//! operations, and recording them in the history.

use super::workload::Ended;
use super::*;
use crate::checks::{CorruptState, MarginBreach, Mutation, SweepFailure};

impl Engine {
    pub(super) fn margin_ns(&self) -> u64 {
        nanos(self.cfg.deadline_margin)
    }

    /// The longest back-off between two attempts (the configuration's
    /// retry policy), ns.
    pub(super) fn max_backoff_ns(&self) -> u64 {
        nanos(self.cfg.retry.max_backoff)
    }

    pub(crate) fn start_attempt(&mut self, c: usize) {
        let cl = &mut self.clients[c];
        let Some(op) = cl.op.as_mut() else {
            return;
        };
        op.attempts += 1;
        op.attempt_started = None;
        cl.commits.clear();
        cl.round += 1;
        cl.outstanding = 0;
        cl.awaiting = None;
        cl.due = None;
        let req = op.request.clone();
        if let (Some(cm), Some(dir)) = (cl.cell.as_ref(), self.server_side.dir.as_ref()) {
            cl.machine = Some(ClientMachine::Kv(KvMachine::Cell(
                cm.request(&req, 1),
                dir.clone(),
            )));
            return;
        }
        cl.machine = match (cl.kv_core.take(), op.budget.take()) {
            (Some(core), Some(budget)) => Some(ClientMachine::Kv(KvMachine::attempt(
                cl.state.id.node,
                core,
                budget,
                req,
                (!self.spec.server_faults.unbounded_rounds).then_some(self.cfg.retry.op_timeout),
            ))),
            // A baseline client whose core a failed machine took cannot go
            // on (its machines never fail: they report errors as results).
            (None, Some(_)) => None,
            _ => Some(ClientMachine::Nessie(Box::new(RequestMachine::new(&req)))),
        };
    }

    pub(super) fn on_poll(&mut self, c: usize, now: u64) {
        if self.clients[c].down_since.is_some() {
            return;
        }
        let chaos = self.spec.chaos;
        if self.chaos.dice.chance(chaos.pause_permille) {
            // The client thread is descheduled before this step.
            self.chaos.counts.pauses += 1;
            let boundary = match self.deadline_boundaries(c) {
                Some(b) if chaos.boundary_pauses && self.chaos.dice.chance(500) => {
                    let b = b[self.chaos.dice.below(3) as usize];
                    let half = self.margin_ns() / 2;
                    Some(b.saturating_sub(half) + self.chaos.dice.below(2 * half + 1))
                        .filter(|&t| t > now)
                }
                _ => None,
            };
            let resume =
                boundary.unwrap_or_else(|| now + 1 + self.chaos.dice.below(chaos.max_pause_ns));
            self.events.schedule(resume, Ev::Poll(c));
            return;
        }
        if self.clients[c].op.is_some() && self.chaos.dice.chance(chaos.crash_permille) {
            self.crash(c, now);
            return;
        }
        if self.clients[c].op.is_none() && !self.next_op(c, now) {
            return;
        }
        self.step(c, now);
    }

    /// The timing boundaries of client `c`'s current attempt, in virtual
    /// time: the deadline less the margin (the last instant the protocol may
    /// post a mutation), the deadline, and the deadline plus the clock skew
    /// (when others may reclaim its entries). `None` before the attempt's
    /// first step.
    pub(super) fn deadline_boundaries(&self, c: usize) -> Option<[u64; 3]> {
        let start = self.clients[c].op.as_ref()?.attempt_started?;
        let deadline = start.saturating_add(nanos(self.cfg.expiration));
        Some([
            deadline.saturating_sub(self.margin_ns()),
            deadline,
            deadline.saturating_add(nanos(self.cfg.clock_skew)),
        ])
    }

    /// The margin rule (docs/protocol.md §4), watched from outside the
    /// protocol: an attempt posts a mutation (a CAS or WRITE through the NIC:
    /// lock, install, commit, finish, unlink, rollback, recycle mark) only
    /// while its clock, read at `start` for this step, shows more than one
    /// deadline margin left, so that, by A2, it lands within a margin of its
    /// posting, by the deadline (up to the step's CPU time). The one
    /// exception the rule names: the CAS that settles a lost commit may
    /// abort the entry (`Writing -> Aborted`) at any time, i.e. an abort of a
    /// state word this attempt has posted a commit to. Breaches are reported
    /// ([`SimReport::margin_breaches`]).
    pub(super) fn watch_margin(&mut self, c: usize, start: u64, wrs: &[WorkRequest]) {
        let bounds = self.deadline_boundaries(c);
        for wr in wrs {
            // A request through a window is the mutation it carries.
            let (what, addr) = match wr.op.unwindowed() {
                Op::Cas { addr, new, .. } if addr.region == Region::Data => {
                    match StateWord::decode(*new).state {
                        DteState::Valid | DteState::Deleted => {
                            self.clients[c].commits.push(*addr);
                            (Mutation::CommitCas, addr)
                        }
                        DteState::Aborted if self.clients[c].commits.contains(addr) => continue,
                        _ => (Mutation::StateCas, addr),
                    }
                }
                Op::Cas { addr, .. } => (Mutation::IndexCas, addr),
                Op::Write { addr, .. } => (Mutation::Write, addr),
                _ => continue,
            };
            let Some([last, deadline, _]) = bounds else {
                continue;
            };
            if start >= last {
                self.checks.margin.record(MarginBreach {
                    client: c,
                    mutation: what,
                    addr: *addr,
                    before_deadline_ns: deadline as i64 - start as i64,
                    margin_ns: self.margin_ns(),
                });
            }
        }
    }

    /// Polls the client's machine until it waits or finishes.
    pub(crate) fn step(&mut self, c: usize, now: u64) {
        // The thread runs once its core is free (of its other operations'
        // polls and of background threads' time slices), reads its clock
        // then, and spends one protocol step of CPU before anything goes out.
        // (Until then the step waits as an event of its own: a step run
        // early would hand the NICs requests stamped in the future, and a
        // NIC's queue must see its requests in time order.)
        let core = self.clients[c].core;
        let start = self.running_at(core, now.max(self.cluster.cores[core]));
        if start > now {
            self.events.schedule(start, Ev::Poll(c));
            return;
        }
        if self.clients[c].straggler && !self.clients[c].slowed {
            // A straggler is slow to get to its step (it reads its clock
            // only then: the protocol's time checks use the time a request
            // is posted).
            let slow = self.chaos.dice.below(self.spec.chaos.straggler_step_ns + 1);
            self.clients[c].slowed = true;
            self.cluster.cores[core] = start + slow;
            self.events.schedule(start + slow, Ev::Poll(c));
            return;
        }
        self.clients[c].slowed = false;
        if matches!(self.clients[c].machine, Some(ClientMachine::Kv(_))) {
            let cl = &mut self.clients[c];
            let t = start
                + if cl.local_round {
                    0
                } else {
                    self.p.cpu_step_ns
                };
            cl.local_round = false;
            self.cluster.cores[core] = t;
            self.step_kv(c, start, t);
            return;
        }
        let t = start + self.p.cpu_step_ns;
        self.cluster.cores[core] = t;
        if let Some(op) = self.clients[c].op.as_mut() {
            op.attempt_started.get_or_insert(start);
        }
        loop {
            let cl = &mut self.clients[c];
            let clock = cl.clock(start);
            let Some(ClientMachine::Nessie(m)) = cl.machine.as_mut() else {
                return;
            };
            match m.poll(&mut cl.state, clock) {
                Poll::Pending => return,
                Poll::Post(wrs) => {
                    cl.round += 1;
                    cl.outstanding = wrs.len();
                    let round = cl.round;
                    self.watch_margin(c, start, &wrs);
                    for wr in wrs {
                        let wr = self.clients[c].router.outbound(0, wr);
                        self.post(Actor::Client(c), wr, t);
                    }
                    self.release_late(c, t);
                    if self.spec.chaos.any() {
                        // Completions may never come: look again when the
                        // machine says it gives up on them.
                        self.wake_at_poll_timeout(c, round, t);
                    }
                }
                Poll::Done(r) => {
                    let stats = m.stats();
                    cl.machine = None;
                    cl.router.retire(0);
                    self.finish_attempt(c, r, stats, t);
                    return;
                }
            }
        }
    }

    pub(super) fn on_wake(&mut self, c: usize, round: u64, now: u64) {
        let cl = &self.clients[c];
        if cl.down_since.is_some() || cl.round != round || cl.outstanding == 0 {
            return;
        }
        self.step(c, now);
        let cl = &self.clients[c];
        if cl.round == round && cl.outstanding > 0 && cl.machine.is_some() {
            // Not given up: the step waits for its core (a poll of its own
            // is scheduled, and gives up then), or the instant moved on.
            self.wake_at_poll_timeout(c, round, now);
        }
    }

    /// Schedules a wake-up of client `c`'s round `round` at the instant its
    /// machine gives up the completions the round misses (its
    /// `poll_timeout`, on the client's clock), if that is after `now` (an
    /// instant already passed is met by the poll the step scheduled).
    pub(super) fn wake_at_poll_timeout(&mut self, c: usize, round: u64, now: u64) {
        let cl = &self.clients[c];
        let Some(ClientMachine::Nessie(m)) = cl.machine.as_ref() else {
            return;
        };
        let at = m
            .poll_timeout(&cl.state)
            .map(|give_up| give_up.0.saturating_sub(cl.clock_offset));
        if let Some(at) = at.filter(|&at| at > now) {
            self.events.schedule(at, Ev::Wake(c, round));
        }
    }

    pub(super) fn finish_attempt(
        &mut self,
        c: usize,
        r: Result<Response, Error>,
        stats: OpStats,
        now: u64,
    ) {
        let max_backoff = self.max_backoff_ns();
        let cl = &mut self.clients[c];
        let Some(op) = cl.op.as_mut() else {
            return;
        };
        op.stats += stats;
        if let Err(e) = &r {
            let elapsed = std::time::Duration::from_nanos(now - op.started);
            let pure = cl.state.pure.is_some() && elapsed < self.cfg.retry.op_timeout;
            if pure && matches!(e, Error::ClientIdInUse(_)) {
                // A client without storage whose share a dead process
                // still holds: as an application would, it tries again
                // once the agent may have taken the share back.
                let at = now + nanos(self.cfg.lease_term) / 4;
                self.start_attempt(c);
                self.events.schedule(at, Ev::Poll(c));
                return;
            }
            if pure && matches!(e, Error::LeaseLost(_)) {
                // Its share was taken back (nothing of the attempt was
                // linked): the application makes a new client, which takes
                // the share anew, and writes again.
                self.new_pure_process(c);
                self.start_attempt(c);
                self.events.schedule(now, Ev::Poll(c));
                return;
            }
            if retries(&self.cfg.retry, e, op.attempts, elapsed) {
                let jitter = xorshift64(&mut cl.rng) % (op.backoff_ns / 2 + 1);
                let at = now + op.backoff_ns / 2 + jitter;
                op.backoff_ns = (op.backoff_ns * 2).min(max_backoff);
                self.start_attempt(c);
                self.events.schedule(at, Ev::Poll(c));
                return;
            }
        }
        let lost = matches!(r, Err(Error::LeaseLost(_)));
        self.complete_op(c, r, now);
        if lost {
            // Out of time with its share taken back: its next operation
            // runs in a new client.
            self.new_pure_process(c);
        }
    }

    /// Ends client `c`'s operation with `r` (all its attempts done): records
    /// it, and starts the client's next one.
    pub(crate) fn complete_op(&mut self, c: usize, r: Result<Response, Error>, now: u64) {
        let cl = &mut self.clients[c];
        let Some(op) = cl.op.take() else {
            return;
        };
        if op.preload {
            // Not measured; in the history all the same.
            self.record(c, &op, ret_of(&r), now);
            if self.clients[c].preload.is_empty() {
                self.workload.preloading -= 1;
                if self.workload.preloading == 0 {
                    self.events.schedule(now, Ev::Measure);
                }
            }
            self.events.schedule(now, Ev::Poll(c));
            return;
        }
        if let (true, Err(e)) = (op.sweep, &r) {
            if !matches!(
                e,
                Error::TableFull { .. } | Error::IndexAtLimit { .. } | Error::DataTableFull { .. }
            ) {
                self.workload.sweep.failures.push(SweepFailure {
                    op: op.request.name(),
                    key: op.key,
                    error: Some(e.clone()),
                });
            }
        }
        self.workload.stats += op.stats;
        if !op.sweep {
            self.workload.recycled_in_race += op.stats.recycled;
        }
        let ret = ret_of(&r);
        if ret == Err(Failure::Unknown) && !matches!(op.request, Request::Scan { .. }) {
            self.workload.tally.unknown += 1;
        }
        if let Err(Error::Corrupt(m)) = &r {
            self.checks.corrupt.record(CorruptState {
                client: self.clients[c].state.id,
                corruption: m.clone(),
            });
        }
        self.record(c, &op, ret, now);
        if !op.sweep {
            let from = op.started.max(self.workload.measure_from);
            self.workload.client_busy_ns += now.min(self.events.end).saturating_sub(from);
        }
        let ended = match (&r, &op.request) {
            (Err(_), _) => Some(Ended::Failed),
            (Ok(_), Request::Get(_)) => Some(Ended::Get(now - op.started)),
            (Ok(_), Request::Put(..)) => Some(Ended::Put(now - op.started)),
            (Ok(_), Request::Delete(_)) => Some(Ended::Delete),
            (Ok(_), Request::Scan { .. }) => None,
        };
        if let Some(ended) = ended {
            self.workload.tally.record(ended, op.stats.round_trips);
            if !op.sweep {
                self.tally_phase(ended, op.stats.round_trips, now);
            }
        }
        self.events.schedule(now, Ev::Poll(c));
    }

    /// A stamp for the history at virtual time `now`: picoseconds
    /// (`now` x 1000), raised where needed to one more than the last stamp
    /// given, so that stamps follow the order in which the simulator
    /// processed the events. A response therefore precedes every invocation
    /// that follows it, even at one virtual instant (the checker would take
    /// equal stamps for concurrent operations and miss a client's stale read
    /// of its own write).
    pub(super) fn stamp(&mut self, now: u64) -> u64 {
        self.workload.rec.last_stamp =
            (now.saturating_mul(1000)).max(self.workload.rec.last_stamp + 1);
        self.workload.rec.last_stamp
    }

    /// Records client `c`'s finished operation `op` with `ret`: a scan in
    /// the history of scans, for Cell's range-aware checker (the per-key
    /// one has no scans), every other operation in the history.
    pub(super) fn record(&mut self, c: usize, op: &CurrentOp, ret: Ret, now: u64) {
        let scan = matches!(op.request, Request::Scan { .. });
        if scan {
            self.workload.rec.completed_scans += 1;
        } else {
            self.workload.rec.completed_ops += 1;
        }
        if !self.spec.record_history {
            return;
        }
        let response = self.stamp(now);
        let event = Event {
            client: c,
            request: op.request.clone(),
            ret,
            invoke: op.invoked,
            response,
        };
        if scan {
            self.workload.rec.scans.push(event);
        } else {
            self.workload.rec.history_stats.push(op.stats);
            self.workload.rec.history.push(event);
        }
    }

    /// Client `c`'s running attempt is gone (a crash, or given up at the
    /// horizon): its machine is dropped, its outstanding requests and round
    /// forgotten (their completions are stale). Leaks the attempt counted
    /// are leaks all the same (crate::audit).
    pub(super) fn drop_attempt(&mut self, c: usize) {
        let cl = &mut self.clients[c];
        if let Some(ClientMachine::Nessie(m)) = cl.machine.take() {
            self.workload.stats.leaked += m.stats().leaked;
        }
        cl.router.retire(0);
        cl.outstanding = 0;
        cl.round += 1;
    }

    /// Delivers a completion to the client that posted it: nothing if the
    /// client crashed since (another incarnation); to the current round,
    /// counted against it; or, if its round was given up, as a stale
    /// completion, which a Nessie client's request-id routing takes to the
    /// machine that posted it or drops (a baseline's client drops it).
    pub(crate) fn deliver(&mut self, req: NicRequest, now: u64) {
        let c = match req.actor {
            Actor::Client(c) => c,
            Actor::Worker(w) => return self.deliver_worker(w, req, now),
        };
        // A completion of an earlier incarnation never reaches the new
        // process (its queue pairs are new).
        let cl = &mut self.clients[c];
        if cl.down_since.is_some() || req.incarnation != cl.incarnation {
            return;
        }
        let completion = nessie_protocol::Completion {
            id: req.wr.id,
            result: req
                .result
                .unwrap_or(Err(nessie_protocol::FabricError::Transport(
                    nessie_protocol::TransportError::Mismatch,
                ))),
        };
        if req.round != cl.round {
            // A completion of a round given up (at its deadline; late by a
            // delay, or held back by a late-completion fault): not counted
            // against the current round. A Nessie client's core routes it
            // by request id to the machine that posted it (which ignores a
            // request of a round it has left) or drops it if that machine
            // is done; a baseline's client drops it.
            if self.spec.system == SystemKind::Nessie {
                self.chaos.counts.stale_completions += 1;
                cl.hand_in(completion);
            }
            return;
        }
        if self.chaos.dice.chance(self.spec.chaos.crash_permille) && self.clients[c].op.is_some() {
            self.crash(c, now);
            return;
        }
        let cl = &mut self.clients[c];
        cl.hand_in(completion);
        if cl.outstanding > 0 {
            cl.outstanding -= 1;
            if cl.outstanding == 0 {
                self.events.schedule(now, Ev::Poll(c));
            }
        }
    }
}
