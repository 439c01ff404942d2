//! RACE hashing (Zuo, Sun, Yang, Zhang and Hua, "One-sided RDMA-Conscious
//! Extendible Hashing for Disaggregated Memory", USENIX ATC 2021), the first
//! of today's one-sided stores beside the papers' baselines: the index under
//! FUSEE and SWARM-KV. Fully client-driven, like Nessie: no server takes
//! part in any request.
//!
//! - **Layout** ([`layout`], §3.1, Figures 3-4): per node a subtable of
//!   bucket groups, each two main buckets sharing an overflow bucket, each
//!   bucket a header and 7 slots of 8 bytes (fingerprint, block length,
//!   pointer); a key hashes to a home node's subtable and, by two hash
//!   functions, to two **combined buckets** (a main bucket and its overflow
//!   bucket, 128 contiguous bytes read with one READ).
//! - **KV blocks** written out of place, never changed in place, with a
//!   checksum (§3.3: a reader verifies what it read); each client writes
//!   into its share of its node's blocks ([`alloc`]).
//! - **Operations** ([`client`], §4): lock-free, one CAS per slot change; a
//!   GET is two round trips (buckets, then blocks); an insert re-reads the
//!   buckets and removes duplicates a concurrent insert made.
//!
//! Departures, and whom they favour (`docs/baselines.md` has the table):
//!
//! - **No resizing** (§3.4's client-driven extendible hashing is not
//!   built): the subtable per node is sized like Nessie's index (as many
//!   slots as `index_slots_per_node`) and a key whose four buckets are full
//!   answers [`nessie_protocol::Error::TableFull`]. A run that never fills
//!   the table pays nothing for resizing, which favours RACE; a growing one
//!   fails where RACE would split.
//! - **Block reclamation** is not in the paper: here the unlinker marks a
//!   block freed and its owner reuses it after T plus the skew, as Pilaf's
//!   extents ([`alloc`]). Blocks are of one size (the largest key and value,
//!   in 64-byte units), read with the length the slot names.
//! - **Placement**: clients run on the nodes, so a client writes its blocks
//!   into its own node's memory by CPU (RACE's clients WRITE them to a
//!   memory node in the same round as the bucket READs: the round trips are
//!   the same), and reads blocks on its own node by CPU.
//! - **The directory** (global depth, each bucket's local depth and suffix)
//!   has nothing to say without resizing: bucket headers are left zero, but
//!   read, so every READ moves RACE's bytes.

pub mod alloc;
pub mod client;
pub mod layout;

pub use client::{RaceClient, RaceCore, RaceCounters};
pub use layout::RaceLayout;
