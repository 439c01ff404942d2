//! The same application code on every system: a cluster of each in this
//! process through the one front door (`nessie_systems::Connect`), clients
//! that take the next free id, and what each operation cost on the fabric.
//!
//! ```text
//! cargo run -p nessie-systems --example any_system
//! ```
//!
//! The application sees only `KvClient` (GET, PUT, DELETE and, where the
//! store is ordered, scans), so switching stores is one argument. For a
//! node of an RDMA cluster instead of an in-process one, start the node's
//! fabric from its cluster file (`nessie_fabric_verbs::VerbsFabric`, feature
//! `verbs` of the `nessie` command, docs/deploy.md) and hand it to
//! `Connect::hosting` with the node this process hosts.

use nessie_protocol::{KvClient, NodeId};
use nessie_systems::{Connect, SystemKind};

/// The application: a few orders written by one client, read and settled
/// by another.
fn shop(alice: &mut dyn KvClient, bob: &mut dyn KvClient) -> Result<(), nessie_protocol::Error> {
    for i in 0..10 {
        alice.put(format!("order-{i}").as_bytes(), b"pending")?;
    }
    for i in 0..10 {
        let key = format!("order-{i}");
        assert_eq!(bob.get(key.as_bytes())?.as_deref(), Some(&b"pending"[..]));
        if i % 2 == 0 {
            bob.put(key.as_bytes(), b"paid")?;
        } else {
            bob.delete(key.as_bytes())?;
        }
    }
    assert_eq!(alice.get(b"order-5")?, None);
    assert_eq!(alice.get(b"order-4")?.as_deref(), Some(&b"paid"[..]));
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "{:<10} {:>14} {:>10} {:>7} {:>7}",
        "system", "remote rounds", "loopback", "READs", "bytes"
    );
    for kind in SystemKind::ALL {
        let cluster = Connect::new(kind).in_process()?;
        let mut alice = cluster.client(NodeId(0))?;
        let mut bob = cluster.client(NodeId(2))?;
        shop(&mut *alice, &mut *bob)?;
        // What the last GET (of a present key) cost on the fabric. Systems
        // count alike what goes through a client's own endpoint; Cell's
        // server-side searches run on the servers' endpoints instead.
        let s = alice.last_stats();
        println!(
            "{:<10} {:>14} {:>10} {:>7} {:>7}   (the last GET)",
            kind.name(),
            s.round_trips,
            s.loopback_rounds,
            s.index_reads + s.data_reads,
            s.fabric_bytes
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        super::main().expect("the example runs to the end");
    }
}
