//! Pipelines: many operations in flight per client thread over one endpoint
//! (`nessie_protocol::pipeline`), in batches, through the non-blocking API
//! and as futures; their concurrent histories are linearizable, a lost
//! completion ends at the deadline, and a pipeline deeper than the node's
//! client ids is a typed error.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use nessie_check::{ret_of, unique_value, Recorder};
use nessie_fabric_sim::{Injection, SimEndpoint};
use nessie_protocol::pipeline::{AsyncPipeline, Finished, Pipeline};
use nessie_protocol::{Config, Error, Fabric, NodeId, TransportFault};
use nessie_protocol::{Request, Response};
use nessie_tests::{assert_linearizable, time_limit, SimCluster};

fn cfg() -> Config {
    Config {
        clients_per_node: 8,
        dtes_per_node: 8 * 1024,
        ..Config::default()
    }
}

fn pipeline(cluster: &SimCluster, node: u16, first: u16, depth: u16) -> Pipeline<SimEndpoint> {
    let ep = cluster.fabric.open(NodeId(node)).unwrap();
    Pipeline::new(cluster.cfg.clone(), NodeId(node), first, depth, ep).unwrap()
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

/// The value of key `i` in the tests that write each key once: its own.
fn value(i: usize) -> Vec<u8> {
    unique_value(&key(i), 0, i as u64, 16)
}

#[test]
fn a_batch_returns_every_result_in_request_order() {
    let _limit = time_limit(
        "a_batch_returns_every_result_in_request_order",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::new(cfg());
    let mut p = pipeline(&cluster, 0, 0, 8);
    let puts: Vec<_> = (0..100)
        .map(|i| Request::Put(key(i), vec![i as u8; 10]))
        .collect();
    assert!(p.run(puts).iter().all(|r| r == &Ok(Response::Put(false))));
    let gets: Vec<_> = (0..100).map(|i| Request::Get(key(i))).collect();
    for (i, r) in p.run(gets).into_iter().enumerate() {
        assert_eq!(r, Ok(Response::Get(Some(vec![i as u8; 10]))));
    }
    let deletes: Vec<_> = (0..100)
        .step_by(2)
        .map(|i| Request::Delete(key(i)))
        .collect();
    assert!(p
        .run(deletes)
        .iter()
        .all(|r| r == &Ok(Response::Delete(true))));
    // Another client sees the pipeline's writes.
    let mut c = cluster.client(1, 0);
    assert_eq!(c.get(&key(2)).unwrap(), None);
    assert_eq!(c.get(&key(3)).unwrap(), Some(vec![3; 10]));
    assert_eq!(p.outstanding(), 0);
    assert!(p.total_stats().round_trips > 0);
}

#[test]
fn a_pipeline_deeper_than_the_nodes_client_ids_is_a_typed_error() {
    let _limit = time_limit(
        "a_pipeline_deeper_than_the_nodes_client_ids_is_a_typed_error",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::new(cfg());
    let ep = cluster.fabric.open(NodeId(0)).unwrap();
    let r = Pipeline::new(cluster.cfg.clone(), NodeId(0), 4, 5, ep);
    assert!(matches!(r, Err(Error::Config(_))));
}

/// Operations the caller submitted before a batch keep their tags and are
/// handed out by `progress`, never mixed into the batch's results (their
/// tags may equal batch positions).
#[test]
fn a_batch_leaves_the_callers_own_submissions_to_progress() {
    let cluster = SimCluster::new(cfg());
    let mut p = pipeline(&cluster, 0, 0, 2);
    p.submit(0, Request::Put(key(0), b"caller".to_vec()));
    p.submit(1, Request::Get(key(1)));
    let batch = vec![
        Request::Get(key(2)),
        Request::Put(key(3), b"batch".to_vec()),
    ];
    assert_eq!(
        p.run(batch),
        vec![Ok(Response::Get(None)), Ok(Response::Put(false))]
    );
    let mut done = Vec::new();
    for _ in 0..10_000 {
        if p.outstanding() == 0 {
            break;
        }
        p.progress(&mut done, Duration::from_millis(1));
    }
    assert_eq!(p.outstanding(), 0);
    done.sort_by_key(|f| f.tag);
    let got: Vec<_> = done.into_iter().map(|f| (f.tag, f.result)).collect();
    assert_eq!(
        got,
        vec![(0, Ok(Response::Put(false))), (1, Ok(Response::Get(None)))]
    );
    let mut c = cluster.client(1, 0);
    assert_eq!(c.get(&key(0)).unwrap(), Some(b"caller".to_vec()));
    assert_eq!(c.get(&key(3)).unwrap(), Some(b"batch".to_vec()));
}

/// Three threads, each a pipeline of depth 4 with random operations on six
/// hot keys, so that one pipeline's own operations race each other too;
/// every operation is recorded from its submission to its result. Each of a
/// pipeline's 8 slots of operations in flight is a client of its own in the
/// history (an operation takes a free slot when submitted and frees it when
/// it finishes), so that every client is a sequential process; every PUT
/// writes a value of its own.
#[test]
fn pipelined_histories_on_hot_keys_are_linearizable() {
    let _limit = time_limit(
        "pipelined_histories_on_hot_keys_are_linearizable",
        0x1234_5678,
        Duration::from_secs(120),
    );
    let cluster = Arc::new(SimCluster::new(cfg()));
    let rec = Arc::new(Recorder::new());
    let handles: Vec<_> = (0..3u16)
        .map(|t| {
            let (cluster, rec) = (cluster.clone(), rec.clone());
            thread::spawn(move || {
                let mut p = pipeline(&cluster, t, 0, 4);
                let mut rng = 0x1234_5678_u64 + u64::from(t);
                let mut slots = Slots {
                    pending: HashMap::new(),
                    free: (0..WINDOW).rev().collect(),
                };
                let mut done = Vec::new();
                for tag in 0..300u64 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let k = key((rng % 6) as usize);
                    let req = match rng % 10 {
                        0..=3 => Request::Get(k),
                        4..=8 => {
                            let v = unique_value(&k, u64::from(t), tag, 16);
                            Request::Put(k, v)
                        }
                        _ => Request::Delete(k),
                    };
                    let slot = slots.free.pop().expect("a free slot below the window");
                    slots.pending.insert(tag, (slot, req.clone(), rec.tick()));
                    p.submit(tag, req);
                    while p.outstanding() >= WINDOW {
                        p.progress(&mut done, Duration::from_millis(1));
                        record(&rec, t, &mut slots, &mut done);
                    }
                }
                while p.outstanding() > 0 {
                    p.progress(&mut done, Duration::from_millis(1));
                    record(&rec, t, &mut slots, &mut done);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let n = assert_linearizable(&rec.events());
    assert!(n > 500, "{n}");
}

/// Operations a pipeline thread keeps in flight.
const WINDOW: usize = 8;

/// A pipeline thread's operations in flight, by tag: (slot, operation,
/// invocation time); and its free slots.
struct Slots {
    pending: HashMap<u64, (usize, Request, u64)>,
    free: Vec<usize>,
}

/// Records the finished operations of thread `t`, each as client `t x 100 +
/// slot`, its result by [`ret_of`] (an error by what it promises).
fn record(rec: &Recorder, t: u16, slots: &mut Slots, done: &mut Vec<Finished>) {
    for Finished { tag, result, .. } in done.drain(..) {
        let (slot, request, invoke) = slots.pending.remove(&tag).expect("submitted");
        rec.push(nessie_check::Event {
            client: usize::from(t) * 100 + slot,
            request,
            ret: ret_of(&result),
            invoke,
            response: rec.tick(),
        });
        slots.free.push(slot);
    }
}

/// Polls every future in turn until all are ready (a minimal executor: the
/// pipeline's futures need no runtime).
fn join_all<F: Future + Unpin>(mut futures: Vec<F>) -> Vec<F::Output> {
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    let mut cx = Context::from_waker(Waker::noop());
    while out.iter().any(Option::is_none) {
        for (f, o) in futures.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                if let Poll::Ready(v) = Pin::new(f).poll(&mut cx) {
                    *o = Some(v);
                }
            }
        }
    }
    out.into_iter().map(Option::unwrap).collect()
}

#[test]
fn futures_complete_in_any_order_without_a_runtime() {
    let _limit = time_limit(
        "futures_complete_in_any_order_without_a_runtime",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::new(cfg());
    let p = AsyncPipeline::new(pipeline(&cluster, 0, 0, 8));
    let puts: Vec<_> = (0..40).map(|i| p.put(&key(i), &value(i))).collect();
    assert!(join_all(puts)
        .iter()
        .all(|r| r == &Ok(Response::Put(false))));
    let gets: Vec<_> = (0..40).rev().map(|i| p.get(&key(i))).collect();
    for (r, i) in join_all(gets).into_iter().zip((0..40).rev()) {
        assert_eq!(r, Ok(Response::Get(Some(value(i)))), "key {i}");
    }
}

/// Node 1 loses every completion for a while: the operations whose requests
/// went there end by their attempts' deadlines (and are retried), the others
/// are not held up, and the batch finishes.
#[test]
fn lost_completions_end_at_the_deadline_and_do_not_stall_the_pipeline() {
    let _limit = time_limit(
        "lost_completions_end_at_the_deadline_and_do_not_stall_the_pipeline",
        "-",
        Duration::from_secs(60),
    );
    let cluster = SimCluster::new(Config {
        expiration: Duration::from_millis(50),
        deadline_margin: Duration::from_millis(5),
        ..cfg()
    });
    let mut p = pipeline(&cluster, 0, 0, 8);
    cluster
        .fabric
        .inject(NodeId(1), Injection::next(TransportFault::Vanish, 20))
        .unwrap();
    let puts: Vec<_> = (0..60).map(|i| Request::Put(key(i), value(i))).collect();
    let results = p.run(puts);
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert!(ok >= 50, "{ok} of 60: {results:?}");
    let mut c = cluster.client(2, 0);
    for (i, r) in results.iter().enumerate() {
        let now = c.get(&key(i)).unwrap();
        match r {
            Ok(_) => assert_eq!(now, Some(value(i))),
            Err(Error::OutcomeUnknown(_)) => {}
            Err(_) => assert_eq!(now, None, "{r:?}"),
        }
    }
}
