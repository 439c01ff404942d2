//! The test watchdog fires: this test binary runs itself again with
//! `NESSIE_WATCHDOG_VICTIM` set, which makes `the_victim` sleep far past a
//! tiny time limit; the child must exit non-zero, naming the test, its seed
//! and its limit, long before the sleep would have ended.

use std::process::Command;
use std::time::{Duration, Instant};

use nessie_check::time_limit;

const VICTIM: &str = "NESSIE_WATCHDOG_VICTIM";

/// Does nothing in a normal run; under `NESSIE_WATCHDOG_VICTIM`, hangs
/// (sleeps a minute) under a 300 ms limit.
#[test]
fn the_victim() {
    if std::env::var_os(VICTIM).is_none() {
        return;
    }
    let _limit = time_limit("the_victim", 42, Duration::from_millis(300));
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_test_past_its_time_limit_fails_with_its_name_and_seed() {
    let _limit = time_limit(
        "a_test_past_its_time_limit_fails_with_its_name_and_seed",
        "-",
        Duration::from_secs(60),
    );
    let start = Instant::now();
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "the_victim", "--nocapture", "--test-threads=1"])
        .env(VICTIM, "1")
        .env_remove(nessie_check::SCALE_VAR)
        .output()
        .expect("the test binary runs");
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the hanging test passed: {stderr}");
    assert_eq!(out.status.code(), Some(101), "{stderr}");
    assert!(
        stderr.contains("test the_victim (seed 42) exceeded its time limit of 0.3 s"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(30), "the watchdog took {took:?}");
}
