//! The server workers of `nessie-exec` over NessieSD's and NessieHY's
//! partially-coupled tables: how a worker claims, runs, skips and answers
//! requests, stepped one effect at a time.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::coupled::{CoupledLayout, CoupledTable};
use nessie_exec::mailbox::claim_word;
use nessie_exec::mailbox::{encode, split_ctrl, tagged_claim_word, RpcOp, CANCELLED, CLAIMED};
use nessie_exec::{claim_wait, Worker, WorkerCounters, CLAIM_WAIT};
use nessie_exec::{Effect, Resolution, Step};
use nessie_exec::{Machine, Plain};
use nessie_protocol::{Completion, Config, Nanos, OpOutput};
use nessie_protocol::{NodeId, Op};

/// One node, one client (slot 0), one worker, an operation timeout of
/// 4 ms.
fn setup() -> (Config, CoupledLayout, Vec<u8>) {
    let mut cfg = Config {
        nodes: 1,
        index_slots_per_node: 8,
        dtes_per_node: 8,
        clients_per_node: 1,
        max_key_len: 8,
        max_value_len: 8,
        ..Config::default()
    };
    cfg.retry.op_timeout = Duration::from_millis(4);
    let layout = CoupledLayout::new(&cfg, cfg.filter_bits);
    let mem = vec![0u8; layout.region_bytes() as usize];
    (cfg, layout, mem)
}

/// Puts client 0's PUT number `seq` in its request slot; its control word.
fn put_request(layout: &CoupledLayout, mem: &mut [u8], seq: u32) -> u64 {
    request(layout, mem, seq, RpcOp::Put)
}

/// Puts client 0's request number `seq` (`op` of "key") in its request
/// slot; its control word.
fn request(layout: &CoupledLayout, mem: &mut [u8], seq: u32, op: RpcOp) -> u64 {
    let value: &[u8] = if op == RpcOp::Put { b"value" } else { b"" };
    let msg = encode(seq, op as u8, b"key", value);
    let end = layout.mailbox.request_end(0) as usize;
    mem[end - msg.len()..end].copy_from_slice(&msg);
    nessie_exec::word(mem, end - 8)
}

/// What a worker did with the requests it was handed.
#[derive(Debug, Default)]
struct Served {
    /// Each claim CAS: when it was posted, its deadline, what it
    /// expected.
    claims: Vec<(Nanos, Nanos, u64)>,
    /// The requests it answered.
    answered: Vec<u32>,
}

/// Runs one worker on the coupled tables of `cfg` over `mem` (its
/// node's data region), handing it client 0's PUTs `hand` in order (each
/// written into the slot first), until it waits for a request with none
/// left. CPU accesses execute at once; claim CASes execute on `mem`, the
/// first one's completion lost if `lose_first_claim`.
fn serve(
    cfg: &Config,
    layout: CoupledLayout,
    mem: &mut [u8],
    hand: &[u32],
    lose_first_claim: bool,
) -> Served {
    let puts: Vec<(u32, RpcOp)> = hand.iter().map(|&seq| (seq, RpcOp::Put)).collect();
    serve_requests(cfg, layout, mem, &puts, lose_first_claim, false)
}

/// [`serve`], handing client 0's requests `hand` (any operations), with
/// the `rerun-duplicates` switch if `rerun_duplicates`.
fn serve_requests(
    cfg: &Config,
    layout: CoupledLayout,
    mem: &mut [u8],
    hand: &[(u32, RpcOp)],
    lose_first_claim: bool,
    rerun_duplicates: bool,
) -> Served {
    let table = Arc::new(CoupledTable::new(layout, NodeId(0), cfg));
    let counters = Arc::new(WorkerCounters::default());
    counters
        .rerun_duplicates
        .store(rerun_duplicates, Ordering::Relaxed);
    let worker = Worker::new(table, layout.mailbox, 0, 1, 1, counters);
    let mut m: Machine<(), Plain> = Machine::new(NodeId(0), 1, move |io| worker.run(io));
    let response_end = layout.mailbox.response_end(0);
    let mut now = Nanos(1_000_000);
    let mut out = Served::default();
    let mut hand = hand.iter();
    for _ in 0..1000 {
        match m.poll(now) {
            Step::Effect(Effect::AwaitRequest(w)) => {
                // A driver hands a worker only requests its watch says
                // it has not taken.
                let index = w.position(0).expect("the worker serves slot 0");
                let next = hand.find_map(|&(seq, op)| {
                    let ctrl = request(&layout, mem, seq, op);
                    w.is_new(index, ctrl).then_some(ctrl)
                });
                let Some(ctrl) = next else {
                    return out;
                };
                m.resolve(Resolution::Request { index, ctrl });
            }
            Step::Effect(Effect::AwaitLock(_)) => m.resolve(Resolution::Waited),
            Step::Effect(e) => panic!("unexpected effect {e:?}"),
            Step::PostChain(_) => panic!("server workers post no chains"),
            Step::Post(wrs) | Step::PostDetached(wrs) => {
                for wr in wrs {
                    let result = match &wr.op {
                        Op::LocalRead { offset, len } => {
                            let o = *offset as usize;
                            OpOutput::Read(mem[o..o + *len as usize].to_vec())
                        }
                        Op::LocalWrite { offset, data } => {
                            let o = *offset as usize;
                            mem[o..o + data.len()].copy_from_slice(data);
                            if offset + data.len() as u64 == response_end {
                                let ctrl = nessie_exec::word(data, data.len() - 8);
                                out.answered.push(split_ctrl(ctrl).0);
                            }
                            OpOutput::Written
                        }
                        Op::Cas { addr, expect, new } => {
                            let deadline = m.exec().deadline().expect("a claim's deadline");
                            out.claims.push((now, deadline, *expect));
                            let at = addr.offset as usize;
                            let previous = nessie_exec::word(mem, at);
                            if previous == *expect {
                                mem[at..at + 8].copy_from_slice(&new.to_le_bytes());
                            }
                            if lose_first_claim && out.claims.len() == 1 {
                                now = deadline.plus(Duration::from_nanos(1));
                                continue;
                            }
                            OpOutput::Cas { previous }
                        }
                        other => panic!("unexpected {other:?}"),
                    };
                    m.complete(Completion {
                        id: wr.id,
                        result: Ok(result),
                    });
                }
            }
            Step::Pending => now = now.plus(Duration::from_nanos(100)),
            Step::Done(r) => panic!("the worker ended: {r:?}"),
        }
    }
    panic!("the worker never waited for another request: {out:?}")
}

fn claim_word_of(layout: &CoupledLayout, mem: &[u8]) -> u64 {
    nessie_exec::word(mem, layout.mailbox.claim_offset(0) as usize)
}

/// Regression (a liveness bug the fault swarm found): a worker whose
/// claim CAS completion was lost waited a fixed 50 ms before trying
/// again, whatever the clients' timeout. With the swarm's operation
/// timeouts of 1-80 ms, one lost completion made the worker, and every
/// client it serves, unavailable for up to 40 timeouts, and the lone
/// writer after the faults found keys it could not write. The wait is
/// now an eighth of the clients' timeout (at most 50 ms): the worker
/// claims again then, and the word tells it the first CAS landed.
#[test]
fn a_lost_claim_completion_holds_the_worker_an_eighth_of_the_timeout() {
    let (cfg, layout, mut mem) = setup();
    assert_eq!(claim_wait(cfg.retry.op_timeout), Duration::from_micros(500));
    assert_eq!(claim_wait(Duration::from_secs(10)), CLAIM_WAIT);
    // The first claim fails (its completion is lost): the worker is
    // handed the request again.
    let served = serve(&cfg, layout, &mut mem, &[5, 5], true);
    assert_eq!(served.claims.len(), 2, "{served:?}");
    let (posted, deadline, _) = served.claims[0];
    assert_eq!(deadline.since(posted), Duration::from_micros(500));
    // The second claim finds the first one's mark and serves the PUT.
    assert_eq!(served.answered, [5], "{served:?}");
    assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
}

/// Regression (a safety bug the fault swarm found, Pilaf seed 1,128):
/// the client cancelled its PUT 5 (claim word `5 | CANCELLED`), then
/// sent PUT 6, whose request WRITE was refused at its landing deadline
/// (it never landed: the slot still holds PUT 5), and cancelled it too
/// (`6 | CANCELLED`). A late worker then found PUT 5 in the slot and a
/// word that is not PUT 5's, took the word for an older decision and
/// claimed PUT 5 from it: a PUT its client reported as not committed
/// committed. A word newer than the request means the client settled
/// the request already: the worker skips it.
#[test]
fn a_request_the_client_cancelled_before_a_newer_cancel_never_runs() {
    let (cfg, layout, mut mem) = setup();
    let at = layout.mailbox.claim_offset(0) as usize;
    mem[at..at + 8].copy_from_slice(&claim_word(6, CANCELLED).to_le_bytes());
    let served = serve(&cfg, layout, &mut mem, &[5], false);
    assert!(served.answered.is_empty(), "{served:?}");
    assert_eq!(claim_word_of(&layout, &mem), claim_word(6, CANCELLED));
    // Nothing was written: the key's candidates are all empty.
    for slot in layout.candidates(b"key") {
        let ite = nessie_exec::word(&mem, layout.index_offset(slot) as usize);
        assert_eq!(ite, 0, "the cancelled PUT was stored");
    }
    // An older decision in the word (the client's PUT 4, settled before
    // it sent PUT 5) is claimed from, and the PUT runs. (Each scenario
    // starts with no request taken from the slot.)
    let served_at = layout.mailbox.served_offset(0) as usize;
    mem[served_at..served_at + 8].copy_from_slice(&0u64.to_le_bytes());
    mem[at..at + 8].copy_from_slice(&claim_word(4, CANCELLED).to_le_bytes());
    let served = serve(&cfg, layout, &mut mem, &[5], false);
    assert_eq!(served.answered, [5], "{served:?}");
    assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
    // A word of another process of the client (a restarted client, which
    // opened the word with its own tag) says nothing about the order, and
    // the request is never claimed from it, however its number compares:
    // every request of a predecessor is dead once its successor opened the
    // word (issue 40; before, it was claimed while still in its slot).
    mem[served_at..served_at + 8].copy_from_slice(&0u64.to_le_bytes());
    let other = tagged_claim_word(4, CANCELLED, 7);
    mem[at..at + 8].copy_from_slice(&other.to_le_bytes());
    let served = serve(&cfg, layout, &mut mem, &[5], false);
    assert!(served.answered.is_empty(), "{served:?}");
    assert_eq!(claim_word_of(&layout, &mem), other);
    // That sequence numbers wrap (and skip 0) is `nessie-exec`'s
    // `server::tests::sequence_numbers_wrap_and_skip_zero`.
}

/// Regression (a safety bug the fault swarm found as soon as it drew
/// duplicated WRITEs, `TransportFault::DuplicateWrite`, in every
/// server-driven system): a worker claimed and ran client 0's PUT 5,
/// then served its GET 6 (a GET is not claimed), and then a copy of
/// PUT 5's request WRITE, held in the fabric, landed in the slot again.
/// The slot's control word differs from GET 6's, so the worker took it
/// for a new request, and the claim word, which it had itself set to
/// `5 | CLAIMED`, did not stop it: it claimed PUT 5 from that word and
/// ran it a second time, after whatever writes of the key came since. A
/// word that names the request as decided, claimed or cancelled, means
/// the request was settled: never claimed again.
/// (`rerun-duplicates` reinstates the bug.)
#[test]
fn a_duplicate_of_a_put_after_the_clients_next_get_never_runs_again() {
    let hand = [(5, RpcOp::Put), (6, RpcOp::Get), (5, RpcOp::Put)];
    let (cfg, layout, mut mem) = setup();
    let served = serve_requests(&cfg, layout, &mut mem, &hand, false, false);
    assert_eq!(served.answered, [5, 6], "{served:?}");
    assert_eq!(served.claims.len(), 1, "{served:?}");
    assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
    // With the switch, the copy is claimed from the worker's own claim
    // and PUT 5 runs (and is answered) twice.
    let (cfg, layout, mut mem) = setup();
    let served = serve_requests(&cfg, layout, &mut mem, &hand, false, true);
    assert_eq!(served.answered, [5, 6, 5], "{served:?}");
}

/// Regression (a safety bug the fault swarm found once it crashed server
/// workers, all three systems at seed 2): a worker claimed a PUT, ran
/// it, answered and crashed; its replacement, which knows nothing of
/// what its predecessor served, found the PUT still in the slot, read
/// the claim word `seq | CLAIMED`, took it for its own earlier claim
/// whose completion was lost, and ran the PUT a second time, after
/// later writes of the key. A claim word names the request, not the
/// worker: a worker reads its slots' claim words when it starts, and
/// never runs a request claimed before (by A2 its predecessor's claim
/// CASes have all landed by then), even when a claim CAS of its own
/// for that request failed first (NessieSD seed 18: it could not tell
/// whose claim it then found).
#[test]
fn a_replacement_worker_never_reruns_a_request_its_predecessor_claimed() {
    let (cfg, layout, mut mem) = setup();
    let at = layout.mailbox.claim_offset(0) as usize;
    mem[at..at + 8].copy_from_slice(&claim_word(5, CLAIMED).to_le_bytes());
    let served = serve(&cfg, layout, &mut mem, &[5, 5], false);
    assert!(served.answered.is_empty(), "{served:?}");
    assert!(served.claims.is_empty(), "{served:?}");
    assert_eq!(claim_word_of(&layout, &mem), claim_word(5, CLAIMED));
    // The client's next PUT is claimed and runs.
    let served = serve(&cfg, layout, &mut mem, &[5, 6], false);
    assert_eq!(served.answered, [6], "{served:?}");
}

/// Regression (a safety bug the fault swarm found once it crashed server
/// workers, NessieSD seed 104): a worker served client 0's PUT 5 (which
/// stays in the slot), the client crashed, and its new process cancelled
/// a request whose WRITE never reached this node, overwriting the claim
/// word with its own decision. A worker that then replaced a crashed
/// one knew neither that PUT 5 was served nor that it was claimed, and
/// ran it again. Workers record each request they take in the slot's
/// served word, which a replacement reads when it starts.
#[test]
fn a_replacement_worker_never_takes_a_request_its_predecessor_took() {
    let (cfg, layout, mut mem) = setup();
    let served = serve(&cfg, layout, &mut mem, &[5], false);
    assert_eq!(served.answered, [5], "{served:?}");
    let ctrl = put_request(&layout, &mut mem, 5);
    let at = layout.mailbox.served_offset(0) as usize;
    assert_eq!(nessie_exec::word(&mem, at), ctrl);
    // The client's next process (its own tag) cancels a request of its
    // own over the word.
    let claim = layout.mailbox.claim_offset(0) as usize;
    mem[claim..claim + 8].copy_from_slice(&tagged_claim_word(9, CANCELLED, 7).to_le_bytes());
    let served = serve(&cfg, layout, &mut mem, &[5], false);
    assert!(served.answered.is_empty(), "{served:?}");
    assert!(served.claims.is_empty(), "{served:?}");
    // Without the served word, the replacement does not run PUT 5 either
    // since issue 40: the word is another incarnation's, which no request
    // of the old one is claimed from (before, it ran PUT 5 again). The
    // served word stays, a second guard for this case.
    mem[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    let served = serve(&cfg, layout, &mut mem, &[5], false);
    assert!(served.answered.is_empty(), "{served:?}");
}

/// Regression (a safety bug the fault swarm found, Pilaf seed 5,032;
/// older than the claim words' tags): the client cancelled its PUT 5 and
/// then its DELETE 6 (both request WRITEs failed after landing). A late
/// worker, handed PUT 5, learnt the word `6 | CANCELLED` from its failed
/// claim and skipped PUT 5; handed DELETE 6 next, it claimed "from what
/// it last saw", `6 | CANCELLED` itself, and won: a DELETE its client
/// reported as not committed ran. A word the worker knows to decide the
/// request (or a newer one) is not claimed from.
#[test]
fn a_worker_never_claims_from_the_cancel_of_the_request_itself() {
    let (cfg, layout, mut mem) = setup();
    let at = layout.mailbox.claim_offset(0) as usize;
    mem[at..at + 8].copy_from_slice(&claim_word(6, CANCELLED).to_le_bytes());
    let served = serve(&cfg, layout, &mut mem, &[5, 6], false);
    assert!(served.answered.is_empty(), "{served:?}");
    assert_eq!(claim_word_of(&layout, &mem), claim_word(6, CANCELLED));
    // Its next request, 7, is claimed from the cancel of 6.
    let served = serve(&cfg, layout, &mut mem, &[5, 6, 7], false);
    assert_eq!(served.answered, [7], "{served:?}");
    assert_eq!(claim_word_of(&layout, &mem), claim_word(7, CLAIMED));
}
