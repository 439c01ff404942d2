//! A time limit for a test: [`time_limit`] returns a guard; if the guard is
//! not dropped within the limit, the process prints which test (and seed)
//! ran too long and exits with status 101, so that a hang fails in minutes
//! with its name instead of at CI's limit with none.
//!
//! `cargo test` (libtest) has no stable per-test timeout, hence this. It
//! lives in `nessie-model`, the verification crate, because every crate
//! whose tests run long (`nessie-tests`, `nessie-sim`, `nessie-baselines`,
//! `nessie-cell`, the model suite itself) already depends on it, and it
//! needs nothing but `std`: no production crate grows a test helper.
//!
//! Limits are several times a test's duration on a 2-core machine, so they
//! never fire in a normal run. `NESSIE_TIME_LIMIT_SCALE` multiplies every
//! limit (e.g. `4` for a debug build on a slow machine; `0` turns the
//! watchdog off); with `NESSIE_TIME_LIMIT_REPORT` set, each guard prints
//! how long its test took against its limit when it is dropped (how the
//! limits were chosen).

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The environment variable that scales every limit (a factor; `0`: no
/// limits).
pub const SCALE_VAR: &str = "NESSIE_TIME_LIMIT_SCALE";

/// The environment variable that makes every guard report its test's
/// duration against its limit when dropped.
pub const REPORT_VAR: &str = "NESSIE_TIME_LIMIT_REPORT";

/// A running time limit: dropping it stops the watchdog. See
/// [`time_limit`].
#[derive(Debug)]
#[must_use = "the limit ends when the guard is dropped: bind it to a variable (`let _limit = ...`)"]
pub struct TimeLimit {
    done: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    /// When the limit started, the test's name and its (scaled) limit.
    start: Instant,
    name: String,
    limit: Option<Duration>,
}

/// `limit` scaled by `NESSIE_TIME_LIMIT_SCALE` (`None`: no limit).
fn scaled(limit: Duration) -> Option<Duration> {
    let scale = std::env::var(SCALE_VAR)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(1.0);
    (scale > 0.0).then(|| limit.mul_f64(scale))
}

/// Starts a watchdog for test `name` (drawing from `seed`; pass what
/// reproduces the run, or `"-"` for a test without one): unless the
/// returned guard is dropped within `limit`, the process prints `test NAME
/// (seed S) exceeded its time limit of N s` to stderr and exits with status
/// 101 (a failed test binary), whatever its other threads are doing. Hold
/// the guard for the test's whole body: `let _limit = time_limit(...)`.
pub fn time_limit(name: &str, seed: impl std::fmt::Display, limit: Duration) -> TimeLimit {
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let start = Instant::now();
    let Some(limit) = scaled(limit) else {
        return TimeLimit {
            done,
            thread: None,
            start,
            name: name.to_string(),
            limit: None,
        };
    };
    let message = format!(
        "test {name} (seed {seed}) exceeded its time limit of {} s",
        limit.as_secs_f64()
    );
    let flag = done.clone();
    let thread = std::thread::Builder::new()
        .name(format!("time limit of {name}"))
        .spawn(move || {
            let end = start + limit;
            let (lock, cv) = &*flag;
            let mut finished = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*finished {
                let now = Instant::now();
                if now >= end {
                    eprintln!("\n{message}");
                    std::process::exit(101);
                }
                finished = cv
                    .wait_timeout(finished, end - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        })
        .expect("spawning the time limit's thread");
    TimeLimit {
        done,
        thread: Some(thread),
        start,
        name: name.to_string(),
        limit: Some(limit),
    }
}

impl Drop for TimeLimit {
    fn drop(&mut self) {
        let (lock, cv) = &*self.done;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if std::env::var_os(REPORT_VAR).is_some() {
            eprintln!(
                "time limit: test {} took {:.2} s of its {}",
                self.name,
                self.start.elapsed().as_secs_f64(),
                self.limit.map_or("(no limit)".to_string(), |l| format!(
                    "{} s",
                    l.as_secs_f64()
                ))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_dropped_in_time_ends_its_watchdog_at_once() {
        let start = Instant::now();
        {
            let _limit = time_limit("quick", 1, Duration::from_secs(600));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
