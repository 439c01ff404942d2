//! Helpers of the `nessie bench` tests: run the binary, parse its JSON.

#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `nessie bench <args>`.
pub fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nessie"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run nessie")
}

/// Runs `nessie bench --json --quiet <args>`, asserts success, parses stdout.
pub fn bench_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json", "--quiet"];
    all.extend_from_slice(args);
    let out = bench(&all);
    assert!(
        out.status.success(),
        "nessie bench {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The f64 at a JSON pointer.
pub fn f(v: &serde_json::Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {ptr} in {v:#}"))
}
