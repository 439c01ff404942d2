//! The fabric conformance suite (`nessie_tests::conformance`) on the
//! simulated fabric. The same bodies are meant for the verbs backend.

use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::Config;
use nessie_tests::conformance::{self, WindowRange};

fn cfg() -> Config {
    Config {
        nodes: 2,
        index_slots_per_node: 64,
        dtes_per_node: 64,
        clients_per_node: 1,
        ..Config::default()
    }
}

fn fabric() -> SimFabric {
    SimFabric::new(SimConfig::from_topology(cfg().topology())).expect("fabric")
}

#[test]
fn read_write_round_trip() {
    conformance::read_write_round_trip(&fabric());
}

#[test]
fn cas_semantics_and_byte_order() {
    conformance::cas_semantics_and_byte_order(&fabric());
}

#[test]
fn bad_addresses_are_refused() {
    conformance::bad_addresses_are_refused(&fabric());
}

#[test]
fn many_requests_in_flight() {
    conformance::many_requests_in_flight(&fabric());
}

#[test]
fn local_path_is_the_nodes_own_data_table() {
    conformance::local_path_is_the_nodes_own_data_table(&fabric());
}

#[test]
fn protocol_runs_on_the_fabric() {
    conformance::protocol_runs_on_the_fabric(&fabric(), cfg());
}

#[test]
fn windows_carry_their_key_until_rebound() {
    conformance::windows_carry_their_key_until_rebound(&fabric(), WindowRange::Window);
}

#[test]
fn a_fabric_that_ignores_window_keys_is_rejected() {
    let f = broken::Broken(fabric(), broken::Flaw::KeyBlind);
    let caught = std::panic::catch_unwind(|| {
        conformance::windows_carry_their_key_until_rebound(&f, WindowRange::Window)
    })
    .is_err();
    assert!(
        caught,
        "the conformance suite accepted a NIC blind to window keys"
    );
}

#[test]
fn a_client_id_is_held_by_one_client_at_a_time() {
    conformance::a_client_id_is_held_by_one_client_at_a_time(&fabric(), cfg());
}

#[test]
fn a_fabric_that_keeps_no_registry_of_ids_is_rejected() {
    // Its endpoints record no claim: the registry word still refuses the
    // twin, but a dropped client's id stays taken for good.
    let f = broken::Broken(fabric(), broken::Flaw::NoIdRegistry);
    let caught = std::panic::catch_unwind(|| {
        conformance::a_client_id_is_held_by_one_client_at_a_time(&f, cfg())
    })
    .is_err();
    assert!(
        caught,
        "the conformance suite accepted a fabric that keeps no ids"
    );
}

/// A deliberately broken fabric: its CAS swaps whatever the word holds
/// (a WRITE dressed as a CAS), or its NIC carries a windowed request under
/// whatever key it holds. The suite must reject each.
mod broken {
    use std::time::Duration;

    use nessie_fabric_sim::{SimEndpoint, SimFabric};
    use nessie_protocol::{
        Completion, Endpoint, Fabric, FabricError, Nanos, NodeId, Op, Topology, WorkRequest,
    };

    /// What is wrong with the fabric.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub enum Flaw {
        /// Its CAS always swaps.
        AlwaysSwap,
        /// Its NIC ignores window keys (a windowed request runs as a plain one).
        KeyBlind,
        /// Its endpoints keep no registry of the client ids in use (every
        /// one of this wrapper's endpoints claims nothing; the other flaws
        /// share that, and their bodies claim no id).
        NoIdRegistry,
    }

    pub struct Broken(pub SimFabric, pub Flaw);
    pub struct BrokenEndpoint(SimEndpoint, Flaw);

    impl Fabric for Broken {
        type Endpoint = BrokenEndpoint;
        fn topology(&self) -> Topology {
            self.0.topology()
        }
        fn open(&self, node: NodeId) -> Result<BrokenEndpoint, FabricError> {
            let flaw = self.1;
            self.0.open(node).map(|ep| BrokenEndpoint(ep, flaw))
        }
    }

    impl Endpoint for BrokenEndpoint {
        fn node(&self) -> NodeId {
            self.0.node()
        }
        fn post(&mut self, mut wr: WorkRequest) -> Result<(), FabricError> {
            if self.1 == Flaw::NoIdRegistry {
                return self.0.post(wr);
            }
            if self.1 == Flaw::KeyBlind {
                if let Op::Windowed { op, .. } = wr.op {
                    wr.op = *op;
                }
                return self.0.post(wr);
            }
            if let Op::Cas { addr, new, .. } = wr.op {
                // Read the word, then CAS with it as the expectation: always swaps.
                let current = self
                    .0
                    .fabric()
                    .read_word(addr.node, addr.region, addr.offset)?;
                wr.op = Op::Cas {
                    addr,
                    expect: current,
                    new,
                };
            }
            self.0.post(wr)
        }
        fn poll(&mut self, out: &mut Vec<Completion>) {
            self.0.poll(out)
        }
        fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
            self.0.wait(out, timeout)
        }
        fn now(&self) -> Nanos {
            self.0.now()
        }
    }
}

#[test]
fn a_fabric_whose_cas_always_swaps_is_rejected() {
    let f = broken::Broken(fabric(), broken::Flaw::AlwaysSwap);
    let caught =
        std::panic::catch_unwind(|| conformance::cas_semantics_and_byte_order(&f)).is_err();
    assert!(
        caught,
        "the conformance suite accepted a CAS that always swaps"
    );
}

#[test]
fn unsignaled_writes_land() {
    conformance::unsignaled_writes_land(&fabric(), true);
}

#[test]
fn failing_unsignaled_write_reports_its_error() {
    conformance::failing_unsignaled_write_reports_its_error(&fabric());
}

#[test]
fn many_unsignaled_posts_in_a_row() {
    conformance::many_unsignaled_posts_in_a_row(&fabric(), true);
}

/// Deliberately broken unsignaled posting, for the checks above to catch.
mod unsignaled {
    use std::collections::HashSet;
    use std::time::Duration;

    use nessie_fabric_sim::{SimEndpoint, SimFabric};
    use nessie_protocol::{
        Completion, Endpoint, Fabric, FabricError, Nanos, NodeId, Topology, WorkRequest,
    };

    /// How `post_unsignaled` breaks the `Endpoint` contract. Not a
    /// transport fault (`nessie_protocol::TransportFault` names what a
    /// correct backend's transport may do to a request, which the protocol
    /// must survive): these are backends that are wrong, which the
    /// conformance suite must reject.
    #[derive(Clone, Copy)]
    pub enum Breach {
        /// It does nothing (and says it posted).
        Drops,
        /// It posts signaled: successes complete (the trait's default, which
        /// the contract allows; a backend claiming suppression must not).
        DeliversSuccesses,
        /// Its failures never complete.
        SwallowsErrors,
    }

    pub struct Broken(pub SimFabric, pub Breach);

    pub struct BrokenEndpoint {
        inner: SimEndpoint,
        fault: Breach,
        unsignaled: HashSet<u64>,
    }

    impl Fabric for Broken {
        type Endpoint = BrokenEndpoint;
        fn topology(&self) -> Topology {
            self.0.topology()
        }
        fn open(&self, node: NodeId) -> Result<BrokenEndpoint, FabricError> {
            Ok(BrokenEndpoint {
                inner: self.0.open(node)?,
                fault: self.1,
                unsignaled: HashSet::new(),
            })
        }
    }

    impl BrokenEndpoint {
        fn filter(&self, out: &mut Vec<Completion>, from: usize) {
            if matches!(self.fault, Breach::SwallowsErrors) {
                let mut k = from;
                while k < out.len() {
                    if self.unsignaled.contains(&out[k].id.0) {
                        out.remove(k);
                    } else {
                        k += 1;
                    }
                }
            }
        }
    }

    impl Endpoint for BrokenEndpoint {
        fn node(&self) -> NodeId {
            self.inner.node()
        }
        fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
            self.inner.post(wr)
        }
        fn post_unsignaled(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
            match self.fault {
                Breach::Drops => Ok(()),
                Breach::DeliversSuccesses => self.inner.post(wr),
                Breach::SwallowsErrors => {
                    self.unsignaled.insert(wr.id.0);
                    self.inner.post_unsignaled(wr)
                }
            }
        }
        fn poll(&mut self, out: &mut Vec<Completion>) {
            let from = out.len();
            self.inner.poll(out);
            self.filter(out, from);
        }
        fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
            let from = out.len();
            self.inner.wait(out, timeout);
            self.filter(out, from);
        }
        fn now(&self) -> Nanos {
            self.inner.now()
        }
    }
}

fn caught(f: impl FnOnce() + std::panic::UnwindSafe) -> bool {
    std::panic::catch_unwind(f).is_err()
}

#[test]
fn unsignaled_writes_that_do_not_land_are_caught() {
    use unsignaled::{Breach, Broken};
    assert!(caught(|| conformance::unsignaled_writes_land(
        &Broken(fabric(), Breach::Drops),
        false
    )));
    assert!(caught(|| conformance::many_unsignaled_posts_in_a_row(
        &Broken(fabric(), Breach::Drops),
        false
    )));
}

#[test]
fn delivered_successes_are_caught_only_where_suppression_is_claimed() {
    use unsignaled::{Breach, Broken};
    // The trait's default (post signaled) keeps the contract...
    conformance::unsignaled_writes_land(&Broken(fabric(), Breach::DeliversSuccesses), false);
    conformance::many_unsignaled_posts_in_a_row(
        &Broken(fabric(), Breach::DeliversSuccesses),
        false,
    );
    // ...but not a backend's claim to suppress the successes.
    assert!(caught(|| conformance::unsignaled_writes_land(
        &Broken(fabric(), Breach::DeliversSuccesses),
        true
    )));
}

#[test]
fn a_failed_unsignaled_write_that_never_completes_is_caught() {
    use unsignaled::{Breach, Broken};
    assert!(caught(|| {
        conformance::failing_unsignaled_write_reports_its_error(&Broken(
            fabric(),
            Breach::SwallowsErrors,
        ))
    }));
}
