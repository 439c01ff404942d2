//! Conformance of a `Fabric` implementation to the semantics the protocol
//! relies on. The bodies are generic over the fabric, so the same checks run
//! against the simulator (`tests/tests/conformance.rs`) and against the verbs
//! backend on a real RDMA device (`fabric-verbs/tests/conformance.rs`, on
//! soft-RoCE in CI), including the contract of
//! [`Endpoint::post_unsignaled`].
//!
//! Each body needs a fabric of at least two nodes, each with at least 8 index
//! entries and 4 KiB of data table, zeroed.

use std::time::{Duration, Instant};

use nessie_protocol::{
    Client, ClientId, Completion, Config, Endpoint, Fabric, FabricError, NodeId, Op, OpId,
    OpOutput, RemoteAddr, WindowId, WorkRequest,
};

/// Waits (at most `within`) until `done` holds for the completions
/// gathered; returns them all.
fn gather<E: Endpoint>(
    ep: &mut E,
    within: Duration,
    done: impl Fn(&[Completion]) -> bool,
) -> Vec<Completion> {
    let start = Instant::now();
    let mut out = Vec::new();
    while !done(&out) && start.elapsed() < within {
        ep.wait(&mut out, Duration::from_millis(10));
    }
    out
}

/// Checks the completions of unsignaled requests among `got` (ids in
/// `unsignaled`): each must be a success, and with `suppressed` (the
/// backend suppresses successes) there must be none.
fn unsignaled_successes(got: &[Completion], unsignaled: std::ops::Range<u64>, suppressed: bool) {
    for c in got.iter().filter(|c| unsignaled.contains(&c.id.0)) {
        assert!(
            c.result.is_ok(),
            "unsignaled request {} failed: {:?}",
            c.id.0,
            c.result
        );
        assert!(
            !suppressed,
            "the successful unsignaled request {} completed on a backend that suppresses it",
            c.id.0
        );
    }
}

fn complete_all<E: Endpoint>(ep: &mut E, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    for _ in 0..10_000 {
        if out.len() >= n {
            break;
        }
        ep.wait(&mut out, Duration::from_millis(10));
    }
    assert_eq!(out.len(), n, "every posted request completes");
    out
}

fn run<E: Endpoint>(ep: &mut E, op: Op) -> Result<OpOutput, FabricError> {
    ep.post(WorkRequest { id: OpId(7), op })?;
    let c = complete_all(ep, 1).remove(0);
    assert_eq!(c.id, OpId(7));
    c.result
}

/// [`run`], after a refusal that may have failed the connection that
/// carried it (a NIC moves the queue pair to the error state on a remote
/// access error): a request meeting `NodeDown` while the node is dialled
/// again is tried again, for ten seconds at most.
fn run_once_up<E: Endpoint>(ep: &mut E, op: Op) -> Result<OpOutput, FabricError> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match run(ep, op.clone()) {
            Err(FabricError::NodeDown(_)) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn cas<E: Endpoint>(
    ep: &mut E,
    addr: RemoteAddr,
    expect: u64,
    new: u64,
) -> Result<OpOutput, FabricError> {
    run(ep, Op::Cas { addr, expect, new })
}

fn remote(node: u16, offset: u64) -> RemoteAddr {
    RemoteAddr::data(NodeId(node), offset)
}

/// WRITE then READ of another node's data table returns the bytes written,
/// for aligned and unaligned ranges.
pub fn read_write_round_trip<F: Fabric>(f: &F) {
    let mut ep = f.open(NodeId(0)).expect("open");
    for (offset, len) in [(0u64, 8usize), (64, 40), (131, 13)] {
        let data: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(37).wrapping_add(offset as u8))
            .collect();
        run(
            &mut ep,
            Op::Write {
                addr: remote(1, offset),
                data: data.clone(),
            },
        )
        .expect("write");
        let got = run(
            &mut ep,
            Op::Read {
                addr: remote(1, offset),
                len: len as u32,
            },
        )
        .expect("read");
        assert_eq!(got, OpOutput::Read(data), "range {offset}+{len}");
    }
}

/// How a fabric checks the range of a request through a memory window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowRange {
    /// The window's own range: a request outside it is refused (the
    /// simulated fabrics; a NIC as the InfiniBand specification has it).
    Window,
    /// Only the range of the region the window is bound over: soft-RoCE
    /// (`rdma_rxe`) checks a window's rkey, then the request's range against
    /// the window's memory registration, not the window. The protocol's
    /// safety rests on the key alone (docs/protocol.md §2.4); the range is
    /// defence in depth against a client writing outside its share.
    Region,
}

/// A memory window bound by the agent on node 1 carries WRITEs and CASes
/// from node 0 under its key; binding it again revokes that key (what was
/// written stays, nothing more lands under it); it refuses what it does not
/// cover, as `range` says the fabric checks ranges. A device test of the
/// windows themselves (late landings under every fault) is each simulated
/// fabric's own.
pub fn windows_carry_their_key_until_rebound<F: Fabric>(f: &F, range: WindowRange) {
    let mut agent = f.open(NodeId(1)).expect("agent");
    let mut ep = f.open(NodeId(0)).expect("open");
    let window = WindowId {
        node: NodeId(1),
        index: 0,
    };
    let bind = Op::BindWindow {
        index: 0,
        offset: 512,
        len: 256,
    };
    let Ok(OpOutput::Bound { key: k1 }) = run(&mut agent, bind.clone()) else {
        panic!("the agent binds the window");
    };
    let through = |key, op| Op::Windowed {
        window,
        key,
        op: Box::new(op),
    };
    let write = |value: u64| Op::Write {
        addr: remote(1, 520),
        data: value.to_le_bytes().to_vec(),
    };
    assert_eq!(run(&mut ep, through(k1, write(3))), Ok(OpOutput::Written));
    let cas = Op::Cas {
        addr: remote(1, 520),
        expect: 3,
        new: 4,
    };
    assert_eq!(
        run(&mut ep, through(k1, cas)),
        Ok(OpOutput::Cas { previous: 3 })
    );
    let Ok(OpOutput::Bound { key: k2 }) = run(&mut agent, bind) else {
        panic!("the agent binds it again");
    };
    assert_ne!(k1, k2);
    let refused = |key| Err(FabricError::WindowRefused { window, key });
    assert_eq!(run(&mut ep, through(k1, write(5))), refused(k1), "revoked");
    assert_eq!(
        run_once_up(&mut ep, through(k2, write(0x77))),
        Ok(OpOutput::Written)
    );
    let uncovered = Op::Write {
        addr: remote(1, 1024),
        data: vec![1; 8],
    };
    let outside = run(&mut ep, through(k2, uncovered));
    match range {
        WindowRange::Window => assert_eq!(outside, refused(k2), "uncovered"),
        WindowRange::Region => assert_eq!(outside, Ok(OpOutput::Written), "uncovered"),
    }
    let words = run_once_up(
        &mut ep,
        Op::Read {
            addr: remote(1, 520),
            len: 8,
        },
    );
    assert_eq!(words, Ok(OpOutput::Read(0x77u64.to_le_bytes().to_vec())));
    let past = run(
        &mut ep,
        Op::Read {
            addr: remote(1, 1024),
            len: 8,
        },
    );
    let landed = match range {
        WindowRange::Window => vec![0; 8],
        WindowRange::Region => vec![1; 8],
    };
    assert_eq!(past, Ok(OpOutput::Read(landed)));
}

/// CAS swaps exactly when the word equals `expect` and always returns the
/// word it found; words are stored little-endian (byte order normalised).
pub fn cas_semantics_and_byte_order<F: Fabric>(f: &F) {
    let mut ep = f.open(NodeId(0)).expect("open");
    let addr = RemoteAddr::index(NodeId(1), 16);
    let v = 0x0102_0304_0506_0708u64;
    assert_eq!(cas(&mut ep, addr, 0, v), Ok(OpOutput::Cas { previous: 0 }));
    assert_eq!(
        cas(&mut ep, addr, 0, 9),
        Ok(OpOutput::Cas { previous: v }),
        "a failed CAS leaves the word"
    );
    let bytes = run(&mut ep, Op::Read { addr, len: 8 }).expect("read");
    assert_eq!(
        bytes,
        OpOutput::Read(v.to_le_bytes().to_vec()),
        "CAS values are stored in protocol (little-endian) order"
    );
    assert_eq!(cas(&mut ep, addr, v, 1), Ok(OpOutput::Cas { previous: v }));
}

/// Misaligned CAS and out-of-range accesses are refused with typed errors
/// (when posting or as the completion) and change nothing.
pub fn bad_addresses_are_refused<F: Fabric>(f: &F) {
    let mut ep = f.open(NodeId(0)).expect("open");
    let misaligned = cas(&mut ep, RemoteAddr::index(NodeId(1), 4), 0, 1);
    assert!(
        matches!(misaligned, Err(FabricError::Misaligned(_))),
        "{misaligned:?}"
    );
    let size = f.topology().data_bytes_per_node;
    let beyond = run(
        &mut ep,
        Op::Read {
            addr: remote(1, size - 4),
            len: 8,
        },
    );
    assert!(
        matches!(beyond, Err(FabricError::OutOfRange { .. })),
        "{beyond:?}"
    );
    let unknown = run(
        &mut ep,
        Op::Read {
            addr: remote(f.topology().nodes, 0),
            len: 8,
        },
    );
    assert!(
        matches!(unknown, Err(FabricError::UnknownNode(_))),
        "{unknown:?}"
    );
}

/// Many requests in flight at once complete once each, matched by id.
pub fn many_requests_in_flight<F: Fabric>(f: &F) {
    let mut ep = f.open(NodeId(0)).expect("open");
    for i in 0..16u64 {
        let op = Op::Read {
            addr: RemoteAddr::index(NodeId((i % 2) as u16), (i % 8) * 8),
            len: 8,
        };
        ep.post(WorkRequest {
            id: OpId(100 + i),
            op,
        })
        .expect("post");
    }
    let mut ids: Vec<u64> = complete_all(&mut ep, 16)
        .into_iter()
        .map(|c| c.id.0)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (100..116).collect::<Vec<_>>());
}

/// The CPU path reaches the endpoint's own data table, which other nodes read
/// through their NICs.
pub fn local_path_is_the_nodes_own_data_table<F: Fabric>(f: &F) {
    let mut local = f.open(NodeId(1)).expect("open");
    let data = b"written by the cpu".to_vec();
    run(
        &mut local,
        Op::LocalWrite {
            offset: 256,
            data: data.clone(),
        },
    )
    .expect("local write");
    let mut other = f.open(NodeId(0)).expect("open");
    let got = run(
        &mut other,
        Op::Read {
            addr: remote(1, 256),
            len: data.len() as u32,
        },
    )
    .expect("read");
    assert_eq!(got, OpOutput::Read(data.clone()));
    let back = run(
        &mut local,
        Op::LocalRead {
            offset: 256,
            len: data.len() as u32,
        },
    )
    .expect("local read");
    assert_eq!(back, OpOutput::Read(data));
}

/// The whole protocol runs on the fabric: PUT, GET, update and DELETE from
/// clients on two nodes. `cfg` must match the fabric's topology.
pub fn protocol_runs_on_the_fabric<F: Fabric>(f: &F, cfg: Config)
where
    F::Endpoint: 'static,
{
    let cfg = std::sync::Arc::new(cfg);
    let client = |node: u16| {
        let ep = f.open(NodeId(node)).expect("open");
        Client::new(
            cfg.clone(),
            ClientId {
                node: NodeId(node),
                index: 0,
            },
            ep,
        )
        .expect("client")
    };
    let (mut a, mut b) = (client(0), client(1));
    assert_eq!(a.put(b"conformance", b"one"), Ok(false));
    assert_eq!(b.get(b"conformance"), Ok(Some(b"one".to_vec())));
    assert_eq!(b.put(b"conformance", b"two"), Ok(true));
    assert_eq!(a.get(b"conformance"), Ok(Some(b"two".to_vec())));
    assert_eq!(a.delete(b"conformance"), Ok(true));
    assert_eq!(b.get(b"conformance"), Ok(None));
}

/// A client id is held by one client at a time, and is the next one's when
/// it drops: the fabric's endpoints keep the process's registry of live ids
/// ([`Endpoint::claim_client`]), and the node's registry word names this
/// process while its client lives (docs/protocol.md §2.3). `cfg` must match
/// the fabric's topology.
pub fn a_client_id_is_held_by_one_client_at_a_time<F: Fabric>(f: &F, cfg: Config)
where
    F::Endpoint: 'static,
{
    let cfg = std::sync::Arc::new(cfg);
    let id = ClientId {
        node: NodeId(0),
        index: 0,
    };
    let client = || Client::new(cfg.clone(), id, f.open(NodeId(0)).expect("open"));
    let mut first = client().expect("the first client of the id");
    assert_eq!(first.put(b"identity", b"first"), Ok(false));
    let twin = client();
    assert!(
        matches!(twin, Err(nessie_protocol::Error::ClientIdInUse(_))),
        "a second client of a held id was handed out: {:?}",
        twin.map(|_| "a client")
    );
    let word = cfg
        .registry()
        .word(id)
        .expect("a client of a node has a word");
    let mut ep = f.open(NodeId(1)).expect("open");
    let read = |ep: &mut F::Endpoint| match run(ep, Op::Read { addr: word, len: 8 }) {
        Ok(OpOutput::Read(b)) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        other => panic!("reading the registry word: {other:?}"),
    };
    let held = read(&mut ep);
    assert_ne!(held, 0, "the node's registry word names no holder");
    drop(first);
    let mut next = client().expect("a dropped client's id is the next one's");
    assert_eq!(next.get(b"identity"), Ok(Some(b"first".to_vec())));
    assert_eq!(read(&mut ep), held, "the same process holds it");
}

/// Unsignaled WRITEs ([`Endpoint::post_unsignaled`]) land like signaled
/// ones: READs posted after them see their bytes. None of them completes
/// with an error, and with `suppressed` (a backend that suppresses the
/// successes: the simulator, verbs) none completes at all, even late.
pub fn unsignaled_writes_land<F: Fabric>(f: &F, suppressed: bool) {
    let mut ep = f.open(NodeId(0)).expect("open");
    let writes: Vec<(RemoteAddr, Vec<u8>)> = (0..12u64)
        .map(|i| {
            let addr = remote((i % 2) as u16, 512 + i * 24);
            let data = (0..20u8).map(|b| b ^ (i as u8).wrapping_mul(17)).collect();
            (addr, data)
        })
        .collect();
    for (i, (addr, data)) in writes.iter().enumerate() {
        let op = Op::Write {
            addr: *addr,
            data: data.clone(),
        };
        ep.post_unsignaled(WorkRequest {
            id: OpId(200 + i as u64),
            op,
        })
        .expect("post unsignaled");
    }
    for (i, (addr, data)) in writes.iter().enumerate() {
        let op = Op::Read {
            addr: *addr,
            len: data.len() as u32,
        };
        ep.post(WorkRequest {
            id: OpId(300 + i as u64),
            op,
        })
        .expect("post");
    }
    let reads = |got: &[Completion]| got.iter().filter(|c| c.id.0 >= 300).count();
    let mut got = gather(&mut ep, Duration::from_secs(10), |g| {
        reads(g) == writes.len()
    });
    assert_eq!(reads(&got), writes.len(), "every READ completes: {got:?}");
    for c in got.iter().filter(|c| c.id.0 >= 300) {
        let (addr, data) = &writes[(c.id.0 - 300) as usize];
        assert_eq!(
            c.result,
            Ok(OpOutput::Read(data.clone())),
            "an unsignaled WRITE at {addr} landed"
        );
    }
    // Late completions of the unsignaled WRITEs, if any.
    got.extend(gather(&mut ep, Duration::from_millis(200), |_| false));
    unsignaled_successes(&got, 200..212, suppressed);
}

/// An unsignaled WRITE that fails reports its error: refused when posting,
/// or as a completion carrying its id (here: out of range, which a backend
/// may check before posting or let the NIC refuse). The endpoint works on.
pub fn failing_unsignaled_write_reports_its_error<F: Fabric>(f: &F) {
    let mut ep = f.open(NodeId(0)).expect("open");
    let size = f.topology().data_bytes_per_node;
    let bad = Op::Write {
        addr: remote(1, size - 4),
        data: vec![7; 8],
    };
    match ep.post_unsignaled(WorkRequest {
        id: OpId(400),
        op: bad,
    }) {
        Err(e) => assert!(matches!(e, FabricError::OutOfRange { .. }), "{e:?}"),
        Ok(()) => {
            let got = gather(&mut ep, Duration::from_secs(2), |g| {
                g.iter().any(|c| c.id == OpId(400))
            });
            let c = got
                .iter()
                .find(|c| c.id == OpId(400))
                .expect("a failed unsignaled WRITE completes with its error");
            assert!(
                matches!(c.result, Err(FabricError::OutOfRange { .. })),
                "{:?}",
                c.result
            );
        }
    }
    let data = b"still works".to_vec();
    run(
        &mut ep,
        Op::Write {
            addr: remote(1, 64),
            data: data.clone(),
        },
    )
    .expect("write");
    assert_eq!(
        run(
            &mut ep,
            Op::Read {
                addr: remote(1, 64),
                len: data.len() as u32
            }
        ),
        Ok(OpOutput::Read(data))
    );
}

/// Many unsignaled WRITEs in a row (more than any send queue holds), first
/// without polling, then each followed by a poll, as a server posts its
/// responses: all are accepted, none fails (with `suppressed`, none
/// completes), and a READ posted after them completes within `within` and
/// sees the last of them. Runs on `ep`, an endpoint on a node of a cluster
/// whose node `peer` has at least 512 bytes of data table.
pub fn many_unsignaled_posts_in_a_row_on<E: Endpoint>(
    ep: &mut E,
    peer: NodeId,
    suppressed: bool,
    within: Duration,
) {
    const N: u64 = 3000;
    let write = |i: u64| WorkRequest {
        id: OpId(1000 + i),
        op: Op::Write {
            addr: RemoteAddr::data(peer, (i % 64) * 8),
            data: i.to_le_bytes().to_vec(),
        },
    };
    let mut got: Vec<Completion> = Vec::new();
    let refused = |i: u64, e: FabricError, got: &[Completion]| -> ! {
        let failed: Vec<&Completion> = got.iter().filter(|c| c.result.is_err()).take(3).collect();
        panic!("unsignaled WRITE {i} refused: {e:?}; failed before it: {failed:?}")
    };
    for i in 0..N {
        if let Err(e) = ep.post_unsignaled(write(i)) {
            refused(i, e, &got);
        }
    }
    for i in N..2 * N {
        if let Err(e) = ep.post_unsignaled(write(i)) {
            refused(i, e, &got);
        }
        ep.poll(&mut got);
    }
    ep.post(WorkRequest {
        id: OpId(9),
        op: Op::Read {
            addr: RemoteAddr::data(peer, 0),
            len: 512,
        },
    })
    .expect("post");
    got.extend(gather(ep, within, |g| g.iter().any(|c| c.id == OpId(9))));
    let read = got.iter().find(|c| c.id == OpId(9)).unwrap_or_else(|| {
        panic!(
            "the READ after {} unsignaled WRITEs did not complete within {within:?}",
            2 * N
        )
    });
    // Word s last holds the last i below 2N with i mod 64 = s.
    let last = |s: u64| 2 * N - 1 - (2 * N - 1 - s) % 64;
    let want: Vec<u8> = (0..64).flat_map(|s| last(s).to_le_bytes()).collect();
    assert_eq!(
        read.result,
        Ok(OpOutput::Read(want)),
        "the last WRITEs landed"
    );
    unsignaled_successes(&got, 1000..1000 + 2 * N, suppressed);
}

/// [`many_unsignaled_posts_in_a_row_on`] from node 0 to node 1 of `f`.
pub fn many_unsignaled_posts_in_a_row<F: Fabric>(f: &F, suppressed: bool) {
    let mut ep = f.open(NodeId(0)).expect("open");
    many_unsignaled_posts_in_a_row_on(&mut ep, NodeId(1), suppressed, Duration::from_secs(30));
}
