//! Retries of the baselines' client-driven GETs (NessieHY, Pilaf), as
//! Nessie's `Client` retries: exponential back-off with jitter between
//! attempts, until the operation timeout has passed since the first one.

use std::time::Duration;

use nessie_protocol::{ClientId, Endpoint, Error, Nanos, RetryPolicy};

use crate::io::Io;

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
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let n = base.as_nanos() as u64;
        Duration::from_nanos(n / 2 + self.0 % (n / 2 + 1))
    }
}

/// One operation's retry budget: when it started and its next back-off.
#[derive(Clone, Debug)]
pub struct RetryBudget {
    start: Nanos,
    backoff: Duration,
}

impl RetryBudget {
    /// A budget starting at `start` under `policy`.
    pub fn new(start: Nanos, policy: &RetryPolicy) -> RetryBudget {
        RetryBudget {
            start,
            backoff: policy.initial_backoff,
        }
    }

    /// When the operation started.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// Backs off before the next attempt, or fails with [`Error::Timeout`]
    /// once `policy.op_timeout` has passed since the start.
    pub fn pause<E: Endpoint>(
        &mut self,
        io: &mut Io<E>,
        policy: &RetryPolicy,
        jitter: &mut Jitter,
    ) -> Result<(), Error> {
        if io.endpoint().now().since(self.start) >= policy.op_timeout {
            return Err(Error::Timeout);
        }
        io.backoff(jitter.around(self.backoff));
        self.backoff = (self.backoff * 2).min(policy.max_backoff);
        Ok(())
    }
}
