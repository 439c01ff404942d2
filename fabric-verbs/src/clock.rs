//! The node clock the protocol reads through `Endpoint::now`.
//!
//! The protocol compares timestamps written by one node (deadlines, recycle
//! expiry) with another node's clock, so all nodes need a shared epoch:
//! `now()` is the wall clock (`CLOCK_REALTIME`, kept in step across the
//! cluster by NTP or PTP) sampled once at start-up, advanced by
//! `CLOCK_MONOTONIC`, so it never jumps backwards within a process. The
//! protocol assumes the nodes' clocks differ by at most `clock_skew` of the
//! cluster file's `[store]` (see docs/protocol.md, timing assumptions).

use nessie_protocol::Nanos;

fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The time `mono_now` on a clock anchored at (`real0`, `mono0`).
pub fn anchored(real0: u64, mono0: u64, mono_now: u64) -> Nanos {
    Nanos(real0.saturating_add(mono_now.saturating_sub(mono0)))
}

/// A monotonic clock on the wall clock's epoch.
#[derive(Clone, Copy, Debug)]
pub struct NodeClock {
    real0: u64,
    mono0: u64,
}

impl NodeClock {
    /// Anchors a clock now.
    pub fn start() -> NodeClock {
        NodeClock {
            mono0: read(libc::CLOCK_MONOTONIC),
            real0: read(libc::CLOCK_REALTIME),
        }
    }

    /// The current time.
    pub fn now(&self) -> Nanos {
        anchored(self.real0, self.mono0, read(libc::CLOCK_MONOTONIC))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchored_time_advances_with_the_monotonic_clock() {
        assert_eq!(anchored(1_000, 50, 50), Nanos(1_000));
        assert_eq!(anchored(1_000, 50, 80), Nanos(1_030));
        assert_eq!(
            anchored(1_000, 50, 10),
            Nanos(1_000),
            "never before the anchor"
        );
        assert_eq!(anchored(u64::MAX, 0, 5), Nanos(u64::MAX));
    }

    #[test]
    fn the_clock_is_near_the_wall_clock_and_monotonic() {
        let c = NodeClock::start();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(wall.abs_diff(a.0) < 5_000_000_000);
    }
}
