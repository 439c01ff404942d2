//! A tiny end-to-end run of each Cell experiment (very short slices) and of
//! Cell beside the other systems, with the shape of the JSON report.

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

fn run(extra: &[&str]) -> serde_json::Value {
    let mut args = extra.to_vec();
    args.extend_from_slice(&TINY);
    bench_json(&args)
}

/// Every system of every point did some operations.
fn all_points_did_work(v: &serde_json::Value) {
    let ps = v["points"].as_array().expect("points");
    assert!(!ps.is_empty());
    for (i, p) in ps.iter().enumerate() {
        let n = p["systems"].as_array().expect("systems").len();
        assert!(n > 0);
        for s in 0..n {
            assert!(
                f(v, &format!("/points/{i}/systems/{s}/ops")) > 0.0,
                "point {i} system {s}: no operations"
            );
        }
    }
}

#[test]
fn each_cell_experiment_runs_to_completion() {
    for name in [
        "cell-clients",
        "cell-cores",
        "cell-spike",
        "cell-mixed",
        "cell-scan",
    ] {
        let v = run(&["--experiment", name]);
        assert_eq!(v["experiment"], name);
        all_points_did_work(&v);
    }
}

#[test]
fn cell_runs_beside_nessie() {
    let v = run(&["--systems", "nessie,cell,cell-server,cell-client"]);
    all_points_did_work(&v);
}
