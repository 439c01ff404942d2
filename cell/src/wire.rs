//! Cell's messages between clients and servers (and between servers), and
//! their byte encoding. They travel in `nessie-exec`'s request and response
//! slots (`nessie_exec::mailbox`), as the payload of a message, so
//! Cell's servers are the same polling server workers the other
//! server-driven systems use.

use nessie_protocol::{CorruptionKind, Error, NodeId};

use crate::ptr::{NodePtr, RegionId};

/// Why a server asked the client to restart its search from the top.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RestartCause {
    /// A node on the path had been invalidated by a meganode split.
    Invalid,
    /// A node on the path did not cover the key (it was reused).
    MinMax,
    /// The tree's structure was not as the request assumed.
    Structure,
}

/// A request to a server worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellRequest {
    /// Search for `key` from `start` through the meganodes this server holds
    /// (null `start`: from the tree's root, on the holder of the root word).
    Search {
        /// Where to start.
        start: NodePtr,
        /// The key.
        key: Vec<u8>,
        /// Return the value (a get) or only whether the key is present (a search).
        value: bool,
    },
    /// Search for `key` from `start` and, at its leaf, store `value` (put) or
    /// remove the key (`None`: delete).
    Write {
        /// Where to start (a leaf found by a client-side search, or a meganode root).
        start: NodePtr,
        /// The key.
        key: Vec<u8>,
        /// The value, or `None` to delete.
        value: Option<Vec<u8>>,
    },
    /// Collect the entries of `from..to` (at most `limit`) from `start`.
    Scan {
        /// Where to start.
        start: NodePtr,
        /// First key.
        from: Vec<u8>,
        /// Bound above the keys (`None`: to the end).
        to: Option<Vec<u8>>,
        /// Most entries.
        limit: u32,
        /// The first leaf must begin exactly at `from` (a continuation).
        contiguous: bool,
    },
    /// Whether these leaves still have these versions.
    Validate {
        /// Leaves and the versions they were read at.
        leaves: Vec<(NodePtr, u64)>,
    },
    /// Copy the upper part (keys `split` and above) of meganode `source` into
    /// the new meganode `new`, which the splitter allocated in region slot
    /// `slot` of this server (a meganode split, §2.2).
    CopyMeganode {
        /// The meganode being split.
        source: RegionId,
        /// The split key.
        split: Vec<u8>,
        /// The new meganode (allocated by the splitter, named in its log).
        new: RegionId,
        /// Its slot on this server.
        slot: u32,
    },
    /// Create the new root meganode `new` (allocated by the caller in slot
    /// `slot` of this server) over `left` and `right` split at `split`.
    NewRoot {
        /// The old root meganode's root.
        left: NodePtr,
        /// The split key.
        split: Vec<u8>,
        /// The new meganode's root.
        right: NodePtr,
        /// The new root meganode.
        new: RegionId,
        /// Its slot on this server.
        slot: u32,
    },
    /// Replace the root word (held in region 1) if it still is `expect`.
    SetRoot {
        /// The root word expected.
        expect: NodePtr,
        /// The new root.
        new: NodePtr,
    },
    /// Insert the entry `key` -> `child` into the parent of meganode `below`
    /// (the decoupled second half of a meganode split).
    InsertChild {
        /// Where to start searching.
        start: NodePtr,
        /// The split key.
        key: Vec<u8>,
        /// The new meganode's root.
        child: NodePtr,
        /// The meganode that was split.
        below: RegionId,
    },
    /// Let writes into a meganode created by a split begin (the source has
    /// invalidated its copy of those nodes).
    OpenRegion {
        /// The new meganode.
        region: RegionId,
    },
    /// Retire a meganode that nothing in the tree names (an orphan: the
    /// copy or new root of an abandoned split): stop any creation of it
    /// still running here, stop holding it, and remove it from the
    /// directory.
    DropRegion {
        /// The orphan.
        region: RegionId,
    },
}

/// A server's reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellResponse {
    /// A get found the key: its value.
    Found(Vec<u8>),
    /// A search found the key.
    Present,
    /// The key is absent.
    Absent,
    /// The search left this server's meganodes: continue at `next`, which
    /// covers the keys `lo..hi` as far as the parent knew.
    Continue {
        /// The next node.
        next: NodePtr,
        /// Lowest key of the entry that led there.
        lo: Vec<u8>,
        /// Bound of that entry (`None`: plus infinity).
        hi: Option<Vec<u8>>,
    },
    /// A write took effect; whether the key existed before.
    Written {
        /// The key existed.
        existed: bool,
    },
    /// Part of a scan.
    Scanned {
        /// Entries found, in key order.
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        /// The leaves read and their versions.
        leaves: Vec<(NodePtr, u64)>,
        /// Where the scan continues, and from which key (`None`: complete).
        next: Option<(NodePtr, Vec<u8>)>,
    },
    /// Whether every leaf of a `Validate` still had its version.
    Valid(bool),
    /// A region created.
    Region(RegionId),
    /// Done.
    Done,
    /// Restart the search from the top.
    Restart(RestartCause),
    /// The meganode is splitting or full: retry later (nothing was changed).
    Busy,
    /// The request was refused (nothing was changed): why.
    Failed(Refusal),
}

/// Why a server refused a request ([`CellResponse::Failed`]): nothing was
/// changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The request never left its sender (a creation given up before its
    /// request was sent; never on the wire).
    #[error("the request was not sent")]
    NotSent,
    /// The meganode was retired (a split or creation given up).
    #[error("{0} was retired")]
    Retired(RegionId),
    /// A split key that is not a separator of the source's root.
    #[error("the split key is not a separator of {0}'s root")]
    NotSeparator(RegionId),
    /// The half to copy has more nodes than a meganode holds.
    #[error("the copy does not fit a meganode")]
    CopyTooLarge,
    /// The copy met a node that was invalid.
    #[error("the copy met invalid node {0}")]
    InvalidNode(NodePtr),
    /// The meganode is not held by this server.
    #[error("{0} is not held here")]
    NotHeld(RegionId),
    /// The root word is not held by this server.
    #[error("the root word is not held here")]
    RootNotHeld,
    /// The server's own operation failed: its error's text (the error of
    /// another process, whose type does not cross the wire).
    #[error("{0}")]
    Server(String),
}

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn ptr(&mut self, p: NodePtr) -> &mut Self {
        self.u64(p.encode())
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
    fn opt(&mut self, b: &Option<Vec<u8>>) -> &mut Self {
        match b {
            Some(b) => self.u8(1).bytes(b),
            None => self.u8(0),
        }
    }
}

struct R<'a>(&'a [u8]);

impl R<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn ptr(&mut self) -> Option<NodePtr> {
        Some(NodePtr::decode(self.u64()?))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        Some(self.take(n)?.to_vec())
    }
    fn opt(&mut self) -> Option<Option<Vec<u8>>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(self.bytes()?)),
            _ => None,
        }
    }
    fn leaves(&mut self) -> Option<Vec<(NodePtr, u64)>> {
        let n = self.u32()? as usize;
        (0..n).map(|_| Some((self.ptr()?, self.u64()?))).collect()
    }
}

fn put_leaves(w: &mut W, leaves: &[(NodePtr, u64)]) {
    w.u32(leaves.len() as u32);
    for (p, v) in leaves {
        w.ptr(*p).u64(*v);
    }
}

impl CellRequest {
    /// The bytes of the request.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::new());
        match self {
            CellRequest::Search { start, key, value } => {
                w.u8(1).ptr(*start).bytes(key).u8(u8::from(*value));
            }
            CellRequest::Write { start, key, value } => {
                w.u8(2).ptr(*start).bytes(key).opt(value);
            }
            CellRequest::Scan {
                start,
                from,
                to,
                limit,
                contiguous,
            } => {
                w.u8(3)
                    .ptr(*start)
                    .bytes(from)
                    .opt(to)
                    .u32(*limit)
                    .u8(u8::from(*contiguous));
            }
            CellRequest::Validate { leaves } => {
                w.u8(4);
                put_leaves(&mut w, leaves);
            }
            CellRequest::CopyMeganode {
                source,
                split,
                new,
                slot,
            } => {
                w.u8(5).u32(source.0).bytes(split).u32(new.0).u32(*slot);
            }
            CellRequest::NewRoot {
                left,
                split,
                right,
                new,
                slot,
            } => {
                w.u8(6)
                    .ptr(*left)
                    .bytes(split)
                    .ptr(*right)
                    .u32(new.0)
                    .u32(*slot);
            }
            CellRequest::SetRoot { expect, new } => {
                w.u8(7).ptr(*expect).ptr(*new);
            }
            CellRequest::InsertChild {
                start,
                key,
                child,
                below,
            } => {
                w.u8(8).ptr(*start).bytes(key).ptr(*child).u32(below.0);
            }
            CellRequest::OpenRegion { region } => {
                w.u8(9).u32(region.0);
            }
            CellRequest::DropRegion { region } => {
                w.u8(10).u32(region.0);
            }
        }
        w.0
    }

    /// Decodes [`CellRequest::encode`]; `None` if malformed.
    pub fn decode(b: &[u8]) -> Option<CellRequest> {
        let mut r = R(b);
        let req = match r.u8()? {
            1 => CellRequest::Search {
                start: r.ptr()?,
                key: r.bytes()?,
                value: r.u8()? != 0,
            },
            2 => CellRequest::Write {
                start: r.ptr()?,
                key: r.bytes()?,
                value: r.opt()?,
            },
            3 => CellRequest::Scan {
                start: r.ptr()?,
                from: r.bytes()?,
                to: r.opt()?,
                limit: r.u32()?,
                contiguous: r.u8()? != 0,
            },
            4 => CellRequest::Validate {
                leaves: r.leaves()?,
            },
            5 => CellRequest::CopyMeganode {
                source: RegionId(r.u32()?),
                split: r.bytes()?,
                new: RegionId(r.u32()?),
                slot: r.u32()?,
            },
            6 => CellRequest::NewRoot {
                left: r.ptr()?,
                split: r.bytes()?,
                right: r.ptr()?,
                new: RegionId(r.u32()?),
                slot: r.u32()?,
            },
            7 => CellRequest::SetRoot {
                expect: r.ptr()?,
                new: r.ptr()?,
            },
            8 => CellRequest::InsertChild {
                start: r.ptr()?,
                key: r.bytes()?,
                child: r.ptr()?,
                below: RegionId(r.u32()?),
            },
            9 => CellRequest::OpenRegion {
                region: RegionId(r.u32()?),
            },
            10 => CellRequest::DropRegion {
                region: RegionId(r.u32()?),
            },
            _ => return None,
        };
        r.0.is_empty().then_some(req)
    }

    /// A short name for spans and counters.
    pub fn name(&self) -> &'static str {
        match self {
            CellRequest::Search { .. } => "search",
            CellRequest::Write { .. } => "write",
            CellRequest::Scan { .. } => "scan",
            CellRequest::Validate { .. } => "validate",
            CellRequest::CopyMeganode { .. } => "copy-meganode",
            CellRequest::NewRoot { .. } => "new-root",
            CellRequest::SetRoot { .. } => "set-root",
            CellRequest::InsertChild { .. } => "insert-child",
            CellRequest::OpenRegion { .. } => "open-region",
            CellRequest::DropRegion { .. } => "drop-region",
        }
    }
}

impl CellResponse {
    /// The bytes of the reply.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::new());
        match self {
            CellResponse::Found(v) => {
                w.u8(1).bytes(v);
            }
            CellResponse::Present => {
                w.u8(2);
            }
            CellResponse::Absent => {
                w.u8(3);
            }
            CellResponse::Continue { next, lo, hi } => {
                w.u8(4).ptr(*next).bytes(lo).opt(hi);
            }
            CellResponse::Written { existed } => {
                w.u8(5).u8(u8::from(*existed));
            }
            CellResponse::Scanned {
                entries,
                leaves,
                next,
            } => {
                w.u8(6).u32(entries.len() as u32);
                for (k, v) in entries {
                    w.bytes(k).bytes(v);
                }
                put_leaves(&mut w, leaves);
                match next {
                    Some((p, k)) => w.u8(1).ptr(*p).bytes(k),
                    None => w.u8(0),
                };
            }
            CellResponse::Valid(ok) => {
                w.u8(7).u8(u8::from(*ok));
            }
            CellResponse::Region(r) => {
                w.u8(8).u32(r.0);
            }
            CellResponse::Done => {
                w.u8(9);
            }
            CellResponse::Restart(c) => {
                w.u8(10).u8(match c {
                    RestartCause::Invalid => 0,
                    RestartCause::MinMax => 1,
                    RestartCause::Structure => 2,
                });
            }
            CellResponse::Busy => {
                w.u8(11);
            }
            CellResponse::Failed(why) => {
                w.u8(12);
                match why {
                    Refusal::NotSent => w.u8(0),
                    Refusal::Retired(r) => w.u8(1).u32(r.0),
                    Refusal::NotSeparator(r) => w.u8(2).u32(r.0),
                    Refusal::CopyTooLarge => w.u8(3),
                    Refusal::InvalidNode(p) => w.u8(4).ptr(*p),
                    Refusal::NotHeld(r) => w.u8(5).u32(r.0),
                    Refusal::RootNotHeld => w.u8(6),
                    Refusal::Server(text) => w.u8(7).bytes(text.as_bytes()),
                };
            }
        }
        w.0
    }

    /// Decodes [`CellResponse::encode`]; `None` if malformed.
    pub fn decode(b: &[u8]) -> Option<CellResponse> {
        let mut r = R(b);
        let resp = match r.u8()? {
            1 => CellResponse::Found(r.bytes()?),
            2 => CellResponse::Present,
            3 => CellResponse::Absent,
            4 => CellResponse::Continue {
                next: r.ptr()?,
                lo: r.bytes()?,
                hi: r.opt()?,
            },
            5 => CellResponse::Written {
                existed: r.u8()? != 0,
            },
            6 => {
                let n = r.u32()? as usize;
                let entries = (0..n)
                    .map(|_| Some((r.bytes()?, r.bytes()?)))
                    .collect::<Option<Vec<_>>>()?;
                let leaves = r.leaves()?;
                let next = match r.u8()? {
                    0 => None,
                    1 => Some((r.ptr()?, r.bytes()?)),
                    _ => return None,
                };
                CellResponse::Scanned {
                    entries,
                    leaves,
                    next,
                }
            }
            7 => CellResponse::Valid(r.u8()? != 0),
            8 => CellResponse::Region(RegionId(r.u32()?)),
            9 => CellResponse::Done,
            10 => CellResponse::Restart(match r.u8()? {
                0 => RestartCause::Invalid,
                1 => RestartCause::MinMax,
                _ => RestartCause::Structure,
            }),
            11 => CellResponse::Busy,
            12 => CellResponse::Failed(match r.u8()? {
                0 => Refusal::NotSent,
                1 => Refusal::Retired(RegionId(r.u32()?)),
                2 => Refusal::NotSeparator(RegionId(r.u32()?)),
                3 => Refusal::CopyTooLarge,
                4 => Refusal::InvalidNode(r.ptr()?),
                5 => Refusal::NotHeld(RegionId(r.u32()?)),
                6 => Refusal::RootNotHeld,
                7 => Refusal::Server(String::from_utf8_lossy(&r.bytes()?).into_owned()),
                _ => return None,
            }),
            _ => return None,
        };
        r.0.is_empty().then_some(resp)
    }

    /// The error a `Failed` reply stands for, naming `node`.
    pub fn failure(&self, node: NodeId) -> Option<Error> {
        match self {
            CellResponse::Failed(why) => Some(Error::corrupt(
                CorruptionKind::Reply,
                format!("server on {node}: {why}"),
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_truncation_is_refused() {
        let p = NodePtr::new(RegionId(3), 9);
        let reqs = vec![
            CellRequest::Search {
                start: p,
                key: b"k".to_vec(),
                value: true,
            },
            CellRequest::Write {
                start: p,
                key: b"k".to_vec(),
                value: None,
            },
            CellRequest::Scan {
                start: p,
                from: b"a".to_vec(),
                to: Some(b"z".to_vec()),
                limit: 10,
                contiguous: true,
            },
            CellRequest::Validate {
                leaves: vec![(p, 4)],
            },
            CellRequest::InsertChild {
                start: NodePtr::NULL,
                key: b"m".to_vec(),
                child: p,
                below: RegionId(2),
            },
            CellRequest::CopyMeganode {
                source: RegionId(2),
                split: b"m".to_vec(),
                new: RegionId(7),
                slot: 3,
            },
            CellRequest::NewRoot {
                left: p,
                split: b"m".to_vec(),
                right: NodePtr::root_of(RegionId(7)),
                new: RegionId(8),
                slot: 1,
            },
            CellRequest::DropRegion {
                region: RegionId(7),
            },
        ];
        for q in reqs {
            let b = q.encode();
            assert_eq!(CellRequest::decode(&b), Some(q));
            assert_eq!(CellRequest::decode(&b[..b.len() - 1]), None);
        }
        let resps = vec![
            CellResponse::Found(b"v".to_vec()),
            CellResponse::Continue {
                next: p,
                lo: b"a".to_vec(),
                hi: None,
            },
            CellResponse::Scanned {
                entries: vec![(b"a".to_vec(), b"1".to_vec())],
                leaves: vec![(p, 2)],
                next: Some((p, b"b".to_vec())),
            },
            CellResponse::Restart(RestartCause::MinMax),
            CellResponse::Failed(Refusal::NotSent),
            CellResponse::Failed(Refusal::Retired(RegionId(3))),
            CellResponse::Failed(Refusal::NotSeparator(RegionId(4))),
            CellResponse::Failed(Refusal::CopyTooLarge),
            CellResponse::Failed(Refusal::InvalidNode(p)),
            CellResponse::Failed(Refusal::NotHeld(RegionId(5))),
            CellResponse::Failed(Refusal::RootNotHeld),
            CellResponse::Failed(Refusal::Server("no".into())),
        ];
        for r in resps {
            let b = r.encode();
            assert_eq!(CellResponse::decode(&b), Some(r));
        }
    }
}
