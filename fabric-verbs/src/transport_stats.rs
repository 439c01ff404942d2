//! What the process's endpoints met on the wire, counted for the
//! operator (issue 40, item 5): queue pairs failed (by the endpoint's own
//! deadline check, a completion error or the watchdog), dials that failed,
//! and re-dials that brought a peer back. Process-wide, like the
//! `watchdog` (one per process): `nessie node` publishes a
//! [`snapshot`] on its metrics endpoint and in its `--report` JSON.
//!
//! Counting is a relaxed atomic increment on paths that are already slow
//! (a queue pair failing, a connection being made); the fast path of a
//! request counts nothing here.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

static QP_FAILURES: AtomicU64 = AtomicU64::new(0);
static DIAL_FAILURES: AtomicU64 = AtomicU64::new(0);
static REDIALS: AtomicU64 = AtomicU64::new(0);

/// The process's transport counters since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportStats {
    /// Queue pairs an endpoint moved to the error state (a request past its
    /// deadline, a completion error, or one the watchdog failed first).
    pub qp_failures: u64,
    /// Dials of a peer that failed (it stays down until a re-dial works).
    pub dial_failures: u64,
    /// Re-dials that brought a peer back after failed dials.
    pub redials: u64,
}

impl TransportStats {
    /// The growth from `before` to `self`.
    pub fn since(&self, before: &TransportStats) -> TransportStats {
        TransportStats {
            qp_failures: self.qp_failures.saturating_sub(before.qp_failures),
            dial_failures: self.dial_failures.saturating_sub(before.dial_failures),
            redials: self.redials.saturating_sub(before.redials),
        }
    }
}

/// The counters now.
pub fn snapshot() -> TransportStats {
    TransportStats {
        qp_failures: QP_FAILURES.load(Ordering::Relaxed),
        dial_failures: DIAL_FAILURES.load(Ordering::Relaxed),
        redials: REDIALS.load(Ordering::Relaxed),
    }
}

/// A queue pair failed.
pub(crate) fn qp_failed() {
    QP_FAILURES.fetch_add(1, Ordering::Relaxed);
}

/// A dial failed.
pub(crate) fn dial_failed() {
    DIAL_FAILURES.fetch_add(1, Ordering::Relaxed);
}

/// A re-dial brought a peer back.
pub(crate) fn redialled() {
    REDIALS.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_counts_once_and_growth_is_measured_from_a_snapshot() {
        let before = snapshot();
        qp_failed();
        dial_failed();
        dial_failed();
        redialled();
        // Other tests of this process may count too: at least ours.
        let grown = snapshot().since(&before);
        assert!(grown.qp_failures >= 1 && grown.dial_failures >= 2 && grown.redials >= 1);
        assert_eq!(before.since(&snapshot()), TransportStats::default());
    }
}
