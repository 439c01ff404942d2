//! Honest outcomes of Cell's writes: a fault on every step of the client's
//! side of a PUT after its request may have reached the server (the request
//! WRITE, and the cancel CAS when the server does not answer), each fault
//! kind (not executed, executed but failed, executed with its completion
//! lost, vanished); the class each PUT returns (`nessie_protocol::Outcome`)
//! is checked against what the key holds afterwards and a while later.
//! Teeth: with `CellFaults::unclaimed_writes` (writes sent unclaimed, so the
//! server runs a request its client reported as failed) the same matrix
//! must catch a lie.

mod common;

#[path = "../../baselines/tests/common/faulty.rs"]
mod faulty;

use std::thread;
use std::time::{Duration, Instant};

use common::{client, id, start, time_limit, tiny, Cell};
use faulty::{Arm, Control, FaultyFabric, SUPPORTED};
use nessie_cell::{CellClient, CellConfig, CellFaults, SearchMode};
use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::{Error, Fabric, NodeId, OpKind, Outcome, TransportFault};

/// Two server nodes and a client-only node (2), whose requests are remote
/// WRITEs; short RPC time-outs so that a fault costs little time.
fn cfg() -> CellConfig {
    CellConfig {
        server_nodes: 2,
        rpc_timeout: Duration::from_millis(100),
        op_timeout: Duration::from_secs(3),
        ..tiny()
    }
}

/// What `key` holds, read through the servers (retried while they fail).
fn truth(reader: &mut CellClient<SimEndpoint>, key: &[u8]) -> Option<Vec<u8>> {
    let start = Instant::now();
    loop {
        match reader.get(key) {
            Ok(v) => return v,
            Err(e) if start.elapsed() < Duration::from_secs(20) => eprintln!("truth: {e}"),
            Err(e) => panic!("the key cannot be read back: {e}"),
        }
    }
}

/// Where the fault is placed.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// The client's request WRITE.
    Request,
    /// The client's cancel CAS (the servers are paused, so it is needed).
    Cancel,
}

/// One PUT of a fresh key with `fault` at `step`: its outcome class, or the
/// lie it told.
fn trial(
    d: &Cell,
    c: &mut CellClient<faulty::FaultyEndpoint>,
    ctl: &Control,
    reader: &mut CellClient<SimEndpoint>,
    (step, fault): (Step, TransportFault),
    n: u64,
) -> Result<&'static str, String> {
    let key = format!("fresh-{n}").into_bytes();
    let value = format!("v{n}").into_bytes();
    let trigger = match step {
        Step::Request => OpKind::Write,
        Step::Cancel => {
            d.pause_servers();
            OpKind::Cas
        }
    };
    ctl.arm(Arm {
        trigger: Some(trigger),
        nth: 1,
        fault,
    })
    .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let r: Result<bool, Error> = c.put(&key, &value);
    let took = started.elapsed();
    let hit = ctl.disarm();
    d.resume_servers();
    assert!(
        took < Duration::from_secs(5),
        "{step:?} {fault:?}: took {took:?}"
    );
    let now = truth(reader, &key);
    thread::sleep(Duration::from_millis(150));
    let later = truth(reader, &key);
    let holds = |v: &Option<Vec<u8>>| v.as_deref() == Some(&value[..]);
    let what = format!("{step:?} {fault:?} (hit: {hit:?}): {r:?}");
    eprintln!("{what}");
    match Outcome::of(&r) {
        Outcome::Committed if !holds(&now) => Err(format!("{what} but the key holds {now:?}")),
        Outcome::NotCommitted if holds(&now) || holds(&later) => Err(format!(
            "{what} (not committed) but the key holds {now:?}, later {later:?}"
        )),
        Outcome::Committed => Ok("committed"),
        Outcome::NotCommitted => Ok("not committed"),
        Outcome::Unknown => Ok("unknown"),
    }
}

/// Every step and fault kind: the classes seen and the lies told.
fn fault_matrix(unclaimed_writes: bool) -> (Vec<&'static str>, Vec<String>) {
    let d = start(cfg());
    let faulty = FaultyFabric::new(d.fabric().clone());
    let ep = faulty.open(NodeId(2)).expect("endpoint");
    let ctl = faulty.endpoints(NodeId(2))[0].clone();
    let mut c = d.client_on(id(2, 0), ep).expect("client");
    c.set_mode(SearchMode::ServerOnly);
    c.set_faults(CellFaults {
        unclaimed_writes,
        ..CellFaults::default()
    });
    let mut reader = client(&d, 2, 1, SearchMode::ServerOnly);
    let (mut classes, mut lies) = (Vec::new(), Vec::new());
    let mut n = 0;
    for step in [Step::Request, Step::Cancel] {
        for fault in SUPPORTED {
            n += 1;
            match trial(&d, &mut c, &ctl, &mut reader, (step, fault), n) {
                Ok(class) => classes.push(class),
                Err(lie) => lies.push(lie),
            }
        }
    }
    (classes, lies)
}

#[test]
fn faults_after_a_write_request_is_sent_give_honest_outcomes() {
    let _limit = time_limit(
        "faults_after_a_write_request_is_sent_give_honest_outcomes",
        "-",
        Duration::from_secs(120),
    );
    let (classes, lies) = fault_matrix(false);
    assert!(lies.is_empty(), "dishonest outcomes:\n{}", lies.join("\n"));
    for class in ["committed", "not committed", "unknown"] {
        assert!(classes.contains(&class), "no {class} outcome: {classes:?}");
    }
}

#[test]
fn teeth_unclaimed_writes_are_caught_reporting_a_committed_put_as_failed() {
    let _limit = time_limit(
        "teeth_unclaimed_writes_are_caught_reporting_a_committed_put_as_failed",
        "-",
        Duration::from_secs(120),
    );
    let (_, lies) = fault_matrix(true);
    assert!(!lies.is_empty(), "the broken variant must be caught");
    eprintln!("caught: {}", lies[0]);
}
