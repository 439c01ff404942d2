//! Synthetic key-value histories with a known verdict, for testing and
//! benchmarking the linearizability checker on sizes no test cluster
//! produces quickly.
//!
//! [`linearizable`] simulates clients that each run one operation at a time
//! against an atomic map: every operation takes effect at a point strictly
//! inside its interval, so the history is linearizable by construction. A
//! chosen share of the writes gets an unknown outcome ([`crate::Failure::Unknown`]);
//! half of those take effect, half do not, as after a node failure.
//! [`plant_violation`] then edits one read so that the history is certainly
//! not linearizable, whichever way the unknown writes went.

use std::collections::HashMap;

use nessie_protocol::{Request, Response};

use crate::history::{Event, Failure, Ret};

/// The shape of a synthetic history.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Spec {
    /// Operations in all.
    pub ops: usize,
    /// Concurrent clients (each runs one operation at a time).
    pub clients: usize,
    /// Distinct keys (chosen uniformly).
    pub keys: usize,
    /// Percent of GETs.
    pub get_pct: u32,
    /// Percent of DELETEs (the rest are PUTs).
    pub delete_pct: u32,
    /// Percent of all operations that are writes of unknown outcome (taken
    /// from the PUTs and DELETEs; at most all of them).
    pub unknown_pct: u32,
    /// Longest operation, in time units (the shortest is 1).
    pub max_duration: u64,
    /// Longest pause of a client between two operations.
    pub max_think: u64,
    /// A node failure, if any: the keys it holds fail for a while.
    pub outage: Option<Outage>,
    /// Seed of the generator.
    pub seed: u64,
}

/// A node that is down for part of a history: while it is, every operation
/// on its keys fails, reads with nothing learnt and writes with an unknown
/// outcome (a few of them having taken effect before the failure showed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Outage {
    /// The node holds the keys whose number is a multiple of this (3: one
    /// node of three).
    pub keys_every: usize,
    /// Start of the outage, in percent of the operations.
    pub from_pct: u32,
    /// End of the outage, in percent of the operations.
    pub to_pct: u32,
    /// Percent of the failed writes that nevertheless took effect.
    pub effect_pct: u32,
}

impl Spec {
    /// `ops` operations of 12 clients on `keys` keys, 50 % GETs, 10 %
    /// DELETEs and `unknown_pct` % writes of unknown outcome.
    pub fn new(ops: usize, keys: usize, unknown_pct: u32, seed: u64) -> Spec {
        Spec {
            ops,
            clients: 12,
            keys,
            get_pct: 50,
            delete_pct: 10,
            unknown_pct,
            max_duration: 20,
            max_think: 10,
            outage: None,
            seed,
        }
    }

    /// `ops` operations on `keys` keys, no scattered unknown outcomes, one
    /// node of three down for 30 % of the history: about 10 % of the
    /// operations fail (writes with unknown outcome, 10 % of which took
    /// effect; reads with nothing learnt).
    pub fn node_down(ops: usize, keys: usize, seed: u64) -> Spec {
        Spec {
            unknown_pct: 0,
            outage: Some(Outage {
                keys_every: 3,
                from_pct: 40,
                to_pct: 70,
                effect_pct: 10,
            }),
            ..Spec::new(ops, keys, 0, seed)
        }
    }
}

/// The generated histories' draws: the workspace's one generator
/// (`nessie_protocol::rng`), seeded from any value.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        let mut s = seed;
        Rng(nessie_protocol::rng::splitmix64(&mut s) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        nessie_protocol::rng::xorshift64(&mut self.0)
    }

    /// A number below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

struct Planned {
    client: usize,
    key: usize,
    request: Request,
    unknown: bool,
    takes_effect: bool,
    invoke: u64,
    response: u64,
    point: u64,
}

/// A linearizable history of shape `spec` (see the module documentation).
/// Events are returned in invocation order, with distinct timestamps.
pub fn linearizable(spec: &Spec) -> Vec<Event> {
    let mut rng = Rng::new(spec.seed);
    let clients = spec.clients.max(1);
    let write_pct = 100u64.saturating_sub(u64::from(spec.get_pct)).max(1);
    let mut clock = vec![0u64; clients];
    let mut planned = Vec::with_capacity(spec.ops);
    for n in 0..spec.ops {
        let client = n % clients;
        // Times are doubled so that an effect point fits strictly inside
        // every interval, even one of length 1.
        let invoke = clock[client] + 2 * rng.below(spec.max_think + 1);
        let duration = 1 + rng.below(spec.max_duration.max(1));
        let response = invoke + 2 * duration;
        clock[client] = response + 2;
        let point = invoke + 1 + 2 * rng.below(duration);
        let key = rng.below(spec.keys.max(1) as u64) as usize;
        let dice = rng.below(100) as u32;
        let name = format!("key-{key}").into_bytes();
        let request = if dice < spec.get_pct {
            Request::Get(name)
        } else if dice < spec.get_pct + spec.delete_pct {
            Request::Delete(name)
        } else {
            Request::Put(name, format!("v{client}-{n}").into_bytes())
        };
        let write = request.is_write();
        let down = spec.outage.filter(|o| {
            let at = (n * 100 / spec.ops.max(1)) as u32;
            key.is_multiple_of(o.keys_every.max(1)) && (o.from_pct..o.to_pct).contains(&at)
        });
        let (unknown, takes_effect) = match down {
            Some(o) => (true, write && rng.below(100) < u64::from(o.effect_pct)),
            None => {
                let unknown = write && rng.below(write_pct) < u64::from(spec.unknown_pct);
                (unknown, !unknown || rng.below(2) == 0)
            }
        };
        planned.push(Planned {
            client,
            key,
            request,
            unknown,
            takes_effect,
            invoke,
            response,
            point,
        });
    }
    // Apply the operations in effect order to an atomic map.
    let mut order: Vec<usize> = (0..planned.len()).collect();
    order.sort_by_key(|&i| (planned[i].point, i));
    let mut map: HashMap<usize, Vec<u8>> = HashMap::new();
    let mut rets: Vec<Ret> = vec![Err(Failure::Unknown); planned.len()];
    for i in order {
        let p = &planned[i];
        if !p.takes_effect {
            continue;
        }
        let ret = match &p.request {
            Request::Put(_, v) => Response::Put(map.insert(p.key, v.clone()).is_some()),
            Request::Delete(_) => Response::Delete(map.remove(&p.key).is_some()),
            _ => Response::Get(map.get(&p.key).cloned()),
        };
        if !p.unknown {
            rets[i] = Ok(ret);
        }
    }
    // Distinct timestamps, in the same order as the simulated ones.
    let mut stamps: Vec<(u64, usize, bool)> = Vec::with_capacity(2 * planned.len());
    for (i, p) in planned.iter().enumerate() {
        stamps.push((p.invoke, i, false));
        stamps.push((p.response, i, true));
    }
    stamps.sort_unstable();
    let mut invoke = vec![0; planned.len()];
    let mut response = vec![0; planned.len()];
    for (t, &(_, i, is_response)) in stamps.iter().enumerate() {
        if is_response {
            response[i] = t as u64;
        } else {
            invoke[i] = t as u64;
        }
    }
    let mut events: Vec<Event> = planned
        .into_iter()
        .zip(rets)
        .enumerate()
        .map(|(i, (p, ret))| Event {
            client: p.client,
            request: p.request,
            ret,
            invoke: invoke[i],
            response: response[i],
        })
        .collect();
    events.sort_by_key(|e| e.invoke);
    events
}

/// A violation [`plant_violation`] can plant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Plant {
    /// A GET returns the value of a PUT that a later, completed PUT had
    /// overwritten before the GET began.
    StaleRead,
    /// A GET returns the value of a PUT of unknown outcome that was invoked
    /// only after the GET had returned.
    FutureRead,
}

/// Edits one GET of `events` (a history from [`linearizable`], whose written
/// values are unique) so that the history is not linearizable, choosing
/// among candidates in the second half of the history with `seed`. Returns
/// the index of the edited event, or `None` if the history offers no place
/// for this kind of violation.
pub fn plant_violation(events: &mut [Event], plant: Plant, seed: u64) -> Option<usize> {
    let mut rng = Rng::new(seed ^ 0x0070_6c61_6e74);
    let mut by_key: HashMap<&[u8], Vec<usize>> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        by_key.entry(e.key()).or_default().push(i);
    }
    let mut choices: Vec<(usize, Vec<u8>)> = Vec::new();
    for idx in by_key.values() {
        let known_put = |i: usize| {
            matches!(
                (&events[i].request, &events[i].ret),
                (Request::Put(..), Ok(Response::Put(_)))
            )
        };
        for &g in idx {
            let e = &events[g];
            if !matches!(e.ret, Ok(Response::Get(_))) || g < events.len() / 2 {
                continue;
            }
            match plant {
                Plant::StaleRead => {
                    // The last known PUT that returned before the GET began,
                    // and a known PUT that returned before that one began.
                    let Some(&b) = idx
                        .iter()
                        .filter(|&&j| known_put(j) && events[j].response < e.invoke)
                        .max_by_key(|&&j| events[j].response)
                    else {
                        continue;
                    };
                    let a = idx
                        .iter()
                        .find(|&&j| known_put(j) && events[j].response < events[b].invoke);
                    if let Some(&a) = a {
                        if let Request::Put(_, v) = &events[a].request {
                            choices.push((g, v.clone()));
                        }
                    }
                }
                Plant::FutureRead => {
                    let u = idx.iter().find(|&&j| {
                        matches!(events[j].request, Request::Put(..))
                            && events[j].ret == Err(Failure::Unknown)
                            && events[j].invoke > e.response
                    });
                    if let Some(&u) = u {
                        if let Request::Put(_, v) = &events[u].request {
                            choices.push((g, v.clone()));
                        }
                    }
                }
            }
        }
    }
    if choices.is_empty() {
        return None;
    }
    choices.sort();
    let (g, value) = choices.swap_remove(rng.below(choices.len() as u64) as usize);
    events[g].ret = Ok(Response::Get(Some(value)));
    Some(g)
}
