//! Clients without storage (issue 41, docs/protocol.md §2.4), the story on
//! the simulated fabric: a client that hosts no data table writes its
//! entries over the fabric through memory windows the node's agent binds;
//! it asks for its first keys when it starts, writes each entry of its share
//! once per generation of its windows, and asks for the next generation
//! when its share has nothing left to reuse; a window bound again under it
//! (its lease taken back) refuses its WRITEs, and it asks again. Clients of
//! the nodes read what it wrote, and it reads theirs.

use std::thread;
use std::time::Duration;

use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::pure::LeaseBlock;
use nessie_protocol::{
    Client, ClientId, Config, Endpoint, Fabric, NodeId, Op, OpId, OpOutput, Region, WorkRequest,
};
use nessie_tests::SimCluster;

/// Two nodes, one client of each node and one client without storage on
/// each; shares of 8 entries, so a few dozen PUTs run through generations.
fn config() -> Config {
    Config {
        nodes: 2,
        index_slots_per_node: 64,
        dtes_per_node: 16,
        clients_per_node: 1,
        pure_clients_per_node: 1,
        candidates: 2,
        cache_capacity: 0,
        expiration: Duration::from_millis(5),
        clock_skew: Duration::from_micros(100),
        deadline_margin: Duration::from_millis(1),
        ..Config::default()
    }
}

/// The pure client of node 1.
const PURE: ClientId = ClientId {
    node: NodeId(1),
    index: 1,
};

/// [`config`] with a lease term of `term`, and node 1's agent running.
fn leased(term: Duration) -> (SimCluster, nessie_systems::AgentThread) {
    let cluster = SimCluster::new(Config {
        lease_term: term,
        ..config()
    });
    let agent = cluster.agent(1);
    (cluster, agent)
}

/// [`leased`] with a lease term of 60 ms.
fn short_lease() -> (SimCluster, nessie_systems::AgentThread) {
    leased(Duration::from_millis(60))
}

fn pure_client(cluster: &SimCluster) -> Client<SimEndpoint> {
    let ep = cluster.fabric.open(PURE.node).expect("endpoint");
    Client::new(cluster.cfg.clone(), PURE, ep).expect("a client without storage")
}

fn lease_block(cluster: &SimCluster) -> LeaseBlock {
    let offset = cluster.cfg.lease_block(PURE).expect("a pure client");
    let bytes = cluster
        .fabric
        .read_bytes(
            PURE.node,
            Region::Data,
            offset,
            cluster.cfg.lease_block_bytes(),
        )
        .expect("lease block");
    LeaseBlock::decode(&bytes).expect("decodes")
}

#[test]
fn a_client_without_storage_writes_through_its_windows_and_others_read_it() {
    let cluster = SimCluster::new(config());
    let _agent = cluster.agent(1);
    let mut pure = pure_client(&cluster);
    let mut local = cluster.client(0, 0);
    assert_eq!(pure.put(b"k1", b"from the pure client"), Ok(false));
    assert_eq!(
        local.get(b"k1").unwrap().as_deref(),
        Some(&b"from the pure client"[..])
    );
    assert_eq!(local.put(b"k2", b"from node 0"), Ok(false));
    assert_eq!(
        pure.get(b"k2").unwrap().as_deref(),
        Some(&b"from node 0"[..])
    );
    let block = lease_block(&cluster);
    assert_eq!(block.lease.granted, 1, "its first generation");
    assert!(block.granted_keys(block.lease.holder).is_some());
    let stats = pure.last_stats();
    assert_eq!(
        stats.local_writes, 0,
        "a client without storage writes no CPU memory"
    );
}

#[test]
fn its_share_runs_through_generations_of_its_windows() {
    let cluster = SimCluster::new(config());
    let _agent = cluster.agent(1);
    let mut pure = pure_client(&cluster);
    let mut local = cluster.client(0, 0);
    // 8 entries per share: 40 updates need several generations, each
    // entry reused only once its window was bound again (and T passed).
    for i in 0..40u32 {
        let value = format!("v{i}");
        // Faster than T, a share has nothing expired to reuse (as any
        // client's): wait for T and write again.
        let mut tries = 0;
        while let Err(e) = pure.put(b"key", value.as_bytes()) {
            assert!(
                matches!(e, nessie_protocol::Error::DataTableFull { .. }) && tries < 100,
                "put {i}: {e}"
            );
            tries += 1;
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            local.get(b"key").unwrap().as_deref(),
            Some(value.as_bytes())
        );
    }
    let block = lease_block(&cluster);
    assert!(
        block.lease.granted >= 4,
        "40 entries from a share of 8: generation {}",
        block.lease.granted
    );
}

#[test]
fn a_window_bound_again_under_it_refuses_its_writes_and_it_asks_again() {
    let cluster = SimCluster::new(config());
    let _agent = cluster.agent(1);
    let mut pure = pure_client(&cluster);
    pure.put(b"a", b"1").expect("put");
    let before = lease_block(&cluster).lease.granted;
    // The node binds the client's windows again without being asked (as
    // when it takes a lease back): the client's keys are dead.
    let mut node = cluster.fabric.open(NodeId(1)).expect("node");
    for class in 0..cluster.cfg.data_tables().len() as u8 {
        let w = cluster.cfg.window_of(PURE, class).expect("window");
        let (offset, len) = cluster.cfg.share_range(PURE, class).expect("share");
        node.post(WorkRequest {
            id: OpId(1),
            op: Op::BindWindow {
                index: w.index,
                offset,
                len,
            },
        })
        .expect("bind");
        let mut out = Vec::new();
        node.wait(&mut out, Duration::from_millis(50));
        assert!(matches!(out[0].result, Ok(OpOutput::Bound { .. })));
    }
    pure.put(b"b", b"2")
        .expect("a later PUT gets new keys and succeeds");
    assert!(lease_block(&cluster).lease.granted > before);
    let mut local = cluster.client(0, 0);
    assert_eq!(local.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(local.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
}

/// Identity by lease: a share whose holder stopped (here: dropped without a
/// word) stays its holder's until the agent takes it back, the lease term
/// after its last heartbeat; a client made with the same id meanwhile is
/// refused on its first write (`ClientIdInUse`), then takes the share.
#[test]
fn a_share_is_its_holders_until_the_agent_takes_it_back() {
    let (cluster, _agent) = short_lease();
    let mut first = pure_client(&cluster);
    first.put(b"a", b"1").expect("put");
    drop(first);
    let mut second = pure_client(&cluster);
    assert_eq!(
        second.put(b"b", b"2"),
        Err(nessie_protocol::Error::ClientIdInUse(PURE)),
        "the first holder's lease stands"
    );
    thread::sleep(Duration::from_millis(150));
    second
        .put(b"b", b"2")
        .expect("the share was taken back and is free");
    let mut local = cluster.client(0, 0);
    assert_eq!(local.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(local.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
}

/// A share given back (`release_share`) is taken by the next client at
/// once, with no lease term between (the term here is an hour), in a newer
/// generation: the releaser's keys are revoked before the taker gets its
/// own, so a WRITE it had on its way lands nowhere, however late. The
/// releaser's writes stay; releasing again, or a client holding no share,
/// has nothing to do. A taker that keeps the generation it finds
/// (`take-without-new-generation`) keeps the releaser's keys good, and the
/// late WRITE lands: this test catches it.
#[test]
fn a_released_share_is_taken_at_once_and_the_releasers_keys_are_revoked() {
    /// The story with the taker's `faults`: what a WRITE under the
    /// releaser's keys, landing once the taker wrote, does.
    fn late_write_after_a_release(
        faults: nessie_protocol::Faults,
    ) -> Result<OpOutput, nessie_protocol::FabricError> {
        let (cluster, _agent) = leased(Duration::from_secs(3600));
        let mut first = pure_client(&cluster);
        first.put(b"a", b"1").expect("put");
        let old = first.state().pure.as_ref().expect("pure").keys.clone();
        let before = lease_block(&cluster).lease;
        first.release_share().expect("released");
        assert_eq!(lease_block(&cluster).lease.holder, 0, "the share is free");
        assert_eq!(lease_block(&cluster).lease.granted, before.granted);
        first.release_share().expect("nothing left to give back");
        drop(first);
        let mut second = pure_client(&cluster);
        second.state_mut().faults = faults;
        second
            .put(b"b", b"2")
            .expect("the released share is taken at once");
        let window = cluster.cfg.window_of(PURE, 0).expect("window");
        let (offset, _) = cluster.cfg.share_range(PURE, 0).expect("share");
        let mut late = cluster.fabric.open(NodeId(0)).expect("endpoint");
        late.post(WorkRequest {
            id: OpId(9),
            op: Op::Windowed {
                window,
                key: old[0],
                op: Box::new(Op::Write {
                    addr: nessie_protocol::RemoteAddr::data(NodeId(1), offset),
                    data: vec![0xee; 8],
                }),
            },
        })
        .expect("posted");
        let mut out = Vec::new();
        late.wait(&mut out, Duration::from_millis(50));
        let mut local = cluster.client(0, 0);
        local
            .release_share()
            .expect("a client with storage has no share to give back");
        if faults == nessie_protocol::Faults::default() {
            // Nothing of the releaser landed: its writes and the taker's
            // stand. (With the switch the late WRITE lands on the
            // releaser's entry of `a`, which then reads as gone.)
            let after = lease_block(&cluster).lease;
            assert!(after.granted > before.granted, "{before:?} -> {after:?}");
            assert_eq!(local.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
            assert_eq!(local.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
        }
        out.remove(0).result
    }
    assert!(matches!(
        late_write_after_a_release(Default::default()),
        Err(nessie_protocol::FabricError::WindowRefused { .. })
    ));
    let keeps_generation = nessie_protocol::Faults {
        take_without_new_generation: true,
        ..Default::default()
    };
    assert_eq!(
        late_write_after_a_release(keeps_generation),
        Ok(OpOutput::Written),
        "a taker keeping the releaser's generation keeps its keys good"
    );
}

/// A holder whose heartbeat stands still for the lease term (it wrote
/// nothing for that long) loses its share: its next write says so, with
/// nothing of it linked, and its earlier writes stay.
#[test]
fn a_holder_silent_for_the_lease_term_loses_its_share() {
    let (cluster, _agent) = short_lease();
    let mut pure = pure_client(&cluster);
    pure.put(b"a", b"1").expect("put");
    thread::sleep(Duration::from_millis(150));
    assert_eq!(
        pure.put(b"a", b"2"),
        Err(nessie_protocol::Error::LeaseLost(PURE))
    );
    let mut local = cluster.client(0, 0);
    assert_eq!(local.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

/// Renewal without a write (issue 41): a holder that only reads keeps its
/// share, since an operation whose heartbeat is overdue (two thirds of the
/// lease term since the last) beats first; a holder that runs nothing
/// keeps it by `renew_lease` every third of the term. With the beat only
/// in the writes' data rounds (`pure-beats-only-on-writes`), the reader
/// loses its share while it runs: this test catches that switch.
#[test]
fn a_holder_that_only_reads_or_renews_keeps_its_share() {
    fn reads_for_three_terms(
        faults: nessie_protocol::Faults,
    ) -> Result<bool, nessie_protocol::Error> {
        let (cluster, _agent) = short_lease();
        let mut pure = pure_client(&cluster);
        pure.state_mut().faults = faults;
        pure.put(b"a", b"1").expect("put");
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(180) {
            assert_eq!(pure.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
            thread::sleep(Duration::from_millis(5));
        }
        // Idle, renewing alone.
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(180) {
            pure.renew_lease()?;
            thread::sleep(Duration::from_millis(20));
        }
        pure.put(b"a", b"2")
    }
    assert_eq!(reads_for_three_terms(Default::default()), Ok(true));
    let only_writes = nessie_protocol::Faults {
        pure_beats_only_on_writes: true,
        ..Default::default()
    };
    assert_eq!(
        reads_for_three_terms(only_writes),
        Err(nessie_protocol::Error::LeaseLost(PURE)),
        "a reader whose operations never beat loses its share"
    );
}

/// `renew_lease` beats alone once a third of the lease term passed since
/// the last beat, and not before: the heartbeat count in the lease block
/// moves by one. (Here 130 ms after the first write's beat, with a term of
/// 300 ms: past the third, short of the two thirds at which any
/// operation's preamble would beat by itself, so only the renewal's own
/// CAS moves it.)
#[test]
fn renew_lease_beats_when_due_and_only_then() {
    let (cluster, _agent) = leased(Duration::from_millis(300));
    let mut pure = pure_client(&cluster);
    pure.put(b"a", b"1").expect("put");
    let beat = lease_block(&cluster).beat;
    pure.renew_lease().expect("nothing due");
    assert_eq!(lease_block(&cluster).beat, beat, "not due yet");
    thread::sleep(Duration::from_millis(130));
    pure.renew_lease().expect("renewed");
    assert_eq!(lease_block(&cluster).beat, beat + 1, "the renewal beat");
}

/// Where the data lives, honestly (issue 41): with node 2 of three down, a
/// client without storage whose share is on node 1 writes every key whose
/// candidates are all live (its entry goes to its share on node 1, not to
/// the dead node), and a key with a candidate on node 2 fails naming node
/// 2 and why it was needed (a candidate bucket of the key), nothing
/// written. A client of node 0 reads what it wrote. With its share's node
/// down instead, a key whose candidates are all live fails naming the
/// share.
#[test]
fn with_a_node_down_a_put_whose_share_and_candidates_are_live_succeeds() {
    let cluster = SimCluster::new(Config {
        nodes: 3,
        ..config()
    });
    let _agent = cluster.agent(1);
    let mut pure = pure_client(&cluster);
    pure.put(b"warm-up", b"x")
        .expect("its share taken while every node is up");
    cluster.fabric.set_node_down(NodeId(2), true).unwrap();
    let h = cluster.cfg.hasher();
    let (mut written, mut refused) = (Vec::new(), 0);
    for i in 0..20 {
        let key = format!("placed-{i}").into_bytes();
        let live = h.candidates(&key).iter().all(|a| a.node != NodeId(2));
        match pure.put(&key, b"v") {
            Ok(_) => {
                assert!(live, "a key with a candidate on the dead node was written");
                written.push(key);
            }
            Err(e) => {
                assert!(
                    !live,
                    "a key whose share and candidates are live failed: {e}"
                );
                assert!(
                    matches!(
                        e,
                        nessie_protocol::Error::Unreachable(
                            NodeId(2),
                            nessie_protocol::Needed::Candidate
                        )
                    ),
                    "{e}"
                );
                refused += 1;
            }
        }
    }
    assert!(
        !written.is_empty() && refused > 0,
        "both kinds of keys drawn"
    );
    let mut reader = cluster.client(0, 0);
    for key in &written {
        assert_eq!(reader.get(key).unwrap().as_deref(), Some(&b"v"[..]));
    }
    // Its own share's node down: a key whose candidates are all live
    // still needs the share, and the error says so.
    cluster.fabric.set_node_down(NodeId(2), false).unwrap();
    cluster.fabric.set_node_down(NodeId(1), true).unwrap();
    let key = nessie_tests::find_key(&cluster.cfg, "elsewhere-", |c| {
        c.iter().all(|a| a.node != NodeId(1))
    });
    let e = pure.put(&key, b"v").unwrap_err();
    assert_eq!(
        e,
        nessie_protocol::Error::Unreachable(NodeId(1), nessie_protocol::Needed::Share),
        "{e}"
    );
}
