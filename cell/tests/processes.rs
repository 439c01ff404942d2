//! Cell as node processes on fabric-sim: every server node started on its
//! own ([`CellNode::start_alone`], what `nessie node serve --system cell`
//! does on RDMA) with its own handle on the region directory, which lives
//! in node 0's memory and is read and written over the fabric; clients
//! over the fabric ([`CellClient::over_fabric`]) share no memory with any
//! server. The nodes share nothing but the fabric.
//!
//! - Concurrent gets, puts, deletes and range scans from every node, in
//!   every search mode, while fillers split nodes and meganodes (so servers
//!   allocate and publish meganodes on each other through the directory):
//!   the history is linearizable by the per-key checker and by Cell's
//!   range-aware checker.
//! - With the directory node down, a client that never read the directory
//!   fails with a typed error within its operation timeout (no hang).

mod common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use nessie_cell::machine::{machine, Resolution};
use nessie_cell::region::RegionMap;
use nessie_cell::FabricDirectory;
use nessie_cell::TreeShape;
use nessie_cell::{CellClient, CellConfig, CellNode, SearchMode};
use nessie_exec::Driver;
use nessie_fabric_sim::{SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::{Error, Fabric, NodeId};

fn config() -> CellConfig {
    CellConfig {
        clients_per_node: 3,
        ..tiny()
    }
    .with_directory_on(NodeId(0))
}

/// Starts every server node as its own "process" (in its own thread, node
/// 0 last: the others need nothing from it to start).
fn start_nodes(cfg: &CellConfig, f: &SimFabric) -> Vec<CellNode> {
    let mut handles: Vec<_> = (0..cfg.server_nodes)
        .rev()
        .map(|n| {
            let (cfg, f) = (Arc::new(cfg.clone()), f.clone());
            thread::spawn(move || CellNode::start_alone(cfg, &f, NodeId(n), None))
        })
        .collect();
    handles.reverse();
    handles
        .into_iter()
        .map(|h| h.join().unwrap().expect("node starts"))
        .collect()
}

fn client(
    cfg: &CellConfig,
    f: &SimFabric,
    node: u16,
    index: u16,
    mode: SearchMode,
) -> CellClient<SimEndpoint> {
    let mut c = CellClient::over_fabric(
        Arc::new(cfg.clone()),
        id(node, index),
        f.open(NodeId(node)).unwrap(),
    )
    .expect("client");
    c.set_mode(mode);
    c
}

/// The directory as a client on node 1 reads it.
fn directory(cfg: &CellConfig, f: &SimFabric) -> Arc<RegionMap> {
    let d = Arc::new(FabricDirectory::new(cfg, None).unwrap());
    let mut driver = Driver::new(f.open(NodeId(1)).unwrap());
    let mut m = machine(NodeId(1), driver.next_id(), None, move |io| async move {
        d.snapshot(&io).await
    });
    driver
        .run_machine(&mut m, &mut |e| -> Resolution { panic!("{e:?}") })
        .expect("directory snapshot")
}

#[test]
fn node_processes_sharing_only_the_fabric_give_linearizable_histories_across_splits() {
    let _limit = time_limit(
        "node_processes_sharing_only_the_fabric_give_linearizable_histories_across_splits",
        "-",
        Duration::from_secs(120),
    );
    let cfg = config();
    let f = SimFabric::new(SimConfig::from_topology(cfg.topology())).unwrap();
    let nodes = start_nodes(&cfg, &f);
    let modes = [
        SearchMode::ServerOnly,
        SearchMode::ClientOnly,
        SearchMode::Selector,
    ];
    let mut players = Vec::new();
    let mut fillers = Vec::new();
    for n in 0..3u16 {
        for i in 0..2u16 {
            let me = (n * 2 + i) as usize;
            players.push((me, client(&cfg, &f, n, i, modes[me % 3])));
        }
        fillers.push((n, client(&cfg, &f, n, 2, modes[n as usize])));
    }
    let events = islands(players, fillers, 200, 0x9ce11);
    for n in &nodes {
        assert!(n.errors().is_empty(), "{}: {:?}", n.node(), n.errors());
    }
    let checked = check_both(&events);
    assert!(checked >= 6 * 200, "{checked}");
    let map = directory(&cfg, &f);
    let shape = TreeShape::of(&map, cfg.server_nodes, nodes.iter().map(CellNode::state));
    let dirs: Vec<_> = nodes
        .iter()
        .filter_map(CellNode::directory_counters)
        .collect();
    println!("{shape:?}\ndirectory handles of the nodes: {dirs:?}");
    assert!(
        shape.meganode_splits >= 2 && shape.node_splits >= 10,
        "{shape:?}"
    );
    assert!(
        shape.per_node.iter().filter(|&&r| r > 0).count() >= 2,
        "meganodes placed on other servers through the directory: {shape:?}"
    );
    let commits: u64 = dirs.iter().map(|d| d.commits).sum();
    assert!(
        commits as usize >= 2 * shape.meganodes - 1,
        "allocate and publish: {dirs:?}"
    );
}

#[test]
fn with_the_directory_node_down_a_new_client_fails_typed_and_bounded() {
    let _limit = time_limit(
        "with_the_directory_node_down_a_new_client_fails_typed_and_bounded",
        "-",
        Duration::from_secs(120),
    );
    let cfg = CellConfig {
        op_timeout: Duration::from_secs(1),
        rpc_timeout: Duration::from_millis(300),
        ..config()
    };
    let f = SimFabric::new(SimConfig::from_topology(cfg.topology())).unwrap();
    let _nodes = start_nodes(&cfg, &f);
    let mut c = client(&cfg, &f, 1, 0, SearchMode::Selector);
    c.put(b"k1", b"v1").expect("a healthy cluster");
    f.set_node_down(NodeId(0), true).unwrap();
    let mut fresh = client(&cfg, &f, 2, 0, SearchMode::Selector);
    let t = Instant::now();
    let r = fresh.get(b"k1");
    let took = t.elapsed();
    assert!(
        matches!(r, Err(Error::Timeout | Error::Unreachable(NodeId(0), _))),
        "{r:?}"
    );
    assert!(
        took < Duration::from_secs(4),
        "bounded by op_timeout: {took:?}"
    );
}
