//! The fabric conformance suite (`nessie_tests::conformance`) on the
//! simulated fabric. The same bodies are meant for the verbs backend.

use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::Config;
use nessie_tests::conformance;

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

/// A deliberately broken fabric: its CAS swaps whatever the word holds
/// (a WRITE dressed as a CAS). The suite must reject it.
mod broken {
    use std::time::Duration;

    use nessie_fabric_sim::{SimEndpoint, SimFabric};
    use nessie_protocol::{
        Completion, Endpoint, Fabric, FabricError, Nanos, NodeId, Op, Topology, WorkRequest,
    };

    pub struct AlwaysSwap(pub SimFabric);
    pub struct AlwaysSwapEndpoint(SimEndpoint);

    impl Fabric for AlwaysSwap {
        type Endpoint = AlwaysSwapEndpoint;
        fn topology(&self) -> Topology {
            self.0.topology()
        }
        fn open(&self, node: NodeId) -> Result<AlwaysSwapEndpoint, FabricError> {
            self.0.open(node).map(AlwaysSwapEndpoint)
        }
    }

    impl Endpoint for AlwaysSwapEndpoint {
        fn node(&self) -> NodeId {
            self.0.node()
        }
        fn post(&mut self, mut wr: WorkRequest) -> Result<(), FabricError> {
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
    let f = broken::AlwaysSwap(fabric());
    let caught =
        std::panic::catch_unwind(|| conformance::cas_semantics_and_byte_order(&f)).is_err();
    assert!(
        caught,
        "the conformance suite accepted a CAS that always swaps"
    );
}
