//! What a simulation is asked to do ([`SimSpec`], [`Tuning`]), what it
//! reports ([`SimReport`], [`ChaosCounts`]), and the protocol configuration a
//! specification implies ([`config`]).

use std::time::Duration;

use nessie_baselines::HyOptions;
use nessie_check::Event;
use nessie_protocol::{Config, Error, Faults, MigrateSearch, OpStats};
use nessie_systems::SystemKind;
use serde::{Deserialize, Serialize};

use crate::audit::DteAudit;
use crate::chaos::Chaos;
use crate::checks::{
    CorruptState, MarginBreach, MarkedLinked, RecoveryFailure, SweepFailure, UnreachableMeganode,
};
use crate::profile::Profile;

/// Test-only fault switches of the server-driven systems, so that the
/// simulator's checks can be shown to catch a broken variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServerFaults {
    /// Server workers run PUTs and DELETEs without claiming them: a request
    /// its client cancelled after timing out still runs.
    pub skip_claims: bool,
    /// NessieHY's and Pilaf's GETs report a key absent after one scan,
    /// without the move-epoch check.
    pub skip_epoch_check: bool,
    /// Clients settle a PUT or DELETE whose request WRITE failed as before
    /// their outcomes rested on no landing time: they wait out the landing
    /// bound (A2), read their slot and, finding some other request there
    /// (or none), report "nothing committed" without cancelling; a request WRITE held
    /// past the bound ([`Chaos::late_landing`](crate::Chaos::late_landing))
    /// then runs after its client reported it as not committed
    /// ([`RpcFaults::set_settle_by_landing_bound`](nessie_exec::RpcFaults::set_settle_by_landing_bound)).
    #[serde(default)]
    pub settle_by_landing_bound: bool,
    /// Pilaf's GETs do not compare entry and extent checksums, so a torn
    /// entry or extent can be returned
    /// ([`PilafClient::set_skip_checksums`](nessie_baselines::pilaf::PilafClient::set_skip_checksums)).
    #[serde(default)]
    pub skip_checksums: bool,
    /// RACE's clients reuse a freed KV block at once instead of after T
    /// plus the skew ([`RaceCore::set_reuse_without_hold`](nessie_baselines::race::RaceCore::set_reuse_without_hold)):
    /// a reader that read a slot before its block was unlinked can read the
    /// block's next contents.
    #[serde(default)]
    pub reuse_without_hold: bool,
    /// RCuckoo's writers post their row WRITEs however late their attempt
    /// runs, as RCuckoo is published (§4.4: "a slow client is not fenced";
    /// [`RcuckooCore::set_unfenced_writes`](nessie_baselines::rcuckoo::RcuckooCore::set_unfenced_writes)):
    /// a writer paused past the takeover of its locks writes over the rows
    /// others wrote since.
    #[serde(default)]
    pub unfenced_writes: bool,
    /// RCuckoo's repair empties every entry a torn row WRITE left
    /// unreadable, as the paper's does, instead of restoring the one an
    /// update was replacing: a key whose update tore in a writer that died
    /// vanishes.
    #[serde(default)]
    pub repair_empties_torn: bool,
    /// RCuckoo's GETs answer "absent" after one READ of each row, as
    /// published, without reading them again: two READs that straddle a
    /// cuckoo move of the key miss it.
    #[serde(default)]
    pub skip_miss_check: bool,
    /// Server workers take a request from its slot without checking its
    /// checksum and control word, so a slot that two WRITEs landed in word
    /// by word (a torn transfer) is served as one request
    /// ([`WorkerCounters::skip_message_checks`](nessie_exec::WorkerCounters::skip_message_checks)).
    #[serde(default)]
    pub skip_message_checks: bool,
    /// Clients' rounds wait for their completions without a bound, so a
    /// completion the transport loses holds the operation for good (Cell's
    /// client machines had no bound until the swarm found it:
    /// `CellFaults::unbounded_rounds`; the baselines' attempts likewise).
    #[serde(default)]
    pub unbounded_rounds: bool,
    /// Cell's scans skip their validation (`CellFaults::skip_scan_validation`:
    /// no second read of the leaves' versions, so a scan may mix leaves
    /// read before and after a write).
    #[serde(default)]
    pub skip_scan_validation: bool,
    /// Server workers claim again a request they already claimed and ran,
    /// when a duplicate of its request WRITE lands in its slot after a
    /// later GET of the same client
    /// ([`WorkerCounters::rerun_duplicates`](nessie_exec::WorkerCounters::rerun_duplicates)):
    /// the PUT or DELETE runs twice. The baselines' and Cell's channel did
    /// this until the swarm drew duplicated WRITEs.
    #[serde(default)]
    pub rerun_duplicates: bool,
    /// Cell's recovery rebuilds a meganode whose log shows a split left open
    /// with its writes open (`CellFaults::recovery_opens_early`, issue 25's
    /// hole 1): a write through a stale path into X_right can be
    /// acknowledged and then thrown away when recovery settles the split.
    #[serde(default)]
    pub recovery_opens_early: bool,
    /// Cell's recovery ignores finished splits whose parent link its log
    /// does not show (`CellFaults::recovery_forgets_finished_splits`, hole
    /// 2): their new meganode stays frozen, and writes to its keys time out
    /// for good.
    #[serde(default)]
    pub recovery_forgets_finished_splits: bool,
    /// Cell's recovery undoes a split whose copy was logged complete unless
    /// X's root was relinked (`CellFaults::recovery_undoes_copied_splits`):
    /// what clients wrote into Y meanwhile is lost with it.
    #[serde(default)]
    pub recovery_undoes_copied_splits: bool,
    /// Cell's recovery drops a split-created meganode whose live splitter
    /// has not logged its copy (`CellFaults::recovery_ignores_live_splitter`):
    /// the splitter goes on and relinks X to the dropped Y.
    #[serde(default)]
    pub recovery_ignores_live_splitter: bool,
    /// Cell's recovery drops orphans only among the regions it rebuilt
    /// (`CellFaults::recovery_keeps_orphans`): an aborted split's copy on a
    /// survivor stays listed and held, reachable from nothing.
    #[serde(default)]
    pub recovery_keeps_orphans: bool,
    /// Cell's servers send their requests to other servers unclaimed
    /// (`CellFaults::unclaimed_server_requests`, issue 25's hole 4): a copy
    /// the splitter gave up on can still run and leave an orphan held.
    #[serde(default)]
    pub unclaimed_server_requests: bool,
}

impl ServerFaults {
    /// The switches' names, as `nessie swarm --server-faults` takes them.
    pub const NAMES: [&'static str; 18] = [
        "skip-claims",
        "skip-epoch-check",
        "settle-by-landing-bound",
        "skip-checksums",
        "skip-message-checks",
        "unbounded-rounds",
        "skip-scan-validation",
        "rerun-duplicates",
        "recovery-opens-early",
        "recovery-forgets-finished-splits",
        "recovery-undoes-copied-splits",
        "recovery-ignores-live-splitter",
        "recovery-keeps-orphans",
        "unclaimed-server-requests",
        "reuse-without-hold",
        "unfenced-writes",
        "repair-empties-torn",
        "skip-miss-check",
    ];

    /// The switches named in `names` (each one of [`ServerFaults::NAMES`]).
    pub fn named(names: &[impl AsRef<str>]) -> Result<ServerFaults, SimError> {
        let mut f = ServerFaults::default();
        for n in names {
            match n.as_ref() {
                "skip-claims" => f.skip_claims = true,
                "skip-epoch-check" => f.skip_epoch_check = true,
                "settle-by-landing-bound" => f.settle_by_landing_bound = true,
                "skip-checksums" => f.skip_checksums = true,
                "skip-message-checks" => f.skip_message_checks = true,
                "unbounded-rounds" => f.unbounded_rounds = true,
                "skip-scan-validation" => f.skip_scan_validation = true,
                "rerun-duplicates" => f.rerun_duplicates = true,
                "recovery-opens-early" => f.recovery_opens_early = true,
                "recovery-forgets-finished-splits" => f.recovery_forgets_finished_splits = true,
                "recovery-undoes-copied-splits" => f.recovery_undoes_copied_splits = true,
                "recovery-ignores-live-splitter" => f.recovery_ignores_live_splitter = true,
                "recovery-keeps-orphans" => f.recovery_keeps_orphans = true,
                "unclaimed-server-requests" => f.unclaimed_server_requests = true,
                "reuse-without-hold" => f.reuse_without_hold = true,
                "unfenced-writes" => f.unfenced_writes = true,
                "repair-empties-torn" => f.repair_empties_torn = true,
                "skip-miss-check" => f.skip_miss_check = true,
                other => {
                    return Err(SimError::Spec(format!(
                        "unknown server fault {other:?} (expected one of {:?})",
                        ServerFaults::NAMES
                    )))
                }
            }
        }
        Ok(f)
    }
}

/// Cell's tree shape in a run: by default sized for the workload (nodes of
/// at least 1 KiB, meganodes of 256 nodes, so a few keys never split
/// anything); the swarm shrinks them so that a handful of keys split nodes
/// and meganodes while the faults strike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CellShape {
    /// Tree nodes hold four entries of the largest key: a leaf splits at
    /// its fifth key.
    #[serde(default)]
    pub small_nodes: bool,
    /// Meganodes of 16 nodes with a heap of 8 extents: a meganode splits
    /// once six extents (values written and not yet reclaimed) are in use.
    /// Implies small nodes: a meganode splits at its root's middle key, so
    /// one whose root is a leaf (up to 25 keys of 16 B in a 1 KiB node)
    /// cannot split, and a heap of 8 extents under it would refuse writes
    /// for good.
    #[serde(default)]
    pub small_meganodes: bool,
}

/// How a Cell run searches and where its servers run (the Cell paper's
/// experiments, `nessie papers`; by default the selector over every node).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellRun {
    /// How clients search meganodes.
    pub mode: nessie_cell::SearchMode,
    /// Client node and meganode caches (the paper's Fig. 4 and Table 2 run
    /// without).
    pub caches: bool,
    /// Nodes `0..n` hold the tree and run server workers; the rest run
    /// only clients (`None`: every node).
    pub server_nodes: Option<u16>,
    /// One meganode holding every key, never split (Fig. 4's single
    /// meganode).
    pub one_meganode: bool,
    /// With `server_nodes` set, whether the server nodes' clients run the
    /// measured workload too (`false`: they only preload, and the servers
    /// serve the other nodes' clients, as on the paper's separate client
    /// machines).
    pub clients_beside_servers: bool,
}

impl Default for CellRun {
    fn default() -> CellRun {
        CellRun {
            mode: nessie_cell::SearchMode::Selector,
            caches: true,
            server_nodes: None,
            one_meganode: false,
            clients_beside_servers: true,
        }
    }
}

/// A load spike: some clients join the measured workload for a while.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spike {
    /// Clients whose index on their node is at least this join only for
    /// the spike.
    pub first_index: u16,
    /// The spike starts this long into the measured window, s.
    pub from_s: f64,
    /// And ends this long into it, s.
    pub until_s: f64,
}

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimSpec {
    /// The system.
    pub system: SystemKind,
    /// Server worker threads per node (server-driven systems), each
    /// polling on a core of its own.
    pub server_workers: u16,
    /// NessieHY's GET optimisations.
    pub hy: HyOptions,
    /// Test-only fault switches of the server-driven systems.
    pub server_faults: ServerFaults,
    /// Cell's node and meganode sizes.
    pub cell: CellShape,
    /// How Cell's clients search and where its servers run.
    pub cell_run: CellRun,
    /// The hardware.
    pub profile: Profile,
    /// Nodes.
    pub nodes: u16,
    /// Client threads per node (one core each).
    pub clients_per_node: u16,
    /// Busy background threads per node (Fig. 4's CPU contention), spread
    /// round robin over the node's cores (its client threads' and then its
    /// server workers'): a thread sharing its core with b of them runs one
    /// time slice in every b + 1 (`Profile::time_slice_ns`), the others
    /// spinning.
    pub background_per_node: u16,
    /// Operations each client thread keeps in flight (at least 1). Each is
    /// its own protocol client (as `nessie run --depth` runs them); the
    /// thread's polls of all of them share its core.
    pub depth: u16,
    /// Distinct keys (preloaded).
    pub keys: u64,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes (the largest, when sizes vary).
    pub value_size: u32,
    /// How value sizes are drawn, per write from the seed (fixed: every
    /// value `value_size` bytes).
    pub value_mix: nessie_workload::ValueMix,
    /// Percentage of GETs (the rest are PUTs of existing keys).
    pub get_pct: u32,
    /// Percentage of range scans (Cell only; taken from the PUTs' share):
    /// from a key up to four keys on, at most three entries.
    pub scan_pct: u32,
    /// Key popularity: `None` uniform, `Some(theta)` YCSB's scrambled
    /// Zipfian with exponent `theta` (0.99 in the papers' Figs 12-13).
    pub zipf_theta: Option<f64>,
    /// One of YCSB's core workloads in place of `get_pct`, `delete_pct`,
    /// `scan_pct` and `zipf_theta`: each client draws its mix and keys from
    /// its own `nessie_workload::ycsb::YcsbGen` (scrambled Zipfian 0.99;
    /// the latest keys for D; inserts of fresh keys for D and E, which a
    /// full index refuses; a read-modify-write as a GET then a PUT of its
    /// key for F; scans of 1 to 100 entries, capped by Cell's scan page,
    /// for E, which needs Cell).
    pub ycsb: Option<nessie_workload::Ycsb>,
    /// A load spike (the Cell paper's Fig. 7): the clients whose index on
    /// their node is at least `first_index` run only within the window.
    pub spike: Option<Spike>,
    /// Open loop: each client's operations arrive as a Poisson process of
    /// this many per simulated second (latencies count from the start of
    /// service, not the arrival); `None`: closed loop, the next operation
    /// as soon as the last one ends.
    pub arrival_rate_per_client: Option<f64>,
    /// Simulated seconds of measured workload.
    pub seconds: f64,
    /// Index load factor after the preload.
    pub load_factor: f64,
    /// Seed of every generator.
    pub seed: u64,
    /// Seed each client's workload generator as before 2026-11-30
    /// (`(seed ^ k C) | 1`, `k` the client's number), under which seeds 2j
    /// and 2j + 1 draw the same operations for every client: only to replay
    /// a case printed before then exactly (a [`crate::SwarmCase`]'s JSON
    /// without the field). Off, each client's stream is a SplitMix64 mix of
    /// the seed and its number, distinct for every seed.
    pub paired_workload_seeds: bool,
    /// Record every operation's invocation and response (in virtual time)
    /// for the linearizability checker ([`SimReport::history`]).
    pub record_history: bool,
    /// Test-only protocol fault switches for every client.
    pub faults: Faults,
    /// Data table entries per client (`None`: the preload share twice over
    /// plus room for one expiration period of updates).
    pub entries_per_client: Option<u32>,
    /// Percentage of DELETEs (taken from the PUT share: the rest after GETs
    /// and DELETEs are PUTs).
    pub delete_pct: u32,
    /// Percentage of the keys written before the run (the rest are first
    /// inserted by the workload's PUTs).
    pub preload_pct: u32,
    /// Faults of the environment (crashes, lost completions, ...).
    pub chaos: Chaos,
    /// Protocol options that differ from the simulator's defaults.
    pub tuning: Tuning,
    /// After the workload (and its faults) end, client 0 alone PUTs and
    /// then GETs every key, with no faults and no background threads: a
    /// crash or a lost completion must never leave a key that a lone writer
    /// cannot write ([`SimReport::sweep_failures`]).
    pub final_sweep: bool,
}

/// Protocol options a simulation may set (`None`: the simulator's default,
/// which is [`Config::default`]'s except for the sizes derived from the
/// spec and a 20 ms expiration, 1 ms deadline margin and 10 µs clock skew).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuning {
    /// Index table slots per node (instead of the load factor's).
    pub index_slots_per_node: Option<u32>,
    /// Candidate buckets per key (hash functions).
    pub candidates: Option<u8>,
    /// Index table entries per bucket (B; default 1). Slots per node derived
    /// from the load factor are rounded up to a multiple of it.
    #[serde(default)]
    pub bucket_slots: Option<u8>,
    /// Filter bits per index table entry.
    pub filter_bits: Option<u8>,
    /// Entries in each client's cache (0: off).
    pub cache_capacity: Option<usize>,
    /// Whether GETs may fall back to a previous version.
    pub previous_versions: Option<bool>,
    /// Whether a GET reads every candidate's entry in one round.
    pub multiple_reads: Option<bool>,
    /// Nested MIGRATEs allowed.
    pub max_migrate_depth: Option<u8>,
    /// MIGRATE's search: depth first (`true`) or breadth first.
    pub depth_first_migrate: Option<bool>,
    /// Expiration period T, µs.
    pub expiration_us: Option<u64>,
    /// Deadline margin, µs.
    pub deadline_margin_us: Option<u64>,
    /// Clock skew allowance, µs.
    pub clock_skew_us: Option<u64>,
    /// The retry policy's first back-off, µs (default 1).
    #[serde(default)]
    pub initial_backoff_us: Option<u64>,
    /// The retry policy's longest back-off, µs (default 1,000).
    #[serde(default)]
    pub max_backoff_us: Option<u64>,
    /// The retry policy's operation timeout, µs (default ten expiration
    /// periods, the ratio of the protocol's defaults); attempts are not
    /// counted.
    #[serde(default)]
    pub op_timeout_us: Option<u64>,
    /// Size classes below the main one: the ladder of
    /// `nessie_systems::sizing::class_ladder`, each class with as many
    /// entries as the main table (default: one class).
    #[serde(default)]
    pub size_classes: Option<bool>,
    /// Clients without storage (Nessie only; issue 41, docs/protocol.md
    /// §2.4): half of each node's protocol clients (at least one) hold a
    /// share of the node's data tables and write it through memory windows
    /// the node's agent binds, with a lease term of two expiration periods.
    #[serde(default)]
    pub pure_clients: Option<bool>,
    /// Clients without storage run on hosts of their own (with
    /// `pure_clients`): one application host per node, whose NIC sends and
    /// receives the requests of the clients whose shares that node holds,
    /// instead of the node's NIC (`nessie sim --pure-clients` sets it; the
    /// swarm does not, so that a node's outage still takes its pure clients
    /// down with it).
    #[serde(default)]
    pub pure_client_hosts: Option<bool>,
    /// Index generations (issue 39, docs/protocol.md §2.5): the index
    /// starts in generation 0 of `index_slots_per_node` entries a node and
    /// grows online, each generation twice the one before (default: 1,
    /// never grows).
    #[serde(default)]
    pub index_generations: Option<u8>,
}

impl Default for SimSpec {
    /// 3 nodes x 2 clients, 1,000 keys of 32 B with 256 B values, half
    /// GETs, 0.01 simulated seconds on the TPDS hardware, no faults.
    fn default() -> SimSpec {
        SimSpec {
            system: SystemKind::Nessie,
            server_workers: 1,
            hy: HyOptions::default(),
            server_faults: ServerFaults::default(),
            cell: CellShape::default(),
            cell_run: CellRun::default(),
            profile: crate::profile::TPDS,
            nodes: 3,
            clients_per_node: 2,
            depth: 1,
            background_per_node: 0,
            keys: 1000,
            key_size: 32,
            value_size: 256,
            value_mix: nessie_workload::ValueMix::Fixed,
            get_pct: 50,
            scan_pct: 0,
            zipf_theta: None,
            ycsb: None,
            spike: None,
            arrival_rate_per_client: None,
            seconds: 0.01,
            load_factor: 0.4,
            seed: 1,
            paired_workload_seeds: false,
            record_history: false,
            faults: Faults::default(),
            entries_per_client: None,
            delete_pct: 0,
            preload_pct: 100,
            chaos: Chaos::NONE,
            tuning: Tuning::default(),
            final_sweep: false,
        }
    }
}

/// What the index's online growth did in a run (docs/protocol.md §2.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrowthCounts {
    /// Entries of old generations sealed.
    pub seals: u64,
    /// Growth seals met by clients whose view of the index was behind
    /// (each then read the directory again).
    pub stale_views: u64,
}

impl std::ops::AddAssign for GrowthCounts {
    fn add_assign(&mut self, o: GrowthCounts) {
        self.seals += o.seals;
        self.stale_views += o.stale_views;
    }
}

/// What a run measured (all figures in simulated time except the last two).
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    /// The system.
    pub system: SystemKind,
    /// Operations completed.
    pub ops: u64,
    /// GETs completed.
    pub gets: u64,
    /// PUTs completed.
    pub puts: u64,
    /// Operations that ended in an error.
    pub failures: u64,
    /// Operations per simulated second.
    pub ops_per_sec: f64,
    /// Average GET latency, µs.
    pub get_avg_us: f64,
    /// Median GET latency, µs.
    pub get_p50_us: f64,
    /// 99th-percentile GET latency, µs.
    pub get_p99_us: f64,
    /// Average PUT latency, µs.
    pub put_avg_us: f64,
    /// Median PUT latency, µs.
    pub put_p50_us: f64,
    /// 99th-percentile PUT latency, µs.
    pub put_p99_us: f64,
    /// Fabric bytes per operation (requests and responses' payloads).
    pub bytes_per_op: f64,
    /// Remote round trips per operation.
    pub round_trips_per_op: f64,
    /// Remote round trips per GET that succeeded (its attempts' together).
    pub round_trips_per_get: f64,
    /// Remote round trips per PUT that succeeded (inserts and updates, their
    /// attempts' together).
    pub round_trips_per_put: f64,
    /// NIC operations per operation: the clients' READs, WRITEs and CASes,
    /// the servers' response WRITEs and their claim CASes (loopback).
    pub nic_ops_per_op: f64,
    /// CASes per operation, the clients' and the servers' (issue 43: every
    /// CAS-per-write design is bounded by the NICs' atomic units).
    pub cas_per_op: f64,
    /// The operations per second the cluster's NICs could serve if CASes
    /// were all they did, at this run's CASes per operation, spread over
    /// the nodes (each node's atomic unit, `Profile::atomic_unit_ns`, or
    /// with none the receive queue a CAS holds for `nic_op_ns +
    /// atomic_ns`); infinite for a run without CASes.
    pub cas_ceiling_ops_per_sec: f64,
    /// Share of the server workers' time spent on requests (the rest they
    /// poll idle, burning their core all the same), percent.
    pub server_busy_pct: f64,
    /// Share of the server workers' time spent finding waiting requests:
    /// the scan of their request slots between a request's landing (or the
    /// worker's return from its previous request) and taking it, percent.
    pub server_scan_pct: f64,
    /// Share of the client threads' time (each protocol client's, at
    /// depth above 1) in the measured window with an operation under way,
    /// polling for it, percent: 100 in a closed loop; under an open loop
    /// ([`SimSpec::arrival_rate_per_client`]) the rest the thread idles.
    pub client_busy_pct: f64,
    /// The busiest node's NIC transmit queue: its share of the measured
    /// window spent on per-request processing (`nic_op_ns` each), percent.
    pub nic_tx_op_busy_pct: f64,
    /// The busiest node's outgoing link: its share of the window spent
    /// serialising bytes at link speed, percent.
    pub link_busy_pct: f64,
    /// The busiest node's NIC receive queue (requests arriving and
    /// completions coming back), percent.
    pub nic_rx_busy_pct: f64,
    /// Requests the server workers served.
    pub server_requests: u64,
    /// Times a server worker found its node's table lock held by another
    /// worker and waited for it (the whole run).
    pub server_lock_waits: u64,
    /// Errors the server workers met (the first 16).
    pub server_errors: Vec<String>,
    /// Recoveries of failed Cell servers that failed, and failed servers
    /// no recovery took over by the end (each fails a swarm case).
    pub recovery_failures: Vec<RecoveryFailure>,
    /// Meganodes Cell's directory lists that its tree does not reach at
    /// the end of the run (orphans holding a region slot).
    pub unreachable_meganodes: Vec<UnreachableMeganode>,
    /// Events processed.
    pub events: u64,
    /// MIGRATEs run (nested ones included) by every operation; for
    /// NessieSD, NessieHY and Pilaf, the cuckoo paths their servers moved;
    /// for Cell, the meganode splits its servers finished.
    pub migrations: u64,
    /// Cell's tree node splits (0 for the other systems).
    pub node_splits: u64,
    /// When the measured workload started, virtual ns (the clock of
    /// [`crate::stamp_ns`]).
    pub measured_from_ns: u64,
    /// Cell: the share of meganode searches its clients sent to the
    /// server, % (0 for the other systems).
    pub server_search_pct: f64,
    /// Entries of crashed or overrunning owners that operations recovered
    /// (aborted, settled or reclaimed).
    pub recoveries: u64,
    /// What the index's online growth did (Nessie; issue 39).
    pub growth: GrowthCounts,
    /// The measured workload before, during and after the index's growth
    /// (Nessie with more than one index generation; empty otherwise).
    pub growth_phases: Vec<crate::engine::PhaseFigures>,
    /// DELETEs completed.
    pub deletes: u64,
    /// Operations whose outcome is unknown (an error after the work may have
    /// executed, or the client crashed during it).
    pub unknown: u64,
    /// Operations still running at the horizon (the end of the workload plus
    /// the longest an operation may legitimately take: every attempt to its
    /// deadline, with back-off): each one is a liveness failure, recorded in
    /// the history as of unknown outcome.
    pub stuck: u64,
    /// PUTs of the final sweep ([`SimSpec::final_sweep`]) that failed for
    /// another reason than a full table: each one is a liveness failure.
    pub sweep_failures: Vec<SweepFailure>,
    /// The injected faults and what the clients made of them.
    pub chaos: ChaosCounts,
    /// Messages of operations that reported a corrupt state (a protocol
    /// invariant broken; the first 16).
    pub corrupt: Vec<CorruptState>,
    /// Mutations (CASes and WRITEs through the NIC) that an operation attempt
    /// posted although its clock, read for that step, showed less than one
    /// deadline margin left before the attempt's deadline: breaches of the
    /// margin rule (docs/protocol.md §4; the CAS settling a lost commit by
    /// aborting is exempt, as the rule says), which let such a mutation land
    /// after the deadline, when others may already be reclaiming (the first
    /// 16).
    #[serde(default)]
    pub margin_breaches: Vec<MarginBreach>,
    /// Breaches of I4's first step seen while the run went on (Nessie
    /// only): a recycle mark landed on an entry an index table entry
    /// names, or an index CAS linked an entry marked for recycling (the
    /// first 16; [`DteAudit`](crate::DteAudit)).
    #[serde(default)]
    pub marked_linked: Vec<MarkedLinked>,
    /// Wall-clock seconds the simulation took (not deterministic).
    pub wall_seconds: f64,
    /// Events per wall-clock second (not deterministic).
    pub events_per_wall_sec: f64,
    /// The history, if recorded (each PUT writes a value unique to it).
    /// Its stamps are virtual picoseconds made strictly increasing in the
    /// order the simulator processed the events (a response precedes every
    /// invocation after it, even at one virtual instant); each client slot
    /// is a sequential process.
    #[serde(skip)]
    pub history: Vec<Event>,
    /// Operations that ended, preload and final sweep included (counted
    /// apart from the history: with [`SimSpec::record_history`] the history
    /// must hold exactly this many).
    #[serde(default)]
    pub completed_ops: u64,
    /// Cell's range scans that ended (with [`SimSpec::record_history`],
    /// [`SimReport::scans`] must hold exactly this many).
    #[serde(default)]
    pub completed_scans: u64,
    /// Cell's range scans, recorded apart from [`SimReport::history`] (whose
    /// per-key checker has no scans), stamped on the same clock: the
    /// swarm checks them with the rest of the history by Cell's range-aware
    /// checker.
    #[serde(skip)]
    pub scans: Vec<nessie_check::Event>,
    /// Data table entries that Nessie's allocators recycled (written before,
    /// marked, expired, taken back) during the workload, while clients
    /// raced: what the expiration period and the recycle marks protect. For
    /// NessieSD, NessieHY and Pilaf, the data table entries (extents) their
    /// servers handed out again after the quarantine (up to the final
    /// sweep), which their client GETs' deadlines protect.
    #[serde(default)]
    pub recycled_in_race: u64,
    /// The fabric work of each operation of [`SimReport::history`] (same
    /// index; every attempt of the operation summed).
    #[serde(skip)]
    pub history_stats: Vec<OpStats>,
    /// Nessie's data-table audit at quiescence ([`DteAudit`](crate::DteAudit)): entries
    /// live, reusable and leaked after the final sweep, and the leaks the
    /// protocol admits. `None` where it does not apply: another system, or
    /// no [`SimSpec::final_sweep`].
    #[serde(default)]
    pub dtes: Option<DteAudit>,
}

impl SimReport {
    /// The deterministic part, for comparing runs.
    pub fn fingerprint(&self) -> (u64, u64, u64, u64, u64, String) {
        (
            self.ops,
            self.gets,
            self.puts,
            self.failures,
            self.events,
            format!(
                "{} {} {} {} {} {} {:?} {:?} {:.6} {:.6} {:.6} {:.6} {:.6} {:.6}",
                self.server_requests,
                self.deletes,
                self.unknown,
                self.stuck,
                self.migrations,
                self.recoveries,
                self.sweep_failures,
                self.chaos,
                self.get_avg_us,
                self.get_p99_us,
                self.put_avg_us,
                self.put_p99_us,
                self.bytes_per_op,
                self.server_busy_pct
            ),
        )
    }
}

/// What the injected faults did in one run (all zero without [`Chaos`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChaosCounts {
    /// Requests given an extra delay.
    pub delayed: u64,
    /// Requests that executed and then reported an error.
    pub failed_after_exec: u64,
    /// Requests that reported an error without executing.
    pub failed_before_exec: u64,
    /// Completions never delivered.
    pub lost_completions: u64,
    /// Mutations that completed with an error and were left to land later
    /// ([`Chaos::error_then_land_permille`](crate::Chaos::error_then_land_permille)).
    pub error_then_land: u64,
    /// Of those, how many executed after their error completion (the others
    /// were refused at their landing deadline or met a node that was down).
    pub orphans_landed: u64,
    /// Completions a late-completion fault handed in after the round waiting
    /// for them was given up
    /// ([`Chaos::late_completion_permille`](crate::Chaos::late_completion_permille)).
    pub late_completions: u64,
    /// Completions that reached a Nessie client after their round was given
    /// up, however they came to be late (held back, or delayed on the way),
    /// and went to its request-id routing.
    pub stale_completions: u64,
    /// Requests that vanished: never executed, never completed
    /// ([`Chaos::vanish_permille`](crate::Chaos::vanish_permille)).
    pub vanished: u64,
    /// Remote WRITEs given a duplicate copy
    /// ([`Chaos::duplicate_write_permille`](crate::Chaos::duplicate_write_permille)).
    pub duplicate_writes: u64,
    /// Of those copies, how many executed (the others were refused at the
    /// landing deadline or met a node that was down).
    pub duplicates_landed: u64,
    /// Mutations refused at their landing deadline (A2 enforced).
    pub landing_deadline_refusals: u64,
    /// Multi-word transfers that moved their words one at a time
    /// ([`Chaos::torn_permille`](crate::Chaos::torn_permille)).
    pub torn: u64,
    /// Of those, how many a fault stopped part placed (some words landed,
    /// the rest never will, the completion an error).
    pub partly_placed: u64,
    /// Queue pairs that failed as a whole
    /// ([`Chaos::link_failure_permille`](crate::Chaos::link_failure_permille)).
    pub link_failures: u64,
    /// Requests that a failed queue pair completed with an error (posted to
    /// it while down, or outstanding when it failed).
    pub link_errors: u64,
    /// Mutations that executed after their landing deadline
    /// ([`Chaos::late_landing`](crate::Chaos::late_landing): A2 dropped).
    pub late_landings: u64,
    /// Requests to an unreachable node.
    pub unreachable: u64,
    /// Ordered chains posted
    /// ([`Endpoint::post_chain`](nessie_protocol::Endpoint::post_chain)).
    pub chained: u64,
    /// Links of a chain that reached their responder before their
    /// predecessor executed and waited for it.
    pub chain_waits: u64,
    /// Links of a chain flushed, never executed, behind a link that failed.
    pub chain_flushed: u64,
    /// Client pauses.
    pub pauses: u64,
    /// Client crashes (including those of node outages).
    pub crashes: u64,
    /// Clients without storage whose agent took their share back (each
    /// replaced by a new client, as a process whose client ended; the
    /// data-table audit admits what each may leave behind as for a crash).
    #[serde(default)]
    pub lease_losses: u64,
    /// Server worker crashes
    /// ([`Chaos::server_crash_permille`](crate::Chaos::server_crash_permille)).
    pub server_crashes: u64,
    /// Cell server nodes failed for good
    /// ([`Chaos::server_failure_permille`](crate::Chaos::server_failure_permille)).
    pub server_failures: u64,
    /// Of those, failures at a step of a meganode split (the splitter's
    /// node or another server).
    pub mid_split_failures: u64,
    /// Recoveries of failed Cell servers' regions that finished.
    pub server_recoveries: u64,
    /// Node outages.
    pub outages: u64,
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The specification is out of range.
    #[error("invalid simulation: {0}")]
    Spec(String),
    /// The protocol refused the configuration or the preload failed.
    #[error("protocol: {0}")]
    Protocol(#[from] Error),
    /// A system name that is none of the five.
    #[error("invalid simulation: {0}")]
    UnknownSystem(#[from] nessie_systems::UnknownSystem),
}

/// The configuration a spec implies.
pub fn config(spec: &SimSpec) -> Result<Config, SimError> {
    if spec.nodes == 0
        || spec.clients_per_node == 0
        || spec.depth == 0
        || spec.keys == 0
        || spec.seconds <= 0.0
    {
        return Err(SimError::Spec(
            "nodes, clients, depth, keys and seconds must be positive".into(),
        ));
    }
    let protocol_clients_per_node =
        u16::try_from(u32::from(spec.clients_per_node) * u32::from(spec.depth)).map_err(|_| {
            SimError::Spec("clients x depth must be at most 65,535 per node".into())
        })?;
    if spec.ycsb.is_some_and(nessie_workload::Ycsb::scans) && spec.system != SystemKind::Cell {
        return Err(SimError::Spec(format!(
            "{}: its range scans need a store with scans (Cell), not {}",
            spec.ycsb.map_or("", nessie_workload::Ycsb::name),
            spec.system
        )));
    }
    if spec.zipf_theta.is_some_and(|t| !(t > 0.0 && t < 1.0)) {
        return Err(SimError::Spec("the Zipf exponent must be in (0, 1)".into()));
    }
    if spec
        .arrival_rate_per_client
        .is_some_and(|r| !(r > 0.0 && r.is_finite()))
    {
        return Err(SimError::Spec("the arrival rate must be positive".into()));
    }
    if !(spec.load_factor > 0.0 && spec.load_factor <= 0.9) {
        return Err(SimError::Spec("the load factor must be in (0, 0.9]".into()));
    }
    let clients = u64::from(spec.nodes) * u64::from(protocol_clients_per_node);
    let slots = (spec.keys as f64 / spec.load_factor / f64::from(spec.nodes)).ceil() as u32;
    // Each client writes locally: its preload share, plus the entries its
    // updates allocate within one expiration period (recycled after it).
    // Spare entries for updates within one expiration period: plenty for
    // small values, fewer for large ones (each update takes far longer).
    let spare = ((4u32 << 20) / spec.value_size.max(1)).clamp(32, 1024);
    let per_client = spec
        .entries_per_client
        .unwrap_or((spec.keys.div_ceil(clients) as u32) * 2 + spare);
    let t = &spec.tuning;
    let us = |v: Option<u64>, default: u64| Duration::from_micros(v.unwrap_or(default));
    let mut cfg = Config {
        nodes: spec.nodes,
        index_slots_per_node: t.index_slots_per_node.unwrap_or(slots.max(16)),
        dtes_per_node: per_client * u32::from(protocol_clients_per_node),
        clients_per_node: protocol_clients_per_node,
        max_key_len: spec.key_size.max(8),
        max_value_len: spec.value_size.max(1),
        expiration: us(t.expiration_us, 20_000),
        clock_skew: us(t.clock_skew_us, 10),
        deadline_margin: us(t.deadline_margin_us, 1_000),
        ..Config::default()
    };
    cfg.retry.initial_backoff = us(t.initial_backoff_us, 1);
    cfg.retry.max_backoff = us(t.max_backoff_us, 1_000);
    cfg.retry.op_timeout = t
        .op_timeout_us
        .map_or(cfg.expiration * 4, Duration::from_micros);
    cfg.retry.max_attempts = 0;
    let d = Config::default();
    cfg.candidates = t.candidates.unwrap_or(d.candidates);
    cfg.bucket_slots = t.bucket_slots.unwrap_or(d.bucket_slots);
    if t.index_slots_per_node.is_none() {
        cfg.index_slots_per_node = cfg
            .index_slots_per_node
            .next_multiple_of(u32::from(cfg.bucket_slots.max(1)));
    }
    if t.size_classes == Some(true) {
        cfg.size_classes =
            nessie_systems::sizing::ladder_classes(cfg.layout().entry_bytes(), cfg.dtes_per_node);
    }
    cfg.index_generations = t.index_generations.unwrap_or(d.index_generations);
    if t.pure_clients == Some(true) {
        let pure = (protocol_clients_per_node / 2).max(1);
        cfg.pure_clients_per_node = pure;
        cfg.clients_per_node = protocol_clients_per_node - pure;
        cfg.lease_term = cfg.expiration * 2;
    }
    cfg.filter_bits = t.filter_bits.unwrap_or(d.filter_bits);
    cfg.cache_capacity = t.cache_capacity.unwrap_or(d.cache_capacity);
    cfg.previous_versions = t.previous_versions.unwrap_or(d.previous_versions);
    cfg.multiple_reads = t.multiple_reads.unwrap_or(d.multiple_reads);
    cfg.max_migrate_depth = t.max_migrate_depth.unwrap_or(d.max_migrate_depth);
    if let Some(df) = t.depth_first_migrate {
        cfg.migrate_search = if df {
            MigrateSearch::DepthFirst
        } else {
            MigrateSearch::BreadthFirst
        };
    }
    if spec.get_pct + spec.delete_pct > 100 || spec.preload_pct > 100 {
        return Err(SimError::Spec(
            "get_pct + delete_pct and preload_pct must be at most 100".into(),
        ));
    }
    if spec.record_history && (spec.value_size as usize) < nessie_check::MIN_RECORDED_VALUE_SIZE {
        return Err(SimError::Spec(format!(
            "a recorded history needs values of at least {} B: each PUT writes a value of its own",
            nessie_check::MIN_RECORDED_VALUE_SIZE
        )));
    }
    cfg.validate().map_err(Error::from)?;
    let topo = cfg.topology();
    let bytes = u64::from(topo.nodes)
        * (u64::from(topo.index_slots_per_node) * 8 + topo.data_bytes_per_node);
    if bytes > 8 << 30 {
        return Err(SimError::Spec(format!(
            "the simulated memory would take {} MiB: fewer keys, clients or a smaller value size",
            bytes >> 20
        )));
    }
    Ok(cfg)
}
