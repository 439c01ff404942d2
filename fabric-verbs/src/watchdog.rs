//! The deadline watchdog: one thread per process that moves a queue pair to
//! the error state when a caller's request on it passes its deadline,
//! whether or not the thread that owns the endpoint is polling.
//!
//! Without it, an endpoint enforced deadlines only inside its own `poll`:
//! a client thread descheduled past a request's deadline would fail the
//! queue pair late, and a mutation the NIC executed in between would be
//! reported as a plain success. With it, the queue pair leaves the ready
//! state at the deadline (plus this thread's own lateness, which it
//! measures: [`WatchdogStats`]), and an RC queue pair in the error state
//! produces no successful completion any more. So a success the endpoint
//! reports was acknowledged by the responder before the watchdog tripped,
//! and a request still outstanding then flushes with an error, its outcome
//! unknown.
//!
//! What this buys and what it does not: safety does not rest on it (the
//! protocol's incarnation tags give a CAS 127 expiration periods to land,
//! A2', `docs/deploy.md`), nor does the error transition recall what the
//! NIC already sent; it bounds how long an outcome stays unknown and how
//! late a success can be reported.
//!
//! How: each endpoint registers an [`EndpointWatch`], one [`QpWatch`] per
//! peer, and publishes there the earliest deadline of its caller's requests
//! outstanding on each queue pair (one atomic store, after its own posting
//! and polling), and the queue pair's handle while it is connected (under a
//! lock, taken only to connect, to release and to trip: the watchdog never
//! touches a queue pair being destroyed). The watchdog sleeps until the
//! earliest published deadline ([`crate::policy::watch_verdict`]); a
//! deadline published earlier than its wake-up unparks it. When it trips a
//! queue pair it marks the watch, and the endpoint, at its next `poll`, fails
//! the requests whose deadline had passed with the expired-deadline error
//! and re-dials as after any failed queue pair.
//!
//! The endpoint publishes after polling, so a trip can come just after it
//! took in a late request's completion and before it withdrew that
//! deadline: the queue pair then fails with nothing late on it, which costs
//! a re-dial, never a wrong outcome (and only when the endpoint itself was
//! late). A trip that cannot be carried out (the queue pair just released,
//! `ibv_modify_qp` refused) drops the deadline, so the watchdog never spins
//! on it; the endpoint's own check at its next poll remains.
//!
//! Unsignaled requests and the endpoint's probes are not watched: no success
//! of theirs is ever reported, and the endpoint gives a run of them that
//! nobody asked about one more landing deadline (see [`crate::endpoint`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rdma_sys::ibv_qp;

use crate::error::VerbsError;
use crate::policy::{watch_verdict, WatchVerdict, NO_DEADLINE};

/// The longest the watchdog sleeps (a deadline published earlier than its
/// wake-up unparks it sooner).
const IDLE_SLEEP: Duration = Duration::from_millis(100);

/// A queue pair's handle as the watchdog holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpHandle(pub *mut ibv_qp);

// SAFETY: a handle is only used by the watchdog while the owning endpoint
// keeps the queue pair alive (under `QpWatch::qp`'s lock), and the verbs
// calls it makes (`ibv_modify_qp`) are thread-safe.
unsafe impl Send for QpHandle {}

/// What the watchdog does to a queue pair whose deadline passed.
type TripFn = Box<dyn Fn(QpHandle) -> Result<(), VerbsError> + Send + Sync>;

/// One queue pair's watch: what its endpoint published.
pub struct QpWatch {
    /// The earliest deadline of the caller's requests outstanding on it, in
    /// nanoseconds since the watchdog's epoch ([`NO_DEADLINE`]: none).
    deadline: AtomicU64,
    /// The queue pair while it is connected.
    qp: Mutex<Option<QpHandle>>,
    /// When the watchdog tripped it ([`NO_DEADLINE`]: not since the
    /// endpoint last looked).
    tripped: AtomicU64,
}

/// An endpoint's watches, one per peer.
pub struct EndpointWatch {
    peers: Vec<QpWatch>,
    /// A trip the endpoint has not seen yet.
    tripped: AtomicBool,
    /// Test-only fault switch: when off, the watchdog ignores this endpoint.
    enabled: AtomicBool,
    dog: Arc<Inner>,
}

/// The watchdog's counts since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchdogStats {
    /// Queue pairs it moved to the error state.
    pub trips: u64,
    /// The longest it tripped one after its deadline (its own lateness:
    /// scheduling, not the endpoint's).
    pub max_late: Duration,
    /// The scheduling its thread got.
    pub scheduling: Scheduling,
}

/// The scheduling the watchdog's thread runs under. It asks for a
/// real-time priority (`SCHED_FIFO` 1: it runs before every ordinary
/// thread the moment its wake-up comes, and sleeps otherwise), and failing
/// that (no `CAP_SYS_NICE`, no `RLIMIT_RTPRIO`: systemd's
/// `AmbientCapabilities=CAP_SYS_NICE` or `LimitRTPRIO=1` grant it) a nice
/// value of -10; a busy core then delays its trips less. Its lateness is
/// measured either way ([`WatchdogStats::max_late`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheduling {
    /// Not started yet.
    #[default]
    Unknown,
    /// Real-time, `SCHED_FIFO` priority 1.
    RealTime,
    /// Ordinary, at nice -10.
    RaisedNice,
    /// Ordinary, at the process's nice value: neither was permitted.
    Normal,
}

impl Scheduling {
    fn code(self) -> u8 {
        self as u8
    }

    fn of(code: u8) -> Scheduling {
        match code {
            1 => Scheduling::RealTime,
            2 => Scheduling::RaisedNice,
            3 => Scheduling::Normal,
            _ => Scheduling::Unknown,
        }
    }
}

impl std::fmt::Display for Scheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scheduling::Unknown => "scheduling not known yet",
            Scheduling::RealTime => "real-time priority",
            Scheduling::RaisedNice => "nice -10 (no real-time priority permitted)",
            Scheduling::Normal => {
                "normal priority (neither real-time nor a raised nice permitted: grant CAP_SYS_NICE)"
            }
        })
    }
}

/// Raises the calling thread's scheduling as far as it is permitted
/// ([`Scheduling`]).
fn raise_priority() -> Scheduling {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sched_setscheduler reads one sched_param; pid 0 is the
    // calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        return Scheduling::RealTime;
    }
    // SAFETY: gettid takes no arguments; setpriority on a thread id sets
    // that thread's nice value (Linux).
    let ok = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, -10) == 0
    };
    if ok {
        Scheduling::RaisedNice
    } else {
        Scheduling::Normal
    }
}

struct Inner {
    epoch: Instant,
    watches: Mutex<Vec<Weak<EndpointWatch>>>,
    /// When the watchdog wakes next ([`NO_DEADLINE`]: idle); a deadline
    /// published before it unparks the thread.
    wakes_at: AtomicU64,
    thread: OnceLock<Thread>,
    trips: AtomicU64,
    max_late_ns: AtomicU64,
    /// The scheduling its thread got ([`Scheduling::code`]).
    scheduling: std::sync::atomic::AtomicU8,
    trip: TripFn,
}

/// The deadline watchdog (the process's is [`Watchdog::global`]).
#[derive(Clone)]
pub struct Watchdog {
    inner: Arc<Inner>,
}

impl Watchdog {
    /// The process's watchdog, started on first use; it trips queue pairs
    /// with `ibv_modify_qp(IBV_QPS_ERR)`.
    pub fn global() -> Result<Watchdog, VerbsError> {
        static GLOBAL: OnceLock<Watchdog> = OnceLock::new();
        if let Some(w) = GLOBAL.get() {
            return Ok(w.clone());
        }
        // SAFETY: the handle's queue pair is live while the watch's lock is
        // held (see `QpWatch::qp`), and the trip runs under it.
        let dog = Watchdog::start(Box::new(|qp| unsafe { crate::ffi::cm::fail_raw_qp(qp.0) }))?;
        Ok(GLOBAL.get_or_init(|| dog).clone())
    }

    /// Starts a watchdog thread that trips queue pairs with `trip`.
    pub fn start(
        trip: Box<dyn Fn(QpHandle) -> Result<(), VerbsError> + Send + Sync>,
    ) -> Result<Watchdog, VerbsError> {
        let inner = Arc::new(Inner {
            epoch: Instant::now(),
            watches: Mutex::new(Vec::new()),
            wakes_at: AtomicU64::new(NO_DEADLINE),
            thread: OnceLock::new(),
            trips: AtomicU64::new(0),
            max_late_ns: AtomicU64::new(0),
            scheduling: std::sync::atomic::AtomicU8::new(Scheduling::Unknown.code()),
            trip,
        });
        let weak = Arc::downgrade(&inner);
        let handle = std::thread::Builder::new()
            .name("nessie-watchdog".into())
            .spawn(move || run(weak))
            .map_err(|e| VerbsError::Verbs {
                call: "spawning the deadline watchdog",
                source: e,
            })?;
        let _ = inner.thread.set(handle.thread().clone());
        Ok(Watchdog { inner })
    }

    /// Registers an endpoint with `peers` queue pairs.
    pub fn watch(&self, peers: usize) -> Arc<EndpointWatch> {
        let w = Arc::new(EndpointWatch {
            peers: (0..peers)
                .map(|_| QpWatch {
                    deadline: AtomicU64::new(NO_DEADLINE),
                    qp: Mutex::new(None),
                    tripped: AtomicU64::new(NO_DEADLINE),
                })
                .collect(),
            tripped: AtomicBool::new(false),
            enabled: AtomicBool::new(true),
            dog: self.inner.clone(),
        });
        let mut list = self.inner.watches.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&w));
        w
    }

    /// Its counts so far.
    pub fn stats(&self) -> WatchdogStats {
        WatchdogStats {
            trips: self.inner.trips.load(Ordering::Relaxed),
            max_late: Duration::from_nanos(self.inner.max_late_ns.load(Ordering::Relaxed)),
            scheduling: Scheduling::of(self.inner.scheduling.load(Ordering::Relaxed)),
        }
    }
}

impl Inner {
    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Trips every queue pair whose deadline passed; returns the earliest
    /// deadline still ahead ([`NO_DEADLINE`]: none).
    fn sweep(&self) -> u64 {
        let watches: Vec<Arc<EndpointWatch>> = {
            let mut list = self.watches.lock().unwrap_or_else(|e| e.into_inner());
            list.retain(|w| w.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        let mut next = NO_DEADLINE;
        for ew in &watches {
            if !ew.enabled.load(Ordering::Relaxed) {
                continue;
            }
            for w in &ew.peers {
                let now = self.nanos(Instant::now());
                match watch_verdict(w.deadline.load(Ordering::SeqCst), now) {
                    WatchVerdict::Idle => {}
                    WatchVerdict::Wait { until } => next = next.min(until),
                    WatchVerdict::Trip { .. } => self.trip(ew, w),
                }
            }
        }
        next
    }

    /// Moves `w`'s queue pair to the error state, if its deadline is still
    /// due and the queue pair still there.
    fn trip(&self, ew: &EndpointWatch, w: &QpWatch) {
        let qp = w.qp.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.nanos(Instant::now());
        // Read again under the lock: the endpoint may have taken its
        // requests in, or released the queue pair, meanwhile.
        let WatchVerdict::Trip { late_by } = watch_verdict(w.deadline.load(Ordering::SeqCst), now)
        else {
            return;
        };
        // Whatever happens next, this deadline is dealt with: the watchdog
        // never spins on one it cannot act on (the endpoint's own check at
        // its next poll remains).
        w.deadline.store(NO_DEADLINE, Ordering::SeqCst);
        let Some(handle) = *qp else { return };
        match (self.trip)(handle) {
            Ok(()) => {
                w.tripped.store(now, Ordering::SeqCst);
                ew.tripped.store(true, Ordering::SeqCst);
                self.trips.fetch_add(1, Ordering::Relaxed);
                self.max_late_ns.fetch_max(late_by, Ordering::Relaxed);
                tracing::warn!(
                    late_by_us = late_by / 1000,
                    "watchdog: a request passed its deadline; queue pair moved to the error state"
                );
            }
            Err(e) => tracing::warn!(error = %e, "watchdog: cannot fail a queue pair"),
        }
    }
}

/// The watchdog thread: sweep, then sleep until the earliest deadline.
fn run(dog: Weak<Inner>) {
    let got = raise_priority();
    if got == Scheduling::Normal {
        tracing::warn!("deadline watchdog: {got}");
    }
    if let Some(inner) = dog.upgrade() {
        inner.scheduling.store(got.code(), Ordering::Relaxed);
    }
    loop {
        let Some(inner) = dog.upgrade() else { return };
        let next = inner.sweep();
        // Say when we wake before looking once more, so that a deadline
        // published meanwhile is either seen by this look or unparks us.
        inner.wakes_at.store(next, Ordering::SeqCst);
        let next = next.min(inner.sweep());
        inner.wakes_at.store(next, Ordering::SeqCst);
        let now = inner.nanos(Instant::now());
        // At most IDLE_SLEEP: a watchdog nobody holds any more sees it
        // and ends.
        let sleep = Duration::from_nanos(next.saturating_sub(now)).min(IDLE_SLEEP);
        drop(inner);
        if !sleep.is_zero() {
            std::thread::park_timeout(sleep);
        }
    }
}

impl EndpointWatch {
    /// Publishes the earliest deadline of the caller's requests outstanding
    /// on the queue pair to `peer` (`None`: none).
    pub fn publish(&self, peer: usize, deadline: Option<Instant>) {
        let Some(w) = self.peers.get(peer) else {
            return;
        };
        let d = deadline.map_or(NO_DEADLINE, |d| self.dog.nanos(d));
        if w.deadline.swap(d, Ordering::SeqCst) == d {
            return;
        }
        if d < self.dog.wakes_at.load(Ordering::SeqCst) {
            if let Some(t) = self.dog.thread.get() {
                t.unpark();
            }
        }
    }

    /// Sets (or, before it is destroyed, clears) the queue pair to `peer`.
    pub fn set_qp(&self, peer: usize, qp: Option<QpHandle>) {
        if let Some(w) = self.peers.get(peer) {
            *w.qp.lock().unwrap_or_else(|e| e.into_inner()) = qp;
            if qp.is_none() {
                w.deadline.store(NO_DEADLINE, Ordering::SeqCst);
            }
        }
    }

    /// The peers whose queue pair the watchdog tripped since the last call,
    /// each with when it did.
    pub fn take_trips(&self) -> Vec<(usize, Instant)> {
        if !self.tripped.swap(false, Ordering::SeqCst) {
            return Vec::new();
        }
        self.peers
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let at = w.tripped.swap(NO_DEADLINE, Ordering::SeqCst);
                (at != NO_DEADLINE).then(|| (i, self.dog.epoch + Duration::from_nanos(at)))
            })
            .collect()
    }

    /// Test-only fault switch: when `on` is false the watchdog leaves this
    /// endpoint alone (deadlines enforced only when its owner polls, as
    /// before the watchdog), for showing that a test catches it.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A watchdog whose trips only count (no queue pair is touched).
    fn counting() -> (Watchdog, Arc<AtomicUsize>) {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let dog = Watchdog::start(Box::new(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))
        .expect("watchdog thread");
        (dog, count)
    }

    fn fake_qp() -> Option<QpHandle> {
        Some(QpHandle(std::ptr::NonNull::<ibv_qp>::dangling().as_ptr()))
    }

    /// Waits up to `within` for `done`.
    fn eventually(within: Duration, done: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < within {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        done()
    }

    #[test]
    fn a_request_past_its_deadline_fails_its_queue_pair_with_nobody_polling() {
        let (dog, count) = counting();
        let ep = dog.watch(3);
        ep.set_qp(1, fake_qp());
        ep.set_qp(2, fake_qp());
        let deadline = Instant::now() + Duration::from_millis(30);
        ep.publish(1, Some(deadline));
        // Nobody polls: the watchdog trips peer 1 by itself, at or after the
        // deadline, and nothing else.
        assert!(eventually(Duration::from_secs(10), || count
            .load(Ordering::SeqCst)
            == 1));
        let trips = ep.take_trips();
        assert_eq!(trips.len(), 1);
        assert_eq!(trips[0].0, 1);
        assert!(trips[0].1 >= deadline, "never before the deadline");
        assert!(ep.take_trips().is_empty(), "a trip is reported once");
        let stats = dog.stats();
        assert_eq!(stats.trips, 1);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(count.load(Ordering::SeqCst), 1, "tripped once");
    }

    #[test]
    fn a_disabled_watchdog_is_caught() {
        // The test-only switch: the same story with the watchdog turned off
        // for the endpoint trips nothing, so the test above would fail.
        let (dog, count) = counting();
        let ep = dog.watch(1);
        ep.set_enabled(false);
        ep.set_qp(0, fake_qp());
        ep.publish(0, Some(Instant::now()));
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(count.load(Ordering::SeqCst), 0);
        assert!(ep.take_trips().is_empty());
        ep.set_enabled(true);
        assert!(eventually(Duration::from_secs(10), || count
            .load(Ordering::SeqCst)
            == 1));
    }

    #[test]
    fn withdrawn_deadlines_and_released_queue_pairs_are_never_tripped() {
        let (dog, count) = counting();
        let ep = dog.watch(2);
        // A deadline withdrawn (the request completed) before it passes.
        ep.set_qp(0, fake_qp());
        ep.publish(0, Some(Instant::now() + Duration::from_millis(500)));
        ep.publish(0, None);
        // A queue pair released (about to be destroyed) with its deadline
        // already past: the watchdog must not touch it.
        ep.set_qp(1, fake_qp());
        ep.set_qp(1, None);
        ep.publish(1, Some(Instant::now()));
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(count.load(Ordering::SeqCst), 0);
        assert!(ep.take_trips().is_empty());
    }

    #[test]
    fn an_earlier_deadline_wakes_a_sleeping_watchdog() {
        let (dog, count) = counting();
        let ep = dog.watch(2);
        ep.set_qp(0, fake_qp());
        ep.set_qp(1, fake_qp());
        // The watchdog sleeps towards a far deadline...
        ep.publish(0, Some(Instant::now() + Duration::from_secs(3600)));
        std::thread::sleep(Duration::from_millis(20));
        // ...and a near one published later is still tripped, long before.
        ep.publish(1, Some(Instant::now() + Duration::from_millis(10)));
        assert!(eventually(Duration::from_secs(10), || count
            .load(Ordering::SeqCst)
            == 1));
        assert_eq!(ep.take_trips().iter().map(|t| t.0).collect::<Vec<_>>(), [1]);
    }
}
