//! CPU time of the calling thread, the papers' energy proxy (Nessie Fig. 14):
//! server workers that poll request slots burn CPU even when idle, client-driven
//! operations only while they run.

use std::time::Duration;

/// CPU time consumed so far by the calling thread (`CLOCK_THREAD_CPUTIME_ID`);
/// zero where the clock is unavailable.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // the kernel knows. On failure the timespec is left zeroed.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_consumes_thread_cpu_time() {
        // Spin until the thread's CPU clock has moved 5 ms: however loaded
        // the machine (a wall-clock window of spinning may get almost no
        // CPU under `nice` beside a busy guest), a clock that does not
        // count this thread's work never gets there.
        let before = thread_cpu_time();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while thread_cpu_time().saturating_sub(before) < Duration::from_millis(5) {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "2 minutes of spinning moved the thread's CPU clock by {:?}",
                thread_cpu_time().saturating_sub(before)
            );
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
    }
}
