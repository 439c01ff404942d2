//! Server workers of the server-driven systems in the engine: each worker
//! is the baselines' real [`Worker`](nessie_exec::Worker)
//! machine, a polling thread that occupies a core of its own.
//!
//! - **Noticing a request.** A worker waiting for requests is woken when a
//!   request WRITE (or a same-node client's CPU write) lands in one of its
//!   slots, [`Profile::request_detect_ns`](crate::Profile::request_detect_ns)
//!   later: half a scan of its slots plus the miss on the control word
//!   (where an idle worker's endless scan stands when the WRITE lands is
//!   uniform). A worker that finishes a request resumes its scan at its
//!   cursor and takes the next waiting request after one
//!   [`Profile::slot_check_ns`](crate::Profile::slot_check_ns) per slot it
//!   passes plus the miss ([`Profile::scan_ns`](crate::Profile::scan_ns)).
//!   Both delays in the measured window are the workers' scan time
//!   ([`crate::SimReport::server_scan_pct`]).
//! - **CPU.** Taking a request costs
//!   [`Profile::server_request_ns`](crate::Profile::server_request_ns) plus
//!   the CRC64 of the request; every access to the node's tables a copy at
//!   the copy bandwidth plus a cache miss
//!   ([`Profile::local_access_ns`](crate::Profile::local_access_ns)); the
//!   response the CRC64 of its bytes before it goes out. The worker's core
//!   is busy meanwhile; its loopback claim CAS and its (unsignaled)
//!   response WRITE go through the NIC model like any request.
//! - **The table lock.** A worker that finds its node's lock held waits
//!   until the holder's machine releases it (a second worker of the same
//!   node waits for it, as threads do).
//! - **Background threads** take the worker's core for their time slices,
//!   as they take the client threads' (Fig. 4's setting): a descheduled
//!   worker notices nothing and serves nothing until its slice comes.
//! - **Busy time**: the CPU the model charges a worker for its requests
//!   (above) in the measured window ([`crate::SimReport::server_busy_pct`]).
//!   The worker burns its core polling the rest of the time all the same
//!   (waiting for its claim CAS, for the lock, for requests).

use nessie_exec::mailbox::{payload_len, TRAILER_BYTES};
use nessie_exec::SlotWatch;
use nessie_protocol::{
    Completion, CorruptionKind, FabricError, Nanos, Op, Region, TransportError, WorkRequest,
};

use crate::engine::{Engine, Ev, EPOCH};
use crate::nic::NicRequest;
use crate::systems::{poll_worker, Actor, Shared, Stepped, Wait, WorkerState};

impl Engine {
    /// Starts the server workers (RACE has none) and hands each client its share of the
    /// keys to preload (by its own PUTs, in virtual time, before the
    /// measured workload).
    pub(crate) fn start_servers(&mut self) {
        let workers = self
            .server_side
            .servers
            .as_ref()
            .map_or(0, |sv| sv.workers.len());
        for w in 0..workers {
            self.events.schedule(EPOCH, Ev::WorkerPoll(w));
        }
        let n = self.clients.len() as u64;
        let preloaded = self.spec.keys * u64::from(self.spec.preload_pct) / 100;
        for k in (0..preloaded).rev() {
            self.clients[(k % n) as usize].preload.push(k);
        }
        self.workload.preloading = self
            .clients
            .iter()
            .filter(|c| !c.preload.is_empty())
            .count();
    }

    /// The preload is done: the measured workload starts now.
    pub(crate) fn start_measuring(&mut self, now: u64) {
        self.workload.measure_from = now;
        self.server_side.cell_searches_before = self.cell_searches();
        self.events.end = now + (self.spec.seconds * 1e9) as u64;
        if let Some(chaos) = self.chaos.held.take() {
            self.spec.chaos = chaos;
            self.plan_faults();
        }
        self.events.horizon = self.events.end + self.drain_ns();
        for c in 0..self.clients.len() {
            self.events.schedule(now, Ev::Poll(c));
        }
    }

    /// The node a worker posts from, and its current round.
    pub(crate) fn worker_src(&self, w: usize) -> (usize, u64) {
        let wk = &self.server_side.servers.as_ref().expect("servers").workers[w];
        (usize::from(wk.node.0), wk.round)
    }

    /// Worker `w` works from `at` for `ns` (its core is busy until then).
    pub(crate) fn worker_cpu(&mut self, w: usize, ns: u64, at: u64) {
        let measuring = self.measuring(at);
        let wk = &mut self.server_side.servers.as_mut().expect("servers").workers[w];
        if measuring {
            wk.busy_ns += ns;
        }
        let core = wk.core;
        self.cluster.cores[core] = self.cluster.cores[core].max(at + ns);
    }

    /// A write of `len` bytes at `offset` of `node`'s data region executed
    /// at `now`: a request or a response may have landed.
    pub(crate) fn landed(&mut self, node: usize, offset: u64, len: u64, now: u64) {
        let Some(sv) = self.server_side.servers.as_ref() else {
            return;
        };
        let mb = sv.mailbox;
        let end = offset + len;
        let Some(rel) = end.checked_sub(mb.base) else {
            return;
        };
        if rel == 0 || rel % mb.slot_bytes != 0 {
            return;
        }
        let k = rel / mb.slot_bytes - 1;
        let total = u64::from(mb.clients_total);
        if k < total {
            // A request slot: wake its worker if it polls idle.
            let g = k as usize;
            let w = node * sv.workers_per_node + sv.slot_worker[g];
            let position = g / sv.workers_per_node;
            self.request_landed(w, position, now);
        } else if k < 2 * total {
            let g = (k - total) as usize;
            match sv.slot_owner[g] {
                Some(Actor::Client(c)) if usize::from(self.clients[c].state.id.node.0) == node => {
                    self.response_landed(c, end - 8, now);
                }
                Some(Actor::Worker(w)) if usize::from(sv.workers[w].node.0) == node => {
                    self.worker_response_landed(w, end - 8, now);
                }
                _ => {}
            }
        }
    }

    /// A write landed in the request slot at `position` of worker `w`'s
    /// watch: if the worker polls idle, it takes a request after its
    /// detection delay.
    fn request_landed(&mut self, w: usize, position: usize, now: u64) {
        let measuring = self.measuring(now);
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let wk = &mut sv.workers[w];
        wk.landed.insert(position);
        let WorkerState::Idle(watch) = &wk.state else {
            return;
        };
        let watch = watch.clone();
        if let Some((i, ctrl, _)) = scan(&self.cluster.mem, wk, &watch) {
            // An idle worker scans round and round: where its scan stands
            // when the WRITE lands is uniform, so it notices after half a
            // scan on average.
            wk.watch = Some(watch);
            let detect = self.p.request_detect_ns(wk.slots);
            if measuring {
                wk.scan_ns += detect;
            }
            let at = now + detect;
            wk.round += 1;
            wk.due = Some(Shared::Request(i, ctrl));
            wk.state = WorkerState::Due;
            let round = wk.round;
            self.events.schedule(at, Ev::WorkerDue(w, round));
        }
    }

    /// Worker `w`'s wait of round `round` is over.
    pub(crate) fn on_worker_due(&mut self, w: usize, round: u64, now: u64) {
        let measuring = self.measuring(now);
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let wk = &mut sv.workers[w];
        if wk.round != round {
            return;
        }
        if matches!(wk.due, Some(Shared::Request(..)))
            && self
                .chaos
                .dice
                .chance(self.spec.chaos.server_crash_permille)
        {
            // A crash point: about to take a request from its slot.
            self.crash_worker(w, now);
            return;
        }
        let sv = self.server_side.servers.as_mut().expect("servers");
        let wk = &mut sv.workers[w];
        let Some(due) = wk.due.take() else {
            return;
        };
        wk.awaiting = None;
        if let Shared::Request(i, ctrl) = due {
            // Taking a request: its CPU, and its checksum.
            let _ = ctrl;
            let end = wk.watch.as_ref().map(|watch| watch.ctrl_offset(i) + 8);
            let bytes = end
                .and_then(|end| {
                    let t = self
                        .cluster
                        .mem
                        .read(wk.node, Region::Data, end - TRAILER_BYTES, TRAILER_BYTES)
                        .ok()?;
                    payload_len(&t, sv.mailbox.slot_bytes).map(|(_, _, p)| p + TRAILER_BYTES)
                })
                .unwrap_or(0);
            wk.charge = self.p.server_request_ns + self.p.crc_time(bytes);
            if measuring {
                sv.requests += 1;
                wk.busy_ns += wk.charge;
            }
        }
        wk.state = WorkerState::Running;
        if let Some(m) = wk.machine.as_mut() {
            m.resolve(due);
        }
        self.step_worker(w, now);
    }

    /// Server worker `w` crashes at `now` (at one of its crash points,
    /// outside its node's table lock: [`Chaos::server_crash_permille`]): its
    /// machine and everything it knew are gone; what it posted still
    /// travels. A fresh worker replaces it later.
    ///
    /// [`Chaos::server_crash_permille`]: crate::Chaos::server_crash_permille
    pub(crate) fn crash_worker(&mut self, w: usize, now: u64) {
        let margin = crate::engine::nanos(self.cfg.deadline_margin);
        let after = self.spec.chaos.server_restart_after_ns.max(margin + 1);
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let wk = &mut sv.workers[w];
        if wk.remake.is_none() || matches!(wk.state, WorkerState::Down) {
            return;
        }
        wk.go_down();
        let node = usize::from(wk.node.0);
        sv.lock_waiters[node].retain(|&x| x != w);
        self.chaos.counts.server_crashes += 1;
        self.events.schedule(now + after, Ev::WorkerRestart(w));
    }

    /// A fresh worker replaces crashed worker `w`: it knows nothing of the
    /// requests its predecessor served or the claim words it saw, and scans
    /// all its slots.
    pub(crate) fn restart_worker(&mut self, w: usize, now: u64) {
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let wk = &mut sv.workers[w];
        if !matches!(wk.state, WorkerState::Down) {
            return;
        }
        let Some(remake) = wk.remake.as_ref() else {
            return;
        };
        wk.machine = Some(remake());
        wk.state = WorkerState::Running;
        wk.round += 1;
        wk.cursor = 0;
        wk.watch = None;
        wk.landed = (0..wk.slots as usize).collect();
        self.events.schedule(now, Ev::WorkerPoll(w));
    }

    /// The event queue was cleared (the final sweep starts; requests in
    /// flight never land): each worker carries on from where it stands. A
    /// worker that was due to step, or to take its wait's resolution, does
    /// so now; one awaiting completions gives up on them at its round's
    /// deadline, as it would on a lost completion. Idle workers wait for
    /// requests to land, and lock waiters for the holder's release, as
    /// before.
    pub(crate) fn resume_workers(&mut self, now: u64) {
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let mut due = Vec::new();
        for (w, wk) in sv.workers.iter_mut().enumerate() {
            match wk.state {
                WorkerState::Running => due.push((now, Ev::WorkerPoll(w))),
                WorkerState::Due => due.push((now, Ev::WorkerDue(w, wk.round))),
                WorkerState::Completions => {
                    let at = wk
                        .machine
                        .as_mut()
                        .and_then(|m| m.deadline())
                        .map_or(now, |d| d.0.max(now) + 1);
                    due.push((at, Ev::WorkerWake(w, wk.round)));
                }
                WorkerState::Down => due.push((now, Ev::WorkerRestart(w))),
                WorkerState::Idle(_) | WorkerState::Lock(_) | WorkerState::Jobs => {}
            }
        }
        for (at, ev) in due {
            self.events.schedule(at, ev);
        }
    }

    /// Worker `w`'s round `round` may have reached its deadline with
    /// completions missing: if it still waits for them, it steps (and its
    /// machine gives up on them).
    pub(crate) fn on_worker_wake(&mut self, w: usize, round: u64, now: u64) {
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let wk = &mut sv.workers[w];
        if wk.round != round || !matches!(wk.state, WorkerState::Completions) {
            return;
        }
        wk.state = WorkerState::Running;
        self.step_worker(w, now);
    }

    /// Steps worker `w` until it waits.
    pub(crate) fn step_worker(&mut self, w: usize, now: u64) {
        let (core, node) = {
            let wk = &self.server_side.servers.as_ref().expect("servers").workers[w];
            (wk.core, wk.node)
        };
        let start = self.running_at(core, now.max(self.cluster.cores[core]));
        if start > now {
            self.events.schedule(start, Ev::WorkerPoll(w));
            return;
        }
        let sv = self.server_side.servers.as_mut().expect("servers");
        let wk = &mut sv.workers[w];
        let mut t = start + std::mem::take(&mut wk.charge);
        self.cluster.cores[core] = t;
        let Some(mut m) = wk.machine.take() else {
            return;
        };
        // A meganode split: its steps are crash points of server failures.
        let splitting = matches!(wk.job, Some(nessie_cell::server::Job::Split(_)));
        loop {
            let (stepped, failed) = if splitting {
                self.poll_split_step(&mut m, usize::from(node.0), t)
            } else {
                poll_worker(&mut m, Nanos(t), &mut || false)
            };
            if failed {
                // Its server failed right after a log append of the split:
                // what the step went on to post never leaves.
                return;
            }
            match stepped {
                Stepped::Post(wrs) | Stepped::PostDetached(wrs) => {
                    let wk = &mut self.server_side.servers.as_mut().expect("servers").workers[w];
                    wk.round += 1;
                    let claim = wrs.iter().any(|wr| matches!(wr.op, Op::Cas { .. }));
                    wk.claim_round = claim.then_some(wk.round);
                    let mut responded = false;
                    for wr in wrs {
                        if let Some(len) = self.response_bytes(&wr) {
                            responded = true;
                            // The response is sealed with its checksum first.
                            let crc = self.p.crc_time(len);
                            self.worker_cpu(w, crc, t);
                            t += crc;
                            self.cluster.cores[core] = self.cluster.cores[core].max(t);
                        }
                        self.post(Actor::Worker(w), wr, t);
                    }
                    t = t.max(self.cluster.cores[core]);
                    if splitting && self.maybe_fail_mid_split(usize::from(node.0), t) {
                        // A crash point of a meganode split: its server
                        // failed right after posting this step.
                        return;
                    }
                    self.maybe_pause_recovery(w);
                    if responded
                        && self
                            .chaos
                            .dice
                            .chance(self.spec.chaos.server_crash_permille)
                    {
                        // A crash point: right after posting a response.
                        self.cluster.cores[core] = self.cluster.cores[core].max(t);
                        self.crash_worker(w, t);
                        self.wake_lock_waiters(usize::from(node.0), t);
                        return;
                    }
                    if m.outstanding() > 0 {
                        self.set_worker_state(w, WorkerState::Completions);
                        if let (Some(d), true) = (m.deadline(), self.spec.chaos.any()) {
                            // Completions may never come: look again once
                            // the machine gives up on them.
                            let round = self.worker_src(w).1;
                            self.events
                                .schedule(d.0.max(t) + 1, Ev::WorkerWake(w, round));
                        }
                        break;
                    }
                    // A detached post (the unsignaled response): go on. Its
                    // completion, if one comes, is of an earlier round.
                }
                Stepped::PostChain(chain) => {
                    // No server machine posts one today; it goes as a
                    // posted round does, awaited, and looked at again when
                    // the machine gives its completions up.
                    let wk = &mut self.server_side.servers.as_mut().expect("servers").workers[w];
                    wk.round += 1;
                    let claim = chain.iter().any(|(wr, _)| matches!(wr.op, Op::Cas { .. }));
                    wk.claim_round = claim.then_some(wk.round);
                    self.post_chain(Actor::Worker(w), chain, t);
                    self.set_worker_state(w, WorkerState::Completions);
                    if let (Some(d), true) = (m.deadline(), self.spec.chaos.any()) {
                        let round = self.worker_src(w).1;
                        self.events
                            .schedule(d.0.max(t) + 1, Ev::WorkerWake(w, round));
                    }
                    break;
                }
                Stepped::Pending => {
                    self.set_worker_state(w, WorkerState::Completions);
                    break;
                }
                Stepped::Wait(Wait::Lock(l)) => {
                    if !l.is_held() {
                        m.resolve(Shared::Waited);
                        continue;
                    }
                    let sv = self.server_side.servers.as_mut().expect("servers");
                    sv.lock_waits += 1;
                    sv.workers[w].round += 1;
                    sv.workers[w].state = WorkerState::Lock(l);
                    sv.lock_waiters[usize::from(node.0)].push(w);
                    break;
                }
                Stepped::Wait(Wait::Backoff(d)) => {
                    let sv = self.server_side.servers.as_mut().expect("servers");
                    let wk = &mut sv.workers[w];
                    wk.round += 1;
                    wk.due = Some(Shared::Waited);
                    wk.state = WorkerState::Due;
                    let round = wk.round;
                    // A spinning thread's re-check costs at least a miss.
                    let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 4);
                    self.events
                        .schedule(t + d.max(self.p.detect_ns), Ev::WorkerDue(w, round));
                    break;
                }
                Stepped::Wait(Wait::Request(watch)) => {
                    self.request_done(w, &mut m, t);
                    let measuring = self.measuring(t);
                    let sv = self.server_side.servers.as_mut().expect("servers");
                    let wk = &mut sv.workers[w];
                    wk.round += 1;
                    wk.watch = Some(watch.clone());
                    match scan(&self.cluster.mem, wk, &watch) {
                        Some((i, ctrl, examined)) => {
                            // A worker back from a request resumes its scan
                            // at its cursor: it pays for the slots it passes
                            // up to the next request, not half a scan.
                            wk.due = Some(Shared::Request(i, ctrl));
                            wk.state = WorkerState::Due;
                            let round = wk.round;
                            let find = self.p.scan_ns(examined);
                            if measuring {
                                wk.scan_ns += find;
                            }
                            let at = t + find;
                            self.events.schedule(at, Ev::WorkerDue(w, round));
                        }
                        None => wk.state = WorkerState::Idle(watch),
                    }
                    break;
                }
                Stepped::Wait(Wait::Response {
                    ctrl,
                    seq,
                    deadline,
                }) => {
                    // Only Cell's maintenance thread sends requests.
                    let word = self.cluster.mem.word(node, Region::Data, ctrl).unwrap_or(0);
                    let detect = self.p.detect_ns;
                    let sv = self.server_side.servers.as_mut().expect("servers");
                    let wk = &mut sv.workers[w];
                    if wk.maint.is_none() {
                        self.worker_failed(w, "a server worker waited for a response".into());
                        return;
                    }
                    wk.round += 1;
                    wk.state = WorkerState::Due;
                    let round = wk.round;
                    let at = if word as u32 == seq {
                        wk.due = Some(Shared::Landed(true));
                        t + detect
                    } else {
                        wk.awaiting = Some((ctrl, seq));
                        wk.due = Some(Shared::Landed(false));
                        deadline.0.max(t) + 1
                    };
                    self.events.schedule(at, Ev::WorkerDue(w, round));
                    break;
                }
                Stepped::Done(r) => {
                    let sv = self.server_side.servers.as_mut().expect("servers");
                    if sv.workers[w].recovery {
                        // A recovery ended (crate::server_failure).
                        sv.workers[w].state = WorkerState::Jobs;
                        self.cluster.cores[core] = self.cluster.cores[core].max(t);
                        self.recovery_done(usize::from(node.0), r, t);
                        self.check_jobs(usize::from(node.0), t);
                        return;
                    }
                    if sv.workers[w].maint.is_some() {
                        // A maintenance job ended: the next one, if any.
                        sv.workers[w].job = None;
                        if let Err(e) = r {
                            let mut errs =
                                sv.counters.errors.lock().unwrap_or_else(|e| e.into_inner());
                            if errs.len() < 64 {
                                errs.push(e);
                            }
                        }
                        sv.workers[w].state = WorkerState::Jobs;
                        self.cluster.cores[core] = self.cluster.cores[core].max(t);
                        self.check_jobs(usize::from(node.0), t);
                        return;
                    }
                    let why = match r {
                        Ok(()) => "a server worker's machine ended".to_string(),
                        Err(e) => e.to_string(),
                    };
                    self.worker_failed(w, why);
                    return;
                }
            }
        }
        let sv = self.server_side.servers.as_mut().expect("servers");
        sv.workers[w].machine = Some(m);
        self.cluster.cores[core] = self.cluster.cores[core].max(t);
        self.wake_lock_waiters(usize::from(node.0), t);
        self.check_jobs(usize::from(node.0), t);
    }

    /// Starts Cell's maintenance thread of `node` on its next job, if it is
    /// idle and the node's workers queued one.
    pub(crate) fn check_jobs(&mut self, node: usize, t: u64) {
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let Some(Some(m)) = sv.maint.get(node).copied() else {
            return;
        };
        let wk = &mut sv.workers[m];
        if !matches!(wk.state, WorkerState::Jobs) {
            return;
        }
        let Some(maint) = wk.maint.as_ref() else {
            return;
        };
        // (Looking first: taking from an empty queue waits on its condition
        // variable, a system call, even for no time.)
        if maint.st.pending_jobs() == 0 {
            return;
        }
        let Some(job) = maint.st.next_job(std::time::Duration::ZERO) else {
            return;
        };
        wk.machine = Some(crate::systems::maintenance_job(maint, job.clone()));
        wk.job = Some(job);
        wk.state = WorkerState::Running;
        self.events.schedule(t, Ev::WorkerPoll(m));
    }

    /// A response landed in the slot of worker `w` (Cell's maintenance
    /// thread): wakes it if it waits for that sequence number.
    fn worker_response_landed(&mut self, w: usize, ctrl: u64, now: u64) {
        let detect = self.p.detect_ns;
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let wk = &mut sv.workers[w];
        let Some((at, seq)) = wk.awaiting else {
            return;
        };
        if at != ctrl
            || self
                .cluster
                .mem
                .word(wk.node, Region::Data, ctrl)
                .unwrap_or(0) as u32
                != seq
        {
            return;
        }
        wk.awaiting = None;
        wk.round += 1;
        wk.due = Some(Shared::Landed(true));
        let round = wk.round;
        self.events.schedule(now + detect, Ev::WorkerDue(w, round));
    }

    fn set_worker_state(&mut self, w: usize, s: WorkerState) {
        self.server_side.servers.as_mut().expect("servers").workers[w].state = s;
    }

    /// Worker `w` finished its request at `t`: the fabric work of its claim
    /// and response.
    fn request_done(&mut self, w: usize, m: &mut crate::systems::WorkerMachine, t: u64) {
        let measuring = self.measuring(t);
        let sv = self.server_side.servers.as_mut().expect("servers");
        let s = m.take_stats();
        let _ = w;
        if measuring {
            sv.stats += s;
        }
    }

    fn worker_failed(&mut self, w: usize, why: String) {
        let sv = self.server_side.servers.as_mut().expect("servers");
        let mut errs = sv.counters.errors.lock().unwrap_or_else(|e| e.into_inner());
        if errs.len() < 64 {
            errs.push(nessie_protocol::Error::corrupt(CorruptionKind::Bug, why));
        }
        drop(errs);
        sv.workers[w].machine = None;
    }

    /// Workers of `node` waiting for its table lock try again if it is free.
    fn wake_lock_waiters(&mut self, node: usize, t: u64) {
        let sv = self.server_side.servers.as_mut().expect("servers");
        if sv.lock_waiters[node].is_empty() {
            return;
        }
        let free = sv.lock_waiters[node]
            .iter()
            .any(|&w| match &sv.workers[w].state {
                WorkerState::Lock(l) => !l.is_held(),
                _ => true,
            });
        if !free {
            return;
        }
        let waiters = std::mem::take(&mut sv.lock_waiters[node]);
        let mut due = Vec::new();
        for w in waiters {
            let wk = &mut sv.workers[w];
            wk.round += 1;
            wk.due = Some(Shared::Waited);
            wk.state = WorkerState::Due;
            due.push((w, wk.round));
        }
        for (w, round) in due {
            self.events.schedule(t, Ev::WorkerDue(w, round));
        }
    }

    /// The bytes of `wr` if it writes a response (it ends at a response
    /// slot's end).
    fn response_bytes(&self, wr: &WorkRequest) -> Option<u64> {
        let mb = self.server_side.servers.as_ref()?.mailbox;
        let (offset, len) = match &wr.op {
            Op::Write { addr, data } => (addr.offset, data.len() as u64),
            Op::LocalWrite { offset, data } => (*offset, data.len() as u64),
            _ => return None,
        };
        let rel = (offset + len).checked_sub(mb.base)?;
        let k = rel / mb.slot_bytes;
        let total = u64::from(mb.clients_total);
        (rel % mb.slot_bytes == 0 && k > total && k <= 2 * total).then_some(len)
    }

    /// Delivers a completion to worker `w` (a stale one, of a detached post
    /// or an earlier round, is dropped).
    pub(crate) fn deliver_worker(&mut self, w: usize, req: NicRequest, now: u64) {
        let sv = self.server_side.servers.as_mut().expect("servers");
        let wk = &mut sv.workers[w];
        if req.round != wk.round {
            return;
        }
        if wk.claim_round == Some(req.round)
            && self
                .chaos
                .dice
                .chance(self.spec.chaos.server_crash_permille)
        {
            // A crash point: its claim CAS completes (it may have landed),
            // and the worker dies before it learns how.
            self.crash_worker(w, now);
            return;
        }
        let sv = self.server_side.servers.as_mut().expect("servers");
        let wk = &mut sv.workers[w];
        let Some(m) = wk.machine.as_mut() else {
            return;
        };
        m.complete(Completion {
            id: req.wr.id,
            result: req
                .result
                .unwrap_or(Err(FabricError::Transport(TransportError::Mismatch))),
        });
        if m.outstanding() == 0 && matches!(wk.state, WorkerState::Completions) {
            wk.state = WorkerState::Running;
            self.events.schedule(now, Ev::WorkerPoll(w));
        }
    }
}

/// The next request worker `wk` takes from `watch`'s slots: round robin
/// from its cursor, as the threaded driver's scan finds it. Only slots a
/// write landed in since they last held nothing new can hold one (the
/// worker's `landed` set), so only those are read. Returns the slot, its
/// control word and how many slots the scan examined to reach it.
fn scan(
    mem: &nessie_check::memory::Memory,
    wk: &mut crate::systems::SimWorker,
    watch: &SlotWatch,
) -> Option<(usize, u64, u64)> {
    let after: Vec<usize> = wk
        .landed
        .range(wk.cursor..)
        .chain(wk.landed.range(..wk.cursor))
        .copied()
        .collect();
    for i in after {
        let ctrl = mem.word(wk.node, Region::Data, watch.ctrl_offset(i)).ok();
        match ctrl {
            Some(ctrl) if watch.is_new(i, ctrl) => {
                let n = watch.slots().len();
                let examined = examined(wk.cursor, i, n);
                wk.cursor = (i + 1) % n;
                return Some((i, ctrl, examined));
            }
            _ => {
                wk.landed.remove(&i);
            }
        }
    }
    None
}

/// How many of `n` slots a round-robin scan standing at `cursor` examines
/// to reach slot `i`, slot `i` included.
fn examined(cursor: usize, i: usize, n: usize) -> u64 {
    ((i + n - cursor % n) % n + 1) as u64
}

#[cfg(test)]
mod tests {
    use super::examined;

    #[test]
    fn a_worker_back_from_a_request_pays_for_the_slots_up_to_the_next() {
        // 8 slots, the scan stands at 5: slot 5 is the first it checks,
        // slot 7 the third, and slot 2 (after wrapping) the sixth.
        assert_eq!(examined(5, 5, 8), 1);
        assert_eq!(examined(5, 7, 8), 3);
        assert_eq!(examined(5, 2, 8), 6);
        let p = crate::profile::TPDS;
        // The request's own slot is the miss (detect_ns); each slot passed
        // before it one check: not the idle worker's half a scan of all.
        assert_eq!(p.scan_ns(1), p.detect_ns);
        assert_eq!(p.scan_ns(6), p.detect_ns + 5 * p.slot_check_ns);
        assert!(p.scan_ns(1) < p.request_detect_ns(1_600));
    }
}
