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
    }
}

/// Applies `faults` to every client (a protocol variant is everyone's).
pub fn with_faults(mut w: World, faults: Faults) -> World {
    for c in &mut w.clients {
        c.faults = faults;
    }
    w
}

/// Two clients on two nodes write, read and delete one key (N = 2). Values
/// span two words; DTE transfers land word by word, highest word first. The
/// reader on node 0 caches node 1's entries.
pub fn two_writers_one_key() -> World {
    let mut c = cfg(2, 2, 2, 2);
    c.cache_capacity = 4;
    let mut w = world(
        "two-writers-one-key",
        c,
        vec![
            client(0, 0, vec![put(b"k", "first-value-aaaa"), get(b"k")]),
            client(1, 0, vec![put(b"k", "second-value-bbb"), del(b"k")]),
        ],
    );
    w.word_order = WordOrder::Descending;
    w
}

/// Three candidates on three nodes of one entry each: a PUT of a new key and a
/// reader-deleter of another key contend for the same three entries. GETs
/// read header and key first (`multiple_reads`).
pub fn three_candidates() -> World {
    let mut c = cfg(3, 1, 3, 2);
    c.multiple_reads = true;
    let mut w = world(
        "three-candidates",
        c,
        vec![
            client(0, 0, vec![put(b"k", "v-k")]),
            client(1, 0, vec![get(b"k"), del(b"x")]),
        ],
    );
    w.preload = vec![(b"x".to_vec(), Some(b"v-x".to_vec()))];
    w
}

/// The keys of the MIGRATE stories on one node of four index entries (N = 2):
/// m at slot 0 (candidates [0, 1]), g at slot 2 ([2, 3]); a PUT of p (slots 0
/// and 2) must move m to slot 1.
fn migrate_keys(c: &Config) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    (
        key_where(c, "m", |k| k == slots(&[0, 1])),
        key_where(c, "g", |k| k == slots(&[2, 3])),
        key_where(c, "p", |k| k == slots(&[0, 2])),
    )
}

/// A PUT must MIGRATE key `m` from entry 0 to entry 1 while another client
/// reads and updates `m`.
pub fn migrate() -> World {
    let c = cfg(1, 4, 2, 3);
    let (m, g, p) = migrate_keys(&c);
    let mut w = world(
        "migrate",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p")]),
            client(0, 1, vec![get(&m), put(&m, "v-m2")]),
        ],
    );
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    w.expect = vec![Expect::Migration];
    w
}

/// `migrate` without previous versions: GETs that meet the copy back off.
pub fn migrate_without_previous_versions() -> World {
    let mut w = migrate();
    w.name = "migrate-without-previous-versions".into();
    let mut c = (*w.cfg).clone();
    c.previous_versions = false;
    w.cfg = Arc::new(c);
    w
}

/// Three clients: one MIGRATEs m while another updates m and a third reads it.
pub fn migrate_put_get() -> World {
    let c = cfg(1, 4, 2, 4);
    let (m, g, p) = migrate_keys(&c);
    let mut w = world(
        "migrate-put-get",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p")]),
            client(0, 1, vec![put(&m, "v-m2")]),
            client(0, 2, vec![get(&m)]),
        ],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    w.expect = vec![Expect::Migration];
    w
}

/// A DELETE of the key a MIGRATE is moving.
pub fn delete_during_migrate() -> World {
    let c = cfg(1, 4, 2, 3);
    let (m, g, p) = migrate_keys(&c);
    let mut w = world(
        "delete-during-migrate",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p")]),
            client(0, 1, vec![del(&m), get(&m)]),
        ],
    );
    w.torn = false;
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    w.expect = vec![Expect::Migration];
    w
}

/// A PUT must MIGRATE recursively (depth 2) while another client reads the
/// key at the end of the chain.
pub fn recursive_migrate() -> World {
    let mut c = cfg(1, 4, 2, 3);
    c.max_migrate_depth = 3;
    let ([a, b, cc], p) = recursive_keys(&c);
    let mut w = world(
        "recursive-migrate",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p")]),
            client(0, 1, vec![get(&b)]),
        ],
    );
    w.expect = vec![Expect::DeepMigration];
    w.preload = preloaded(&[a, b, cc]);
    w
}

/// The layout of a depth-2 chain: keys a, b, c placed (in that order) in
/// entries 0, 1 and 3, and p, whose candidates 0 and 3 hold a and c; a's
/// alternative holds b, and b's alternative (entry 2) is free.
fn recursive_keys(c: &Config) -> ([Vec<u8>; 3], Vec<u8>) {
    let a = key_where(c, "a", |k| k == slots(&[0, 1]));
    let b = key_where(c, "b", |k| k == slots(&[1, 2]));
    let cc = key_where(c, "c", |k| k[0] == slots(&[3])[0]);
    let p = key_where(c, "p", |k| k == slots(&[0, 3]));
    ([a, b, cc], p)
}

/// A preload storing `v-KEY` under each of `keys`.
fn preloaded(keys: &[Vec<u8>]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    keys.iter()
        .map(|k| {
            let first = String::from_utf8_lossy(&k[..1]).into_owned();
            (k.clone(), Some(format!("v-{first}").into_bytes()))
        })
        .collect()
}

/// `recursive-migrate` with the depth-first MIGRATE search
/// (`MigrateSearch::DepthFirst`: one entry at a time, with backtracking).
pub fn recursive_migrate_depth_first() -> World {
    depth_first(recursive_migrate())
}

/// `w` with the depth-first MIGRATE search.
pub fn depth_first(mut w: World) -> World {
    let mut c = (*w.cfg).clone();
    c.migrate_search = MigrateSearch::DepthFirst;
    w.cfg = Arc::new(c);
    w.name.push_str("-depth-first");
    w
}

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
/// each node, so the key's four candidates span both): the crasher's PUT may
/// stop anywhere and the other client reclaims its entry, whose recovery
/// reads the key's candidates by bucket.
pub fn crash_and_reclaim_in_buckets() -> World {
    let mut w = crash_and_reclaim();
    w.name = "crash-and-reclaim-in-buckets".into();
    let mut c = (*w.cfg).clone();
    c.bucket_slots = 2;
    w.cfg = Arc::new(c);
    w
}

/// Three clients on three nodes, two keys, N = 3, one index entry per node:
/// every PUT of a new key contends for the same three entries.
pub fn three_clients_two_keys() -> World {
    let c = cfg(3, 1, 3, 2);
    world(
        "three-clients-two-keys",
        c,
        vec![
            client(0, 0, vec![put(b"a", "a0")]),
            client(1, 0, vec![put(b"b", "b1"), del(b"a")]),
            client(2, 0, vec![get(b"a")]),
        ],
    )
}

/// Three clients, two operations each, two keys, with a MIGRATE: one node of
/// four entries (N = 2); m must move for p to be inserted.
pub fn three_clients_big() -> World {
    let c = cfg(1, 4, 2, 4);
    let (m, g, p) = migrate_keys(&c);
    let mut w = world(
        "three-clients-big",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p"), get(&m)]),
            client(0, 1, vec![put(&m, "v-m2"), del(&p)]),
            client(0, 2, vec![get(&m), put(&p, "v-p2")]),
        ],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    w.expect = vec![Expect::Migration];
    w
}

/// Three clients, two operations each, two keys, with a MIGRATE, small
/// enough to exhaust: the insert of p moves m while m is updated and both
/// keys are read by all three clients.
pub fn three_clients_migrate() -> World {
    let c = cfg(1, 4, 2, 4);
    let (m, g, p) = migrate_keys(&c);
    let mut w = world(
        "three-clients-migrate",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p"), get(&m)]),
            client(0, 1, vec![put(&m, "v-m2"), get(&p)]),
            client(0, 2, vec![get(&m), get(&p)]),
        ],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    w.expect = vec![Expect::Migration];
    w
}

/// K sits at its second candidate; a GET of K reads the first, a MIGRATE
/// moves K into it, the GET reads the second. Teeth for the GET reverse pass.
pub fn get_races_migrate(faults: Faults) -> World {
    let c = cfg(1, 4, 2, 3);
    let g = key_where(&c, "g", |k| k == slots(&[2, 3]));
    let f = key_where(&c, "f", |k| k == slots(&[0, 3]));
    let k = key_where(&c, "k", |k| k == slots(&[0, 1]));
    let k2 = key_where(&c, "q", |k| k == slots(&[1, 2]));
    let mut w = world(
        "get-races-migrate",
        c,
        vec![
            client(0, 0, vec![get(&k)]),
            client(0, 1, vec![put(&k2, "v-q")]),
        ],
    );
    w.torn = false;
    w.preload = vec![
        (g, Some(b"v-g".to_vec())),
        (f.clone(), Some(b"v-f".to_vec())),
        (k, Some(b"v-k".to_vec())),
        (f, None),
    ];
    with_faults(w, faults)
}

/// `get-races-migrate` in associative buckets (one node, three buckets of
/// B = 2 entries, N = 2): K sits in its second bucket, beside `g1`, and the
/// bucket of its first has room; `q`'s buckets (K's second and a full one)
/// are full and only K can move. A GET of K reads its first bucket (word by
/// word), a MIGRATE moves K into it, the GET reads the second: its reverse
/// pass must see the first bucket changed.
pub fn get_in_a_bucket_races_migrate(faults: Faults) -> World {
    let mut c = cfg(1, 6, 2, 3);
    c.bucket_slots = 2;
    c.dtes_per_node = 24;
    let (b0, b1, b2) = ([0, 1], [2, 3], [4, 5]);
    let order = |a: [u32; 2], b: [u32; 2]| [a, b].concat();
    let f = key_where(&c, "f", |k| k == slots(&order(b0, b2)));
    let z = key_where(&c, "z", |k| k == slots(&order(b0, b2)));
    let k = key_where(&c, "k", |k| k == slots(&order(b0, b1)));
    let g1 = key_where(&c, "g", |k| k == slots(&order(b1, b2)));
    let g2 = key_where(&c, "h", |k| k == slots(&order(b2, b1)));
    let g3 = key_where(&c, "i", |k| k == slots(&order(b2, b1)));
    let q = key_where(&c, "q", |k| k == slots(&order(b1, b2)));
    let mut w = world(
        "get-in-a-bucket-races-migrate",
        c,
        vec![
            client(0, 0, vec![get(&k)]),
            client(0, 1, vec![put(&q, "v-q")]),
        ],
    );
    let v = |s: &str| Some(s.as_bytes().to_vec());
    w.preload = vec![
        (f, v("v-f")),
        (z.clone(), v("v-z")),
        (k, v("v-k")),
        (g1, v("v-g")),
        (g2, v("v-h")),
        (g3, v("v-i")),
        (z, None),
    ];
    w.expect = vec![Expect::Migration];
    with_faults(w, faults)
}

/// Two PUTs of one absent key while a third client deletes the key that
/// occupies the first candidate: without verification both commit.
pub fn puts_race_a_delete(faults: Faults) -> World {
    let c = cfg(1, 3, 2, 4);
    let k = key_where(&c, "k", |k| k == slots(&[0, 1]));
    let x = key_where(&c, "x", |k| k == slots(&[0, 2]));
    puts_race("puts-race-a-delete", c, k, x, faults)
}

/// `puts-race-a-delete` in associative buckets (N = 2 buckets of B = 2
/// entries on one node): both PUTs of `k` see `x` in the first slot of its
/// first bucket, one before and one after `x`'s DELETE unlinks it, so they
/// install in two slots of one bucket; each one's verification must re-read
/// its own bucket too.
pub fn puts_race_in_a_bucket(faults: Faults) -> World {
    let mut c = cfg(1, 4, 2, 4);
    c.bucket_slots = 2;
    let k = key_where(&c, "k", |k| k == slots(&[0, 1, 2, 3]));
    let x = key_where(&c, "x", |k| k == slots(&[0, 1, 2, 3]));
    puts_race("puts-race-in-a-bucket", c, k, x, faults)
}

/// The story of the two worlds above: two PUTs of `k` and a DELETE of the
/// preloaded `x`, one attempt each, transfers landing whole.
fn puts_race(name: &str, c: Config, k: Vec<u8>, x: Vec<u8>, faults: Faults) -> World {
    let mut w = world(
        name,
        c,
        vec![
            client(0, 0, vec![put(&k, "v-a")]),
            client(0, 1, vec![put(&k, "v-b")]),
            client(0, 2, vec![del(&x)]),
        ],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.preload = vec![(x, Some(b"v-x".to_vec()))];
    with_faults(w, faults)
}

/// A MIGRATE whose install at the destination fails because another PUT took
/// the destination first.
pub fn migrate_install_fails(faults: Faults) -> World {
    let c = cfg(1, 4, 2, 3);
    let (m, g, p) = migrate_keys(&c);
    let q = key_where(&c, "q", |k| k == slots(&[1, 3]));
    let r = key_where(&c, "r", |k| k == slots(&[3, 2]));
    // After its MIGRATE fails, the mover writes another key: its next
    // allocation is the entry the failed MIGRATE released.
    let mut w = world(
        "migrate-install-fails",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p"), put(&r, "v-r")]),
            client(0, 1, vec![put(&q, "v-q")]),
        ],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    with_faults(w, faults)
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

/// Hole 2's world ([`cached_world`]): the reader writes k and reads it
/// again, so its PUT's scan extends its cached entry.
pub fn cached_writer(faults: Faults) -> World {
    cached_world("cached-writer", vec![put(b"k", "r"), get(b"k")], faults)
}

/// [`cached_world`] where the reader only reads k again through its cache.
/// Teeth for reuse before expiry.
pub fn cached_reader(faults: Faults) -> World {
    cached_world("cached-reader", vec![get(b"k")], faults)
}

/// Hole 2 on a GET's own paths ([`cached_world`]): the reader reads k
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
    /// `three_clients_with_a_migrate_hold_every_property` (about two minutes).
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
        ci: exhaustive(Group::Untimed, 25_243),
        catches: &[],
    },
    WorldRow {
        name: "three-candidates",
        build: |f| with_faults(three_candidates(), f),
        ci: exhaustive(Group::Untimed, 15_342),
        catches: &[],
    },
    WorldRow {
        name: "migrate",
        build: |f| with_faults(migrate(), f),
        ci: exhaustive(Group::Untimed, 20_942),
        catches: &[],
    },
    WorldRow {
        name: "migrate-without-previous-versions",
        build: |f| with_faults(migrate_without_previous_versions(), f),
        ci: exhaustive(Group::Untimed, 29_276),
        catches: &[],
    },
    WorldRow {
        name: "migrate-put-get",
        build: |f| with_faults(migrate_put_get(), f),
        ci: exhaustive(Group::Untimed, 93_965),
        catches: &[],
    },
    WorldRow {
        name: "delete-during-migrate",
        build: |f| with_faults(delete_during_migrate(), f),
        ci: exhaustive(Group::Untimed, 11_883),
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
        ci: exhaustive(Group::Untimed, 50_494),
        catches: &[catch("skip-put-verify", &["one committed version per key"], "a PUT without its verification commits twice")],
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
        ci: exhaustive(Group::Untimed, 135_564),
        catches: &[catch("verify-other-buckets-only", &["one committed version per key"], "a PUT that verifies only the other buckets commits twice in its own")],
    },
    WorldRow {
        name: "migrate-install-fails",
        build: migrate_install_fails,
        ci: exhaustive(Group::Untimed, 2_151),
        catches: &[catch("skip-migrate-rollback", &["no linked entry is reused"], "a MIGRATE without its rollback reuses a linked entry")],
    },
    WorldRow {
        name: "crash-and-reclaim",
        build: |f| with_faults(crash_and_reclaim(), f),
        ci: exhaustive(Group::Timed, 3_881_913),
        catches: &[],
    },
    WorldRow {
        name: "crash-and-reclaim-in-buckets",
        build: |f| with_faults(crash_and_reclaim_in_buckets(), f),
        ci: exhaustive(Group::Timed, 4_313_045),
        catches: &[],
    },
    WorldRow {
        name: "late-owner-commit",
        build: |f| late_owner_commit(f, f),
        ci: exhaustive(Group::Timed, 586_416),
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
        ci: exhaustive(Group::Timed, 5_928_526),
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
        ci: exhaustive(Group::AcrossNodes, 6_045_967),
        // It catches `unfenced-migrate-install` too, across nodes under
        // skew, but its hunt explores the whole world (37 s): CI hunts that
        // switch in `install-error-then-land`, and `nessie-model check
        // migrate-across-nodes --faults unfenced-migrate-install` shows it.
        catches: &[],
    },
    WorldRow {
        name: "cached-writer",
        build: cached_writer,
        ci: exhaustive(Group::Timed, 4_001_053),
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
        ci: exhaustive(Group::Timed, 198_281),
        catches: &[catch("reuse-before-expiry", &[LINEARIZABLE], "with the tags off (ignore-incarnations), reusing an entry before it expires serves a stale cache hit")],
    },
    WorldRow {
        name: "cached-rereader",
        build: cached_rereader,
        ci: exhaustive(Group::GetCache, 1_119_698),
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
        ci: exhaustive(Group::GetCache, 1_437_254),
        catches: &[catch("get-value-insert-time-from-completion", &[LINEARIZABLE], "with the tags off (ignore-incarnations), hole 2 on a GET's insert after its value read, stamped at completion time, serves a stale value")],
    },
    WorldRow {
        name: "failed-completions",
        build: failed_completions,
        ci: exhaustive(Group::Timed, 3_574_626),
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
        ci: exhaustive(Group::Edges, 35_909),
        catches: &[catch(
            "fence-seal-flips",
            &["no linked entry is marked for recycling"],
            "two fencers of one copy flip its destination back to the never-used word its pending install expects",
        )],
    },
    WorldRow {
        name: "late-completion",
        build: late_completion,
        ci: exhaustive(Group::Edges, 62_752),
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
        ci: exhaustive(Group::ThreeClientsMigrate, 14_855_142),
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
