//! The simulated fabric's state ([`Network`]): each node's NIC ([`Nic`]),
//! a work request on its way ([`NicRequest`]: who posted it, its fault, how
//! far a torn transfer got), the ordered chain a request may belong to
//! ([`Chain`]) and a queue pair failing as a whole ([`LinkFailure`]). The
//! engine owns a [`Network`]; the network's event handlers
//! ([`crate::network`], [`crate::chain`]) move what is in it.

use std::collections::HashMap;

use nessie_check::memory::InFlight;
use nessie_protocol::{ChainLink, FabricError, OpOutput, Region, TransportFault, WorkRequest};

use crate::systems::Actor;

/// The NICs of the cluster and everything on its way between them.
pub(crate) struct Network {
    /// Each node's NIC.
    pub(crate) nics: Vec<Nic>,
    /// When each word a CAS executed on (node, region, offset) next takes
    /// another CAS (`Profile::atomic_word_ns`: one contended word's
    /// ceiling).
    pub(crate) atomic_words: HashMap<(usize, Region, u64), u64>,
    /// The queue pairs that fail during the run, drawn in advance
    /// ([`Chaos::link_failure_permille`](crate::Chaos::link_failure_permille)).
    pub(crate) link_failures: Vec<LinkFailure>,
    /// The requests on their way, by slot (`None`: a free slot).
    pub(crate) reqs: Vec<Option<NicRequest>>,
    /// Free slots of `reqs`.
    pub(crate) free_reqs: Vec<usize>,
    /// The ordered chains with a link not yet settled, by number.
    pub(crate) chains: HashMap<u64, Chain>,
    /// The next chain's number.
    pub(crate) next_chain: u64,
    /// The fates of the next requests posted, in order, whatever the dice
    /// draw (tests hit one request of a chain).
    #[cfg(test)]
    pub(crate) forced_fates: std::collections::VecDeque<Option<TransportFault>>,
}

impl Network {
    /// `nodes` idle NICs, nothing on its way.
    pub(crate) fn new(nodes: usize) -> Network {
        Network {
            nics: vec![Nic::default(); nodes],
            atomic_words: HashMap::new(),
            link_failures: Vec::new(),
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            chains: HashMap::new(),
            next_chain: 0,
            #[cfg(test)]
            forced_fates: std::collections::VecDeque::new(),
        }
    }

    /// Keeps `req` in a free slot; returns the slot.
    pub(crate) fn store(&mut self, req: NicRequest) -> usize {
        match self.free_reqs.pop() {
            Some(i) => {
                self.reqs[i] = Some(req);
                i
            }
            None => {
                self.reqs.push(Some(req));
                self.reqs.len() - 1
            }
        }
    }

    /// Frees slot `r` (its request is gone).
    pub(crate) fn release(&mut self, r: usize) {
        self.reqs[r] = None;
        self.free_reqs.push(r);
    }

    /// Whether `actor`'s queue pair to `node` is down at `t`.
    pub(crate) fn link_down(&self, actor: Actor, node: usize, t: u64) -> bool {
        self.link_failures
            .iter()
            .any(|f| f.actor == actor && f.node == node && f.at <= t && t < f.until)
    }

    /// Whether `actor`'s queue pair to `node` failed after `posted`, by
    /// `now` (a request posted at `posted` was outstanding then).
    pub(crate) fn link_failed_since(
        &self,
        actor: Actor,
        node: usize,
        posted: u64,
        now: u64,
    ) -> bool {
        self.link_failures
            .iter()
            .any(|f| f.actor == actor && f.node == node && posted < f.at && f.at <= now)
    }
}

/// Most parallel processing units a profile's NIC may have per direction.
pub(crate) const MAX_NIC_UNITS: usize = 32;

/// A node's NIC: when its units are next free, and its busy times.
#[derive(Clone, Copy, Default)]
pub(crate) struct Nic {
    /// When each transmit processing unit is next free (with one unit,
    /// `Profile::nic_units`, the one queue serving processing and wire
    /// together).
    pub(crate) tx_units: [u64; MAX_NIC_UNITS],
    /// When each receive processing unit is next free.
    pub(crate) rx_units: [u64; MAX_NIC_UNITS],
    /// With several units: when the link (transmit direction) is next free.
    pub(crate) link_free: u64,
    /// When the atomic unit is next free (`Profile::atomic_unit_ns`).
    pub(crate) atomic_free: u64,
    /// Transmit-queue time in the measured window spent on per-request
    /// processing, and on serialising bytes at link speed.
    pub(crate) tx_op_ns: u64,
    pub(crate) tx_wire_ns: u64,
    /// Receive-queue time in the measured window.
    pub(crate) rx_ns: u64,
}

/// A NIC request on its way through the simulated fabric.
pub(crate) struct NicRequest {
    /// Who posted it.
    pub(crate) actor: Actor,
    /// The poster's round it belongs to.
    pub(crate) round: u64,
    /// The posting client's incarnation (its process: a restarted client's
    /// new queue pairs never see its predecessor's completions).
    pub(crate) incarnation: u64,
    pub(crate) wr: WorkRequest,
    pub(crate) src: usize,
    pub(crate) dst: usize,
    pub(crate) resp_bytes: u64,
    /// When it was handed to the NIC (virtual time).
    pub(crate) posted: u64,
    /// The fault that hits it, if any.
    pub(crate) fate: Option<TransportFault>,
    /// The request of an error-then-land fault travelling on after its
    /// error completion: it executes, and completes nowhere.
    pub(crate) orphan: bool,
    /// A torn transfer: its words land one at a time ([`Chaos::torn_permille`](crate::Chaos::torn_permille)).
    pub(crate) torn: bool,
    /// A torn transfer's progress once its first word landed.
    pub(crate) placing: Option<InFlight>,
    /// A torn transfer that a failure after executing stops after this
    /// many words (a fault on a partly placed transfer).
    pub(crate) place_only: Option<u32>,
    /// The requester's queue pair to the responder failed while this was
    /// outstanding and it executes all the same (it was on the wire): its
    /// completion reports an error.
    pub(crate) link_error: bool,
    /// An access to the poster's own memory by its CPU (no queue pair).
    pub(crate) cpu: bool,
    /// Its place in an ordered chain ([`Chain`]), if it belongs to one.
    pub(crate) chain: Option<ChainSlot>,
    pub(crate) result: Option<Result<OpOutput, FabricError>>,
}

impl NicRequest {
    /// Whether this is an access to the poster's own memory by its CPU.
    pub(crate) fn is_cpu(&self) -> bool {
        self.cpu
    }

    /// A copy of this request that travels on by itself, executes at its
    /// responder and completes nowhere: an error-then-land request after
    /// its error (`fate` none), or a duplicated WRITE's second copy (`fate`
    /// [`TransportFault::DuplicateWrite`], which counts it apart).
    pub(crate) fn orphan(&self, fate: Option<TransportFault>) -> NicRequest {
        NicRequest {
            wr: self.wr.clone(),
            fate,
            orphan: true,
            placing: None,
            result: None,
            // A duplicate's copy is not the chain's link: the original is.
            chain: self
                .chain
                .filter(|_| fate != Some(TransportFault::DuplicateWrite)),
            ..*self
        }
    }
}

/// A request's place in an ordered chain: which chain, which link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChainSlot {
    pub(crate) chain: u64,
    pub(crate) pos: usize,
}

/// What a link of a chain has come to at its responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkState {
    /// Not yet executed, nor known never to.
    Pending,
    /// Executed; `errored` if its queue pair failed with it (its completion
    /// reports an error), so every link behind it reports one too.
    Executed { errored: bool },
    /// Never executes (failed before executing, refused, flushed).
    NotExecuted,
}

/// The requests of one ordered chain
/// ([`Endpoint::post_chain`](nessie_protocol::Endpoint::post_chain)), on
/// one queue pair to one node: an ordered link is sent behind its
/// predecessor and executes only after it executed; a fenced link is sent
/// only once its predecessor completed, and is flushed if it failed.
pub(crate) struct Chain {
    /// Who posted it.
    pub(crate) actor: crate::systems::Actor,
    /// The poster's round and incarnation when it posted the chain: a link
    /// sent or flushed later still answers that round.
    pub(crate) round: u64,
    pub(crate) incarnation: u64,
    /// The faults in force when it was posted, which every link meets.
    pub(crate) chaos: crate::Chaos,
    /// How each link follows the one before it (the first's is ignored).
    pub(crate) links: Vec<ChainLink>,
    /// Each link's request until it is sent (a fenced link and the ordered
    /// ones behind it wait for the fenced one's predecessor to complete).
    pub(crate) unsent: Vec<Option<WorkRequest>>,
    /// What each link came to.
    pub(crate) states: Vec<LinkState>,
    /// A link that reached its responder before its predecessor executed,
    /// held there until it does.
    pub(crate) parked: Vec<Option<usize>>,
}

/// One queue pair failing as a whole: `actor`'s to `node`, from `at` until
/// it is re-dialled at `until` ([`Chaos::link_failure_permille`](crate::Chaos::link_failure_permille)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LinkFailure {
    pub(crate) actor: Actor,
    pub(crate) node: usize,
    pub(crate) at: u64,
    pub(crate) until: u64,
}
