//! Retries of the baselines' client-driven GETs (NessieHY, Pilaf), as
//! Nessie's `Client` retries: exponential back-off with jitter between
//! attempts, until the operation timeout has passed since the first one.
//! Sans-IO: the budget says how long to back off at a given time, and each
//! driver waits its own way (the threaded one sleeps, a machine awaits an
//! [`Effect::Backoff`](nessie_exec::Effect::Backoff), the simulator
//! schedules the next attempt).

use std::time::Duration;

use nessie_protocol::{ClientId, Error, Nanos, RetryPolicy};

/// A client's source of back-off jitter (xorshift64).
#[derive(Clone, Debug)]
pub struct Jitter(u64);

impl Jitter {
    /// The jitter source of client `id` (distinct clients, distinct streams).
    pub fn new(id: ClientId) -> Jitter {
        Jitter(0x9e37_79b9_7f4a_7c15 ^ (u64::from(id.node.0) << 20) ^ u64::from(id.index) | 1)
    }

    /// A duration in `[base/2, base]`.
    pub fn around(&mut self, base: Duration) -> Duration {
        nessie_protocol::rng::jittered(&mut self.0, base)
    }
}

/// One operation's retry budget: when it started, its next back-off, and
/// the client's jitter source.
#[derive(Clone, Debug)]
pub struct RetryBudget {
    start: Nanos,
    backoff: Duration,
    policy: RetryPolicy,
    jitter: Jitter,
}

impl RetryBudget {
    /// A budget starting at `start` under `policy`, jittered by `jitter`.
    pub fn new(start: Nanos, policy: &RetryPolicy, jitter: Jitter) -> RetryBudget {
        RetryBudget {
            start,
            backoff: policy.initial_backoff,
            policy: *policy,
            jitter,
        }
    }

    /// When the operation started.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// The back-off before the next attempt at time `now`, or
    /// [`Error::Timeout`] once the policy's operation timeout has passed
    /// since the start.
    pub fn next_backoff(&mut self, now: Nanos) -> Result<Duration, Error> {
        if now.since(self.start) >= self.policy.op_timeout {
            return Err(Error::Timeout);
        }
        let d = self.jitter.around(self.backoff);
        self.backoff = (self.backoff * 2).min(self.policy.max_backoff);
        Ok(d)
    }

    /// [`RetryBudget::next_backoff`], cut so that the next attempt comes no
    /// later than `due` when the attempt waits for an instant (the back-off
    /// still doubles).
    pub fn next_backoff_by(&mut self, now: Nanos, due: Option<Nanos>) -> Result<Duration, Error> {
        let d = self.next_backoff(now)?;
        Ok(match due {
            Some(due) => d.min(Duration::from_nanos(due.0.saturating_sub(now.0))),
            None => d,
        })
    }

    /// The jitter source, for the client's next operation.
    pub fn into_jitter(self) -> Jitter {
        self.jitter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_protocol::NodeId;

    fn budget() -> RetryBudget {
        let policy = RetryPolicy {
            initial_backoff: Duration::from_micros(100),
            max_backoff: Duration::from_millis(1),
            op_timeout: Duration::from_millis(5),
            max_attempts: 0,
        };
        let id = ClientId {
            node: NodeId(0),
            index: 0,
        };
        RetryBudget::new(Nanos(0), &policy, Jitter::new(id))
    }

    /// A retry asked for by an instant comes no later than it, however far
    /// the back-off has doubled (RCuckoo's waiter, whose back-off had
    /// overshot a stranded lock's takeover: swarm case 12,983); the
    /// operation timeout still ends the retries.
    #[test]
    fn a_retry_due_at_an_instant_is_not_backed_off_past_it() {
        let mut b = budget();
        for _ in 0..5 {
            b.next_backoff(Nanos(0)).unwrap();
        }
        let plain = b.clone().next_backoff(Nanos(1_000)).unwrap();
        assert!(plain >= Duration::from_micros(500), "{plain:?}");
        let cut = b
            .next_backoff_by(Nanos(1_000), Some(Nanos(21_000)))
            .unwrap();
        assert_eq!(cut, Duration::from_micros(20));
        // Due already: at once.
        let now = b
            .next_backoff_by(Nanos(30_000), Some(Nanos(21_000)))
            .unwrap();
        assert_eq!(now, Duration::ZERO);
        assert!(matches!(
            b.next_backoff_by(Nanos(5_000_000), Some(Nanos(6_000_000))),
            Err(Error::Timeout)
        ));
    }
}
