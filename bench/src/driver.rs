//! Measuring: one slice of one system (its client threads run the workload
//! closed-loop for a duration or an operation quota, or open-loop with
//! Poisson arrivals), and a point: every system measured in alternating
//! slices, with the servers of the systems not being measured paused and
//! optional background threads spinning throughout.
//!
//! Each client thread of a slice runs the project's one workload loop
//! ([`client_loop`]) with the bench's parts: its client of any system
//! ([`BenchIssuer`]), its key distribution and arrivals ([`BenchSource`])
//! and its histograms ([`BenchRecorder`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use nessie_exec::thread_cpu_time;
use nessie_protocol::{Error, KvClient, KvRequest, Response};

use crate::affinity::CoreSplit;
use crate::stats::{KindAcc, SysAcc};
use crate::system::{AnyClient, Started};
use crate::workload::{write_key, Draw, OpGen, Workload};
use nessie_workload::zipf::ScrambledZipfian;
use nessie_workload::{client_loop, Done, Issuer, Limits, Next, Recorder, Source};

/// How long a point measures each system.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// Seconds per system.
    Seconds(f64),
    /// Operations per system.
    Ops(u64),
}

/// One point of an experiment, as every system runs it.
#[derive(Clone, Debug)]
pub struct PointPlan {
    /// The workload.
    pub workload: Workload,
    /// How much to measure.
    pub budget: Budget,
    /// Slice length.
    pub slice: Duration,
    /// Background threads spinning during the point.
    pub background: usize,
    /// Open-loop arrival rate per system (ops/s over all its clients); `None`
    /// or a zero rate: closed loop.
    pub rates: Option<Vec<f64>>,
    /// Only the first this many clients of each system run (all if `None`).
    pub clients: Option<usize>,
    /// Server threads and client threads on cores of their own
    /// (`--server-cores`); `None`: wherever the scheduler puts them.
    pub cores: Option<CoreSplit>,
}

/// What one slice asks of a system's clients.
#[derive(Clone, Copy, Debug)]
enum Quota {
    Time(Duration),
    Ops(u64),
}

fn searches(clients: &[(nessie_protocol::ClientId, AnyClient)]) -> (u64, u64) {
    clients.iter().fold((0, 0), |(s, c), (_, x)| {
        let (a, b) = x.searches();
        (s + a, c + b)
    })
}

/// A bench client thread's client of any system, as the workload loop
/// drives it: a pipeline keeps its operations in flight, the others run
/// each to its end. A GET searches where the workload asks for searches and
/// the system has them (Cell); an operation's result is whether it found
/// something (a PUT: that it succeeded).
struct BenchIssuer<'a> {
    c: &'a mut AnyClient,
    searches: bool,
    done: Option<Done<bool>>,
    finished: Vec<Done<Response>>,
}

impl Issuer for BenchIssuer<'_> {
    type Output = bool;

    fn window(&self) -> usize {
        match &*self.c {
            AnyClient::Pipe(p) => p.window(),
            _ => 1,
        }
    }

    fn outstanding(&self) -> usize {
        match &*self.c {
            AnyClient::Pipe(p) => p.outstanding(),
            _ => usize::from(self.done.is_some()),
        }
    }

    fn submit(&mut self, tag: usize, op: KvRequest<'_>) {
        let c = &mut *self.c;
        let result: Result<bool, Error> = match (&mut *c, op) {
            (AnyClient::Pipe(p), op) => return p.submit(tag, op),
            (c, KvRequest::Get(k)) => c.get(k, self.searches),
            (c, KvRequest::Put(k, v)) => c.put(k, v).map(|_| true),
            (c, KvRequest::Scan { from: k, limit, .. }) => match c.scan(k, limit) {
                Some(r) => r.map(|n| n > 0),
                None => c.get(k, false),
            },
            (AnyClient::Kv(c), KvRequest::Delete(k)) => c.delete(k),
            (AnyClient::Cell(c), KvRequest::Delete(k)) => KvClient::delete(c.as_mut(), k),
        };
        self.done = Some(Done {
            tag,
            result,
            stats: c.last_stats(),
        });
    }

    fn progress(&mut self, done: &mut Vec<Done<bool>>) {
        if let AnyClient::Pipe(p) = &mut *self.c {
            p.progress(&mut self.finished);
            done.extend(self.finished.drain(..).map(|f| Done {
                tag: f.tag,
                result: f.result.map(|r| !matches!(r, Response::Get(None))),
                stats: f.stats,
            }));
        } else {
            done.extend(self.done.take());
        }
    }
}

/// A bench client thread's operations: its key distribution's keys, PUTs
/// of the workload's value, scans only for a client that has them (a
/// scan of any other reads its first key, as a GET), and with an
/// open-loop rate, Poisson arrivals.
struct BenchSource<'a> {
    gen: OpGen,
    w: &'a Workload,
    value: &'a [u8],
    /// Values written so far (each PUT's size is drawn from its number and
    /// the thread's seed: [`Workload::value_len`]).
    puts: u64,
    seed: u64,
    key: Vec<u8>,
    /// Arrivals per second of this thread (0: closed loop).
    rate: f64,
    /// The last arrival (set at the first operation).
    next: Option<Instant>,
    scans: bool,
}

impl Source for BenchSource<'_> {
    fn next(&mut self) -> Option<Next<'_>> {
        let arrival = (self.rate > 0.0).then(|| {
            let gap = -(1.0 - self.gen.rng().unit()).ln() / self.rate;
            let next = self.next.get_or_insert_with(Instant::now);
            *next += Duration::from_secs_f64(gap);
            *next
        });
        let (kind, k) = self.gen.next_op();
        write_key(&mut self.key, k, self.w.key_size);
        let op = match kind {
            Draw::Get => KvRequest::Get(&self.key),
            Draw::Put => {
                let len = self.w.value_len(self.seed, self.puts);
                self.puts += 1;
                KvRequest::Put(&self.key, &self.value[..len])
            }
            Draw::Scan if self.scans => KvRequest::Scan {
                from: &self.key,
                to: None,
                limit: self.gen.scan_len() as usize,
            },
            Draw::Scan => KvRequest::Get(&self.key),
        };
        Some(Next { op, arrival })
    }
}

/// A bench client thread's accumulators: GET, PUT, scan.
struct BenchRecorder {
    kinds: [KindAcc; 3],
}

impl Recorder<bool> for BenchRecorder {
    type Note = usize;

    fn start(&mut self, op: &KvRequest<'_>) -> usize {
        match op {
            KvRequest::Get(_) => 0,
            KvRequest::Put(..) | KvRequest::Delete(_) => 1,
            KvRequest::Scan { .. } => 2,
        }
    }

    fn finish(&mut self, kind: usize, done: Done<bool>, latency: Duration) {
        self.kinds[kind].record(&done.stats, latency, done.result.as_ref().copied());
    }
}

/// Runs one slice of `sys` with its first `active` clients; adds its
/// measurements to `acc`.
#[allow(clippy::too_many_arguments)]
fn slice(
    sys: &mut Started,
    w: &Workload,
    zipf: &Option<ScrambledZipfian>,
    quota: Quota,
    rate: f64,
    stream: u64,
    active: usize,
    cores: Option<&CoreSplit>,
    acc: &mut SysAcc,
) {
    let active = active.min(sys.clients.len());
    // A fixed-ratio Cell variant follows the selector variant's share.
    if let Some(pct) = sys
        .variant
        .cell
        .follow
        .as_ref()
        .and_then(|m| m.server_pct())
    {
        for (_, c) in &mut sys.clients {
            c.set_mode(nessie_cell::SearchMode::Fixed(pct));
        }
    }
    let searches0 = searches(&sys.clients);
    let d = &sys.deployment;
    let hits0: u64 = sys.clients.iter().map(|(_, c)| c.cache_hits()).sum();
    let nodes = sys.variant.nodes();
    let n = active as u64;
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(active + 1);
    let per_client_rate = rate / n as f64;
    let value = vec![b'w'; w.value_size as usize];
    let (results, wall, server0) = thread::scope(|s| {
        let handles: Vec<_> = sys
            .clients
            .iter_mut()
            .take(active)
            .enumerate()
            .map(|(ci, (id, c))| {
                let (stop, barrier, value) = (&stop, &barrier, &value);
                let id = *id;
                let my_ops = match quota {
                    Quota::Ops(total) => total / n + u64::from((ci as u64) < total % n),
                    Quota::Time(_) => u64::MAX,
                };
                s.spawn(move || {
                    if let Some(split) = cores {
                        // Best effort: an unpinned client still measures.
                        if let Err(e) = split.pin_this_thread_to_clients() {
                            tracing::warn!("{e}");
                        }
                    }
                    let scans = c.has_scans();
                    let mut source = BenchSource {
                        gen: OpGen::with_zipf(w, zipf.clone(), nodes, id.node.0, id.index, stream),
                        w,
                        value,
                        puts: 0,
                        seed: w.seed ^ (u64::from(id.node.0) << 16 | u64::from(id.index)) ^ stream,
                        key: Vec::with_capacity(w.key_size as usize),
                        rate: per_client_rate,
                        next: None,
                        scans,
                    };
                    let mut rec = BenchRecorder {
                        kinds: [KindAcc::default(), KindAcc::default(), KindAcc::default()],
                    };
                    let mut issuer = BenchIssuer {
                        c,
                        searches: w.searches,
                        done: None,
                        finished: Vec::new(),
                    };
                    let limits = Limits {
                        stop,
                        max_ops: my_ops,
                        think: Duration::ZERO,
                    };
                    barrier.wait();
                    let cpu0 = thread_cpu_time();
                    client_loop(&mut issuer, &mut source, &mut rec, &limits);
                    (rec.kinds, thread_cpu_time().saturating_sub(cpu0))
                })
            })
            .collect();
        // Servers run (and their CPU counts) only from the moment the
        // clients are released, not while their threads are spawned.
        d.resume_servers();
        let server0 = (d.server_cpu_time(), d.server_requests());
        barrier.wait();
        let start = Instant::now();
        if let Quota::Time(t) = quota {
            thread::sleep(t);
            stop.store(true, Ordering::Relaxed);
        }
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect();
        (results, start.elapsed(), server0)
    });
    d.pause_servers();
    let (cpu0, req0) = server0;
    for ([get, put, scan], cpu) in results {
        acc.get.merge(&get);
        acc.put.merge(&put);
        acc.scan.merge(&scan);
        acc.client_cpu += cpu;
    }
    let searches1 = searches(&sys.clients);
    let (ds, dc) = (searches1.0 - searches0.0, searches1.1 - searches0.1);
    acc.server_searches += ds;
    acc.client_searches += dc;
    if let Some(m) = &sys.variant.cell.publish {
        m.add(ds, dc);
    }
    acc.wall += wall;
    acc.server_cpu += d.server_cpu_time().saturating_sub(cpu0);
    acc.server_requests += d.server_requests() - req0;
    acc.cache_hits += sys
        .clients
        .iter()
        .map(|(_, c)| c.cache_hits())
        .sum::<u64>()
        .saturating_sub(hits0);
    acc.slices += 1;
}

/// Slices a point takes per system.
pub fn rounds(plan: &PointPlan) -> u64 {
    match plan.budget {
        Budget::Seconds(s) => ((s / plan.slice.as_secs_f64()).round() as u64).max(1),
        Budget::Ops(n) => (n / 2000).clamp(1, 10),
    }
}

/// Threads that spin until dropped (the CPU-contention experiment).
struct Spinners {
    stop: std::sync::Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Spinners {
    fn start(k: usize) -> Spinners {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..k)
            .map(|_| {
                let stop = stop.clone();
                thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
                    }
                })
            })
            .collect();
        Spinners { stop, threads }
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Measures every (not failed) system of `systems` at `plan`, interleaved:
/// round after round, one slice of each system in turn. `tick` is called
/// after every slice. Returns one accumulator per system (empty for failed
/// ones).
pub fn measure(systems: &mut [Started], plan: &PointPlan, mut tick: impl FnMut()) -> Vec<SysAcc> {
    let mut accs = vec![SysAcc::default(); systems.len()];
    let r = rounds(plan);
    let zipf = plan.workload.zipf();
    let _spin = Spinners::start(plan.background);
    for round in 0..r {
        for (si, sys) in systems.iter_mut().enumerate() {
            if sys.failed.is_some() {
                continue;
            }
            let quota = match plan.budget {
                Budget::Seconds(_) => Quota::Time(plan.slice),
                Budget::Ops(n) => Quota::Ops(n / r + u64::from(round < n % r)),
            };
            let rate = plan.rates.as_ref().map_or(0.0, |v| v[si]);
            let stream = round.wrapping_mul(0x1_0000) ^ plan.workload.seed;
            let active = plan.clients.unwrap_or(usize::MAX);
            slice(
                sys,
                &plan.workload,
                &zipf,
                quota,
                rate,
                stream,
                active,
                plan.cores.as_ref(),
                &mut accs[si],
            );
            tick();
        }
    }
    accs
}
