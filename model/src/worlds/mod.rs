//! The named worlds: small clusters and workloads, each telling one part of
//! the protocol's story, for the CI run, the `nessie-model` CLI and the tests
//! that show each broken variant is caught.
//!
//! Time in every world is the protocol's own, in nanoseconds: the expiration
//! period T is 4 ns, the deadline margin 2 ns and the clock skew 1 ns, and
//! the clock ticks by 1 ns, so every instant at which a deadline comparison
//! can flip is visited, and a request posted inside the margin can land after
//! a deadline (but within A2). Node 1's clock runs 1 ns (the full skew) ahead
//! of node 0's.

use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{
    ClientId, Config, Faults, IteAddr, MigrateSearch, NodeId, Request, TransportFault,
};

use crate::world::{ClientSpec, Expect, World, CLASSIC_FAULTS};
use nessie_check::memory::WordOrder;

mod growth;
mod pure;
mod timed;
mod untimed;

pub use growth::*;
pub use pure::*;
pub use timed::*;
pub use untimed::*;

/// Ticks to pass an attempt's deadline plus the skew (T + skew + 1 ns).
pub const PAST_DEADLINE: u8 = 6;

fn cfg(nodes: u16, slots: u32, candidates: u8, clients_per_node: u16) -> Config {
    Config {
        nodes,
        index_slots_per_node: slots,
        candidates,
        clients_per_node,
        dtes_per_node: 4 * u32::from(clients_per_node),
        max_key_len: 8,
        max_value_len: 16,
        filter_bits: 4,
        cache_capacity: 0,
        expiration: Duration::from_nanos(4),
        clock_skew: Duration::from_nanos(1),
        deadline_margin: Duration::from_nanos(2),
        max_migrate_depth: 1,
        ..Config::default()
    }
}

/// Finds a key whose candidates satisfy `pred`.
pub fn key_where(cfg: &Config, prefix: &str, pred: impl Fn(&[IteAddr]) -> bool) -> Vec<u8> {
    let h = cfg.hasher();
    (0..100_000u32)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .find(|k| k.len() <= cfg.max_key_len as usize && pred(&h.candidates(k)))
        .unwrap_or_else(|| panic!("no key with prefix {prefix} fits the world"))
}

fn slots(list: &[u32]) -> Vec<IteAddr> {
    list.iter()
        .map(|&s| IteAddr {
            node: NodeId(0),
            slot: s,
        })
        .collect()
}

fn client(node: u16, index: u16, program: Vec<Request>) -> ClientSpec {
    ClientSpec {
        id: ClientId {
            node: NodeId(node),
            index,
        },
        program,
        faults: Faults::default(),
        may_crash: false,
        release: false,
    }
}

fn put(k: &[u8], v: &str) -> Request {
    Request::Put(k.to_vec(), v.as_bytes().to_vec())
}

fn get(k: &[u8]) -> Request {
    Request::Get(k.to_vec())
}

fn del(k: &[u8]) -> Request {
    Request::Delete(k.to_vec())
}

fn world(name: &str, cfg: Config, clients: Vec<ClientSpec>) -> World {
    World {
        name: name.to_string(),
        cfg: Arc::new(cfg),
        clients,
        preload: Vec::new(),
        prelude: Vec::new(),
        torn: true,
        word_order: WordOrder::Ascending,
        max_ticks: 0,
        max_delays: 0,
        tick: Duration::from_nanos(1),
        clock_offsets: vec![0, 1],
        max_attempts: 2,
        max_faults: 0,
        faults: CLASSIC_FAULTS.to_vec(),
        expect: Vec::new(),
        late_landing: false,
        landing_bound: None,
        always_room: false,
        directory: Default::default(),
        views: Vec::new(),
    }
}

/// Applies `faults` to every client (a protocol variant is everyone's).
pub fn with_faults(mut w: World, faults: Faults) -> World {
    for c in &mut w.clients {
        c.faults = faults;
    }
    w
}

/// Which test of `model/tests/model_check.rs` explores a world
/// exhaustively (the tests split the suite so that it runs on both cores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// `untimed_worlds_hold_every_property`.
    Untimed,
    /// `timed_worlds_hold_every_property`.
    Timed,
    /// `get_cache_worlds_hold_every_property`.
    GetCache,
    /// `edge_worlds_hold_every_property`.
    Edges,
    /// `a_migrate_across_nodes_under_skew_holds`.
    AcrossNodes,
    /// `three_clients_with_a_migrate_hold_every_property` (about two
    /// minutes: `#[ignore]`d in plain `cargo test`, run by name by `.ci/run`).
    ThreeClientsMigrate,
}

/// How `cargo test` checks a world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CiCheck {
    /// Explored exhaustively by the test of `group`, which pins `states`,
    /// its unique state count: a silent change of the protocol or the model
    /// fails the test.
    Exhaustive {
        /// The test that explores it.
        group: Group,
        /// Its unique states.
        states: usize,
    },
    /// A depth-first search of its first four million states.
    Bounded,
    /// Random walks (8 s).
    Walks,
    /// Only in a variant of its own test builds (e.g. `duplicate-mark`
    /// with A2 dropped, `a_late_duplicate_mark_is_harmless`).
    OwnTest,
}

/// One named world: its name, how it is built (its protocol variant given),
/// how `cargo test` checks it and the broken variants it catches. Its story
/// is a row of docs/verification.md's table of worlds, which
/// `model/tests/model_check.rs` checks against this one (every world there,
/// with its pinned state count and its catches).
#[derive(Clone, Copy, Debug)]
pub struct WorldRow {
    /// The name (`nessie-model check NAME`).
    pub name: &'static str,
    /// Builds it with every client running the given protocol variant.
    pub build: fn(Faults) -> World,
    /// How `cargo test` checks it.
    pub ci: CiCheck,
    /// The broken protocol variants it catches (`cargo test` hunts each
    /// counterexample).
    pub catches: &'static [Catch],
}

/// A broken protocol variant (a test-only fault switch) that a world
/// catches: the counterexample `cargo test` must find in it.
#[derive(Clone, Copy, Debug)]
pub struct Catch {
    /// The switch (one of [`Faults::NAMES`]).
    pub switch: &'static str,
    /// The properties of which the broken variant violates at least one.
    pub violates: &'static [&'static str],
    /// What goes wrong, as a test's name would say it.
    pub story: &'static str,
    /// How the world is set for this catch beyond the switch, when it is
    /// (`None`: the row's own build, with the switch on for every client).
    pub setting: Option<fn(Faults) -> World>,
}

impl Catch {
    /// The world with this catch's broken variant.
    /// A switch that breaks a rule the incarnation tags cover is hunted
    /// with the tags off too ([`Faults::for_catching`]).
    pub fn world(&self, row: &WorldRow) -> Result<World, nessie_protocol::UnknownFault> {
        let faults = Faults::named(&[self.switch])?.for_catching();
        Ok(self.setting.unwrap_or(row.build)(faults))
    }
}

/// The property every history must have.
pub const LINEARIZABLE: &str = "linearizable";

const fn catch(
    switch: &'static str,
    violates: &'static [&'static str],
    story: &'static str,
) -> Catch {
    Catch {
        switch,
        violates,
        story,
        setting: None,
    }
}

/// The fault switches no row catches, and where each is shown instead.
pub const CAUGHT_ELSEWHERE: &[(&str, &str)] = &[
    (
        "ignore-deadline",
        "not a bug alone: an overrunning owner that commits by NIC CAS is harmless \
         (`late-owner-commit` holds with it on, model_check.rs); with `cpu-state-flip` it is \
         late-owner-commit's catch, and the swarm finds it from seed 0 (sim/tests/swarm.rs)",
    ),
    (
        "skip-recycle-mark",
        "a silent leak no history shows: the simulator's data-table audit \
         (sim/tests/swarm.rs, a_silent_leak_is_caught_by_the_data_table_audit)",
    ),
    (
        "blind-recycle-mark",
        "safe while A2 holds; with A2 dropped, the exact story of tests/tests/review_holes.rs \
         (a_duplicated_recycle_mark_marks_a_reused_entry_only_when_marks_are_writes)",
    ),
    (
        "ignore-incarnations",
        "needs an entry reused after a CAS expecting its word was posted and before it landed: \
         the swarm's A2 negative control (sim/tests/swarm.rs, \
         late_landings_are_harmless_with_incarnation_tags_and_caught_without); in the model, \
         cached-writer with late landings and 12 ticks, tens of millions of states \
         (`nessie-model check cached-writer --late-landing --ticks 12 --faults \
         ignore-incarnations`, docs/verification.md)",
    ),
    (
        "fence-seals-with-copy-word",
        "needs two MIGRATE copies with one destination, an install of the second held in the \
         fabric, and two fencers of the first with the second's fence between them: beyond the \
         worlds' sizes; the swarm (sim/tests/swarm.rs, \
         rarer_catches_are_caught_by_the_seed_that_shows_each, case 26,582, which the correct \
         protocol of the time failed once each seed drew its own workload)",
    ),
    (
        "table-full-uncertified",
        "needs a PUT's scan to straddle a MIGRATE of its key in a full table with no chain, beyond \
         the worlds' tables: the swarm (sim/tests/swarm.rs, \
         rarer_catches_are_caught_by_the_seed_that_shows_each, case 30,014)",
    ),
    (
        "skip-growth-help",
        "a liveness failure no history shows (the growth never ends, every operation still \
         answers rightly): tests/tests/growth.rs \
         (a_growth_whose_starter_stopped_is_finished_by_the_writers_alone)",
    ),
    (
        "growth-cursor-unchecked",
        "needs a writer's step of the sweep to seal a chunk past the cursor's while the \
         cursor's holds a key, then read ahead: more chunks than the growth worlds' (whose \
         writers take the cursor's chunk); the swarm (sim/tests/swarm.rs, \
         an_index_growing_under_the_fault_mixes_answers_rightly_and_growth_switches_are_caught)",
    ),
    (
        "take-without-new-generation",
        "needs an entry of the releaser reclaimable while its WRITE is on its way, beyond \
         pure-released-share's clock: tests/tests/pure_clients.rs \
         (a_released_share_is_taken_at_once_and_the_releasers_keys_are_revoked: the \
         releaser's late WRITE lands on its own linked entry)",
    ),
    (
        "pure-beats-only-on-writes",
        "a liveness failure no history shows (a client that only reads loses its share while it \
         runs; its next write answers `LeaseLost`): tests/tests/pure_clients.rs \
         (a_holder_that_only_reads_or_renews_keeps_its_share)",
    ),
    (
        "capped-search-table-full",
        "needs a search level wider than one round reads (256 alternatives), far beyond any \
         world: tests/tests/inserts.rs \
         (a_chain_only_beyond_one_rounds_reads_is_a_false_table_full_with_the_cap)",
    ),
];

impl WorldRow {
    /// The world with the correct protocol.
    pub fn world(&self) -> World {
        (self.build)(Faults::default())
    }
}

const fn exhaustive(group: Group, states: usize) -> CiCheck {
    CiCheck::Exhaustive { group, states }
}

/// Every named world: adding one is adding a row (and its story to
/// docs/verification.md's table, which a test checks).
pub const WORLDS: &[WorldRow] = &[
    WorldRow {
        name: "two-writers-one-key",
        build: |f| with_faults(two_writers_one_key(), f),
        ci: exhaustive(Group::Untimed, 23_012),
        catches: &[],
    },
    WorldRow {
        name: "three-candidates",
        build: |f| with_faults(three_candidates(), f),
        ci: exhaustive(Group::Untimed, 4_184),
        catches: &[],
    },
    WorldRow {
        name: "migrate",
        build: |f| with_faults(migrate(), f),
        ci: exhaustive(Group::Untimed, 20_609),
        catches: &[],
    },
    WorldRow {
        name: "migrate-without-previous-versions",
        build: |f| with_faults(migrate_without_previous_versions(), f),
        ci: exhaustive(Group::Untimed, 28_943),
        catches: &[],
    },
    WorldRow {
        name: "migrate-put-get",
        build: |f| with_faults(migrate_put_get(), f),
        ci: exhaustive(Group::Untimed, 90_785),
        catches: &[],
    },
    WorldRow {
        name: "delete-during-migrate",
        build: |f| with_faults(delete_during_migrate(), f),
        ci: exhaustive(Group::Untimed, 11_716),
        catches: &[],
    },
    WorldRow {
        name: "recursive-migrate",
        build: |f| with_faults(recursive_migrate(), f),
        ci: exhaustive(Group::Untimed, 490),
        catches: &[],
    },
    WorldRow {
        name: "recursive-migrate-depth-first",
        build: |f| with_faults(recursive_migrate_depth_first(), f),
        ci: exhaustive(Group::Untimed, 466),
        catches: &[],
    },
    WorldRow {
        name: "get-races-migrate",
        build: get_races_migrate,
        ci: exhaustive(Group::Untimed, 500),
        catches: &[catch("skip-get-reverse-pass", &[LINEARIZABLE], "a GET without its reverse pass misses a moved key")],
    },
    WorldRow {
        name: "puts-race-a-delete",
        build: puts_race_a_delete,
        ci: exhaustive(Group::Untimed, 45_539),
        catches: &[catch("skip-put-verify", &["one committed version per key"], "a PUT without its verification commits twice")],
    },
    WorldRow {
        name: "insert-migrate-update",
        build: insert_migrate_update,
        ci: exhaustive(Group::Untimed, 55_077),
        catches: &[catch("skip-copy-update-verify", &["one committed version per key"], "an update that meets a MIGRATE copy without its verification commits beside the copy's source")],
    },
    WorldRow {
        name: "get-in-a-bucket-races-migrate",
        build: get_in_a_bucket_races_migrate,
        ci: exhaustive(Group::Untimed, 1_951),
        catches: &[catch("skip-get-reverse-pass", &[LINEARIZABLE], "a GET without its reverse pass misses a key moved into a bucket it read")],
    },
    WorldRow {
        name: "puts-race-in-a-bucket",
        build: puts_race_in_a_bucket,
        ci: exhaustive(Group::Untimed, 81_175),
        catches: &[catch("verify-other-buckets-only", &["one committed version per key"], "a PUT that verifies only the other buckets commits twice in its own")],
    },
    WorldRow {
        name: "update-across-classes",
        build: update_across_classes,
        ci: exhaustive(Group::Untimed, 2_064),
        catches: &[catch("mark-by-main-class-offset", &["no linked entry is marked for recycling"], "a mark by the main class's offsets marks another key's linked entry")],
    },
    WorldRow {
        name: "migrate-install-fails",
        build: migrate_install_fails,
        ci: exhaustive(Group::Untimed, 2_316),
        catches: &[catch("skip-migrate-rollback", &["no linked entry is reused"], "a MIGRATE without its rollback reuses a linked entry")],
    },
    WorldRow {
        name: "crash-and-reclaim",
        build: |f| with_faults(crash_and_reclaim(), f),
        ci: exhaustive(Group::Timed, 3_452_951),
        catches: &[],
    },
    WorldRow {
        name: "crash-and-reclaim-in-buckets",
        build: |f| with_faults(crash_and_reclaim_in_buckets(), f),
        ci: exhaustive(Group::Timed, 3_307_571),
        catches: &[],
    },
    WorldRow {
        name: "late-owner-commit",
        build: |f| late_owner_commit(f, f),
        ci: exhaustive(Group::Timed, 559_215),
        catches: &[Catch {
            switch: "cpu-state-flip",
            violates: &[LINEARIZABLE, "acknowledged writes survive at quiescence"],
            story: "an overrunning owner that flips its entry valid by CPU store loses an acknowledged write",
            setting: Some(|f| {
                let overrun = Faults {
                    ignore_deadline: true,
                    ..Faults::default()
                };
                late_owner_commit(overrun, f)
            }),
        }],
    },
    WorldRow {
        name: "late-migrate-install",
        build: late_migrate_install,
        ci: exhaustive(Group::Timed, 5_797_993),
        // Its stories of the broken fences are whole-world hunts (a minute
        // each): CI catches both switches in `install-error-then-land` in
        // under a second, and the CLI tells the stories here:
        // `nessie-model check late-migrate-install --faults
        // unfenced-migrate-install` (hole 1: the late install loses a write,
        // not linearizable) and `... --faults
        // rollback-destination-to-previous --attempts 2` (the key's entry
        // named twice blocks the key).
        catches: &[],
    },
    WorldRow {
        name: "late-migrate-install-in-buckets",
        build: late_migrate_install_in_buckets,
        ci: CiCheck::Walks,
        catches: &[],
    },
    WorldRow {
        name: "migrate-across-nodes",
        build: migrate_across_nodes,
        ci: exhaustive(Group::AcrossNodes, 5_915_223),
        // It catches `unfenced-migrate-install` too, across nodes under
        // skew, but its hunt explores the whole world (37 s): CI hunts that
        // switch in `install-error-then-land`, and `nessie-model check
        // migrate-across-nodes --faults unfenced-migrate-install` shows it.
        catches: &[],
    },
    WorldRow {
        name: "cached-writer",
        build: cached_writer,
        ci: exhaustive(Group::Timed, 3_723_499),
        // Each of its catches reuses an entry early or serves a cache hit
        // late, which the incarnation tags make harmless (the reused
        // entry's word is new, so no cache entry answers for it): caught
        // with the tags off, as the clock rules' cover when an entry's 128
        // incarnations wrap.
        catches: &[
            catch("cache-time-from-completion", &[LINEARIZABLE], "with the tags off (ignore-incarnations), hole 2: a cache extended from completion time serves a stale value"),
            Catch {
                switch: "trust-remote-mark-stamp",
                violates: &[LINEARIZABLE],
                story: "with the tags off (ignore-incarnations), A1 dropped (the writer's clock 3 ns ahead, skew 1 ns): an owner that trusts a remote mark's stamp reuses the entry within T",
                setting: Some(|f| {
                    let mut w = cached_writer(f);
                    w.clock_offsets = vec![3, 0];
                    w
                }),
            },
        ],
    },
    WorldRow {
        name: "cached-reader",
        build: cached_reader,
        ci: exhaustive(Group::Timed, 187_241),
        catches: &[catch("reuse-before-expiry", &[LINEARIZABLE], "with the tags off (ignore-incarnations), reusing an entry before it expires serves a stale cache hit")],
    },
    WorldRow {
        name: "cached-rereader",
        build: cached_rereader,
        ci: exhaustive(Group::GetCache, 1_070_880),
        // With the tags on, a cache hit can only return the very
        // incarnation the fresh index word names: caught with them off.
        catches: &[
            catch("get-hit-time-from-completion", &[LINEARIZABLE], "with the tags off (ignore-incarnations), hole 2 on a GET's hit: extended from completion time, it serves a stale value"),
            catch("get-insert-time-from-completion", &[LINEARIZABLE], "with the tags off (ignore-incarnations), hole 2 on a GET's insert, stamped at completion time, serves a stale value"),
        ],
    },
    WorldRow {
        name: "cached-rereader-multiple-reads",
        build: cached_rereader_multiple_reads,
        ci: exhaustive(Group::GetCache, 1_383_828),
        catches: &[catch("get-value-insert-time-from-completion", &[LINEARIZABLE], "with the tags off (ignore-incarnations), hole 2 on a GET's insert after its value read, stamped at completion time, serves a stale value")],
    },
    WorldRow {
        name: "failed-completions",
        build: failed_completions,
        ci: exhaustive(Group::Timed, 3_497_400),
        catches: &[catch("errors-after-commit-retryable", &[LINEARIZABLE], "hole 3: a committed write reported as retryable is applied twice")],
    },
    WorldRow {
        name: "install-error-then-land",
        build: install_error_then_land,
        ci: exhaustive(Group::Edges, 7_149),
        catches: &[
            catch("fence-stops-at-present-word", &["no linked entry is marked for recycling"], "issue 24 hole 1: a fence stopping at a present word marks a linked copy"),
            catch("unfenced-migrate-install", &["no linked entry is marked for recycling"], "hole 1: an unfenced install that reported an error lands after its copy was aborted and links an entry marked for recycling (the lost write it leads to: late-migrate-install)"),
            catch("rollback-destination-to-previous", &["an attempt running alone succeeds"], "a destination rolled back to the previous version names the key's entry twice, and blocks the key"),
        ],
    },
    WorldRow {
        name: "two-fencers",
        build: two_fencers,
        ci: exhaustive(Group::Edges, 34_722),
        catches: &[catch(
            "fence-seal-flips",
            &["no linked entry is marked for recycling"],
            "two fencers of one copy flip its destination back to the never-used word its pending install expects",
        )],
    },
    WorldRow {
        name: "late-completion",
        build: late_completion,
        ci: exhaustive(Group::Edges, 50_774),
        catches: &[catch("machine-local-request-ids", &[LINEARIZABLE], "issue 24 hole 2: with machine-local request ids a late READ answers the next GET")],
    },
    WorldRow {
        name: "slow-search",
        build: slow_search,
        ci: exhaustive(Group::Edges, 6_248),
        catches: &[catch("unaffordable-search-table-full", &["TableFull only without a chain within the depth limit"], "issue 24 hole 3: an unaffordable search answering TableFull")],
    },
    WorldRow {
        name: "two-faults",
        build: two_faults,
        ci: CiCheck::Bounded,
        catches: &[],
    },
    WorldRow {
        name: "crashed-mover",
        build: crashed_mover,
        ci: CiCheck::Bounded,
        catches: &[catch("conflict-ends-put", &["an attempt running alone succeeds"], "hole 4: a conflict at one MIGRATE source blocks inserts")],
    },
    WorldRow {
        name: "three-clients-two-keys",
        build: |f| with_faults(three_clients_two_keys(), f),
        ci: CiCheck::Walks,
        catches: &[],
    },
    WorldRow {
        name: "three-clients-migrate",
        build: |f| with_faults(three_clients_migrate(), f),
        ci: exhaustive(Group::ThreeClientsMigrate, 14_812_895),
        catches: &[],
    },
    WorldRow {
        name: "three-clients-big",
        build: |f| with_faults(three_clients_big(), f),
        ci: CiCheck::Walks,
        catches: &[],
    },
    WorldRow {
        name: "duplicate-mark",
        build: duplicate_mark,
        ci: CiCheck::OwnTest,
        catches: &[],
    },
    WorldRow {
        name: "pure-duplicated-writes",
        build: pure_duplicated_writes,
        ci: exhaustive(Group::Edges, 19_947),
        catches: &[catch(
            "pure-state-by-write",
            &[
                LINEARIZABLE,
                "no linked entry is reused",
                "acknowledged writes survive at quiescence",
            ],
            "a duplicated whole-entry WRITE lands after the commit and turns the entry back to \
             writing",
        )],
    },
    WorldRow {
        name: "pure-generations",
        build: pure_generations,
        ci: exhaustive(Group::Edges, 291_338),
        catches: &[catch(
            "pure-unwindowed",
            &[LINEARIZABLE, "acknowledged writes survive at quiescence"],
            "a WRITE of the first generation lands on the entry reused in the second",
        )],
    },
    WorldRow {
        name: "pure-two-holders",
        build: pure_two_holders,
        ci: exhaustive(Group::Edges, 318_366),
        catches: &[catch(
            "pure-unwindowed",
            &[
                "acknowledged writes survive at quiescence",
                "an attempt running alone succeeds",
            ],
            "the first holder's late WRITE lands on an entry the second reused",
        )],
    },
    WorldRow {
        name: "pure-released-share",
        build: pure_released_share,
        ci: exhaustive(Group::Edges, 57_100),
        catches: &[],
    },
    WorldRow {
        name: "pure-lease-taken-back",
        build: pure_lease_taken_back,
        ci: exhaustive(Group::Edges, 946_774),
        catches: &[],
    },
    WorldRow {
        name: "growth-behind-reader",
        build: |f| with_faults(growth_behind_reader(), f),
        ci: exhaustive(Group::Edges, 2_241),
        catches: &[
            catch(
                "growth-move-empties-source",
                &[LINEARIZABLE],
                "a_reader_behind_finds_a_moved_keys_old_entry_empty_and_answers_not_found",
            ),
            catch(
                "ignore-growth-seals",
                &[LINEARIZABLE],
                "a_reader_that_skips_seals_answers_not_found_for_a_key_that_moved_on",
            ),
            catch(
                "grow-insert-unsealed",
                &[LINEARIZABLE],
                "an_insert_linked_only_in_the_new_generation_is_not_found_by_a_reader_behind",
            ),
        ],
    },
    WorldRow {
        name: "growth-extended-behind-readers",
        build: |f| with_faults(growth_extended_behind_readers(), f),
        ci: exhaustive(Group::Edges, 167_656),
        catches: &[catch(
            "grow-insert-unsealed",
            &[LINEARIZABLE],
            "a_key_moved_two_generations_on_is_not_found_by_a_reader_whose_view_ends_between",
        )],
    },
    WorldRow {
        name: "growth-swept-to-its-end",
        build: |f| with_faults(growth_swept_to_its_end(), f),
        ci: exhaustive(Group::Edges, 217_308),
        catches: &[],
    },
];

/// The row of the world called `name`.
pub fn row(name: &str) -> Option<&'static WorldRow> {
    WORLDS.iter().find(|r| r.name == name)
}

/// The world called `name`, with the broken variants switched off.
pub fn by_name(name: &str) -> Option<World> {
    row(name).map(WorldRow::world)
}

/// The worlds of one exhaustive test, each with its pinned unique state
/// count.
pub fn pinned(group: Group) -> Vec<(World, usize)> {
    WORLDS
        .iter()
        .filter_map(|r| match r.ci {
            CiCheck::Exhaustive { group: g, states } if g == group => Some((r.world(), states)),
            _ => None,
        })
        .collect()
}

/// The worlds `nessie-model check all` explores exhaustively: those `cargo
/// test` does, but for `three-clients-migrate` (minutes; check it by name).
pub fn ci_worlds() -> Vec<World> {
    WORLDS
        .iter()
        .filter(|r| {
            matches!(r.ci, CiCheck::Exhaustive { group, .. } if group != Group::ThreeClientsMigrate)
        })
        .map(WorldRow::world)
        .collect()
}
