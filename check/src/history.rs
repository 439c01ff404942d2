//! Recorded histories of key-value operations.
//!
//! A [`Recorder`] stamps each operation's invocation and response with a
//! shared logical clock (an atomic counter), so that "A returned before B was
//! invoked" in real time implies `A.response < B.invoke`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use nessie_protocol::Response;
use nessie_protocol::{Error, Outcome};

/// An operation on one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KvOp {
    /// Read the key.
    Get,
    /// Store a value.
    Put(Vec<u8>),
    /// Delete the key.
    Delete,
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KvRet {
    /// A GET's answer.
    Get(Option<Vec<u8>>),
    /// A PUT's "key existed before".
    Put(bool),
    /// A DELETE's "key existed before".
    Delete(bool),
    /// The operation failed: a write may or may not have taken effect (at any
    /// time after its invocation); a failed read is ignored.
    Unknown,
    /// The operation failed with an error that guarantees it took no effect
    /// (any error but `Error::OutcomeUnknown` and `Error::TableFull`): the
    /// checker leaves it out, so a write that did take effect after all is
    /// caught.
    NotCommitted,
    /// A PUT refused because the index has no room for a new key
    /// (`Error::TableFull`): nothing was written, and the key was absent when
    /// the refusal was decided. The checker holds it to both (a PUT of a
    /// present key that answers "full" is a violation), where
    /// [`KvRet::NotCommitted`] would excuse it.
    Full,
}

impl KvRet {
    /// What a failed operation promises, by its error: `OutcomeUnknown` may
    /// have taken effect ([`KvRet::Unknown`]), `TableFull` refused an absent
    /// key ([`KvRet::Full`]), every other error committed nothing
    /// ([`KvRet::NotCommitted`]).
    pub fn of_error(e: &Error) -> KvRet {
        match (e, e.outcome()) {
            (_, Outcome::Unknown) => KvRet::Unknown,
            (Error::TableFull { .. }, _) => KvRet::Full,
            _ => KvRet::NotCommitted,
        }
    }

    /// The result of one GET, PUT or DELETE as recorded: a response as what
    /// it answered, an error by [`KvRet::of_error`].
    pub fn of(result: &Result<Response, Error>) -> KvRet {
        match result {
            Ok(Response::Get(v)) => KvRet::Get(v.clone()),
            Ok(Response::Put(e)) => KvRet::Put(*e),
            Ok(Response::Delete(e)) => KvRet::Delete(*e),
            Err(e) => KvRet::of_error(e),
        }
    }
}

/// One completed operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Which client (thread) ran it.
    pub client: usize,
    /// The key.
    pub key: Vec<u8>,
    /// The operation.
    pub op: KvOp,
    /// Its result.
    pub ret: KvRet,
    /// Logical time of invocation.
    pub invoke: u64,
    /// Logical time of response.
    pub response: u64,
}

/// Records a concurrent history.
#[derive(Debug, Default)]
pub struct Recorder {
    clock: AtomicU64,
    events: Mutex<Vec<Event>>,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Recorder {
        Recorder::default()
    }

    /// Runs `f` as operation `op` of `client` on `key` and records it.
    /// `f` returns the result, or `None` when the operation failed.
    pub fn record<T>(
        &self,
        client: usize,
        key: &[u8],
        op: KvOp,
        f: impl FnOnce() -> (Option<KvRet>, T),
    ) -> T {
        let invoke = self.clock.fetch_add(1, Ordering::SeqCst);
        let (ret, out) = f();
        let response = self.clock.fetch_add(1, Ordering::SeqCst);
        let event = Event {
            client,
            key: key.to_vec(),
            op,
            ret: ret.unwrap_or(KvRet::Unknown),
            invoke,
            response,
        };
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
        out
    }

    /// Runs `f` as operation `op` of `client` on `key` and records it: a
    /// success as `ret(&value)`, an error by what it promises
    /// ([`KvRet::of_error`]). Returns `f`'s result.
    pub fn record_result<T>(
        &self,
        client: usize,
        key: &[u8],
        op: KvOp,
        f: impl FnOnce() -> Result<T, Error>,
        ret: impl FnOnce(&T) -> KvRet,
    ) -> Result<T, Error> {
        self.record(client, key, op, || {
            let res = f();
            let r = match &res {
                Ok(v) => ret(v),
                Err(e) => KvRet::of_error(e),
            };
            (Some(r), res)
        })
    }

    /// Adds an event recorded elsewhere.
    pub fn push(&self, event: Event) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }

    /// A logical timestamp (for events pushed by hand).
    pub fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    /// The events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
