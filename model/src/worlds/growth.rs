//! Worlds of the index's online growth (docs/protocol.md §2.5): a growth
//! under way when the world starts, sweepers that move keys into the new
//! generation and seal the old one, and clients whose view of the index is
//! behind, which must learn of the growth from the seals before they answer.

use nessie_protocol::growth::{sweep_offset, IndexView};
use nessie_protocol::{ClientId, Config, IteAddr, NodeId};

use super::{cfg, client, get, put, world};
use crate::world::{Expect, World};

/// Two nodes of one index entry each in generation 0 (two each in
/// generation 1), one candidate a key, a growth under way.
fn growing_cfg() -> Config {
    Config {
        index_generations: 2,
        ..cfg(2, 1, 1, 2)
    }
}

/// The first key `prefix0`, `prefix1`, ... that `pred` accepts.
fn key_with(prefix: &str, pred: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    (0..100_000u32)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .find(|k| pred(k))
        .unwrap_or_else(|| panic!("no key with prefix {prefix} fits the world"))
}

/// A key whose generation-0 entry is on `node` and whose generation-1
/// entry is not `avoid`'s.
fn key_on(cfg: &Config, prefix: &str, node: u16, avoid: Option<&[u8]>) -> Vec<u8> {
    let h = cfg.hasher();
    let taken: Option<IteAddr> = avoid.map(|k| h.candidates_in(k, 1)[0]);
    key_with(prefix, |k| {
        h.candidates_in(k, 0)[0].node == NodeId(node) && Some(h.candidates_in(k, 1)[0]) != taken
    })
}

/// The first of `ids` (node, index) whose write of `key` takes the
/// cursor's chunk in its step of the sweep while the cursor is at 0 and
/// two chunks are left (writes spread over the chunks from the cursor on:
/// `sweep_offset`), so that the world's writer sweeps the chunk its story
/// needs.
fn writer_at_cursor(ids: &[(u16, u16)], key: &[u8]) -> (u16, u16) {
    *ids.iter()
        .find(|&&(node, index)| {
            sweep_offset(
                ClientId {
                    node: NodeId(node),
                    index,
                },
                0,
                key,
                2,
            ) == 0
        })
        .expect("a client whose step takes the cursor's chunk")
}

/// `w` in the middle of a growth to `directory` (untimed, three attempts an
/// operation), the clients of `views` starting with those views of it.
fn under_way(mut w: World, directory: IndexView, views: Vec<(usize, IndexView)>) -> World {
    w.torn = false;
    w.max_attempts = 3;
    w.directory = directory;
    w.views = views;
    w
}

/// A growth under way: a writer who knows of it inserts a fresh key (its
/// step of the sweep moves a stored key into the new generation and seals
/// the first node's old entry; its insert seals the key's own old entry on
/// the other node first), while a reader whose view is behind reads both
/// keys. The reader must meet a seal before it could answer "not found".
pub fn growth_behind_reader() -> World {
    let c = growing_cfg();
    let a = key_on(&c, "a", 0, None);
    let b = key_on(&c, "b", 1, Some(&a));
    let growing = IndexView {
        oldest: 0,
        newest: 1,
    };
    let writer = writer_at_cursor(&[(0, 0), (0, 1), (1, 0), (1, 1)], &b);
    let reader = if writer == (1, 0) { (1, 1) } else { (1, 0) };
    let clients = vec![
        client(writer.0, writer.1, vec![put(&b, "v-b")]),
        client(reader.0, reader.1, vec![get(&a), get(&b)]),
    ];
    let mut w = under_way(
        world("growth-behind-reader", c, clients),
        growing,
        vec![(0, growing)],
    );
    w.preload = vec![(a, Some(b"v-a".to_vec()))];
    w.expect = vec![Expect::Migration, Expect::GrowthSeal, Expect::StaleView];
    w
}

/// A growth swept to its end while another client, behind, deletes and
/// reads: one node whose two old entries hold both keys, a sweeper whose
/// first write's step moves both into the new generation and seals the
/// old, and whose second write's step ends the growth. The sweeper may
/// crash anywhere: the other client's operations go on through whatever it
/// left, and the index stays whole.
pub fn growth_swept_to_its_end() -> World {
    let c = Config {
        index_generations: 2,
        ..cfg(1, 2, 2, 3)
    };
    let h = c.hasher();
    let a = key_with("a", |_| true);
    let taken = h.candidates_in(&a, 1);
    let b = key_with("b", |k| {
        h.candidates_in(k, 1).iter().all(|m| !taken.contains(m))
    });
    let mut sweeper = client(0, 0, vec![put(&a, "v-a2")]);
    sweeper.may_crash = true;
    let growing = IndexView {
        oldest: 0,
        newest: 1,
    };
    let clients = vec![sweeper, client(0, 1, vec![super::del(&b)])];
    let mut w = under_way(
        world("growth-swept-to-its-end", c, clients),
        growing,
        vec![(0, growing)],
    );
    w.preload = vec![(a, Some(b"v-a".to_vec())), (b, Some(b"v-b".to_vec()))];
    w.expect = vec![
        Expect::Migration,
        Expect::GrowthSeal,
        Expect::StaleView,
        Expect::GrowthEnded,
    ];
    w
}

/// A growth extended once (generations 0 to 2: the new generation 1 filled
/// before generation 0 was swept), on one node of one entry in generation
/// 0: a writer who knows of it inserts b, its step of the sweep moving a
/// from generation 0 straight into generation 2. A reader whose view ends
/// at generation 1 reads a, and another still at generation 0 reads a and
/// b. Before the move may seal a's old entry, a's entry in generation 1
/// must be sealed (`Migrate::seal_between`): the first reader takes
/// generation 0's seals as expected and would otherwise answer "not found"
/// (the swarm's seed 189 of the growth family).
pub fn growth_extended_behind_readers() -> World {
    let c = Config {
        index_generations: 3,
        ..cfg(1, 1, 1, 5)
    };
    let h = c.hasher();
    let a = key_on(&c, "a", 0, None);
    let b = key_with("b", |k| h.candidates_in(k, 2) != h.candidates_in(&a, 2));
    let extended = IndexView {
        oldest: 0,
        newest: 2,
    };
    let behind = IndexView {
        oldest: 0,
        newest: 1,
    };
    // (The last slot, 4, is the preload's.)
    let (_, writer) = writer_at_cursor(&[(0, 0), (0, 1), (0, 2), (0, 3)], &b);
    let mut readers = (0..4).filter(|&i| i != writer);
    let clients = vec![
        client(0, writer, vec![put(&b, "v-b")]),
        client(0, readers.next().unwrap_or(1), vec![get(&a)]),
        client(0, readers.next().unwrap_or(2), vec![get(&b)]),
    ];
    let mut w = under_way(
        world("growth-extended-behind-readers", c, clients),
        extended,
        vec![(0, extended), (1, behind)],
    );
    w.preload = vec![(a, Some(b"v-a".to_vec()))];
    w.expect = vec![Expect::Migration, Expect::GrowthSeal, Expect::StaleView];
    w
}
