//! An application process on RDMA that hosts no node: it joins a running
//! Nessie cluster (started with `nessie node ... serve` or `run`) as a
//! client without storage, stores and reads a few sessions, and learns
//! the fate of a write whose outcome is unknown before it tries again.
//!
//! ```text
//! cargo run -p nessie-fabric-verbs --example application -- CLUSTER_FILE NODE ADDR
//! ```
//!
//! - `CLUSTER_FILE` is the nodes' cluster file; its `[store]
//!   pure_clients_per_node` gives each node shares for such clients.
//! - `NODE` is the node whose share the client takes (by a lease: a share
//!   a live client of another process holds is skipped).
//! - `ADDR` is this host's address on the RDMA interface and an `rdma_cm`
//!   port free there (e.g. `192.0.2.9:20900`).
//!
//! docs/deploy.md, "Clients without storage", says what the process does
//! on the fabric; the soft-RoCE guest runs this example against a 3-node
//! cluster it did not start (`cli/tests/cluster.rs`).

use std::error::Error as StdError;
use std::net::SocketAddr;
use std::path::PathBuf;

use nessie_fabric_verbs::{ClusterFile, VerbsFabric};
use nessie_protocol::{Error, KvClient, NodeId, Outcome};
use nessie_systems::{Connect, SystemKind};

/// A PUT that ends `OutcomeUnknown` may or may not have taken effect: read
/// the key back, and write again only if the value is not the one meant.
/// (A PUT is idempotent for its own value; a counter would need a check
/// of its own.)
fn put_surely(client: &mut dyn KvClient, key: &[u8], value: &[u8]) -> Result<(), Error> {
    for _ in 0..3 {
        match client.put(key, value) {
            Ok(_) => return Ok(()),
            Err(e) if e.outcome() == Outcome::Unknown => {
                if client.get(key)?.as_deref() == Some(value) {
                    return Ok(());
                }
            }
            // Nothing committed: safe to try again.
            Err(e) if e.is_retryable() => {}
            Err(e) => return Err(e),
        }
    }
    client.put(key, value).map(drop)
}

fn main() -> Result<(), Box<dyn StdError>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, node, addr] = args.as_slice() else {
        return Err("usage: application CLUSTER_FILE NODE ADDR".into());
    };
    let file = ClusterFile::load(&PathBuf::from(file))?;
    let node = NodeId(node.parse()?);
    let addr: SocketAddr = addr.parse()?;
    let store = file.protocol_config()?;
    // This process registers no region: it only dials the nodes.
    let fabric = VerbsFabric::client_only(file, addr, None)?;
    let cluster = Connect::new(SystemKind::Nessie)
        .store(store)
        .hosting(fabric, &[])?;
    let mut client = cluster.pure_client(node)?;
    for i in 0..20 {
        let key = format!("app-session-{i}");
        put_surely(&mut *client, key.as_bytes(), b"open")?;
    }
    let mut open = 0;
    for i in 0..20 {
        let key = format!("app-session-{i}");
        if client.get(key.as_bytes())?.as_deref() == Some(&b"open"[..]) {
            open += 1;
        }
    }
    for i in (0..20).step_by(5) {
        client.delete(format!("app-session-{i}").as_bytes())?;
    }
    let gone = client.get(b"app-session-5")?.is_none();
    // An application that may sit idle renews its lease (nothing is
    // posted unless a renewal is due).
    client.renew_lease()?;
    // Done: give the share back for the next process to take at once.
    client.release_share()?;
    println!(
        "application: a client without storage of {node} wrote 20 sessions, read {open} back open, deleted 4 (app-session-5 gone: {gone})"
    );
    if open != 20 || !gone {
        return Err("the sessions did not read back as written".into());
    }
    Ok(())
}
