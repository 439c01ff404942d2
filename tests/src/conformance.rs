//! Conformance of a `Fabric` implementation to the semantics the protocol
//! relies on. The bodies are generic over the fabric, so the same checks run
//! against the simulator (`tests/tests/conformance.rs`) and, later, against the
//! verbs backend on real hardware.
//!
//! Each body needs a fabric of at least two nodes, each with at least 8 index
//! entries and 4 KiB of data table, zeroed.

use std::time::Duration;

use nessie_protocol::{
    Client, ClientId, Completion, Config, Endpoint, Fabric, FabricError, NodeId, Op, OpId,
    OpOutput, RemoteAddr, WorkRequest,
};

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
