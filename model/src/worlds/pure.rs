//! Clients without storage (docs/protocol.md §2.4): a client that hosts no
//! data table writes its entries through memory windows, and its WRITEs may
//! land twice or late. Each world has one such client on node 1 (its share
//! of two entries there) and a reader of node 0.

use super::*;

/// Two nodes of two index entries (N = 2), one client of each node and one
/// client without storage on each, two data entries per share.
fn pure_cfg() -> Config {
    let mut c = cfg(2, 2, 2, 1);
    c.pure_clients_per_node = 1;
    c.dtes_per_node = 4;
    c
}

/// The client without storage of node 1.
fn pure_client(program: Vec<Request>) -> ClientSpec {
    client(1, 1, program)
}

/// A client without storage PUTs a key while a reader of node 0 reads it
/// twice; one of its WRITEs is duplicated, and the copy lands whenever the
/// model likes, after the commit included. The entry's state and recycle
/// words are set by CAS, never duplicated, so the copy rewrites bytes that
/// already hold what it carries.
pub fn pure_duplicated_writes(faults: Faults) -> World {
    let k = b"k";
    let mut w = world(
        "pure-duplicated-writes",
        pure_cfg(),
        vec![
            pure_client(vec![put(k, "first-value-aaaa")]),
            client(0, 0, vec![get(k), get(k)]),
        ],
    );
    w.max_faults = 1;
    w.faults = vec![TransportFault::DuplicateWrite];
    w.expect = vec![Expect::OrphanLanded];
    with_faults(w, faults)
}

/// A client without storage updates a key twice; a request of its first
/// write's data round reports an error and lands later, at any time (no
/// landing bound). Its share of two entries runs out in the first
/// generation (one entry set aside by the failed round, one linked), so the
/// second PUT asks node 1's agent for the next generation, which binds its
/// windows again; the entry set aside is reused then, and the late request,
/// carrying the old key, can no longer land on it. A reader of node 0 reads
/// the key.
pub fn pure_generations(faults: Faults) -> World {
    let k = b"k";
    let mut w = world(
        "pure-generations",
        pure_cfg(),
        vec![
            pure_client(vec![put(k, "a-value"), put(k, "b-value")]),
            client(0, 0, vec![get(k)]),
        ],
    );
    w.torn = false;
    w.max_attempts = 3;
    w.max_faults = 1;
    w.faults = vec![TransportFault::ErrorThenLand];
    w.late_landing = true;
    w.expect = vec![Expect::OrphanLanded, Expect::NewGeneration];
    with_faults(w, faults)
}

/// A client without storage updates a key twice while its node's agent
/// may take its share back: the lease term is 3 ns, and the clock may jump
/// past it before the client's heartbeat (in its writes' data rounds, or
/// in an operation's preamble once overdue) lands,
/// so the agent may bind its windows again with its first write's requests
/// anywhere on their way, and its later writes end with `LeaseLost`. What
/// it wrote before stays; nothing it posted under the old key lands after;
/// its install and commit, not windowed, finish its own operation. A
/// client of node 0 reads the key.
pub fn pure_lease_taken_back(faults: Faults) -> World {
    let k = b"k";
    let mut c = pure_cfg();
    c.lease_term = Duration::from_nanos(3);
    let mut w = world(
        "pure-lease-taken-back",
        c,
        vec![
            pure_client(vec![put(k, "a-value"), put(k, "b-value")]),
            client(0, 0, vec![get(k)]),
        ],
    );
    w.torn = false;
    w.max_attempts = 2;
    w.max_ticks = 4;
    w.max_delays = 1;
    w.expect = vec![Expect::LeaseTakenBack];
    with_faults(w, faults)
}

/// Two processes of one client without storage, one after the other: the
/// first holds the share and updates a key, and may stall past the lease
/// term (3 ns) with its requests anywhere on their way; the second takes
/// the share once the agent took it back (before that it is refused,
/// `ClientIdInUse`), sweeps it and writes the key. The first's requests
/// under its revoked keys land nowhere. Identity by lease: two clients can
/// never act as one.
pub fn pure_two_holders(faults: Faults) -> World {
    let k = b"k";
    let mut c = pure_cfg();
    c.lease_term = Duration::from_nanos(3);
    let mut w = world(
        "pure-two-holders",
        c,
        vec![
            pure_client(vec![put(k, "a-value")]),
            pure_client(vec![put(k, "b-value")]),
        ],
    );
    w.torn = false;
    w.max_attempts = 2;
    w.max_ticks = 4;
    w.max_delays = 1;
    w.late_landing = true;
    w.expect = vec![Expect::NewGeneration];
    with_faults(w, faults)
}

/// Two processes of one client without storage, the first giving its share
/// back (`release_share`) the moment its PUT returns, the second taking it
/// then with no lease term between (the term is an hour: only the release
/// frees it), asking for a newer generation and writing the key in it,
/// every request landing whenever the model likes. Every property holds
/// and the second writes in generation 2. The release's hazard, a late
/// WRITE of the first landing on an entry the second reused, needs the
/// first's entry reclaimable, which a world this small never reaches:
/// `take-without-new-generation` is caught by
/// `tests/tests/pure_clients.rs` instead (`CAUGHT_ELSEWHERE`).
pub fn pure_released_share(faults: Faults) -> World {
    let k = b"k";
    let mut c = pure_cfg();
    c.lease_term = Duration::from_secs(3600);
    let mut first = pure_client(vec![put(k, "a-value")]);
    first.release = true;
    let mut w = world(
        "pure-released-share",
        c,
        vec![first, pure_client(vec![put(k, "b-value")])],
    );
    w.torn = false;
    w.max_attempts = 2;
    w.max_ticks = 4;
    w.max_delays = 1;
    w.late_landing = true;
    w.expect = vec![Expect::ShareReleased, Expect::NewGeneration];
    with_faults(w, faults)
}
