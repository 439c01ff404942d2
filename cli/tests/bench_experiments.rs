//! A tiny end-to-end run of every named experiment (very short slices) with
//! the shape of its JSON report.

mod support;

use support::{bench_json, f};

const TINY: [&str; 12] = [
    "--nodes",
    "2",
    "--clients",
    "1",
    "--keys",
    "200",
    "--seconds",
    "0.02",
    "--slice-ms",
    "10",
    "--data-budget-mib",
    "1",
];

fn experiment(name: &str, systems: &str) -> serde_json::Value {
    let mut args = vec!["--experiment", name, "--systems", systems];
    args.extend_from_slice(&TINY);
    let v = bench_json(&args);
    assert_eq!(v["experiment"], name);
    v
}

fn points(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["points"].as_array().unwrap()
}

#[test]
fn value_sweep_covers_256_b_to_128_kib_at_three_get_ratios() {
    let v = experiment("value-sweep", "nessie,nessie-sd");
    let ps = points(&v);
    assert_eq!(ps.len(), 18);
    assert_eq!(f(&v, "/points/0/params/value_size"), 256.0);
    assert_eq!(f(&v, "/points/17/params/value_size"), 131072.0);
    assert_eq!(f(&v, "/points/17/params/get_pct"), 99.0);
    for i in 0..ps.len() {
        assert!(f(&v, &format!("/points/{i}/systems/1/ops")) > 0.0);
    }
}

/// size-mix: ETC values and YCSB's 1 KiB, Nessie in fixed entries and in
/// size classes beside another system; only Nessie reports its memory, and
/// classes hold the ETC mix in far fewer entry bytes per byte stored.
#[test]
fn size_mix_compares_fixed_entries_with_size_classes() {
    let v = experiment("size-mix", "nessie,nessie-hy");
    let ps = points(&v);
    assert_eq!(ps.len(), 2);
    assert_eq!(f(&v, "/points/0/params/etc"), 1.0);
    assert_eq!(f(&v, "/points/1/params/value_size"), 1024.0);
    assert_eq!(v["points"][0]["systems"][0]["label"], "nessie fixed");
    assert_eq!(v["points"][0]["systems"][1]["label"], "nessie classes");
    assert!(v["points"][0]["systems"][2]["memory"].is_null());
    let fixed = f(&v, "/points/0/systems/0/memory/entry_overhead");
    let classes = f(&v, "/points/0/systems/1/memory/entry_overhead");
    assert!(classes < 1.5 && fixed > 10.0, "{classes} vs {fixed}");
    assert!(f(&v, "/points/0/systems/1/memory/keys") > 0.0);
}

#[test]
fn zipf_compares_uniform_and_zipf() {
    let v = experiment("zipf", "nessie,nessie-hy");
    assert_eq!(points(&v).len(), 6);
    assert_eq!(f(&v, "/points/5/params/zipf"), 1.0);
}

#[test]
fn breakdown_switches_optimisations_on_one_by_one() {
    let v = experiment("breakdown", "nessie,nessie-hy");
    let labels: Vec<&str> = points(&v)[0]["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "nessie basic",
            "nessie +filter",
            "nessie +cache",
            "nessie +prev",
            "nessie +multi",
            "hy basic",
            "hy +filter",
            "hy +cache",
            "hy +multi"
        ]
    );
}

#[test]
fn cpu_contention_adds_background_threads() {
    let mut args = vec!["--max-background", "2"];
    args.extend_from_slice(&[
        "--experiment",
        "cpu-contention",
        "--systems",
        "nessie,nessie-sd",
    ]);
    args.extend_from_slice(&TINY);
    let v = bench_json(&args);
    let bg: Vec<f64> = points(&v)
        .iter()
        .map(|p| p["params"]["background"].as_f64().unwrap())
        .collect();
    assert_eq!(bg, [0.0, 1.0, 2.0]);
}

#[test]
fn cpu_load_runs_open_loop_below_the_peak() {
    let v = experiment("cpu-load", "nessie,nessie-sd");
    let ps = points(&v);
    assert_eq!(ps.len(), 5);
    for s in 0..2 {
        let peak = f(&v, &format!("/points/0/systems/{s}/throughput"));
        let at20 = f(&v, &format!("/points/1/systems/{s}/throughput"));
        assert!(at20 < peak, "system {s}: {at20} at 20% vs peak {peak}");
        assert!(f(&v, &format!("/points/1/systems/{s}/cores_busy")) >= 0.0);
    }
}

#[test]
fn latency_sweep_runs_each_latency_on_its_own_fabrics() {
    let v = experiment("latency-sweep", "nessie,nessie-sd");
    let ps = points(&v);
    assert_eq!(ps.len(), 15, "5 latencies x 3 GET ratios");
    assert_eq!(f(&v, "/points/0/params/latency_us"), 0.0);
    assert_eq!(f(&v, "/points/14/params/latency_us"), 400.0);
    // The simulated latency is really there: a GET at 400 us waits for at
    // least one NIC operation.
    assert!(f(&v, "/points/14/systems/0/get/latency_us/p50") >= 400.0);
    assert!(f(&v, "/points/0/systems/0/get/latency_us/p50") < 400.0);
}
