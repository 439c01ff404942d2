//! Measuring: one slice of one system (its client threads run the workload
//! closed-loop for a duration or an operation quota, or open-loop with
//! Poisson arrivals), and a point: every system measured in alternating
//! slices, with the servers of the systems not being measured paused and
//! optional background threads spinning throughout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use nessie_baselines::cpu::thread_cpu_time;

use super::stats::{KindAcc, SysAcc};
use super::system::{AnyClient, Started, SystemSpec};
use super::workload::{write_key, OpGen, OpKind, Workload};
use super::zipf::ScrambledZipfian;

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
    acc: &mut SysAcc,
) {
    let active = active.min(sys.clients.len());
    // A fixed-ratio Cell variant follows the selector variant's share.
    if let SystemSpec::Cell(spec) = &sys.variant.sys {
        if let Some(pct) = spec.follow.as_ref().and_then(|m| m.server_pct()) {
            for (_, c) in &mut sys.clients {
                c.set_mode(nessie_cell::SearchMode::Fixed(pct));
            }
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
                    let zipf = zipf.clone();
                    let mut gen = OpGen::with_zipf(w, zipf, nodes, id.node.0, id.index, stream);
                    let mut kinds = [KindAcc::default(), KindAcc::default(), KindAcc::default()];
                    let mut key = Vec::with_capacity(w.key_size as usize);
                    barrier.wait();
                    let cpu0 = thread_cpu_time();
                    if let AnyClient::Pipe(p) = c {
                        // Several operations in flight (closed loop only:
                        // --depth is refused with open-loop rates).
                        p.closed_loop(&mut gen, w, value, my_ops, stop, &mut kinds);
                        return (kinds, thread_cpu_time().saturating_sub(cpu0));
                    }
                    let t0 = Instant::now();
                    let mut next = t0;
                    let mut done = 0u64;
                    while done < my_ops && !stop.load(Ordering::Relaxed) {
                        // Open loop: wait (without burning CPU) for the next arrival.
                        let issued = if per_client_rate > 0.0 {
                            let gap = -(1.0 - gen.rng().unit()).ln() / per_client_rate;
                            next += Duration::from_secs_f64(gap);
                            let now = Instant::now();
                            if next > now {
                                thread::sleep(next - now);
                            }
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                            // Latency counts the queueing behind earlier
                            // arrivals, not the sleep's timer slack.
                            if next > now {
                                Instant::now()
                            } else {
                                next
                            }
                        } else {
                            Instant::now()
                        };
                        let (kind, k) = gen.next_op();
                        write_key(&mut key, k, w.key_size);
                        let (i, r) = match kind {
                            OpKind::Get => (0, c.get(&key, w.searches)),
                            OpKind::Put => (1, c.put(&key, value).map(|_| true)),
                            OpKind::Scan => match c.scan(&key, w.scan_len as usize) {
                                Some(r) => (2, r.map(|n| n > 0)),
                                // A store without scans reads the first key.
                                None => (0, c.get(&key, false)),
                            },
                        };
                        kinds[i].record(&c.last_stats(), issued.elapsed(), r.as_ref().copied());
                        done += 1;
                    }
                    (kinds, thread_cpu_time().saturating_sub(cpu0))
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
    if let SystemSpec::Cell(spec) = &sys.variant.sys {
        if let Some(m) = &spec.publish {
            m.add(ds, dc);
        }
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
                &mut accs[si],
            );
            tick();
        }
    }
    accs
}
