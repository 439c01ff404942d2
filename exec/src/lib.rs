//! The machinery NessieSD, NessieHY, Pilaf (`nessie-baselines`) and Cell
//! (`nessie-cell`) share, knowing none of their tables:
//!
//! - [`machine`]: the sans-IO executor. A system writes its client and
//!   server logic as `async` code over an [`machine::Io`] handle; an
//!   [`machine::Exec`] or [`machine::Machine`] turns it into a machine with
//!   Nessie's shape (work requests out, completions in, time passed in),
//!   and the waits it may ask for are [`machine::Effect`]s: a back-off, a
//!   response in its slot, a request in a worker's slots ([`watch`]), the
//!   node's table lock ([`lock`]), or an effect of the system's own.
//! - [`mailbox`] and [`rpc`]: per-client request and response slots
//!   (checksummed messages, claim words) and the request channel over them
//!   with its honest outcomes (a request that may have run is settled by a
//!   cancel CAS, or reported as of unknown outcome).
//! - [`server`]: server workers (wait for a request, claim it, run it
//!   through the system's [`server::Handler`], answer), and
//!   [`server::ServerPool`], their threads.
//! - [`blocking`]: the threaded driver of any such machine on any
//!   [`Endpoint`](nessie_protocol::Endpoint); the deterministic cluster
//!   simulator (`nessie-sim`) drives the same machines in virtual time.
//! - [`cpu`] and [`bytes`]: a thread's CPU time, little-endian words.
//!
//! Dependencies run one way: the primitives ([`watch`], [`lock`],
//! [`bytes`]) below the executor, the executor below the mailbox, the
//! channel, the drivers and the workers.

#![warn(missing_docs)]

pub mod blocking;
pub mod bytes;
pub mod cpu;
pub mod lock;
pub mod machine;
pub mod mailbox;
pub mod rpc;
pub mod server;
pub mod watch;
