//! The region directory over the fabric (`nessie_cell::FabricDirectory`), on the
//! simulated fabric, one handle per "process" (nothing shared but the
//! fabric), each operation a machine driven on its own endpoint:
//!
//! - servers updating it at once all commit, every allocation once, while a
//!   reader's snapshots only ever grow;
//! - a reader holding a stale current word never takes a copy its owner is
//!   rewriting (teeth: `directory_skip_version_check` takes the
//!   uncommitted table);
//! - a writer that dies in the middle of an update wedges no one (teeth:
//!   `directory_in_place`, where the dead writer leaves the only table torn
//!   and every reader and writer times out);
//! - a failed copy WRITE that lands late (within the landing margin, A2)
//!   cannot corrupt a later commit (teeth: `directory_skip_landing_wait`
//!   commits the same copy before the late WRITE lands, and the table read
//!   back is the failed update's);
//! - a commit CAS whose completion is lost, or that fails, is settled
//!   exactly once; a directory node that is down or not initialised gives
//!   a typed error at once.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::tiny;
use nessie_cell::machine::{machine, Io, Machine, Resolution};
use nessie_cell::region::{Applied, RegionMap, Update};
use nessie_cell::FabricDirectory;
use nessie_cell::{CellConfig, CellFaults, RegionId};
use nessie_exec::Driver;
use nessie_exec::Step;
use nessie_fabric_sim::{Injection, LatencyModel, SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::{
    Completion, Endpoint, Error, Fabric, FabricError, Nanos, NodeId, Op, OpKind, Region,
    TransportError, TransportFault, WorkRequest,
};

fn cfg(faults: CellFaults) -> CellConfig {
    CellConfig {
        faults,
        op_timeout: Duration::from_secs(5),
        rpc_timeout: Duration::from_millis(300),
        landing_margin: Duration::from_millis(100),
        ..tiny()
    }
    .with_directory_on(NodeId(0))
}

fn fabric(c: &CellConfig) -> SimFabric {
    SimFabric::new(SimConfig::from_topology(c.topology())).expect("sim fabric")
}

fn handle(c: &CellConfig, writer: Option<u16>) -> Arc<FabricDirectory> {
    Arc::new(FabricDirectory::new(c, writer.map(NodeId)).expect("directory handle"))
}

/// A directory operation as a machine on `node`, stepped round by round.
struct Stepper<T, E: Endpoint> {
    driver: Driver<E>,
    m: Machine<T>,
    held: Option<Vec<WorkRequest>>,
    rounds: usize,
}

impl<T: 'static, E: Endpoint> Stepper<T, E> {
    fn new<F>(ep: E, make: impl FnOnce(Io) -> F) -> Stepper<T, E>
    where
        F: std::future::Future<Output = Result<T, Error>> + 'static,
    {
        let driver = Driver::new(ep);
        let m = machine(driver.node(), driver.next_id(), None, make);
        Stepper {
            driver,
            m,
            held: None,
            rounds: 0,
        }
    }

    fn post(&mut self, wrs: Vec<WorkRequest>) {
        let now = self.driver.now();
        self.driver.post(self.m.exec(), wrs, now);
        // Until every completion came, or the round's deadline passed (the
        // machine then counts the missing ones as timed out).
        let start = Instant::now();
        while self.m.exec().outstanding() > 0
            && self
                .m
                .exec()
                .deadline()
                .is_none_or(|d| self.driver.now() <= d)
            && start.elapsed() < Duration::from_secs(10)
        {
            self.driver.wait(self.m.exec());
        }
        self.rounds += 1;
    }

    /// Runs until `rounds` rounds in all have completed (the next round is
    /// held, not posted), or to the end; the result if it ended.
    fn run_to(&mut self, rounds: usize) -> Option<Result<T, Error>> {
        if self.rounds < rounds {
            if let Some(wrs) = self.held.take() {
                self.post(wrs);
            }
        }
        loop {
            let now = self.driver.now();
            match self.m.poll(now) {
                Step::Done(r) => return Some(r),
                Step::Pending => self.driver.wait(self.m.exec()),
                Step::Post(wrs) if self.rounds >= rounds => {
                    self.held = Some(wrs);
                    return None;
                }
                Step::Post(wrs) => self.post(wrs),
                Step::PostChain(_) => panic!("the directory posts no chains"),
                // The directory awaits every round; nothing it posts is
                // detached, but a detached post is posted, not held.
                Step::PostDetached(wrs) => {
                    let now = self.driver.now();
                    self.driver.post_detached(self.m.exec(), wrs, now)
                }
                Step::Effect(e) => {
                    let r = self.driver.perform(e, &mut |e| -> Resolution {
                        panic!("the directory asks for no effect of Cell's: {e:?}")
                    });
                    self.m.resolve(r);
                }
            }
        }
    }

    fn finish(&mut self) -> Result<T, Error> {
        self.run_to(usize::MAX).expect("runs to the end")
    }
}

fn run<T: 'static, F>(ep: SimEndpoint, make: impl FnOnce(Io) -> F) -> Result<T, Error>
where
    F: std::future::Future<Output = Result<T, Error>> + 'static,
{
    Stepper::new(ep, make).finish()
}

fn update(f: &SimFabric, d: &Arc<FabricDirectory>, on: u16, u: Update) -> Result<Applied, Error> {
    let d = d.clone();
    run(f.open(NodeId(on)).unwrap(), move |io| async move {
        d.update(&io, u).await
    })
}

fn snapshot(f: &SimFabric, d: &Arc<FabricDirectory>, on: u16) -> Result<Arc<RegionMap>, Error> {
    let d = d.clone();
    run(f.open(NodeId(on)).unwrap(), move |io| async move {
        d.snapshot(&io).await
    })
}

fn initialised(c: &CellConfig, f: &SimFabric) -> Arc<FabricDirectory> {
    let d0 = handle(c, Some(0));
    let d = d0.clone();
    run(f.open(NodeId(0)).unwrap(), move |io| async move {
        d.initialise(&io).await
    })
    .expect("initialised");
    d0
}

fn allocate(node: u16) -> Update {
    Update::Allocate {
        on: NodeId(node),
        by: NodeId(node),
    }
}

#[test]
fn servers_updating_at_once_all_commit_and_snapshots_only_grow() {
    let c = CellConfig {
        regions_per_node: 24,
        ..cfg(CellFaults::default())
    };
    // NIC latency, so that the servers' rounds interleave and commits race.
    let f = SimFabric::new(
        SimConfig::from_topology(c.topology())
            .with_latency(LatencyModel::new(Duration::from_micros(30), 0.0)),
    )
    .unwrap();
    initialised(&c, &f);
    let per_server = 20;
    let writers: Vec<_> = (0..3u16)
        .map(|n| {
            let (c, f) = (c.clone(), f.clone());
            thread::spawn(move || {
                let d = handle(&c, Some(n));
                for _ in 0..per_server {
                    match update(&f, &d, n, allocate(n)).expect("update") {
                        Applied::Allocated(Some(_)) => {}
                        other => panic!("{other:?}"),
                    }
                }
                d.counters()
            })
        })
        .collect();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let reader = {
        let (c, f) = (c.clone(), f.clone());
        thread::spawn(move || {
            let d = handle(&c, None);
            let mut last = RegionMap::default();
            let mut reads = 0;
            while stop_rx.try_recv().is_err() {
                let m = snapshot(&f, &d, 1).expect("snapshot");
                assert!(m.epoch >= last.epoch, "epochs never go back");
                for (r, i) in &last.regions {
                    assert_eq!(m.get(*r), Some(*i), "a snapshot lost {r}");
                }
                last = (*m).clone();
                reads += 1;
            }
            (reads, d.counters())
        })
    };
    let counters: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    stop_tx.send(()).unwrap();
    let (reads, rc) = reader.join().unwrap();
    let m = snapshot(&f, &handle(&c, None), 2).unwrap();
    let ids: Vec<u32> = m.regions.keys().map(|r| r.0).collect();
    assert_eq!(
        ids,
        (1..=3 * per_server).collect::<Vec<u32>>(),
        "every id once"
    );
    for n in 0..3 {
        let mut slots: Vec<u32> = m
            .held_by(NodeId(n))
            .iter()
            .map(|r| m.get(*r).unwrap().slot)
            .collect();
        slots.sort_unstable();
        assert_eq!(slots, (0..per_server).collect::<Vec<u32>>(), "node {n}");
    }
    assert_eq!(m.epoch, 1 + 3 * u64::from(per_server));
    let commits: u64 = counters.iter().map(|c| c.commits).sum();
    let races: u64 = counters.iter().map(|c| c.lost_races).sum();
    assert_eq!(commits, 3 * u64::from(per_server));
    println!(
        "{commits} commits, {races} lost races; reader: {reads} snapshots, {} torn copies re-read",
        rc.torn
    );
}

/// A reader reads the current word (copy A), then stalls; the writer
/// commits copy B and starts rewriting copy A for a third update, then dies
/// after writing its body. The reader goes on: what does it return?
fn stale_reader_meets_a_rewritten_copy(faults: CellFaults) -> (Arc<RegionMap>, Arc<RegionMap>) {
    let c = cfg(faults);
    let f = fabric(&c);
    initialised(&c, &f);
    let w = handle(&c, Some(1));
    update(&f, &w, 1, allocate(1)).unwrap();
    let r = handle(&c, None);
    let r2 = r.clone();
    let mut reader = Stepper::new(f.open(NodeId(2)).unwrap(), move |io| async move {
        r2.snapshot(&io).await
    });
    assert!(
        reader.run_to(1).is_none(),
        "the reader holds the current word"
    );
    update(&f, &w, 1, allocate(0)).unwrap();
    let committed = snapshot(&f, &handle(&c, None), 0).unwrap();
    let w2 = w.clone();
    let mut dying = Stepper::new(f.open(NodeId(1)).unwrap(), move |io| async move {
        w2.update(&io, allocate(2)).await
    });
    // Rounds: current word, copy, odd versions, body; dies before the even ones.
    assert!(dying.run_to(4).is_none());
    drop(dying);
    let seen = reader.finish().expect("the reader gets a table");
    (seen, committed)
}

#[test]
fn a_reader_with_a_stale_current_word_never_takes_a_copy_being_rewritten() {
    let (seen, committed) = stale_reader_meets_a_rewritten_copy(CellFaults::default());
    assert_eq!(seen, committed);
    assert!(seen.held_by(NodeId(2)).is_empty());
}

#[test]
fn teeth_without_the_version_check_a_reader_takes_an_uncommitted_table() {
    let (seen, committed) = stale_reader_meets_a_rewritten_copy(CellFaults {
        directory_skip_version_check: true,
        ..CellFaults::default()
    });
    assert_ne!(seen, committed);
    assert_eq!(
        seen.held_by(NodeId(2)).len(),
        1,
        "the dead writer's allocation, never committed: {seen:?}"
    );
}

/// Server 1 dies in the middle of an update (after marking the copy it
/// writes odd); then server 2 updates and a client reads, each bounded by
/// the directory's patience (`op_timeout`, 1 s here).
fn after_a_writer_died(
    faults: CellFaults,
) -> (Result<Applied, Error>, Result<Arc<RegionMap>, Error>) {
    let c = CellConfig {
        op_timeout: Duration::from_secs(1),
        ..cfg(faults)
    };
    let f = fabric(&c);
    initialised(&c, &f);
    let w1 = handle(&c, Some(1));
    update(&f, &w1, 1, allocate(1)).unwrap();
    let w = w1.clone();
    let mut dying = Stepper::new(f.open(NodeId(1)).unwrap(), move |io| async move {
        w.update(&io, allocate(1)).await
    });
    assert!(dying.run_to(3).is_none(), "dies after the odd versions");
    drop(dying);
    let t = Instant::now();
    let other = update(&f, &handle(&c, Some(2)), 2, allocate(2));
    let read = snapshot(&f, &handle(&c, None), 0);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "bounded: {:?}",
        t.elapsed()
    );
    (other, read)
}

#[test]
fn a_writer_that_dies_mid_update_wedges_no_one() {
    let (other, read) = after_a_writer_died(CellFaults::default());
    assert!(
        matches!(other, Ok(Applied::Allocated(Some(_)))),
        "{other:?}"
    );
    let m = read.expect("a consistent table");
    assert_eq!(
        m.regions.len(),
        2,
        "the dead writer's update never took effect"
    );
    assert_eq!(m.held_by(NodeId(1)).len(), 1);
    assert_eq!(m.held_by(NodeId(2)).len(), 1);
}

#[test]
fn teeth_updating_in_place_a_dead_writer_wedges_every_reader_and_writer() {
    let (other, read) = after_a_writer_died(CellFaults {
        directory_in_place: true,
        ..CellFaults::default()
    });
    assert!(matches!(other, Err(Error::Timeout)), "{other:?}");
    assert!(matches!(read, Err(Error::Timeout)), "{read:?}");
}

/// An endpoint whose first WRITE of more than 8 bytes (a directory copy's
/// body) fails at once but lands `late` afterwards, straight into memory,
/// as a WRITE still in flight when its queue pair failed would (A2 bounds
/// how late: the test keeps `late` below the landing margin).
struct LateBody {
    inner: SimEndpoint,
    fabric: SimFabric,
    late: Duration,
    armed: bool,
    failed: Vec<Completion>,
    landed: Option<mpsc::Receiver<()>>,
}

impl Endpoint for LateBody {
    fn node(&self) -> NodeId {
        self.inner.node()
    }
    fn claim_client(&self, id: nessie_protocol::ClientId) -> Option<nessie_protocol::ClientClaim> {
        self.inner.claim_client(id)
    }
    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        if nessie_protocol::registry::is_claim_request(wr.id) {
            // A client's claim of its id, before the story starts.
            return self.inner.post(wr);
        }
        if let (true, Op::Write { addr, data }) = (self.armed, &wr.op) {
            if data.len() > 8 {
                self.armed = false;
                let (f, at, bytes, late) = (self.fabric.clone(), *addr, data.clone(), self.late);
                let (tx, rx) = mpsc::channel();
                self.landed = Some(rx);
                thread::spawn(move || {
                    thread::sleep(late);
                    f.write_bytes(at.node, Region::Data, at.offset, &bytes)
                        .unwrap();
                    let _ = tx.send(());
                });
                self.failed.push(Completion {
                    id: wr.id,
                    result: Err(FabricError::Transport(TransportError::QueuePairFailed)),
                });
                return Ok(());
            }
        }
        self.inner.post(wr)
    }
    fn poll(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.failed);
        self.inner.poll(out)
    }
    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
        if self.failed.is_empty() {
            self.inner.wait(out, timeout)
        } else {
            self.poll(out)
        }
    }
    fn now(&self) -> Nanos {
        self.inner.now()
    }
}

/// Server 1's first update fails writing its copy's body, which lands
/// 150 ms later (the landing margin is 500 ms); its next update commits;
/// then the table is read back.
fn late_body_then_commit(faults: CellFaults) -> Arc<RegionMap> {
    let c = CellConfig {
        landing_margin: Duration::from_millis(500),
        ..cfg(faults)
    };
    let f = fabric(&c);
    initialised(&c, &f);
    let w = handle(&c, Some(1));
    let ep = LateBody {
        inner: f.open(NodeId(1)).unwrap(),
        fabric: f.clone(),
        late: Duration::from_millis(150),
        armed: true,
        failed: Vec::new(),
        landed: None,
    };
    let w2 = w.clone();
    let t = Instant::now();
    let mut s = Stepper::new(
        ep,
        move |io| async move { w2.update(&io, allocate(1)).await },
    );
    let r = s.finish();
    let landed = s
        .driver
        .endpoint()
        .landed
        .take()
        .expect("the body was held");
    assert!(r.is_err(), "the update whose body WRITE failed: {r:?}");
    let waited = t.elapsed();
    let second = update(
        &f,
        &w,
        1,
        Update::SetFailed {
            node: NodeId(2),
            failed: true,
        },
    );
    assert!(matches!(second, Ok(Applied::Done)), "{second:?}");
    landed
        .recv_timeout(Duration::from_secs(5))
        .expect("the late WRITE landed");
    println!("the failed update returned after {waited:?}");
    snapshot(&f, &handle(&c, None), 2).expect("a table")
}

#[test]
fn a_failed_copy_write_landing_late_cannot_corrupt_a_later_commit() {
    let m = late_body_then_commit(CellFaults::default());
    assert!(m.regions.is_empty(), "the failed allocation: {m:?}");
    assert!(m.failed.contains(&NodeId(2)), "the committed update: {m:?}");
}

#[test]
fn teeth_without_the_landing_wait_a_late_write_replaces_the_committed_table() {
    let m = late_body_then_commit(CellFaults {
        directory_skip_landing_wait: true,
        ..CellFaults::default()
    });
    assert!(
        !m.failed.contains(&NodeId(2)) && m.get(RegionId(1)).is_some(),
        "the late body of the failed update replaced the committed one: {m:?}"
    );
}

#[test]
fn a_commit_whose_completion_is_lost_or_failed_takes_effect_exactly_once() {
    let c = cfg(CellFaults::default());
    let f = fabric(&c);
    initialised(&c, &f);
    let w = handle(&c, Some(1));
    let look = handle(&c, None);
    for (fault, executes) in [
        (TransportFault::LoseCompletion, true),
        (TransportFault::FailAfterExecuting, true),
        (TransportFault::FailBeforeExecuting, false),
    ] {
        let before = snapshot(&f, &look, 1).unwrap().regions.len();
        let c0 = w.counters();
        f.inject(NodeId(0), Injection::next(fault, 1).only(OpKind::Cas))
            .unwrap();
        let r = update(&f, &w, 1, allocate(1));
        assert!(
            matches!(r, Ok(Applied::Allocated(Some(_)))),
            "{fault:?}: {r:?}"
        );
        let m = snapshot(&f, &look, 1).unwrap();
        assert_eq!(m.regions.len(), before + 1, "{fault:?}: exactly once");
        let c1 = w.counters();
        assert_eq!(c1.unknown_commits - c0.unknown_commits, 1, "{fault:?}");
        assert_eq!(c1.commits - c0.commits, 1, "{fault:?}");
        // A CAS that did execute is found in the table read back (two
        // reads); one that did not is tried again (a third).
        let reads = if executes { 2 } else { 3 };
        assert_eq!(c1.snapshots - c0.snapshots, reads, "{fault:?}");
    }
}

#[test]
fn a_directory_node_down_or_not_initialised_is_a_typed_error_at_once() {
    let c = cfg(CellFaults::default());
    let f = fabric(&c);
    let t = Instant::now();
    let r = snapshot(&f, &handle(&c, None), 1);
    assert!(matches!(r, Err(Error::Unreachable(NodeId(0), _))), "{r:?}");
    let u = update(&f, &handle(&c, Some(1)), 1, allocate(1));
    assert!(matches!(u, Err(Error::Unreachable(NodeId(0), _))), "{u:?}");
    initialised(&c, &f);
    assert!(snapshot(&f, &handle(&c, None), 1).is_ok());
    f.set_node_down(NodeId(0), true).unwrap();
    let r = snapshot(&f, &handle(&c, None), 1);
    assert!(matches!(r, Err(Error::Unreachable(NodeId(0), _))), "{r:?}");
    let u = update(&f, &handle(&c, Some(2)), 2, allocate(2));
    assert!(matches!(u, Err(Error::Unreachable(NodeId(0), _))), "{u:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // Only servers write; only the directory node initialises.
    let reader = handle(&c, None);
    assert!(matches!(
        update(&f, &reader, 1, allocate(1)),
        Err(Error::Config(_))
    ));
    let d1 = handle(&c, Some(1));
    let r = run(f.open(NodeId(1)).unwrap(), move |io| async move {
        d1.initialise(&io).await
    });
    assert!(matches!(r, Err(Error::Config(_))), "{r:?}");
}
