//! `nessie bench --depth`: Nessie with several operations in flight per
//! client thread runs as variants of its own (`nessie-d<D>`), side by side
//! with depth 1 and the baselines (which stay at one operation per thread),
//! every operation of the quota completed and accounted.

mod support;

use support::{bench, bench_json, f};

#[test]
fn depths_are_variants_measured_side_by_side_with_the_baselines() {
    let v = bench_json(&[
        "--systems",
        "nessie,nessie-sd",
        "--depth",
        "1,4",
        "--ops",
        "1200",
        "--keys",
        "300",
        "--get-pct",
        "50",
        "--seed",
        "3",
    ]);
    let systems = v
        .pointer("/points/0/systems")
        .and_then(|s| s.as_array())
        .unwrap();
    let labels: Vec<&str> = systems
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["nessie", "nessie-d4", "nessie-sd"], "{v:#}");
    for (i, label) in labels.iter().enumerate() {
        let s = format!("/points/0/systems/{i}");
        assert!(
            v.pointer(&format!("{s}/error")).unwrap().is_null(),
            "{label}: {v:#}"
        );
        assert_eq!(f(&v, &format!("{s}/ops")), 1200.0, "{label}");
        assert!(
            v.pointer(&format!("{s}/failures"))
                .and_then(|x| x.as_object())
                .is_some_and(|m| m.is_empty()),
            "{label}: {v:#}"
        );
    }
    // A pipelined GET costs what a lone one does: one index READ per
    // candidate read, the entry by READ or by CPU; and the pipeline's
    // clients' caches are counted like a lone client's.
    for i in [0, 1] {
        let g = format!("/points/0/systems/{i}/get/mean");
        assert!(f(&v, &format!("{g}/index_reads")) >= 1.0, "{v:#}");
        let hits = f(&v, &format!("/points/0/systems/{i}/cache_hit_rate"));
        eprintln!("{}: cache hit rate {hits}", labels[i]);
        assert!(hits > 0.0 && hits <= 1.0, "{v:#}");
    }
}

#[test]
fn depth_is_refused_where_it_has_no_meaning() {
    for args in [
        vec!["--depth", "0"],
        vec!["--depth", "65"],
        vec!["--depth", "4", "--experiment", "cpu-load"],
        vec!["--depth", "4", "--experiment", "cell-clients"],
    ] {
        let out = bench(&args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("depth"), "{args:?}: {err}");
    }
}
