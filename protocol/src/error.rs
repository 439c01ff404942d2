//! Typed errors of the protocol and the client API (a rejected
//! configuration among them, [`ConfigError`]), and the one outcome
//! vocabulary every system shares: an operation either committed (`Ok`),
//! did not commit and never will (safe to retry), or has an unknown outcome.

use crate::addr::{ClientId, NodeId};
use crate::fabric::{FabricError, Topology};

/// Why a configuration was rejected.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A field is outside its allowed range.
    #[error("invalid configuration: {field} = {value}: {reason}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value, printed.
        value: String,
        /// What is allowed.
        reason: &'static str,
    },
}

/// Why an operation failed.
///
/// Which of these an operation can return, and what each promises about a
/// write, is said on each method of [`crate::Client`]; in short, every
/// error but [`Error::OutcomeUnknown`] means the operation did not take
/// effect and never will ([`Error::outcome`]), and [`Error::is_retryable`]
/// says which are worth trying again as they are. The enum is
/// `#[non_exhaustive]`: new failures (of new features) can be added without
/// breaking a caller, who matches the ones it handles and treats the rest by
/// [`Error::outcome`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A concurrent operation interfered; nothing was changed. Retrying after
    /// a back-off may succeed (the `Client` does so itself).
    #[error("concurrent operation interfered; retry")]
    Conflict,
    /// Every candidate index table entry is taken and no chain of MIGRATE
    /// moves within the configured depth frees one: the search found none
    /// (breadth first: among at most 256 entries a level). Retrying the same
    /// insert would search the same table again; enlarge the index tables,
    /// raise `max_migrate_depth` or delete keys. Nothing was written. (A
    /// search the attempt could not *afford* before its deadline is not this
    /// error but a retryable [`Error::Timeout`].)
    #[error("index table full: no chain of moves within migrate depth {depth} frees a candidate")]
    TableFull {
        /// The depth limit that was reached.
        depth: u8,
    },
    /// The index is full in its last generation: no chain of moves frees a
    /// candidate, and the index cannot grow further (it has reached the
    /// `index_generations` the deployment configured, and so the memory it
    /// registered for the index). Not retryable: delete keys, or deploy
    /// with more generations. Nothing was written.
    #[error(
        "index full at its limit: generation {generation} is the last of the {generations} \
         configured (`index_generations`), so the index cannot grow further"
    )]
    IndexAtLimit {
        /// The generation in use (the last one).
        generation: u8,
        /// The configured number of generations.
        generations: u8,
    },
    /// The client's share of its node's data table has no entry free or
    /// expired: enlarge the data table or shorten the expiration period.
    #[error(
        "data table full: no free or expired data table entry of size class {class} on {node}"
    )]
    DataTableFull {
        /// The client's node.
        node: NodeId,
        /// The size class whose share is full (0: the main table).
        class: u8,
    },
    /// The operation ran out of time (its attempt deadline or the client's
    /// operation timeout). Nothing was committed by the attempt that timed out
    /// unless it says otherwise.
    #[error("operation timed out")]
    Timeout,
    /// The key is empty (keys are 1 to `max_key_len` bytes).
    #[error("empty key (keys are 1 to {max} bytes)")]
    EmptyKey {
        /// The configured maximum.
        max: u32,
    },
    /// The key is longer than the configured maximum.
    #[error("key of {len} bytes exceeds the maximum of {max} bytes")]
    KeyTooLarge {
        /// Its length.
        len: usize,
        /// The configured maximum.
        max: u32,
    },
    /// The value is longer than the configured maximum.
    #[error("value of {len} bytes exceeds the maximum of {max} bytes")]
    ValueTooLarge {
        /// Its length.
        len: usize,
        /// The configured maximum.
        max: u32,
    },
    /// A node needed by the operation does not answer; what the operation
    /// needed of it. Nothing was written: the attempt stopped before its
    /// commit (a commit CAS whose node stopped answering ends
    /// [`Error::OutcomeUnknown`] instead).
    #[error("{0} is unreachable: {1}")]
    Unreachable(NodeId, Needed),
    /// Another fabric failure.
    #[error("fabric error: {0}")]
    Fabric(FabricError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A client or pipeline was given an endpoint on another node than the
    /// one its client ids belong to (its data table entries would be written
    /// into the wrong node's share).
    #[error("the endpoint is on {endpoint}, but the client runs on {node}")]
    EndpointNode {
        /// The endpoint's node.
        endpoint: NodeId,
        /// The node of the client id.
        node: NodeId,
    },
    /// The endpoint's fabric does not have every node and byte the
    /// configuration addresses (e.g. a simulator built from another
    /// configuration's shape): every operation would fail out of range.
    #[error("the configuration needs {needed}; the fabric offers {offered}")]
    TopologyMismatch {
        /// What the configuration addresses.
        needed: Topology,
        /// What the endpoint's fabric has.
        offered: Topology,
    },
    /// Another live client (or pipeline slot) already has this client id:
    /// the two would share one data table share and lose writes. Within a
    /// process it is checked per fabric, and dropping the other client
    /// releases the id; a client without storage's share is also held
    /// across processes, by its lease (docs/protocol.md §2.4), until its
    /// holder stops renewing it and the node's agent takes it back after
    /// the lease term.
    #[error("{0} is already in use")]
    ClientIdInUse(ClientId),
    /// A client without storage lost its share: its node's agent took it
    /// back after its heartbeat stood still for the lease term (it wrote
    /// nothing for that long, or was paused), binding its windows again so
    /// that nothing it had posted lands any more. Nothing of the failed
    /// attempt was linked; its earlier committed writes stay. The client
    /// cannot write again: make a new one (docs/protocol.md §2.4).
    #[error("{0} lost its lease on its share (its node's agent took it back)")]
    LeaseLost(ClientId),
    /// Something did not decode or did not hold together: memory not laid
    /// out as this configuration lays it out, a completion or a server's
    /// answer that does not fit its request, a resource the store could not
    /// have, or a bug. [`Corruption::kind`] says which, for a program to act
    /// on; its detail is for people. Nothing was committed by the attempt
    /// that met it.
    #[error("{0}")]
    Corrupt(Corruption),
    /// The system does not offer this operation (a range scan of a store
    /// that is not ordered): refused before anything was done.
    #[error("this system does not offer {0}")]
    Unsupported(&'static str),
    /// The operation may or may not have taken effect: a completion was lost
    /// or failed after the work it reports on may already have executed
    /// (e.g. the commit compare-and-swap). It is never retried as if nothing
    /// happened; read the key back to learn the outcome (the
    /// `outcome_unknown` example of `nessie-fabric-sim` shows how). The
    /// [`UnknownOutcome`] says which step may have landed and what hid it.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(UnknownOutcome),
}

/// What an [`Error::Corrupt`] met: its kind, for a program to act on, and a
/// detail for people (where, what was expected).
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{kind}: {detail}")]
pub struct Corruption {
    /// What kind of thing did not hold together.
    pub kind: CorruptionKind,
    /// Where and how, in words.
    pub detail: String,
}

impl Corruption {
    /// A corruption of `kind`, described by `detail`.
    pub fn new(kind: CorruptionKind, detail: impl Into<String>) -> Corruption {
        Corruption {
            kind,
            detail: detail.into(),
        }
    }
}

impl Error {
    /// An [`Error::Corrupt`] of `kind`, described by `detail`.
    pub fn corrupt(kind: CorruptionKind, detail: impl Into<String>) -> Error {
        Error::Corrupt(Corruption::new(kind, detail))
    }
}

/// What kind of thing an [`Error::Corrupt`] found not holding together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptionKind {
    /// Memory that does not decode as this configuration lays it out (an
    /// entry, a bucket, a checksum that fails, a tree that breaks its
    /// invariants): a store written by another configuration, or damaged.
    /// Retrying will meet it again.
    #[error("corrupt memory")]
    Memory,
    /// A completion that does not answer its request (a READ answered by a
    /// CAS's output, fewer bytes than asked): a fabric's or a driver's bug.
    #[error("a completion that does not fit its request")]
    Completion,
    /// A server's answer that does not decode, or a server that refused a
    /// request as malformed.
    #[error("a malformed exchange with a server")]
    Reply,
    /// Something the store needs could not be had (a thread that could not
    /// be spawned, room a node reserved): retrying later may succeed.
    #[error("a resource could not be had")]
    Resource,
    /// A store or tool set up in a way it cannot run (a recovery with no
    /// logs, a system name that is not one, a directory initialised twice).
    #[error("a set-up that cannot run")]
    Setup,
    /// A state machine or its driver broke its own contract: a bug.
    #[error("a bug")]
    Bug,
}

/// Why an operation's outcome is unknown: the step that may or may not
/// have taken effect, and what hid its effect from the client.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{step}{}", cause.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
pub struct UnknownOutcome {
    /// The step whose effect is unknown.
    pub step: UnknownStep,
    /// The failure that hid it (the completion's error, or the error of the
    /// request that tried to settle it); `None` when no answer came in time.
    pub cause: Option<Box<Error>>,
}

impl UnknownOutcome {
    /// The outcome of `step` is unknown; `cause` hid it.
    pub fn new(step: UnknownStep, cause: impl Into<Option<Error>>) -> UnknownOutcome {
        UnknownOutcome {
            step,
            cause: cause.into().map(Box::new),
        }
    }
}

impl From<UnknownOutcome> for Error {
    fn from(u: UnknownOutcome) -> Error {
        Error::OutcomeUnknown(u)
    }
}

/// The step of a write whose effect may or may not have landed (what an
/// [`Error::OutcomeUnknown`] reports on). What to do about each is the same:
/// read the key back (a value unique to the write tells whether it landed),
/// and never retry the write as if nothing happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum UnknownStep {
    /// Nessie: the compare-and-swap committing the write's new data table
    /// entry, and the one that tried to settle it, both failed or went
    /// unanswered (docs/protocol.md §5.2, "settling a commit").
    #[error("the commit of the new data table entry and the CAS settling it both failed")]
    Commit,
    /// A compare-and-swap linking or unlinking a slot (RACE's slot CAS).
    #[error("a slot CAS may have landed")]
    SlotCas,
    /// A request to a server (NessieSD, NessieHY, Pilaf) that was posted,
    /// went unanswered, and whose cancel could not settle whether the server
    /// ran it.
    #[error("a request to {node} may have run: its answer never came and its cancel failed")]
    ServerRequest {
        /// The server's node.
        node: NodeId,
    },
    /// A request to a server that the server claimed (it runs or ran it)
    /// but whose answer did not arrive.
    #[error("the server on {node} claimed the request but its answer did not arrive")]
    ClaimedUnanswered {
        /// The server's node.
        node: NodeId,
    },
    /// Another process of this client took over a request's claim word
    /// before the request was settled: it may have run before.
    #[error("another process of this client took over the request's claim word on {node}")]
    ClaimTakenOver {
        /// The server's node.
        node: NodeId,
    },
    /// A server answered with a status this client does not know: the server
    /// ran the request, with an effect the client cannot read.
    #[error("the server answered with unknown status {code}")]
    UnknownStatus {
        /// The status code.
        code: u8,
    },
    /// A pipelined operation that the pipeline stopped before it finished.
    #[error("the pipeline stopped before the operation finished")]
    Unfinished,
    /// A client without storage's release of its share: the CAS giving the
    /// lease word back failed or went unanswered, so the share may be
    /// free or still held. Release again: a release reads the lease word
    /// first.
    #[error("the CAS giving the share back may have landed")]
    LeaseRelease,
    /// Cell: a write its server did not answer in time.
    #[error("the server did not answer a write in time")]
    ServerSilent,
    /// Cell: a directory update whose commit failed and whose read-back
    /// failed too.
    #[error("a directory update's commit failed and reading it back failed")]
    DirectoryUpdate,
    /// Cell: a split abandoned after its copy was made but not logged.
    #[error("a split's copy was made but could not be logged")]
    SplitCopy,
}

/// What an operation needed of a node that did not answer
/// ([`Error::Unreachable`]): why the operation could not do without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Needed {
    /// The client's own node: a client of a node posts everything through
    /// its node's NIC, and its entries live there.
    #[error("it is the client's own node")]
    OwnNode,
    /// A candidate bucket of the key: where the key may be found or placed
    /// (every candidate is read, so that no copy is missed).
    #[error("it holds a candidate bucket of the key")]
    Candidate,
    /// Index entries other than the key's candidates: a cuckoo move's
    /// chain, or entries the operation's recovery or sweep reads.
    #[error("it holds index entries the operation reads or moves")]
    Index,
    /// A data table entry the operation reads (a value the index names).
    #[error("it holds a data table entry the operation reads")]
    Entry,
    /// The client's share of a node's data tables, where a client without
    /// storage writes its entries.
    #[error("it holds the client's share, where its entries go")]
    Share,
    /// A client without storage's lease block.
    #[error("it holds the client's lease")]
    Lease,
    /// The index directory (online growth).
    #[error("it holds the index directory")]
    Directory,
    /// The client's registry word, where a client of a node takes its id
    /// (`registry::claim_id`).
    #[error("it holds the client's registry word, where its id is taken")]
    Registry,
    /// A request of the operation went to it; what for is not told apart
    /// (the other systems' clients).
    #[error("a request of the operation went to it")]
    Request,
}

/// What the caller can know about an operation's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It took effect (the call returned `Ok`).
    Committed,
    /// It did not take effect and never will: safe to retry.
    NotCommitted,
    /// It may or may not have taken effect ([`Error::OutcomeUnknown`]).
    Unknown,
}

impl Outcome {
    /// The outcome class of a call's result.
    pub fn of<T>(result: &Result<T, Error>) -> Outcome {
        match result {
            Ok(_) => Outcome::Committed,
            Err(e) => e.outcome(),
        }
    }
}

impl From<FabricError> for Error {
    fn from(e: FabricError) -> Self {
        match e.unreachable_node() {
            Some(n) => Error::Unreachable(n, Needed::Request),
            None => match e {
                FabricError::Timeout => Error::Timeout,
                other => Error::Fabric(other),
            },
        }
    }
}

impl Error {
    /// Whether the client should back off and try the operation again: the
    /// attempt met interference or ran out of time, and committed nothing.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Conflict | Error::Timeout)
    }

    /// A short, stable name of the error's kind (`"conflict"`,
    /// `"index-table-full"`, `"outcome-unknown"`, ...), as reports and
    /// metrics label failures.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Conflict => "conflict",
            Error::TableFull { .. } => "index-table-full",
            Error::IndexAtLimit { .. } => "index-at-limit",
            Error::DataTableFull { .. } => "data-table-full",
            Error::Timeout => "timeout",
            Error::EmptyKey { .. } => "empty-key",
            Error::KeyTooLarge { .. } => "key-too-large",
            Error::ValueTooLarge { .. } => "value-too-large",
            Error::Unreachable(..) => "unreachable",
            Error::Fabric(_) => "fabric",
            Error::Config(_) => "config",
            Error::EndpointNode { .. } => "endpoint-node",
            Error::TopologyMismatch { .. } => "topology-mismatch",
            Error::ClientIdInUse(_) => "client-id-in-use",
            Error::LeaseLost(_) => "lease-lost",
            Error::Corrupt(_) => "corrupt",
            Error::Unsupported(_) => "unsupported",
            Error::OutcomeUnknown(_) => "outcome-unknown",
        }
    }

    /// What this error says about the operation's effect: only
    /// [`Error::OutcomeUnknown`] leaves it open; every other error means
    /// nothing was committed.
    pub fn outcome(&self) -> Outcome {
        match self {
            Error::OutcomeUnknown(_) => Outcome::Unknown,
            _ => Outcome::NotCommitted,
        }
    }
}
