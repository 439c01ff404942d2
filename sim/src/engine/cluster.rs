//! The machines of a simulated cluster ([`Cluster`]): the memory of every
//! node, which nodes are down, and the cores the client threads, server
//! workers and background threads share.

use nessie_check::memory::Memory;
use nessie_protocol::pure::Agent;

/// The nodes' memory, whether each is up, their cores, and their agents.
pub(crate) struct Cluster {
    /// Every node's registered memory.
    pub(crate) mem: Memory,
    /// Nodes out (an outage), by number.
    pub(crate) node_down: Vec<bool>,
    /// When each core (client threads', then server workers') is next free.
    pub(crate) cores: Vec<u64>,
    /// Busy background threads sharing each core.
    pub(crate) background: Vec<u64>,
    /// Each node's agent for its clients without storage (docs/protocol.md
    /// §2.4): a pass every [`AGENT_PERIOD_NS`], off every request's path.
    pub(crate) agents: Vec<Agent>,
}

/// How often a node's agent makes a pass over its lease blocks.
pub(crate) const AGENT_PERIOD_NS: u64 = 10_000;

/// The nonce of client `c`'s incarnation `incarnation` in a run of `seed`
/// (a client without storage's lease holder: each process draws its own).
pub(crate) fn pure_nonce(seed: u64, c: usize, incarnation: u64) -> u32 {
    let mut s = seed ^ (c as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (incarnation << 40);
    nessie_protocol::rng::splitmix64(&mut s) as u32
}

impl Cluster {
    /// The earliest time from `t` at which the thread of `core` has its
    /// core: with b background threads on the core, round robin gives it the
    /// first slice (`slice` ns) of every b + 1 (each core's rounds offset by
    /// its number, so that cores do not switch in lockstep).
    pub(crate) fn running_at(&self, core: usize, t: u64, slice: u64) -> u64 {
        let b = self.background[core];
        let slice = slice.max(1);
        if b == 0 {
            return t;
        }
        let period = slice * (b + 1);
        let offset = (core as u64 % (b + 1)) * slice;
        let phase = (t + period - offset % period) % period;
        if phase < slice {
            t
        } else {
            t + (period - phase)
        }
    }
}
