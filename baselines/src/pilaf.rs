//! Pilaf (Mitchell et al., USENIX ATC 2013), the third baseline: a
//! server-side 3-way cuckoo hash table of *self-verifying* entries that
//! clients read by RDMA, with PUT and DELETE served by the server's CPU.
//!
//! Each key has a home node (a hash of the key). The home node's data region
//! holds the request/response slots of PUT and DELETE ([`nessie_exec::mailbox`]),
//! a move-epoch word, the hash table (an array of fixed-size entries) and
//! the extent area holding keys and values ([`layout`] gives the bytes):
//!
//! - A **hash table entry** is a root object with a CRC64 over its other
//!   fields, and holds a self-verifying pointer to an extent: offset, key and
//!   value lengths, and a CRC64 of the extent's key and value (section 3.3,
//!   Figure 5). A reader that overlaps a server write of either sees a
//!   checksum mismatch and retries; it never returns torn data.
//! - A key lives in one of its 3 candidate entries on its home node
//!   (section 3.4). A GET probes them one READ at a time and READs the extent
//!   of a used entry (two READs per probe, as in the paper).
//! - The server ([`PilafTable`]) writes a PUT's key and value into a fresh
//!   extent, then the entry. Cuckoo insertion computes the whole path first
//!   and moves keys from the last affected one backwards, so a key is in one
//!   or two entries during a move, never in none.
//! - The client ([`PilafClient`]) GETs by READ and sends PUT and DELETE to
//!   the home node's workers ([`nessie_exec::rpc`]).
//!
//! Departures from the paper, and why:
//!
//! - **Fixed-size extents** (`round8(max_key + max_value)` bytes,
//!   `dtes_per_node` of them) instead of the paper's mem5 allocator of
//!   variable-size strings: the comparison with Nessie sizes every system
//!   from the same [`nessie_protocol::Config`], and a fixed slot keeps the
//!   server's allocator trivial. No resizing: a full table reports
//!   [`nessie_protocol::Error::TableFull`], a full extent area
//!   [`nessie_protocol::Error::DataTableFull`] (the paper resets connections
//!   and grows the regions; that is outside what the benchmark compares).
//! - **Extent quarantine.** The paper relies on the extent checksum alone to
//!   notice an extent freed and reused under a reader, which is
//!   probabilistic (a reused extent whose new bytes happen to match the old
//!   CRC64 would be returned). Here, as in NessieHY, a freed extent waits
//!   out the expiration period T plus the clock skew before reuse, and every
//!   GET attempt ends within `expiration - deadline_margin` of its start or
//!   is retried: the extent a client READs is exactly the one its entry
//!   pointed to, and the extent CRC remains as the paper's check (and
//!   catches corruption).
//! - **Move epoch.** The paper's back-to-front moves keep a key visible at
//!   every instant, but a client probing candidates in successive READs can
//!   still miss a key that moves from a not-yet-probed entry to an
//!   already-probed one. A GET that finds nothing therefore scans again
//!   between two READs of the home node's move epoch (odd while a move is
//!   under way) and reports the key absent only if the epoch was even and
//!   unchanged, as NessieHY does. Hits cost nothing extra.
//! - **Bounded cuckoo search.** Breadth-first search for a path of at most
//!   `max_migrate_depth` moves instead of kicking until a cycle or limit is
//!   hit: the server never disturbs entries until it knows the path
//!   succeeds, which section 3.4 requires anyway.
//! - Pilaf's server uses one thread; here a node's workers share one lock.
//!
//! Accounting: a GET counts its READs of hash table entries and of the move
//! epoch as index reads and its extent READs as data reads; PUT and DELETE
//! are counted by [`nessie_exec::RpcCall::send`]. Torn reads are counted by
//! [`PilafClient::torn_reads`] (a torn entry is read again within its
//! attempt, so `OpStats::attempts` only counts the retried attempts: extent
//! mismatches, overrun deadlines, moves overlapping a miss). Two test-only
//! fault switches, [`PilafClient::set_skip_checksums`] and
//! [`PilafClient::set_skip_epoch_check`], disable the checks so the tests can
//! show they catch what the checks prevent.

pub mod client;
pub mod layout;
pub mod table;

pub use client::{PilafClient, PilafCore, TornReads};
pub use layout::{EntryRead, HashEntry, PilafLayout};
pub use table::PilafTable;
