//! The fault swarm's own story: the correct protocol survives every mix of
//! crashes, outages, pauses, skew and delayed, failed and lost completions,
//! errors whose requests land later and completions handed in after their
//! round was given up, that the swarm draws; each broken variant it can
//! catch is caught (the seeds are those `nessie swarm --faults NAME` stops
//! at), among them issue 24's hole 1 (through an owner's own install that
//! reports an error and lands between its fence tries) and hole 2 (a
//! completion that outlives its round); a failing case replays exactly
//! from its JSON and shrinks to a smaller case that still fails; at
//! quiescence no data table entry leaks beyond what the protocol admits,
//! and a silent leak is caught.
//! NessieSD, NessieHY and Pilaf survive the same faults and server worker
//! crashes, and each of their fault switches is caught (`nessie swarm
//! --system SYSTEM --server-faults NAME`).

mod common;

use std::time::Duration;

use nessie_check::time_limit;
use nessie_protocol::{Faults, Region};
use nessie_sim::leaks_per_crash;
use nessie_sim::{
    shrink, simulate, swarm, swarm_system, swarm_with, verdict_of, CaseFailure, Chaos,
    ServerFaults, SwarmCase, Verdict,
};
use nessie_systems::SystemKind;

/// The broken variant `name`, as the swarm hunts it: with the incarnation
/// tags off too when the switch breaks a rule they cover
/// ([`Faults::for_catching`]: with the tags the reused entry's word is new,
/// no cache entry answers for it, and such a switch is harmless within 128
/// reuses).
fn faults(name: &str) -> Faults {
    Faults::named(&[name]).unwrap().for_catching()
}

#[test]
fn the_correct_protocol_survives_two_thousand_fault_mixes() {
    let _limit = time_limit(
        "the_correct_protocol_survives_two_thousand_fault_mixes",
        "0..2000",
        Duration::from_secs(120),
    );
    let s = swarm(0..2_000, Faults::default(), false).unwrap();
    common::no_failure(&s, "nessie");
    // No verdict is no pass, and every case checked something: its sweep
    // alone writes and reads back every key (at least 4 operations).
    assert_eq!(s.inconclusive, 0, "{s:?}");
    assert_eq!(s.passed, 2_000);
    assert!(s.ok());
    assert!(s.min_checked.is_some_and(|m| m >= 4), "{s:?}");
    assert!(s.checked_ops > 100_000, "{s:?}");
    // The faults were really injected, and the protocol really recovered.
    assert!(s.crashes > 1_000, "{s:?}");
    assert!(s.lost_completions > 1_000, "{s:?}");
    assert!(s.landing_deadline_refusals > 100, "{s:?}");
    // Issue 24's transport faults (measured: 2,451 errors whose requests
    // were left to land, 2,324 of which landed; 2,542 completions held
    // back past their round; 2,754 completions after their round, all
    // routed by request id or dropped).
    assert!(s.error_then_land > 1_000, "{s:?}");
    assert!(s.orphans_landed > 1_000, "{s:?}");
    assert!(s.late_completions > 1_000, "{s:?}");
    assert!(s.stale_completions > s.late_completions, "{s:?}");
    // What real NICs do beyond those (issue 23, item 8): torn transfers,
    // some stopped part placed by a fault, and queue pairs failing as a
    // whole (measured: 70,304 torn, 620 of them stopped part placed;
    // 177,329 requests failed with their queue pair, most of them posts
    // refused at once while it was down).
    assert!(s.torn > 10_000, "{s:?}");
    assert!(s.partly_placed > 100, "{s:?}");
    assert!(s.link_errors > 10_000, "{s:?}");
    assert!(s.unknown_ops > 1_000, "{s:?}");
    assert!(s.migrations > 100, "{s:?}");
    assert!(s.recoveries > 1_000, "{s:?}");
    // Entries are reused while clients race, in most cases (every run lasts
    // three expiration periods at least).
    assert!(s.cases_with_reuse > 1_200, "{s:?}");
    assert!(s.recycled_in_race > 20_000, "{s:?}");
    // Every case was audited at quiescence: the faults leaked entries (a
    // crash's unmarked entries, marks that failed or came too late), never
    // more in a case than the protocol admits (else the case failed above).
    let d = &s.dtes;
    assert!(d.live > 5_000 && d.reusable > 50_000, "{d:?}");
    assert!(d.leaked > 1_000 && d.leaked <= d.admitted, "{d:?}");
    assert!(d.counted > 1_000, "the operations count their leaks: {d:?}");
    assert_eq!(
        d.admitted,
        d.counted + leaks_per_crash(1) * d.crashes,
        "{d:?}"
    );
}

/// The negative control of A2 (`docs/protocol.md`), passed: late mutations
/// execute anyway and a quarter of the requests are delayed by up to three
/// expiration periods, so a late lock, install, commit or mark lands after
/// the entry it names was recycled and reused. Until issue 39 the swarm
/// found a history that is not linearizable here (a GET returned a value no
/// PUT of its key wrote: a CAS landed on a reused entry whose word
/// recurred, A2′). With incarnation tags the reused entry's words are new,
/// so the case passes, and 1,000 more with late landings (40,000 from the
/// CLI: `nessie swarm --late-landing`); with the tags switched off
/// (`ignore-incarnations`) the control's seed fails as before.
#[test]
fn late_landings_are_harmless_with_incarnation_tags_and_caught_without() {
    let case = SwarmCase::from_seed(A2_NEGATIVE_CONTROL_SEED)
        .with_paired_workload_seeds()
        .without_a2();
    let tagged = case.run(Faults::default()).unwrap();
    assert!(
        tagged.report.chaos.late_landings > 0,
        "{:?}",
        tagged.report.chaos
    );
    assert!(
        matches!(tagged.verdict, Verdict::Pass(_)),
        "{:?}",
        tagged.verdict
    );
    let untagged = case.run(faults("ignore-incarnations")).unwrap();
    assert!(
        matches!(
            untagged.verdict,
            Verdict::Fail(CaseFailure::NotLinearizable(_))
        ),
        "{:?}",
        untagged.verdict
    );
    let s = swarm_with(0..1_000, Faults::default(), false, |c| {
        *c = c.clone().without_a2();
    })
    .unwrap();
    common::no_failure(&s, "late landings with incarnation tags");
    assert_eq!(s.passed, 1_000);
    assert!(s.late_landings > 200, "{s:?}");
}

/// The first seed at which `nessie swarm --late-landing` fails with
/// `--faults ignore-incarnations` (20,403 before updates skipped their
/// verification, and the first failure of the correct protocol before the
/// incarnation tags): an update's install CAS is its only check, so
/// without the tags a late one lands on a word that recurred far sooner.
const A2_NEGATIVE_CONTROL_SEED: u64 = 67;

/// The same fault mixes with Nessie's index in associative buckets
/// (`SwarmCase::with_buckets`: buckets of 2 or 4 entries in tight tables,
/// every other draw as in the cases above; `nessie swarm --buckets`): the
/// correct protocol passes 1,000 of them (40,000 from the CLI), and the
/// broken variants of the PUT's verification are caught, the one that
/// carries the one-entry rule over to buckets (`verify-other-buckets-only`:
/// its own bucket not re-read) among them.
#[test]
fn buckets_survive_the_fault_mixes_and_their_broken_verifications_are_caught() {
    let _limit = time_limit(
        "buckets_survive_the_fault_mixes_and_their_broken_verifications_are_caught",
        "0..1000",
        Duration::from_secs(120),
    );
    let caught = family_holds_and_catches(
        "nessie in buckets",
        SwarmCase::with_buckets,
        &FOUND_IN_BUCKETS,
    );
    for ((name, _), failure) in FOUND_IN_BUCKETS.iter().zip(&caught) {
        assert!(failure.case.tuning.bucket_slots.is_some(), "{name}");
    }
}

/// A family of cases (`family` turns each drawn case into one of its own):
/// the correct protocol passes seeds 0-999 of it, among them MIGRATEs,
/// crashes and torn transfers, and each broken variant of `catches` fails
/// first at its seed (searching from 0); returns those failures.
fn family_holds_and_catches(
    label: &str,
    family: fn(SwarmCase) -> SwarmCase,
    catches: &[(&str, u64)],
) -> Vec<nessie_sim::CaseRun> {
    let s = swarm_with(0..1_000, Faults::default(), false, |c| {
        *c = family(c.clone());
    })
    .unwrap();
    common::no_failure(&s, label);
    assert_eq!(s.passed, 1_000);
    assert_eq!(s.inconclusive, 0, "{s:?}");
    assert!(s.migrations > 50, "{s:?}");
    assert!(s.crashes > 1_000 && s.torn > 10_000, "{s:?}");
    catches
        .iter()
        .map(|&(name, first)| {
            let s = swarm_with(0..first + 1, faults(name), true, |c| {
                *c = family(c.clone());
            })
            .unwrap();
            let failure = s
                .failure
                .unwrap_or_else(|| panic!("{name}: not caught in seeds 0..={first}"));
            assert_eq!(failure.case.seed, first, "{name}");
            failure
        })
        .collect()
}

/// Broken verifications the bucketed swarm finds, and the first seed that
/// shows each (searching from seed 0).
const FOUND_IN_BUCKETS: [(&str, u64); 2] =
    [("verify-other-buckets-only", 22), ("skip-put-verify", 68)];

/// The same fault mixes with Nessie's data tables in size classes
/// (`SwarmCase::with_size_classes`: a ladder of classes, values of uniform
/// sizes, so that updates move keys between classes; `nessie swarm
/// --size-classes`): the correct protocol passes 1,000 of them (50,000
/// from the CLI), and a recycle mark that forgets its entry's class
/// (`mark-by-main-class-offset`) is caught by the I4 watch: it marks a
/// linked entry of the main table.
#[test]
fn size_classes_survive_the_fault_mixes_and_their_broken_mark_is_caught() {
    let _limit = time_limit(
        "size_classes_survive_the_fault_mixes_and_their_broken_mark_is_caught",
        "0..1000",
        Duration::from_secs(120),
    );
    let caught = family_holds_and_catches(
        "nessie in size classes",
        SwarmCase::with_size_classes,
        &[FOUND_IN_SIZE_CLASSES],
    );
    assert!(
        matches!(
            &caught[0].verdict,
            Verdict::Fail(CaseFailure::MarkedLinked { .. })
        ),
        "{:?}",
        caught[0].verdict
    );
}

/// The fault mixes with half of Nessie's clients without storage (issue
/// 41; `SwarmCase::with_pure_clients`, `nessie swarm --pure-clients`):
/// they write their shares through memory windows their node's agent
/// binds, take them by lease and lose them when they stall past the lease
/// term (then a new client takes the share). The correct protocol passes
/// seeds 0-199 (0-24,999 from the CLI), with crashes, lease take-backs and
/// torn transfers; WRITEs and CASes without the windows (`pure-unwindowed`)
/// are caught at seed 2,076 (159 before every operation renewed the lease:
/// the damage needs a share taken back, now rarer): a request of an
/// earlier generation lands on an entry of a later one, and the lone client
/// after the faults meets its damage.
#[test]
fn clients_without_storage_survive_the_fault_mixes_and_unwindowed_writes_are_caught() {
    let pure = |c: &mut SwarmCase| *c = c.clone().with_pure_clients();
    let s = swarm_with(0..200, Faults::default(), false, pure).unwrap();
    common::no_failure(&s, "nessie with clients without storage");
    assert_eq!((s.passed, s.inconclusive), (200, 0), "{s:?}");
    assert!(
        s.crashes > 200 && s.lease_losses > 5 && s.torn > 2_000,
        "{s:?}"
    );
    let s = swarm_with(0..2_077, faults("pure-unwindowed"), true, pure).unwrap();
    let failure = s.failure.expect("pure-unwindowed is caught");
    assert_eq!(failure.case.seed, 2_076);
}

/// The fault mixes with an index that grows online (issue 39;
/// `SwarmCase::with_growth`, `nessie swarm --growth`): its first
/// generation holds a quarter to a half of the keys, so the run's inserts
/// start growths, extend them, help their sweeps and meet their seals with
/// views behind, under every fault of the case. The correct protocol passes
/// seeds 0-299 (0-19,999 from the CLI); the growth switches are caught at
/// seeds 31, 1, 18 and 1: a growth's move that empties its source instead
/// of sealing it, a client that takes a seal for an empty entry, and an
/// insert linked in the new generation before any of its old entries is
/// sealed each let a client whose view is behind answer "not found" for a
/// key that is there; a sweep whose cursor passes chunks it read ahead
/// without checking their seals ends a growth with a key left in an old
/// generation.
#[test]
fn an_index_growing_under_the_fault_mixes_answers_rightly_and_growth_switches_are_caught() {
    let grow = |c: &mut SwarmCase| *c = c.clone().with_growth();
    let s = swarm_with(0..300, Faults::default(), false, grow).unwrap();
    common::no_failure(&s, "nessie growing its index");
    assert_eq!((s.passed, s.inconclusive), (300, 0), "{s:?}");
    assert!(
        s.growth.seals > 500 && s.growth.stale_views > 500 && s.crashes > 300,
        "{s:?}"
    );
    for (switch, seed) in [
        ("growth-move-empties-source", 43),
        ("ignore-growth-seals", 1),
        ("grow-insert-unsealed", 18),
        ("growth-cursor-unchecked", 1),
    ] {
        let s = swarm_with(0..seed + 1, faults(switch), true, grow).unwrap();
        let failure = s.failure.unwrap_or_else(|| panic!("{switch} is caught"));
        assert_eq!(failure.case.seed, seed, "{switch}");
    }
}

/// A crash with size classes can leak one entry returned unpublished per
/// class (the allocator hands such an entry out first only within its
/// class): seed 26,759 of the size-class swarm with late landings, found by
/// the data-table audit when it admitted two leaks per crash whatever the
/// classes. A PUT's entry of class 5 timed out before its install (returned
/// unpublished, its header `Writing`); the client went on with a DELETE in
/// class 1 and crashed after unlinking the DELETE's tombstone: three leaks
/// for one crash, which `leaks_per_crash` now admits (one per class, plus
/// one). Since updates and DELETEs skip their verification the case runs
/// another schedule (one crash, two leaks, four counted by the operations)
/// and no seed below 1,000,000 of the family showed more than two per
/// crash (searched just before `TableFull` was certified); the case stays as the audit's regression: it passes, audited.
#[test]
fn a_crash_leaks_at_most_one_unpublished_entry_per_size_class() {
    let case = SwarmCase::for_system(26_759, SystemKind::Nessie)
        .with_paired_workload_seeds()
        .without_a2()
        .with_size_classes();
    let run = case.run(Faults::default()).unwrap();
    assert!(matches!(run.verdict, Verdict::Pass(_)), "{:?}", run.verdict);
    let a = run.report.dtes.expect("audited");
    assert_eq!((a.leaked, a.crashes, a.counted), (2, 1, 4), "{a:?}");
    assert!(
        a.leaked <= a.counted + leaks_per_crash(1) * a.crashes,
        "{a:?}"
    );
    assert!(a.admitted >= a.counted + leaks_per_crash(2), "{a:?}");
}

/// The broken mark the size-class swarm finds, and the first seed that
/// shows it (searching from seed 0).
const FOUND_IN_SIZE_CLASSES: (&str, u64) = ("mark-by-main-class-offset", 1);

/// Broken variants the swarm finds within a few hundred seeds, and the
/// first seed that shows each (searching from seed 0).
/// (Since 2026-11-30, when each seed's workload became its own: before,
/// seeds 2j and 2j + 1 drew the same operations, and these were 0, 0, 1, 1,
/// 1, 7, 31, 77, 120, 267 and 1,023.)
const FOUND_FROM_ZERO: [(&str, u64); 11] = [
    ("ignore-deadline", 0),
    ("cpu-state-flip", 1),
    ("reuse-before-expiry", 1),
    ("errors-after-commit-retryable", 1),
    ("skip-recycle-mark", 1),
    ("skip-migrate-rollback", 1),
    ("rollback-destination-to-previous", 39),
    ("unfenced-migrate-install", 67),
    // Issue 24's hole 2: a completion that outlived its round (delayed, or
    // held back by a late-completion fault) answers the next machine's
    // request of the same number.
    ("machine-local-request-ids", 105),
    ("skip-put-verify", 188),
    ("skip-get-reverse-pass", 1_023),
];

#[test]
fn the_swarm_catches_each_broken_variant_from_seed_zero() {
    let _limit = time_limit(
        "the_swarm_catches_each_broken_variant_from_seed_zero",
        "0..=1023",
        Duration::from_secs(180),
    );
    for (name, first) in FOUND_FROM_ZERO {
        let s = swarm(0..first + 1, faults(name), true).unwrap();
        let failure = s
            .failure
            .unwrap_or_else(|| panic!("{name}: not caught in seeds 0..={first}"));
        assert_eq!(failure.case.seed, first, "{name}");
    }
}

/// Rarer catches, and the first seed that shows each (searching from seed
/// 0, with the seeding before 2026-11-30: `with_paired_workload_seeds`;
/// too far for CI to search): the case fails with the switch on and passes
/// with it off (so the switch, not the simulator, is at fault).
const FOUND_LATER: [(&str, u64); 8] = [
    ("conflict-ends-put", 253),
    ("fence-stops-at-present-word", 976),
    // Two fencers of one MIGRATE copy (its owner, and a writer that met
    // the copy aborted) flip its never-used destination back to the word
    // the owner's pending install expects; the install lands on it (the I4
    // watch). First found at case 48,969 with the correct protocol of the
    // time, once the simulator woke each machine at its own `poll_timeout`.
    ("fence-seal-flips", 2_635),
    ("cache-time-from-completion", 6_206),
    ("get-insert-time-from-completion", 16_668),
    ("get-hit-time-from-completion", 26_291),
    ("get-value-insert-time-from-completion", 27_585),
    // A scan that straddled a MIGRATE of its key saw it nowhere and the
    // PUT answered `TableFull` without certifying the key absent: found
    // with the correct protocol of the time once updates skipped their
    // verification.
    ("table-full-uncertified", 30_014),
];

/// Rarer catches found since each seed draws its own workload
/// (2026-11-30), searching from seed 0 with the correct protocol of the
/// time, which failed there: each case fails with its switch (the bug, put
/// back) and passes without.
const FOUND_WITH_OWN_WORKLOADS: [(&str, u64); 1] = [
    // Two fencers of one MIGRATE copy each found a word naming another
    // entry and wrote the copy's emptied word over it, the second over a
    // seal another copy's fencer had written over the first's: the
    // destination returned to the word a held install of that other copy
    // expected, which then linked it, aborted and marked (the I4 watch).
    // Every fence now writes the next seal of the word it found.
    ("fence-seals-with-copy-word", 26_582),
];

#[test]
fn rarer_catches_are_caught_by_the_seed_that_shows_each() {
    let _limit = time_limit(
        "rarer_catches_are_caught_by_the_seed_that_shows_each",
        "253, 976, 2635, 6206, 16668, 26291, 27585, 30014; 26582",
        Duration::from_secs(60),
    );
    let pinned_before = FOUND_LATER.iter().map(|&(name, seed)| {
        (
            name,
            SwarmCase::from_seed(seed).with_paired_workload_seeds(),
        )
    });
    let found_since = FOUND_WITH_OWN_WORKLOADS
        .iter()
        .map(|&(name, seed)| (name, SwarmCase::from_seed(seed)));
    for (name, case) in pinned_before.chain(found_since) {
        let broken = case.run(faults(name)).unwrap();
        assert!(broken.verdict.is_fail(), "{name}: {:?}", broken.verdict);
        let correct = case.run(Faults::default()).unwrap();
        assert!(
            matches!(correct.verdict, Verdict::Pass(_)),
            "{name}: {:?}",
            correct.verdict
        );
    }
}

/// Issue 24's hole 1, found through the owner's own error-completion path:
/// in case 976 a MIGRATE owner's install reports an error and lands
/// after the owner's first fence CAS found the destination empty; its
/// second fence CAS finds the copy, and the broken fence stops there, so
/// the owner restores the source and marks the copy still linked at the
/// destination. The simulator's watch on I4's first step reports the mark.
/// Without error-then-land faults the same case passes with the switch on
/// (within A2 nothing else lands an install between two fence tries).
#[test]
fn an_install_that_errs_then_lands_between_fence_tries_is_caught_with_the_broken_fence() {
    let _limit = time_limit(
        "an_install_that_errs_then_lands_between_fence_tries_is_caught_with_the_broken_fence",
        976,
        Duration::from_secs(60),
    );
    let name = "fence-stops-at-present-word";
    let case = SwarmCase::from_seed(976).with_paired_workload_seeds();
    assert!(case.chaos.error_then_land_permille > 0);
    let broken = case.run(faults(name)).unwrap();
    assert!(
        matches!(
            broken.verdict,
            Verdict::Fail(CaseFailure::MarkedLinked { .. })
        ),
        "{:?}",
        broken.verdict
    );
    assert!(!broken.report.marked_linked.is_empty());
    assert!(broken.report.chaos.orphans_landed > 0);
    let mut no_late_installs = case.clone();
    no_late_installs.chaos = case.chaos.without("error-then-land");
    let without = no_late_installs.run(faults(name)).unwrap();
    assert!(
        matches!(without.verdict, Verdict::Pass(_)),
        "{:?}",
        without.verdict
    );
    let correct = case.run(Faults::default()).unwrap();
    assert!(correct.report.marked_linked.is_empty());
}

/// A writer that never marks the previous versions it replaces loses them
/// silently: every history stays linearizable, and only the data-table
/// audit at quiescence tells, naming the entries.
#[test]
fn a_silent_leak_is_caught_by_the_data_table_audit() {
    let case = SwarmCase::from_seed(1).with_paired_workload_seeds();
    let broken = case.run(faults("skip-recycle-mark")).unwrap();
    let Verdict::Fail(CaseFailure::Leaked { leaks, .. }) = &broken.verdict else {
        panic!("{:?}", broken.verdict)
    };
    assert!(
        leaks
            .iter()
            .any(|l| l.contains("Valid Some(Put), recycle flag false")),
        "{leaks:?}"
    );
    let a = broken.report.dtes.as_ref().unwrap();
    assert!(a.leaked > a.admitted, "{a:?}");
    assert!(
        a.leaked > a.counted,
        "the broken writer does not count them: {a:?}"
    );
    let correct = case.run(Faults::default()).unwrap();
    assert!(
        matches!(correct.verdict, Verdict::Pass(_)),
        "{:?}",
        correct.verdict
    );
    let a = correct.report.dtes.as_ref().unwrap();
    assert!(a.leaked <= a.admitted && a.reusable > 0, "{a:?}");
    // The audit needs quiescence: without the final sweep it does not apply.
    let mut spec = case.spec(Faults::default());
    spec.final_sweep = false;
    assert!(simulate(&spec).unwrap().dtes.is_none());
}

#[test]
fn an_install_posted_inside_the_last_margin_is_a_margin_breach_the_swarm_reports() {
    let _limit = time_limit(
        "an_install_posted_inside_the_last_margin_is_a_margin_breach_the_swarm_reports",
        120,
        Duration::from_secs(60),
    );
    // The broken variant posts its MIGRATE install checking only the
    // deadline: in case 120 a client posts an index CAS inside its margin.
    // The correct protocol runs the same case cleanly.
    let case = SwarmCase::from_seed(120).with_paired_workload_seeds();
    let broken = case.run(faults("unfenced-migrate-install")).unwrap();
    assert!(
        !broken.report.margin_breaches.is_empty(),
        "{:?}",
        broken.verdict
    );
    assert!(
        matches!(
            broken.verdict,
            Verdict::Fail(CaseFailure::MarginRule { .. })
        ),
        "{:?}",
        broken.verdict
    );
    let correct = case.run(Faults::default()).unwrap();
    assert!(correct.report.margin_breaches.is_empty());
    assert!(
        matches!(correct.verdict, Verdict::Pass(_)),
        "{:?}",
        correct.verdict
    );
    // An owner that ignores its deadline breaks the rule with every kind of
    // mutation, its commits (data table state CASes) too; the swarm reports
    // it first as operations that never end (case 3, below).
    let run = SwarmCase::from_seed(3)
        .with_paired_workload_seeds()
        .run(faults("ignore-deadline"))
        .unwrap();
    let b = &run.report.margin_breaches;
    assert!(b.iter().any(|b| b.addr.region == Region::Data), "{b:?}");
    assert!(b.iter().any(|b| b.addr.region == Region::Index), "{b:?}");
}

#[test]
fn a_lone_writer_after_the_faults_finds_every_key_writable_or_reports_a_liveness_failure() {
    let _limit = time_limit(
        "a_lone_writer_after_the_faults_finds_every_key_writable_or_reports_a_liveness_failure",
        77,
        Duration::from_secs(60),
    );
    // rollback-destination-to-previous leaves two index entries naming one
    // data table entry: every later write of that key backs off forever.
    let case = SwarmCase::from_seed(77).with_paired_workload_seeds();
    let run = case
        .run(faults("rollback-destination-to-previous"))
        .unwrap();
    assert!(!run.report.sweep_failures.is_empty(), "{:?}", run.verdict);
    assert!(
        matches!(run.verdict, Verdict::Fail(CaseFailure::Sweep { .. })),
        "{:?}",
        run.verdict
    );
    // ignore-deadline waits forever for a lost completion.
    let run = SwarmCase::from_seed(3)
        .with_paired_workload_seeds()
        .run(faults("ignore-deadline"))
        .unwrap();
    assert!(run.report.stuck > 0, "{:?}", run.report);
}

#[test]
fn a_failing_case_replays_exactly_from_its_json() {
    let _limit = time_limit(
        "a_failing_case_replays_exactly_from_its_json",
        120,
        Duration::from_secs(60),
    );
    let case = SwarmCase::from_seed(120).with_paired_workload_seeds();
    let json = serde_json::to_string(&case).unwrap();
    let replayed: SwarmCase = serde_json::from_str(&json).unwrap();
    assert_eq!(replayed, case);
    let a = case.run(faults("unfenced-migrate-install")).unwrap();
    let b = replayed.run(faults("unfenced-migrate-install")).unwrap();
    assert!(a.verdict.is_fail());
    assert_eq!(a.verdict, b.verdict);
    assert_eq!(a.report.fingerprint(), b.report.fingerprint());
    assert_eq!(a.report.history, b.report.history);
}

#[test]
fn shrinking_keeps_the_failure_and_makes_the_case_smaller() {
    let _limit = time_limit(
        "shrinking_keeps_the_failure_and_makes_the_case_smaller",
        1,
        Duration::from_secs(60),
    );
    let f = faults("reuse-before-expiry");
    let run = SwarmCase::from_seed(1)
        .with_paired_workload_seeds()
        .run(f)
        .unwrap();
    let before = run.report.history.len();
    let small = shrink(run, f, 100);
    assert!(small.verdict.is_fail(), "{:?}", small.verdict);
    assert!(
        small.report.history.len() * 2 < before,
        "{} operations, was {before}",
        small.report.history.len()
    );
    // The shrunk case replays to the same failure.
    let again = small.case.run(f).unwrap();
    assert_eq!(again.verdict, small.verdict);
}

/// A history that lost operations, or was never recorded, proves nothing:
/// the case fails instead of passing on what little is left.
#[test]
fn a_truncated_or_unrecorded_history_fails_the_case() {
    let case = SwarmCase::from_seed(7);
    let run = case.run(Faults::default()).unwrap();
    assert!(
        matches!(run.verdict, Verdict::Pass(n) if n > 0),
        "{:?}",
        run.verdict
    );
    let mut truncated = run.report;
    truncated.history.pop();
    assert!(
        matches!(
            verdict_of(&truncated),
            Verdict::Fail(CaseFailure::TruncatedHistory { .. })
        ),
        "{:?}",
        verdict_of(&truncated)
    );
    let mut spec = case.spec(Faults::default());
    spec.record_history = false;
    let unrecorded = simulate(&spec).unwrap();
    assert!(unrecorded.completed_ops > 0);
    assert!(verdict_of(&unrecorded).is_fail());
}

/// A client's stale read of its own write at one virtual instant: the
/// simulator's stamps put the GET after the PUT, and the checker rejects
/// the planted read (with equal stamps it was taken for concurrent).
#[test]
fn a_stale_read_planted_at_a_tie_in_a_recorded_history_is_rejected() {
    use nessie_protocol::{Request, Response};
    let run = SwarmCase::from_seed(7).run(Faults::default()).unwrap();
    let mut h = run.report.history;
    // The sweep's last PUT: a lone client, nothing concurrent.
    let at = (0..h.len())
        .rfind(|&i| {
            matches!(h[i].ret, Ok(Response::Put(_))) && h[i].client == h[h.len() - 1].client
        })
        .expect("the sweep's client wrote");
    let put = h[at].clone();
    // A GET of the PUT's key by the same client, invoked at the very stamp
    // the PUT returned, that still finds the key absent.
    let stale = nessie_check::Event {
        request: Request::Get(put.key().to_vec()),
        ret: Ok(Response::Get(None)),
        invoke: put.response,
        response: put.response,
        ..put.clone()
    };
    h.push(stale);
    let err = nessie_check::check_history(&h, 10_000_000).expect_err("a stale read");
    assert!(err.is_violation(), "{err}");
}

/// The baselines' cases per system in CI (each a few milliseconds).
const BASELINE_CASES: u64 = 1_000;

/// NessieSD, NessieHY and Pilaf survive the same mixes of network faults,
/// client crashes, pauses, outages and skew, plus server worker crashes,
/// through the same oracle (linearizability, operations that never end,
/// the lone writer's sweep).
#[test]
fn the_baselines_survive_the_fault_mixes_server_crashes_included() {
    for system in [
        SystemKind::NessieSd,
        SystemKind::NessieHy,
        SystemKind::Pilaf,
    ] {
        let s = swarm_system(
            system,
            0..BASELINE_CASES,
            Faults::default(),
            ServerFaults::default(),
            false,
        )
        .unwrap();
        common::no_failure(&s, &system.to_string());
        assert_eq!(s.inconclusive, 0, "{system}: {s:?}");
        assert_eq!(s.passed, BASELINE_CASES as usize, "{system}");
        assert!(s.ok(), "{system}");
        assert!(s.min_checked.is_some_and(|m| m >= 4), "{system}: {s:?}");
        // Measured (NessieSD, NessieHY, Pilaf) since the cases draw the
        // vocabulary's last two faults: 231,960, 241,731 and 184,186
        // operations checked (the vanished requests and the duplicated
        // messages end more operations in timeouts); 437, 547 and 638
        // requests vanished; 11,901, 8,330 and 7,728 WRITEs duplicated
        // (11,223, 7,902 and 7,328 copies landed). Before those draws:
        // 283,869, 285,144 and
        // 214,909 operations checked; 7,816, 8,436 and 7,663 client crashes;
        // 5,619, 4,494 and 4,050 server worker crashes; 2,218, 2,481 and
        // 2,757 lost completions; 3,026, 2,600 and 2,146 errors whose
        // requests were left to land (2,870, 2,489 and 2,036 landed);
        // 4,340, 3,871 and 3,241 mutations refused at their landing
        // deadline; over 10,000 unknown outcomes each; entries reused while
        // clients raced in 932, 931 and 893 cases; 708, 759 and 356 cuckoo
        // paths moved; 45,125, 36,742 and 95,947 torn transfers (402, 315
        // and 794 stopped part placed); 44,081, 38,077 and 22,068 requests
        // failed with their queue pair.
        assert!(s.checked_ops > 150_000, "{system}: {s:?}");
        assert!(s.vanished > 300, "{system}: {s:?}");
        assert!(s.duplicates_landed > 5_000, "{system}: {s:?}");
        assert!(s.crashes > 6_000, "{system}: {s:?}");
        assert!(s.server_crashes > 3_000, "{system}: {s:?}");
        assert!(s.lost_completions > 1_500, "{system}: {s:?}");
        assert!(s.landing_deadline_refusals > 2_000, "{system}: {s:?}");
        assert!(s.orphans_landed > 1_500, "{system}: {s:?}");
        assert_eq!(s.late_completions, 0, "{system}: Nessie's only");
        assert!(s.unknown_ops > 8_000, "{system}: {s:?}");
        assert!(s.cases_with_reuse > 800, "{system}: {s:?}");
        assert!(s.migrations > 250, "{system}: {s:?}");
        assert!(s.torn > 10_000, "{system}: {s:?}");
        assert!(s.partly_placed > 100, "{system}: {s:?}");
        assert!(s.link_errors > 5_000, "{system}: {s:?}");
    }
}

/// The baselines' test-only fault switches the swarm catches, and the
/// first seed that shows each (searching from seed 0):
/// `nessie swarm --system SYSTEM --server-faults NAME` stops there.
const BASELINE_TEETH: [(SystemKind, &str, u64); 3] = [
    (SystemKind::NessieSd, "skip-claims", 1),
    (SystemKind::NessieHy, "skip-claims", 2),
    (SystemKind::Pilaf, "skip-claims", 2),
];

#[test]
fn the_swarm_catches_each_baseline_fault_switch_from_seed_zero() {
    for (system, name, first) in BASELINE_TEETH {
        let f = ServerFaults::named(&[name]).unwrap();
        let s = swarm_system(system, 0..first + 1, Faults::default(), f, true).unwrap();
        let failure = s
            .failure
            .unwrap_or_else(|| panic!("{system} {name}: not caught in seeds 0..={first}"));
        assert_eq!(failure.case.seed, first, "{system} {name}");
    }
}

/// Issue 40, item 2: the request channel's outcomes rest on no landing
/// time. With late landings unbounded (`SwarmCase::with_late_landings`:
/// mutations that reach their responder after their landing deadline
/// execute anyway, errors whose requests land up to four margins later,
/// duplicated WRITEs as late), NessieSD, NessieHY and Pilaf pass 400 cases
/// each: a client whose request WRITE failed cancels it at once, and a
/// request that lands after its cancel (or after its process's successor
/// opened the claim word) is never claimed. So does Cell, on the same
/// channel. (A first version gave a process's opening of its claim word a
/// timeout of its own, so an operation could run three timeouts, past the
/// simulator's horizon: NessieHY's seed 4,459 and Pilaf's 9,955 of the
/// CLI's 20,000-case runs, and Cell's seed 20 here, as operations that
/// never finished. The opening now shares the request's timeout.)
#[test]
fn the_request_channels_rest_on_no_landing_time() {
    for system in [
        SystemKind::NessieSd,
        SystemKind::NessieHy,
        SystemKind::Pilaf,
        SystemKind::Cell,
    ] {
        let (mut passed, mut late, mut checked) = (0, 0, 0);
        for seed in 0..400u64 {
            let run = SwarmCase::for_system(seed, system)
                .with_late_landings()
                .run(Faults::default())
                .unwrap();
            late += run.report.chaos.late_landings;
            match &run.verdict {
                Verdict::Pass(n) => {
                    passed += 1;
                    checked += n;
                }
                v => panic!("{system}, seed {seed}: {v:?}"),
            }
        }
        assert_eq!(passed, 400, "{system}");
        // Measured: 6,000 to 11,000 requests landed past
        // their landing deadline (NessieSD, NessieHY, Pilaf, Cell).
        assert!(late > 5_000, "{system}: {late} late landings");
        assert!(checked > 10_000, "{system}: {checked} operations checked");
    }
}

/// The settle the request channel had before (the test-only switch
/// `settle-by-landing-bound`: a client whose request WRITE failed waits
/// out the landing bound, reads its slot and, finding no request of its
/// own, reports "nothing committed" without cancelling) is caught in every
/// request-channel system once late landings are unbounded: the request
/// lands after that report and runs. The first seed that shows each
/// (searching from 0); each passes with the switch off.
#[test]
fn settling_by_the_landing_bound_is_caught_once_landings_are_late() {
    for (system, seed) in [
        (SystemKind::NessieSd, 27),
        (SystemKind::NessieHy, 65),
        (SystemKind::Pilaf, 31),
        (SystemKind::Cell, 37),
    ] {
        let switch = ServerFaults::named(&["settle-by-landing-bound"]).unwrap();
        let s = swarm_with(0..seed + 1, Faults::default(), true, |c| {
            *c = SwarmCase::for_system(c.seed, system).with_late_landings();
            c.server_faults = switch;
        })
        .unwrap();
        let failure = s
            .failure
            .unwrap_or_else(|| panic!("{system}: not caught in seeds 0..={seed}"));
        assert_eq!(failure.case.seed, seed, "{system}");
        assert!(
            matches!(
                failure.verdict,
                Verdict::Fail(CaseFailure::NotLinearizable(_))
            ),
            "{system}, seed {seed}: {:?}",
            failure.verdict
        );
        let case = SwarmCase::for_system(seed, system).with_late_landings();
        let fixed = case.run(Faults::default()).unwrap();
        assert!(
            matches!(fixed.verdict, Verdict::Pass(_)),
            "{system}, seed {seed}: {:?}",
            fixed.verdict
        );
    }
}

/// A WRITE the fabric executes twice (`TransportFault::DuplicateWrite`, a
/// retransmitted copy held in the fabric) reaches what only it can break:
/// a PUT's request lands once more in its slot after the same client's
/// next request, a GET, which no claim word records. Before the swarm drew
/// duplicated WRITEs, a worker took the copy for a new request (its slot's
/// control word differs from the GET it served last) and claimed it from
/// the claim word that already named it as claimed by that worker: the PUT
/// ran twice, over the writes after it. Found by the swarm at once for
/// every server-driven system (NessieSD's seed 9, NessieHY's 25, Pilaf's
/// 125; since issue 40's request channel changed the traces, the first
/// cases that show it are NessieSD's 125, NessieHY's 33 and Pilaf's 33);
/// `rerun-duplicates` reinstates it, and the same cases pass without
/// duplicated WRITEs. Cell's pinned seed is in `cell_swarm.rs`.
#[test]
fn a_duplicated_request_write_runs_its_put_again_only_with_the_switch() {
    let _limit = time_limit(
        "a_duplicated_request_write_runs_its_put_again_only_with_the_switch",
        "125, 33, 33",
        Duration::from_secs(60),
    );
    for (system, seed) in [
        (SystemKind::NessieSd, 125),
        (SystemKind::NessieHy, 33),
        (SystemKind::Pilaf, 33),
    ] {
        let (name, fault) = ("rerun-duplicates", "duplicate-write");
        common::switch_caught_only_with(system, name, seed, fault, "not linearizable");
    }
}

/// Torn transfers (issue 23, item 8) reach what only they can break: a
/// GET's request WRITE that reported an error lands later, word by word,
/// over the client's next request in the same slot (a GET's failure is
/// returned at once, docs/baselines.md), and the slot ends with one
/// request's control word over a mix of both. A server that takes a
/// request without its checksum and control-word checks serves the mix:
/// NessieSD's case 654 and Pilaf's case 330 (1,335 and 625 before issue
/// 40's request channel changed the traces) are not linearizable with
/// `skip-message-checks`, and pass with the checks or without tearing.
#[test]
fn a_slot_two_torn_writes_mixed_is_served_only_without_the_message_checks() {
    let _limit = time_limit(
        "a_slot_two_torn_writes_mixed_is_served_only_without_the_message_checks",
        "654, 330",
        Duration::from_secs(60),
    );
    for (system, seed) in [(SystemKind::NessieSd, 654), (SystemKind::Pilaf, 330)] {
        let name = "skip-message-checks";
        common::switch_caught_only_with(system, name, seed, "torn", "not linearizable");
    }
}

/// A queue pair failing as a whole (issue 23, item 8) is the only fault in
/// these cases: every other fault is off, one client's queue pair to one
/// node fails now and then, flushing what it had outstanding (executed or
/// not) and refusing posts until re-dialled. A client that takes an error
/// after its commit for "nothing committed" and retries
/// (`errors-after-commit-retryable`) is caught from the first seed below;
/// the correct protocol passes the same cases.
#[test]
fn a_failed_queue_pair_alone_catches_an_error_after_commit_taken_for_retryable() {
    let _limit = time_limit(
        "a_failed_queue_pair_alone_catches_an_error_after_commit_taken_for_retryable",
        LINK_FAILURE_SEED,
        Duration::from_secs(60),
    );
    let only_link_failures = |c: &mut SwarmCase| {
        let keep = c.chaos;
        c.chaos = nessie_sim::Chaos {
            link_failure_permille: 800,
            link_down_ns: keep.link_down_ns.max(100_000),
            skew: keep.skew,
            ..nessie_sim::Chaos::NONE
        };
    };
    let f = faults("errors-after-commit-retryable");
    let s = nessie_sim::swarm_with(0..LINK_FAILURE_SEED + 1, f, true, only_link_failures).unwrap();
    let failure = s.failure.expect("caught");
    assert_eq!(failure.case.seed, LINK_FAILURE_SEED);
    assert!(
        failure.case.chaos.kinds() == ["link-failure"]
            || failure.case.chaos.kinds() == ["link-failure", "skew"]
    );
    assert!(failure.report.chaos.link_errors > 0);
    let correct = nessie_sim::swarm_with(
        0..LINK_FAILURE_SEED + 1,
        Faults::default(),
        false,
        only_link_failures,
    )
    .unwrap();
    assert!(correct.ok(), "{:?}", correct.failure.map(|f| f.verdict));
    assert!(correct.link_errors > 100, "{correct:?}");
}

/// The first seed at which only failed queue pairs catch
/// `errors-after-commit-retryable`.
const LINK_FAILURE_SEED: u64 = 7;

/// Rarer catches: NessieHY and Pilaf without their move-epoch check report
/// a key absent that a cuckoo move hid from the scan, first at seeds 385
/// and 3,354 (1,020 and 2,765 before issue 40 changed the request
/// channel's traces); the same cases pass with the check.
#[test]
fn without_the_epoch_check_a_get_is_caught_by_the_seed_that_shows_it() {
    baseline_switch_caught_at(SystemKind::NessieHy, "skip-epoch-check", 385);
    baseline_switch_caught_at(SystemKind::Pilaf, "skip-epoch-check", 3_354);
}

/// Case `seed` of `system` is not linearizable with the baselines' switch
/// `name` on, and passes with it off.
fn baseline_switch_caught_at(system: SystemKind, name: &str, seed: u64) {
    common::switch_caught_at(system, name, seed, "not linearizable");
}

/// A simulator gap the torn transfers exposed: NessieSD's case 551 ends with
/// a server worker re-reading a slot that a late, torn GET request left
/// mixed, a CPU read of its in progress when the final sweep starts. The
/// sweep used to drop that read's completion (and the first event past the
/// horizon with it), so the worker waited for it for good and the lone
/// writer's PUTs timed out; now a CPU access still completes.
#[test]
fn the_final_sweep_lets_a_cpu_access_in_progress_complete() {
    let run = SwarmCase::for_system(551, SystemKind::NessieSd)
        .with_paired_workload_seeds()
        .run(Faults::default())
        .unwrap();
    assert!(
        run.report.sweep_failures.is_empty(),
        "{:?}",
        run.report.sweep_failures
    );
    assert!(matches!(run.verdict, Verdict::Pass(_)), "{:?}", run.verdict);
}

/// A safety bug the swarm found (case 68,643, within A1 and A2; traced and
/// fixed: docs/verification.md, "What the checkers found"). One client; a
/// DELETE's tombstone X (data table entry 4) is unlinked from index entry
/// 1, leaving X's emptied word there, and marked; T later X is reused as a
/// MIGRATE copy Y' whose destination is that very index entry. The copy's
/// install CAS (expecting the emptied word E0) reports an error and lands
/// later; the owner aborts Y' and fences the destination, and its first
/// fence CAS (`[Y'] -> Y'.emptied()`) finds E0, which equals `Y'.emptied()`
/// because index words name an entry, not its incarnation. The fence took it
/// for its seal, restored the source and marked Y', and the install then
/// landed, linking the marked copy (I4, reported by the simulator's watch;
/// case 71,143 is another). Now the fence ends only on a word its own CAS
/// wrote, sealing an emptied word of the copy's own entry with the
/// never-used word.
#[test]
fn a_copy_installed_over_its_own_entrys_emptied_word_is_never_marked_while_linked() {
    for seed in [68_643, 71_143] {
        let run = SwarmCase::from_seed(seed).run(Faults::default()).unwrap();
        assert!(
            matches!(run.verdict, Verdict::Pass(_)),
            "{seed}: {:?}",
            run.verdict
        );
        assert!(run.report.marked_linked.is_empty(), "{seed}");
    }
}

/// Requests that vanish (`TransportFault::Vanish`: never executed, never
/// completed) in Nessie's cases, which do not draw them (so that their
/// pinned catches stay put; its clients post no remote WRITE to duplicate):
/// 1,000 of CI's cases again with 1-10 per mille of the requests vanishing.
/// A round that loses one gives it up at its deadline, not knowing whether
/// it executed. With vanishing requests as the only fault, a client that
/// waits for every completion (`ignore-deadline`) never finishes, and the
/// correct one passes the same cases.
#[test]
fn nessie_survives_requests_that_vanish() {
    let _limit = time_limit(
        "nessie_survives_requests_that_vanish",
        "0..1000",
        Duration::from_secs(120),
    );
    let vanish = |c: &mut SwarmCase| c.chaos.vanish_permille = 1 + (c.seed % 10) as u32;
    let s = swarm_with(0..1_000, Faults::default(), false, vanish).unwrap();
    common::no_failure(&s, "nessie, requests vanishing");
    assert_eq!(s.inconclusive, 0, "{s:?}");
    assert_eq!(s.passed, 1_000);
    // Measured: 4,896 requests vanished, 10,001 unknown outcomes, 123,957
    // operations checked.
    assert!(s.vanished > 3_000, "{s:?}");
    assert!(s.unknown_ops > 5_000, "{s:?}");
    let only_vanish = |c: &mut SwarmCase| {
        c.chaos = Chaos {
            vanish_permille: 5,
            ..Chaos::NONE
        }
    };
    let broken = swarm_with(0..20, faults("ignore-deadline"), true, only_vanish).unwrap();
    let f = broken.failure.expect("ignore-deadline caught");
    assert!(
        matches!(&f.verdict, Verdict::Fail(CaseFailure::Stuck { .. })),
        "{:?}",
        f.verdict
    );
    let correct = swarm_with(0..=f.case.seed, Faults::default(), true, only_vanish).unwrap();
    assert!(correct.failure.is_none(), "{:?}", correct.failure);
    assert!(correct.vanished > 0, "{correct:?}");
}

/// RACE hashing (issue 43), swarmed like every other system. As published
/// (ATC'21 §4.2, as docs/baselines.md reads it), an insert is linked before
/// its duplicate check, and a DELETE removes the first slot holding the key:
/// a key inserted twice at once stays in two slots until the check, and
/// longer when an update lands on the second slot meanwhile (the check's
/// CAS then fails and is not retried). A DELETE that removes the first
/// slot then resurrects the second's older value. So RACE's histories hold
/// only where no insert races another: with every key preloaded and no
/// DELETE (`SwarmCase::without_inserts`, `nessie swarm --system race
/// --without-inserts`), 400 cases of every fault pass here (20,000 from
/// the CLI), and reusing a freed KV block without its hold
/// (`reuse-without-hold`) is caught at seed 2.
#[test]
fn race_survives_every_fault_when_no_insert_races_another_and_early_reuse_is_caught() {
    const RACE_CASES: u64 = 400;
    let race =
        |c: &mut SwarmCase| *c = SwarmCase::for_system(c.seed, SystemKind::Race).without_inserts();
    let s = swarm_with(0..RACE_CASES, Faults::default(), false, race).unwrap();
    common::no_failure(&s, "race");
    assert_eq!(s.passed, RACE_CASES as usize);
    assert_eq!(s.inconclusive, 0, "{s:?}");
    assert!(s.checked_ops > 150_000, "{s:?}");
    assert!(s.crashes > 5_000 && s.torn > 50_000, "{s:?}");
    assert!(s.unknown_ops > 5_000 && s.lost_completions > 1_000, "{s:?}");
    let s = swarm_with(0..3, Faults::default(), true, |c| {
        race(c);
        c.server_faults = ServerFaults::named(&["reuse-without-hold"]).unwrap();
    })
    .unwrap();
    let failure = s
        .failure
        .expect("reuse-without-hold: not caught in seeds 0..=2");
    assert_eq!(failure.case.seed, 2);
}

/// What the swarm found in RACE as published, with no fault at all: case
/// 245 on a hot key (27 clients, six keys, 19 % DELETEs). Two inserts of
/// one key link two slots; an update lands on the second before the first
/// insert's duplicate check, whose CAS then fails; a DELETE removes the
/// first slot, and the second's older value comes back. The same case
/// without inserts racing passes. (With every fault, the first failing
/// case is 484: `nessie swarm --system race` stops there.)
#[test]
fn race_as_published_resurrects_a_duplicate_with_no_fault_at_all() {
    let mut case = SwarmCase::for_system(245, SystemKind::Race).with_paired_workload_seeds();
    case.chaos = Chaos::NONE;
    let run = case.run(Faults::default()).unwrap();
    assert!(
        matches!(run.verdict, Verdict::Fail(CaseFailure::NotLinearizable(_))),
        "{:?}",
        run.verdict
    );
    let quiet = case.without_inserts().run(Faults::default()).unwrap();
    assert!(
        matches!(quiet.verdict, Verdict::Pass(_)),
        "{:?}",
        quiet.verdict
    );
}

/// RACE's PUT cannot say whether the key existed: two inserts of one key
/// that race each both saw it absent, and both answer so, though one of
/// them is the other's overwrite. The swarm checks RACE's histories with
/// PUT answers free (`CheckConfig::put_existence`); checked as every other
/// system's, some of the first 300 cases that pass fail on exactly that
/// (the first was case 53 before RACE's CAS rounds were bounded by their
/// attempts' deadlines, which moved every schedule).
#[test]
fn race_put_answers_are_not_linearizable_and_are_left_unchecked() {
    let caught = (0..300).find(|&seed| {
        let run = SwarmCase::for_system(seed, SystemKind::Race)
            .run(Faults::default())
            .unwrap();
        let strict = nessie_check::check(
            &run.report.history,
            &nessie_check::CheckConfig::steps(1_000_000),
        );
        matches!(run.verdict, Verdict::Pass(_))
            && matches!(strict.verdict, nessie_check::Verdict::NotLinearizable(_))
    });
    assert!(caught.is_some(), "no case of 0..300 needs PUT answers free");
    eprintln!("PUT answers: case {caught:?} passes only with them free");
}

/// RCuckoo (issue 43), swarmed like every other system, in the family
/// without duplicated WRITEs (`SwarmCase::without_duplicate_writes`,
/// `nessie swarm --system rcuckoo --without-duplicate-writes`): rows are
/// written in place under locks, and no lock-then-WRITE design survives a
/// row WRITE replayed after its release (`rcuckoo_as_published_cannot_
/// survive_a_duplicated_row_write`). Every other fault: 400 cases here
/// (60,000 from the CLI), client crashes that strand locks, which waiters
/// take over and repair, and cuckoo moves in the tight tables' rows of two.
#[test]
fn rcuckoo_survives_every_fault_but_duplicated_writes() {
    const CASES: u64 = 400;
    let rc = |c: &mut SwarmCase| {
        *c = SwarmCase::for_system(c.seed, SystemKind::Rcuckoo).without_duplicate_writes();
    };
    let s = swarm_with(0..CASES, Faults::default(), false, rc).unwrap();
    common::no_failure(&s, "rcuckoo");
    assert_eq!(s.passed, CASES as usize);
    assert_eq!(s.inconclusive, 0, "{s:?}");
    // Measured: 68,731 operations checked, 5,430 crashes, 50,010 torn
    // transfers, 2,282 lost completions, 29 cuckoo moves, 619 stranded
    // locks taken over.
    assert!(s.checked_ops > 50_000, "{s:?}");
    assert!(s.crashes > 3_000 && s.torn > 30_000, "{s:?}");
    assert!(s.unknown_ops > 3_000 && s.lost_completions > 1_000, "{s:?}");
    assert!(s.migrations > 10 && s.recoveries > 300, "{s:?}");
}

/// Each of RCuckoo's test-only switches is caught at the first seed of its
/// family that shows it (searched from seed 0 with `nessie swarm --system
/// rcuckoo --without-duplicate-writes [--long-pauses] --server-faults
/// NAME`; too far to search in CI): the case fails with the switch on and
/// passes with it off. `skip-miss-check` is the published GET, whose two
/// READs straddle a cuckoo move of its key and miss it; `unfenced-writes`
/// the published writer, which writes after a pause past the takeover of
/// its locks (`--long-pauses`). `skip-miss-check`'s case is drawn as before
/// 2026-11-30 (seeds 2j and 2j + 1 drew one workload); `unfenced-writes`
/// moved to 1,293 (2,824 before; 858 fails first, as a lone GET's timeout)
/// when each seed drew its own workload and a waiter's next attempt came no
/// later than the takeover it waits for (`Attempt::RetryAt`).
#[test]
fn rcuckoos_published_get_and_unfenced_writer_are_caught_at_their_seeds() {
    let _limit = time_limit(
        "rcuckoos_published_get_and_unfenced_writer_are_caught_at_their_seeds",
        "29907, 1293",
        Duration::from_secs(60),
    );
    for (name, long_pauses, seed, paired) in [
        ("skip-miss-check", false, 29_907, true),
        ("unfenced-writes", true, 1_293, false),
    ] {
        let mut case = SwarmCase::for_system(seed, SystemKind::Rcuckoo).without_duplicate_writes();
        case.paired_workload_seeds = paired;
        if long_pauses {
            case = case.with_long_pauses();
        }
        let correct = case.run(Faults::default()).unwrap();
        assert!(
            matches!(correct.verdict, Verdict::Pass(_)),
            "{name}: {:?}",
            correct.verdict
        );
        case.server_faults = ServerFaults::named(&[name]).unwrap();
        let broken = case.run(Faults::default()).unwrap();
        assert!(
            matches!(
                &broken.verdict,
                Verdict::Fail(CaseFailure::NotLinearizable(_))
            ),
            "{name}: {:?}",
            broken.verdict
        );
    }
}

/// What the swarm found in RCuckoo as published: rows written in place
/// under locks cannot survive a duplicated row WRITE (a retransmission
/// held in the fabric lands after the release behind it and undoes a later
/// writer's row). Case 2 of the default family fails; the same case
/// without duplicated WRITEs passes.
#[test]
fn rcuckoo_as_published_cannot_survive_a_duplicated_row_write() {
    let case = SwarmCase::for_system(2, SystemKind::Rcuckoo).with_paired_workload_seeds();
    assert!(case.chaos.duplicate_write_permille > 0);
    let run = case.run(Faults::default()).unwrap();
    assert!(
        matches!(&run.verdict, Verdict::Fail(CaseFailure::NotLinearizable(_))),
        "{:?}",
        run.verdict
    );
    assert!(run.report.chaos.duplicates_landed > 0);
    let without = case
        .without_duplicate_writes()
        .run(Faults::default())
        .unwrap();
    assert!(
        matches!(without.verdict, Verdict::Pass(_)),
        "{:?}",
        without.verdict
    );
}
