//! Request and response slots of the server-driven designs (NessieSD, and the
//! PUT/DELETE path of NessieHY and Pilaf), as in HERD: every client owns one
//! request slot on every node and one response slot on its own node.
//!
//! A message is written with one RDMA WRITE (or a CPU write when client and
//! server share a node) so that it *ends* at the end of its slot:
//!
//! ```text
//! | ... unused ... | key | value | pad | crc64 | lens | ctrl |   <- slot end
//! ctrl = seq (bits 0-31) | code (bits 32-39) | tag (bits 40-63)
//!        code: request op or response status; tag: the client process's
//!        incarnation (requests; 0 in responses)
//! lens = key_len (bits 0-31) | value_len (bits 32-63)
//! crc64 over key | value | pad | lens | ctrl  (CRC-64/XZ)
//! ```
//!
//! A reader that sees a new `seq` in `ctrl` reads the whole message and
//! checks its CRC64 and that `ctrl` did not change meanwhile: a message still
//! landing (in whatever word order the NIC moves it) or a slot reused while
//! being read is skipped and read again, never executed.
//!
//! **Claim words.** After the slots, every client has one 8-byte claim word
//! on every node that decides, once per request, whether a PUT or DELETE
//! executes: the server worker *claims* it (`seq | CLAIMED`) before running
//! the request, the client *cancels* it (`seq | CANCELLED`) when it gives up
//! waiting. Both change the word only by NIC compare-and-swap (the server by
//! loopback), from an older value of the same client process to one naming
//! the request's `seq`, so exactly one of the two wins and the word records
//! which. A
//! cancelled request never executes, which keeps the client's `Timeout`
//! true ("nothing was committed") and safe to retry.
//!
//! A claim word carries the request's incarnation tag too (bits 40-63, as
//! its ctrl word does): each client process draws one when it starts, so
//! that a worker can tell whether the word's request and the one in the
//! slot were numbered by the same process. Only then does their order mean
//! anything, and a word *newer* than the slot's request says the client
//! settled that request already (it cancelled it, then a later request
//! whose WRITE never landed): the worker skips it. A worker claims only
//! requests of the word's process (or from a word never used): a client
//! process *opens* the word (writes its tag into it by CAS) before its
//! first PUT or DELETE on the node, and every request of its predecessors
//! is dead from then on, however late it lands ([`crate::rpc`]).
//!
//! **Served words.** After the claim words, each request slot of a node has
//! a served word, which only the node's workers write: the ctrl word of the
//! last request a worker took from the slot, stored (by CPU) before the
//! request runs. A worker that replaces one that crashed reads them when it
//! starts, and never takes a request its predecessor took (a request stays
//! in its slot after it was served, and its claim word may since have been
//! overwritten by a restarted client's cancels); it also never runs a
//! request whose claim word already named it as claimed when it started.

use nessie_protocol::{CorruptionKind, Error, NodeId, RemoteAddr};

use crate::bytes::{round8, word};
use crate::machine::{Ext, Io};
use crate::watch::SlotWatch;

/// CRC-64/XZ, the checksum of messages and of Pilaf's entries (and Cell's
/// extents), computed slicing-by-16 (16 table lookups per 16 bytes): about
/// 6 times the throughput of the crate's default byte-at-a-time table,
/// which made the checksum most of a server's CPU per request.
pub const CRC64: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_XZ);

/// Bytes after the payload: crc64, lens, ctrl.
pub const TRAILER_BYTES: u64 = 24;

/// The operation a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RpcOp {
    /// Read a key.
    Get = 1,
    /// Store a key's value.
    Put = 2,
    /// Remove a key.
    Delete = 3,
}

impl RpcOp {
    fn decode(code: u8) -> Option<RpcOp> {
        match code {
            1 => Some(RpcOp::Get),
            2 => Some(RpcOp::Put),
            3 => Some(RpcOp::Delete),
            _ => None,
        }
    }
}

/// The outcome a response reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// GET found the key (value follows); PUT/DELETE: the key existed.
    Found = 1,
    /// GET: absent; PUT/DELETE: the key did not exist.
    Absent = 2,
    /// PUT: no index entry free within the cuckoo search.
    TableFull = 3,
    /// PUT: no free data table entry.
    DataTableFull = 4,
    /// The request was malformed (a bug, or a client of another layout).
    BadRequest = 5,
}

impl Status {
    fn decode(code: u8) -> Option<Status> {
        match code {
            1 => Some(Status::Found),
            2 => Some(Status::Absent),
            3 => Some(Status::TableFull),
            4 => Some(Status::DataTableFull),
            5 => Some(Status::BadRequest),
            _ => None,
        }
    }
}

/// Claim-word state: the server worker runs the request.
pub const CLAIMED: u8 = 1;
/// Claim-word state: the client gave up; the request never runs.
pub const CANCELLED: u8 = 2;

/// A claim word: `seq` in bits 0-31, the state in bits 32-39 (tag 0).
pub fn claim_word(seq: u32, state: u8) -> u64 {
    ctrl_word(seq, state)
}

/// A claim word of request `seq` of the client incarnation `tag` (24 bits).
pub fn tagged_claim_word(seq: u32, state: u8, tag: u32) -> u64 {
    tagged_ctrl(seq, state, tag)
}

/// The incarnation tag of a ctrl or claim word (bits 40-63).
pub fn tag_of(word: u64) -> u32 {
    (word >> 40) as u32
}

/// The tags are 24 bits.
pub const TAG_MASK: u32 = (1 << 24) - 1;

/// Where the slots live in each node's data region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MailboxLayout {
    /// Byte offset of the first slot in the data region.
    pub base: u64,
    /// Clients in the whole cluster (slots per kind per node).
    pub clients_total: u32,
    /// Bytes per slot.
    pub slot_bytes: u64,
}

impl MailboxLayout {
    /// Slots at `base` for `clients_total` clients and messages of at most
    /// `max_key` + `max_value` payload bytes.
    pub fn new(base: u64, clients_total: u32, max_key: u32, max_value: u32) -> MailboxLayout {
        MailboxLayout {
            base,
            clients_total,
            slot_bytes: round8(u64::from(max_key) + u64::from(max_value)) + TRAILER_BYTES,
        }
    }

    /// Bytes the slots, claim words and served words occupy.
    pub fn bytes(&self) -> u64 {
        2 * u64::from(self.clients_total) * self.slot_bytes + 16 * u64::from(self.clients_total)
    }

    /// Offset of client `g`'s claim word (see the module documentation).
    pub fn claim_offset(&self, g: u32) -> u64 {
        self.base + 2 * u64::from(self.clients_total) * self.slot_bytes + 8 * u64::from(g)
    }

    /// Offset of the served word of client `g`'s request slot on a node: the
    /// ctrl word of the last request a worker took from it, written by the
    /// worker before it runs the request, so that a worker replacing one
    /// that crashed never takes it again (see the module documentation).
    pub fn served_offset(&self, g: u32) -> u64 {
        self.claim_offset(self.clients_total) + 8 * u64::from(g)
    }

    /// The request slots worker `worker` of `workers` serves: those of
    /// clients `g` with `g % workers == worker`, each with its control word
    /// (the slot's last word).
    pub fn watch(&self, worker: u16, workers: u16) -> SlotWatch {
        let workers = u32::from(workers.max(1));
        SlotWatch::new(
            (0..self.clients_total)
                .filter(|g| g % workers == u32::from(worker))
                .map(|g| (g, self.request_end(g) - 8)),
        )
    }

    /// End offset (exclusive) of client `g`'s request slot.
    pub fn request_end(&self, g: u32) -> u64 {
        self.base + (u64::from(g) + 1) * self.slot_bytes
    }

    /// End offset (exclusive) of client `g`'s response slot.
    pub fn response_end(&self, g: u32) -> u64 {
        self.base + (u64::from(self.clients_total) + u64::from(g) + 1) * self.slot_bytes
    }

    /// The address a message of `len` bytes is written at so that it ends at
    /// `end` on `node`.
    pub fn placed(node: NodeId, end: u64, len: usize) -> RemoteAddr {
        RemoteAddr::data(node, end - len as u64)
    }
}

/// A decoded message (request or response).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Message {
    /// Sequence number (never 0).
    pub seq: u32,
    /// Request op or response status code.
    pub code: u8,
    /// The sending client's incarnation tag (requests; 0 in responses).
    pub tag: u32,
    /// The key (requests).
    pub key: Vec<u8>,
    /// The value (PUT requests, GET responses).
    pub value: Vec<u8>,
}

fn ctrl_word(seq: u32, code: u8) -> u64 {
    u64::from(seq) | (u64::from(code) << 32)
}

fn tagged_ctrl(seq: u32, code: u8, tag: u32) -> u64 {
    ctrl_word(seq, code) | (u64::from(tag & TAG_MASK) << 40)
}

/// Splits a ctrl word into (seq, code).
pub fn split_ctrl(ctrl: u64) -> (u32, u8) {
    (ctrl as u32, (ctrl >> 32) as u8)
}

/// Encodes a message: payload, pad, crc64, lens, ctrl (tag 0).
pub fn encode(seq: u32, code: u8, key: &[u8], value: &[u8]) -> Vec<u8> {
    encode_tagged(seq, code, 0, key, value)
}

/// Encodes a message of the client incarnation `tag` (24 bits).
pub fn encode_tagged(seq: u32, code: u8, tag: u32, key: &[u8], value: &[u8]) -> Vec<u8> {
    let payload = round8((key.len() + value.len()) as u64) as usize;
    let mut out = Vec::with_capacity(payload + TRAILER_BYTES as usize);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out.resize(payload, 0);
    let lens = (key.len() as u64) | ((value.len() as u64) << 32);
    let ctrl = tagged_ctrl(seq, code, tag);
    let mut digest = CRC64.digest();
    digest.update(&out);
    digest.update(&lens.to_le_bytes());
    digest.update(&ctrl.to_le_bytes());
    out.extend_from_slice(&digest.finalize().to_le_bytes());
    out.extend_from_slice(&lens.to_le_bytes());
    out.extend_from_slice(&ctrl.to_le_bytes());
    out
}

/// The payload length announced by a trailer (24 bytes: crc, lens, ctrl), if
/// it fits a slot of `slot_bytes`.
pub fn payload_len(trailer: &[u8], slot_bytes: u64) -> Option<(usize, usize, u64)> {
    let lens = word(trailer, 8);
    let (k, v) = ((lens & 0xffff_ffff) as usize, (lens >> 32) as usize);
    let payload = round8((k + v) as u64);
    (payload + TRAILER_BYTES <= slot_bytes).then_some((k, v, payload))
}

/// Decodes `payload ++ trailer` (as read back from the end of a slot) and
/// verifies its checksum; `None` if torn or malformed.
pub fn decode(bytes: &[u8]) -> Option<Message> {
    decode_checked(bytes, true)
}

/// [`decode`], verifying the checksum only if `verify` (off only under a
/// server's test-only switch `skip_message_checks`: a torn message is then
/// taken for whatever its words say).
fn decode_checked(bytes: &[u8], verify: bool) -> Option<Message> {
    let n = bytes.len();
    if n < TRAILER_BYTES as usize || !n.is_multiple_of(8) {
        return None;
    }
    let t = n - TRAILER_BYTES as usize;
    let crc = word(bytes, t);
    let lens = word(bytes, t + 8);
    let ctrl = word(bytes, t + 16);
    let (k, v) = ((lens & 0xffff_ffff) as usize, (lens >> 32) as usize);
    if round8((k + v) as u64) as usize != t {
        return None;
    }
    let mut digest = CRC64.digest();
    digest.update(&bytes[..t]);
    digest.update(&lens.to_le_bytes());
    digest.update(&ctrl.to_le_bytes());
    if verify && digest.finalize() != crc {
        return None;
    }
    let (seq, code) = split_ctrl(ctrl);
    Some(Message {
        seq,
        code,
        tag: tag_of(ctrl),
        key: bytes[..k].to_vec(),
        value: bytes[k..k + v].to_vec(),
    })
}

/// Reads back, by CPU, the message that ends at byte `end` of the machine's
/// own data region in a slot of `slot_bytes`: trailer first, then payload
/// and trailer, checked by its CRC64 and by an unchanged control word
/// (unless `verify` is off: a server's test-only switch).
/// `None` if it is torn or still landing (read it again later). Returns the
/// message and the bytes read. Neither read is counted: callers count what
/// the papers count.
pub async fn read_message<X: Ext>(
    io: &Io<X>,
    end: u64,
    slot_bytes: u64,
    verify: bool,
) -> Result<Option<(Message, u64)>, Error> {
    let trailer = io
        .local_read(end - TRAILER_BYTES, TRAILER_BYTES as u32)
        .await?;
    let Some((_, _, payload)) = payload_len(&trailer, slot_bytes) else {
        return Ok(None);
    };
    let total = payload + TRAILER_BYTES;
    let bytes = io.local_read(end - total, total as u32).await?;
    let ctrl_unchanged = word(&bytes, bytes.len() - 8) == word(&trailer, 16);
    Ok(decode_checked(&bytes, verify)
        .filter(|_| ctrl_unchanged || !verify)
        .map(|m| (m, total)))
}

/// A request as the server sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// The operation.
    pub op: RpcOp,
    /// The key.
    pub key: Vec<u8>,
    /// The value of a PUT.
    pub value: Vec<u8>,
}

impl Request {
    /// Decodes the request part of a message.
    pub fn from_message(m: &Message) -> Option<Request> {
        Some(Request {
            op: RpcOp::decode(m.code)?,
            key: m.key.clone(),
            value: m.value.clone(),
        })
    }
}

/// A response as the client sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Response {
    /// The outcome.
    pub status: Status,
    /// The value of a GET that found its key.
    pub value: Vec<u8>,
}

impl Response {
    /// Decodes the response part of a message.
    pub fn from_message(m: &Message) -> Option<Response> {
        Some(Response {
            status: Status::decode(m.code)?,
            value: m.value.clone(),
        })
    }

    /// The error a failed status stands for, naming `node`.
    pub fn error(&self, node: NodeId) -> Option<Error> {
        match self.status {
            Status::Found | Status::Absent => None,
            Status::TableFull => Some(Error::TableFull { depth: 0 }),
            Status::DataTableFull => Some(Error::DataTableFull { node, class: 0 }),
            Status::BadRequest => Some(Error::corrupt(
                CorruptionKind::Reply,
                format!("server on {node} rejected a request as malformed"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_and_ends_with_its_ctrl_word() {
        let m = encode(7, RpcOp::Put as u8, b"key", b"value!");
        assert_eq!(m.len(), 16 + 24);
        assert_eq!(split_ctrl(word(&m, m.len() - 8)), (7, 2));
        let d = decode(&m).unwrap();
        assert_eq!(
            (d.seq, d.key.as_slice(), d.value.as_slice()),
            (7, &b"key"[..], &b"value!"[..])
        );
        assert_eq!(Request::from_message(&d).unwrap().op, RpcOp::Put);
    }

    #[test]
    fn any_torn_byte_is_detected() {
        let m = encode(3, RpcOp::Get as u8, b"a-key", b"");
        for i in 0..m.len() {
            let mut t = m.clone();
            t[i] ^= 0x10;
            assert!(
                decode(&t).is_none_or(|d| d != decode(&m).unwrap()),
                "byte {i}"
            );
        }
        // A half-old, half-new message (the slot reused while being read).
        let newer = encode(4, RpcOp::Get as u8, b"b-key", b"");
        let mut mixed = newer.clone();
        mixed[..8].copy_from_slice(&m[..8]);
        assert!(decode(&mixed).is_none());
    }

    #[test]
    fn slots_do_not_overlap() {
        let l = MailboxLayout::new(64, 6, 16, 100);
        assert_eq!(l.slot_bytes, 120 + 24);
        assert_eq!(l.request_end(0), 64 + 144);
        assert_eq!(l.response_end(0), 64 + 7 * 144);
        assert_eq!(l.response_end(5), l.claim_offset(0));
        assert_eq!(l.claim_offset(5) + 8, l.served_offset(0));
        assert_eq!(l.served_offset(5) + 8, 64 + l.bytes());
        assert!(payload_len(&encode(1, 1, &[0; 16], &[0; 100])[120..], l.slot_bytes).is_some());
        assert!(payload_len(&encode(1, 1, &[0; 16], &[0; 105])[128..], l.slot_bytes).is_none());
    }
}
