//! Time as the protocol sees it: plain nanosecond timestamps passed in by drivers.
//!
//! State machines never read a clock. Drivers hand them the current time of the
//! node they run on; the simulated fabric can skew each node's clock to exercise
//! the clock-skew allowance of the expiration rules.

use std::fmt;
use std::time::Duration;

/// A point in time, in nanoseconds since an arbitrary epoch shared (up to the
/// configured clock skew) by all nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Time zero.
    pub const ZERO: Nanos = Nanos(0);

    /// This time plus `d`, saturating.
    pub fn plus(self, d: Duration) -> Nanos {
        Nanos(self.0.saturating_add(duration_nanos(d)))
    }

    /// This time minus `d`, saturating at zero.
    pub fn minus(self, d: Duration) -> Nanos {
        Nanos(self.0.saturating_sub(duration_nanos(d)))
    }

    /// The duration from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Nanos) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}ns", self.0)
    }
}

/// How long a driver may block waiting for completions at `now`: until
/// `poll_at`, the instant its machine wants to be polled again if nothing
/// arrives (`Machine::poll_timeout`), and never longer than `longest` (the
/// most a driver blocks without reading its clock: an endpoint's clock may
/// move without the driver, as a test's manual clock does).
pub fn wait_for(now: Nanos, poll_at: Option<Nanos>, longest: Duration) -> Duration {
    poll_at.map_or(longest, |t| t.since(now).min(longest))
}

/// A duration in nanoseconds, saturating at `u64::MAX`.
pub fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
