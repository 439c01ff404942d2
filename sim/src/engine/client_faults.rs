//! The clients' side of the faults (the network's is `crate::network`):
//! crashes and restarts, node outages and failed queue pairs planned in
//! advance, and operations still running at the horizon given up.

use super::*;

impl Engine {
    /// Operations still running at the horizon never finished: recorded as
    /// of unknown outcome (they may have taken effect) and counted.
    pub(super) fn give_up_on_stuck(&mut self) {
        for c in 0..self.clients.len() {
            self.drop_attempt(c);
            if let Some(op) = self.clients[c].op.take() {
                if op.sweep {
                    self.workload
                        .sweep
                        .failures
                        .push(crate::checks::SweepFailure {
                            op: op.request.name(),
                            key: op.key,
                            error: None,
                        });
                }
                self.workload.tally.stuck += 1;
                self.workload.tally.unknown += 1;
                self.workload.tally.failures += 1;
                self.workload.stats += op.stats;
                self.record(c, &op, Err(Failure::Unknown), self.events.horizon);
            }
        }
    }

    /// The client crashes: its machine and everything it knew are gone; the
    /// requests it posted still travel (and may land). Its operation's
    /// outcome is unknown.
    pub(crate) fn crash(&mut self, c: usize, now: u64) {
        let cl = &mut self.clients[c];
        if cl.down_since.is_some() {
            return;
        }
        cl.down_since = Some(now);
        cl.incarnation += 1;
        // A client without storage's entries set aside for its next
        // generation go with its process (docs/protocol.md §2.4).
        self.workload.stats.leaked += cl.state.alloc.set_aside();
        self.drop_attempt(c);
        self.drop_late(c);
        self.chaos.counts.crashes += 1;
        if let Some(op) = self.clients[c].op.take() {
            self.workload.stats += op.stats;
            self.workload.tally.unknown += 1;
            self.workload.tally.failures += 1;
            self.record(c, &op, Err(Failure::Unknown), now);
        }
        let after = self.spec.chaos.restart_after_ns.max(self.margin_ns() + 1);
        self.events.schedule(now + after, Ev::Restart(c));
    }

    /// Client without storage `c` lost its share (`LeaseLost`): the
    /// application replaces it with a new client, which draws a nonce of its
    /// own and takes its share anew on its first write.
    pub(super) fn new_pure_process(&mut self, c: usize) {
        let id = self.clients[c].state.id;
        let Ok(mut state) = ClientState::new(self.cfg.clone(), id) else {
            return; // the configuration was validated at the start
        };
        state.faults = self.spec.faults;
        self.chaos.counts.lease_losses += 1;
        let cl = &mut self.clients[c];
        cl.incarnation += 1;
        let nonce = super::cluster::pure_nonce(self.spec.seed, c, cl.incarnation);
        state.pure = Some(nessie_protocol::pure::PureWindows::new(nonce));
        self.workload.stats.leaked += cl.state.alloc.set_aside();
        cl.state = state;
        cl.router = super::router(&self.spec);
        cl.late.clear();
    }

    /// A crashed client comes back as a fresh process (no sooner than one
    /// deadline margin after its crash, and not while its node is out).
    pub(super) fn on_restart(&mut self, c: usize, now: u64) {
        let Some(since) = self.clients[c].down_since else {
            return;
        };
        let node = usize::from(self.clients[c].state.id.node.0);
        if self.cluster.node_down[node] {
            return; // the node's return restarts it
        }
        let earliest = since + self.margin_ns() + 1;
        if now < earliest {
            self.events.schedule(earliest, Ev::Restart(c));
            return;
        }
        if self.workload.sweep.running
            && c == self.workload.sweep.client
            && self.server_side.lost_servers.recovering()
        {
            // The sweep's fresh process starts once the faults stopped, and
            // a recovery still moving a failed server's regions is one of
            // them: its directory would name the failed server (Cell's
            // client then meets it: an unknown outcome for a write, as any
            // process that read the directory before the move would).
            self.events.schedule(now + SWEEPER_WAIT_NS, Ev::Restart(c));
            return;
        }
        let id = self.clients[c].state.id;
        let Ok(mut state) = ClientState::new(self.cfg.clone(), id) else {
            return; // the configuration was validated at the start
        };
        state.faults = self.spec.faults;
        if state.pure.is_some() {
            // A new process draws a nonce of its own: it must take its
            // share anew, once its agent took it back from the process that
            // died holding it.
            let nonce =
                super::cluster::pure_nonce(self.spec.seed, c, self.clients[c].incarnation + 1);
            state.pure = Some(nessie_protocol::pure::PureWindows::new(nonce));
        }
        if let Some(maker) = &self.server_side.core_maker {
            // A baseline client's core died with its process (it was inside
            // the machine of the operation it crashed in): the new process
            // makes its own, its sequence numbers drawn afresh as the
            // threaded client draws them from its clock.
            let g = u32::try_from(c).unwrap_or(u32::MAX);
            let entropy = self.spec.seed ^ now.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            self.clients[c].kv_core = Some(maker.core(g, entropy, true));
        }
        if let Some(maker) = &self.server_side.cell_maker {
            // Likewise a Cell client: caches, selector and request channel
            // died with the process.
            let entropy = self.spec.seed ^ now.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let Ok(machines) = maker.machines(id, entropy, true) else {
                return; // the configuration was validated at the start
            };
            self.clients[c].cell = Some(machines);
        }
        let router = router(&self.spec);
        let cl = &mut self.clients[c];
        cl.state = state;
        cl.router = router;
        cl.down_since = None;
        self.events.schedule(now, Ev::Poll(c));
    }

    /// Draws the run's node outages and failed queue pairs in advance (once
    /// the measured workload starts).
    pub(crate) fn plan_faults(&mut self) {
        self.plan_outages();
        self.plan_link_failures();
        self.plan_server_failures();
    }

    /// Draws the node outages of the whole run in advance.
    pub(super) fn plan_outages(&mut self) {
        let chaos = self.spec.chaos;
        if chaos.outage_permille == 0 {
            return;
        }
        let mut at = self.workload.measure_from;
        let mut busy_until = vec![0u64; self.cluster.node_down.len()];
        while at < self.events.end {
            if self.chaos.dice.chance(chaos.outage_permille) {
                let n = self.chaos.dice.below(self.cluster.node_down.len() as u64) as usize;
                if at >= busy_until[n] {
                    let down = at + self.chaos.dice.below(1_000_000);
                    let up = down + chaos.outage_ns.max(self.margin_ns() + 1);
                    busy_until[n] = up + 1;
                    self.events.schedule(down, Ev::NodeDown(n));
                    self.events.schedule(up, Ev::NodeUp(n));
                }
            }
            at += 1_000_000;
        }
    }

    /// Draws the queue pairs that fail during the run in advance: per
    /// simulated millisecond, at [`Chaos::link_failure_permille`], one
    /// client's or server worker's queue pair to one node, down for
    /// [`Chaos::link_down_ns`].
    pub(super) fn plan_link_failures(&mut self) {
        let chaos = self.spec.chaos;
        if chaos.link_failure_permille == 0 {
            return;
        }
        let workers = self
            .server_side
            .servers
            .as_ref()
            .map_or(0, |s| s.workers.len());
        let actors = (self.clients.len() + workers) as u64;
        let nodes = self.cluster.node_down.len() as u64;
        let mut at = self.workload.measure_from;
        while at < self.events.end {
            if self.chaos.dice.chance(chaos.link_failure_permille) {
                let a = self.chaos.dice.below(actors) as usize;
                let actor = if a < self.clients.len() {
                    Actor::Client(a)
                } else {
                    Actor::Worker(a - self.clients.len())
                };
                let node = self.chaos.dice.below(nodes) as usize;
                let down = at + self.chaos.dice.below(1_000_000);
                self.chaos.counts.link_failures += 1;
                self.net.link_failures.push(crate::nic::LinkFailure {
                    actor,
                    node,
                    at: down,
                    until: down + chaos.link_down_ns.max(1),
                });
            }
            at += 1_000_000;
        }
    }

    pub(super) fn on_node_down(&mut self, n: usize, now: u64) {
        self.cluster.node_down[n] = true;
        self.chaos.counts.outages += 1;
        self.crash_clients_on(n, now);
    }

    /// Every client of node `n` crashes at `now` (its node went away).
    pub(crate) fn crash_clients_on(&mut self, n: usize, now: u64) {
        for c in 0..self.clients.len() {
            if usize::from(self.clients[c].state.id.node.0) == n {
                self.crash(c, now);
            }
        }
    }

    pub(super) fn on_node_up(&mut self, n: usize, now: u64) {
        if self.server_side.lost_servers.is_failed(n) {
            return; // a server that failed for good never comes back
        }
        self.cluster.node_down[n] = false;
        for c in 0..self.clients.len() {
            if usize::from(self.clients[c].state.id.node.0) == n {
                self.events.schedule(now, Ev::Restart(c));
            }
        }
    }
}
