//! RCuckoo (Grant and Snoeren, "Cuckoo for Clients: Disaggregated Cuckoo
//! Hashing", USENIX ATC 2025), the second of today's one-sided stores beside
//! the papers' baselines: a lock-based cuckoo hash table, fully
//! client-driven (no server takes part in any request).
//!
//! - **Layout** ([`layout`], §3.1): rows of 8 entries, each row closed by a
//!   version and a CRC64 over the row, read lock-free and verified by the
//!   reader; entries hold the key and either the value (inlined, up to
//!   [`layout::INLINE_MAX`] bytes) or a pointer to an extent in the
//!   writer's own region. A lock table, one lock per 16 rows.
//! - **Dependent hashing** (§3.3): a key's second row lies a short, random,
//!   exponentially distributed distance past its first (locality f = 2.3),
//!   so one or two neighbouring locks cover both.
//! - **Operations** ([`client`], §3.2): a GET reads both rows in one round
//!   (one round trip with an inlined value); an update takes the locks and
//!   reads the rows in one chain (the READs fenced behind the lock CASes),
//!   then writes the row and releases the locks in one ordered chain (two
//!   round trips); an insert searches the locked rows breadth-first for a
//!   cuckoo path and writes it one row at a time from its free end.
//!
//! Departures, and whom they favour, are in `docs/baselines.md`
//! ("RCuckoo").

pub mod client;
pub mod layout;

pub use client::{RcuckooClient, RcuckooCore, RcuckooCounters};
pub use layout::RcuckooLayout;
