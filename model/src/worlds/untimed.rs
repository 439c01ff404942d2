//! The untimed worlds: writers, readers, deleters and MIGRATE racing one
//! another without the clock (no deadline passes), in one-entry candidates
//! and in buckets.

use super::*;

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
pub(super) fn migrate_keys(c: &Config) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
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
pub(super) fn recursive_keys(c: &Config) -> ([Vec<u8>; 3], Vec<u8>) {
    let a = key_where(c, "a", |k| k == slots(&[0, 1]));
    let b = key_where(c, "b", |k| k == slots(&[1, 2]));
    let cc = key_where(c, "c", |k| k[0] == slots(&[3])[0]);
    let p = key_where(c, "p", |k| k == slots(&[0, 3]));
    ([a, b, cc], p)
}

/// A preload storing `v-KEY` under each of `keys`.
pub(super) fn preloaded(keys: &[Vec<u8>]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
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

/// Size classes (issue 41): the main class of 56 B entries (8 B keys, 16 B
/// values) and a class of 48 B (16 B of key and value). Client 0 wrote A
/// (10 B: the main class, its entry 0 there) and B (2 B: the small class,
/// its entry 0 there); it updates B with 10 B, across
/// classes, while client 1 reads B, falling back to the small class's
/// previous version while the update is uncommitted. The update marks the
/// small entry it replaced, by CPU store: at its class's offset, not at
/// the main table's entry 0, which A links. Client 1 then writes Q, whose
/// candidates A and B hold: a MIGRATE copies one of them into client 1's
/// share of the copy's class.
pub fn update_across_classes(faults: Faults) -> World {
    let mut c = cfg(1, 4, 2, 2);
    c.size_classes = vec![nessie_protocol::layout::SizeClass {
        entry_bytes: 48,
        dtes_per_node: 8,
    }];
    let a = key_where(&c, "a", |k| k == slots(&[0, 1]));
    let b = key_where(&c, "b", |k| k == slots(&[2, 3]));
    let q = key_where(&c, "q", |k| k == slots(&[0, 2]));
    let mut w = world(
        "update-across-classes",
        c,
        vec![
            client(0, 0, vec![put(&b, "v-b-main-2")]),
            client(0, 1, vec![get(&b), put(&q, "q1")]),
        ],
    );
    w.prelude = vec![(0, put(&a, "v-a-main-1")), (0, put(&b, "b1"))];
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

/// An update that meets a committed MIGRATE copy must verify: `m` is
/// inserted at entry 0 while another client's PUT of `p` (entries 0 and 2,
/// `g` preloaded at 2) then moves it to entry 1, and a third client updates
/// `m`. The updater's scan can read entry 0 before `m` was written there and
/// entry 1 after the copy committed: only its verification sees entry 0
/// still naming the copy, which its commit would leave a second committed
/// version of `m`.
pub fn insert_migrate_update(faults: Faults) -> World {
    let c = cfg(1, 4, 2, 4);
    let (m, g, p) = migrate_keys(&c);
    let mut w = world(
        "insert-migrate-update",
        c,
        vec![
            client(0, 0, vec![put(&m, "v-m")]),
            client(0, 1, vec![put(&p, "v-p")]),
            client(0, 2, vec![put(&m, "v-m2")]),
        ],
    );
    w.torn = false;
    w.max_attempts = 1;
    w.preload = vec![(g, Some(b"v-g".to_vec()))];
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
