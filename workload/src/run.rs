//! A mixed-workload run over client threads ([`run_workers`]), whatever the
//! clients and the fabric: the preload (every key PUT once, spread over the
//! threads), a start barrier (all threads released together, optionally at
//! one wall-clock instant shared by every node), the measured phase (each
//! thread runs [`client_loop`] with its [`Mix`]), and one
//! [`WorkloadReport`] with per-operation fabric accounting, latencies, GET
//! misses, failures by kind, the CPU time of the client threads and of this
//! process's server workers and, when asked, the history (the preload's
//! PUTs included, so that a checker can explain the values they wrote).
//!
//! `nessie run` runs it over Nessie's clients (blocking or pipelined) on the
//! simulated fabric; `nessie node run` over any system's clients on the
//! verbs fabric; the tests of `crate::node::system` over any system's on
//! the simulator.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nessie_exec::thread_cpu_time;
use nessie_exec::ServerPool;
use nessie_protocol::{ClientId, Error, KvRequest, Request, Response};

use super::driver::{client_loop, Done, Issuer, Limits, Recorder};
use super::history::{error_kind, history_client, monotonic_ns, Failed, HistoryRecord};
use super::mix::{Mix, Preload};
use super::report::{KindReport, WorkloadReport};
use super::spec::{StartAt, WorkloadError, WorkloadSpec, START_LATE_LIMIT};

/// Server threads of this process whose CPU time and requests a run
/// reports (a server-driven system's workers, a Cell node's workers and
/// maintenance thread).
pub trait ServerLoad: Sync {
    /// CPU time consumed so far.
    fn cpu_time(&self) -> Duration;
    /// Requests served so far.
    fn requests(&self) -> u64;
}

impl ServerLoad for ServerPool {
    fn cpu_time(&self) -> Duration {
        ServerPool::cpu_time(self)
    }
    fn requests(&self) -> u64 {
        ServerPool::requests(self)
    }
}

/// One client thread of a run: its issuer and who it is (histories name
/// it `node x 1000 + index`; its `Mix` is drawn for it).
pub struct Worker<I> {
    /// The client (of a pipeline: its first client).
    pub id: ClientId,
    /// What issues its operations.
    pub issuer: I,
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Stops every preloading thread at the first failure, and keeps it; with
/// `record`, the preload's PUTs enter the history too (a GET of the
/// measured phase may return a preloaded value, which a checker can only
/// explain by the PUT that wrote it).
struct PreloadRecorder<'a> {
    stop: &'a AtomicBool,
    error: Option<Error>,
    history: KindRecorder,
}

impl Recorder<Response> for PreloadRecorder<'_> {
    type Note = KindNote;

    fn start(&mut self, op: &KvRequest<'_>) -> KindNote {
        self.history.start(op)
    }

    fn finish(&mut self, note: KindNote, done: Done<Response>, latency: Duration) {
        if let Err(e) = &done.result {
            self.stop.store(true, Ordering::Relaxed);
            self.error.get_or_insert(e.clone());
        }
        self.history.finish(note, done, latency);
    }
}

/// The per-kind counts of one thread's measured phase, its failures by
/// kind and (with `record`) its history: each operation under the history
/// id of the slot (the driver's tag) it ran in, so that every id is a
/// sequential process however many operations the thread keeps in flight;
/// a failure with what its error promises.
struct KindRecorder {
    id: ClientId,
    record: bool,
    kinds: [KindReport; 4],
    errors: BTreeMap<String, u64>,
    history: Vec<HistoryRecord>,
}

impl KindRecorder {
    /// The recorder of client `id` (histories name its slots by
    /// [`history_client`]), recording its history when `record`.
    fn new(id: ClientId, record: bool) -> KindRecorder {
        KindRecorder {
            id,
            record,
            kinds: Default::default(),
            errors: BTreeMap::new(),
            history: Vec::new(),
        }
    }
}

/// What [`KindRecorder`] notes at the start of an operation: its kind
/// (GET, PUT, DELETE, SCAN) and, when recording, what it is and its invocation
/// time (the clock is read only then: a clock read costs as much as a
/// small operation on some machines).
struct KindNote {
    kind: usize,
    what: Option<(Request, u64)>,
}

impl Recorder<Response> for KindRecorder {
    type Note = KindNote;

    fn start(&mut self, op: &KvRequest<'_>) -> KindNote {
        let kind = match op {
            Request::Get(_) => 0,
            Request::Put(..) => 1,
            Request::Delete(_) => 2,
            Request::Scan { .. } => 3,
        };
        let what = self.record.then(|| (op.owned(), monotonic_ns()));
        KindNote { kind, what }
    }

    fn finish(&mut self, note: KindNote, done: Done<Response>, latency: Duration) {
        let response = if note.what.is_some() {
            monotonic_ns()
        } else {
            0
        };
        let slot = done.tag;
        crate::metrics::record(
            note.kind,
            done.result.as_ref().map(|_| ()),
            latency,
            done.stats.attempts,
        );
        let k = &mut self.kinds[note.kind];
        k.ops += 1;
        k.fabric += done.stats;
        k.latencies.record(latency);
        let ret = match done.result {
            Ok(Response::Get(v)) => {
                match &v {
                    None => k.misses += 1,
                    Some(v) => k.value_bytes += v.len() as u64,
                }
                Ok(Response::Get(v))
            }
            Ok(Response::Scan(es)) => {
                if es.is_empty() {
                    k.misses += 1;
                }
                k.value_bytes += es.iter().map(|(_, v)| v.len() as u64).sum::<u64>();
                Ok(Response::Scan(es))
            }
            Ok(r) => Ok(r),
            Err(e) => {
                k.failures += 1;
                *self.errors.entry(error_kind(&e)).or_default() += 1;
                Err(Failed::of(&e))
            }
        };
        if let Some((request, invoke)) = note.what {
            self.history.push(HistoryRecord {
                client: history_client(self.id, slot),
                request,
                ret,
                invoke,
                response,
            });
        }
    }
}

/// What one thread's measured phase returns.
type ThreadResult = (
    [KindReport; 4],
    Duration,
    BTreeMap<String, u64>,
    Vec<HistoryRecord>,
);

/// Runs `spec` on `workers` (one thread each): the preload, if asked, then
/// the measured phase. `servers` are this process's server workers (of a
/// server-driven system), whose CPU time and requests during the measured
/// phase enter the report; `system` names the system in it.
pub fn run_workers<I>(
    system: &str,
    workers: Vec<Worker<I>>,
    spec: &WorkloadSpec,
    servers: &[&dyn ServerLoad],
) -> Result<WorkloadReport, WorkloadError>
where
    I: Issuer<Output = Response> + Send,
{
    let mut workers = workers;
    let preloaded = if spec.preload {
        preload(&mut workers, spec)?
    } else {
        Vec::new()
    };
    let stop = AtomicBool::new(false);
    let gate = StartGate::default();
    let server_cpu = || servers.iter().map(|p| p.cpu_time()).sum::<Duration>();
    let server_requests = || servers.iter().map(|p| p.requests()).sum::<u64>();
    std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter_mut()
            .map(|w| {
                let (stop, gate) = (&stop, &gate);
                s.spawn(move || -> ThreadResult {
                    let mut mix = Mix::new(spec, w.id.node.0, w.id.index);
                    let mut rec = KindRecorder::new(w.id, spec.record);
                    let limits = Limits {
                        stop,
                        max_ops: if spec.max_ops == 0 {
                            u64::MAX
                        } else {
                            spec.max_ops
                        },
                        think: spec.think,
                    };
                    gate.wait(&mut w.issuer);
                    let cpu = thread_cpu_time();
                    client_loop(&mut w.issuer, &mut mix, &mut rec, &limits);
                    let cpu = thread_cpu_time().saturating_sub(cpu);
                    w.issuer.close();
                    (rec.kinds, cpu, rec.errors, rec.history)
                })
            })
            .collect();
        // Ready: connected, preloaded, every thread waiting at the barrier.
        let start_at = match wait_for_start(spec) {
            Ok(at) => at,
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                gate.open();
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        };
        let (cpu0, req0) = (server_cpu(), server_requests());
        gate.open();
        let start = Instant::now();
        let started = SystemTime::now();
        while start.elapsed() < spec.duration && !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(5).min(spec.duration));
        }
        stop.store(true, Ordering::Relaxed);
        let mut report = WorkloadReport {
            system: system.to_string(),
            start_at_unix_ns: start_at.map(unix_ns),
            started_unix_ns: unix_ns(started),
            history: preloaded,
            ..WorkloadReport::default()
        };
        for h in handles {
            let (kinds, cpu, errors, history) =
                h.join().map_err(|_| WorkloadError::ClientPanicked)?;
            for (t, k) in report.kinds.iter_mut().zip(kinds) {
                t.merge(k);
            }
            report.client_cpu += cpu;
            for (e, c) in errors {
                *report.errors.entry(e).or_default() += c;
            }
            report.history.extend(history);
        }
        report.seconds = start.elapsed().as_secs_f64();
        report.server_cpu = server_cpu().saturating_sub(cpu0);
        report.server_requests = server_requests().saturating_sub(req0);
        Ok(report)
    })
}

/// How often a client thread waiting at the [`StartGate`] keeps its
/// clients alive (`Issuer::keep_alive`: a renewal is posted only when
/// due, a third of the lease term after the last beat).
const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(100);

/// Where the client threads wait for the measured phase, keeping their
/// clients alive meanwhile: the start instant may be any time away.
#[derive(Default)]
struct StartGate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl StartGate {
    /// Waits until the gate opens, calling `issuer.keep_alive()` every
    /// [`KEEP_ALIVE_EVERY`].
    fn wait<I: Issuer>(&self, issuer: &mut I) {
        let lock = || self.open.lock().unwrap_or_else(|p| p.into_inner());
        let mut open = lock();
        while !*open {
            let (guard, timeout) = self
                .opened
                .wait_timeout(open, KEEP_ALIVE_EVERY)
                .unwrap_or_else(|p| p.into_inner());
            open = guard;
            if !*open && timeout.timed_out() {
                drop(open);
                issuer.keep_alive();
                open = lock();
            }
        }
    }

    /// Opens it: every waiting thread goes.
    fn open(&self) {
        *self.open.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.opened.notify_all();
    }
}

/// Waits for the start instant `spec` gives or announces; `None`: start
/// now. An instant that passed more than [`START_LATE_LIMIT`] ago, or no
/// announced instant, is refused.
fn wait_for_start(spec: &WorkloadSpec) -> Result<Option<SystemTime>, WorkloadError> {
    let at = match &spec.start_at {
        None => return Ok(None),
        Some(StartAt::Instant(at)) => *at,
        Some(StartAt::Announced(a)) => a.ask().map_err(WorkloadError::NoStartInstant)?,
    };
    match at.duration_since(SystemTime::now()) {
        Ok(wait) => std::thread::sleep(wait),
        Err(late) if late.duration() > START_LATE_LIMIT => {
            return Err(WorkloadError::StartedLate {
                late: late.duration(),
            })
        }
        Err(_) => {}
    }
    Ok(Some(at))
}

/// PUTs every key once, spread over the workers; the first failure stops
/// them all and is returned. Returns the preload's history (empty unless
/// `spec.record`).
fn preload<I>(
    workers: &mut [Worker<I>],
    spec: &WorkloadSpec,
) -> Result<Vec<HistoryRecord>, WorkloadError>
where
    I: Issuer<Output = Response> + Send,
{
    let stop = AtomicBool::new(false);
    let n = workers.len() as u64;
    let results: Vec<(Option<Error>, Vec<HistoryRecord>)> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter_mut()
            .enumerate()
            .map(|(i, w)| {
                let stop = &stop;
                s.spawn(move || {
                    let mut source = Preload::new(spec, i as u64, n, history_client(w.id, 0));
                    let mut rec = PreloadRecorder {
                        stop,
                        error: None,
                        history: KindRecorder::new(w.id, spec.record),
                    };
                    client_loop(&mut w.issuer, &mut source, &mut rec, &Limits::until(stop));
                    (rec.error, rec.history.history)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((Some(Error::Timeout), Vec::new())))
            .collect()
    });
    let mut history = Vec::new();
    for (error, h) in results {
        if let Some(e) = error {
            return Err(WorkloadError::Store(e));
        }
        history.extend(h);
    }
    Ok(history)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::spec;
    use crate::Pipelined;
    use nessie_fabric_sim::{SimConfig, SimFabric};
    use nessie_protocol::pipeline::Pipeline;
    use nessie_protocol::{Config, Fabric, NodeId};
    use std::sync::Arc;

    /// A pipelined thread keeps up to 8 operations in flight: each of its
    /// slots is a client of its own in the history, whose operations never
    /// overlap (a sequential process, as the checker requires), and the
    /// history of the run, the preload's included, is linearizable.
    #[test]
    fn a_pipelined_threads_slots_are_sequential_clients_of_its_history() {
        let cfg = Arc::new(Config {
            nodes: 2,
            clients_per_node: 8,
            ..Config::default()
        });
        let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology())).unwrap();
        let mut workers = Vec::new();
        for n in 0..2u16 {
            let ep = fabric.open(NodeId(n)).unwrap();
            let p = Pipeline::new(cfg.clone(), NodeId(n), 0, 4, ep).unwrap();
            workers.push(Worker {
                id: ClientId {
                    node: NodeId(n),
                    index: 0,
                },
                issuer: Pipelined::new(p),
            });
        }
        let s = WorkloadSpec {
            clients: 1,
            keys: 6,
            max_ops: 400,
            record: true,
            get_pct: 50,
            delete_pct: 10,
            duration: Duration::from_secs(20),
            ..spec()
        };
        let r = run_workers("nessie", workers, &s, &[]).unwrap();
        assert_eq!(r.history.len(), 6 + 2 * 400);
        let mut spans: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for h in &r.history {
            spans
                .entry(h.client)
                .or_default()
                .push((h.invoke, h.response));
        }
        assert!(spans.len() > 2, "slots: {:?}", spans.keys());
        for (client, s) in &mut spans {
            s.sort_unstable();
            for w in s.windows(2) {
                assert!(w[0].1 <= w[1].0, "client {client} overlaps itself: {w:?}");
            }
        }
        let events: Vec<nessie_check::Event> = r.history.iter().map(HistoryRecord::event).collect();
        nessie_check::check_history(&events, 5_000_000).expect("linearizable");
    }
}
