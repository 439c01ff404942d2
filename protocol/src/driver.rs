//! A blocking driver: runs one state machine to completion on an endpoint.

use std::time::Duration;

use crate::error::Error;
use crate::fabric::{Completion, Endpoint};
use crate::machine::{ClientState, Machine, Poll};
use crate::route::Router;
use crate::time::wait_for;

/// The longest one wait for completions blocks before the machine is polled
/// again, when its own wake-up ([`Machine::poll_timeout`]) is later or none
/// (so that it sees time pass on a clock that moves without the driver).
const WAIT_SLICE: Duration = Duration::from_millis(5);

/// Runs `machine` on `ep` until it finishes, passing the node's time at
/// every step. Work requests the endpoint refuses to post complete with the
/// refusal, so the machine handles them like any failed operation.
///
/// Requests are posted under ids unique on the endpoint (lane 0 of
/// `router`, which the caller keeps for the endpoint's lifetime, across
/// attempts and operations), and completions are routed back: a late
/// completion of an earlier machine on the endpoint, whose round was given
/// up at its deadline, is dropped instead of answering this machine's
/// request of the same number (`crate::route`). The test-only switch
/// [`Faults::machine_local_request_ids`](crate::Faults) reinstates the old
/// behaviour.
pub fn run<M: Machine, E: Endpoint>(
    machine: &mut M,
    client: &mut ClientState,
    ep: &mut E,
    router: &mut Router,
) -> Result<M::Output, Error> {
    router.reinstate_machine_local_ids(client.faults.machine_local_request_ids);
    let mut completions: Vec<Completion> = Vec::new();
    let deliver = |machine: &mut M, router: &mut Router, c: Completion| {
        if let Some((_, c)) = router.inbound(c) {
            machine.complete(c);
        }
    };
    let result = loop {
        let now = ep.now();
        match machine.poll(client, now) {
            Poll::Done(result) => break result,
            Poll::Post(wrs) => {
                for wr in wrs {
                    let wr = router.outbound(0, wr);
                    let id = wr.id;
                    if let Err(e) = ep.post_issued(wr, now) {
                        deliver(machine, router, Completion { id, result: Err(e) });
                    }
                }
            }
            Poll::Pending => {
                let wait = wait_for(now, machine.poll_timeout(client), WAIT_SLICE);
                ep.wait(&mut completions, wait);
                for c in completions.drain(..) {
                    deliver(machine, router, c);
                }
            }
        }
    };
    router.retire(0);
    result
}
