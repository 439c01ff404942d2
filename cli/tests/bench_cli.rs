//! `nessie bench`'s command line: bad arguments give clear errors and a
//! non-zero exit code (no panic); `--json` parses; `--plot` writes SVGs.

mod support;

use support::{bench, bench_json, f};

fn fails_with(args: &[&str], needle: &str) {
    let out = bench(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in stderr:\n{err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    fails_with(&["--systems", "nessie,redis"], "unknown system \"redis\"");
    fails_with(&["--systems", "nessie,nessie"], "listed twice");
    fails_with(&["--systems", ","], "names no system");
    fails_with(&["--get-pct", "101"], "invalid --get-pct 101");
    fails_with(&["--value-size", "0"], "invalid --value-size 0");
    fails_with(&["--value-size", "256K"], "invalid --value-size 262144");
    fails_with(&["--value-size", "12Q"], "is not a size");
    fails_with(&["--clients", "0"], "invalid --clients 0");
    fails_with(&["--nodes", "0"], "invalid --nodes 0");
    fails_with(&["--server-workers", "0"], "invalid --server-workers 0");
    fails_with(&["--keys", "0"], "invalid --keys 0");
    fails_with(&["--key-size", "4"], "invalid --key-size 4");
    fails_with(&["--seconds", "0"], "invalid --seconds 0");
    fails_with(&["--ops", "0"], "invalid --ops 0");
    fails_with(&["--zipf-theta", "1.5"], "invalid --zipf-theta");
    fails_with(&["--experiment", "nope"], "invalid value 'nope'");
    fails_with(&["--seconds", "1", "--ops", "5"], "cannot be used with");
    fails_with(
        &["--experiment", "cpu-load", "--ops", "5"],
        "--ops does not apply to cpu-load",
    );
    fails_with(
        &["--experiment", "breakdown", "--systems", "pilaf"],
        "breakdown needs nessie",
    );
}

#[test]
fn help_lists_the_experiments() {
    let out = bench(&["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for e in [
        "value-sweep",
        "zipf",
        "breakdown",
        "cpu-contention",
        "cpu-load",
    ] {
        assert!(text.contains(e), "{e} missing from --help:\n{text}");
    }
}

#[test]
fn json_has_every_system_with_ratios_and_plots_are_written() {
    let dir = std::env::temp_dir().join(format!("nessie-bench-plot-{}", std::process::id()));
    let v = bench_json(&[
        "--systems",
        "nessie,nessie-sd,nessie-hy,pilaf",
        "--nodes",
        "2",
        "--clients",
        "1",
        "--keys",
        "300",
        "--seconds",
        "0.06",
        "--slice-ms",
        "20",
        "--get-pct",
        "50",
        "--distribution",
        "zipf",
        "--plot",
        dir.to_str().unwrap(),
    ]);
    let systems = v.pointer("/points/0/systems").unwrap().as_array().unwrap();
    assert_eq!(systems.len(), 4);
    assert_eq!(f(&v, "/points/0/systems/0/ratio"), 1.0);
    for (i, s) in systems.iter().enumerate() {
        let label = s["label"].as_str().unwrap();
        if !s["error"].is_null() {
            // A system whose preload failed is reported, not measured.
            eprintln!("{label}: {}", s["error"]);
            continue;
        }
        assert!(
            f(&v, &format!("/points/0/systems/{i}/ops")) > 0.0,
            "{label}"
        );
        assert!(f(&v, &format!("/points/0/systems/{i}/throughput")) > 0.0);
        assert!(f(&v, &format!("/points/0/systems/{i}/get/latency_us/p99")) > 0.0);
    }
    let plots = v["plots"].as_array().unwrap();
    assert_eq!(plots.len(), 6);
    for p in plots {
        let svg = std::fs::read_to_string(p.as_str().unwrap()).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("RDMA"), "{p}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
