//! Many operations in flight from one thread: a `Pipeline` running a batch
//! (results in request order), then the same pipeline's futures
//! (`AsyncPipeline`) awaited on a minimal executor, on an embedded
//! three-node cluster in size classes with values of mixed sizes.
//!
//! ```text
//! cargo run -p nessie-fabric-sim --example pipelined
//! ```
//!
//! A pipeline of depth D runs as D protocol clients of its node (D client
//! ids, D data table shares), so `clients_per_node` must leave room for
//! them. Each future, like each batch position, answers for its own
//! operation only; the blocking and the async faces never mix on one
//! pipeline (`AsyncPipeline::new` refuses one that still holds the other
//! face's operations).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::layout::SizeClass;
use nessie_protocol::pipeline::{AsyncPipeline, Pipeline};
use nessie_protocol::{Config, Fabric, NodeId, Request, Response};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Entries of 64 and 256 bytes beside the main class (128 B keys,
    // 4 KiB values): each value is written in the smallest that holds it.
    let cfg = Arc::new(Config {
        nodes: 3,
        clients_per_node: 8,
        max_value_len: 4096,
        dtes_per_node: 512,
        size_classes: vec![
            SizeClass {
                entry_bytes: 64,
                dtes_per_node: 2048,
            },
            SizeClass {
                entry_bytes: 256,
                dtes_per_node: 2048,
            },
        ],
        ..Config::default()
    });
    cfg.validate()?;
    let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology()))?;

    // A batch: 4 operations in flight at a time (clients 0-3 of node 0).
    let mut batch = Pipeline::new(cfg.clone(), NodeId(0), 0, 4, fabric.open(NodeId(0))?)?;
    let puts = (0..16u32).map(|i| {
        let value = vec![b'a' + (i % 26) as u8; 1 << (i % 12)];
        Request::Put(format!("key-{i}").into_bytes(), value)
    });
    let written = batch.run(puts);
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    println!(
        "a batch of 16 PUTs of 1 B to 2 KiB, 4 in flight: {:?} round trips in all",
        batch.total_stats().round_trips
    );

    // Futures: the same kind of pipeline on node 1 (clients 0-3 there),
    // wrapped; every future resolves to its own operation's answer.
    let futures = AsyncPipeline::open(cfg.clone(), NodeId(1), 0, 4, fabric.open(NodeId(1))?)?;
    let gets: Vec<_> = (0..16u32)
        .map(|i| futures.get(format!("key-{i}").as_bytes()))
        .collect();
    for (i, get) in gets.into_iter().enumerate() {
        match block_on(get)? {
            Response::Get(Some(v)) => assert_eq!(v.len(), 1 << (i % 12)),
            other => panic!("key-{i}: {other:?}"),
        }
    }
    let existed = block_on(futures.delete(b"key-3"))?;
    assert_eq!(existed, Response::Delete(true));
    assert_eq!(block_on(futures.get(b"key-3"))?, Response::Get(None));
    println!("16 GETs and a DELETE as futures on node 1: every answer its own operation's");
    Ok(())
}

/// Polls `fut` until it is ready. The pipeline's futures make progress on
/// every poll (they poll the fabric's completions, as an RDMA polling loop
/// does) and ask to be polled again, so a waker that does nothing is
/// enough; any executor runs them alike.
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        super::main().expect("the example runs to the end");
    }
}
