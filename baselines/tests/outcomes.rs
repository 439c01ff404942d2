//! Honest outcomes of NessieSD, NessieHY and Pilaf: every error a client
//! returns falls in one of the three classes of `nessie_protocol::Outcome`,
//! and the class is true. `Ok` means committed; `OutcomeUnknown` may be
//! either; every other error means nothing was committed, now or later.
//!
//! - A PUT that times out at a paused server is cancelled (its claim word)
//!   and never executes when the server resumes; with the server's claim
//!   switched off (`Deployment::set_skip_claims`, a test-only fault switch)
//!   the same PUT is read back later, which is what the test must catch.
//! - A fault at every step of a PUT from the request WRITE on (the request
//!   reaching the server is where it may commit): the client's request WRITE
//!   and its cancel CAS, and every operation of the server worker from its
//!   claim CAS to its response. Each fault kind: not executed, executed but
//!   failed, executed with the completion lost, vanished. Each returned
//!   class is checked against what the key holds afterwards, and no call
//!   outlives its deadline.
//! - Concurrent clients while the servers pause and resume: every result is
//!   recorded by its class and the history is checked for linearizability
//!   (a `Timeout` that committed would be a violation).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::faulty::{Arm, Control, FaultyFabric, Traced, SUPPORTED};
use nessie_baselines::coupled::home_node;
use nessie_baselines::pilaf::PilafLayout;
use nessie_baselines::{Deployment, KvSystem, SystemConfig};
use nessie_check::{check, time_limit, unique_value, CheckConfig, Recorder, Verdict};
use nessie_exec::mailbox::MailboxLayout;
use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::{ClientId, Config, Error, NodeId, OpKind, Outcome, TransportFault};
use nessie_protocol::{KvClient, Request, Response};

const SYSTEMS: [KvSystem; 3] = [KvSystem::NessieSd, KvSystem::NessieHy, KvSystem::Pilaf];

fn cfg(op_timeout: Duration) -> Config {
    let mut cfg = Config {
        nodes: 2,
        index_slots_per_node: 256,
        dtes_per_node: 1024,
        clients_per_node: 2,
        max_key_len: 32,
        max_value_len: 64,
        expiration: Duration::from_millis(100),
        ..Config::default()
    };
    cfg.retry.op_timeout = op_timeout;
    cfg
}

struct Rig {
    d: Deployment<FaultyFabric>,
    fabric: FaultyFabric,
    cfg: Config,
}

impl Rig {
    fn new(kind: KvSystem, cfg: Config) -> Rig {
        let sys = SystemConfig::new(kind, cfg.clone());
        let sim = SimFabric::new(SimConfig::from_topology(sys.topology())).expect("sim");
        let fabric = FaultyFabric::new(sim);
        let d = Deployment::start(sys, fabric.clone()).expect("deployment starts");
        Rig { d, fabric, cfg }
    }

    /// A client on `node` and the control of its endpoint.
    fn client(&self, node: u16, index: u16) -> (Box<dyn KvClient>, Control) {
        let before = self.fabric.endpoints(NodeId(node)).len();
        let c = self
            .d
            .client(ClientId {
                node: NodeId(node),
                index,
            })
            .expect("client");
        let ctl = self.fabric.endpoints(NodeId(node))[before].clone();
        (c, ctl)
    }

    /// The control of `node`'s (single) server worker.
    fn server(&self, node: NodeId) -> Control {
        self.fabric.endpoints(node)[0].clone()
    }

    fn mailbox(&self) -> MailboxLayout {
        PilafLayout::new(&self.cfg).mailbox
    }

    /// A fresh key (never used before in this rig) homed on `node`.
    fn key_on(&self, node: NodeId, n: &mut u64) -> Vec<u8> {
        loop {
            *n += 1;
            let k = format!("key-{n}").into_bytes();
            if home_node(self.cfg.hash_seed, self.cfg.nodes, &k) == node {
                return k;
            }
        }
    }

    /// What `key` holds, read by a client without faults (retried until
    /// the servers answer).
    fn truth(&self, reader: &mut dyn KvClient, key: &[u8]) -> Option<Vec<u8>> {
        let start = Instant::now();
        loop {
            match reader.get(key) {
                Ok(v) => return v,
                Err(e) if start.elapsed() < Duration::from_secs(20) => {
                    eprintln!("truth read: {e}; again");
                }
                Err(e) => panic!("the key cannot be read back: {e}"),
            }
        }
    }
}

/// Whether a PUT's result is honest about what the key holds afterwards
/// (`now`, and `later`, read after the servers had time to run anything
/// still queued): `Err` describes the lie.
fn honest(
    result: &Result<bool, Error>,
    value: &[u8],
    now: &Option<Vec<u8>>,
    later: &Option<Vec<u8>>,
) -> Result<(), String> {
    let committed = |v: &Option<Vec<u8>>| v.as_deref() == Some(value);
    match Outcome::of(result) {
        Outcome::Committed if !committed(now) => {
            Err(format!("{result:?} but the key holds {now:?}"))
        }
        Outcome::NotCommitted if committed(now) || committed(later) => Err(format!(
            "{result:?} (not committed) but the key holds {now:?} and later {later:?}"
        )),
        _ => Ok(()),
    }
}

/// A PUT of a fresh key homed on node 1 by a client on `client_node`
/// while the servers are paused; then the servers resume. Returns the
/// verdict of [`honest`].
fn put_at_paused_server(kind: KvSystem, client_node: u16, skip_claims: bool) -> Result<(), String> {
    let rig = Rig::new(kind, cfg(Duration::from_millis(150)));
    rig.d.set_skip_claims(skip_claims);
    let (mut c, _) = rig.client(client_node, 0);
    let (mut reader, _) = rig.client(0, 1);
    let key = rig.key_on(NodeId(1), &mut 0);
    rig.d.pause_servers();
    let started = Instant::now();
    let r = c.put(&key, b"late");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "bounded: {:?}",
        started.elapsed()
    );
    assert_eq!(
        r,
        Err(Error::Timeout),
        "{kind}: a paused server times the PUT out"
    );
    rig.d.resume_servers();
    let now = rig.truth(reader.as_mut(), &key);
    thread::sleep(Duration::from_millis(100));
    let later = rig.truth(reader.as_mut(), &key);
    honest(&r, b"late", &now, &later)
}

#[test]
fn a_put_that_times_out_at_a_paused_server_never_commits_later() {
    let _limit = time_limit(
        "a_put_that_times_out_at_a_paused_server_never_commits_later",
        "-",
        Duration::from_secs(120),
    );
    for kind in SYSTEMS {
        for client_node in [0, 1] {
            put_at_paused_server(kind, client_node, false)
                .unwrap_or_else(|e| panic!("{kind}, client on node {client_node}: {e}"));
        }
    }
}

#[test]
fn teeth_without_claims_a_timed_out_put_commits_later() {
    let _limit = time_limit(
        "teeth_without_claims_a_timed_out_put_commits_later",
        "-",
        Duration::from_secs(120),
    );
    for kind in SYSTEMS {
        let verdict = put_at_paused_server(kind, 0, true);
        assert!(
            verdict.is_err(),
            "{kind}: the broken variant's Timeout must be caught committing"
        );
    }
}

/// A cancel must not be lost across a client restart. Process A's PUT times
/// out at a paused server and is cancelled (the claim word: A's cancel; the
/// slot: A's PUT). A crashes; its successor B (same client id, same slots)
/// PUTs the same key: it first opens the claim word (B's tag over A's
/// cancel), and its request WRITE fails without executing, so it cancels
/// at once. A worker that finally reaches the slot finds A's PUT under B's
/// word and never claims it: a request of another incarnation than the
/// word's is dead. With `claim_across_incarnations` (the rule before
/// clients opened their words: claim from another incarnation's word while
/// the request is in its slot), it claims A's PUT and runs it, after A
/// reported it as not committed. Returns the value the key holds once the
/// servers have resumed.
fn cancel_across_a_restart(kind: KvSystem, claim_across_incarnations: bool) -> Option<Vec<u8>> {
    let rig = Rig::new(kind, cfg(Duration::from_millis(150)));
    rig.d
        .set_claim_across_incarnations(claim_across_incarnations);
    let (mut reader, _) = rig.client(0, 1);
    let key = rig.key_on(NodeId(1), &mut 0);
    rig.d.pause_servers();
    let (mut a, _) = rig.client(0, 0);
    assert_eq!(a.put(&key, b"a"), Err(Error::Timeout), "{kind}: A's PUT");
    drop(a);
    let (mut b, ctl) = rig.client(0, 0);
    ctl.arm(Arm {
        trigger: Some(OpKind::Write),
        nth: 1,
        fault: TransportFault::FailBeforeExecuting,
    })
    .expect("armed");
    let r = b.put(&key, b"b");
    assert!(
        matches!(Outcome::of(&r), Outcome::NotCommitted),
        "{kind}: B's PUT never reached the slot: {r:?}"
    );
    rig.d.resume_servers();
    thread::sleep(Duration::from_millis(60));
    rig.truth(reader.as_mut(), &key)
}

#[test]
fn a_cancel_is_not_lost_across_a_client_restart() {
    let _limit = time_limit(
        "a_cancel_is_not_lost_across_a_client_restart",
        "-",
        Duration::from_secs(120),
    );
    for kind in SYSTEMS {
        assert_eq!(cancel_across_a_restart(kind, false), None, "{kind}");
    }
}

#[test]
fn teeth_claiming_across_incarnations_runs_a_cancelled_put_after_a_restart() {
    let _limit = time_limit(
        "teeth_claiming_across_incarnations_runs_a_cancelled_put_after_a_restart",
        "-",
        Duration::from_secs(120),
    );
    for kind in SYSTEMS {
        assert_eq!(
            cancel_across_a_restart(kind, true).as_deref(),
            Some(&b"a"[..]),
            "{kind}: the broken variant runs A's cancelled PUT"
        );
    }
}

/// Where a fault is placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The client's request WRITE (a CPU write for a same-node server).
    Request,
    /// The client's cancel CAS (the servers are paused so that it runs).
    Cancel,
    /// The server worker's `n`-th operation from its claim CAS on.
    Server(u64),
}

/// Steps of the server worker from its claim CAS to its response, traced
/// on one PUT: how many, and what each is.
fn server_steps(rig: &Rig, client_node: u16, n: &mut u64) -> Vec<Traced> {
    let (mut c, _) = rig.client(client_node, 0);
    let server = rig.server(NodeId(1));
    let key = rig.key_on(NodeId(1), n);
    server.start_trace();
    c.put(&key, b"traced").expect("traced PUT");
    thread::sleep(Duration::from_millis(20));
    let trace = server.take_trace();
    let first = trace
        .iter()
        .position(|t| t.kind == OpKind::Cas)
        .expect("the worker claims the PUT");
    let mb = rig.mailbox();
    let g = u32::from(client_node) * u32::from(rig.cfg.clients_per_node);
    let resp_from = mb.response_end(g) - mb.slot_bytes;
    let last = trace[first..]
        .iter()
        .position(|t| {
            matches!(t.kind, OpKind::Write | OpKind::LocalWrite)
                && t.node == NodeId(client_node)
                && (resp_from..mb.response_end(g)).contains(&t.offset)
        })
        .expect("the worker responds")
        + first;
    trace[first..=last].to_vec()
}

/// Outcome classes seen, per step description.
type Table = BTreeMap<String, BTreeMap<&'static str, usize>>;

fn class(r: &Result<bool, Error>) -> &'static str {
    match Outcome::of(r) {
        Outcome::Committed => "committed",
        Outcome::NotCommitted => "not committed",
        Outcome::Unknown => "unknown",
    }
}

/// Runs one PUT with `fault` at `step` and checks its honesty: `Err`
/// describes a lie.
fn trial(
    rig: &Rig,
    client_node: u16,
    (step, label): (Step, &str),
    fault: TransportFault,
    n: &mut u64,
    table: &mut Table,
) -> Result<(), String> {
    let timeout = rig.cfg.retry.op_timeout;
    let (mut c, ctl) = rig.client(client_node, 0);
    let (mut reader, _) = rig.client(0, 1);
    let server = rig.server(NodeId(1));
    let key = rig.key_on(NodeId(1), n);
    let value = format!("v{n}").into_bytes();
    let armed = match step {
        Step::Request => ctl.arm(Arm {
            trigger: None,
            nth: 1,
            fault,
        }),
        Step::Cancel => {
            rig.d.pause_servers();
            ctl.arm(Arm {
                trigger: Some(OpKind::Cas),
                nth: 1,
                fault,
            })
        }
        Step::Server(k) => server.arm(Arm {
            trigger: Some(OpKind::Cas),
            nth: k,
            fault,
        }),
    };
    armed.map_err(|e| e.to_string())?;
    let started = Instant::now();
    let r = c.put(&key, &value);
    let took = started.elapsed();
    let hit = ctl.disarm().or(server.disarm());
    rig.d.resume_servers();
    assert!(
        took < 2 * timeout + Duration::from_secs(1),
        "{step:?} {fault:?}: the PUT took {took:?} (a wait without a deadline)"
    );
    let now = rig.truth(reader.as_mut(), &key);
    thread::sleep(Duration::from_millis(60));
    let later = rig.truth(reader.as_mut(), &key);
    let what = format!(
        "{:?} {:?} on {:?}",
        step,
        fault,
        hit.as_ref().map(|(_, t)| t.kind)
    );
    honest(&r, &value, &now, &later).map_err(|lie| {
        format!(
            "{:?} client on node {client_node}, {what}: {lie}",
            rig.d.system().kind
        )
    })?;
    if let Ok(existed) = r {
        assert!(!existed, "{what}: a fresh key did not exist");
    }
    *table
        .entry(format!("client on node {client_node}: {label}"))
        .or_default()
        .entry(class(&r))
        .or_default() += 1;
    Ok(())
}

/// Faults at every step of a PUT, for one system: the classes seen, and
/// the lies told (none unless `unknown_as_timeout`, the clients' test-only
/// fault switch, is on).
fn fault_matrix(kind: KvSystem, unknown_as_timeout: bool) -> (Table, Vec<String>) {
    let rig = Rig::new(kind, cfg(Duration::from_millis(120)));
    rig.d
        .rpc_faults()
        .set_unknown_as_timeout(unknown_as_timeout);
    let mut n = 0;
    let mut table = Table::new();
    let mut lies = Vec::new();
    for client_node in [0u16, 1] {
        for fault in SUPPORTED {
            let request = (Step::Request, "request WRITE");
            lies.extend(trial(&rig, client_node, request, fault, &mut n, &mut table).err());
            let cancel = (Step::Cancel, "cancel CAS (server paused)");
            lies.extend(trial(&rig, client_node, cancel, fault, &mut n, &mut table).err());
        }
        let steps = server_steps(&rig, client_node, &mut n);
        for (i, t) in steps.iter().enumerate() {
            // CPU accesses do not lose completions on any real machine:
            // they fail (or not) synchronously.
            let faults: &[TransportFault] =
                if matches!(t.kind, OpKind::LocalRead | OpKind::LocalWrite) {
                    &[
                        TransportFault::FailBeforeExecuting,
                        TransportFault::FailAfterExecuting,
                    ]
                } else {
                    &SUPPORTED
                };
            let label = format!("server step {:>2}: {:?}", i + 1, t.kind);
            for &fault in faults {
                let step = (Step::Server(i as u64 + 1), label.as_str());
                lies.extend(trial(&rig, client_node, step, fault, &mut n, &mut table).err());
            }
        }
    }
    eprintln!("{kind}: outcome classes of PUTs with a fault at each step:");
    for (step, classes) in &table {
        eprintln!("  {step:<50} {classes:?}");
    }
    (table, lies)
}

fn assert_all_classes(kind: KvSystem, table: &Table) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for classes in table.values() {
        for (c, n) in classes {
            *seen.entry(c).or_default() += n;
        }
    }
    for c in ["committed", "not committed", "unknown"] {
        assert!(seen.contains_key(c), "{kind}: no {c} outcome in {seen:?}");
    }
}

fn honest_matrix(kind: KvSystem) {
    let (table, lies) = fault_matrix(kind, false);
    assert!(
        lies.is_empty(),
        "{kind}: dishonest outcomes:\n{}",
        lies.join("\n")
    );
    assert_all_classes(kind, &table);
}

#[test]
fn nessie_sd_faults_after_the_commit_point_give_honest_outcomes() {
    let _limit = time_limit(
        "nessie_sd_faults_after_the_commit_point_give_honest_outcomes",
        "-",
        Duration::from_secs(120),
    );
    honest_matrix(KvSystem::NessieSd);
}

#[test]
fn nessie_hy_faults_after_the_commit_point_give_honest_outcomes() {
    let _limit = time_limit(
        "nessie_hy_faults_after_the_commit_point_give_honest_outcomes",
        "-",
        Duration::from_secs(120),
    );
    honest_matrix(KvSystem::NessieHy);
}

#[test]
fn pilaf_faults_after_the_commit_point_give_honest_outcomes() {
    let _limit = time_limit(
        "pilaf_faults_after_the_commit_point_give_honest_outcomes",
        "-",
        Duration::from_secs(120),
    );
    honest_matrix(KvSystem::Pilaf);
}

#[test]
fn teeth_a_client_that_reports_unknown_outcomes_as_timeouts_is_caught() {
    let _limit = time_limit(
        "teeth_a_client_that_reports_unknown_outcomes_as_timeouts_is_caught",
        "-",
        Duration::from_secs(120),
    );
    // One system suffices: the switch sits in the request channel all three share.
    let (_, lies) = fault_matrix(KvSystem::NessieSd, true);
    assert!(
        !lies.is_empty(),
        "the broken variant's Timeout after a committed PUT must be caught"
    );
    eprintln!("caught {} lies, e.g. {}", lies.len(), lies[0]);
}

/// Clients on hot keys while a thread pauses and resumes the servers; every
/// result recorded by its outcome class, the history checked.
fn pausing_workload(kind: KvSystem, skip_claims: bool) -> nessie_check::CheckReport {
    let rig = Rig::new(kind, cfg(Duration::from_millis(30)));
    rig.d.set_skip_claims(skip_claims);
    let recorder = Arc::new(Recorder::new());
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for node in 0..rig.cfg.nodes {
        for index in 0..rig.cfg.clients_per_node {
            let (mut c, _) = rig.client(node, index);
            let r = recorder.clone();
            let who = usize::from(node) * 2 + usize::from(index);
            clients.push(thread::spawn(move || {
                let mut s = (who as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let started = Instant::now();
                let mut k = 0;
                while started.elapsed() < Duration::from_millis(800) {
                    k += 1;
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    let key = format!("hot-{}", s % 3).into_bytes();
                    match (s >> 8) % 10 {
                        0..=3 => {
                            let _ = r.record_result(
                                who,
                                Request::Get(key.to_vec()),
                                || c.get(&key),
                                |v| Response::Get(v.clone()),
                            );
                        }
                        4 => {
                            let _ = r.record_result(
                                who,
                                Request::Delete(key.to_vec()),
                                || c.delete(&key),
                                |&e| Response::Delete(e),
                            );
                        }
                        _ => {
                            let v = unique_value(&key, who as u64, k, 16);
                            let _ = r.record_result(
                                who,
                                Request::Put(key.to_vec(), v.clone()),
                                || c.put(&key, &v),
                                |&e| Response::Put(e),
                            );
                        }
                    }
                }
            }));
        }
    }
    let pauser = {
        let halt = stop.clone();
        let d = &rig.d;
        thread::scope(|scope| {
            let h = scope.spawn(move || {
                let mut pauses = 0;
                while !halt.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(15));
                    d.pause_servers();
                    thread::sleep(Duration::from_millis(40));
                    d.resume_servers();
                    pauses += 1;
                }
                pauses
            });
            for c in clients {
                c.join().expect("client thread");
            }
            stop.store(true, Ordering::Relaxed);
            h.join().expect("pauser")
        })
    };
    // Let anything still queued run before the final reads.
    thread::sleep(Duration::from_millis(50));
    let (mut reader, _) = rig.client(0, 1);
    for i in 0..3 {
        let key = format!("hot-{i}").into_bytes();
        let _ = recorder.record_result(
            99,
            Request::Get(key.to_vec()),
            || reader.get(&key),
            |v| Response::Get(v.clone()),
        );
    }
    let report = check(&recorder.events(), &CheckConfig::default());
    eprintln!("{kind} (skip claims: {skip_claims}, {pauser} pauses): {report}");
    report
}

#[test]
fn histories_stay_linearizable_while_servers_pause() {
    let _limit = time_limit(
        "histories_stay_linearizable_while_servers_pause",
        "-",
        Duration::from_secs(120),
    );
    for kind in SYSTEMS {
        let report = pausing_workload(kind, false);
        assert!(
            report.not_committed > 0,
            "{kind}: the pauses made operations time out: {report}"
        );
        match report.verdict {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable(v) => panic!("{kind}: not linearizable:\n{v}"),
            Verdict::Inconclusive(i) => panic!("{kind}: {i}"),
            Verdict::Malformed(m) => panic!("{kind}: malformed history: {m}"),
        }
    }
}

#[test]
fn teeth_without_claims_the_history_checker_catches_timeouts_that_committed() {
    let _limit = time_limit(
        "teeth_without_claims_the_history_checker_catches_timeouts_that_committed",
        "-",
        Duration::from_secs(120),
    );
    for kind in SYSTEMS {
        let report = pausing_workload(kind, true);
        assert!(
            matches!(report.verdict, Verdict::NotLinearizable(_)),
            "{kind}: the broken variant must be caught: {report}"
        );
    }
}

/// The wrapper implements four faults of the vocabulary; arming another is
/// refused (and arms nothing), never ignored.
#[test]
fn the_faulty_wrapper_refuses_the_faults_it_does_not_implement() {
    let ctl = Control::default();
    for fault in TransportFault::ALL {
        let arm = Arm {
            trigger: None,
            nth: 1,
            fault,
        };
        let r = ctl.arm(arm);
        assert_eq!(r.is_ok(), SUPPORTED.contains(&fault), "{fault}: {r:?}");
        if let Err(e) = r {
            assert_eq!(e, common::faulty::Unsupported(fault));
            assert!(e.to_string().contains(fault.name()));
        }
        assert!(ctl.disarm().is_none(), "{fault}: nothing hit");
    }
}
