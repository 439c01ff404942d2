//! A client without storage (docs/protocol.md §2.4): an application that
//! hosts no data table writes through memory windows on a node, next to the
//! node's own clients, through the one front door.
//!
//! ```text
//! cargo run -p nessie-systems --example pure_client
//! ```
//!
//! `Connect` starts each Nessie node's agent (the node's CPU, off every
//! request's path) when the store has clients without storage;
//! `Cluster::pure_client` hands out the next share of a node that no live
//! client holds, in this process or another: it takes the share by a lease
//! before it hands the client out. The client keeps its share while it
//! runs (its operations renew the lease; an idle one calls
//! `Client::renew_lease`): one that runs nothing for the lease term loses
//! it (`Error::LeaseLost`, nothing of the failed write linked) and is made
//! anew. Done with it, the application gives the share back
//! (`release_share`), for the next process to take at once.

use nessie_protocol::{Config, NodeId};
use nessie_systems::{Connect, SystemKind};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = Config {
        nodes: 3,
        index_slots_per_node: 1024,
        dtes_per_node: 1024,
        clients_per_node: 2,
        pure_clients_per_node: 2,
        ..Config::default()
    };
    let cluster = Connect::new(SystemKind::Nessie).store(store).in_process()?;
    let mut app = cluster.pure_client(NodeId(1))?;
    let mut node_client = cluster.client(NodeId(0))?;
    for i in 0..100 {
        app.put(format!("session-{i}").as_bytes(), b"open")?;
    }
    for i in (0..100).step_by(7) {
        let key = format!("session-{i}");
        assert_eq!(
            node_client.get(key.as_bytes())?.as_deref(),
            Some(&b"open"[..])
        );
        node_client.put(key.as_bytes(), b"closed")?;
    }
    assert_eq!(app.get(b"session-14")?.as_deref(), Some(&b"closed"[..]));
    // An application that may sit idle renews its lease every third of the
    // lease term (here once: nothing is due yet, so nothing is posted).
    app.renew_lease()?;
    // Done with it: give the share back, for the next process to take at
    // once (a process that dies keeps it until the lease term passes).
    app.release_share()?;
    println!("a client without storage wrote 100 sessions; a node's client read and closed 15");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs() {
        super::main().expect("the example runs");
    }
}
