//! A mixed-workload run over client threads ([`run_workers`]), whatever the
//! clients and the fabric: the preload (every key PUT once, spread over the
//! threads), a start barrier (all threads released together, optionally at
//! one wall-clock instant shared by every node), the measured phase (each
//! thread runs [`client_loop`] with its [`Mix`]), and one
//! [`WorkloadReport`] with per-operation fabric accounting, latencies, GET
//! misses, failures by kind, the CPU time of the client threads and of this
//! process's server workers and, when asked, the history.
//!
//! `nessie run` runs it over Nessie's clients (blocking or pipelined) on the
//! simulated fabric; `nessie node run` over any system's clients on the
//! verbs fabric; the tests of `crate::node::system` over any system's on
//! the simulator.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nessie_baselines::cpu::thread_cpu_time;
use nessie_baselines::server::ServerPool;
use nessie_protocol::pipeline::Response;
use nessie_protocol::{ClientId, Error};

use super::driver::{client_loop, Done, Issuer, Limits, Op, Recorder};
use super::history::{error_kind, monotonic_ns, HistoryOp, HistoryRecord, HistoryRet};
use super::mix::{Mix, Preload};
use super::report::{KindReport, WorkloadReport};
use super::spec::{WorkloadError, WorkloadSpec, START_LATE_LIMIT};

/// One client thread of a run: its issuer and who it is (histories name
/// it `node x 1000 + index`; its [`Mix`] is drawn for it).
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

/// Stops every preloading thread at the first failure, and keeps it.
struct PreloadRecorder<'a> {
    stop: &'a AtomicBool,
    error: Option<Error>,
}

impl<O> Recorder<O> for PreloadRecorder<'_> {
    type Note = ();

    fn start(&mut self, _: &Op<'_>) {}

    fn finish(&mut self, _: (), done: Done<O>, _: Duration) {
        if let Err(e) = done.result {
            self.stop.store(true, Ordering::Relaxed);
            self.error.get_or_insert(e);
        }
    }
}

/// The per-kind counts of one thread's measured phase, its failures by
/// kind and (with `record`) its history.
struct KindRecorder {
    client: u64,
    record: bool,
    kinds: [KindReport; 3],
    errors: BTreeMap<String, u64>,
    history: Vec<HistoryRecord>,
}

/// What [`KindRecorder`] notes at the start of an operation: its kind
/// (GET, PUT, DELETE) and, when recording, what it is and its invocation
/// time (the clock is read only then: a clock read costs as much as a
/// small operation on some machines).
struct KindNote {
    kind: usize,
    what: Option<(Vec<u8>, HistoryOp, u64)>,
}

impl Recorder<Response> for KindRecorder {
    type Note = KindNote;

    fn start(&mut self, op: &Op<'_>) -> KindNote {
        let kind = match op {
            Op::Get(_) | Op::Scan(..) => 0,
            Op::Put(..) => 1,
            Op::Delete(_) => 2,
        };
        let what = self.record.then(|| {
            let what = match *op {
                Op::Get(_) | Op::Scan(..) => HistoryOp::Get,
                Op::Put(_, v) => HistoryOp::Put(v.to_vec()),
                Op::Delete(_) => HistoryOp::Delete,
            };
            (op.key().to_vec(), what, monotonic_ns())
        });
        KindNote { kind, what }
    }

    fn finish(&mut self, note: KindNote, done: Done<Response>, latency: Duration) {
        let response = if note.what.is_some() {
            monotonic_ns()
        } else {
            0
        };
        let k = &mut self.kinds[note.kind];
        k.ops += 1;
        k.fabric += done.stats;
        k.latencies_ns
            .push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
        let ret = match done.result {
            Ok(Response::Get(v)) => {
                match &v {
                    None => k.misses += 1,
                    Some(v) => k.value_bytes += v.len() as u64,
                }
                HistoryRet::Get(v)
            }
            Ok(Response::Put(e) | Response::Delete(e)) => HistoryRet::Existed(e),
            Err(e) => {
                k.failures += 1;
                let kind = error_kind(&e);
                *self.errors.entry(kind.clone()).or_default() += 1;
                HistoryRet::Failed(kind)
            }
        };
        if let Some((key, op, invoke)) = note.what {
            self.history.push(HistoryRecord {
                client: self.client,
                key,
                op,
                ret,
                invoke,
                response,
            });
        }
    }
}

/// What one thread's measured phase returns.
type ThreadResult = (
    [KindReport; 3],
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
    servers: &[&ServerPool],
) -> Result<WorkloadReport, WorkloadError>
where
    I: Issuer<Output = Response> + Send,
{
    let mut workers = workers;
    if spec.preload {
        preload(&mut workers, spec)?;
    }
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(workers.len() + 1);
    let server_cpu = || servers.iter().map(|p| p.cpu_time()).sum::<Duration>();
    let server_requests = || servers.iter().map(|p| p.requests()).sum::<u64>();
    std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter_mut()
            .map(|w| {
                let (stop, barrier) = (&stop, &barrier);
                s.spawn(move || -> ThreadResult {
                    let mut mix = Mix::new(spec, w.id.node.0, w.id.index);
                    let mut rec = KindRecorder {
                        client: u64::from(w.id.node.0) * 1000 + u64::from(w.id.index),
                        record: spec.record,
                        kinds: Default::default(),
                        errors: BTreeMap::new(),
                        history: Vec::new(),
                    };
                    let limits = Limits {
                        stop,
                        max_ops: if spec.max_ops == 0 {
                            u64::MAX
                        } else {
                            spec.max_ops
                        },
                        think: spec.think,
                    };
                    barrier.wait();
                    let cpu = thread_cpu_time();
                    client_loop(&mut w.issuer, &mut mix, &mut rec, &limits);
                    (
                        rec.kinds,
                        thread_cpu_time().saturating_sub(cpu),
                        rec.errors,
                        rec.history,
                    )
                })
            })
            .collect();
        if let Some(at) = spec.start_at {
            match at.duration_since(SystemTime::now()) {
                Ok(wait) => std::thread::sleep(wait),
                Err(late) if late.duration() > START_LATE_LIMIT => {
                    stop.store(true, Ordering::Relaxed);
                    barrier.wait();
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(WorkloadError::Arg(format!(
                        "the start instant passed {:.3} s before this node was ready \
                         (connections and preload took longer): choose a later --start-at",
                        late.duration().as_secs_f64()
                    )));
                }
                Err(_) => {}
            }
        }
        let (cpu0, req0) = (server_cpu(), server_requests());
        barrier.wait();
        let start = Instant::now();
        let started = SystemTime::now();
        while start.elapsed() < spec.duration && !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(5).min(spec.duration));
        }
        stop.store(true, Ordering::Relaxed);
        let mut report = WorkloadReport {
            system: system.to_string(),
            start_at_unix_ns: spec.start_at.map(unix_ns),
            started_unix_ns: unix_ns(started),
            ..WorkloadReport::default()
        };
        for h in handles {
            let (kinds, cpu, errors, history) = h
                .join()
                .map_err(|_| WorkloadError::Arg("a client thread panicked".into()))?;
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
        for k in &mut report.kinds {
            k.latencies_ns.sort_unstable();
        }
        Ok(report)
    })
}

/// PUTs every key once, spread over the workers; the first failure stops
/// them all and is returned.
fn preload<I>(workers: &mut [Worker<I>], spec: &WorkloadSpec) -> Result<(), WorkloadError>
where
    I: Issuer<Output = Response> + Send,
{
    let stop = AtomicBool::new(false);
    let n = workers.len() as u64;
    let errors: Vec<Option<Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter_mut()
            .enumerate()
            .map(|(i, w)| {
                let stop = &stop;
                s.spawn(move || {
                    let mut source = Preload::new(spec, i as u64, n);
                    let mut rec = PreloadRecorder { stop, error: None };
                    client_loop(&mut w.issuer, &mut source, &mut rec, &Limits::until(stop));
                    rec.error
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Some(Error::Timeout)))
            .collect()
    });
    match errors.into_iter().flatten().next() {
        Some(e) => Err(WorkloadError::Store(e)),
        None => Ok(()),
    }
}
