//! Recorded histories of key-value operations: each [`Event`] is one
//! operation of the shared vocabulary ([`Request`], range scans included)
//! and what it returned ([`Ret`]: its [`Response`], or how it failed,
//! [`Failure`]).
//!
//! A [`Recorder`] stamps each operation's invocation and response with a
//! shared logical clock (an atomic counter), so that "A returned before B was
//! invoked" in real time implies `A.response < B.invoke`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use nessie_protocol::{Error, KvClient, KvRequest, Outcome, Request, Response};

/// What a failed operation promises about its effect, by its error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// A write may or may not have taken effect (at any time after its
    /// invocation); a failed read is ignored.
    Unknown,
    /// The error guarantees the operation took no effect (any error but
    /// `Error::OutcomeUnknown` and `Error::TableFull`): the checkers leave it
    /// out, so a write that did take effect after all is caught.
    NotCommitted,
    /// A PUT refused because the index has no room for a new key
    /// (`Error::TableFull`): nothing was written, and the key was absent when
    /// the refusal was decided. The per-key checker holds it to both (a PUT
    /// of a present key that answers "full" is a violation), where
    /// [`Failure::NotCommitted`] would excuse it.
    Full,
}

impl Failure {
    /// What a failed operation promises, by its error: `OutcomeUnknown` may
    /// have taken effect ([`Failure::Unknown`]), `TableFull` refused an
    /// absent key ([`Failure::Full`]), every other error committed nothing
    /// ([`Failure::NotCommitted`]).
    pub fn of(e: &Error) -> Failure {
        match (e, e.outcome()) {
            (_, Outcome::Unknown) => Failure::Unknown,
            (Error::TableFull { .. } | Error::IndexAtLimit { .. }, _) => Failure::Full,
            _ => Failure::NotCommitted,
        }
    }

    /// Its word in a history line and a report: `unknown`, `nothing` or
    /// `full`.
    pub fn word(self) -> &'static str {
        match self {
            Failure::Unknown => "unknown",
            Failure::NotCommitted => "nothing",
            Failure::Full => "full",
        }
    }

    /// The failure a word of [`Failure::word`] names.
    pub fn of_word(w: &str) -> Option<Failure> {
        match w {
            "unknown" => Some(Failure::Unknown),
            "nothing" => Some(Failure::NotCommitted),
            "full" => Some(Failure::Full),
            _ => None,
        }
    }
}

/// What an operation of a history returned: its response, or how it
/// failed.
pub type Ret = Result<Response, Failure>;

/// An operation's result as a history records it: a response as what it
/// answered, an error by what it promises ([`Failure::of`]).
pub fn ret_of(result: &Result<Response, Error>) -> Ret {
    match result {
        Ok(r) => Ok(r.clone()),
        Err(e) => Err(Failure::of(e)),
    }
}

/// One completed operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Which client (thread, or pipeline slot) ran it.
    pub client: usize,
    /// The operation.
    pub request: Request,
    /// Its result.
    pub ret: Ret,
    /// Logical time of invocation.
    pub invoke: u64,
    /// Logical time of response.
    pub response: u64,
}

impl Event {
    /// The key it is about (a scan's first key).
    pub fn key(&self) -> &[u8] {
        self.request.key()
    }
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

    /// Runs `f` as `request` of `client` and records it. `f` returns the
    /// result (`None`: it failed, outcome unknown) and a value handed back
    /// to the caller.
    pub fn record<T>(
        &self,
        client: usize,
        request: Request,
        f: impl FnOnce() -> (Option<Ret>, T),
    ) -> T {
        let invoke = self.clock.fetch_add(1, Ordering::SeqCst);
        let (ret, out) = f();
        let response = self.clock.fetch_add(1, Ordering::SeqCst);
        self.push(Event {
            client,
            request,
            ret: ret.unwrap_or(Err(Failure::Unknown)),
            invoke,
            response,
        });
        out
    }

    /// Runs `f` as `request` of `client` and records it: a success as
    /// `response(&value)`, an error by what it promises ([`Failure::of`]).
    /// Returns `f`'s result.
    pub fn record_result<T>(
        &self,
        client: usize,
        request: Request,
        f: impl FnOnce() -> Result<T, Error>,
        response: impl FnOnce(&T) -> Response,
    ) -> Result<T, Error> {
        self.record(client, request, || {
            let res = f();
            let r = match &res {
                Ok(v) => Ok(response(v)),
                Err(e) => Err(Failure::of(e)),
            };
            (Some(r), res)
        })
    }

    /// Runs `request` on `c` as client `client` ([`KvClient::call`]) and
    /// records it ([`Recorder::record_result`]).
    pub fn call<C: KvClient + ?Sized>(
        &self,
        client: usize,
        c: &mut C,
        request: KvRequest<'_>,
    ) -> Result<Response, Error> {
        self.record_result(client, request.owned(), || c.call(request), Clone::clone)
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
