//! The machinery NessieSD, NessieHY, Pilaf (`nessie-baselines`) and Cell
//! (`nessie-cell`) share, knowing none of their tables:
//!
//! - The sans-IO executor. A system writes its client and server logic as
//!   `async` code over an [`Io`] handle; a [`Machine`] turns it into a
//!   machine with Nessie's shape (work requests out, completions in, time
//!   passed in), and the waits it may ask for are [`Effect`]s: a back-off, a
//!   response in its slot, a request in a worker's slots ([`SlotWatch`]),
//!   the node's table lock ([`TableLock`]), or an effect of the system's own
//!   ([`Ext`]).
//! - [`mailbox`] and [`rpc`]: per-client request and response slots
//!   (checksummed messages, claim words) and the request channel over them
//!   ([`RpcClient`]) with its honest outcomes (a request that may have run
//!   is settled by a cancel CAS, or reported as of unknown outcome).
//! - Server workers ([`Worker`]: wait for a request, claim it, run it
//!   through the system's [`Handler`], answer), and [`ServerPool`], their
//!   threads.
//! - [`Driver`]: the threaded driver of any such machine on any
//!   [`Endpoint`](nessie_protocol::Endpoint); the deterministic cluster
//!   simulator (`nessie-sim`) drives the same machines in virtual time.
//! - [`thread_cpu_time`], and little-endian words ([`word`], [`round8`]).
//!
//! Everything is at the crate root but the two parts with a format of their
//! own, which stay namespaces: [`mailbox`] (the slots' bytes) and [`rpc`]
//! (the channel's functions). Dependencies run one way: the primitives
//! (slot watches, the table lock, words) below the executor, the executor
//! below the mailbox, the channel, the drivers and the workers.

#![warn(missing_docs)]

mod blocking;
mod bytes;
mod cpu;
mod lock;
mod machine;
pub mod mailbox;
pub mod rpc;
mod server;
mod watch;

pub use blocking::Driver;
pub use bytes::{round8, word};
pub use cpu::thread_cpu_time;
pub use lock::{TableGuard, TableLock};
pub use machine::{
    cas_previous, read_bytes, read_one, written, Effect, Exec, Ext, Io, Machine, Never, OpClass,
    Plain, Resolution, Results, Step,
};
pub use rpc::{RpcCall, RpcClient, RpcFaults};
pub use server::{claim_wait, Handler, ServerPool, Worker, WorkerCounters, CLAIM_WAIT};
pub use watch::SlotWatch;
