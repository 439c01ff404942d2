//! Recorded histories: every operation of a run with its result and
//! `CLOCK_MONOTONIC` invocation and response times ([`HistoryRecord`]),
//! one line of text each, so that the histories of several node processes
//! on one machine can be merged and checked for linearizability; and the
//! names reports and histories give errors ([`error_kind`]); a failure is
//! recorded with what its error promises ([`KvRet::of_error`]), and a record
//! becomes a checker's event by [`HistoryRecord::event`].
//!
//! Each client thread is a sequential process in a history: a thread that
//! keeps several operations in flight (a pipeline) records each of its
//! slots as a client of its own ([`history_client`]).

use nessie_check::{Event, KvOp, KvRet};
use nessie_protocol::{ClientId, Error};

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

/// What a recorded operation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryOp {
    /// GET.
    Get,
    /// PUT of a value.
    Put(Vec<u8>),
    /// DELETE.
    Delete,
    /// A range scan of at most this many entries from the key on (to the
    /// end of the key space).
    Scan(u32),
}

/// What a recorded operation returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryRet {
    /// A GET's value (`None`: not found).
    Get(Option<Vec<u8>>),
    /// A PUT's or DELETE's "the key existed".
    Existed(bool),
    /// A scan's entries, in key order.
    Entries(Vec<(Vec<u8>, Vec<u8>)>),
    /// It failed, with the error's kind ([`error_kind`]) and what the error
    /// promises about its effect ([`KvRet::of_error`]: `Unknown`,
    /// `NotCommitted` or `Full`).
    Failed(String, KvRet),
}

impl HistoryRet {
    /// The record of a failure: its kind and its promise.
    pub fn failed(e: &Error) -> HistoryRet {
        HistoryRet::Failed(error_kind(e), KvRet::of_error(e))
    }
}

/// A failure's promise in a history line.
fn promise_word(p: &KvRet) -> &'static str {
    match p {
        KvRet::Unknown => "unknown",
        KvRet::Full => "full",
        _ => "nothing",
    }
}

fn promise_of_word(w: &str) -> Option<KvRet> {
    match w {
        "unknown" => Some(KvRet::Unknown),
        "full" => Some(KvRet::Full),
        "nothing" => Some(KvRet::NotCommitted),
        _ => None,
    }
}

/// One recorded operation: which client ([`history_client`]), the key, the
/// operation, its result, and when it was invoked and returned
/// (`CLOCK_MONOTONIC` ns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRecord {
    /// Node x 1000 + client index (+ slot x [`SLOT_STRIDE`]:
    /// [`history_client`]).
    pub client: u64,
    /// The key.
    pub key: Vec<u8>,
    /// The operation.
    pub op: HistoryOp,
    /// Its result.
    pub ret: HistoryRet,
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
    /// (bytes in hex, `-` where there is none; a failure's result
    /// `failed:PROMISE:KIND`, its promise `unknown`, `nothing` or `full`,
    /// its kind with `_` for spaces; a scan's value is its limit, its
    /// result `entries:key=value,...`).
    pub fn to_line(&self) -> String {
        let (op, value) = match &self.op {
            HistoryOp::Get => ("get", "-".to_string()),
            HistoryOp::Put(v) => ("put", hex(v)),
            HistoryOp::Delete => ("delete", "-".to_string()),
            HistoryOp::Scan(n) => ("scan", n.to_string()),
        };
        let ret = match &self.ret {
            HistoryRet::Get(Some(v)) => format!("value:{}", hex(v)),
            HistoryRet::Get(None) => "missing".into(),
            HistoryRet::Existed(e) => format!("existed:{e}"),
            HistoryRet::Entries(es) => format!(
                "entries:{}",
                es.iter()
                    .map(|(k, v)| format!("{}={}", hex(k), hex(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            HistoryRet::Failed(k, p) => {
                format!("failed:{}:{}", promise_word(p), k.replace(' ', "_"))
            }
        };
        format!(
            "{} {} {} {} {op} {value} {ret}",
            self.client,
            self.invoke,
            self.response,
            hex(&self.key)
        )
    }

    /// Parses [`HistoryRecord::to_line`]'s output.
    pub fn parse_line(line: &str) -> Option<HistoryRecord> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 7 {
            return None;
        }
        let op = match (f[4], f[5]) {
            ("get", _) => HistoryOp::Get,
            ("put", v) => HistoryOp::Put(unhex(v)?),
            ("delete", _) => HistoryOp::Delete,
            ("scan", n) => HistoryOp::Scan(n.parse().ok()?),
            _ => return None,
        };
        let ret = if let Some(v) = f[6].strip_prefix("value:") {
            HistoryRet::Get(Some(unhex(v)?))
        } else if f[6] == "missing" {
            HistoryRet::Get(None)
        } else if let Some(e) = f[6].strip_prefix("existed:") {
            HistoryRet::Existed(e.parse().ok()?)
        } else if let Some(es) = f[6].strip_prefix("entries:") {
            let mut entries = Vec::new();
            for e in es.split(',').filter(|e| !e.is_empty()) {
                let (k, v) = e.split_once('=')?;
                entries.push((unhex(k)?, unhex(v)?));
            }
            HistoryRet::Entries(entries)
        } else {
            let (p, k) = f[6].strip_prefix("failed:")?.split_once(':')?;
            HistoryRet::Failed(k.replace('_', " "), promise_of_word(p)?)
        };
        Some(HistoryRecord {
            client: f[0].parse().ok()?,
            invoke: f[1].parse().ok()?,
            response: f[2].parse().ok()?,
            key: unhex(f[3])?,
            op,
            ret,
        })
    }
}

impl HistoryRecord {
    /// The record as the per-key checker's event: its answer, or a
    /// failure's promise (an unknown outcome may have taken effect, a
    /// not-committed one is left out by the checker, a refusal for want of
    /// room is a read of absence). `None` for a scan, which the per-key
    /// checker cannot take (Cell's range-aware checker can:
    /// `crate::node::cell::cell_event`).
    pub fn event(&self) -> Option<Event> {
        let op = match &self.op {
            HistoryOp::Get => KvOp::Get,
            HistoryOp::Put(v) => KvOp::Put(v.clone()),
            HistoryOp::Delete => KvOp::Delete,
            HistoryOp::Scan(_) => return None,
        };
        let ret = match (&self.op, &self.ret) {
            (_, HistoryRet::Failed(_, promise)) => promise.clone(),
            (_, HistoryRet::Get(v)) => KvRet::Get(v.clone()),
            (HistoryOp::Put(_), HistoryRet::Existed(e)) => KvRet::Put(*e),
            (_, HistoryRet::Existed(e)) => KvRet::Delete(*e),
            (_, HistoryRet::Entries(_)) => return None,
        };
        Some(Event {
            client: usize::try_from(self.client).unwrap_or(usize::MAX),
            key: self.key.clone(),
            op,
            ret,
            invoke: self.invoke,
            response: self.response,
        })
    }

    /// Whether it failed with an error that promises it took no effect
    /// (not committed, or refused for want of room).
    pub fn committed_nothing(&self) -> bool {
        matches!(
            self.ret,
            HistoryRet::Failed(_, KvRet::NotCommitted | KvRet::Full)
        )
    }
}

/// The kind of an error as reports and histories name it: the variant, and
/// the node for an unreachable one (`unreachable node2`).
pub fn error_kind(e: &Error) -> String {
    match e {
        Error::Unreachable(n) => format!("unreachable {n}"),
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
            key: b"key-1".to_vec(),
            op: HistoryOp::Put(b"1:1:7".to_vec()),
            ret: HistoryRet::Existed(true),
            invoke: 5,
            response: 9,
        };
        let records = [
            put.clone(),
            HistoryRecord {
                op: HistoryOp::Get,
                ret: HistoryRet::Get(Some(Vec::new())),
                ..put.clone()
            },
            HistoryRecord {
                op: HistoryOp::Get,
                ret: HistoryRet::Get(None),
                ..put.clone()
            },
            HistoryRecord {
                op: HistoryOp::Scan(3),
                ret: HistoryRet::Entries(vec![
                    (b"key-1".to_vec(), b"v".to_vec()),
                    (b"key-2".to_vec(), Vec::new()),
                ]),
                ..put.clone()
            },
            HistoryRecord {
                op: HistoryOp::Scan(3),
                ret: HistoryRet::Entries(Vec::new()),
                ..put.clone()
            },
            HistoryRecord {
                op: HistoryOp::Delete,
                ret: HistoryRet::failed(&Error::Unreachable(NodeId(2))),
                key: Vec::new(),
                ..put.clone()
            },
            HistoryRecord {
                ret: HistoryRet::failed(&Error::OutcomeUnknown("a lost completion".into())),
                ..put.clone()
            },
            HistoryRecord {
                ret: HistoryRet::failed(&Error::TableFull { depth: 3 }),
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
            key: b"k".to_vec(),
            op: HistoryOp::Put(b"v".to_vec()),
            ret: HistoryRet::failed(&e),
            invoke: 1,
            response: 2,
        };
        let ev = |e: Error| put(e).event().unwrap().ret;
        assert_eq!(ev(Error::Conflict), KvRet::NotCommitted);
        assert_eq!(ev(Error::Timeout), KvRet::NotCommitted);
        assert_eq!(ev(Error::OutcomeUnknown("lost".into())), KvRet::Unknown);
        assert_eq!(ev(Error::TableFull { depth: 3 }), KvRet::Full);
        assert!(put(Error::Conflict).committed_nothing());
        assert!(!put(Error::OutcomeUnknown("lost".into())).committed_nothing());
        assert_eq!(put(Error::Conflict).event().unwrap().client, 2_001_001);
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
            error_kind(&Error::Unreachable(NodeId(2))),
            "unreachable node2"
        );
        assert_eq!(error_kind(&Error::Timeout), "timeout");
        assert!(monotonic_ns() > 0);
    }
}
