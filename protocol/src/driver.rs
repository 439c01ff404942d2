//! A blocking driver: runs one state machine to completion on an endpoint.

use std::time::Duration;

use crate::error::Error;
use crate::fabric::{Completion, Endpoint};
use crate::machine::{ClientState, Machine, Poll};

/// How long one wait for completions may block before the machine is polled
/// again (so that it sees time pass).
const WAIT_SLICE: Duration = Duration::from_millis(5);

/// Runs `machine` on `ep` until it finishes, passing the node's time at
/// every step. Work requests the endpoint refuses to post complete with the
/// refusal, so the machine handles them like any failed operation.
pub fn run<M: Machine, E: Endpoint>(
    machine: &mut M,
    client: &mut ClientState,
    ep: &mut E,
) -> Result<M::Output, Error> {
    let mut completions: Vec<Completion> = Vec::new();
    loop {
        match machine.poll(client, ep.now()) {
            Poll::Done(result) => return result,
            Poll::Post(wrs) => {
                for wr in wrs {
                    let id = wr.id;
                    if let Err(e) = ep.post(wr) {
                        machine.complete(Completion { id, result: Err(e) });
                    }
                }
            }
            Poll::Pending => {
                ep.wait(&mut completions, WAIT_SLICE);
                for c in completions.drain(..) {
                    machine.complete(c);
                }
            }
        }
    }
}
