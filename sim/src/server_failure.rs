//! Cell server nodes that fail for good, and the recovery a survivor runs
//! ([`Chaos::server_failure_permille`]).
//!
//! A failed server loses its memory and every thread on it (request
//! workers, maintenance thread, the clients of its node); its NIC answers
//! nothing again, and what it posted before it failed still travels. Its
//! region logs survive (shared storage: [`LogSink::in_memory`]). A server
//! fails at any instant of the measured window
//! ([`Chaos::server_failure_permille`]), or at a crash point of a meganode
//! split ([`Chaos::split_failure_permille`]): right after the splitter
//! appends a log record (before anything more leaves it) or posts a
//! step's work; the server that fails is the splitter's own node or
//! another.
//!
//! After [`Chaos::recover_after_ns`] the failure is detected, as a
//! membership service would: the directory marks the server failed and one
//! survivor, drawn, runs recovery on a thread of its own beside its
//! maintenance thread ([`recovery_machine`]: Cell's own recovery,
//! `nessie_cell`'s recovery, the same code the threaded deployment drives)
//! while the clients, with whatever stale node caches they hold, go on.
//! One recovery runs at a time; a failure detected while one runs (its own
//! server's included) makes another run after it, over every server failed
//! so far. A recovery that fails, or a failed server no recovery took over
//! by the end, is reported ([`SimReport::recovery_failures`]) and fails a
//! swarm case.
//!
//! [`Chaos::server_failure_permille`]: crate::Chaos::server_failure_permille
//! [`Chaos::recover_after_ns`]: crate::Chaos::recover_after_ns
//! [`Chaos::split_failure_permille`]: crate::Chaos::split_failure_permille
//! [`LogSink::in_memory`]: nessie_cell::LogSink::in_memory
//! [`SimReport::recovery_failures`]: crate::spec::SimReport::recovery_failures

use nessie_cell::server::runtime::recovery_machine;
use nessie_protocol::{Nanos, NodeId};

use crate::chaos::Dice;
use crate::checks::RecoveryFailure;
use crate::engine::{Engine, Ev};
use crate::systems::{poll_worker, SimWorker, Stepped, WorkerMachine, WorkerState};

/// Whether server `n` can fail, `down` saying which servers have: it has
/// not, and it is not the last one standing ([`Engine::can_fail`], and a
/// split step's crash points as the step goes on).
fn may_fail(down: &[bool], n: usize) -> bool {
    down.get(n).is_some_and(|d| !d) && down.iter().filter(|d| !**d).count() > 1
}

/// The server that fails at a crash point of a split run by node `own`
/// (among `servers`), if one does: at `permille`, the splitter's own node
/// half the time, else any server.
fn mid_split_victim(dice: &mut Dice, permille: u32, own: usize, servers: u64) -> Option<usize> {
    if !dice.chance(permille) {
        return None;
    }
    Some(if dice.chance(500) {
        own
    } else {
        dice.below(servers) as usize
    })
}

impl Engine {
    /// Cell's server nodes, as many as it has (0 for another system).
    fn server_count(&self) -> usize {
        self.server_side.cell_servers.len()
    }

    /// Draws the run's server failures at any instant, in advance: per
    /// simulated millisecond of the measured window, at
    /// [`Chaos::server_failure_permille`](crate::Chaos::server_failure_permille),
    /// one server.
    pub(crate) fn plan_server_failures(&mut self) {
        let permille = self.spec.chaos.server_failure_permille;
        let servers = self.server_count() as u64;
        if permille == 0 || servers < 2 {
            return;
        }
        let mut at = self.workload.measure_from;
        while at < self.events.end {
            if self.server_side.lost_servers.dice.chance(permille) {
                let n = self.server_side.lost_servers.dice.below(servers) as usize;
                let when = at + self.server_side.lost_servers.dice.below(1_000_000);
                self.events.schedule(when, Ev::ServerFail(n));
            }
            at += 1_000_000;
        }
    }

    /// One step of the meganode split `m` that node `own`'s maintenance
    /// thread runs, at `t`, each region log record it appends a crash point
    /// ([`Chaos::split_failure_permille`](crate::Chaos::split_failure_permille)):
    /// a server that fails there fails right after the record, and if it is
    /// `own`, the step's later records are never appended and the second
    /// value is true (the caller drops what the step posts).
    pub(crate) fn poll_split_step(
        &mut self,
        m: &mut WorkerMachine,
        own: usize,
        t: u64,
    ) -> (Stepped<()>, bool) {
        let mut dice = std::mem::replace(&mut self.server_side.lost_servers.dice, Dice::new(1));
        let mut victims = Vec::new();
        let permille = self.spec.chaos.split_failure_permille;
        let servers = self.server_count() as u64;
        // Which servers are down as the step goes on: a crash point fails a
        // server only as `fail_server` will (not one already down, never the
        // last one standing), so that the step stops exactly when its own
        // node really fails.
        let mut down = self.servers_down();
        let r = poll_worker(m, Nanos(t), &mut || {
            let Some(n) = mid_split_victim(&mut dice, permille, own, servers) else {
                return false;
            };
            if !may_fail(&down, n) {
                return false;
            }
            down[n] = true;
            victims.push(n);
            n == own
        });
        self.server_side.lost_servers.dice = dice;
        for n in victims {
            self.fail_mid_split(n, t);
        }
        r
    }

    /// A crash point of the maintenance thread of node `own` in a meganode
    /// split, right after it posted a step's work: at a tenth of
    /// [`Chaos::split_failure_permille`](crate::Chaos::split_failure_permille),
    /// its own node or another server fails now. True if its own node did.
    pub(crate) fn maybe_fail_mid_split(&mut self, own: usize, now: u64) -> bool {
        // A split posts tens of steps and appends a handful of records: the
        // posts are crash points a tenth as likely, so that the durable
        // points, where recovery's decisions differ, get their share.
        let permille = self.spec.chaos.split_failure_permille / 10;
        let servers = self.server_count() as u64;
        let Some(n) = mid_split_victim(
            &mut self.server_side.lost_servers.dice,
            permille,
            own,
            servers,
        ) else {
            return false;
        };
        self.fail_mid_split(n, now);
        self.server_side.lost_servers.is_failed(own)
    }

    /// A recovery thread (worker `w`) that just posted a step is
    /// descheduled before its next one, as client threads are, and at
    /// least as often and as long as a slow thread reading logs from
    /// shared storage would be: at
    /// [`Chaos::pause_permille`](crate::Chaos::pause_permille) (10 % at
    /// least), up to [`Chaos::max_pause_ns`](crate::Chaos::max_pause_ns)
    /// (the failure detection delay at least). Clients with stale caches
    /// then meet the regions it moved between its steps: the window in
    /// which a region rebuilt with its split still open must refuse writes.
    pub(crate) fn maybe_pause_recovery(&mut self, w: usize) {
        let chaos = self.spec.chaos;
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let wk = &mut sv.workers[w];
        if !wk.recovery
            || !self
                .server_side
                .lost_servers
                .dice
                .chance(chaos.pause_permille.max(100))
        {
            return;
        }
        wk.charge += self
            .server_side
            .lost_servers
            .dice
            .below(chaos.max_pause_ns.max(chaos.recover_after_ns).max(1));
        self.chaos.counts.pauses += 1;
    }

    /// Server `n` fails at a crash point of a meganode split.
    fn fail_mid_split(&mut self, n: usize, now: u64) {
        let before = self.chaos.counts.server_failures;
        self.fail_server(n, now);
        self.chaos.counts.mid_split_failures += self.chaos.counts.server_failures - before;
    }

    /// Which servers failed for good, by server node.
    fn servers_down(&self) -> Vec<bool> {
        (0..self.server_count())
            .map(|n| self.server_side.lost_servers.is_failed(n))
            .collect()
    }

    /// Whether server `n` can fail now: it has not, and it is not the last
    /// server standing.
    pub(crate) fn can_fail(&self, n: usize) -> bool {
        may_fail(&self.servers_down(), n)
    }

    /// Server node `n` fails for good at `now` (unless it already did, or it
    /// is the last server standing): its NIC goes quiet, its threads and
    /// clients die, and the failure is detected after
    /// [`Chaos::recover_after_ns`](crate::Chaos::recover_after_ns).
    pub(crate) fn fail_server(&mut self, n: usize, now: u64) {
        if !self.can_fail(n) {
            return;
        }
        self.server_side.lost_servers.failed[n] = true;
        self.server_side.lost_servers.failed_at[n] = now;
        self.chaos.counts.server_failures += 1;
        self.cluster.node_down[n] = true;
        self.crash_clients_on(n, now);
        if let Some(sv) = self.server_side.servers.as_mut() {
            sv.workers
                .iter_mut()
                .filter(|wk| usize::from(wk.node.0) == n)
                .for_each(SimWorker::go_down);
            sv.lock_waiters[n].clear();
        }
        if self
            .server_side
            .lost_servers
            .running
            .as_ref()
            .is_some_and(|(r, _)| *r == n)
        {
            // The recovering server itself: the next recovery takes over
            // what it moved, with everything else failed so far.
            self.server_side.lost_servers.running = None;
        }
        let after = self.spec.chaos.recover_after_ns;
        self.events.schedule(now + after, Ev::Detect(n));
    }

    /// The failure of node `n` is detected: the directory marks it failed
    /// and a survivor recovers (now, or after the recovery running).
    pub(crate) fn on_detect(&mut self, n: usize, now: u64) {
        self.mark_detected(n);
        self.start_recovery(now);
    }

    /// The directory marks failed server `n` failed.
    fn mark_detected(&mut self, n: usize) {
        if let Some(dir) = self.server_side.dir.as_ref() {
            dir.set_failed(NodeId(n as u16), true);
        }
        self.server_side.lost_servers.detected[n] = true;
    }

    /// Starts a recovery on a survivor drawn, unless one runs (then another
    /// runs after it).
    fn start_recovery(&mut self, now: u64) {
        if self.server_side.lost_servers.running.is_some() {
            self.server_side.lost_servers.again = true;
            return;
        }
        let f = &self.server_side.lost_servers;
        let covers: Vec<usize> = (0..self.server_count())
            .filter(|&m| f.detected[m] && !f.recovered[m])
            .collect();
        let live: Vec<usize> = (0..self.server_count())
            .filter(|&m| !self.server_side.lost_servers.is_failed(m))
            .collect();
        if covers.is_empty() || live.is_empty() {
            return;
        }
        let node = live[self.server_side.lost_servers.dice.below(live.len() as u64) as usize];
        let st = self.server_side.cell_servers[node].clone();
        let Some(sv) = self.server_side.servers.as_mut() else {
            return;
        };
        let Some(w) = sv
            .workers
            .iter()
            .position(|wk| wk.recovery && usize::from(wk.node.0) == node)
        else {
            return;
        };
        let limit = st.cfg.server_rpc_wait();
        let m = recovery_machine(&st, 1, limit);
        let wk = &mut sv.workers[w];
        wk.machine = Some(WorkerMachine::Cell(m, st));
        wk.state = WorkerState::Running;
        wk.round += 1;
        self.server_side.lost_servers.running = Some((node, covers));
        self.events.schedule(now, Ev::WorkerPoll(w));
    }

    /// The recovery job of `node`'s maintenance thread ended with
    /// `result`.
    pub(crate) fn recovery_done(
        &mut self,
        node: usize,
        result: Result<(), nessie_protocol::Error>,
        now: u64,
    ) {
        let Some((running, covers)) = self.server_side.lost_servers.running.take() else {
            return;
        };
        if running != node {
            self.server_side.lost_servers.running = Some((running, covers));
            return;
        }
        match result {
            Ok(()) => {
                self.chaos.counts.server_recoveries += 1;
                for m in covers {
                    self.server_side.lost_servers.recovered[m] = true;
                }
            }
            Err(error) => self
                .server_side
                .lost_servers
                .problems
                .push(RecoveryFailure::Failed {
                    node,
                    at: now,
                    error,
                }),
        }
        if std::mem::take(&mut self.server_side.lost_servers.again) {
            self.start_recovery(now);
        }
    }

    /// At the final sweep: every failure not yet detected is detected now
    /// (the events queued for it are dropped with the rest), so that the
    /// sweep meets every region recovered or being recovered.
    pub(crate) fn detect_all_failures(&mut self, now: u64) {
        let undetected = (0..self.server_count())
            .filter(|&m| {
                self.server_side.lost_servers.is_failed(m)
                    && !self.server_side.lost_servers.recovered[m]
            })
            .count();
        if undetected == 0 {
            return;
        }
        for m in 0..self.server_count() {
            if self.server_side.lost_servers.is_failed(m) {
                self.mark_detected(m);
            }
        }
        self.start_recovery(now);
    }

    /// What went wrong with recovery over the run: the recoveries that
    /// failed, and each failed server no recovery took over.
    pub(crate) fn recovery_failures(&mut self) -> Vec<RecoveryFailure> {
        let mut out = std::mem::take(&mut self.server_side.lost_servers.problems);
        for m in 0..self.server_count() {
            if self.server_side.lost_servers.is_failed(m)
                && !self.server_side.lost_servers.recovered[m]
            {
                out.push(RecoveryFailure::NotTakenOver {
                    server: m,
                    failed_at: self.server_side.lost_servers.failed_at[m],
                });
            }
        }
        out
    }
}
