//! A machine's chain (`Io::chain_by`) through the blocking driver: posted
//! as one chain, awaited as one round (one round trip), its results in
//! order; and on an endpoint that posts no chains, refused whole, every
//! request failing with the refusal (nothing executed).

use std::time::Duration;

use nessie_exec::Driver;
use nessie_exec::{OpClass, Results};
use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::{
    ChainLink, Completion, Endpoint, Fabric, FabricError, Nanos, NodeId, Op, OpOutput, Region,
    RemoteAddr, TransportError, WorkRequest,
};

fn fabric() -> SimFabric {
    SimFabric::new(SimConfig::new(2, 64, 4096)).expect("valid config")
}

fn lock_then_read() -> Vec<(Op, ChainLink)> {
    vec![
        (
            Op::Cas {
                addr: RemoteAddr::index(NodeId(1), 0),
                expect: 0,
                new: 1,
            },
            ChainLink::Ordered,
        ),
        (
            Op::Read {
                addr: RemoteAddr::data(NodeId(1), 64),
                len: 8,
            },
            ChainLink::Fenced,
        ),
    ]
}

#[test]
fn a_chain_runs_as_one_round_with_its_results_in_order() {
    let f = fabric();
    f.write_word(NodeId(1), Region::Data, 64, 42).unwrap();
    let mut d = Driver::new(f.open(NodeId(0)).unwrap());
    let (r, stats) = d.run_plain(Some(Duration::from_secs(5)), |io| async move {
        let deadline = io.now().plus(Duration::from_secs(5));
        Ok::<Results, nessie_protocol::Error>(
            io.chain_by(lock_then_read(), OpClass::Index, deadline)
                .await,
        )
    });
    let r = r.unwrap();
    assert_eq!(r[0], Ok(OpOutput::Cas { previous: 0 }));
    assert_eq!(r[1], Ok(OpOutput::Read(42u64.to_le_bytes().to_vec())));
    assert_eq!(stats.round_trips, 1);
    assert_eq!(f.read_word(NodeId(1), Region::Index, 0), Ok(1));
}

/// An endpoint that posts no chains (the trait's default), over fabric-sim.
struct NoChains(nessie_fabric_sim::SimEndpoint);

impl Endpoint for NoChains {
    fn node(&self) -> NodeId {
        self.0.node()
    }
    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
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

#[test]
fn an_endpoint_without_chains_refuses_the_whole_chain_and_nothing_runs() {
    let f = fabric();
    let mut d = Driver::new(NoChains(f.open(NodeId(0)).unwrap()));
    let (r, _) = d.run_plain(Some(Duration::from_secs(5)), |io| async move {
        let deadline = io.now().plus(Duration::from_secs(5));
        Ok::<Results, nessie_protocol::Error>(
            io.chain_by(lock_then_read(), OpClass::Index, deadline)
                .await,
        )
    });
    let refused = Err(FabricError::Transport(TransportError::ChainsUnsupported));
    assert_eq!(r.unwrap(), vec![refused.clone(), refused]);
    assert_eq!(
        f.read_word(NodeId(1), Region::Index, 0),
        Ok(0),
        "nothing ran"
    );
}
