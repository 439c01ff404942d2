//! `nessie bench` reports exactly the fabric operations a known workload
//! costs: single GETs of one preloaded key, whose costs are the quiet-case
//! costs of tests/tests/costs.rs (Nessie) and of one request/response
//! exchange (NessieSD).

mod support;

use nessie_systems::sizing::{store_config, Shape};
use support::{bench_json, f};

/// The data table entry size of the bench's store with one 128 B key of 256 B.
fn dte_bytes(nodes: u16) -> f64 {
    let cfg = store_config(&Shape {
        nodes,
        clients: 1,
        keys: 1,
        key_size: 128,
        value_size: 256,
        value_mix: nessie_workload::ValueMix::Fixed,
        size_classes: false,
        load_factor: 0.5,
        migrate_depth: 6,
        expiration: std::time::Duration::from_millis(100),
    })
    .unwrap();
    cfg.layout().entry_bytes() as f64
}

const ONE_KEY: [&str; 8] = [
    "--clients",
    "1",
    "--keys",
    "1",
    "--get-pct",
    "100",
    "--seed",
    "5",
];

fn run(system: &str, nodes: &str, ops: &str) -> serde_json::Value {
    let mut args = vec!["--systems", system, "--nodes", nodes, "--ops", ops];
    args.extend_from_slice(&ONE_KEY);
    bench_json(&args)
}

#[test]
fn nessie_get_of_a_local_entry_is_one_index_read_and_one_cpu_read() {
    let v = run("nessie", "1", "1");
    let s = "/points/0/systems/0";
    assert_eq!(f(&v, &format!("{s}/ops")), 1.0);
    assert!(v.pointer(&format!("{s}/put")).unwrap().is_null());
    let m = format!("{s}/get/mean");
    assert_eq!(f(&v, &format!("{m}/index_reads")), 1.0, "{v:#}");
    assert_eq!(f(&v, &format!("{m}/data_reads")), 0.0);
    assert_eq!(f(&v, &format!("{m}/local_reads")), 1.0);
    assert_eq!(f(&v, &format!("{m}/writes")), 0.0);
    assert_eq!(
        f(&v, &format!("{m}/index_cas")) + f(&v, &format!("{m}/data_cas")),
        0.0
    );
    assert_eq!(f(&v, &format!("{m}/fabric_bytes")), 8.0);
    assert_eq!(f(&v, &format!("{m}/attempts")), 1.0);
    assert_eq!(f(&v, &format!("{s}/get/reads_hist/1")), 1.0);
    assert_eq!(f(&v, &format!("{s}/retried")), 0.0);
}

#[test]
fn nessie_gets_of_a_local_and_a_remote_entry() {
    // Two nodes, one client each; the key is preloaded by node 0's client.
    // Each client issues one GET: node 0 reads the entry by CPU, node 1 by
    // one RDMA READ of the whole data table entry.
    let v = run("nessie", "2", "2");
    let g = "/points/0/systems/0/get";
    assert_eq!(f(&v, &format!("{g}/ops")), 2.0, "{v:#}");
    assert_eq!(f(&v, &format!("{g}/mean/index_reads")), 1.0);
    assert_eq!(f(&v, &format!("{g}/mean/data_reads")), 0.5);
    assert_eq!(f(&v, &format!("{g}/mean/local_reads")), 0.5);
    assert_eq!(f(&v, &format!("{g}/mean/fabric_ops")), 1.5);
    assert_eq!(
        f(&v, &format!("{g}/mean/fabric_bytes")),
        (8.0 + 8.0 + dte_bytes(2)) / 2.0
    );
    assert_eq!(f(&v, &format!("{g}/reads_hist/1")), 0.5);
    assert_eq!(f(&v, &format!("{g}/reads_hist/2")), 0.5);
    assert_eq!(f(&v, &format!("{g}/cas_hist/0")), 1.0);
}

#[test]
fn nessie_sd_get_is_one_request_write_and_one_server_write() {
    // One client is on the key's home node (request and response by CPU),
    // the other is not (one RDMA WRITE each way).
    let v = run("nessie-sd", "2", "2");
    let s = "/points/0/systems/0";
    let g = format!("{s}/get");
    assert_eq!(f(&v, &format!("{g}/ops")), 2.0, "{v:#}");
    assert_eq!(f(&v, &format!("{g}/mean/writes")), 0.5);
    assert_eq!(f(&v, &format!("{g}/mean/server_writes")), 0.5);
    assert_eq!(f(&v, &format!("{g}/mean/local_writes")), 0.5);
    assert_eq!(f(&v, &format!("{g}/mean/local_reads")), 1.0);
    assert_eq!(f(&v, &format!("{g}/mean/index_reads")), 0.0);
    assert_eq!(f(&v, &format!("{g}/mean/data_reads")), 0.0);
    assert_eq!(f(&v, &format!("{g}/writes_hist/0")), 0.5);
    assert_eq!(f(&v, &format!("{g}/writes_hist/2")), 0.5);
    assert_eq!(f(&v, &format!("{s}/server_requests")), 2.0);
}
