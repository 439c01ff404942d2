//! The named worlds: small clusters and workloads, each telling one part of
//! the protocol's story, for the CI run, the `nessie-model` CLI and the tests
//! that show each broken variant is caught.

use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{ClientId, Config, Faults, IteAddr, NodeId};

use crate::history::KvOp;
use crate::world::{ClientSpec, World};

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
        expiration: Duration::from_nanos(1_000),
        clock_skew: Duration::from_nanos(10),
        deadline_margin: Duration::from_nanos(10),
        max_migrate_depth: 3,
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

fn client(node: u16, index: u16, program: Vec<(Vec<u8>, KvOp)>) -> ClientSpec {
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

fn put(k: &[u8], v: &str) -> (Vec<u8>, KvOp) {
    (k.to_vec(), KvOp::Put(v.as_bytes().to_vec()))
}

fn get(k: &[u8]) -> (Vec<u8>, KvOp) {
    (k.to_vec(), KvOp::Get)
}

fn del(k: &[u8]) -> (Vec<u8>, KvOp) {
    (k.to_vec(), KvOp::Delete)
}

fn world(name: &str, cfg: Config, clients: Vec<ClientSpec>) -> World {
    World {
        name: name.to_string(),
        cfg: Arc::new(cfg),
        clients,
        preload: Vec::new(),
        torn: true,
        max_ticks: 0,
        tick: Duration::from_nanos(600),
        max_attempts: 2,
        expect_reclaim: false,
        expect_deep_migration: false,
        late_landing: false,
    }
}

/// Two clients on two nodes write, read and delete one key (N = 2). Values
/// span two words; DTE transfers land word by word.
pub fn two_writers_one_key() -> World {
    let c = cfg(2, 2, 2, 2);
    world(
        "two-writers-one-key",
        c,
        vec![
            client(0, 0, vec![put(b"k", "first-value-aaaa"), get(b"k")]),
            client(1, 0, vec![put(b"k", "second-value-bbb"), del(b"k")]),
        ],
    )
}

/// Three candidates on three nodes of one entry each: a PUT of a new key and a
/// reader-deleter of another key contend for the same three entries.
pub fn three_candidates() -> World {
    let c = cfg(3, 1, 3, 2);
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

/// A PUT must MIGRATE key `m` from entry 0 to entry 1 while another client
/// reads and updates `m`.
pub fn migrate() -> World {
    let c = cfg(1, 4, 2, 3);
    let m = key_where(&c, "m", |k| k == slots(&[0, 1]));
    let g = key_where(&c, "g", |k| k == slots(&[2, 3]));
    let p = key_where(&c, "p", |k| k == slots(&[0, 2]));
    let mut w = world(
        "migrate",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p")]),
            client(0, 1, vec![get(&m), put(&m, "v-m2")]),
        ],
    );
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    w
}

/// A PUT must MIGRATE recursively (depth 2) while another client reads the
/// key at the end of the chain.
pub fn recursive_migrate() -> World {
    let c = cfg(1, 4, 2, 3);
    let a = key_where(&c, "a", |k| k == slots(&[0, 1]));
    let b = key_where(&c, "b", |k| k == slots(&[1, 2]));
    let cc = key_where(&c, "c", |k| k[0] == slots(&[3])[0]);
    let p = key_where(&c, "p", |k| k == slots(&[0, 3]));
    let mut w = world(
        "recursive-migrate",
        c,
        vec![
            client(0, 0, vec![put(&p, "v-p")]),
            client(0, 1, vec![get(&b)]),
        ],
    );
    w.expect_deep_migration = true;
    w.preload = vec![
        (a, Some(b"v-a".to_vec())),
        (b, Some(b"v-b".to_vec())),
        (cc, Some(b"v-c".to_vec())),
    ];
    w
}

/// A client may crash in the middle of its PUT; the clock may pass its
/// deadline; the other client's PUT of the same key must then get through.
pub fn crash_and_reclaim() -> World {
    let c = cfg(2, 2, 2, 2);
    let mut crasher = client(0, 0, vec![put(b"k", "lost?")]);
    crasher.may_crash = true;
    let mut w = world(
        "crash-and-reclaim",
        c,
        vec![crasher, client(1, 0, vec![put(b"k", "after"), get(b"k")])],
    );
    w.max_ticks = 2;
    w.max_attempts = 3;
    w.expect_reclaim = true;
    w.preload = vec![(b"k".to_vec(), Some(b"before".to_vec()))];
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

/// A bigger three-client world than CI can afford: each client does two
/// operations on two keys over three one-entry index tables.
pub fn three_clients_big() -> World {
    let c = cfg(3, 1, 3, 2);
    world(
        "three-clients-big",
        c,
        vec![
            client(0, 0, vec![put(b"a", "a0"), get(b"b")]),
            client(1, 0, vec![put(b"b", "b1"), del(b"a")]),
            client(2, 0, vec![put(b"a", "a2"), get(b"a")]),
        ],
    )
}

/// The worlds `cargo test` explores exhaustively.
pub fn ci_worlds() -> Vec<World> {
    vec![
        two_writers_one_key(),
        three_candidates(),
        migrate(),
        recursive_migrate(),
        crash_and_reclaim(),
        three_clients_two_keys(),
    ]
}

/// Every world by name (the CLI's catalogue), with the broken variants
/// switched off.
pub fn by_name(name: &str) -> Option<World> {
    let f = Faults::default();
    let w = match name {
        "two-writers-one-key" => two_writers_one_key(),
        "three-candidates" => three_candidates(),
        "migrate" => migrate(),
        "recursive-migrate" => recursive_migrate(),
        "crash-and-reclaim" => crash_and_reclaim(),
        "three-clients-two-keys" => three_clients_two_keys(),
        "three-clients-big" => three_clients_big(),
        "get-races-migrate" => get_races_migrate(f),
        "puts-race-a-delete" => puts_race_a_delete(f),
        "migrate-install-fails" => migrate_install_fails(f),
        "late-owner-commit" => late_owner_commit(f),
        "late-migrate-install" => late_migrate_install(f, false),
        "cached-reader" => cached_reader(f),
        _ => return None,
    };
    Some(w)
}

/// Names accepted by [`by_name`].
pub const NAMES: [&str; 13] = [
    "two-writers-one-key",
    "three-candidates",
    "migrate",
    "recursive-migrate",
    "crash-and-reclaim",
    "three-clients-two-keys",
    "three-clients-big",
    "get-races-migrate",
    "puts-race-a-delete",
    "migrate-install-fails",
    "late-owner-commit",
    "late-migrate-install",
    "cached-reader",
];

/// K sits at its second candidate; a GET of K reads the first, a MIGRATE
/// moves K into it, the GET reads the second. Teeth for the GET reverse pass.
pub fn get_races_migrate(faults: Faults) -> World {
    let c = cfg(1, 4, 2, 3);
    let g = key_where(&c, "g", |k| k == slots(&[2, 3]));
    let f = key_where(&c, "f", |k| k == slots(&[0, 3]));
    let k = key_where(&c, "k", |k| k == slots(&[0, 1]));
    let k2 = key_where(&c, "q", |k| k == slots(&[1, 2]));
    let mut reader = client(0, 0, vec![get(&k)]);
    reader.faults = faults;
    let mut w = world(
        "get-races-migrate",
        c,
        vec![reader, client(0, 1, vec![put(&k2, "v-q")])],
    );
    w.torn = false;
    w.preload = vec![
        (g, Some(b"v-g".to_vec())),
        (f.clone(), Some(b"v-f".to_vec())),
        (k, Some(b"v-k".to_vec())),
        (f, None),
    ];
    w
}

/// Two PUTs of one absent key while a third client deletes the key that
/// occupies the first candidate: without verification both commit.
pub fn puts_race_a_delete(faults: Faults) -> World {
    let c = cfg(1, 3, 2, 4);
    let k = key_where(&c, "k", |k| k == slots(&[0, 1]));
    let x = key_where(&c, "x", |k| k == slots(&[0, 2]));
    let mut a = client(0, 0, vec![put(&k, "v-a")]);
    let mut b = client(0, 1, vec![put(&k, "v-b")]);
    a.faults = faults;
    b.faults = faults;
    let mut w = world(
        "puts-race-a-delete",
        c,
        vec![a, b, client(0, 2, vec![del(&x)])],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.preload = vec![(x, Some(b"v-x".to_vec()))];
    w
}

/// A MIGRATE whose install at the destination fails because another PUT took
/// the destination first.
pub fn migrate_install_fails(faults: Faults) -> World {
    let c = cfg(1, 4, 2, 3);
    let m = key_where(&c, "m", |k| k == slots(&[0, 1]));
    let g = key_where(&c, "g", |k| k == slots(&[2, 3]));
    let p = key_where(&c, "p", |k| k == slots(&[0, 2]));
    let q = key_where(&c, "q", |k| k == slots(&[1, 3]));
    let r = key_where(&c, "r", |k| k == slots(&[3, 2]));
    // After its MIGRATE fails, the mover writes another key: its next
    // allocation is the entry the failed MIGRATE released.
    let mut mover = client(0, 0, vec![put(&p, "v-p"), put(&r, "v-r")]);
    mover.faults = faults;
    let mut w = world(
        "migrate-install-fails",
        c,
        vec![mover, client(0, 1, vec![put(&q, "v-q")])],
    );
    w.torn = false;
    w.preload = vec![(m, Some(b"v-m".to_vec())), (g, Some(b"v-g".to_vec()))];
    w
}

/// Every key shares the same three entries. A owner stalls before its
/// commit and overruns its deadline; a MIGRATE reclaims its entry; the owner
/// resumes. `faults` apply to the owner (`ignore_deadline` makes it overrun).
pub fn late_owner_commit(faults: Faults) -> World {
    let c = cfg(1, 3, 3, 3);
    let mut owner = client(0, 0, vec![put(b"k", "v2")]);
    owner.faults = faults;
    let mut w = world(
        "late-owner-commit",
        c,
        vec![owner, client(0, 1, vec![put(b"z", "v-z"), get(b"k")])],
    );
    w.torn = false;
    w.max_ticks = 2;
    w.max_attempts = 1;
    w.preload = vec![
        (b"k".to_vec(), Some(b"v1".to_vec())),
        (b"x".to_vec(), Some(b"v-x".to_vec())),
        (b"y".to_vec(), Some(b"v-y".to_vec())),
    ];
    w
}

/// A MIGRATE owner stalls after locking its source and its deadline passes;
/// the other client reclaims, updates the key, then reads it. `faults` apply
/// to the MIGRATE owner; `late_landing` lets its posted install CAS land after
/// the deadline (violating A2).
pub fn late_migrate_install(faults: Faults, late_landing: bool) -> World {
    let c = cfg(1, 4, 2, 3);
    let x = key_where(&c, "x", |k| k == slots(&[1, 3]));
    let m = key_where(&c, "m", |k| k == slots(&[1, 0]));
    let g = key_where(&c, "g", |k| k == slots(&[2, 3]));
    let p = key_where(&c, "p", |k| k == slots(&[0, 2]));
    let mut mover = client(0, 0, vec![put(&p, "v-p")]);
    mover.faults = faults;
    let mut w = world(
        "late-migrate-install",
        c,
        vec![mover, client(0, 1, vec![put(&m, "v-m2"), get(&m)])],
    );
    w.torn = false;
    w.max_ticks = 2;
    w.max_attempts = 1;
    w.late_landing = late_landing;
    w.preload = vec![
        (x.clone(), Some(b"v-x".to_vec())),
        (m, Some(b"v-m".to_vec())),
        (g, Some(b"v-g".to_vec())),
        (x, None),
    ];
    w
}

/// A writer updates a key three times with a share of two data table entries
/// (so its third PUT must reuse the first entry, once expired) while a client
/// on another node reads it twice through its cache. The clock may pass T.
pub fn cached_reader(faults: Faults) -> World {
    let mut c = cfg(2, 2, 2, 2);
    c.cache_capacity = 4;
    c.dtes_per_node = 4;
    let mut writer = client(0, 0, vec![put(b"k", "a"), put(b"k", "b"), put(b"k", "c")]);
    writer.faults = faults;
    let mut w = world(
        "cached-reader",
        c,
        vec![writer, client(1, 0, vec![get(b"k"), get(b"k")])],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.max_ticks = 2;
    w
}
