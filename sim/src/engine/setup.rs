//! A cluster in its initial state: the configuration, the clients (each
//! with its clock offset, generators and, for the baselines and Cell, their
//! machines), the servers of a server-driven system and the planned faults.

use super::*;
use cluster::pure_nonce;
use nessie_protocol::pure::Agent;

impl Engine {
    /// A cluster in its initial state: nothing preloaded, nothing scheduled.
    pub(crate) fn new(spec: &SimSpec) -> Result<Engine, SimError> {
        let cfg = Arc::new(config(spec)?);
        let mut dice = Dice::new(spec.seed);
        let skew = u64::try_from(cfg.clock_skew.as_nanos()).unwrap_or(u64::MAX);
        let mut setup = match spec.system {
            SystemKind::Nessie => None,
            SystemKind::Cell => Some(crate::systems::cell(spec, &cfg)?),
            other => Some(crate::systems::baseline(
                other,
                &cfg,
                spec.server_workers,
                spec.hy,
                spec.server_faults,
                spec.seed,
            )?),
        };
        let mut clients = Vec::new();
        let per_node = cfg.shares_per_node();
        // YCSB's E scans 1 to 100 entries (`maxscanlength`); Cell pages at
        // most its scan page.
        let max_scan = match spec.system {
            SystemKind::Cell => MAX_SCAN_LEN.min(crate::systems::cell_config(spec, &cfg).scan_page),
            _ => MAX_SCAN_LEN,
        };
        for n in 0..spec.nodes {
            for i in 0..per_node {
                let core = usize::from(n) * usize::from(spec.clients_per_node)
                    + usize::from(i / spec.depth);
                let id = ClientId {
                    node: NodeId(n),
                    index: i,
                };
                let mut state = ClientState::new(cfg.clone(), id)?;
                state.faults = spec.faults;
                let kv_core = setup
                    .as_mut()
                    .and_then(|s| (!s.cores.is_empty()).then(|| s.cores.remove(0)));
                let cell = setup
                    .as_mut()
                    .and_then(|s| (!s.cell.is_empty()).then(|| s.cell.remove(0)));
                clients.push(SimClient {
                    next_arrival: 0,
                    state,
                    machine: None,
                    op: None,
                    jitter: kv_core.as_ref().map(|_| Jitter::new(id)),
                    kv_core,
                    cell,
                    awaiting: None,
                    due: None,
                    preload: Vec::new(),
                    local_round: false,
                    outstanding: 0,
                    round: 0,
                    rng: workload_stream(spec, clients.len() as u64),
                    ycsb: spec
                        .ycsb
                        .map(|w| YcsbGen::new(w, spec.keys, clients.len() as u64, max_scan)),
                    clock_offset: if spec.chaos.skew {
                        dice.below(skew + 1)
                    } else {
                        0
                    },
                    down_since: None,
                    straggler: spec.chaos.straggler_step_ns > 0 && dice.chance(500),
                    slowed: false,
                    commits: Vec::new(),
                    incarnation: 0,
                    router: router(spec),
                    late: Vec::new(),
                    core,
                });
            }
        }
        if spec.chaos.skew && clients.len() > 1 {
            // Reach the full allowance: the first clock is exact, the last one
            // the full skew ahead.
            clients[0].clock_offset = 0;
            let last = clients.len() - 1;
            clients[last].clock_offset = skew;
        }
        // Cores: each node's client threads, then every node's server
        // workers; background threads spread over a node's cores in that
        // order.
        let nodes = usize::from(spec.nodes);
        let cpn = usize::from(spec.clients_per_node);
        let workers = setup
            .as_ref()
            .and_then(|s| s.servers.as_ref())
            .map_or(0, |s| s.workers_per_node);
        let node_cores = (cpn + workers) as u64;
        let b = u64::from(spec.background_per_node);
        let share = |pos: usize| b / node_cores + u64::from((pos as u64) < b % node_cores);
        let mut background: Vec<u64> = (0..nodes * cpn).map(|core| share(core % cpn)).collect();
        let mut mem = match &setup {
            Some(s) => Memory::with_topology(s.topology),
            None => Memory::new(&cfg),
        };
        let mut agents: Vec<Agent> = (0..spec.nodes).map(|n| Agent::new(NodeId(n))).collect();
        // Application hosts (NICs past the nodes') for clients without
        // storage, when they run on hosts of their own.
        let hosts = if cfg.pure_clients_per_node > 0 && spec.tuning.pure_client_hosts == Some(true)
        {
            nodes
        } else {
            0
        };
        for (c, client) in clients.iter_mut().enumerate() {
            let id = client.state.id;
            if client.state.pure.is_some() {
                // Each begins holding its share and its first keys.
                let nonce = pure_nonce(spec.seed, c, 0);
                let agent = &mut agents[usize::from(id.node.0)];
                let p = nessie_check::pure::boot(&cfg, &mut mem, agent, id, nonce, EPOCH)
                    .map_err(SimError::Spec)?;
                client.state.pure = Some(p);
            }
        }
        let cell_servers = setup
            .as_ref()
            .map(|s| s.cell_servers.clone())
            .unwrap_or_default();
        if let Some(st) = cell_servers.first() {
            // Cell's first meganode, before time starts.
            let mut m = nessie_cell::bootstrap_machine(st, 1);
            crate::systems::run_at_once(&mut mem, st, &mut m, Nanos(EPOCH / 2))?;
        }
        let dir = setup.as_ref().and_then(|s| s.dir.clone());
        let core_maker = setup.as_mut().and_then(|s| s.maker.take());
        let cell_maker = setup.as_mut().and_then(|s| s.cell_maker.take());
        let mut servers = setup.and_then(|s| s.servers);
        if let Some(sv) = servers.as_mut() {
            for (w, worker) in sv.workers.iter_mut().enumerate() {
                worker.core = nodes * cpn + w;
                // Request workers share their node's cores with background
                // threads; Cell's maintenance and recovery threads run on
                // cores of their own.
                background.push(if worker.maint.is_some() || worker.recovery {
                    0
                } else {
                    share(cpn + w % workers)
                });
            }
        }
        Ok(Engine {
            p: spec.profile.clone(),
            spec: spec.clone(),
            cfg,
            events: Events::new(EPOCH, EPOCH + (spec.seconds * 1e9) as u64),
            cluster: Cluster {
                mem,
                node_down: vec![false; nodes],
                cores: vec![0; background.len()],
                background,
                agents,
            },
            clients,
            net: Network::new(nodes + hosts),
            chaos: ChaosState {
                dice,
                rare_dice: Dice::new(spec.seed ^ 0x5eed_0fd0_b1e5),
                counts: ChaosCounts::default(),
                held: None,
            },
            server_side: ServerSide {
                servers,
                core_maker,
                cell_maker,
                cell_servers,
                cell_searches_before: (0, 0),
                dir,
                lost_servers: crate::failures::Failures::new(nodes, spec.seed),
            },
            workload: Workload::new(spec),
            checks: Checks::default(),
        })
    }
}

/// The seed of client `k`'s workload generator (an xorshift state: odd,
/// so never zero): a SplitMix64 mix of the spec's seed and `k`, so that no
/// two seeds draw the same stream; or, for a case printed before
/// 2026-11-30, the seeding of then ([`SimSpec::paired_workload_seeds`]).
fn workload_stream(spec: &SimSpec, k: u64) -> u64 {
    let mut s = spec.seed ^ (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    if spec.paired_workload_seeds {
        s | 1
    } else {
        nessie_protocol::rng::splitmix64(&mut s) | 1
    }
}
