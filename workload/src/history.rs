//! Recorded histories: every operation of a run with its result and
//! `CLOCK_MONOTONIC` invocation and response times ([`HistoryRecord`]),
//! one line of text each, so that the histories of several node processes
//! on one machine can be merged and checked for linearizability; and the
//! names reports and histories give errors ([`error_kind`]); a failure is
//! recorded with what its error promises ([`Failed`]), and a record
//! becomes a checker's event by [`HistoryRecord::event`].
//!
//! Each client thread is a sequential process in a history: a thread that
//! keeps several operations in flight (a pipeline) records each of its
//! slots as a client of its own ([`history_client`]).

use nessie_check::{Event, Failure};
use nessie_protocol::{ClientId, Error, Request, Response};

/// How far apart the history ids of one thread's slots are: slot `s` of the
/// thread of client `node.index` is `node x 1000 + index + s x
/// SLOT_STRIDE`.
pub const SLOT_STRIDE: u64 = 1_000_000;

/// The history id of slot `slot` of the client thread whose (first) client
/// is `id`: `node x 1000 + index`, plus `slot x` [`SLOT_STRIDE`] (a blocking
/// client has one slot, 0).
pub fn history_client(id: ClientId, slot: usize) -> u64 {
    u64::from(id.node.0) * 1000 + u64::from(id.index) + slot as u64 * SLOT_STRIDE
}

/// `CLOCK_MONOTONIC` in nanoseconds: the same clock for every process of
/// one machine (recorded histories from several processes are ordered by it).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; CLOCK_MONOTONIC always
    // exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A failed operation as a history keeps it: what its error promises about
/// its effect ([`Failure::of`]) and the error's kind ([`error_kind`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// What the error promises.
    pub failure: Failure,
    /// The error's kind, as reports name it.
    pub kind: String,
}

impl Failed {
    /// The record of a failure: its promise and its kind.
    pub fn of(e: &Error) -> Failed {
        Failed {
            failure: Failure::of(e),
            kind: error_kind(e),
        }
    }
}

/// One recorded operation: which client ([`history_client`]), the
/// operation, its result, and when it was invoked and returned
/// (`CLOCK_MONOTONIC` ns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRecord {
    /// Node x 1000 + client index (+ slot x [`SLOT_STRIDE`]:
    /// [`history_client`]).
    pub client: u64,
    /// The operation.
    pub request: Request,
    /// What it returned, or how it failed.
    pub ret: Result<Response, Failed>,
    /// Invocation time.
    pub invoke: u64,
    /// Response time.
    pub response: u64,
}

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "=".into();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s == "=" {
        return Some(Vec::new());
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

impl HistoryRecord {
    /// One line of text: `client invoke response key op value result`
    /// (bytes in hex, `=` for none, `-` where there is no field; a
    /// failure's result `failed:PROMISE:KIND`, its promise `unknown`,
    /// `nothing` or `full`, its kind with `_` for spaces; a scan's value is
    /// its limit, and `:BOUND` if it has one, its result
    /// `entries:key=value,...`).
    pub fn to_line(&self) -> String {
        let value = match &self.request {
            Request::Get(_) | Request::Delete(_) => "-".to_string(),
            Request::Put(_, v) => hex(v),
            Request::Scan { limit, to, .. } => match to {
                None => limit.to_string(),
                Some(to) => format!("{limit}:{}", hex(to)),
            },
        };
        let ret = match &self.ret {
            Ok(Response::Get(Some(v))) => format!("value:{}", hex(v)),
            Ok(Response::Get(None)) => "missing".into(),
            Ok(Response::Put(e) | Response::Delete(e)) => format!("existed:{e}"),
            Ok(Response::Scan(es)) => format!(
                "entries:{}",
                es.iter()
                    .map(|(k, v)| format!("{}={}", hex(k), hex(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Err(f) => format!("failed:{}:{}", f.failure.word(), f.kind.replace(' ', "_")),
        };
        format!(
            "{} {} {} {} {} {value} {ret}",
            self.client,
            self.invoke,
            self.response,
            hex(self.request.key()),
            self.request.name()
        )
    }

    /// Parses [`HistoryRecord::to_line`]'s output.
    pub fn parse_line(line: &str) -> Option<HistoryRecord> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 7 {
            return None;
        }
        let key = unhex(f[3])?;
        let request = match (f[4], f[5]) {
            ("get", _) => Request::Get(key),
            ("put", v) => Request::Put(key, unhex(v)?),
            ("delete", _) => Request::Delete(key),
            ("scan", n) => {
                let (limit, to) = match n.split_once(':') {
                    None => (n, None),
                    Some((limit, to)) => (limit, Some(unhex(to)?)),
                };
                Request::Scan {
                    from: key,
                    to,
                    limit: limit.parse().ok()?,
                }
            }
            _ => return None,
        };
        let ret = if let Some(v) = f[6].strip_prefix("value:") {
            Ok(Response::Get(Some(unhex(v)?)))
        } else if f[6] == "missing" {
            Ok(Response::Get(None))
        } else if let Some(e) = f[6].strip_prefix("existed:") {
            let e = e.parse().ok()?;
            match request {
                Request::Delete(_) => Ok(Response::Delete(e)),
                _ => Ok(Response::Put(e)),
            }
        } else if let Some(es) = f[6].strip_prefix("entries:") {
            let mut entries = Vec::new();
            for e in es.split(',').filter(|e| !e.is_empty()) {
                let (k, v) = e.split_once('=')?;
                entries.push((unhex(k)?, unhex(v)?));
            }
            Ok(Response::Scan(entries))
        } else {
            let (p, k) = f[6].strip_prefix("failed:")?.split_once(':')?;
            Err(Failed {
                failure: Failure::of_word(p)?,
                kind: k.replace('_', " "),
            })
        };
        Some(HistoryRecord {
            client: f[0].parse().ok()?,
            invoke: f[1].parse().ok()?,
            response: f[2].parse().ok()?,
            request,
            ret,
        })
    }

    /// The record as the checkers' event: its answer, or a failure's
    /// promise (an unknown outcome may have taken effect, a not-committed
    /// one is left out by the checkers, a refusal for want of room is a read
    /// of absence). A scan is for Cell's range-aware checker
    /// (`nessie_check::ordered`); the per-key checker refuses it.
    pub fn event(&self) -> Event {
        Event {
            client: usize::try_from(self.client).unwrap_or(usize::MAX),
            request: self.request.clone(),
            ret: self.ret.clone().map_err(|f| f.failure),
            invoke: self.invoke,
            response: self.response,
        }
    }

    /// Whether it failed with an error that promises it took no effect
    /// (not committed, or refused for want of room).
    pub fn committed_nothing(&self) -> bool {
        matches!(
            &self.ret,
            Err(Failed {
                failure: Failure::NotCommitted | Failure::Full,
                ..
            })
        )
    }
}

/// The kind of an error as reports and histories name it: the variant, and
/// the node for an unreachable one (`unreachable node2`).
pub fn error_kind(e: &Error) -> String {
    match e {
        Error::Unreachable(n, _) => format!("unreachable {n}"),
        Error::OutcomeUnknown(_) => "outcome unknown".into(),
        Error::Timeout => "timeout".into(),
        Error::Conflict => "conflict".into(),
        Error::Fabric(f) => {
            let s = f.to_string();
            let s = s.split(':').take(2).collect::<Vec<_>>().join(":");
            format!("fabric {}", s.chars().take(60).collect::<String>())
        }
        other => {
            let d = format!("{other:?}");
            d.split(['(', ' ', '{'])
                .next()
                .unwrap_or("error")
                .to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_protocol::NodeId;

    #[test]
    fn records_round_trip_as_text() {
        let put = HistoryRecord {
            client: 1001,
            request: Request::Put(b"key-1".to_vec(), b"1:1:7".to_vec()),
            ret: Ok(Response::Put(true)),
            invoke: 5,
            response: 9,
        };
        let get = Request::Get(b"key-1".to_vec());
        let scan = |to: Option<&[u8]>| Request::Scan {
            from: b"key-1".to_vec(),
            to: to.map(<[u8]>::to_vec),
            limit: 3,
        };
        let records = [
            put.clone(),
            HistoryRecord {
                request: get.clone(),
                ret: Ok(Response::Get(Some(Vec::new()))),
                ..put.clone()
            },
            HistoryRecord {
                request: get.clone(),
                ret: Ok(Response::Get(None)),
                ..put.clone()
            },
            HistoryRecord {
                request: scan(None),
                ret: Ok(Response::Scan(vec![
                    (b"key-1".to_vec(), b"v".to_vec()),
                    (b"key-2".to_vec(), Vec::new()),
                ])),
                ..put.clone()
            },
            HistoryRecord {
                request: scan(Some(b"key-9")),
                ret: Ok(Response::Scan(Vec::new())),
                ..put.clone()
            },
            HistoryRecord {
                request: Request::Delete(Vec::new()),
                ret: Ok(Response::Delete(false)),
                ..put.clone()
            },
            HistoryRecord {
                request: Request::Delete(Vec::new()),
                ret: Err(Failed::of(&Error::Unreachable(
                    NodeId(2),
                    nessie_protocol::Needed::Candidate,
                ))),
                ..put.clone()
            },
            HistoryRecord {
                ret: Err(Failed::of(&nessie_protocol::Error::OutcomeUnknown(
                    nessie_protocol::UnknownOutcome::new(
                        nessie_protocol::UnknownStep::Unfinished,
                        None,
                    ),
                ))),
                ..put.clone()
            },
            HistoryRecord {
                ret: Err(Failed::of(&Error::TableFull { depth: 3 })),
                ..put.clone()
            },
        ];
        for r in records {
            assert_eq!(HistoryRecord::parse_line(&r.to_line()), Some(r));
        }
        assert_eq!(HistoryRecord::parse_line("1 2 3 zz get - missing"), None);
        // A failure without its promise is refused, not guessed.
        assert_eq!(
            HistoryRecord::parse_line("1 2 3 6b put 76 failed:timeout"),
            None
        );
        assert_eq!(HistoryRecord::parse_line("1 2 3"), None);
    }

    #[test]
    fn failures_become_what_their_errors_promise() {
        let put = |e: Error| HistoryRecord {
            client: 1001 + 2 * SLOT_STRIDE,
            request: Request::Put(b"k".to_vec(), b"v".to_vec()),
            ret: Err(Failed::of(&e)),
            invoke: 1,
            response: 2,
        };
        let ev = |e: Error| put(e).event().ret;
        assert_eq!(ev(Error::Conflict), Err(Failure::NotCommitted));
        assert_eq!(ev(Error::Timeout), Err(Failure::NotCommitted));
        assert_eq!(
            ev(nessie_protocol::Error::OutcomeUnknown(
                nessie_protocol::UnknownOutcome::new(
                    nessie_protocol::UnknownStep::Unfinished,
                    None
                )
            )),
            Err(Failure::Unknown)
        );
        assert_eq!(ev(Error::TableFull { depth: 3 }), Err(Failure::Full));
        assert!(put(Error::Conflict).committed_nothing());
        assert!(!put(nessie_protocol::Error::OutcomeUnknown(
            nessie_protocol::UnknownOutcome::new(nessie_protocol::UnknownStep::Unfinished, None)
        ))
        .committed_nothing());
        assert_eq!(put(Error::Conflict).event().client, 2_001_001);
        let id = ClientId {
            node: NodeId(2),
            index: 3,
        };
        assert_eq!(history_client(id, 0), 2003);
        assert_eq!(history_client(id, 5), 5_002_003);
    }

    #[test]
    fn errors_are_named_with_the_node_they_concern() {
        assert_eq!(
            error_kind(&Error::Unreachable(
                NodeId(2),
                nessie_protocol::Needed::Candidate
            )),
            "unreachable node2"
        );
        assert_eq!(error_kind(&Error::Timeout), "timeout");
        assert!(monotonic_ns() > 0);
    }
}
