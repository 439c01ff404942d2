//! An embedded Nessie cluster in one process: three nodes on the in-process
//! simulated fabric, a client on two of them, GET/PUT/DELETE, a node that
//! goes down, and what each error promises about a write.
//!
//! ```text
//! cargo run -p nessie-fabric-sim --example embedded
//! ```
//!
//! Every client is a blocking `nessie_protocol::Client` over one endpoint of
//! a fabric; the same client runs over the RDMA verbs backend
//! (`nessie-fabric-verbs`, docs/deploy.md) with that fabric's endpoint.

use std::sync::Arc;

use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::{Client, ClientId, Config, Error, Fabric, NodeId, Outcome};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The store's shape: three nodes, the protocol's defaults otherwise.
    let cfg = Arc::new(Config {
        nodes: 3,
        ..Config::default()
    });
    cfg.validate()?;
    let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology()))?;

    // A client lives on a node (its data table share is there) and talks to
    // the whole cluster through an endpoint of that node. Ids are unique per
    // fabric: a second client with one of these ids is refused.
    let client = |node: u16| -> Result<Client<_>, Error> {
        let id = ClientId {
            node: NodeId(node),
            index: 0,
        };
        Client::new(cfg.clone(), id, fabric.open(NodeId(node))?)
    };
    let mut alice = client(0)?;
    let mut bob = client(2)?;

    // PUT answers whether the key existed; GET what it holds.
    let existed = alice.put(b"greeting", b"hello")?;
    println!("alice PUT greeting = hello (existed before: {existed})");
    let seen = bob.get(b"greeting")?;
    println!(
        "bob GET greeting -> {:?}",
        seen.as_deref().map(String::from_utf8_lossy)
    );
    assert_eq!(seen.as_deref(), Some(&b"hello"[..]));

    bob.put(b"greeting", b"hello again")?;
    assert_eq!(
        alice.get(b"greeting")?.as_deref(),
        Some(&b"hello again"[..])
    );
    assert!(
        alice.delete(b"greeting")?,
        "DELETE answers whether it existed"
    );
    assert_eq!(bob.get(b"greeting")?, None);
    println!("bob PUT, alice GET, alice DELETE, bob GET: absent");

    // A node goes down: keys whose candidates or data entries it holds are
    // unavailable (typed, naming the node), the others are served.
    fabric.set_node_down(NodeId(1), true)?;
    let mut served = 0;
    for i in 0..20 {
        let key = format!("key-{i}");
        match write(&mut alice, key.as_bytes(), b"v") {
            Ok(()) => served += 1,
            Err(Error::Unreachable(node, _)) => {
                println!("PUT {key}: {node} is unreachable; nothing was written")
            }
            Err(e) => return Err(e.into()),
        }
    }
    println!("with node 1 down, {served} of 20 PUTs succeeded");
    fabric.set_node_down(NodeId(1), false)?;
    Ok(())
}

/// A PUT whose caller must know the write's fate. An error says what it
/// promises (`Error::outcome`): `OutcomeUnknown` alone leaves it open (a
/// completion was lost after the write may have executed), and the client
/// never retries that as if nothing happened. Reading the key back tells:
/// if it holds the value, the write took effect (or a later equal write
/// did); if not, it has not yet, and writing again settles it (the new PUT
/// aborts the pending entry or finds it committed before it installs its
/// own: the `outcome_unknown` example). Every other error committed
/// nothing.
fn write(
    client: &mut Client<impl nessie_protocol::Endpoint>,
    key: &[u8],
    value: &[u8],
) -> Result<(), Error> {
    let result = client.put(key, value);
    match Outcome::of(&result) {
        Outcome::Committed | Outcome::NotCommitted => result.map(|_| ()),
        Outcome::Unknown => match client.get(key)? {
            Some(v) if v == value => Ok(()),
            _ => client.put(key, value).map(|_| ()),
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        super::main().expect("the example runs to the end");
    }
}
