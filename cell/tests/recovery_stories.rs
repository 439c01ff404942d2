//! Recovery stories (issue 25): a meganode split X -> Y cut short at every
//! durable point (before it starts, after each log append: the split's own
//! records and every node write of the copy's end, the relink and the
//! invalidation; after each request it waits for; and the same through the
//! parent link that follows), with the servers holding X and Y failing in
//! each of these ways:
//!
//! - `XLost`: X's server fails, Y is on a survivor;
//! - `SameServer`: X and Y on one server (a local copy), which fails;
//! - `BothLost`: X and Y on two servers, which fail together;
//! - `YLost`: Y's server fails, X's survives and its split goes on after
//!   the recovery (the splitter and the recovery must agree on Y);
//! - `Several`: X is not the root meganode, and its server also holds
//!   region 1 (the root word) and fails with all of them;
//! - `SeveralBothLost`: as `Several`, and Y's server, which also holds the
//!   root meganode, fails with it.
//!
//! Each story is an exact interleaving: the split runs one step at a time on
//! the test's thread, the failure happens between two steps, recovery runs,
//! and then (for `YLost`) the split goes on. Each ends by checking that
//! every acknowledged write is readable (fresh clients in both modes, a
//! client whose caches are from before the split, a scan over everything),
//! that every key range accepts writes again, that every meganode the
//! directory lists is reachable and has a parent entry (no orphan, no
//! missing link), that every write gate is open and that no server job
//! failed.

mod common;

use std::time::Duration;

use common::*;
use nessie_cell::machine::Effect;
use nessie_cell::server::alloc::GateMode;
use nessie_cell::server::Job;
use nessie_cell::LogRecord;
use nessie_cell::{CellConfig, CellFaults, RegionId, SearchMode, SplitOutcome};
use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::NodeId;

/// Which servers hold X and Y, and which fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Story {
    XLost,
    SameServer,
    BothLost,
    YLost,
    Several,
    SeveralBothLost,
}

impl Story {
    /// Keys loaded before the split.
    fn keys(self) -> u64 {
        match self {
            Story::Several | Story::SeveralBothLost => 120,
            _ => 60,
        }
    }

    /// Where Y goes.
    fn onto(self) -> NodeId {
        match self {
            Story::SameServer => NodeId(0),
            Story::Several => NodeId(2),
            _ => NodeId(1),
        }
    }

    /// The servers that fail.
    fn fails(self) -> Vec<NodeId> {
        match self {
            Story::XLost | Story::SameServer | Story::Several => vec![NodeId(0)],
            Story::BothLost | Story::SeveralBothLost => vec![NodeId(0), NodeId(1)],
            Story::YLost => vec![NodeId(1)],
        }
    }
}

fn config(dir: &std::path::Path, faults: CellFaults) -> CellConfig {
    CellConfig {
        nodes: 3,
        server_nodes: 3,
        log_dir: Some(dir.to_path_buf()),
        // A range left frozen shows as a timeout, not as a 20 s wait; a
        // request to a dead server is settled within 2 s.
        op_timeout: Duration::from_secs(5),
        rpc_timeout: Duration::from_secs(2),
        server_rpc_timeout: Duration::from_secs(2),
        faults,
        ..manual()
    }
}

/// A deployment loaded for `story`; the meganode X to split.
fn prepare(story: Story, faults: CellFaults) -> (Cell, RegionId, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let d = start(config(dir.path(), faults));
    load(&d, story.keys());
    let x = match story {
        Story::Several | Story::SeveralBothLost => {
            // Region 1 splits onto its own server (node 0); the new root
            // meganode goes to the least loaded server (node 1). X is the
            // upper half, on node 0 with region 1.
            let out = d.split_onto(RegionId(1), Some(NodeId(0))).unwrap();
            let SplitOutcome::Split { new, .. } = out else {
                panic!("{out:?}")
            };
            assert!(d.wait_idle(Duration::from_secs(10)));
            assert_eq!(d.holder(new), Some(NodeId(0)));
            let root = audit(&d).root.unwrap();
            assert_eq!(d.holder(root), Some(NodeId(1)), "the root meganode");
            new
        }
        _ => RegionId(1),
    };
    (d, x, dir)
}

/// A durable point of a story: the `n`-th log append or request awaited,
/// and what it was.
#[derive(Clone, Debug)]
struct Cut {
    /// Which machine: the split (0) or the parent link after it (1).
    phase: usize,
    /// Its ordinal among the durable steps of that machine (0: before any).
    n: usize,
    what: String,
}

fn durable(did: &Did) -> Option<String> {
    match did {
        Did::Effect(Effect::Log { region, records }) => {
            let first = records.first().map_or(String::new(), |r| match r {
                LogRecord::Write { offset, .. } => format!("Write@{offset}"),
                other => format!("{other:?}"),
            });
            Some(format!("log {region}: {first}"))
        }
        Did::Wait(w) => Some(format!("wait {}", w.chars().take(40).collect::<String>())),
        _ => None,
    }
}

/// The split of X (and its parent link) stepped to the end, to list the
/// cut points.
fn census(story: Story) -> Vec<Cut> {
    let (d, x, _dir) = prepare(story, CellFaults::default());
    let mut cuts = vec![Cut {
        phase: 0,
        n: 0,
        what: "before the split".into(),
    }];
    let mut s = SplitStepper::onto(&d, x, Some(story.onto()));
    let mut n = 0;
    while let Some(did) = s.step() {
        if let Some(what) = durable(&did) {
            n += 1;
            cuts.push(Cut { phase: 0, n, what });
        }
    }
    let Some(Ok(SplitOutcome::Split { split, new })) = s.finished.clone() else {
        panic!("{story:?}: the split failed: {:?}", s.finished)
    };
    let node = d.holder(x).unwrap();
    let mut l = Stepper::job(
        &d,
        node,
        Job::LinkParent {
            below: x,
            key: split,
            child: new,
        },
    );
    let mut n = 0;
    while let Some(did) = l.step() {
        if let Some(what) = durable(&did) {
            n += 1;
            cuts.push(Cut { phase: 1, n, what });
        }
    }
    l.finished.clone().unwrap().unwrap();
    cuts
}

/// Story `story` cut at `cut`; panics with what went wrong.
fn tell(story: Story, cut: &Cut, faults: CellFaults) {
    let at = format!(
        "{story:?} cut after {} #{} ({})",
        cut.phase, cut.n, cut.what
    );
    let (mut d, x, _dir) = prepare(story, faults);
    let keys = story.keys();
    // A client whose node cache and range cache are from before the split.
    let mut warm = client(&d, 2, 1, SearchMode::ClientOnly);
    for i in 0..keys {
        assert_eq!(warm.get(&key(i)).unwrap(), Some(value_of(i)), "{at}: warm");
    }
    let holder = d.holder(x).unwrap();
    let mut s = SplitStepper::onto(&d, x, Some(story.onto()));
    let mut link: Option<Stepper<()>> = None;
    let mut n = 0;
    if cut.phase == 0 && cut.n > 0 {
        while let Some(did) = s.step() {
            if durable(&did).is_some() {
                n += 1;
                if n == cut.n {
                    break;
                }
            }
        }
    }
    if cut.phase == 1 {
        s.finish();
        let Some(Ok(SplitOutcome::Split { split, new })) = s.finished.clone() else {
            panic!("{at}: the split failed")
        };
        let mut l = Stepper::job(
            &d,
            holder,
            Job::LinkParent {
                below: x,
                key: split,
                child: new,
            },
        );
        while let Some(did) = l.step() {
            if durable(&did).is_some() {
                n += 1;
                if n == cut.n {
                    break;
                }
            }
        }
        link = Some(l);
    }
    let fails = story.fails();
    for &f in &fails {
        d.fail_node(f);
        d.fabric().set_node_down(f, true).unwrap();
    }
    let report = d
        .recover_nodes(&fails, |_, _| {})
        .unwrap_or_else(|e| panic!("{at}: recovery failed: {e}"));
    if story == Story::YLost {
        // X's server lives on: its split (and parent link) goes on.
        assert!(d.wait_idle(Duration::from_secs(10)), "{at}");
        if cut.phase == 0 {
            while s.step().is_some() {}
            match s.finished.clone() {
                Some(Ok(SplitOutcome::Split { split, new })) => {
                    let mut l = Stepper::job(
                        &d,
                        holder,
                        Job::LinkParent {
                            below: x,
                            key: split,
                            child: new,
                        },
                    );
                    while l.step().is_some() {}
                    link = Some(l);
                }
                Some(Ok(SplitOutcome::Aborted(_))) => {}
                other => panic!("{at}: the split ended {other:?}"),
            }
        } else if let Some(l) = link.as_mut() {
            while l.step().is_some() {}
        }
        if let Some(l) = &link {
            if let Some(Err(e)) = &l.finished {
                panic!("{at}: the parent link failed: {e}");
            }
        }
    }
    assert!(d.wait_idle(Duration::from_secs(10)), "{at}: not idle");
    check_story(&d, &mut warm, keys, &at, &format!("{report:?}"));
}

/// The end of every story (see the module documentation).
fn check_story(
    d: &Cell,
    warm: &mut nessie_cell::CellClient<SimEndpoint>,
    keys: u64,
    at: &str,
    report: &str,
) {
    let reader = |mode| {
        let mut c = client(d, 2, 0, mode);
        for i in 0..keys {
            assert_eq!(
                c.get(&key(i))
                    .unwrap_or_else(|e| panic!("{at}: get {i} ({mode:?}): {e}")),
                Some(value_of(i)),
                "{at}: get {i} ({mode:?}); recovery: {report}"
            );
        }
        let mut all = Vec::new();
        let mut from = key(0);
        loop {
            let page = c
                .scan(&from, None, 50)
                .unwrap_or_else(|e| panic!("{at}: scan ({mode:?}): {e}"));
            let Some((last, _)) = page.last() else { break };
            from = last.clone();
            from.push(0);
            let n = page.len();
            all.extend(page);
            if n < 50 {
                break;
            }
        }
        assert_eq!(
            all,
            (0..keys).map(|i| (key(i), value_of(i))).collect::<Vec<_>>(),
            "{at}: scan ({mode:?}); recovery: {report}"
        );
    };
    reader(SearchMode::ServerOnly);
    reader(SearchMode::ClientOnly);
    for i in 0..keys {
        assert_eq!(
            warm.get(&key(i))
                .unwrap_or_else(|e| panic!("{at}: warm get {i}: {e}")),
            Some(value_of(i)),
            "{at}: warm get {i}; recovery: {report}"
        );
    }
    // Every key range takes writes: below every key, every third key, and
    // above every key.
    let mut w = client(d, 2, 0, SearchMode::Selector);
    let mut written: Vec<(Vec<u8>, Vec<u8>)> = vec![(b"a".to_vec(), b"low".to_vec())];
    written.extend(
        (0..keys)
            .step_by(3)
            .map(|i| (key(i), format!("w{i}").into_bytes())),
    );
    written.push((b"z".to_vec(), b"high".to_vec()));
    for (k, v) in &written {
        w.put(k, v)
            .unwrap_or_else(|e| panic!("{at}: put {k:?}: {e}; recovery: {report}"));
    }
    for (k, v) in &written {
        assert_eq!(
            warm.get(k).unwrap(),
            Some(v.clone()),
            "{at}: read back {k:?}"
        );
    }
    // No orphan, no missing parent link, every gate open, no job failed.
    assert!(d.wait_idle(Duration::from_secs(10)), "{at}: not idle");
    let a = audit(d);
    let listed: std::collections::BTreeSet<RegionId> =
        d.directory().snapshot().regions.keys().copied().collect();
    assert_eq!(
        a.reached, listed,
        "{at}: meganodes reached vs listed; recovery: {report}"
    );
    for r in &a.reached {
        assert!(
            Some(*r) == a.root || a.parented.contains(r),
            "{at}: {r} has no parent entry ({a:?}); recovery: {report}"
        );
    }
    for n in 0..3 {
        if let Some(st) = d.server(NodeId(n)) {
            for h in st.hosted_regions() {
                assert!(
                    listed.contains(&h.id),
                    "{at}: node {n} hosts unlisted {}",
                    h.id
                );
                let mode = h.gate.lock().unwrap().mode.clone();
                assert_eq!(mode, GateMode::Open, "{at}: {} on node {n}", h.id);
            }
        }
    }
    let errors = d.server_errors();
    assert!(errors.is_empty(), "{at}: server errors {errors:?}");
}

/// Every story of `story` (every cut); the cuts that failed, with why.
fn tell_all(story: Story, faults: CellFaults) -> Vec<String> {
    let cuts = census(story);
    for c in &cuts {
        eprintln!("{story:?} cut {}#{}: {}", c.phase, c.n, c.what);
    }
    let mut failed = Vec::new();
    for cut in &cuts {
        let t = std::time::Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tell(story, cut, faults)));
        if let Err(e) = r {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(why);
        }
        eprintln!(
            "{story:?} cut {}#{} took {:?}",
            cut.phase,
            cut.n,
            t.elapsed()
        );
    }
    eprintln!("{story:?}: {} cuts, {} failed", cuts.len(), failed.len());
    failed
}

fn all_pass(story: Story) {
    let failed = tell_all(story, CellFaults::default());
    assert!(failed.is_empty(), "{story:?}: {failed:#?}");
}

#[test]
fn x_lost_at_every_cut() {
    let _limit = time_limit("x_lost_at_every_cut", "-", Duration::from_secs(600));
    all_pass(Story::XLost);
}

#[test]
fn x_and_y_on_one_server_lost_at_every_cut() {
    let _limit = time_limit(
        "x_and_y_on_one_server_lost_at_every_cut",
        "-",
        Duration::from_secs(600),
    );
    all_pass(Story::SameServer);
}

#[test]
fn x_and_y_on_two_servers_both_lost_at_every_cut() {
    let _limit = time_limit(
        "x_and_y_on_two_servers_both_lost_at_every_cut",
        "-",
        Duration::from_secs(600),
    );
    all_pass(Story::BothLost);
}

#[test]
fn y_lost_while_the_splitter_lives_at_every_cut() {
    let _limit = time_limit(
        "y_lost_while_the_splitter_lives_at_every_cut",
        "-",
        Duration::from_secs(600),
    );
    all_pass(Story::YLost);
}

#[test]
fn several_regions_lost_at_every_cut() {
    let _limit = time_limit(
        "several_regions_lost_at_every_cut",
        "-",
        Duration::from_secs(600),
    );
    all_pass(Story::Several);
}

#[test]
fn several_regions_on_two_servers_lost_at_every_cut() {
    let _limit = time_limit(
        "several_regions_on_two_servers_lost_at_every_cut",
        "-",
        Duration::from_secs(600),
    );
    all_pass(Story::SeveralBothLost);
}

/// With `faults` on, some story of `story` must fail; returns how many.
fn some_fail(story: Story, faults: CellFaults) -> usize {
    let failed = tell_all(story, faults);
    assert!(
        !failed.is_empty(),
        "{story:?} with {faults:?}: every story passed"
    );
    for f in &failed {
        eprintln!("caught: {}", f.lines().next().unwrap_or(""));
    }
    failed.len()
}

#[test]
fn teeth_undoing_a_copied_split_leaves_right_links_to_a_dropped_meganode() {
    let _limit = time_limit(
        "teeth_undoing_a_copied_split_leaves_right_links_to_a_dropped_meganode",
        "-",
        Duration::from_secs(600),
    );
    some_fail(
        Story::XLost,
        CellFaults {
            recovery_undoes_copied_splits: true,
            ..CellFaults::default()
        },
    );
}

#[test]
fn teeth_ignoring_the_live_splitter_loses_the_upper_half() {
    let _limit = time_limit(
        "teeth_ignoring_the_live_splitter_loses_the_upper_half",
        "-",
        Duration::from_secs(600),
    );
    some_fail(
        Story::YLost,
        CellFaults {
            recovery_ignores_live_splitter: true,
            ..CellFaults::default()
        },
    );
}

#[test]
fn teeth_keeping_orphans_leaves_unreachable_meganodes_listed() {
    let _limit = time_limit(
        "teeth_keeping_orphans_leaves_unreachable_meganodes_listed",
        "-",
        Duration::from_secs(600),
    );
    some_fail(
        Story::XLost,
        CellFaults {
            recovery_keeps_orphans: true,
            ..CellFaults::default()
        },
    );
}

#[test]
fn teeth_forgetting_finished_splits_leaves_a_range_frozen() {
    let _limit = time_limit(
        "teeth_forgetting_finished_splits_leaves_a_range_frozen",
        "-",
        Duration::from_secs(600),
    );
    some_fail(
        Story::XLost,
        CellFaults {
            recovery_forgets_finished_splits: true,
            ..CellFaults::default()
        },
    );
}
