//! Server-to-server requests are claimed (issue 25 hole 4): a meganode
//! split whose `CopyMeganode` times out settles the new meganode it
//! allocated, and the request can no longer run after that. The target
//! server is paused while the splitter waits; the splitter gives up (its
//! cancel wins the request's claim word), removes the new meganode from the
//! directory and reopens X; the target then wakes up and works through its
//! request slot. With `CellFaults::unclaimed_server_requests` (the request
//! sent unclaimed, as before) the late copy still runs and leaves a
//! meganode held by the target that the directory does not list: an orphan
//! holding a slot's memory, which a later allocation of that slot would
//! overwrite.

mod common;

use std::time::{Duration, Instant};

use common::*;
use nessie_cell::{CellConfig, CellFaults, RegionId, SearchMode, SplitAbort, SplitOutcome};
use nessie_fabric_sim::Injection;
use nessie_protocol::{NodeId, OpKind, Region, TransportFault};

/// What the late copy left behind.
#[derive(Debug)]
struct Late {
    /// The new meganode the abandoned split allocated.
    y: RegionId,
    /// The directory lists it after the split gave up.
    listed_after_abort: bool,
    /// The target holds it once it has worked through its request slot.
    held_by_target: bool,
    /// The directory lists it then.
    listed_at_end: bool,
}

/// The split was abandoned because its copy to node 1 failed on its way.
fn assert_copy_to_node_1_failed(out: &SplitOutcome) {
    assert!(
        matches!(
            out,
            SplitOutcome::Aborted(SplitAbort::CopyFailed {
                target: NodeId(1),
                ..
            })
        ),
        "{out:?}"
    );
}

fn copy_that_times_out(unclaimed_server_requests: bool) -> Late {
    let cfg = CellConfig {
        nodes: 3,
        server_nodes: 3,
        server_workers: 1,
        rpc_timeout: Duration::from_millis(300),
        server_rpc_timeout: Duration::from_millis(300),
        faults: CellFaults {
            unclaimed_server_requests,
            ..CellFaults::default()
        },
        ..manual()
    };
    let d = start(cfg);
    load(&d, 120);
    // Node 1 gets a meganode of its own (the upper half of region 1), so
    // that a search served by its one worker can follow the late copy.
    let SplitOutcome::Split { new: upper, .. } =
        d.split_onto(RegionId(1), Some(NodeId(1))).unwrap()
    else {
        panic!("the first split failed")
    };
    assert!(d.wait_idle(Duration::from_secs(10)));
    assert_eq!(d.holder(upper), Some(NodeId(1)));
    let in_upper = (0..120)
        .rev()
        .map(key)
        .next()
        .expect("a key in the upper half");
    // The split of region 1 (now the lower half) onto the paused node 1.
    d.pause_server(NodeId(1));
    let out = d.split_onto(RegionId(1), Some(NodeId(1))).unwrap();
    assert_copy_to_node_1_failed(&out);
    let m = d.directory().snapshot();
    let y = RegionId(m.next_id - 1);
    let listed_after_abort = m.get(y).is_some();
    // Node 1 wakes up and takes the request from node 0's maintenance slot
    // (its served word changes), and its one worker serves a search after
    // it: by then the copy, if it runs at all, is over.
    let layout = d.config().layout();
    // Node 0's maintenance slot: the first after node 0's clients' slots.
    let g = u32::from(d.config().clients_per_node);
    let served_at = layout.mailbox.served_offset(g);
    let before = d
        .fabric()
        .read_word(NodeId(1), Region::Data, served_at)
        .unwrap();
    d.resume_server(NodeId(1));
    let t = Instant::now();
    while d
        .fabric()
        .read_word(NodeId(1), Region::Data, served_at)
        .unwrap()
        == before
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "node 1 never took the request"
        );
        std::thread::yield_now();
    }
    let mut c = client(&d, 2, 0, SearchMode::ServerOnly);
    assert_eq!(c.get(&in_upper).unwrap(), Some(value_of(119)));
    // The tree itself is whole either way.
    for i in 0..120 {
        assert_eq!(c.get(&key(i)).unwrap(), Some(value_of(i)), "key {i}");
    }
    Late {
        y,
        listed_after_abort,
        held_by_target: d.server(NodeId(1)).unwrap().hosted(y).is_some(),
        listed_at_end: d.directory().snapshot().get(y).is_some(),
    }
}

#[test]
fn a_timed_out_copy_never_runs_and_leaves_no_orphan() {
    let _limit = time_limit(
        "a_timed_out_copy_never_runs_and_leaves_no_orphan",
        "-",
        Duration::from_secs(120),
    );
    let late = copy_that_times_out(false);
    assert_ne!(late.y, RegionId(1));
    assert!(!late.listed_after_abort, "{late:?}");
    assert!(!late.held_by_target, "{late:?}");
    assert!(!late.listed_at_end, "{late:?}");
}

#[test]
fn teeth_an_unclaimed_copy_runs_late_and_leaves_an_orphan() {
    let _limit = time_limit(
        "teeth_an_unclaimed_copy_runs_late_and_leaves_an_orphan",
        "-",
        Duration::from_secs(120),
    );
    let late = copy_that_times_out(true);
    assert_ne!(late.y, RegionId(1));
    assert!(!late.listed_after_abort, "{late:?}");
    assert!(
        late.held_by_target && !late.listed_at_end,
        "the late copy should leave an unlisted meganode on node 1: {late:?}"
    );
}

/// The target's answer to a `CopyMeganode` is lost (its response WRITE to
/// the splitter's node fails unexecuted), so the splitter cannot know
/// whether the copy ran: with the request claimed, its cancel fails (the
/// target claimed it), the outcome is unknown, and the splitter retires
/// the new meganode where it is held (`DropRegion`). Returns why the split
/// gave up, whether the target still holds Y and whether the directory
/// lists it.
fn copy_whose_answer_is_lost(unclaimed_server_requests: bool) -> (String, bool, bool) {
    let cfg = CellConfig {
        nodes: 3,
        server_nodes: 3,
        rpc_timeout: Duration::from_millis(300),
        server_rpc_timeout: Duration::from_millis(300),
        faults: CellFaults {
            unclaimed_server_requests,
            ..CellFaults::default()
        },
        ..manual()
    };
    let d = start(cfg);
    load(&d, 60);
    // The only NIC WRITE to node 0 while region 1 splits onto node 1 is
    // node 1's response to the copy.
    d.fabric()
        .inject(
            NodeId(0),
            Injection::next(TransportFault::FailBeforeExecuting, 1).only(OpKind::Write),
        )
        .unwrap();
    let out = d.split_onto(RegionId(1), Some(NodeId(1))).unwrap();
    assert_copy_to_node_1_failed(&out);
    assert!(
        !d.fabric().injection_pending(NodeId(0)),
        "the answer was lost"
    );
    let y = RegionId(d.directory().snapshot().next_id - 1);
    assert_ne!(y, RegionId(1));
    let mut c = client(&d, 2, 0, SearchMode::ClientOnly);
    for i in 0..60 {
        assert_eq!(c.get(&key(i)).unwrap(), Some(value_of(i)), "key {i}");
    }
    (
        format!("{out:?}"),
        d.server(NodeId(1)).unwrap().hosted(y).is_some(),
        d.directory().snapshot().get(y).is_some(),
    )
}

#[test]
fn a_copy_with_an_unknown_outcome_is_retired_where_it_is_held() {
    let _limit = time_limit(
        "a_copy_with_an_unknown_outcome_is_retired_where_it_is_held",
        "-",
        Duration::from_secs(120),
    );
    let (why, held, listed) = copy_whose_answer_is_lost(false);
    assert!(why.contains("OutcomeUnknown"), "{why}");
    assert_eq!((held, listed), (false, false), "{why}");
}

#[test]
fn teeth_an_unclaimed_copy_whose_answer_is_lost_stays_held() {
    let _limit = time_limit(
        "teeth_an_unclaimed_copy_whose_answer_is_lost_stays_held",
        "-",
        Duration::from_secs(120),
    );
    let (why, held, listed) = copy_whose_answer_is_lost(true);
    assert!(why.contains("Timeout"), "{why}");
    assert_eq!((held, listed), (true, false), "{why}");
}
