//! The fault swarm: many small seeded clusters, each with its own shape,
//! protocol options and mix of injected faults ([`Chaos`]), each history put
//! through the linearizability checker, each run watched for operations that
//! never end, for keys a lone writer cannot write afterwards, for breaches
//! of the margin rule (a mutation posted inside the last deadline margin,
//! [`SimReport::margin_breaches`]) and, at quiescence, for data table
//! entries leaked beyond what the protocol admits ([`DteAudit`](crate::DteAudit)). A failing case replays exactly (it
//! is a function of its [`SwarmCase`], printable as JSON) and shrinks to a
//! smaller case that still fails.
//!
//! Each case also draws a depth (operations in flight per client thread,
//! sharing its core), the retry policy's longest back-off, and, in a quarter
//! of the cases each, busy background threads that take time slices from the
//! client threads' cores and an insert-heavy shape (a full index, most
//! writes DELETEs and re-inserts: frequent MIGRATEs), so that every option
//! of the simulator appears in some checked world. Pauses and delays may aim
//! at the protocol's timing boundaries, and some clients straggle
//! ([`Chaos`]).
//!
//! Swarm testing (Groce et al., ISSTA 2012): rather than every fault in every
//! run, each case turns on a random subset, so that faults which mask each
//! other (an outage that stops the very client whose pause would have
//! mattered) are also seen apart.

use serde::{Deserialize, Serialize};

use nessie_baselines::HyOptions;
use nessie_protocol::Faults;

use crate::audit::DteAudit;
use crate::chaos::{Chaos, Dice};
use crate::engine::simulate;
use crate::spec::{CellShape, ServerFaults, SimError, SimReport, SimSpec, Tuning};
use nessie_systems::SystemKind;

mod shrink;
mod verdict;

pub use shrink::shrink;
pub use verdict::{verdict_and_scans, verdict_of, Verdict, CHECK_STEPS, RANGE_CHECK_STEPS};

/// One swarm case: everything a run depends on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwarmCase {
    /// Seed of the workload and of every fault decision.
    pub seed: u64,
    /// Nodes.
    pub nodes: u16,
    /// Clients per node.
    pub clients_per_node: u16,
    /// Keys (few: contention is the point).
    pub keys: u64,
    /// Value size, bytes.
    pub value_size: u32,
    /// Simulated seconds.
    pub seconds: f64,
    /// GETs, percent.
    pub get_pct: u32,
    /// DELETEs, percent.
    pub delete_pct: u32,
    /// Keys written before the run, percent.
    pub preload_pct: u32,
    /// Data table entries per client (few: reuse is the point).
    pub entries_per_client: u32,
    /// Protocol options.
    pub tuning: Tuning,
    /// Injected faults.
    pub chaos: Chaos,
    /// Operations each client thread keeps in flight (sharing its core).
    #[serde(default = "one")]
    pub depth: u16,
    /// Busy background threads per node, taking time slices from the
    /// client threads' cores.
    #[serde(default)]
    pub background_per_node: u16,
    /// The system under test (Nessie unless said; the baselines take the
    /// same network faults and client crashes, and ignore Nessie's options).
    #[serde(default)]
    pub system: SystemKind,
    /// Server worker threads per node (NessieSD, NessieHY, Pilaf).
    #[serde(default = "one")]
    pub server_workers: u16,
    /// NessieHY's GET optimisations.
    #[serde(default)]
    pub hy: HySwitches,
    /// The server-driven systems' test-only fault switches (all off in a
    /// correct run).
    #[serde(default)]
    pub server_faults: ServerFaults,
    /// Cell's node and meganode sizes.
    #[serde(default)]
    pub cell: CellShape,
    /// Percentage of range scans (Cell only).
    #[serde(default)]
    pub scan_pct: u32,
    /// How value sizes are drawn (fixed unless the case has size classes).
    #[serde(default)]
    pub value_mix: nessie_workload::ValueMix,
    /// The clients' workload generators seeded as before 2026-11-30, when
    /// seeds 2j and 2j + 1 drew the same operations
    /// ([`SimSpec::paired_workload_seeds`]): true for a case's JSON printed
    /// before then (it has no such field), so that it replays exactly;
    /// false for every case drawn now.
    #[serde(default = "printed_before_distinct_streams")]
    pub paired_workload_seeds: bool,
}

fn printed_before_distinct_streams() -> bool {
    true
}

/// NessieHY's optional GET optimisations in a case (the baselines'
/// [`HyOptions`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HySwitches {
    /// Filter bits in index table entries.
    pub filter_bits: bool,
    /// The cache of remote data table entries.
    pub cache: bool,
    /// Header and key first, the value only on a match.
    pub multiple_reads: bool,
}

impl HySwitches {
    /// The baselines' options these switches stand for.
    pub fn options(self) -> HyOptions {
        HyOptions {
            filter_bits: self.filter_bits,
            cache: self.cache,
            multiple_reads: self.multiple_reads,
        }
    }
}

fn one() -> u16 {
    1
}

/// A case's run: its report and verdict.
#[derive(Debug)]
pub struct CaseRun {
    /// The case.
    pub case: SwarmCase,
    /// What the simulation reported.
    pub report: SimReport,
    /// The verdict.
    pub verdict: Verdict,
    /// With range scans (Cell): whether the range-aware checker decided the
    /// whole history (`true`), or gave up within its step budget, leaving
    /// the per-key check with each scan's entries as reads (`false`).
    pub scans_whole: Option<bool>,
}

fn pick<T: Copy>(d: &mut Dice, v: &[T]) -> T {
    v[d.below(v.len() as u64) as usize]
}

impl SwarmCase {
    /// The case of `seed`: shape, options and faults all drawn from it.
    pub fn from_seed(seed: u64) -> SwarmCase {
        let mut d = Dice::new(seed.wrapping_mul(31).wrapping_add(7));
        let nodes = 1 + d.below(3) as u16;
        let clients_per_node = 1 + d.below(3) as u16;
        let keys = 2 + d.below(7);
        let margin_us = pick(&mut d, &[100u64, 300, 1000]);
        let expiration_us = margin_us * pick(&mut d, &[3u64, 5, 20]);
        let skew_us = pick(&mut d, &[0u64, 1, 10, margin_us / 4]);
        let margin = margin_us * 1000;
        let on = |d: &mut Dice| d.chance(500);
        let mut chaos = Chaos::NONE;
        if on(&mut d) {
            chaos.delay_permille = 50 + d.below(300) as u32;
            chaos.max_delay_ns = d.below(2 * margin);
        }
        if on(&mut d) {
            chaos.fail_after_exec_permille = 2 + d.below(30) as u32;
        }
        if on(&mut d) {
            chaos.fail_before_exec_permille = 2 + d.below(30) as u32;
        }
        if on(&mut d) {
            chaos.lose_completion_permille = 2 + d.below(30) as u32;
        }
        if on(&mut d) {
            chaos.pause_permille = 5 + d.below(50) as u32;
            chaos.max_pause_ns = d.below(2 * expiration_us * 1000);
        }
        if on(&mut d) {
            chaos.crash_permille = 1 + d.below(10) as u32;
            chaos.restart_after_ns = margin + d.below(2 * margin);
        }
        if on(&mut d) && nodes > 1 {
            chaos.outage_permille = 100 + d.below(300) as u32;
            chaos.outage_ns = margin + d.below(2 * margin);
            chaos.unreachable_after_ns = 10_000 + d.below(100_000);
        }
        chaos.skew = skew_us > 0 && on(&mut d);
        let candidates = pick(&mut d, &[2u8, 2, 3]);
        // Tight index tables, so that inserts MIGRATE (and the cluster holds
        // at least one entry per candidate).
        let slots = ((keys as u32).div_ceil(u32::from(nodes)) + d.below(2) as u32)
            .max(u32::from(candidates).div_ceil(u32::from(nodes)));
        let tuning = Tuning {
            index_slots_per_node: Some(slots),
            candidates: Some(candidates),
            bucket_slots: None,
            filter_bits: Some(pick(&mut d, &[0u8, 4, 8])),
            cache_capacity: Some(pick(&mut d, &[0usize, 4, 1024])),
            previous_versions: Some(d.chance(700)),
            multiple_reads: Some(d.chance(500)),
            max_migrate_depth: Some(pick(&mut d, &[1u8, 2, 3])),
            depth_first_migrate: Some(d.chance(300)),
            expiration_us: Some(expiration_us),
            deadline_margin_us: Some(margin_us),
            clock_skew_us: Some(skew_us),
            initial_backoff_us: None,
            max_backoff_us: None,
            op_timeout_us: None,
            size_classes: None,
            pure_clients: None,
            pure_client_hosts: None,
            index_generations: None,
        };
        let get_pct = 20 + d.below(50) as u32;
        let mut case = SwarmCase {
            seed,
            nodes,
            clients_per_node,
            keys,
            value_size: pick(&mut d, &[8u32, 24, 64]),
            seconds: pick(&mut d, &[0.002, 0.004, 0.008]),
            get_pct,
            delete_pct: (100 - get_pct) * (1 + d.below(4) as u32) / 10,
            preload_pct: pick(&mut d, &[0u32, 50, 100]),
            entries_per_client: 3 + d.below(12) as u32,
            tuning,
            chaos,
            depth: 1,
            background_per_node: 0,
            system: SystemKind::Nessie,
            server_workers: 1,
            hy: HySwitches::default(),
            server_faults: ServerFaults::default(),
            cell: CellShape::default(),
            scan_pct: 0,
            value_mix: nessie_workload::ValueMix::Fixed,
            paired_workload_seeds: false,
        };
        // Drawn last, so that the draws above are those of every earlier
        // version of the generator.
        case.depth = pick(&mut d, &[1u16, 1, 2, 3]);
        if d.chance(250) {
            case.background_per_node = 1 + d.below(2 * u64::from(clients_per_node)) as u16;
        }
        case.chaos.boundary_pauses = case.chaos.pause_permille > 0 && d.chance(500);
        if case.chaos.boundary_pauses && d.chance(500) {
            // Jittery: many pauses, the uniformly drawn ones short.
            case.chaos.pause_permille = 100 + d.below(300) as u32;
            case.chaos.max_pause_ns = 1 + d.below(margin);
        }
        case.chaos.boundary_delays = case.chaos.delay_permille > 0 && d.chance(500);
        if d.chance(500) {
            case.chaos.straggler_step_ns = 1 + d.below(margin / 2);
        }
        // The retry policy's longest back-off, from a fiftieth of the
        // deadline margin to the simulator's default.
        case.tuning.max_backoff_us = Some(pick(&mut d, &[margin_us / 10, margin_us / 2, 1_000]));
        // Every run lasts at least three expiration periods, so that data
        // table entries are recycled while clients still race (a run shorter
        // than one period never reuses an entry).
        case.seconds = case.seconds.max(3.0 * expiration_us as f64 / 1e6);
        if d.chance(250) {
            // Insert-heavy: a full index with two candidates and most writes
            // DELETEs and re-inserts, so that MIGRATEs are frequent.
            case.keys = 8 + d.below(5);
            case.tuning.candidates = Some(2);
            case.tuning.index_slots_per_node =
                Some((case.keys as u32).div_ceil(u32::from(nodes)).max(2));
            case.get_pct = 10 + d.below(20) as u32;
            case.delete_pct = (100 - case.get_pct) * 4 / 10;
        }
        // Issue 24's transport faults, drawn after everything else (so that
        // every case keeps the shape, options and other faults it had), each
        // on in half the cases: errors first with the request landing later
        // (within A2), and completions handed in after their round was
        // given up.
        if on(&mut d) {
            case.chaos.error_then_land_permille = 2 + d.below(30) as u32;
        }
        if on(&mut d) {
            case.chaos.late_completion_permille = 1 + d.below(4) as u32;
        }
        // What real NICs do beyond those (issue 23, item 8), drawn after
        // them: torn multi-word transfers in half the cases (a failure after
        // executing, an outage or a landing deadline then meets some part
        // placed), and in a quarter one client's queue pair to one node
        // failing as a whole while the others keep theirs.
        if on(&mut d) {
            case.chaos.torn_permille = 100 + d.below(900) as u32;
        }
        if d.chance(250) {
            case.chaos.link_failure_permille = 200 + d.below(600) as u32;
            case.chaos.link_down_ns = d.below(2 * margin);
        }
        case
    }

    /// The case of `seed` for `system`: Nessie's is [`SwarmCase::from_seed`]'s;
    /// a baseline's draws the same shape, workload and faults, and then what
    /// only the baselines have (from a dice stream of its own, so that
    /// Nessie's cases stay as they were):
    ///
    /// - one to three server workers per node (splitting the request slots
    ///   and sharing the node's table lock);
    /// - NessieHY's GET optimisations, each on in half the cases;
    /// - in half the cases, server worker crashes
    ///   ([`Chaos::server_crash_permille`]), each worker replaced by a fresh
    ///   one after one to three deadline margins;
    /// - index tables sized per node, since a key's candidates all lie on
    ///   its home node: from tight (the keys spread evenly, plus one: cuckoo
    ///   moves and `TableFull` answers) to room for every key on one node,
    ///   and never fewer entries than candidates;
    /// - Nessie's own options that no baseline reads (previous versions,
    ///   the MIGRATE search order) cleared, so that a printed case says
    ///   what ran, and late completions off (only Nessie's clients route
    ///   a completion that outlived its round; for a baseline it would be a
    ///   lost one);
    /// - from a dice stream of their own, requests that vanish in a quarter
    ///   of the cases and WRITEs executed twice (the request and response
    ///   messages) in half, which Nessie's cases do not draw.
    ///
    /// The baselines read the candidates, filter bits (NessieSD always,
    /// NessieHY when switched on), cache capacity and multiple reads
    /// (NessieHY, when switched on), the cuckoo search depth, expiration
    /// period, deadline margin, clock skew and retry policy.
    ///
    /// Cell draws its server workers, late completions off, and then its
    /// tree's shape ([`CellShape`]): small nodes in half the cases (leaf
    /// splits from the fifth key), and small meganodes in half of those
    /// (meganode splits, which the servers' maintenance threads run with requests to
    /// each other, while the faults strike), and range scans in two cases
    /// of three (5-24 % of the operations; those cases run half as long,
    /// to keep the range-aware check within its budget). It reads the time scale
    /// (expiration period, deadline margin, retry policy: `cell_config` in
    /// the simulator maps them onto Cell's timeouts) and none of Nessie's
    /// table options, which are cleared. Cell's servers do not crash in
    /// the swarm: a Cell server's failure is its node's, recovered by the
    /// survivors from its logs (`docs/cell.md`), which the simulator does
    /// not run.
    pub fn for_system(seed: u64, system: SystemKind) -> SwarmCase {
        let mut case = SwarmCase::from_seed(seed);
        case.system = system;
        if system == SystemKind::Nessie {
            return case;
        }
        let mut d = Dice::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xba5e_11e5);
        case.server_workers = pick(&mut d, &[1u16, 1, 2, 3]);
        // A late completion needs the client core's request-id routing,
        // which only Nessie's clients run: for another system it would be
        // one more lost completion (lose_completion_permille has those).
        case.chaos.late_completion_permille = 0;
        // The last two faults of the vocabulary: requests that vanish (never
        // execute, never complete) in a quarter of the cases, and WRITEs
        // executed twice (the request and response messages) in half.
        // Nessie's cases do not draw them: its clients post no remote WRITE
        // (entries are written by CPU, marks are CASes), and its vanishing
        // requests have a swarm test of their own (`sim/tests/swarm.rs`),
        // which keeps its cases and their pinned catches as they were. A dice
        // stream of their own leaves the other draws below as they were.
        let mut rare = Dice::new(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x00d0_b1e5);
        if rare.chance(250) {
            case.chaos.vanish_permille = 1 + rare.below(10) as u32;
        }
        if rare.chance(500) {
            case.chaos.duplicate_write_permille = 20 + rare.below(300) as u32;
        }
        if system == SystemKind::Cell {
            let small_nodes = d.chance(500);
            case.cell = CellShape {
                small_nodes,
                small_meganodes: small_nodes && d.chance(500),
            };
            // Servers that fail for good, recovered by a survivor: at any
            // instant in a fifth of the cases, at the crash points of
            // meganode splits in two thirds of those whose meganodes split.
            // A dice stream of their own leaves every other draw of a case
            // as it was.
            let mut lost = Dice::new(seed.wrapping_mul(0x9fb2_1c65_1e98_df25) ^ 0x0fa1_1ed5);
            let expiration_ns = case.tuning.expiration_us.unwrap_or(1_000) * 1_000;
            if lost.chance(200) {
                case.chaos.server_failure_permille = 20 + lost.below(200) as u32;
            }
            if case.cell.small_meganodes && lost.chance(667) {
                case.chaos.split_failure_permille = 100 + lost.below(500) as u32;
            }
            if case.chaos.server_failure_permille + case.chaos.split_failure_permille > 0 {
                case.chaos.recover_after_ns = expiration_ns / 2 + lost.below(2 * expiration_ns);
            }
            // Range scans in two cases of three, taken from the PUTs'
            // share: the range-aware checker then checks the whole history.
            if d.chance(667) {
                case.scan_pct = (5 + d.below(20) as u32).min(100 - case.get_pct - case.delete_pct);
                // Scans tie the keys into one group, whose range-aware
                // check searches the whole map's states: half the run
                // keeps most cases within its step budget.
                case.seconds /= 2.0;
            }
            // Nessie's table options, which Cell does not read.
            let t = &mut case.tuning;
            t.index_slots_per_node = None;
            t.candidates = None;
            t.bucket_slots = None;
            t.filter_bits = None;
            t.cache_capacity = None;
            t.previous_versions = None;
            t.multiple_reads = None;
            t.max_migrate_depth = None;
            t.depth_first_migrate = None;
            return case;
        }
        case.hy = HySwitches {
            filter_bits: d.chance(500),
            cache: d.chance(500),
            multiple_reads: d.chance(500),
        };
        if d.chance(500) {
            let margin = case.tuning.deadline_margin_us.unwrap_or(1_000) * 1_000;
            case.chaos.server_crash_permille = 5 + d.below(60) as u32;
            case.chaos.server_restart_after_ns = margin + d.below(2 * margin);
        }
        let t = &mut case.tuning;
        let candidates = u32::from(t.candidates.unwrap_or(2));
        let tight = (case.keys as u32).div_ceil(u32::from(case.nodes)) + 1;
        let roomy = case.keys as u32 + 1;
        let slots = if d.chance(500) { tight } else { roomy };
        t.index_slots_per_node = Some(slots.max(candidates));
        if system.places_in_rows() && slots == tight {
            // Rows of two in tight tables, so that a few keys fill them and
            // cuckoo paths run (RCuckoo's rows are its buckets).
            t.bucket_slots = Some(2);
            t.index_slots_per_node = Some(slots.max(2 * candidates).next_multiple_of(2));
        }
        t.previous_versions = None;
        t.depth_first_migrate = None;
        if system != SystemKind::NessieHy {
            t.multiple_reads = None;
            t.cache_capacity = None;
        }
        case
    }

    /// This case as it was drawn before 2026-11-30, its clients' workload
    /// generators seeded so that seeds 2j and 2j + 1 drew the same
    /// operations ([`SwarmCase::paired_workload_seeds`]): how a test replays
    /// exactly a case found and pinned before then.
    pub fn with_paired_workload_seeds(mut self) -> SwarmCase {
        self.paired_workload_seeds = true;
        self
    }

    /// This case with A2 dropped, the negative control of the timing
    /// assumption: mutations that reach their responder after their landing
    /// deadline execute anyway ([`Chaos::late_landing`]), and a quarter of
    /// the requests are delayed by up to three expiration periods, so that a
    /// late mark or install can land after the entry it names was recycled.
    pub fn without_a2(mut self) -> SwarmCase {
        let expiration_ns = self.tuning.expiration_us.unwrap_or(1_000) * 1_000;
        self.chaos.late_landing = true;
        self.chaos.delay_permille = self.chaos.delay_permille.max(250);
        self.chaos.max_delay_ns = self.chaos.max_delay_ns.max(3 * expiration_ns);
        self
    }

    /// This case in associative buckets (Nessie's index with `bucket_slots`
    /// B of 2 or 4, drawn from a dice stream of its own so that every other
    /// draw of the case stays as it was), in tight tables: as few buckets as
    /// hold the keys, but at least one more than a key's candidates, spread
    /// over the nodes in whole buckets, searched breadth first. A baseline's
    /// case is returned as it is: its index has one entry per candidate.
    pub fn with_buckets(mut self) -> SwarmCase {
        if self.system != SystemKind::Nessie {
            return self;
        }
        let mut d = Dice::new(self.seed.wrapping_mul(0x6a09_e667_f3bc_c909) ^ 0xb0c4_e75e);
        let b = pick(&mut d, &[2u8, 2, 4]);
        let t = &mut self.tuning;
        let n = u32::from(t.candidates.unwrap_or(2));
        let bucket = u32::from(b);
        // As few buckets as hold the keys, but one more than a key's
        // candidates (else every key's buckets are all of them and nothing
        // can move), and a spare one in a quarter of the cases.
        let spare = u32::from(d.chance(250));
        let buckets = (self.keys as u32).div_ceil(bucket).max(n + 1) + spare;
        t.index_slots_per_node = Some(buckets.div_ceil(u32::from(self.nodes)) * bucket);
        t.bucket_slots = Some(b);
        // Buckets take the breadth-first search (`Config::validate` refuses
        // the depth-first one with them).
        t.depth_first_migrate = Some(false);
        self
    }

    /// This case with size classes (Nessie only; issue 41): a ladder of
    /// classes below the main one, each with as many entries as it (few:
    /// reuse within each class is the point), and values of uniform sizes
    /// up to 24, 64 or 160 bytes, so that updates move keys between
    /// classes and MIGRATEs copy entries of each. Drawn from a dice stream
    /// of its own: every other draw of the case stays.
    pub fn with_size_classes(mut self) -> SwarmCase {
        if self.system != SystemKind::Nessie {
            return self;
        }
        let mut d = Dice::new(self.seed.wrapping_mul(0xbb67_ae85_84ca_a73b) ^ 0x5123_c1a5);
        self.value_size = pick(&mut d, &[24u32, 64, 160]);
        self.value_mix = nessie_workload::ValueMix::Uniform;
        self.tuning.size_classes = Some(true);
        self
    }

    /// This case with an index that grows (Nessie only; issue 39): three or
    /// four generations, the first holding a quarter to a half of the keys
    /// (at least a key's candidates), so that the run's inserts fill it,
    /// start a growth, help it along with their steps of the sweep and
    /// meet its seals, under every fault of the case. Drawn from a dice
    /// stream of its own: every other draw of the case stays.
    pub fn with_growth(mut self) -> SwarmCase {
        if self.system != SystemKind::Nessie {
            return self;
        }
        let mut d = Dice::new(self.seed.wrapping_mul(0x3c6e_f372_fe94_f82b) ^ 0x6e0e_7751);
        let t = &mut self.tuning;
        let b = u32::from(t.bucket_slots.unwrap_or(1).max(1));
        let n = u32::from(t.candidates.unwrap_or(2));
        let nodes = u32::from(self.nodes);
        let share = pick(&mut d, &[4u32, 3, 2]);
        let buckets = (self.keys as u32 / share).div_ceil(b).max(n);
        t.index_slots_per_node = Some(buckets.div_ceil(nodes).max(1) * b);
        t.index_generations = Some(pick(&mut d, &[3u8, 4]));
        // Each key a growth moves takes a data table entry for its copy
        // (the old one is reused an expiration period later): shares that
        // hold every key twice over, so that a growth is not starved of
        // entries by the share sizes of cases drawn for a fixed index.
        self.entries_per_client = self.entries_per_client.max(2 * self.keys as u32 + 4);
        // An index that may grow takes the breadth-first search
        // (`Config::validate` refuses the depth-first one with it).
        t.depth_first_migrate = Some(false);
        self
    }

    /// This case with clients without storage (Nessie only; issue 41): half
    /// of each node's clients (at least one) write their shares through
    /// memory windows that their node's agent binds, take their shares by
    /// lease, and lose them when they stall past the lease term (two
    /// expiration periods), under every fault of the case.
    pub fn with_pure_clients(mut self) -> SwarmCase {
        if self.system == SystemKind::Nessie {
            self.tuning.pure_clients = Some(true);
        }
        self
    }

    /// This case with late landings unbounded for the request channels of
    /// NessieSD, NessieHY, Pilaf and Cell, whose outcomes rest on no landing
    /// time: mutations that reach their responder after their landing
    /// deadline execute anyway ([`Chaos::late_landing`]), a quarter of the
    /// requests are delayed, and orphans (errors whose requests land later,
    /// duplicated WRITEs) land up to four margins late, past every wait a
    /// client makes before it settles, but within its operation timeout, so
    /// that liveness is still judged.
    pub fn with_late_landings(mut self) -> SwarmCase {
        let margin_ns = self.tuning.deadline_margin_us.unwrap_or(1_000) * 1_000;
        self.chaos.late_landing = true;
        self.chaos.delay_permille = self.chaos.delay_permille.max(250);
        self.chaos.max_delay_ns = self.chaos.max_delay_ns.max(4 * margin_ns);
        self.chaos.error_then_land_permille = self.chaos.error_then_land_permille.max(20);
        self
    }

    /// This case with every key preloaded and no DELETE, so that (but for
    /// a key the preload found no room for) no PUT inserts a key, and no
    /// insert races another: the family in which RACE, whose published
    /// duplicate check leaves a duplicate that a later DELETE resurrects
    /// (docs/baselines.md), is checked under every fault for everything
    /// else (reads, updates, the reuse of its KV blocks). Every other draw
    /// of the case stays.
    pub fn without_inserts(mut self) -> SwarmCase {
        self.preload_pct = 100;
        self.delete_pct = 0;
        self
    }

    /// This case with long pauses: a client is descheduled at one poll in
    /// twenty for up to four expiration periods, past the instant others
    /// may take over what it holds (RCuckoo's stranded locks): the family in
    /// which a writer that does not fence itself by its deadline (the
    /// paper's, `unfenced-writes`) writes over rows written since.
    pub fn with_long_pauses(mut self) -> SwarmCase {
        let expiration_ns = self.tuning.expiration_us.unwrap_or(1_000) * 1_000;
        self.chaos.pause_permille = 50;
        self.chaos.max_pause_ns = self.chaos.max_pause_ns.max(4 * expiration_ns);
        self.chaos.boundary_pauses = false;
        self
    }

    /// This case without duplicated WRITEs: the family in which a design
    /// that writes in place under locks (RCuckoo, docs/baselines.md), whose
    /// row WRITE replayed after its lock was released undoes a later
    /// writer's row, is checked for every other fault.
    pub fn without_duplicate_writes(mut self) -> SwarmCase {
        self.chaos.duplicate_write_permille = 0;
        self
    }

    /// This case with only the faults that change *when* requests land and
    /// steps run (delays, pauses, torn transfers, duplicated WRITEs, clock
    /// skew, stragglers), none that fails a request or a process (errors,
    /// losses, vanishing requests, link failures, crashes, outages): the
    /// family in which a design that cannot settle an interrupted step
    /// (RACE's duplicate check, docs/baselines.md) is still checked for
    /// everything else.
    pub fn with_timing_faults_only(mut self) -> SwarmCase {
        let c = &mut self.chaos;
        c.fail_after_exec_permille = 0;
        c.fail_before_exec_permille = 0;
        c.lose_completion_permille = 0;
        c.error_then_land_permille = 0;
        c.late_completion_permille = 0;
        c.vanish_permille = 0;
        c.link_failure_permille = 0;
        c.crash_permille = 0;
        c.outage_permille = 0;
        c.unreachable_after_ns = 0;
        c.server_crash_permille = 0;
        c.server_failure_permille = 0;
        c.split_failure_permille = 0;
        self
    }

    /// The simulation this case runs, with the protocol variant `faults`.
    pub fn spec(&self, faults: Faults) -> SimSpec {
        SimSpec {
            nodes: self.nodes,
            clients_per_node: self.clients_per_node,
            keys: self.keys,
            key_size: 16,
            value_size: self.value_size,
            get_pct: self.get_pct,
            seconds: self.seconds,
            load_factor: 0.5,
            seed: self.seed,
            record_history: true,
            faults,
            entries_per_client: Some(self.entries_per_client),
            delete_pct: self.delete_pct,
            preload_pct: self.preload_pct,
            chaos: self.chaos,
            tuning: self.tuning,
            depth: self.depth,
            background_per_node: self.background_per_node,
            final_sweep: true,
            system: self.system,
            server_workers: self.server_workers.max(1),
            hy: self.hy.options(),
            server_faults: self.server_faults,
            cell: self.cell,
            scan_pct: self.scan_pct,
            value_mix: self.value_mix,
            paired_workload_seeds: self.paired_workload_seeds,
            ..SimSpec::default()
        }
    }

    /// Runs the case and checks its history.
    pub fn run(&self, faults: Faults) -> Result<CaseRun, SimError> {
        let report = simulate(&self.spec(faults))?;
        let (verdict, scans_whole) = verdict_and_scans(&report);
        Ok(CaseRun {
            case: self.clone(),
            report,
            verdict,
            scans_whole,
        })
    }
}

/// What a swarm found.
#[derive(Debug, Default)]
pub struct SwarmSummary {
    /// Cases run.
    pub cases: usize,
    /// Cases whose history was linearizable.
    pub passed: usize,
    /// Cases the checker could not decide (none is a pass: see
    /// [`SwarmSummary::ok`]).
    pub inconclusive: usize,
    /// Operations checked over all passing cases.
    pub checked_ops: usize,
    /// Fewest operations checked in one passing case.
    pub min_checked: Option<usize>,
    /// Operations with an unknown outcome over all cases.
    pub unknown_ops: u64,
    /// Injected client crashes.
    pub crashes: u64,
    /// Injected server worker crashes.
    pub server_crashes: u64,
    /// Cell servers failed for good.
    pub server_failures: u64,
    /// Of those, failures at a step of a meganode split.
    pub mid_split_failures: u64,
    /// Recoveries of failed Cell servers that finished.
    pub server_recoveries: u64,
    /// Lost completions.
    pub lost_completions: u64,
    /// Mutations that completed with an error and were left to land later.
    pub error_then_land: u64,
    /// Of those, how many executed after their error completion.
    pub orphans_landed: u64,
    /// Completions handed in after their round was given up by a
    /// late-completion fault.
    pub late_completions: u64,
    /// Completions that reached a Nessie client after their round was given
    /// up, however late (routed by request id, or dropped).
    pub stale_completions: u64,
    /// Requests that vanished (never executed, never completed).
    pub vanished: u64,
    /// Remote WRITEs given a duplicate copy.
    pub duplicate_writes: u64,
    /// Of those copies, how many executed.
    pub duplicates_landed: u64,
    /// Mutations refused at their landing deadline.
    pub landing_deadline_refusals: u64,
    /// Mutations that executed after their landing deadline (only with
    /// [`Chaos::late_landing`](crate::Chaos::late_landing)).
    pub late_landings: u64,
    /// Multi-word transfers whose words landed one at a time.
    pub torn: u64,
    /// Of those, how many a fault stopped part placed.
    pub partly_placed: u64,
    /// Requests a failed queue pair completed with an error.
    pub link_errors: u64,
    /// Data table entries recycled for reuse while clients raced (the
    /// workload, not the final sweep), over all cases.
    pub recycled_in_race: u64,
    /// Cases in which some entry was recycled while clients raced.
    pub cases_with_reuse: usize,
    /// Cases with range scans (Cell), and of those, how many the
    /// range-aware checker decided whole (the others pass on the per-key
    /// check with each scan's entries as reads).
    pub scan_cases: usize,
    /// See [`SwarmSummary::scan_cases`].
    pub scan_cases_whole: usize,
    /// MIGRATEs run (the baselines: cuckoo paths moved; Cell: meganode
    /// splits finished).
    pub migrations: u64,
    /// Cell's tree node splits.
    pub node_splits: u64,
    /// Entries of crashed or overrunning owners recovered.
    pub recoveries: u64,
    /// What the index's online growth did, over every case.
    pub growth: crate::spec::GrowthCounts,
    /// Clients without storage whose agent took their share back (each
    /// replaced by a new client).
    pub lease_losses: u64,
    /// The data-table audits summed over every case ([`DteAudit`](crate::DteAudit)):
    /// entries live, reusable and leaked at quiescence, and leaks admitted
    /// (the per-case leak descriptions are not kept).
    pub dtes: DteAudit,
    /// The first failing case, if any (not yet shrunk).
    pub failure: Option<CaseRun>,
}

impl SwarmSummary {
    /// Whether the run passed: no case failed, none was inconclusive, and
    /// something was checked.
    pub fn ok(&self) -> bool {
        self.failure.is_none() && self.inconclusive == 0 && self.checked_ops > 0
    }
}

/// Runs the cases of `seeds` under protocol variant `faults` until the
/// first failure (if `stop_at_failure`) or the end.
pub fn swarm(
    seeds: impl IntoIterator<Item = u64>,
    faults: Faults,
    stop_at_failure: bool,
) -> Result<SwarmSummary, SimError> {
    swarm_with(seeds, faults, stop_at_failure, |_| {})
}

/// [`swarm`] of `system`'s cases ([`SwarmCase::for_system`]), with the
/// baselines' fault switches `server_faults`.
pub fn swarm_system(
    system: SystemKind,
    seeds: impl IntoIterator<Item = u64>,
    faults: Faults,
    server_faults: ServerFaults,
    stop_at_failure: bool,
) -> Result<SwarmSummary, SimError> {
    swarm_with(seeds, faults, stop_at_failure, |c| {
        *c = SwarmCase::for_system(c.seed, system);
        c.server_faults = server_faults;
    })
}

/// [`swarm`], each case changed by `tweak` after it is drawn (for example
/// the A2 negative control: `|c| c.chaos.late_landing = true`).
pub fn swarm_with(
    seeds: impl IntoIterator<Item = u64>,
    faults: Faults,
    stop_at_failure: bool,
    tweak: impl Fn(&mut SwarmCase),
) -> Result<SwarmSummary, SimError> {
    let mut s = SwarmSummary::default();
    for seed in seeds {
        let mut case = SwarmCase::from_seed(seed);
        tweak(&mut case);
        let run = case.run(faults)?;
        s.cases += 1;
        s.unknown_ops += run.report.unknown;
        s.crashes += run.report.chaos.crashes;
        s.lease_losses += run.report.chaos.lease_losses;
        s.server_crashes += run.report.chaos.server_crashes;
        s.server_failures += run.report.chaos.server_failures;
        s.mid_split_failures += run.report.chaos.mid_split_failures;
        s.server_recoveries += run.report.chaos.server_recoveries;
        s.lost_completions += run.report.chaos.lost_completions;
        s.error_then_land += run.report.chaos.error_then_land;
        s.orphans_landed += run.report.chaos.orphans_landed;
        s.late_completions += run.report.chaos.late_completions;
        s.stale_completions += run.report.chaos.stale_completions;
        s.vanished += run.report.chaos.vanished;
        s.duplicate_writes += run.report.chaos.duplicate_writes;
        s.duplicates_landed += run.report.chaos.duplicates_landed;
        s.landing_deadline_refusals += run.report.chaos.landing_deadline_refusals;
        s.late_landings += run.report.chaos.late_landings;
        s.torn += run.report.chaos.torn;
        s.partly_placed += run.report.chaos.partly_placed;
        s.link_errors += run.report.chaos.link_errors;
        s.migrations += run.report.migrations;
        s.node_splits += run.report.node_splits;
        if let Some(whole) = run.scans_whole {
            s.scan_cases += 1;
            s.scan_cases_whole += usize::from(whole);
        }
        s.recycled_in_race += run.report.recycled_in_race;
        s.cases_with_reuse += usize::from(run.report.recycled_in_race > 0);
        s.recoveries += run.report.recoveries;
        s.growth += run.report.growth;
        if let Some(a) = &run.report.dtes {
            s.dtes.add(a);
        }
        match &run.verdict {
            Verdict::Pass(n) => {
                s.passed += 1;
                s.checked_ops += n;
                s.min_checked = Some(s.min_checked.map_or(*n, |m| m.min(*n)));
            }
            Verdict::Inconclusive(_) => s.inconclusive += 1,
            Verdict::Fail(_) => {
                if s.failure.is_none() {
                    s.failure = Some(run);
                }
                if stop_at_failure {
                    break;
                }
            }
        }
    }
    Ok(s)
}
