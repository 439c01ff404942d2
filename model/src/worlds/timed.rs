//! The worlds where time or the NIC's faults enter: owners that stall past
//! their deadlines, crashes and reclaims, late landings, caches kept across
//! reuses, failed, lost and late completions, and the MIGRATE fence under
//! them.

use super::*;

/// A client may crash in the middle of its PUT; the clock may pass its
/// deadline (node 1's clock a full skew ahead); the other client's PUT of
/// the same key must then get through, in one attempt once it runs alone.
pub fn crash_and_reclaim() -> World {
    let c = cfg(2, 2, 2, 2);
    let mut crasher = client(0, 0, vec![put(b"k", "lost?")]);
    crasher.may_crash = true;
    let mut w = world(
        "crash-and-reclaim",
        c,
        vec![crasher, client(1, 0, vec![put(b"k", "after"), get(b"k")])],
    );
    w.torn = false;
    w.max_ticks = PAST_DEADLINE;
    w.max_delays = 2;
    w.max_attempts = 3;
    w.expect = vec![Expect::Reclaim, Expect::SoloAttempt];
    w.preload = vec![(b"k".to_vec(), Some(b"before".to_vec()))];
    w
}

/// `crash-and-reclaim` in buckets (N = 2 buckets of B = 2, one bucket on
/// each node, so the key's four candidates span both), the key absent at
/// the start: the crasher's insert may stop anywhere (its verification
/// re-reads its own bucket) and the other client reclaims its entry, whose
/// recovery reads the key's candidates by bucket.
pub fn crash_and_reclaim_in_buckets() -> World {
    let mut w = crash_and_reclaim();
    w.name = "crash-and-reclaim-in-buckets".into();
    let mut c = (*w.cfg).clone();
    c.bucket_slots = 2;
    w.cfg = Arc::new(c);
    // The key starts absent: both PUTs are inserts, which verify (an
    // update of a preloaded key would not), re-reading their own bucket.
    w.preload = Vec::new();
    w
}

/// Every key shares the same three entries. An owner stalls before its
/// commit and overruns its deadline; a MIGRATE reclaims its entry; the owner
/// resumes. `owner` faults apply to the owner only (`ignore_deadline` makes
/// it overrun); `all` to everyone.
pub fn late_owner_commit(owner: Faults, all: Faults) -> World {
    let c = cfg(1, 3, 3, 3);
    let mut w = world(
        "late-owner-commit",
        c,
        vec![
            client(0, 0, vec![put(b"k", "v2")]),
            client(0, 1, vec![put(b"z", "v-z"), get(b"k")]),
        ],
    );
    w.torn = false;
    w.max_ticks = PAST_DEADLINE;
    w.max_attempts = 1;
    w.preload = vec![
        (b"k".to_vec(), Some(b"v1".to_vec())),
        (b"x".to_vec(), Some(b"v-x".to_vec())),
        (b"y".to_vec(), Some(b"v-y".to_vec())),
    ];
    let mut w = with_faults(w, all);
    let mut f = owner;
    f.cpu_state_flip |= all.cpu_state_flip;
    w.clients[0].faults = f;
    w
}

/// Hole 1's world: m has candidates [1, 0] and sits at 0 with 1 empty; a
/// MIGRATE owner locks its source and may stall until past its deadline
/// (every clock value is visited, so it may post its install inside the
/// margin or just before); the other client updates m (reclaiming the
/// move) and reads it.
pub fn late_migrate_install(faults: Faults) -> World {
    let c = cfg(1, 4, 2, 3);
    let on_node_0 = |list: &[u32]| -> Vec<(u16, u32)> { list.iter().map(|&s| (0, s)).collect() };
    late_install_world(
        "late-migrate-install",
        c,
        [
            on_node_0(&[1, 3]),
            on_node_0(&[1, 0]),
            on_node_0(&[2, 3]),
            on_node_0(&[0, 2]),
        ],
        [(0, 0), (0, 1)],
        faults,
    )
}

/// The world of `late-migrate-install` under configuration `c`: keys x, m,
/// g and p with the candidates `layout` names (as (node, slot)), x, m and g
/// preloaded and x deleted (so m sits at its second candidate, its first
/// empty, and p's candidates are taken by m and g); the client `clients[0]`
/// PUTs p (moving m), `clients[1]` updates m and reads it.
fn late_install_world(
    name: &str,
    c: Config,
    layout: [Vec<(u16, u32)>; 4],
    clients: [(u16, u16); 2],
    faults: Faults,
) -> World {
    let at = |list: &[(u16, u32)]| -> Vec<IteAddr> {
        list.iter()
            .map(|&(node, slot)| IteAddr {
                node: NodeId(node),
                slot,
            })
            .collect()
    };
    let [x, m, g, p] = ["x", "m", "g", "p"]
        .iter()
        .zip(&layout)
        .map(|(prefix, cands)| key_where(&c, prefix, |k| k == at(cands)))
        .collect::<Vec<_>>()
        .try_into()
        .expect("four keys");
    let [(n0, i0), (n1, i1)] = clients;
    let mut w = world(
        name,
        c,
        vec![
            client(n0, i0, vec![put(&p, "v-p")]),
            client(n1, i1, vec![put(&m, "v-m2"), get(&m)]),
        ],
    );
    w.torn = false;
    w.max_ticks = PAST_DEADLINE + 1;
    w.max_delays = 2;
    w.max_attempts = 1;
    w.expect = vec![Expect::Reclaim];
    w.preload = vec![
        (x.clone(), Some(b"v-x".to_vec())),
        (m, Some(b"v-m".to_vec())),
        (g, Some(b"v-g".to_vec())),
        (x, None),
    ];
    with_faults(w, faults)
}

/// `late-migrate-install` in buckets (one node, three buckets of B = 2, N =
/// 2): p's buckets (b1, b2) are full (m and g in b1, h and i in b2), m's
/// other bucket b0 has room (x was deleted from it), so the PUT of p moves m
/// from b1 into b0 through the MIGRATE frame, whose copy records bucketed
/// candidate positions; the owner may stall past its deadline while the
/// other client updates m (reclaiming the move) and reads it. Random walks
/// in CI; exhausted by the CLI (docs/verification.md).
pub fn late_migrate_install_in_buckets(faults: Faults) -> World {
    let mut c = cfg(1, 6, 2, 3);
    c.bucket_slots = 2;
    c.dtes_per_node = 24;
    let order = |a: u32, b: u32| slots(&[2 * a, 2 * a + 1, 2 * b, 2 * b + 1]);
    let x = key_where(&c, "x", |k| k == order(0, 2));
    let f = key_where(&c, "f", |k| k == order(0, 2));
    let m = key_where(&c, "m", |k| k == order(0, 1));
    let g = key_where(&c, "g", |k| k == order(1, 0));
    let h = key_where(&c, "h", |k| k == order(2, 0));
    let i = key_where(&c, "i", |k| k == order(2, 0));
    let p = key_where(&c, "p", |k| k == order(1, 2));
    let mut w = world(
        "late-migrate-install-in-buckets",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p")]),
            client(0, 1, vec![put(&m, "v-m2"), get(&m)]),
        ],
    );
    let v = |s: &str| Some(s.as_bytes().to_vec());
    w.torn = false;
    w.max_ticks = PAST_DEADLINE + 1;
    w.max_delays = 2;
    w.max_attempts = 1;
    w.expect = vec![Expect::Reclaim, Expect::Migration];
    // x and f fill b0 so that m lands in b1, beside g; h and i fill b2;
    // then x goes, leaving m's first bucket room.
    w.preload = vec![
        (x.clone(), v("v-x")),
        (f, v("v-f")),
        (m, v("v-m")),
        (g, v("v-g")),
        (h, v("v-h")),
        (i, v("v-i")),
        (x, None),
    ];
    with_faults(w, faults)
}

/// `late-migrate-install` across two nodes, with clocks apart: m has
/// candidates [(1, 0), (0, 0)] and sits at (0, 0), its other candidate (1, 0)
/// empty; the MIGRATE owner on node 0 locks m's source and may stall until
/// past its deadline, while the other client, on node 1 (its clock a full
/// skew ahead by default: it sees the owner's deadline pass first), updates
/// m (reclaiming the move) and reads it. The source and the destination of
/// the move lie on different nodes, so the owner's and the reclaimer's time
/// checks read different clocks (`--clock-offsets` sets them further apart).
pub fn migrate_across_nodes(faults: Faults) -> World {
    late_install_world(
        "migrate-across-nodes",
        cfg(2, 2, 2, 2),
        [
            vec![(1, 0), (1, 1)],
            vec![(1, 0), (0, 0)],
            vec![(0, 1), (1, 1)],
            vec![(0, 0), (0, 1)],
        ],
        [(0, 0), (1, 0)],
        faults,
    )
}

/// A writer on node 0 has written k = a with the first of its two data
/// table entries, and a client on node 1 has read (and cached) it (the
/// prelude); then, concurrently, the writer updates k twice (its second
/// update reuses its first entry, once expired) while the reader runs
/// `reader`, and the clock runs past T.
fn cached_world(name: &str, reader: Vec<Request>, faults: Faults) -> World {
    let mut c = cfg(2, 2, 2, 2);
    c.cache_capacity = 4;
    c.dtes_per_node = 4;
    let mut w = world(
        name,
        c,
        vec![
            client(0, 0, vec![put(b"k", "b"), put(b"k", "c")]),
            client(1, 0, reader),
        ],
    );
    w.prelude = vec![(0, put(b"k", "a")), (1, get(b"k"))];
    w.torn = false;
    w.max_attempts = 1;
    w.max_ticks = PAST_DEADLINE;
    w.max_delays = 2;
    w.expect = vec![Expect::CacheHit];
    with_faults(w, faults)
}

/// Hole 2's world (`cached_world`): the reader writes k and reads it
/// again, so its PUT's scan extends its cached entry.
pub fn cached_writer(faults: Faults) -> World {
    cached_world("cached-writer", vec![put(b"k", "r"), get(b"k")], faults)
}

/// `cached_world` where the reader only reads k again through its cache.
/// Teeth for reuse before expiry.
pub fn cached_reader(faults: Faults) -> World {
    cached_world("cached-reader", vec![get(b"k")], faults)
}

/// Hole 2 on a GET's own paths (`cached_world`): the reader reads k
/// twice. Its first GET hits the entry cached in the prelude and extends
/// it, or (processing its index read once that entry has expired) misses,
/// reads the entry again and caches it; its second GET may hit that cache
/// entry after the writer has reused the entry under the same index word.
pub fn cached_rereader(faults: Faults) -> World {
    let mut w = cached_world("cached-rereader", vec![get(b"k"), get(b"k")], faults);
    w.max_ticks = REUSE_TICKS;
    w
}

/// [`cached_rereader`] with `multiple_reads`: a first GET that misses caches
/// the entry after its value read, a round after its header and key.
pub fn cached_rereader_multiple_reads(faults: Faults) -> World {
    let mut w = cached_rereader(faults);
    w.name = "cached-rereader-multiple-reads".into();
    Arc::make_mut(&mut w.cfg).multiple_reads = true;
    w
}

/// Ticks for the GET worlds' stories: the writer may reuse an entry it
/// marked at time 0 once its clock reads T + skew (5 ns); a sixth tick
/// makes the worlds half again as big.
const REUSE_TICKS: u8 = 5;

/// Safety without landing bounds, recycle marks: [`cached_writer`] where one
/// remote WRITE may be duplicated (duplicate-write), its copy landing later.
/// The reader's PUT marks the writer's entry it replaced, remotely; a mark
/// that lands late (a duplicate of a blind WRITE, or with `late_landing`
/// any mark) may land after the writer reused the entry for its next
/// update. Within A2 every mark lands long before any reuse. Marks are CAS
/// (which RC responders never execute twice) unless the switch
/// `blind_recycle_mark` makes them WRITEs again: only then is there a WRITE
/// to duplicate (entries themselves are written by CPU).
pub fn duplicate_mark(faults: Faults) -> World {
    let mut w = cached_world("duplicate-mark", vec![put(b"k", "r"), get(b"k")], faults);
    w.max_faults = 1;
    w.faults = vec![TransportFault::DuplicateWrite];
    w
}

/// Hole 3's world: a DELETE and a PUT of a present key while a reader reads
/// it; one NIC request may fail after executing, fail without executing, or
/// lose its completion (executed or not); the clock may pass the deadline.
pub fn failed_completions(faults: Faults) -> World {
    let c = cfg(2, 2, 2, 2);
    let mut w = world(
        "failed-completions",
        c,
        vec![
            client(0, 0, vec![del(b"k"), put(b"k", "v2")]),
            client(1, 0, vec![get(b"k")]),
        ],
    );
    w.torn = false;
    w.max_faults = 1;
    w.max_attempts = 2;
    w.max_ticks = PAST_DEADLINE + 3;
    w.max_delays = 1;
    w.expect = vec![Expect::SettledCommit, Expect::LostCompletion];
    w.preload = vec![(b"k".to_vec(), Some(b"v1".to_vec()))];
    with_faults(w, faults)
}

/// [`failed_completions`] with two NIC faults in one world (any two of:
/// failed after executing, failed without executing, completion lost), so
/// that a fault can hit the step that recovers from another (the CAS
/// settling a commit whose completion failed, the rollback after a failed
/// install). Too big to exhaust in CI: bounded there.
pub fn two_faults(faults: Faults) -> World {
    let mut w = failed_completions(faults);
    w.name = "two-faults".into();
    w.max_faults = 2;
    w
}

/// Hole 4's world: a MIGRATE owner may crash anywhere (in particular right
/// after its copy commits, leaving both entries naming it); then a PUT of q,
/// whose candidates are the copy's destination and g's entry, must get
/// through, in one attempt once it runs alone. (m's value at the end is
/// checked against memory at quiescence.)
pub fn crashed_mover(faults: Faults) -> World {
    let c = cfg(1, 4, 2, 3);
    let (m, g, p) = migrate_keys(&c);
    let q = key_where(&c, "q", |k| k == slots(&[1, 2]));
    let mut mover = client(0, 0, vec![put(&p, "v-p")]);
    mover.may_crash = true;
    let mut w = world(
        "crashed-mover",
        c,
        vec![mover, client(0, 1, vec![put(&q, "v-q")])],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.max_ticks = PAST_DEADLINE;
    w.max_delays = 1;
    w.expect = vec![Expect::Help, Expect::SoloAttempt];
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    with_faults(w, faults)
}

/// Issue 24, hole 1, reached by a MIGRATE owner alone: any one of its NIC
/// mutations may report an error and land later (error-then-land), within
/// A2. In particular its install at the destination can fail, the owner
/// abort its copy and fence the destination, and the install land between
/// its two fence tries. Another client reads m meanwhile.
pub fn install_error_then_land(faults: Faults) -> World {
    let c = cfg(1, 4, 2, 3);
    let (m, g, p) = migrate_keys(&c);
    let mut w = world(
        "install-error-then-land",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p")]),
            client(0, 1, vec![get(&m)]),
        ],
    );
    w.torn = false;
    w.max_attempts = 2;
    w.max_faults = 1;
    w.faults = vec![TransportFault::ErrorThenLand];
    w.expect = vec![Expect::Migration, Expect::OrphanLanded];
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    with_faults(w, faults)
}

/// Two fencers of one MIGRATE copy: as `install-error-then-land`, but the
/// other client writes m, so it meets the owner's aborted copy at m's
/// source and recovers it (fencing the destination) while the owner
/// fences it too and the owner's install, which reported an error, may
/// still land. The destination was never used: the install expects the
/// never-used word, and no fencer may put that word back (the swarm's case
/// 48,969).
pub fn two_fencers(faults: Faults) -> World {
    let mut w = install_error_then_land(faults);
    w.name = "two-fencers".into();
    // One attempt each: the race is the owner's own abort and the writer's
    // recovery of it, both in their first attempt (two attempts cost 60
    // times the states and reach nothing more of it).
    w.max_attempts = 1;
    let (m, _, _) = migrate_keys(&w.cfg);
    w.clients[1].program = vec![put(&m, "v-m2")];
    w
}

/// Issue 24, hole 2: a reader on node 1 reads k (on node 0) twice while a
/// writer updates it; one of the reader's NIC requests may execute and have
/// its completion held back until after the round was given up
/// (late-completion), when the reader's next GET may be running on the same
/// endpoint. The client core must drop it.
pub fn late_completion(faults: Faults) -> World {
    let c = cfg(2, 2, 2, 2);
    let mut w = world(
        "late-completion",
        c,
        vec![
            client(0, 0, vec![put(b"k", "v2")]),
            client(1, 0, vec![get(b"k"), get(b"k")]),
        ],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.max_faults = 1;
    w.faults = vec![TransportFault::LateCompletion];
    w.max_ticks = PAST_DEADLINE;
    w.max_delays = 1;
    w.expect = vec![Expect::LostCompletion, Expect::LateDelivered];
    w.preload = vec![(b"k".to_vec(), Some(b"v1".to_vec()))];
    with_faults(w, faults)
}

/// Issue 24, hole 3: a lone PUT of p must MIGRATE at depth 2 (the layout of
/// [`recursive_migrate`]: p's candidates hold a and c, a's alternative holds
/// b, b's alternative is free), a chain no other client can take, so
/// `TableFull` is never a right answer. The clock may jump, so the rounds of
/// the first level can look slow: the search prices the second level from
/// them, and a level the attempt cannot afford before its deadline must end
/// in the retryable `Timeout`, never in `TableFull`.
pub fn slow_search(faults: Faults) -> World {
    // Two client slots per node: the preload runs as the last one.
    let mut c = cfg(1, 4, 2, 2);
    c.max_migrate_depth = 3;
    let (keys, p) = recursive_keys(&c);
    let mut w = world("slow-search", c, vec![client(0, 0, vec![put(&p, "v-p")])]);
    w.torn = false;
    w.max_attempts = 2;
    w.max_ticks = 4;
    w.max_delays = 2;
    w.always_room = true;
    w.expect = vec![Expect::DeepMigration];
    w.preload = preloaded(&keys);
    with_faults(w, faults)
}
