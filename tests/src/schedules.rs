//! Running a whole-cluster scenario under shuttle's schedulers: every client a
//! shuttle thread, every fabric word access a scheduling point (the
//! simulator's `schedule_point` hook), the recorded history checked for
//! linearizability. Used by the shuttle suite and by the concurrent proptest,
//! which generates scenarios and seeds and shrinks failures.

use std::sync::Arc;

use nessie_check::{check_history, Recorder};
use nessie_fabric_sim::{ClockMode, SimConfig};
use nessie_protocol::{Config, Faults, RetryPolicy};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{Config as ShuttleConfig, Runner};

use crate::{rec_delete, rec_get, rec_put, SimCluster};

/// One client's program.
#[derive(Clone, Debug)]
pub enum Step {
    /// GET the key.
    Get(Vec<u8>),
    /// PUT the key.
    Put(Vec<u8>, &'static str),
    /// DELETE the key.
    Delete(Vec<u8>),
}

/// A cluster, its clients' programs and its preloaded keys. Every PUT (the
/// preload's included) must write a value of its own, so that a read names
/// the write it read ([`Scenario::check_values`]).
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The deployment configuration.
    pub cfg: Config,
    /// (node, client index, program, faults) of each client.
    pub clients: Vec<(u16, u16, Vec<Step>, Faults)>,
    /// Keys stored before the clients start.
    pub preload: Vec<(Vec<u8>, &'static str)>,
}

impl Scenario {
    /// Panics unless every PUT of the scenario, the preload's included,
    /// writes a value no other PUT writes (with a value shared by two
    /// writes, or by two keys, a GET that returns the wrong one looks
    /// right).
    pub fn check_values(&self) {
        let preload = self.preload.iter().map(|(_, v)| *v);
        let programs = self.clients.iter().flat_map(|(_, _, program, _)| {
            program.iter().filter_map(|s| match s {
                Step::Put(_, v) => Some(*v),
                _ => None,
            })
        });
        let mut seen = std::collections::HashSet::new();
        for v in preload.chain(programs) {
            assert!(seen.insert(v), "two PUTs of the scenario write {v:?}");
        }
    }
}

/// `NESSIE_SHUTTLE_ITERATIONS` or `default`.
pub fn iterations(default: usize) -> usize {
    std::env::var("NESSIE_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small configuration for schedule exploration (bounded retries: time
/// does not pass under a manual clock).
pub fn base(nodes: u16, slots: u32, candidates: u8, clients_per_node: u16) -> Config {
    Config {
        nodes,
        index_slots_per_node: slots,
        candidates,
        clients_per_node,
        dtes_per_node: 32 * u32::from(clients_per_node),
        max_key_len: 8,
        max_value_len: 16,
        max_migrate_depth: 4,
        retry: RetryPolicy {
            max_attempts: 8,
            ..RetryPolicy::default()
        },
        ..Config::default()
    }
}

/// Runs the scenario once (inside a shuttle execution) and checks the history.
pub fn run(s: &Scenario) {
    let cluster = SimCluster::with_sim(s.cfg.clone(), |c: SimConfig| {
        c.with_clock(ClockMode::Manual)
            .with_schedule_point(shuttle::thread::yield_now)
    });
    let rec = Arc::new(Recorder::new());
    let mut loader = cluster.client(0, s.cfg.clients_per_node - 1);
    for (i, (k, v)) in s.preload.iter().enumerate() {
        rec_put(&rec, 100 + i, &mut loader, k, v.as_bytes()).expect("preload");
    }
    let handles: Vec<_> = s
        .clients
        .iter()
        .cloned()
        .enumerate()
        .map(|(id, (node, index, program, faults))| {
            let (cluster, rec) = (cluster.clone(), rec.clone());
            shuttle::thread::spawn(move || {
                let mut c = cluster.client(node, index);
                c.state_mut().faults = faults;
                for step in program {
                    let _ = match step {
                        Step::Get(k) => rec_get(&rec, id, &mut c, &k).map(|_| ()),
                        Step::Put(k, v) => rec_put(&rec, id, &mut c, &k, v.as_bytes()).map(|_| ()),
                        Step::Delete(k) => rec_delete(&rec, id, &mut c, &k).map(|_| ()),
                    };
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("client thread");
    }
    if std::env::var("NESSIE_SHUTTLE_DEBUG").is_ok() {
        let mut ev = rec.events();
        ev.sort_by_key(|e| e.invoke);
        for e in ev {
            eprintln!(
                "DBG {} [{}..{}] {:?} -> {:?}",
                e.client, e.invoke, e.response, e.request, e.ret
            );
        }
    }
    if let Err(e) = check_history(&rec.events(), 10_000_000) {
        panic!("history check failed: {e}");
    }
}

/// Explores `n` schedules of the random scheduler seeded with `seed`.
pub fn random(s: Scenario, seed: u64, n: usize) {
    s.check_values();
    let runner = Runner::new(
        RandomScheduler::new_from_seed(seed, n),
        ShuttleConfig::default(),
    );
    runner.run(move || run(&s));
}

/// Explores `n` schedules of the PCT scheduler seeded with `seed`.
pub fn pct(s: Scenario, seed: u64, n: usize, depth: usize) {
    s.check_values();
    let runner = Runner::new(
        PctScheduler::new_from_seed(seed, depth, n),
        ShuttleConfig::default(),
    );
    runner.run(move || run(&s));
}
