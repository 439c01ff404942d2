//! The periodic clock check: each hosted node measures its peers' clocks
//! again, every `[tuning] clock_check_interval_ms`, not only when it first
//! connects.
//!
//! The check at connection set-up ([`crate::connect`]) measures a peer's
//! clock once, with an uncertainty of half the handshake's round trip,
//! which is large during a start-up storm (every endpoint dialling every
//! node at once), and never again: a peer whose clock was anchored wrong,
//! or that restarted after a clock step, would go unnoticed by the
//! endpoints already connected to it. Here one thread per hosted node
//! dials each peer in turn with a short probe connection (the same
//! handshake: our clock out in the [`crate::wire::Hello`], the peer's back
//! in the [`crate::wire::Welcome`]), closes it, and records the offset and
//! its uncertainty ([`ClockLedger`], pure). An offset proven beyond
//! `clock_skew_ms` (beyond it even at the edge of the uncertainty) is
//! logged as an error and counted: the protocol's timing assumption on
//! clocks is broken, which only the operator can mend (the protocol's
//! safety does not rest on it since the A1/A2' rework; its progress and
//! memory reuse do, see `docs/deploy.md`). `nessie node run` prints the
//! ledger.
//!
//! The probes cost each node one connection set-up per peer per interval
//! (at 100 nodes and the default 30 s, about three a second at each
//! listener), on the connection manager's path, not the data path.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nessie_protocol::NodeId;

use crate::connect::dial;
use crate::error::VerbsError;
use crate::ffi::cm::EventChannel;
use crate::ffi::cq::Cq;
use crate::node::NodeShared;
use crate::wire::exceeds_skew;

/// How long one probe connection may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// One measurement of a peer's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSample {
    /// The peer's clock minus ours, in ns.
    pub offset_ns: i64,
    /// Give or take this much (half the handshake's round trip), in ns.
    pub uncertainty_ns: u64,
}

impl ClockSample {
    /// The least the clocks differ by, given the uncertainty.
    pub fn proven_ns(&self) -> u64 {
        self.offset_ns
            .unsigned_abs()
            .saturating_sub(self.uncertainty_ns)
    }
}

/// What the checks found of one peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerClock {
    /// Probes answered.
    pub checks: u64,
    /// Probes that got no answer (the peer down or busy: not a clock fault).
    pub unanswered: u64,
    /// Answers whose offset is proven beyond the skew.
    pub beyond_skew: u64,
    /// The latest answer.
    pub last: Option<ClockSample>,
    /// The answer with the largest proven offset.
    pub worst: Option<ClockSample>,
}

/// What one probe's answer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockVerdict {
    /// Within the skew, as far as the uncertainty lets us tell.
    Within,
    /// Proven beyond the skew.
    BeyondSkew,
    /// No answer.
    Unanswered,
}

/// The checks' record, one entry per node of the cluster (the node's own
/// stays empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClockLedger {
    /// Indexed by node id.
    pub peers: Vec<PeerClock>,
}

impl ClockLedger {
    /// A ledger for `nodes` nodes.
    pub fn new(nodes: u16) -> ClockLedger {
        ClockLedger {
            peers: vec![PeerClock::default(); usize::from(nodes)],
        }
    }

    /// Records one probe of `peer` (`None`: unanswered) against `skew_ns`.
    pub fn record(
        &mut self,
        peer: NodeId,
        sample: Option<ClockSample>,
        skew_ns: u64,
    ) -> ClockVerdict {
        let Some(p) = self.peers.get_mut(usize::from(peer.0)) else {
            return ClockVerdict::Unanswered;
        };
        let Some(s) = sample else {
            p.unanswered += 1;
            return ClockVerdict::Unanswered;
        };
        p.checks += 1;
        p.last = Some(s);
        if p.worst.is_none_or(|w| s.proven_ns() > w.proven_ns()) {
            p.worst = Some(s);
        }
        if exceeds_skew(s.offset_ns, s.uncertainty_ns, skew_ns) {
            p.beyond_skew += 1;
            ClockVerdict::BeyondSkew
        } else {
            ClockVerdict::Within
        }
    }

    /// One line per peer checked.
    pub fn lines(&self) -> Vec<String> {
        let us = |ns: u64| ns as f64 / 1000.0;
        self.peers
            .iter()
            .enumerate()
            .filter(|(_, p)| p.checks + p.unanswered > 0)
            .map(|(i, p)| match p.last {
                Some(s) => format!(
                    "node{i}: offset {:+.1} us +- {:.1} us (latest of {} checks, {} unanswered); largest proven offset {:.1} us; {} beyond the skew",
                    s.offset_ns as f64 / 1000.0,
                    us(s.uncertainty_ns),
                    p.checks,
                    p.unanswered,
                    us(p.worst.map_or(0, |w| w.proven_ns())),
                    p.beyond_skew
                ),
                None => format!("node{i}: no answer ({} probes)", p.unanswered),
            })
            .collect()
    }
}

/// A hosted node's clock-check thread (stopped and joined when dropped).
pub struct ClockChecker {
    ledger: Arc<Mutex<ClockLedger>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ClockChecker {
    /// Starts checking the peers of `node` every `interval`.
    pub fn start(node: Arc<NodeShared>, interval: Duration) -> Result<ClockChecker, VerbsError> {
        let ledger = Arc::new(Mutex::new(ClockLedger::new(node.cluster.topology().nodes)));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (ledger.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("nessie-clock-{}", node.id.0))
            .spawn(move || check_loop(&node, interval, &l, &s))
            .map_err(|e| VerbsError::Verbs {
                call: "spawning the clock-check thread",
                source: e,
            })?;
        Ok(ClockChecker {
            ledger,
            stop,
            thread: Some(thread),
        })
    }

    /// What the checks found so far.
    pub fn ledger(&self) -> ClockLedger {
        self.ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for ClockChecker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Sleeps `d` unless stopped first; whether it was stopped.
fn nap(d: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Acquire) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::park_timeout(left.min(Duration::from_millis(100)));
    }
    true
}

fn check_loop(
    node: &Arc<NodeShared>,
    interval: Duration,
    ledger: &Mutex<ClockLedger>,
    stop: &AtomicBool,
) {
    while !nap(interval, stop) {
        probe_round(node, PROBE_TIMEOUT, ledger, stop);
    }
}

/// Probes every peer of `node` once, in turn, recording into `ledger`
/// (stops early when `stop` is set).
fn probe_round(
    node: &NodeShared,
    timeout: Duration,
    ledger: &Mutex<ClockLedger>,
    stop: &AtomicBool,
) {
    let skew = node.timing.clock_skew.as_nanos() as u64;
    let nodes = node.cluster.topology().nodes;
    for target in (0..nodes).map(NodeId).filter(|&t| t != node.id) {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let sample = match probe(node, target, timeout) {
            Ok((offset_ns, uncertainty_ns)) => Some(ClockSample {
                offset_ns,
                uncertainty_ns,
            }),
            Err(e) => {
                tracing::debug!(node = node.id.0, %target, error = %e, "clock probe unanswered");
                None
            }
        };
        let verdict = ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(target, sample, skew);
        if let (ClockVerdict::BeyondSkew, Some(s)) = (verdict, sample) {
            tracing::error!(
                node = node.id.0,
                %target,
                offset_us = s.offset_ns / 1000,
                uncertainty_us = s.uncertainty_ns / 1000,
                skew_us = skew / 1000,
                "a peer's clock is off by more than clock_skew_ms: the cluster's clock assumption is broken (fix the clocks; see docs/deploy.md)"
            );
        }
    }
}

/// Probes every peer of `node` once now, each within `timeout` (`nessie
/// node info`).
pub fn check_now(node: &NodeShared, timeout: Duration) -> ClockLedger {
    let ledger = Mutex::new(ClockLedger::new(node.cluster.topology().nodes));
    probe_round(node, timeout, &ledger, &AtomicBool::new(false));
    ledger.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// One probe connection to `target`: the clock offset and its uncertainty.
fn probe(node: &NodeShared, target: NodeId, timeout: Duration) -> Result<(i64, u64), VerbsError> {
    let channel = EventChannel::new()?;
    let cq = Cq::new(&node.ctx, 4)?;
    // A probe: its clock measured and recorded here, never refused (the
    // connection is closed at once).
    let dialed = dial(&node.dial_to(target, &channel, &cq, 1, timeout, true)?)?;
    Ok(dialed.clock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(offset_ns: i64, uncertainty_ns: u64) -> Option<ClockSample> {
        Some(ClockSample {
            offset_ns,
            uncertainty_ns,
        })
    }

    #[test]
    fn the_ledger_keeps_the_latest_the_worst_and_what_broke_the_skew() {
        let mut l = ClockLedger::new(3);
        let skew = 1_000_000; // 1 ms
                              // 0.3 ms off, +-0.1 ms: within.
        assert_eq!(
            l.record(NodeId(1), sample(300_000, 100_000), skew),
            ClockVerdict::Within
        );
        // 1.5 ms off but +-0.6 ms: not proven beyond.
        assert_eq!(
            l.record(NodeId(1), sample(-1_500_000, 600_000), skew),
            ClockVerdict::Within
        );
        // 1.5 ms off, +-0.1 ms: proven beyond (a clock stepped after start-up).
        assert_eq!(
            l.record(NodeId(1), sample(1_500_000, 100_000), skew),
            ClockVerdict::BeyondSkew
        );
        assert_eq!(l.record(NodeId(2), None, skew), ClockVerdict::Unanswered);
        let p = l.peers[1];
        assert_eq!((p.checks, p.unanswered, p.beyond_skew), (3, 0, 1));
        assert_eq!(p.last, sample(1_500_000, 100_000));
        assert_eq!(p.worst, sample(1_500_000, 100_000));
        assert_eq!(p.worst.unwrap().proven_ns(), 1_400_000);
        assert_eq!(l.peers[2].unanswered, 1);
        let lines = l.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with(
                "node1: offset +1500.0 us +- 100.0 us (latest of 3 checks, 0 unanswered)"
            ),
            "{lines:?}"
        );
        assert!(lines[0].ends_with("1 beyond the skew"), "{lines:?}");
        assert_eq!(lines[1], "node2: no answer (1 probes)");
        // An unknown node is not recorded.
        assert_eq!(
            l.record(NodeId(9), sample(0, 0), skew),
            ClockVerdict::Unanswered
        );
    }
}
