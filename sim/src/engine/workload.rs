//! The workload side of the engine: the preload, the next operation each
//! client draws (uniform, Zipf or a YCSB generator, open or closed loop), and
//! the final sweep that writes and reads back every key after the faults.

use super::*;

/// The workload's state: the operations still to draw and how those drawn
/// ended.
pub(crate) struct Workload {
    /// The key generator of a Zipf workload (`None`: uniform keys).
    pub(crate) zipf: Option<ScrambledZipfian>,
    /// Numbers the values PUTs store.
    pub(crate) next_value: u64,
    /// Clients still preloading.
    pub(crate) preloading: usize,
    /// When the measured workload started (after a server-driven system's
    /// preload; [`EPOCH`] otherwise).
    pub(crate) measure_from: u64,
    /// Data table entries recycled for reuse by operations of the workload
    /// (not the final sweep): reuse while clients race.
    pub(crate) recycled_in_race: u64,
    /// The client threads' time in the measured window with an operation
    /// under way.
    pub(crate) client_busy_ns: u64,
    /// The operations' counters, summed.
    pub(crate) stats: OpStats,
    /// How the operations ended (latencies, failures).
    pub(crate) tally: Tally,
    /// The history and what was counted apart from it.
    pub(crate) rec: Recording,
    /// The final sweep.
    pub(crate) sweep: Sweep,
    /// The measured operations by where the index's growth stood.
    pub(crate) phases: super::phases::Phases,
}

impl Workload {
    /// Nothing drawn yet, for `spec`.
    pub(crate) fn new(spec: &SimSpec) -> Workload {
        Workload {
            zipf: spec.zipf_theta.map(|t| ScrambledZipfian::new(spec.keys, t)),
            next_value: 0,
            preloading: 0,
            measure_from: EPOCH,
            recycled_in_race: 0,
            client_busy_ns: 0,
            stats: OpStats::default(),
            tally: Tally::default(),
            rec: Recording::default(),
            sweep: Sweep::default(),
            phases: super::phases::Phases::new(
                spec.system == SystemKind::Nessie && spec.tuning.index_generations.unwrap_or(1) > 1,
            ),
        }
    }
}

/// How the operations of a run ended.
#[derive(Default)]
pub(crate) struct Tally {
    /// Latencies (ns) of the measured GETs and PUTs.
    pub(crate) get_lat: Vec<u64>,
    pub(crate) put_lat: Vec<u64>,
    /// Remote round trips of the measured GETs and PUTs that succeeded.
    pub(crate) get_round_trips: u64,
    pub(crate) put_round_trips: u64,
    /// Measured DELETEs.
    pub(crate) deletes: u64,
    /// Operations that failed, that ended with an unknown outcome, and that
    /// were still running at the horizon.
    pub(crate) failures: u64,
    pub(crate) unknown: u64,
    pub(crate) stuck: u64,
}

/// How a measured operation ended, for a [`Tally`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ended {
    /// A GET that succeeded, with its latency (ns).
    Get(u64),
    /// A PUT that succeeded, with its latency (ns).
    Put(u64),
    /// A DELETE that succeeded.
    Delete,
    /// An operation that failed.
    Failed,
}

impl Tally {
    /// Counts an operation that ended so, with its remote round trips.
    pub(crate) fn record(&mut self, ended: Ended, round_trips: u64) {
        match ended {
            Ended::Get(lat) => {
                self.get_lat.push(lat);
                self.get_round_trips += round_trips;
            }
            Ended::Put(lat) => {
                self.put_lat.push(lat);
                self.put_round_trips += round_trips;
            }
            Ended::Delete => self.deletes += 1,
            Ended::Failed => self.failures += 1,
        }
    }
}

/// The run's history, and what is counted apart from it so that a history
/// that lost operations is seen.
#[derive(Default)]
pub(crate) struct Recording {
    /// The operations' events and each one's counters.
    pub(crate) history: Vec<Event>,
    pub(crate) history_stats: Vec<OpStats>,
    /// The scans' history (Cell's range-aware checker's vocabulary).
    pub(crate) scans: Vec<Event>,
    /// The last stamp given to a history event ([`Engine::stamp`]).
    pub(crate) last_stamp: u64,
    /// Operations and Cell range scans that ended (however).
    pub(crate) completed_ops: u64,
    pub(crate) completed_scans: u64,
}

/// The final sweep: after the faults, a lone client writes and reads back
/// every key.
#[derive(Default)]
pub(crate) struct Sweep {
    /// Its operations still to run (last first).
    pub(crate) ops: Vec<(u64, Draw)>,
    /// Whether it has started.
    pub(crate) running: bool,
    /// What it could not do.
    pub(crate) failures: Vec<crate::checks::SweepFailure>,
    /// The client that runs it (the first on a node that did not fail for
    /// good).
    pub(crate) client: usize,
}

impl Engine {
    /// Starts the final sweep: the faults and the background threads stop
    /// (clocks stay skewed), any request still in flight at the horizon is
    /// dropped (never landing, which A2 allows), and one client alone
    /// writes and then reads every key (the first client on a node that did
    /// not fail for good; a fresh process if a server did). (A client
    /// thread that background threads deschedule for longer than its
    /// operation timeout times out whatever the protocol's state: the sweep
    /// asks only what a lone client on a core of its own can do.)
    pub(super) fn start_sweep(&mut self) {
        self.workload.sweep.running = true;
        if let Some(sv) = self.server_side.servers.as_ref() {
            // The baselines' tables count their reuse themselves.
            self.workload.recycled_in_race += sv.reused();
        }
        // A CPU access in progress still completes (it crosses no network:
        // dropping its completion would leave a server worker waiting for
        // it for good); everything else in flight is dropped. The
        // background threads stop now, so an access whose thread waited for
        // its core behind them (up to a time slice per thread, longer than
        // the lone client's operation timeout) completes now, and every
        // core is free from now on (the copies' own cost, tens of ns, is
        // not charged).
        let reqs = &self.net.reqs;
        self.events.keep_only(
            |ev| matches!(*ev, Ev::Complete(r) if reqs[r].as_ref().is_some_and(NicRequest::is_cpu)),
        );
        self.start_agents();
        let now = self.events.now;
        self.cluster
            .cores
            .iter_mut()
            .for_each(|c| *c = (*c).min(now));
        for c in 0..self.clients.len() {
            // Held completions are dropped with everything in flight.
            self.drop_late(c);
        }
        self.cluster.background.iter_mut().for_each(|b| *b = 0);
        self.spec.chaos = Chaos {
            skew: self.spec.chaos.skew,
            ..Chaos::NONE
        };
        for (n, d) in self.cluster.node_down.iter_mut().enumerate() {
            *d = self.server_side.lost_servers.is_failed(n);
        }
        self.net.link_failures.clear();
        for k in (0..self.spec.keys).rev() {
            self.workload.sweep.ops.push((k, Draw::Get));
            self.workload.sweep.ops.push((k, Draw::Put));
        }
        self.resume_workers(now);
        self.detect_all_failures(now);
        self.events.horizon =
            now.saturating_add(self.drain_ns().saturating_mul(2 * self.spec.keys + 1));
        let lost = &self.server_side.lost_servers;
        self.workload.sweep.client = (0..self.clients.len())
            .find(|&c| !lost.is_failed(usize::from(self.clients[c].state.id.node.0)))
            .unwrap_or(0);
        let c = self.workload.sweep.client;
        if self.server_side.lost_servers.any() && self.clients[c].down_since.is_none() {
            // Servers failed for good: the sweeper is a fresh process, whose
            // directory names where their regions went (a process that
            // lived through the failure would first meet the failed server,
            // an unknown outcome for a write, as it would in any client);
            // it starts once the recoveries have ended (`on_restart`).
            self.crash(c, now);
        }
        if self.clients[c].down_since.is_some() {
            self.events.schedule(now, Ev::Restart(c));
        } else {
            self.events.schedule(now, Ev::Poll(c));
        }
    }

    /// The size of the next value written (write number `next_value`),
    /// drawn from the spec's value mix and seed alone, so that fixed sizes
    /// leave every other draw of the run as it was.
    fn value_size(&self) -> usize {
        let min = if self.spec.record_history {
            nessie_check::MIN_RECORDED_VALUE_SIZE as u32
        } else {
            1
        };
        nessie_workload::ValueDraw {
            mix: self.spec.value_mix,
            max: self.spec.value_size,
            min,
            seed: self.spec.seed,
        }
        .size(self.workload.next_value)
    }

    /// Writes the preloaded keys once, executing each request at once (no
    /// time).
    pub(crate) fn preload(&mut self) -> Result<(), SimError> {
        let n = self.clients.len() as u64;
        let preloaded = self.spec.keys * u64::from(self.spec.preload_pct) / 100;
        for k in 0..preloaded {
            // Every key a value of its own (a GET of another key's entry
            // shows), numbered with the workload's writes.
            let value = nessie_check::unique_value(
                &key_of(k, self.spec.key_size),
                k % n,
                self.workload.next_value,
                self.value_size(),
            );
            self.workload.next_value += 1;
            let c = &mut self.clients[(k % n) as usize];
            let own = c.state.id.node;
            let mut m = PutMachine::put(&key_of(k, self.spec.key_size), &value);
            let now = Nanos(EPOCH / 2);
            let mut stored = true;
            let mut attempts = 0;
            loop {
                match m.poll(&mut c.state, now) {
                    Poll::Post(wrs) => {
                        for wr in wrs {
                            let id = wr.id;
                            let result = InFlight::new(wr, 0).run_to_end(
                                &mut self.cluster.mem,
                                own,
                                WordOrder::Ascending,
                            );
                            m.complete(nessie_protocol::Completion { id, result });
                        }
                    }
                    Poll::Pending => {
                        return Err(SimError::Spec(
                            "preload: a machine waits with nothing posted".into(),
                        ))
                    }
                    Poll::Done(Ok(_)) => break,
                    // An index that grows: the PUT that found it full
                    // started the growth, or met its seals; the next
                    // attempt goes on in the client's new view.
                    Poll::Done(Err(Error::Conflict))
                        if self.spec.tuning.index_generations.is_some() && attempts < 16 =>
                    {
                        attempts += 1;
                        m = PutMachine::put(&key_of(k, self.spec.key_size), &value);
                    }
                    // Its growth's moves spent the client's share, which
                    // no time passes to recycle: the key starts absent
                    // (a conflict committed nothing).
                    Poll::Done(Err(Error::Conflict))
                        if self.spec.tuning.index_generations.is_some() =>
                    {
                        stored = false;
                        break;
                    }
                    // A tight index may not take every key: the key starts
                    // absent (nothing of the failed PUT took effect).
                    Poll::Done(Err(
                        Error::TableFull { .. }
                        | Error::IndexAtLimit { .. }
                        | Error::DataTableFull { .. },
                    )) => {
                        stored = false;
                        break;
                    }
                    // A client without storage whose share is spent in its
                    // first generation waits for its agent, which runs only
                    // once time starts: as full as a share at one instant.
                    Poll::Done(Err(Error::Timeout)) if c.state.pure.is_some() => {
                        stored = false;
                        break;
                    }
                    Poll::Done(Err(e)) => return Err(e.into()),
                }
            }
            if stored {
                self.workload.rec.completed_ops += 1;
            }
            if self.spec.record_history && stored {
                self.workload.rec.history_stats.push(m.stats());
                let invoke = self.stamp(0);
                let response = self.stamp(0);
                self.workload.rec.history.push(Event {
                    client: (k % n) as usize,
                    request: Request::Put(key_of(k, self.spec.key_size), value.clone()),
                    ret: Ok(Response::Put(false)),
                    invoke,
                    response,
                });
            }
        }
        Ok(())
    }

    pub(super) fn next_op(&mut self, c: usize, now: u64) -> bool {
        let (key, kind, sweep) = if self.workload.preloading > 0 {
            // A server-driven system's preload: each client PUTs its share
            // of the keys, then waits for the measured workload.
            match self.clients[c].preload.pop() {
                Some(k) => (k, Draw::Put, false),
                None => return false,
            }
        } else if now < self.events.end {
            let spec = &self.spec;
            let cl = &mut self.clients[c];
            if let (SystemKind::Cell, false, Some(servers)) = (
                spec.system,
                spec.cell_run.clients_beside_servers,
                spec.cell_run.server_nodes,
            ) {
                if cl.state.id.node.0 < servers {
                    return false; // a server node's clients only preload
                }
            }
            if let Some(spike) = spec.spike {
                if cl.state.id.index >= spike.first_index {
                    // A spike client: idle outside the spike's window.
                    let from = self.workload.measure_from + (spike.from_s * 1e9) as u64;
                    let until = self.workload.measure_from + (spike.until_s * 1e9) as u64;
                    if now >= until {
                        return false;
                    }
                    if now < from {
                        self.events.schedule(from, Ev::Poll(c));
                        return false;
                    }
                    if cl.next_arrival != 0 && cl.next_arrival < from {
                        cl.next_arrival = from;
                    }
                }
            }
            if let Some(rate) = spec.arrival_rate_per_client {
                // Open loop: Poisson arrivals; an idle thread waits for the
                // next one, a busy one takes it as soon as it is free.
                let gap = |rng: &mut u64| {
                    let u = unit(xorshift64(rng));
                    (-(1.0 - u).ln() / rate * 1e9) as u64
                };
                if cl.next_arrival == 0 {
                    cl.next_arrival = now + gap(&mut cl.rng);
                }
                if cl.next_arrival > now {
                    let at = cl.next_arrival;
                    self.events.schedule(at, Ev::Poll(c));
                    return false;
                }
                cl.next_arrival += gap(&mut cl.rng).max(1);
            }
            if let Some(gen) = cl.ycsb.as_mut() {
                let rng = &mut cl.rng;
                let (key, kind) = match gen.next(&mut || unit(xorshift64(rng))) {
                    YcsbDraw::Read(k) => (k, Draw::Get),
                    YcsbDraw::Write(k) => (k, Draw::Put),
                    // From the key, as many keys on as entries asked for.
                    YcsbDraw::Scan(k, len) => (
                        k,
                        Draw::Scan {
                            to: k + u64::from(len),
                            limit: len as usize,
                        },
                    ),
                };
                (key, kind, false)
            } else {
                let draw = xorshift64(&mut cl.rng);
                let key = match &self.workload.zipf {
                    Some(z) => z.key(unit(draw)),
                    None => draw % spec.keys,
                };
                let roll = xorshift64(&mut cl.rng) % 100;
                let kind = if roll < u64::from(spec.get_pct) {
                    Draw::Get
                } else if roll < u64::from(spec.get_pct + spec.delete_pct) {
                    Draw::Delete
                } else if spec.system == SystemKind::Cell
                    && roll < u64::from(spec.get_pct + spec.delete_pct + spec.scan_pct)
                {
                    // Up to four keys on, at most three entries: short scans
                    // that meet the limit and scans that end at their bound.
                    let span = 1 + xorshift64(&mut cl.rng) % 4;
                    let limit = 1 + (xorshift64(&mut cl.rng) % 3) as usize;
                    Draw::Scan {
                        to: key + span,
                        limit,
                    }
                } else {
                    Draw::Put
                };
                (key, kind, false)
            }
        } else if self.workload.sweep.running && c == self.workload.sweep.client {
            let Some((key, kind)) = self.workload.sweep.ops.pop() else {
                return false;
            };
            (key, kind, true)
        } else {
            return false;
        };
        let spec = &self.spec;
        // Every PUT writes a value of its own, so that a stale read shows.
        let value = nessie_check::unique_value(
            &key_of(key, spec.key_size),
            c as u64,
            self.workload.next_value,
            self.value_size(),
        );
        self.workload.next_value += 1;
        let request = kind.request(key, value, spec.key_size);
        let preload = self.workload.preloading > 0;
        let invoked = self.stamp(now);
        let cl = &mut self.clients[c];
        let budget = cl
            .jitter
            .clone()
            .map(|j| RetryBudget::new(cl.clock(now), &self.cfg.retry, j));
        cl.op = Some(CurrentOp {
            request,
            key,
            started: now,
            invoked,
            attempt_started: None,
            attempts: 0,
            backoff_ns: nanos(self.cfg.retry.initial_backoff).max(1),
            stats: OpStats::default(),
            sweep,
            budget,
            preload,
        });
        self.start_attempt(c);
        true
    }
}
