//! Clients without storage in the checked fabrics (the model's memory and
//! the cluster simulator's): a node's agent making a pass atomically, and a
//! pure client taking its share and getting its first generation before a
//! run starts (docs/protocol.md §2.4).

use nessie_protocol::pure::{Agent, LeaseBlock, LeaseWord, PureWindows};
use nessie_protocol::{ClientId, Config, Op, OpId, Region, WorkRequest};

use crate::memory::{InFlight, Memory, WordOrder};

/// One pass of `agent` at `now` (its node's clock), its requests (the
/// node's CPU and its loopback CASes) run atomically on `mem`; returns how
/// many it made.
pub fn agent_pass(cfg: &Config, mem: &mut Memory, agent: &mut Agent, now: u64) -> usize {
    let node = agent.node();
    let mut ops = agent.start(cfg, now);
    let mut made = 0;
    while !ops.is_empty() {
        made += ops.len();
        let results: Vec<_> = ops
            .into_iter()
            .map(|op| {
                let wr = WorkRequest { id: OpId(0), op };
                InFlight::new(wr, 0).run_to_end(mem, node, WordOrder::Ascending)
            })
            .collect();
        ops = agent.advance(cfg, &results);
    }
    made
}

/// Client without storage `id` (nonce `nonce`) takes its share and its
/// node's `agent` grants it its first generation at `now`, atomically, as
/// before a run starts: the client begins holding its keys.
///
/// # Errors
///
/// What went wrong, in words (a configuration without the client's lease
/// block, or memory that does not hold what the agent stored).
pub fn boot(
    cfg: &Config,
    mem: &mut Memory,
    agent: &mut Agent,
    id: ClientId,
    nonce: u32,
    now: u64,
) -> Result<PureWindows, String> {
    let at = cfg
        .lease_block(id)
        .ok_or_else(|| format!("{id} has no lease block"))?;
    let mut p = PureWindows::new(nonce);
    let take = LeaseWord {
        holder: p.nonce,
        requested: 1,
        granted: 0,
    };
    let wr = WorkRequest {
        id: OpId(0),
        op: Op::LocalWrite {
            offset: at,
            data: take.encode().to_le_bytes().to_vec(),
        },
    };
    InFlight::new(wr, 0)
        .run_to_end(mem, id.node, WordOrder::Ascending)
        .map_err(|e| e.to_string())?;
    agent_pass(cfg, mem, agent, now);
    let bytes = mem
        .read(id.node, Region::Data, at, cfg.lease_block_bytes())
        .map_err(|e| e.to_string())?;
    let block = LeaseBlock::decode(&bytes).ok_or("a short lease block")?;
    p.keys = block
        .granted_keys(p.nonce)
        .ok_or_else(|| format!("{id}'s agent granted no keys"))?;
    p.held = true;
    p.generation = block.lease.granted;
    p.beat = block.beat;
    Ok(p)
}
