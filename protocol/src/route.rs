//! Work request ids unique per endpoint: the sans-IO routing between the ids
//! a state machine numbers its requests with and the ids posted on an
//! endpoint, shared by the blocking driver ([`crate::driver`], under
//! [`Client`](crate::Client)) and the [`Pipeline`](crate::pipeline::Pipeline).
//!
//! Every machine numbers its own requests from zero, and a driver runs many
//! machines on one endpoint: the attempts of an operation and the operations
//! of a client one after another, and in a pipeline several side by side.
//! A round is given up at its attempt's deadline, so a completion can arrive
//! after its machine stopped waiting for it. Were the machine's own ids
//! posted, that late completion would answer whichever later request of a
//! later machine has the same number: a READ of an old data table entry
//! returned (and cached) as the READ of the entry the index names now, or a
//! CAS result taken for another CAS's (issue 24, hole 2).
//!
//! A [`Router`] gives every posted request an id no other request on the
//! endpoint has had (a sequence number above, the *lane* of the machine in
//! the low [`LANE_BITS`] bits), remembers the machine's own id, maps each
//! completion back to its lane and machine id, and drops every completion
//! whose request belongs to no running machine: a machine that finished is
//! [retired](Router::retire) with its routes. Sequence numbers wrap after
//! 2^48 requests on one endpoint (years at any NIC's rate).

use crate::fabric::{Completion, OpId, WorkRequest};

/// The low bits of an endpoint id that name the lane of its machine.
pub const LANE_BITS: u32 = 16;

/// Most lanes a router serves (lane numbers are `0..MAX_LANES`).
pub const MAX_LANES: usize = 1 << LANE_BITS;

const LANE_MASK: u64 = (1 << LANE_BITS) - 1;

/// The routes of one endpoint: for each lane (one running machine at a
/// time), the posted requests whose completions it still takes (module
/// docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Router {
    /// The next sequence number (never 0, so no endpoint id is 0).
    next: u64,
    /// Per lane: endpoint id and machine id of each request still routed.
    lanes: Vec<Vec<(u64, OpId)>>,
    /// Broken variant: post the machines' own ids and hand every completion
    /// to lane 0 ([`Router::reinstate_machine_local_ids`]).
    machine_local: bool,
}

impl Router {
    /// A router for `lanes` machines side by side (lanes `0..lanes`; at most
    /// [`MAX_LANES`], more are not routed).
    pub fn new(lanes: usize) -> Router {
        Router {
            next: 1,
            lanes: vec![Vec::new(); lanes.min(MAX_LANES)],
            machine_local: false,
        }
    }

    /// Test-only broken variant (the switch
    /// [`Faults::machine_local_request_ids`](crate::Faults), issue 24 hole
    /// 2): when `on`, requests are posted under their machine's own ids and
    /// every completion goes to lane 0, as before the router existed, so a
    /// late completion answers a later machine's request of the same number.
    pub fn reinstate_machine_local_ids(&mut self, on: bool) {
        self.machine_local = on;
    }

    /// Renumbers `wr`, posted by the machine of `lane`, with an id unique on
    /// the endpoint, and routes its completion back to that machine.
    pub fn outbound(&mut self, lane: usize, mut wr: WorkRequest) -> WorkRequest {
        if self.machine_local {
            return wr;
        }
        let id = (self.next << LANE_BITS) | (lane as u64 & LANE_MASK);
        self.next = (self.next + 1) & (u64::MAX >> LANE_BITS);
        if self.next == 0 {
            self.next = 1;
        }
        if let Some(routes) = self.lanes.get_mut(lane) {
            routes.push((id, wr.id));
        }
        wr.id = OpId(id);
        wr
    }

    /// The lane and the completion, under the machine's own id, that `c`
    /// (carrying an endpoint id) answers; `None` if its request belongs to no
    /// running machine (its machine finished, e.g. after giving the round up
    /// at its deadline): drop it. A request is answered once.
    pub fn inbound(&mut self, c: Completion) -> Option<(usize, Completion)> {
        if self.machine_local {
            return Some((0, c));
        }
        let lane = (c.id.0 & LANE_MASK) as usize;
        let routes = self.lanes.get_mut(lane)?;
        let k = routes.iter().position(|&(id, _)| id == c.id.0)?;
        // `remove`, not `swap_remove`: routes stay in posting order, so a
        // router's state does not depend on the order completions came in.
        let (_, mine) = routes.remove(k);
        Some((
            lane,
            Completion {
                id: mine,
                result: c.result,
            },
        ))
    }

    /// The machine of `lane` finished: completions still due to its requests
    /// will be dropped.
    pub fn retire(&mut self, lane: usize) {
        if let Some(routes) = self.lanes.get_mut(lane) {
            routes.clear();
        }
    }

    /// Every route still open: lane, endpoint id and the machine's own id,
    /// lane by lane in posting order. (The stateright model names states by
    /// them, with the endpoint ids renamed by rank: two routers that differ
    /// only in sequence numbers no request still carries behave alike.)
    pub fn routes(&self) -> impl Iterator<Item = (usize, u64, OpId)> + '_ {
        self.lanes
            .iter()
            .enumerate()
            .flat_map(|(lane, r)| r.iter().map(move |&(id, mine)| (lane, id, mine)))
    }

    /// Whether the broken variant of [`Router::reinstate_machine_local_ids`]
    /// is on.
    pub fn is_machine_local(&self) -> bool {
        self.machine_local
    }

    /// Requests of `lane` whose completions are still routed.
    pub fn routed(&self, lane: usize) -> usize {
        self.lanes.get(lane).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{FabricError, Op, OpOutput};

    fn wr(id: u64) -> WorkRequest {
        WorkRequest {
            id: OpId(id),
            op: Op::LocalRead { offset: 0, len: 8 },
        }
    }

    fn ok(id: OpId) -> Completion {
        Completion {
            id,
            result: Ok(OpOutput::Written),
        }
    }

    #[test]
    fn a_completion_goes_back_to_its_lane_under_the_machines_own_id_once() {
        let mut r = Router::new(2);
        let a = r.outbound(0, wr(0));
        let b = r.outbound(1, wr(0));
        assert_eq!((r.routed(0), r.routed(1)), (1, 1));
        assert_ne!(a.id, b.id);
        assert_eq!(r.inbound(ok(b.id)), Some((1, ok(OpId(0)))));
        assert_eq!(r.inbound(ok(b.id)), None, "answered once");
        assert_eq!(r.inbound(ok(a.id)), Some((0, ok(OpId(0)))));
        assert_eq!((r.routed(0), r.routed(1)), (0, 0));
    }

    #[test]
    fn a_late_completion_of_a_retired_machine_never_answers_the_next_one() {
        let mut r = Router::new(1);
        let first = r.outbound(0, wr(1));
        r.retire(0);
        // The next machine numbers its requests from zero again.
        let second = r.outbound(0, wr(1));
        assert_ne!(first.id, second.id);
        let late = Completion {
            id: first.id,
            result: Err(FabricError::Timeout),
        };
        assert_eq!(r.inbound(late), None);
        assert_eq!(r.inbound(ok(second.id)), Some((0, ok(OpId(1)))));
    }

    #[test]
    fn unknown_lanes_and_ids_are_dropped() {
        let mut r = Router::new(1);
        let w = r.outbound(3, wr(0));
        assert_eq!(r.inbound(ok(w.id)), None, "lane 3 is not served");
        assert_eq!(r.inbound(ok(OpId(12345))), None);
    }

    #[test]
    fn sequence_numbers_wrap_without_reaching_zero() {
        let mut r = Router::new(1);
        r.next = u64::MAX >> LANE_BITS;
        let a = r.outbound(0, wr(0));
        let b = r.outbound(0, wr(1));
        assert_ne!(a.id, b.id);
        assert_ne!(b.id.0 >> LANE_BITS, 0);
    }
}
