//! The client side of the request slots: send a request to a key's home node
//! and wait for the response in the client's own response slot.

use std::time::{Duration, Instant};

use nessie_protocol::{ClientId, Config, Endpoint, Error, NodeId, OpStats};

use crate::io::Io;
use crate::mailbox::{encode, split_ctrl, MailboxLayout, Request, Response, RpcOp};

/// A client's request channel to every node's server workers.
pub struct RpcClient {
    layout: MailboxLayout,
    /// The client's global slot number.
    g: u32,
    seq: u32,
    /// How long to wait for a response before reporting a timeout.
    pub timeout: Duration,
}

impl RpcClient {
    /// The channel of client `id` under `layout`.
    pub fn new(
        layout: MailboxLayout,
        id: ClientId,
        clients_per_node: u16,
        timeout: Duration,
    ) -> RpcClient {
        let g = u32::from(id.node.0) * u32::from(clients_per_node) + u32::from(id.index);
        // A server skips a slot whose sequence number it has already served,
        // so a client that reuses a slot (a restarted client with the same id)
        // must not start where its predecessor stopped: it starts at a number
        // drawn from the clock (a collision has probability 2^-32).
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let seq = nessie_protocol::hash::stable_hash(clock, &g.to_le_bytes()) as u32;
        RpcClient {
            layout,
            g,
            seq,
            timeout,
        }
    }

    /// Sends `req` to `home`'s workers and waits for the response. Counts the
    /// request WRITE (a CPU write when `home` is the client's own node), the
    /// server's response WRITE (`server_writes`) and the final CPU read of the
    /// response; polling reads are not counted (they are the CPU time the
    /// benchmark reports).
    pub fn call<E: Endpoint>(
        &mut self,
        io: &mut Io<E>,
        home: NodeId,
        req: &Request,
        stats: &mut OpStats,
    ) -> Result<Response, Error> {
        self.seq = self.seq.wrapping_add(1).max(1);
        let seq = self.seq;
        let msg = encode(seq, req.op as u8, &req.key, &req.value);
        let req_end = self.layout.request_end(self.g);
        let local = home == io.node();
        if local {
            stats.local_writes += 1;
            stats.local_bytes += msg.len() as u64;
            io.local_write(req_end - msg.len() as u64, msg)?;
        } else {
            io.write(MailboxLayout::placed(home, req_end, msg.len()), msg, stats)?;
        }
        let resp_end = self.layout.response_end(self.g);
        let start = Instant::now();
        loop {
            let (got, _) = split_ctrl(io.local_word(resp_end - 8)?);
            if got == seq {
                if let Some((m, total)) = io
                    .read_message(resp_end, self.layout.slot_bytes)?
                    .filter(|(m, _)| m.seq == seq)
                {
                    stats.local_reads += 1;
                    stats.local_bytes += total;
                    if !local {
                        stats.server_writes += 1;
                        stats.fabric_bytes += total;
                    }
                    return Response::from_message(&m).ok_or_else(|| {
                        Error::Corrupt(format!("response with unknown status {}", m.code))
                    });
                }
            }
            if start.elapsed() > self.timeout {
                return Err(Error::Timeout);
            }
            // Yield between polls: a machine with fewer cores than client and
            // server threads (this one has 2) would otherwise let a spinning
            // client starve the very worker it waits for.
            std::thread::yield_now();
        }
    }

    /// One operation of a server-driven path, as NessieSD, NessieHY and
    /// Pilaf clients issue it: checks the sizes against `cfg`, sends `op` on
    /// `key` (and `value`) to `home`, sets `last` to the call's fabric work
    /// (one attempt), and turns a failed status into its error. A `tracing`
    /// span named after `system` covers the call.
    #[allow(clippy::too_many_arguments)]
    pub fn request<E: Endpoint>(
        &mut self,
        io: &mut Io<E>,
        system: &'static str,
        cfg: &Config,
        home: NodeId,
        op: RpcOp,
        key: &[u8],
        value: &[u8],
        last: &mut OpStats,
    ) -> Result<Response, Error> {
        cfg.check_key(key)?;
        cfg.check_value(value)?;
        let span = tracing::debug_span!("rpc", system, ?op, home = %home, key_len = key.len());
        let _g = span.enter();
        let mut stats = OpStats {
            attempts: 1,
            ..OpStats::default()
        };
        let req = Request {
            op,
            key: key.to_vec(),
            value: value.to_vec(),
        };
        let r = self.call(io, home, &req, &mut stats);
        *last = stats;
        let resp = r?;
        match resp.error(home) {
            Some(e) => Err(e),
            None => Ok(resp),
        }
    }
}
