//! An unknown outcome, provoked and handled: what `Error::OutcomeUnknown`
//! means, how to learn the write's fate, and when a retry is safe.
//!
//! ```text
//! cargo run -p nessie-fabric-sim --example outcome_unknown
//! ```
//!
//! The simulated fabric fails the next two compare-and-swaps on the
//! writer's own node: the commit of the new value and the CAS the client
//! posts to settle it; once *after* they executed (a NIC that applied the
//! requests and lost their acknowledgements), once *before*. The client
//! cannot tell the two apart, so both times it says so
//! (`UnknownStep::Commit`) and does not retry.
//! The caller then reads the key back. Every value this program writes is
//! unique to its write, so what the read shows decides:
//! - the key holds this write's value: it took effect (a retry would only
//!   write it again, and its answer "existed" would be this write's own);
//! - the key holds what it held before: it has not taken effect *yet*. Its
//!   entry is still pending, and its commit (a request the NIC may still
//!   hold) could land until the entry is aborted. Writing the value again
//!   settles it: that PUT aborts the pending entry (a reclaim,
//!   docs/protocol.md §5.6) or finds it committed, before it installs its
//!   own, so once it returns the earlier write can no longer land and the
//!   key holds the value exactly once;
//! - anything else: another client wrote the key since, and whether to write
//!   again is the application's decision, not the store's.
//!
//! Every other error promises that nothing was written
//! (`Error::outcome() == Outcome::NotCommitted`); `Error::is_retryable`
//! says which are worth trying again unchanged.

use std::sync::Arc;

use nessie_fabric_sim::{Injection, SimConfig, SimFabric};
use nessie_protocol::{
    Client, ClientId, Config, Error, Fabric, NodeId, OpKind, Outcome, TransportFault, UnknownStep,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cfg = Arc::new(Config {
        nodes: 3,
        ..Config::default()
    });
    cfg.validate()?;
    let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology()))?;
    let id = |node: u16| ClientId {
        node: NodeId(node),
        index: 0,
    };
    let mut alice = Client::new(cfg.clone(), id(0), fabric.open(NodeId(0))?)?;

    // A key none of whose index candidates is on alice's node, so the only
    // compare-and-swaps her update posts to node 0 are the commit of her new
    // entry (written into her own node's data table) and its settling CAS.
    let hasher = cfg.hasher();
    let key = (0..)
        .map(|i| format!("order-{i}").into_bytes())
        .find(|k| hasher.candidates(k).iter().all(|c| c.node != NodeId(0)))
        .expect("some key has no candidate on node 0");
    alice.put(&key, b"pending (write 1)")?;

    for (round, fault) in [
        TransportFault::FailAfterExecuting,
        TransportFault::FailBeforeExecuting,
    ]
    .into_iter()
    .enumerate()
    {
        // The fault: the next two CASes on node 0 report an error.
        fabric.inject(NodeId(0), Injection::next(fault, 2).only(OpKind::Cas))?;
        let before = alice.get(&key)?;
        let ours = format!("paid (write {})", round + 2).into_bytes();
        println!("\n{fault:?} on the commit and its settling CAS:");
        write(&mut alice, &key, &ours, before.as_deref())?;
        assert_eq!(alice.get(&key)?.as_deref(), Some(&ours[..]));
    }
    Ok(())
}

/// PUTs `ours` (a value unique to this write) under `key`, which held
/// `before`, and settles an unknown outcome by reading.
fn write(
    client: &mut Client<impl nessie_protocol::Endpoint>,
    key: &[u8],
    ours: &[u8],
    before: Option<&[u8]>,
) -> Result<(), Error> {
    let result = client.put(key, ours);
    println!("  PUT -> {result:?}");
    match result {
        Ok(existed) => println!("  committed (the key existed: {existed})"),
        Err(Error::OutcomeUnknown(why)) => {
            assert_eq!(why.step, UnknownStep::Commit);
            println!("  outcome unknown: {why}");
            println!(
                "  attempts the client made: {}",
                client.last_stats().attempts
            );
            // Learn the fate by reading: the value is unique to the write.
            let now = client.get(key)?;
            if now.as_deref() == Some(ours) {
                println!("  the read shows our value: it took effect");
            } else if now.as_deref() == before {
                println!("  the read shows the old value: not yet; writing again settles it");
                client.put(key, ours)?;
                println!("  written again: the earlier write can no longer land");
            } else {
                println!("  another client wrote the key since: {now:?}");
            }
        }
        Err(e) => {
            assert_eq!(e.outcome(), Outcome::NotCommitted);
            println!(
                "  not written, and never will be: {e} (retryable: {})",
                e.is_retryable()
            );
        }
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
