//! Multi-process clusters on a real RDMA device: three `nessie node`
//! processes on one device (soft-RoCE in the test guest), for each of the
//! five systems (the four key-value systems and Cell: its node 0 preloads
//! 400 keys, recorded, whose meganode splits spread meganodes over the
//! three nodes; its workload adds range scans; its histories go through
//! Cell's range-aware checker). Each test is one story, told for the five
//! systems in turn, each on its own three processes, ports and directory
//! ([`for_every_system`]); the processes of a run start measuring at one
//! instant announced once all of them are ready ([`start_together`]), not
//! after a fixed guess. Built only with the `verbs` feature.
//!
//! - A mixed workload from every node whose merged history (all processes
//!   stamp `CLOCK_MONOTONIC`, one clock for the whole machine) goes through
//!   the linearizability checker, which is first shown to catch a corrupted
//!   copy of the same history. Every node serves its metrics (`--metrics`),
//!   scraped before the start and after the workload: the operations, the
//!   server requests and the clock checks must have moved.
//! - `kill -9` of a node mid-run: the other nodes finish within a bounded
//!   time (this is the test that hung forever with `retry_count = 7` on
//!   soft-RoCE), failing only with typed errors naming the dead node (or an
//!   unknown outcome, or the flush of the moment it died), and the history
//!   stays linearizable.
//! - The node restarted: the others dial it again by themselves and their
//!   operations stop failing; what it held is lost (see docs/deploy.md).
//! - A node down at start-up: the others start, serve what does not need it
//!   and fail the rest with typed errors.
//! - Over a lossy link (`NESSIE_VERBS_LINK`: two devices joined by a link
//!   shaped with `tc netem`, node 0 on one end, nodes 1 and 2 on the
//!   other): loss, jitter, reordering and duplication all along, and one
//!   burst that holds every packet past the deadlines; nothing hangs, the
//!   failures are typed and counted, the history is linearizable.
//!
//! The tests are `#[ignore]`d (reported as ignored without a device); run
//! them with `--ignored` and `NESSIE_VERBS_DEVICE`, `NESSIE_VERBS_ADDR` (the
//! device's IP address) and `NESSIE_BIN` (the `nessie` binary, built with
//! `--features verbs`; default: the one cargo built) set, as
//! `tools/softroce/run.sh` does in its guest.
//! Ports `NESSIE_VERBS_PORT_BASE` (default 21000) + 10 x test + node; the
//! metrics endpoints on TCP ports 29000 + 10 x test + node.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nessie_check::ordered as cell_check;
use nessie_check::{check_history_with, CheckConfig, CheckError, Event};
use nessie_fabric_verbs::lossy_link::{LinkEnd, LossyLink};
use nessie_protocol::Response;
use nessie_systems::SystemKind;
use nessie_workload::{monotonic_ns, HistoryRecord};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn required(name: &str) -> String {
    env(name).unwrap_or_else(|| {
        panic!("{name} is not set: this device test was asked for (--ignored) but has nothing to run on; run tools/softroce/run.sh (docs/deploy.md)")
    })
}

/// The three-node cluster file of test `test`, written to its directory.
struct Cluster {
    dir: PathBuf,
    file: PathBuf,
    bin: String,
}

impl Cluster {
    /// Three nodes on the one device of `NESSIE_VERBS_DEVICE` (loopback).
    fn new(test: u16) -> Cluster {
        Cluster::with_store(test, "")
    }

    /// [`Cluster::new`] with `store` added to the file's `[store]`.
    fn with_store(test: u16, store: &str) -> Cluster {
        let device = required("NESSIE_VERBS_DEVICE");
        let addr = required("NESSIE_VERBS_ADDR");
        let on = [0, 1, 2].map(|_| (device.clone(), addr.clone()));
        Cluster::placed(test, &on, store)
    }

    /// Node 0 on the lossy link's first end, nodes 1 and 2 on its second:
    /// every operation between node 0 and the others crosses the link.
    /// `store` adds lines to the file's `[store]`.
    fn over_link(test: u16, link: &LossyLink, store: &str) -> Cluster {
        let [a, b] = &link.ends;
        let end = |e: &LinkEnd| (e.device.clone(), e.addr.to_string());
        Cluster::placed(test, &[end(a), end(b), end(b)], store)
    }

    /// Nodes on the given (device, address) each.
    fn placed(test: u16, on: &[(String, String); 3], store: &str) -> Cluster {
        let bin = env("NESSIE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_nessie").into());
        let base: u16 =
            env("NESSIE_VERBS_PORT_BASE").map_or(21000, |v| v.parse().expect("port base"));
        let dir =
            std::env::temp_dir().join(format!("nessie-cluster-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("test directory");
        let mut text = format!(
            "device = \"{}\"\n\
             [regions]\nindex_slots_per_node = 1024\ndata_bytes_per_node = 1048576\n\
             [store]\nmax_key_len = 32\nmax_value_len = 64\nclients_per_node = 2\n\
             expiration_ms = 4000\nclock_skew_ms = 50\ndeadline_margin_ms = 1000\n{store}\n\
             [tuning]\nconnect_timeout_ms = 4000\nstaging_bytes = 262144\nretry_count = 6\n\
             ack_timeout = 14\npacket_lifetime_us = 100000\nread_deadline_ms = 3000\nhuge_pages = true\n\
             clock_check_interval_ms = 500\n",
            on[0].0
        );
        for (n, (device, addr)) in on.iter().enumerate() {
            text.push_str(&format!(
                "[[nodes]]\nid = {n}\naddress = \"{addr}\"\nport = {}\ndevice = \"{device}\"\n",
                base + 10 * test + n as u16
            ));
        }
        let file = dir.join("cluster.toml");
        std::fs::write(&file, text).expect("cluster file");
        Cluster { dir, file, bin }
    }

    /// Starts node `n` with `args` after `node --cluster F --node n`; output
    /// to `<dir>/node<n>.<tag>.out`.
    fn start(&self, n: u16, tag: &str, args: &[&str]) -> Node {
        let out = self.dir.join(format!("node{n}.{tag}.out"));
        let f = std::fs::File::create(&out).expect("output file");
        // The fabric's queue-pair failures and re-dials, for the diagnosis
        // of a failed test.
        let log = env("RUST_LOG").unwrap_or_else(|| "warn,nessie_fabric_verbs=info".into());
        let child = Command::new(&self.bin)
            .env("RUST_LOG", log)
            .arg("node")
            .arg("--cluster")
            .arg(&self.file)
            .args(["--node", &n.to_string()])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(f.try_clone().expect("dup"))
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.bin));
        Node {
            child: Some(child),
            out,
            name: format!("node{n} ({tag})"),
        }
    }

    fn history(&self, n: u16, tag: &str) -> PathBuf {
        self.dir.join(format!("node{n}.{tag}.history"))
    }
}

/// A node process; killed when dropped.
struct Node {
    child: Option<Child>,
    out: PathBuf,
    name: String,
}

impl Node {
    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// The lines of its output that explain failures: queue pairs failed,
    /// re-dials, server errors, warnings (at most 40).
    fn diagnostics(&self) -> String {
        let out = self.output();
        let lines: Vec<&str> = out
            .lines()
            .filter(|l| {
                [
                    "queue pair",
                    "reconnected",
                    "server error",
                    "server workers",
                    "WARN",
                    "ERROR",
                ]
                .iter()
                .any(|w| l.contains(w))
            })
            .collect();
        let skip = lines.len().saturating_sub(40);
        format!("--- {} ---\n{}", self.name, lines[skip..].join("\n"))
    }

    /// Waits until the output contains `what`, failing after `within`.
    fn wait_for(&mut self, what: &str, within: Duration) {
        self.wait_until(what, |out| out.contains(what), within);
    }

    /// Waits until `seen` holds for the output (which shows `what`),
    /// failing after `within`.
    fn wait_until(&mut self, what: &str, seen: impl Fn(&str) -> bool, within: Duration) {
        let start = Instant::now();
        loop {
            if seen(&self.output()) {
                return;
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!(
                        "{} exited ({status}) before printing `{what}`:\n{}",
                        self.name,
                        self.output()
                    );
                }
            }
            if start.elapsed() > within {
                panic!(
                    "{} did not print `{what}` within {within:?} (a hang: every wait must be bounded):\n{}",
                    self.name,
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Closes standard input (the node stops serving) and waits for a
    /// successful exit within `within`.
    fn stop(&mut self, within: Duration) {
        drop(self.child.as_mut().and_then(|c| c.stdin.take()));
        let status = self.wait_exit(within);
        assert!(
            status.success(),
            "{} exited with {status}:\n{}",
            self.name,
            self.output()
        );
    }

    /// Writes the start instant `at` to its standard input (`--start-at -`).
    fn announce(&mut self, at: SystemTime) {
        let secs = at.duration_since(UNIX_EPOCH).expect("clock").as_secs_f64();
        let stdin = self
            .child
            .as_mut()
            .and_then(|c| c.stdin.as_mut())
            .expect("running, standard input open");
        writeln!(stdin, "{secs}")
            .unwrap_or_else(|e| panic!("{}: announcing the start: {e}", self.name));
        stdin.flush().expect("flush");
    }

    /// Waits for it to exit on its own within `within`, and says how.
    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return status;
            }
            if start.elapsed() > within {
                let _ = c.kill();
                panic!(
                    "{} did not exit within {within:?}:\n{}",
                    self.name,
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `kill -9`.
    fn kill(&mut self) {
        let mut c = self.child.take().expect("running");
        c.kill().expect("SIGKILL");
        let _ = c.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn read_history(path: &Path) -> Vec<HistoryRecord> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| HistoryRecord::parse_line(l).unwrap_or_else(|| panic!("bad history line `{l}`")))
        .collect()
}

/// What `nessie node run --start-at -` prints once connected and preloaded.
const READY: &str = "ready: waiting for the start instant";

/// A start barrier across processes: waits (at most `within`) until every
/// node of `nodes` is ready, then announces to all one instant `AHEAD` of
/// now, and returns it. No node waits for a fixed guess of how long the
/// slowest one needs.
fn start_together(nodes: &mut [Node], within: Duration) -> SystemTime {
    for n in nodes.iter_mut() {
        n.wait_for(READY, within);
    }
    // Ahead enough for every node to read the line under emulation.
    const AHEAD: Duration = Duration::from_secs(3);
    let at = SystemTime::now() + AHEAD;
    for n in nodes.iter_mut() {
        n.announce(at);
    }
    at
}

/// Runs `story` for every system, one after another, each on its own
/// cluster (test `base + i` for the `i`th system: its own ports and
/// directory), and fails naming every system whose story failed (a failing
/// system does not hide the others' results). One after another: with the
/// five systems' fifteen processes at once, soft-RoCE under emulation
/// refused queue pairs (`rdma_create_qp`: invalid argument) and connection
/// set-ups between live nodes timed out.
fn for_every_system(base: u16, story: fn(u16, &str)) {
    for_systems(&SYSTEMS, base, story)
}

/// [`for_every_system`] for some of them.
fn for_systems(systems: &[&'static str], base: u16, story: fn(u16, &str)) {
    let mut failed = Vec::new();
    for (i, &system) in systems.iter().enumerate() {
        let run = std::thread::Builder::new()
            .name(system.to_string())
            .spawn(move || story(base + i as u16, system))
            .expect("a thread per system")
            .join();
        if let Err(e) = run {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{system}: {why}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} systems failed:\n{}",
        failed.len(),
        systems.len(),
        failed.join("\n\n")
    );
}

/// The merged history of a run of `ops` operations per client on each
/// node's two clients, every one of them recorded (Cell's node 0 records
/// its preload's PUTs too).
fn every_operation(system: &str, paths: &[String], ops: usize) -> Vec<HistoryRecord> {
    let history: Vec<HistoryRecord> = paths
        .iter()
        .flat_map(|p| read_history(Path::new(p)))
        .collect();
    let preloaded = match system {
        "cell" => CELL_KEYS.parse().expect("keys"),
        "race" => RACE_KEYS.parse().expect("keys"),
        _ => 0,
    };
    assert_eq!(
        history.len(),
        preloaded + paths.len() * 2 * ops,
        "{system}: every operation recorded"
    );
    history
}

/// The checker's view: every record as what it promises
/// (`HistoryRecord::event`: a failure by what its error promises, recorded
/// with it; an unknown outcome may have taken effect, a not-committed one
/// is left out by the checker and must not have). A transport error of the
/// fabric is held to that promise like every other error (it used to be
/// excused as an unknown outcome): a client that returns one after its
/// write may have committed is caught here.
fn events(history: &[HistoryRecord]) -> Vec<Event> {
    history.iter().map(HistoryRecord::event).collect()
}

/// Cell's checker's view of a history (scans included), without the
/// failures that committed nothing (which it would leave out too: so that
/// the verdict line counts them apart), failed writes that may have
/// executed kept.
fn cell_events(history: &[HistoryRecord]) -> Vec<Event> {
    history
        .iter()
        .filter(|h| !h.committed_nothing())
        .map(HistoryRecord::event)
        .collect()
}

const MAX_STEPS: u64 = 5_000_000;

/// Checks the merged history of `system` (Cell's by its range-aware
/// checker), after showing the check catches a copy with one answer
/// corrupted. Prints the verdict line CI shows.
fn assert_linearizable(what: &str, system: &str, history: &[HistoryRecord], processes: usize) {
    if system == "cell" {
        return assert_cell_linearizable(what, history, processes);
    }
    // RACE's PUT cannot say whether its key existed (docs/baselines.md):
    // its answers are not held to it, its writes are.
    let kind: SystemKind = system.parse().expect("a system name");
    let check_history = |evs: &[Event], max_steps: u64| {
        let cfg = CheckConfig {
            max_steps,
            put_existence: kind.put_answers_existence(),
        };
        check_history_with(evs, &cfg)
    };
    let evs = events(history);
    let keys = evs
        .iter()
        .map(|e| e.key().to_vec())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    // Teeth: a GET that returned a value no one wrote.
    let mut broken = evs.clone();
    if let Some(e) = broken
        .iter_mut()
        .find(|e| matches!(e.ret, Ok(Response::Get(Some(_)))))
    {
        e.ret = Ok(Response::Get(Some(b"never written".to_vec())));
        assert!(
            check_history(&broken, MAX_STEPS).is_err_and(|e| e.is_violation()),
            "{what}: the checker must reject a corrupted copy of the history"
        );
    }
    match check_history(&evs, MAX_STEPS) {
        Ok(_) => println!(
            "\nLINEARIZABILITY {what}: linearizable ({} operations checked, from {processes} processes on {keys} keys; {} of them failed with nothing committed, which the checker held to that)",
            evs.len(),
            history.iter().filter(|h| h.committed_nothing()).count()
        ),
        // Out of steps is no verdict (the guest runs such a story once
        // more); a malformed history is the recorder's defect, like a
        // violation.
        Err(e @ CheckError::Inconclusive(_)) => {
            println!("\nLINEARIZABILITY {what}: no verdict (the checker ran out of steps)");
            panic!("{what}: {e}");
        }
        Err(e @ CheckError::Malformed(_)) => {
            println!("\nLINEARIZABILITY {what}: NOT checkable (malformed history)");
            panic!("{what}: {e}");
        }
        Err(v) => {
            println!("\nLINEARIZABILITY {what}: NOT linearizable");
            panic!("{what}: {v}");
        }
    }
}

/// [`assert_linearizable`] for Cell: its checker joins keys a scan covers.
fn assert_cell_linearizable(what: &str, history: &[HistoryRecord], processes: usize) {
    let evs = cell_events(history);
    let keys = history
        .iter()
        .map(|h| h.request.key().to_vec())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let scans = evs
        .iter()
        .filter(|e| matches!(e.ret, Ok(Response::Scan(_))))
        .count();
    // Teeth: a scan (or, without one, a GET) that returned a value no one
    // wrote.
    let mut broken = evs.clone();
    let corrupted = broken.iter_mut().find_map(|e| match &mut e.ret {
        Ok(Response::Scan(es)) if !es.is_empty() => {
            es[0].1 = b"never written".to_vec();
            Some(())
        }
        _ => None,
    });
    let corrupted = corrupted.or_else(|| {
        broken.iter_mut().find_map(|e| match &mut e.ret {
            Ok(Response::Get(Some(v))) => {
                *v = b"never written".to_vec();
                Some(())
            }
            _ => None,
        })
    });
    if corrupted.is_some() {
        assert!(
            cell_check::check(&broken, MAX_STEPS).is_err(),
            "{what}: the checker must reject a corrupted copy of the history"
        );
    }
    match cell_check::check(&evs, MAX_STEPS) {
        Ok(_) => println!(
            "\nLINEARIZABILITY {what}: linearizable ({} operations checked, {scans} of them range scans, from {processes} processes on {keys} keys; {} more failed with nothing committed and were left out)",
            evs.len(),
            history.len() - evs.len()
        ),
        Err(v) => {
            println!("\nLINEARIZABILITY {what}: NOT linearizable");
            panic!("{what}: {v}");
        }
    }
}

fn failures(history: &[HistoryRecord]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for h in history {
        if let Err(f) = &h.ret {
            *m.entry(f.kind.clone()).or_default() += 1;
        }
    }
    m
}

const SYSTEMS: [&str; 5] = ["nessie", "nessie-sd", "nessie-hy", "pilaf", "cell"];

/// Cell's keys in the tests that need its meganodes on every node: node 0
/// preloads them, and with 16-node meganodes their splits place meganodes
/// on the other two nodes (3 to 7 splits on the simulator, at least 1
/// meganode on each node, `node::cell`'s unit test). Not fewer: with 200 keys the only split
/// put the bottom half on node 1 and the new root meganode on node 2.
const CELL_KEYS: &str = "400";

/// What `system` needs on every node (`serve` and `run` alike): server
/// workers for the server-driven systems and Cell, Cell's meganode size.
fn shape(system: &str) -> Vec<&'static str> {
    match system {
        "nessie" | "race" | "rcuckoo" => vec![],
        "cell" => vec!["--server-workers", "1", "--cell-meganode-nodes", "16"],
        _ => vec!["--server-workers", "1"],
    }
}

/// `nessie node run` of `system` on node `node`: nothing preloaded, except
/// Cell's node 0, which preloads the keys (its PUTs recorded); Cell adds
/// 10 % range scans of 3 entries.
fn workload<'a>(system: &'a str, node: u16, history: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "run",
        "--system",
        system,
        "--clients",
        "2",
        "--key-size",
        "16",
        "--value-size",
        "32",
        "--get-pct",
        "50",
        "--delete-pct",
        // RACE as published loses a write where racing inserts meet a
        // DELETE (docs/baselines.md): its story preloads the keys and
        // deletes none, so no insert races another.
        if system == "race" { "0" } else { "10" },
        "--history",
        history,
        "--serve-after",
    ];
    v.extend(shape(system));
    if system == "cell" {
        v.extend(["--scan-pct", "10", "--scan-len", "3"]);
    }
    if !matches!(system, "cell" | "race") || node != 0 {
        v.push("--no-preload");
    }
    v.extend_from_slice(extra);
    v
}

#[test]
#[ignore = "needs an RDMA device: run with --ignored inside the soft-RoCE guest (tools/softroce/run.sh)"]
fn three_node_processes_give_linearizable_histories_for_every_system() {
    for_every_system(0, three_processes);
}

/// RACE hashing (issue 43) on real RDMA, three processes that host their
/// clients' blocks and subtables: node 0 preloads the keys and no one
/// deletes, so no insert races another (docs/baselines.md: RACE as
/// published is not linearizable where racing inserts meet a DELETE); the
/// merged history's values are checked, its PUT answers free.
#[test]
#[ignore = "needs an RDMA device: run with --ignored inside the soft-RoCE guest (tools/softroce/run.sh)"]
fn race_three_node_processes_give_linearizable_histories_without_racing_inserts() {
    for_systems(&["race"], 40, three_processes);
}

/// RCuckoo (issue 43) on real RDMA, three processes that host their
/// clients' extents and their shards of rows and locks: its lock CASes with
/// the row READs fenced behind them, and its row WRITEs with the releases
/// ordered behind them, are chains on the verbs endpoint (`IBV_SEND_FENCE`
/// on the fenced links); the merged history is checked like every other
/// system's, DELETEs and racing inserts included.
#[test]
#[ignore = "needs an RDMA device: run with --ignored inside the soft-RoCE guest (tools/softroce/run.sh)"]
fn rcuckoo_three_node_processes_give_linearizable_histories() {
    for_systems(&["rcuckoo"], 41, three_processes);
}

/// RACE's keys in its three-process story (node 0 preloads them).
const RACE_KEYS: &str = "6";

/// Clients without storage on real RDMA (issues 41 and 42): a process that
/// hosts no node (`nessie node run --without-storage`) joins a 3-node
/// cluster it did not start. Its two clients take shares node 1 holds by
/// lease and write their entries through the memory windows node 1's
/// agent binds (`ibv_bind_mw`), in size classes; its history, merged with
/// the nodes' own clients', is linearizable, and it gives the shares back
/// as its run ends. A second such process takes them at once and is
/// killed (`kill -9`) mid-run: a third started at once is refused (the
/// dead process's leases stand), and one started after the lease term
/// takes the shares the agent took back and runs without a failure.
#[test]
#[ignore = "needs an RDMA device: run with --ignored inside the soft-RoCE guest (tools/softroce/run.sh)"]
fn a_process_hosting_no_node_runs_clients_without_storage_and_a_killed_ones_shares_are_taken_back()
{
    const T: u16 = 50;
    // Seconds: the shares of a process that stopped come back after it.
    const LEASE_MS: u64 = 2000;
    let store = format!("{SIZE_CLASSES}\npure_clients_per_node = 2\nlease_term_ms = {LEASE_MS}");
    let c = Cluster::with_store(T, &store);
    let base: u16 = env("NESSIE_VERBS_PORT_BASE").map_or(21000, |v| v.parse().expect("port base"));
    let from = |k: u16| {
        format!(
            "{}:{}",
            required("NESSIE_VERBS_ADDR"),
            base + 10 * T + 5 + k
        )
    };
    let mix = [
        "--clients",
        "2",
        "--keys",
        "6",
        "--key-size",
        "16",
        "--value-size",
        "32",
        "--value-mix",
        "uniform",
        "--get-pct",
        "50",
        "--delete-pct",
        "10",
    ];
    let app_args = |addr: &str, history: Option<&str>, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["run", "--without-storage", addr, "--no-preload"]
            .into_iter()
            .chain(mix)
            .chain(extra.iter().copied())
            .map(String::from)
            .collect();
        if let Some(h) = history {
            v.extend(["--history".to_string(), h.to_string()]);
        }
        v
    };
    let mut paths: Vec<String> = (0..3)
        .map(|n| c.history(n, "lin").display().to_string())
        .collect();
    let mut nodes: Vec<Node> = (0..3u16)
        .map(|n| {
            let extra = [
                "--keys",
                "6",
                "--ops",
                "40",
                "--seconds",
                "60",
                "--start-at",
                "-",
                "--value-mix",
                "uniform",
            ];
            c.start(n, "lin", &workload("nessie", n, &paths[n as usize], &extra))
        })
        .collect();
    // The process without storage, started once the nodes serve.
    for n in &mut nodes {
        n.wait_for(READY, Duration::from_secs(240));
    }
    let app_history = c.history(1, "app").display().to_string();
    let args = app_args(
        &from(0),
        Some(&app_history),
        &["--ops", "40", "--seconds", "60", "--start-at", "-"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    nodes.push(c.start(1, "app", &args));
    paths.push(app_history);
    start_together(&mut nodes, Duration::from_secs(240));
    for n in &mut nodes {
        n.wait_for("workload finished", Duration::from_secs(150));
    }
    let app_out = nodes[3].output();
    assert!(
        app_out.contains("hosting no node: 2 clients without storage of node1"),
        "{app_out}"
    );
    let history = every_operation("nessie", &paths, 40);
    let diagnose = |nodes: &[Node]| {
        nodes
            .iter()
            .map(Node::diagnostics)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        failures(&history).is_empty(),
        "a healthy cluster fails nothing: {:?}\n{}",
        failures(&history),
        diagnose(&nodes)
    );
    assert_linearizable(
        "nessie (3 node processes and 1 without storage)",
        "nessie",
        &history,
        4,
    );
    // The application example (fabric-verbs/examples/application.rs), an
    // application host of its own, joins the running cluster too.
    let app_bin = required("NESSIE_APP_BIN");
    let out = c.dir.join("application.out");
    let child = Command::new(&app_bin)
        .arg(&c.file)
        .args(["2", &from(4)])
        .stdout(std::fs::File::create(&out).expect("output file"))
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {app_bin}: {e}"));
    let mut example = Node {
        child: Some(child),
        out,
        name: "the application example".into(),
    };
    let status = example.wait_exit(Duration::from_secs(120));
    let said = example.output();
    assert!(
        status.success() && said.contains("wrote 20 sessions, read 20 back open"),
        "the application example ({status}):\n{said}"
    );
    println!("\nAPPLICATION EXAMPLE: {}", said.trim());
    // The first process gave its shares back as its run ended
    // (`release_share`): a second takes them at once, and runs until
    // killed.
    let args = app_args(&from(1), None, &["--seconds", "600", "--start-at", "-"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut doomed = c.start(1, "killed", &args);
    doomed.wait_for(READY, Duration::from_secs(120));
    start_together(std::slice::from_mut(&mut doomed), Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(5));
    doomed.kill();
    // Its leases stand: a third process finds both shares held.
    let args = app_args(&from(2), None, &["--ops", "20", "--seconds", "60"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut refused = c.start(1, "refused", &args);
    let status = refused.wait_exit(Duration::from_secs(120));
    let out = refused.output();
    assert!(
        !status.success() && out.contains("in use"),
        "the dead process's shares were handed out before its lease term passed:\n{out}"
    );
    // After the term, the agent has taken them back: a fourth takes them.
    std::thread::sleep(Duration::from_millis(3 * LEASE_MS));
    let again = c.history(1, "again").display().to_string();
    let args = app_args(&from(3), Some(&again), &["--ops", "20", "--seconds", "60"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut after = c.start(1, "again", &args);
    after.wait_for("workload finished", Duration::from_secs(150));
    let history = read_history(Path::new(&again));
    assert_eq!(history.len(), 40, "every operation recorded");
    assert!(
        failures(&history).is_empty(),
        "the shares taken back serve a new process: {:?}\n{}",
        failures(&history),
        after.diagnostics()
    );
    println!(
        "\nWITHOUT STORAGE: a process hosting no node ran 80 operations (linearizable with the nodes' 240) and gave its shares back, taken at once by the next; a killed one's shares were refused at once and taken again after the {LEASE_MS} ms lease term (40 operations, none failed)"
    );
    for n in &mut nodes[..3] {
        n.stop(Duration::from_secs(20));
    }
}

/// Nessie's data tables in size classes on real RDMA (issue 41): entries of
/// 56 B (a 16 B key with up to 8 B of value) and 72 B (up to 24 B) beside
/// the main 128 B, each a fifth of the data region, and values of uniform
/// sizes from 8 to 32 B, so that every class takes writes and updates move
/// keys between them.
const SIZE_CLASSES: &str = "size_classes = [{ entry_bytes = 56, percent = 20 }, \
                            { entry_bytes = 72, percent = 20 }]";

/// The metrics endpoint of node `n` of test `t`.
fn metrics_addr(t: u16, n: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 29000 + 10 * t + n))
}

/// One scrape of the metrics endpoint at `addr` (the body of the answer),
/// retried for up to 10 s while the endpoint does not answer.
fn scrape(addr: SocketAddr) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let asked =
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n");
            let mut text = String::new();
            if asked.is_ok()
                && s.read_to_string(&mut text).is_ok()
                && text.starts_with("HTTP/1.1 200")
            {
                return text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{addr}: the metrics endpoint never answered"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The sum of every series of metric `name` in a scrape (0 if absent).
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Scrapes node `n` of test `t` until `metric`'s sum reaches `at_least`
/// (published every second), within 10 s; the last scrape's sum.
fn scrape_until(t: u16, n: u16, metric: &str, at_least: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = metric_sum(&scrape(metrics_addr(t, n)), metric);
        if v >= at_least || Instant::now() >= deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Three processes of `system` run 40 operations per client from one start
/// instant; the merged history is linearizable and the merged report
/// counts every operation. Their metrics endpoints show the counters move.
/// Nessie's run in size classes ([`SIZE_CLASSES`], values of uniform
/// sizes).
fn three_processes(t: u16, system: &str) {
    let nessie = system == "nessie";
    let c = Cluster::with_store(t, if nessie { SIZE_CLASSES } else { "" });
    let sizes: &[&str] = if nessie {
        &["--value-mix", "uniform"]
    } else {
        &[]
    };
    let metrics: Vec<String> = (0..3).map(|n| metrics_addr(t, n).to_string()).collect();
    let paths: Vec<String> = (0..3)
        .map(|n| c.history(n, "lin").display().to_string())
        .collect();
    // One start instant for the three processes (a start barrier,
    // announced once all are ready), and their results merged into one
    // report afterwards.
    let reports: Vec<String> = (0..3)
        .map(|n| {
            c.dir
                .join(format!("node{n}.lin.json"))
                .display()
                .to_string()
        })
        .collect();
    let mut nodes: Vec<Node> = (0..3u16)
        .map(|n| {
            c.start(
                n,
                "lin",
                &workload(
                    system,
                    n,
                    &paths[n as usize],
                    &[
                        "--keys",
                        match system {
                            "cell" => CELL_KEYS,
                            "race" => RACE_KEYS,
                            _ => "6",
                        },
                        "--ops",
                        "40",
                        "--seconds",
                        "60",
                        "--start-at",
                        "-",
                        "--report",
                        &reports[n as usize],
                        "--metrics",
                        &metrics[n as usize],
                    ]
                    .into_iter()
                    .chain(sizes.iter().copied())
                    .collect::<Vec<_>>(),
                ),
            )
        })
        .collect();
    for n in &mut nodes {
        n.wait_for(READY, Duration::from_secs(240));
    }
    // Before the start: what the preload did (Cell's node 0), nothing else.
    let ops_before = metric_sum(&scrape(metrics_addr(t, 0)), "nessie_operations_total");
    start_together(&mut nodes, Duration::from_secs(240));
    for n in &mut nodes {
        n.wait_for("workload finished", Duration::from_secs(150));
    }
    // After: node 0's two clients' 80 operations, live; the transport and
    // server counters as the publisher last read them (every second).
    let ops_after = scrape_until(t, 0, "nessie_operations_total", ops_before + 80.0);
    assert!(
        ops_after >= ops_before + 80.0,
        "{system}: node 0's operations did not move on its metrics endpoint: {ops_before} -> {ops_after}"
    );
    let checks = scrape_until(t, 0, "nessie_clock_checks_total", 1.0);
    assert!(
        checks >= 1.0,
        "{system}: no clock check on node 0's endpoint"
    );
    // Nessie, RACE and RCuckoo have no server threads (and no such series).
    let servers = !matches!(system, "nessie" | "race" | "rcuckoo");
    let served: Vec<f64> = (0..3)
        .filter(|_| servers)
        .map(|n| scrape_until(t, n, "nessie_server_requests_total", 1.0))
        .collect();
    if servers {
        assert!(
            served.iter().sum::<f64>() >= 1.0,
            "{system}: no server requests on any node's endpoint: {served:?}"
        );
    }
    let page = scrape(metrics_addr(t, 0));
    println!(
        "\nMETRICS {system} (3 processes), node 0: operations {ops_before:.0} -> {ops_after:.0}, server requests (nodes 0-2) {served:?}, clock checks {checks:.0}, queue pairs failed {}, re-dials {}, watchdog trips {}, NIC counters {} series",
        metric_sum(&page, "nessie_qp_failures_total"),
        metric_sum(&page, "nessie_redials_total"),
        metric_sum(&page, "nessie_watchdog_trips_total"),
        page.lines().filter(|l| l.starts_with("nessie_nic_counter{")).count()
    );
    // The cluster file asks for huge pages; the guest reserves some.
    let reserved = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    for n in &nodes {
        let huge = n.output().contains("huge pages,") || n.output().contains(", huge pages");
        assert_eq!(
            huge,
            reserved > 0,
            "{}: regions on huge pages iff the system has them:\n{}",
            n.name,
            n.output()
        );
    }
    for n in &mut nodes {
        n.stop(Duration::from_secs(20));
    }
    let history = every_operation(system, &paths, 40);
    assert!(
        failures(&history).is_empty(),
        "{system}: a healthy cluster fails nothing: {:?}\n{}",
        failures(&history),
        nodes
            .iter()
            .map(Node::diagnostics)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_linearizable(&format!("{system} (3 processes)"), system, &history, 3);
    // Each node prints its device's counters' growth over the run (sysfs;
    // soft-RoCE has them): node 0's go into the guest's summary.
    let out = nodes[0].output();
    let nic = out
        .lines()
        .find(|l| l.starts_with("during the run, this node's NIC counters"))
        .unwrap_or_else(|| panic!("{system}: node 0 printed no NIC counters:\n{out}"));
    println!("\nNIC {system} (3 processes), node 0, {nic}");
    // The periodic clock check (every 500 ms here) measured both peers, and
    // one machine's clock is within any skew of itself.
    for peer in 1..3 {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("clock check: node{peer}: offset")))
            .unwrap_or_else(|| {
                panic!("{system}: node 0 printed no clock check of node{peer}:\n{out}")
            });
        assert!(line.ends_with(" 0 beyond the skew"), "{system}: {line}");
        println!("CLOCK {system} (3 processes), node 0, {line}");
    }
    let dog = out
        .lines()
        .find(|l| l.starts_with("deadline watchdog: "))
        .unwrap_or_else(|| panic!("{system}: node 0 printed no watchdog line:\n{out}"));
    println!("WATCHDOG {system} (3 processes), node 0, {dog}");
    // The guest is emulated (TCG): its timers are coarse.
    let merged = Command::new(&c.bin)
        .args(["node", "report", "--max-spread-ms", "500"])
        .args(&reports)
        .output()
        .expect("nessie node report");
    let text = String::from_utf8_lossy(&merged.stdout);
    assert!(merged.status.success(), "{system}: report failed: {text}");
    println!("{text}");
    assert!(
        text.contains(&format!("{system} on 3 nodes: 240 operations")),
        "{system}: merged report:\n{text}"
    );
    assert!(
        text.contains("the nodes started together"),
        "{system}: one start instant, one measured window:\n{text}"
    );
}

/// The lossy link's everyday state in the story below: packets delayed
/// 2 ms give or take 1 ms (so reordered), 1 % lost, 1 % duplicated, 5 %
/// sent out of order.
const LOSSY: &str = "delay 2ms 1ms loss 1% duplicate 1% reorder 5%";
/// The burst: every packet held 1.5 s each way, past the cluster's 675 ms
/// landing deadline and 1 s deadline margin (the late-landing case).
const BURST: &str = "delay 1500ms";
/// How long the burst lasts.
const BURST_FOR: Duration = Duration::from_millis(2500);

#[test]
#[ignore = "needs two RDMA devices joined by a link it may disturb: run with --ignored and NESSIE_VERBS_LINK inside the soft-RoCE guest (tools/softroce/run.sh)"]
fn a_lossy_link_and_a_burst_past_the_deadlines_leave_histories_linearizable() {
    for_systems(&LOSSY_SYSTEMS, 30, over_a_lossy_link);
}

/// The systems the lossy-link story runs in CI: Nessie, one of the three
/// server-driven systems (NessieSD, NessieHY and Pilaf share one server
/// machinery, `nessie-baselines`' executor and request channel) and Cell.
/// All five passed it in the first guest run (2026-11-28); with all five
/// the guest ran 630 s, past the 10 minutes it is kept under. Add the
/// other two here to run them.
const LOSSY_SYSTEMS: [&str; 3] = ["nessie", "nessie-sd", "cell"];

/// Three processes of `system`, node 0 across the lossy link from nodes 1
/// and 2 (`nessie_fabric_verbs::lossy_link`): the link loses, delays,
/// reorders and duplicates packets all along, and once holds every packet
/// for 1.5 s each way (WRITEs and CASes land after their queue pair was
/// failed at the deadline, acknowledgements come after the requester gave
/// up). Nothing hangs (every process finishes within a bound), every
/// operation is recorded, the failures are typed and counted (unknown
/// outcomes among them), and the merged history is linearizable.
fn over_a_lossy_link(t: u16, system: &str) {
    let link = LossyLink::from_env().unwrap_or_else(|e| panic!("{e}"));
    // No reuse hold (there is none since issue 39): the burst holds CASes
    // past the margin and the landing deadline, and the incarnation tags
    // leave them 127 expiration periods to land.
    let c = Cluster::over_link(t, &link, "");
    link.set(LOSSY).expect("tc netem");
    let paths: Vec<String> = (0..3)
        .map(|n| c.history(n, "lossy").display().to_string())
        .collect();
    let mut nodes: Vec<Node> = (0..3u16)
        .map(|n| {
            c.start(
                n,
                "lossy",
                &workload(
                    system,
                    n,
                    &paths[n as usize],
                    &[
                        "--keys",
                        if system == "cell" { CELL_KEYS } else { "6" },
                        "--ops",
                        "30",
                        "--think-us",
                        "100000",
                        "--seconds",
                        "90",
                        "--start-at",
                        "-",
                    ],
                ),
            )
        })
        .collect();
    let start_at = start_together(&mut nodes, Duration::from_secs(240));
    // The burst, a second into the measured run (30 operations 100 ms apart
    // take at least 3 s).
    if let Ok(wait) = (start_at + Duration::from_secs(1)).duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
    let burst_at = monotonic_ns();
    link.set(BURST).expect("tc netem");
    std::thread::sleep(BURST_FOR);
    let burst_stats = link.stats();
    link.set(LOSSY).expect("tc netem");
    let burst_end = monotonic_ns();
    for n in &mut nodes {
        n.wait_for("workload finished", Duration::from_secs(180));
    }
    for n in &mut nodes {
        n.stop(Duration::from_secs(30));
    }
    let link_stats = link.stats();
    link.clear();
    let history = every_operation(system, &paths, 30);
    let spanning = history
        .iter()
        .filter(|h| h.invoke < burst_end && h.response > burst_at)
        .count();
    assert!(
        spanning > 0,
        "{system}: no operation was in flight during the burst"
    );
    let unknown = history
        .iter()
        .filter(|h| matches!(&h.ret, Err(f) if f.kind == "outcome unknown"))
        .count();
    let dog = nodes[0]
        .output()
        .lines()
        .find(|l| l.starts_with("deadline watchdog: "))
        .unwrap_or("deadline watchdog: (no line)")
        .to_string();
    println!(
        "\nLOSSY {system}: {} operations, {spanning} in flight during the {BURST} burst, {} failed {:?} ({unknown} with an unknown outcome); node 0's {dog}; the link during the burst: {burst_stats}; at the end: {link_stats}",
        history.len(),
        history
            .iter()
            .filter(|h| h.ret.is_err())
            .count(),
        failures(&history),
    );
    assert_linearizable(
        &format!("{system} (3 processes over a lossy link, a {BURST} burst)"),
        system,
        &history,
        3,
    );
}

/// Whether a failure after node `victim` died is one the survivors may
/// report: it names the victim, or the outcome is unknown, or it is a
/// timeout or the flush of the queue pair to it at the moment it died.
fn allowed_after_kill(kind: &str, victim: u16) -> bool {
    kind.contains(&format!("node{victim}"))
        || kind == "outcome unknown"
        || kind == "timeout"
        || kind.starts_with("fabric")
}

/// The node `kill_and_restart` kills. Node 2 for the key-value systems
/// (keys hash over every node). Node 1 for Cell: node 0 must live (it
/// holds the region directory and the root word), and its first meganode
/// split puts the bottom half on node 1 and the new root meganode on node 2
/// (the least loaded nodes, in order), through which every search that
/// misses its cache goes: killing node 2 stalls all of those (docs/cell.md,
/// "Failures"), killing node 1 fails the keys it holds.
fn victim_of(system: &str) -> u16 {
    if system == "cell" {
        1
    } else {
        2
    }
}

/// `kill -9` of a node mid-run, then its restart (peers re-dial), for `system`.
fn kill_and_restart(test: u16, system: &str) {
    let c = Cluster::new(test);
    let v = victim_of(system);
    let alive: Vec<u16> = (0..3u16).filter(|&n| n != v).collect();
    let paths: Vec<String> = alive
        .iter()
        .map(|&n| c.history(n, "kill").display().to_string())
        .collect();
    let mut serve = vec!["serve", "--system", system];
    serve.extend(shape(system));
    let mut victim = c.start(v, "victim", &serve);
    // The victim stays dead longer than the longest wait a survivor may be
    // in when it dies, and the window checked below starts after that wait
    // (`settled`). A PUT or DELETE of a server-driven system whose request
    // WRITE may have reached it is settled by cancelling it there, which
    // cannot succeed, so it returns "outcome unknown" only after its bounded
    // wait (up to twice the 10 s operation timeout): a 4 s window right
    // after the kill saw every survivor in such a wait (0 operations) in two
    // CI runs. A Cell operation that needs the dead node retries until its
    // 10 s operation timeout. A Nessie operation fails at once (`NodeDown`),
    // or after its 1 s landing deadline if it was in flight.
    let settled = Duration::from_secs(match system {
        "nessie" => 4,
        "cell" => 12,
        _ => 22,
    });
    // The window: 4 s for the server-driven systems (hundreds of
    // operations), longer for Cell (a client meeting the dead node is busy
    // for 10 s; 12 operations in 14 s seen) and Nessie.
    let dead_for = settled
        + Duration::from_secs(match system {
            "nessie" => 8,
            "cell" => 10,
            _ => 4,
        });
    // The victim dies 6 s in and takes a few seconds to listen once
    // restarted (the longest seen, 10 s, in the emulated guest on a loaded
    // machine); the window checked after the restart starts 8 s after it
    // listens. With 18 s left after the restart, two systems once had no
    // operation in that window.
    let run_for = (6 + dead_for.as_secs() + 26).to_string();
    // The survivors start measuring at one instant, announced once both
    // are connected (and Cell's node 0 has preloaded); the victim dies 6 s
    // into the run (a fixed sleep after start-up once let a slow connection
    // set-up reach past the kill, leaving no operation in the dead window).
    let mut survivors: Vec<Node> = alive
        .iter()
        .zip(&paths)
        .map(|(&n, path)| {
            let args = workload(
                system,
                n,
                path,
                &[
                    "--keys",
                    if system == "cell" { CELL_KEYS } else { "64" },
                    "--think-us",
                    "10000",
                    "--seconds",
                    &run_for,
                    "--start-at",
                    "-",
                ],
            );
            c.start(n, "kill", &args)
        })
        .collect();
    victim.wait_for("listening on", Duration::from_secs(120));
    let start_at = start_together(&mut survivors, Duration::from_secs(240));
    if system == "cell" {
        // Cell's data is where meganode splits put it: the victim must hold
        // some before its death can fail anything.
        victim.wait_until(
            &format!("cell: node{v} holds at least 1 meganode"),
            |out| {
                out.lines().any(|l| {
                    l.strip_prefix(&format!("cell: node{v} holds "))
                        .and_then(|r| r.split(' ').next())
                        .and_then(|n| n.parse::<u32>().ok())
                        .is_some_and(|n| n >= 1)
                })
            },
            Duration::from_secs(40),
        );
    }
    // Let the workload run on all three nodes, then kill the victim.
    let kill_at = start_at + Duration::from_secs(6);
    if let Ok(wait) = kill_at.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
    let killed_at = monotonic_ns();
    victim.kill();
    std::thread::sleep(dead_for);
    let restarted_at = monotonic_ns();
    let mut reborn = c.start(v, "restarted", &serve);
    reborn.wait_for("listening on", Duration::from_secs(120));
    // The victim accepts connections from here. A survivor's endpoint
    // re-dials a node that stayed down at most every 5 s
    // (REDIAL_MAX_INTERVAL) and a re-dial takes at most 2 s
    // (REDIAL_TIMEOUT): from 8 s on, every survivor has dialled it again.
    let listening_at = monotonic_ns();
    // The survivors finish their run within a bound, the node dead for
    // part of it (with the old retry_count = 7 they hung here forever).
    for s in &mut survivors {
        s.wait_for("workload finished", Duration::from_secs(90));
    }
    for s in &mut survivors {
        s.stop(Duration::from_secs(20));
    }
    reborn.stop(Duration::from_secs(20));
    for s in &survivors {
        for l in s.output().lines().filter(|l| l.starts_with("cell tree as")) {
            println!("{system}: {l}");
        }
    }
    let history: Vec<HistoryRecord> = paths
        .iter()
        .flat_map(|p| read_history(Path::new(p)))
        .collect();
    let settled_ns = u64::try_from(settled.as_nanos()).expect("ns");
    let during: Vec<HistoryRecord> = history
        .iter()
        .filter(|h| h.invoke > killed_at + settled_ns && h.response < restarted_at)
        .cloned()
        .collect();
    let after: Vec<HistoryRecord> = history
        .iter()
        .filter(|h| h.invoke > listening_at + 8_000_000_000)
        .cloned()
        .collect();
    let before_restart: Vec<HistoryRecord> = history
        .iter()
        .filter(|h| h.response < restarted_at)
        .cloned()
        .collect();
    println!(
        "\n{system}: {} operations, {} while node {v} was dead ({} failed: {:?}), {} after its restart ({} failed: {:?}; it listened {:.1} s after it was started)",
        history.len(),
        during.len(),
        during.iter().filter(|h| h.ret.is_err()).count(),
        failures(&during),
        after.len(),
        after.iter().filter(|h| h.ret.is_err()).count(),
        failures(&after),
        (listening_at - restarted_at) as f64 / 1e9
    );
    for (kind, n) in failures(&history) {
        assert!(
            allowed_after_kill(&kind, v),
            "{system}: {n} x `{kind}` is not an error a dead node {v} explains"
        );
    }
    // Served while the victim is dead: operations invoked after the waits
    // above. For Cell, whose clients spend part of that time in operations
    // that need the dead node (each retries for its 500 ms unreachable
    // grace, then fails `Unreachable`), any operation invoked after the
    // kill that succeeded before the restart.
    let served_from = if system == "cell" {
        killed_at + 1_000_000_000
    } else {
        killed_at + settled_ns
    };
    let ok_during = history
        .iter()
        .filter(|h| h.invoke > served_from && h.response < restarted_at && h.ret.is_ok())
        .count();
    assert!(
        ok_during > 0,
        "{system}: keys not on node {v} are served while it is dead"
    );
    // And the victim held keys: some operations failed (typed) once it
    // died. (Cell's keys are where its meganode splits put them: this
    // fails if the victim held none of the keys' leaves.)
    let failed_dead = history
        .iter()
        .filter(|h| h.response > killed_at && h.invoke < restarted_at && h.ret.is_err())
        .count();
    assert!(
        failed_dead > 0,
        "{system}: no operation failed while node {v} was dead: did it hold any key?"
    );
    for h in &during {
        let latency = Duration::from_nanos(h.response - h.invoke);
        assert!(
            latency < Duration::from_secs(12),
            "{system}: an operation took {latency:?} with node {v} dead"
        );
    }
    let unreachable_after = failures(&after)
        .iter()
        .filter(|(k, _)| k.contains(&format!("unreachable node{v}")))
        .map(|(_, n)| *n)
        .sum::<usize>();
    assert!(
        !after.is_empty(),
        "{system}: the survivors ran on after the restart"
    );
    // (For Cell this shows that the restarted node is dialled again too:
    // its operations fail `Unreachable` only after a node stayed
    // unreachable for the grace; the keys the victim held stay lost after
    // its restart, zeroed, and fail with `Timeout`.)
    assert_eq!(
        unreachable_after,
        0,
        "{system}: the survivors re-dialled the restarted node {v}: {:?}\n{}",
        failures(&after),
        survivors
            .iter()
            .map(Node::diagnostics)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_linearizable(
        &format!("{system} (node {v} killed mid-run)"),
        system,
        &before_restart,
        2,
    );
}

#[test]
#[ignore = "needs an RDMA device: run with --ignored inside the soft-RoCE guest (tools/softroce/run.sh)"]
fn a_killed_node_fails_only_its_keys_and_is_dialled_again_after_a_restart() {
    for_every_system(10, kill_and_restart);
}

#[test]
#[ignore = "needs an RDMA device: run with --ignored inside the soft-RoCE guest (tools/softroce/run.sh)"]
fn a_node_down_at_start_up_leaves_the_others_serving_the_rest() {
    for_every_system(20, down_at_start);
}

/// Nodes 0 and 1 of `system` run with node 2 never started. Cell's node 0
/// preloads only 16 keys here: no meganode split, so every key stays in
/// the root meganode on node 0, and node 2 holds none of them (a split
/// choosing node 2 while it is down is abandoned: docs/cell.md).
fn down_at_start(t: u16, system: &str) {
    let c = Cluster::new(t);
    let paths: Vec<String> = (0..2)
        .map(|n| c.history(n, "down").display().to_string())
        .collect();
    let mut nodes: Vec<Node> = (0..2u16)
        .map(|n| {
            let args = workload(
                system,
                n,
                &paths[n as usize],
                &["--keys", "16", "--think-us", "2000", "--seconds", "5"],
            );
            c.start(n, "down", &args)
        })
        .collect();
    for n in &mut nodes {
        n.wait_for("workload finished", Duration::from_secs(90));
    }
    for n in &mut nodes {
        n.stop(Duration::from_secs(20));
    }
    let history: Vec<HistoryRecord> = paths
        .iter()
        .flat_map(|p| read_history(Path::new(p)))
        .collect();
    let ok = history.iter().filter(|h| h.ret.is_ok()).count();
    println!(
        "\n{system} with node 2 down: {} operations, {ok} served, failures {:?}",
        history.len(),
        failures(&history)
    );
    assert!(ok > 0, "{system}: keys not on node 2 are served");
    for (kind, n) in failures(&history) {
        assert!(
            kind.contains("node2"),
            "{system}: {n} x `{kind}`: only node 2's keys may fail, naming it"
        );
    }
    assert_linearizable(
        &format!("{system} (node 2 down from the start)"),
        system,
        &history,
        2,
    );
    let _ = std::io::stdout().flush();
}
