//! Online growth of the index (docs/protocol.md §2.5): a PUT that finds the
//! index full starts a growth, writes help it along, `Client::grow` drives
//! it to its end, and every key stays readable throughout, by clients whose
//! view of the index is behind as well as by those who know.

use std::sync::Arc;
use std::thread;

use nessie_protocol::growth::IndexView;
use nessie_protocol::machine::{GrowLogic, GrowMachine, Swept};
use nessie_protocol::{Config, Error};
use nessie_tests::SimCluster;

fn growing(generations: u8, slots: u32, buckets: u8) -> Config {
    Config {
        nodes: 3,
        index_slots_per_node: slots,
        index_generations: generations,
        dtes_per_node: 16_384,
        clients_per_node: 2,
        max_key_len: 16,
        max_value_len: 8,
        candidates: 2,
        bucket_slots: buckets,
        cache_capacity: 0,
        ..Config::default()
    }
}

fn key(k: u32) -> Vec<u8> {
    format!("key-{k}").into_bytes()
}

#[test]
fn an_index_that_fills_grows_and_every_key_stays_readable() {
    let cfg = growing(4, 16, 4);
    let cluster = SimCluster::new(cfg.clone());
    let mut c = cluster.client(0, 0);
    // A reader that looks once before the growth (a new client reads the
    // directory at its first operation), then not again.
    let mut reader = cluster.client(1, 0);
    assert_eq!(reader.get(&key(0)).unwrap(), None);
    // Generation 0 holds 48 entries; 300 keys need generation 3 (384).
    for k in 0..300 {
        c.put(&key(k), &k.to_le_bytes())
            .unwrap_or_else(|e| panic!("put {k}: {e}"));
    }
    let view = c.finish_growth().unwrap();
    assert!(view.newest >= 3 && !view.growing(), "{view:?}");
    for k in 0..300 {
        assert_eq!(
            reader.get(&key(k)).unwrap(),
            Some(k.to_le_bytes().to_vec()),
            "key {k}"
        );
    }
    assert!(
        reader.total_stats().stale_views > 0,
        "a reader that never looked met the growth by its seals"
    );
    assert!(c.total_stats().growth_seals > 0);
}

#[test]
fn an_index_at_its_last_generation_refuses_with_the_limit() {
    let cfg = growing(2, 8, 4);
    let cluster = SimCluster::new(cfg);
    let mut c = cluster.client(0, 0);
    let mut refused = None;
    for k in 0..400 {
        match c.put(&key(k), b"v") {
            Ok(_) => {}
            Err(e) => {
                refused = Some((k, e));
                break;
            }
        }
    }
    let (k, e) = refused.expect("two generations of 24 and 48 entries cannot take 400 keys");
    assert_eq!(
        e,
        Error::IndexAtLimit {
            generation: 1,
            generations: 2
        },
        "after {k} keys"
    );
    assert!(k > 24, "it grew once before refusing ({k} keys)");
    assert_eq!(
        c.grow(),
        Err(Error::IndexAtLimit {
            generation: 1,
            generations: 2
        })
    );
}

#[test]
fn writers_and_readers_race_a_growth_and_lose_nothing() {
    let cfg = growing(4, 16, 4);
    let cluster = Arc::new(SimCluster::new(cfg));
    let mut handles = Vec::new();
    for w in 0..3u16 {
        let cluster = cluster.clone();
        handles.push(thread::spawn(move || {
            let mut c = cluster.client(w % 3, 0);
            for i in 0..100u32 {
                let k = u32::from(w) * 1000 + i;
                c.put(&key(k), &k.to_le_bytes())
                    .unwrap_or_else(|e| panic!("put {k}: {e}"));
                // Read back one written earlier, by this writer.
                let back = u32::from(w) * 1000 + i / 2;
                assert_eq!(
                    c.get(&key(back)).unwrap(),
                    Some(back.to_le_bytes().to_vec()),
                    "key {back}"
                );
            }
        }));
    }
    let sweeper = {
        let cluster = cluster.clone();
        thread::spawn(move || {
            let mut c = cluster.client(1, 1);
            let mut last = IndexView::default();
            for _ in 0..50 {
                match c.grow() {
                    Ok(v) => last = v,
                    // The writers may have grown it to its last
                    // generation first.
                    Err(Error::IndexAtLimit { generation, .. }) => {
                        last.newest = last.newest.max(generation);
                        break;
                    }
                    Err(e) => panic!("grow: {e}"),
                }
            }
            last
        })
    };
    for h in handles {
        h.join().unwrap();
    }
    let last = sweeper.join().unwrap();
    assert!(last.newest >= 1, "{last:?}");
    let mut reader = cluster.client(2, 1);
    for w in 0..3u32 {
        for i in 0..100 {
            let k = w * 1000 + i;
            assert_eq!(reader.get(&key(k)).unwrap(), Some(k.to_le_bytes().to_vec()));
        }
    }
}

/// A growth whose starter stops right after starting it is finished by the
/// writers that meet it, each taking a step of the sweep; with the switch
/// `skip-growth-help` (writes do not help) it never ends.
#[test]
fn a_growth_whose_starter_stopped_is_finished_by_the_writers_alone() {
    for skip in [false, true] {
        let cluster = SimCluster::new(growing(3, 16, 4));
        let mut starter = cluster.client(0, 0);
        let started = starter.run_once(GrowMachine::new(GrowLogic::start()));
        assert_eq!(started, Ok(Swept::Chunk), "the step started the growth");
        drop(starter);
        let mut w = cluster.client(1, 0);
        w.state_mut().faults.skip_growth_help = skip;
        // Generation 0 holds 48 entries, generation 1 96.
        for k in 0..80 {
            w.put(&key(k), b"v")
                .unwrap_or_else(|e| panic!("put {k}: {e}"));
        }
        let view = w.state().view;
        if skip {
            assert!(
                view.growing(),
                "without help the growth never ends: {view:?}"
            );
        } else {
            assert_eq!(view, IndexView::stable(1));
        }
        for k in 0..80 {
            assert_eq!(w.get(&key(k)).unwrap(), Some(b"v".to_vec()), "key {k}");
        }
    }
}

/// While the index can still grow, an insert grows it rather than make a
/// chain of more than `growth_depth` moves (`Config::growth_depth`): with
/// 0, the first key whose candidates are all taken grows it, before any
/// MIGRATE; with the whole `max_migrate_depth`, chains fill generation 0
/// further first. In the last generation, chains fill it either way.
#[test]
fn a_growing_index_grows_rather_than_chain_past_its_growth_depth() {
    // Keys stored when the growth started, and the moves made before.
    let at_growth = |depth: u8| {
        let cfg = Config {
            growth_depth: depth,
            ..growing(3, 8, 1)
        };
        let cluster = SimCluster::new(cfg);
        let mut c = cluster.client(0, 0);
        for k in 0..200 {
            let moves = c.total_stats().migrations;
            c.put(&key(k), b"v")
                .unwrap_or_else(|e| panic!("put {k}: {e}"));
            if c.state().view.newest > 0 {
                return (k, moves);
            }
        }
        panic!("24 entries never grew with 200 keys");
    };
    let (eager, moves) = at_growth(0);
    assert_eq!(moves, 0, "no chain before growing at depth 0");
    let (patient, chained) = at_growth(4);
    assert!(chained > 0, "chains of up to four moves first");
    assert!(
        eager < patient,
        "grown at {eager} keys with depth 0, {patient} with depth 4"
    );
    // Its last generation fills past the point where an index that can
    // still grow would have grown: chains up to `max_migrate_depth`.
    let cfg = Config {
        growth_depth: 0,
        ..growing(1, 48, 1)
    };
    let cluster = SimCluster::new(cfg);
    let mut c = cluster.client(0, 0);
    let mut stored = 0;
    while c.put(&key(stored), b"v").is_ok() {
        stored += 1;
    }
    assert!(c.total_stats().migrations > 0, "{stored} keys, with chains");
    assert!(stored > eager, "{stored} keys in 144 entries");
}
